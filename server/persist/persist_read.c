/* Reading a server's checkpoint files back (persist.h): the scan at start-up,
 * which reports a delta only when every file it builds on is there and valid,
 * and the load of a resumed job, which checks every file of a chain (the full
 * file it starts at and each delta after it) before it applies any, then
 * applies them oldest first: rows from each, tombstones removing rows, and
 * the dedupe records, clocks and bsp clocks of the newest file only (each file
 * holds them whole). */
#define _GNU_SOURCE
#include "persist.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "ckptrec.h"
#include "log.h"
#include "pskv_errors.h"
#include "ring.h"
#include "store/nspace.h"
#include "timeutil.h"

typedef ckptrec_hdr hdr;
typedef ckptrec_rows rows;

/* ---- loading ------------------------------------------------------------------ */

typedef struct load_ctx {
    uint64_t job, seq;
    uint32_t node, nparts;
    const uint8_t *parts; /* the partitions to take (NULL: all) */
    const char *ns;       /* only this namespace's tables, no state (NULL: all) */
    uint32_t skip_tag;    /* keys of another namespace's table: their rows are skipped too */
    table_set *ts;
    chain *c;
    consist *cons;
    persist_clocks *clocks;
    int top;           /* the newest file of the chain: its dedupe, clocks and bsp count */
    int have_hdr;
    uint32_t pending_tag; /* REC_SPARSE or REC_DENSE_AT keys wait for their rows */
    rows pending;
    uint64_t *keys;
    char *why;
    size_t whylen;
    uint64_t nrows;
} load_ctx;

/* Options of a table: created (or checked against the one there). */
static int on_table(load_ctx *l, const void *data, uint64_t len)
{
    if (len < 8) {
        snprintf(l->why, l->whylen, "short table record");
        return -PSKV_EPROTO;
    }
    uint64_t id;
    memcpy(&id, data, 8);
    Pskv__TableOptions *o = pskv__table_options__unpack(NULL, len - 8, (const uint8_t *)data + 8);
    if (!o) {
        snprintf(l->why, l->whylen, "table options do not decode");
        return -PSKV_EPROTO;
    }
    char ns[NSPACE_MAX + 1];
    nspace_of(o->name ? o->name : "", ns);
    int rc = l->ns && strcmp(ns, l->ns) ? 0 /* another namespace's */
                                        : tables_open(l->ts, id, o, 0, UINT64_MAX, l->why, l->whylen);
    pskv__table_options__free_unpacked(o, NULL);
    return rc;
}

/* 1 when a record of table `id` is to be skipped: a namespace's load, and the
 * table is of another namespace (tables of it may be live here: they are not
 * touched). */
static int other_ns(const load_ctx *l, uint64_t id)
{
    const table *t = l->ns ? tables_find(l->ts, id) : NULL;
    return l->ns && (!t || strcmp(t->ns, l->ns));
}

/* A namespace's load: 1 when this rows or tombstone record is another
 * namespace's (keys of one: their rows record is skipped with them). */
static int skip_record(load_ctx *l, uint32_t tag, const void *data, uint64_t len)
{
    if (!l->ns || len < 8)
        return 0;
    if (l->skip_tag) {
        int same = tag == l->skip_tag;
        l->skip_tag = 0;
        if (same)
            return 1; /* the rows of the keys skipped */
    }
    if (l->keys)
        return 0; /* the rows of keys taken */
    uint64_t id;
    memcpy(&id, data, 8);
    if (!other_ns(l, id))
        return 0;
    if (tag == REC_SPARSE || tag == REC_DENSE_AT)
        l->skip_tag = tag;
    return 1;
}

/* 1 when key k of t (a dense row index or a sparse key) is in a partition to take. */
static int wanted(const load_ctx *l, const table *t, uint64_t k)
{
    if (!l->parts)
        return 1;
    uint64_t pos = t->dense ? ring_dense_pos(k, t->size) : ring_mix64(k);
    return l->parts[ring_partition_of(pos, l->nparts)];
}

/* Dense rows [first, first + n) of t (rows of rf floats at body), only those of
 * the partitions wanted. */
