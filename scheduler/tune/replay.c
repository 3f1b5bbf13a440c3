/* pskv-tune replay (replay.h). */
#define _GNU_SOURCE
#include "replay.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "space.h"
#include "study.h"
#include "suggest.h"
#include "tsched.h"

#define MAXT 4096

typedef struct recorded {
    tune_space space;
    study_trial *t;
    int n, epochs;
    double sign;
    double *curve; /* n x epochs, sign-adjusted, NAN where none */
} recorded;

/* One replayed search: its final best and the epochs spent when its best first
 * reached target (-1: never). */
typedef struct outcome {
    double best;
    long reach, spent;
    int trials;
} outcome;

static int any_flag(const char *flag, const char *value, char *why, size_t len)
{
    (void)flag, (void)value, (void)why, (void)len;
    return 0;
}

static int load(const char *path, recorded *r)
{
    char err[512], text[8192];
    tune_study *st = NULL;
    memset(r, 0, sizeof *r);
    if (study_open(path, 0, &st, err, sizeof err) < 0) {
        fprintf(stderr, "pskv-tune replay: %s\n", err);
        return -1;
    }
    int ok = study_get(st, "space", text, sizeof text) == 0 &&
             space_parse(&r->space, text, any_flag, err, sizeof err) == 0;
    char metric[64] = "", ep[32] = "";
    study_get(st, "metric", metric, sizeof metric);
    study_get(st, "trial_epochs", ep, sizeof ep);
    r->sign = strstr(metric, ":min") ? -1 : 1;
    r->epochs = atoi(ep);
    ok = ok && r->epochs > 0 && r->epochs <= 100000 && study_trials(st, &r->t, &r->n) == 0 &&
         r->n > 0 && r->n <= MAXT;
    r->curve = ok ? malloc(sizeof(double) * r->n * r->epochs) : NULL;
    for (int i = 0; r->curve && i < r->n; i++) {
        double *row = r->curve + (size_t)i * r->epochs;
        int top = study_metrics(st, r->t[i].id, row, r->epochs);
        for (int e = 0; e < r->epochs; e++)
            row[e] = e < top ? r->sign * row[e] : NAN;
    }
    study_close(&st);
    if (!r->curve) {
        fprintf(stderr, "pskv-tune replay: %s: no recorded trials with their space and epochs\n",
                path);
        return -1;
    }
    return 0;
}

/* The recorded trial that ran with the flags of point u (written into params),
 * or -1. */
static int lookup(const recorded *r, const double *u, char *params, size_t plen)
{
    char v[64];
    params[0] = '\0';
    size_t pl = 0;
    for (int k = 0; k < r->space.dims; k++) {
        space_value(&r->space, k, u[k], v, sizeof v);
        pl += (size_t)snprintf(params + pl, plen - pl, "%s--%s\n%s", k ? "\n" : "",
                               r->space.p[k].flag, v);
    }
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->t[i].params, params))
            return i;
    return -1;
}

static int simulate(const recorded *r, suggest_algo a, const tsched *ts, unsigned long long seed,
                    const tune_replay_opts *o, double target, outcome *out)
{
    int d = r->space.dims, E = r->epochs, rc = 0;
    double *x = malloc(sizeof(double) * MAXT * d), *y = malloc(sizeof(double) * MAXT);
    double *cv = malloc(sizeof(double) * MAXT * E), u[SPACE_MAX_DIMS];
    memset(out, 0, sizeof *out);
    out->best = -INFINITY;
    out->reach = -1;
    for (long i = 0; cv && i < (long)MAXT * E; i++)
        cv[i] = NAN;
    int m = 0;
    for (long n = 0; x && y && cv && n < o->max_trials && n < MAXT &&
                     (o->budget <= 0 || out->spent < o->budget);
         n++) {
        suggest_obs obs = {m, x, y};
        int s = suggest_point(&r->space, a, seed, n, o->levels, &obs, u);
        if (s == 1)
            break;
        char params[1024] = "";
        int k = s == 0 ? lookup(r, u, params, sizeof params) : -1;
        if (k < 0) {
            for (char *p = params; *p; p++)
                *p = *p == '\n' ? ' ' : *p;
            fprintf(stderr, "pskv-tune replay: seed %llu: trial %ld's point (%s) was not "
                    "recorded (the recorded study must cover every point: a grid over choice "
                    "dimensions)\n", seed, n + 1, params);
            rc = -1;
            break;
        }
        double tb = -INFINITY;
        for (int e = 1; e <= E; e++) {
            double v = r->curve[(size_t)k * E + e - 1];
            if (isnan(v))
                break;
            cv[(size_t)n * E + e - 1] = v;
            out->spent++;
            tb = fmax(tb, v);
            out->best = fmax(out->best, v);
            if (out->reach < 0 && out->best >= target)
                out->reach = out->spent;
            char why[256];
            tsched_curves c = {(int)n + 1, E, cv};
            if (tsched_decide(ts, &c, (int)n, e, why, sizeof why))
                break;
        }
        out->trials++;
        if (tb > -INFINITY) { /* a failed recording teaches the GP nothing, as live */
            memcpy(x + (size_t)m * d, u, sizeof(double) * d);
            y[m++] = tb;
        }
    }
    if (!x || !y || !cv)
        rc = -1;
    free(x), free(y), free(cv);
    return rc;
}

