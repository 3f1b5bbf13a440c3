/* --app softmax | mlp: Fashion-MNIST training on pskv.
 *
 * All parameters are one dense table (model.h layout), so a step is one pull and
 * one push of float32 values. With --prefetch pulls are double-buffered views
 * (pskv_pull_view): the pull for the next step is sent right after this step's
 * push and travels while the next gradient is computed, so communication overlaps
 * compute (the weights a step uses miss at most the worker's own previous push:
 * delay 1). Without it a step pushes, pulls and waits for the weights it computes
 * on.
 * Rank 0 evaluates on the test set from freshly pulled weights every
 * --eval-every epochs of its own and writes the metrics; every worker adds its
 * sample count (and its steps clipped by --clip-norm) to a small `sum` table so
 * rank 0 reports the whole job's rate (and clipped steps). A resumed job goes on
 * at the step its checkpoint recorded (trainpos.h): the same shuffle, data
 * position and learning-rate factor as the run it continues. */
#define _GNU_SOURCE
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps.h"
#include "balance.h"
#include "eta.h"
#include "idx.h"
#include "jobstats.h"
#include "lrsched.h"
#include "model.h"
#include "modelfile.h"
#include "report.h"
#include "straggle.h"
#include "ring.h"
#include "timeutil.h"
#include "lscale.h"
#include "train_ar.h"
#include "trainpos.h"
#include "waitstat.h"

#define TMO 120000

static int fail(pskv_worker *w, const char *what, int rc)
{
    return app_fail("train", w, what, rc);
}

/* One training run, shared by the steps below: the options, this worker's data,
 * the model, the tables, the buffers a step reuses (allocated once: a step
 * allocates nothing), rank 0's evaluation bookkeeping and the loop's counters. */
typedef struct run {
    pskv_worker *w;
    cfg_entry *cfg;
    /* options */
    const char *app; /* "softmax" or "mlp" */
    int mlp, hidden, batch, epochs, accumulate;
    double eval_every;
    uint64_t seed;
    lr_sched lr_sched;
    straggle sg;     /* --slowdown, --jitter */
    double clip; /* --clip-norm, 0 = none */
    int ckpt_epochs; /* --checkpoint-epochs, 0 = none */
    int64_t freeze_after; /* --freeze-after: push zero gradients from this step on (-1 = never) */
    int digests;     /* --print-digests: each bsp pull's clock and digest */
    int stopped;     /* the scheduler stopped the job early (pskv_stop_requested) */
    double samples;  /* examples this worker trained */
    int resumed;     /* a resumed job: training goes on from resume_step */
    int64_t resume_step;
    /* data, model, tables */
    int rank, W;
    idx_set train, test; /* test: rank 0 only */
    model *m;
    size_t P;        /* parameters */
    int t, ts;       /* parameter table, stats table (samples, then clipped steps, by rank) */
    report *rep;
    train_ar *ar;    /* --sync allreduce, else NULL */
    balance *bal;    /* --balance, else NULL */
    lscale ls;       /* --sync ps: --loss-scale of the pushes (lscale_push) */
    /* buffers */
    float *grad, *grad2;   /* the step's gradient (gbuf[gi]); a further micro-batch's */
    float *gbuf[2];        /* gradients alternate: a push lends its buffer (no copy) */
    int64_t gpush[2];      /* the push still holding gbuf[i], 0 = none */
    int gi;
    float *x;              /* one micro-batch of images */
    uint8_t *y;            /* its labels */
    uint32_t *order;       /* this epoch's shuffled row order */
    int shuffled;          /* epochs whose shuffle order holds (each shuffles the last) */
    float *wbuf;           /* weights pulled into the app's own array (no --prefetch) */
    float *eval_params;
    /* evaluation (rank 0) */
    int64_t t0_ns, eval_ns;  /* training start; time spent in evaluation */
    double last_samples, last_train_s;
    double loss_sum;
    long loss_n;
    double accuracy; /* of the latest evaluation */
    int64_t clipped_job; /* every worker's clipped steps, as of the latest evaluation */
    /* the loop */
    int64_t steps_per_epoch, total_steps, eval_step, next_eval;
    trainpos_plan pos;
    int overlap;      /* --prefetch: the next step's pull travels during this step */
    int pbufs;        /* ... and gradients go in push buffers (pskv_push_buffer) */
    int pp;           /* else a step's push, clock and pull are one pskv_pushpull */
    int ppv;          /* --prefetch --pushpull: ... into a view (PSKV_PP_VIEW), waited
                         for at the next step */
    int tcp_first;    /* --prefetch over TCP: the last reply taken before a step's
                         requests go (pushpull or push and pull) */
    const float *wts; /* this step's weights: wbuf, or the view's */
    int64_t view;     /* --prefetch: the view (pskv_pull_view) wts points into */
    int64_t pending;  /* --prefetch: the next step's view pull (or pushpull), in flight */
    int64_t prev_push;
    int64_t step, epoch_steps, nsteps;
    uint32_t rows;    /* this step's rows (--balance: its share of the global batch) */
    double epoch_loss, unreported;
    int64_t clipped, clipped_unreported; /* this worker's clipped steps; not yet counted */
    int64_t ns_compute, ns_push, ns_wait, ns_batch, ns_sleep;
    waitstat ws;      /* the CPU behind the waiting */
    eta eta;          /* the job's predicted wall time; --estimate: time a few steps, exit */
    int estimate;
    int64_t loop_t0, epoch_t0;
} run;

/* Adds this worker's samples and clipped steps since the last call to the
 * job-wide counters (jobstats.h). */
static int push_stats(run *r, double samples)
{
    int64_t ts = jobstats_add(r->w, r->ts, samples, (double)r->clipped_unreported);
    if (ts < 0)
        return (int)ts;
    r->clipped_unreported = 0;
    return 0;
}

