/* mload: model file to snapshot (contract in mload.h). */
#define _GNU_SOURCE
#include "mload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "modelfile.h"
#include "pskv_errors.h"

typedef struct pair {
    uint64_t k;
    float v;
} pair;

static int by_key(const void *a, const void *b)
{
    uint64_t x = ((const pair *)a)->k, y = ((const pair *)b)->k;
    return x < y ? -1 : x > y;
}

/* Checks the dense sizes against the row count. Returns 0 or -PSKV_EIO with why. */
static int check_dense(const modelfile *m, const char *path, char *why, size_t whylen)
{
    uint64_t in = m->in, h = m->hidden, k = m->out, want;
    if (in == 0 || k == 0 || in > (1u << 24) || h > (1u << 24) || k > (1u << 16) ||
        (m->kind == 1) != (h == 0) || m->keys) {
        snprintf(why, whylen, "%s: dense model sizes in %u hidden %u out %u do not make a model",
                 path, m->in, m->hidden, m->out);
        return -PSKV_EIO;
    }
    want = h ? in * h + h + h * k + k : in * k + k;
    if (m->n != want) {
        snprintf(why, whylen, "%s: %llu values, the model's sizes need %llu", path,
                 (unsigned long long)m->n, (unsigned long long)want);
        return -PSKV_EIO;
    }
    return 0;
}

/* Moves m's sparse rows into s sorted by key. Returns 0, -PSKV_EIO (a key twice)
 * or -PSKV_ENOMEM. */
static int sort_sparse(modelfile *m, snap *s, const char *path, char *why, size_t whylen)
{
    pair *p = malloc((m->n ? m->n : 1) * sizeof *p);
    s->keys = malloc((m->n ? m->n : 1) * sizeof *s->keys);
    s->vals = malloc((m->n ? m->n : 1) * sizeof *s->vals);
    if (!p || !s->keys || !s->vals) {
        free(p);
        snprintf(why, whylen, "out of memory loading %s", path);
        return -PSKV_ENOMEM;
    }
    for (size_t i = 0; i < m->n; i++)
        p[i] = (pair){m->keys[i], m->vals[i]};
    qsort(p, m->n, sizeof *p, by_key);
    int rc = 0;
    for (size_t i = 0; i < m->n; i++) {
        if (i && p[i].k == p[i - 1].k) {
            snprintf(why, whylen, "%s: key %llu appears twice", path, (unsigned long long)p[i].k);
            rc = -PSKV_EIO;
            break;
        }
        s->keys[i] = p[i].k;
        s->vals[i] = p[i].v;
    }
    free(p);
    return rc;
}

int mload_file(const char *path, snap **out, char *why, size_t whylen)
{
    modelfile m;
    int rc = modelfile_load(path, &m, why, whylen);
    if (rc < 0)
        return rc;
    snap *s = calloc(1, sizeof *s);
    if (!s) {
        modelfile_free(&m);
        snprintf(why, whylen, "out of memory loading %s", path);
        return -PSKV_ENOMEM;
    }
    s->kind = (snap_kind)m.kind;
    s->in = m.in;
    s->hidden = m.hidden;
    s->out = m.out;
    s->n = (size_t)m.n;
    s->clock = m.has_eval ? m.clock : -1;
    struct stat st;
    s->wall = stat(path, &st) == 0 ? (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9 : 0;
    if (m.kind == 1 || m.kind == 2) {
        rc = check_dense(&m, path, why, whylen);
        snprintf(s->table, sizeof s->table, "%s-%u-%u-%u", m.kind == 1 ? "softmax" : "mlp", m.in,
                 m.hidden, m.out);
        s->vals = m.vals; /* dense: the flat vector as it is */
        m.vals = NULL;
    } else if (m.kind == 3 && m.keys) {
        snprintf(s->table, sizeof s->table, "sparse-lr.w");
        rc = sort_sparse(&m, s, path, why, whylen);
    } else {
        snprintf(why, whylen, "%s: model kind %u (pskv-serve answers for 1 softmax, 2 mlp, "
                 "3 sparse-lr with keys)", path, m.kind);
        rc = -PSKV_EIO;
    }
    modelfile_free(&m);
    if (rc < 0)
        snap_free(&s);
    *out = s;
    return rc;
}
