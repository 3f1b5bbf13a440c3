/* The shard's private layout, shared by shard.c (storage, push and pull) and
 * shard_sweep.c (admission's bookkeeping, eviction and giving memory back).
 * Not for other modules: they use shard.h. */
#ifndef PSKV_SHARD_IMPL_H
#define PSKV_SHARD_IMPL_H

#include <stdatomic.h>
#include <string.h>

#include "ring.h"
#include "shard.h"

#define EMPTY 0u /* a free map slot (zero pages are an empty map); a used one holds its
                    row's number + 1 */
#define BLOCK 16384 /* floats a dense run is updated by at a time (cache, saved rows) */

#define LEND_SLOTS 64 /* runs of one buffer lent at once; past it replies are copied */

/* One run of a dense buffer that ZeroMQ is sending (shard_lend): floats [lo, hi)
 * of buf->v. The loop thread fills a slot whose `live` is 0 and sets it; the I/O
 * thread that sent the run clears it (shard_lend_end). */
typedef struct dense_lend {
    atomic_int live;
    size_t lo, hi;
    struct dense_buf *buf;
} dense_lend;

/* A dense shard's values, shared with the pull replies ZeroMQ is still sending
 * (shard_lend): refs counts the shard and each reply, lends[] says which floats
 * each reply sends. A writer never changes floats a live lend covers; it moves
 * the shard to a fresh copy first (own_dense). Floats no reply covers are
 * written in place, lent or not: a combined push-and-pull's parts each lend
 * their rows while the next part's push writes the rows after them. */
typedef struct dense_buf {
    float *v;
    atomic_int refs;
    dense_lend lends[LEND_SLOTS];
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
    int64_t longest_ns;  /* sparse: the most CPU time one shard_push took (growth included) */
    /* sparse: the map's slots[] hold row numbers + 1 (EMPTY: a free slot); row r is
     * a record of shard_rec_floats floats at rows + r * that: the key (KEY_FLOATS),
     * then the values, the state and (with evict_after) the stamp. Keeping the key
     * with the row rather than in the map makes a key cost 4 bytes of map per slot
     * instead of 12, and a lookup touches two cache lines (slot, record), not three. */
    uint32_t *slots;
    size_t cap, used;    /* cap is a power of two */
    uint32_t *old_slots; /* while the map grows: the old map (shard_map.c), old_cap slots */
    size_t old_cap;
    size_t moved, to_move; /* rows 0..to_move-1 were in the old map; moved so far */
    uint32_t *next_slots; /* past 0.6 load: the doubled map, faulted in by the helper */
    size_t next_cap;      /* its slots */
    uint64_t next_epoch;  /* prefault_epoch() + 1 when it was asked for (0: not yet) */
    size_t next_back;     /* its bytes from here on were faulted in by pushes (shard_map.c) */
    int next_ready;       /* all of it is faulted in */
    size_t rows_asked, dirty_asked; /* bytes of records, dirty bits asked for ahead */
    uint64_t ahead_epoch; /* the prefault_epoch() they were asked in */
    float *rows;         /* used records */
    size_t rows_cap;
    /* admission and eviction (sparse only; shard_admission) */
    uint32_t admit_after; /* a key with no row gets one on its admit_after-th push; 0 = first */
    uint32_t evict_after; /* rows not pushed for this many clocks are removed; 0 = never */
    struct cms *sketch;   /* admit_after: pushes of keys with no row */
    int64_t tag;          /* shard_tag: the clock of the pushes being applied */
    int replica;          /* shard_tag: pushes a head admitted already (no sketch) */
    uint64_t admitted, not_admitted, evicted;
    size_t sweep_at;      /* the map slot the sweep looks at next */
    /* changes since the last checkpoint (shard_dirty.c) */
    uint64_t *dirty;      /* a bit per row written since: dense by index from first,
                             sparse by row number (a moved row takes its bit along);
                             shard_big_alloc'd, shard_dirty_bytes long */
    uint64_t *gone;       /* sparse: keys of the rows removed since (tombstones) */
    size_t ngone, gone_cap;
    int gone_lost;        /* more removals than gone may hold: the next one is full */
    /* changes since the last sync to followers (server/follow.h; shard_dirty.c):
     * the same bits as dirty, kept apart so a checkpoint does not clear them; NULL
     * until a reader follows the table */
    uint64_t *fdirty;
    uint64_t *fgone;      /* sparse, with fdirty: keys eviction removed since the last sync */
    size_t nfgone, fgone_cap;
    int fgone_lost;       /* more than fgone may hold: the followers need a full copy */
};

/* The length of the dirty bits' array for `rows` rows: a word per 64 rows, and one. */
static inline size_t shard_bits_bytes(size_t rows) { return (rows / 64 + 1) * sizeof(uint64_t); }

