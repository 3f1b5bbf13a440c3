/* pskvctl export (export.h): every file of the checkpoint is verified whole
 * (ckpt_read) before its records are used; the model table's values are gathered
 * into one dense vector (with a bitmap of the keys some file held, so a missing
 * partition is named) or into (key, value) pairs sorted and deduplicated. A
 * delta file is read after the files it builds on (its chain, full file first):
 * its rows overwrite theirs, and its tombstones remove sparse keys (the newest
 * pair of a key wins). */
#define _GNU_SOURCE
#include "export.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "ckptrec.h"
#include "grow.h"
#include "modelfile.h"
#include "pskv.pb-c.h"
#include "pskv_errors.h"

/* 16 bytes, as before deltas: a sparse export holds one per key and replica */
typedef struct kv {
    uint64_t key;
    float val;
    uint32_t gen : 31; /* files read before it: the newest pair of a key wins */
    uint32_t gone : 1; /* a tombstone: the key was removed */
} kv;

/* What the files hold of the model, gathered file by file. */
typedef struct gather {
    /* the model table, from its name (the first file that has it decides) */
    int found, dense;
    uint32_t kind, in, hidden, out;
    uint64_t size;
    float *vals;     /* dense: size values */
    uint8_t *have;   /* dense: 1 where some file held the key */
    kv *pairs;       /* sparse */
    size_t npairs, cap;
    /* the file being read */
    const char *path;
    int in_file;       /* this file named the model table */
    uint64_t table_id; /* its id in this file */
    uint64_t rowfloats;
    uint64_t *keys;   /* sparse keys (or a delta's dense indices) waiting for their values */
    uint64_t nkeys;
    uint64_t gen;     /* files read so far (kv keeps 31 bits of it) */
    const char *ns;   /* the namespace exported ("" = the unnamed one) */
    char *why;
    size_t whylen;
} gather;

/* The model a table of namespace ns holds, from the name the application gave it
 * (the full name less "ns/"); 0 = none, or a table of another namespace. */
static int model_of(const char *ns, const char *name, uint32_t *kind, uint32_t *in,
                    uint32_t *hidden, uint32_t *out)
{
    int end = 0;
    size_t nl = strlen(ns);
    if (nl ? strncmp(name, ns, nl) || name[nl] != '/' : strchr(name, '/') != NULL)
        return 0;
    name += nl ? nl + 1 : 0;
    if (!strcmp(name, "sparse-lr.w")) {
        *kind = 3, *in = 0, *hidden = 0, *out = 1;
        return 1;
    }
    if (sscanf(name, "softmax-%u-%u-%u%n", in, hidden, out, &end) == 3 && !name[end]) {
        *kind = 1;
        return 1;
    }
    if (sscanf(name, "mlp-%u-%u-%u%n", in, hidden, out, &end) == 3 && !name[end]) {
        *kind = 2;
        return 1;
    }
    return 0;
}

static int on_table(gather *g, const void *data, uint64_t len)
{
    uint64_t id;
    memcpy(&id, data, 8);
    Pskv__TableOptions *o = pskv__table_options__unpack(NULL, len - 8, (const uint8_t *)data + 8);
    if (!o) {
        snprintf(g->why, g->whylen, "%s: table options do not decode", g->path);
        return -PSKV_EPROTO;
    }
    uint32_t kind, in, hidden, out;
    int rc = 0;
    if (o->name && model_of(g->ns, o->name, &kind, &in, &hidden, &out)) {
        int dense = kind != 3;
        if (g->found && (kind != g->kind || in != g->in || hidden != g->hidden || out != g->out)) {
            snprintf(g->why, g->whylen, "%s: table '%s' is a second model in the checkpoint",
                     g->path, o->name);
            rc = -PSKV_EINVAL;
        } else if (o->width != 1 || (dense && !o->size)) {
            snprintf(g->why, g->whylen, "%s: table '%s' has %u floats per key, not 1", g->path,
                     o->name, o->width);
            rc = -PSKV_EINVAL;
        } else if (!g->found) {
            g->found = 1, g->dense = dense, g->kind = kind, g->in = in, g->hidden = hidden;
            g->out = out, g->size = o->size;
            if (dense && (!(g->vals = calloc(o->size, sizeof *g->vals)) ||
                          !(g->have = calloc(o->size, 1))))
                rc = -PSKV_ENOMEM;
        }
        g->in_file = 1;
        g->table_id = id;
    }
    pskv__table_options__free_unpacked(o, NULL);
    return rc;
}

/* A values record for the keys before it: one pair per sparse key, or a
 * delta's dense rows by index. */
