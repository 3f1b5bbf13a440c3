/* wkkt: the worker's side of the `kkt` filter (common/filter.h; the paper's KKT
 * filter for L1-regularised sparse models). A table opened with `kkt` and sgd
 * with l1 > 0 updates a row as w' = prox(w - lr*g, lr*l1), which leaves w' = 0
 * whenever w = 0 and |g| <= l1, and keeps no other state: such a push is a no-op,
 * and the worker does not send the row.
 *
 * What the worker knows of w is what its pulls brought back. A reading is used
 * only if it is newer than this worker's own last push of the key: each pull
 * notes the oldest of the table's pushes still unanswered when it was sent (its
 * `floor`); a reply's values reflect every push below it. A row is skipped when
 * its latest reading says zero, that reading's floor is above the key's last push
 * from here, and every |g_j| <= (1 - MARGIN) * l1. With one worker the skip is
 * therefore exact: the server's weight is zero when the push would have applied.
 * With several, another worker's push landing after the reading can have moved
 * the weight; the skipped gradient is then lost, an error of at most lr * l1 per
 * skip, as with the paper's filter (docs/protocol.md, "Filters").
 *
 * With keycache, a push's key list is kept whole where that is cheaper (the server
 * holds it: a signature instead of a new list), the skipped rows sent as zeros: at
 * w = 0 a zero gradient is a no-op too (wkkt_filter).
 *
 * OWNS: per key its latest reading and last push (32 bytes, open addressing at
 * most half full, never shrunk: about 64 bytes per key the worker pulled or
 * pushed), and the scratch the filtered rows of a push go into. THREAD: the
 * library's one thread. */
#ifndef PSKV_WKKT_H
#define PSKV_WKKT_H

#include <stddef.h>
#include <stdint.h>

#include "filter.h"
#include "wstate.h"

typedef struct wkkt wkkt;

/* A new filter state with band = (1 - margin) * l1; NULL when out of memory. */
WINTERNAL wkkt *wkkt_new(float l1, float margin);

/* Frees *self_p and sets it NULL; NULL is fine. */
WINTERNAL void wkkt_destroy(wkkt **self_p);

/* True (1) when row (key, g[0..width)) need not be sent: see above. */
WINTERNAL int wkkt_skip(const wkkt *k, uint64_t key, const float *g, uint32_t width);

/* Filters a push of n rows: *okeys, *ovals and *on are the rows to send (k's
 * scratch, valid until the next call). The rows skipped are left out (at least one
 * row goes, since a push carries some: the last, within the band too when all are
 * skipped), or, when fs has keycache and a third or more of the rows go anyway,
 * sent with zero values, a no-op as well, so that the key list stays the one the
 * server holds. Counts into st. Returns 0 or -PSKV_ENOMEM. */
WINTERNAL int wkkt_filter(wkkt *k, const filter_set *fs, const uint64_t *keys,
                          const float *vals, size_t n, uint32_t width, const uint64_t **okeys,
                          const float **ovals, size_t *on, filter_stats *st);

/* The push of the rows wkkt_filter returned last went as `ts`: wkkt_pushed for
 * those it sent with their gradient (a skipped row, left out or sent as zeros,
 * leaves the weight at zero and so its reading stands). */
WINTERNAL void wkkt_sent(wkkt *k, int64_t ts);

/* The rows keys[0..n) went in push `ts`: readings older than it no longer count.
 * Out of memory turns the filter off for good (nothing skipped), never wrong. */
WINTERNAL void wkkt_pushed(wkkt *k, const uint64_t *keys, size_t n, int64_t ts);

/* The floor of a pull of table `table` sent now: the timestamp of the oldest of
 * its pushes still unanswered, else the next timestamp. */
WINTERNAL int64_t wkkt_floor(const pskv_worker *w, int table);

/* A pull sent with `floor` (the oldest push of the table unanswered then) read
 * rows keys[0..n) as vals (width each). */
WINTERNAL void wkkt_pulled(wkkt *k, const uint64_t *keys, const float *vals, size_t n,
                               uint32_t width, int64_t floor);

#endif
