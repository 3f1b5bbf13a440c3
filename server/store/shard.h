/* A shard holds one table's values (and optimizer state) for one owned ring range.
 * Dense: one contiguous float array for the dense indices in the range, updated
 * with BLAS, and the optimizer state in planes of the same size (updater.h).
 * Sparse: an open-addressing hash map (linear probing) from uint64 key to a row
 * of width values + width * (state per value) floats, created on first push. Keys that
 * were never pushed read as their deterministic initial values. The map holds row
 * numbers, each row is a record with its key (shard_impl.h), and the map grows
 * without stopping for a full rehash (shard_map.c).
 *
 * OWNS one range's values and optimizer state: the dense value buffer (reference
 * counted, shared with pull replies still on the wire) and state array, or the
 * sparse map and its rows.
 * THREAD: the server's loop thread (and the unit tests), one caller at a time;
 * the one exception is shard_lend_end, which ZeroMQ's I/O thread calls when a
 * lent reply has been sent: it only drops an atomic reference.
 * NEVER blocks, logs or touches a socket; never changes rows that are lent
 * (an update of them moves the shard to a fresh buffer first). Allocates only for a sparse
 * key seen for the first time (map and rows grow by doubling; past 0.6 load the
 * doubled map is mapped ahead) and for that move off a lent buffer; a dense push
 * of a run goes straight to BLAS (upd_apply). */
#ifndef PSKV_SHARD_H
#define PSKV_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "update/updater.h"

typedef enum { INIT_ZERO = 0, INIT_CONST, INIT_UNIFORM, INIT_NORMAL } init_kind;

typedef struct shard_init {
    init_kind kind;
    float scale;   /* const: the value; uniform: half-width; normal: stddev */
    uint64_t seed; /* mixed with the table name, so tables differ */
} shard_init;

typedef struct shard shard;

/* Parses an init rule name; returns its kind or -1. */
int shard_init_parse(const char *name);

/* Initial value j of key `key`: a pure function of (init, key, j), so it does not
 * depend on which server holds the key or who opened the table. */
float shard_init_value(const shard_init *init, uint64_t key, uint32_t j);

/* Creates a dense shard for indices [first, first+count) or (dense == 0) an empty
 * sparse shard for ring positions [begin, end]. NULL when out of memory. */
shard *shard_new(int dense, uint64_t first, uint64_t count, uint64_t begin, uint64_t end,
                 uint32_t width, const upd_opts *upd, const shard_init *init);

/* Frees s and nulls *s_p; NULL-safe. */
void shard_destroy(shard **s_p);

/* 1 when the key (dense index or sparse key) is stored here. */
int shard_owns_key(const shard *s, uint64_t key);

/* 1 when the dense run [first, first+n) lies inside the shard. */
int shard_owns_run(const shard *s, uint64_t first, uint64_t n);

/* Applies n rows of gradients. keys NULL = dense run from `first`. Returns 0,
 * -PSKV_ENOMEM (sparse growth; rows before it applied), or -PSKV_EBADVALUE when
 * the updater made some rows NaN or infinite: those rows were restored as they
 * were, the others applied. Ownership has been checked by the caller. ftrl on a
 * sparse shard stores no row for a new key whose weights the push leaves zero. */
int shard_push(shard *s, const uint64_t *keys, uint64_t first, uint64_t n, const float *g);

/* Overwrites n rows with v and clears their optimizer state (loading saved
 * weights). keys NULL = dense run. Returns 0 or -PSKV_ENOMEM. */
int shard_assign(shard *s, const uint64_t *keys, uint64_t first, uint64_t n, const float *v);

/* The learning rate the updater applies pushes with from now on (the table's, first
 * its open's; pskv_table_set_lr changes it, and a replica applies a forwarded push
 * with the head's: chain_apply.c). The caller has validated it (table_set_lr). */
void shard_set_lr(shard *s, float lr);

/* The learning rate pushes are applied with now. */
float shard_lr(const shard *s);

/* Copies n rows of values into out (n * width floats). keys NULL = dense run. */
void shard_pull(const shard *s, const uint64_t *keys, uint64_t first, uint64_t n, float *out);

/* Dense shards: the value array (count * width floats, read only), first index
 * and count. */
const float *shard_dense_values(const shard *s);

