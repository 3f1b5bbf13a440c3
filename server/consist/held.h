/* Requests the consistency engine answers later, and the answers: a pull parked
 * until its clock allows, a bsp push held until its clock closes (and, with
 * replicas, until the close is on every tail), a push refused.
 *
 * A held request keeps copies of what its answer needs (routing id, request and
 * dedupe ids, the clock and view it was planned on, the rows' first key and
 * count), never the received frames, which go back to ZeroMQ when the message
 * is handled. Keys or runs of a parked pull are copied by the caller into
 * keys/segs, which the caller frees.
 *
 * OWNS nothing: a held is a plain value the caller stores where it likes; an
 * answer goes out on the ROUTER in held_out.
 * THREAD: the server's loop thread only (the ROUTER is that thread's).
 * NEVER blocks (a reply that cannot be queued is logged and lost, like any reply
 * to a worker that went away); allocates only the frames of a reply. */
#ifndef PSKV_HELD_H
#define PSKV_HELD_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "member.h"
#include "store/table.h"
#include "vclock.h"
#include "wire.h"

typedef struct held {    /* a request answered later */
    unsigned char rid[256];
    size_t ridlen;
    uint64_t request_id, table_id;
    uint64_t origin_id, floor; /* pushes: the dedupe id and the worker's floor */
    uint32_t sender;
    int rank;
    int64_t clock;
    uint64_t epoch;      /* the view it was planned on */
    table *t;
    uint64_t first, n;
    uint64_t *keys;      /* pulls: a copy of the keys, NULL for a dense run */
    uint64_t *segs;      /* pulls: a copy of the dense runs (pairs), or NULL */
    size_t nsegs;
    uint64_t shm_gen, shm_off, shm_len; /* pulls: the reply's region in the worker's
                                           segment (sshm.h); shm_len 0: none */
    int ack_follows;     /* a pskv_pushpull's pull whose push gets a PUSH_ACK of its own:
                            the reply says so (pull_after), the worker waits for both */
    int at_head;         /* a pskv_pushpull's pull: served by its rows' head */
} held;

/* Where answers go: the ROUTER workers dial, the member that stamps headers, and
 * the clock that counts refusals of pushes to be sent again. All borrowed. */
typedef struct held_out {
    void *router;
    member *mb;
    vclock *clocks;
} held_out;

/* Fills h from msg for table t (NULL for a refusal) and worker rank (-1: none):
 * ids, clock, epoch, first key and row count; keys and segs NULL. */
void held_take(held *h, wire_msg *msg, table *t, int rank);

/* A reply header of `type` for h, carrying `clock` (the values' clock). */
void held_meta(const held_out *o, Pskv__Meta *m, Pskv__MsgType type, const held *h,
               int64_t clock);

/* Sends m (and vals, whose ownership passes to ZeroMQ; NULL: none) to h's sender. */
void held_send(const held_out *o, const held *h, Pskv__Meta *m, zmq_msg_t *vals);

/* PUSH_ACK (code 0) or ERROR (code > 0, with why) for h; `refused` > 0 is
 * stamped on the ERROR (a push to be sent again: vclock_refusal's count). */
void held_answer(const held_out *o, const held *h, int code, const char *why, int64_t clock,
                 uint64_t refused);

/* The answer to a held push: a refusal its worker will send it again after
 * (PSKV_ESTALE, PSKV_ENOTREADY) is counted in o->clocks and stamped on it. */
void held_answer_push(const held_out *o, const held *h, int code, const char *why,
                      int64_t clock);

/* Refuses msg now: logs it with its sender and why, and answers as
 * held_answer_push. */
void held_refuse(const held_out *o, wire_msg *msg, int code, const char *why, int64_t clock);

#endif
