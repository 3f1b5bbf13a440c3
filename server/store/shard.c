#include "shard.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cmsketch.h"
#include "pskv_errors.h"
#include "shard_impl.h"
#include "ring.h"
#include "wire.h"

int shard_init_parse(const char *name)
{
    static const char *const names[] = {"zero", "const", "uniform", "normal"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, names[i]))
            return i;
    return -1;
}

static double unit_uniform(uint64_t h) { return (double)(h >> 11) * (1.0 / 9007199254740992.0); }

float shard_init_value(const shard_init *init, uint64_t key, uint32_t j)
{
    uint64_t h = ring_mix64(init->seed ^ ring_mix64(key * 0x9e3779b97f4a7c15ULL + j));
    switch (init->kind) {
    case INIT_ZERO:
        return 0.0f;
    case INIT_CONST:
        return init->scale;
    case INIT_UNIFORM:
        return (float)((2.0 * unit_uniform(h) - 1.0) * init->scale);
    case INIT_NORMAL: {
        double u1 = unit_uniform(h), u2 = unit_uniform(ring_mix64(h + 1));
        if (u1 < 1e-300)
            u1 = 1e-300;
        return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2) * init->scale);
    }
    }
    return 0.0f;
}

static dense_buf *buf_new(size_t n)
{
    dense_buf *b = malloc(sizeof *b);
    float *v = malloc(n ? n * sizeof(float) : 1);
    if (!b || !v) {
        free(b);
        free(v);
        return NULL;
    }
    b->v = v;
    atomic_init(&b->refs, 1);
    for (int i = 0; i < LEND_SLOTS; i++)
        atomic_init(&b->lends[i].live, 0);
    return b;
}

static void buf_release(dense_buf *b)
{
    if (b && atomic_fetch_sub(&b->refs, 1) == 1) {
        free(b->v);
        free(b);
    }
}

/* 1 when a reply still being sent covers a float of [lo, hi). A lend that ends
 * meanwhile (the I/O thread clears `live`) no longer reads the buffer. */
static int lent_overlaps(dense_buf *b, size_t lo, size_t hi)
{
    for (int i = 0; i < LEND_SLOTS; i++) {
        dense_lend *l = &b->lends[i];
        if (atomic_load_explicit(&l->live, memory_order_acquire) && l->lo < hi && lo < l->hi)
            return 1;
    }
    return 0;
}

/* Makes the caller free to write floats [skip, skip + nskip) of a dense shard
 * (nskip = 0: any float). When no reply still being sent covers them, they are
 * written in place; else the shard moves to a fresh buffer: the floats outside
 * [skip, skip + nskip) are copied, the caller writes the others (nskip = 0: all
 * copied). With `old` the caller gets the lent buffer to read the rest from and
 * releases it (buf_release); else it is released here. Returns 0 (*old NULL when
 * nothing moved) or -PSKV_ENOMEM. */
static int own_dense(shard *s, size_t skip, size_t nskip, dense_buf **old)
{
    if (old)
        *old = NULL;
    if (atomic_load(&s->buf->refs) == 1 ||
        (nskip && !lent_overlaps(s->buf, skip, skip + nskip)))
        return 0;
    size_t n = (size_t)s->count * s->width;
    dense_buf *b = buf_new(n);
    if (!b)
        return -PSKV_ENOMEM;
    memcpy(b->v, s->w, skip * sizeof(float));
    memcpy(b->v + skip + nskip, s->w + skip + nskip, (n - skip - nskip) * sizeof(float));
    s->moves++;
    if (old)
        *old = s->buf;
    else
        buf_release(s->buf);
    s->buf = b;
    s->w = b->v;
    return 0;
}

shard *shard_new(int dense, uint64_t first, uint64_t count, uint64_t begin, uint64_t end,
                 uint32_t width, const upd_opts *upd, const shard_init *init)
{
    shard *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->dense = dense;
    s->width = width;
    s->upd = *upd;
    s->nstate = upd_state_per_value(upd);
    s->checked = upd_may_fail(upd);
    s->init = *init;
    if (s->checked) {
        size_t blk = width > BLOCK ? width : BLOCK;
        s->scratch = malloc(blk * (1 + (size_t)s->nstate) * sizeof(float));
        if (!s->scratch) {
            free(s);
            return NULL;
        }
    }
    s->begin = begin;
    s->end = end;
    if (dense) {
        s->first = first;
        s->count = count;
        size_t n = (size_t)count * width;
        s->buf = buf_new(n);
        s->w = s->buf ? s->buf->v : NULL;
        s->state = s->nstate ? calloc(n ? n * (size_t)s->nstate : 1, sizeof(float)) : NULL;
        s->dirty = shard_big_alloc(shard_dirty_bytes(s));
        if (!s->w || (s->nstate && !s->state) || !s->dirty) {
            shard_destroy(&s);
            return NULL;
        }
        for (uint64_t i = 0; i < count; i++)
            for (uint32_t j = 0; j < width; j++)
                s->w[i * width + j] = shard_init_value(init, first + i, j);
    }
    return s;
}

