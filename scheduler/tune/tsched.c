/* Trial schedulers (tsched.h). */
#define _GNU_SOURCE
#include "tsched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pskv_errors.h"

int tsched_parse(tsched *s, const char *text, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->eta = 3;
    s->min = 1;
    s->max = 27;
    s->min_trials = 3;
    const char *colon = strchr(text, ':');
    size_t nlen = colon ? (size_t)(colon - text) : strlen(text);
    if (nlen == 4 && !strncmp(text, "fifo", 4))
        s->kind = TSCHED_FIFO;
    else if (nlen == 6 && !strncmp(text, "median", 6)) {
        s->kind = TSCHED_MEDIAN;
        s->min = 1;
    } else if (nlen == 4 && !strncmp(text, "asha", 4))
        s->kind = TSCHED_ASHA;
    else {
        snprintf(err, errlen, "--sched %s: expected fifo, median or asha[:eta=3,min=1,max=27]",
                 text);
        return -PSKV_EINVAL;
    }
    if (!colon)
        return 0;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", colon + 1);
    char *save = NULL;
    for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '='), *end = NULL;
        long v = eq ? strtol(eq + 1, &end, 10) : 0;
        if (!eq || end == eq + 1 || *end || v < 1 || v > 100000) {
            snprintf(err, errlen, "--sched %s: `%s` is not KEY=N with N in 1..100000", text, kv);
            return -PSKV_EINVAL;
        }
        *eq = '\0';
        if (!strcmp(kv, "eta") && s->kind == TSCHED_ASHA && v >= 2)
            s->eta = (int)v;
        else if (!strcmp(kv, "min") && s->kind != TSCHED_FIFO)
            s->min = (int)v;
        else if (!strcmp(kv, "max") && s->kind == TSCHED_ASHA)
            s->max = (int)v;
        else if (!strcmp(kv, "trials") && s->kind == TSCHED_MEDIAN)
            s->min_trials = (int)v;
        else if (!strcmp(kv, "promote") && s->kind == TSCHED_ASHA && v == 1)
            s->promote = 1;
        else {
            snprintf(err, errlen, "--sched %s: `%s` does not apply (asha: eta>=2, min, max, "
                     "promote=1; median: min, trials)", text, kv);
            return -PSKV_EINVAL;
        }
    }
    if (s->kind == TSCHED_ASHA && s->min > s->max) {
        snprintf(err, errlen, "--sched %s: min above max", text);
        return -PSKV_EINVAL;
    }
    return 0;
}

char *tsched_format(const tsched *s, char *buf, size_t len)
{
    if (s->kind == TSCHED_FIFO)
        snprintf(buf, len, "fifo");
    else if (s->kind == TSCHED_MEDIAN)
        snprintf(buf, len, "median:min=%d,trials=%d", s->min, s->min_trials);
    else
        snprintf(buf, len, "asha:eta=%d,min=%d,max=%d%s", s->eta, s->min, s->max,
                 s->promote ? ",promote=1" : "");
    return buf;
}

