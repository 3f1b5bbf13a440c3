/* A sparse shard's rows and its push (shard_impl.h): a row found or made for
 * a key, and the push of a key list as a pipeline that overlaps the memory
 * misses of many keys, with admission, eviction's reset and ftrl's unstored
 * rows on the way. */
#include <string.h>

#include "cmsketch.h"
#include "pskv_errors.h"
#include "shard_impl.h"
#include "timeutil.h"

/* Values and state (without the stamp). */
static size_t core_floats(const shard *s) { return (size_t)s->width * (1 + (size_t)s->nstate); }

/* While the map grows (shard_map.c), rows moved to the new map per row looked
 * up for writing and per sparse push, and after a push that took less than
 * MIGRATE_QUICK_NS of CPU, MIGRATE_QUICK more. A key not in the new map is
 * looked for in the old one too (a miss there costs several record reads), so
 * the move should be short: a quick push (10^7 rows: 1-3 ms) moves about 65,000
 * rows. But at 10^8 rows the moves were a third of a growing push's 8-10 ms
 * (each a random write into a map of 1 GiB), so a push that is not quick moves
 * about 32,000 (docs/benchmarks.md), and the server's loop moves more while no
 * message waits (shard_grow_step, sweep_grow): the move still ends long before
 * the new map is full. */
enum { MIGRATE_PER_ROW = 2, MIGRATE_PER_PUSH = 16384, MIGRATE_QUICK = 32768 };
#define MIGRATE_QUICK_NS 3000000

/* Sets a row's values to key's initial ones and its state to zero. */
static void init_row(const shard *s, uint64_t key, float *row)
{
    for (uint32_t j = 0; j < s->width; j++)
        row[j] = shard_init_value(&s->init, key, j);
    memset(row + s->width, 0, (shard_rf(s) - s->width) * sizeof(float));
}

/* Row v (a used slot's value) is being written: stamped with the shard's tag
 * when rows are evicted, marked as written. */
static inline float *written_row(shard *s, uint32_t v)
{
    float *row = shard_slot_rec(s, v) + KEY_FLOATS;
    if (s->evict_after)
        shard_set_stamp(row, shard_rf(s), (uint32_t)s->tag);
    shard_mark(s, v - 1);
    return row;
}

/* A new row for key (which has none) at map slot i, initialised, stamped and
 * marked. NULL when out of memory. */
static float *add_row(shard *s, uint64_t key, size_t i)
{
    if (s->used == s->rows_cap && shard_rows_resize(s, s->rows_cap ? s->rows_cap * 2 : 1024) < 0)
        return NULL;
    if (s->used >= UINT32_MAX - 1)
        return NULL;
    float *rec = shard_rec(s, (uint32_t)s->used), *row = rec + KEY_FLOATS;
    memcpy(rec, &key, sizeof key);
    init_row(s, key, row);
    if (s->evict_after)
        shard_set_stamp(row, shard_rf(s), (uint32_t)s->tag);
    shard_mark(s, s->used);
    s->slots[i] = (uint32_t)++s->used; /* row used - 1, plus one */
    return row;
}

float *shard_sparse_row(shard *s, uint64_t key, uint64_t h)
{
    if (shard_map_full(s) && shard_map_grow(s) < 0)
        return NULL;
    shard_map_migrate(s, MIGRATE_PER_ROW); /* before the lookup: it fills slots */
    size_t i;
    uint32_t v = shard_lookup_h(s, key, h, &i);
    return v != EMPTY ? written_row(s, v) : add_row(s, key, i);
}

/* A push of random keys to a large map waits on memory: the map slot, then the
 * record (the key compared, the row updated), then the row's dirty bit. The
 * push loop is a pipeline over its keys; while key i is applied:
 *   key i + FAR is hashed (the hash kept for its later stages: a key is hashed
 *     once) and its home slot asked for;
 *   key i + NEAR, whose slot has come in meanwhile, has the rows that its home
 *     slot and the slots after it up to a free one name (at most NEAR_SLOTS:
 *     91% of keys are there at 0.6 load) noted as its hints, with the old map's
 *     home slot while the map grows, and the home slot's record asked for;
 *   key i + MID, that record in cache by now, has its dirty bit's word asked
 *     for when the record is its own (70% of keys), else its other hints'
 *     records;
 *   key i finds its row among its hints, and is looked up in the map only when
 *     none is its own (a new key, or one further from home). A hint whose
 *     record holds the key is the key's row whatever the map did since: rows
 *     keep their numbers during a push.
 * The misses of some FAR keys so overlap, where a bare loop overlaps what the
 * processor's window holds; asking for the other records only when the home
 * slot's is not the key's keeps the misses per key near the two a key needs
 * (more asked for at once fill the processor's queue of misses and stall it). */
enum { PIPE = 64, PREFETCH_FAR = 24, PREFETCH_NEAR = 12, PREFETCH_MID = 6, NEAR_SLOTS = 3 };
enum { OLD_SLOTS = 4, HINTS = NEAR_SLOTS + OLD_SLOTS }; /* and the old map's, growing */