static int import_dense(load_ctx *l, table *t, uint64_t first, uint64_t n, const float *body)
{
    if (!l->parts) {
        l->nrows += n;
        return shard_import(t->sh, NULL, first, n, body);
    }
    size_t rf = shard_row_floats(t->sh);
    ring_run it;
    uint32_t p;
    uint64_t lo, hi;
    ring_run_init(&it, first, first + n, t->size, l->nparts);
    while (ring_run_next(&it, &p, &lo, &hi)) {
        if (!l->parts[p])
            continue;
        l->nrows += hi - lo;
        int rc = shard_import(t->sh, NULL, lo, hi - lo, body + (lo - first) * rf);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* The next run of keys k[*at ..] (n in all) in the partitions wanted: keys
 * [*from, *at) after the call; 0 when none is left. */
static int next_wanted(const load_ctx *l, const table *t, const uint64_t *k, uint64_t n,
                       uint64_t *at, uint64_t *from)
{
    while (*at < n && !wanted(l, t, k[*at]))
        (*at)++;
    *from = *at;
    while (*at < n && wanted(l, t, k[*at]))
        (*at)++;
    return *at > *from;
}

/* The pending keys (sparse keys, or a delta's dense indices) with their rows,
 * only those of the partitions wanted, a run of them at a time. */
static int import_keyed(load_ctx *l, table *t, const float *vals)
{
    size_t rf = shard_row_floats(t->sh);
    uint64_t at = 0, from;
    while (next_wanted(l, t, l->keys, l->pending.n, &at, &from)) {
        l->nrows += at - from;
        int rc = shard_import(t->sh, l->keys + from, 0, at - from, vals + from * rf);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* The rows of the keys of the record before (sparse keys, or a delta's dense
 * indices). */
static int on_keyed_rows(load_ctx *l, uint32_t tag, const void *data, uint64_t len)
{
    table *t = tables_find(l->ts, l->pending.table_id);
    if (!t || tag != l->pending_tag ||
        len != l->pending.n * l->pending.rowfloats * sizeof(float)) {
        snprintf(l->why, l->whylen, "rows do not match their keys");
        return -PSKV_EPROTO;
    }
    for (uint64_t i = 0; t->dense && i < l->pending.n; i++)
        if (l->keys[i] >= t->size) {
            snprintf(l->why, l->whylen, "dense row %" PRIu64 " outside table '%s'", l->keys[i],
                     t->name);
            return -PSKV_EPROTO;
        }
    int rc = import_keyed(l, t, data);
    free(l->keys);
    l->keys = NULL;
    return rc;
}

static int on_rows(load_ctx *l, uint32_t tag, const void *data, uint64_t len)
{
    if (l->keys)
        return on_keyed_rows(l, tag, data, len);
    rows h;
    if (len < sizeof h) {
        snprintf(l->why, l->whylen, "short rows record");
        return -PSKV_EPROTO;
    }
    memcpy(&h, data, sizeof h);
    table *t = tables_find(l->ts, h.table_id);
    if (!t || h.rowfloats != shard_row_floats(t->sh) || t->dense != (tag != REC_SPARSE)) {
        snprintf(l->why, l->whylen, "rows of an unknown table or of another row width");
        return -PSKV_EPROTO;
    }
    const uint8_t *body = (const uint8_t *)data + sizeof h;
    uint64_t blen = len - sizeof h;
    if (tag == REC_DENSE) {
        if (h.first > t->size || h.n > t->size - h.first ||
            blen != h.n * h.rowfloats * sizeof(float)) {
            snprintf(l->why, l->whylen, "dense rows outside table '%s'", t->name);
            return -PSKV_EPROTO;
        }
        return import_dense(l, t, h.first, h.n, (const float *)(const void *)body);
    }
    if (blen != h.n * sizeof(uint64_t)) {
        snprintf(l->why, l->whylen, "keys of the wrong size");
        return -PSKV_EPROTO;
    }
    l->keys = malloc((h.n ? h.n : 1) * sizeof *l->keys);
    if (!l->keys)
        return -PSKV_ENOMEM;
    memcpy(l->keys, body, h.n * sizeof *l->keys);
    l->pending = h;
    l->pending_tag = tag;
    return 0;
}

static int on_tombstones(load_ctx *l, const void *data, uint64_t len)
{
    uint64_t id;
    table *t = NULL;
    if (len >= 8 && len % 8 == 0) {
        memcpy(&id, data, 8);
        t = tables_find(l->ts, id);
    }
    if (!t) {
        snprintf(l->why, l->whylen, "removed rows of an unknown table or of one without eviction");
        return -PSKV_EPROTO;
    }
    const uint64_t *k = (const uint64_t *)data + 1;
    uint64_t n = len / 8 - 1;
    uint64_t at = 0, from;
    while (next_wanted(l, t, k, n, &at, &from)) {
        if (shard_remove(t->sh, k + from, at - from) < 0) {
            snprintf(l->why, l->whylen,
                     "removed rows of an unknown table or of one without eviction");
            return -PSKV_EPROTO;
        }
    }
    return 0;
}

/* The records every file has whole: applied from the newest file only. */
static int on_state(load_ctx *l, uint32_t tag, const void *data, uint64_t len)
{
    if (tag == REC_DEDUPE) {
        uint64_t p;
        if (len < 8)
            return -PSKV_EPROTO;
        memcpy(&p, data, 8);
        if (p >= l->nparts || (l->parts && !l->parts[p]))
            return 0; /* another partitioning, or not this server's to load */
        return chain_dedupe_import(l->c, l->nparts, (uint32_t)p, (const uint8_t *)data + 8,
                                   len - 8) < 0 ? -PSKV_EPROTO : 0;
    }
    if (tag == REC_CLOCKS) {
        l->clocks->nranks = (int)(len / sizeof(int64_t));
        l->clocks->vc = malloc(len ? len : 1);
        if (!l->clocks->vc)
            return -PSKV_ENOMEM;
        memcpy(l->clocks->vc, data, len);
        return 0;
    }
    if (tag == REC_BSP && len == 16) {
        const int64_t *b = data;
        table *t = tables_find(l->ts, (uint64_t)b[0]);
        if (t)
            consist_restore_bsp(l->cons, t, b[1]);
    }
    return 0;
}

static int on_record(void *ctx, uint32_t tag, const void *data, uint64_t len)
{
    load_ctx *l = ctx;
    if (tag == REC_HEADER) {
        const hdr *h = data;
        if (len != sizeof *h || h->job != l->job || h->seq != l->seq || h->node != l->node) {
            snprintf(l->why, l->whylen, "header names another job, checkpoint or node");
            return -PSKV_EPROTO;
        }
        l->have_hdr = 1;
        return 0;
    }
    if (!l->have_hdr) {
        snprintf(l->why, l->whylen, "no header record");
        return -PSKV_EPROTO;
    }
    if (l->keys && tag != l->pending_tag) {
        snprintf(l->why, l->whylen, "keys without their rows");
        return -PSKV_EPROTO;
    }
    if ((tag == REC_DENSE || tag == REC_SPARSE || tag == REC_DENSE_AT || tag == REC_TOMB) &&
        skip_record(l, tag, data, len))
        return 0;
    switch (tag) {
    case REC_TABLE:
        return on_table(l, data, len);
    case REC_DENSE:
    case REC_SPARSE:
    case REC_DENSE_AT:
        return on_rows(l, tag, data, len);
    case REC_TOMB:
        return on_tombstones(l, data, len);
    case REC_DEDUPE:
    case REC_CLOCKS:
    case REC_BSP:
        return l->top && !l->ns ? on_state(l, tag, data, len) : 0;
    default:
        return 0; /* the delta record (read before), or a record of a later version */
    }
}

int persist_load(const char *dir, uint64_t job, uint64_t seq, uint32_t old, uint32_t nparts,
                 const uint8_t *parts, const char *ns, table_set *ts, chain *c, consist *cons,
                 persist_clocks *clocks, char *why, size_t whylen)
{
    memset(clocks, 0, sizeof *clocks);
    int64_t t0 = tu_now_ms();
    uint64_t *seqs, nrows = 0;
    int n = ckptrec_chain(dir, job, seq, old, &seqs, why, whylen), rc = n < 0 ? n : 0;
    char path[4200] = "";
    for (int i = n - 1; rc == 0 && i >= 0; i--) { /* the full file first */
        char inner[300] = "";
        snprintf(path, sizeof path, "%s/" CKPTREC_NAME_FMT, dir, job, seqs[i], old);
        load_ctx l = {.job = job, .seq = seqs[i], .node = old, .nparts = nparts, .parts = parts,
                      .ns = ns, .ts = ts, .c = c, .cons = cons, .clocks = clocks, .top = i == 0,
                      .why = inner, .whylen = sizeof inner};
        rc = ckpt_read(path, on_record, &l, why, whylen);
        free(l.keys);
        if (rc < 0 && inner[0])
            snprintf(why, whylen, "%s: %s", path, inner);
        nrows += l.nrows;
    }
    uint64_t held = 0; /* rows stored now: what the deltas' tombstones left */
    for (size_t i = 0; i < tables_count(ts); i++)
        held += shard_size(tables_at(ts, i)->sh);
    char chain_of[128] = "";
    if (n > 1)
        snprintf(chain_of, sizeof chain_of, " (a delta: the full checkpoint %" PRIu64
                 " and %d deltas)", seqs[n - 1], n - 1);
    if (rc == 0)
        LOG_I("loaded checkpoint %" PRIu64 " from %s%s: %zu tables, %" PRIu64 " rows read, %"
              PRIu64 " held, in %lld ms", seq, path, chain_of, tables_count(ts), nrows, held,
              (long long)(tu_now_ms() - t0));
    free(seqs);
    return rc;
}

/* ---- scanning ----------------------------------------------------------------- */

typedef struct found {
    uint64_t job, seq;
    unsigned node;
    int valid;         /* verified whole */
    int usable;        /* -1 not known yet, 0 refused, 1 reported */
    int delta;
    uint64_t prev;
    char name[256];
} found;

/* 1 when file i can be loaded: valid, and a full file or a delta over a usable
 * file of the same job and node; a delta over a missing or refused file is
 * logged, naming it. */
static int usable(const char *dir, found *f, size_t n, size_t i, int depth)
{
    if (f[i].usable >= 0)
        return f[i].usable;
    f[i].usable = f[i].valid;
    if (!f[i].valid || !f[i].delta)
        return f[i].usable;
    size_t j = 0;
    while (j < n && !(f[j].job == f[i].job && f[j].node == f[i].node && f[j].seq == f[i].prev))
        j++;
    f[i].usable = j < n && depth < CKPTREC_CHAIN_MAX && usable(dir, f, n, j, depth + 1);
    if (!f[i].usable)
        LOG_W("checkpoint file refused: %s/%s: a delta over checkpoint %" PRIu64 ", whose file "
              CKPTREC_NAME_FMT " is missing or was refused", dir, f[i].name, f[i].prev,
              f[i].job, f[i].prev, f[i].node);
    return f[i].usable;
}

size_t persist_scan(const char *dir, char ***out)
{
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    found *f = NULL;
    size_t nf = 0, n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        found x = {0};
        if (!ckptrec_parse_name(e->d_name, &x.job, &x.seq, &x.node))
            continue;
        char path[4200], why[600];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        snprintf(x.name, sizeof x.name, "%s", e->d_name);
        ckptrec_peek k;
        x.valid = ckptrec_peek_file(path, &k, why, sizeof why) == 0;
        if (!x.valid)
            LOG_W("checkpoint file refused: %s", why);
        x.delta = x.valid && k.delta;
        x.prev = k.d.prev;
        x.usable = -1;
        found *g = realloc(f, (nf + 1) * sizeof *g);
        if (!g)
            break;
        f = g;
        f[nf++] = x;
    }
    closedir(d);
    for (size_t i = 0; i < nf; i++) {
        if (!usable(dir, f, nf, i, 0))
            continue;
        char **g = realloc(*out, (n + 1) * sizeof *g);
        if (!g)
            break;
        *out = g;
        if (asprintf(&g[n], "%" PRIu64 ":%" PRIu64 ":%u", f[i].job, f[i].seq, f[i].node) < 0)
            break;
        n++;
    }
    free(f);
    return n;
}