static int evaluate(run *r, double epoch, int64_t step)
{
    int64_t e0 = tu_now_ns();
    int rc = 0;
    if (r->ar) { /* the workers' own weights (the servers' copy may be older) */
        memcpy(r->eval_params, r->wbuf, r->P * sizeof(float));
    } else {
        int64_t tp = pskv_pull(r->w, r->t, NULL, r->P, r->eval_params);
        rc = tp < 0 ? (int)tp : pskv_wait(r->w, tp, TMO);
    }
    if (rc < 0)
        return rc;
    double loss = 0;
    long correct = 0;
    model_eval(r->m, r->eval_params, r->test.x, r->test.y, (int)r->test.n, &loss, &correct);
    double total = 0, clipped = 0;
    if ((rc = jobstats_read(r->w, r->ts, TMO, &total, &clipped)) < 0)
        return rc;
    int64_t now = tu_now_ns();
    double train_s = (double)(e0 - r->t0_ns - r->eval_ns) / 1e9;
    report_line l = {.epoch = epoch, .step = step, .time = (double)(now - r->t0_ns) / 1e9,
                     .train_loss = r->loss_n ? r->loss_sum / (double)r->loss_n : NAN,
                     .test_loss = loss / (double)r->test.n,
                     .accuracy = (double)correct / (double)r->test.n,
                     .samples_per_s = train_s > r->last_train_s
                                          ? (total - r->last_samples) / (train_s - r->last_train_s)
                                          : 0,
                     .auc = NAN,
                     .clipped_steps = r->clip > 0 ? (int64_t)clipped : -1,
                     .train_time = train_s,
                     .samples = total};
    pskv_traffic tr;
    if (step > 0 && pskv_traffic_get(r->w, -1, &tr) == 0)
        l.bytes_per_step = (double)(tr.sent + tr.received) / (double)step;
    if (r->ar)
        train_ar_report(r->ar, &l);
    lscale_report(&r->ls, &l);
    report_eval(r->rep, &l);
    r->accuracy = l.accuracy;
    r->clipped_job = (int64_t)clipped;
    r->last_samples = total;
    r->last_train_s = train_s;
    r->loss_sum = 0;
    r->loss_n = 0;
    r->eval_ns += tu_now_ns() - e0;
    eta_eval(&r->eta, tu_now_ns() - e0);
    return 0;
}

/* ---- setting up ------------------------------------------------------------- */

/* Reads the run's options. Returns 0, or 2 after saying what is wrong. */
static int read_options(run *r)
{
    cfg_entry *cfg = r->cfg;
    r->app = cfg_str(cfg, "app");
    r->mlp = !strcmp(r->app, "mlp");
    r->hidden = r->mlp ? (int)cfg_int(cfg, "hidden") : 0;
    r->batch = (int)cfg_int(cfg, "batch");
    r->epochs = (int)cfg_int(cfg, "epochs");
    r->eval_every = cfg_double(cfg, "eval-every");
    r->seed = (uint64_t)cfg_int(cfg, "seed");
    r->accumulate = (int)cfg_int(cfg, "accumulate");
    lrsched_parse(cfg_str(cfg, "lr-schedule"), &r->lr_sched); /* checked by worker_main */
    r->lr_sched.warmup = cfg_double(cfg, "lr-warmup");
    r->clip = cfg_double(cfg, "clip-norm"); /* > 0 when set: worker_main checks */
    r->ckpt_epochs = (int)cfg_int(cfg, "checkpoint-epochs");
    r->freeze_after = cfg_int(cfg, "freeze-after");
    r->digests = (int)cfg_int(cfg, "print-digests");
    r->estimate = (int)cfg_int(cfg, "estimate");
    int rc = balance_new(cfg, pskv_rank(r->w), pskv_num_workers(r->w), pskv_took_over(r->w),
                         &r->bal);
    return rc ? rc : straggle_init(&r->sg, cfg, r->seed, pskv_rank(r->w));
}

/* This worker's shard of the training set, rank 0's test set, the model and the
 * report. Returns 0, or 1 after saying why. */
static int load_data(run *r)
{
    char why[512];
    cfg_entry *cfg = r->cfg;
    int rc = idx_load_split( /* --balance: every worker holds the whole set (balance.h) */cfg_str(cfg, "data"), "train", r->bal ? 0 : (uint32_t)r->rank,
                            r->bal ? 1 : (uint32_t)r->W,
                            (uint32_t)cfg_int(cfg, "train-limit"),
                            (uint32_t)cfg_int(cfg, "validation-split"), 0, &r->train, why,
                            sizeof why);
    if (rc == -PSKV_EINVAL || (rc == 0 && r->train.n == 0 && cfg_int(cfg, "validation-split"))) {
        fprintf(stderr, "train: --validation-split %lld leaves worker rank %d no training data"
                " (%s)\n", cfg_int(cfg, "validation-split"), r->rank,
                rc < 0 ? why : "its shard is empty");
        idx_free(&r->train);
        return 2;
    }
    if (rc < 0) {
        fprintf(stderr, "train: %s\n", why);
        return 1;
    }
    if (r->rank == 0) {
        rc = idx_load(cfg_str(cfg, "data"), "t10k", 0, 1, (uint32_t)cfg_int(cfg, "test-limit"),
                      &r->test, why, sizeof why);
        if (rc < 0) {
            fprintf(stderr, "train: %s\n", why);
            idx_free(&r->train);
            return 1;
        }
    }
    r->m = model_new((int)r->train.dim, r->hidden, 10, r->bal ? balance_global(r->bal) : r->batch);
    if (!r->m || r->train.n == 0) {
        fprintf(stderr, "train: %s\n",
                r->train.n ? "out of memory" : "this worker's shard is empty");
        return 1;
    }
    r->P = model_size(r->m);
    r->rep = report_new(r->rank == 0 ? cfg_str(cfg, "metrics") : NULL, /* appended to */
                        pskv_resume_progress(r->w, NULL, NULL, NULL) || pskv_took_over(r->w),
                        why, sizeof why);
    if (!r->rep) {
        fprintf(stderr, "train: %s\n", why);
        return 1;
    }
    return 0;
}

/* The parameter table, the all-reduce state (--sync allreduce) and the
 * per-worker sample counter. Returns 0, or 1 after saying why. */
