/* --app softmax | mlp: Fashion-MNIST training on pskv.
 *
 * All parameters are one dense table (model.h layout), so a step is one pull and
 * one push of float32 values. Pulls are double-buffered: the pull for the next
 * step is sent right after this step's push and travels while this step's
 * gradient is computed, so communication overlaps compute (the weights a step
 * uses miss at most the worker's own previous push: async, delay 1).
 * Rank 0 evaluates on the test set from freshly pulled weights every
 * --eval-every epochs of its own and writes the metrics; every worker adds its
 * sample count to a small `sum` table so rank 0 reports the whole job's rate. */
#define _GNU_SOURCE
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "apps.h"
#include "idx.h"
#include "log.h"
#include "model.h"
#include "modelfile.h"
#include "report.h"
#include "ring.h"
#include "timeutil.h"

#define TMO 120000

static int fail(pskv_worker *w, const char *what, int rc)
{
    fprintf(stderr, "train: %s: %s (%s)\n", what, pskv_strerror(rc), w ? pskv_last_error(w) : "");
    return 1;
}

int app_train_check_data(cfg_entry *cfg)
{
    const char *dir = cfg_str(cfg, "data");
    const char *files[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                           "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
    for (int i = 0; i < 4; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (stat(path, &st) != 0) {
            fprintf(stderr,
                    "pskv-worker: Fashion-MNIST not found: %s does not exist.\n"
                    "  Install it with: apt-get install dataset-fashion-mnist (or run "
                    "scripts/install-deps.sh),\n  or point --data DIR at a folder holding the "
                    "four idx .gz files.\n",
                    path);
            return -1;
        }
    }
    return 0;
}

static uint64_t rng_next(uint64_t *s)
{
    *s += 0x9e3779b97f4a7c15ULL;
    return ring_mix64(*s);
}

static void shuffle(uint32_t *a, uint32_t n, uint64_t seed)
{
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = (uint32_t)(rng_next(&seed) % i);
        uint32_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

typedef struct run {
    pskv_worker *w;
    int t, ts;       /* parameter table, stats table */
    model *m;
    size_t P;
    int rank, W;
    report *rep;
    idx_set test;
    float *eval_params;
    int64_t t0_ns, eval_ns;  /* training start; time spent in evaluation */
    double last_samples, last_train_s;
    double loss_sum;
    long loss_n;
    double accuracy; /* of the latest evaluation */
} run;

/* Adds this worker's samples since the last call to the job-wide counter. */
static int push_stats(run *r, double samples)
{
    uint64_t key = (uint64_t)r->rank;
    float v = (float)samples;
    int64_t ts = pskv_push(r->w, r->ts, &key, 1, &v);
    return ts < 0 ? (int)ts : 0;
}

static int evaluate(run *r, double epoch, int64_t step)
{
    int64_t e0 = tu_now_ns();
    int64_t tp = pskv_pull(r->w, r->t, NULL, r->P, r->eval_params);
    int rc = tp < 0 ? (int)tp : pskv_wait(r->w, tp, TMO);
    if (rc < 0)
        return rc;
    double loss = 0;
    long correct = 0;
    model_eval(r->m, r->eval_params, r->test.x, r->test.y, (int)r->test.n, &loss, &correct);
    float *counts = malloc((size_t)r->W * sizeof(float));
    if (!counts)
        return -PSKV_ENOMEM;
    tp = pskv_pull(r->w, r->ts, NULL, (size_t)r->W, counts);
    rc = tp < 0 ? (int)tp : pskv_wait(r->w, tp, TMO);
    double total = 0;
    for (int i = 0; i < r->W && rc == 0; i++)
        total += counts[i];
    free(counts);
    if (rc < 0)
        return rc;
    int64_t now = tu_now_ns();
    double train_s = (double)(e0 - r->t0_ns - r->eval_ns) / 1e9;
    report_line l = {epoch,
                     step,
                     (double)(now - r->t0_ns) / 1e9,
                     r->loss_n ? r->loss_sum / (double)r->loss_n : NAN,
                     loss / (double)r->test.n,
                     (double)correct / (double)r->test.n,
                     train_s > r->last_train_s
                         ? (total - r->last_samples) / (train_s - r->last_train_s)
                         : 0,
                     NAN};
    report_eval(r->rep, &l);
    r->accuracy = l.accuracy;
    r->last_samples = total;
    r->last_train_s = train_s;
    r->loss_sum = 0;
    r->loss_n = 0;
    r->eval_ns += tu_now_ns() - e0;
    return 0;
}

enum lr_schedule { LR_CONST, LR_LINEAR, LR_COSINE };

/* Learning-rate factor at fraction done (0..1) of the run: const 1, linear 1 -> 0,
 * cosine 0.5 (1 + cos(pi x)). */
static double lr_factor(enum lr_schedule sched, double done)
{
    switch (sched) {
    case LR_LINEAR: return 1.0 - done;
    case LR_COSINE: return 0.5 * (1.0 + cos(M_PI * done));
    default: return 1.0;
    }
}

int app_train(pskv_worker *w, cfg_entry *cfg)
{
    const char *app = cfg_str(cfg, "app");
    int mlp = !strcmp(app, "mlp");
    int hidden = mlp ? (int)cfg_int(cfg, "hidden") : 0;
    int batch = (int)cfg_int(cfg, "batch");
    int epochs = (int)cfg_int(cfg, "epochs");
    double eval_every = cfg_double(cfg, "eval-every");
    uint64_t seed = (uint64_t)cfg_int(cfg, "seed");
    int accumulate = (int)cfg_int(cfg, "accumulate");
    const char *sched_name = cfg_str(cfg, "lr-schedule"); /* checked by worker_main */
    enum lr_schedule lr_sched = !strcmp(sched_name, "linear")   ? LR_LINEAR
                                : !strcmp(sched_name, "cosine") ? LR_COSINE
                                                                : LR_CONST;
    double slowdown = cfg_double(cfg, "slowdown"), jitter_p = 0, jitter_f = 1;
    if (*cfg_str(cfg, "jitter") && sscanf(cfg_str(cfg, "jitter"), "%lf:%lf", &jitter_p, &jitter_f) != 2) {
        fprintf(stderr, "train: --jitter must be P:F (e.g. 0.1:5)\n");
        return 2;
    }
    char why[512];
    run r;
    memset(&r, 0, sizeof r);
    r.w = w;
    r.rank = pskv_rank(w);
    r.W = pskv_num_workers(w);
    model_set_ftz();

    idx_set train;
    int rc = idx_load(cfg_str(cfg, "data"), "train", (uint32_t)r.rank, (uint32_t)r.W,
                      (uint32_t)cfg_int(cfg, "train-limit"), &train, why, sizeof why);
    if (rc < 0) {
        fprintf(stderr, "train: %s\n", why);
        return 1;
    }
    if (r.rank == 0) {
        rc = idx_load(cfg_str(cfg, "data"), "t10k", 0, 1, (uint32_t)cfg_int(cfg, "test-limit"),
                      &r.test, why, sizeof why);
        if (rc < 0) {
            fprintf(stderr, "train: %s\n", why);
            idx_free(&train);
            return 1;
        }
    }
    r.m = model_new((int)train.dim, hidden, 10, batch);
    if (!r.m || train.n == 0) {
        fprintf(stderr, "train: %s\n", train.n ? "out of memory" : "this worker's shard is empty");
        return 1;
    }
    r.P = model_size(r.m);
    r.rep = r.rank == 0 ? report_new(cfg_str(cfg, "metrics"), why, sizeof why) : report_new(NULL, why, sizeof why);
    if (!r.rep) {
        fprintf(stderr, "train: %s\n", why);
        return 1;
    }

    pskv_table_opts o;
    pskv_table_opts_init(&o);
    o.kind = PSKV_DENSE;
    o.size = r.P;
    o.width = 1;
    o.updater = cfg_str(cfg, "updater");
    o.lr = (float)cfg_double(cfg, "lr");
    o.momentum = strcmp(o.updater, "sgd") == 0 ? (float)cfg_double(cfg, "momentum") : 0.0f;
    o.l2 = (float)cfg_double(cfg, "l2");
    o.init = "uniform";
    o.init_scale = (float)(1.0 / sqrt((double)train.dim)); /* PyTorch's Linear bound */
    o.seed = seed;
    o.consistency = cfg_str(cfg, "consistency");
    o.backup = (uint32_t)cfg_int(cfg, "backup");
    char name[96];
    snprintf(name, sizeof name, "%s-%u-%d-10", app, train.dim, hidden);
    r.t = pskv_table_open(w, name, &o);
    if (r.t < 0)
        return fail(w, "open the parameter table", r.t);
    pskv_table_opts_init(&o);
    o.kind = PSKV_DENSE;
    o.size = (uint64_t)r.W;
    o.updater = "sum";
    snprintf(name, sizeof name, "%s.samples", app);
    r.ts = pskv_table_open(w, name, &o);
    if (r.ts < 0)
        return fail(w, "open the stats table", r.ts);

    float *grad2 = malloc(r.P * sizeof(float));
    float *buf[2], *grad = malloc(r.P * sizeof(float)), *x = malloc((size_t)batch * train.dim * sizeof(float));
    uint8_t *y = malloc((size_t)batch);
    uint32_t *order = malloc(train.n * sizeof *order);
    buf[0] = malloc(r.P * sizeof(float));
    buf[1] = malloc(r.P * sizeof(float));
    r.eval_params = malloc(r.P * sizeof(float));
    if (!grad || !grad2 || !x || !y || !order || !buf[0] || !buf[1] || !r.eval_params) {
        fprintf(stderr, "train: out of memory\n");
        return 1;
    }
    const char *init_from = cfg_str(cfg, "init-from");
    if (r.rank == 0 && *init_from) {
        modelfile mf;
        rc = modelfile_load(init_from, &mf, why, sizeof why);
        if (rc == 0 && (mf.kind != (uint32_t)(mlp ? 2 : 1) || mf.in != train.dim ||
                        mf.hidden != (uint32_t)hidden || mf.out != 10 || mf.n != r.P)) {
            snprintf(why, sizeof why,
                     "%s holds a %s %u-%u-%u model; this run trains %s %u-%d-10", init_from,
                     mf.kind == 2 ? "mlp" : mf.kind == 1 ? "softmax" : "non-dense", mf.in,
                     mf.hidden, mf.out, app, train.dim, hidden);
            rc = -PSKV_EINVAL;
        }
        if (rc < 0) {
            fprintf(stderr, "train: --init-from: %s\n", why);
            modelfile_free(&mf);
            return 1;
        }
        int64_t ta = pskv_assign(w, r.t, NULL, r.P, mf.vals);
        modelfile_free(&mf);
        if (ta < 0 || (rc = pskv_wait(w, ta, TMO)) < 0)
            return fail(w, "load --init-from weights", ta < 0 ? (int)ta : rc);
        printf("loaded weights from %s\n", init_from);
    }
    rc = pskv_barrier(w, TMO);
    if (rc < 0)
        return fail(w, "barrier before training", rc);

    for (uint32_t i = 0; i < train.n; i++)
        order[i] = i;
    const int64_t per_step = (int64_t)batch * accumulate;
    const int64_t steps_per_epoch = ((int64_t)train.n + per_step - 1) / per_step;
    const int64_t total_steps = steps_per_epoch * epochs;
    int64_t eval_step = eval_every > 0 ? (int64_t)ceil(eval_every * (double)steps_per_epoch) : 0;
    if (eval_every > 0 && eval_step < 1)
        eval_step = 1;
    int64_t next_eval = eval_step;
    r.t0_ns = tu_now_ns();

    /* Under async and ssp the pull for the next step is sent right after this
     * step's push and clock, into the other buffer, and travels while the next
     * gradient is computed (the weights a step uses miss at most this worker's
     * previous push). Under bsp a step must see every push of the clock before:
     * push, clock, pull, wait, compute, with no overlap. */
    const int overlap = strcmp(cfg_str(cfg, "consistency"), "bsp") != 0;
    int cur = 0;
    int64_t pending = pskv_pull(w, r.t, NULL, r.P, buf[0]);
    if (pending < 0 || (rc = pskv_wait(w, pending, TMO)) < 0)
        return fail(w, "first pull", pending < 0 ? (int)pending : rc);
    pending = -1;
    if (overlap && (pending = pskv_pull(w, r.t, NULL, r.P, buf[1])) < 0)
        return fail(w, "pull", (int)pending);
    double epoch_loss = 0, unreported = 0;
    int64_t ns_compute = 0, ns_push = 0, ns_wait = 0, ns_batch = 0, ns_sleep = 0;
    int64_t loop_t0 = tu_now_ns(), epoch_t0 = loop_t0, nsteps = 0;
    uint64_t jitter_rng = ring_mix64(seed ^ (uint64_t)(r.rank + 1) * 0x51ed27ULL);
    int64_t step = 0, epoch_steps = 0, prev_push = 0;
    while (step < total_steps) {
        if (app_stop_signal)
            return app_stopped("train");
        int64_t in_epoch = step % steps_per_epoch;
        int epoch = (int)(step / steps_per_epoch);
        if (in_epoch == 0 || epoch_steps == 0) {
            shuffle(order, train.n, ring_mix64(seed * 1000003 + (uint64_t)r.rank * 7919 + (uint64_t)epoch));
            epoch_loss = 0;
            epoch_steps = 0;
            epoch_t0 = tu_now_ns();
        }
        /* K micro-batches of `batch`, averaged into one push */
        int64_t cb = 0, cc = 0;
        float loss = 0;
        int micro = 0;
        for (int a = 0; a < accumulate; a++) {
            uint32_t first = (uint32_t)((in_epoch * accumulate + a) * batch);
            if (first >= train.n)
                break;
            int64_t c0 = tu_now_ns();
            int bs = (int)((train.n - first) < (uint32_t)batch ? train.n - first : (uint32_t)batch);
            for (int b = 0; b < bs; b++) {
                memcpy(x + (size_t)b * train.dim, train.x + (size_t)order[first + b] * train.dim,
                       train.dim * sizeof(float));
                y[b] = train.y[order[first + b]];
            }
            int64_t c1 = tu_now_ns();
            float *g = micro ? grad2 : grad;
            loss += model_grad(r.m, buf[cur], x, y, bs, g);
            if (micro)
                cblas_saxpy((blasint)r.P, 1.0f, grad2, 1, grad, 1);
            micro++;
            unreported += bs;
            cb += c1 - c0;
            cc += tu_now_ns() - c1;
        }
        /* the learning-rate schedule, as a factor on the pushed gradient: with the
         * sgd updater (w -= lr * v, v = momentum * v + g) the same as scaling lr */
        float scale = (float)lr_factor(lr_sched, (double)step / (double)total_steps) /
                      (float)micro;
        if (scale != 1.0f)
            cblas_sscal((blasint)r.P, scale, grad, 1);
        loss /= (float)micro;
        /* stragglers: sleep in proportion to the compute just done */
        double factor = slowdown;
        if (jitter_p > 0 && (double)(rng_next(&jitter_rng) >> 11) / 9007199254740992.0 < jitter_p)
            factor *= jitter_f;
        if (factor > 1) {
            int64_t z = tu_now_ns();
            tu_sleep_ms((int64_t)((factor - 1) * (double)cc / 1e6 + 0.5));
            ns_sleep += tu_now_ns() - z;
        }
        epoch_loss += loss;
        epoch_steps++;
        r.loss_sum += loss;
        r.loss_n++;
        int64_t c2 = tu_now_ns();
        int64_t tp = pskv_push(w, r.t, NULL, r.P, grad);
        if (tp < 0)
            return fail(w, "push", (int)tp);
        if ((rc = pskv_clock(w)) < 0)
            return fail(w, "clock", rc);
        int64_t c3 = tu_now_ns();
        if (overlap) {
            /* the other buffer's pull was sent during this step's compute */
            if ((rc = pskv_wait(w, pending, TMO)) < 0)
                return fail(w, "pull", rc);
            /* the previous step's push has had a whole step to be acknowledged: with
             * replicas a pull is answered by the tail, which holds a push only once it
             * is acknowledged, so waiting for it bounds how stale the next weights are
             * (and how many pushes are in flight) to two steps of this worker */
            if (prev_push > 0 && (rc = pskv_wait(w, prev_push, TMO)) < 0)
                return fail(w, "push", rc);
            prev_push = tp;
            pending = pskv_pull(w, r.t, NULL, r.P, buf[cur]); /* after the push: sees it */
            if (pending < 0)
                return fail(w, "pull", (int)pending);
            cur ^= 1;
        } else {
            int64_t tl = pskv_pull(w, r.t, NULL, r.P, buf[cur]);
            if (tl < 0 || (rc = pskv_wait(w, tl, TMO)) < 0)
                return fail(w, "pull", tl < 0 ? (int)tl : rc);
        }
        int64_t c4 = tu_now_ns();
        ns_batch += cb;
        ns_compute += cc;
        ns_push += c3 - c2;
        ns_wait += c4 - c3;
        nsteps++;
        if ((nsteps & 15) == 15) {
            if ((rc = push_stats(&r, unreported)) < 0)
                return fail(w, "stats push", rc);
            unreported = 0;
        }
        double done = (double)(step + 1) / (double)steps_per_epoch;
        double secs = (double)(tu_now_ns() - epoch_t0) / 1e9;
        report_progress(r.rep, epoch + 1, 100.0 * (double)(in_epoch + 1) / (double)steps_per_epoch,
                        secs > 0 ? (double)epoch_steps * batch * accumulate / secs : 0,
                        epoch_loss / (double)epoch_steps);
        if (in_epoch == steps_per_epoch - 1 && r.rank != 0)
            printf("rank %d epoch %d: train_loss %.4f  %.0f samples/s (this worker)  %.1f s\n",
                   r.rank, epoch + 1, epoch_loss / (double)epoch_steps,
                   (double)train.n / secs, secs);
        if (r.rank == 0 && eval_step && step + 1 >= next_eval && step + 1 < total_steps) {
            if ((rc = push_stats(&r, unreported)) < 0 || (rc = pskv_wait_all(w, TMO)) < 0)
                return fail(w, "stats push", rc);
            unreported = 0;
            if ((rc = evaluate(&r, done, step + 1)) < 0)
                return fail(w, "evaluation", rc);
            next_eval += eval_step;
        }
        /* a bsp worker left behind (its clock closed without it) skips ahead */
        step = pskv_current_clock(w) > step + 1 ? pskv_current_clock(w) : step + 1;
    }
    if ((rc = push_stats(&r, unreported)) < 0 || (rc = pskv_wait_all(w, TMO)) < 0)
        return fail(w, "final push", rc);
    double loop_s = (double)(tu_now_ns() - loop_t0) / 1e9, n_st = nsteps ? (double)nsteps : 1;
    printf("rank %d step time: batch %.1f us, compute %.1f us, push %.1f us, wait for pull %.1f us, "
           "straggler sleep %.1f us (%lld steps)\n",
           r.rank, ns_batch / 1e3 / n_st, ns_compute / 1e3 / n_st, ns_push / 1e3 / n_st,
           ns_wait / 1e3 / n_st, ns_sleep / 1e3 / n_st, (long long)nsteps);
    printf("rank %d waiting fraction %.4f (%.2f s blocked in the library of %.2f s training)\n",
           r.rank, (double)(ns_push + ns_wait) / 1e9 / loop_s, (double)(ns_push + ns_wait) / 1e9,
           loop_s);
    rc = pskv_barrier(w, TMO * 10);
    if (rc < 0)
        return fail(w, "barrier after training", rc);
    int status = 0;
    if (r.rank == 0) {
        if ((rc = evaluate(&r, (double)epochs, total_steps)) < 0)
            return fail(w, "final evaluation", rc);
        const char *save = cfg_str(cfg, "save-model");
        if (*save) {
            modelfile mf = {(uint32_t)(mlp ? 2 : 1), train.dim, (uint32_t)hidden, 10, r.P, NULL,
                            r.eval_params};
            if (modelfile_save(save, &mf, why, sizeof why) < 0) {
                fprintf(stderr, "train: --save-model: %s\n", why);
                status = 1;
            } else {
                printf("model saved to %s\n", save);
            }
        }
        printf("final test accuracy %.4f after %d epochs (%d workers, %d servers)%s%s\n",
               r.accuracy, epochs, r.W, pskv_num_servers(w),
               *cfg_str(cfg, "metrics") ? "; metrics in " : "", cfg_str(cfg, "metrics"));
    }
    report_destroy(&r.rep);
    model_destroy(&r.m);
    idx_free(&train);
    idx_free(&r.test);
    free(grad);
    free(grad2);
    free(x);
    free(y);
    free(order);
    free(buf[0]);
    free(buf[1]);
    free(r.eval_params);
    return status;
}
