/* --app sparse-lr: logistic regression on LIBSVM data with sparse keys.
 *
 * Weights live in a sparse table (one float per feature id, created on first
 * push), the bias under key SPARSE_BIAS_KEY. A batch pulls only the keys it touches and
 * pushes their mean gradients. With --prefetch the pull for the next batch is
 * sent before this batch is computed, so it travels while the CPU works (delay
 * 1); without, it is sent after this batch's push.
 * --clip-norm scales a batch's gradient down to that L2 norm. Rank 0 evaluates
 * log-loss, AUC and accuracy on --test from freshly pulled weights. A resumed job
 * goes on at the step its checkpoint recorded (trainpos.h); --checkpoint-epochs
 * takes consistent checkpoints at epoch ends. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps.h"
#include "updflags.h"
#include "jobstats.h"
#include "grow.h"
#include "libsvm.h"
#include "modelfile.h"
#include "report.h"
#include "ring.h"
#include "sparse_eval.h"
#include "timeutil.h"
#include "trainpos.h"

#define TMO 120000

static int fail(pskv_worker *w, const char *what, int rc)
{
    return app_fail("sparse-lr", w, what, rc);
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
    modelfile mf = {.kind = 3, .out = 1, .n = n, .keys = keys, .vals = vals};
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
    sparse_eval_score(e, logloss, auc, acc);
    return 0;
}

/* One training run, shared by the steps below: the options, the data, the
 * tables, the two batches' buffers (this batch's and the next one's pull), and
 * the counters of the loop and of rank 0's evaluations. */
typedef struct lr_run {
    pskv_worker *w;
    cfg_entry *cfg;
    int rank, W;
    int batch, epochs;
    double clip;       /* --clip-norm, 0 = none */
    int ckpt_epochs;   /* --checkpoint-epochs, 0 = none */
    int clock_per_batch; /* --evict-after: eviction counts clocks, one per batch */
    libsvm_set d;      /* this worker's shard of --train */
    evalset e;         /* rank 0: --test (or --train) */
    report *rep;
    int t, ts;         /* weight table, stats table (samples, then clipped steps, by rank) */
    uint64_t *keys[2]; /* a batch's distinct keys plus the bias, sorted */
    float *wv[2];      /* their weights */
    size_t nk[2];
    float *grad;
    size_t steps_per_epoch, total, eval_step, next_eval;
    size_t first;      /* the step training starts at (> 0 in a resumed job) */
    trainpos_plan pos;
    int64_t t0, eval_ns;
    double loss_sum, last_total, last_train_s, unreported;
    long loss_n;
    uint64_t pushed_keys;
    int64_t clipped, clipped_unreported; /* this worker's clipped steps; not yet counted */
    int cur;           /* keys[cur], wv[cur]: this batch */
    int prefetch;      /* --prefetch: the next batch's pull travels during this one */
    int64_t prev_push, pending;
} lr_run;

/* This worker's shard, the report, and rank 0's evaluation set with its keys.
 * Returns 0, or 1 after saying why (an allocation failure exits 1 silently). */
static int load_data(lr_run *r)
{
    char why[600];
    cfg_entry *cfg = r->cfg;
    uint64_t split = (uint64_t)cfg_int(cfg, "validation-split"); /* pskv-evaluator's */
    int rc = libsvm_load_split(cfg_str(cfg, "train"), (uint32_t)r->rank, (uint32_t)r->W, 0, split,
                               0, &r->d, why, sizeof why);
    if (rc < 0) {
        fprintf(stderr, "sparse-lr: %s\n", why);
        return 1;
    }
    if (r->d.n == 0) {
        fprintf(stderr, "sparse-lr: worker %d has no examples in %s\n", r->rank,
                cfg_str(cfg, "train"));
        return 1;
    }
    r->rep = report_new(r->rank == 0 ? cfg_str(cfg, "metrics") : NULL,
                        pskv_resume_progress(r->w, NULL, NULL, NULL), why, sizeof why);
    if (!r->rep) {
        fprintf(stderr, "sparse-lr: %s\n", why);
        return 1;
    }
    if (r->rank != 0)
        return 0;
    evalset *e = &r->e;
    /* --test, or the training file's held-out examples (else the whole file) */
    int own = !*cfg_str(cfg, "test");
    rc = sparse_eval_load(e, own ? cfg_str(cfg, "train") : cfg_str(cfg, "test"), own ? split : 0,
                          own && split, why, sizeof why);
    if (rc < 0) {
        fprintf(stderr, "sparse-lr: %s\n", why);
        return 1;
    }
    return 0;
}

