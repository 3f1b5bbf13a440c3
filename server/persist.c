#define _GNU_SOURCE
#include "persist.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"
#include "ckptrec.h"
#include "log.h"
#include "pskv_errors.h"
#include "ring.h"
#include "timeutil.h"

typedef ckptrec_hdr hdr;
typedef ckptrec_rows rows;

static void file_name(char *out, size_t len, uint64_t job, uint64_t seq, uint32_t node)
{
    snprintf(out, len, CKPTREC_NAME_FMT, job, seq, node);
}

static int put_dense(ckpt_writer *w, table *t, chain *c, char *why, size_t whylen)
{
    size_t rf = shard_row_floats(t->sh);
    uint32_t np = chain_nparts(c);
    float *buf = NULL;
    size_t cap = 0;
    int rc = 0;
    for (uint32_t p = 0; p < np && rc == 0; p++) {
        if (!chain_holds(c, p))
            continue;
        /* adjacent held partitions travel as one run */
        uint64_t first, count, f2, c2;
        chain_dense_span(c, t, p, &first, &count);
        while (p + 1 < np && chain_holds(c, p + 1)) {
            chain_dense_span(c, t, p + 1, &f2, &c2);
            count = f2 + c2 - first;
            p++;
        }
        if (!count)
            continue;
        if (count * rf > cap) {
            free(buf);
            cap = count * rf;
            buf = malloc(cap * sizeof(float));
            if (!buf) {
                snprintf(why, whylen, "out of memory writing table '%s'", t->name);
                return -PSKV_ENOMEM;
            }
        }
        shard_export_run(t->sh, first, count, buf);
        rows h = {t->id, first, count, rf};
        rc = ckpt_put2(w, REC_DENSE, &h, sizeof h, buf, count * rf * sizeof(float), why, whylen);
    }
    free(buf);
    return rc;
}

static int put_sparse(ckpt_writer *w, table *t, char *why, size_t whylen)
{
    size_t rf = shard_row_floats(t->sh);
    uint64_t n = shard_export(t->sh, NULL, NULL, NULL, NULL);
    uint64_t *keys = malloc((n ? n : 1) * sizeof *keys);
    float *vals = malloc((n ? n : 1) * rf * sizeof *vals);
    int rc;
    if (!keys || !vals) {
        snprintf(why, whylen, "out of memory writing table '%s'", t->name);
        rc = -PSKV_ENOMEM;
    } else {
        shard_export(t->sh, NULL, NULL, keys, vals);
        rows h = {t->id, 0, n, rf};
        rc = ckpt_put2(w, REC_SPARSE, &h, sizeof h, keys, n * sizeof *keys, why, whylen);
        if (rc == 0)
            rc = ckpt_put(w, REC_SPARSE, vals, n * rf * sizeof *vals, why, whylen);
    }
    free(keys);
    free(vals);
    return rc;
}

int persist_snapshot(const char *dir, uint64_t job, uint64_t seq, uint32_t node, table_set *ts,
                     chain *c, consist *cons, ckpt_writer **out, char *why, size_t whylen)
{
    char name[128];
    file_name(name, sizeof name, job, seq, node);
    ckpt_writer *w;
    *out = NULL;
    size_t hint = 1 << 20; /* every row of every table: at most that much */
    for (size_t i = 0; i < tables_count(ts); i++) {
        table *t = tables_at(ts, i);
        hint += (size_t)shard_size(t->sh) * (shard_row_floats(t->sh) * sizeof(float) + 8);
    }
    int rc = ckpt_begin_held(&w, dir, name, hint, why, whylen);
    if (rc < 0)
        return rc;
    hdr h = {job, seq, node, chain_nparts(c)};
    rc = ckpt_put(w, REC_HEADER, &h, sizeof h, why, whylen);
    for (size_t i = 0; rc == 0 && i < tables_count(ts); i++) {
        table *t = tables_at(ts, i);
        rc = ckpt_put2(w, REC_TABLE, &t->id, sizeof t->id, t->opts, t->opts_len, why, whylen);
        if (rc == 0)
            rc = t->dense ? put_dense(w, t, c, why, whylen) : put_sparse(w, t, why, whylen);
        int64_t closed = consist_bsp_closed(cons, t);
        if (rc == 0 && closed < 0) {
            snprintf(why, whylen, "table '%s': its partitions here are at different bsp clocks "
                     "(a server joined a moment ago, or a close is on its way down a "
                     "chain); take the checkpoint again", t->name);
            rc = -PSKV_ENOTREADY;
        }
        uint64_t bsp[2] = {t->id, (uint64_t)closed};
        if (rc == 0 && t->model == CONS_BSP)
            rc = ckpt_put(w, REC_BSP, bsp, sizeof bsp, why, whylen);
    }
    for (uint32_t p = 0; rc == 0 && p < chain_nparts(c); p++) {
        size_t len = chain_holds(c, p) ? chain_dedupe_export(c, p, NULL, 0) : 0;
        if (len <= 4) /* nothing recorded */
            continue;
        void *blob = malloc(len);
        if (!blob) {
            snprintf(why, whylen, "out of memory");
            rc = -PSKV_ENOMEM;
            break;
        }
        chain_dedupe_export(c, p, blob, len);
        uint64_t pp = p;
        rc = ckpt_put2(w, REC_DEDUPE, &pp, sizeof pp, blob, len, why, whylen);
        free(blob);
    }
    const int64_t *vc;
    int nranks = consist_clocks(cons, &vc);
    if (rc == 0)
        rc = ckpt_put(w, REC_CLOCKS, vc, (uint64_t)nranks * sizeof *vc, why, whylen);
    if (rc == 0) {
        *out = w;
        return 0;
    }
    ckpt_abort(&w);
    return rc;
}

