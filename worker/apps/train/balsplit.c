/* balsplit: the splitting rule of --balance batch (balsplit.h). */
#include "balsplit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct balsplit {
    int W, B;
    int *cur;      /* the batch per rank */
    int *next;     /* scratch: a candidate split */
    double *ideal; /* scratch: the split aimed at, before rounding */
    double *est;   /* the medians */
    float *hist;   /* BALSPLIT_WIN x W: us per example, a ring */
    int nobs;      /* observations in hist since it last restarted */
    char *gone;    /* per rank: dropped (its worker died): batch 0 from then on */
    char *hold;    /* scratch of equal_time: held at batch 1 */
    int nlive;
    /* the step-time model T_i(b) = a_i + c_i b (us): fixed costs a step, and per
     * example; from the medians at the last two splits */
    double *a, *c;
    double *afit;  /* per rank: the fixed costs of its last two-point line (0: none) */
    int *pb;       /* per rank: its batch at the split before (0: none) */
    double *pt;    /* its median step time there */
    long obs, pobs; /* observations in all; at the last re-split */
};

balsplit *balsplit_new(int W, int B)
{
    balsplit *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->W = W;
    s->B = B;
    s->cur = calloc((size_t)W, sizeof *s->cur);
    s->next = calloc((size_t)W, sizeof *s->next);
    s->ideal = calloc((size_t)W, sizeof *s->ideal);
    s->est = calloc((size_t)W, sizeof *s->est);
    s->hist = calloc((size_t)W * BALSPLIT_WIN, sizeof *s->hist);
    s->gone = calloc((size_t)W, 1);
    s->hold = calloc((size_t)W, 1);
    s->a = calloc((size_t)W, sizeof *s->a);
    s->c = calloc((size_t)W, sizeof *s->c);
    s->afit = calloc((size_t)W, sizeof *s->afit);
    s->pb = calloc((size_t)W, sizeof *s->pb);
    s->pt = calloc((size_t)W, sizeof *s->pt);
    if (!s->cur || !s->next || !s->ideal || !s->est || !s->hist || !s->gone || !s->hold || !s->a || !s->c || !s->afit ||
        !s->pb || !s->pt) {
        balsplit_destroy(&s);
        return NULL;
    }
    balsplit_even(s);
    return s;
}

void balsplit_destroy(balsplit **s_p)
{
    balsplit *s = *s_p;
    if (!s)
        return;
    free(s->cur);
    free(s->next);
    free(s->ideal);
    free(s->est);
    free(s->hist);
    free(s->gone);
    free(s->hold);
    free(s->a);
    free(s->c);
    free(s->afit);
    free(s->pb);
    free(s->pt);
    free(s);
    *s_p = NULL;
}

void balsplit_even(balsplit *s)
{
    memset(s->gone, 0, (size_t)s->W);
    memset(s->pb, 0, (size_t)s->W * sizeof *s->pb);
    memset(s->afit, 0, (size_t)s->W * sizeof *s->afit);
    s->nlive = s->W;
    for (int i = 0; i < s->W; i++)
        s->cur[i] = s->B / s->W + (i < s->B % s->W);
    s->nobs = 0;
}

int balsplit_even_among(balsplit *s, const char *live)
{
    int n = 0, k = 0;
    for (int i = 0; i < s->W; i++)
        n += live[i] != 0;
    if (n == 0)
        return -1;
    memset(s->pb, 0, (size_t)s->W * sizeof *s->pb);
    memset(s->afit, 0, (size_t)s->W * sizeof *s->afit);
    for (int i = 0; i < s->W; i++) {
        s->gone[i] = !live[i];
        s->cur[i] = live[i] ? s->B / n + (k++ < s->B % n) : 0;
    }
    s->nlive = n;
    s->nobs = 0;
    return 0;
}

void balsplit_set(balsplit *s, const int *batches)
{
    memset(s->gone, 0, (size_t)s->W);
    memset(s->pb, 0, (size_t)s->W * sizeof *s->pb);
    memset(s->afit, 0, (size_t)s->W * sizeof *s->afit);
    s->nlive = s->W;
    memcpy(s->cur, batches, (size_t)s->W * sizeof *s->cur);
    s->nobs = 0;
}

const int *balsplit_cur(const balsplit *s)
{
    return s->cur;
}

const double *balsplit_est(const balsplit *s)
{
    return s->est;
}

int balsplit_live(const balsplit *s)
{
    return s->nlive;
}

int balsplit_gone(const balsplit *s, int i)
{
    return s->gone[i];
}