int app_sparse_lr_table(pskv_worker *w, cfg_entry *cfg)
{
    pskv_table_opts o;
    pskv_table_opts_init(&o);
    o.kind = PSKV_SPARSE;
    o.width = 1;
    updflags_apply(cfg, &o);
    o.admit_after = (uint32_t)cfg_int(cfg, "admit-after");
    o.evict_after = (uint32_t)cfg_int(cfg, "evict-after");
    o.filters = cfg_str(cfg, "filter");
    o.wire = cfg_str(cfg, "wire");
    if (!strcmp(o.updater, "adagrad"))
        o.eps = 1e-6f;
    return pskv_table_open(w, "sparse-lr.w", &o);
}

/* The sparse weight table and the per-worker sample counter. Returns 0, or 1
 * after saying why. */
static int open_tables(lr_run *r)
{
    r->t = app_sparse_lr_table(r->w, r->cfg);
    if (r->t < 0)
        return fail(r->w, "open the weight table", r->t);
    r->ts = jobstats_open(r->w, "sparse-lr");
    if (r->ts < 0)
        return fail(r->w, "open the stats table", r->ts);
    return 0;
}

/* The two batches' buffers, sized for the largest batch: its features plus the
 * bias. Returns 0, or 1 (silently) when out of memory. */
static int alloc_batches(lr_run *r)
{
    size_t maxk = 1;
    for (size_t i = 0; i < r->d.n; i += (size_t)r->batch) {
        size_t hi = i + (size_t)r->batch < r->d.n ? i + (size_t)r->batch : r->d.n;
        if (r->d.off[hi] - r->d.off[i] + 1 > maxk)
            maxk = r->d.off[hi] - r->d.off[i] + 1;
    }
    r->keys[0] = malloc(maxk * 8);
    r->keys[1] = malloc(maxk * 8);
    r->wv[0] = malloc(maxk * 4);
    r->wv[1] = malloc(maxk * 4);
    r->grad = malloc(maxk * 4);
    if (!r->keys[0] || !r->keys[1] || !r->wv[0] || !r->wv[1] || !r->grad)
        return 1;
    return 0;
}

/* Steps per epoch and in all, when rank 0 evaluates, and in a resumed job the
 * step to go on from (rank 0 then starts its rate from the restored sample
 * counts and notes the resume in the metrics). Returns 0, or 1 after saying why. */
static int plan(lr_run *r)
{
    r->steps_per_epoch = (r->d.n + (size_t)r->batch - 1) / (size_t)r->batch;
    double eval_every = cfg_double(r->cfg, "eval-every");
    r->eval_step = eval_every > 0 ? (size_t)ceil(eval_every * (double)r->steps_per_epoch) : 0;
    if (eval_every > 0 && r->eval_step < 1)
        r->eval_step = 1;
    r->total = r->steps_per_epoch * (size_t)r->epochs;
    r->pos = (trainpos_plan){(int64_t)r->steps_per_epoch, (int64_t)r->total, r->batch,
                             (int64_t)r->d.n, 0};
    int64_t first;
    int resumed = trainpos_resume(r->w, "sparse-lr", &r->pos, &first);
    if (resumed < 0)
        return 1;
    r->first = (size_t)first;
    trainpos_report(r->w, &r->pos, first); /* a checkpoint before the first step keeps it */
    r->next_eval = r->eval_step ? (r->first / r->eval_step + 1) * r->eval_step : 0;
    if (!resumed || r->rank != 0)
        return 0;
    double clipped = 0;
    int rc = jobstats_read(r->w, r->ts, TMO, &r->last_total, &clipped);
    if (rc < 0)
        return fail(r->w, "stats pull", rc);
    report_resumed(r->rep, first / (int64_t)r->steps_per_epoch, first, (int64_t)r->total);
    return 0;
}

/* The first example of step `step`'s batch and the one after its last. */
static void batch_range(const lr_run *r, size_t step, size_t *lo, size_t *hi)
{
    size_t s = step % r->steps_per_epoch;
    *lo = s * (size_t)r->batch;
    *hi = *lo + (size_t)r->batch < r->d.n ? *lo + (size_t)r->batch : r->d.n;
}

/* Examples [lo, hi) at the weights in wv[cur]: the mean gradient of the
 * log-loss into grad (one float per key of keys[cur]); returns the summed loss. */
