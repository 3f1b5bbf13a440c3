/* --app admit: exercises feature admission and eviction on a sparse table
 * (docs/operations.md, "Admission and eviction") with one worker and checks what
 * the servers hold. With --admit-after N (N >= 2), N + 1 groups of GROUP keys:
 * the keys of group c (1..N+1) are pushed c times (gradient 1, updater sum, init
 * zero), each push waited for; then pskv_pull_all must find exactly the keys
 * pushed N times or more, each with value c - N + 1 (the Nth push is the first
 * applied), and a pull of the others must read 0. With --evict-after C, the
 * worker then ends C + 2 clocks, pushing only a tenth of the rows' keys in each,
 * and waits (at most 20 s) until pull_all finds only those rows: the sweep has
 * removed the others. First of all, a dense table with the same settings must be
 * refused at TABLE_OPEN (the error is printed).
 *
 * --replay-wait FILE: after the admission phase and again after the eviction
 * phase the worker prints "admit: waiting for FILE.1" (.2) and waits (at most
 * 120 s) for that file, so a test can read pskvctl status (or kill a server) in
 * between; after the first pause the rows are checked again. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps.h"
#include "timeutil.h"

/* Keys per group: few enough that the sketch's over-count (cmsketch.h) admits
 * no key early but with negligible probability, so the check can be exact. */
enum { GROUP = 5000 };

static int fail(pskv_worker *w, const char *what, int rc)
{
    return app_fail("admit", w, what, rc);
}

#define KEY_MUL 0x9e3779b97f4a7c15ULL

static uint64_t key_of(uint64_t i) { return KEY_MUL * (i + 1) ^ 0xadd17ULL; }

/* The i of key_of(i) (KEY_MUL is odd, so it has an inverse mod 2^64: Newton's
 * iteration doubles the correct low bits each step), or a value >= any count. */
static uint64_t index_of(uint64_t key)
{
    uint64_t inv = KEY_MUL;
    for (int i = 0; i < 5; i++)
        inv *= 2 - KEY_MUL * inv;
    return inv * (key ^ 0xadd17ULL) - 1;
}

static int push_wait(pskv_worker *w, int t, const uint64_t *keys, size_t n, const float *g)
{
    int64_t ts = pskv_push(w, t, keys, n, g);
    return ts < 0 ? (int)ts : pskv_wait(w, ts, 60000);
}

/* Rows the servers hold: how many, and (when want is given) that each is a key
 * with want(key) > 0 and that value. Returns the count or a negated error. */
static int64_t held_rows(pskv_worker *w, int t, const float *want, uint64_t nkeys, int *bad)
{
    uint64_t *keys;
    float *vals;
    size_t n;
    int rc = -PSKV_ENOTREADY;
    /* a server still being filled after a view change answers PSKV_ENOTREADY */
    for (int i = 0; i < 40 && (rc == -PSKV_ENOTREADY || rc == -PSKV_EREFUSED); i++) {
        if (i) {
            tu_sleep_ms(250);
        }
        rc = pskv_pull_all(w, t, &keys, &vals, &n, 20000);
    }
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < n && want; i++) {
        uint64_t k = index_of(keys[i]);
        if (k >= nkeys || want[k] <= 0 || vals[i] != want[k]) {
            if (!(*bad)++)
                fprintf(stderr, "admit: row of key %#" PRIx64 " holds %g, want %g\n", keys[i],
                        (double)vals[i], k < nkeys ? (double)want[k] : -1.0);
        }
    }
    free(keys);
    free(vals);
    return (int64_t)n;
}

typedef struct admit_bufs {
    uint64_t *keys;
    float *ones, *want, *got;
} admit_bufs;

