/* --app check: exact sums over dense and sparse tables on every server, under
 * the table consistency chosen with --consistency (async, bsp, ssp:TAU).
 *
 * Every worker pushes known integer increments each round (one round = one
 * clock); the `sum` updater keeps integers exact in float32.
 *   async   after a barrier, every sum is exact;
 *   bsp     every pull at clock c returns exactly the sums of rounds < c, and a
 *           float table trained with sgd ends with the same bits on every run
 *           (its hash is printed);
 *   ssp:T   every pull at clock c lies between the sums of rounds < c - T and
 *           of rounds < c + T + 1; the lead over the slowest worker is printed;
 *   bsp --backup B (or --count-acked under any model): one table, +1 per key per
 *           clock, and the final values against the pushes the servers
 *           acknowledged, counted per rank and partition (app_check_acked.c, with
 *           --acked-log across kill -9 and --stop-file).
 * --slowdown F makes each round sleep (F - 1) x 5 ms, for a steady straggler.
 * --clip-norm C (not with backups or --count-acked): a planted huge gradient,
 * pushed in two parts, clipped as one to norm C into the `sum` table check.clip
 * and pulled back, and one within C that must come back unchanged.
 * The last line is `check ok: ...` or `check FAILED: ...`. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app_check.h"
#include "apps.h"
#include "ring.h"
#include "timeutil.h"

#define DW 3 /* dense width */
#define SW 2 /* sparse width */
#define OWN_KEYS 50

/* Small integers, so that sums stay exact in float32 (below 2^24) for thousands
 * of rounds of many workers: the fault tests run long push streams. */
static float dense_inc(int r, int k, uint64_t i, int c) { return (float)((r + 1) * (k % 5 + 1) + (int)((i + (uint64_t)c) % 7)); }
static float sparse_inc(int r, int k, uint64_t j, int c) { return (float)((r + 1) + k % 4 + (int)(j % 5) + c); }
static uint64_t shared_key(uint64_t j) { return ring_mix64(j + 12345); }
static uint64_t own_key(int r, uint64_t j) { return ((uint64_t)(r + 1) << 56) | j; }

/* Sum over workers and rounds < k of dense key i's component c (incl. every
 * third key's extra +1 per worker and round). */
static double dense_sum(int W, int k, uint64_t i, int c)
{
    double s = (i % 3 == 0) ? (double)W * k : 0;
    for (int q = 0; q < W; q++)
        for (int j = 0; j < k; j++)
            s += dense_inc(q, j, i, c);
    return s;
}

static double sparse_sum(int W, int k, uint64_t j, int c)
{
    double s = 0;
    for (int q = 0; q < W; q++)
        for (int r = 0; r < k; r++)
            s += sparse_inc(q, r, j, c);
    return s;
}

int ck_fail(pskv_worker *w, const char *what, int rc)
{
    if (app_stop_signal) /* the wait ended by SIGTERM (pskv_wait): not a failed check */
        return app_stopped("check");
    printf("check FAILED: %s: %s (%s)\n", what, pskv_strerror(rc), pskv_last_error(w));
    fflush(stdout);
    return 1;
}

int ck_pull_wait(pskv_worker *w, int t, const uint64_t *keys, size_t n, float *out)
{
    int64_t tp = pskv_pull(w, t, keys, n, out);
    return tp < 0 ? (int)tp : pskv_wait(w, tp, 120000);
}

void ck_mismatch(ck *c, const char *fmt, ...)
{
    if (!c->status) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->detail, sizeof c->detail, fmt, ap);
        va_end(ap);
    }
    c->status = 1;
}

/* The completed view v (pskv_pull_view, or pskv_pushpull with PSKV_PP_VIEW) copied
 * into c->dv and released; a released view must be gone (a mismatch if not).
 * Returns 0 or a negated error. */
static int view_into_dv(ck *c, int64_t v)
{
    const float *vals = pskv_view(c->w, v);
    if (!vals)
        return -PSKV_EPROTO;
    memcpy(c->dv, vals, c->n * DW * sizeof(float));
    int rc = pskv_view_release(c->w, v);
    if (rc < 0)
        return rc;
    if (pskv_view(c->w, v) || pskv_view_release(c->w, v) != -PSKV_ENOTFOUND)
        ck_mismatch(c, "view %lld still held after its release", (long long)v);
    return 0;
}

