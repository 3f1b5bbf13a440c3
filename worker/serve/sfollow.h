/* sfollow: pskv-serve following a running namespace (--scheduler HOST:PORT
 * --namespace NS). The protocol is in server/follow.h and docs/protocol.md
 * "Following a namespace"; this is the reader's side.
 *
 * Design: one loop on the calling thread, one poll over a DEALER to the
 * scheduler and one DEALER per server:
 *   - every second a STATUS gives the view: a server new to it is dialled and
 *     asked for a full copy (FOLLOW follow_full); one dead or gone is closed and
 *     its dense parts dropped;
 *   - every second each server's FOLLOW is renewed (the server drops a reader
 *     silent for 5 s);
 *   - FOLLOW_DATA is merged into snapshots (smerge.h); a gap in a server's
 *     follow_seq asks it for a full copy again;
 *   - dense tables: every --sync-ms the reader asks every server for its parts at
 *     the clock boundary T = the highest clock seen + a lead, so that each server
 *     answers at the same boundary; parts that disagree double the lead.
 * With keys (cfg->sec keyed) every socket is a CURVE client: to the scheduler
 * with scheduler.pub, to each server with the key the view gives it. The servers
 * take the key as a reader's (the `reader NS` binding of their authorized file):
 * FOLLOW of a namespace the key is not bound to is refused PSKV_EACCES naming
 * the namespace, and the reader gives up at once (exit 1); it never pushes.
 * When the servers or the scheduler are gone (the job ended, a failure) or out
 * of reach the last versions stay served and their staleness grows. A link cut
 * leaves connections half-open: ZeroMQ's heartbeat closes one silent for 3 s and
 * dials again every second, so the link back is used at once; a server takes the
 * new connection for a new reader and sends a full copy, then deltas.
 *
 * OWNS its ZeroMQ context and sockets. THREAD: the caller's, until stop is set.
 * NEVER blocks longer than one poll (50 ms). */
#ifndef PSKV_SFOLLOW_H
#define PSKV_SFOLLOW_H

#include <stdatomic.h>
#include <stdint.h>

#include "secure.h"
#include "snap.h"

typedef struct sfollow_cfg {
    const char *scheduler; /* HOST:PORT */
    const char *ns;        /* the namespace ("" = the unnamed one) */
    int sync_ms;           /* how often servers send changed rows */
    int wait_s;            /* give up when nothing was followed within this long */
    const secure *sec;     /* keys (borrowed): CURVE toward the scheduler and servers */
} sfollow_cfg;

/* Follows cfg->ns into st until *stop is set. Returns 0 after a stop, or 1 after
 * logging why it could not start (no scheduler, a namespace no server has, the
 * servers refusing) within cfg->wait_s, or at once when a server refused the
 * key access to the namespace (PSKV_EACCES) before any row came. */
int sfollow_run(const sfollow_cfg *cfg, snapstore *st, atomic_int *stop);

#endif
