/* pskv-tune run (tune_run.h). */
#define _GNU_SOURCE
#include "tune_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>

#include "log.h"
#include "metrics.h"
#include "pskv_errors.h"
#include "space.h"
#include "suggest.h"
#include "timeutil.h"
#include "tsched.h"

#define MAX_TRIALS 4096
#define MAX_ARGV 256

typedef struct run_state {
    tune_study *st;
    const tune_run_opts *o;
    tune_space space;
    suggest_algo algo;
    tsched sched;
    char metric[64];
    double sign;
    long budget, max_trials, parallel, epochs, levels;
    unsigned long long seed;
    char wargs[4096]; /* the shared worker flags, one per line */
    study_trial *t;
    int n;
    long offset[MAX_TRIALS];
    int base[MAX_TRIALS];   /* epochs done before the job's run (promotion: its rung) */
    int target[MAX_TRIALS]; /* the epoch the job's run ends at */
    int paused_at[MAX_TRIALS];
    int64_t last_ms[MAX_TRIALS];
    int64_t stop_ms[MAX_TRIALS]; /* when its stop was decided (0: none in this run) */
    double *curve; /* MAX_TRIALS x epochs, sign-adjusted */
    int grid_done;
    int held; /* the trial started ahead of its turn, waiting for a slot (-1: none) */
    trial_watch *watch; /* wakes the loop when an active trial's log is written */
    int wd[MAX_TRIALS]; /* each trial's watch handle (-1: none) */
    int host[MAX_TRIALS]; /* the launcher's host each active trial runs on (-1: none) */
    int *used;            /* workers each host runs now (scratch, --launcher ssh) */
} run_state;

static double wall(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec + tv.tv_usec / 1e6;
}

static void trial_dir(const run_state *r, long id, char *buf, size_t len)
{
    snprintf(buf, len, "%s/trial-%ld", r->o->dir, id);
}

/* A trial's span, base and target epochs, in its directory's `span` file (written
 * before the launch, renamed into place): what a resumed tuner needs to number a
 * promoted trial's epochs. Absent: a first run, 0 to the first rung. */
static void span_get(const run_state *r, long id, int *base, int *target)
{
    char dir[4096], path[4200];
    trial_dir(r, id, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/span", dir);
    *base = 0;
    *target = r->sched.promote ? tsched_first_target(&r->sched) : (int)r->epochs;
    FILE *f = fopen(path, "r");
    int b, t;
    if (f && fscanf(f, "%d %d", &b, &t) == 2 && b >= 0 && b < t && t <= r->epochs)
        *base = b, *target = t;
    if (f)
        fclose(f);
}

static int span_put(const run_state *r, long id, int base, int target)
{
    char dir[4096], path[4200], tmp[4300];
    trial_dir(r, id, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/span", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    mkdir(dir, 0755);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%d %d\n", base, target) < 0 || fclose(f) != 0 || rename(tmp, path)) {
        LOG_E("trial %ld: cannot write %s", id, path);
        return -PSKV_EIO;
    }
    return 0;
}

static int active(trial_state s)
{
    return s == TRIAL_LAUNCHING || s == TRIAL_RUNNING || s == TRIAL_STOPPING;
}

/* The host the launcher has room on for one more trial now (tplace_pick), or -1. */
static int free_host(const run_state *r)
{
    const tplace *p = r->o->trial.place;
    if (!p || p->kind != TPLACE_SSH)
        return 0;
    for (int h = 0; h < p->nhosts; h++)
        r->used[h] = 0;
    for (int i = 0; i < r->n; i++)
        if (active(r->t[i].state) && r->host[i] >= 0)
            r->used[r->host[i]] += r->o->trial.workers > 0 ? r->o->trial.workers : 1;
    return tplace_pick(p, r->used, r->o->trial.workers > 0 ? r->o->trial.workers : 1);
}

/* Whether trial i's workers are surely gone before it runs again: its lock is free,
 * which for a trial on this host means every worker exited (they hold it); a
 * remote worker's client holds it instead, so a client that died first (killed)
 * may have left the worker running there: it is killed on its host first. */
static int surely_gone(run_state *r, int i, const char *dir)
{
    char where[300];
    trial_where(dir, where, sizeof where);
    if (!strcmp(where, "local"))
        return 1;
    return trial_stop(&r->o->trial, dir, r->t[i].id, 0 /* its clients are gone */, 1) == 0;
}