/* The dense table's values into c->dv: pskv_pull, or with --pull view through
 * pskv_pull_view, read where the library holds them (in place in shared memory
 * with --shm and one server), copied out and released; a released view is gone. */
static int pull_dense(ck *c)
{
    if (!c->view)
        return ck_pull_wait(c->w, c->td, NULL, c->n, c->dv);
    int64_t v = pskv_pull_view(c->w, c->td, NULL, c->n);
    int rc = v < 0 ? (int)v : pskv_wait(c->w, v, 120000);
    if (rc < 0)
        return rc;
    return view_into_dv(c, v);
}

/* Checks pulled dense values against sums of rounds [lo_k, hi_k] bounds. */
static void check_dense(ck *c, int lo_k, int hi_k, const char *when)
{
    for (uint64_t i = 0; i < c->n; i++)
        for (int k = 0; k < DW; k++) {
            double v = c->dv[i * DW + k], lo = dense_sum(c->W, lo_k, i, k),
                   hi = dense_sum(c->W, hi_k, i, k);
            if (v < lo || v > hi) { /* (one bound when they meet: "expected 190") */
                if (lo == hi)
                    ck_mismatch(c, "%s: dense key %" PRIu64 "[%d] = %g, expected %g", when, i, k,
                                v, lo);
                else
                    ck_mismatch(c, "%s: dense key %" PRIu64 "[%d] = %g, expected between %g "
                                "and %g", when, i, k, v, lo, hi);
                return;
            }
        }
}

/* Round k's dense run: copied, lent (--push nocopy) or from a push buffer. Returns 0
 * or a negated error. */
static int push_dense_run(ck *c, int k)
{
    /* lent (dn): the previous round's push must be over before a refill */
    int rc = c->dn && c->dn_ts > 0 ? pskv_wait(c->w, c->dn_ts, 120000) : 0;
    if (rc < 0)
        return rc;
    float *dv = c->pbuf ? pskv_push_buffer(c->w, c->td, NULL, c->n) : c->dn ? c->dn : c->dv;
    if (!dv)
        return -PSKV_ENOMEM;
    for (uint64_t i = 0; i < c->n; i++)
        for (int q = 0; q < DW; q++)
            dv[i * DW + q] = dense_inc(c->r, k, i, q);
    int64_t t = c->pbclock ? pskv_push_buffer_send_clock(c->w, c->td, NULL, c->n, dv)
                : c->pbuf  ? pskv_push_buffer_send(c->w, c->td, NULL, c->n, dv)
                : c->dn ? (c->dn_ts = pskv_push_nocopy(c->w, c->td, NULL, c->n, dv))
                        : pskv_push(c->w, c->td, NULL, c->n, dv);
    return t < 0 ? (int)t : 0;
}

/* Round k's pushes: the dense run (--pull pushpull: last, by pushpull_round, with the
 * clock; --push buffer-clock: last, ending the clock), every third dense key again,
 * the shared and this worker's own sparse keys. Returns 0 or a negated error. */
static int push_round(ck *c, int k)
{
    int rc = c->pp || c->pbclock ? 0 : push_dense_run(c, k);
    if (rc < 0)
        return rc;
    int64_t t;
    size_t m = 0; /* every third key again, as a gathered key list */
    for (uint64_t i = 0; i < c->n; i += 3) {
        c->dk[m] = i;
        for (int q = 0; q < DW; q++)
            c->dv[m * DW + q] = 1.0f;
        m++;
    }
    if ((t = pskv_push(c->w, c->td, c->dk, m, c->dv)) < 0)
        return (int)t;
    for (uint64_t j = 0; j < c->n; j++) {
        c->sk[j] = shared_key(j);
        for (int q = 0; q < SW; q++)
            c->sv[j * SW + q] = sparse_inc(c->r, k, j, q);
    }
    if ((t = pskv_push(c->w, c->ts, c->sk, c->n, c->sv)) < 0)
        return (int)t;
    uint64_t ok[OWN_KEYS];
    float ov[OWN_KEYS * SW];
    for (uint64_t j = 0; j < OWN_KEYS; j++) {
        ok[j] = own_key(c->r, j);
        ov[j * SW] = 1.0f;
        ov[j * SW + 1] = 2.0f;
    }
    if ((t = pskv_push(c->w, c->ts, ok, OWN_KEYS, ov)) < 0)
        return (int)t;
    return c->pbclock ? push_dense_run(c, k) : 0;
}

