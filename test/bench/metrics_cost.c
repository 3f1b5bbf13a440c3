/* pskv-metrics-cost [--reps N]: what the metrics cost, measured apart from the
 * noise of a whole push+pull run: the time of one counter update
 * (metrics_add) and one histogram observation (metrics_observe) on the calling
 * thread, each the median of 9 batches of N, and the time to render the text of
 * a registry the size of a server's with two tables (what one scrape costs the
 * endpoint's thread), the median of 101 renders. Prints one line:
 *   metrics add_ns=... observe_ns=... render_us=... render_bytes=...
 * Per 4 KiB push+pull step a worker makes 6 updates and 2 observations, a
 * server 6 and 1 (docs/benchmarks.md has the arithmetic). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "timeutil.h"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

int main(int argc, char **argv)
{
    long reps = 1000000;
    if (argc == 3 && !strcmp(argv[1], "--reps"))
        reps = atol(argv[2]);
    else if (argc != 1) {
        fprintf(stderr, "usage: pskv-metrics-cost [--reps N]\n");
        return 2;
    }
    if (reps < 1) {
        fprintf(stderr, "pskv-metrics-cost: --reps must be at least 1\n");
        return 2;
    }
    metrics_identity("server", 1, 0);
    static const char *const names[] = {"pskv_a_total", "pskv_b_total", "pskv_c_total",
                                         "pskv_d_total", "pskv_e_total", "pskv_f_total",
                                         "pskv_g"};
    met_series *s = NULL, *h = NULL;
    for (int t = 0; t < 2; t++) {
        const char *table = t ? "model.w" : "model.b";
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            s = metrics_series(names[i], strcmp(names[i], "pskv_g") ? MET_COUNTER : MET_GAUGE,
                               "Help.", "table", table);
        h = metrics_series("pskv_h_seconds", MET_HISTOGRAM, "Help.", "table", table);
    }
    double add[9], obs[9], ren[101];
    for (int b = 0; b < 9; b++) {
        int64_t t0 = tu_now_ns();
        for (long i = 0; i < reps; i++)
            metrics_add(s, 1);
        add[b] = (double)(tu_now_ns() - t0) / (double)reps;
        t0 = tu_now_ns();
        for (long i = 0; i < reps; i++)
            metrics_observe(h, 1e-4 * (double)(i & 1023));
        obs[b] = (double)(tu_now_ns() - t0) / (double)reps;
    }
    size_t len = 0;
    for (int b = 0; b < 101; b++) {
        int64_t t0 = tu_now_ns();
        free(metrics_render(&len));
        ren[b] = (double)(tu_now_ns() - t0) / 1e3;
    }
    printf("metrics add_ns=%.1f observe_ns=%.1f render_us=%.1f render_bytes=%zu\n",
           median(add, 9), median(obs, 9), median(ren, 101), len);
    metrics_stop();
    return 0;
}
