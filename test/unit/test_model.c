/* Tests of the dense models (worker/model.c) and their file (common/modelfile.c).
 * The gradient is checked against central differences of an independent double-precision reference loss written
 * here with plain loops, so neither float rounding nor a bug shared with the BLAS
 * path can hide an error; the rest are hand-computed cases and a small training
 * run that must fit a separable problem. */
#define _GNU_SOURCE
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "train/model.h"
#include "modelfile.h"
#include "pskv_errors.h"
#include "suites.h"

#include <stdio.h>
#include <unistd.h>

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

/* xorshift64*: the same draws on every platform and run. */
static uint64_t rng_state;

static void rng_seed(uint64_t seed)
{
    rng_state = seed ? seed : 1;
}

/* Uniform in [-1, 1). */
static float rng_unit(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 2685821657736338717ull;
    return (float)((double)(r >> 40) / (double)(1ull << 23) - 1.0);
}

static void fill_unit(float *v, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        v[i] = scale * rng_unit();
}

/* Mean cross-entropy in double with the layout of model.h. *min_pre gets the
 * smallest |pre-activation| of the hidden layer (DBL_MAX for softmax), which
 * tells how close a finite difference comes to a ReLU kink. */
static double ref_loss(int in, int hid, int out, const double *p, const float *x,
                       const uint8_t *y, int b, double *min_pre)
{
    double act[64], z[64], loss = 0;
    *min_pre = DBL_MAX;
    for (int r = 0; r < b; r++) {
        const float *xr = x + (size_t)r * (size_t)in;
        const double *w, *bias;
        const double *a; /* the layer's input */
        double xin[64];
        int k;
        for (int i = 0; i < in; i++)
            xin[i] = xr[i];
        if (hid == 0) {
            w = p;
            bias = p + in * out;
            a = xin;
            k = in;
        } else {
            const double *w1 = p, *b1 = p + in * hid;
            for (int j = 0; j < hid; j++) {
                double s = b1[j];
                for (int i = 0; i < in; i++)
                    s += xin[i] * w1[i * hid + j];
                if (fabs(s) < *min_pre)
                    *min_pre = fabs(s);
                act[j] = s > 0 ? s : 0;
            }
            w = b1 + hid;
            bias = w + hid * out;
            a = act;
            k = hid;
        }
        double mx = -DBL_MAX, sum = 0;
        for (int j = 0; j < out; j++) {
            z[j] = bias[j];
            for (int i = 0; i < k; i++)
                z[j] += a[i] * w[i * out + j];
            if (z[j] > mx)
                mx = z[j];
        }
        for (int j = 0; j < out; j++)
            sum += exp(z[j] - mx);
        loss += log(sum) + mx - z[y[r]];
    }
    return loss / b;
}

/* model_grad against central differences of ref_loss on every parameter. Draws
 * are repeated until no hidden pre-activation lies within the step of a kink. */