/* Dense shards: rows [first, first + n), lent without a copy to a reply ZeroMQ
 * sends (wire_frame_lend with shard_lend_end and *token as hint): an update of
 * any of those rows while they are lent moves the shard to a fresh buffer (it
 * pays a copy of the rows it does not write), so what is on the wire never
 * changes; an update of other rows is applied in place. NULL when LEND_SLOTS
 * runs of this buffer are lent already (the caller copies the rows instead).
 * The shard may be destroyed while the run is lent. */
const float *shard_lend(shard *s, uint64_t first, uint64_t n, void **token);
void shard_lend_end(void *data, void *token);

/* Rows restored after the updater made them non-finite, and ftrl pushes to new
 * keys that stored no row (their weights stayed zero), since the shard began
 * (the server's end-of-run report, tabstats.c). */
void shard_update_stats(const shard *s, uint64_t *bad_rows, uint64_t *unstored);

/* Sparse shards: the most CPU time (of the calling thread) one shard_push has
 * taken, growth of the map and rows included; 0 for dense shards. */
int64_t shard_longest_push_ns(const shard *s);

/* Sparse shards whose map is doubling (rows still moving to the doubled map,
 * shard_map.c): moves up to `budget` of them (0: none), for a caller with time
 * to spare (the server's loop when no message waits). Returns 1 while rows are
 * still to move after it, else 0 (dense shards: 0). */
int shard_grow_step(shard *s, size_t budget);

/* ---- admission and eviction (sparse shards; shard_sweep.c) ----------------
 * docs/operations.md, "Admission and eviction". */

/* admit_after N > 1: a key with no row gets one on its N-th push, counted in a
 * count-min sketch (cmsketch.h); its earlier pushes are dropped and counted.
 * evict_after C > 0: each row keeps the clock s (shard_tag) of its last push;
 * shard_sweep(now) removes it once s + C < now (clocks s+1 .. s+C all finished
 * without a push to it), and a push at a clock after s + C starts it afresh.
 * Called once, on an empty sparse shard. Returns 0 or -PSKV_ENOMEM. */
int shard_admission(shard *s, uint32_t admit_after, uint32_t evict_after);

/* The pushes (and assigns and imports) that follow are of clock `clock` (rows
 * they write are stamped with it); replica 1: they were admitted by the chain's
 * head already, so every key gets its row. */
void shard_tag(shard *s, int64_t clock, int replica);

/* 1 when key has a row (sparse), or lies in a dense shard. */
int shard_has_row(const shard *s, uint64_t key);

/* Looks at up to `budget` map slots from where the last call stopped and
 * removes the rows last pushed at a clock < now - evict_after, moving the last
 * row into each hole; after each full pass, moves the map and rows to smaller
 * arrays when they are less than a quarter full (realloc gives the memory back).
 * Returns the rows removed. No-op without eviction. */
uint64_t shard_sweep(shard *s, int64_t now, size_t budget);

/* Removes the rows of n keys (absent ones are skipped): applying a delta
 * checkpoint's tombstones. Returns 0, or -PSKV_EINVAL on a shard without
 * eviction (only eviction removes rows). */
int shard_remove(shard *s, const uint64_t *keys, uint64_t n);

/* ---- changes since the last checkpoint (shard_dirty.c) --------------------
 * Every write marks its row (one bit); eviction keeps the removed keys. */

/* Copies the rows written since the last shard_changes_reset into keys[]/rows[]
 * (rows as shard_export's) and returns how many; with keys and rows NULL only
 * counts. Dense: the rows among indices [first, first + n), in order; sparse:
 * every changed row (first and n ignored). */
uint64_t shard_changed(const shard *s, uint64_t first, uint64_t n, uint64_t *keys, float *rows);

/* Sparse: the keys of the rows removed since the last reset (*keys borrowed
 * until the next change) and their count; -1 when more were removed than the
 * shard keeps (the changes since are then not all known). */
int64_t shard_removed(const shard *s, const uint64_t **keys);

/* Forgets the changes: the next delta starts from now. */
void shard_changes_reset(shard *s);

/* ---- changes since the last sync to followers (shard_dirty.c; server/follow.h) ----
 * A second set of the bits above, which only the followers' sync clears. */

/* Starts keeping them (from now on). Returns 0 or -PSKV_ENOMEM. */
int shard_follow_on(shard *s);

/* Calls fn for every row written since the last call (or shard_follow_on), its
 * key and its row (values, then state; borrowed for the call), and forgets them;
 * fn NULL: only counts them (no row is read). Returns how many, or -PSKV_ENOMEM
 * when fn failed or the bits were lost (a growth out of memory: send everything
 * again). */
