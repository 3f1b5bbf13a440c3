/* pipebal: stages that re-split themselves (pipebal.h has the design). */
#include "pipebal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipesched.h"

#define TMO 120000 /* ms: the exchange table's pull */

struct pipebal {
    int L, S, k, tab, pulled, resplits;
    int64_t *ns;      /* L: this step's CPU time per layer */
    float *cnt, *prev; /* 2L + 2S: the table now and at the pull before */
    uint64_t *keys;   /* 2L + 2S: scratch of a push */
    float *vals;      /* likewise */
    double *cost, *factor, *ms; /* L, S, S: the window's means; each stage's time */
    int *tgt;         /* S + 1: the cut aimed at */
    int64_t push;     /* the last push, waited for at the next */
};

int pipebal_new(cfg_entry *cfg, int L, int S, int k, pipebal **out)
{
    *out = NULL;
    const char *mode = cfg_str(cfg, "balance");
    if (!strcmp(mode, "none"))
        return 0;
    if (strcmp(mode, "stages")) {
        fprintf(stderr, "pipeline: --balance must be none or stages on --app pipeline "
                "(got %s; batch and fixed:FILE are for mlp and softmax)\n", mode);
        return 2;
    }
    if (S < 2) {
        fprintf(stderr, "pipeline: --balance stages needs --stages 2 or more (got %d)\n", S);
        return 2;
    }
    pipebal *b = calloc(1, sizeof *b);
    if (!b)
        return 1;
    size_t n = 2 * (size_t)L + 2 * (size_t)S;
    b->L = L;
    b->S = S;
    b->k = k;
    b->tab = -1;
    b->ns = calloc((size_t)L, sizeof *b->ns);
    b->cnt = calloc(n, sizeof *b->cnt);
    b->prev = calloc(n, sizeof *b->prev);
    b->keys = calloc(n, sizeof *b->keys);
    b->vals = calloc(n, sizeof *b->vals);
    b->cost = calloc((size_t)L, sizeof *b->cost);
    b->factor = calloc((size_t)S, sizeof *b->factor);
    b->ms = calloc((size_t)S, sizeof *b->ms);
    b->tgt = calloc((size_t)S + 1, sizeof *b->tgt);
    if (!b->ns || !b->cnt || !b->prev || !b->keys || !b->vals || !b->cost || !b->factor ||
        !b->ms || !b->tgt) {
        pipebal_destroy(&b);
        return 1;
    }
    *out = b;
    return 0;
}

int pipebal_open(pipebal *b, pskv_worker *w, const char *layers)
{
    pskv_table_opts o;
    pskv_table_opts_init(&o);
    o.kind = PSKV_DENSE;
    o.size = 2 * (uint64_t)b->L + 2 * (uint64_t)b->S;
    o.updater = "sum";
    o.consistency = "bsp";
    char name[128];
    snprintf(name, sizeof name, "pipeline-%s-balance", layers);
    b->tab = pskv_table_open(w, name, &o);
    if (b->tab < 0) {
        fprintf(stderr, "pipeline: --balance stages: open table %s: %s\n", name,
                pskv_strerror(b->tab));
        return 1;
    }
    return 0;
}

void pipebal_time(pipebal *b, int l, int64_t ns)
{
    b->ns[l] += ns;
}

int pipebal_push(pipebal *b, pskv_worker *w, int l0, int l1, int m, double factor)
{
    size_t n = 0;
    for (int l = l0; l < l1; l++) {
        b->keys[n] = (uint64_t)l; /* us per micro-batch */
        b->vals[n++] = (float)((double)b->ns[l] / 1e3 / (m > 0 ? m : 1));
        b->keys[n] = (uint64_t)(b->L + l);
        b->vals[n++] = 1;
    }
    b->keys[n] = (uint64_t)(2 * b->L + b->k);
    b->vals[n++] = (float)factor;
    b->keys[n] = (uint64_t)(2 * b->L + b->S + b->k);
    b->vals[n++] = 1;
    memset(b->ns, 0, (size_t)b->L * sizeof *b->ns);
    int rc;
    if (b->push > 0 && (rc = pskv_wait(w, b->push, TMO)) < 0 && rc != -PSKV_ELATE)
        return rc;
    b->push = pskv_push(w, b->tab, b->keys, n, b->vals);
    return b->push < 0 ? (int)b->push : 0;
}