/* The length of s's dirty bits (dense: count rows, sparse: rows_cap). */
static inline size_t shard_dirty_bytes(const shard *s)
{
    return shard_bits_bytes(s->dense ? (size_t)s->count : s->rows_cap);
}

/* Row r (dense index from first, sparse row number) was written. */
static inline void shard_mark(shard *s, size_t r)
{
    s->dirty[r >> 6] |= 1ULL << (r & 63);
    if (s->fdirty)
        s->fdirty[r >> 6] |= 1ULL << (r & 63);
}

/* Dense rows [r, r + n) were written. shard_dirty.c. */
void shard_mark_run(shard *s, size_t r, size_t n);

/* Sparse: the row of key was removed (a tombstone for the next delta). shard_dirty.c. */
void shard_note_gone(shard *s, uint64_t key);

/* Floats per row as exported: values and state, then with evict_after (sparse)
 * the stamp. */
static inline size_t shard_rf(const shard *s)
{
    return (size_t)s->width * (1 + (size_t)s->nstate) + (s->evict_after ? 1 : 0);
}

#define KEY_FLOATS 2 /* a sparse record's key: a uint64 in two floats' room */

/* Floats per sparse record: the key, then the row. */
static inline size_t shard_rec_floats(const shard *s) { return KEY_FLOATS + shard_rf(s); }

/* Record r of a sparse shard, and its key (stored unaligned: memcpy). */
static inline float *shard_rec(const shard *s, uint32_t r)
{
    return s->rows + (size_t)r * shard_rec_floats(s);
}
static inline uint64_t shard_rec_key(const float *rec)
{
    uint64_t k;
    memcpy(&k, rec, sizeof k);
    return k;
}

/* The record a used map slot's value v names. */
static inline float *shard_slot_rec(const shard *s, uint32_t v) { return shard_rec(s, v - 1); }

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

/* Asks for the cache line at p, a hint: nothing is read or waited for. A
 * volatile asm on x86-64, because GCC 12 drops __builtin_prefetch where it is
 * a loop's or an inlined function's only effect (the push pipeline's stages in
 * shard.c were compiled to nothing so). */