int shard_follow_taken(shard *s, int (*fn)(void *ctx, uint64_t key, const float *row),
                       void *ctx);

/* Sparse: calls fn for the key of every row eviction removed since the last call
 * (or shard_follow_on), and forgets them. Returns how many, or -PSKV_ENOMEM when
 * fn failed or more were removed than the shard keeps (send everything again). */
int64_t shard_follow_gone(shard *s, int (*fn)(void *ctx, uint64_t key), void *ctx);

/* A full copy in slices: calls fn for up to max stored rows from position *pos
 * (dense: index from the shard's first; sparse: record number), with its key and
 * row (values, then state; borrowed for the call), and moves *pos past them.
 * Returns 1 when no row is left after *pos, 0 when some are, -PSKV_ENOMEM when fn
 * failed. Rows that move between calls (eviction's sweep) may be missed or seen
 * twice: the followers' bits mark a moved row, so its next sync sends it. */
int shard_scan(const shard *s, uint64_t *pos, uint64_t max,
               int (*fn)(void *ctx, uint64_t key, const float *row), void *ctx);

typedef struct shard_mem {
    uint64_t rows;         /* rows held (dense: the indices) */
    uint64_t admitted;     /* rows created on admission (on a replica: for its head) */
    uint64_t not_admitted; /* pushes dropped before their key was admitted */
    uint64_t evicted;      /* rows removed (or reset by a push) after evict_after clocks */
    uint64_t bytes;        /* bytes of the storage: map, rows, state, keys, stamps, sketch */
} shard_mem;

/* Adds this shard's numbers to *m. */
void shard_mem_add(const shard *s, shard_mem *m);

/* Runs lent so far, and how often an update had to move the shard off a lent
 * buffer (each such move copies the rows the update does not write). */
void shard_lend_stats(const shard *s, uint64_t *lends, uint64_t *moves);
uint64_t shard_dense_first(const shard *s);
uint64_t shard_dense_count(const shard *s);

/* Calls fn for every stored key and its value row (sparse: keys pushed so far,
 * in storage order; dense: every index in order). */
void shard_foreach(const shard *s, void (*fn)(void *ctx, uint64_t key, const float *row),
                   void *ctx);

/* Zeroes every value and state and forgets sparse keys, keeping the memory, so
 * the shard can be reused as an accumulator (never lent). */
void shard_clear(shard *s);

/* Keys stored (dense: count; sparse: keys pushed so far). */
uint64_t shard_size(const shard *s);

/* The rows a message addresses: explicit keys, one dense run, or several dense
 * runs (a request that spans partitions held by other servers in between). */
typedef struct rowset {
    const uint64_t *keys; /* n explicit keys, or NULL */
    uint64_t first, n;    /* keys NULL and segs NULL: the run [first, first + n) */
    const uint64_t *segs; /* nsegs pairs (first, count) of runs, n rows in all, or NULL */
    size_t nsegs;
} rowset;

/* shard_push, shard_assign and shard_pull over a rowset; values in row order. */
int shard_push_rows(shard *s, const rowset *rs, const float *g);
int shard_assign_rows(shard *s, const rowset *rs, const float *v);
void shard_pull_rows(const shard *s, const rowset *rs, float *out);

/* Floats per exported row: the values and then the optimizer state. */
size_t shard_row_floats(const shard *s);

/* Copies every stored row whose key `keep` accepts (keep NULL = all) into
 * keys[]/rows[] (rows of shard_row_floats floats: values, then state; dense rows
 * in index order, sparse rows in storage order) and returns how many; with keys
 * and rows NULL only counts. Sparse rows never pushed are not stored. */
uint64_t shard_export(const shard *s, int (*keep)(void *ctx, uint64_t key), void *ctx,
                      uint64_t *keys, float *rows);

/* Sparse: removes every row whose key `keep` rejects (a partition that left this
 * server), keeping the others as they are (values, state, stamps), in place.
 * Returns the rows removed. Dense: no-op (0). */
uint64_t shard_retain(shard *s, int (*keep)(void *ctx, uint64_t key), void *ctx);

/* Dense: copies rows [first, first + n) (values, then state) into rows. */
void shard_export_run(const shard *s, uint64_t first, uint64_t n, float *rows);

/* Overwrites n rows (values and state, as exported). keys NULL = dense run
 * from first. Returns 0 or -PSKV_ENOMEM. */
int shard_import(shard *s, const uint64_t *keys, uint64_t first, uint64_t n, const float *rows);

#endif