static double batch_grad(lr_run *r, size_t lo, size_t hi)
{
    const libsvm_set *d = &r->d;
    const uint64_t *k = r->keys[r->cur];
    const float *wt = r->wv[r->cur];
    size_t n = r->nk[r->cur], bias = lower_bound_u64(k, n, SPARSE_BIAS_KEY);
    memset(r->grad, 0, n * sizeof *r->grad);
    double bl = 0;
    for (size_t i = lo; i < hi; i++) {
        double z = wt[bias];
        for (size_t j = d->off[i]; j < d->off[i + 1]; j++)
            z += wt[lower_bound_u64(k, n, d->idx[j])] * d->val[j];
        double p = sparse_sigmoid(z), y = d->y[i], g = (p - y) / (double)(hi - lo);
        double pc = p < 1e-7 ? 1e-7 : p > 1 - 1e-7 ? 1 - 1e-7 : p;
        bl -= y * log(pc) + (1 - y) * log(1 - pc);
        for (size_t j = d->off[i]; j < d->off[i + 1]; j++)
            r->grad[lower_bound_u64(k, n, d->idx[j])] += (float)(g * d->val[j]);
        r->grad[bias] += (float)g;
    }
    return bl;
}

/* Adds this worker's samples and clipped steps since the last call to the
 * job-wide counters (jobstats.h; not waited for). Returns the push's timestamp
 * or a negated error. */
static int64_t push_stats(lr_run *r)
{
    int64_t ts = jobstats_add(r->w, r->ts, r->unreported, (double)r->clipped_unreported);
    r->unreported = 0;
    r->clipped_unreported = 0;
    return ts;
}

/* Rank 0: log-loss, AUC and accuracy at freshly pulled weights, the job's rate
 * from the sample counter, a report line, and after the last step (`last`, when
 * every worker is done) the final line. Returns 0, or 1 after saying why. */
static int evaluate_step(lr_run *r, size_t step, int last)
{
    int rc;
    int64_t e0 = tu_now_ns();
    double ll = 0, auc = 0, acc = 0;
    if ((rc = evaluate(r->w, r->t, &r->e, &ll, &auc, &acc)) < 0)
        return fail(r->w, "evaluation", rc);
    double all = 0, clipped = 0;
    if ((rc = jobstats_read(r->w, r->ts, TMO, &all, &clipped)) < 0)
        return fail(r->w, "stats pull", rc);
    double train_s = (double)(e0 - r->t0 - r->eval_ns) / 1e9;
    report_line l = {.epoch = (double)(step + 1) / (double)r->steps_per_epoch,
                     .step = (int64_t)step + 1,
                     .time = (double)(tu_now_ns() - r->t0) / 1e9,
                     .train_loss = r->loss_n ? r->loss_sum / (double)r->loss_n : NAN,
                     .test_loss = ll,
                     .accuracy = acc,
                     .samples_per_s = train_s > r->last_train_s
                                          ? (all - r->last_total) / (train_s - r->last_train_s)
                                          : 0,
                     .auc = auc,
                     .clipped_steps = r->clip > 0 ? (int64_t)clipped : -1};
    pskv_traffic tr;
    if (pskv_traffic_get(r->w, -1, &tr) == 0)
        l.bytes_per_step = (double)(tr.sent + tr.received) / (double)(step + 1);
    report_eval(r->rep, &l);
    r->last_total = all;
    r->last_train_s = train_s;
    r->loss_sum = 0;
    r->loss_n = 0;
    r->next_eval += r->eval_step;
    r->eval_ns += tu_now_ns() - e0;
    if (last && r->clip > 0)
        printf("clipped steps %lld (every worker's, --clip-norm %g)\n", (long long)clipped,
               r->clip);
    if (last)
        printf("final auc %.4f logloss %.4f accuracy %.4f; %.0f keys/s pushed by rank 0\n", auc,
               ll, acc, (double)r->pushed_keys / train_s);
    return 0;
}

/* Sends the pull of batch `step` into keys[cur ^ 1], wv[cur ^ 1]. Returns 0, or 1
 * after saying why. */
static int send_pull(lr_run *r, size_t step)
{
    size_t lo, hi;
    batch_range(r, step, &lo, &hi);
    int nx = r->cur ^ 1;
    r->nk[nx] = sparse_batch_keys(&r->d, lo, hi, r->keys[nx]);
    r->pending = pskv_pull(r->w, r->t, r->keys[nx], r->nk[nx], r->wv[nx]);
    return r->pending < 0 ? fail(r->w, "pull", (int)r->pending) : 0;
}

