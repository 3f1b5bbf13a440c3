/* --app sparse-lr: logistic regression on LIBSVM data with sparse keys.
 *
 * Weights live in a sparse table (one float per feature id, created on first
 * push), the bias under key BIAS_KEY. A batch pulls only the keys it touches and
 * pushes their mean gradients. The pull for the next batch is sent before this
 * batch is computed, so it travels while the CPU works (async, delay 1).
 * Rank 0 evaluates log-loss, AUC and accuracy on --test from freshly pulled
 * weights. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps.h"
#include "libsvm.h"
#include "modelfile.h"
#include "report.h"
#include "ring.h"
#include "timeutil.h"

#define TMO 120000
#define BIAS_KEY UINT64_MAX

static int fail(pskv_worker *w, const char *what, int rc)
{
    fprintf(stderr, "sparse-lr: %s: %s (%s)\n", what, pskv_strerror(rc), pskv_last_error(w));
    return 1;
}

typedef struct kv {
    uint64_t key;
    float val;
} kv;

static int cmp_kv(const void *a, const void *b)
{
    const kv *x = a, *y = b;
    return (x->key > y->key) - (x->key < y->key);
}

/* --init-from: rank 0 overwrites the weights (and clears their optimizer state)
 * with a saved sparse-lr model, in slices of a million keys. */
static int load_model(pskv_worker *w, int t, const char *path)
{
    char why[512];
    modelfile mf;
    int rc = modelfile_load(path, &mf, why, sizeof why);
    if (rc == 0 && (mf.kind != 3 || mf.out != 1 || !mf.keys)) {
        snprintf(why, sizeof why, "%s holds a %s model, not a sparse-lr one", path,
                 mf.kind == 1 ? "softmax" : mf.kind == 2 ? "mlp" : "non-sparse");
        rc = -PSKV_EINVAL;
    }
    if (rc < 0) {
        fprintf(stderr, "sparse-lr: --init-from: %s\n", why);
        modelfile_free(&mf);
        return 1;
    }
    for (uint64_t at = 0; at < mf.n; at += 1u << 20) {
        size_t k = mf.n - at < (1u << 20) ? (size_t)(mf.n - at) : (size_t)1 << 20;
        int64_t ta = pskv_assign(w, t, mf.keys + at, k, mf.vals + at);
        if (ta < 0 || (rc = pskv_wait(w, ta, TMO)) < 0) {
            modelfile_free(&mf);
            return fail(w, "load --init-from weights", ta < 0 ? (int)ta : rc);
        }
    }
    printf("loaded %llu weights from %s\n", (unsigned long long)mf.n, path);
    modelfile_free(&mf);
    return 0;
}

/* --save-model: every weight the servers hold (the features ever pushed and the
 * bias), sorted by feature id, as a keyed sparse-lr model file. */
static int save_model(pskv_worker *w, int t, const char *path)
{
    char why[512];
    uint64_t *keys;
    float *vals;
    size_t n;
    int rc = pskv_pull_all(w, t, &keys, &vals, &n, TMO);
    if (rc < 0)
        return fail(w, "pull the weights for --save-model", rc);
    kv *pairs = malloc((n ? n : 1) * sizeof *pairs);
    if (!pairs) {
        free(keys);
        free(vals);
        fprintf(stderr, "sparse-lr: --save-model: out of memory for %zu weights\n", n);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        pairs[i] = (kv){keys[i], vals[i]};
    qsort(pairs, n, sizeof *pairs, cmp_kv);
    for (size_t i = 0; i < n; i++) {
        keys[i] = pairs[i].key;
        vals[i] = pairs[i].val;
    }
    free(pairs);
    modelfile mf = {3, 0, 0, 1, n, keys, vals};
    rc = modelfile_save(path, &mf, why, sizeof why);
    free(keys);
    free(vals);
    if (rc < 0) {
        fprintf(stderr, "sparse-lr: --save-model: %s\n", why);
        return 1;
    }
    printf("model saved to %s (%zu weights)\n", path, n);
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The distinct keys of examples [lo, hi) plus the bias, sorted, into keys. */
static size_t batch_keys(const libsvm_set *d, size_t lo, size_t hi, uint64_t *keys)
{
    size_t n = 0;
    for (size_t j = d->off[lo]; j < d->off[hi]; j++)
        keys[n++] = d->idx[j];
    keys[n++] = BIAS_KEY;
    qsort(keys, n, sizeof *keys, cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (u == 0 || keys[i] != keys[u - 1])
            keys[u++] = keys[i];
    return u;
}

static size_t find_key(const uint64_t *keys, size_t n, uint64_t k)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (keys[mid] < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static double sigmoid(double z) { return z >= 0 ? 1 / (1 + exp(-z)) : exp(z) / (1 + exp(z)); }

typedef struct scored {
    float s;
    float y;
} scored;

static int cmp_score(const void *a, const void *b)
{
    float x = ((const scored *)a)->s, y = ((const scored *)b)->s;
    return x < y ? -1 : x > y;
}

/* AUC by the rank-sum (ties get their average rank). */
static double auc_of(scored *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_score);
    double pos = 0, rank_sum = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && v[j].s == v[i].s)
            j++;
        double avg = (double)(i + j + 1) / 2.0; /* ranks i+1..j */
        for (size_t k = i; k < j; k++)
            if (v[k].y > 0.5) {
                rank_sum += avg;
                pos++;
            }
        i = j;
    }
    double neg = (double)n - pos;
    if (pos == 0 || neg == 0)
        return NAN;
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg);
}

