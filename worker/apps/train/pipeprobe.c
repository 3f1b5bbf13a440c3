/* pipeprobe: --suggest-split's per-layer times and suggestion (contract in
 * pipeprobe.h). */
#define _POSIX_C_SOURCE 200809L
#include "pipeprobe.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model.h"
#include "pipesched.h"

/* The calling thread's CPU time in ns: what a layer costs, without the time a
 * loaded machine keeps the thread off its core (not a timer: timers use
 * CLOCK_MONOTONIC). */
static int64_t cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One step: every layer forward then every layer backward, each layer's
 * milliseconds into t[l]. */
static void one_step(const int *sizes, int L, float *const *p, float *const *g, float *const *y,
                     float *const *dy, const float *x, const float *ones, int rows,
                     int recompute, double *t)
{
    for (int l = 0; l < L; l++) {
        int64_t t0 = cpu_ns();
        model_dense_fwd(p[l], sizes[l], sizes[l + 1], l ? y[l - 1] : x, rows, l < L - 1, y[l]);
        t[l] = (double)(cpu_ns() - t0) / 1e6;
    }
    memcpy(dy[L - 1], y[L - 1], (size_t)rows * (size_t)sizes[L] * sizeof(float));
    for (int l = L - 1; l >= 0; l--) {
        int64_t t0 = cpu_ns();
        if (recompute)
            model_dense_fwd(p[l], sizes[l], sizes[l + 1], l ? y[l - 1] : x, rows, l < L - 1,
                            y[l]);
        model_dense_bwd(p[l], sizes[l], sizes[l + 1], l ? y[l - 1] : x, y[l], dy[l], rows,
                        l < L - 1, ones, g[l], 1, l ? dy[l - 1] : NULL);
        t[l] += (double)(cpu_ns() - t0) / 1e6;
    }
}

int pipeprobe_layers(const int *sizes, int nl, const float *x, int rows, int steps,
                     int recompute, double *ms)
{
    int L = nl - 1, rc = 0;
    float *p[PIPE_MAX_LAYERS] = {0}, *g[PIPE_MAX_LAYERS] = {0};
    float *y[PIPE_MAX_LAYERS] = {0}, *dy[PIPE_MAX_LAYERS] = {0};
    float *ones = malloc((size_t)rows * sizeof(float));
    double *t = malloc((size_t)(steps + 1) * (size_t)L * sizeof(double));
    uint64_t seed = 88172645463325252ULL;
    for (int l = 0; l < L && ones && t; l++) {
        size_t np = (size_t)sizes[l] * sizes[l + 1] + sizes[l + 1];
        size_t na = (size_t)rows * (size_t)sizes[l + 1];
        p[l] = malloc(np * sizeof(float));
        g[l] = calloc(np, sizeof(float));
        y[l] = malloc(na * sizeof(float));
        dy[l] = malloc(na * sizeof(float));
        if (!p[l] || !g[l] || !y[l] || !dy[l])
            break;
        for (size_t i = 0; i < np; i++) { /* xorshift: small weights of both signs */
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            p[l][i] = (float)((double)(seed >> 40) / (double)(1 << 24) - 0.5) * 0.05f;
        }
    }
    if (!ones || !t || !dy[L - 1]) {
        rc = -1;
    } else {
        for (int r = 0; r < rows; r++)
            ones[r] = 1.0f;
        for (int s = 0; s <= steps; s++) /* step 0 warms the caches, not counted */
            one_step(sizes, L, p, g, y, dy, x, ones, rows, recompute, t + (size_t)s * L);
        double col[64];
        int n = steps < 64 ? steps : 64;
        for (int l = 0; l < L; l++) {
            for (int s = 0; s < n; s++)
                col[s] = t[(size_t)(s + 1) * L + l];
            qsort(col, (size_t)n, sizeof col[0], cmp_double);
            ms[l] = n ? col[n / 2] : 0;
        }
    }
    for (int l = 0; l < L; l++) {
        free(p[l]);
        free(g[l]);
        free(y[l]);
        free(dy[l]);
    }
    free(ones);
    free(t);
    return rc;
}

/* Each stage's milliseconds under the cut first[] of layers costing ms[], on one
 * line after `what`. */
static void print_stages(const char *what, const double *ms, const int *first, int S)
{
    double worst = 0;
    printf("pipeline: per stage under %s:", what);
    for (int k = 0; k < S; k++) {
        double t = 0;
        for (int l = first[k]; l < first[k + 1]; l++)
            t += ms[l];
        worst = t > worst ? t : worst;
        printf(" %.3f", t);
    }
    printf(" ms per micro-batch (slowest %.3f)\n", worst);
}

int pipeprobe_suggest(const int *sizes, int nl, int S, const int *first, int rows, int recompute,
                      int split_given)
{
    int L = nl - 1, best[PIPE_MAX_LAYERS + 1];
    float *x = malloc((size_t)rows * (size_t)sizes[0] * sizeof(float));
    double ms[PIPE_MAX_LAYERS];
    if (!x)
        return -1;
    for (size_t i = 0; i < (size_t)rows * (size_t)sizes[0]; i++)
        x[i] = (float)(i * 2654435761u % 1000) / 1000.0f; /* pixel-like values in [0, 1) */
    int rc = pipeprobe_layers(sizes, nl, x, rows, 7, recompute, ms);
    free(x);
    if (rc < 0)
        return -1;
    for (int l = 0; l < L; l++)
        printf("pipeline: layer %d (%d x %d): %.3f ms per micro-batch of %d rows, forward and "
               "backward%s\n", l, sizes[l], sizes[l + 1], ms[l], rows,
               recompute ? " and the recomputation" : "");
    pipesched_cut(ms, L, S, best);
    print_stages("the suggested split", ms, best, S);
    print_stages(split_given ? "--split" : "the cut balancing parameters", ms, first, S);
    printf("suggested split: ");
    for (int k = 0; k < S; k++)
        printf("%s%d", k ? "," : "", best[k + 1] - best[k]);
    printf("\n");
    fflush(stdout);
    return 0;
}
