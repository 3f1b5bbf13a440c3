/* smerge: followed rows into snapshots (contract in smerge.h). */
#define _GNU_SOURCE
#include "smerge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "grow.h"
#include "log.h"
#include "pskv_errors.h"

#define MAX_DENSE ((uint64_t)1 << 28) /* floats of a dense table pskv-serve takes */

/* One server's latest part of a dense table. */
typedef struct part {
    uint32_t node;
    int64_t clock;
    uint64_t *keys;
    float *vals;
    size_t n;
} part;

typedef struct dtab {
    char name[128];
    uint64_t size;
    uint32_t width;
    int64_t published; /* the clock of its version (-2: none yet) */
    int64_t held;      /* the last clock whose parts were held back, not covering it */
    part *parts;
    size_t nparts, cap;
} dtab;

struct smerge {
    snapstore *st;
    dtab *d;
    size_t nd, dcap;
};

smerge *smerge_new(snapstore *st)
{
    smerge *m = calloc(1, sizeof *m);
    if (m)
        m->st = st;
    return m;
}

static void part_free(part *p)
{
    free(p->keys);
    free(p->vals);
    memset(p, 0, sizeof *p);
}

void smerge_destroy(smerge **self_p)
{
    if (!self_p || !*self_p)
        return;
    smerge *m = *self_p;
    for (size_t i = 0; i < m->nd; i++) {
        for (size_t j = 0; j < m->d[i].nparts; j++)
            part_free(&m->d[i].parts[j]);
        free(m->d[i].parts);
    }
    free(m->d);
    free(m);
    *self_p = NULL;
}

static double wall_now(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL); /* the served version's wall time, for answers only */
    return (double)tv.tv_sec + tv.tv_usec / 1e6;
}

/* The served name (without the namespace) and the model kind it names. */
static void name_kind(snap *s, const char *full)
{
    const char *slash = strchr(full, '/');
    snprintf(s->table, sizeof s->table, "%s", slash ? slash + 1 : full);
    unsigned in = 0, h = 0, out = 0;
    char tail;
    s->kind = SNAP_PLAIN;
    if (!strcmp(s->table, "sparse-lr.w") && s->keys && snap_width(s) == 1) {
        s->kind = SNAP_SPARSE_LR;
        s->out = 1;
    } else if (!s->keys && snap_width(s) == 1 &&
               (sscanf(s->table, "softmax-%u-%u-%u%c", &in, &h, &out, &tail) == 3 ||
                sscanf(s->table, "mlp-%u-%u-%u%c", &in, &h, &out, &tail) == 3) &&
               in && out) {
        uint64_t want = h ? (uint64_t)in * h + h + (uint64_t)h * out + out
                          : (uint64_t)in * out + out;
        if (want == s->n) {
            s->kind = h ? SNAP_MLP : SNAP_SOFTMAX;
            s->in = in;
            s->hidden = h;
            s->out = out;
        }
    }
}

typedef struct kidx {
    uint64_t k;
    size_t i;
} kidx;

/* Sorts ix[0..n) by key, stably (a key twice keeps its rows in arrival order, so
 * the later one wins), with tmp[0..n) as scratch: a least-significant-digit radix
 * sort, 8 bits a pass, that skips the passes on which every key agrees (ids below
 * 2^24 take 3 of 8). The servers send a sync's changed rows in their store's order:
 * a comparison sort of a sync's 10^5 rows cost the reader several milliseconds. */
static void sort_keys(kidx *ix, kidx *tmp, size_t n)
{
    size_t count[8][256];
    memset(count, 0, sizeof count);
    for (size_t i = 0; i < n; i++)
        for (int d = 0; d < 8; d++)
            count[d][(ix[i].k >> (8 * d)) & 255]++;
    kidx *from = ix, *to = tmp;
    for (int d = 0; d < 8; d++) {
        size_t *c = count[d], at = 0;
        if (n == 0 || c[(from[0].k >> (8 * d)) & 255] == n)
            continue; /* every key has this digit */
        for (int b = 0; b < 256; b++) {
            size_t k = c[b];
            c[b] = at;
            at += k;
        }
        for (size_t i = 0; i < n; i++)
            to[c[(from[i].k >> (8 * d)) & 255]++] = from[i];
        kidx *t = from;
        from = to;
        to = t;
    }
    if (from != ix)
        memcpy(ix, from, n * sizeof *ix);
}