/* A trial that is to run again (PENDING), unless its workers may still run on
 * another host: then it is failed, never run twice. */
static void run_again(run_state *r, int i, const char *dir, const char *why)
{
    study_trial *t = &r->t[i];
    if (surely_gone(r, i, dir)) {
        LOG_W("trial %ld: %s: it runs again", t->id, why);
        t->state = TRIAL_PENDING;
        return;
    }
    char where[300];
    trial_where(dir, where, sizeof where);
    t->state = TRIAL_FAILED;
    t->ended = wall();
    snprintf(t->reason, sizeof t->reason, "%.60s, and its workers (%.100s) did not answer a kill: "
             "not run again, it may still run there", why, where);
    LOG_E("trial %ld: %s", t->id, t->reason);
}

static long setting(tune_study *st, const char *key, long def)
{
    char buf[64];
    return study_get(st, key, buf, sizeof buf) == 0 ? atol(buf) : def;
}

static int permissive(const char *flag, const char *value, char *why, size_t len)
{
    (void)flag, (void)value, (void)why, (void)len;
    return 0;
}

static int load(run_state *r)
{
    char text[8192], why[256];
    if (study_get(r->st, "space", text, sizeof text) < 0 ||
        space_parse(&r->space, text, permissive, why, sizeof why) < 0) {
        LOG_E("the study has no valid space: %s", why);
        return -PSKV_EINVAL;
    }
    study_get(r->st, "algo", text, sizeof text);
    if (suggest_algo_parse(text, &r->algo) < 0)
        return -PSKV_EINVAL;
    study_get(r->st, "sched", text, sizeof text);
    if (tsched_parse(&r->sched, text, why, sizeof why) < 0)
        return -PSKV_EINVAL;
    study_get(r->st, "metric", text, sizeof text);
    char *colon = strchr(text, ':');
    r->sign = colon && !strcmp(colon + 1, "min") ? -1 : 1;
    if (colon)
        *colon = '\0';
    snprintf(r->metric, sizeof r->metric, "%.60s", text);
    r->budget = setting(r->st, "budget_epochs", 0);
    r->max_trials = setting(r->st, "max_trials", 20);
    r->parallel = setting(r->st, "parallel", 1);
    r->epochs = setting(r->st, "trial_epochs", 9);
    r->levels = setting(r->st, "grid_levels", 3);
    r->seed = (unsigned long long)setting(r->st, "seed", 1);
    if (study_get(r->st, "worker_args", r->wargs, sizeof r->wargs) < 0)
        r->wargs[0] = '\0';
    r->curve = malloc(sizeof(double) * MAX_TRIALS * r->epochs);
    if (!r->curve)
        return -PSKV_ENOMEM;
    for (long i = 0; i < MAX_TRIALS * r->epochs; i++)
        r->curve[i] = NAN;
    if (study_trials(r->st, &r->t, &r->n) < 0 || r->n > MAX_TRIALS)
        return -PSKV_EIO;
    double *v = malloc(sizeof(double) * r->epochs);
    if (!v)
        return -PSKV_ENOMEM;
    for (int i = 0; i < r->n; i++) {
        int top = study_metrics(r->st, r->t[i].id, v, (int)r->epochs);
        for (int e = 0; e < top; e++)
            r->curve[(size_t)i * r->epochs + e] = r->sign * v[e];
    }
    free(v);
    return 0;
}

/* Before an action outside the study (a fork, a stop): what was written so far
 * made durable, and a new batch for what follows. */
static int sync_point(run_state *r)
{
    int rc = study_sync(r->st);
    return rc < 0 ? rc : study_batch(r->st);
}

static int put(run_state *r, study_trial *t)
{
    int rc = study_trial_put(r->st, t);
    if (rc < 0)
        LOG_E("trial %ld: cannot write its state %s", t->id, study_state_name(t->state));
    return rc;
}

typedef struct metric_ctx {
    run_state *r;
    int i;
} metric_ctx;

/* One epoch's metric of trial i: recorded, then decided (or the logged decision
 * replayed); a stop is written as STOPPING before the job is signalled. */