static int open_tables(run *r)
{
    r->t = app_train_table(r->w, r->cfg, r->train.dim, r->hidden, r->P);
    if (r->t < 0)
        return fail(r->w, "open the parameter table", r->t);
    pskv_table_opts o;
    app_train_table_opts(r->cfg, r->train.dim, r->P, &o);
    if (train_ar_new(r->cfg, r->w, &o, r->P, &r->ar))
        return 1;
    if (!r->ar) /* checked by worker_main */
        lscale_parse(&r->ls, cfg_str(r->cfg, "loss-scale"), (long)cfg_int(r->cfg, "scale-window"));
    r->ls.plant = r->ar ? 0 : (long)cfg_int(r->cfg, "plant-overflow");
    int rc = r->bal ? balance_open(r->bal, r->w) : 0;
    if (rc)
        return rc;
    r->ts = jobstats_open(r->w, r->app);
    if (r->ts < 0)
        return fail(r->w, "open the stats table", r->ts);
    return 0;
}

/* The buffers every step reuses. Returns 0, or 1 after saying so. */
static int alloc_buffers(run *r)
{
    r->grad2 = malloc(r->P * sizeof(float));
    r->gbuf[0] = malloc(r->P * sizeof(float));
    r->gbuf[1] = malloc(r->P * sizeof(float));
    r->grad = r->gbuf[0];
    size_t rows = r->bal ? (size_t)balance_global(r->bal) : (size_t)r->batch;
    r->x = malloc(rows * r->train.dim * sizeof(float));
    r->y = malloc(rows);
    r->order = malloc(r->train.n * sizeof *r->order);
    r->wbuf = malloc(r->P * sizeof(float));
    r->eval_params = malloc(r->P * sizeof(float));
    if (!r->gbuf[0] || !r->gbuf[1] || !r->grad2 || !r->x || !r->y || !r->order || !r->wbuf ||
        !r->eval_params) {
        fprintf(stderr, "train: out of memory\n");
        return 1;
    }
    return 0;
}

/* Steps per epoch and in all, when rank 0 evaluates, and in a resumed job the
 * step to go on from. Returns 0, or 1 after saying why. */
static int plan(run *r)
{
    for (uint32_t i = 0; i < r->train.n; i++)
        r->order[i] = i;
    const int64_t per_step = r->bal ? balance_global(r->bal) : (int64_t)r->batch * r->accumulate;
    r->steps_per_epoch = ((int64_t)r->train.n + per_step - 1) / per_step;
    r->total_steps = r->steps_per_epoch * r->epochs;
    r->eval_step =
        r->eval_every > 0 ? (int64_t)ceil(r->eval_every * (double)r->steps_per_epoch) : 0;
    if (r->eval_every > 0 && r->eval_step < 1)
        r->eval_step = 1;
    r->pos = (trainpos_plan){r->steps_per_epoch, r->total_steps, per_step, r->train.n, 0};
    int rc = trainpos_resume(r->w, "train", &r->pos, &r->step);
    if (rc < 0)
        return 1;
    r->resumed = rc;
    r->resume_step = r->step;
    trainpos_report(r->w, &r->pos, r->step); /* a checkpoint before the first step keeps it */
    /* the evaluations the run would have made from here on */
    r->next_eval = r->eval_step ? (r->step / r->eval_step + 1) * r->eval_step : 0;
    return 0;
}

/* Rank 0 of a resumed job: the job-wide counters restored with the checkpoint
 * (samples and clipped steps before it) are where the next rate starts from, and
 * the metrics file says where training went on. Returns 0 or a negated error. */
static int resume_stats(run *r)
{
    if (!r->resumed || r->rank != 0)
        return 0;
    double samples = 0, clipped = 0;
    int rc = jobstats_read(r->w, r->ts, TMO, &samples, &clipped);
    r->last_samples += samples;
    r->clipped_job += (int64_t)clipped;
    report_resumed(r->rep, r->step / r->steps_per_epoch, r->step, r->total_steps);
    return rc;
}

/* ---- one step ---------------------------------------------------------------- */

/* The first weights: into wbuf, or with --prefetch (async, ssp:TAU >= 1:
 * worker_main checks) a view (pskv_pull_view: with --shm read where the server
 * wrote them, over TCP in the received frame), the next step's then sent; each
 * step's goes right after its push (the clock riding on it) and travels while the
 * next gradient is computed (the weights a step uses miss at most this worker's
 * previous push). With --pushpull too (where pskv_pushpull applies; the default
 * with --shm or without replicas) a step's push, clock and pull are one pskv_pushpull into a view,
 * waited for at the next step: the same weights, one request a step instead of a
 * push and a pull. Without --prefetch,
 * and always under bsp: push, clock, pull (or one pskv_pushpull), wait, compute.
 * Returns 0, or 1 after saying why. */
static int first_pull(run *r)
{
    r->overlap = !r->ar && cfg_int(r->cfg, "prefetch");
    /* --pushpull left unset: on with --prefetch through the shared region (--shm)
     * or over TCP without replicas, where one request a step was faster than push
     * then pull (to 2 servers too, since a lent push's short runs go gathered, one
     * message a server); over TCP with R = 2 it was slower (docs/benchmarks.md) */
    const cfg_entry *ppf = cfg_find(r->cfg, "pushpull");
    int want = strcmp(ppf->from, "default")
                   ? (int)ppf->i
                   : r->overlap && (cfg_int(r->cfg, "shm") || pskv_num_replicas(r->w) == 1);
    /* pskv_pushpull: not with filters, a 16-bit wire or loss scaling (pskv.h) */
    int pp = !r->ar && !(r->ls.scale > 0) && want && !r->digests && app_pushpull_fits(r->cfg);
    r->pp = pp && !r->overlap;
    r->ppv = pp && r->overlap;
    r->tcp_first = r->overlap && !cfg_int(r->cfg, "shm");
    r->pbufs = r->overlap && !r->ppv && !(r->ls.scale > 0); /* loss scaling pushes its own way */
    r->wts = r->wbuf;
    r->pending = -1;
    int rc = 0;
    int64_t v = r->overlap ? pskv_pull_view(r->w, r->t, NULL, r->P)
                           : pskv_pull(r->w, r->t, NULL, r->P, r->wbuf);
    if (v < 0 || (rc = pskv_wait(r->w, v, TMO)) < 0)
        return fail(r->w, "first pull", v < 0 ? (int)v : rc);
    if (r->overlap) {
        r->view = v;
        r->wts = pskv_view(r->w, v);
        if (r->ppv) /* the first step's pushpull brings the weights of the third */
            return 0;
        if ((r->pending = pskv_pull_view(r->w, r->t, NULL, r->P)) < 0)
            return fail(r->w, "pull", (int)r->pending);
    }
    return 0;
}

