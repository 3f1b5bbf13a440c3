/* --app check: every worker pushes known integer increments into a dense and a
 * sparse table whose keys spread over every server, then all barrier, pull and
 * verify the exact sums. The `sum` updater keeps integers exact in float32. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps.h"
#include "ring.h"

#define DW 3 /* dense width */
#define SW 2 /* sparse width */
#define OWN_KEYS 50

static float dense_inc(int r, int k, uint64_t i, int c) { return (float)((r + 1) * (k + 1) + (int)((i + (uint64_t)c) % 7)); }
static float sparse_inc(int r, int k, uint64_t j, int c) { return (float)((r + 1) + k + (int)(j % 5) + c); }
static uint64_t shared_key(uint64_t j) { return ring_mix64(j + 12345); }
static uint64_t own_key(int r, uint64_t j) { return ((uint64_t)(r + 1) << 56) | j; }

static int fail(pskv_worker *w, const char *what, int rc)
{
    printf("check FAILED: %s: %s (%s)\n", what, pskv_strerror(rc), pskv_last_error(w));
    fflush(stdout);
    return 1;
}

int app_check(pskv_worker *w, cfg_entry *cfg)
{
    const int W = pskv_num_workers(w), r = pskv_rank(w), R = (int)cfg_int(cfg, "rounds");
    const uint64_t n = (uint64_t)cfg_int(cfg, "keys");
    const int tmo = 60000;
    int rc;
    pskv_table_opts o;
    pskv_table_opts_init(&o);
    o.kind = PSKV_DENSE;
    o.size = n;
    o.width = DW;
    o.updater = "sum";
    int td = pskv_table_open(w, "check.dense", &o);
    if (td < 0)
        return fail(w, "open dense table", td);
    o.kind = PSKV_SPARSE;
    o.size = 0;
    o.width = SW;
    int ts = pskv_table_open(w, "check.sparse", &o);
    if (ts < 0)
        return fail(w, "open sparse table", ts);

    size_t own_n = OWN_KEYS * (size_t)W;
    float *dv = malloc(n * DW * sizeof(float));
    float *sv = malloc(n * SW * sizeof(float));
    uint64_t *sk = malloc(n * sizeof(uint64_t));
    uint64_t *dk = malloc(n * sizeof(uint64_t));
    uint64_t *ok = malloc(own_n * sizeof(uint64_t));
    float *ov = malloc(own_n * SW * sizeof(float));
    if (!dv || !sv || !sk || !dk || !ok || !ov) {
        printf("check FAILED: out of memory\n");
        return 1;
    }
    int status = 0;
    char detail[256] = "";
    for (int k = 0; k < R; k++) {
        for (uint64_t i = 0; i < n; i++)
            for (int c = 0; c < DW; c++)
                dv[i * DW + c] = dense_inc(r, k, i, c);
        int64_t t = pskv_push(w, td, NULL, n, dv);
        if (t < 0)
            return fail(w, "dense push", (int)t);
        /* every third key again, as a gathered (non-contiguous) key list */
        size_t m = 0;
        for (uint64_t i = 0; i < n; i += 3) {
            dk[m] = i;
            for (int c = 0; c < DW; c++)
                dv[m * DW + c] = 1.0f;
            m++;
        }
        t = pskv_push(w, td, dk, m, dv);
        if (t < 0)
            return fail(w, "dense gathered push", (int)t);
        for (uint64_t j = 0; j < n; j++) {
            sk[j] = shared_key(j);
            for (int c = 0; c < SW; c++)
                sv[j * SW + c] = sparse_inc(r, k, j, c);
        }
        t = pskv_push(w, ts, sk, n, sv);
        if (t < 0)
            return fail(w, "sparse push", (int)t);
        for (uint64_t j = 0; j < OWN_KEYS; j++) {
            ok[j] = own_key(r, j);
            ov[j * SW] = 1.0f;
            ov[j * SW + 1] = 2.0f;
        }
        t = pskv_push(w, ts, ok, OWN_KEYS, ov);
        if (t < 0)
            return fail(w, "sparse own-key push", (int)t);
    }
    rc = pskv_barrier(w, tmo);
    if (rc < 0)
        return fail(w, "barrier after pushes", rc);

    /* dense: the sum over workers and rounds, plus W*R on every third key */
    int64_t t = pskv_pull(w, td, NULL, n, dv);
    if (t < 0 || (rc = pskv_wait(w, t, tmo)) < 0)
        return fail(w, "dense pull", t < 0 ? (int)t : rc);
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; i++)
        for (int c = 0; c < DW; c++) {
            double want = (i % 3 == 0) ? (double)W * R : 0;
            for (int q = 0; q < W; q++)
                for (int k = 0; k < R; k++)
                    want += dense_inc(q, k, i, c);
            if ((double)dv[i * DW + c] != want) {
                if (!bad++)
                    snprintf(detail, sizeof detail, "dense key %" PRIu64 "[%d] = %g, expected %g",
                             i, c, (double)dv[i * DW + c], want);
            }
        }
    printf("check: dense table %" PRIu64 " keys x %d over %d servers, %d workers x %d rounds: %s\n",
           n, DW, pskv_num_servers(w), W, R, bad ? "MISMATCH" : "exact");
    status |= bad != 0;

    /* dense, gathered pull of a scattered key list in descending order */
    size_t m = 0;
    for (uint64_t i = n; i-- > 0;)
        if (i % 2 == 1)
            dk[m++] = i;
    if (m) {
        float *gv = malloc(m * DW * sizeof(float));
        t = pskv_pull(w, td, dk, m, gv);
        if (t < 0 || (rc = pskv_wait(w, t, tmo)) < 0)
            return fail(w, "dense gathered pull", t < 0 ? (int)t : rc);
        uint64_t gbad = 0;
        for (size_t q = 0; q < m; q++)
            for (int c = 0; c < DW; c++)
                gbad += gv[q * DW + c] != dv[dk[q] * DW + c];
        printf("check: dense gathered pull of %zu keys: %s\n", m, gbad ? "MISMATCH" : "exact");
        if (gbad && !bad)
            snprintf(detail, sizeof detail, "gathered dense pull differs from the run pull");
        bad += gbad;
        status |= gbad != 0;
        free(gv);
    }

    /* sparse shared keys */
    t = pskv_pull(w, ts, sk, n, sv);
    if (t < 0 || (rc = pskv_wait(w, t, tmo)) < 0)
        return fail(w, "sparse pull", t < 0 ? (int)t : rc);
    uint64_t sbad = 0;
    for (uint64_t j = 0; j < n; j++)
        for (int c = 0; c < SW; c++) {
            double want = 0;
            for (int q = 0; q < W; q++)
                for (int k = 0; k < R; k++)
                    want += sparse_inc(q, k, j, c);
            if ((double)sv[j * SW + c] != want && !sbad++)
                snprintf(detail, sizeof detail, "sparse key %" PRIx64 "[%d] = %g, expected %g",
                         sk[j], c, (double)sv[j * SW + c], want);
        }
    /* every worker's own keys, and keys nobody pushed (read as the zero init) */
    for (int q = 0; q < W; q++)
        for (uint64_t j = 0; j < OWN_KEYS; j++)
            ok[(size_t)q * OWN_KEYS + j] = own_key(q, j);
    t = pskv_pull(w, ts, ok, own_n, ov);
    if (t < 0 || (rc = pskv_wait(w, t, tmo)) < 0)
        return fail(w, "sparse own-key pull", t < 0 ? (int)t : rc);
    for (size_t j = 0; j < own_n; j++)
        if ((ov[j * SW] != (float)R || ov[j * SW + 1] != 2.0f * R) && !sbad++)
            snprintf(detail, sizeof detail, "sparse own key %" PRIx64 " = %g,%g, expected %d,%d",
                     ok[j], (double)ov[j * SW], (double)ov[j * SW + 1], R, 2 * R);
    uint64_t never[3] = {0xdeadbeefULL, UINT64_MAX, 7ULL << 60};
    float nv[3 * SW];
    t = pskv_pull(w, ts, never, 3, nv);
    if (t < 0 || (rc = pskv_wait(w, t, tmo)) < 0)
        return fail(w, "sparse pull of unknown keys", t < 0 ? (int)t : rc);
    for (int j = 0; j < 3 * SW; j++)
        if (nv[j] != 0.0f && !sbad++)
            snprintf(detail, sizeof detail, "never-pushed sparse key reads %g, expected 0",
                     (double)nv[j]);
    printf("check: sparse table %" PRIu64 " shared + %zu own keys x %d: %s\n", n, own_n, SW,
           sbad ? "MISMATCH" : "exact");
    status |= sbad != 0;

    /* a non-finite value is refused by the server and the stored value stays */
    {
        uint64_t k0 = (uint64_t)r; /* each worker its own key: no race with the others */
        float before[DW], nanv[DW] = {1.0f, NAN, 2.0f}, after[DW];
        int64_t tp = pskv_pull(w, td, &k0, 1, before);
        if (tp < 0 || (rc = pskv_wait(w, tp, tmo)) < 0)
            return fail(w, "pull before the NaN push", tp < 0 ? (int)tp : rc);
        tp = pskv_push(w, td, &k0, 1, nanv);
        int nan_rc = tp < 0 ? (int)tp : pskv_wait(w, tp, tmo);
        int named = nan_rc == -PSKV_EBADVALUE && strstr(pskv_last_error(w), "check.dense");
        tp = pskv_pull(w, td, &k0, 1, after);
        if (tp < 0 || (rc = pskv_wait(w, tp, tmo)) < 0)
            return fail(w, "pull after the NaN push", tp < 0 ? (int)tp : rc);
        int kept = memcmp(before, after, sizeof before) == 0;
        printf("check: NaN push: %s, stored value %s\n",
               named ? "refused naming the table" : "NOT REFUSED PROPERLY",
               kept ? "unchanged" : "CHANGED");
        if (!named || !kept) {
            snprintf(detail, sizeof detail, "NaN push returned %d (%s), value %s", nan_rc,
                     pskv_last_error(w), kept ? "kept" : "changed");
            status = 1;
        }
    }

    /* the same table reopened with another option must be refused, naming it */
    pskv_table_opts o3;
    pskv_table_opts_init(&o3);
    o3.kind = PSKV_DENSE;
    o3.size = n;
    o3.width = DW;
    o3.updater = "sgd";
    rc = pskv_table_open(w, "check.dense", &o3);
    int named = rc == -PSKV_EMISMATCH && strstr(pskv_last_error(w), "'updater'") != NULL;
    printf("check: reopen with another updater: %s\n",
           named ? "refused, naming 'updater'" : "NOT REFUSED PROPERLY");
    if (!named) {
        snprintf(detail, sizeof detail, "reopen returned %d (%s)", rc, pskv_last_error(w));
        status = 1;
    }
    free(dv);
    free(sv);
    free(sk);
    free(dk);
    free(ok);
    free(ov);
    if (status) {
        printf("check FAILED: %s\n", detail);
        return 1;
    }
    printf("check ok: %d workers, %d servers, %d rounds, %" PRIu64 " dense + %" PRIu64
           " sparse keys exact\n",
           W, pskv_num_servers(w), R, n, n + own_n);
    fflush(stdout);
    return 0;
}