static int on_metric(void *arg, int e, double v)
{
    metric_ctx *m = arg;
    run_state *r = m->r;
    study_trial *t = &r->t[m->i];
    e += r->base[m->i]; /* a promoted trial's run numbers its epochs from 1 */
    /* after a stop decision the job may still print an epoch or two before the
     * signal lands: not counted, so the epochs spent do not depend on timing */
    if (!isfinite(v) || e > r->epochs ||
        (t->state != TRIAL_RUNNING && study_decision_get(r->st, t->id, e) < 0))
        return 0;
    if (study_metric_add(r->st, t->id, e, v, wall()) < 0)
        return -PSKV_EIO;
    r->curve[(size_t)m->i * r->epochs + e - 1] = r->sign * v;
    r->last_ms[m->i] = tu_now_ms();
    if (e > t->epochs)
        t->epochs = e;
    if (isnan(t->best) || r->sign * v > r->sign * t->best)
        t->best = v;
    if (t->state != TRIAL_RUNNING)
        return 0;
    int stop = study_decision_get(r->st, t->id, e);
    char why[256] = "continue (logged)";
    if (stop < 0) {
        tsched_curves c = {r->n, (int)r->epochs, r->curve};
        stop = tsched_decide(&r->sched, &c, m->i, e, why, sizeof why);
        if (study_decision_add(r->st, t->id, e, stop, why) < 0)
            return -PSKV_EIO;
    }
    if (stop) {
        t->state = TRIAL_STOPPING;
        snprintf(t->reason, sizeof t->reason, "%s", why);
        if (put(r, t) < 0)
            return -PSKV_EIO;
        LOG_I("trial %ld: stop after epoch %d: %s", t->id, e, why);
        r->stop_ms[m->i] = tu_now_ms();
        if (sync_point(r) < 0)
            return -PSKV_EIO;
        char dir[4096];
        trial_dir(r, t->id, dir, sizeof dir);
        trial_stop(&r->o->trial, dir, t->id, t->pgid, 0);
    } else if (e == r->epochs) {
        /* its last epoch: complete now, its slot free for the next trial while the
         * job stops its scheduler and server (drain() waits for those at the end) */
        t->state = TRIAL_COMPLETE;
        t->ended = wall();
        LOG_I("trial %ld: complete after %d epochs, best %s %g", t->id, t->epochs, r->metric,
              t->best);
        if (put(r, t) < 0)
            return -PSKV_EIO;
    }
    return 0;
}

/* How trial i ended, once its job is gone. */
static int finish(run_state *r, int i)
{
    study_trial *t = &r->t[i];
    char dir[4096], words[200];
    trial_dir(r, t->id, dir, sizeof dir);
    metric_ctx m = {r, i};
    if (trial_read_metrics(dir, &r->offset[i], r->metric, on_metric, &m) < 0)
        return -PSKV_EIO;
    if (t->state == TRIAL_COMPLETE) /* its last epoch was in what was left to read */
        return put(r, t);
    int status = trial_exit_status(dir);
    if (t->state == TRIAL_STOPPING && r->stop_ms[i])
        LOG_I("trial %ld: its worker gone %lld ms after the stop was decided", t->id,
              (long long)(tu_now_ms() - r->stop_ms[i]));
    r->stop_ms[i] = 0;
    if (t->state == TRIAL_STOPPING)
        t->state = strncmp(t->reason, "hung", 4) ? TRIAL_STOPPED : TRIAL_FAILED;
    else if (status == 0 && t->epochs >= r->target[i] && r->target[i] < r->epochs) {
        t->state = TRIAL_PAUSED;
        snprintf(t->reason, sizeof t->reason, "paused at epoch %d (asha rung %d)", t->epochs,
                 tsched_rung(&r->sched, t->epochs));
    } else if (status == 0 && t->epochs > 0)
        t->state = TRIAL_COMPLETE;
    else if (status == 0) {
        t->state = TRIAL_FAILED;
        snprintf(t->reason, sizeof t->reason, "reported no %s", r->metric);
    } else if (status < 0) { /* died without an exit status: run it again */
        run_again(r, i, dir, "its job is gone without an exit status");
        if (t->state == TRIAL_PENDING)
            return put(r, t);
    } else {
        trial_last_words(dir, words, sizeof words);
        t->state = TRIAL_FAILED;
        snprintf(t->reason, sizeof t->reason, "exit %d: %s", status, words);
    }
    t->ended = wall();
    t->pgid = 0;
    LOG_I("trial %ld: %s after %d epochs, best %s %g%s%s", t->id, study_state_name(t->state),
          t->epochs, r->metric, t->best, *t->reason ? ": " : "", t->reason);
    return put(r, t);
}