/* A new epoch: this worker's rows in a fresh order, and its loss restarted. Each
 * epoch shuffles the order the one before left, so a resumed job (or a bsp
 * worker that skipped an epoch) first replays the shuffles of the epochs before. */
static void new_epoch(run *r, int epoch)
{
    for (; r->shuffled <= epoch; r->shuffled++)
        app_shuffle(r->order, r->train.n,
                ring_mix64(r->seed * 1000003 + (uint64_t)(r->bal ? 0 : r->rank) * 7919 +
                           (uint64_t)r->shuffled));
    r->epoch_loss = 0;
    r->epoch_steps = 0;
    r->epoch_t0 = tu_now_ns();
}

/* The step's gradient buffer: with --prefetch a push buffer of the library's (with
 * --shm a region the server reads the push from: no copy); else the other one of
 * gbuf, once the push lent it two steps ago is over (its time counts as waiting).
 * Returns 0, or 1 after saying why. */
static int take_grad(run *r)
{
    if (r->pbufs)
        return (r->grad = pskv_push_buffer(r->w, r->t, NULL, r->P))
                   ? 0 : fail(r->w, "push buffer", -PSKV_ENOMEM);
    r->gi ^= 1;
    r->grad = r->gbuf[r->gi];
    if (r->gpush[r->gi] <= 0)
        return 0;
    int64_t t0 = tu_now_ns();
    int rc = pskv_wait(r->w, r->gpush[r->gi], TMO);
    r->ns_wait += tu_now_ns() - t0;
    r->gpush[r->gi] = 0;
    /* a bsp push dropped as late (backup workers) is over too */
    return rc < 0 && rc != -PSKV_ELATE ? fail(r->w, "push", rc) : 0;
}

/* The step's gradient into grad: K micro-batches of `batch` at wts,
 * averaged into one push, clipped to --clip-norm and scaled by the learning-rate
 * schedule. Returns the step's mean loss; adds the time spent gathering rows to
 * *cb and computing to *cc. */
static float compute_step(run *r, int64_t in_epoch, int64_t *cb, int64_t *cc)
{
    const idx_set *train = &r->train;
    const uint32_t batch = (uint32_t)r->batch;
    float loss = 0;
    int micro = 0;
    uint32_t total = 0, first, bs;
    /* the learning-rate schedule, as a factor on the pushed gradient: with the
     * sgd updater (w -= lr * v, v = momentum * v + g) the same as scaling lr; one
     * micro-batch and no --balance: folded into the backward pass (no pass of its
     * own over the gradient) */
    double factor = lrsched_factor(&r->lr_sched, r->step, r->steps_per_epoch, r->epochs);
    if (r->freeze_after >= 0 && r->step >= r->freeze_after)
        factor = 0; /* a planted plateau (tests): the weights stop moving */
    int fold = r->accumulate == 1 && !r->bal;
    float folded = fold ? (float)factor : 1.0f;
    for (int a = 0; a < r->accumulate; a++) {
        first = (uint32_t)((in_epoch * r->accumulate + a) * r->batch);
        bs = first < train->n && train->n - first < batch ? train->n - first : batch;
        if (r->bal)
            total = balance_rows(r->bal, in_epoch, train->n, &first, &bs);
        if (first >= train->n || bs == 0)
            break;
        int64_t c0 = tu_now_ns();
        idx_gather(train, r->order + first, bs, r->x, r->y);
        int64_t c1 = tu_now_ns();
        if (first + bs < train->n) /* the next batch's rows, fetched during this one's */
            idx_prefetch(train, r->order + first + bs,
                         train->n - first - bs < batch ? train->n - first - bs : batch);
        float *g = micro ? r->grad2 : r->grad;
        loss += model_grad(r->m, r->wts, r->x, r->y, (int)bs, folded, g);
        if (micro)
            cblas_saxpy((blasint)r->P, 1.0f, r->grad2, 1, r->grad, 1);
        micro++;
        r->unreported += bs;
        r->samples += bs;
        *cb += c1 - c0;
        *cc += tu_now_ns() - c1;
    }
    if (!micro) /* --balance: no rows for this worker at an epoch's end */ memset(r->grad, 0, r->P * sizeof(float));
    r->rows = micro ? bs : 0;
    float scale = r->bal ? (float)(factor * balance_live(r->bal) * r->rows / (total ? total : 1)) /* balance.h */
                         : fold ? 1.0f : (float)factor / (float)micro;
    if (scale != 1.0f)
        cblas_sscal((blasint)r->P, scale, r->grad, 1);
    /* clipping the averaged gradient to C and then scaling by the factor is
     * clipping the scaled one to C x factor (factor > 0): the order of
     * torch.nn.utils.clip_grad_norm_ before a learning-rate scheduler's step */
    float *parts[] = {r->grad};
    size_t lens[] = {r->P};
    if (r->clip > 0 && pskv_clip_norm(parts, lens, 1, r->clip * factor, NULL) == 1) {
        r->clipped++;
        r->clipped_unreported++;
    }
    loss /= (float)(micro ? micro : 1);
    return loss;
}

/* --sync allreduce: every rank goes on from `step` (the servers' copy's): the data
 * position, the shuffles replayed from the first epoch and the evaluations follow. */
