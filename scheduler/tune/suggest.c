/* Search algorithms (suggest.h). */
#include "suggest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "pskv_errors.h"

#define CANDIDATES 1000
#define LOCAL 200
#define REFINE 64

static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

double suggest_uniform(uint64_t seed, uint64_t i, uint64_t j)
{
    return (mix(mix(mix(seed) ^ i) ^ j) >> 11) * (1.0 / 9007199254740992.0);
}

int suggest_algo_parse(const char *text, suggest_algo *a)
{
    if (!strcmp(text, "grid"))
        *a = ALGO_GRID;
    else if (!strcmp(text, "random"))
        *a = ALGO_RANDOM;
    else if (!strcmp(text, "gp"))
        *a = ALGO_GP;
    else
        return -1;
    return 0;
}

const char *suggest_algo_name(suggest_algo a)
{
    return a == ALGO_GRID ? "grid" : a == ALGO_RANDOM ? "random" : "gp";
}

long suggest_grid_size(const tune_space *s, int levels)
{
    long n = 1;
    for (int i = 0; i < s->dims && n < 100000000; i++)
        n *= space_levels(s, i, levels);
    return n;
}

/* Grid point k of the unshuffled order. */
static void grid_point(const tune_space *s, int levels, long k, double *u)
{
    for (int i = s->dims - 1; i >= 0; i--) {
        int m = space_levels(s, i, levels);
        long j = k % m;
        k /= m;
        int discrete = s->p[i].kind == SPACE_CHOICE ||
                       (s->p[i].kind == SPACE_INT && m == (int)(s->p[i].hi - s->p[i].lo) + 1);
        u[i] = discrete ? (j + 0.5) / m : m == 1 ? 0.5 : (double)j / (m - 1);
    }
}

/* The shuffled grid's point i: a Fisher-Yates permutation drawn from the seed. */
static int grid(const tune_space *s, uint64_t seed, long i, int levels, double *u)
{
    long n = suggest_grid_size(s, levels);
    if (i >= n)
        return 1;
    if (n > 10000000)
        return -PSKV_EINVAL;
    long *perm = malloc(sizeof(long) * n);
    if (!perm)
        return -PSKV_ENOMEM;
    for (long k = 0; k < n; k++)
        perm[k] = k;
    for (long k = n - 1; k > 0; k--) {
        long j = (long)(suggest_uniform(seed, 0x67726964, (uint64_t)k) * (k + 1));
        long t = perm[k];
        perm[k] = perm[j];
        perm[j] = t;
    }
    grid_point(s, levels, perm[i], u);
    free(perm);
    return 0;
}

static void random_point(const tune_space *s, uint64_t seed, long i, double *u)
{
    for (int d = 0; d < s->dims; d++)
        u[d] = suggest_uniform(seed, (uint64_t)i, (uint64_t)d);
}

/* Halton's radical inverse in base b: the quasi-random candidates. */
static double halton(uint64_t k, int b)
{
    double f = 1, r = 0;
    while (k > 0) {
        f /= b;
        r += f * (double)(k % b);
        k /= b;
    }
    return r;
}

static const int primes[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53};

/* Levels of dimension k when it is discrete (choice, int), else 0. */
static int levels_of(const tune_space *s, int k)
{
    const space_param *p = &s->p[k];
    return p->kind == SPACE_CHOICE ? p->nchoices
           : p->kind == SPACE_INT  ? (int)(p->hi - p->lo) + 1
                                   : 0;
}

/* The number of points of an all-discrete space (0 when a dimension is real or
 * the product passes cap). */
static long discrete_size(const tune_space *s, long cap)
{
    long n = 1;
    for (int k = 0; k < s->dims; k++) {
        int m = levels_of(s, k);
        if (m <= 0 || (n *= m) > cap)
            return 0;
    }
    return n;
}

