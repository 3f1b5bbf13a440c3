/* --app bench: push/pull step time for one value size on a dense table.
 * Pushes go without a copy (pskv_push_nocopy, pskv_pushpull with PSKV_PP_NOCOPY:
 * the values array is the same every step and waited for), or with --push copy
 * through pskv_push (pskv_pushpull without the flag). Pulls go into the app's
 * array, or with --pull view into the library's memory (pskv_pull_view, pskv_pushpull
 * with PSKV_PP_VIEW: over TCP read in the received frame), released each step.
 *   serial:    push, wait for its ack, then pull, wait
 *   pipelined: push and pull of the same keys back to back, one wait for both
 *              (the pull is sent after the push on the same connection, so the
 *              server applies the push first and the pull sees it)
 *   stream:    (only with --mode stream) pushes alone, 16 in flight, each step
 *              waiting for the push 16 steps back; GBps counts one direction
 * With --gate, each run of a mode waits for a line on stdin first (end of input
 * ends the bench; no line in GATE_TIMEOUT_MS fails it): python/bench/pushpull.py
 * alternates C and Python runs on one cluster that way, each run's line read as it
 * is printed.
 * With --baseline PROGRAM (pskv-zmq-rtt), the raw ZeroMQ round trip is measured
 * before every run, so each run has a baseline taken moments before it: on a
 * shared, noisy machine a slow second then lands on both sides of a ratio
 * instead of on one. Runs of the two modes alternate for the same reason. The
 * baseline runs with --own-io: each side in its own ZeroMQ context, as a worker and
 * a server in two processes are (sharing one I/O thread, the default echo skips a
 * hop pskv cannot, and at some sizes stalls: docs/benchmarks.md, issue 38's
 * small-message sitting). With --keys (CURVE), it runs with --curve instead (which
 * gives each side its own context too): the crypto floor.
 * Prints one line per run and a summary line per mode:
 *   bench size=BYTES mode=M step_us=MEDIAN GBps=G runs=R steps=N
 * plus, with a baseline, zmq_rtt_us=MEDIAN ratio=R (the median over runs of the
 * run's round trip over its step: 1.0 = as fast as raw ZeroMQ). */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps.h"
#include "timeutil.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double app_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Runs the baseline program for `size` bytes; its median round trip in us, or -1
 * (with a message) when it fails. */
static double baseline_us(const char *prog, uint64_t size, int curve)
{
    char cmd[4200];
    if (strchr(prog, '\'') || strlen(prog) > 4000) {
        fprintf(stderr, "bench: --baseline: path too long or contains a quote: %s\n", prog);
        return -1;
    }
    snprintf(cmd, sizeof cmd, "'%s' --size %llu%s", prog, (unsigned long long)size,
             curve ? " --curve" : " --own-io");
    FILE *p = popen(cmd, "r");
    if (!p) {
        fprintf(stderr, "bench: cannot run the baseline %s: %s\n", prog, strerror(errno));
        return -1;
    }
    char line[512];
    double us = -1;
    while (fgets(line, sizeof line, p)) {
        const char *m = strstr(line, "median_us=");
        if (m)
            us = strtod(m + 10, NULL);
    }
    int st = pclose(p);
    if (st != 0 || us <= 0) {
        fprintf(stderr, "bench: baseline '%s' failed (status %d, no median_us)\n", cmd, st);
        return -1;
    }
    return us;
}

enum { SERIAL, PIPELINED, STREAM, PUSHPULL, NMODES };
static const char *const mode_names[NMODES] = {"serial", "pipelined", "stream", "pushpull"};
#define STREAM_DEPTH 16 /* pushes in flight in the stream mode */

/* How long the bench waits for a request: as long as the request may live
 * (--request-timeout, after which it fails by itself), at least 30 s. */
static int wait_ms = 30000;

/* --gate: how long the bench waits for its driver's next line */
#define GATE_TIMEOUT_MS (600 * 1000)

/* --gate: reads one line from stdin (no stdio buffer: poll sees every byte not
 * yet read), polling in slices so that a stop signal ends the wait. Returns 1 for
 * a line, 0 at the end of input or on a stop signal, or -1 when none came within
 * GATE_TIMEOUT_MS (said on stderr). */
