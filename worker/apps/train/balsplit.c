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
    int nlive;
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
    if (!s->cur || !s->next || !s->ideal || !s->est || !s->hist || !s->gone) {
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
    free(s);
    *s_p = NULL;
}

void balsplit_even(balsplit *s)
{
    memset(s->gone, 0, (size_t)s->W);
    s->nlive = s->W;
    for (int i = 0; i < s->W; i++)
        s->cur[i] = s->B / s->W + (i < s->B % s->W);
    s->nobs = 0;
}

void balsplit_set(balsplit *s, const int *batches)
{
    memset(s->gone, 0, (size_t)s->W);
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

/* The slowest worker's predicted time for a split. */
static double clock_time(const balsplit *s, const int *split)
{
    double t = 0;
    for (int i = 0; i < s->W; i++)
        t = split[i] * s->est[i] > t ? split[i] * s->est[i] : t;
    return t;
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
    if (++s->nobs < BALSPLIT_WIN)
        return 0;
    double inv = 0, move = 0;
    for (int i = 0; i < s->W; i++) {
        if (s->gone[i]) {
            s->est[i] = 0;
            continue;
        }
        s->est[i] = median(s, i);
        if (!(s->est[i] > 0))
            return 0; /* a worker not measured yet */
        inv += 1 / s->est[i];
    }
    for (int i = 0; i < s->W; i++) {
        s->ideal[i] = s->gone[i] ? 0 : s->B / s->est[i] / inv;
        double d = fabs(s->ideal[i] - s->cur[i]);
        move = d > move ? d : move;
    }
    double cap = s->B / (2.0 * s->nlive), f = move > cap ? cap / move : 1;
    for (int i = 0; i < s->W; i++) /* the whole move scaled: the sum stays B */
        s->ideal[i] = s->cur[i] + f * (s->ideal[i] - s->cur[i]);
    round_split(s);
    if (!(clock_time(s, s->next) <= BALSPLIT_GAIN * clock_time(s, s->cur)))
        return 0;
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