/* --pull pushpull: round k's dense run pushed with pskv_pushpull, ending the clock:
 * with --push nocopy from its own array, lent (PSKV_PP_NOCOPY), into dv; else into
 * the same array (the gradient is copied first); --pull pushpull-view: into a view
 * (PSKV_PP_VIEW), copied to dv and released (a released view is gone). The values
 * after it checked
 * against the model's promise for clock k + 1 (bsp: exactly rounds <= k; ssp:T:
 * between k + 1 - T and k + T + 2 rounds; async: unchecked until the final sums).
 * Returns 0 or a negated error. */
static int pushpull_round(ck *c, int k)
{
    float *g = c->dn ? c->dn : c->dv;
    for (uint64_t i = 0; i < c->n; i++)
        for (int q = 0; q < DW; q++)
            g[i * DW + q] = dense_inc(c->r, k, i, q);
    int64_t t = pskv_pushpull(c->w, c->td, NULL, c->n, g, c->ppview ? NULL : c->dv,
                              PSKV_PP_CLOCK | (c->dn ? PSKV_PP_NOCOPY : 0) |
                                  (c->ppview ? PSKV_PP_VIEW : 0));
    int rc = t < 0 ? (int)t : pskv_wait(c->w, t, 120000);
    if (rc < 0)
        return rc;
    if (c->ppview && (rc = view_into_dv(c, t)) < 0)
        return rc;
    if (!c->bsp && !c->ssp)
        return 0; /* async promises nothing before the barrier (and the bounds cost
                     O(W x rounds) a key: a long fault-test stream would crawl) */
    char when[64];
    snprintf(when, sizeof when, "%s pushpull at clock %d", c->cons, k + 1);
    int lo = c->bsp ? k + 1 : k + 1 - c->tau > 0 ? k + 1 - c->tau : 0;
    int hi = c->bsp ? k + 1 : k + c->tau + 2 < c->R ? k + c->tau + 2 : c->R;
    check_dense(c, lo, hi, when);
    return 0;
}

/* ---- the check without backups ---------------------------------------------- */

/* check.dense, check.sparse and, under bsp, check.float. Returns 0, or 1 after
 * saying why. */
static int open_tables(ck *c)
{
    pskv_table_opts o = c->o;
    o.kind = PSKV_DENSE;
    o.size = c->n;
    o.width = DW;
    c->td = pskv_table_open(c->w, "check.dense", &o);
    if (c->td < 0)
        return ck_fail(c->w, "open dense table", c->td);
    o.kind = PSKV_SPARSE;
    o.size = 0;
    o.width = SW;
    c->ts = pskv_table_open(c->w, "check.sparse", &o);
    if (c->ts < 0)
        return ck_fail(c->w, "open sparse table", c->ts);
    c->tf = -1;
    if (c->bsp) { /* float gradients with sgd: the same bits on every run */
        pskv_table_opts f = o;
        f.kind = PSKV_DENSE;
        f.size = c->n;
        f.width = 1;
        f.updater = "sgd";
        f.lr = 0.1f;
        f.momentum = 0.9f;
        f.init = "uniform";
        f.init_scale = 1.0f;
        c->tf = pskv_table_open(c->w, "check.float", &f);
        if (c->tf < 0)
            return ck_fail(c->w, "open check.float", c->tf);
    }
    return 0;
}

/* The buffers of the rounds and of the final pulls. Returns 0, or 1 after saying so. */
static int alloc_buffers(ck *c, int nocopy)
{
    c->own_n = OWN_KEYS * (size_t)c->W;
    c->dv = malloc(c->n * DW * sizeof(float));
    c->dn = nocopy ? malloc(c->n * DW * sizeof(float)) : NULL;
    c->sv = malloc(c->n * SW * sizeof(float));
    c->sk = malloc(c->n * sizeof(uint64_t));
    c->dk = malloc(c->n * sizeof(uint64_t));
    c->ok = malloc(c->own_n * sizeof(uint64_t));
    c->ov = malloc(c->own_n * SW * sizeof(float));
    c->fv = malloc(c->n * sizeof(float));
    if (!c->dv || !c->sv || !c->sk || !c->dk || !c->ok || !c->ov || !c->fv ||
        (nocopy && !c->dn)) {
        printf("check FAILED: out of memory\n");
        return 1;
    }
    return 0;
}