static int gate_line(void)
{
    int64_t deadline = tu_now_ms() + GATE_TIMEOUT_MS;
    for (;;) {
        if (app_stop_signal)
            return 0;
        int64_t left = deadline - tu_now_ms();
        if (left <= 0) {
            fprintf(stderr, "bench: --gate: no line on stdin in %d s\n", GATE_TIMEOUT_MS / 1000);
            return -1;
        }
        struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
        int n = poll(&p, 1, left < 200 ? (int)left : 200);
        if (n < 0 && errno != EINTR)
            return 0;
        if (n <= 0)
            continue;
        char c;
        ssize_t got = read(STDIN_FILENO, &c, 1);
        if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN))
            return 0;
        if (got == 1 && c == '\n')
            return 1;
    }
}

static int pull_view; /* --pull view: pulls into views, released each step */

/* Waits for pull (or pushpull) tl; a view's memory goes back at once. */
static int wait_pull(pskv_worker *w, int64_t tl)
{
    int rc = tl < 0 ? (int)tl : pskv_wait(w, tl, wait_ms);
    if (rc < 0 || !pull_view)
        return rc;
    return pskv_view(w, tl) ? pskv_view_release(w, tl) : -PSKV_EPROTO;
}

/* One step of mode m; stream keeps the last STREAM_DEPTH pushes in *ring. */
static int step(pskv_worker *w, int t, uint64_t n, const float *g, float *out, int m, int copy,
                int64_t *ring, long s)
{
    int rc;
    if (m == PUSHPULL) /* one round trip: the push (lent as the others') and the rows */
        return wait_pull(w, pskv_pushpull(w, t, NULL, n, g, pull_view ? NULL : out,
                                          (copy ? 0 : PSKV_PP_NOCOPY) |
                                              (pull_view ? PSKV_PP_VIEW : 0)));
    if (m == STREAM && ring[s % STREAM_DEPTH] > 0 &&
        (rc = pskv_wait(w, ring[s % STREAM_DEPTH], wait_ms)) < 0)
        return rc;
    int64_t tp = copy ? pskv_push(w, t, NULL, n, g) : pskv_push_nocopy(w, t, NULL, n, g);
    if (tp < 0)
        return (int)tp;
    if (m == STREAM) {
        ring[s % STREAM_DEPTH] = tp;
        return 0;
    }
    int pipelined = m == PIPELINED;
    if (!pipelined && (rc = pskv_wait(w, tp, wait_ms)) < 0)
        return rc;
    int64_t tl = pull_view ? pskv_pull_view(w, t, NULL, n) : pskv_pull(w, t, NULL, n, out);
    if (tl < 0)
        return (int)tl;
    if (pipelined && (rc = pskv_wait(w, tp, wait_ms)) < 0)
        return rc;
    return wait_pull(w, tl);
}

/* The summary line of each mode that ran: the median step over the runs and,
 * with a baseline, the median round trip and ratio. per_run holds each mode's
 * steps (runs each), then scratch, then each run's round trip; sorts them in place. */
static void summarize(uint64_t size, const int *on, double *per_run, int runs, long steps,
                      const char *push, int baseline)
{
    double *rtt = per_run + (NMODES + 1) * runs;
    for (int m = 0; m < NMODES; m++) {
        if (!on[m])
            continue;
        double *v = per_run + m * runs, *q = per_run + NMODES * runs;
        for (int r = 0; r < runs; r++)
            q[r] = baseline ? rtt[r] / v[r] : 0;
        double ratio = app_median(q, runs), us = app_median(v, runs);
        /* bytes moved per step: a push and a pull, or (stream) a push */
        double moved = (m == STREAM ? 1.0 : 2.0) * (double)size;
        printf("bench size=%llu mode=%s step_us=%.1f GBps=%.3f runs=%d steps=%ld push=%s",
               (unsigned long long)size, mode_names[m], us, moved / (us * 1000.0), runs, steps,
               push);
        if (baseline) {
            memcpy(q, rtt, (size_t)runs * sizeof *q);
            printf(" zmq_rtt_us=%.1f ratio=%.2f", app_median(q, runs), ratio);
        }
        printf("\n");
        fflush(stdout);
    }
}

int app_bench_flags(cfg_entry *cfg, const char *prog)
{
    const char *mode = cfg_str(cfg, "mode");
    if (cfg_int(cfg, "size") % 4 ||
        (strcmp(mode, "serial") && strcmp(mode, "pipelined") && strcmp(mode, "both") &&
         strcmp(mode, "stream") && strcmp(mode, "pushpull"))) {
        fprintf(stderr, "%s: bench needs --size a multiple of 4 and --mode serial, "
                        "pipelined, both, stream or pushpull\n", prog);
        return -1;
    }
    return 0;
}

