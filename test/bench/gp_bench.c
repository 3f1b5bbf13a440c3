#define _POSIX_C_SOURCE 200809L
/* pskv-gp-bench: the time of one GP suggestion (scheduler/tune/suggest.c: fit by
 * marginal likelihood, then expected improvement over 1,200 candidates) at N
 * observations in D dimensions, the target being <= 50 ms at 200 x 6.
 *   pskv-gp-bench [N [D [REPEATS]]]
 * Prints the median and the worst wall time of REPEATS suggestions and the
 * median CPU time (the machine is shared: CPU time is what the tuner costs). One thread of
 * OpenBLAS is what a tuner beside its trials should use: OPENBLAS_NUM_THREADS=1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "timeutil.h"
#include "tune/space.h"
#include "tune/suggest.h"

static int know(const char *flag, const char *value, char *why, size_t len)
{
    (void)flag, (void)value, (void)why, (void)len;
    return 0;
}

/* CPU time of this process in ms: the machine is shared, wall time is not ours. */
static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 200, d = argc > 2 ? atoi(argv[2]) : 6;
    int reps = argc > 3 ? atoi(argv[3]) : 5;
    if (n < 1 || d < 1 || d > SPACE_MAX_DIMS || reps < 1 || reps > 1000) {
        fprintf(stderr, "usage: pskv-gp-bench [N [D (1..16) [REPEATS (1..1000)]]]\n");
        return 2;
    }
    char text[2048] = "", err[256];
    size_t used = 0;
    for (int k = 0; k < d; k++)
        used += (size_t)snprintf(text + used, sizeof text - used, "--x%d uniform 0 1\n", k);
    tune_space s;
    if (space_parse(&s, text, know, err, sizeof err) < 0) {
        fprintf(stderr, "pskv-gp-bench: %s\n", err);
        return 1;
    }
    double *x = malloc(sizeof(double) * n * d), *y = malloc(sizeof(double) * n);
    double *ms = malloc(sizeof(double) * reps), *cpu = malloc(sizeof(double) * reps);
    double u[SPACE_MAX_DIMS];
    if (!x || !y || !ms || !cpu)
        return 1;
    for (int i = 0; i < n; i++) { /* a smooth objective with an optimum inside */
        double f = 0;
        for (int k = 0; k < d; k++) {
            x[i * d + k] = suggest_uniform(3, (uint64_t)i, (uint64_t)k);
            f -= (x[i * d + k] - 0.3) * (x[i * d + k] - 0.3);
        }
        y[i] = f + 0.01 * sin(17.0 * i);
    }
    suggest_obs obs = {n, x, y};
    for (int r = 0; r < reps; r++) {
        int64_t t0 = tu_now_us();
        double c0 = cpu_ms();
        if (suggest_point(&s, ALGO_GP, 1, n + r, 3, &obs, u) != 0)
            return 1;
        cpu[r] = cpu_ms() - c0;
        ms[r] = (tu_now_us() - t0) / 1000.0;
    }
    qsort(ms, reps, sizeof ms[0], cmp);
    qsort(cpu, reps, sizeof cpu[0], cmp);
    printf("gp suggestion, %d observations x %d dims: wall median %.1f ms, worst %.1f ms; "
           "cpu median %.1f ms (%d runs)\n",
           n, d, ms[reps / 2], ms[reps - 1], cpu[reps / 2], reps);
    space_free(&s);
    free(x), free(y), free(ms), free(cpu);
    return 0;
}