/* Under bsp and ssp: a pull at clock k against the model's promise (bsp: exactly
 * the rounds before k; ssp:T: between k - T and k + T + 1), and the lead over the
 * slowest worker. Returns 0, or 1 after saying why. */
static int check_clock_pull(ck *c, int k)
{
    int rc;
    if ((rc = pull_dense(c)) < 0)
        return ck_fail(c->w, "pull during the rounds", rc);
    char when[64];
    snprintf(when, sizeof when, "%s pull at clock %d", c->cons, k);
    if (c->bsp)
        check_dense(c, k, k, when);
    else
        check_dense(c, k - c->tau > 0 ? k - c->tau : 0,
                    k + c->tau + 1 < c->R ? k + c->tau + 1 : c->R, when);
    int64_t lead = k - pskv_values_clock(c->w);
    if (lead > c->max_lead)
        c->max_lead = lead;
    if (c->ssp && lead > c->tau)
        ck_mismatch(c, "ssp:%d pull at clock %d reflects clock %lld", c->tau, k,
                 (long long)pskv_values_clock(c->w));
    return 0;
}

/* check.float's round k: a gradient of (w - target)^2 / 2, per worker. Returns 0,
 * or 1 after saying why. */
static int float_round(ck *c, int k)
{
    int rc;
    if ((rc = ck_pull_wait(c->w, c->tf, NULL, c->n, c->fv)) < 0)
        return ck_fail(c->w, "pull check.float", rc);
    for (uint64_t i = 0; i < c->n; i++)
        c->fv[i] = c->fv[i] - (float)sin((double)(i + 1) * (c->r + 1) * 0.37 + k);
    int64_t tp = pskv_push(c->w, c->tf, NULL, c->n, c->fv);
    if (tp < 0)
        return ck_fail(c->w, "push check.float", (int)tp);
    return 0;
}

/* The R rounds, one clock each, then the barrier. Returns 0, or the exit status
 * after saying why. */
static int rounds(ck *c)
{
    int rc;
    for (int k = 0; k < c->R; k++) {
        if (app_stop_signal)
            return app_stopped("check");
        if ((c->bsp || c->ssp) && !c->pp && (rc = check_clock_pull(c, k)) != 0)
            return rc;
        if (c->tf >= 0 && (rc = float_round(c, k)) != 0)
            return rc;
        if (c->slow > 1)
            tu_sleep_ms((int64_t)((c->slow - 1) * 5));
        if ((rc = push_round(c, k)) < 0)
            return ck_fail(c->w, "push", rc);
        if (c->pp && (rc = pushpull_round(c, k)) < 0)
            return ck_fail(c->w, "pushpull", rc);
        if (!c->pp && !c->pbclock && (rc = pskv_clock(c->w)) < 0)
            return ck_fail(c->w, "clock", rc);
    }
    rc = pskv_barrier(c->w, 120000);
    if (rc < 0)
        return ck_fail(c->w, "barrier after pushes", rc);
    if (c->ssp)
        printf("check: ssp:%d: largest lead over the slowest worker %lld clocks\n", c->tau,
               (long long)c->max_lead);
    return 0;
}

/* The final dense sums, exact under every model, and a gathered pull of a
 * scattered key list in descending order that must read the same. Returns 0, or
 * 1 after saying why. */
static int final_dense(ck *c)
{
    int rc;
    if ((rc = pull_dense(c)) < 0)
        return ck_fail(c->w, "dense pull", rc);
    int before = c->status;
    check_dense(c, c->R, c->R, "final");
    printf("check: dense table %" PRIu64 " keys x %d over %d servers, %d workers x %d rounds, %s: "
           "%s\n",
           c->n, DW, pskv_num_servers(c->w), c->W, c->R, c->cons,
           c->status > before ? "MISMATCH" : "exact");

    size_t m = 0;
    for (uint64_t i = c->n; i-- > 0;)
        if (i % 2 == 1)
            c->dk[m++] = i;
    if (m) {
        float *gv = malloc(m * DW * sizeof(float));
        if ((rc = ck_pull_wait(c->w, c->td, c->dk, m, gv)) < 0) {
            app_free_after_close(gv);
            return ck_fail(c->w, "dense gathered pull", rc);
        }
        uint64_t gbad = 0;
        for (size_t q = 0; q < m; q++)
            for (int k = 0; k < DW; k++)
                gbad += gv[q * DW + k] != c->dv[c->dk[q] * DW + k];
        printf("check: dense gathered pull of %zu keys: %s\n", m, gbad ? "MISMATCH" : "exact");
        if (gbad)
            ck_mismatch(c, "gathered dense pull differs from the run pull");
        free(gv);
    }
    return 0;
}