/* One batch: waits for its weights (and the previous batch's push), sends the
 * next batch's pull (--prefetch; else after the push), computes and pushes the
 * gradient; every 64 steps the sample
 * counter, and rank 0's evaluation when one is due. Returns 0, or 1 after saying why. */
static int train_step(lr_run *r, size_t step)
{
    int rc;
    size_t lo, hi;
    batch_range(r, step, &lo, &hi);
    if ((rc = pskv_wait(r->w, r->pending, TMO)) < 0)
        return fail(r->w, "pull", rc);
    /* the previous batch's push first (with replicas pulls are answered by tails,
     * which hold a push once it is acknowledged): weights at most two batches old */
    if (r->prev_push > 0 && (rc = pskv_wait(r->w, r->prev_push, TMO)) < 0)
        return fail(r->w, "push", rc);
    /* --prefetch: send the next batch's pull now: it travels while this one computes */
    if (r->prefetch && step + 1 < r->total && (rc = send_pull(r, step + 1)) != 0)
        return rc;
    double bl = batch_grad(r, lo, hi);
    r->loss_sum += bl / (double)(hi - lo);
    r->loss_n++;
    r->unreported += (double)(hi - lo);
    size_t n = r->nk[r->cur];
    float *parts[] = {r->grad};
    if (r->clip > 0 && pskv_clip_norm(parts, &n, 1, r->clip, NULL) == 1) {
        r->clipped++;
        r->clipped_unreported++;
    }
    int64_t tp = pskv_push(r->w, r->t, r->keys[r->cur], n, r->grad);
    if (tp < 0)
        return fail(r->w, "push", (int)tp);
    r->prev_push = tp;
    r->pushed_keys += n;
    /* eviction counts clocks: one per batch */
    if (r->clock_per_batch && (rc = pskv_clock(r->w)) < 0)
        return fail(r->w, "clock", rc);
    /* without --prefetch the next pull goes behind this push, which it sees */
    if (!r->prefetch && step + 1 < r->total && (rc = send_pull(r, step + 1)) != 0)
        return rc;
    r->cur ^= 1;
    if ((step & 63) == 63 && (tp = push_stats(r)) < 0)
        return fail(r->w, "stats push", (int)tp);
    trainpos_report(r->w, &r->pos, (int64_t)step + 1);
    if (trainpos_due(&r->pos, r->ckpt_epochs, (int64_t)step + 1)) {
        /* the job-wide counters go into the checkpoint with the weights */
        if ((tp = push_stats(r)) < 0 ||
            (tp = trainpos_checkpoint(r->w, &r->pos, (int64_t)step + 1, TMO)) < 0)
            return fail(r->w, "checkpoint", (int)tp);
    }
    int last = step + 1 == r->total;
    if (r->rank == 0 && ((r->eval_step && step + 1 >= r->next_eval) || last)) {
        /* the final figures come after every worker is done */
        if (last && ((tp = push_stats(r)) < 0 || (rc = pskv_barrier(r->w, TMO * 10)) < 0))
            return fail(r->w, "barrier after training", tp < 0 ? (int)tp : rc);
        return evaluate_step(r, step, last);
    }
    return 0;
}

/* After the loop: rank 0 saves the model; other ranks report their last samples
 * and pass the barrier rank 0 waits at before its final figures. Returns 0, or 1
 * after saying why. */
static int end_training(lr_run *r)
{
    int rc;
    const char *save = cfg_str(r->cfg, "save-model");
    if (r->rank == 0 && *save && save_model(r->w, r->t, save))
        return 1;
    if (r->rank != 0) {
        int64_t tp = push_stats(r);
        double secs = (double)(tu_now_ns() - r->t0) / 1e9;
        if (tp < 0 || (rc = pskv_barrier(r->w, TMO * 10)) < 0)
            return fail(r->w, "barrier after training", tp < 0 ? (int)tp : rc);
        printf("rank %d done: %zu examples x %d epochs in %.1f s, %.0f keys/s pushed\n", r->rank,
               r->d.n, r->epochs, secs, (double)r->pushed_keys / secs);
    }
    if (r->clip > 0)
        printf("rank %d clipped %lld of %zu steps to --clip-norm %g\n", r->rank,
               (long long)r->clipped, r->total, r->clip);
    pskv_traffic tr; /* the weight table's data frames (scripts/bench-sparse.sh sums them) */
    if (pskv_traffic_get(r->w, r->t, &tr) == 0)
        printf("rank %d weight traffic: sent %llu bytes (%llu before filters), received %llu "
               "(%llu before)\n", r->rank, (unsigned long long)tr.sent,
               (unsigned long long)tr.sent_raw, (unsigned long long)tr.received,
               (unsigned long long)tr.received_raw);
    return 0;
}