/* A new sparse version: the current one's rows with r's merged in (r's win). */
static int merge_sparse(smerge *m, const smerge_rows *r, char *why, size_t whylen)
{
    const char *slash = strchr(r->table, '/');
    snap *old = snap_acquire(m->st, slash ? slash + 1 : r->table);
    if (old && (old->keys == NULL || snap_width(old) != r->width)) {
        snprintf(why, whylen, "table %s: rows of width %u, served with width %u", r->table,
                 r->width, snap_width(old));
        snap_release(m->st, &old);
        return -PSKV_EPROTO;
    }
    size_t w = r->width, on = old ? old->n : 0;
    kidx *ix = malloc((r->n ? r->n : 1) * 2 * sizeof *ix); /* and the sort's scratch */
    snap *s = calloc(1, sizeof *s);
    if (s) {
        s->keys = malloc((on + r->n + 1) * sizeof *s->keys);
        s->vals = malloc((on + r->n + 1) * w * sizeof *s->vals);
    }
    if (!ix || !s || !s->keys || !s->vals) {
        free(ix);
        snap_free(&s);
        snap_release(m->st, &old);
        return -PSKV_ENOMEM;
    }
    for (size_t i = 0; i < r->n; i++)
        ix[i] = (kidx){r->keys[i], i};
    sort_keys(ix, ix + r->n, r->n);
    size_t a = 0, b = 0, n = 0;
    for (;; b++) { /* the old rows before each new key in one copy, then the new row */
        while (b + 1 < r->n && ix[b + 1].k == ix[b].k) /* a key twice: its last row */
            b++;
        size_t run = a;
        while (run < on && (b == r->n || old->keys[run] < ix[b].k))
            run++;
        if (run > a) {
            memcpy(s->keys + n, old->keys + a, (run - a) * sizeof *s->keys);
            memcpy(s->vals + n * w, old->vals + a * w, (run - a) * w * sizeof *s->vals);
        }
        n += run - a;
        a = run;
        if (b == r->n)
            break;
        if (a < on && old->keys[a] == ix[b].k)
            a++; /* replaced */
        s->keys[n] = ix[b].k;
        if (w == 1)
            s->vals[n] = r->vals[ix[b].i];
        else
            memcpy(s->vals + n * w, r->vals + ix[b].i * w, w * sizeof *s->vals);
        n++;
    }
    free(ix);
    s->n = n;
    s->width = r->width;
    s->clock = old && old->clock > r->clock ? old->clock : r->clock;
    s->wall = wall_now();
    name_kind(s, r->table);
    snap_release(m->st, &old);
    return snap_publish(m->st, &s);
}

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* A new sparse version: the current one without r's keys (rows eviction removed). */
static int remove_sparse(smerge *m, const smerge_rows *r)
{
    const char *slash = strchr(r->table, '/');
    snap *old = snap_acquire(m->st, slash ? slash + 1 : r->table);
    if (!old || !old->keys) { /* nothing served (or a dense table: not ours to thin) */
        snap_release(m->st, &old);
        return 0;
    }
    size_t w = snap_width(old), on = old->n;
    uint64_t *gone = malloc((r->n ? r->n : 1) * sizeof *gone);
    snap *s = calloc(1, sizeof *s);
    if (s) {
        s->keys = malloc((on ? on : 1) * sizeof *s->keys);
        s->vals = malloc((on ? on : 1) * w * sizeof *s->vals);
    }
    if (!gone || !s || !s->keys || !s->vals) {
        free(gone);
        snap_free(&s);
        snap_release(m->st, &old);
        return -PSKV_ENOMEM;
    }
    memcpy(gone, r->keys, r->n * sizeof *gone);
    qsort(gone, r->n, sizeof *gone, by_u64);
    size_t n = 0, b = 0;
    for (size_t a = 0; a < on; a++) { /* both ascending: one pass */
        while (b < r->n && gone[b] < old->keys[a])
            b++;
        if (b < r->n && gone[b] == old->keys[a])
            continue;
        s->keys[n] = old->keys[a];
        memcpy(s->vals + n * w, old->vals + a * w, w * sizeof *s->vals);
        n++;
    }
    free(gone);
    s->n = n;
    s->width = old->width;
    s->clock = old->clock > r->clock ? old->clock : r->clock;
    s->wall = wall_now();
    name_kind(s, r->table);
    snap_release(m->st, &old);
    return snap_publish(m->st, &s);
}

