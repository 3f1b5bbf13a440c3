/* The planned removal of a server (pskvctl drain): the scheduler's side.
 *
 * DRAIN names a live server. Refused (ERROR, with the reason) unless the job runs,
 * the node is a live server not already drained, and the servers left after it
 * are at least one and at least R; refused PSKV_ENOTREADY (pskvctl asks again)
 * while some server does not yet hold the last placement change whole (a copy
 * still under way might come from the server to drain). Otherwise the server is marked draining
 * (DRAIN_HANDING): a new placement takes every partition from it and puts it on
 * the others (view.c), and a new view goes out; DRAIN_ACK answers at once with
 * the partitions it held. The servers copy as for a join or a death: a new chain
 * member answers for a partition only once its copy (FILL) is whole, a drained
 * head hands its partition to a new head itself. The drained server stays up,
 * holding its copy, until every other live server reports (heartbeat
 * `whole_epoch`) that it holds the placement of the drain's view, or a later
 * one, whole. Then it is told to exit (STOP with `drained`) and recorded as left
 * (DRAIN_LEFT): not dead, no failover; a new view shows it "left"; it is
 * forgotten like a dead server (MEMB_FORGET_MS). pskvctl waits for that state.
 *
 * OWNS the drain fields of memb_node (membership.h) and their life.
 * THREAD the scheduler's one thread.
 * NEVER places partitions itself (view.c does) nor waits but in its sends. A
 * drained server that dies before it is let go is an ordinary death (failover). */
#ifndef PSKV_SCHED_DRAIN_H
#define PSKV_SCHED_DRAIN_H

#include "membership.h"
#include "wire.h"

/* DRAIN from pskvctl: starts draining server `drain_node` and answers DRAIN_ACK,
 * or refuses with the reason (not a live server, the last one, fewer than R left,
 * the job not running; copies of the last placement change under way). */
void drain_request(wire_msg *msg);

/* Subscribes to the node events (events.h): a heartbeat from a server already let
 * go is answered with STOP again. Once, before the event loop. */
void drain_hooks(void);

/* The first live server that stays (not drained) and does not yet hold the
 * placement of view `epoch` (or a later one) whole: copies (FILL) are under way
 * to it; NULL when every one does (nsdrop.c waits for that too). */
const memb_node *drain_first_behind(uint64_t epoch);

/* The periodic check: lets go (STOP, drained) every draining server whose
 * partitions the other live servers now hold whole. */
void drain_tick(void);

#endif
