/* wview: the cluster view as this worker sees it, the scheduler's answers, the
 * hold on clocks after a placement change, and the heartbeat thread.
 * Internal to libpskv (see wstate.h).
 *
 * OWNS: w->srv (one DEALER per server, dialled the first time a view lists it;
 *   only vbuf's srv_reset replaces one, only pskv_worker_close closes them),
 *   nservers, nworkers, nparts, R, head[] and tail[] (each partition's head and
 *   tail), the per-view scratch (items, count, pindex), the clock hold
 *   (srv[].catchup, catchup_ts, catchup_epoch), and what the scheduler answers on
 *   w->mb.sock (barrier_done, finish_acked, ckpt_done, ckpt_err), and the heartbeat
 *   thread (hb_thread, hb_stop, hb_started, hb_job, hb_node, hb_period_ms).
 * THREADS: every call here is made by the calling thread (the handle's user),
 *   which owns every data socket and the scheduler socket. The heartbeat thread
 *   that wview_heartbeat_start runs touches nothing but its own socket: it reads
 *   the atomics w->clock and w->progress[] and what is written before it starts
 *   (hb_job, hb_node, hb_period_ms: copies of mb's, which the calling thread
 *   rewrites with each view; ctx, sec, sched), and writes no field.
 * NEVER: never blocks (wview_on_scheduler reads only what is already waiting),
 *   but for wview_heartbeat_stop's join at close. Never fails a request itself:
 *   parts a new view strands are handed to wsend_resend_due. */
#ifndef PSKV_WVIEW_H
#define PSKV_WVIEW_H

#include "wstate.h"

/* Applies the latest view in w->mb.view: dials servers not seen before, marks
 * each alive or dead, sets every partition's head and tail, and holds clocks when
 * a head or tail moved. Called at open and on every new view. Returns 0, or
 * -PSKV_EPROTO (a malformed view), -PSKV_ENOMEM, -PSKV_ENET, with last_error set. */
WINTERNAL int wview_apply(pskv_worker *w, int64_t max_message);

/* Every server's next clock waits until each push sent so far is acknowledged
 * (wview_catch_up): after a placement change, or a push refused to be sent again. */
WINTERNAL void wview_hold_clocks(pskv_worker *w);

/* Handles everything waiting on the scheduler socket: a new view (applied, then
 * parts sent to dead servers go to the new owners), barrier, finish and
 * checkpoint answers, errors. Never blocks. */
WINTERNAL void wview_on_scheduler(pskv_worker *w);

/* While clocks are held (catchup_ts), sends this worker's clock to the servers
 * owed it once every push sent before the hold is acknowledged (bsp: answered and
 * none waiting to be re-sent), and lifts the hold. A send error is logged. */
WINTERNAL void wview_catch_up(pskv_worker *w);

/* Starts the heartbeat thread (sets hb_started); if it cannot start, the worker
 * runs without heartbeats, as before any view. Call once, after the first view. */
WINTERNAL void wview_heartbeat_start(pskv_worker *w);

/* Stops and joins the heartbeat thread, if one started: blocks until it notices
 * (it looks every 10 ms while it sleeps between heartbeats). */
WINTERNAL void wview_heartbeat_stop(pskv_worker *w);

#endif
