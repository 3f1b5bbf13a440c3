/* --app resume-check: the checkpoint and resume workload of the fault tests.
 *
 * A fresh job: every worker pushes --rounds rounds (integers to a dense and a
 * sparse `sum` table, gradients to a dense adagrad table and a sparse adam table,
 * whose optimizer state then matters), saying its progress after each; after
 * round R/2 and round R the
 * workers meet at a barrier and rank 0 takes a checkpoint and prints
 *   resume-check: checkpoint N at step S digest D
 * (D hashes every value pulled right after it). Then one more round, and rank 0
 * prints "resume-check: after step S digest D2"; the job then waits to be killed.
 * A resumed job (pskv-scheduler --resume): every worker prints
 *   resume-check: resumed at step S
 * rank 0 prints the digest of the values as loaded (it must equal the fresh
 * job's digest at that checkpoint), all push the same next round, and rank 0
 * prints the after-digest (equal to the fresh job's when resumed from its last
 * checkpoint: the adagrad and adam state was restored, not only the values). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps.h"
#include "ring.h"
#include "timeutil.h"

#define KEYS 2000
#define TMO 120000

typedef struct rc_state {
    pskv_worker *w;
    int td, ts, ta, tm, rank; /* tm: a sparse adam table (m, v and step restored) */
    uint64_t sk[KEYS];
    float dv[KEYS * 2], sv[KEYS], av[KEYS];
} rc_state;

static int wait_ok(pskv_worker *w, int64_t t) { return t < 0 ? (int)t : pskv_wait(w, t, TMO); }

/* One round; ada 0 leaves the adagrad table alone (the step after a checkpoint
 * is pushed there by rank 0 only, so its result does not depend on the order in
 * which two workers' updates arrive). */
static int round_push(rc_state *s, int64_t step, int ada)
{
    for (uint64_t i = 0; i < KEYS; i++) {
        s->dv[2 * i] = (float)(s->rank + 1);
        s->dv[2 * i + 1] = (float)((step + (int64_t)i) % 3);
        s->sv[i] = (float)(s->rank + 1 + step % 2);
        s->av[i] = (float)((double)((step * 7 + (int64_t)i + s->rank) % 11) / 11.0 - 0.45);
    }
    int64_t a = pskv_push(s->w, s->td, NULL, KEYS, s->dv);
    int64_t b = pskv_push(s->w, s->ts, s->sk, KEYS, s->sv);
    int64_t c = ada ? pskv_push(s->w, s->ta, NULL, KEYS, s->av) : 0;
    int64_t d = ada ? pskv_push(s->w, s->tm, s->sk, KEYS, s->av) : 0;
    int rc = wait_ok(s->w, a);
    if (rc == 0)
        rc = wait_ok(s->w, b);
    if (rc == 0 && ada)
        rc = wait_ok(s->w, c);
    if (rc == 0 && ada)
        rc = wait_ok(s->w, d);
    return rc;
}

/* FNV-1a over the bits of every value of the four tables. */
static int digest(rc_state *s, uint64_t *out)
{
    uint64_t h = APP_DIGEST_START;
    int rc = wait_ok(s->w, pskv_pull(s->w, s->tm, s->sk, KEYS, s->av));
    h = app_digest_add(h, s->av, sizeof s->av);
    if (rc < 0)
        return rc;
    rc = wait_ok(s->w, pskv_pull(s->w, s->td, NULL, KEYS, s->dv));
    if (rc == 0)
        rc = wait_ok(s->w, pskv_pull(s->w, s->ts, s->sk, KEYS, s->sv));
    if (rc == 0)
        rc = wait_ok(s->w, pskv_pull(s->w, s->ta, NULL, KEYS, s->av));
    const float *arrs[3] = {s->dv, s->sv, s->av};
    size_t lens[3] = {sizeof s->dv, sizeof s->sv, sizeof s->av};
    for (int k = 0; k < 3; k++)
        h = app_digest_add(h, arrs[k], lens[k]);
    *out = h;
    return rc;
}

static int fail(const char *what, int rc, pskv_worker *w)
{
    printf("resume-check FAILED: %s: %s (%s)\n", what, pskv_strerror(rc), pskv_last_error(w));
    return 1;
}