static int on_keyed_values(gather *g, const float *v, uint64_t len)
{
    if (len != g->nkeys * g->rowfloats * sizeof(float)) {
        snprintf(g->why, g->whylen, "%s: values do not match their keys", g->path);
        return -PSKV_EPROTO;
    }
    for (uint64_t i = 0; g->dense && i < g->nkeys; i++) {
        if (g->keys[i] >= g->size) {
            snprintf(g->why, g->whylen, "%s: rows of the model table do not fit it", g->path);
            return -PSKV_EPROTO;
        }
        g->vals[g->keys[i]] = v[i * g->rowfloats];
        g->have[g->keys[i]] = 1;
    }
    if (!g->dense &&
        grow_array((void **)&g->pairs, &g->cap, g->npairs + g->nkeys, sizeof *g->pairs) < 0)
        return -PSKV_ENOMEM;
    for (uint64_t i = 0; !g->dense && i < g->nkeys; i++)
        g->pairs[g->npairs++] = (kv){g->keys[i], v[i * g->rowfloats], (uint32_t)g->gen, 0};
    free(g->keys);
    g->keys = NULL;
    return 0;
}

/* A delta's tombstones of the model table (sparse): pairs that remove keys. */
static int on_tombstones(gather *g, const uint64_t *k, uint64_t len)
{
    uint64_t n = len / 8 - 1;
    if (len < 8 || len % 8 || k[0] != g->table_id || !g->in_file || g->dense)
        return 0; /* another table's */
    if (grow_array((void **)&g->pairs, &g->cap, g->npairs + n, sizeof *g->pairs) < 0)
        return -PSKV_ENOMEM;
    for (uint64_t i = 0; i < n; i++)
        g->pairs[g->npairs++] = (kv){k[1 + i], 0, (uint32_t)g->gen, 1};
    return 0;
}

static int on_record(void *ctx, uint32_t tag, const void *data, uint64_t len)
{
    gather *g = ctx;
    if (tag == REC_TABLE && len >= 8)
        return on_table(g, data, len);
    if ((tag == REC_SPARSE || tag == REC_DENSE_AT) && g->keys)
        return on_keyed_values(g, data, len);
    if (tag == REC_TOMB)
        return on_tombstones(g, data, len);
    if ((tag != REC_DENSE && tag != REC_SPARSE && tag != REC_DENSE_AT) ||
        len < sizeof(ckptrec_rows))
        return 0;
    ckptrec_rows h;
    memcpy(&h, data, sizeof h);
    if (!g->in_file || h.table_id != g->table_id)
        return 0; /* another table's rows */
    uint64_t blen = len - sizeof h;
    const uint8_t *body = (const uint8_t *)data + sizeof h;
    if ((tag != REC_SPARSE) != g->dense || h.rowfloats < 1 ||
        (tag == REC_DENSE && (h.first > g->size || h.n > g->size - h.first ||
                              blen != h.n * h.rowfloats * sizeof(float))) ||
        (tag != REC_DENSE && blen != h.n * sizeof(uint64_t))) {
        snprintf(g->why, g->whylen, "%s: rows of the model table do not fit it", g->path);
        return -PSKV_EPROTO;
    }
    g->rowfloats = h.rowfloats;
    if (tag != REC_DENSE) {
        g->nkeys = h.n;
        g->keys = malloc((h.n ? h.n : 1) * sizeof *g->keys);
        if (!g->keys)
            return -PSKV_ENOMEM;
        memcpy(g->keys, body, h.n * sizeof *g->keys);
        return 0;
    }
    const float *v = (const float *)(const void *)body;
    for (uint64_t i = 0; i < h.n; i++) {
        g->vals[h.first + i] = v[i * h.rowfloats]; /* the value; its state follows */
        g->have[h.first + i] = 1;
    }
    return 0;
}

/* Reads the file of checkpoint seq of node `node` in dir into g, after the
 * files it builds on when it is a delta. */
static int read_chain(gather *g, const char *dir, uint64_t job, uint64_t seq, unsigned node)
{
    uint64_t *seqs;
    int n = ckptrec_chain(dir, job, seq, node, &seqs, g->why, g->whylen), rc = n < 0 ? n : 0;
    for (int i = n - 1; rc == 0 && i >= 0; i--) {
        char path[4400];
        snprintf(path, sizeof path, "%s/" CKPTREC_NAME_FMT, dir, job, seqs[i], node);
        g->path = path;
        g->in_file = 0;
        g->gen++;
        rc = ckpt_read(path, on_record, g, g->why, g->whylen);
        free(g->keys);
        g->keys = NULL;
    }
    free(seqs);
    return rc;
}