static void reposition(run *r, int64_t step)
{
    r->step = step;
    for (uint32_t i = 0; i < r->train.n; i++)
        r->order[i] = i;
    r->shuffled = 0;
    r->epoch_steps = 0;
    r->next_eval = r->eval_step ? (step / r->eval_step + 1) * r->eval_step : 0;
    trainpos_report(r->w, &r->pos, step);
    if (r->bal)
        balance_start(r->bal, step);
}

#define RESYNCED (-1)
/* --sync allreduce, after an all-reduce failed with -PSKV_EPEERDEAD (the step's,
 * or --balance's speeds after it): waits for a worker to take the dead rank over
 * and goes on, with every rank, from the servers' copy. Returns RESYNCED, or 1
 * after saying why. */
static int resync(run *r)
{
    int64_t s;
    int rc = train_ar_recover(r->ar, r->w, r->t, r->wbuf, &s);
    if (rc < 0)
        return fail(r->w, "all-reduce: no worker took the dead rank over", rc);
    reposition(r, s);
    return RESYNCED;
}

/* --prefetch: makes the view in flight (r->pending: last step's pull or pushpull,
 * none before the first step's) the weights of the next step, releasing this
 * step's. Returns 0, or 1 after saying why. */
static int next_view(run *r)
{
    int rc;
    if (r->pending <= 0)
        return 0;
    if ((rc = pskv_wait(r->w, r->pending, TMO)) < 0)
        return fail(r->w, r->ppv ? "pushpull" : "pull", rc);
    pskv_view_release(r->w, r->view); /* this step's weights: memory for the next */
    r->view = r->pending;
    r->wts = pskv_view(r->w, r->view);
    r->pending = -1;
    return 0;
}

/* --prefetch --pushpull: the step's gradient pushed (lent: take_grad waits before
 * its buffer is written again), the clock ended and the weights after the push
 * asked for in one pskv_pushpull, into a view; the view of the previous step's
 * becomes the next step's weights. Over TCP exchange has waited for that view
 * before the request goes: a request sent while the previous reply is still coming down the
 * same connection made both kernels take in and acknowledge each other's data in
 * the middle of their sends, and its push found the previous reply's rows still
 * lent (the table moved to a copy): a fifth more of the server's CPU a step
 * (docs/benchmarks.md, "A pushpull's request waits for the previous reply").
 * Through shared memory the request goes first (the replies are small). The
 * weights a step uses are the same either way. Waiting for the reply (and, with
 * replicas, its PUSH_ACK) also bounds the pushes in flight, as the push-then-pull
 * path does. Returns 0, or 1 after saying why. */
static int exchange_pp_view(run *r, int64_t c2)
{
    int rc;
    int64_t tq = pskv_pushpull(r->w, r->t, NULL, r->P, r->grad, NULL,
                               PSKV_PP_CLOCK | PSKV_PP_NOCOPY | PSKV_PP_VIEW);
    if (tq < 0)
        return fail(r->w, "pushpull", (int)tq);
    r->gpush[r->gi] = tq;
    if ((rc = balance_pull_send(r->bal, r->w)) < 0)
        return fail(r->w, "--balance: sharing the speeds", rc);
    int64_t c3 = tu_now_ns();
    if (!r->tcp_first && (rc = next_view(r)))
        return rc;
    r->pending = tq; /* after the push: its values are the weights after it */
    r->ns_push += c3 - c2;
    r->ns_wait += tu_now_ns() - c3;
    return 0;
}

/* Pushes the gradient and clocks, then makes wts the next step's weights:
 * with --prefetch, the view pulled last step (and the next one sent); without, a
 * pull into wbuf waited for here. Returns 0, 1 after saying why, or
 * RESYNCED (--sync allreduce: a worker died, and a new one took its rank over:
 * every rank goes on from the servers' copy, r->step). */
static int exchange(run *r)
{
    int rc;
    int64_t c2 = tu_now_ns();
    /* --balance, a worker taking a dead rank back: its clock alone (balance.h) */
    int push = balance_pushes(r->bal);
    if (r->ar) { /* the mean gradient, applied here: wbuf stays the weights */
        rc = train_ar_step(r->ar, r->w, r->t, r->grad, r->wbuf);
        if (rc == -PSKV_EPEERDEAD)
            return resync(r);
        if (rc < 0)
            return fail(r->w, "all-reduce", rc);
        r->ns_push += tu_now_ns() - c2;
        return 0;
    }
    if (r->pp && push) { /* one round trip: the push, the clock and the weights after it */
        int64_t tq = pskv_pushpull(r->w, r->t, NULL, r->P, r->grad, r->wbuf, PSKV_PP_CLOCK);
        int64_t c3 = tu_now_ns();
        if (tq >= 0 && (rc = balance_pull_send(r->bal, r->w)) < 0)
            return fail(r->w, "--balance: sharing the speeds", rc);
        if (tq < 0 || (rc = pskv_wait(r->w, tq, TMO)) < 0)
            return fail(r->w, "pushpull", tq < 0 ? (int)tq : rc);
        r->ns_push += c3 - c2;
        r->ns_wait += tu_now_ns() - c3;
        return 0;
    }
    /* over TCP the view pulled last step first, then the step's push or pushpull: a
     * request sent while that reply still came down the connection costs both
     * kernels more (exchange_pp_view) */
    if (r->tcp_first && (rc = next_view(r)))
        return rc;
    int64_t cw = tu_now_ns();
    r->ns_wait += cw - c2;
    c2 = cw;
    if (r->ppv && push)
        return exchange_pp_view(r, c2);
    /* without a copy: a push buffer is the library's from here, and the clock's end
     * rides on it (one message a server for both); gbuf stays as it is until
     * take_grad waits for this push */
    int rides = push && r->pbufs;
    int64_t tp = !push     ? 0
                 : rides ? pskv_push_buffer_send_clock(r->w, r->t, NULL, r->P, r->grad)
                 : r->pbufs ? pskv_push_buffer_send(r->w, r->t, NULL, r->P, r->grad)
                            : lscale_push(&r->ls, r->w, r->t, r->grad, r->P); /* 0: skipped */
    if (tp < 0)
        return fail(r->w, rides ? "push and clock" : "push", (int)tp);
    if (!r->pbufs)
        r->gpush[r->gi] = tp;
    if (!rides && (rc = pskv_clock(r->w)) < 0)
        return fail(r->w, "clock", rc);
    if ((rc = balance_pull_send(r->bal, r->w)) < 0)
        return fail(r->w, "--balance: sharing the speeds", rc);
    int64_t c3 = tu_now_ns();
    if (r->overlap) {
        /* the next step's view, sent during this step's compute; and the previous
         * step's push: with replicas a pull is answered by the tail, which holds a
         * push only once it is acknowledged, so waiting for it bounds how stale the
         * next weights are (and the pushes in flight) to two steps of this worker */
        if (!r->tcp_first && (rc = next_view(r)))
            return rc;
        if (r->prev_push > 0 && (rc = pskv_wait(r->w, r->prev_push, TMO)) < 0)
            return fail(r->w, "push", rc);
        r->prev_push = tp;
        r->pending = pskv_pull_view(r->w, r->t, NULL, r->P); /* after the push: sees it */
        if (r->pending < 0)
            return fail(r->w, "pull", (int)r->pending);
    } else {
        int64_t tl = pskv_pull(r->w, r->t, NULL, r->P, r->wbuf);
        if (tl < 0 || (rc = pskv_wait(r->w, tl, TMO)) < 0)
            return fail(r->w, "pull", tl < 0 ? (int)tl : rc);
        if (r->digests)
            printf("rank %d pulled clock %lld digest %016llx\n", r->rank,
                   (long long)pskv_values_clock(r->w),
                   (unsigned long long)app_digest(r->wbuf, r->P));
    }
    int64_t c4 = tu_now_ns();
    r->ns_push += c3 - c2;
    r->ns_wait += c4 - c3;
    return 0;
}