void shard_destroy(shard **s_p)
{
    if (!s_p || !*s_p)
        return;
    shard *s = *s_p;
    buf_release(s->buf); /* replies still being sent keep theirs */
    free(s->state);
    free(s->scratch);
    shard_big_free(s->slots, s->cap * sizeof *s->slots);
    shard_big_free(s->old_slots, s->old_cap * sizeof *s->old_slots);
    shard_big_free(s->next_slots, s->next_cap * sizeof *s->next_slots);
    shard_big_free(s->fdirty, shard_dirty_bytes(s));
    shard_big_free(s->dirty, shard_dirty_bytes(s));
    shard_big_free(s->rows, s->rows_cap * shard_rec_floats(s) * sizeof(float));
    free(s->gone);
    free(s->fgone);
    cms_destroy(&s->sketch);
    free(s);
    *s_p = NULL;
}

int shard_owns_key(const shard *s, uint64_t key)
{
    if (s->dense)
        return key >= s->first && key - s->first < s->count;
    uint64_t pos = ring_mix64(key);
    return pos >= s->begin && pos <= s->end;
}

int shard_owns_run(const shard *s, uint64_t first, uint64_t n)
{
    return s->dense && first >= s->first && first - s->first <= s->count &&
           n <= s->count - (first - s->first);
}

void shard_update_stats(const shard *s, uint64_t *bad_rows, uint64_t *unstored)
{
    *bad_rows = s->bad_rows;
    *unstored = s->unstored;
}

int64_t shard_longest_push_ns(const shard *s) { return s->longest_ns; }

void shard_lend_stats(const shard *s, uint64_t *lends, uint64_t *moves)
{
    *lends = s->lends;
    *moves = s->moves;
}

int shard_grow_step(shard *s, size_t budget)
{
    if (s->dense || !s->old_slots)
        return 0;
    shard_map_migrate(s, budget); /* frees the old map after its last row */
    return s->old_slots != NULL;
}

uint64_t shard_size(const shard *s) { return s->dense ? s->count : s->used; }

const float *shard_dense_values(const shard *s) { return s->w; }

void shard_set_lr(shard *s, float lr) { s->upd.lr = lr; }

float shard_lr(const shard *s) { return s->upd.lr; }

const float *shard_lend(shard *s, uint64_t first, uint64_t n, void **token)
{
    dense_buf *b = s->buf;
    for (int i = 0; i < LEND_SLOTS; i++) {
        dense_lend *l = &b->lends[i];
        if (atomic_load_explicit(&l->live, memory_order_acquire))
            continue;
        l->lo = (size_t)(first - s->first) * s->width;
        l->hi = l->lo + (size_t)n * s->width;
        l->buf = b;
        atomic_fetch_add(&b->refs, 1);
        atomic_store_explicit(&l->live, 1, memory_order_release);
        s->lends++;
        *token = l;
        return b->v + l->lo;
    }
    return NULL;
}

void shard_lend_end(void *data, void *token)
{
    (void)data;
    wire_frame_returned(token);
    dense_lend *l = token;
    dense_buf *b = l->buf; /* read before the slot is free for the next lend */
    atomic_store_explicit(&l->live, 0, memory_order_release);
    buf_release(b);
}
uint64_t shard_dense_first(const shard *s) { return s->first; }
uint64_t shard_dense_count(const shard *s) { return s->count; }

void shard_foreach(const shard *s, void (*fn)(void *ctx, uint64_t key, const float *row),
                   void *ctx)
{
    if (s->dense) {
        for (uint64_t i = 0; i < s->count; i++)
            fn(ctx, s->first + i, s->w + i * s->width);
        return;
    }
    for (size_t r = 0; r < s->used; r++) {
        const float *rec = shard_rec(s, (uint32_t)r);
        fn(ctx, shard_rec_key(rec), rec + KEY_FLOATS);
    }
}

