/* Tests of the updaters (server/updater.c) against hand computation. Values are
 * chosen to be exact in binary floating point where the formula allows, so the
 * assertions compare exactly; adagrad's square root is compared with a tolerance. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "pskv_errors.h"
#include "suites.h"
#include "updater.h"

static upd_opts opts(upd_kind kind, float lr, float momentum, float l2, float eps)
{
    upd_opts o = {kind, lr, momentum, l2, eps};
    return o;
}

START_TEST(sum_is_exact)
{
    enum { N = 1001 }; /* odd, past any vector width */
    static float w[N], g[N];
    upd_opts o = opts(UPD_SUM, 0.5f, 0, 0, 0); /* lr plays no part in a sum */
    for (int i = 0; i < N; i++) {
        w[i] = (float)i;
        g[i] = (float)(2 * i + 1);
    }
    for (int rep = 0; rep < 3; rep++)
        upd_apply(&o, w, NULL, g, N);
    for (int i = 0; i < N; i++)
        ck_assert_float_eq(w[i], (float)(i + 3 * (2 * i + 1)));

    float one = 1e7f, inc = 1.0f; /* counters stay integers up to 2^24 */
    upd_apply(&o, &one, NULL, &inc, 1);
    ck_assert_float_eq(one, 10000001.0f);
    /* n = 0 touches nothing. */
    float z = 3;
    upd_apply(&o, &z, NULL, &inc, 0);
    ck_assert_float_eq(z, 3);
}
END_TEST

START_TEST(sgd_plain)
{
    enum { N = 37 };
    float w[N], g[N];
    for (int i = 0; i < N; i++) {
        w[i] = (float)i;
        g[i] = (float)(i % 5) - 2;
    }
    upd_opts o = opts(UPD_SGD, 0.25f, 0, 0, 0);
    ck_assert_int_eq(upd_state_per_value(&o), 0);
    upd_apply(&o, w, NULL, g, N);
    for (int i = 0; i < N; i++)
        ck_assert_float_eq(w[i], (float)i - 0.25f * ((float)(i % 5) - 2));
}
END_TEST

START_TEST(sgd_l2)
{
    /* w -= lr * (g + l2 * w): 2 - 0.5 * (1 + 0.5 * 2) = 1 */
    float w[3] = {2, -4, 0}, g[3] = {1, 0, 8};
    upd_opts o = opts(UPD_SGD, 0.5f, 0, 0.5f, 0);
    upd_apply(&o, w, NULL, g, 3);
    ck_assert_float_eq(w[0], 1.0f);
    ck_assert_float_eq(w[1], -3.0f);
    ck_assert_float_eq(w[2], -4.0f);
}
END_TEST

START_TEST(sgd_momentum_two_steps)
{
    /* v = m*v + g; w -= lr*v with m = 0.5, lr = 0.25, w0 = 1:
     * step 1, g = 2: v = 2,             w = 1 - 0.5 = 0.5
     * step 2, g = 4: v = 0.5*2 + 4 = 5,  w = 0.5 - 1.25 = -0.75 */
    upd_opts o = opts(UPD_SGD, 0.25f, 0.5f, 0, 0);
    ck_assert_int_eq(upd_state_per_value(&o), 1);
    float w[2] = {1, 10}, v[2] = {0, 0}, g1[2] = {2, -8}, g2[2] = {4, 0};
    upd_apply(&o, w, v, g1, 2);
    ck_assert_float_eq(v[0], 2.0f);
    ck_assert_float_eq(w[0], 0.5f);
    ck_assert_float_eq(w[1], 12.0f);
    upd_apply(&o, w, v, g2, 2);
    ck_assert_float_eq(v[0], 5.0f);
    ck_assert_float_eq(w[0], -0.75f);
    /* Momentum alone keeps moving w: v = -4, w = 12 + 1 = 13. */
    ck_assert_float_eq(v[1], -4.0f);
    ck_assert_float_eq(w[1], 13.0f);
}
END_TEST

START_TEST(sgd_momentum_l2)
{
    /* v = m*v + g + l2*w; w -= lr*v with m = 0.5, l2 = 0.5, lr = 0.25, w0 = 2, g = 1:
     * step 1: v = 0 + 1 + 1 = 2,          w = 2 - 0.5 = 1.5
     * step 2: v = 1 + 1 + 0.75 = 2.75,    w = 1.5 - 0.6875 = 0.8125 */
    upd_opts o = opts(UPD_SGD, 0.25f, 0.5f, 0.5f, 0);
    float w = 2, v = 0, g = 1;
    upd_apply(&o, &w, &v, &g, 1);
    ck_assert_float_eq(w, 1.5f);
    upd_apply(&o, &w, &v, &g, 1);
    ck_assert_float_eq(v, 2.75f);
    ck_assert_float_eq(w, 0.8125f);
}
END_TEST

