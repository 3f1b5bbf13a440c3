/* pskv-scheduler's daemon: its flags, the ROUTER socket every node talks to, the
 * event loop with its periodic tick, and the dispatch of each message to the
 * module that handles it (membership.c, view.c, checkpoint.c).
 *
 * OWNS   the configuration table, the ZeroMQ context and the ROUTER socket. No job
 *        state: that is membership.c's, view.c's and checkpoint.c's.
 * THREAD the process's one thread; every scheduler module runs inside its loop,
 *        and the calls below may only be made from it.
 * NEVER  decides anything about nodes, placement or checkpoints itself; never
 *        waits on a node: a send to a full peer queue waits at most the socket's
 *        5 s send time-out (net.h), then fails (sched_send logs it).
 *
 * The calls below are how the other modules talk to nodes. */
#ifndef PSKV_SCHED_MAIN_H
#define PSKV_SCHED_MAIN_H

#include <zmq.h>

#include "membership.h"
#include "secure.h"
#include "wire.h"

/* The scheduler's keys and ZAP handler (secure.h); keyed == 0 without --keys. */
extern secure sched_sec;

/* A fresh Meta of `type` stamped with the job id, the current view epoch and the
 * scheduler's sender id 0; the caller fills the rest. */
void sched_meta(Pskv__Meta *m, Pskv__MsgType type);

/* Sends m to node n at the routing id it registered with. Returns 0 or
 * -PSKV_ENET (logged with the node's address). */
int sched_send(memb_node *n, const Pskv__Meta *m);

/* Sends m to routing id rid (the caller keeps rid). Returns 0 or -PSKV_ENET. */
int sched_reply(zmq_msg_t *rid, const Pskv__Meta *m);

/* Refuses msg: logs who sent which type and why, and answers ERROR with `code`
 * and `reason`. */
void sched_refuse(wire_msg *msg, int code, const char *reason);

#endif
