/* Tests of gradient clipping by global norm (worker/lib/wclip.c, pskv_clip_norm):
 * a gradient within the bound is untouched, a larger one is scaled to the bound
 * along its own direction, the norm is global over several arrays, huge finite
 * values do not overflow it, non-finite values and bad bounds are left alone. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "pskv.h"
#include "suites.h"

static double norm_of(const float *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)v[i] * v[i];
    return sqrt(s);
}

START_TEST(within_bound_untouched)
{
    float g[4] = {3, 0, -4, 0}, orig[4];
    memcpy(orig, g, sizeof g);
    float *parts[] = {g};
    size_t lens[] = {4};
    double n = -1;
    ck_assert_int_eq(pskv_clip_norm(parts, lens, 1, 5.0, &n), 0); /* norm 5 exactly: kept */
    ck_assert_double_eq_tol(n, 5.0, 1e-12);
    ck_assert_mem_eq(g, orig, sizeof g);
    ck_assert_int_eq(pskv_clip_norm(parts, lens, 1, 100.0, NULL), 0);
    ck_assert_mem_eq(g, orig, sizeof g);
}
END_TEST

START_TEST(scaled_to_bound_along_direction)
{
    enum { N = 1000 };
    static float g[N], orig[N];
    for (int i = 0; i < N; i++)
        g[i] = orig[i] = (float)((i % 7) - 3) * 1e6f + (float)i;
    float *parts[] = {g};
    size_t lens[] = {N};
    double before = 0, want = norm_of(orig, N);
    ck_assert_int_eq(pskv_clip_norm(parts, lens, 1, 2.5, &before), 1);
    ck_assert_double_eq_tol(before, want, want * 1e-12);
    ck_assert_double_eq_tol(norm_of(g, N), 2.5, 2.5 * 1e-6);
    for (int i = 0; i < N; i++) /* the same direction: each value scaled alike */
        LOOP_ASSERT(fabs((double)g[i] - (double)orig[i] * 2.5 / want) <=
                        1e-6 * fabs((double)orig[i] * 2.5 / want) + 1e-12,
                    "value %d: %g, expected %g", i, (double)g[i],
                    (double)orig[i] * 2.5 / want);
}
END_TEST

/* The norm of all arrays together decides, and every array gets the same factor:
 * two arrays each within the bound, but not together. */
START_TEST(global_over_parts)
{
    float a[2] = {3, 0}, b[3] = {0, 4, 0};
    float *parts[] = {a, b};
    size_t lens[] = {2, 3};
    double n = 0;
    ck_assert_int_eq(pskv_clip_norm(parts, lens, 2, 1.0, &n), 1);
    ck_assert_double_eq_tol(n, 5.0, 1e-12);
    ck_assert_float_eq_tol(a[0], 0.6f, 1e-6f);
    ck_assert_float_eq_tol(b[1], 0.8f, 1e-6f);
    ck_assert_float_eq(a[1], 0.0f);
    ck_assert_int_eq(pskv_clip_norm(parts, lens, 0, 1.0, &n), 0); /* no arrays: norm 0 */
    ck_assert_double_eq(n, 0.0);
}
END_TEST

/* Values near FLT_MAX: their squares overflow float but not the double sum. */
START_TEST(huge_values_do_not_overflow)
{
    float g[8];
    for (int i = 0; i < 8; i++)
        g[i] = (i & 1) ? -FLT_MAX : FLT_MAX;
    float *parts[] = {g};
    size_t lens[] = {8};
    double n = 0;
    ck_assert_int_eq(pskv_clip_norm(parts, lens, 1, 1.0, &n), 1);
    ck_assert(isfinite(n));
    ck_assert_double_eq_tol(norm_of(g, 8), 1.0, 1e-6);
    for (int i = 0; i < 8; i++)
        ck_assert_float_eq_tol(g[i], (i & 1) ? -0.35355339f : 0.35355339f, 1e-6f);
}
END_TEST

/* A NaN or infinity: nothing scaled (the server refuses such a push). */
START_TEST(non_finite_left_alone)
{
    float g[3] = {1e9f, NAN, 2e9f};
    float *parts[] = {g};
    size_t lens[] = {3};
    double n = 0;
    ck_assert_int_eq(pskv_clip_norm(parts, lens, 1, 1.0, &n), 0);
    ck_assert(!isfinite(n));
    ck_assert_float_eq(g[0], 1e9f);
    ck_assert_float_eq(g[2], 2e9f);
    g[1] = INFINITY;
    ck_assert_int_eq(pskv_clip_norm(parts, lens, 1, 1.0, NULL), 0);
    ck_assert_float_eq(g[0], 1e9f);
}
END_TEST

START_TEST(bad_bound_refused)
{
    float g[2] = {10, 10};
    float *parts[] = {g};
    size_t lens[] = {2};
    ck_assert_int_eq(pskv_clip_norm(parts, lens, 1, 0.0, NULL), -PSKV_EINVAL);
    ck_assert_int_eq(pskv_clip_norm(parts, lens, 1, -1.0, NULL), -PSKV_EINVAL);
    ck_assert_int_eq(pskv_clip_norm(parts, lens, 1, NAN, NULL), -PSKV_EINVAL);
    ck_assert_int_eq(pskv_clip_norm(parts, lens, 1, INFINITY, NULL), -PSKV_EINVAL);
    ck_assert_float_eq(g[0], 10.0f);
}
END_TEST

Suite *clip_suite(void)
{
    Suite *s = suite_create("clip");
    TCase *tc = tcase_create("norm");
    tcase_add_test(tc, within_bound_untouched);
    tcase_add_test(tc, scaled_to_bound_along_direction);
    tcase_add_test(tc, global_over_parts);
    tcase_add_test(tc, huge_values_do_not_overflow);
    tcase_add_test(tc, non_finite_left_alone);
    tcase_add_test(tc, bad_bound_refused);
    suite_add_tcase(s, tc);
    return s;
}