void shard_clear(shard *s)
{
    s->gone_lost = 1; /* an accumulator's: never checkpointed, but say so */
    if (s->dense) {
        size_t n = (size_t)s->count * s->width;
        if (own_dense(s, 0, n, NULL) < 0) /* lent: a fresh buffer, nothing to copy */
            return;
        memset(s->w, 0, n * sizeof(float));
        if (s->state)
            memset(s->state, 0, n * (size_t)s->nstate * sizeof(float));
        return;
    }
    shard_map_migrate(s, SIZE_MAX); /* frees the old map */
    if (s->cap)
        memset(s->slots, 0, s->cap * sizeof *s->slots);
    s->used = 0;
}

/* ---- sparse map ---------------------------------------------------------- */

static const float *sparse_find(const shard *s, uint64_t key)
{
    uint32_t v = shard_lookup(s, key, NULL);
    return v == EMPTY ? NULL : shard_slot_rec(s, v) + KEY_FLOATS;
}

/* ---- push / pull --------------------------------------------------------- */

/* Applies g to nrows rows at w (state planes at st, stride apart), saving them
 * first and restoring each row whose values or state come out NaN or infinite.
 * Returns the rows restored. */
static uint64_t apply_checked(shard *s, float *w, float *st, size_t stride, const float *g,
                              size_t nrows)
{
    size_t wd = s->width, len = nrows * wd, ns = (size_t)s->nstate;
    float *save = s->scratch;
    memcpy(save, w, len * sizeof(float));
    for (size_t k = 0; k < ns; k++)
        memcpy(save + (1 + k) * len, st + k * stride, len * sizeof(float));
    upd_apply_planes(&s->upd, w, ns ? st : NULL, stride, g, len, wd);
    int ok = upd_all_finite(w, len);
    for (size_t k = 0; k < ns && ok; k++)
        ok = upd_all_finite(st + k * stride, len);
    if (ok)
        return 0;
    uint64_t bad = 0;
    for (size_t r = 0; r < nrows; r++) {
        size_t o = r * wd;
        int rok = upd_all_finite(w + o, wd);
        for (size_t k = 0; k < ns && rok; k++)
            rok = upd_all_finite(st + k * stride + o, wd);
        if (rok)
            continue;
        bad++;
        memcpy(w + o, save + o, wd * sizeof(float));
        for (size_t k = 0; k < ns; k++)
            memcpy(st + k * stride + o, save + (1 + k) * len + o, wd * sizeof(float));
    }
    return bad;
}

void shard_apply_block(shard *s, float *w, float *st, size_t stride, const float *g,
                       size_t nrows, uint64_t *bad)
{
    if (s->checked)
        *bad += apply_checked(s, w, st, stride, g, nrows);
    else
        upd_apply_planes(&s->upd, w, st, stride, g, nrows * s->width, s->width);
}

/* A dense run from `first`, block by block (whole rows) when the shard moves off
 * a lent buffer (each block copied then updated while in cache) or the rows are
 * saved for a NaN check; else one call. */
static int push_run(shard *s, uint64_t first, uint64_t n, const float *g, uint64_t *bad)
{
    size_t wd = s->width, off = (size_t)(first - s->first) * wd, len = (size_t)n * wd;
    size_t plane = (size_t)s->count * wd;
    float *st = s->state ? s->state + off : NULL;
    dense_buf *old;
    if (own_dense(s, off, len, &old) < 0)
        return -PSKV_ENOMEM;
    shard_mark_run(s, (size_t)(first - s->first), (size_t)n);
    if (!old && !s->checked) {
        upd_apply_planes(&s->upd, s->w + off, st, plane, g, len, wd);
        return 0;
    }
    size_t blk = (BLOCK / wd ? BLOCK / wd : 1) * wd;
    for (size_t b = 0; b < len; b += blk) {
        size_t m = len - b < blk ? len - b : blk;
        if (old)
            memcpy(s->w + off + b, old->v + off + b, m * sizeof(float));
        shard_apply_block(s, s->w + off + b, st ? st + b : NULL, plane, g + b, m / wd, bad);
    }
    if (old)
        buf_release(old);
    return 0;
}

