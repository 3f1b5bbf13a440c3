/* Tests of the updaters (common/update/updater.c) against hand computation. Values are
 * chosen to be exact in binary floating point where the formula allows, so the
 * assertions compare exactly; adagrad's square root is compared with a tolerance. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "halfvec.h"
#include "pskv_errors.h"
#include "suites.h"
#include "store/shard.h"
#include "update/updater.h"

static upd_opts opts(upd_kind kind, float lr, float momentum, float l2, float eps)
{
    upd_opts o = {.kind = kind, .lr = lr, .momentum = momentum, .l2 = l2, .eps = eps};
    return o;
}

/* Options upd_check must refuse, naming the parameter. */
typedef struct bad_opts {
    upd_opts o;
    const char *names;
} bad_opts;

static void refused_all(const bad_opts *bad, size_t n)
{
    char why[256];
    for (size_t i = 0; i < n; i++) {
        why[0] = '\0';
        ck_assert_msg(upd_check(&bad[i].o, why, sizeof why) == -PSKV_EINVAL, "case %zu passed",
                      i);
        ck_assert_msg(strstr(why, bad[i].names) != NULL, "case %zu: '%s' does not name %s", i,
                      why, bad[i].names);
    }
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

/* Momentum over 11 values: the vector lanes (4 at a time) and the scalar tail give
 * each value its own update, with and without l2 (dyadic values: exact). */
START_TEST(sgd_momentum_lanes)
{
    for (int l2i = 0; l2i < 2; l2i++) {
        const float l2 = l2i ? 0.5f : 0.0f;
        upd_opts o = opts(UPD_SGD, 0.25f, 0.5f, l2, 0);
        float w[11], v[11], g[11];
        for (int i = 0; i < 11; i++) {
            w[i] = (float)i;
            v[i] = 0.5f * (float)i - 2.0f;
            g[i] = 2.0f * (float)(i % 5) - 3.0f;
        }
        upd_apply(&o, w, v, g, 11);
        for (int i = 0; i < 11; i++) {
            double vi = 0.5 * (0.5 * i - 2.0) + (2.0 * (i % 5) - 3.0) + l2 * i;
            ck_assert_float_eq(v[i], (float)vi);
            ck_assert_float_eq(w[i], (float)(i - 0.25 * vi));
        }
    }
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

/* _i: 0 the portable code, 1 the AVX2 kernel where the CPU has it (halfvec_set:
 * the switch the vector kernels share; check forks each test). */
START_TEST(all_finite)
{
    int was = halfvec_set(_i);
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
    halfvec_set(was);
}
END_TEST

/* sgd with momentum (and l2) over 1,037 values: the AVX2 lanes give the portable
 * code's bits exactly, every value (8 lanes, 4 lanes and the tail). */
START_TEST(sgd_momentum_vector_bits)
{
    enum { N = 1037 };
    static float w[2][N], v[2][N], g[N];
    for (int l2i = 0; l2i < 2; l2i++) {
        upd_opts o = opts(UPD_SGD, 0.0137f, 0.9f, l2i ? 1e-3f : 0.0f, 0);
        for (int on = 0; on < 2; on++) {
            int was = halfvec_set(on);
            for (int i = 0; i < N; i++) {
                w[on][i] = sinf((float)i) * 0.7f;
                v[on][i] = cosf((float)i * 0.3f) * 0.01f;
                g[i] = sinf((float)i * 1.7f + 0.2f) * 3.0f;
            }
            for (int step = 0; step < 3; step++)
                upd_apply(&o, w[on], v[on], g, N);
            halfvec_set(was);
        }
        ck_assert_int_eq(memcmp(w[0], w[1], sizeof w[0]), 0);
        ck_assert_int_eq(memcmp(v[0], v[1], sizeof v[0]), 0);
    }
}
END_TEST

START_TEST(parse_names)
{
    ck_assert_int_eq(upd_parse("sum"), UPD_SUM);
    ck_assert_int_eq(upd_parse("sgd"), UPD_SGD);
    ck_assert_int_eq(upd_parse("adagrad"), UPD_ADAGRAD);
    ck_assert_int_eq(upd_parse("SGD"), -1);
    ck_assert_int_eq(upd_parse("adam"), UPD_ADAM);
    ck_assert_int_eq(upd_parse("adamw"), UPD_ADAMW);
    ck_assert_int_eq(upd_parse("ftrl"), UPD_FTRL);
    ck_assert_int_eq(upd_parse("plugin"), -1); /* a plug-in is plugin:PATH, upd_plugin.h */
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

    bad_opts bad[] = {
        {{.kind = UPD_SGD, .lr = -0.1f, .momentum = 0, .l2 = 0, .eps = 0}, "lr"},
        {{.kind = UPD_SGD, .lr = NAN, .momentum = 0, .l2 = 0, .eps = 0}, "lr"},
        {{.kind = UPD_SGD, .lr = INFINITY, .momentum = 0, .l2 = 0, .eps = 0}, "lr"},
        {{.kind = UPD_SGD, .lr = 0.1f, .momentum = 1.0f, .l2 = 0, .eps = 0}, "momentum"},
        {{.kind = UPD_SGD, .lr = 0.1f, .momentum = 1.5f, .l2 = 0, .eps = 0}, "momentum"},
        {{.kind = UPD_SGD, .lr = 0.1f, .momentum = -0.1f, .l2 = 0, .eps = 0}, "momentum"},
        {{.kind = UPD_SGD, .lr = 0.1f, .momentum = NAN, .l2 = 0, .eps = 0}, "momentum"},
        {{.kind = UPD_SGD, .lr = 0.1f, .momentum = 0, .l2 = -1e-3f, .eps = 0}, "l2"},
        {{.kind = UPD_SGD, .lr = 0.1f, .momentum = 0, .l2 = NAN, .eps = 0}, "l2"},
        {{.kind = UPD_ADAGRAD, .lr = 0.1f, .momentum = 0, .l2 = 0, .eps = 0}, "eps"},
        {{.kind = UPD_ADAGRAD, .lr = 0.1f, .momentum = 0, .l2 = 0, .eps = -1}, "eps"},
        {{.kind = UPD_ADAGRAD, .lr = 0.1f, .momentum = 0, .l2 = 0, .eps = NAN}, "eps"},
        {{.kind = UPD_SUM, .lr = -1, .momentum = 0, .l2 = 0, .eps = 0}, "lr"},
    };
    refused_all(bad, sizeof bad / sizeof bad[0]);
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

/* ---- adam, adamw, ftrl, sgd's l1: three steps by hand, dense and sparse ------ */

/* Runs three pushes of g[k] (one row of width 1) through a dense shard (row 2 of
 * 4, as a run), a dense shard by explicit key, and a sparse shard, checking the
 * pulled value after each step against want[k] (tolerance tol). */
static void three_steps(const upd_opts *o, const float g[3], const double want[3], double tol,
                        float w0)
{
    shard_init init = {w0 == 0 ? INIT_ZERO : INIT_CONST, w0, 7};
    shard *d = shard_new(1, 0, 4, 0, UINT64_MAX, 1, o, &init);
    shard *dk = shard_new(1, 0, 4, 0, UINT64_MAX, 1, o, &init);
    shard *sp = shard_new(0, 0, 0, 0, UINT64_MAX, 1, o, &init);
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_nonnull(dk);
    ck_assert_ptr_nonnull(sp);
    uint64_t key = 2, skey = 0xfeedfacecafeULL;
    for (int k = 0; k < 3; k++) {
        float run[4] = {1, -1, g[k], 0.5f}, out[4], one; /* rows 0, 1, 3: not checked */
        ck_assert_int_eq(shard_push(d, NULL, 0, 4, run), 0);
        ck_assert_int_eq(shard_push(dk, &key, 0, 1, &g[k]), 0);
        ck_assert_int_eq(shard_push(sp, &skey, 0, 1, &g[k]), 0);
        shard_pull(d, NULL, 0, 4, out);
        LOOP_ASSERT(fabs(out[2] - want[k]) <= tol, "dense run, step %d: %.9g, want %.9g", k + 1,
                    (double)out[2], want[k]);
        shard_pull(dk, &key, 0, 1, &one);
        LOOP_ASSERT(fabs(one - want[k]) <= tol, "dense key, step %d: %.9g, want %.9g", k + 1,
                    (double)one, want[k]);
        shard_pull(sp, &skey, 0, 1, &one);
        LOOP_ASSERT(fabs(one - want[k]) <= tol, "sparse, step %d: %.9g, want %.9g", k + 1,
                    (double)one, want[k]);
    }
    shard_destroy(&d);
    shard_destroy(&dk);
    shard_destroy(&sp);
}

START_TEST(adam_three_steps)
{
    /* lr 1, b1 = b2 = 0.5, eps 0, w0 = 0, g = 2, -2, 4:
     * 1: m = 1,     v = 2;   mh = 1/0.5 = 2,        vh = 2/0.5 = 4;    w = 0 - 2/2 = -1
     * 2: m = -0.5,  v = 3;   mh = -0.5/0.75 = -2/3, vh = 3/0.75 = 4;   w = -1 + 1/3 = -2/3
     * 3: m = 1.75,  v = 9.5; mh = 1.75/0.875 = 2,   vh = 9.5/0.875 = 76/7;
     *    w = -2/3 - 2/sqrt(76/7) = -1.2736436 */
    upd_opts o = {.kind = UPD_ADAM, .lr = 1, .beta1 = 0.5f, .beta2 = 0.5f, .eps = 0};
    ck_assert_int_eq(upd_state_per_value(&o), 3);
    const float g[3] = {2, -2, 4};
    const double want[3] = {-1, -2.0 / 3, -2.0 / 3 - 2 / sqrt(76.0 / 7)};
    three_steps(&o, g, want, 1e-6, 0);
    /* the state planes, by hand: m, v, t after the three steps */
    float w = 0, st[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++)
        upd_apply(&o, &w, st, &g[k], 1);
    ck_assert_float_eq(st[0], 1.75f);
    ck_assert_float_eq(st[1], 9.5f);
    ck_assert_float_eq(st[2], 3.0f);
}
END_TEST

START_TEST(adamw_three_steps)
{
    /* A constant gradient makes the corrected mh/sqrt(vh) exactly 1 (eps 0), so each
     * step is w = w*(1 - lr*wd) - lr: lr 0.5, wd 0.5, w0 = 2:
     * 2*0.75 - 0.5 = 1;  0.75 - 0.5 = 0.25;  0.1875 - 0.5 = -0.3125 */
    upd_opts o = {.kind = UPD_ADAMW, .lr = 0.5f, .beta1 = 0.5f, .beta2 = 0.5f, .eps = 0,
                  .weight_decay = 0.5f};
    const float g[3] = {1, 1, 1};
    const double want[3] = {1, 0.25, -0.3125};
    three_steps(&o, g, want, 1e-7, 2);
    /* adam (no decay) from the same start: 2 - 0.5 each step */
    o.kind = UPD_ADAM;
    o.weight_decay = 0;
    const double plain[3] = {1.5, 1, 0.5};
    three_steps(&o, g, plain, 1e-7, 2);
}
END_TEST

START_TEST(ftrl_three_steps)
{
    /* alpha 1, beta 1, l1 1, l2 1, g = 2, -1, -1 (McMahan et al. 2013, Algorithm 1):
     * 1: s = 2,                  z = 2,          n = 4; w = -(2-1)/((1+2)+1) = -0.25
     * 2: s = sqrt5 - 2,          z = 1 + s/4 = 1.0590170, n = 5;
     *    w = -(z-1)/((1+sqrt5)+1) = -0.0139320
     * 3: s = sqrt6 - sqrt5,      z = z - 1 + s*w = 0.0619904, n = 6; |z| <= l1: w = 0 */
    upd_opts o = {.kind = UPD_FTRL, .lr = 1, .beta = 1, .l1 = 1, .l2 = 1};
    ck_assert_int_eq(upd_state_per_value(&o), 2);
    const float g[3] = {2, -1, -1};
    double s2 = sqrt(5.0) - 2, z2 = 1 + s2 / 4;
    const double want[3] = {-0.25, -(z2 - 1) / (2 + sqrt(5.0)), 0};
    three_steps(&o, g, want, 1e-6, 0);
    float w = 0, st[2] = {0, 0};
    for (int k = 0; k < 3; k++)
        upd_apply(&o, &w, st, &g[k], 1);
    ck_assert_float_eq(w, 0.0f); /* exactly zero, not tiny */
    ck_assert_double_eq_tol(st[0], 0.0619904, 1e-6);
    ck_assert_float_eq(st[1], 6.0f);
}
END_TEST

START_TEST(sgd_l1_three_steps)
{
    /* lr 0.5, l1 1 (threshold 0.5), w0 = 2, g = 1, 1, -3:
     * 2 - 0.5 = 1.5 -> 1;  1 - 0.5 = 0.5 -> 0;  0 + 1.5 = 1.5 -> 1 */
    upd_opts o = {.kind = UPD_SGD, .lr = 0.5f, .l1 = 1};
    const float g[3] = {1, 1, -3};
    const double want[3] = {1, 0, 1};
    three_steps(&o, g, want, 0, 2);
    /* with momentum 0.5: v = 1, w = 2 - 0.5 = 1.5 -> 1; v = 1.5, w = 0.25 -> 0;
     * v = -2.25, w = 1.125 -> 0.625 */
    o.momentum = 0.5f;
    const double mom[3] = {1, 0, 0.625};
    three_steps(&o, g, mom, 0, 2);
}
END_TEST

/* ftrl on a sparse table: a new key whose push leaves its weight zero gets no row;
 * a key whose weight moves gets one, and keeps it when later pushes zero it. */
START_TEST(ftrl_zero_rows_unstored)
{
    upd_opts o = {.kind = UPD_FTRL, .lr = 1, .beta = 1, .l1 = 1, .l2 = 1};
    shard_init init = {INIT_ZERO, 0, 1};
    shard *sp = shard_new(0, 0, 0, 0, UINT64_MAX, 2, &o, &init);
    ck_assert_ptr_nonnull(sp);
    uint64_t keys[100];
    float g[200];
    for (int i = 0; i < 100; i++) {
        keys[i] = 1000 + (uint64_t)i * 7919;
        g[2 * i] = i < 10 ? 2.0f : 0.5f; /* 10 keys leave the L1 band, 90 stay inside */
        g[2 * i + 1] = -0.25f;
    }
    ck_assert_int_eq(shard_push(sp, keys, 0, 100, g), 0);
    ck_assert_uint_eq(shard_size(sp), 10);
    uint64_t bad, unstored;
    shard_update_stats(sp, &bad, &unstored);
    ck_assert_uint_eq(unstored, 90);
    float out[2];
    shard_pull(sp, &keys[50], 0, 1, out);
    ck_assert_float_eq(out[0], 0.0f);
    ck_assert_float_eq(out[1], 0.0f);
    shard_pull(sp, &keys[3], 0, 1, out);
    ck_assert_float_eq_tol(out[0], -0.25f, 1e-6f);
    ck_assert_float_eq(out[1], 0.0f);
    shard_destroy(&sp);
}
END_TEST

/* Adam with eps 0 and a zero gradient on fresh state computes 0/0: the row is left
 * as it was (values and state) and the push says so; the other rows apply. */
START_TEST(nan_row_restored)
{
    upd_opts o = {.kind = UPD_ADAM, .lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 0};
    shard_init init = {INIT_CONST, 3, 1};
    for (int dense = 0; dense <= 1; dense++) {
        shard *s = shard_new(dense, 0, 4, 0, UINT64_MAX, 2, &o, &init);
        ck_assert_ptr_nonnull(s);
        uint64_t keys[2] = {1, 2};
        float g[4] = {0, 0, 1, -1}; /* row 1: all zero (NaN); row 2: fine */
        int rc = dense ? shard_push(s, NULL, 1, 2, g) : shard_push(s, keys, 0, 2, g);
        ck_assert_int_eq(rc, -PSKV_EBADVALUE);
        float out[4];
        shard_pull(s, keys, 0, 2, out);
        ck_assert_float_eq(out[0], 3.0f);
        ck_assert_float_eq(out[1], 3.0f);
        ck_assert_float_eq_tol(out[2], 2.9f, 1e-6f); /* first adam step: lr * sign(g) */
        ck_assert_float_eq_tol(out[3], 3.1f, 1e-6f);
        size_t rf = shard_row_floats(s);
        ck_assert_uint_eq(rf, 8);
        uint64_t ek[4];
        float rows[4 * 8];
        uint64_t n = shard_export(s, NULL, NULL, ek, rows);
        for (uint64_t i = 0; i < n; i++) {
            float t = rows[i * rf + 6]; /* the step count of value 0 */
            ck_assert_float_eq(t, ek[i] == 2 ? 1.0f : 0.0f);
            ck_assert_int_eq(upd_all_finite(rows + i * rf, rf), 1);
        }
        uint64_t bad, unstored;
        shard_update_stats(s, &bad, &unstored);
        ck_assert_uint_eq(bad, 1);
        shard_destroy(&s);
    }
}
END_TEST

/* Dense state planes travel whole through export and import. */
START_TEST(adam_state_exports)
{
    upd_opts o = {.kind = UPD_ADAM, .lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    shard_init init = {INIT_ZERO, 0, 1};
    shard *a = shard_new(1, 10, 3, 0, UINT64_MAX, 2, &o, &init);
    shard *b = shard_new(1, 10, 3, 0, UINT64_MAX, 2, &o, &init);
    float g[6] = {1, 2, 3, 4, 5, 6};
    ck_assert_int_eq(shard_push(a, NULL, 10, 3, g), 0);
    ck_assert_int_eq(shard_push(a, NULL, 11, 1, g), 0);
    float rows[3 * 8];
    shard_export_run(a, 10, 3, rows);
    ck_assert_float_eq(rows[8 + 6], 2.0f); /* row 11 was pushed twice */
    ck_assert_float_eq(rows[6], 1.0f);
    ck_assert_int_eq(shard_import(b, NULL, 10, 3, rows), 0);
    /* the same push on both now gives the same values */
    ck_assert_int_eq(shard_push(a, NULL, 10, 3, g), 0);
    ck_assert_int_eq(shard_push(b, NULL, 10, 3, g), 0);
    float va[6], vb[6];
    shard_pull(a, NULL, 10, 3, va);
    shard_pull(b, NULL, 10, 3, vb);
    ck_assert_mem_eq(va, vb, sizeof va);
    shard_destroy(&a);
    shard_destroy(&b);
}
END_TEST

START_TEST(check_new_hyperparameters)
{
    char why[256];
    upd_opts ok[] = {
        {.kind = UPD_ADAM, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f},
        {.kind = UPD_ADAM, .lr = 1e-3f, .beta1 = 0, .beta2 = 0, .eps = 0},
        {.kind = UPD_ADAMW, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .weight_decay = 0.01f},
        {.kind = UPD_FTRL, .lr = 0.1f, .beta = 1, .l1 = 1, .l2 = 1},
        {.kind = UPD_FTRL, .lr = 0.1f, .beta = 0},
        {.kind = UPD_SGD, .lr = 0.1f, .l1 = 1e-3f},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        ck_assert_msg(upd_check(&ok[i], why, sizeof why) == 0, "case %zu refused: %s", i, why);
    bad_opts bad[] = {
        {{.kind = UPD_ADAM, .lr = 0.1f, .beta1 = 1, .beta2 = 0.5f}, "beta1"},
        {{.kind = UPD_ADAM, .lr = 0.1f, .beta1 = -0.1f, .beta2 = 0.5f}, "beta1"},
        {{.kind = UPD_ADAM, .lr = 0.1f, .beta1 = 0.5f, .beta2 = 1}, "beta2"},
        {{.kind = UPD_ADAM, .lr = 0.1f, .beta1 = 0.5f, .beta2 = NAN}, "beta2"},
        {{.kind = UPD_ADAM, .lr = 0.1f, .beta1 = 0.5f, .beta2 = 0.5f, .eps = -1}, "eps"},
        {{.kind = UPD_ADAM, .lr = 0.1f, .beta1 = 0.5f, .beta2 = 0.5f, .weight_decay = 0.1f},
         "weight_decay"},
        {{.kind = UPD_ADAMW, .lr = 0.1f, .beta1 = 0.5f, .beta2 = 0.5f, .weight_decay = -1},
         "weight_decay"},
        {{.kind = UPD_ADAM, .lr = 0.1f, .momentum = 0.9f, .beta1 = 0.5f, .beta2 = 0.5f},
         "momentum"},
        {{.kind = UPD_FTRL, .lr = 0, .beta = 1}, "alpha"},
        {{.kind = UPD_FTRL, .lr = 0.1f, .beta = -1}, "beta"},
        {{.kind = UPD_FTRL, .lr = 0.1f, .beta = 1, .l1 = -1}, "l1"},
        {{.kind = UPD_FTRL, .lr = 0.1f, .beta = 1, .l2 = NAN}, "l2"},
        {{.kind = UPD_ADAGRAD, .lr = 0.1f, .eps = 1e-8f, .l1 = 1}, "l1"},
    };
    refused_all(bad, sizeof bad / sizeof bad[0]);
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
    tcase_add_test(tc, sgd_momentum_lanes);
    tcase_add_test(tc, adagrad_hand_computed);
    tcase_add_test(tc, adagrad_l2_as_documented);
    tcase_add_test(tc, adam_three_steps);
    tcase_add_test(tc, adamw_three_steps);
    tcase_add_test(tc, ftrl_three_steps);
    tcase_add_test(tc, sgd_l1_three_steps);
    tcase_add_test(tc, ftrl_zero_rows_unstored);
    tcase_add_test(tc, nan_row_restored);
    tcase_add_test(tc, adam_state_exports);
    suite_add_tcase(s, tc);
    TCase *chk = tcase_create("check");
    tcase_add_loop_test(chk, all_finite, 0, 2);
    tcase_add_test(chk, sgd_momentum_vector_bits);
    tcase_add_test(chk, parse_names);
    tcase_add_test(chk, check_hyperparameters);
    tcase_add_test(chk, check_new_hyperparameters);
    tcase_add_test(chk, state_per_value);
    suite_add_tcase(s, chk);
    return s;
}