/* Launches trial i: LAUNCHING (attempt counted) is written before the fork. held:
 * its workers start but wait for trial_release (r->held). Returns 2 (nothing
 * done) when no host of the launcher has room for it now. */
static int launch(run_state *r, int i, int held)
{
    study_trial *t = &r->t[i];
    char dir[4096], err[512], buf[8192], epochs[32], save[4200], from[4200];
    char *argv[MAX_ARGV];
    int argc = 0, host = free_host(r);
    if (host < 0)
        return 2;
    trial_dir(r, t->id, dir, sizeof dir);
    t->state = TRIAL_LAUNCHING;
    t->attempt++;
    if (t->started == 0) /* a promoted trial keeps its first start */
        t->started = wall();
    if (put(r, t) < 0)
        return -PSKV_EIO;
    snprintf(buf, sizeof buf, "%s\n%s", r->wargs, t->params);
    char *tok = NULL;
    for (char *w = strtok_r(buf, "\n", &tok); w && argc < MAX_ARGV - 8;
         w = strtok_r(NULL, "\n", &tok))
        argv[argc++] = w;
    span_get(r, t->id, &r->base[i], &r->target[i]);
    if (span_put(r, t->id, r->base[i], r->target[i]) < 0)
        return -PSKV_EIO;
    snprintf(epochs, sizeof epochs, "%d", r->target[i] - r->base[i]);
    argv[argc++] = "--epochs";
    argv[argc++] = epochs;
    if (r->sched.promote) { /* the checkpoint it pauses with, the one it resumes from */
        snprintf(save, sizeof save, "%s/ckpt-%d", dir, r->target[i]);
        argv[argc++] = "--save-model";
        argv[argc++] = save;
    }
    if (r->base[i] > 0) {
        snprintf(from, sizeof from, "%s/ckpt-%d", dir, r->base[i]);
        argv[argc++] = "--init-from";
        argv[argc++] = from;
    }
    long pgid = 0;
    r->offset[i] = 0;
    r->last_ms[i] = tu_now_ms();
    if (sync_point(r) < 0)
        return -PSKV_EIO;
    if (trial_launch(&r->o->trial, dir, t->id, host, held, argv, argc, &pgid, err, sizeof err) <
        0) {
        t->state = TRIAL_FAILED;
        snprintf(t->reason, sizeof t->reason, "could not start: %.200s", err);
        t->ended = wall();
        LOG_E("trial %ld: %s", t->id, t->reason);
        return put(r, t);
    }
    t->pgid = pgid;
    r->host[i] = r->o->trial.place && r->o->trial.place->kind == TPLACE_SSH ? host : -1;
    if (r->wd[i] < 0)
        r->wd[i] = trial_watch_add(r->watch, dir);
    t->state = held ? TRIAL_LAUNCHING : TRIAL_RUNNING; /* held: RUNNING once released */
    if (held)
        r->held = i;
    char group[96], where[300];
    trial_group(&r->o->trial, t->id, group, sizeof group);
    trial_where(dir, where, sizeof where);
    LOG_I("trial %ld: attempt %d, epochs %d to %d, group %s, pgid %ld, %s%s:%s", t->id,
          t->attempt, r->base[i] + 1, r->target[i], group, pgid, where,
          held ? ", held until a slot frees" : "", t->params);
    return put(r, t);
}

/* A new trial from the search algorithm: written PENDING with its flags. Returns
 * 1 with none (grid exhausted), 0, or an error. */
