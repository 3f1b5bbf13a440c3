/* wpump: the calling thread's event loop. One pass polls the scheduler socket and
 * every data socket, hands the scheduler's messages to wview, applies each server
 * reply to its request (a pull's values copied once into the caller's array), and
 * then runs the timers: parts due again (wsend_resend_due), the clock hold
 * (wview_catch_up), draining pushes (vbuf_drain) and request deadlines.
 * Every library call that waits does so by pumping.
 * Internal to libpskv (see wstate.h).
 *
 * OWNS: no state of its own; it moves parts to answered/done or due again
 *   (retry_at, nretry), sets r->err, a server's refusal count (srv[].refused,
 *   then wview_hold_clocks), the worker's clock when a reply carries a newer one,
 *   late_drops, and the rows a scan gathers (r->scan).
 * THREADS: the calling thread only, which owns every data socket and the
 *   scheduler socket; once the handle is open, this is where they are read.
 * NEVER: never sleeps past timeout_ms (nor past RETRY_DELAY_MS while a part waits
 *   to be re-sent, nor 1 ms while a push drains); never trusts a reply: one that
 *   matches no part in flight is dropped, a malformed one fails its request. */
#ifndef PSKV_WPUMP_H
#define PSKV_WPUMP_H

#include "wstate.h"

/* One pass: processes whatever arrives within timeout_ms (0 = only what is
 * waiting), looking first without sleeping for up to spin_us (a reply to a small
 * request usually comes within tens of microseconds), then runs the timers. */
WINTERNAL void wpump_spin(pskv_worker *w, long timeout_ms, int spin_us);

/* wpump_spin without spinning. */
static inline void wpump(pskv_worker *w, long timeout_ms)
{
    wpump_spin(w, timeout_ms, 0);
}

#endif