static void grad_check(int hid)
{
    enum { IN = 6, OUT = 4, B = 3, MAXB = 5 }; /* B < MAXB: a partial batch */
    const double eps = 1e-3;
    model *m = model_new(IN, hid, OUT, MAXB);
    ck_assert_ptr_nonnull(m);
    size_t n = model_size(m);
    float *p = malloc(n * sizeof *p), *g = malloc(n * sizeof *g);
    double *pd = malloc(n * sizeof *pd);
    ck_assert(p && g && pd);
    float x[B * IN];
    uint8_t y[B] = {1, 3, 0};
    double min_pre = 0;
    int draws = 0;
    rng_seed(0x5eed + (uint64_t)hid);
    /* A step moves a pre-activation by at most eps (|x| < 1); keep twice clear. */
    while (min_pre <= 2 * eps) {
        ck_assert_int_lt(draws++, 100);
        fill_unit(p, n, 1.0f);
        fill_unit(x, B * IN, 1.0f);
        for (size_t i = 0; i < n; i++)
            pd[i] = p[i];
        ref_loss(IN, hid, OUT, pd, x, y, B, &min_pre);
    }
    for (size_t i = 0; i < n; i++)
        g[i] = NAN; /* every entry must be written */
    float loss = model_grad(m, p, x, y, B, 1.0f, g);
    ck_assert_double_eq_tol(loss, ref_loss(IN, hid, OUT, pd, x, y, B, &min_pre), 1e-5);

    for (size_t i = 0; i < n; i++) {
        double keep = pd[i], dummy;
        pd[i] = keep + eps;
        double up = ref_loss(IN, hid, OUT, pd, x, y, B, &dummy);
        pd[i] = keep - eps;
        double down = ref_loss(IN, hid, OUT, pd, x, y, B, &dummy);
        pd[i] = keep;
        double num = (up - down) / (2 * eps), ana = g[i];
        /* Relative error, floored so that gradients near zero compare absolutely. */
        double scale = fmax(fmax(fabs(num), fabs(ana)), 1e-3);
        LOOP_ASSERT(fabs(num - ana) < 1e-2 * scale, "hidden %d param %zu: analytic %g numeric %g",
                    hid, i, ana, num);
    }
    free(p);
    free(g);
    free(pd);
    model_destroy(&m);
    ck_assert_ptr_null(m);
}

START_TEST(grad_softmax_matches_differences)
{
    grad_check(0);
}
END_TEST

START_TEST(grad_mlp_matches_differences)
{
    grad_check(5);
}
END_TEST

START_TEST(uniform_output_loss_is_log_out)
{
    enum { IN = 6, HID = 5, OUT = 4, B = 3 };
    float x[B * IN];
    uint8_t y[B] = {0, 0, 2};
    rng_seed(11);
    fill_unit(x, B * IN, 3.0f);

    /* Softmax with zero parameters: every class 1/4, and db = mean(P - onehot). */
    model *m = model_new(IN, 0, OUT, B);
    ck_assert_ptr_nonnull(m);
    float p[IN * OUT + OUT] = {0}, g[IN * OUT + OUT];
    ck_assert_double_eq_tol(model_grad(m, p, x, y, B, 1.0f, g), log(OUT), 1e-6);
    const float *gb = g + IN * OUT;
    ck_assert_double_eq_tol(gb[0], 0.25 - 2.0 / 3, 1e-6);
    ck_assert_double_eq_tol(gb[1], 0.25, 1e-6);
    ck_assert_double_eq_tol(gb[2], 0.25 - 1.0 / 3, 1e-6);
    ck_assert_double_eq_tol(gb[3], 0.25, 1e-6);
    model_destroy(&m);

    /* MLP with any first layer, W2 = 0 and a constant b2: uniform again. */
    m = model_new(IN, HID, OUT, B);
    ck_assert_ptr_nonnull(m);
    float q[IN * HID + HID + HID * OUT + OUT];
    ck_assert_uint_eq(model_size(m), sizeof q / sizeof q[0]);
    fill_unit(q, IN * HID + HID, 1.0f);
    for (int i = IN * HID + HID; i < (int)(sizeof q / sizeof q[0]); i++)
        q[i] = i < IN * HID + HID + HID * OUT ? 0.0f : 0.7f;
    float gq[sizeof q / sizeof q[0]];
    ck_assert_double_eq_tol(model_grad(m, q, x, y, B, 1.0f, gq), log(OUT), 1e-6);
    double sum = 0;
    long right = 0;
    model_eval(m, q, x, y, B, &sum, &right);
    ck_assert_double_eq_tol(sum, B * log(OUT), 1e-5);
    ck_assert_int_eq(right, 2); /* ties go to class 0, and two labels are 0 */
    model_destroy(&m);
}
END_TEST

/* model_grad's scale: the same loss, every entry of the gradient times it (the
 * trainer folds its learning-rate factor in there instead of scaling after). */