static int run_admit(pskv_worker *w, cfg_entry *cfg, const admit_bufs *b)
{
    uint32_t N = (uint32_t)cfg_int(cfg, "admit-after"), C = (uint32_t)cfg_int(cfg, "evict-after");
    uint64_t G = GROUP, nk = G * (N + 1);
    uint64_t *keys = b->keys;
    float *ones = b->ones, *want = b->want, *got = b->got;
    pskv_table_opts o;
    pskv_table_opts_init(&o);
    o.kind = PSKV_SPARSE;
    o.updater = "sum";
    o.admit_after = N;
    o.evict_after = C;
    /* the same settings on a dense table are refused at TABLE_OPEN */
    pskv_table_opts d = o;
    d.kind = PSKV_DENSE;
    d.size = 10;
    int td = pskv_table_open(w, "admit.dense", &d);
    printf("admit: dense table with admit_after %u, evict_after %u: %s (%s)\n", N, C,
           td < 0 ? pskv_strerror(td) : "opened", td < 0 ? pskv_last_error(w) : "");
    if ((N > 1 || C) && td != -PSKV_EINVAL)
        return 1;
    int t = pskv_table_open(w, "admit.w", &o);
    if (t < 0)
        return fail(w, "open the table", t);
    for (uint64_t i = 0; i < nk; i++) {
        keys[i] = key_of(i);
        ones[i] = 1.0f;
        uint32_t c = (uint32_t)(i / G) + 1; /* pushes of key i */
        want[i] = c >= N ? (float)(c - (N ? N : 1) + 1) : 0.0f;
    }
    /* round r pushes the groups c >= r: the keys from (r - 1) * G on */
    for (uint32_t r = 1; r <= N + 1; r++) {
        int rc = push_wait(w, t, keys + (uint64_t)(r - 1) * G, nk - (uint64_t)(r - 1) * G, ones);
        if (rc < 0)
            return fail(w, "push", rc);
    }
    int bad = 0;
    int64_t rows = held_rows(w, t, want, nk, &bad);
    if (rows < 0)
        return fail(w, "pull_all", (int)rows);
    uint64_t expect = 0;
    for (uint64_t i = 0; i < nk; i++)
        expect += want[i] > 0;
    int64_t ts = pskv_pull(w, t, keys, nk, got);
    int rc = ts < 0 ? (int)ts : pskv_wait(w, ts, 60000);
    if (rc < 0)
        return fail(w, "pull", rc);
    for (uint64_t i = 0; i < nk; i++)
        bad += got[i] != want[i];
    printf("admit: %" PRId64 " rows for %" PRIu64 " keys pushed %u or more times of %" PRIu64
           " (admit_after %u)%s\n", rows, expect, N, nk, N, bad ? ": WRONG" : "");
    if (bad || (uint64_t)rows != expect ||
        app_wait_file_n("admit", cfg_str(cfg, "replay-wait"), 1) < 0)
        return 1;
    if (*cfg_str(cfg, "replay-wait")) { /* the same rows after whatever the pause saw */
        /* a pull first: it learns a new view and goes to the new owners, which
         * pskv_pull_all does not (it asks the servers of the view it starts in) */
        ts = pskv_pull(w, t, keys, nk, got);
        rc = ts < 0 ? (int)ts : pskv_wait(w, ts, 60000);
        if (rc < 0)
            return fail(w, "pull after the pause", rc);
        for (uint64_t i = 0; i < nk; i++)
            bad += got[i] != want[i];
        rows = held_rows(w, t, want, nk, &bad);
        printf("admit: %" PRId64 " rows after the pause%s\n", rows, bad ? ": WRONG" : "");
        if (rows < 0)
            return fail(w, "pull_all", (int)rows);
        if (bad || (uint64_t)rows != expect)
            return 1;
    }
    if (C) {
        /* keep a tenth of the rows: the last group's first keys */
        uint64_t keep = G / 10 ? G / 10 : 1, from = nk - G;
        for (uint32_t i = 0; i < C + 2; i++) {
            if ((rc = pskv_clock(w)) < 0 || (rc = push_wait(w, t, keys + from, keep, ones)) < 0)
                return fail(w, "clock and push", rc);
        }
        for (int i = 0; i < 200 && (rows = held_rows(w, t, NULL, 0, &bad)) > (int64_t)keep; i++) {
            tu_sleep_ms(100);
        }
        printf("admit: %" PRId64 " rows after %u clocks without pushes to the others (want %"
               PRIu64 ", evict_after %u)\n", rows, C + 2, keep, C);
        if (rows != (int64_t)keep || app_wait_file_n("admit", cfg_str(cfg, "replay-wait"), 2) < 0)
            return 1;
    }
    printf("admit ok\n");
    return 0;
}

int app_admit(pskv_worker *w, cfg_entry *cfg)
{
    uint64_t nk = GROUP * ((uint64_t)cfg_int(cfg, "admit-after") + 1);
    admit_bufs b = {malloc(nk * sizeof *b.keys), malloc(nk * sizeof *b.ones),
                    calloc(nk, sizeof *b.want), malloc(nk * sizeof *b.got)};
    int rc = b.keys && b.ones && b.want && b.got ? run_admit(w, cfg, &b)
                                                 : fail(w, "allocate", -PSKV_ENOMEM);
    free(b.keys);
    free(b.ones);
    free(b.want);
    free(b.got);
    return rc;
}
