/* The scheduler's node events: membership.c (and drain.c, earlystop.c for the
 * events they own; group.c a group's end) publish what happened to a node; the policies (checkpoint.c,
 * drain.c, earlystop.c) subscribe to what they act on, so the publisher names no
 * policy. Each policy subscribes in its *_hooks() call, which scheduler_main.c
 * makes once before the event loop, checkpoint.c first and sched_metrics.c last:
 * where two subscribers take the same event they run in that order.
 *
 * Order, where it matters (each is the order the hard-wired calls had):
 * - SCHED_EV_COMPLETE comes before the first placement (a resumed job's chains
 *   are adopted from it) and before the first view.
 * - SCHED_EV_DIED for a server of a running job comes after its partitions were
 *   re-placed and the new view went out, and before the failover is logged (with
 *   the time the failover took, its subscribers' included: checkpoint.c's, then
 *   sched_metrics.c's count); for a worker of a running job, after the view that takes it out of the
 *   clock set; for any other node, after the barriers and the job's end were
 *   checked again.
 * - SCHED_EV_HEARD comes before membership renews anything; for a drained server
 *   that was let go membership then ignores the heartbeat.
 * - SCHED_EV_LEFT comes after the view that shows the drained server left.
 *
 * OWNS   the subscriber lists (fixed room, EVENTS_MAX_SUBS per kind).
 * THREAD the scheduler's one thread; a subscriber runs inside the publisher's call.
 * NEVER  copies or keeps an event past publishing, or allocates. */
#ifndef PSKV_SCHED_EVENTS_H
#define PSKV_SCHED_EVENTS_H

#include <stdint.h>

#include "wire.h"

struct memb_node; /* membership.h's; named only, so that events sits below membership */

typedef enum sched_event {
    SCHED_EV_REGISTERING, /* membership.c: a REGISTER passed the checks every role passes
                             (msg; node NULL). A subscriber that refuses it (sched_refuse)
                             returns non-zero: the node is not registered */
    SCHED_EV_JOINED,      /* membership.c: node registered and acknowledged (a first
                             registration, a rank taken over, a join into the running job,
                             the evaluator), before any view that takes it in */
    SCHED_EV_COMPLETE,    /* membership.c: every expected node registered (node NULL);
                             before the first placement and the first view */
    SCHED_EV_HEARD,       /* membership.c: a heartbeat from node (not one whose place
                             another node took) */
    SCHED_EV_DIED,        /* membership.c: node declared dead (see the order above) */
    SCHED_EV_LEFT,        /* drain.c: the drained server node was let go (DRAIN_LEFT) */
    SCHED_EV_EVALUATED,   /* earlystop.c: node reported an evaluation: metric (the one the
                             best checkpoint follows), value, clock; the unnamed group's
                             evaluator only (a service's named groups publish none) */
    SCHED_EV_GROUP_ENDED, /* group.c: a service's worker group ended and was forgotten
                             (node NULL): group its name, ns the namespace a worker of it
                             asked to drop at its end (--drop-namespace; NULL: none) */
    SCHED_EV_COUNT
} sched_event;

/* One event, valid only during its publishing. Fields not named by the kind are
 * NULL or 0. */
typedef struct sched_ev {
    sched_event kind;
    struct memb_node *node;
    wire_msg *msg;
    const char *metric;
    double value;
    int64_t clock;
    const char *group, *ns;
} sched_ev;

/* A subscriber: returns 0 to let the next one run; non-zero stops the event
 * there (only SCHED_EV_REGISTERING gives that a meaning: refused). */
typedef int (*sched_ev_fn)(void *ctx, const sched_ev *ev);

#define EVENTS_MAX_SUBS 8 /* subscribers per kind */

/* Subscribes fn (with ctx, the caller's) to events of `kind`, after those already
 * subscribed. Returns 0, -PSKV_EINVAL for a kind out of range or a NULL fn, or
 * -PSKV_ENOMEM when the kind has EVENTS_MAX_SUBS subscribers already. */
int events_subscribe(sched_event kind, sched_ev_fn fn, void *ctx);

/* Calls ev's kind's subscribers in subscription order. Returns 0, or the first
 * non-zero a subscriber returned (the later ones are not called). */
int events_publish(const sched_ev *ev);

/* events_publish of an event of `kind` about node n (NULL when the kind has none). */
int events_node(sched_event kind, struct memb_node *n);

/* Forgets every subscriber (tests, and the scheduler's exit). */
void events_reset(void);

#endif