START_TEST(adagrad_hand_computed)
{
    /* h += g*g; w -= lr*g/(sqrt(h)+eps) */
    const double lr = 0.5, eps = 1e-3;
    upd_opts o = opts(UPD_ADAGRAD, (float)lr, 0, 0, (float)eps);
    ck_assert_int_eq(upd_state_per_value(&o), 1);
    float w[2] = {1, -3}, h[2] = {0, 0};
    float g1[2] = {2, 0.5f}, g2[2] = {1, -1};
    double ew[2] = {1, -3}, eh[2] = {0, 0};
    const float *gs[2] = {g1, g2};
    for (int step = 0; step < 2; step++) {
        upd_apply(&o, w, h, gs[step], 2);
        if (step == 0) /* by hand: 1 - 0.5*2/(sqrt(4) + 0.001) */
            ck_assert_double_eq_tol(w[0], 1 - 1.0 / 2.001, 1e-6);
        for (int i = 0; i < 2; i++) {
            double gi = gs[step][i];
            eh[i] += gi * gi;
            ew[i] -= lr * gi / (sqrt(eh[i]) + (double)(float)eps);
            ck_assert_double_eq_tol(h[i], eh[i], 1e-6);
            ck_assert_double_eq_tol(w[i], ew[i], 1e-6);
        }
    }
    /* A zero gradient on fresh state leaves w alone (no 0/0). */
    float wz = 4, hz = 0, gz = 0;
    upd_apply(&o, &wz, &hz, &gz, 1);
    ck_assert_float_eq(wz, 4.0f);
}
END_TEST

/* Adagrad with l2 accumulates the regularised gradient, as updater.h says:
 * g' = g + l2*w; h += g'^2; w -= lr*g'/(sqrt(h)+eps). With w = 1, g = 1, l2 = 1,
 * lr = 1: g' = 2, h = 4, w = 1 - 2/2 = 0. */
START_TEST(adagrad_l2_as_documented)
{
    upd_opts o = opts(UPD_ADAGRAD, 1.0f, 0, 1.0f, 1e-8f);
    float w = 1, h = 0, g = 1;
    upd_apply(&o, &w, &h, &g, 1);
    ck_assert_float_eq_tol(h, 4.0f, 1e-6f);
    ck_assert_float_eq_tol(w, 0.0f, 1e-6f);
}
END_TEST

START_TEST(all_finite)
{
    enum { N = 37 };
    float v[N + 1];
    for (int i = 0; i < N; i++)
        v[i] = (float)(i - 18) * 1.5f;
    v[N] = NAN; /* past the end: never read */
    ck_assert_int_eq(upd_all_finite(v, N), 1);
    ck_assert_int_eq(upd_all_finite(v, 0), 1);

    const float ok[] = {0.0f, -0.0f, FLT_MIN, -FLT_MIN, FLT_TRUE_MIN, -FLT_TRUE_MIN, 1e-40f,
                        FLT_MAX, -FLT_MAX, 1.0f};
    ck_assert_int_eq(upd_all_finite(ok, sizeof ok / sizeof ok[0]), 1);

    uint32_t bits[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fffffffu, 0x7f800000u,
                       0xff800000u};
    /* Every position: inside blocks, at block edges and in the tail. */
    for (size_t b = 0; b < sizeof bits / sizeof bits[0]; b++) {
        for (int p = 0; p < N; p++) {
            float bad[N];
            for (int i = 0; i < N; i++)
                bad[i] = (float)i;
            memcpy(&bad[p], &bits[b], sizeof(float));
            LOOP_ASSERT(upd_all_finite(bad, N) == 0, "0x%08x at %d passed", bits[b], p);
            LOOP_ASSERT(upd_all_finite(bad, (size_t)p) == 1, "0x%08x past the end (n = %d)",
                        bits[b], p);
        }
    }
    float pinf = INFINITY, ninf = -INFINITY, qnan = NAN;
    ck_assert_int_eq(upd_all_finite(&pinf, 1), 0);
    ck_assert_int_eq(upd_all_finite(&ninf, 1), 0);
    ck_assert_int_eq(upd_all_finite(&qnan, 1), 0);
}
END_TEST