static int suggest(run_state *r)
{
    int d = r->space.dims;
    double *x = malloc(sizeof(double) * (r->n + 1) * d), *y = malloc(sizeof(double) * (r->n + 1));
    if (!x || !y) {
        free(x), free(y);
        return -PSKV_ENOMEM;
    }
    int m = 0;
    for (int i = 0; i < r->n; i++) {
        if (r->t[i].state == TRIAL_FAILED)
            continue;
        char copy[512], *save = NULL, *w = copy;
        snprintf(copy, sizeof copy, "%s", r->t[i].u);
        for (int k = 0; k < d; k++, w = NULL) {
            char *tok = strtok_r(w, " ", &save);
            x[m * d + k] = tok ? atof(tok) : 0.5;
        }
        int done = r->t[i].state == TRIAL_COMPLETE || r->t[i].state == TRIAL_STOPPED ||
                   r->t[i].state == TRIAL_PAUSED;
        y[m++] = done && !isnan(r->t[i].best) ? r->sign * r->t[i].best : NAN;
    }
    double u[SPACE_MAX_DIMS];
    suggest_obs obs = {m, x, y};
    int rc = suggest_point(&r->space, r->algo, r->seed, r->n, (int)r->levels, &obs, u);
    free(x), free(y);
    if (rc != 0)
        return rc;
    char params[1024] = "", us[512] = "", v[64];
    size_t pl = 0, ul = 0;
    for (int k = 0; k < d; k++) {
        space_value(&r->space, k, u[k], v, sizeof v);
        pl += (size_t)snprintf(params + pl, sizeof params - pl, "%s--%s\n%s", k ? "\n" : "",
                               r->space.p[k].flag, v);
        ul += (size_t)snprintf(us + ul, sizeof us - ul, "%s%.17g", k ? " " : "", u[k]);
    }
    long id;
    if (study_trial_add(r->st, params, us, &id) < 0)
        return -PSKV_EIO;
    study_trial *t = &r->t[r->n];
    memset(t, 0, sizeof *t);
    t->id = id;
    snprintf(t->params, sizeof t->params, "%s", params);
    snprintf(t->u, sizeof t->u, "%s", us);
    t->state = TRIAL_PENDING;
    t->best = NAN;
    r->n++;
    return 0;
}

/* On start, when the service the trials ran on was gone and replaced: a worker
 * of it still alive is ended (its group cannot go on without its scheduler) and
 * its trial run again (a new attempt), unless its stop was decided (then it is
 * finished). One that ended by itself is finished from its exit status and log as
 * always. Waits up to 5 s for each. */
static void orphaned(run_state *r, int i, const char *dir)
{
    study_trial *t = &r->t[i];
    if (!trial_alive(dir))
        return;
    int rc = trial_stop(&r->o->trial, dir, t->id, t->pgid ? t->pgid : trial_pgid(dir), 1);
    for (int64_t until = tu_now_ms() + 5000; trial_alive(dir) && tu_now_ms() < until;)
        tu_sleep_ms(20);
    if (t->state == TRIAL_STOPPING)
        return;
    if (rc == 0) {
        LOG_W("trial %ld: its service was gone: it runs again", t->id);
        t->state = TRIAL_PENDING;
    } else
        run_again(r, i, dir, "its service was gone");
}

/* On start: what each unfinished trial's job is doing now. */
static int reattach(run_state *r)
{
    for (int i = 0; i < r->n; i++) {
        study_trial *t = &r->t[i];
        if (!active(t->state))
            continue;
        char dir[4096];
        trial_dir(r, t->id, dir, sizeof dir);
        r->offset[i] = 0;
        r->last_ms[i] = tu_now_ms();
        span_get(r, t->id, &r->base[i], &r->target[i]);
        char where[300];
        trial_where(dir, where, sizeof where);
        r->host[i] = !strncmp(where, "ssh ", 4) && r->o->trial.place
                         ? tplace_find(r->o->trial.place, where + 4)
                         : -1;
        if (r->o->service_replaced) {
            orphaned(r, i, dir);
            if (t->state == TRIAL_FAILED) {
                if (put(r, t) < 0)
                    return -PSKV_EIO;
                continue;
            }
            if (t->state == TRIAL_PENDING) {
                if (put(r, t) < 0)
                    return -PSKV_EIO;
                continue;
            }
        }
        if (trial_alive(dir)) {
            for (int k = 0; k < 100 && !trial_pgid(dir); k++)
                tu_sleep_ms(10); /* forked, pid file not yet written */
            t->pgid = trial_pgid(dir);
            r->wd[i] = trial_watch_add(r->watch, dir);
            if (t->state == TRIAL_LAUNCHING)
                t->state = TRIAL_RUNNING;
            trial_release(dir); /* one held by the killed tuner goes on now */
            char group[96];
            trial_group(&r->o->trial, t->id, group, sizeof group);
            LOG_I("trial %ld: re-attached to its group %s (pgid %ld, %s, %s)", t->id, group,
                  t->pgid, study_state_name(t->state), where);
            if (put(r, t) < 0)
                return -PSKV_EIO;
            if (t->state == TRIAL_STOPPING)
                trial_stop(&r->o->trial, dir, t->id, t->pgid, 0);
            continue;
        }
        if (t->state == TRIAL_LAUNCHING && trial_exit_status(dir) < 0) {
            /* never started, or died at once: launch again */
            run_again(r, i, dir, "never started, or gone at once");
            if (put(r, t) < 0)
                return -PSKV_EIO;
            continue;
        }
        if (t->state == TRIAL_LAUNCHING)
            t->state = TRIAL_RUNNING;
        if (finish(r, i) < 0)
            return -PSKV_EIO;
    }
    return 0;
}