START_TEST(grad_scale_folded)
{
    enum { IN = 7, HID = 5, OUT = 4, B = 6 };
    float x[B * IN];
    uint8_t y[B] = {0, 3, 1, 2, 3, 0};
    rng_seed(17);
    fill_unit(x, B * IN, 2.0f);
    model *m = model_new(IN, HID, OUT, B);
    ck_assert_ptr_nonnull(m);
    float p[IN * HID + HID + HID * OUT + OUT], g1[sizeof p / sizeof p[0]],
        gs[sizeof p / sizeof p[0]];
    fill_unit(p, sizeof p / sizeof p[0], 1.0f);
    float l1 = model_grad(m, p, x, y, B, 1.0f, g1);
    ck_assert_float_eq(model_grad(m, p, x, y, B, 0.375f, gs), l1);
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        ck_assert_float_eq_tol(gs[i], 0.375f * g1[i], 1e-6f + 1e-5f * fabsf(g1[i]));
    ck_assert_float_eq(model_grad(m, p, x, y, B, 0.0f, gs), l1);
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        ck_assert_float_eq(gs[i], 0.0f);
    model_destroy(&m);
}
END_TEST

/* The ReLU's lanes (relu_fwd and relu_bwd, four at a time, then the rest) give what
 * y > 0 ? y : 0 gives, bit for bit: NaN and -0 become +0, and the mask passes dy
 * only where y > 0. Seven outputs a row over three rows: full lanes and a tail. */
START_TEST(relu_lanes_exact)
{
    enum { OUT = 7, B = 3, N = OUT * B };
    const float v[OUT] = {1.5f, -2.0f, -0.0f, NAN, 0.0f, FLT_MIN, -FLT_MIN};
    float p[OUT + OUT], x[B], y[N], dy[N];
    for (int j = 0; j < OUT; j++) {
        p[j] = v[j]; /* W: one input row */
        p[OUT + j] = 0.0f;
    }
    for (int r = 0; r < B; r++)
        x[r] = (float)(r + 1);
    model_dense_fwd(p, 1, OUT, x, B, 1, y);
    for (int i = 0; i < N; i++) {
        float pre = 0.0f + x[i / OUT] * v[i % OUT]; /* what sgemm adds to the bias */
        float want = pre > 0.0f ? pre : 0.0f;
        ck_assert_msg(!memcmp(&y[i], &want, sizeof want), "y[%d] = %a, want %a", i, y[i], want);
    }
    /* the mask: dy where the activation passed, +0 elsewhere (y as the forward left it,
     * and a NaN activation too) */
    float act[N], ones[B] = {1.0f, 1.0f, 1.0f}, g[OUT + OUT];
    for (int i = 0; i < N; i++) {
        act[i] = v[i % OUT] * (float)(i / OUT + 1);
        dy[i] = (float)(i + 1);
    }
    model_dense_bwd(p, 1, OUT, x, act, dy, B, 1, ones, g, 0, NULL);
    for (int i = 0; i < N; i++) {
        float want = act[i] > 0.0f ? (float)(i + 1) : 0.0f;
        ck_assert_msg(!memcmp(&dy[i], &want, sizeof want), "dy[%d] = %a, want %a", i, dy[i], want);
    }
}
END_TEST