static inline void shard_prefetch(const void *p)
{
#if defined(__x86_64__)
    __asm__ volatile("prefetcht0 %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p);
/* ---- sparse rows and the push (shard_push.c) ---- */

/* Row of key (of hash h, shard_hash) for writing: stamped with the shard's tag
 * when rows are evicted, marked as written. A key with no row gets one
 * (initialised), the map grown first when full (shard_map_full). NULL when out
 * of memory. */
float *shard_sparse_row(shard *s, uint64_t key, uint64_t h);

/* Applies g to the rows of n keys of a sparse shard (creating rows, admission
 * and eviction as shard_push says), counting rows restored after a NaN in *bad;
 * times the push (longest_ns). Returns 0 or -PSKV_ENOMEM. */
int shard_push_sparse(shard *s, const uint64_t *keys, uint64_t n, const float *g, uint64_t *bad);

/* Applies g to nrows rows at w (state planes at st, stride apart), restoring
 * (and counting in *bad) rows the updater made non-finite. shard.c. */
void shard_apply_block(shard *s, float *w, float *st, size_t stride, const float *g,
                       size_t nrows, uint64_t *bad);

#endif
}

/* ---- the map (shard_map.c) ---- */

/* A key's hash in the map: its home slot in a map of cap slots is the hash's
 * low bits, so one hash, computed once per key of a push, serves the map and,
 * while the map grows, the old one. */
static inline uint64_t shard_hash(uint64_t key) { return ring_mix64(key ^ 0x5bd1e995ULL); }

/* Where key, of hash h, is in slots (cap of them), or the free slot where it
 * would go. Inline: the push loop's probe. */
static inline size_t shard_find_in(const shard *s, const uint32_t *slots, size_t cap,
                                   uint64_t key, uint64_t h)
{
    size_t mask = cap - 1, i = (size_t)h & mask;
    for (uint32_t v; (v = slots[i]) != EMPTY && shard_rec_key(shard_slot_rec(s, v)) != key;)
        i = (i + 1) & mask;
    return i;
}

/* The slot of key in the (new) map: where it is, or the free slot where it
 * would go. While the map grows, a key may be in the old map only: use
 * shard_lookup. */
size_t shard_probe(const shard *s, uint64_t key);

/* While the map grows: the old map's slot value of key (of hash h), which is
 * not in the new map, or EMPTY. Rows move in row order, so a slot naming a row
 * below moved names one in the new map, not key's: it is passed by its number,
 * without the miss on its record (a new key looked for in both maps read a
 * record per slot of its old probe run). */
static inline uint32_t shard_find_old(const shard *s, uint64_t key, uint64_t h)
{
    size_t mask = s->old_cap - 1, i = (size_t)h & mask;
    for (uint32_t v; (v = s->old_slots[i]) != EMPTY; i = (i + 1) & mask)
        if (v > s->moved && shard_rec_key(shard_slot_rec(s, v)) == key)
            return v;
    return EMPTY;
}

/* The map slot value (row + 1) of key, of hash h, or EMPTY, looking in the old
 * map too while the map grows; *slot (when not NULL) gets where key is or would
 * go in the (new) map. */
static inline uint32_t shard_lookup_h(const shard *s, uint64_t key, uint64_t h, size_t *slot)
{
    if (!s->cap) {
        if (slot)
            *slot = 0;
        return EMPTY;
    }
    size_t i = shard_find_in(s, s->slots, s->cap, key, h);
    if (slot)
        *slot = i;
    uint32_t v = s->slots[i];
    if (v == EMPTY && s->old_slots)
        v = shard_find_old(s, key, h);
    return v;
}

/* shard_lookup_h, hashing key. */
static inline uint32_t shard_lookup(const shard *s, uint64_t key, size_t *slot)
{
    return shard_lookup_h(s, key, shard_hash(key), slot);
}

/* The map's home slot of key (the probe starts there); in a map of cap slots. */
size_t shard_home(const shard *s, uint64_t key);
size_t shard_home_in(uint64_t key, size_t cap);

/* A row more would pass 0.7 load and the doubled map is ready (faulted in by
 * the helper, or not asked for: small, or no helper), or it would pass 0.8: the
 * map grows before the next row is added. Between 0.7 and 0.8 a growth waits for
 * the helper, so that its moves, which write all over the doubled map at once,
 * fault nothing in on the push path. */
static inline int shard_map_full(const shard *s)
{
    size_t n = s->used + 1;
    if (n * 10 <= s->cap * 7)
        return 0;
    return s->next_ready || !s->next_epoch || n * 10 > s->cap * 8;
}

/* Doubles the map: a small map moves at once, a large one to a fresh map (zero
 * pages), its rows moved over by shard_map_migrate. Returns 0 or -PSKV_ENOMEM
 * (the map unchanged). */
int shard_map_grow(shard *s);

/* Moves up to budget rows of a growing map's old one into the new; frees the
 * old map when the last has moved. No-op when the map is not growing. */
void shard_map_migrate(shard *s, size_t budget);

/* Once per push, after it (spent_ns: the CPU time it took): has the helper
 * (prefault.h) fault in, off the push path, what the pushes after it will
 * write: the next AHEAD_BYTES of records and their dirty bits (the records grown
 * ahead for it), and past 0.6 load the doubled map, mapped then, which the
 * growth takes over at 0.7 once it is all in; past 0.7 a push not yet long
 * faults in a huge page of it itself when the helper lags. A fresh page's fault
 * (4-7 ms a huge page on the machine of docs/benchmarks.md) in a push was the
 * longest stall once the rehash was gone. */
void shard_map_prepare(shard *s, int64_t spent_ns);

/* Builds the map again, of the same size, from rows 0 .. used - 1 (their row
 * numbers changed), ending any move under way. Allocates nothing. */
void shard_map_rebuild(shard *s);

/* Moves the map to ncap slots (a power of two above the rows held) at once,
 * ending any move under way. Returns 0 or -PSKV_ENOMEM (the map unchanged). */
int shard_rehash(shard *s, size_t ncap);

/* The map's, the records' and the dirty bits' arrays: a private mapping of
 * `bytes` (zero pages, written on demand; huge pages asked for when large),
 * NULL when out of memory; grown or shrunk with mremap (NULL: unchanged; p
 * NULL: a new one; grown, the new part is zero); unmapped (p NULL: nothing). */
void *shard_big_alloc(size_t bytes);
void *shard_big_resize(void *p, size_t old_bytes, size_t bytes);
void shard_big_free(void *p, size_t bytes);

/* Moves the records to room for ncap rows, ncap >= used. Returns 0 or
 * -PSKV_ENOMEM (unchanged). shard_sweep.c. */
int shard_rows_resize(shard *s, size_t ncap);

/* ---- sparse rows and the push (shard_push.c) ---- */

/* Row of key (of hash h, shard_hash) for writing: stamped with the shard's tag
 * when rows are evicted, marked as written. A key with no row gets one
 * (initialised), the map grown first when full (shard_map_full). NULL when out
 * of memory. */
float *shard_sparse_row(shard *s, uint64_t key, uint64_t h);

/* Applies g to the rows of n keys of a sparse shard (creating rows, admission
 * and eviction as shard_push says), counting rows restored after a NaN in *bad;
 * times the push (longest_ns). Returns 0 or -PSKV_ENOMEM. */
int shard_push_sparse(shard *s, const uint64_t *keys, uint64_t n, const float *g, uint64_t *bad);

/* Applies g to nrows rows at w (state planes at st, stride apart), restoring
 * (and counting in *bad) rows the updater made non-finite. shard.c. */
void shard_apply_block(shard *s, float *w, float *st, size_t stride, const float *g,
                       size_t nrows, uint64_t *bad);

#endif