static long spent(const run_state *r)
{
    long s = 0;
    for (int i = 0; i < r->n; i++)
        s += r->t[i].epochs;
    return s;
}

/* The study as Prometheus gauges (--metrics-port): trials by state, the best
 * value, the epochs spent. Cheap enough for every pass of the loop. */
static void publish(const run_state *r)
{
    int count[TRIAL_NSTATES] = {0};
    double best = NAN;
    for (int i = 0; i < r->n; i++) {
        count[r->t[i].state]++;
        if (!isnan(r->t[i].best) && (isnan(best) || r->sign * r->t[i].best > r->sign * best))
            best = r->t[i].best;
    }
    for (int k = 0; k < TRIAL_NSTATES; k++)
        metrics_set(metrics_series("pskv_tune_trials", MET_GAUGE, "the study's trials by state",
                                   "state", study_state_name((trial_state)k)),
                    count[k]);
    if (!isnan(best))
        metrics_set(metrics_series("pskv_tune_best", MET_GAUGE,
                                   "the best value of the study's metric so far", "metric",
                                   r->metric),
                    best);
    metrics_set(metrics_series("pskv_tune_epochs_spent", MET_GAUGE,
                               "epochs the study's trials have reported", NULL, NULL),
                (double)spent(r));
}

/* Promotion asha: resumes the trial tsched_promote names (its span written, then
 * launched: a tuner killed between the two decides the same again). Returns 1
 * when one was launched, 0 when none may be, or an error. */
static int promote(run_state *r)
{
    for (int i = 0; i < r->n; i++)
        r->paused_at[i] = r->t[i].state == TRIAL_PAUSED ? r->t[i].epochs : 0;
    char why[256];
    int to = 0;
    tsched_curves c = {r->n, (int)r->epochs, r->curve};
    int p = tsched_promote(&r->sched, &c, r->paused_at, &to, why, sizeof why);
    if (p < 0)
        return 0;
    study_trial *t = &r->t[p];
    LOG_I("trial %ld: %s", t->id, why);
    if (span_put(r, t->id, t->epochs, to) < 0)
        return -PSKV_EIO;
    t->reason[0] = '\0';
    t->ended = 0;
    int rc = launch(r, p, 0);
    return rc < 0 ? rc : rc == 2 ? 0 : 1;
}

/* At the end of a promotion study: the trials still paused were not good enough
 * to go on. */
static int unpause(run_state *r)
{
    for (int i = 0; i < r->n; i++) {
        study_trial *t = &r->t[i];
        if (t->state != TRIAL_PAUSED)
            continue;
        t->state = TRIAL_STOPPED;
        snprintf(t->reason, sizeof t->reason, "paused at epoch %d and never promoted (asha)",
                 t->epochs);
        if (put(r, t) < 0)
            return -PSKV_EIO;
    }
    return 0;
}

/* A signal to a tuner whose service ends with it: its running trials are
 * written back PENDING (they run again, from their start or rung, on the next
 * `run`), then their groups are stopped; the stops it had decided are finished.
 * Waits up to 10 s for their workers, then kills what is left. */
static int interrupt(run_state *r)
{
    int rc = 0;
    for (int i = 0; i < r->n && rc == 0; i++) {
        study_trial *t = &r->t[i];
        if (!active(t->state))
            continue;
        if (t->state != TRIAL_STOPPING) {
            t->state = TRIAL_PENDING;
            rc = put(r, t);
            LOG_I("trial %ld: interrupted by signal %d: runs again on the next run", t->id,
                  (int)*r->o->stop);
        }
        char dir[4096];
        trial_dir(r, t->id, dir, sizeof dir);
        trial_stop(&r->o->trial, dir, t->id, t->pgid, 0);
    }
    int64_t until = tu_now_ms() + 10000;
    for (int i = 0; i < r->n; i++) {
        study_trial *t = &r->t[i];
        char dir[4096];
        trial_dir(r, t->id, dir, sizeof dir);
        if (t->pgid <= 0 || !trial_alive(dir))
            continue;
        while (trial_alive(dir) && tu_now_ms() < until) {
            trial_reap();
            tu_sleep_ms(20);
        }
        if (trial_alive(dir))
            trial_stop(&r->o->trial, dir, t->id, t->pgid, 1);
    }
    for (int i = 0; i < r->n && rc == 0; i++)
        if (r->t[i].state == TRIAL_STOPPING)
            rc = finish(r, i);
    trial_reap();
    return rc;
}