/* The map fits in cache below this many slots: no prefetching. */
#define PREFETCH_MIN_CAP 65536

typedef struct push_pipe {
    uint64_t z[PIPE];               /* key k's hash at k % PIPE */
    uint32_t hint[PIPE][HINTS];     /* key k's hints (map slot values, EMPTY: none) */
} push_pipe;

/* The pipeline's first stage for key k: its hash kept, its home slot (in both
 * maps while the map grows) asked for. */
static inline void pipe_hash(const shard *s, push_pipe *p, const uint64_t *keys, uint64_t k)
{
    uint64_t h = shard_hash(keys[k]);
    p->z[k & (PIPE - 1)] = h;
    if (s->cap < PREFETCH_MIN_CAP)
        return;
    shard_prefetch(&s->slots[h & (s->cap - 1)]);
    if (s->old_slots) /* growing: a key not in the new map is looked for in the old */
        shard_prefetch(&s->old_slots[h & (s->old_cap - 1)]);
}

/* Slot i's value, its record asked for when far. (The stages keep what they
 * read: GCC drops a function or loop whose only effect is a prefetch.) */
/* Asks for the record of row v - 1, both ends: a record may span two cache
 * lines (12-byte sgd records: one in eight). */
static inline void prefetch_rec(const shard *s, uint32_t v)
{
    const float *rec = shard_slot_rec(s, v);
    shard_prefetch(rec);
    shard_prefetch(rec + shard_rec_floats(s) - 1);
}

static inline uint32_t hint_at(const shard *s, const uint32_t *slots, size_t i, int far)
{
    uint32_t v = slots[i];
    if (far && v != EMPTY)
        prefetch_rec(s, v);
    return v;
}

/* The second stage for key k: its hints noted, their records asked for. */
static inline void pipe_hints(const shard *s, push_pipe *p, uint64_t k)
{
    uint32_t *hint = p->hint[k & (PIPE - 1)];
    uint64_t h = p->z[k & (PIPE - 1)];
    if (!s->cap) {
        memset(hint, 0, HINTS * sizeof *hint);
        return;
    }
    int far = s->cap >= PREFETCH_MIN_CAP;
    size_t mask = s->cap - 1;
    hint[0] = hint_at(s, s->slots, h & mask, far);
    int j;
    for (j = 1; j < NEAR_SLOTS && hint[j - 1] != EMPTY; j++) /* the key is before a free slot */
        hint[j] = s->slots[(h + j) & mask];
    for (; j < NEAR_SLOTS; j++)
        hint[j] = EMPTY;
    uint32_t *oh = hint + NEAR_SLOTS;
    j = 0;
    if (s->old_slots) { /* a key not in the new map is looked for in the old */
        size_t omask = s->old_cap - 1;
        oh[0] = s->old_slots[h & omask]; /* a row not moved yet: its record asked for */
        if (far && oh[0] > s->moved)
            prefetch_rec(s, oh[0]);
        for (j = 1; j < OLD_SLOTS && oh[j - 1] != EMPTY; j++)
            oh[j] = s->old_slots[(h + j) & omask];
    }
    for (; j < OLD_SLOTS; j++)
        oh[j] = EMPTY;
}

/* The third stage for key k: when its home slot's record (asked for by the
 * second stage, in cache by now) is not its own, the records of the slots after
 * it are asked for; when it is, its dirty bit's word. */
static inline void pipe_check(const shard *s, push_pipe *p, const uint64_t *keys, uint64_t k)
{
    uint32_t *hint = p->hint[k & (PIPE - 1)];
    if (s->cap < PREFETCH_MIN_CAP)
        return;
    if (hint[0] != EMPTY && shard_rec_key(shard_slot_rec(s, hint[0])) == keys[k]) {
        shard_prefetch(&s->dirty[(hint[0] - 1) >> 6]);
        return;
    }
    for (int j = 1; j < NEAR_SLOTS && hint[j] != EMPTY; j++)
        prefetch_rec(s, hint[j]);
    for (int j = NEAR_SLOTS + 1; j < HINTS && hint[j] != EMPTY; j++) /* growing */
        if (hint[j] > s->moved) /* a moved row is in the new map: not key's */
            prefetch_rec(s, hint[j]);
}

/* The hint of hint[] whose record holds key, else EMPTY. */
static inline uint32_t pipe_find(const shard *s, const uint32_t *hint, uint64_t key)
{
    for (int j = 0; j < NEAR_SLOTS; j++)
        if (hint[j] != EMPTY && shard_rec_key(shard_slot_rec(s, hint[j])) == key)
            return hint[j];
    for (int j = NEAR_SLOTS; j < HINTS; j++) /* the old map's: rows not moved only */
        if (hint[j] > s->moved && shard_rec_key(shard_slot_rec(s, hint[j])) == key)
            return hint[j];
    return EMPTY;
}

/* Eviction on a push to key's row (evict_after): a row whose last push was at
 * clock s, pushed now at a clock after s + evict_after (so that clocks s+1 ..
 * s+evict_after passed without a push to it), is reset to its initial values
 * first, as if the sweep had removed it: a replica whose sweep has not come yet
 * computes what its head does. */
