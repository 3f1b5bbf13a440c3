/* wsend: parts onto the wire, on the data sockets (one DEALER per server): table
 * opens and scans, push and pull parts (keys and values zero-copy from their
 * vbuf), clocks; and parts planned again on the latest view and re-sent, when
 * their server died, refused them for now, or stayed silent on an async table.
 * Internal to libpskv (see wstate.h).
 *
 * OWNS: nothing of its own; it stamps parts as sent (sent_ms, epoch), adds the
 *   re-planned parts of a request (each with its own vbuf), and counts parts due
 *   for another try (nretry) and the failover it logs (failover_node, _ms).
 * THREADS: the calling thread only: it owns every data socket. ZeroMQ's I/O
 *   thread later drops the frames' vbuf references (vbuf_unref).
 * NEVER: never copies values on a first send (frames point into the request's
 *   vbuf or the caller's lent array; a re-planned part copies its rows once, a
 *   refused part sent again in place copies nothing), never
 *   waits for an answer. A send blocks only as ZeroMQ's send does. */
#ifndef PSKV_WSEND_H
#define PSKV_WSEND_H

#include "wstate.h"

/* Sends part pi of r with header m (request id set here) and optional frames,
 * whose ownership passes to ZeroMQ. For table opens and scans. Returns 0 or
 * -PSKV_ENET with last_error set. */
WINTERNAL int wsend_part(pskv_worker *w, req *r, int pi, Pskv__Meta *m, zmq_msg_t *keys,
                         zmq_msg_t *vals);

/* Sends part pi of r (a push or pull) to its server, carrying r's clock; `resend`
 * marks a re-sent part; floor: wsend_inflight_floor(w), computed once for all
 * the parts sent together. Returns 0 or -PSKV_ENET with last_error set. */
WINTERNAL int wsend_data_part(pskv_worker *w, req *r, int pi, int resend, uint64_t floor);

/* The keys of gathered part p of r (NULL for a run part), as they were sent. */
WINTERNAL const uint64_t *wsend_part_keys(const req *r, const part *p);

/* Smallest request id still in flight (a draining request is answered and never
 * sent again): the worker never re-sends one below it, so servers may forget
 * those (a push's `floor`). */
WINTERNAL uint64_t wsend_inflight_floor(const pskv_worker *w);

/* Tells the live servers whose `catchup` flag equals `catchup` (0: the usual
 * ones; 1: those owed the clock since a placement change) that this worker
 * finished clock `clock`, behind the pushes already sent to each; with
 * except_rode, not those it reached on a push part (srv clock_rode: pskv_pushpull).
 * clock < 0 sends nothing. Returns 0 or -PSKV_ENET with last_error set. */
WINTERNAL int wsend_clock(pskv_worker *w, int64_t clock, int catchup, int except_rode);

/* While an ssp pull (or pskv_pushpull) waits and no clock is held back (wview_catch_up), sends this
 * worker's last finished clock again to every live server once CLOCK_AGAIN_MS
 * have passed since the last: a worker parked in a pull sends no clock of its
 * own, so one lost on its way down a chain would leave every pull waiting. */
WINTERNAL void wsend_clock_again(pskv_worker *w, int64_t now);

/* Plans again on the latest view, and re-sends, every unanswered part of a push
 * or pull whose server died (view_changed), that is due for another try, or (not
 * view_changed) that went unanswered retry_ms on an async table. A request that
 * cannot be re-sent fails (wreq_finish). */
WINTERNAL void wsend_resend_due(pskv_worker *w, int view_changed);

#endif
