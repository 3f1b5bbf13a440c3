/* smerge: a followed namespace's rows as snapshots (snap.h). The rows the
 * servers send (sfollow.h) are merged into a new version of their table, which
 * is then published; a reader of the old version is never disturbed.
 *   - sparse tables: each message's rows overwrite (or add) those keys, or (rows
 *     eviction removed at the servers) drop them; the new version is published at
 *     once (keys kept ascending);
 *   - dense tables: each server's latest part (the rows it heads, at a clock
 *     boundary) is kept; a version is published only when the parts of every
 *     server followed carry one clock and hold every row of the table between
 *     them: a model training held, never half of two (across a failover, the
 *     survivors' parts from before it lack the dead server's rows: not served
 *     until the new heads' parts come).
 * A table is published under its name without the namespace ("check.dense",
 * "sparse-lr.w"); training apps' names give the model kind (softmax-IN-H-OUT,
 * mlp-IN-H-OUT, sparse-lr.w), anything else is served for lookups only.
 *
 * OWNS the dense parts it keeps; publishes into a store it borrows.
 * THREAD: one (sfollow's); the store takes readers on any thread.
 * NEVER trusts a message: sizes and keys are checked against the table. */
#ifndef PSKV_SMERGE_H
#define PSKV_SMERGE_H

#include <stddef.h>
#include <stdint.h>

#include "snap.h"

typedef struct smerge smerge;

/* The rows of one FOLLOW_DATA. */
typedef struct smerge_rows {
    uint32_t node;       /* the server that sent them */
    const char *table;   /* full name, NAMESPACE/NAME */
    int dense;           /* a dense part (else sparse rows) */
    uint64_t size;       /* dense: the table's size */
    uint32_t width;
    const uint64_t *keys;
    const float *vals;   /* n x width */
    size_t n;
    int64_t clock;       /* the values clock they reflect */
    int removed;         /* sparse: the keys are rows eviction removed (vals NULL) */
} smerge_rows;

/* A new merger publishing into st (borrowed). NULL when out of memory. */
smerge *smerge_new(snapstore *st);

/* Frees it; NULL-safe; nulls *self_p. */
void smerge_destroy(smerge **self_p);

/* Merges r (sparse: published at once; dense: kept as r->node's part). Returns 0,
 * or -PSKV_EPROTO (why: a key outside the dense table, a width or size that
 * changed) or -PSKV_ENOMEM. */
int smerge_apply(smerge *m, const smerge_rows *r, char *why, size_t whylen);

/* Publishes each dense table whose parts from the servers nodes[0..n) all carry
 * one clock newer than its version and together hold every row. Returns the
 * number of tables whose parts, one from every server, carry different clocks
 * (a later target may bring them together; a part missing is not counted), and
 * in *hi the highest clock a part carries. */
int smerge_dense_publish(smerge *m, const uint32_t *nodes, size_t n, int64_t *hi);

/* Forgets server node's dense parts (it died or left the view). */
void smerge_drop_node(smerge *m, uint32_t node);

/* Dense tables known so far. */
size_t smerge_dense_count(const smerge *m);

#endif
