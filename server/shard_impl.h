/* The shard's private layout, shared by shard.c (storage, push and pull) and
 * shard_sweep.c (admission's bookkeeping, eviction and giving memory back).
 * Not for other modules: they use shard.h. */
#ifndef PSKV_SHARD_IMPL_H
#define PSKV_SHARD_IMPL_H

#include <stdatomic.h>
#include <string.h>

#include "shard.h"

#define EMPTY UINT32_MAX
#define BLOCK 16384 /* floats a dense run is updated by at a time (cache, saved rows) */

/* A dense shard's values, shared with the pull replies ZeroMQ is still sending
 * (shard_lend): refs counts the shard and each reply. A writer never changes a
 * buffer with refs > 1; it moves the shard to a fresh copy first (own_dense). */
typedef struct dense_buf {
    float *v;
    atomic_int refs;
} dense_buf;

struct shard {
    int dense;
    uint32_t width;
    int nstate;          /* state floats per value (updater.h): planes of count*width (dense) */
    int checked;         /* the updater can make NaN: rows are saved and restored (upd_may_fail) */
    upd_opts upd;
    float *scratch;      /* checked: the saved rows of one block (or ftrl's trial row) */
    shard_init init;
    uint64_t begin, end; /* ring range */
    /* dense */
    uint64_t first, count;
    float *w, *state;    /* w = buf->v */
    dense_buf *buf;
    uint64_t lends, moves; /* runs lent; moves to a fresh buffer while lent */
    uint64_t bad_rows;   /* rows restored after the updater made them non-finite */
    uint64_t unstored;   /* ftrl pushes to a new key that left its weights zero: no row */
    /* sparse: slots[] index rows; keys[] parallel to slots */
    uint64_t *keys;
    uint32_t *slots;
    size_t cap, used;    /* cap is a power of two */
    float *rows;         /* used rows of width * (1 + nstate) floats */
    size_t rows_cap;
    /* admission and eviction (sparse only; shard_admission) */
    uint32_t admit_after; /* a key with no row gets one on its admit_after-th push; 0 = first */
    uint32_t evict_after; /* rows not pushed for this many clocks are removed; 0 = never */
    struct cms *sketch;   /* admit_after: pushes of keys with no row */
    int64_t tag;          /* shard_tag: the clock of the pushes being applied */
    int replica;          /* shard_tag: pushes a head admitted already (no sketch) */
    uint64_t *row_key;    /* evict_after: the key of each row (a freed row takes the last) */
    uint64_t admitted, not_admitted, evicted;
    size_t sweep_at;      /* the map slot the sweep looks at next */
    /* changes since the last checkpoint (shard_dirty.c) */
    uint64_t *dirty;      /* a bit per row written since: dense by index from first,
                             sparse by row number (a moved row takes its bit along) */
    uint64_t *gone;       /* sparse: keys of the rows removed since (tombstones) */
    size_t ngone, gone_cap;
    int gone_lost;        /* more removals than gone may hold: the next one is full */
};

/* Row r (dense index from first, sparse row number) was written. */
static inline void shard_mark(shard *s, size_t r)
{
    s->dirty[r >> 6] |= 1ULL << (r & 63);
}

/* Dense rows [r, r + n) were written. shard_dirty.c. */
void shard_mark_run(shard *s, size_t r, size_t n);

/* Sparse: the row of key was removed (a tombstone for the next delta). shard_dirty.c. */
void shard_note_gone(shard *s, uint64_t key);

/* With evict_after, a sparse row ends with one more float: the bits of the
 * uint32 clock of its last push (its stamp), so that copies (FILL) and
 * checkpoints carry it like the state. */
static inline uint32_t shard_stamp(const float *row, size_t rf)
{
    uint32_t v;
    memcpy(&v, row + rf - 1, sizeof v);
    return v;
}
static inline void shard_set_stamp(float *row, size_t rf, uint32_t v)
{
    memcpy(row + rf - 1, &v, sizeof v);
}

/* The map slot of key (where it is, or the empty slot where it would go); rows
 * are shard_row_floats(s) floats (values, state and the stamp). shard.c. */
size_t shard_probe(const shard *s, uint64_t key);

/* The map's home slot of key (shard.c's probe starts there). */
size_t shard_home(const shard *s, uint64_t key);

/* Moves the map to ncap slots (a power of two above the rows held).
 * Returns 0 or -PSKV_ENOMEM (the map unchanged). shard.c. */
int shard_rehash(shard *s, size_t ncap);

/* Moves the rows (and their keys and stamps) to room for ncap rows, ncap >=
 * used. Returns 0 or -PSKV_ENOMEM (unchanged). shard_sweep.c. */
int shard_rows_resize(shard *s, size_t ncap);

#endif
