/* pskv-table-open: one table of a worker group, opened with the options given (a
 * user's program, for the test of groups sharing a namespace: service.sh).
 *
 *   pskv-table-open --scheduler HOST:PORT --group G [--namespace NS] [--table NAME]
 *       [--kind dense|sparse] [--width N] [--updater U] [--consistency C]
 *       [--push V] [--hold FILE] [--expect X]
 *
 * Joins group G (of one worker) and opens table NAME (default t: 100 rows, keys
 * 0..99, width 1, updater sum, async). A refused open prints "table-open: open
 * refused: ERROR" (the servers' reason) and exits 1. With --push V it pushes V to
 * every value; with --hold FILE it then waits (up to 60 s) for FILE to exist and
 * pushes V once more; with --expect X every value pulled must be exactly X. Last
 * line "table-open ok: ..." and exit 0; a failure prints "table-open: ..." and
 * exits 1. Exit status 2: usage. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pskv.h"

#define ROWS 100
#define TMO 30000

static int failed(pskv_worker *w, const char *what)
{
    printf("table-open: %s: %s\n", what, pskv_last_error(w));
    return 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Pushes v to every value of table t and ends the clock; 0 or -1. */
static int push_all(pskv_worker *w, int t, const uint64_t *keys, float *vals, size_t n,
                    float v)
{
    for (size_t i = 0; i < n; i++)
        vals[i] = v;
    int64_t ts = pskv_push(w, t, keys, ROWS, vals);
    return ts < 0 || pskv_wait(w, ts, TMO) < 0 || pskv_clock(w) < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
    pskv_config cfg;
    pskv_config_init(&cfg);
    cfg.group_size = 1;
    cfg.connect_timeout_s = 10;
    cfg.join_timeout_s = 60;
    pskv_table_opts o;
    pskv_table_opts_init(&o);
    o.kind = PSKV_DENSE;
    o.size = ROWS;
    o.width = 1;
    o.updater = "sum";
    o.consistency = "async";
    const char *name = "t", *hold = NULL, *push = NULL, *expect = NULL;
    for (int i = 1; i < argc; i += 2) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && !strcmp(f, "--scheduler"))
            cfg.scheduler = v;
        else if (v && !strcmp(f, "--group"))
            cfg.group = v;
        else if (v && !strcmp(f, "--namespace"))
            cfg.table_namespace = v;
        else if (v && !strcmp(f, "--table"))
            name = v;
        else if (v && !strcmp(f, "--kind") && (!strcmp(v, "dense") || !strcmp(v, "sparse")))
            o.kind = strcmp(v, "dense") ? PSKV_SPARSE : PSKV_DENSE;
        else if (v && !strcmp(f, "--width") && atoi(v) > 0 && atoi(v) <= 4096)
            o.width = (uint32_t)atoi(v);
        else if (v && !strcmp(f, "--updater"))
            o.updater = v;
        else if (v && !strcmp(f, "--consistency"))
            o.consistency = v;
        else if (v && !strcmp(f, "--push"))
            push = v;
        else if (v && !strcmp(f, "--hold"))
            hold = v;
        else if (v && !strcmp(f, "--expect"))
            expect = v;
        else {
            fprintf(stderr, "usage: pskv-table-open --scheduler HOST:PORT --group G "
                            "[--namespace NS] [--table NAME] [--kind dense|sparse] "
                            "[--width N] [--updater U] [--consistency C] [--push V] "
                            "[--hold FILE] [--expect X]\n");
            return 2;
        }
    }
    if (o.kind == PSKV_SPARSE)
        o.size = 0;
    pskv_worker *w = NULL;
    int rc = pskv_worker_open(&cfg, &w);
    if (rc < 0) {
        printf("table-open: join: %s\n", pskv_strerror(rc));
        return 1;
    }
    int t = pskv_table_open(w, name, &o);
    if (t < 0) {
        failed(w, "open refused");
        pskv_worker_close(&w);
        return 1;
    }
    size_t n = (size_t)ROWS * o.width;
    uint64_t keys[ROWS];
    for (uint64_t k = 0; k < ROWS; k++)
        keys[k] = k;
    const uint64_t *kp = o.kind == PSKV_SPARSE ? keys : NULL;
    float *vals = malloc(n * sizeof *vals);
    if (!vals)
        return failed(w, "out of memory");
    if (push && push_all(w, t, kp, vals, n, strtof(push, NULL)) < 0)
        return failed(w, "push");
    if (hold) {
        printf("table-open: %s pushed, waiting for %s\n", name, hold);
        fflush(stdout);
        double end = now_s() + 60;
        while (access(hold, F_OK) != 0 && now_s() < end)
            usleep(20000);
        if (access(hold, F_OK) != 0)
            return failed(w, "no hold file after 60 s");
        if (push && push_all(w, t, kp, vals, n, strtof(push, NULL)) < 0)
            return failed(w, "push after the hold");
    }
    int64_t ts = pskv_pull(w, t, kp, ROWS, vals);
    if (ts < 0 || pskv_wait(w, ts, TMO) < 0)
        return failed(w, "pull");
    if (expect) {
        float x = strtof(expect, NULL);
        for (size_t i = 0; i < n; i++)
            if (vals[i] != x) {
                printf("table-open: value %zu of %s is %.9g, not %.9g\n", i, name,
                       (double)vals[i], (double)x);
                return 1;
            }
    }
    printf("table-open ok: %s (%s, width %u, %s, %s): %d rows%s%s\n", name,
           o.kind == PSKV_DENSE ? "dense" : "sparse", o.width, o.updater, o.consistency, ROWS,
           expect ? ", every value " : "", expect ? expect : "");
    free(vals);
    return pskv_worker_close(&w) < 0;
}