int app_bench(pskv_worker *w, cfg_entry *cfg)
{
    if (!strcmp(cfg_str(cfg, "op"), "allreduce"))
        return app_allreduce_bench(w, cfg);
    /* --size, --mode and --push were checked before joining (worker_main) */
    uint64_t size = (uint64_t)cfg_int(cfg, "size");
    const char *mode = cfg_str(cfg, "mode"), *push = cfg_str(cfg, "push");
    int copy = !strcmp(push, "copy"), gate = (int)cfg_int(cfg, "gate");
    pull_view = !strcmp(cfg_str(cfg, "pull"), "view");
    int on[NMODES] = {!strcmp(mode, "serial") || !strcmp(mode, "both"),
                      !strcmp(mode, "pipelined") || !strcmp(mode, "both"),
                      !strcmp(mode, "stream"),
                      /* both: the combined call too, where it applies (pskv_pushpull) */
                      !strcmp(mode, "pushpull") ||
                          (!strcmp(mode, "both") && !*cfg_str(cfg, "filter") &&
                           !strcmp(cfg_str(cfg, "wire"), "fp32"))};
    uint64_t floats = size / 4;
    uint32_t width = floats % 256 == 0 ? 256 : 1;
    uint64_t n = floats / width;
    int runs = (int)cfg_int(cfg, "runs"), warm = (int)cfg_int(cfg, "warmup");
    long steps = (long)cfg_int(cfg, "steps");
    double request_s = cfg_double(cfg, "request-timeout"); /* at most 86400 */
    if (request_s * 1000 > wait_ms)
        wait_ms = (int)(request_s * 1000);
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
    o.filters = cfg_str(cfg, "filter");
    o.wire = cfg_str(cfg, "wire");
    int t = pskv_table_open(w, name, &o);
    if (t < 0) {
        fprintf(stderr, "bench: cannot open table: %s (%s)\n", pskv_strerror(t), pskv_last_error(w));
        return 1;
    }
    float *g = malloc(floats * sizeof(float)), *out = malloc(floats * sizeof(float));
    /* per_run: each mode's steps, then scratch, then each run's baseline (rtt) */
    double *per_run = malloc((size_t)runs * (NMODES + 2) * sizeof(double)),
           *rtt = per_run + (NMODES + 1) * runs;
    const char *base = cfg_str(cfg, "baseline");
    if (!g || !out || !per_run) {
        free(g);
        free(out);
        free(per_run);
        fprintf(stderr, "bench: out of memory for %llu-byte values\n", (unsigned long long)size);
        return 1;
    }
    for (uint64_t i = 0; i < floats; i++)
        g[i] = 1e-3f * (float)(i % 17);
    for (int r = 0; r < runs; r++) {
        if (*base) {
            rtt[r] = baseline_us(base, size, *cfg_str(cfg, "keys") != '\0');
            if (rtt[r] < 0)
                goto failed_quiet;
        }
        for (int m = 0; m < NMODES; m++) {
            if (!on[m])
                continue;
            int64_t ring[STREAM_DEPTH] = {0};
            int go = gate ? gate_line() : 1;
            if (go < 0)
                goto failed_quiet;
            if (go == 0) {
                free(g);
                free(out);
                free(per_run);
                return 0;
            }
            for (int s = 0; s < warm; s++)
                if (step(w, t, n, g, out, m, copy, ring, s) < 0)
                    goto failed;
            if (m == STREAM && pskv_wait_all(w, wait_ms) < 0)
                goto failed;
            memset(ring, 0, sizeof ring);
            int64_t t0 = tu_now_ns();
            for (long s = 0; s < steps; s++) {
                if (app_stop_signal) {
                    free(g);
                    free(out);
                    free(per_run);
                    return app_stopped("bench");
                }
                if (step(w, t, n, g, out, m, copy, ring, s) < 0)
                    goto failed;
            }
            if (m == STREAM && pskv_wait_all(w, wait_ms) < 0)
                goto failed;
            double us = (double)(tu_now_ns() - t0) / 1000.0 / (double)steps;
            per_run[m * runs + r] = us;
            printf("bench run=%d size=%llu mode=%s step_us=%.1f", r, (unsigned long long)size,
                   mode_names[m], us);
            if (*base)
                printf(" zmq_rtt_us=%.1f ratio=%.3f", rtt[r], rtt[r] / us);
            printf("\n");
            fflush(stdout);
        }
    }
    summarize(size, on, per_run, runs, steps, push, *base);
    free(g);
    free(out);
    free(per_run);
    return 0;
failed:
    fprintf(stderr, "bench: step failed: %s\n", pskv_last_error(w));
failed_quiet:
    /* a pipelined pull may still write into out, a no-copy push still lend g */
    app_free_after_close(g);
    app_free_after_close(out);
    free(per_run);
    return 1;
}