/* After a step: the sample counter every 16 steps, the progress line, a rank's
 * end-of-epoch line, and rank 0's evaluation when one is due. Returns 0, or 1
 * after saying why. */
static int after_step(run *r, int64_t in_epoch, int epoch)
{
    int rc;
    if ((r->nsteps & 15) == 15) {
        if ((rc = push_stats(r, r->unreported)) < 0)
            return fail(r->w, "stats push", rc);
        r->unreported = 0;
    }
    double done = (double)(r->step + 1) / (double)r->steps_per_epoch;
    double secs = (double)(tu_now_ns() - r->epoch_t0) / 1e9;
    report_progress(r->rep, epoch + 1, 100.0 * (double)(in_epoch + 1) / (double)r->steps_per_epoch,
                    secs > 0 ? (double)r->epoch_steps * r->batch * r->accumulate / secs : 0,
                    r->epoch_loss / (double)r->epoch_steps);
    if (in_epoch == r->steps_per_epoch - 1 && r->rank != 0)
        printf("rank %d epoch %d: train_loss %.4f  %.0f samples/s (this worker)  %.1f s\n",
               r->rank, epoch + 1, r->epoch_loss / (double)r->epoch_steps,
               (double)r->train.n / secs, secs);
    if (r->rank == 0 && r->eval_step && r->step + 1 >= r->next_eval &&
        r->step + 1 < r->total_steps) {
        if ((rc = push_stats(r, r->unreported)) < 0 || (rc = pskv_wait_all(r->w, TMO)) < 0)
            return fail(r->w, "stats push", rc);
        r->unreported = 0;
        int64_t e0 = tu_thread_cpu_ns(); /* not waiting: counted with the compute */
        if ((rc = evaluate(r, done, r->step + 1)) < 0)
            return fail(r->w, "evaluation", rc);
        r->ws.compute_ns += tu_thread_cpu_ns() - e0;
        r->next_eval += r->eval_step;
    }
    if (r->rank == 0 && !r->estimate && eta_due(&r->eta, r->step + 1))
        eta_print(&r->eta, r->step + 1);
    return 0;
}

