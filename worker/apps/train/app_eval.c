/* pskv-evaluator's application: validation alongside training.
 *
 * The evaluator joins the job (libpskv, evaluator role), opens the model's table
 * as the workers do and pulls whole snapshots while they train; its pulls carry
 * clock 0, so no server ever parks them and no worker ever waits for them. Under
 * bsp a snapshot is consistent when every server answered at the same closed clock
 * (else it is pulled again); under ssp and async it reflects, per worker, the
 * clocks the servers' replies carry (the smallest over servers). The snapshot is
 * evaluated on the validation set (the last --validation-split training images,
 * which the workers leave out) with the workers' own model code (model.h), the
 * result reported to the scheduler (early stopping) and written to --metrics as
 * one JSON line; the best snapshot so far (--best-metric) goes to --save-best.
 * Evaluations follow --eval-every epochs of the slowest worker, or each new
 * snapshot with 0. The loop ends when the job does (STOP, or every worker left).
 * With --evaluate PATH it evaluates a saved model instead, with no job. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps.h"
#include "grow.h"
#include "idx.h"
#include "model.h"
#include "modelfile.h"
#include "sparse_eval.h"
#include "timeutil.h"

#define EVAL_BATCH 500
#define POLL_MS 50        /* between snapshots when no evaluation is due */
#define MAX_RETAKES 1000  /* bsp: snapshots pulled again in a row (servers at different clocks) */
#define VC_MAX 1024

typedef struct ev {
    pskv_worker *w;
    cfg_entry *cfg;
    int mlp, hidden, bsp;
    int sparse;       /* --app sparse-lr: sv, not val and m */
    evalset sv;
    double best_auc;
    int best_auc_metric; /* --best-metric val_auc */
    idx_set val;
    model *m;
    size_t P;
    int t;
    float *params;
    double eval_every;
    int64_t stall_after; /* --stall-after (tests): a hung evaluator after this many */
    int64_t per_step; /* examples per step: batch x accumulate */
    uint32_t ntrain;  /* the workers' training rows */
    FILE *metrics;
    const char *save_best;
    int best_loss;    /* --best-metric val_loss (else val_accuracy) */
    int have_best;
    double best_val_loss, best_acc, best_epoch;
    int64_t best_clock;
    long evals, retakes;
    int64_t t0;
    int pull_open;    /* the job ended while a pull (into params or probe_value) was in
                         flight: it may still write there until pskv_worker_close */
    int64_t vc[VC_MAX];
    int nvc;
} ev;

