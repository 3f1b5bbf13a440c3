/* wfilter: the worker's side of a table's filters (common/filter.h) on the frames
 * of a push or pull part: the key list replaced by its signature when the part's
 * server holds it (keycache), key and value frames compressed (lz4, zstd). Pull
 * replies are unpacked by wire.c. A server that does not hold a signed list
 * answers PSKV_EKEYMISS: wfilter_miss forgets it and the part goes again, keys
 * and all.
 *
 * The send path calls one entry per part, wfilter_encode, which runs the filters
 * in their one order (significant; else the keys, then a push's values: shared
 * memory, narrow, quant and repack, or vals) and counts what went. The steps stay
 * declared below, and exported from libpskv.so as they always were (its symbol
 * list must not change); nothing but wfilter_encode calls them.
 *
 * OWNS nothing beyond each table's keycache (tbl.kc) and kkt state (tbl.kkt,
 * wkkt.h), freed by wfilter_close.
 * THREAD: the caller's (the library's one thread), except wfilter_traffic, which the
 * heartbeat thread calls: the tables' counters reach it through w->traffic, under
 * w->traffic_mu (wfilter_publish). NEVER changes a value. */
#ifndef PSKV_WFILTER_H
#define PSKV_WFILTER_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "wire.h"
#include "wstate.h"

/* Sets up t's filters from `list` (pskv_table_opts.filters); l1: the table's
 * (kkt's band). Returns 0, or -PSKV_EINVAL / -PSKV_ENOMEM with w's last error set
 * naming the table. */
int wfilter_open(pskv_worker *w, tbl *t, const char *list, float l1);

/* Releases t's filter state; safe twice. */
void wfilter_close(tbl *t);

/* The frames of a part as the filters made them: f.kp and f.vp point at k and v,
 * or are NULL (no such frame). */
typedef struct wframes {
    zmq_msg_t k, v;
    zmq_msg_t *kp, *vp;
} wframes;

/* Encodes part pi of r (a push or a pull; resend: it went before) into the frames
 * to send, through t's filters in order (see above), stamping m (span, key_sig,
 * num_keys, wire, quant, shm ...) and counting t's traffic (wfilter_sent). keys,
 * vals: the part's data (keys NULL for a run, vals unused for a pull), in b when
 * b is set: a frame sent as it is lends b's bytes to ZeroMQ (vbuf_lend, common/wire.h:
 * a reference ZeroMQ drops through vbuf_unref). Returns 0 (f->kp, f->vp to send; the caller sends or closes them) or <0
 * with w's last error set and nothing left open. */
WINTERNAL int wfilter_encode(pskv_worker *w, req *r, int pi, int resend, Pskv__Meta *m,
                             const uint64_t *keys, const float *vals, vbuf *b, wframes *f);

/* The steps of wfilter_encode (call that instead). */

/* The key frame of a part of n keys to server node `node`: 2 when the keys go as
 * m->key_sig only (no frame), 1 when *out is a packed frame to send, 0 when the
 * caller sends the keys as they are (m->key_sig may be stamped), <0 on failure
 * (w's last error set). */
int wfilter_keys(pskv_worker *w, tbl *t, uint32_t node, Pskv__Meta *m, const uint64_t *keys,
                 uint64_t n, zmq_msg_t *out);

/* The value frame of a push: 1 when *out is a packed frame, 0 to send vals as they
 * are, <0 on failure (w's last error set). */
int wfilter_vals(pskv_worker *w, tbl *t, Pskv__Meta *m, const float *vals, size_t len,
                 zmq_msg_t *out);

/* The value frame of a quantising table's push part pi of r (int8, sign): each row
 * x = value + the row's residual is encoded into *out, the residual becomes what the
 * encoding lost and the part's values (when they are the library's copy) become
 * what was sent, so that a re-send (`resend`: no residual change) sends the same.
 * Returns 1 (*out to send), 0 (not quantised: an assign), <0 on failure. */
int wfilter_quant(pskv_worker *w, tbl *t, req *r, int pi, int resend, const uint64_t *keys,
                  const float *vals, Pskv__Meta *m, zmq_msg_t *out);

/* The frames of a push part pi of r to a table with `significant:T`: x = value +
 * the row's residual; the rows with some |x| > T go as a keyed part (*kmsg, *vmsg,
 * m's num_keys; the largest row when none is over T), the others become the
 * residual, and the part's values become what was sent, so that a re-send sends
 * it again. Returns 1 (both frames to send), 0 (not filtered), <0 on failure. */
int wfilter_significant(pskv_worker *w, tbl *t, req *r, int pi, int resend,
                        const uint64_t *keys, const float *vals, Pskv__Meta *m, zmq_msg_t *kmsg,
                        zmq_msg_t *vmsg);

/* The value frame of a push part of len floats at vals to a table with a 16-bit
 * wire (t->wire; not an assign): vals x r->scale converted into *out, m's `wire`
 * and `loss_scale` stamped, then packed with t's compression. Returns 1 (*out to
 * send), 0 (fp32: not converted), <0 on failure (w's last error set). */
int wfilter_narrow(pskv_worker *w, tbl *t, const req *r, const float *vals, size_t len,
                   Pskv__Meta *m, zmq_msg_t *out);

/* Packs a quantised value frame with t's compression, replacing *frame when that
 * makes it smaller. Returns 1 (*frame to send), or <0 (*frame closed). */
int wfilter_repack(pskv_worker *w, tbl *t, Pskv__Meta *m, zmq_msg_t *frame);

/* Server node `node` said (PSKV_EKEYMISS) it does not hold the key list of the
 * part answered: the next send of it carries the keys. */
void wfilter_miss(tbl *t, uint32_t node, uint64_t sig);

/* Counts a frame set sent for t: raw bytes before the filters, and the frames
 * (NULL: none) as they go. */
void wfilter_sent(tbl *t, uint64_t raw, const zmq_msg_t *keys, const zmq_msg_t *vals);

/* Counts a reply received for t: its rows' bytes, and its frames as they came. */
void wfilter_received(tbl *t, const wire_msg *msg);

/* Logs t's traffic before and after its filters and wire precision (nothing for a
 * table with neither). */
void wfilter_report(const tbl *t);

/* Copies every table's traffic (the first WST_MAX_TRAFFIC) for the heartbeat
 * thread, at most every WST_TRAFFIC_MS unless `now` is set. Caller's thread. */
void wfilter_publish(pskv_worker *w, int now);

/* Heartbeat thread: fills tt[0..], ptr[i] = &tt[i], with the tables' traffic as
 * last published (names point into names[]); returns how many (<= max). */
size_t wfilter_traffic(pskv_worker *w, Pskv__TableTraffic *tt, Pskv__TableTraffic **ptr,
                       char (*names)[128], size_t max);

#endif
