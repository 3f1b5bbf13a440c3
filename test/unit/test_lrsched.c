/* worker/apps/train/lrsched.c: --lr-schedule's factors and --lr-warmup's ramp. */
#define _GNU_SOURCE /* M_PI */
#include "train/lrsched.h"
#include "suites.h"

#include <math.h>

START_TEST(schedules)
{
    lr_sched s;
    ck_assert_int_eq(lrsched_parse("const", &s), 0);
    ck_assert_double_eq(lrsched_factor(&s, 0, 100, 4), 1.0);
    ck_assert_double_eq(lrsched_factor(&s, 399, 100, 4), 1.0);
    ck_assert_int_eq(lrsched_parse("linear", &s), 0);
    ck_assert_double_eq_tol(lrsched_factor(&s, 100, 100, 4), 0.75, 1e-12);
    ck_assert_int_eq(lrsched_parse("cosine", &s), 0);
    ck_assert_double_eq_tol(lrsched_factor(&s, 200, 100, 4), 0.5, 1e-12);
    ck_assert_int_eq(lrsched_parse("exp:0.5", &s), 0);
    ck_assert_double_eq_tol(lrsched_factor(&s, 150, 100, 4), pow(0.5, 1.5), 1e-12);
    ck_assert_int_eq(lrsched_parse("exp:0", &s), -1);
    ck_assert_int_eq(lrsched_parse("exp:1.5", &s), -1);
    ck_assert_int_eq(lrsched_parse("exp:", &s), -1);
    ck_assert_int_eq(lrsched_parse("steps", &s), -1);
}
END_TEST

/* Over the first E epochs the factor rises linearly, (step + 1) / ceil(E x steps
 * per epoch), times the schedule's; from there it is the schedule's alone. */
START_TEST(warmup_ramp)
{
    lr_sched s;
    ck_assert_int_eq(lrsched_parse("const", &s), 0);
    ck_assert_double_eq(s.warmup, 0); /* parsing resets it */
    s.warmup = 0.5;                   /* 50 steps of 100 an epoch */
    ck_assert_double_eq_tol(lrsched_factor(&s, 0, 100, 4), 1.0 / 50, 1e-12);
    ck_assert_double_eq_tol(lrsched_factor(&s, 24, 100, 4), 0.5, 1e-12);
    ck_assert_double_eq(lrsched_factor(&s, 49, 100, 4), 1.0);
    ck_assert_double_eq(lrsched_factor(&s, 50, 100, 4), 1.0);
    for (int64_t k = 1; k < 50; k++) /* rising, never past 1 */
        ck_assert(lrsched_factor(&s, k, 100, 4) > lrsched_factor(&s, k - 1, 100, 4));
    /* chained with a decay: the product of the two */
    ck_assert_int_eq(lrsched_parse("cosine", &s), 0);
    s.warmup = 1;
    double c = 0.5 * (1 + cos(M_PI * 9.0 / 400));
    ck_assert_double_eq_tol(lrsched_factor(&s, 9, 100, 4), c * 10 / 100, 1e-12);
    ck_assert_double_eq_tol(lrsched_factor(&s, 200, 100, 4), 0.5, 1e-12);
    /* a fraction of a step rounds up: E = 0.001 of 100 steps is one step, factor 1 */
    ck_assert_int_eq(lrsched_parse("const", &s), 0);
    s.warmup = 0.001;
    ck_assert_double_eq(lrsched_factor(&s, 0, 100, 4), 1.0);
}
END_TEST

START_TEST(warmup_bounds)
{
    ck_assert_int_eq(lrsched_check_warmup(0, 1), 0);
    ck_assert_int_eq(lrsched_check_warmup(0.5, 1), 0);
    ck_assert_int_eq(lrsched_check_warmup(5.99, 6), 0);
    ck_assert_int_eq(lrsched_check_warmup(6, 6), -1);  /* never ends within the run */
    ck_assert_int_eq(lrsched_check_warmup(-1, 6), -1);
    ck_assert_int_eq(lrsched_check_warmup(NAN, 6), -1);
}
END_TEST

Suite *lrsched_suite(void)
{
    Suite *s = suite_create("lrsched");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, schedules);
    tcase_add_test(tc, warmup_ramp);
    tcase_add_test(tc, warmup_bounds);
    suite_add_tcase(s, tc);
    return s;
}
