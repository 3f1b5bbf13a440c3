/* What a shard changed since the last checkpoint (shard.h, "changes since the
 * last checkpoint"): a bit per row, set by every write (push, assign, import;
 * shard.c marks them as it writes, one OR per row), and for a sparse shard the
 * keys of the rows removed since (eviction's tombstones, shard_sweep.c notes
 * them). A delta checkpoint copies the marked rows and the tombstones, then
 * clears both. The tombstones are bounded: past that many the shard says it
 * lost count, and the next checkpoint is a full one. */
#include <stdlib.h>
#include <string.h>

#include "pskv_errors.h"
#include "shard_impl.h"

#define GONE_MIN 65536 /* tombstones kept at least; else as many as rows fit */

void shard_mark_run(shard *s, size_t r, size_t n)
{
    if (!n)
        return;
    size_t end = r + n, w0 = r >> 6, w1 = (end - 1) >> 6;
    uint64_t head = ~0ULL << (r & 63), tail = ~0ULL >> (63 - ((end - 1) & 63));
    for (uint64_t *bits = s->dirty; bits; bits = bits == s->dirty ? s->fdirty : NULL) {
        if (w0 == w1) {
            bits[w0] |= head & tail;
            continue;
        }
        bits[w0] |= head;
        if (w1 > w0 + 1)
            memset(bits + w0 + 1, 0xff, (w1 - w0 - 1) * sizeof *bits);
        bits[w1] |= tail;
    }
}

/* Appends key to a tombstone list (*keys, *n, *cap) bounded by most entries;
 * past that, or out of memory, the list is dropped and *lost set. */
static void tomb_add(uint64_t **keys, size_t *n, size_t *cap, int *lost, size_t most,
                     uint64_t key)
{
    if (*lost)
        return;
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 1024;
        uint64_t *g = c <= most ? realloc(*keys, c * sizeof *g) : NULL;
        if (!g) {
            free(*keys);
            *keys = NULL;
            *n = *cap = 0;
            *lost = 1;
            return;
        }
        *keys = g;
        *cap = c;
    }
    (*keys)[(*n)++] = key;
}

void shard_note_gone(shard *s, uint64_t key)
{
    size_t most = s->rows_cap > GONE_MIN ? s->rows_cap : GONE_MIN;
    /* too many, or no memory: the next checkpoint is a full one */
    tomb_add(&s->gone, &s->ngone, &s->gone_cap, &s->gone_lost, most, key);
    if (s->fdirty) /* followed: the readers drop the row with the next sync */
        tomb_add(&s->fgone, &s->nfgone, &s->fgone_cap, &s->fgone_lost, most, key);
}

static int is_marked(const shard *s, size_t r) { return (s->dirty[r >> 6] >> (r & 63)) & 1; }

uint64_t shard_changed(const shard *s, uint64_t first, uint64_t n, uint64_t *keys, float *rows)
{
    size_t rf = shard_row_floats(s);
    uint64_t k = 0;
    if (s->dense) {
        uint64_t lo = first - s->first, hi = lo + n; /* rows [lo, hi) */
        for (uint64_t r = lo; r < hi; r++) {
            if (!s->dirty[r >> 6]) { /* skip a clean word at once */
                r |= 63;
                continue;
            }
            if (!is_marked(s, (size_t)r))
                continue;
            if (keys) {
                keys[k] = s->first + r;
                shard_export_run(s, s->first + r, 1, rows + k * rf);
            }
            k++;
        }
        return k;
    }
    for (size_t r = 0; r < s->used; r++) {
        if (!s->dirty[r >> 6]) { /* skip a clean word at once */
            r |= 63;
            continue;
        }
        if (!is_marked(s, r))
            continue;
        if (keys) {
            const float *rec = shard_rec(s, (uint32_t)r);
            keys[k] = shard_rec_key(rec);
            memcpy(rows + k * rf, rec + KEY_FLOATS, rf * sizeof(float));
        }
        k++;
    }
    return k;
}

int64_t shard_removed(const shard *s, const uint64_t **keys)
{
    *keys = s->gone;
    return s->gone_lost ? -1 : (int64_t)s->ngone;
}

void shard_changes_reset(shard *s)
{
    if (s->dirty)
        memset(s->dirty, 0, shard_dirty_bytes(s));
    s->ngone = 0;
    s->gone_lost = 0;
}

/* ---- changes since the last sync to followers (shard.h) ---- */

int shard_follow_on(shard *s)
{
    if (s->fdirty)
        return 0;
    s->fdirty = shard_big_alloc(shard_dirty_bytes(s));
    return s->fdirty ? 0 : -PSKV_ENOMEM;
}

int shard_follow_taken(shard *s, int (*fn)(void *ctx, uint64_t key, const float *row),
                       void *ctx)
{
    if (!s->fdirty)
        return -PSKV_ENOMEM;
    size_t rows = s->dense ? (size_t)s->count : s->used, taken = 0;
    size_t rf = shard_row_floats(s);
    float one[rf ? rf : 1];
    for (size_t w = 0; w * 64 < rows; w++) {
        uint64_t bits = s->fdirty[w];
        if (!bits)
            continue;
        s->fdirty[w] = 0;
        if (!fn) { /* only counted: no row is read */
            if (rows - w * 64 < 64)
                bits &= ~0ULL >> (64 - (rows - w * 64));
            taken += (size_t)__builtin_popcountll(bits);
            continue;
        }
        while (bits) {
            size_t r = w * 64 + (size_t)__builtin_ctzll(bits);
            bits &= bits - 1;
            if (r >= rows)
                break;
            const float *row;
            uint64_t key;
            if (s->dense) {
                key = s->first + r;
                shard_export_run(s, key, 1, one);
                row = one;
            } else {
                const float *rec = shard_rec(s, (uint32_t)r);
                key = shard_rec_key(rec);
                row = rec + KEY_FLOATS;
            }
            taken++;
            if (fn(ctx, key, row) < 0)
                return -PSKV_ENOMEM;
        }
    }
    return (int)(taken > INT32_MAX ? INT32_MAX : taken);
}

int64_t shard_follow_gone(shard *s, int (*fn)(void *ctx, uint64_t key), void *ctx)
{
    if (s->fgone_lost) {
        s->fgone_lost = 0;
        return -PSKV_ENOMEM;
    }
    size_t n = s->nfgone;
    s->nfgone = 0;
    for (size_t i = 0; i < n; i++)
        if (fn(ctx, s->fgone[i]) < 0)
            return -PSKV_ENOMEM;
    return (int64_t)n;
}

int shard_scan(const shard *s, uint64_t *pos, uint64_t max,
               int (*fn)(void *ctx, uint64_t key, const float *row), void *ctx)
{
    uint64_t rows = s->dense ? s->count : s->used;
    uint64_t left = *pos < rows ? rows - *pos : 0;
    uint64_t end = *pos + (max < left ? max : left);
    size_t rf = shard_row_floats(s);
    float one[rf ? rf : 1];
    for (uint64_t r = *pos; r < end; r++) {
        int rc;
        if (s->dense) {
            shard_export_run(s, s->first + r, 1, one);
            rc = fn(ctx, s->first + r, one);
        } else {
            const float *rec = shard_rec(s, (uint32_t)r);
            rc = fn(ctx, shard_rec_key(rec), rec + KEY_FLOATS);
        }
        if (rc < 0)
            return -PSKV_ENOMEM;
    }
    *pos = end > *pos ? end : *pos;
    return *pos >= rows;
}