static dtab *dense_table(smerge *m, const smerge_rows *r, char *why, size_t whylen)
{
    for (size_t i = 0; i < m->nd; i++) {
        dtab *d = &m->d[i];
        if (strcmp(d->name, r->table))
            continue;
        if (d->size != r->size || d->width != r->width) {
            snprintf(why, whylen, "table %s: size %llu width %u, was %llu x %u", r->table,
                     (unsigned long long)r->size, r->width, (unsigned long long)d->size,
                     d->width);
            return NULL;
        }
        return d;
    }
    if (r->size == 0 || r->width == 0 || r->size > MAX_DENSE / r->width ||
        strlen(r->table) >= sizeof m->d[0].name) {
        snprintf(why, whylen, "table %s: size %llu x width %u is not one pskv-serve holds",
                 r->table, (unsigned long long)r->size, r->width);
        return NULL;
    }
    if (grow_array((void **)&m->d, &m->dcap, m->nd + 1, sizeof *m->d) < 0) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    dtab *d = &m->d[m->nd++];
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", r->table);
    d->size = r->size;
    d->width = r->width;
    d->published = -2;
    d->held = -2;
    return d;
}

/* Keeps r as its server's part of the dense table. */
static int keep_part(smerge *m, const smerge_rows *r, char *why, size_t whylen)
{
    dtab *d = dense_table(m, r, why, whylen);
    if (!d)
        return -PSKV_EPROTO;
    for (size_t i = 0; i < r->n; i++)
        if (r->keys[i] >= d->size) {
            snprintf(why, whylen, "table %s: key %llu outside its size %llu", r->table,
                     (unsigned long long)r->keys[i], (unsigned long long)d->size);
            return -PSKV_EPROTO;
        }
    part np = {r->node, r->clock, malloc((r->n ? r->n : 1) * sizeof *np.keys),
               malloc((r->n ? r->n : 1) * r->width * sizeof *np.vals), r->n};
    if (!np.keys || !np.vals) {
        part_free(&np);
        return -PSKV_ENOMEM;
    }
    memcpy(np.keys, r->keys, r->n * sizeof *np.keys);
    memcpy(np.vals, r->vals, r->n * r->width * sizeof *np.vals);
    for (size_t i = 0; i < d->nparts; i++)
        if (d->parts[i].node == r->node) {
            part_free(&d->parts[i]);
            d->parts[i] = np;
            return 0;
        }
    if (grow_array((void **)&d->parts, &d->cap, d->nparts + 1, sizeof *d->parts) < 0) {
        part_free(&np);
        return -PSKV_ENOMEM;
    }
    d->parts[d->nparts++] = np;
    return 0;
}

int smerge_apply(smerge *m, const smerge_rows *r, char *why, size_t whylen)
{
    if (r->width == 0 || r->width > 65536) {
        snprintf(why, whylen, "table %s: width %u", r->table, r->width);
        return -PSKV_EPROTO;
    }
    if (r->removed)
        return r->dense ? 0 : remove_sparse(m, r);
    return r->dense ? keep_part(m, r, why, whylen) : merge_sparse(m, r, why, whylen);
}

