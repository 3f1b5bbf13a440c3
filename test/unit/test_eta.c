/* worker/apps/train/eta.c: --estimate's arithmetic (eta_estimate): the steps timed
 * and the warm-up, the evaluations counted once, the blocks' trimmed mean, the
 * later of this worker's and the slowest worker's steps. */
#define _GNU_SOURCE
#include "train/eta.h"
#include "suites.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MS 1000000LL
#define S 1000000000LL

/* eta_estimate's numbers, read back from the line it prints. */
typedef struct est {
    double total, setup, step_ms, train, ev, final, compute_ms, eff, slow_ms;
    long long warm, left, loop_evals, timed;
} est;

static void estimate(const eta *e, int64_t setup_ns, int64_t mine_ns, int64_t slowest_ns, est *r)
{
    char line[1024] = "";
    fflush(stdout);
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    int keep = dup(1);
    ck_assert_int_ge(keep, 0);
    ck_assert_int_ge(dup2(fileno(f), 1), 0);
    eta_estimate(e, setup_ns, mine_ns, slowest_ns); /* flushes stdout */
    ck_assert_int_ge(dup2(keep, 1), 0);
    close(keep);
    rewind(f);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    fclose(f);
    int n = sscanf(line, "estimate: predicted wall time %lf s (setup %lf s with %lld warm-up "
                   "steps, %lld steps x %lf ms = %lf s, %lld evaluations x %lf s, the final "
                   "one %lf s); compute-only step %lf ms; scaling efficiency %lf (from %lld "
                   "steps timed); the slowest worker's step %lf ms",
                   &r->total, &r->setup, &r->warm, &r->left, &r->step_ms, &r->train,
                   &r->loop_evals, &r->ev, &r->final, &r->compute_ms, &r->eff, &r->timed,
                   &r->slow_ms);
    ck_assert_msg(n == 13, "parsed %d fields of: %s", n, line);
}

/* A job of 1000 steps a worker (200 an epoch), W = 2 of 32 examples, 5 evaluations
 * (4 in the loop and the final one): --estimate warms up 100 steps and times 200,
 * in 10 blocks of 20. */
static void job(eta *e)
{
    eta_init(e, 1000, 200, 5, 2, 32, 0);
    ck_assert_int_eq(e->block_len, 20);
    e->warm_steps = eta_estimate_warmup(1000);
    e->steps = eta_estimate_steps(1000);
    e->compute_ns = 200 * 10 * MS; /* 10 ms a step */
}

START_TEST(counts)
{
    ck_assert_int_eq(eta_estimate_steps(1000), 200); /* a fifth */
    ck_assert_int_eq(eta_estimate_steps(100), ETA_ESTIMATE_MIN);
    ck_assert_int_eq(eta_estimate_steps(100000), ETA_ESTIMATE_MAX);
    ck_assert_int_eq(eta_estimate_warmup(1000), 100); /* a tenth */
    ck_assert_int_eq(eta_estimate_warmup(30), ETA_ESTIMATE_WARMUP_MIN);
    ck_assert_int_eq(eta_estimate_warmup(100000), ETA_ESTIMATE_WARMUP_MAX);
}
END_TEST

/* Blocks 8 x 20 ms, one 10 ms, one 50 ms: mean 22, trimmed mean (without the
 * fastest and the slowest) 20, so the steps' time is scaled by 20/22. One
 * evaluation of 0.3 s among the timed steps, the final one 0.5 s. */