/* Whether a trial waits to be launched (one a host had no room for yet). */
static int pending(const run_state *r)
{
    for (int i = 0; i < r->n; i++)
        if (r->t[i].state == TRIAL_PENDING)
            return 1;
    return 0;
}

/* The trials taking a slot: the active ones but the one held. */
static int running_count(const run_state *r)
{
    int n = 0;
    for (int i = 0; i < r->n; i++)
        n += active(r->t[i].state) && i != r->held;
    return n;
}

/* Whether a new trial may be suggested now; ahead: for a trial started ahead of
 * its turn, which must fit the budget even if every running trial runs to its
 * target (so that starting it early never starts one more than waiting would). */
static int may_suggest(const run_state *r, int ahead)
{
    if (r->grid_done || r->n >= r->max_trials || r->n >= MAX_TRIALS)
        return 0;
    if (r->budget <= 0)
        return 1;
    long s = spent(r);
    for (int i = 0; ahead && i < r->n; i++)
        if (active(r->t[i].state) && r->target[i] > r->t[i].epochs)
            s += r->target[i] - r->t[i].epochs;
    return s < r->budget;
}

/* At the end: waits (up to --trial-timeout) for the workers of trials completed
 * at their last report to exit, so that no process outlives the study. */
static void drain(run_state *r)
{
    int64_t until = tu_now_ms() + (int64_t)(r->o->trial_timeout * 1000);
    for (int i = 0; i < r->n; i++) {
        char dir[4096];
        trial_dir(r, r->t[i].id, dir, sizeof dir);
        while (trial_alive(dir) && tu_now_ms() < until && !*r->o->stop) {
            trial_reap();
            tu_sleep_ms(20);
        }
    }
    trial_reap();
}