static const part *part_of(const dtab *d, uint32_t node)
{
    for (size_t i = 0; i < d->nparts; i++)
        if (d->parts[i].node == node)
            return &d->parts[i];
    return NULL;
}

/* 1 when d's parts from nodes[0..n) hold every row of the table. Parts of one
 * clock that leave rows out are from before and after a placement change (the
 * rows of a dead server's partitions, not yet sent by their new heads): filled
 * from an older version they would mix two clocks. -PSKV_ENOMEM when out of
 * memory. */
static int covered(const dtab *d, const uint32_t *nodes, size_t n)
{
    unsigned char *has = calloc((size_t)d->size, 1);
    if (!has)
        return -PSKV_ENOMEM;
    uint64_t got = 0;
    for (size_t j = 0; j < n; j++) {
        const part *p = part_of(d, nodes[j]);
        for (size_t i = 0; p && i < p->n; i++) { /* keys < size: checked in keep_part */
            got += !has[p->keys[i]];
            has[p->keys[i]] = 1;
        }
    }
    free(has);
    return got == d->size;
}

/* Publishes d from its parts (they agree on clock and cover the table). */
static int publish_dense(smerge *m, dtab *d, int64_t clock)
{
    snap *s = calloc(1, sizeof *s);
    if (s)
        s->vals = calloc((size_t)d->size * d->width, sizeof *s->vals);
    if (!s || !s->vals) {
        snap_free(&s);
        return -PSKV_ENOMEM;
    }
    /* every row comes from a part of this clock (covered): none from an older version */
    for (size_t i = 0; i < d->nparts; i++) {
        const part *p = &d->parts[i];
        for (size_t j = 0, run; j < p->n; j += run) { /* a server's part: runs of keys */
            for (run = 1; j + run < p->n && p->keys[j + run] == p->keys[j] + run; run++)
                ;
            memcpy(s->vals + p->keys[j] * d->width, p->vals + j * d->width,
                   run * d->width * sizeof *s->vals);
        }
    }
    LOG_D("%s: version at clock %lld from %zu parts", d->name, (long long)clock, d->nparts);
    s->n = (size_t)d->size;
    s->width = d->width;
    s->clock = clock;
    s->wall = wall_now();
    name_kind(s, d->name);
    d->published = clock;
    return snap_publish(m->st, &s);
}

int smerge_dense_publish(smerge *m, const uint32_t *nodes, size_t n, int64_t *hi)
{
    int waiting = 0;
    *hi = -1;
    for (size_t i = 0; i < m->nd; i++) {
        dtab *d = &m->d[i];
        int64_t c = -3;
        int agree = n > 0, missing = 0;
        for (size_t j = 0; j < n; j++) {
            const part *p = part_of(d, nodes[j]);
            if (!p) {
                agree = 0;
                missing = 1;
                continue;
            }
            *hi = p->clock > *hi ? p->clock : *hi;
            if (c == -3)
                c = p->clock;
            else if (p->clock != c)
                agree = 0;
        }
        if (agree && c > d->published && covered(d, nodes, n) == 1 &&
            publish_dense(m, d, c) == 0)
            continue;
        if (agree && c > d->published && d->held != c) {
            d->held = c; /* said once per clock */
            LOG_I("%s: the parts at clock %lld leave rows out (a placement change): not "
                  "served until the new heads' parts come", d->name, (long long)c);
        }
        /* a part missing comes with its server's full copy, whatever the target */
        waiting += (!agree && !missing) || c < d->published;
    }
    return waiting;
}

void smerge_drop_node(smerge *m, uint32_t node)
{
    for (size_t i = 0; i < m->nd; i++) {
        dtab *d = &m->d[i];
        for (size_t j = 0; j < d->nparts; j++)
            if (d->parts[j].node == node) {
                part_free(&d->parts[j]);
                d->parts[j--] = d->parts[--d->nparts];
            }
    }
}

size_t smerge_dense_count(const smerge *m) { return m->nd; }