START_TEST(trimmed_and_evals_once)
{
    eta e;
    job(&e);
    for (int i = 0; i < ETA_BLOCKS; i++)
        e.block_ns[i] = 20 * 20 * MS; /* 20 ms a step */
    e.block_ns[3] = 20 * 10 * MS;
    e.block_ns[7] = 20 * 50 * MS;
    e.nblocks = ETA_BLOCKS;
    eta_eval(&e, 300 * MS);
    eta_eval(&e, 500 * MS);
    est r;
    /* mine: 4.7 s less the loop's evaluation 0.3 = 4.4 s / 200 = 22 ms x 20/22 =
     * 20 ms; slowest: 5.3 - 0.3 = 5.0 s / 200 = 25 ms x 20/22 = 22.727 ms */
    estimate(&e, 2 * S, 4700 * MS, 5300 * MS, &r);
    ck_assert_double_eq_tol(r.step_ms, 20.0, 1e-9);
    ck_assert_double_eq_tol(r.slow_ms, 25.0 * 20 / 22, 1e-3);
    ck_assert_int_eq(r.warm, 100);
    ck_assert_int_eq(r.left, 900); /* the warm-up steps are in the setup's time */
    ck_assert_double_eq_tol(r.train, 18.0, 1e-9);
    ck_assert_int_eq(r.loop_evals, 4);
    ck_assert_double_eq_tol(r.ev, 0.3, 1e-9);
    ck_assert_double_eq_tol(r.final, 0.5, 1e-9);
    ck_assert_double_eq_tol(r.compute_ms, 10.0, 1e-9);
    ck_assert_double_eq_tol(r.eff, 0.5, 1e-9); /* 20 ms a step of 10 ms compute */
    ck_assert_int_eq(r.timed, 200);
    /* the slowest worker's 900 x 22.727 ms = 20.45 s outlast this worker's 18 s and
     * 4 x 0.3 s: 2 + 20.45 + the final 0.5, printed to 0.01 s */
    ck_assert_double_eq_tol(r.total, 22.95, 1e-9);
    /* a slowest worker at 4.9 s (20.909 ms a step, 18.8 s): this worker's 19.2 s */
    estimate(&e, 2 * S, 4700 * MS, 4900 * MS, &r);
    ck_assert_double_eq_tol(r.total, 21.7, 1e-9);
}
END_TEST

/* Only the final evaluation timed: it times the loop's too; none: they cost 0.
 * Fewer than 3 blocks: no trimming. */
START_TEST(final_eval_only)
{
    eta e;
    job(&e);
    e.nblocks = 2;
    e.block_ns[0] = 1 * MS;
    e.block_ns[1] = 100 * MS;
    eta_eval(&e, 400 * MS);
    est r;
    estimate(&e, 1 * S, 4000 * MS, 4000 * MS, &r); /* 20 ms a step, untrimmed */
    ck_assert_double_eq_tol(r.step_ms, 20.0, 1e-9);
    ck_assert_double_eq_tol(r.ev, 0.4, 1e-9);
    ck_assert_double_eq_tol(r.final, 0.4, 1e-9);
    ck_assert_double_eq_tol(r.total, 1 + 18 + 4 * 0.4 + 0.4, 1e-9); /* 21.0 */
    job(&e);
    estimate(&e, 1 * S, 4000 * MS, 4000 * MS, &r);
    ck_assert_double_eq_tol(r.ev, 0, 1e-9);
    ck_assert_double_eq_tol(r.total, 19.0, 1e-9);
}
END_TEST

/* eta_step closes a block every block_len steps, ten at most, and leaves the
 * evaluations made in it out of its time. */
START_TEST(blocks)
{
    eta e;
    eta_init(&e, 1000, 200, 5, 2, 32, 0);
    eta_start(&e);
    for (int i = 0; i < 20; i++)
        eta_step(&e, MS);
    eta_eval(&e, 10 * S); /* not elapsed: the block's time goes below zero */
    for (int i = 0; i < 220; i++)
        eta_step(&e, MS);
    ck_assert_int_eq(e.nblocks, ETA_BLOCKS);
    ck_assert_int_ge(e.block_ns[0], 0);
    ck_assert_int_lt(e.block_ns[1], -9 * S);
    ck_assert_int_ge(e.block_ns[2], 0);
    ck_assert_int_eq(e.steps, 240);
    ck_assert_int_eq(e.compute_ns, 240 * MS);
}
END_TEST

Suite *eta_suite(void)
{
    Suite *s = suite_create("eta");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, counts);
    tcase_add_test(tc, trimmed_and_evals_once);
    tcase_add_test(tc, final_eval_only);
    tcase_add_test(tc, blocks);
    suite_add_tcase(s, tc);
    return s;
}