/* The step after a checkpoint, the same in the original job and a resumed one:
 * a round (adagrad by rank 0 only), a barrier, and rank 0's digest of the result. */
static int next_step(rc_state *s, int64_t step)
{
    int rc;
    uint64_t h;
    if ((rc = round_push(s, step, s->rank == 0)) < 0)
        return fail("push", rc, s->w);
    if ((rc = pskv_barrier(s->w, TMO)) < 0)
        return fail("barrier", rc, s->w);
    if (s->rank == 0) {
        if ((rc = digest(s, &h)) < 0)
            return fail("pull", rc, s->w);
        printf("resume-check: after step %" PRId64 " digest %016" PRIx64 "\n", step, h);
    }
    return 0;
}

int app_resume_check(pskv_worker *w, cfg_entry *cfg)
{
    rc_state *s = calloc(1, sizeof *s);
    if (!s)
        return 1;
    s->w = w;
    s->rank = pskv_rank(w);
    int R = (int)cfg_int(cfg, "rounds");
    pskv_table_opts o;
    pskv_table_opts_init(&o);
    o.updater = "sum";
    o.size = KEYS;
    o.width = 2;
    s->td = pskv_table_open(w, "resume.dense", &o);
    o.kind = PSKV_SPARSE;
    o.width = 1;
    s->ts = pskv_table_open(w, "resume.sparse", &o);
    pskv_table_opts a;
    pskv_table_opts_init(&a);
    a.size = KEYS;
    a.updater = "adagrad";
    a.lr = 0.1f;
    a.init = "uniform";
    a.init_scale = 1.0f;
    s->ta = pskv_table_open(w, "resume.adagrad", &a);
    a.kind = PSKV_SPARSE;
    a.updater = "adam";
    a.init = "zero";
    s->tm = pskv_table_open(w, "resume.adam", &a);
    if (s->td < 0 || s->ts < 0 || s->ta < 0 || s->tm < 0)
        return fail("open tables",
                    s->td < 0 ? s->td : s->ts < 0 ? s->ts : s->ta < 0 ? s->ta : s->tm, w);
    for (uint64_t i = 0; i < KEYS; i++)
        s->sk[i] = ring_mix64(i * 31 + 7);
    int rc;
    uint64_t h;
    int64_t step = 0, epoch = 0, pos = 0;
    if (pskv_resume_progress(w, &epoch, &step, &pos)) {
        printf("resume-check: rank %d resumed at step %" PRId64 " (epoch %" PRId64
               ", position %" PRId64 ")\n", s->rank, step, epoch, pos);
        if ((rc = pskv_barrier(w, TMO)) < 0)
            return fail("barrier", rc, w);
        if (s->rank == 0) {
            if ((rc = digest(s, &h)) < 0)
                return fail("pull", rc, w);
            printf("resume-check: resumed digest %016" PRIx64 "\n", h);
        }
        if ((rc = pskv_barrier(w, TMO)) < 0)
            return fail("barrier", rc, w);
        rc = next_step(s, step);
        free(s);
        return rc;
    }
    for (step = 0; step < R; step++) {
        if (app_stop_signal)
            return app_stopped("resume-check");
        if ((rc = round_push(s, step, 1)) < 0)
            return fail("push", rc, w);
        pskv_set_progress(w, 0, step + 1, (step + 1) * 100);
        if (step + 1 != R / 2 && step + 1 != R)
            continue;
        if ((rc = pskv_barrier(w, TMO)) < 0)
            return fail("barrier", rc, w);
        if (s->rank == 0) {
            int64_t n = pskv_checkpoint(w, TMO);
            if (n < 0)
                return fail("checkpoint", (int)n, w);
            if ((rc = digest(s, &h)) < 0)
                return fail("pull", rc, w);
            printf("resume-check: checkpoint %" PRId64 " at step %" PRId64 " digest %016" PRIx64
                   "\n", n, step + 1, h);
        }
        if ((rc = pskv_barrier(w, TMO)) < 0)
            return fail("barrier", rc, w);
    }
    if ((rc = next_step(s, R)) != 0)
        return rc;
    fflush(stdout);
    /* the test kills the whole job now; bounded if it does not */
    for (int i = 0; i < 600 && !app_stop_signal; i++)
        tu_sleep_ms(100);
    free(s);
    return app_stop_signal ? app_stopped("resume-check") : 1;
}
