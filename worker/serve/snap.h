/* snap: the served copy of a model's tables, as immutable snapshots.
 *
 * Design: a snapshot (one version of one table: its rows, the clock and wall
 * time it reflects) is never written after snap_publish; a reader takes a
 * reference (snap_acquire), answers from it for as long as it needs and drops it
 * (snap_release). The next version is built apart and published by swapping the
 * table's pointer under a lock held only for that swap and for a reader's
 * reference count increment, so an apply never waits for a slow reader and a
 * reader never sees half of a version (read-copy-update with reference counts).
 *
 * OWNS: a snapstore owns its tables' current snapshots; a snapshot is freed by
 * whoever drops its last reference.
 * THREADS: any; the store's mutex is the only lock.
 * NEVER: blocks for longer than a pointer swap; never changes a published
 * snapshot. */
#ifndef PSKV_SNAP_H
#define PSKV_SNAP_H

#include <stddef.h>
#include <stdint.h>

/* The models pskv-serve predicts with (modelfile.h's kinds); SNAP_PLAIN: a
 * followed table that is no built-in model (lookups only). */
typedef enum { SNAP_PLAIN = 0, SNAP_SOFTMAX = 1, SNAP_MLP = 2, SNAP_SPARSE_LR = 3 } snap_kind;

typedef struct snap {
    char table[96];
    snap_kind kind;
    uint32_t in, hidden, out; /* dense sizes (sparse-lr: 0, 0, 1) */
    size_t n;                 /* rows */
    uint32_t width;           /* floats per row (0 is taken as 1: model files) */
    uint64_t *keys;           /* sparse: n keys, ascending; dense: NULL (key = index) */
    float *vals;              /* n rows of width floats */
    int64_t clock;            /* the training clock this version reflects (-1: unknown) */
    double wall;              /* when training held it (Unix seconds) */
    int refs;                 /* guarded by the store's mutex */
} snap;

typedef struct snapstore snapstore;

/* A new empty store, or NULL when out of memory. */
snapstore *snapstore_new(void);

/* Frees the store and drops its references; NULL-safe; nulls *self_p. Readers
 * must have released theirs first. */
void snapstore_destroy(snapstore **self_p);

/* Publishes *s_p as the current version of its table (a table of that name is
 * replaced, else added); takes ownership and nulls *s_p. Returns 0, or
 * -PSKV_ENOMEM (the snapshot is then freed). */
int snap_publish(snapstore *st, snap **s_p);

/* A reference to the current version of `table` (NULL: the first table), or NULL
 * when there is none. Release it with snap_release. */
snap *snap_acquire(snapstore *st, const char *table);

/* Drops a reference taken with snap_acquire and nulls *s_p; NULL-safe. */
void snap_release(snapstore *st, snap **s_p);

/* Number of tables, and a reference to the i-th (NULL past the end). */
size_t snap_count(snapstore *st);
snap *snap_acquire_at(snapstore *st, size_t i);

/* The value of `key` in s (its first float): 0 with *v set, or -1 when s has no
 * such row. */
int snap_find(const snap *s, uint64_t key, float *v);

/* The row of `key` in s (snap_width floats, borrowed with s), or NULL. */
const float *snap_row(const snap *s, uint64_t key);

/* Floats per row of s. */
static inline uint32_t snap_width(const snap *s) { return s->width ? s->width : 1; }

/* Frees a snapshot nobody references (a failed build); NULL-safe; nulls *s_p. */
void snap_free(snap **s_p);

#endif