/* The final sparse sums: the shared keys, every worker's own keys, and keys
 * nobody pushed (they read 0). Returns 0, or 1 after saying why. */
static int final_sparse(ck *c)
{
    int rc;
    for (uint64_t j = 0; j < c->n; j++)
        c->sk[j] = shared_key(j);
    if ((rc = ck_pull_wait(c->w, c->ts, c->sk, c->n, c->sv)) < 0)
        return ck_fail(c->w, "sparse pull", rc);
    int before = c->status;
    for (uint64_t j = 0; j < c->n && c->status == before; j++)
        for (int q = 0; q < SW; q++)
            if ((double)c->sv[j * SW + q] != sparse_sum(c->W, c->R, j, q)) {
                ck_mismatch(c, "sparse key %" PRIx64 "[%d] = %g, expected %g", c->sk[j], q,
                         (double)c->sv[j * SW + q], sparse_sum(c->W, c->R, j, q));
                break;
            }
    for (int q = 0; q < c->W; q++)
        for (uint64_t j = 0; j < OWN_KEYS; j++)
            c->ok[(size_t)q * OWN_KEYS + j] = own_key(q, j);
    if ((rc = ck_pull_wait(c->w, c->ts, c->ok, c->own_n, c->ov)) < 0)
        return ck_fail(c->w, "sparse own-key pull", rc);
    for (size_t j = 0; j < c->own_n; j++)
        if (c->ov[j * SW] != (float)c->R || c->ov[j * SW + 1] != 2.0f * c->R) {
            ck_mismatch(c, "sparse own key %" PRIx64 " = %g,%g, expected %d,%d", c->ok[j],
                     (double)c->ov[j * SW], (double)c->ov[j * SW + 1], c->R, 2 * c->R);
            break;
        }
    uint64_t never[3] = {0xdeadbeefULL, UINT64_MAX, 7ULL << 60};
    float nv[3 * SW];
    if ((rc = ck_pull_wait(c->w, c->ts, never, 3, nv)) < 0)
        return ck_fail(c->w, "sparse pull of unknown keys", rc);
    for (int j = 0; j < 3 * SW; j++)
        if (nv[j] != 0.0f) {
            ck_mismatch(c, "never-pushed sparse key reads %g, expected 0", (double)nv[j]);
            break;
        }
    printf("check: sparse table %" PRIu64 " shared + %zu own keys x %d: %s\n", c->n, c->own_n,
           SW, c->status > before ? "MISMATCH" : "exact");
    return 0;
}

/* bsp: the hash of check.float, the same on every run. Returns 0, or 1 after
 * saying why. */
static int float_hash(ck *c)
{
    int rc;
    if ((rc = ck_pull_wait(c->w, c->tf, NULL, c->n, c->fv)) < 0)
        return ck_fail(c->w, "pull check.float", rc);
    uint64_t h = app_digest(c->fv, c->n);
    printf("check: bsp float table hash %016" PRIx64 "\n", h);
    return 0;
}

/* --pull pushpull(-view): the whole dense run pushed with a NaN in its last row and
 * zeros elsewhere, so the part holding that row is refused and the others (other
 * servers, or other chunks; with --shm and a large run, through shared memory) are
 * applied and answered: the call fails as a whole, no value reaches the output
 * array (not even the answered parts'), and no view is held. The zeros leave the
 * sums exact. Under bsp a NaN in every row, every part refused: a part applied
 * would be answered only once this worker's clock closed, which it has not ended. */