int shard_push(shard *s, const uint64_t *keys, uint64_t first, uint64_t n, const float *g)
{
    uint32_t wd = s->width;
    uint64_t bad = 0;
    if (s->dense && !keys) {
        int rc = push_run(s, first, n, g, &bad);
        if (rc < 0)
            return rc;
    } else if (s->dense) {
        if (own_dense(s, 0, 0, NULL) < 0)
            return -PSKV_ENOMEM;
        size_t plane = (size_t)s->count * wd;
        for (uint64_t i = 0; i < n; i++) {
            size_t off = (size_t)(keys[i] - s->first) * wd;
            shard_mark(s, (size_t)(keys[i] - s->first));
            shard_apply_block(s, s->w + off, s->state ? s->state + off : NULL, plane, g + i * wd, 1,
                       &bad);
        }
    } else {
        int rc = shard_push_sparse(s, keys, n, g, &bad);
        if (rc < 0)
            return rc;
    }
    s->bad_rows += bad;
    return bad ? -PSKV_EBADVALUE : 0;
}

int shard_assign(shard *s, const uint64_t *keys, uint64_t first, uint64_t n, const float *v)
{
    uint32_t wd = s->width;
    size_t row = wd * sizeof(float), plane = (size_t)s->count * wd;
    if (s->dense && !keys) { /* a run: one copy (a lent buffer moves, the run not copied) */
        size_t r = (size_t)(first - s->first), off = r * wd, len = (size_t)n * wd;
        if (own_dense(s, off, len, NULL) < 0)
            return -PSKV_ENOMEM;
        shard_mark_run(s, r, (size_t)n);
        memcpy(s->w + off, v, len * sizeof(float));
        for (int k = 0; k < s->nstate; k++)
            memset(s->state + k * plane + off, 0, len * sizeof(float));
        return 0;
    }
    if (s->dense && own_dense(s, 0, 0, NULL) < 0)
        return -PSKV_ENOMEM;
    for (uint64_t i = 0; i < n; i++) {
        if (s->dense) {
            size_t r = (size_t)((keys ? keys[i] : first + i) - s->first), off = r * wd;
            shard_mark(s, r);
            memcpy(s->w + off, v + i * wd, row);
            for (int k = 0; k < s->nstate; k++)
                memset(s->state + k * plane + off, 0, row);
        } else {
            float *w = shard_sparse_row(s, keys[i], shard_hash(keys[i]));
            if (!w)
                return -PSKV_ENOMEM;
            memcpy(w, v + i * wd, row);
            memset(w + wd, 0, row * (size_t)s->nstate);
        }
    }
    return 0;
}

void shard_pull(const shard *s, const uint64_t *keys, uint64_t first, uint64_t n, float *out)
{
    uint32_t wd = s->width;
    if (s->dense) {
        if (!keys) {
            memcpy(out, s->w + (size_t)(first - s->first) * wd, (size_t)n * wd * sizeof(float));
            return;
        }
        for (uint64_t i = 0; i < n; i++)
            memcpy(out + i * wd, s->w + (size_t)(keys[i] - s->first) * wd, wd * sizeof(float));
        return;
    }
    for (uint64_t i = 0; i < n; i++) {
        const float *row = sparse_find(s, keys[i]);
        if (row)
            memcpy(out + i * wd, row, wd * sizeof(float));
        else
            for (uint32_t j = 0; j < wd; j++)
                out[i * wd + j] = shard_init_value(&s->init, keys[i], j);
    }
}

/* ---- row sets, export and import ------------------------------------------ */

int shard_push_rows(shard *s, const rowset *rs, const float *g)
{
    if (rs->keys || !rs->segs)
        return shard_push(s, rs->keys, rs->first, rs->n, g);
    for (size_t i = 0, at = 0; i < rs->nsegs; at += rs->segs[2 * i + 1], i++)
        if (shard_push(s, NULL, rs->segs[2 * i], rs->segs[2 * i + 1], g + at * s->width) < 0)
            return -PSKV_ENOMEM;
    return 0;
}

int shard_assign_rows(shard *s, const rowset *rs, const float *v)
{
    if (rs->keys || !rs->segs)
        return shard_assign(s, rs->keys, rs->first, rs->n, v);
    for (size_t i = 0, at = 0; i < rs->nsegs; at += rs->segs[2 * i + 1], i++)
        if (shard_assign(s, NULL, rs->segs[2 * i], rs->segs[2 * i + 1], v + at * s->width) < 0)
            return -PSKV_ENOMEM;
    return 0;
}