/* The training loop. Returns 0, or the exit status after saying why. */
static int train_loop(run *r)
{
    int rc = first_pull(r);
    if (rc)
        return rc;
    /* --balance, a worker that took a dead rank over: at the others' step (its
     * clock, moved up by the first pull), the rows of which every rank agrees on */
    if (r->bal && !r->ar && pskv_took_over(r->w) && pskv_current_clock(r->w) > r->step)
        r->step = pskv_current_clock(r->w);
    int64_t s = r->step;
    if (r->ar && (rc = train_ar_begin(r->ar, r->w, r->t, r->wbuf, &s)) < 0)
        return fail(r->w, "the servers' copy of the weights", rc);
    reposition(r, s);
    r->loop_t0 = tu_now_ns();
    waitstat_start(&r->ws);
    eta_start(&r->eta);
    r->epoch_t0 = r->loop_t0;
    while (r->step < r->total_steps) {
        if (app_stop_signal)
            return app_stopped("train");
        int64_t in_epoch = r->step % r->steps_per_epoch;
        int epoch = (int)(r->step / r->steps_per_epoch);
        if (in_epoch == 0 || r->epoch_steps == 0 || epoch >= r->shuffled)
            new_epoch(r, epoch); /* also a bsp worker that skipped into a later epoch */
        int64_t cb = 0, cc = 0;
        if ((rc = take_grad(r)) != 0)
            return rc;
        int64_t cpu0 = tu_thread_cpu_ns();
        float loss = compute_step(r, in_epoch, &cb, &cc);
        int64_t cpu = tu_thread_cpu_ns() - cpu0, slept = straggle_after(&r->sg, cc);
        r->ws.compute_ns += cpu;
        r->ns_sleep += slept; /* --slowdown, --jitter */
        r->epoch_loss += loss;
        r->epoch_steps++;
        r->loss_sum += loss;
        r->loss_n++;
        if (r->bal && (rc = balance_push(r->bal, r->w, r->step, r->rows,
                                         (int64_t)((double)cpu * r->sg.last))) < 0)
            return fail(r->w, "--balance: sharing the speeds", rc);
        int64_t k0 = tu_thread_cpu_ns();
        rc = exchange(r);
        r->ws.blocked_ns += tu_thread_cpu_ns() - k0;
        if (rc == RESYNCED)
            continue;
        if (rc != 0)
            return rc;
        if (r->bal && (rc = balance_after(r->bal, r->w, r->rep, r->step)) < 0) {
            /* a death seen in the speeds' all-reduce: recovered as in the step's */
            if (rc == -PSKV_EPEERDEAD && r->ar && (rc = resync(r)) == RESYNCED)
                continue;
            return rc == 1 ? rc : fail(r->w, "--balance: sharing the speeds", rc);
        }
        r->ns_batch += cb;
        r->ns_compute += cc;
        r->nsteps++;
        eta_step(&r->eta, cb + cc);
        int64_t warm = r->estimate ? eta_estimate_warmup(r->total_steps) : 0;
        if (r->estimate && r->nsteps == warm)
            eta_start(&r->eta); /* the steps timed start after the warm-up */
        if (r->estimate && r->nsteps == warm + eta_estimate_steps(r->total_steps))
            break;
        if ((rc = after_step(r, in_epoch, epoch)) != 0)
            return rc;
        /* a bsp worker left behind (its clock closed without it) skips ahead */
        r->step = pskv_current_clock(r->w) > r->step + 1 ? pskv_current_clock(r->w) : r->step + 1;
        trainpos_report(r->w, &r->pos, r->step);
        char why[256];
        if (pskv_stop_requested(r->w, why, sizeof why)) {
            r->stopped = 1;
            printf("stopped early at epoch %lld: %s\n",
                   (long long)((r->step - 1) / r->steps_per_epoch + 1), why);
            break;
        }
        if (trainpos_due(&r->pos, r->ckpt_epochs, r->step)) {
            /* the job-wide counters go into the checkpoint with the values */
            if ((rc = push_stats(r, r->unreported)) < 0)
                return fail(r->w, "stats push", rc);
            r->unreported = 0;
            if (r->ar && (rc = train_ar_copy(r->ar, r->w, r->t, r->wbuf)) < 0)
                return fail(r->w, "copy of the weights", rc);
            if ((rc = trainpos_checkpoint(r->w, &r->pos, r->step, TMO)) < 0)
                return fail(r->w, "checkpoint", rc);
        }
    }
    return 0;
}

/* ---- the end ----------------------------------------------------------------- */

/* Stopped early, rank 0 waits (at most TMO) for the other workers to leave the
 * job, which they do as soon as their pushes are in, instead of a barrier: the
 * others stop at their own next clock, which under bsp and ssp may need this
 * worker's, so it ends a clock (pushing nothing) every 20 ms meanwhile. Returns 0,
 * or 1 after saying why. */
static int wait_stopped(run *r)
{
    int rc;
    for (int64_t until = tu_now_ms() + TMO; pskv_workers_active(r->w) > 1;) {
        if (tu_now_ms() >= until || app_stop_signal)
            return fail(r->w, "waiting for the other workers to stop", -PSKV_ETIMEDOUT);
        if ((rc = pskv_clock(r->w)) < 0)
            return fail(r->w, "waiting for the other workers to stop", rc);
        tu_sleep_ms(20);
    }
    return 0;
}

/* The last samples counted, where this worker's step time went, and the barrier
 * every worker passes before rank 0's final evaluation. Returns 0, or 1 after
 * saying why. */
static int end_training(run *r)
{
    int rc;
    if ((rc = push_stats(r, r->unreported)) < 0 || (rc = pskv_wait_all(r->w, TMO)) < 0)
        return fail(r->w, "final push", rc);
    double loop_s = (double)(tu_now_ns() - r->loop_t0) / 1e9;
    waitstat_print(&r->ws, r->rank, r->nsteps);
    double n_st = r->nsteps ? (double)r->nsteps : 1;
    printf("rank %d step time: batch %.1f us, compute %.1f us, push %.1f us, wait for pull %.1f us, "
           "straggler sleep %.1f us (%lld steps)\n",
           r->rank, r->ns_batch / 1e3 / n_st, r->ns_compute / 1e3 / n_st, r->ns_push / 1e3 / n_st,
           r->ns_wait / 1e3 / n_st, r->ns_sleep / 1e3 / n_st, (long long)r->nsteps);
    printf("rank %d exchange: %s\n", r->rank,
           r->ar      ? "all-reduce (--sync allreduce)"
           : r->ppv && r->tcp_first ? "pushpull into a view, the clock riding on it, each request sent "
                          "once the previous reply is back (--pushpull --prefetch)"
           : r->ppv   ? "pushpull into a view, the clock riding on it (--pushpull --prefetch)"
           : r->pp    ? "pushpull into the app's array, the clock riding on it (--pushpull)"
           : r->pbufs ? "a push buffer, the clock riding on it, then the next step's view pull "
                        "(--prefetch)"
           : r->overlap ? "push, clock, then the next step's view pull (--prefetch)"
                        : "push, clock, pull");
    printf("rank %d waiting fraction %.4f (%.2f s blocked in the library of %.2f s training)\n",
           r->rank, (double)(r->ns_push + r->ns_wait) / 1e9 / loop_s,
           (double)(r->ns_push + r->ns_wait) / 1e9, loop_s);
    printf("rank %d time split: %.2f s in the training loop: compute %.2f s, push %.2f s, wait "
           "for pull %.2f s, evaluation %.2f s\n", r->rank, loop_s, (double)r->ns_compute / 1e9,
           (double)r->ns_push / 1e9, (double)r->ns_wait / 1e9, (double)r->eval_ns / 1e9);
    if (r->clip > 0)
        printf("rank %d clipped %lld of %lld steps to --clip-norm %g\n", r->rank,
               (long long)r->clipped, (long long)r->nsteps, r->clip);
    printf("rank %d trained %.0f samples\n", r->rank, r->samples);
    if (r->ar && (rc = train_ar_copy(r->ar, r->w, r->t, r->wbuf)) < 0)
        return fail(r->w, "copy of the weights", rc);
    if (r->stopped)
        return r->rank == 0 ? wait_stopped(r) : 0;
    rc = pskv_barrier(r->w, TMO * 10);
    if (rc < 0)
        return fail(r->w, "barrier after training", rc);
    return 0;
}