START_TEST(eval_hand_made)
{
    /* logits = x·W + b with W = [[1,0,0],[0,1,0]], b = [0,0,0.5]. */
    float p[2 * 3 + 3] = {1, 0, 0, 0, 1, 0, 0, 0, 0.5f};
    float x[4 * 2] = {2, 0, 0, 2, 0, 0, -1, -1};
    uint8_t y[4] = {0, 1, 2, 0}; /* the last is predicted 2: wrong */
    model *m = model_new(2, 0, 3, 3); /* 4 examples: a full batch and a partial one */
    ck_assert_ptr_nonnull(m);
    double sum = 1.5;
    long right = 7; /* eval adds to what is there */
    model_eval(m, p, x, y, 4, &sum, &right);
    ck_assert_int_eq(right, 7 + 3);
    double e = exp(0.5);
    double want = 2 * (log(exp(2) + 1 + e) - 2) + (log(2 + e) - 0.5) + (log(2 * exp(-1) + e) + 1);
    ck_assert_double_eq_tol(sum, 1.5 + want, 1e-5);

    /* n = 0 changes nothing. */
    model_eval(m, p, x, y, 0, &sum, &right);
    ck_assert_int_eq(right, 10);
    ck_assert_double_eq_tol(sum, 1.5 + want, 1e-5);
    model_destroy(&m);
}
END_TEST

START_TEST(eval_batches_agree)
{
    /* The same data through max_batch 4 (batches 4, 4, 2) and one batch of 10,
     * and against model_grad's loss one example at a time. */
    enum { IN = 6, HID = 5, OUT = 4, N = 10 };
    model *small = model_new(IN, HID, OUT, 4), *big = model_new(IN, HID, OUT, N);
    ck_assert(small && big);
    size_t n = model_size(small);
    float *p = malloc(n * sizeof *p), *g = malloc(n * sizeof *g);
    ck_assert(p && g);
    float x[N * IN];
    uint8_t y[N];
    rng_seed(23);
    fill_unit(p, n, 1.0f);
    fill_unit(x, N * IN, 1.0f);
    for (int i = 0; i < N; i++)
        y[i] = (uint8_t)(i % OUT);
    double s1 = 0, s2 = 0, s3 = 0;
    long c1 = 0, c2 = 0;
    model_eval(small, p, x, y, N, &s1, &c1);
    model_eval(big, p, x, y, N, &s2, &c2);
    for (int i = 0; i < N; i++)
        s3 += model_grad(small, p, x + i * IN, y + i, 1, 1.0f, g);
    ck_assert_double_eq_tol(s1, s2, 1e-5);
    ck_assert_double_eq_tol(s1, s3, 1e-5);
    ck_assert_int_eq(c1, c2);
    free(p);
    free(g);
    model_destroy(&small);
    model_destroy(&big);
}
END_TEST

START_TEST(sizes)
{
    model *m = model_new(784, 0, 10, 32);
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(model_size(m), 784 * 10 + 10);
    model_destroy(&m);
    m = model_new(784, 256, 10, 32);
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(model_size(m), 784 * 256 + 256 + 256 * 10 + 10);
    model_destroy(&m);
    /* The smallest of each shape, and the most classes a uint8_t label names. */
    m = model_new(1, 0, 2, 1);
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(model_size(m), 4);
    model_destroy(&m);
    m = model_new(1, 1, 256, 1);
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(model_size(m), 1 + 1 + 256 + 256);
    model_destroy(&m);
    model_destroy(&m); /* NULL-safe */
    model_destroy(NULL);
}
END_TEST

START_TEST(rejects_invalid_sizes)
{
    ck_assert_ptr_null(model_new(0, 0, 10, 1));
    ck_assert_ptr_null(model_new(-1, 0, 10, 1));
    ck_assert_ptr_null(model_new(10, -1, 10, 1));
    ck_assert_ptr_null(model_new(10, 0, 1, 1));
    ck_assert_ptr_null(model_new(10, 0, 0, 1));
    ck_assert_ptr_null(model_new(10, 0, 257, 1));
    ck_assert_ptr_null(model_new(10, 0, 10, 0));
    ck_assert_ptr_null(model_new(10, 0, 10, -5));
    /* Too many parameters, or too much workspace, is refused before any malloc. */
    ck_assert_ptr_null(model_new(INT_MAX, INT_MAX, 256, 1));
    ck_assert_ptr_null(model_new(100000, 100000, 10, 1));
    ck_assert_ptr_null(model_new(INT_MAX, 0, 256, 1));
    ck_assert_ptr_null(model_new(10, 100000, 10, 100000));
    ck_assert_ptr_null(model_new(10, 0, 256, INT_MAX));
}
END_TEST

