/* sparse-lr's evaluation set and metrics (sparse_eval.h). */
#define _GNU_SOURCE
#include "sparse_eval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "pskv_errors.h"

size_t sparse_batch_keys(const libsvm_set *d, size_t lo, size_t hi, uint64_t *keys)
{
    size_t n = 0;
    for (size_t j = d->off[lo]; j < d->off[hi]; j++)
        keys[n++] = d->idx[j];
    keys[n++] = SPARSE_BIAS_KEY;
    return sort_unique_u64(keys, n);
}

double sparse_sigmoid(double z) { return z >= 0 ? 1 / (1 + exp(-z)) : exp(z) / (1 + exp(z)); }

int sparse_eval_load(evalset *e, const char *path, uint64_t holdout, int held, char *why,
                     size_t whylen)
{
    memset(e, 0, sizeof *e);
    int rc = libsvm_load_split(path, 0, 1, 0, holdout, held, &e->d, why, whylen);
    if (rc < 0)
        return rc;
    e->keys = malloc((e->d.nnz + 1) * sizeof *e->keys);
    e->sc = malloc((e->d.n ? e->d.n : 1) * sizeof *e->sc);
    if (e->keys && e->sc) {
        e->nkeys = e->d.n ? sparse_batch_keys(&e->d, 0, e->d.n, e->keys) : 0;
        e->w = malloc((e->nkeys + 1) * sizeof *e->w);
    }
    if (!e->keys || !e->sc || !e->w) {
        snprintf(why, whylen, "out of memory for the keys of %zu examples", e->d.n);
        return -PSKV_ENOMEM;
    }
    return 0;
}

void sparse_eval_score(evalset *e, double *logloss, double *auc, double *acc)
{
    double ll = 0, bias = e->w[lower_bound_u64(e->keys, e->nkeys, SPARSE_BIAS_KEY)];
    long correct = 0;
    for (size_t i = 0; i < e->d.n; i++) {
        double z = bias;
        for (size_t j = e->d.off[i]; j < e->d.off[i + 1]; j++)
            z += e->w[lower_bound_u64(e->keys, e->nkeys, e->d.idx[j])] * e->d.val[j];
        double p = sparse_sigmoid(z), y = e->d.y[i];
        p = p < 1e-7 ? 1e-7 : p > 1 - 1e-7 ? 1 - 1e-7 : p;
        ll -= y * log(p) + (1 - y) * log(1 - p);
        correct += (p >= 0.5) == (y > 0.5);
        e->sc[i] = (auc_item){z, y > 0.5};
    }
    *logloss = ll / (double)e->d.n;
    *acc = (double)correct / (double)e->d.n;
    *auc = auc_rank_sum(e->sc, e->d.n);
}

void sparse_eval_free(evalset *e)
{
    libsvm_free(&e->d);
    free(e->keys);
    free(e->w);
    free(e->sc);
    memset(e, 0, sizeof *e);
}