/* Reads every file of checkpoint seq in the comma-separated dirs into g. */
static int read_files(gather *g, const char *dirs, uint64_t seq, int *nfiles)
{
    char *list = strdup(dirs), *save = NULL;
    uint64_t job = 0;
    int rc = list ? 0 : -PSKV_ENOMEM;
    for (char *dir = list ? strtok_r(list, ",", &save) : NULL; dir && rc == 0;
         dir = strtok_r(NULL, ",", &save)) {
        DIR *d = opendir(dir);
        if (!d) {
            snprintf(g->why, g->whylen, "cannot read directory %s", dir);
            rc = -PSKV_EIO;
            break;
        }
        struct dirent *e;
        while (rc == 0 && (e = readdir(d))) {
            uint64_t j, s;
            unsigned node;
            if (!ckptrec_parse_name(e->d_name, &j, &s, &node) || s != seq)
                continue;
            if (*nfiles && j != job) {
                snprintf(g->why, g->whylen, "%s holds checkpoint %" PRIu64 " of job %" PRIu64
                         ", and another file job %" PRIu64 "'s: keep one job's files in the "
                         "directories", dir, seq, j, job);
                rc = -PSKV_EINVAL;
                break;
            }
            job = j;
            rc = read_chain(g, dir, j, s, node);
            (*nfiles)++;
        }
        closedir(d);
    }
    free(list);
    if (rc == 0 && !*nfiles) {
        snprintf(g->why, g->whylen, "no file of checkpoint %" PRIu64 " (ckpt-JOB-%" PRIu64
                 "-NODE.pskv) in %s", seq, seq, dirs);
        rc = -PSKV_ENOTFOUND;
    }
    return rc;
}

static int cmp_kv(const void *a, const void *b)
{
    const kv *x = a, *y = b;
    if (x->key != y->key)
        return (x->key > y->key) - (x->key < y->key);
    return (x->gen > y->gen) - (x->gen < y->gen);
}

/* The gathered model as a model file at out. */
static int write_model(gather *g, const char *out, char *why, size_t whylen)
{
    modelfile m = {.kind = g->kind, .in = g->in, .hidden = g->hidden, .out = g->out,
                   .n = g->size, .vals = g->vals}; /* no evaluation record */
    if (g->dense) {
        for (uint64_t i = 0; i < g->size; i++)
            if (!g->have[i]) {
                uint64_t e = i;
                while (e + 1 < g->size && !g->have[e + 1])
                    e++;
                snprintf(why, whylen, "keys %" PRIu64 "..%" PRIu64 " of the model (of %" PRIu64
                         ") are in none of the files: give the directories of every server",
                         i, e, g->size);
                return -PSKV_EINVAL;
            }
        return modelfile_save(out, &m, why, whylen);
    }
    qsort(g->pairs, g->npairs, sizeof *g->pairs, cmp_kv);
    size_t u = 0;
    for (size_t i = 0; i < g->npairs; i++) { /* replicas, deltas: the newest pair of a key */
        if (i + 1 < g->npairs && g->pairs[i + 1].key == g->pairs[i].key)
            continue;
        if (!g->pairs[i].gone)
            g->pairs[u++] = g->pairs[i];
    }
    m.n = u;
    m.keys = malloc((u ? u : 1) * sizeof *m.keys);
    m.vals = malloc((u ? u : 1) * sizeof *m.vals);
    int rc = m.keys && m.vals ? 0 : -PSKV_ENOMEM;
    for (size_t i = 0; rc == 0 && i < u; i++)
        m.keys[i] = g->pairs[i].key, m.vals[i] = g->pairs[i].val;
    if (rc == 0)
        rc = modelfile_save(out, &m, why, whylen);
    free(m.keys);
    free(m.vals);
    return rc;
}

int export_checkpoint(const char *dirs, uint64_t seq, const char *ns, const char *out,
                      char *summary, size_t summary_len, char *why, size_t whylen)
{
    gather g;
    memset(&g, 0, sizeof g);
    g.ns = ns ? ns : "";
    g.why = why;
    g.whylen = whylen;
    int nfiles = 0;
    int rc = read_files(&g, dirs, seq, &nfiles);
    if (rc == 0 && !g.found) {
        snprintf(why, whylen, "checkpoint %" PRIu64 " holds no model table (softmax-*, mlp-* or "
                 "sparse-lr.w) in namespace '%s'", seq, g.ns);
        rc = -PSKV_ENOTFOUND;
    }
    if (rc == 0)
        rc = write_model(&g, out, why, whylen);
    if (rc == 0 && summary && summary_len)
        snprintf(summary, summary_len, "%s %u-%u-%u model of checkpoint %" PRIu64
                 " (%d files) written to %s",
                 g.kind == 1 ? "softmax" : g.kind == 2 ? "mlp" : "sparse-lr", g.in, g.hidden,
                 g.out, seq, nfiles, out);
    free(g.vals);
    free(g.have);
    free(g.pairs);
    return rc;
}