START_TEST(parse_names)
{
    ck_assert_int_eq(upd_parse("sum"), UPD_SUM);
    ck_assert_int_eq(upd_parse("sgd"), UPD_SGD);
    ck_assert_int_eq(upd_parse("adagrad"), UPD_ADAGRAD);
    ck_assert_int_eq(upd_parse("SGD"), -1);
    ck_assert_int_eq(upd_parse("adam"), -1);
    ck_assert_int_eq(upd_parse(""), -1);
    ck_assert_int_eq(upd_parse("sgd "), -1);
}
END_TEST

START_TEST(check_hyperparameters)
{
    char why[256];
    upd_opts o = opts(UPD_SGD, 0.01f, 0.9f, 1e-4f, 0);
    ck_assert_int_eq(upd_check(&o, why, sizeof why), 0);
    o = opts(UPD_SGD, 0, 0, 0, 0);
    ck_assert_int_eq(upd_check(&o, why, sizeof why), 0);
    o = opts(UPD_ADAGRAD, 0.1f, 0, 0, 1e-8f);
    ck_assert_int_eq(upd_check(&o, why, sizeof why), 0);

    struct {
        upd_opts o;
        const char *names;
    } bad[] = {
        {{UPD_SGD, -0.1f, 0, 0, 0}, "lr"},
        {{UPD_SGD, NAN, 0, 0, 0}, "lr"},
        {{UPD_SGD, INFINITY, 0, 0, 0}, "lr"},
        {{UPD_SGD, 0.1f, 1.0f, 0, 0}, "momentum"},
        {{UPD_SGD, 0.1f, 1.5f, 0, 0}, "momentum"},
        {{UPD_SGD, 0.1f, -0.1f, 0, 0}, "momentum"},
        {{UPD_SGD, 0.1f, NAN, 0, 0}, "momentum"},
        {{UPD_SGD, 0.1f, 0, -1e-3f, 0}, "l2"},
        {{UPD_SGD, 0.1f, 0, NAN, 0}, "l2"},
        {{UPD_ADAGRAD, 0.1f, 0, 0, 0}, "eps"},
        {{UPD_ADAGRAD, 0.1f, 0, 0, -1}, "eps"},
        {{UPD_ADAGRAD, 0.1f, 0, 0, NAN}, "eps"},
        {{UPD_SUM, -1, 0, 0, 0}, "lr"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        ck_assert_msg(upd_check(&bad[i].o, why, sizeof why) == -PSKV_EINVAL, "case %zu passed",
                      i);
        ck_assert_msg(strstr(why, bad[i].names) != NULL, "case %zu: '%s' does not name %s", i,
                      why, bad[i].names);
    }
    o = opts(UPD_SGD, 0.1f, 0.999f, 0, 0);
    ck_assert_int_eq(upd_check(&o, why, sizeof why), 0);
}
END_TEST

START_TEST(state_per_value)
{
    upd_opts o = opts(UPD_SUM, 1, 0, 0, 0);
    ck_assert_int_eq(upd_state_per_value(&o), 0);
    o = opts(UPD_SGD, 1, 0, 0.1f, 0);
    ck_assert_int_eq(upd_state_per_value(&o), 0);
    o = opts(UPD_SGD, 1, 0.1f, 0, 0);
    ck_assert_int_eq(upd_state_per_value(&o), 1);
    o = opts(UPD_ADAGRAD, 1, 0, 0, 1e-8f);
    ck_assert_int_eq(upd_state_per_value(&o), 1);
}
END_TEST

Suite *updater_suite(void)
{
    Suite *s = suite_create("updater");
    TCase *tc = tcase_create("apply");
    tcase_add_test(tc, sum_is_exact);
    tcase_add_test(tc, sgd_plain);
    tcase_add_test(tc, sgd_l2);
    tcase_add_test(tc, sgd_momentum_two_steps);
    tcase_add_test(tc, sgd_momentum_l2);
    tcase_add_test(tc, adagrad_hand_computed);
    tcase_add_test(tc, adagrad_l2_as_documented);
    suite_add_tcase(s, tc);
    TCase *chk = tcase_create("check");
    tcase_add_test(chk, all_finite);
    tcase_add_test(chk, parse_names);
    tcase_add_test(chk, check_hyperparameters);
    tcase_add_test(chk, state_per_value);
    suite_add_tcase(s, chk);
    return s;
}