/* ---- reading ---------------------------------------------------------------- */

typedef struct load_ctx {
    uint64_t job, seq;
    uint32_t node, nparts;
    const uint8_t *parts; /* the partitions to take (NULL: all) */
    table_set *ts;
    chain *c;
    consist *cons;
    persist_clocks *clocks;
    int have_hdr;
    rows pending;      /* a sparse rows record waits for its values */
    uint64_t *keys;
    char *why;
    size_t whylen;
    uint64_t nrows;
} load_ctx;

/* Dense rows [first, first + n) of t (rows of rf floats at body), only those of
 * the partitions wanted (all when parts is NULL). */
static int import_dense(load_ctx *l, table *t, uint64_t first, uint64_t n, const float *body)
{
    size_t rf = shard_row_floats(t->sh);
    if (!l->parts) {
        l->nrows += n;
        return shard_import(t->sh, NULL, first, n, body);
    }
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

/* The pending sparse keys with their n rows, only those of the partitions wanted. */
static int import_sparse(load_ctx *l, table *t, const float *vals)
{
    size_t rf = shard_row_floats(t->sh);
    if (!l->parts) {
        l->nrows += l->pending.n;
        return shard_import(t->sh, l->keys, 0, l->pending.n, vals);
    }
    for (uint64_t i = 0; i < l->pending.n; i++) {
        if (!l->parts[ring_partition_of(ring_mix64(l->keys[i]), l->nparts)])
            continue;
        l->nrows++;
        int rc = shard_import(t->sh, &l->keys[i], 0, 1, vals + i * rf);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int on_record(void *ctx, uint32_t tag, const void *data, uint64_t len)
{
    load_ctx *l = ctx;
    char *why = l->why;
    size_t whylen = l->whylen;
    if (tag == REC_HEADER) {
        const hdr *h = data;
        if (len != sizeof *h || h->job != l->job || h->seq != l->seq || h->node != l->node) {
            snprintf(why, whylen, "header names another job, checkpoint or node");
            return -PSKV_EPROTO;
        }
        l->have_hdr = 1;
        return 0;
    }
    if (!l->have_hdr) {
        snprintf(why, whylen, "no header record");
        return -PSKV_EPROTO;
    }
    if (tag == REC_TABLE) {
        if (len < 8) {
            snprintf(why, whylen, "short table record");
            return -PSKV_EPROTO;
        }
        uint64_t id;
        memcpy(&id, data, 8);
        Pskv__TableOptions *o =
            pskv__table_options__unpack(NULL, len - 8, (const uint8_t *)data + 8);
        if (!o) {
            snprintf(why, whylen, "table options do not decode");
            return -PSKV_EPROTO;
        }
        int rc = tables_open(l->ts, id, o, 0, UINT64_MAX, why, whylen);
        pskv__table_options__free_unpacked(o, NULL);
        return rc;
    }
    if (tag == REC_DENSE || tag == REC_SPARSE) {
        if (tag == REC_SPARSE && l->keys) { /* the values of the pending keys */
            table *t = tables_find(l->ts, l->pending.table_id);
            if (!t || len != l->pending.n * l->pending.rowfloats * sizeof(float)) {
                snprintf(why, whylen, "sparse values do not match their keys");
                return -PSKV_EPROTO;
            }
            int rc = import_sparse(l, t, data);
            free(l->keys);
            l->keys = NULL;
            return rc;
        }
        rows h;
        if (len < sizeof h) {
            snprintf(why, whylen, "short rows record");
            return -PSKV_EPROTO;
        }
        memcpy(&h, data, sizeof h);
        table *t = tables_find(l->ts, h.table_id);
        if (!t || h.rowfloats != shard_row_floats(t->sh) || t->dense != (tag == REC_DENSE)) {
            snprintf(why, whylen, "rows of an unknown table or of another row width");
            return -PSKV_EPROTO;
        }
        const uint8_t *body = (const uint8_t *)data + sizeof h;
        uint64_t blen = len - sizeof h;
        if (tag == REC_DENSE) {
            if (h.first > t->size || h.n > t->size - h.first ||
                blen != h.n * h.rowfloats * sizeof(float)) {
                snprintf(why, whylen, "dense rows outside table '%s'", t->name);
                return -PSKV_EPROTO;
            }
            return import_dense(l, t, h.first, h.n, (const float *)(const void *)body);
        }
        if (blen != h.n * sizeof(uint64_t)) {
            snprintf(why, whylen, "sparse keys of the wrong size");
            return -PSKV_EPROTO;
        }
        l->keys = malloc((h.n ? h.n : 1) * sizeof *l->keys);
        if (!l->keys)
            return -PSKV_ENOMEM;
        memcpy(l->keys, body, h.n * sizeof *l->keys);
        l->pending = h;
        return 0;
    }
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
        return 0;
    }
    return 0; /* a record of a later version: skipped */
}

int persist_load(const char *dir, uint64_t job, uint64_t seq, uint32_t old, uint32_t nparts,
                 const uint8_t *parts, table_set *ts, chain *c, consist *cons, persist_clocks *clocks, char *why,
                 size_t whylen)
{
    char name[128], path[4200], inner[300] = "";
    file_name(name, sizeof name, job, seq, old);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    memset(clocks, 0, sizeof *clocks);
    load_ctx l = {job, seq, old, nparts, parts, ts, c, cons, clocks, 0, {0, 0, 0, 0}, NULL,
                  inner, sizeof inner, 0};
    int64_t t0 = tu_now_ms();
    int rc = ckpt_read(path, on_record, &l, why, whylen);
    free(l.keys);
    if (rc < 0 && inner[0])
        snprintf(why, whylen, "%s: %s", path, inner);
    if (rc == 0)
        LOG_I("loaded checkpoint %" PRIu64 " from %s: %zu tables, %" PRIu64 " rows in %lld ms",
              seq, path, tables_count(ts), l.nrows, (long long)(tu_now_ms() - t0));
    return rc;
}

size_t persist_scan(const char *dir, char ***out)
{
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        uint64_t job, seq;
        unsigned node;
        if (!ckptrec_parse_name(e->d_name, &job, &seq, &node))
            continue;
        char path[4200], why[600];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        int rc = ckpt_read(path, NULL, NULL, why, sizeof why);
        if (rc < 0) {
            LOG_W("checkpoint file refused: %s", why);
            continue;
        }
        char **g = realloc(*out, (n + 1) * sizeof *g);
        if (!g)
            break;
        *out = g;
        if (asprintf(&g[n], "%" PRIu64 ":%" PRIu64 ":%u", job, seq, node) < 0)
            break;
        n++;
    }
    closedir(d);
    return n;
}

int persist_prune(const char *dir, uint64_t below, char *why, size_t whylen)
{
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(why, whylen, "cannot read %s: %s", dir, strerror(errno));
        return -PSKV_EIO;
    }
    int n = 0, rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        uint64_t job, seq;
        unsigned node;
        if (!ckptrec_parse_name(e->d_name, &job, &seq, &node) || seq >= below)
            continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) == 0)
            n++;
        else if (errno != ENOENT && rc == 0) { /* another server sharing dir took it */
            snprintf(why, whylen, "cannot delete %s: %s", path, strerror(errno));
            rc = -PSKV_EIO;
        }
    }
    closedir(d);
    return rc < 0 ? rc : n;
}