/* Three well separated clusters in 8 dimensions, minibatch SGD from a fixed
 * start; the mean loss over the set must fall from log 3 to below 0.1. */
static void train_separable(int hid)
{
    enum { IN = 8, OUT = 3, N = 120, B = 20, STEPS = 300 };
    const float lr = 0.5f;
    static float x[N * IN];
    uint8_t y[N];
    rng_seed(77);
    for (int i = 0; i < N; i++) {
        y[i] = (uint8_t)(i % OUT);
        fill_unit(x + i * IN, IN, 0.5f);
        x[i * IN + y[i]] += 3.0f;
    }
    model *m = model_new(IN, hid, OUT, B);
    ck_assert_ptr_nonnull(m);
    size_t n = model_size(m);
    float *p = calloc(n, sizeof *p), *g = malloc(n * sizeof *g);
    ck_assert(p && g);
    if (hid > 0) /* break the symmetry of the hidden units; W2 and biases start at 0 */
        fill_unit(p, (size_t)IN * (size_t)hid, 0.5f);
    double before = 0, after = 0;
    long right = 0;
    model_eval(m, p, x, y, N, &before, &right);
    ck_assert_double_eq_tol(before / N, log(OUT), 1e-5);
    for (int step = 0; step < STEPS; step++) {
        int start = (step * B) % N;
        model_grad(m, p, x + start * IN, y + start, B, 1.0f, g);
        for (size_t i = 0; i < n; i++)
            p[i] -= lr * g[i];
    }
    right = 0;
    model_eval(m, p, x, y, N, &after, &right);
    ck_assert_msg(after / N < 0.1, "hidden %d: mean loss %g after %d steps", hid, after / N,
                  STEPS);
    ck_assert_int_eq(right, N);
    free(p);
    free(g);
    model_destroy(&m);
}

START_TEST(sgd_fits_softmax)
{
    train_separable(0);
}
END_TEST

START_TEST(sgd_fits_mlp)
{
    train_separable(16);
}
END_TEST

START_TEST(ftz_flushes_denormals)
{
#if defined(__SSE2__)
    unsigned int saved = _mm_getcsr();
    volatile float a = 1e-30f, b = 1e-10f; /* product 1e-40 is denormal */
    ck_assert(a * b > 0.0f);
    model_set_ftz();
    ck_assert(a * b == 0.0f);
    _mm_setcsr(saved);
#else
    model_set_ftz(); /* a no-op that must not fail */
#endif
}
END_TEST

/* The model file with the evaluator's record (--save-best): every field and value
 * back as written, a file without it still read, a cut record refused. */
START_TEST(modelfile_eval_record)
{
    char path[64], why[256];
    snprintf(path, sizeof path, "/tmp/pskv-unit-model-%d", (int)getpid());
    float vals[5] = {1.5f, -2.25f, 0.0f, 3e-38f, 7.0f};
    modelfile m = {.kind = 1, .in = 4, .out = 1, .n = 5, .vals = vals, .has_eval = 1, .clock = 1234,
                   .epoch = 2.5, .val_loss = 0.3333333333333333, .val_accuracy = 0.875};
    ck_assert_int_eq(modelfile_save(path, &m, why, sizeof why), 0);
    modelfile r;
    ck_assert_int_eq(modelfile_load(path, &r, why, sizeof why), 0);
    ck_assert_int_eq(r.has_eval, 1);
    ck_assert_int_eq(r.clock, 1234);
    ck_assert(r.epoch == 2.5 && r.val_loss == 0.3333333333333333 && r.val_accuracy == 0.875);
    ck_assert_uint_eq(r.n, 5);
    ck_assert_int_eq(memcmp(r.vals, vals, sizeof vals), 0);
    modelfile_free(&r);
    m.has_eval = 0;
    ck_assert_int_eq(modelfile_save(path, &m, why, sizeof why), 0);
    ck_assert_int_eq(modelfile_load(path, &r, why, sizeof why), 0);
    ck_assert_int_eq(r.has_eval, 0);
    ck_assert_int_eq(memcmp(r.vals, vals, sizeof vals), 0);
    modelfile_free(&r);
    /* a file that says it has the record but is 32 bytes short is refused */
    m.has_eval = 1;
    ck_assert_int_eq(modelfile_save(path, &m, why, sizeof why), 0);
    ck_assert_int_eq(truncate(path, 40 + 5 * 4 + 4), 0);
    ck_assert_int_eq(modelfile_load(path, &r, why, sizeof why), -PSKV_EIO);
    unlink(path);
}
END_TEST

