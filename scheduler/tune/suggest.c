/* Search algorithms (suggest.h). */
#include "suggest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "pskv_errors.h"

#define CANDIDATES 1000
#define LOCAL 200

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

static int gp_point(const tune_space *s, uint64_t seed, long i, const suggest_obs *obs,
                    double *u)
{
    int d = s->dims, n = obs->n, seen = 0;
    for (int k = 0; k < n; k++)
        seen += !isnan(obs->y[k]);
    if (seen < 2 * d + 1 || seen < 2) {
        random_point(s, seed, i, u);
        return 0;
    }
    double *x = malloc(sizeof(double) * n * d), *y = malloc(sizeof(double) * n);
    double *cand = malloc(sizeof(double) * d);
    if (!x || !y || !cand) {
        free(x), free(y), free(cand);
        return -PSKV_ENOMEM;
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
    double best = y[inc];
    tune_gp *g = gp_new(m, d, x, y, 0, 0, 0);
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
        free(x), free(y), free(cand);
        return 0;
    }
    double top = -1;
    uint64_t off = (uint64_t)(suggest_uniform(seed, (uint64_t)i, 99) * 100000);
    for (int c = 0; c < CANDIDATES + LOCAL; c++) {
        for (int k = 0; k < d; k++) {
            if (c < CANDIDATES)
                cand[k] = halton(off + (uint64_t)c + 1, primes[k]);
            else { /* around the incumbent */
                double z = suggest_uniform(seed, (uint64_t)i, 1000 + (uint64_t)c * 16 + k) - 0.5;
                cand[k] = x[inc * d + k] + 0.1 * z;
                cand[k] = cand[k] < 0 ? 0 : cand[k] > 1 ? 1 : cand[k];
            }
        }
        space_snap(s, cand);
        double mu, var;
        gp_predict(g, cand, &mu, &var);
        double ei = gp_ei(mu, sqrt(var), best);
        if (ei > top) {
            top = ei;
            memcpy(u, cand, sizeof(double) * d);
        }
    }
    gp_destroy(&g);
    free(x), free(y), free(cand);
    return 0;
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
