/* pipesched: stage cuts and pass orders (contract in pipesched.h). */
#include "pipesched.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"

int pipesched_layers(const char *s, int *sizes, char *why, size_t whylen)
{
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 1 || v > 65536 || (*end && *end != ',') ||
            (*end == ',' && !end[1]) || n == PIPE_MAX_LAYERS) {
            snprintf(why, whylen, "--layers must be 2 to %d sizes 1..65536 separated by commas "
                     "(got '%s')", PIPE_MAX_LAYERS, s);
            return -1;
        }
        sizes[n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    if (n < 2) {
        snprintf(why, whylen, "--layers needs at least two sizes (got '%s')", s);
        return -1;
    }
    return n;
}

static double layer_params(const int *sizes, int l)
{
    return (double)sizes[l] * sizes[l + 1] + sizes[l + 1];
}

/* Dynamic programming over (stages, layers) minimising the largest stage's
 * summed cost times its factor; ties keep earlier stages smaller. */
void pipesched_cut_speed(const double *cost, int L, int S, const double *factor, int *first)
{
    double best[PIPE_MAX_LAYERS + 1][PIPE_MAX_LAYERS + 1];
    int cut[PIPE_MAX_LAYERS + 1][PIPE_MAX_LAYERS + 1];
    double pre[PIPE_MAX_LAYERS + 1] = {0};
    for (int l = 0; l < L; l++)
        pre[l + 1] = pre[l] + cost[l];
    for (int j = 1; j <= L; j++) {
        best[1][j] = pre[j] * (factor ? factor[0] : 1);
        cut[1][j] = 0;
    }
    for (int s = 2; s <= S; s++)
        for (int j = s; j <= L; j++) {
            best[s][j] = -1;
            for (int c = s - 1; c < j; c++) {
                double last = (pre[j] - pre[c]) * (factor ? factor[s - 1] : 1);
                double v = best[s - 1][c] > last ? best[s - 1][c] : last;
                if (best[s][j] < 0 || v < best[s][j]) {
                    best[s][j] = v;
                    cut[s][j] = c;
                }
            }
        }
    first[S] = L;
    for (int s = S, j = L; s >= 1; s--) {
        first[s - 1] = cut[s][j];
        j = cut[s][j];
    }
}

void pipesched_cut(const double *cost, int L, int S, int *first)
{
    pipesched_cut_speed(cost, L, S, NULL, first);
}

int pipesched_split(const int *sizes, int nl, int S, const char *split, int *first, char *why,
                    size_t whylen)
{
    int L = nl - 1;
    if (S < 1 || S > L) {
        snprintf(why, whylen, "--stages must be 1..%d (the layers in --layers; got %d)", L, S);
        return -1;
    }
    if (!*split) {
        double cost[PIPE_MAX_LAYERS];
        for (int l = 0; l < L; l++)
            cost[l] = layer_params(sizes, l);
        pipesched_cut(cost, L, S, first);
        return 0;
    }
    const char *p = split;
    int k = 0, at = 0;
    first[0] = 0;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || (*end && *end != ',') || (*end == ',' && !end[1]) || k == S ||
            at + v > L) {
            k = -1;
            break;
        }
        at += (int)v;
        first[++k] = at;
        p = *end ? end + 1 : end;
    }
    if (k != S || at != L) {
        snprintf(why, whylen, "--split '%s' must give %d stages at least one layer each, %d "
                 "layers in all (--layers has %d)", split, S, L, L);
        return -1;
    }
    return 0;
}

int pipesched_ops(const char *schedule, int S, int k, int M, int bound, pipe_op *ops)
{
    int n = 0;
    if (!strcmp(schedule, "sequential")) {
        for (int i = 0; i < M; i++) {
            ops[n++] = (pipe_op){1, i};
            ops[n++] = (pipe_op){0, i};
        }
        return 1;
    }
    if (!strcmp(schedule, "gpipe")) {
        /* GPipe holds every micro-batch; a bound below M runs them in groups of
         * `bound`, each all forward then all backward */
        int g = bound < M ? bound : M;
        for (int s0 = 0; s0 < M; s0 += g) {
            int e = s0 + g < M ? s0 + g : M;
            for (int i = s0; i < e; i++)
                ops[n++] = (pipe_op){1, i};
            for (int i = s0; i < e; i++)
                ops[n++] = (pipe_op){0, i};
        }
        return g;
    }
    if (strcmp(schedule, "1f1b"))
        return -1;
    /* PipeDream-flush: warm up with up to S-k-1 forwards (fewer when the bound
     * says so), then one forward and one backward in turn, then the rest back */
    int cap = S - k < bound ? S - k : bound;
    if (cap > M)
        cap = M;
    int f = 0, b = 0;
    for (; f < cap - 1; f++)
        ops[n++] = (pipe_op){1, f};
    for (; f < M; f++, b++) {
        ops[n++] = (pipe_op){1, f};
        ops[n++] = (pipe_op){0, b};
    }
    for (; b < M; b++)
        ops[n++] = (pipe_op){0, b};
    return cap;
}

void pipesched_init(const int *sizes, int l0, int l1, uint64_t seed, float *params)
{
    uint64_t first = 0; /* index of layer l0's first parameter in the whole model */
    for (int l = 0; l < l0; l++)
        first += (uint64_t)sizes[l] * (uint64_t)sizes[l + 1] + (uint64_t)sizes[l + 1];
    double bound = 1.0 / sqrt((double)sizes[0]);
    size_t n = 0;
    for (int l = l0; l < l1; l++)
        n += (size_t)sizes[l] * (size_t)sizes[l + 1] + (size_t)sizes[l + 1];
    uint64_t s = ring_mix64(seed ^ 0x70697065ULL); /* "pipe": not the servers' draws */
    for (size_t j = 0; j < n; j++) {
        uint64_t h = ring_mix64(s + ring_mix64(first + j));
        double u = (double)(h >> 11) * (1.0 / 9007199254740992.0); /* [0, 1) */
        params[j] = (float)((2.0 * u - 1.0) * bound);
    }
}
