/* --app incr-check: the workload of incremental checkpoints (--full-every on the
 * scheduler). One worker, --check-keys K keys in a dense adagrad table and a
 * sparse adam table (with --evict-after C: its rows unpushed for C clocks are
 * evicted, so deltas carry tombstones). Round 0 pushes every key; each later
 * round s pushes about --touch percent of them (a fixed function of key and s),
 * then ends its clock. After every --checkpoint-epochs N rounds the worker
 * waits 300 ms (the servers' eviction sweeps finish), passes a barrier, takes a
 * checkpoint and prints
 *   incr-check: checkpoint N at step S digest D
 * (D hashes every value of both tables pulled right after it) and at the end
 *   incr-check: final digest D
 * A resumed job prints "incr-check: resumed at step S digest D" (D equal to the
 * digest printed at that checkpoint) and goes on to the same final digest: the
 * values and the optimizer state came back bit for bit. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "apps.h"
#include "ring.h"
#include "timeutil.h"

#define TMO 120000

typedef struct incr {
    pskv_worker *w;
    int td, ts;
    uint64_t nkeys;
    uint64_t *keys, *sub; /* the sparse keys; the keys a round pushes */
    float *dg, *sg, *vals;
    double touch;
} incr;

static int wait_ok(pskv_worker *w, int64_t t) { return t < 0 ? (int)t : pskv_wait(w, t, TMO); }

static int fail(incr *s, const char *what, int rc)
{
    printf("incr-check FAILED: %s: %s (%s)\n", what, pskv_strerror(rc), pskv_last_error(s->w));
    return 1;
}

/* Round `step`: every key (round 0) or --touch percent of them; one clock. */
static int round_push(incr *s, int64_t step)
{
    uint64_t n = 0, cut = (uint64_t)(s->touch * 100.0 + 0.5);
    for (uint64_t i = 0; i < s->nkeys; i++) {
        if (step > 0 && ring_mix64(i * 0x9e3779b97f4a7c15ULL + (uint64_t)step) % 10000 >= cut)
            continue;
        s->sub[n] = i;
        s->keys[s->nkeys + n] = s->keys[i];
        s->dg[n] = (float)((int64_t)((i * 7 + (uint64_t)step * 3) % 11) - 5) / 8.0f;
        s->sg[n] = (float)((int64_t)((i * 5 + (uint64_t)step * 2) % 13) - 6) / 16.0f;
        n++;
    }
    int64_t a = n ? pskv_push(s->w, s->td, s->sub, n, s->dg) : 0;
    int64_t b = n ? pskv_push(s->w, s->ts, s->keys + s->nkeys, n, s->sg) : 0;
    int rc = wait_ok(s->w, a);
    if (rc == 0)
        rc = wait_ok(s->w, b);
    if (rc == 0)
        rc = pskv_clock(s->w);
    return rc < 0 ? rc : 0;
}

/* FNV-1a over the bits of every value of both tables. */
static int digest(incr *s, uint64_t *out)
{
    uint64_t h = APP_DIGEST_START;
    for (int t = 0; t < 2; t++) {
        int rc = wait_ok(s->w, pskv_pull(s->w, t ? s->ts : s->td, t ? s->keys : NULL, s->nkeys,
                                         s->vals));
        if (rc < 0)
            return rc;
        h = app_digest_add(h, s->vals, s->nkeys * sizeof *s->vals);
    }
    *out = h;
    return 0;
}

/* The checkpoint after step: the sweeps finish, a barrier, the checkpoint and
 * the digest of what it holds. */
static int checkpoint(incr *s, int64_t step)
{
    uint64_t h;
    pskv_set_progress(s->w, 0, step, step);
    tu_sleep_ms(300);
    int rc = pskv_barrier(s->w, TMO);
    if (rc < 0)
        return fail(s, "barrier", rc);
    int64_t n = pskv_checkpoint(s->w, TMO);
    if (n < 0)
        return fail(s, "checkpoint", (int)n);
    if ((rc = digest(s, &h)) < 0)
        return fail(s, "pull", rc);
    printf("incr-check: checkpoint %" PRId64 " at step %" PRId64 " digest %016" PRIx64 "\n", n,
           step, h);
    fflush(stdout);
    return 0;
}

static int open_tables(incr *s, cfg_entry *cfg)
{
    pskv_table_opts o;
    pskv_table_opts_init(&o);
    o.size = s->nkeys;
    o.updater = "adagrad";
    o.lr = 0.1f;
    o.init = "uniform";
    o.init_scale = 1.0f;
    o.consistency = "async";
    s->td = pskv_table_open(s->w, "incr.dense", &o);
    o.kind = PSKV_SPARSE;
    o.updater = "adam";
    o.evict_after = (uint32_t)cfg_int(cfg, "evict-after");
    s->ts = pskv_table_open(s->w, "incr.sparse", &o);
    return s->td < 0 ? s->td : s->ts < 0 ? s->ts : 0;
}

static int run(incr *s, cfg_entry *cfg)
{
    int rc = open_tables(s, cfg);
    if (rc < 0)
        return fail(s, "open tables", rc);
    int64_t R = cfg_int(cfg, "rounds"), every = cfg_int(cfg, "checkpoint-epochs"), step = 0;
    int64_t epoch, pos;
    uint64_t h;
    if (pskv_resume_progress(s->w, &epoch, &step, &pos)) {
        if ((rc = pskv_barrier(s->w, TMO)) < 0)
            return fail(s, "barrier", rc);
        if ((rc = digest(s, &h)) < 0)
            return fail(s, "pull", rc);
        printf("incr-check: resumed at step %" PRId64 " digest %016" PRIx64 "\n", step, h);
    }
    for (; step < R; step++) {
        if (app_stop_signal)
            return app_stopped("incr-check");
        if ((rc = round_push(s, step)) < 0)
            return fail(s, "push", rc);
        if (every > 0 && (step + 1) % every == 0 && (rc = checkpoint(s, step + 1)) != 0)
            return rc;
    }
    if ((rc = digest(s, &h)) < 0)
        return fail(s, "pull", rc);
    printf("incr-check: final digest %016" PRIx64 "\n", h);
    return 0;
}

int app_incr_check(pskv_worker *w, cfg_entry *cfg)
{
    incr s = {.w = w,
              .td = -1,
              .ts = -1,
              .nkeys = (uint64_t)cfg_int(cfg, "check-keys"),
              .touch = cfg_double(cfg, "touch")};
    s.keys = malloc(2 * s.nkeys * sizeof *s.keys);
    s.sub = malloc(s.nkeys * sizeof *s.sub);
    s.dg = malloc(s.nkeys * sizeof *s.dg);
    s.sg = malloc(s.nkeys * sizeof *s.sg);
    s.vals = malloc(s.nkeys * sizeof *s.vals);
    int rc = 1;
    if (s.keys && s.sub && s.dg && s.sg && s.vals) {
        for (uint64_t i = 0; i < s.nkeys; i++)
            s.keys[i] = ring_mix64(i * 31 + 11);
        rc = run(&s, cfg);
    }
    /* a failed pull may still be in flight into vals */
    app_free_after_close(s.vals);
    free(s.keys);
    free(s.sub);
    free(s.dg);
    free(s.sg);
    return rc;
}