/* The inverse of the standard normal CDF, by bisection (only for ranks). */
static double probit(double p)
{
    double lo = -9, hi = 9;
    for (int it = 0; it < 60; it++) {
        double mid = (lo + hi) / 2;
        if (0.5 * erfc(-mid / sqrt(2.0)) < p)
            lo = mid;
        else
            hi = mid;
    }
    return (lo + hi) / 2;
}

/* Replaces y (m values) by the normal scores of their ranks (ties share their
 * mean rank), so that a few very bad trials (a diverged run) do not flatten the
 * GP's picture of the good region: the search cares about order, not scale. */
static void warp_ranks(double *y, int m)
{
    double *z = malloc(sizeof(double) * m);
    if (!z)
        return;
    for (int a = 0; a < m; a++) {
        int below = 0, same = 0;
        for (int b = 0; b < m; b++) {
            below += y[b] < y[a];
            same += y[b] == y[a];
        }
        z[a] = probit((below + (same - 1) / 2.0 + 0.5) / m);
    }
    memcpy(y, z, sizeof(double) * m);
    free(z);
}

static int same_point(const double *a, const double *b, int d)
{
    for (int k = 0; k < d; k++)
        if (fabs(a[k] - b[k]) > 1e-9)
            return 0;
    return 1;
}

/* How many random trials come first: enough for the GP's fit to mean something,
 * few enough to leave the budget to the model. */
static int initial_trials(int d)
{
    return d + 1;
}

/* A last look closer around the chosen point u (EI top there) on the real
 * dimensions: REFINE perturbations of a fiftieth of the cube, kept if better.
 * cand, mu and var are scratch of at least REFINE points. */
static void refine(const tune_space *s, const tune_gp *g, uint64_t seed, long i, double best,
                   double top, double *u, double *cand, double *mu, double *var)
{
    int d = s->dims, real = 0;
    for (int k = 0; k < d; k++)
        real += levels_of(s, k) == 0;
    if (!real)
        return;
    for (int c = 0; c < REFINE; c++)
        for (int k = 0; k < d; k++) {
            double z = suggest_uniform(seed, (uint64_t)i, 7000 + (uint64_t)c * 16 + k) - 0.5;
            double v = u[k] + (levels_of(s, k) == 0 ? 0.04 * z : 0);
            cand[(size_t)c * d + k] = v < 0 ? 0 : v > 1 ? 1 : v;
        }
    if (gp_predict_many(g, REFINE, cand, mu, var) < 0)
        return;
    for (int c = 0; c < REFINE; c++) {
        double ei = gp_ei(mu[c], sqrt(var[c]), best);
        if (ei > top) {
            top = ei;
            memcpy(u, cand + (size_t)c * d, sizeof(double) * d);
        }
    }
}

