/* wkkt: the kkt filter's readings and decisions (contract in wkkt.h). */
#include "wkkt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "pskv_errors.h"
#include "ring.h"

typedef struct ent {
    uint64_t key;
    int64_t seen;   /* floor of the reading held (0: none) */
    int64_t pushed; /* timestamp of this worker's last push of the key (0: none) */
    uint8_t used, zero; /* zero: the reading was all zeros */
} ent;

struct wkkt {
    float band;
    int off;        /* out of memory once: nothing skipped any more */
    ent *slot;
    size_t cap, n;  /* cap a power of two (or 0), n used, at most cap / 2 */
    uint64_t *keys; /* wkkt_filter's scratch: the rows to send */
    float *vals;
    uint8_t *skip;  /* ... which of the rows given it skipped */
    uint64_t *real; /* ... the keys sent with their gradient (wkkt_sent) */
    size_t kcap, vcap, scap, rcap, nreal;
};

wkkt *wkkt_new(float l1, float margin)
{
    wkkt *k = calloc(1, sizeof *k);
    if (k)
        k->band = (1.0f - margin) * l1;
    return k;
}

void wkkt_destroy(wkkt **self_p)
{
    wkkt *k = *self_p;
    if (!k)
        return;
    free(k->slot);
    free(k->keys);
    free(k->vals);
    free(k->skip);
    free(k->real);
    free(k);
    *self_p = NULL;
}

/* The slot holding key, or the empty one where it would go; NULL when none (an
 * empty table). */
static ent *find(const wkkt *k, uint64_t key)
{
    if (!k->cap)
        return NULL;
    size_t mask = k->cap - 1, i = (size_t)ring_mix64(key) & mask;
    while (k->slot[i].used && k->slot[i].key != key)
        i = (i + 1) & mask;
    return &k->slot[i];
}

/* key's entry, inserted when new; NULL when out of memory. */
static ent *get(wkkt *k, uint64_t key)
{
    ent *e = find(k, key);
    if (e && e->used)
        return e;
    if (2 * (k->n + 1) > k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 1024;
        ent *old = k->slot, *grown = calloc(cap, sizeof *grown);
        if (!grown)
            return NULL;
        size_t ocap = k->cap;
        k->slot = grown;
        k->cap = cap;
        for (size_t i = 0; i < ocap; i++)
            if (old[i].used)
                *find(k, old[i].key) = old[i];
        free(old);
        e = find(k, key);
    }
    e->used = 1;
    e->key = key;
    k->n++;
    return e;
}

int wkkt_skip(const wkkt *k, uint64_t key, const float *g, uint32_t width)
{
    const ent *e = find(k, key);
    if (k->off || !e || !e->used || !e->zero || e->seen <= e->pushed)
        return 0;
    for (uint32_t j = 0; j < width; j++)
        if (!(fabsf(g[j]) <= k->band)) /* NaN: sent (the server refuses it) */
            return 0;
    return 1;
}

int wkkt_filter(wkkt *k, const filter_set *fs, const uint64_t *keys, const float *vals,
                size_t n, uint32_t width, const uint64_t **okeys, const float **ovals,
                size_t *on, filter_stats *st)
{
    if (grow_array((void **)&k->keys, &k->kcap, n, sizeof *k->keys) < 0 ||
        grow_array((void **)&k->vals, &k->vcap, n * width, sizeof *k->vals) < 0 ||
        grow_array((void **)&k->skip, &k->scap, n, sizeof *k->skip) < 0 ||
        grow_array((void **)&k->real, &k->rcap, n, sizeof *k->real) < 0)
        return -PSKV_ENOMEM;
    size_t m = 0; /* rows not skipped */
    for (size_t i = 0; i < n; i++) {
        k->skip[i] = (uint8_t)wkkt_skip(k, keys[i], vals + i * width, width);
        m += !k->skip[i];
    }
    /* keycache: a list cut short is a new list, sent in full (8 bytes a key); the
     * whole list, held by the server, costs a signature, and its zeros 4 bytes a
     * row, less once compressed. Measured (docs/benchmarks.md): with lz4, zeros
     * and a cut list cost about the same when few rows go, and a cut list leaves
     * the servers without rows for the keys never pushed: cut below a third. */
    int zero = fs->keycache_mb && 3 * m >= n;
    size_t sent = 0;
    k->nreal = 0;
    for (size_t i = 0; i < n; i++) {
        if (k->skip[i] && !zero && (sent || i + 1 < n))
            continue; /* the last row goes when all others were skipped (a no-op too) */
        k->keys[sent] = keys[i];
        if (k->skip[i] && zero)
            memset(k->vals + sent * width, 0, width * sizeof *vals);
        else
            memcpy(k->vals + sent * width, vals + i * width, width * sizeof *vals);
        if (!k->skip[i])
            k->real[k->nreal++] = keys[i];
        sent++;
    }
    st->kkt_rows += n;
    st->kkt_skipped += n - m;
    st->kkt_zeroed += zero ? n - m : 0;
    *okeys = k->keys;
    *ovals = k->vals;
    *on = sent;
    return 0;
}

void wkkt_pushed(wkkt *k, const uint64_t *keys, size_t n, int64_t ts)
{
    for (size_t i = 0; i < n && !k->off; i++) {
        ent *e = get(k, keys[i]);
        if (!e)
            k->off = 1; /* a push it cannot note: a later stale reading would look new */
        else
            e->pushed = ts;
    }
}

void wkkt_sent(wkkt *k, int64_t ts)
{
    wkkt_pushed(k, k->real, k->nreal, ts);
}

void wkkt_pulled(wkkt *k, const uint64_t *keys, const float *vals, size_t n, uint32_t width,
                 int64_t floor)
{
    for (size_t i = 0; i < n && !k->off; i++) {
        ent *e = get(k, keys[i]);
        if (!e) /* not noted: the key is not known to be zero, which is safe */
            continue;
        if (floor < e->seen)
            continue; /* an older reading answered late */
        int zero = 1;
        for (uint32_t j = 0; j < width; j++)
            zero &= vals[i * width + j] == 0.0f;
        e->seen = floor;
        e->zero = (uint8_t)zero;
    }
}

int64_t wkkt_floor(const pskv_worker *w, int table)
{
    int64_t low = w->next_ts;
    for (int i = 0; i < w->window; i++) {
        const req *r = &w->reqs[i];
        if (r->type == REQ_PUSH && r->table == table && !r->draining_ms && r->ts < low)
            low = r->ts;
    }
    return low;
}