static void nan_pushpull_run(ck *c)
{
    size_t nv = (size_t)c->n * DW;
    float *g = malloc(nv * sizeof *g), *out = c->ppview ? NULL : malloc(nv * sizeof *out);
    if (!g || (!c->ppview && !out)) {
        free(g);
        free(out);
        ck_mismatch(c, "out of memory for the NaN pushpull of the run");
        return;
    }
    for (size_t i = 0; i < nv; i++) {
        g[i] = c->bsp ? (i % DW == 1 ? NAN : 1.0f) : i == nv - DW + 1 ? NAN : 0.0f;
        if (out)
            out[i] = -7.0f;
    }
    pskv_held h0, h1;
    pskv_held_get(c->w, &h0);
    int64_t t = pskv_pushpull(c->w, c->td, NULL, c->n, g, out, c->ppview ? PSKV_PP_VIEW : 0);
    int rc = t < 0 ? (int)t : pskv_wait(c->w, t, 120000);
    pskv_held_get(c->w, &h1);
    size_t written = 0;
    for (size_t i = 0; out && i < nv; i++)
        written += out[i] != -7.0f;
    printf("check: NaN pushpull of the run (%" PRIu64 " keys): %s, %zu output values written, "
           "%d views held (%d before)\n", c->n, rc == -PSKV_EBADVALUE ? "refused" : "NOT REFUSED",
           written, h1.views, h0.views);
    if (rc != -PSKV_EBADVALUE || written || h1.views != h0.views)
        ck_mismatch(c, "NaN pushpull of the run returned %d (%s), %zu values written, %d views "
                    "held (%d before)", rc, pskv_last_error(c->w), written, h1.views, h0.views);
    free(g);
    free(out);
}

/* A non-finite value is refused by the server, naming the table, and the stored
 * value stays. Returns 0, or 1 after saying why. */
static int nan_push(ck *c)
{
    int rc;
    uint64_t k0 = (uint64_t)c->r; /* each worker its own key: no race with the others */
    float before_v[DW], nanv[DW] = {1.0f, NAN, 2.0f}, after_v[DW];
    if ((rc = ck_pull_wait(c->w, c->td, &k0, 1, before_v)) < 0)
        return ck_fail(c->w, "pull before the NaN push", rc);
    float out_v[DW] = {-7.0f, -7.0f, -7.0f}; /* --pull pushpull: must stay as it is */
    if (c->pp) { /* a lent gradient with the output over it: refused, nothing sent */
        int64_t bad = pskv_pushpull(c->w, c->td, &k0, 1, nanv, nanv, PSKV_PP_NOCOPY);
        if (bad != -PSKV_EINVAL || !strstr(pskv_last_error(c->w), "overlaps grad"))
            ck_mismatch(c, "pushpull with PSKV_PP_NOCOPY into its own gradient returned %lld "
                        "(%s), not -PSKV_EINVAL", (long long)bad, pskv_last_error(c->w));
    }
    if (c->pp)
        nan_pushpull_run(c);
    pskv_held h0, h1;
    pskv_held_get(c->w, &h0);
    int64_t tp = c->ppview ? pskv_pushpull(c->w, c->td, &k0, 1, nanv, NULL,
                                           PSKV_PP_VIEW | (c->bsp ? PSKV_PP_CLOCK : 0))
                 : c->pp   ? pskv_pushpull(c->w, c->td, &k0, 1, nanv, out_v,
                                           c->bsp ? PSKV_PP_CLOCK : 0)
                           : pskv_push(c->w, c->td, &k0, 1, nanv);
    if (c->bsp && tp >= 0 && !c->pp)
        pskv_clock(c->w); /* keep the clocks in step: every worker does this once */
    int nan_rc = tp < 0 ? (int)tp : pskv_wait(c->w, tp, 120000);
    int named = nan_rc == -PSKV_EBADVALUE && strstr(pskv_last_error(c->w), "check.dense");
    pskv_held_get(c->w, &h1);
    if (c->ppview && tp > 0 && (pskv_view(c->w, tp) || h1.views != h0.views))
        ck_mismatch(c, "a refused pushpull holds a view (%d held, %d before)", h1.views,
                    h0.views);
    if ((rc = ck_pull_wait(c->w, c->td, &k0, 1, after_v)) < 0)
        return ck_fail(c->w, "pull after the NaN push", rc);
    int kept = memcmp(before_v, after_v, sizeof before_v) == 0 &&
               out_v[0] == -7.0f && out_v[1] == -7.0f && out_v[2] == -7.0f;
    printf("check: NaN %s: %s, stored value %s\n", c->pp ? "pushpull" : "push",
           named ? "refused naming the table" : "NOT REFUSED PROPERLY",
           kept ? "unchanged" : "CHANGED");
    if (!named || !kept)
        ck_mismatch(c, "NaN push returned %d (%s), value %s", nan_rc, pskv_last_error(c->w),
                 kept ? "kept" : "changed (or the pushpull's output written)");
    return 0;
}