typedef struct evalset {
    libsvm_set d;
    uint64_t *keys; /* distinct keys of the whole set + bias */
    size_t nkeys;
    float *w;
    scored *sc;
} evalset;

static int evaluate(pskv_worker *w, int t, evalset *e, double *logloss, double *auc, double *acc)
{
    const size_t chunk = 1u << 20;
    for (size_t i = 0; i < e->nkeys; i += chunk) {
        size_t n = e->nkeys - i < chunk ? e->nkeys - i : chunk;
        int64_t tp = pskv_pull(w, t, e->keys + i, n, e->w + i);
        if (tp < 0)
            return (int)tp;
    }
    int rc = pskv_wait_all(w, TMO);
    if (rc < 0)
        return rc;
    double ll = 0, bias = e->w[find_key(e->keys, e->nkeys, BIAS_KEY)];
    long correct = 0;
    for (size_t i = 0; i < e->d.n; i++) {
        double z = bias;
        for (size_t j = e->d.off[i]; j < e->d.off[i + 1]; j++)
            z += e->w[find_key(e->keys, e->nkeys, e->d.idx[j])] * e->d.val[j];
        double p = sigmoid(z), y = e->d.y[i];
        p = p < 1e-7 ? 1e-7 : p > 1 - 1e-7 ? 1 - 1e-7 : p;
        ll -= y * log(p) + (1 - y) * log(1 - p);
        correct += (p >= 0.5) == (y > 0.5);
        e->sc[i].s = (float)z;
        e->sc[i].y = (float)y;
    }
    *logloss = ll / (double)e->d.n;
    *acc = (double)correct / (double)e->d.n;
    *auc = auc_of(e->sc, e->d.n);
    return 0;
}