/* sparse-lr's best model (--save-best): keyed rows and a record ending with
 * val_auc, every bit back; the same file 8 bytes short is refused. */
START_TEST(modelfile_sparse_auc_record)
{
    char path[64], why[256];
    snprintf(path, sizeof path, "/tmp/pskv-unit-smodel-%d", (int)getpid());
    uint64_t keys[3] = {7, 1u << 30, UINT64_MAX};
    float vals[3] = {0.25f, -1e-3f, 0.5f};
    modelfile m = {.kind = 3, .out = 1, .n = 3, .keys = keys, .vals = vals, .has_eval = 1,
                   .clock = 99, .epoch = 3.0, .val_loss = 0.6931471805599453,
                   .val_accuracy = 0.5, .has_auc = 1, .val_auc = 0.7777777777777778};
    ck_assert_int_eq(modelfile_save(path, &m, why, sizeof why), 0);
    modelfile r;
    ck_assert_int_eq(modelfile_load(path, &r, why, sizeof why), 0);
    ck_assert(r.has_eval && r.has_auc && r.val_auc == 0.7777777777777778);
    ck_assert(r.clock == 99 && r.val_loss == 0.6931471805599453 && r.val_accuracy == 0.5);
    ck_assert_int_eq(memcmp(r.keys, keys, sizeof keys), 0);
    ck_assert_int_eq(memcmp(r.vals, vals, sizeof vals), 0);
    modelfile_free(&r);
    ck_assert_int_eq(truncate(path, 40 + 32 + 3 * 12 + 4), 0);
    ck_assert_int_eq(modelfile_load(path, &r, why, sizeof why), -PSKV_EIO);
    unlink(path);
}
END_TEST

Suite *model_suite(void)
{
    Suite *s = suite_create("model");
    TCase *grad = tcase_create("grad");
    tcase_add_test(grad, grad_softmax_matches_differences);
    tcase_add_test(grad, grad_mlp_matches_differences);
    tcase_add_test(grad, uniform_output_loss_is_log_out);
    tcase_add_test(grad, grad_scale_folded);
    tcase_add_test(grad, relu_lanes_exact);
    suite_add_tcase(s, grad);
    TCase *eval = tcase_create("eval");
    tcase_add_test(eval, eval_hand_made);
    tcase_add_test(eval, eval_batches_agree);
    suite_add_tcase(s, eval);
    TCase *shape = tcase_create("shape");
    tcase_add_test(shape, sizes);
    tcase_add_test(shape, rejects_invalid_sizes);
    tcase_add_test(shape, ftz_flushes_denormals);
    tcase_add_test(shape, modelfile_eval_record);
    tcase_add_test(shape, modelfile_sparse_auc_record);
    suite_add_tcase(s, shape);
    TCase *train = tcase_create("train");
    tcase_add_test(train, sgd_fits_softmax);
    tcase_add_test(train, sgd_fits_mlp);
    suite_add_tcase(s, train);
    return s;
}