static int cmp(const void *a, const void *b)
{
    double p = *(const double *)a, q = *(const double *)b;
    return p < q ? -1 : p > q;
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int tune_replay(const char *path, const tune_replay_opts *o)
{
    suggest_algo a;
    tsched ts, fifo;
    char err[256];
    if (suggest_algo_parse(o->algo, &a) < 0 || tsched_parse(&ts, o->sched, err, sizeof err) < 0) {
        fprintf(stderr, "pskv-tune replay: --algo %s --sched %s: %s\n", o->algo, o->sched,
                suggest_algo_parse(o->algo, &a) < 0 ? "expected grid, random or gp" : err);
        return 2;
    }
    if (ts.promote) {
        fprintf(stderr, "pskv-tune replay: asha promote=1 is not replayed (one trial at a time "
                "never pauses); use the stopping variant\n");
        return 2;
    }
    recorded r;
    if (load(path, &r) < 0)
        return 1;
    if (ts.kind == TSCHED_ASHA && !strstr(o->sched, "max="))
        ts.max = r.epochs;
    tsched_parse(&fifo, "fifo", err, sizeof err);
    long budget = o->budget > 0 ? o->budget : (long)r.n * r.epochs;
    tune_replay_opts oo = *o;
    oo.budget = budget;
    double *reach = malloc(sizeof(double) * o->seeds), *best = malloc(sizeof(double) * o->seeds);
    int got = 0, status = reach && best ? 0 : 1;
    printf("replay of %s: %d recorded trials of %d epochs; %s search, %s, budget %ld epochs, "
           "%d seeds from %llu\n",
           path, r.n, r.epochs, o->algo, o->sched, budget, o->seeds, o->first);
    for (int i = 0; i < o->seeds && status == 0; i++) {
        outcome base, run;
        unsigned long long s = o->first + (unsigned long long)i;
        if (simulate(&r, ALGO_RANDOM, &fifo, s, &oo, INFINITY, &base) < 0 ||
            simulate(&r, a, &ts, s, &oo, base.best, &run) < 0) {
            status = 1;
            break;
        }
        printf("seed %llu: random+fifo best %.6g (%d trials, %ld epochs); this search best %.6g "
               "(%d trials, %ld epochs), reached random's best after %ld epochs%s\n", s,
               r.sign * base.best, base.trials, base.spent, r.sign * run.best, run.trials,
               run.spent, run.reach, run.reach < 0 ? " (never)" : "");
        reach[got] = run.reach < 0 ? INFINITY : (double)run.reach;
        best[got++] = r.sign * run.best;
    }
    if (status == 0 && got > 0) {
        double mr = median(reach, got), mb = median(best, got);
        if (isinf(mr))
            printf("median epochs to reach random search's final best: never (in most seeds); "
                   "median final best %.6g\n", mb);
        else
            printf("median epochs to reach random search's final best: %.1f = %.2f B (B = %ld); "
                   "median final best %.6g\n", mr, mr / budget, budget, mb);
    }
    free(reach), free(best);
    space_free(&r.space);
    free(r.t);
    free(r.curve);
    return status;
}
