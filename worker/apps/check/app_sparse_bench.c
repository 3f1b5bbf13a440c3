/* --app sparse-bench: sparse push throughput and the growth of a sparse table.
 * Width 1, --updater (default sgd), random 64-bit keys: key i is ring_mix64(i +
 * 1) for i in [0, --rows), so keys spread like hashed feature ids.
 *   fill:   rank r pushes its share of the --rows keys once, in order of i, one
 *           push of --push-keys keys at a time, each waited for: every key is
 *           new, so the table grows from empty to --rows rows; the push latency
 *           (push to acknowledgement) is timed, worst and 99th percentile.
 *   update: --steps pushes (0 = rows / push-keys / workers, so that the workers
 *           push --rows keys in all) of --push-keys keys drawn uniformly from the
 *           --rows keys: updates of existing rows, 16 pushes in flight (stream).
 * The workers meet at a barrier after each phase; with --replay-wait FILE each
 * then waits for FILE.1 (after the fill) and FILE.2 (after the updates), so a
 * script can read the server's CPU time and memory between the phases
 * (scripts/bench-sparse-push.sh). Prints per phase
 *   sparse-bench phase=P rank=R keys=K seconds=S keys_per_s=X [max_push_ms=M p99_push_ms=Q]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps.h"
#include "ring.h"
#include "timeutil.h"
#include "updflags.h"

#define DEPTH 16 /* update pushes in flight */

static int wait_ms = 30000;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int fail(pskv_worker *w, const char *what, int rc)
{
    return app_fail("sparse-bench", w, what, rc);
}

/* After a phase: every worker done (barrier), then the script's file. */
static int meet(pskv_worker *w, const char *base, int n)
{
    int rc = pskv_barrier(w, 600000);
    if (rc < 0)
        return fail(w, "barrier", rc);
    return app_wait_file_n("sparse-bench", base, n) < 0;
}

static void report(const char *phase, int rank, uint64_t keys, int64_t ns)
{
    double s = (double)ns / 1e9;
    printf("sparse-bench phase=%s rank=%d keys=%llu seconds=%.3f keys_per_s=%.0f", phase, rank,
           (unsigned long long)keys, s, s > 0 ? (double)keys / s : 0.0);
}

/* Rank's share of the rows, each key pushed once, each push waited for. */
static int fill(pskv_worker *w, int t, uint64_t rows, size_t per, uint64_t *keys,
                const float *g)
{
    int rank = pskv_rank(w), nw = pskv_num_workers(w);
    uint64_t lo = rows * (uint64_t)rank / (uint64_t)nw;
    uint64_t hi = rows * (uint64_t)(rank + 1) / (uint64_t)nw;
    size_t npush = (size_t)((hi - lo + per - 1) / per), at = 0;
    int64_t *lat = malloc((npush ? npush : 1) * sizeof *lat);
    if (!lat)
        return fail(w, "fill", -PSKV_ENOMEM);
    int64_t t0 = tu_now_ns();
    for (uint64_t i = lo; i < hi; i += per) {
        size_t n = hi - i < per ? (size_t)(hi - i) : per;
        for (size_t k = 0; k < n; k++)
            keys[k] = ring_mix64(i + k + 1);
        int64_t p0 = tu_now_ns(), ts = pskv_push(w, t, keys, n, g);
        int rc = ts < 0 ? (int)ts : pskv_wait(w, ts, wait_ms);
        if (rc < 0 || app_stop_signal) {
            free(lat);
            return app_stop_signal ? app_stopped("sparse-bench") : fail(w, "fill push", rc);
        }
        lat[at++] = tu_now_ns() - p0;
    }
    int64_t ns = tu_now_ns() - t0;
    qsort(lat, at, sizeof *lat, cmp_i64);
    report("fill", rank, hi - lo, ns);
    printf(" max_push_ms=%.2f p99_push_ms=%.2f\n", at ? (double)lat[at - 1] / 1e6 : 0.0,
           at ? (double)lat[at * 99 / 100] / 1e6 : 0.0);
    free(lat);
    return 0;
}

/* steps pushes of random existing keys, DEPTH in flight. */
static int update(pskv_worker *w, int t, uint64_t rows, size_t per, long steps, uint64_t *keys,
                  const float *g)
{
    int64_t ring[DEPTH] = {0};
    uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(pskv_rank(w) + 1); /* xorshift64 */
    int64_t t0 = tu_now_ns();
    for (long s = 0; s < steps; s++) {
        int rc;
        if (ring[s % DEPTH] > 0 && (rc = pskv_wait(w, ring[s % DEPTH], wait_ms)) < 0)
            return fail(w, "update push", rc);
        if (app_stop_signal)
            return app_stopped("sparse-bench");
        for (size_t k = 0; k < per; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            keys[k] = ring_mix64(x % rows + 1);
        }
        int64_t ts = pskv_push(w, t, keys, per, g); /* copies keys and values */
        if (ts < 0)
            return fail(w, "update push", (int)ts);
        ring[s % DEPTH] = ts;
    }
    int rc = pskv_wait_all(w, wait_ms);
    if (rc < 0)
        return fail(w, "update push", rc);
    report("update", pskv_rank(w), (uint64_t)steps * per, tu_now_ns() - t0);
    printf("\n");
    return 0;
}

int app_sparse_bench(pskv_worker *w, cfg_entry *cfg)
{
    uint64_t rows = (uint64_t)cfg_int(cfg, "rows");
    size_t per = (size_t)cfg_int(cfg, "push-keys");
    long steps = (long)cfg_int(cfg, "steps");
    const char *base = cfg_str(cfg, "replay-wait");
    double request_s = cfg_double(cfg, "request-timeout");
    if (request_s * 1000 > wait_ms)
        wait_ms = (int)(request_s * 1000);
    if (steps == 0)
        steps = (long)(rows / per / (uint64_t)pskv_num_workers(w)) + 1;
    pskv_table_opts o;
    pskv_table_opts_init(&o);
    o.kind = PSKV_SPARSE;
    o.width = 1;
    updflags_apply(cfg, &o);
    int t = pskv_table_open(w, "sparse-bench", &o);
    if (t < 0)
        return fail(w, "cannot open table", t);
    uint64_t *keys = malloc(per * sizeof *keys);
    float *g = malloc(per * sizeof *g);
    if (!keys || !g) {
        free(keys);
        free(g);
        return fail(w, "buffers", -PSKV_ENOMEM);
    }
    for (size_t k = 0; k < per; k++)
        g[k] = 0.01f * (float)(1 + k % 7); /* nonzero: ftrl stores every row at --l1 0 */
    int rc = fill(w, t, rows, per, keys, g);
    if (!rc)
        rc = meet(w, base, 1);
    if (!rc)
        rc = update(w, t, rows, per, steps, keys, g);
    if (!rc)
        rc = meet(w, base, 2);
    free(keys);
    free(g);
    return rc;
}
