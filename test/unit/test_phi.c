/* Tests of the phi-accrual detector (common/phi.c) against values worked out by
 * hand from phi = log10(1 + e^z), z = y (1.5976 + 0.070566 y^2), y = (t - mean)/sd:
 *   y = 0: log10 2 = 0.30103;  y = 1: z = 1.668166, log10(1 + 5.30219) = 0.79951;
 *   y = -1: log10(1 + e^-1.668166) = 0.07503;  y = 5: z = 16.8201, 7.29995;
 *   phi 8 with mean 100, sd 50: z = ln(10^8 - 1) = 18.42068, y = 5.22599,
 *   t = 361.30 ms; phi 1: z = ln 9 = 2.19722, y = 1.28222, t = 164.11 ms. */
#include <math.h>

#include "phi.h"
#include "suites.h"

START_TEST(phi_prior_when_empty)
{
    phi_window w;
    phi_init(&w, 100, 25);
    ck_assert_double_eq_tol(phi_mean(&w), 100, 1e-9);
    ck_assert_double_eq_tol(phi_sd(&w), 25, 1e-9);
    ck_assert_double_eq_tol(phi_value(&w, 100), 0.30103, 1e-5); /* at the mean: half */
}
END_TEST

START_TEST(phi_hand_values)
{
    phi_window w;
    phi_init(&w, 100, 1);
    double g[] = {80, 120, 90, 110}; /* mean 100, population sd sqrt(250) = 15.8114 */
    for (int i = 0; i < 4; i++)
        phi_add(&w, g[i]);
    ck_assert_double_eq_tol(phi_mean(&w), 100, 1e-9);
    ck_assert_double_eq_tol(phi_sd(&w), 15.811388, 1e-6);
    double sd = phi_sd(&w);
    ck_assert_double_eq_tol(phi_value(&w, 100), 0.30103, 1e-5);
    ck_assert_double_eq_tol(phi_value(&w, 100 + sd), 0.79951, 1e-5);
    ck_assert_double_eq_tol(phi_value(&w, 100 - sd), 0.07503, 1e-5);
    ck_assert_double_eq_tol(phi_value(&w, 100 + 5 * sd), 7.29995, 1e-5);
    /* rises with silence, and stays finite far out */
    ck_assert(phi_value(&w, 1e6) > 1e3 && isfinite(phi_value(&w, 1e6)));
}
END_TEST

START_TEST(phi_sd_floor)
{
    phi_window w;
    phi_init(&w, 100, 50);
    for (int i = 0; i < 10; i++)
        phi_add(&w, 100); /* perfectly steady: sd 0, floored at 50 */
    ck_assert_double_eq_tol(phi_sd(&w), 50, 1e-9);
    ck_assert_double_eq_tol(phi_time_to(&w, 8), 361.2993, 1e-3);
    ck_assert_double_eq_tol(phi_time_to(&w, 1), 164.1108, 1e-3);
    ck_assert_double_eq_tol(phi_value(&w, phi_time_to(&w, 8)), 8, 1e-9);
    ck_assert_double_eq_tol(phi_value(&w, phi_time_to(&w, 16)), 16, 1e-9);
}
END_TEST

/* A loaded node's jitter buys it time: the same silence is less suspicious. */
START_TEST(phi_jitter_gives_time)
{
    phi_window calm, busy;
    phi_init(&calm, 100, 10);
    phi_init(&busy, 100, 10);
    for (int i = 0; i < 40; i++) {
        phi_add(&calm, 100);
        phi_add(&busy, i % 2 ? 20 : 180); /* same mean, sd 80 */
    }
    ck_assert_double_eq_tol(phi_sd(&busy), 80, 1e-9);
    ck_assert(phi_value(&busy, 300) < phi_value(&calm, 300));
    ck_assert(phi_time_to(&busy, 8) > 3 * phi_time_to(&calm, 8));
}
END_TEST

/* The window forgets: a huge gap (a resume) is one sample of 64 and ages out. */
START_TEST(phi_window_rolls)
{
    phi_window w;
    phi_init(&w, 100, 10);
    phi_add(&w, 60000);
    ck_assert_uint_eq(w.n, 1);
    for (int i = 0; i < PHI_WINDOW; i++)
        phi_add(&w, 100);
    ck_assert_uint_eq(w.n, PHI_WINDOW);
    ck_assert_uint_eq(w.total, PHI_WINDOW + 1);
    ck_assert_double_eq_tol(phi_mean(&w), 100, 1e-9);
    ck_assert_double_eq_tol(phi_sd(&w), 10, 1e-9);
}
END_TEST

Suite *phi_suite(void)
{
    Suite *s = suite_create("phi");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, phi_prior_when_empty);
    tcase_add_test(tc, phi_hand_values);
    tcase_add_test(tc, phi_sd_floor);
    tcase_add_test(tc, phi_jitter_gives_time);
    tcase_add_test(tc, phi_window_rolls);
    suite_add_tcase(s, tc);
    return s;
}