int app_sparse_lr(pskv_worker *w, cfg_entry *cfg)
{
    int rank = pskv_rank(w), W = pskv_num_workers(w);
    int batch = (int)cfg_int(cfg, "batch"), epochs = (int)cfg_int(cfg, "epochs");
    char why[600];
    libsvm_set d;
    int rc = libsvm_load(cfg_str(cfg, "train"), (uint32_t)rank, (uint32_t)W, 0, &d, why, sizeof why);
    if (rc < 0) {
        fprintf(stderr, "sparse-lr: %s\n", why);
        return 1;
    }
    if (d.n == 0) {
        fprintf(stderr, "sparse-lr: worker %d has no examples in %s\n", rank, cfg_str(cfg, "train"));
        return 1;
    }
    evalset e;
    memset(&e, 0, sizeof e);
    report *rep = report_new(rank == 0 ? cfg_str(cfg, "metrics") : NULL, why, sizeof why);
    if (!rep) {
        fprintf(stderr, "sparse-lr: %s\n", why);
        return 1;
    }
    if (rank == 0) {
        const char *test = *cfg_str(cfg, "test") ? cfg_str(cfg, "test") : cfg_str(cfg, "train");
        rc = libsvm_load(test, 0, 1, 0, &e.d, why, sizeof why);
        if (rc < 0) {
            fprintf(stderr, "sparse-lr: %s\n", why);
            return 1;
        }
        e.keys = malloc((e.d.nnz + 1) * sizeof *e.keys);
        e.sc = malloc((e.d.n ? e.d.n : 1) * sizeof *e.sc);
        if (!e.keys || !e.sc)
            return 1;
        e.nkeys = e.d.n ? batch_keys(&e.d, 0, e.d.n, e.keys) : 0;
        e.w = malloc((e.nkeys + 1) * sizeof *e.w);
        if (!e.w)
            return 1;
    }
    pskv_table_opts o;
    pskv_table_opts_init(&o);
    o.kind = PSKV_SPARSE;
    o.width = 1;
    o.updater = cfg_str(cfg, "updater");
    o.lr = (float)cfg_double(cfg, "lr");
    o.momentum = strcmp(o.updater, "sgd") == 0 ? (float)cfg_double(cfg, "momentum") : 0.0f;
    o.l2 = (float)cfg_double(cfg, "l2");
    o.eps = 1e-6f;
    int t = pskv_table_open(w, "sparse-lr.w", &o);
    if (t < 0)
        return fail(w, "open the weight table", t);
    pskv_table_opts_init(&o);
    o.kind = PSKV_DENSE;
    o.size = (uint64_t)W;
    o.updater = "sum";
    int ts = pskv_table_open(w, "sparse-lr.samples", &o);
    if (ts < 0)
        return fail(w, "open the stats table", ts);

    /* the largest batch: its features plus the bias */
    size_t maxk = 1;
    for (size_t i = 0; i < d.n; i += (size_t)batch) {
        size_t hi = i + (size_t)batch < d.n ? i + (size_t)batch : d.n;
        if (d.off[hi] - d.off[i] + 1 > maxk)
            maxk = d.off[hi] - d.off[i] + 1;
    }
    uint64_t *keys[2] = {malloc(maxk * 8), malloc(maxk * 8)};
    float *wv[2] = {malloc(maxk * 4), malloc(maxk * 4)};
    float *grad = malloc(maxk * 4);
    size_t nk[2];
    if (!keys[0] || !keys[1] || !wv[0] || !wv[1] || !grad)
        return 1;
    if (rank == 0 && *cfg_str(cfg, "init-from") && load_model(w, t, cfg_str(cfg, "init-from")))
        return 1;
    rc = pskv_barrier(w, TMO);
    if (rc < 0)
        return fail(w, "barrier before training", rc);

    const size_t steps_per_epoch = (d.n + (size_t)batch - 1) / (size_t)batch;
    double eval_every = cfg_double(cfg, "eval-every");
    size_t eval_step = eval_every > 0 ? (size_t)ceil(eval_every * (double)steps_per_epoch) : 0;
    if (eval_every > 0 && eval_step < 1)
        eval_step = 1;
    size_t next_eval = eval_step;
    int64_t t0 = tu_now_ns(), eval_ns = 0;
    double loss_sum = 0, last_total = 0, last_train_s = 0, unreported = 0;
    long loss_n = 0;
    uint64_t pushed_keys = 0;
    int cur = 0;
    int64_t prev_push = 0;
    nk[0] = batch_keys(&d, 0, d.n < (size_t)batch ? d.n : (size_t)batch, keys[0]);
    int64_t pending = pskv_pull(w, t, keys[0], nk[0], wv[0]);
    if (pending < 0)
        return fail(w, "pull", (int)pending);
    const size_t total = steps_per_epoch * (size_t)epochs;
    for (size_t step = 0; step < total; step++) {
        if (app_stop_signal)
            return app_stopped("sparse-lr");
        size_t s = step % steps_per_epoch;
        size_t lo = s * (size_t)batch, hi = lo + (size_t)batch < d.n ? lo + (size_t)batch : d.n;
        if ((rc = pskv_wait(w, pending, TMO)) < 0)
            return fail(w, "pull", rc);
        /* the previous batch's push first (with replicas pulls are answered by tails,
         * which hold a push once it is acknowledged): weights at most two batches old */
        if (prev_push > 0 && (rc = pskv_wait(w, prev_push, TMO)) < 0)
            return fail(w, "push", rc);
        /* send the next batch's pull now: it travels while this one computes */
        if (step + 1 < total) {
            size_t s2 = (step + 1) % steps_per_epoch, lo2 = s2 * (size_t)batch;
            size_t hi2 = lo2 + (size_t)batch < d.n ? lo2 + (size_t)batch : d.n;
            nk[cur ^ 1] = batch_keys(&d, lo2, hi2, keys[cur ^ 1]);
            pending = pskv_pull(w, t, keys[cur ^ 1], nk[cur ^ 1], wv[cur ^ 1]);
            if (pending < 0)
                return fail(w, "pull", (int)pending);
        }
        const uint64_t *k = keys[cur];
        const float *wt = wv[cur];
        size_t n = nk[cur], bias = find_key(k, n, BIAS_KEY);
        memset(grad, 0, n * sizeof *grad);
        double bl = 0;
        for (size_t i = lo; i < hi; i++) {
            double z = wt[bias];
            for (size_t j = d.off[i]; j < d.off[i + 1]; j++)
                z += wt[find_key(k, n, d.idx[j])] * d.val[j];
            double p = sigmoid(z), y = d.y[i], g = (p - y) / (double)(hi - lo);
            double pc = p < 1e-7 ? 1e-7 : p > 1 - 1e-7 ? 1 - 1e-7 : p;
            bl -= y * log(pc) + (1 - y) * log(1 - pc);
            for (size_t j = d.off[i]; j < d.off[i + 1]; j++)
                grad[find_key(k, n, d.idx[j])] += (float)(g * d.val[j]);
            grad[bias] += (float)g;
        }
        loss_sum += bl / (double)(hi - lo);
        loss_n++;
        unreported += (double)(hi - lo);
        int64_t tp = pskv_push(w, t, k, n, grad);
        if (tp < 0)
            return fail(w, "push", (int)tp);
        prev_push = tp;
        pushed_keys += n;
        cur ^= 1;
        if ((step & 63) == 63) {
            uint64_t key = (uint64_t)rank;
            float v = (float)unreported;
            if ((tp = pskv_push(w, ts, &key, 1, &v)) < 0)
                return fail(w, "stats push", (int)tp);
            unreported = 0;
        }
        int last = step + 1 == total;
        if (rank == 0 && ((eval_step && step + 1 >= next_eval) || last)) {
            if (last) { /* the final figures come after every worker is done */
                uint64_t key = (uint64_t)rank;
                float v = (float)unreported;
                unreported = 0;
                if ((tp = pskv_push(w, ts, &key, 1, &v)) < 0 || (rc = pskv_barrier(w, TMO * 10)) < 0)
                    return fail(w, "barrier after training", tp < 0 ? (int)tp : rc);
            }
            int64_t e0 = tu_now_ns();
            double ll = 0, auc = 0, acc = 0;
            if ((rc = evaluate(w, t, &e, &ll, &auc, &acc)) < 0)
                return fail(w, "evaluation", rc);
            float *counts = malloc((size_t)W * sizeof(float));
            int64_t tc = counts ? pskv_pull(w, ts, NULL, (size_t)W, counts) : -PSKV_ENOMEM;
            if (tc < 0 || (rc = pskv_wait(w, tc, TMO)) < 0)
                return fail(w, "stats pull", tc < 0 ? (int)tc : rc);
            double all = 0;
            for (int i = 0; i < W; i++)
                all += counts[i];
            free(counts);
            double train_s = (double)(e0 - t0 - eval_ns) / 1e9;
            report_line l = {(double)(step + 1) / (double)steps_per_epoch, (int64_t)step + 1,
                             (double)(tu_now_ns() - t0) / 1e9, loss_sum / (double)loss_n, ll,
                             acc,
                             train_s > last_train_s ? (all - last_total) / (train_s - last_train_s)
                                                    : 0,
                             auc};
            report_eval(rep, &l);
            last_total = all;
            last_train_s = train_s;
            loss_sum = 0;
            loss_n = 0;
            next_eval += eval_step;
            eval_ns += tu_now_ns() - e0;
            if (last)
                printf("final auc %.4f logloss %.4f accuracy %.4f; %.0f keys/s pushed by rank 0\n",
                       auc, ll, acc, (double)pushed_keys / train_s);
        }
    }
    if (rank == 0 && *cfg_str(cfg, "save-model") && save_model(w, t, cfg_str(cfg, "save-model")))
        return 1;
    if (rank != 0) {
        uint64_t key = (uint64_t)rank;
        float v = (float)unreported;
        int64_t tp = pskv_push(w, ts, &key, 1, &v);
        double secs = (double)(tu_now_ns() - t0) / 1e9;
        if (tp < 0 || (rc = pskv_barrier(w, TMO * 10)) < 0)
            return fail(w, "barrier after training", tp < 0 ? (int)tp : rc);
        printf("rank %d done: %zu examples x %d epochs in %.1f s, %.0f keys/s pushed\n", rank, d.n,
               epochs, secs, (double)pushed_keys / secs);
    }
    report_destroy(&rep);
    libsvm_free(&d);
    libsvm_free(&e.d);
    free(e.keys);
    free(e.w);
    free(e.sc);
    free(keys[0]);
    free(keys[1]);
    free(wv[0]);
    free(wv[1]);
    free(grad);
    return 0;
}
