/* Dropping a namespace: the scheduler's side (pskvctl drop NAMESPACE, and a
 * group's --drop-namespace when it ends; docs/protocol.md "Namespaces").
 *
 * A namespace outlives its groups until it is dropped. NS_DROP from pskvctl names
 * it; refused (ERROR, naming the namespace) while a live group uses it (named
 * after it, registered in it, or with a table of it: group_users), while it is
 * being dropped already, for the unnamed namespace of a job (its tables end with
 * the job), and before the servers are in. Accepted, the drop waits until no copy
 * is under way (a server's whole_epoch behind the last placement change: a FILL
 * in flight could carry a dropped table to a new chain member), then NS_DROP goes
 * to every live server; each frees the namespace's tables and answers NS_DROP_ACK
 * (tables, rows, bytes). Views go out behind it on the same connections, so a
 * server that joins later is copied nothing of it. Once every server sent to
 * answered or is no longer live, the scheduler forgets the namespace's status
 * lines and answers NS_DROP_ACK with the sums, or PSKV_ENOTFOUND when no server
 * held a table of it. A worker registering in a namespace being dropped is
 * refused. Bounded: NSDROP_TIMEOUT_MS from the request, ERROR PSKV_ETIMEDOUT
 * naming what it waited for.
 *
 * OWNS   the drops in progress (at most NSDROP_MAX), with their requester's
 *        routing id.
 * THREAD the scheduler's one thread.
 * NEVER  removes anything itself: the servers do; never blocks. */
#ifndef PSKV_SCHED_NSDROP_H
#define PSKV_SCHED_NSDROP_H

#include "wire.h"

#define NSDROP_MAX 16           /* drops in progress at once */
#define NSDROP_TIMEOUT_MS 20000 /* a drop not done by then is given up (ERROR) */

/* NS_DROP from pskvctl (a control key, under keys): starts dropping namespace
 * table_ns, answered when done, or refuses it now naming why. */
void nsdrop_request(wire_msg *msg);

/* NS_DROP_ACK (or ERROR) from a server for a drop in progress. */
void nsdrop_on_ack(wire_msg *msg);

/* The periodic step: sends a waiting drop once no copy is under way, finishes
 * those every live server answered, gives up those past their time. */
void nsdrop_tick(void);

/* Subscribes to REGISTER (a worker of a namespace being dropped is refused) and to
 * the groups' ends (--drop-namespace). Once, before the event loop. */
void nsdrop_hooks(void);

/* Forgets every drop in progress, unanswered (at exit). */
void nsdrop_reset(void);

#endif