/* --clip-norm: each worker's three runs of CLIP_N keys in check.clip, an async
 * `sum` table (it stores exactly what is pushed): a planted huge gradient in two
 * parts, clipped together (the global norm of one step's pushes) and pushed as
 * two pushes, then one already within C. */
#define CLIP_N 256

static void clip_planted(int r, float *a, float *b, float *in, double cn)
{
    double sq = 0;
    for (int i = 0; i < CLIP_N; i++) {
        a[i] = 1e6f * (float)((i * 7 + r) % 13 - 6) + 0.25f;
        b[i] = -3e5f * (float)((i * 5 + r) % 11 - 5) - 0.5f;
        in[i] = (float)((i * 3 + r) % 9) - 4.0f + 0.125f;
        sq += (double)in[i] * in[i];
    }
    for (int i = 0; i < CLIP_N; i++) /* within C: norm C / 2 */
        in[i] = (float)((double)in[i] * 0.5 * cn / sqrt(sq));
}

/* Pushes vals to run `run` of this worker's keys in check.clip and pulls them
 * back into out. Returns 0 or a negated PSKV_E* code. */
static int clip_roundtrip(ck *c, int t, int run, const float *vals, float *out)
{
    uint64_t keys[CLIP_N];
    for (int i = 0; i < CLIP_N; i++)
        keys[i] = (uint64_t)((c->r * 3 + run) * CLIP_N + i);
    int64_t tp = pskv_push(c->w, t, keys, CLIP_N, vals);
    int rc = tp < 0 ? (int)tp : pskv_wait(c->w, tp, 120000);
    return rc < 0 ? rc : ck_pull_wait(c->w, t, keys, CLIP_N, out);
}

/* Returns 0, or 1 after saying why. */
static int clip_push(ck *c, double cn)
{
    pskv_table_opts o;
    pskv_table_opts_init(&o);
    o.kind = PSKV_DENSE;
    o.size = (uint64_t)c->W * 3 * CLIP_N;
    o.updater = "sum";
    int t = pskv_table_open(c->w, "check.clip", &o);
    if (t < 0)
        return ck_fail(c->w, "open check.clip", t);
    float a[CLIP_N], b[CLIP_N], in[CLIP_N], a0[CLIP_N], b0[CLIP_N], in0[CLIP_N];
    float pa[CLIP_N], pb[CLIP_N], pin[CLIP_N];
    clip_planted(c->r, a0, b0, in0, cn);
    memcpy(a, a0, sizeof a);
    memcpy(b, b0, sizeof b);
    memcpy(in, in0, sizeof in);
    float *parts[] = {a, b};
    size_t lens[] = {CLIP_N, CLIP_N};
    double planted = 0, within = 0;
    int clipped = pskv_clip_norm(parts, lens, 2, cn, &planted);
    float *inp[] = {in};
    int kept = pskv_clip_norm(inp, lens, 1, cn, &within) == 0;
    int rc;
    if ((rc = clip_roundtrip(c, t, 0, a, pa)) < 0 || (rc = clip_roundtrip(c, t, 1, b, pb)) < 0 ||
        (rc = clip_roundtrip(c, t, 2, in, pin)) < 0)
        return ck_fail(c->w, "push and pull check.clip", rc);
    /* from what the table holds: the two parts' norm is C, each value the planted
     * one times C / planted norm, and the gradient within C is bit for bit */
    double sq = 0, factor = cn / planted, worst = 0;
    for (int i = 0; i < CLIP_N; i++) {
        sq += (double)pa[i] * pa[i] + (double)pb[i] * pb[i];
        double ea = fabs(pa[i] - a0[i] * factor) / (fabs(a0[i] * factor) + 1e-30);
        double eb = fabs(pb[i] - b0[i] * factor) / (fabs(b0[i] * factor) + 1e-30);
        worst = fmax(worst, fmax(ea, eb));
    }
    double got = sqrt(sq);
    int unchanged = memcmp(pin, in0, sizeof pin) == 0;
    printf("check: clipping to --clip-norm %g: a planted gradient of norm %.6g in two pushes "
           "reads back at norm %.9g (sum table), the same direction to %.1e; one of norm %.6g "
           "%s\n", cn, planted, got, worst, within, unchanged ? "unchanged" : "CHANGED");
    if (clipped != 1 || !kept || fabs(got - cn) > 1e-5 * cn || worst > 1e-5 || !unchanged)
        ck_mismatch(c, "clipping to %g: norm %.9g read back, direction off by %.1e, the "
                    "gradient within C %s", cn, got, worst, unchanged ? "unchanged" : "changed");
    return 0;
}