static int open_metrics(ev *e)
{
    const char *path = cfg_str(e->cfg, "metrics");
    if (e->w && *path && !(e->metrics = fopen(path, "w"))) { /* not for --evaluate */
        fprintf(stderr, "evaluator: --metrics: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

/* sparse-lr: the held-out examples of --train, their keys (the snapshot's). */
static int setup_sparse(ev *e, uint32_t split)
{
    char why[512];
    const char *path = cfg_str(e->cfg, "train");
    int rc = sparse_eval_load(&e->sv, path, split, 1, why, sizeof why);
    if (rc < 0) {
        fprintf(stderr, "evaluator: --validation-split %u: %s\n", split, why);
        return rc == -PSKV_EINVAL ? 2 : 1;
    }
    e->ntrain = (uint32_t)(e->sv.d.examples - split);
    e->per_step = cfg_int(e->cfg, "batch");
    e->P = e->sv.nkeys;
    e->params = e->sv.w;
    e->eval_every = cfg_double(e->cfg, "eval-every");
    e->save_best = cfg_str(e->cfg, "save-best");
    e->best_loss = !strcmp(cfg_str(e->cfg, "best-metric"), "val_loss");
    e->best_auc_metric = !strcmp(cfg_str(e->cfg, "best-metric"), "val_auc");
    return open_metrics(e);
}

/* The validation set, the model and (in a job) the metrics file. Returns 0, or the
 * exit status after saying why. */
static int setup(ev *e)
{
    char why[512];
    cfg_entry *cfg = e->cfg;
    e->mlp = !strcmp(cfg_str(cfg, "app"), "mlp");
    e->hidden = e->mlp ? (int)cfg_int(cfg, "hidden") : 0;
    uint32_t split = (uint32_t)cfg_int(cfg, "validation-split");
    e->sparse = !strcmp(cfg_str(cfg, "app"), "sparse-lr");
    if (e->sparse)
        return setup_sparse(e, split);
    int rc = idx_load_split(cfg_str(cfg, "data"), "train", 0, 1, 0, split, 1, &e->val, why,
                            sizeof why);
    if (rc < 0) {
        fprintf(stderr, "evaluator: --validation-split %u: %s\n", split, why);
        return rc == -PSKV_EINVAL ? 2 : 1;
    }
    uint32_t limit = (uint32_t)cfg_int(cfg, "train-limit");
    e->ntrain = e->val.file_rows - split;
    if (limit && limit < e->ntrain)
        e->ntrain = limit;
    e->per_step = cfg_int(cfg, "batch") * cfg_int(cfg, "accumulate");
    e->m = model_new((int)e->val.dim, e->hidden, 10, EVAL_BATCH);
    if (!e->m) {
        fprintf(stderr, "evaluator: out of memory\n");
        return 1;
    }
    e->P = model_size(e->m);
    e->params = malloc(e->P * sizeof(float));
    if (!e->params) {
        fprintf(stderr, "evaluator: out of memory\n");
        return 1;
    }
    e->eval_every = cfg_double(cfg, "eval-every");
    e->save_best = cfg_str(cfg, "save-best");
    e->best_loss = !strcmp(cfg_str(cfg, "best-metric"), "val_loss");
    e->bsp = !strcmp(cfg_str(cfg, "consistency"), "bsp");
    return open_metrics(e);
}

/* Waits for pull ts, giving up when the job ends meanwhile (its servers may be
 * gone). Returns 0, 1 when the job ended, or a negated error. */
static int wait_pull(ev *e, int64_t ts)
{
    for (int64_t until = tu_now_ms() + 120000; tu_now_ms() < until;) {
        int rc = pskv_wait(e->w, ts, 100);
        if (rc != -PSKV_ETIMEDOUT)
            return rc;
        if (pskv_job_ending(e->w) || app_stop_signal)
            return 1;
    }
    return -PSKV_ETIMEDOUT;
}

/* One evaluation of e->params, the snapshot at `clock`: printed, reported,
 * written to --metrics, kept when the best. Returns 0, or 1 after saying why. */
static int evaluate(ev *e, int64_t clock, double epoch)
{
    double vl, va, auc = NAN;
    if (e->sparse) {
        sparse_eval_score(&e->sv, &vl, &auc, &va);
    } else {
        double loss = 0;
        long correct = 0;
        model_eval(e->m, e->params, e->val.x, e->val.y, (int)e->val.n, &loss, &correct);
        vl = loss / (double)e->val.n;
        va = (double)correct / (double)e->val.n;
    }
    double wall = (double)(tu_now_ns() - e->t0) / 1e9;
    e->evals++;
    int best = !e->have_best || (e->best_loss ? vl < e->best_val_loss
                                 : e->best_auc_metric ? auc > e->best_auc : va > e->best_acc);
    char aucs[48] = "";
    if (e->sparse)
        snprintf(aucs, sizeof aucs, " val_auc %.6f", auc);
    printf("evaluation %ld: clock %lld epoch %.2f val_loss %.6f val_accuracy %.4f%s%s\n",
           e->evals, (long long)clock, epoch, vl, va, aucs, best ? " (best)" : "");
    if (cfg_int(e->cfg, "print-digests"))
        printf("evaluator snapshot clock %lld digest %016llx\n", (long long)clock,
               (unsigned long long)app_digest(e->params, e->P));
    if (pskv_report_eval(e->w, clock, epoch, vl, va, auc) < 0)
        fprintf(stderr, "evaluator: cannot report to the scheduler (goes on)\n");
    if (e->metrics) {
        fprintf(e->metrics, "{\"evaluation\":%ld,\"clock\":%lld,\"epoch\":%.4f,\"wall_s\":%.3f,"
                "\"val_loss\":%.17g,\"val_accuracy\":%.17g,", e->evals,
                (long long)clock, epoch, wall, vl, va);
        if (e->sparse)
            fprintf(e->metrics, "\"val_auc\":%.17g,", auc);
        fprintf(e->metrics, "\"worker_clocks\":[");
        for (int i = 0; i < e->nvc; i++)
            fprintf(e->metrics, "%s%lld", i ? "," : "", (long long)e->vc[i]);
        fprintf(e->metrics, "]}\n");
        fflush(e->metrics);
    }
    if (!best)
        return 0;
    e->have_best = 1;
    e->best_val_loss = vl;
    e->best_acc = va;
    e->best_auc = auc;
    e->best_clock = clock;
    e->best_epoch = epoch;
    if (!*e->save_best)
        return 0;
    char why[512];
    modelfile mf = {.kind = (uint32_t)(e->sparse ? 3 : e->mlp ? 2 : 1),
                    .in = e->sparse ? 0 : e->val.dim,
                    .hidden = (uint32_t)e->hidden,
                    .out = e->sparse ? 1 : 10,
                    .n = e->P,
                    .keys = e->sparse ? e->sv.keys : NULL, /* the snapshot's features */
                    .vals = e->params,
                    .has_eval = 1,
                    .clock = clock,
                    .epoch = epoch,
                    .val_loss = vl,
                    .val_accuracy = va,
                    .has_auc = e->sparse,
                    .val_auc = auc};
    if (modelfile_save(e->save_best, &mf, why, sizeof why) < 0) {
        fprintf(stderr, "evaluator: --save-best: %s\n", why);
        return 1;
    }
    return 0;
}

/* The snapshot's clock: bsp, the closed clock; ssp and async, the slowest
 * worker's clock in the replies' vector (else the replies' oldest clock). */
static int64_t snapshot_clock(ev *e, int *consistent)
{
    int64_t lo, hi;
    e->nvc = pskv_values_clocks(e->w, &lo, &hi, e->vc, VC_MAX);
    *consistent = !e->bsp || lo == hi;
    if (e->bsp || e->nvc == 0)
        return lo;
    int64_t m = e->vc[0];
    for (int i = 1; i < e->nvc; i++)
        m = e->vc[i] < m ? e->vc[i] : m;
    return m;
}

/* Epochs of the slowest worker at `clock`: rank 0's shard is the largest. */
static double epoch_of(ev *e, int64_t clock)
{
    int W = pskv_num_workers(e->w) > 0 ? pskv_num_workers(e->w) : 1;
    int64_t shard = ((int64_t)e->ntrain + W - 1) / W;
    int64_t spe = (shard + e->per_step - 1) / e->per_step;
    return spe > 0 ? (double)clock / (double)spe : 0;
}

/* With --eval-every > 0, a one-key pull tells whether an evaluation may be due,
 * so that the whole model is not pulled for nothing every POLL_MS. Returns 1 when
 * it may be, 0 when not, 2 when the job ended, or a negated error. */
static float probe_value; /* probe_due's destination: a pull the job's end leaves in
                            flight may write it until the process's pskv_worker_close */

static int probe_due(ev *e, double next_epoch)
{
    static const uint64_t k0[2] = {0, SPARSE_BIAS_KEY}; /* read while the pull lasts */
    int64_t ts = pskv_pull(e->w, e->t, &k0[e->sparse ? 1 : 0], 1, &probe_value);
    int rc = ts < 0 ? (int)ts : wait_pull(e, ts);
    e->pull_open = rc == 1;
    if (rc != 0)
        return rc == 1 ? 2 : rc;
    int consistent;
    return epoch_of(e, snapshot_clock(e, &consistent)) >= next_epoch - 1e-9;
}

static int pull_failed(ev *e, int rc)
{
    fprintf(stderr, "evaluator: pull: %s (%s)\n", pskv_strerror(rc), pskv_last_error(e->w));
    return 1;
}

static int eval_loop(ev *e)
{
    int64_t last = -1;
    double next_epoch = e->eval_every;
    long retakes_in_row = 0;
    while (!app_stop_signal && !pskv_job_ending(e->w)) {
        if (e->eval_every > 0 && retakes_in_row == 0) {
            int due = probe_due(e, next_epoch);
            if (due == 2)
                break;
            if (due < 0)
                return pull_failed(e, due);
            if (due == 0) {
                tu_sleep_ms(POLL_MS);
                continue;
            }
        }
        int64_t ts = pskv_pull(e->w, e->t, e->sparse ? e->sv.keys : NULL, e->P, e->params);
        int rc = ts < 0 ? (int)ts : wait_pull(e, ts);
        if (rc == 1) {
            e->pull_open = 1;
            break;
        }
        if (rc < 0)
            return pull_failed(e, rc);
        int consistent;
        int64_t clock = snapshot_clock(e, &consistent);
        if (!consistent) { /* servers at different closed clocks: take it again */
            e->retakes++;
            if (++retakes_in_row > MAX_RETAKES) {
                fprintf(stderr, "evaluator: no consistent bsp snapshot in %d pulls\n",
                        MAX_RETAKES);
                return 1;
            }
            tu_sleep_ms(2);
            continue;
        }
        retakes_in_row = 0;
        double epoch = epoch_of(e, clock);
        if (clock == last || (e->eval_every > 0 && epoch < next_epoch - 1e-9)) {
            tu_sleep_ms(clock == last && e->eval_every == 0 ? 5 : POLL_MS);
            continue;
        }
        if (evaluate(e, clock, epoch))
            return 1;
        if (e->stall_after && e->evals >= e->stall_after) {
            printf("evaluator: --stall-after %lld: evaluating nothing more, staying in the job\n",
                   (long long)e->stall_after);
            fflush(stdout);
            /* one-key pulls only, which hear the job's end */
            while (!app_stop_signal && !pskv_job_ending(e->w) && probe_due(e, 0) == 1)
                tu_sleep_ms(POLL_MS);
            break;
        }
        last = clock;
        if (e->eval_every > 0)
            next_epoch = (floor(epoch / e->eval_every + 1e-9) + 1) * e->eval_every;
    }
    return 0;
}

/* What setup made (NULL-safe: after a failed setup too). Never while a pull may
 * still be in flight into e->params. */
static void free_ev(ev *e)
{
    if (e->metrics)
        fclose(e->metrics);
    e->metrics = NULL;
    model_destroy(&e->m);
    idx_free(&e->val);
    if (!e->sparse)
        free(e->params);
    e->params = NULL;
    sparse_eval_free(&e->sv);
}

int app_evaluate(pskv_worker *w, cfg_entry *cfg)
{
    ev e;
    memset(&e, 0, sizeof e);
    e.w = w;
    e.cfg = cfg;
    e.t0 = tu_now_ns();
    e.stall_after = cfg_int(cfg, "stall-after");
    model_set_ftz();
    int rc = setup(&e);
    if (rc) {
        free_ev(&e);
        return rc;
    }
    pskv_workers_active(w); /* what the scheduler said while the data loaded */
    if (!e.sparse && !strcmp(pskv_early_stop_metric(w), "val_auc")) {
        fprintf(stderr, "evaluator: --early-stop-metric val_auc (the scheduler's) is sparse-lr's: "
                "--app %s reports val_loss and val_accuracy only\n", cfg_str(cfg, "app"));
        free_ev(&e);
        return 2;
    }
    if (pskv_job_ending(w) || app_stop_signal) {
        /* its servers may be gone: a table open would wait for them in vain */
        printf("evaluator: the job ended before the evaluator was ready: no evaluation\n");
        free_ev(&e);
        return 0;
    }
    e.t = e.sparse ? app_sparse_lr_table(w, cfg)
                   : app_train_table(w, cfg, e.val.dim, e.hidden, e.P);
    if (e.t < 0) {
        fprintf(stderr, "evaluator: open the parameter table: %s (%s)\n", pskv_strerror(e.t),
                pskv_last_error(w));
        free_ev(&e);
        return 1;
    }
    printf("evaluator: %zu validation %s, %u training %s in the workers' shards\n",
           e.sparse ? e.sv.d.n : (size_t)e.val.n, e.sparse ? "examples" : "images", e.ntrain,
           e.sparse ? "examples" : "images");
    rc = eval_loop(&e);
    char why[256] = "";
    if (pskv_stop_requested(w, why, sizeof why))
        printf("evaluator: the scheduler stopped the job early: %s\n", why);
    char aucs[48] = "";
    if (e.sparse)
        snprintf(aucs, sizeof aucs, " val_auc %.6f", e.best_auc);
    if (e.have_best)
        printf("evaluator: %ld evaluations (%ld snapshots taken again); best val_accuracy %.4f "
               "val_loss %.6f%s at clock %lld (epoch %.2f)%s%s\n", e.evals, e.retakes,
               e.best_acc, e.best_val_loss, aucs, (long long)e.best_clock, e.best_epoch,
               *e.save_best ? "; saved to " : "", e.save_best);
    else
        printf("evaluator: no evaluation made\n");
    /* a pull left in flight (the job's end, a failure) writes into params (the sparse
     * set's keys and values) if it is ever answered: those are freed after
     * pskv_worker_close (app_free_after_close), the rest now */
    if (rc || e.pull_open) {
        if (e.sparse) {
            app_free_after_close(e.sv.keys);
            app_free_after_close(e.sv.w);
            e.sv.keys = NULL;
            e.sv.w = NULL;
        } else {
            app_free_after_close(e.params);
        }
        e.params = NULL;
    }
    free_ev(&e);
    return rc;
}

/* --evaluate, sparse-lr: each validation feature takes the file's weight (0 when
 * the file has none, as on the servers), then the evaluator's own scoring. */
static int evaluate_sparse_file(ev *e, const char *path, const modelfile *mf)
{
    if (mf->kind != 3 || !mf->keys) {
        fprintf(stderr, "evaluator: --evaluate: %s holds a %s model, not a sparse-lr one\n", path,
                mf->kind == 1 ? "softmax" : mf->kind == 2 ? "mlp" : "non-sparse");
        return 1;
    }
    for (size_t i = 0; i < e->sv.nkeys; i++) {
        size_t j = lower_bound_u64(mf->keys, (size_t)mf->n, e->sv.keys[i]);
        e->sv.w[i] = j < mf->n && mf->keys[j] == e->sv.keys[i] ? mf->vals[j] : 0.0f;
    }
    double vl, va, auc;
    sparse_eval_score(&e->sv, &vl, &auc, &va);
    printf("validation of %s: val_loss %.17g val_accuracy %.17g val_auc %.17g\n", path, vl, va,
           auc);
    if (mf->has_eval)
        printf("recorded in the file: clock %lld epoch %.2f val_loss %.17g val_accuracy %.17g%s",
               (long long)mf->clock, mf->epoch, mf->val_loss, mf->val_accuracy,
               mf->has_auc ? "" : "\n");
    if (mf->has_eval && mf->has_auc)
        printf(" val_auc %.17g\n", mf->val_auc);
    return 0;
}

int app_evaluate_file(cfg_entry *cfg)
{
    ev e;
    memset(&e, 0, sizeof e);
    e.cfg = cfg;
    model_set_ftz(); /* as in a job: the same arithmetic, the same metrics */
    int rc = setup(&e);
    if (rc) {
        free_ev(&e);
        return rc;
    }
    const char *path = cfg_str(cfg, "evaluate");
    char why[512];
    modelfile mf;
    if (e.sparse) {
        if (modelfile_load(path, &mf, why, sizeof why) < 0) {
            fprintf(stderr, "evaluator: --evaluate: %s\n", why);
            rc = 1;
        } else {
            rc = evaluate_sparse_file(&e, path, &mf);
        }
        modelfile_free(&mf);
        free_ev(&e);
        return rc;
    }
    if (modelfile_load(path, &mf, why, sizeof why) < 0 ||
        (mf.kind != (uint32_t)(e.mlp ? 2 : 1) || mf.in != e.val.dim ||
         mf.hidden != (uint32_t)e.hidden || mf.n != e.P)) {
        fprintf(stderr, "evaluator: --evaluate: %s\n",
                mf.vals ? "the file holds another model than --app and --hidden say" : why);
        modelfile_free(&mf);
        free_ev(&e);
        return 1;
    }
    double loss = 0;
    long correct = 0;
    model_eval(e.m, mf.vals, e.val.x, e.val.y, (int)e.val.n, &loss, &correct);
    printf("validation of %s: val_loss %.17g val_accuracy %.17g\n", path,
           loss / (double)e.val.n, (double)correct / (double)e.val.n);
    if (mf.has_eval)
        printf("recorded in the file: clock %lld epoch %.2f val_loss %.17g val_accuracy %.17g\n",
               (long long)mf.clock, mf.epoch, mf.val_loss, mf.val_accuracy);
    idx_set test;
    if (idx_load(cfg_str(cfg, "data"), "t10k", 0, 1, (uint32_t)cfg_int(cfg, "test-limit"), &test,
                 why, sizeof why) == 0) {
        loss = 0;
        correct = 0;
        model_eval(e.m, mf.vals, test.x, test.y, (int)test.n, &loss, &correct);
        printf("test of %s: test_loss %.6f test_accuracy %.4f (%u test images)\n", path,
               loss / (double)test.n, (double)correct / (double)test.n, test.n);
        idx_free(&test);
    } else {
        printf("test of %s: no test set (%s)\n", path, why);
    }
    modelfile_free(&mf);
    free_ev(&e);
    return 0;
}