static void expire(shard *s, uint64_t key, uint32_t v)
{
    float *row = shard_slot_rec(s, v) + KEY_FLOATS;
    if (s->tag > (int64_t)shard_stamp(row, shard_rf(s)) + s->evict_after) {
        init_row(s, key, row);
        s->evicted++;
    }
}

/* Admission on a push of key, which has no row. Returns 1 when the push is
 * dropped (not yet admitted: counted), else 0. */
static int admit(shard *s, uint64_t key)
{
    if (!s->admit_after)
        return 0;
    if (s->admit_after > 1 && !s->replica && cms_add(s->sketch, key) < s->admit_after) {
        s->not_admitted++;
        return 1;
    }
    s->admitted++;
    return 0;
}

/* ftrl, a key (of hash h) with no row: the push is tried on a fresh row (zero
 * weights and state); a result whose weights are all zero is not stored
 * (docs/operations.md, "FTRL and rows that stay zero"). Returns 0 or
 * -PSKV_ENOMEM. */
static int push_new_ftrl(shard *s, uint64_t key, uint64_t h, const float *g, uint64_t *bad)
{
    size_t wd = s->width, rf = core_floats(s); /* the stamp is add_row's */
    float *tmp = s->scratch;
    memset(tmp, 0, rf * sizeof(float));
    upd_apply_planes(&s->upd, tmp, tmp + wd, wd, g, wd, wd);
    if (!upd_all_finite(tmp, rf)) {
        (*bad)++;
        return 0;
    }
    size_t j = 0;
    while (j < wd && tmp[j] == 0.0f)
        j++;
    if (j == wd) {
        s->unstored++;
        return 0;
    }
    float *row = shard_sparse_row(s, key, h);
    if (!row)
        return -PSKV_ENOMEM;
    memcpy(row, tmp, rf * sizeof(float));
    return 0;
}

/* The push pipeline (PIPE) over n keys: one lookup per key, which a key with a
 * row (the common case) needs no other. Returns 0 or -PSKV_ENOMEM. */
static int push_keys(shard *s, const uint64_t *keys, uint64_t n, const float *g, uint64_t *bad)
{
    uint32_t wd = s->width;
    int ftrl = upd_ops_of(s->upd.kind)->closed_form; /* a new key's row may not be stored */
    push_pipe p;
    for (uint64_t k = 0; k < n && k < PREFETCH_FAR; k++)
        pipe_hash(s, &p, keys, k);
    for (uint64_t k = 0; k < n && k < PREFETCH_NEAR; k++)
        pipe_hints(s, &p, k);
    for (uint64_t k = 0; k < n && k < PREFETCH_MID; k++)
        pipe_check(s, &p, keys, k);
    for (uint64_t i = 0; i < n; i++) {
        if (i + PREFETCH_FAR < n)
            pipe_hash(s, &p, keys, i + PREFETCH_FAR);
        if (i + PREFETCH_NEAR < n)
            pipe_hints(s, &p, i + PREFETCH_NEAR);
        if (i + PREFETCH_MID < n)
            pipe_check(s, &p, keys, i + PREFETCH_MID);
        uint64_t key = keys[i], h = p.z[i & (PIPE - 1)];
        size_t slot = 0;
        uint32_t v = pipe_find(s, p.hint[i & (PIPE - 1)], key);
        if (v == EMPTY)
            v = shard_lookup_h(s, key, h, &slot);
        float *row;
        if (v != EMPTY) {
            if (s->evict_after)
                expire(s, key, v);
            row = written_row(s, v);
            if (s->old_slots)
                shard_map_migrate(s, MIGRATE_PER_ROW);
        } else if (admit(s, key)) {
            continue;
        } else if (ftrl) {
            if (push_new_ftrl(s, key, h, g + i * wd, bad) < 0)
                return -PSKV_ENOMEM;
            continue;
        } else if (shard_map_full(s) || s->old_slots) {
            row = shard_sparse_row(s, key, h); /* the map changes first: a lookup of its own */
        } else {
            row = add_row(s, key, slot); /* the map as looked up: slot is key's place */
        }
        if (!row)
            return -PSKV_ENOMEM;
        shard_apply_block(s, row, s->nstate ? row + wd : NULL, wd, g + i * wd, 1, bad);
    }
    return 0;
}

int shard_push_sparse(shard *s, const uint64_t *keys, uint64_t n, const float *g, uint64_t *bad)
{
    int64_t t0 = tu_thread_cpu_ns();
    shard_map_migrate(s, MIGRATE_PER_PUSH);
    int rc = push_keys(s, keys, n, g, bad);
    if (s->old_slots && tu_thread_cpu_ns() - t0 < MIGRATE_QUICK_NS)
        shard_map_migrate(s, MIGRATE_QUICK);
    shard_map_prepare(s, tu_thread_cpu_ns() - t0);
    int64_t took = tu_thread_cpu_ns() - t0;
    s->longest_ns = took > s->longest_ns ? took : s->longest_ns;
    return rc;
}