static int gp_point(const tune_space *s, uint64_t seed, long i, const suggest_obs *obs,
                    double *u)
{
    int d = s->dims, n = obs->n, seen = 0;
    for (int k = 0; k < n; k++)
        seen += !isnan(obs->y[k]);
    if (seen < initial_trials(d) || seen < 2) {
        random_point(s, seed, i, u);
        /* a discrete space's point that ran or runs is drawn again */
        for (int a = 1, dup = 1; dup && a < 64; a++) {
            space_snap(s, u);
            dup = 0;
            for (int k = 0; k < n && !dup; k++)
                dup = same_point(u, obs->x + k * d, d);
            for (int k = 0; dup && k < d; k++)
                u[k] = suggest_uniform(seed, (uint64_t)i, 64 * (uint64_t)a + k);
        }
        return 0;
    }
    long enumerate = discrete_size(s, CANDIDATES + LOCAL);
    int nc = enumerate > 0 ? (int)enumerate : CANDIDATES + LOCAL;
    double *x = malloc(sizeof(double) * n * d), *y = malloc(sizeof(double) * n);
    double *cand = malloc(sizeof(double) * nc * d), *mu = malloc(sizeof(double) * nc);
    double *var = malloc(sizeof(double) * nc);
    tune_gp *g = NULL;
    int rc = 0;
    if (!x || !y || !cand || !mu || !var) {
        rc = -PSKV_ENOMEM;
        goto out;
    }
    int m = 0, inc = -1;
    for (int k = 0; k < n; k++)
        if (!isnan(obs->y[k])) {
            memcpy(x + m * d, obs->x + k * d, sizeof(double) * d);
            y[m] = obs->y[k];
            if (inc < 0 || y[m] > y[inc])
                inc = m;
            m++;
        }
    warp_ranks(y, m);
    double best = y[inc];
    g = gp_new(m, d, x, y, 0, 0, 0);
    if (g && m < n) { /* kriging believer: the pending at the GP's mean */
        double v;
        for (int k = 0; k < n; k++)
            if (isnan(obs->y[k])) {
                memcpy(x + m * d, obs->x + k * d, sizeof(double) * d);
                gp_predict(g, x + m * d, &y[m], &v);
                m++;
            }
        gp_destroy(&g);
        g = gp_new(m, d, x, y, 0, 0, 0);
    }
    if (!g) { /* a factor that failed: fall back to a random point */
        random_point(s, seed, i, u);
        goto out;
    }
    uint64_t off = (uint64_t)(suggest_uniform(seed, (uint64_t)i, 99) * 100000);
    for (int c = 0; c < nc; c++) {
        double *cd = cand + (size_t)c * d;
        if (enumerate > 0) { /* every point of a small discrete space */
            long r = c;
            for (int k = d - 1; k >= 0; k--) {
                int lv = levels_of(s, k);
                cd[k] = (r % lv + 0.5) / lv;
                r /= lv;
            }
            continue;
        }
        for (int k = 0; k < d; k++) {
            if (c < CANDIDATES)
                cd[k] = halton(off + (uint64_t)c + 1, primes[k]);
            else { /* around the incumbent, a neighbouring level for discrete ones */
                int lv = levels_of(s, k);
                double w = lv > 0 && 2.0 / lv > 0.1 ? 2.0 / lv : 0.1;
                double z = suggest_uniform(seed, (uint64_t)i, 1000 + (uint64_t)c * 16 + k) - 0.5;
                cd[k] = x[inc * d + k] + w * z;
                cd[k] = cd[k] < 0 ? 0 : cd[k] > 1 ? 1 : cd[k];
            }
        }
        space_snap(s, cd);
    }
    if (gp_predict_many(g, nc, cand, mu, var) < 0) {
        rc = -PSKV_ENOMEM;
        goto out;
    }
    double top = -1, topany = -1;
    int pick = -1, pickany = 0;
    for (int c = 0; c < nc; c++) {
        double ei = gp_ei(mu[c], sqrt(var[c]), best);
        if (ei > topany) {
            topany = ei;
            pickany = c;
        }
        if (ei <= top)
            continue;
        int dup = 0; /* a point that ran or runs teaches nothing new */
        for (int k = 0; k < n && !dup; k++)
            dup = same_point(cand + (size_t)c * d, obs->x + k * d, d);
        if (!dup) {
            top = ei;
            pick = c;
        }
    }
    memcpy(u, cand + (size_t)(pick >= 0 ? pick : pickany) * d, sizeof(double) * d);
    if (enumerate == 0 && pick >= 0)
        refine(s, g, seed, i, best, top, u, cand, mu, var);
out:
    gp_destroy(&g);
    free(x), free(y), free(cand), free(mu), free(var);
    return rc;
}

int suggest_point(const tune_space *s, suggest_algo a, uint64_t seed, long i, int levels,
                  const suggest_obs *obs, double *u)
{
    int rc = 0;
    if (a == ALGO_GRID)
        rc = grid(s, seed, i, levels, u);
    else if (a == ALGO_RANDOM)
        random_point(s, seed, i, u);
    else
        rc = gp_point(s, seed, i, obs, u);
    if (rc == 0)
        space_snap(s, u);
    return rc;
}
