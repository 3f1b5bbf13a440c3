/* The membership client every node runs against the scheduler: register (with
 * re-sends and back-off until --connect-timeout), learn the node id, rank and job
 * id, wait for the cluster view, heartbeat. One DEALER socket, owned by the
 * thread that calls these functions.
 *
 * OWNS   the member's DEALER socket and the latest view (m->view and the message
 *        it came in). Process-wide it keeps two pointers set by the daemon: the
 *        stop flag and the checkpoint files listed in REGISTER (the caller's memory).
 * THREAD the thread that opened the member, for every call on it; a heartbeat
 *        thread uses only member_hb_socket and member_hb_meta, with a socket of its
 *        own.
 * NEVER  decides for the node (it reports what the scheduler said); blocks only in
 *        member_open and member_wait_view, up to their time-outs or the stop flag
 *        (member_recv never waits); never sends heartbeats once the view is there
 *        (the node's heartbeat thread does). */
#ifndef PSKV_MEMBER_H
#define PSKV_MEMBER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pskv.pb-c.h"
#include "wire.h"

struct secure;

typedef struct member {
    void *sock;             /* DEALER connected to the scheduler */
    const struct secure *sec; /* the node's keys (CURVE toward the scheduler), or NULL */
    char sched[300];        /* "HOST:PORT" as given */
    uint32_t node_id;
    int rank;
    uint64_t job_id;
    uint64_t epoch;
    int heartbeat_ms;
    Pskv__View *view;       /* latest view (owned), NULL before the first */
    Pskv__Meta *view_meta;  /* the message that carried it (owned) */
    int64_t next_hb_ms;
    int64_t hb_clock;     /* sent in heartbeats: a worker's clock */
    uint64_t barriers_done; /* barriers the job had passed when this node registered */
    int resumed;          /* a worker of a resumed job: progress[] is where it was */
    int64_t progress[3];  /* epoch, step, data position */
} member;

/* Checkpoint files a server lists in its REGISTER ("JOB:SEQ:NODE"; the strings
 * stay the caller's). */
void member_set_checkpoints(char **list, size_t n);

/* The worker group (NULL or "" = unnamed) and its size W (0 = not given) a
 * worker's REGISTER names; the string stays the caller's until member_open returns. */
void member_set_group(const char *group, uint32_t size);

/* The namespace a worker's tables live in (NULL: not named, an evaluator), named
 * in its REGISTER (table_ns), copied. */
void member_set_namespace(const char *ns);

/* on: the worker's REGISTER asks the scheduler to drop its namespace when its
 * group ends (PSKV_DROP_NAMESPACE, which pskv-worker --drop-namespace sets; read by
 * pskv_worker_open). */
void member_set_drop_namespace(int on);

/* Whether a worker's REGISTER asks its group to resume its namespace from the
 * newest checkpoint holding it (a service's group: pskv-worker --resume). */
void member_set_resume(int on);

/* Connects to `scheduler` ("HOST:PORT") and registers as `role` with advertised
 * host:port. rank_wish < 0 lets the scheduler choose. job_id 0 accepts the
 * scheduler's. Waits at most connect_timeout_s for the acknowledgement.
 * Returns 0, -PSKV_ETIMEDOUT (unreachable), -PSKV_EREFUSED (refused; why says
 * by what), or another negated error; on failure m holds nothing. */
int member_open(member *m, void *ctx, const struct secure *sec, const char *scheduler,
                Pskv__Role role, int rank_wish,
                const char *host, int port, uint64_t job_id, double connect_timeout_s,
                int64_t max_message, char *why, size_t whylen);

/* A daemon's "stop now" flag (set by its signal handler, on any thread: an
 * atomic): member_open and member_wait_view give up with -PSKV_ECLOSED once it is
 * non-zero. */
void member_set_stop_flag(const atomic_int *flag);

/* Whether that flag is set: the process is stopping on request (a signal), so
 * what it still waits for is bounded short (pskv_worker_close). */
int member_stop_requested(void);

/* Waits up to timeout_s for the first view. Returns 0 or a negated error. */
int member_wait_view(member *m, double timeout_s, char *why, size_t whylen);

/* Receives one message from the scheduler (non-blocking). A VIEW is applied to
 * m and leaves msg->meta NULL. Returns 0 with msg filled (caller closes it),
 * -PSKV_ETIMEDOUT when none is waiting, or another error (message dropped and
 * logged). */
int member_recv(member *m, wire_msg *msg);

/* For a node's heartbeat thread (the member's socket belongs to another thread):
 * a DEALER of its own connected to `scheduler` ("HOST:PORT"), NULL (logged) on
 * failure; and a HEARTBEAT header naming job and node, for it to complete. */
void *member_hb_socket(void *ctx, const struct secure *sec, const char *scheduler);
void member_hb_meta(Pskv__Meta *hb, uint64_t job, uint32_t node);

/* Sends meta (its header filled by member_meta) to the scheduler. Returns 0 or
 * -PSKV_ENET. */
int member_send(member *m, Pskv__Meta *meta);

/* Fills the common header fields of a message from this node. */
void member_meta(const member *m, Pskv__Meta *meta, Pskv__MsgType type);

/* Closes the socket and frees the view; NULL-safe. */
void member_close(member *m);

/* The node with id `id` in view v, or NULL: a node the view does not list is out of
 * the job (the scheduler forgot it 30 s after it left for good). */
const Pskv__Node *member_view_node(const Pskv__View *v, uint32_t id);

/* 1 when the view shows node n out of the job for good: "dead" (declared dead) or
 * "left" (a drained server that exited); it serves nothing more. */
int member_node_gone(const Pskv__Node *n);

#endif
