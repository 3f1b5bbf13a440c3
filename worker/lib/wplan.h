/* wplan: where a request's rows go. Keys map to ring positions, positions to
 * partitions, partitions to the server at the head of their chain (pushes) or its
 * tail (pulls), as the latest view (wview) places them; a request becomes one
 * part per owning server (gathered keys) or per owner and chunk (dense runs).
 * Internal to libpskv (see wstate.h).
 *
 * OWNS: the grouping scratch w->owner (grown here); it fills a request's parts,
 *   runs (r->segs) and gathered rows (r->idx), and uses w->count and w->pindex,
 *   sized per view by wview.
 * THREADS: the calling thread only.
 * NEVER: never sends, never blocks, never copies values; allocates once per
 *   request (its runs or rows), never per key. */
#ifndef PSKV_WPLAN_H
#define PSKV_WPLAN_H

#include "ring.h"
#include "wstate.h"

/* Index into w->srv of the server a row at ring position pos goes to: the head
 * of its partition for pushes, the tail for pulls; -1 when every replica died.
 * Per key: inline. */
static inline int wplan_owner_of(const pskv_worker *w, uint64_t pos, int pull)
{
    uint32_t p = ring_partition_of(pos, w->nparts);
    return pull ? w->tail[p] : w->head[p];
}

/* The ring position of `key` in table t. Per key: inline. */
static inline uint64_t wplan_key_pos(const tbl *t, uint64_t key)
{
    return t->dense ? ring_dense_pos(key, t->size) : ring_mix64(key);
}

/* Sets last_error for `key` of t, whose partition lost every replica, and returns
 * -PSKV_ELOST. */
WINTERNAL int wplan_lost_error(pskv_worker *w, const tbl *t, uint64_t key);

/* The open table `table` if a request of nkeys keys (NULL: a whole dense table)
 * may be made on it; else NULL with *err (-PSKV_EINVAL, -PSKV_ERANGE) and
 * last_error set. w may be NULL (*err = -PSKV_EINVAL). */
WINTERNAL tbl *wplan_check_table(pskv_worker *w, int table, const uint64_t *keys, size_t nkeys,
                                 int *err);

/* Whether keys[0..n) is one ascending run (keys[0], keys[0]+1, ...): a dense
 * request then travels like a whole-table run. */
WINTERNAL int wplan_is_run(const uint64_t *keys, size_t n);

/* Plans the dense run [first, first+n) into r's parts (one per owner and chunk,
 * each part's runs consecutive in r->segs); with `single` a part holds one
 * contiguous run, so its values can be sent straight from the caller's array.
 * r->parts must have room for the parts; sets nparts and pending. Returns 0,
 * -PSKV_ENOMEM or -PSKV_ELOST; r's allocations are freed with it (wreq). */
WINTERNAL int wplan_run(pskv_worker *w, req *r, tbl *t, uint64_t first, uint64_t n, int pull,
                        int single);

/* The runs of a lent push (values sent straight from the caller's array, one
 * message a contiguous run) are worth a message each only when they are long:
 * shorter, a copy of them is cheaper than the wake-ups and system calls of the
 * messages it saves (docs/benchmarks.md, "Where several servers' time goes"). */
enum { WPLAN_LEND_MIN_RUN = 256 << 10 };

/* Plans a push of the dense run [first, first+n) that the caller lends. Its parts
 * are planned gathered (one per owner and chunk); when a part holds more than one
 * run and the runs average under WPLAN_LEND_MIN_RUN bytes, the plan stays
 * gathered and 0 is returned (the caller copies the values, one message a server
 * and chunk); else the parts are one contiguous run each, as wplan_run with
 * `single` makes them, and 1 is returned (sent from the caller's array). Returns
 * a negated error as wplan_run. */
WINTERNAL int wplan_run_lend(pskv_worker *w, req *r, tbl *t, uint64_t first, uint64_t n);

/* The server (index into w->srv) that heads every partition of the dense run
 * [first, first+n) of t, when one does and the run fits one part (chunk_bytes);
 * else -1. What a push of the run will be planned to (wplan_run), told before. */
WINTERNAL int wplan_run_server(const pskv_worker *w, const tbl *t, uint64_t first, uint64_t n);

/* Plans explicit keys into r's parts, one per owning server; r->idx (allocated
 * here, freed with r) lists each part's caller rows. Returns 0, -PSKV_ENOMEM or
 * -PSKV_ELOST. */
WINTERNAL int wplan_keys(pskv_worker *w, req *r, tbl *t, const uint64_t *keys, uint64_t n,
                         int pull);

#endif
