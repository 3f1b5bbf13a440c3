/* wreq: the request window. A request (table open, push, pull, whole-table scan)
 * takes one of `window` slots from when it is made until it ends, answered,
 * failed or timed out, and ZeroMQ has let go of any values it lent (vbuf_drain).
 * Internal to libpskv (see wstate.h).
 *
 * OWNS: w->reqs[] (every slot and what it holds: parts, runs, gathered rows, its
 *   buffers' references), the held views (w->views[], nviews, view_spare:
 *   pskv_pull_view's values from completion to pskv_view_release), inflight,
 *   next_ts (timestamps), the record of failed requests pskv_wait reports
 *   (failed[], nfailed, forgotten_ts), values_clock.
 * THREADS: the calling thread only.
 * NEVER: never touches a socket itself. Blocks only where it says so
 *   (wreq_new while the window is full; wreq_fail while ZeroMQ holds lent values),
 *   and then by running the pump (wpump), bounded by a deadline. */
#ifndef PSKV_WREQ_H
#define PSKV_WREQ_H

#include "wstate.h"

/* A new request of `nparts` zeroed parts in a free slot, stamped with the next
 * timestamp and the worker's clock, its deadline request_timeout_ms away. Waits
 * (pumping) while the window is full; NULL with last_error set when it stays full
 * for request_timeout_ms (-PSKV_ETIMEDOUT) or on -PSKV_ENOMEM. */
WINTERNAL req *wreq_new(pskv_worker *w, enum req_type type, int table, int nparts);

/* wreq_new with one part per live server (parts[i].server set); NULL with the
 * error in *err (and last_error) when no server lives or the window stays full. */
WINTERNAL req *wreq_new_live(pskv_worker *w, enum req_type type, int table, int *err);

/* Frees what slot r holds (parts, their own buffers, runs, rows; drops its buffer
 * references) and zeroes it: REQ_FREE. Counts nothing; see wreq_retire. */
WINTERNAL void wreq_release(req *r);

/* Ends r: its parts are closed (late replies dropped). Frees the slot, unless
 * ZeroMQ still holds the caller's lent values: then r stays, draining, until
 * vbuf_drain sees them released, so pskv_wait cannot return while ZeroMQ may
 * still read them. */
WINTERNAL void wreq_retire(pskv_worker *w, req *r);

/* Ends r, answered: a pull's values clock is kept, a failure (r->err) recorded
 * for pskv_wait and logged, then wreq_retire. */
WINTERNAL void wreq_finish(pskv_worker *w, req *r);

/* Abandons r, which could not be sent whole: records err for it, retires it and
 * waits (pumping, at most 2 * LENT_RESET_MS + 1 s) for ZeroMQ to let go of any
 * lent values, which the caller may reuse once this returns. Returns err. */
WINTERNAL int64_t wreq_fail(pskv_worker *w, req *r, int err);

/* The error recorded for request ts, or 0 if none is remembered. */
WINTERNAL int wreq_failure_of(const pskv_worker *w, int64_t ts);

/* Gives an unsent push buffer's memory back (pskv_push_buffer_drop, a send
 * refused before a request held it, pskv_worker_close): its region to its
 * segment, or its own memory freed; b is a free entry after. */
WINTERNAL void wreq_pbuf_free(wpbuf *b);

/* The held view (pskv_pull_view, completed) with timestamp ts, or NULL. */
WINTERNAL wview_held *wreq_view(pskv_worker *w, int64_t ts);

/* A copy buffer for a view of `floats` values: the spare a released view left,
 * or a new one (NULL when out of memory). */
WINTERNAL float *wreq_view_buffer(pskv_worker *w, size_t floats);

/* Called once a pskv_pushpull request's parts are planned (at submit, and again
 * when a part is planned anew): into the caller's array (out) with several parts,
 * or with replicas (a part's values may come before its chain's answer), out
 * becomes a buffer of the library's (from wreq_view_buffer) and the caller's array
 * r->pp_dst, written by wreq_finish once every part has answered and none refused
 * (a refused part leaves it untouched; one part without replicas writes it
 * directly: its values come only once its push was applied, and nothing can fail
 * after). Does nothing otherwise (any other request, a view, one staged already).
 * Returns 0 or -PSKV_ENOMEM. */
WINTERNAL int wreq_pp_stage(pskv_worker *w, req *r);

/* Gives held view v's memory back: its buffer kept as the spare or freed, its region to the next
 * pulls (wshm_release: the server answered it, so it is reused). */
WINTERNAL void wreq_view_release(pskv_worker *w, wview_held *v);

/* The request in flight (or draining) with timestamp ts, or NULL. On every reply:
 * inline. */
static inline req *wreq_find(pskv_worker *w, int64_t ts)
{
    for (int i = 0; i < w->window; i++)
        if (w->reqs[i].type != REQ_FREE && w->reqs[i].ts == ts)
            return &w->reqs[i];
    return NULL;
}

#endif