static void free_run(lr_run *r)
{
    report_destroy(&r->rep);
    libsvm_free(&r->d);
    sparse_eval_free(&r->e);
    free(r->keys[0]);
    free(r->keys[1]);
    free(r->wv[0]);
    free(r->wv[1]);
    free(r->grad);
}

/* On a failure this returns at once without freeing the run: a pull may still be
 * in flight into its buffers (pskv_worker_close waits for it), and the process
 * exits next. */
int app_sparse_lr_flags(cfg_entry *cfg, const char *prog)
{
    if (!*cfg_str(cfg, "train")) {
        fprintf(stderr, "%s: --app sparse-lr needs --train FILE (LIBSVM format)\n", prog);
        return -1;
    }
    return 0;
}

int app_sparse_lr(pskv_worker *w, cfg_entry *cfg)
{
    lr_run r;
    memset(&r, 0, sizeof r);
    r.w = w;
    r.cfg = cfg;
    r.rank = pskv_rank(w);
    r.W = pskv_num_workers(w);
    r.batch = (int)cfg_int(cfg, "batch");
    r.epochs = (int)cfg_int(cfg, "epochs");
    r.clip = cfg_double(cfg, "clip-norm"); /* > 0 when set: worker_main checks */
    r.ckpt_epochs = (int)cfg_int(cfg, "checkpoint-epochs");
    r.prefetch = (int)cfg_int(cfg, "prefetch"); /* worker_main checks the model allows it */
    /* eviction counts clocks, and so does pskv-evaluator's snapshot (the slowest
     * worker's clock): one per batch */
    r.clock_per_batch = cfg_int(cfg, "evict-after") > 0 || cfg_int(cfg, "validation-split") > 0;
    int rc;
    if ((rc = load_data(&r)) || (rc = open_tables(&r)) || (rc = alloc_batches(&r)))
        return rc;
    if (r.rank == 0 && *cfg_str(cfg, "init-from") && load_model(w, r.t, cfg_str(cfg, "init-from")))
        return 1;
    rc = pskv_barrier(w, TMO);
    if (rc < 0)
        return fail(w, "barrier before training", rc);
    if ((rc = plan(&r)))
        return rc;
    r.t0 = tu_now_ns();
    size_t lo, hi;
    batch_range(&r, r.first, &lo, &hi);
    r.nk[0] = sparse_batch_keys(&r.d, lo, hi, r.keys[0]);
    r.pending = pskv_pull(w, r.t, r.keys[0], r.nk[0], r.wv[0]);
    if (r.pending < 0)
        return fail(w, "pull", (int)r.pending);
    size_t step = r.first;
    char why[256];
    int stopped = 0;
    for (; step < r.total && !stopped; step++) {
        if (app_stop_signal)
            return app_stopped("sparse-lr");
        if ((rc = train_step(&r, step)) != 0)
            return rc;
        /* early stopping (pskv-evaluator's val_auc or val_loss): every worker
         * stops after its current batch and meets the others at the barrier */
        if (step + 1 < r.total && (stopped = pskv_stop_requested(w, why, sizeof why)))
            printf("stopped early at epoch %zu: %s\n", step / r.steps_per_epoch + 1, why);
    }
    if (stopped && (rc = pskv_wait_all(w, TMO)) < 0)
        return fail(w, "the pushes before stopping", rc);
    /* resumed from a checkpoint after the last step, or stopped early: rank 0's
     * final figures still wait for every worker, as after the last step */
    if ((r.first >= r.total || stopped) && r.rank == 0) {
        int64_t tp = push_stats(&r);
        if (tp < 0 || (rc = pskv_barrier(w, TMO * 10)) < 0)
            return fail(w, "barrier after training", tp < 0 ? (int)tp : rc);
        if ((rc = evaluate_step(&r, (stopped ? step : r.total) - 1, 1)) != 0)
            return rc;
    }
    if ((rc = end_training(&r)) != 0)
        return rc;
    free_run(&r);
    return 0;
}
