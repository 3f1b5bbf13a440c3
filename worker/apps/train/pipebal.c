/* pipebal: stages that re-split themselves (pipebal.h has the design). */
#include "pipebal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipemove.h"

#define TMO 120000 /* ms: the exchange table's pull */

struct pipebal {
    int L, S, k, tab, pulled, resplits, backs;
    int64_t *ns;      /* L: this step's CPU time per layer */
    float *cnt, *prev; /* N (tab_size): the table now and at the pull before */
    uint64_t *keys;   /* N: scratch of a push */
    float *vals;      /* likewise */
    double *cost, *factor, *ms; /* L, S, S: the window's means; each stage's time */
    double wall;      /* the window's mean step, ms (0: not measured) */
    double walls[PIPEBAL_WIN]; /* this rank's steps' wall times since the last decision, ms */
    int nwalls;
    int64_t wall_from; /* the first step whose wall time counts in the window */
    pipemove *rule;
    int64_t push;     /* the last push, waited for at the next */
};

/* The exchange table: per layer its cost sum and count (2L), per stage its factor
 * sum and count (2S), the stages' window medians of a step's wall time, sum and count. */
static size_t tab_size(const pipebal *b)
{
    return 2 * (size_t)b->L + 2 * (size_t)b->S + 2;
}

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
    b->L = L;
    b->S = S;
    b->k = k;
    b->tab = -1;
    size_t n = tab_size(b);
    b->ns = calloc((size_t)L, sizeof *b->ns);
    b->cnt = calloc(n, sizeof *b->cnt);
    b->prev = calloc(n, sizeof *b->prev);
    b->keys = calloc(n, sizeof *b->keys);
    b->vals = calloc(n, sizeof *b->vals);
    b->cost = calloc((size_t)L, sizeof *b->cost);
    b->factor = calloc((size_t)S, sizeof *b->factor);
    b->ms = calloc((size_t)S, sizeof *b->ms);
    b->rule = pipemove_new(L, S);
    if (!b->ns || !b->cnt || !b->prev || !b->keys || !b->vals || !b->cost || !b->factor ||
        !b->ms || !b->rule) {
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
    o.size = (uint64_t)tab_size(b);
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

void pipebal_wall(pipebal *b, int64_t step, int64_t ns)
{
    if (step >= b->wall_from && b->nwalls < PIPEBAL_WIN)
        b->walls[b->nwalls++] = (double)ns / 1e6;
}

static int by_value(const void *x, const void *y)
{
    double a = *(const double *)x, c = *(const double *)y;
    return (a > c) - (a < c);
}

/* A decision step: the median of this rank's walls since the last one (steps
 * before this one); 0 when none counted. */
static double wall_median(pipebal *b)
{
    if (b->nwalls == 0)
        return 0;
    qsort(b->walls, (size_t)b->nwalls, sizeof *b->walls, by_value);
    int n = b->nwalls;
    return n % 2 ? b->walls[n / 2] : (b->walls[n / 2 - 1] + b->walls[n / 2]) / 2;
}

static int decision_step(const pipebal *b, int64_t step)
{
    return b->pulled && (step + 1) % PIPEBAL_WIN == 0;
}

int pipebal_push(pipebal *b, pskv_worker *w, int64_t step, int l0, int l1, int m, double factor)
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
    double wall = decision_step(b, step) ? wall_median(b) : 0;
    if (wall > 0) {
        b->keys[n] = (uint64_t)(2 * b->L + 2 * b->S);
        b->vals[n++] = (float)wall;
        b->keys[n] = (uint64_t)(2 * b->L + 2 * b->S + 1);
        b->vals[n++] = 1;
    }
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
    float dn = b->cnt[2 * L + 2 * S + 1] - b->prev[2 * L + 2 * S + 1];
    b->wall = dn > 0 ? (double)(b->cnt[2 * L + 2 * S] - b->prev[2 * L + 2 * S]) / dn : 0;
    return 1;
}

/* The cut first[] as "0..1,2..4" into ls, the stages' times into ts. */
static void describe(const pipebal *b, const int *first, char *ls, size_t nls, char *ts,
                     size_t nts)
{
    size_t nl = 0, nt = 0;
    ls[0] = ts[0] = '\0';
    for (int s = 0; s < b->S && nl < nls - 32 && nt < nts - 32; s++) {
        nl += (size_t)snprintf(ls + nl, nls - nl, "%s%d..%d", s ? "," : "", first[s],
                               first[s + 1] - 1);
        nt += (size_t)snprintf(ts + nt, nts - nt, "%s%.3f", s ? "," : "", b->ms[s]);
    }
}