void shard_pull_rows(const shard *s, const rowset *rs, float *out)
{
    if (rs->keys || !rs->segs) {
        shard_pull(s, rs->keys, rs->first, rs->n, out);
        return;
    }
    for (size_t i = 0, at = 0; i < rs->nsegs; at += rs->segs[2 * i + 1], i++)
        shard_pull(s, NULL, rs->segs[2 * i], rs->segs[2 * i + 1], out + at * s->width);
}

size_t shard_row_floats(const shard *s) { return shard_rf(s); }

/* Dense row i (from s->first) as exported: its values, then its value of each
 * state plane. */
static void dense_row_out(const shard *s, uint64_t i, float *dst)
{
    size_t wd = s->width, off = (size_t)i * wd, plane = (size_t)s->count * wd;
    memcpy(dst, s->w + off, wd * sizeof(float));
    for (int k = 0; k < s->nstate; k++)
        memcpy(dst + (1 + k) * wd, s->state + k * plane + off, wd * sizeof(float));
}

static void dense_row_in(shard *s, uint64_t i, const float *src)
{
    size_t wd = s->width, off = (size_t)i * wd, plane = (size_t)s->count * wd;
    memcpy(s->w + off, src, wd * sizeof(float));
    for (int k = 0; k < s->nstate; k++)
        memcpy(s->state + k * plane + off, src + (1 + k) * wd, wd * sizeof(float));
}

uint64_t shard_export(const shard *s, int (*keep)(void *ctx, uint64_t key), void *ctx,
                      uint64_t *keys, float *rows)
{
    size_t rf = shard_rf(s);
    uint64_t n = 0;
    if (s->dense) {
        for (uint64_t i = 0; i < s->count; i++) {
            uint64_t key = s->first + i;
            if (keep && !keep(ctx, key))
                continue;
            if (keys) {
                keys[n] = key;
                dense_row_out(s, i, rows + n * rf);
            }
            n++;
        }
        return n;
    }
    for (size_t r = 0; r < s->used; r++) {
        const float *rec = shard_rec(s, (uint32_t)r);
        uint64_t key = shard_rec_key(rec);
        if (keep && !keep(ctx, key))
            continue;
        if (keys) {
            keys[n] = key;
            memcpy(rows + n * rf, rec + KEY_FLOATS, rf * sizeof(float));
        }
        n++;
    }
    return n;
}

int shard_import(shard *s, const uint64_t *keys, uint64_t first, uint64_t n, const float *rows)
{
    size_t rf = shard_rf(s);
    if (s->dense && own_dense(s, 0, 0, NULL) < 0)
        return -PSKV_ENOMEM;
    for (uint64_t i = 0; i < n; i++) {
        const float *src = rows + i * rf;
        if (s->dense) {
            uint64_t r = (keys ? keys[i] : first + i) - s->first;
            shard_mark(s, (size_t)r);
            dense_row_in(s, r, src);
        } else {
            float *row = shard_sparse_row(s, keys[i], shard_hash(keys[i]));
            if (!row)
                return -PSKV_ENOMEM;
            memcpy(row, src, rf * sizeof(float));
        }
    }
    return 0;
}

uint64_t shard_retain(shard *s, int (*keep)(void *ctx, uint64_t key), void *ctx)
{
    if (s->dense)
        return 0;
    size_t r = 0, had = s->used, rec = shard_rec_floats(s) * sizeof(float);
    while (r < had && keep(ctx, shard_rec_key(shard_rec(s, (uint32_t)r))))
        r++;
    if (r == had)
        return 0;
    /* the records kept close up in place (row numbers change: the map is built
     * again), as marked as an import would leave them */
    size_t kept = r;
    for (; r < had; r++) {
        const float *src = shard_rec(s, (uint32_t)r);
        if (!keep(ctx, shard_rec_key(src)))
            continue;
        memcpy(shard_rec(s, (uint32_t)kept), src, rec);
        shard_mark(s, kept++);
    }
    s->used = kept;
    s->gone_lost = 1; /* the keys let go have no tombstones: the next checkpoint is full */
    shard_map_rebuild(s);
    return had - kept;
}

void shard_export_run(const shard *s, uint64_t first, uint64_t n, float *rows)
{
    size_t rf = shard_rf(s);
    for (uint64_t i = 0; i < n; i++)
        dense_row_out(s, first + i - s->first, rows + i * rf);
}
