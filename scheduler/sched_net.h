/* How every scheduler module talks to nodes: the Meta stamp and the sends on the
 * scheduler's one ROUTER socket (scheduler_main.c opens it and hands it over with
 * sched_net_use before the event loop), and the scheduler's keys.
 *
 * OWNS   nothing but a borrowed pointer to the socket; the keys (sched_sec) are
 *        filled by scheduler_main.c.
 * THREAD the scheduler's one thread (its event loop); the calls below may only be
 *        made from it.
 * NEVER  decides anything about nodes; never waits on a node: a send to a full
 *        peer queue waits at most the socket's 5 s send time-out (net.h), then
 *        fails (sched_send logs it). */
#ifndef PSKV_SCHED_NET_H
#define PSKV_SCHED_NET_H

#include <zmq.h>

#include "membership.h"
#include "secure.h"
#include "wire.h"

/* The scheduler's keys and ZAP handler (secure.h); keyed == 0 without --keys. */
extern secure sched_sec;

/* The ROUTER socket every send below goes out on (the caller keeps it, open
 * until the last send). */
void sched_net_use(void *router);

/* A fresh Meta of `type` stamped with the job id, the current view epoch and the
 * scheduler's sender id 0; the caller fills the rest. */
void sched_meta(Pskv__Meta *m, Pskv__MsgType type);

/* Sends m to node n at the routing id it registered with. Returns 0 or
 * -PSKV_ENET (logged with the node's address). */
int sched_send(memb_node *n, const Pskv__Meta *m);

/* Sends m to routing id rid (the caller keeps rid). Returns 0 or -PSKV_ENET. */
int sched_reply(zmq_msg_t *rid, const Pskv__Meta *m);

/* A request answered later (a checkpoint in progress, a namespace drop): who asked,
 * kept past the message (its routing id copied). */
typedef struct sched_asker {
    unsigned char rid[256];
    size_t ridlen;
    uint64_t request_id;
} sched_asker;

/* a = msg's sender and request id. */
void sched_asker_of(sched_asker *a, const wire_msg *msg);

/* Sends m to a, its request_id set to a's. Returns 0 or -PSKV_ENET. */
int sched_answer(const sched_asker *a, Pskv__Meta *m);

/* Refuses msg: logs who sent which type and why, and answers ERROR with `code`
 * and `reason`. */
void sched_refuse(wire_msg *msg, int code, const char *reason);

#endif