/* A re-split to first[] (the model's, or a neighbour tried): its line (a
 * contract: scripts and tests read it) and metrics record. */
static void announce(pipebal *b, report *rep, int print, int64_t step, const int *first,
                     int act, const pipemove_note *note)
{
    char ls[512], ts[512], js[1400];
    describe(b, first, ls, sizeof ls, ts, sizeof ts);
    if (print) {
        printf("balance: step %lld stages' layers %s (ms per micro-batch %s; slowest %.3f, "
               "was %.3f), re-split %d\n", (long long)step, ls, ts, note->pred_to / 1e3,
               note->pred_from / 1e3, b->resplits);
        if (act == PIPEMOVE_TRY)
            printf("balance: step %lld the re-split is a try: the model's last move fell "
                   "%.2fx short of its prediction (a step %.1f ms); it stays if a step gets "
                   "%.0f%% faster\n", (long long)step, note->err, b->wall,
                   100 * PIPEMOVE_MARGIN);
        fflush(stdout);
    }
    snprintf(js, sizeof js, "{\"stages_step\":%lld,\"layers\":\"%s\",\"ms_per_micro\":[%s]%s}",
             (long long)step, ls, ts, act == PIPEMOVE_TRY ? ",\"try\":1" : "");
    report_json(rep, js);
}

/* A move back to first[]: its line and metrics record. */
static void announce_back(pipebal *b, report *rep, int print, int64_t step, const int *first,
                          const pipemove_note *note)
{
    char ls[512], ts[512], js[1400];
    describe(b, first, ls, sizeof ls, ts, sizeof ts);
    if (print) {
        printf("balance: step %lld back to stages' layers %s (a step took %.1f ms after the "
               "re-split, %.1f ms before it), move-back %d\n", (long long)step, ls,
               note->wall_to, note->wall_from, b->backs);
        fflush(stdout);
    }
    snprintf(js, sizeof js, "{\"stages_step\":%lld,\"layers\":\"%s\",\"ms_per_micro\":[%s],"
             "\"back\":1,\"ms_per_step\":[%.3f,%.3f]}", (long long)step, ls, ts,
             note->wall_from, note->wall_to);
    report_json(rep, js);
}

int pipebal_after(pipebal *b, pskv_worker *w, report *rep, int print, int64_t step, int *first)
{
    /* the first call (the same step on every rank) pulls a baseline: the first
     * decision comes at step 7 on the 7 steps after the run's first */
    if (b->pulled && !decision_step(b, step))
        return 0;
    int rc, n = (int)tab_size(b);
    int64_t tp = pskv_pull(w, b->tab, NULL, (size_t)n, b->cnt);
    if (tp < 0 || (rc = pskv_wait(w, tp, TMO)) < 0)
        return tp < 0 ? (int)tp : rc;
    int ok = b->pulled && window_means(b);
    memcpy(b->prev, b->cnt, (size_t)n * sizeof *b->prev);
    b->pulled = 1;
    b->nwalls = 0; /* this step's wall time belongs to no window */
    b->wall_from = step + 1;
    if (!ok)
        return 0;
    int act = pipemove_window(b->rule, b->cost, b->factor, b->wall, first);
    const pipemove_note *note = pipemove_last(b->rule);
    stage_times(b, first, b->ms); /* the times shown are the (new) cut's */
    if (note->forgot && print)
        printf("balance: step %lld the cut moved back from is forgotten: the one returned to "
               "ran no faster since (a step %.1f ms), the host changed, not the cut\n",
               (long long)step + 1, b->wall);
    if (act == PIPEMOVE_STAY)
        return 0;
    b->wall_from = step + 2; /* a moved layer's first step pulls new tables: not counted */
    b->resplits++;
    if (act == PIPEMOVE_BACK) {
        b->backs++;
        announce_back(b, rep, print, step + 1, first, note);
    } else {
        announce(b, rep, print, step + 1, first, act, note);
    }
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
    pipemove_destroy(&b->rule);
    free(b);
    *b_p = NULL;
}
