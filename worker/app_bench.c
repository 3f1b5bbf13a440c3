/* --app bench: push/pull step time for one value size on a dense table.
 *   serial:    push, wait for its ack, then pull, wait
 *   pipelined: push and pull of the same keys back to back, one wait for both
 *              (the pull is sent after the push on the same connection, so the
 *              server applies the push first and the pull sees it)
 * Prints one line per run and a summary line per mode:
 *   bench size=BYTES mode=M step_us=MEDIAN GBps=G runs=R steps=N */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps.h"
#include "timeutil.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int step(pskv_worker *w, int t, uint64_t n, const float *g, float *out, int pipelined)
{
    int64_t tp = pskv_push(w, t, NULL, n, g);
    if (tp < 0)
        return (int)tp;
    int rc;
    if (!pipelined && (rc = pskv_wait(w, tp, 30000)) < 0)
        return rc;
    int64_t tl = pskv_pull(w, t, NULL, n, out);
    if (tl < 0)
        return (int)tl;
    if (pipelined && (rc = pskv_wait(w, tp, 30000)) < 0)
        return rc;
    return pskv_wait(w, tl, 30000);
}

int app_bench(pskv_worker *w, cfg_entry *cfg)
{
    uint64_t size = (uint64_t)cfg_int(cfg, "size");
    if (size % 4) {
        fprintf(stderr, "pskv-worker: --size must be a multiple of 4\n");
        return 2;
    }
    const char *mode = cfg_str(cfg, "mode");
    int do_serial = !strcmp(mode, "serial") || !strcmp(mode, "both");
    int do_pipe = !strcmp(mode, "pipelined") || !strcmp(mode, "both");
    if (!do_serial && !do_pipe) {
        fprintf(stderr, "pskv-worker: --mode must be serial, pipelined or both\n");
        return 2;
    }
    uint64_t floats = size / 4;
    uint32_t width = floats % 256 == 0 ? 256 : 1;
    uint64_t n = floats / width;
    int runs = (int)cfg_int(cfg, "runs"), warm = (int)cfg_int(cfg, "warmup");
    long steps = (long)cfg_int(cfg, "steps");
    if (steps == 0) {
        steps = (long)(300000000.0 / (double)(size + 20000));
        if (steps < 20)
            steps = 20;
        if (steps > 5000)
            steps = 5000;
    }
    char name[64];
    snprintf(name, sizeof name, "bench.%llu", (unsigned long long)size);
    pskv_table_opts o;
    pskv_table_opts_init(&o);
    o.kind = PSKV_DENSE;
    o.size = n;
    o.width = width;
    o.updater = "sgd";
    o.lr = 1e-4f;
    int t = pskv_table_open(w, name, &o);
    if (t < 0) {
        fprintf(stderr, "bench: cannot open table: %s (%s)\n", pskv_strerror(t), pskv_last_error(w));
        return 1;
    }
    float *g = malloc(floats * sizeof(float)), *out = malloc(floats * sizeof(float));
    double *per_run = malloc((size_t)runs * sizeof(double));
    if (!g || !out || !per_run)
        return 1;
    for (uint64_t i = 0; i < floats; i++)
        g[i] = 1e-3f * (float)(i % 17);
    for (int pipelined = 0; pipelined < 2; pipelined++) {
        if ((pipelined && !do_pipe) || (!pipelined && !do_serial))
            continue;
        const char *mname = pipelined ? "pipelined" : "serial";
        for (int r = 0; r < runs; r++) {
            for (int s = 0; s < warm; s++)
                if (step(w, t, n, g, out, pipelined) < 0)
                    goto failed;
            int64_t t0 = tu_now_ns();
            for (long s = 0; s < steps; s++) {
                if (app_stop_signal) {
                    free(g);
                    free(out);
                    free(per_run);
                    return app_stopped("bench");
                }
                if (step(w, t, n, g, out, pipelined) < 0)
                    goto failed;
            }
            per_run[r] = (double)(tu_now_ns() - t0) / 1000.0 / (double)steps;
            printf("bench run=%d size=%llu mode=%s step_us=%.1f\n", r, (unsigned long long)size,
                   mname, per_run[r]);
        }
        double us = median(per_run, runs);
        printf("bench size=%llu mode=%s step_us=%.1f GBps=%.3f runs=%d steps=%ld\n",
               (unsigned long long)size, mname, us, 2.0 * (double)size / (us * 1000.0), runs, steps);
        fflush(stdout);
    }
    free(g);
    free(out);
    free(per_run);
    return 0;
failed:
    fprintf(stderr, "bench: step failed: %s\n", pskv_last_error(w));
    free(g);
    free(out);
    free(per_run);
    return 1;
}
