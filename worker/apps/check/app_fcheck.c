/* --app filter-check: the error feedback of a quantising filter (--filter int8 or
 * sign) checked against the servers. Every worker pushes --rounds rounds of
 * pseudo-random gradients in [-1, 1) to a dense table of 4096 keys with sgd lr 1
 * (so a value is minus the sum of what reached it), each worker able to compute
 * every worker's gradients. After the rounds the servers lack what the workers'
 * residuals hold; after pskv_filter_flush they hold every worker's total to float
 * rounding. Prints the largest error before and after the flush and fails when the
 * one after it is over 1e-3. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps.h"
#include "ring.h"

enum { FC_KEYS = 4096 };

static float fc_grad(int rank, int64_t round, uint64_t k)
{
    uint64_t x = ring_mix64((((uint64_t)rank << 48) ^ ((uint64_t)round << 24) ^ k) +
                            0x9e3779b97f4a7c15ULL);
    return (float)((double)(x >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

static int fc_fail(pskv_worker *w, const char *what, int64_t rc)
{
    printf("filter-check FAILED: %s: %s (%s)\n", what, pskv_strerror((int)rc),
           pskv_last_error(w));
    return 1;
}

/* The largest |server value + total| over the table (pulled after a barrier). */
static int fc_error(pskv_worker *w, int t, const double *total, float *vals, double *err)
{
    int rc = pskv_barrier(w, 120000);
    if (rc < 0)
        return rc;
    int64_t ts = pskv_pull(w, t, NULL, FC_KEYS, vals);
    if (ts < 0 || (rc = pskv_wait(w, ts, 120000)) < 0)
        return ts < 0 ? (int)ts : rc;
    *err = 0;
    for (int k = 0; k < FC_KEYS; k++)
        *err = fmax(*err, fabs((double)vals[k] + total[k]));
    return pskv_barrier(w, 120000);
}

int app_filter_check(pskv_worker *w, cfg_entry *cfg)
{
    pskv_table_opts o;
    pskv_table_opts_init(&o);
    o.kind = PSKV_DENSE;
    o.size = FC_KEYS;
    o.updater = "sgd";
    o.lr = 1.0f;
    o.filters = cfg_str(cfg, "filter");
    int t = pskv_table_open(w, "filter-check", &o);
    if (t < 0)
        return fc_fail(w, "open the table", t);
    int W = pskv_num_workers(w), me = pskv_rank(w);
    int64_t rounds = cfg_int(cfg, "rounds");
    double *total = calloc(FC_KEYS, sizeof *total);
    float *g = malloc(FC_KEYS * sizeof *g), *vals = malloc(FC_KEYS * sizeof *vals);
    int status = 1, rc;
    int64_t ts;
    double before, after;
    if (!total || !g || !vals) {
        fc_fail(w, "allocate", -PSKV_ENOMEM);
        goto out;
    }
    for (int64_t s = 0; s < rounds; s++) {
        for (uint64_t k = 0; k < FC_KEYS; k++)
            g[k] = fc_grad(me, s, k);
        ts = pskv_push(w, t, NULL, FC_KEYS, g);
        if (ts < 0 || (ts = pskv_wait(w, ts, 120000)) < 0) {
            fc_fail(w, "push", ts);
            goto out;
        }
    }
    for (int r = 0; r < W; r++)
        for (int64_t s = 0; s < rounds; s++)
            for (uint64_t k = 0; k < FC_KEYS; k++)
                total[k] += fc_grad(r, s, k);
    if ((rc = fc_error(w, t, total, vals, &before)) < 0) {
        fc_fail(w, "pull before the flush", rc);
        goto out;
    }
    ts = pskv_filter_flush(w, t);
    if (ts < 0 || (ts > 0 && (ts = pskv_wait(w, ts, 120000)) < 0)) {
        fc_fail(w, "flush", ts);
        goto out;
    }
    if ((rc = fc_error(w, t, total, vals, &after)) < 0) {
        fc_fail(w, "pull after the flush", rc);
        goto out;
    }
    int ok = after <= 1e-3;
    printf("filter-check %s: %d workers, %lld rounds, filters %s: largest error %.6g before "
           "the flush, %.6g after\n", ok ? "ok" : "FAILED", W, (long long)rounds,
           *o.filters ? o.filters : "none", before, after);
    status = ok ? 0 : 1;
out: /* a failed push or pull may still be in flight into vals: freed after close */
    free(total);
    free(g);
    app_free_after_close(vals);
    return status;
}