int tune_run(tune_study *st, const tune_run_opts *o)
{
    run_state *r = calloc(1, sizeof *r);
    if (!r)
        return -PSKV_ENOMEM;
    r->st = st;
    r->o = o;
    r->held = -1;
    r->watch = trial_watch_new();
    for (int i = 0; i < MAX_TRIALS; i++)
        r->wd[i] = r->host[i] = -1;
    const tplace *place = o->trial.place;
    r->used = calloc(place && place->nhosts ? (size_t)place->nhosts : 1, sizeof *r->used);
    int rc = r->used ? load(r) : -PSKV_ENOMEM;
    int workers = o->trial.workers > 0 ? o->trial.workers : 1;
    if (rc == 0 && place && tplace_capacity(place, workers) < r->parallel) {
        LOG_W("--parallel %ld: the host file has room for %d trials of %d workers at once: "
              "%d run at once", r->parallel, tplace_capacity(place, workers), workers,
              tplace_capacity(place, workers));
        r->parallel = tplace_capacity(place, workers);
    }
    study_trial *grown = rc == 0 ? realloc(r->t, sizeof *r->t * MAX_TRIALS) : NULL;
    if (rc == 0 && !grown)
        rc = -PSKV_ENOMEM;
    if (grown)
        r->t = grown;
    if (rc == 0)
        rc = reattach(r);
    int64_t poll_ms = (int64_t)(o->poll * 1000), pass_ms = 0;
    while (rc == 0) {
        pass_ms = tu_now_ms();
        if (*o->stop) {
            rc = o->end_trials_on_stop && interrupt(r) < 0 ? -PSKV_EIO : 1;
            break;
        }
        trial_reap();
        publish(r);
        if (study_batch(r->st) < 0) {
            rc = -PSKV_EIO;
            break;
        }
        for (int i = 0; i < r->n && rc == 0; i++) {
            study_trial *t = &r->t[i];
            if (!active(t->state)) {
                trial_watch_remove(r->watch, r->wd[i]);
                r->wd[i] = -1;
                continue;
            }
            char dir[4096];
            trial_dir(r, t->id, dir, sizeof dir);
            metric_ctx m = {r, i};
            int before = t->epochs;
            if (trial_read_metrics(dir, &r->offset[i], r->metric, on_metric, &m) < 0)
                rc = -PSKV_EIO;
            else if (t->epochs != before && put(r, t) < 0)
                rc = -PSKV_EIO;
            else if (!trial_alive(dir))
                rc = finish(r, i);
            else if (t->state == TRIAL_RUNNING && i != r->held &&
                     tu_now_ms() - r->last_ms[i] > (int64_t)(o->trial_timeout * 1000)) {
                t->state = TRIAL_STOPPING;
                snprintf(t->reason, sizeof t->reason, "hung: no %s for %.0f s (--trial-timeout)",
                         r->metric, o->trial_timeout);
                rc = put(r, t);
                if (rc == 0)
                    rc = sync_point(r);
                trial_stop(&r->o->trial, dir, t->id, t->pgid, 1);
            }
            if (i == r->held && !active(t->state))
                r->held = -1; /* its workers ended before their turn */
        }
        if (rc != 0)
            break;
        int running = running_count(r);
        if (r->held >= 0 && running < r->parallel) { /* its turn */
            /* released before RUNNING is durable: its intent (LAUNCHING, the
             * attempt counted) was before its fork, and a tuner killed meanwhile
             * finds it LAUNCHING and alive, which reattach releases again; so no
             * fsync stands between a trial's end and the next one's start */
            char dir[4096];
            trial_dir(r, r->t[r->held].id, dir, sizeof dir);
            rc = trial_release(dir);
            r->t[r->held].state = TRIAL_RUNNING;
            if (rc == 0)
                rc = put(r, &r->t[r->held]);
            r->last_ms[r->held] = tu_now_ms();
            LOG_I("trial %ld: released", r->t[r->held].id);
            r->held = -1;
            running++;
        }
        /* one trial may be started ahead of a free slot (not with promotions: a
         * free slot must be able to promote first) */
        int ahead_ok = o->prestart && !r->sched.promote;
        /* launch: pending trials first (relaunches keep their id), then new ones;
         * with every slot taken, the first pending one is the one started ahead,
         * so a trial a killed tuner left unlaunched keeps its place before new
         * ones (the order an uninterrupted run has) */
        for (int i = 0; i < r->n && rc == 0; i++) {
            if (r->t[i].state != TRIAL_PENDING)
                continue;
            if (running < r->parallel) {
                rc = launch(r, i, 0);
                running += active(r->t[i].state);
            } else if (r->held < 0 && ahead_ok) {
                rc = launch(r, i, 1);
            }
            if (rc == 2) { /* no host has room now: wait for a trial to end */
                rc = 0;
                break;
            }
        }
        while (rc == 0 && running < r->parallel && r->sched.promote &&
               (r->budget <= 0 || spent(r) < r->budget)) {
            int p = promote(r);
            if (p <= 0) {
                rc = p;
                break;
            }
            running = running_count(r);
        }
        /* new ones; with every slot taken, one more started ahead */
        while (rc == 0 && r->held < 0 && may_suggest(r, running >= r->parallel) &&
               (running < r->parallel || ahead_ok) && !pending(r) && free_host(r) >= 0) {
            int ahead = running >= r->parallel;
            int s = suggest(r);
            if (s == 1)
                r->grid_done = 1;
            else if (s < 0)
                rc = s;
            else {
                rc = launch(r, r->n - 1, ahead);
                running += active(r->t[r->n - 1].state) && !ahead;
            }
        }
        if (rc == 0 && running == 0) {
            rc = unpause(r);
            break; /* nothing runs and nothing more will */
        }
        if (study_sync(r->st) < 0) {
            rc = -PSKV_EIO;
            break;
        }
        trial_watch_wait(r->watch, pass_ms, 2, (int)poll_ms);
    }
    if (study_sync(r->st) < 0 && rc == 0)
        rc = -PSKV_EIO;
    if (rc == 0) {
        drain(r);
        publish(r);
        LOG_I("study finished: %d trials, %ld epochs spent", r->n, spent(r));
    }
    space_free(&r->space);
    trial_watch_destroy(&r->watch);
    free(r->used);
    free(r->t);
    free(r->curve);
    free(r);
    return rc;
}
