/* Writing a server's checkpoint files, full or delta, and deleting old ones
 * (persist.h); persist_read.c reads them back. */
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
#include "timeutil.h"
#include "consist/model.h"

typedef ckptrec_hdr hdr;
typedef ckptrec_rows rows;

static void file_name(char *out, size_t len, uint64_t job, uint64_t seq, uint32_t node)
{
    snprintf(out, len, CKPTREC_NAME_FMT, job, seq, node);
}

/* The next run of adjacent partitions this server holds, from partition *p on:
 * its dense rows [*first, *first + *count) of t. 0 when none is left. */
static int next_held_run(chain *c, table *t, uint32_t *p, uint64_t *first, uint64_t *count)
{
    uint32_t np = chain_nparts(c);
    while (*p < np && !chain_holds(c, *p))
        (*p)++;
    if (*p >= np)
        return 0;
    uint64_t f2, c2;
    chain_dense_span(c, t, *p, first, count);
    while (*p + 1 < np && chain_holds(c, *p + 1)) {
        chain_dense_span(c, t, *p + 1, &f2, &c2);
        *count = f2 + c2 - *first;
        (*p)++;
    }
    (*p)++;
    return 1;
}

static int put_dense(ckpt_writer *w, table *t, chain *c, char *why, size_t whylen)
{
    size_t rf = shard_row_floats(t->sh);
    float *buf = NULL;
    size_t cap = 0;
    int rc = 0;
    uint64_t first, count;
    for (uint32_t p = 0; rc == 0 && next_held_run(c, t, &p, &first, &count);) {
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

/* Room for n keys and their rows of table t (*keys and *vals; the caller frees
 * both). Returns 0 or -PSKV_ENOMEM with why. */
static int alloc_rows(const table *t, uint64_t n, uint64_t **keys, float **vals, char *why,
                      size_t whylen)
{
    *keys = malloc((n ? n : 1) * sizeof **keys);
    *vals = malloc((n ? n : 1) * shard_row_floats(t->sh) * sizeof **vals);
    if (*keys && *vals)
        return 0;
    snprintf(why, whylen, "out of memory writing table '%s'", t->name);
    return -PSKV_ENOMEM;
}

/* n keys, then their rows: two records of tag (REC_SPARSE or REC_DENSE_AT). */
static int put_keyed(ckpt_writer *w, uint32_t tag, const table *t, uint64_t n,
                     const uint64_t *keys, const float *vals, char *why, size_t whylen)
{
    size_t rf = shard_row_floats(t->sh);
    rows h = {t->id, 0, n, rf};
    int rc = ckpt_put2(w, tag, &h, sizeof h, keys, n * sizeof *keys, why, whylen);
    return rc ? rc : ckpt_put(w, tag, vals, n * rf * sizeof *vals, why, whylen);
}

static int put_sparse(ckpt_writer *w, table *t, char *why, size_t whylen)
{
    uint64_t n = shard_size(t->sh), *keys; /* every row: no pass to count them */
    float *vals;
    int rc = alloc_rows(t, n, &keys, &vals, why, whylen);
    if (rc == 0) {
        shard_export(t->sh, NULL, NULL, keys, vals);
        rc = put_keyed(w, REC_SPARSE, t, n, keys, vals, why, whylen);
    }
    free(keys);
    free(vals);
    return rc;
}

/* A delta's dense rows: those written since the last checkpoint in the
 * partitions held (REC_DENSE_AT), or every held row as a full file has them
 * when the changed ones with their indices would take as many bytes. */
static int put_dense_delta(ckpt_writer *w, table *t, chain *c, char *why, size_t whylen)
{
    size_t rf = shard_row_floats(t->sh);
    uint64_t first, count, held = 0, n = 0, k = 0, *keys;
    for (uint32_t p = 0; next_held_run(c, t, &p, &first, &count);) {
        held += count;
        n += shard_changed(t->sh, first, count, NULL, NULL);
    }
    if (n * (sizeof *keys + rf * sizeof(float)) >= held * rf * sizeof(float))
        return put_dense(w, t, c, why, whylen);
    if (!n)
        return 0;
    float *vals;
    int rc = alloc_rows(t, n, &keys, &vals, why, whylen);
    for (uint32_t p = 0; rc == 0 && next_held_run(c, t, &p, &first, &count);)
        k += shard_changed(t->sh, first, count, keys + k, vals + k * rf);
    if (rc == 0)
        rc = put_keyed(w, REC_DENSE_AT, t, k, keys, vals, why, whylen);
    free(keys);
    free(vals);
    return rc;
}

/* A delta's sparse rows: the keys removed since the last checkpoint (applied
 * first: a key removed and pushed again since has its row below), then the
 * rows written since. */
static int put_sparse_delta(ckpt_writer *w, table *t, char *why, size_t whylen)
{
    const uint64_t *gone;
    int64_t ngone = shard_removed(t->sh, &gone);
    int rc = ngone > 0 ? ckpt_put2(w, REC_TOMB, &t->id, sizeof t->id, gone,
                                   (uint64_t)ngone * sizeof *gone, why, whylen) : 0;
    uint64_t n = shard_changed(t->sh, 0, 0, NULL, NULL), *keys = NULL;
    float *vals = NULL;
    if (rc == 0 && n && (rc = alloc_rows(t, n, &keys, &vals, why, whylen)) == 0) {
        shard_changed(t->sh, 0, 0, keys, vals);
        rc = put_keyed(w, REC_SPARSE, t, n, keys, vals, why, whylen);
    }
    free(keys);
    free(vals);
    return rc;
}

static int put_rows(ckpt_writer *w, table *t, chain *c, int delta, char *why, size_t whylen)
{
    if (delta)
        return t->dense ? put_dense_delta(w, t, c, why, whylen) : put_sparse_delta(w, t, why, whylen);
    return t->dense ? put_dense(w, t, c, why, whylen) : put_sparse(w, t, why, whylen);
}

int persist_snapshot(const char *dir, uint64_t job, uint64_t seq, uint32_t node, table_set *ts,
                     chain *c, consist *cons, const char *ns, const persist_delta *delta,
                     ckpt_writer **out, char *why, size_t whylen)
{
    char name[128];
    file_name(name, sizeof name, job, seq, node);
    ckpt_writer *w;
    *out = NULL;
    size_t hint = 1 << 20; /* every row of every table: at most that much */
    for (size_t i = 0; !delta && i < tables_count(ts); i++) {
        table *t = tables_at(ts, i);
        if (ns && strcmp(t->ns, ns))
            continue;
        hint += (size_t)shard_size(t->sh) * (shard_row_floats(t->sh) * sizeof(float) + 8);
    }
    int rc = ckpt_begin_held(&w, dir, name, hint, why, whylen);
    if (rc < 0)
        return rc;
    hdr h = {job, seq, node, chain_nparts(c)};
    rc = ckpt_put(w, REC_HEADER, &h, sizeof h, why, whylen);
    ckptrec_delta d = {delta ? delta->base : 0, delta ? delta->prev : 0};
    if (rc == 0 && delta)
        rc = ckpt_put(w, REC_DELTA, &d, sizeof d, why, whylen);
    for (size_t i = 0; rc == 0 && i < tables_count(ts); i++) {
        table *t = tables_at(ts, i);
        if (ns && strcmp(t->ns, ns))
            continue; /* a namespace's checkpoint: its tables only */
        rc = ckpt_put2(w, REC_TABLE, &t->id, sizeof t->id, t->opts, t->opts_len, why, whylen);
        if (rc == 0)
            rc = put_rows(w, t, c, delta != NULL, why, whylen);
        int64_t closed = consist_bsp_closed(cons, t);
        if (rc == 0 && closed < 0) {
            snprintf(why, whylen, "table '%s': its partitions here are at different bsp clocks "
                     "(a server joined a moment ago, or a close is on its way down a "
                     "chain); take the checkpoint again", t->name);
            rc = -PSKV_ENOTREADY;
        }
        uint64_t bsp[2] = {t->id, (uint64_t)closed};
        if (rc == 0 && cons_of(t)->closes)
            rc = ckpt_put(w, REC_BSP, bsp, sizeof bsp, why, whylen);
    }
    for (uint32_t p = 0; rc == 0 && !ns && p < chain_nparts(c); p++) {
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

int persist_prune(const char *dir, uint64_t below, uint64_t keep_from, uint64_t keep_to, char *why,
                  size_t whylen)
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
        if (!ckptrec_parse_name(e->d_name, &job, &seq, &node) || seq >= below ||
            (seq >= keep_from && seq <= keep_to))
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