/* Rank 0, after the final evaluation: --save-model and the final line. Returns
 * the exit status (1 when the model could not be saved). */
static int final_results(run *r)
{
    int status = 0;
    const char *save = cfg_str(r->cfg, "save-model");
    if (*save) {
        char why[512];
        modelfile mf = {.kind = (uint32_t)(r->mlp ? 2 : 1), .in = r->train.dim,
                        .hidden = (uint32_t)r->hidden, .out = 10, .n = r->P,
                        .vals = r->eval_params};
        if (modelfile_save(save, &mf, why, sizeof why) < 0) {
            fprintf(stderr, "train: --save-model: %s\n", why);
            status = 1;
        } else {
            printf("model saved to %s\n", save);
        }
    }
    if (r->clip > 0)
        printf("clipped steps %lld (every worker's, --clip-norm %g)\n", (long long)r->clipped_job,
               r->clip);
    printf("samples trained %.0f (every worker's, from the sum table)\n", r->last_samples);
    int epochs = r->stopped ? (int)((r->step - 1) / r->steps_per_epoch + 1) : r->epochs;
    printf("final test accuracy %.4f after %d epochs (%d workers, %d servers)%s%s\n",
           r->accuracy, epochs, r->W, pskv_num_servers(r->w),
           *cfg_str(r->cfg, "metrics") ? "; metrics in " : "", cfg_str(r->cfg, "metrics"));
    return status;
}

static void free_run(run *r)
{
    report_destroy(&r->rep);
    train_ar_destroy(&r->ar);
    balance_destroy(&r->bal);
    model_destroy(&r->m);
    idx_free(&r->train);
    idx_free(&r->test);
    free(r->gbuf[0]);
    free(r->gbuf[1]);
    free(r->grad2);
    free(r->x);
    free(r->y);
    free(r->order);
    free(r->wbuf);
    free(r->eval_params);
}

/* --estimate, after its steps: every worker meets at a barrier (the job's pace is
 * its slowest worker's: rank 0 times until the last one arrives), then rank 0
 * times one evaluation and prints the job's predicted wall time; every worker
 * leaves at a second barrier. Returns the exit status. */
static int estimate_end(run *r, int64_t app_t0)
{
    int rc;
    int64_t mine = tu_now_ns() - r->eta.loop_t0_ns;
    if ((rc = pskv_barrier(r->w, TMO)) < 0)
        return fail(r->w, "barrier after --estimate's steps", rc);
    int64_t slowest = tu_now_ns() - r->eta.loop_t0_ns;
    if (r->rank == 0) {
        if ((rc = evaluate(r, 0, r->step)) < 0)
            return fail(r->w, "evaluation", rc);
        eta_estimate(&r->eta, r->eta.loop_t0_ns - app_t0, mine, slowest);
    }
    if ((rc = pskv_barrier(r->w, TMO)) < 0)
        return fail(r->w, "barrier after --estimate", rc);
    return 0;
}

/* On a failure this returns at once without freeing the run: a pull may still be
 * in flight into its buffers (pskv_worker_close waits for it), and the process
 * exits next. */
int app_train(pskv_worker *w, cfg_entry *cfg)
{
    int64_t app_t0 = tu_now_ns();
    run r;
    memset(&r, 0, sizeof r);
    r.w = w;
    r.cfg = cfg;
    int rc;
    if ((rc = read_options(&r)))
        return rc;
    r.rank = pskv_rank(w);
    r.W = pskv_num_workers(w);
    model_set_ftz();
    if ((rc = load_data(&r)) || (rc = open_tables(&r)) || (rc = alloc_buffers(&r)) ||
        (rc = app_train_init_from(w, cfg, r.t, r.rank, r.train.dim, r.hidden, r.P)))
        return rc;
    /* a worker that took a dead rank over under --sync ps joins a running job: the
     * others passed this barrier long ago and meet no other before the end (with
     * --sync allreduce this is the barrier of their train_ar_recover) */
    if ((r.ar || !pskv_took_over(w)) && (rc = pskv_barrier(w, TMO)) < 0)
        return fail(w, "barrier before training", rc);
    if ((rc = plan(&r)))
        return rc;
    if ((rc = resume_stats(&r)) < 0)
        return fail(w, "stats pull", rc);
    r.t0_ns = tu_now_ns();
    eta_init(&r.eta, r.total_steps, r.steps_per_epoch,
             r.eval_step ? (r.total_steps - 1) / r.eval_step + 1 : 1, r.W,
             (double)r.batch * r.accumulate, app_t0);
    if ((rc = train_loop(&r)))
        return rc;
    int64_t loop_end = tu_now_ns(), loop_eval_ns = r.eval_ns;
    if (r.estimate) {
        int status = estimate_end(&r, app_t0);
        if (!status) /* after a failure a pull may still write into the buffers */
            free_run(&r);
        return status;
    }
    if ((rc = end_training(&r)))
        return rc;
    int status = 0;
    if (r.rank == 0) {
        double done = r.stopped ? (double)r.step / (double)r.steps_per_epoch : (double)r.epochs;
        if ((rc = evaluate(&r, done, r.step)) < 0)
            return fail(w, "final evaluation", rc);
        status = final_results(&r);
        /* the parts --estimate predicts (its line names the same) */
        printf("job wall split: setup %.2f s, training loop %.2f s (evaluations %.2f s), "
               "end %.2f s (final evaluation %.2f s)\n", (double)(r.loop_t0 - app_t0) / 1e9,
               (double)(loop_end - r.loop_t0) / 1e9, (double)loop_eval_ns / 1e9,
               (double)(tu_now_ns() - loop_end) / 1e9, (double)r.eta.last_eval_ns / 1e9);
        printf("job wall time %.2f s (the app's, from its start)\n",
               (double)(tu_now_ns() - app_t0) / 1e9);
    }
    free_run(&r);
    return status;
}