/* The median of worker i's window (an insertion sort of BALSPLIT_WIN). */
static double median(const balsplit *s, int i)
{
    float v[BALSPLIT_WIN];
    for (int k = 0; k < BALSPLIT_WIN; k++) {
        float x = s->hist[k * s->W + i];
        int j = k;
        for (; j > 0 && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
    return ((double)v[BALSPLIT_WIN / 2 - 1] + v[BALSPLIT_WIN / 2]) / 2;
}

/* The slowest worker's predicted time for a split (a worker with no rows: none). */
static double clock_time(const balsplit *s, const int *split)
{
    double t = 0;
    for (int i = 0; i < s->W; i++) {
        double ti = split[i] > 0 ? s->a[i] + s->c[i] * split[i] : 0;
        t = ti > t ? ti : t;
    }
    return t;
}

/* Worker i's model from its median step time t at the current batch: the line
 * through the point at the split before when that is recent (4 windows), a batch
 * 2 or more away, and gives fixed costs >= 0 and a cost per example of at least a
 * tenth of the mean's. Else the fixed costs of its last such line are kept (at
 * most 90% of t) and the cost per example follows t: a settled split, whose last
 * move is long past, keeps knowing them instead of driving a worker with high
 * fixed costs down to 1 example; none yet: proportional (a = 0). */
static void fit(balsplit *s, int i, double t)
{
    int b = s->cur[i], pb = s->pb[i];
    if (pb > 0 && abs(b - pb) >= 2 && s->obs - s->pobs <= 4 * BALSPLIT_WIN) {
        double c = (t - s->pt[i]) / (b - pb), a = t - c * b;
        if (c >= 0.1 * t / b && a >= 0) {
            s->a[i] = s->afit[i] = a;
            s->c[i] = c;
            return;
        }
    }
    s->a[i] = s->afit[i] < 0.9 * t ? s->afit[i] : 0.9 * t;
    s->c[i] = (t - s->a[i]) / b;
}

/* ideal[]: the batches (real, summing to B over the live workers) that finish
 * together under the model, a_i + c_i b_i = T, those that would get under one
 * held at 1 and T solved again for the rest. */
static void equal_time(balsplit *s)
{
    char *one = s->hold;
    memset(one, 0, (size_t)s->W);
    for (int round = 0; round < s->W; round++) {
        double inv = 0, ac = 0, left = s->B;
        for (int i = 0; i < s->W; i++) {
            if (s->gone[i])
                continue;
            if (one[i]) {
                left -= 1;
                continue;
            }
            inv += 1 / s->c[i];
            ac += s->a[i] / s->c[i];
        }
        double T = inv > 0 ? (left + ac) / inv : 0;
        int again = 0;
        for (int i = 0; i < s->W; i++) {
            s->ideal[i] = s->gone[i] ? 0 : one[i] ? 1 : (T - s->a[i]) / s->c[i];
            if (!s->gone[i] && !one[i] && s->ideal[i] < 1) {
                one[i] = 1;
                again = 1;
            }
        }
        if (!again)
            return;
    }
}

/* ideal (summing to B) rounded to whole batches >= 1 by largest remainder, ties
 * to the lower rank. */
static void round_split(balsplit *s)
{
    int left = s->B;
    for (int i = 0; i < s->W; i++) {
        if (s->gone[i]) {
            s->next[i] = 0;
            continue;
        }
        s->next[i] = (int)floor(s->ideal[i]);
        s->next[i] = s->next[i] < 1 ? 1 : s->next[i];
        left -= s->next[i];
    }
    while (left != 0) {
        int best = -1;
        double bf = 0;
        for (int i = 0; i < s->W; i++) {
            if (s->gone[i])
                continue;
            double f = s->ideal[i] - s->next[i];
            if ((left > 0 && (best < 0 || f > bf)) ||
                (left < 0 && s->next[i] > 1 && (best < 0 || f < bf))) {
                best = i;
                bf = f;
            }
        }
        s->next[best] += left > 0 ? 1 : -1;
        left += left > 0 ? -1 : 1;
    }
}

int balsplit_observe(balsplit *s, const float *us)
{
    float *slot = s->hist + (size_t)(s->nobs % BALSPLIT_WIN) * (size_t)s->W;
    const float *prev = s->hist + (size_t)((s->nobs + BALSPLIT_WIN - 1) % BALSPLIT_WIN) * (size_t)s->W;
    for (int i = 0; i < s->W; i++)
        slot[i] = us[i] > 0 || s->nobs == 0 ? us[i] : prev[i];
    s->obs++;
    if (++s->nobs < BALSPLIT_WIN)
        return 0;
    double move = 0;
    for (int i = 0; i < s->W; i++) {
        if (s->gone[i]) {
            s->est[i] = 0;
            continue;
        }
        s->est[i] = median(s, i);
        if (!(s->est[i] > 0))
            return 0; /* a worker not measured yet */
        fit(s, i, s->est[i] * s->cur[i]);
    }
    equal_time(s);
    for (int i = 0; i < s->W; i++) {
        double d = fabs(s->ideal[i] - s->cur[i]);
        move = d > move ? d : move;
    }
    double cap = s->B / (2.0 * s->nlive), f = move > cap ? cap / move : 1;
    for (int i = 0; i < s->W; i++) /* the whole move scaled: the sum stays B */
        s->ideal[i] = s->cur[i] + f * (s->ideal[i] - s->cur[i]);
    round_split(s);
    if (!(clock_time(s, s->next) <= BALSPLIT_GAIN * clock_time(s, s->cur)))
        return 0;
    for (int i = 0; i < s->W; i++) { /* this split's point, for the next fit */
        s->pb[i] = s->cur[i];
        s->pt[i] = s->est[i] * s->cur[i];
    }
    s->pobs = s->obs;
    memcpy(s->cur, s->next, (size_t)s->W * sizeof *s->cur);
    s->nobs = 0; /* the times at the old split say little of the new one's */
    return 1;
}

int balsplit_drop(balsplit *s, int i)
{
    if (i < 0 || i >= s->W || s->gone[i] || s->nlive <= 1)
        return 0;
    s->gone[i] = 1;
    s->nlive--;
    /* the dead worker's batch to the others in proportion to their current ones (a
     * split already balanced for speed stays so); the window starts again */
    int left = s->B - s->cur[i];
    for (int k = 0; k < s->W; k++)
        s->ideal[k] = s->gone[k] ? 0 : (double)s->cur[k] * s->B / (left > 0 ? left : 1);
    if (left <= 0)
        for (int k = 0; k < s->W; k++)
            s->ideal[k] = s->gone[k] ? 0 : (double)s->B / s->nlive;
    round_split(s);
    memcpy(s->cur, s->next, (size_t)s->W * sizeof *s->cur);
    s->nobs = 0;
    return 1;
}