int tsched_rung(const tsched *s, int e)
{
    if (s->kind != TSCHED_ASHA)
        return -1;
    long r = s->min;
    for (int k = 0; r <= s->max; k++, r *= s->eta)
        if (r == e)
            return r == s->max ? -1 : k; /* the last rung is the end of the trial */
    return -1;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Linear-interpolated percentile q in [0,1] of n sorted values (numpy's default). */
static double percentile(const double *v, int n, double q)
{
    double pos = q * (n - 1);
    int lo = (int)floor(pos);
    int hi = lo + 1 < n ? lo + 1 : lo;
    return v[lo] + (pos - lo) * (v[hi] - v[lo]);
}

#define MAXT 4096

int tsched_decide(const tsched *s, const tsched_curves *c, int t, int e, char *why,
                  size_t len)
{
    double vals[MAXT];
    int n = 0;
    const double *me = c->v + (size_t)t * c->epochs;
    snprintf(why, len, "continue");
    if (s->kind == TSCHED_FIFO || e < 1 || e > c->epochs || isnan(me[e - 1]) || s->promote)
        return 0;
    if (s->kind == TSCHED_ASHA) {
        int k = tsched_rung(s, e);
        if (k < 0)
            return 0;
        for (int i = 0; i < c->ntrials && n < MAXT; i++)
            if (!isnan(c->v[(size_t)i * c->epochs + e - 1]))
                vals[n++] = c->v[(size_t)i * c->epochs + e - 1];
        qsort(vals, n, sizeof vals[0], cmp);
        double cut = percentile(vals, n, 1.0 - 1.0 / s->eta);
        if (me[e - 1] < cut) {
            snprintf(why, len, "asha rung %d (epoch %d): %.6g below the cut-off %.6g of %d",
                     k, e, me[e - 1], cut, n);
            return 1;
        }
        snprintf(why, len, "asha rung %d (epoch %d): %.6g passes the cut-off %.6g of %d", k, e,
                 me[e - 1], cut, n);
        return 0;
    }
    /* median stopping (Vizier): the trial's best so far against the median of
     * the other trials' running averages over the same epochs */
    if (e < s->min)
        return 0;
    double best = -INFINITY;
    for (int j = 0; j < e; j++)
        if (!isnan(me[j]) && me[j] > best)
            best = me[j];
    for (int i = 0; i < c->ntrials && n < MAXT; i++) {
        const double *o = c->v + (size_t)i * c->epochs;
        if (i == t || isnan(o[e - 1]))
            continue;
        double sum = 0;
        int m = 0;
        for (int j = 0; j < e; j++)
            if (!isnan(o[j])) {
                sum += o[j];
                m++;
            }
        vals[n++] = sum / m;
    }
    if (n < s->min_trials)
        return 0;
    qsort(vals, n, sizeof vals[0], cmp);
    double med = percentile(vals, n, 0.5);
    if (best < med) {
        snprintf(why, len, "median rule (epoch %d): best %.6g below the median %.6g of %d "
                 "running averages", e, best, med, n);
        return 1;
    }
    return 0;
}

int tsched_first_target(const tsched *s)
{
    return s->kind == TSCHED_ASHA && s->promote && s->min < s->max ? s->min : s->max;
}

typedef struct ranked {
    double v;
    int t;
} ranked;

/* Best first; ties: the earlier trial. */
static int by_value(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->v != y->v)
        return x->v > y->v ? -1 : 1;
    return x->t - y->t;
}

int tsched_promote(const tsched *s, const tsched_curves *c, const int *paused_at, int *to_epoch,
                   char *why, size_t len)
{
    ranked r[MAXT];
    int rungs[64], nr = 0;
    snprintf(why, len, "none to promote");
    if (s->kind != TSCHED_ASHA || !s->promote)
        return -1;
    for (long e = s->min; e < s->max && e <= c->epochs && nr < 64; e *= s->eta)
        rungs[nr++] = (int)e;
    for (int k = nr - 1; k >= 0; k--) {
        int e = rungs[k], n = 0;
        for (int i = 0; i < c->ntrials && n < MAXT; i++)
            if (!isnan(c->v[(size_t)i * c->epochs + e - 1]))
                r[n++] = (ranked){c->v[(size_t)i * c->epochs + e - 1], i};
        int keep = n / s->eta;
        if (keep == 0)
            continue;
        qsort(r, n, sizeof r[0], by_value);
        for (int j = 0; j < keep; j++)
            if (paused_at[r[j].t] == e) {
                *to_epoch = k + 1 < nr ? rungs[k + 1] : s->max;
                snprintf(why, len, "asha rung %d (epoch %d): %.6g is #%d of %d (top %d): "
                         "promoted to epoch %d", k, e, r[j].v, j + 1, n, keep, *to_epoch);
                return r[j].t;
            }
    }
    return -1;
}