/* The same table reopened with another option must be refused, naming it. */
static void reopen(ck *c)
{
    pskv_table_opts o3 = c->o;
    o3.kind = PSKV_DENSE;
    o3.size = c->n;
    o3.width = DW;
    o3.updater = "sgd";
    int rc = pskv_table_open(c->w, "check.dense", &o3);
    int named = rc == -PSKV_EMISMATCH && strstr(pskv_last_error(c->w), "'updater'") != NULL;
    printf("check: reopen with another updater: %s\n",
           named ? "refused, naming 'updater'" : "NOT REFUSED PROPERLY");
    if (!named)
        ck_mismatch(c, "reopen returned %d (%s)", rc, pskv_last_error(c->w));
}

/* After a failure, pulls may still be in flight into the buffers and a no-copy
 * push may still lend dn: app_free_after_close frees them once the handle is
 * closed. */
int app_check(pskv_worker *w, cfg_entry *cfg)
{
    ck c;
    memset(&c, 0, sizeof c);
    c.w = w;
    c.W = pskv_num_workers(w);
    c.r = pskv_rank(w);
    c.R = (int)cfg_int(cfg, "rounds");
    c.n = (uint64_t)cfg_int(cfg, "check-keys");
    c.cons = cfg_str(cfg, "consistency");
    c.bsp = !strcmp(c.cons, "bsp");
    c.ssp = !strncmp(c.cons, "ssp:", 4);
    c.tau = c.ssp ? atoi(c.cons + 4) : 0;
    c.slow = cfg_double(cfg, "slowdown");
    pskv_table_opts_init(&c.o);
    c.o.updater = "sum";
    c.o.consistency = c.cons;
    c.o.filters = cfg_str(cfg, "filter");
    c.o.wire = cfg_str(cfg, "wire");
    c.o.backup = (uint32_t)cfg_int(cfg, "backup");
    if (c.o.backup || cfg_int(cfg, "count-acked"))
        return ck_run_acked(&c, cfg);
    c.pbclock = !strcmp(cfg_str(cfg, "push"), "buffer-clock");
    c.pbuf = c.pbclock || !strcmp(cfg_str(cfg, "push"), "buffer");
    int nocopy = !strcmp(cfg_str(cfg, "push"), "nocopy"); /* else "copy" (worker_main) */
    c.view = !strcmp(cfg_str(cfg, "pull"), "view");        /* else "copy" (worker_main) */
    c.ppview = !strcmp(cfg_str(cfg, "pull"), "pushpull-view");
    c.pp = c.ppview || !strcmp(cfg_str(cfg, "pull"), "pushpull");
    double cn = cfg_double(cfg, "clip-norm"); /* > 0 when set: worker_main checks */
    int rc;
    if ((rc = open_tables(&c)) || (rc = alloc_buffers(&c, nocopy)) || (rc = rounds(&c)) ||
        (rc = final_dense(&c)) || (rc = final_sparse(&c)) ||
        (c.tf >= 0 && (rc = float_hash(&c))) || (rc = nan_push(&c)) ||
        (cn > 0 && (rc = clip_push(&c, cn)))) {
        void *bufs[] = {c.dv, c.dn, c.sv, c.sk, c.dk, c.ok, c.ov, c.fv};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            app_free_after_close(bufs[i]);
        return rc;
    }
    reopen(&c);
    free(c.dv);
    free(c.dn); /* the barrier waited for its push */
    free(c.sv);
    free(c.sk);
    free(c.dk);
    free(c.ok);
    free(c.ov);
    free(c.fv);
    if (c.status) {
        printf("check FAILED: %s\n", c.detail);
        return 1;
    }
    printf("check ok: %d workers, %d servers, %d rounds, %s, %" PRIu64 " dense + %" PRIu64
           " sparse keys exact\n",
           c.W, pskv_num_servers(w), c.R, c.cons, c.n, c.n + c.own_n);
    fflush(stdout);
    return 0;
}