/* Stage times (ms per micro-batch) under cut first[]; returns the slowest. */
static double stage_times(const pipebal *b, const int *first, double *ms)
{
    double top = 0;
    for (int s = 0; s < b->S; s++) {
        double t = 0;
        for (int l = first[s]; l < first[s + 1]; l++)
            t += b->cost[l];
        ms[s] = t * b->factor[s] / 1e3;
        top = ms[s] > top ? ms[s] : top;
    }
    return top;
}

/* The window's means from the two pulls; 0 when some layer or stage has no
 * sample in it. */
static int window_means(pipebal *b)
{
    int L = b->L, S = b->S;
    for (int l = 0; l < L; l++) {
        float dn = b->cnt[L + l] - b->prev[L + l];
        if (!(dn > 0))
            return 0;
        b->cost[l] = (double)(b->cnt[l] - b->prev[l]) / dn;
    }
    for (int s = 0; s < S; s++) {
        float dn = b->cnt[2 * L + S + s] - b->prev[2 * L + S + s];
        if (!(dn > 0))
            return 0;
        b->factor[s] = (double)(b->cnt[2 * L + s] - b->prev[2 * L + s]) / dn;
        if (!(b->factor[s] > 0))
            return 0;
    }
    return 1;
}

static void announce(pipebal *b, report *rep, int print, int64_t step, const int *first,
                     double before, double after)
{
    char ls[512], ts[512], js[1400];
    size_t nl = 0, nt = 0;
    for (int s = 0; s < b->S && nl < sizeof ls - 32 && nt < sizeof ts - 32; s++) {
        nl += (size_t)snprintf(ls + nl, sizeof ls - nl, "%s%d..%d", s ? "," : "", first[s],
                               first[s + 1] - 1);
        nt += (size_t)snprintf(ts + nt, sizeof ts - nt, "%s%.3f", s ? "," : "", b->ms[s]);
    }
    if (print) {
        printf("balance: step %lld stages' layers %s (ms per micro-batch %s; slowest %.3f, "
               "was %.3f), re-split %d\n", (long long)step, ls, ts, after, before,
               b->resplits);
        fflush(stdout);
    }
    snprintf(js, sizeof js, "{\"stages_step\":%lld,\"layers\":\"%s\",\"ms_per_micro\":[%s]}",
             (long long)step, ls, ts);
    report_json(rep, js);
}

int pipebal_after(pipebal *b, pskv_worker *w, report *rep, int print, int64_t step, int *first)
{
    /* the first call (the same step on every rank) pulls a baseline: the first
     * decision comes at step 7 on the 7 steps after the run's first */
    if (b->pulled && (step + 1) % PIPEBAL_WIN != 0)
        return 0;
    int rc, n = 2 * b->L + 2 * b->S;
    int64_t tp = pskv_pull(w, b->tab, NULL, (size_t)n, b->cnt);
    if (tp < 0 || (rc = pskv_wait(w, tp, TMO)) < 0)
        return tp < 0 ? (int)tp : rc;
    int ok = b->pulled && window_means(b);
    memcpy(b->prev, b->cnt, (size_t)n * sizeof *b->prev);
    b->pulled = 1;
    if (!ok)
        return 0;
    double before = stage_times(b, first, b->ms);
    /* straight to the best cut under the model (each layer's cost x its stage's
     * factor): a bad first split costs one window, not one per layer to move */
    pipesched_cut_speed(b->cost, b->L, b->S, b->factor, b->tgt);
    double *ms = b->ms;
    double after = stage_times(b, b->tgt, ms);
    if (!(after <= PIPEBAL_GAIN * before)) {
        stage_times(b, first, b->ms); /* the times shown are the current cut's */
        return 0;
    }
    memcpy(first, b->tgt, ((size_t)b->S + 1) * sizeof *first);
    b->resplits++;
    announce(b, rep, print, step + 1, first, before, after);
    return 1;
}

int pipebal_resplits(const pipebal *b)
{
    return b ? b->resplits : 0;
}

double pipebal_stage_ms(const pipebal *b, int k)
{
    return b->ms[k];
}

void pipebal_destroy(pipebal **b_p)
{
    pipebal *b = *b_p;
    if (!b)
        return;
    free(b->ns);
    free(b->cnt);
    free(b->prev);
    free(b->keys);
    free(b->vals);
    free(b->cost);
    free(b->factor);
    free(b->ms);
    free(b->tgt);
    free(b);
    *b_p = NULL;
}
