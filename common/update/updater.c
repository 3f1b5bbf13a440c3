#include "updater.h"

#include <cblas.h>
#include <math.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define UPD_X86 1 /* the AVX2 kernels, chosen at run time (halfvec_on) */
#define TGT __attribute__((target("avx,avx2")))
#endif
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "halfvec.h"
#include "pskv_errors.h"
#include "upd_plugin.h"

static const char *const names[] = {"sum", "sgd", "adagrad", "adam", "adamw", "ftrl", "plugin"};

int upd_parse(const char *name)
{
    for (int k = UPD_SUM; k < UPD_PLUGIN; k++)
        if (!strcmp(name, names[k]))
            return k;
    return -1;
}

const char *upd_name(upd_kind kind)
{
    return kind >= UPD_SUM && kind <= UPD_PLUGIN ? names[kind] : "?";
}

#define REFUSE(...)                                                                          \
    do {                                                                                     \
        snprintf(why, whylen, __VA_ARGS__);                                                  \
        return -PSKV_EINVAL;                                                                 \
    } while (0)

static int nonneg(float x) { return isfinite(x) && x >= 0; }

int upd_check(const upd_opts *o, char *why, size_t whylen)
{
    int adam = o->kind == UPD_ADAM || o->kind == UPD_ADAMW;
    if (!nonneg(o->lr))
        REFUSE("lr must be a finite number >= 0 (got %g)", (double)o->lr);
    if (o->kind == UPD_FTRL && !(o->lr > 0))
        REFUSE("lr (ftrl's alpha) must be > 0 (got %g)", (double)o->lr);
    if (!isfinite(o->momentum) || o->momentum < 0 || o->momentum >= 1)
        REFUSE("momentum must be in [0, 1) (got %g)", (double)o->momentum);
    if (o->momentum > 0 && o->kind != UPD_SGD)
        REFUSE("momentum applies to sgd only (got %g for %s)", (double)o->momentum,
               upd_name(o->kind));
    if (!nonneg(o->l2))
        REFUSE("l2 must be >= 0 (got %g)", (double)o->l2);
    if (!nonneg(o->l1))
        REFUSE("l1 must be >= 0 (got %g)", (double)o->l1);
    if (o->l1 > 0 && o->kind != UPD_SGD && o->kind != UPD_FTRL)
        REFUSE("l1 applies to sgd and ftrl only (got %g for %s)", (double)o->l1,
               upd_name(o->kind));
    if (!isfinite(o->eps) || (o->kind == UPD_ADAGRAD && o->eps <= 0) || (adam && o->eps < 0))
        REFUSE("eps must be finite (> 0 for adagrad, >= 0 for adam; got %g)", (double)o->eps);
    if (adam && (!isfinite(o->beta1) || o->beta1 < 0 || o->beta1 >= 1))
        REFUSE("beta1 must be in [0, 1) (got %g)", (double)o->beta1);
    if (adam && (!isfinite(o->beta2) || o->beta2 < 0 || o->beta2 >= 1))
        REFUSE("beta2 must be in [0, 1) (got %g)", (double)o->beta2);
    if (!nonneg(o->weight_decay))
        REFUSE("weight_decay must be >= 0 (got %g)", (double)o->weight_decay);
    if (o->weight_decay > 0 && o->kind != UPD_ADAMW)
        REFUSE("weight_decay applies to adamw only (got %g for %s; adam and sgd take l2)",
               (double)o->weight_decay, upd_name(o->kind));
    if (o->kind == UPD_FTRL && !nonneg(o->beta))
        REFUSE("beta (ftrl) must be >= 0 (got %g)", (double)o->beta);
    return 0;
}

int upd_state_per_value(const upd_opts *o)
{
    switch (o->kind) {
    case UPD_SUM:
        return 0;
    case UPD_SGD:
        return o->momentum > 0;
    case UPD_ADAGRAD:
        return 1;
    case UPD_ADAM:
    case UPD_ADAMW:
        return 3;
    case UPD_FTRL:
        return 2;
    case UPD_PLUGIN:
        return upd_plugin_state(o->plug);
    }
    return 0;
}

int upd_may_fail(const upd_opts *o)
{
    return o->kind == UPD_ADAM || o->kind == UPD_ADAMW || o->kind == UPD_FTRL ||
           o->kind == UPD_PLUGIN;
}

/* Soft-thresholding, the proximal step of lr*l1*|w|. */
static void prox_l1(float *w, size_t n, float t)
{
    for (size_t i = 0; i < n; i++)
        w[i] = w[i] > t ? w[i] - t : w[i] < -t ? w[i] + t : 0.0f;
}

#ifdef UPD_X86
/* sgd_momentum's 8-wide lanes, where the CPU has AVX2 (halfvec_on: the switch the
 * vector kernels share): the same multiply and add per value, no fused
 * multiply-add, so the same bits as the 4-wide lanes and the scalar tail. Returns
 * the values done (a multiple of 8). */
TGT static size_t momentum_avx2(float *restrict w, float *restrict v, const float *restrict g,
                                size_t n, float mu, float l2, float a)
{
    const __m256 mu8 = _mm256_set1_ps(mu), l28 = _mm256_set1_ps(l2), a8 = _mm256_set1_ps(a);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 wi = _mm256_loadu_ps(w + i);
        __m256 vi = _mm256_add_ps(_mm256_mul_ps(mu8, _mm256_loadu_ps(v + i)),
                                  _mm256_loadu_ps(g + i));
        if (l2 > 0)
            vi = _mm256_add_ps(vi, _mm256_mul_ps(l28, wi));
        _mm256_storeu_ps(v + i, vi);
        _mm256_storeu_ps(w + i, _mm256_add_ps(wi, _mm256_mul_ps(a8, vi)));
    }
    return i;
}
#endif

/* Momentum, v = momentum * v + g (+ l2 * w), w -= lr * v, in one pass over w, v
 * and g: the three BLAS calls it replaces (sscal, saxpy, saxpy) each streamed a
 * dense table's state through memory again, and the update is memory-bound (the
 * server's apply is time a worker waits for: docs/benchmarks.md). The arrays never
 * overlap (g is a message's or a copy's, v the state plane beside w). */
static void sgd_momentum(const upd_opts *o, float *restrict w, float *restrict v,
                         const float *restrict g, size_t n)
{
    const float mu = o->momentum, l2 = o->l2, a = -o->lr;
    size_t i = 0;
#ifdef UPD_X86
    if (halfvec_on())
        i = momentum_avx2(w, v, g, n, mu, l2, a);
#endif
#if defined(__SSE2__) /* -O2 leaves the loop scalar (its length is not known) */
    const __m128 mu4 = _mm_set1_ps(mu), l24 = _mm_set1_ps(l2), a4 = _mm_set1_ps(a);
    for (; i + 4 <= n; i += 4) {
        __m128 wi = _mm_loadu_ps(w + i);
        __m128 vi = _mm_add_ps(_mm_mul_ps(mu4, _mm_loadu_ps(v + i)), _mm_loadu_ps(g + i));
        if (l2 > 0)
            vi = _mm_add_ps(vi, _mm_mul_ps(l24, wi));
        _mm_storeu_ps(v + i, vi);
        _mm_storeu_ps(w + i, _mm_add_ps(wi, _mm_mul_ps(a4, vi)));
    }
#endif
    for (; i < n; i++) {
        float vi = mu * v[i] + g[i];
        if (l2 > 0)
            vi += l2 * w[i];
        v[i] = vi;
        w[i] += a * vi;
    }
}

static void sgd(const upd_opts *o, float *w, float *v, const float *g, size_t n)
{
    const blasint bn = (blasint)n;
    if (v) {
        sgd_momentum(o, w, v, g, n);
    } else if (n < 16) { /* a sparse row: a BLAS call costs more than the loop */
        const float keep = o->l2 > 0 ? 1.0f - o->lr * o->l2 : 1.0f, a = -o->lr;
        for (size_t i = 0; i < n; i++)
            w[i] = w[i] * keep + a * g[i];
    } else {
        if (o->l2 > 0)
            cblas_sscal(bn, 1.0f - o->lr * o->l2, w, 1);
        cblas_saxpy(bn, -o->lr, g, 1, w, 1);
    }
    if (o->l1 > 0)
        prox_l1(w, n, o->lr * o->l1);
}

static void adam(const upd_opts *o, float *w, float *m, float *v, float *t, const float *g,
                 size_t n)
{
    const float b1 = o->beta1, b2 = o->beta2;
    const float decay = o->kind == UPD_ADAMW ? 1.0f - o->lr * o->weight_decay : 1.0f;
    float last = -1.0f, c1 = 1.0f, c2 = 1.0f; /* the corrections of step `last` */
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] + o->l2 * w[i];
        t[i] += 1.0f;
        if (t[i] != last) { /* a row's values share t: two powf per row, not per value */
            last = t[i];
            c1 = 1.0f - powf(b1, last);
            c2 = 1.0f - powf(b2, last);
        }
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        w[i] = w[i] * decay - o->lr * (m[i] / c1) / (sqrtf(v[i] / c2) + o->eps);
    }
}

static void ftrl(const upd_opts *o, float *w, float *z, float *nn, const float *g, size_t n)
{
    const float a = o->lr, l1 = o->l1;
    for (size_t i = 0; i < n; i++) {
        float gi = g[i], n1 = nn[i] + gi * gi;
        float sigma = (sqrtf(n1) - sqrtf(nn[i])) / a;
        z[i] += gi - sigma * w[i];
        nn[i] = n1;
        float zi = z[i];
        if (fabsf(zi) <= l1)
            w[i] = 0.0f;
        else
            w[i] = -(zi - copysignf(l1, zi)) / ((o->beta + sqrtf(n1)) / a + o->l2);
    }
}

void upd_apply_planes(const upd_opts *o, float *w, float *state, size_t stride, const float *g,
                      size_t n, size_t width)
{
    switch (o->kind) {
    case UPD_SUM:
        cblas_saxpy((blasint)n, 1.0f, g, 1, w, 1);
        return;
    case UPD_SGD:
        sgd(o, w, state, g, n);
        return;
    case UPD_ADAGRAD:
        for (size_t i = 0; i < n; i++) {
            float gi = g[i] + o->l2 * w[i];
            state[i] += gi * gi;
            w[i] -= o->lr * gi / (sqrtf(state[i]) + o->eps);
        }
        return;
    case UPD_ADAM:
    case UPD_ADAMW:
        adam(o, w, state, state + stride, state + 2 * stride, g, n);
        return;
    case UPD_FTRL:
        ftrl(o, w, state, state + stride, g, n);
        return;
    case UPD_PLUGIN:
        upd_plugin_apply(o->plug, w, state, stride, g, n / width, (uint32_t)width);
        return;
    }
}

void upd_apply(const upd_opts *o, float *w, float *state, const float *g, size_t n)
{
    upd_apply_planes(o, w, state, n, g, n, n ? n : 1);
}

/* An exponent of all ones (NaN or infinity) carries into bit 31 when 2^23 is added
 * to the masked exponent. Blocks of 16 with no early exit let the compiler keep it
 * in vector registers: about twice the speed of a compare. The bits are read
 * through a type that may alias the floats: with the caller inlined (LTO), plain
 * uint32_t reads could move before its float writes. */
static int all_finite_base(const float *v, size_t n)
{
    typedef uint32_t __attribute__((may_alias)) bits32;
    const bits32 *u = (const bits32 *)(const void *)v;
    uint32_t bad = 0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        uint32_t b = 0;
        for (int k = 0; k < 16; k++)
            b |= (u[i + k] & 0x7f800000u) + 0x00800000u;
        bad |= b;
    }
    for (; i < n; i++)
        bad |= (u[i] & 0x7f800000u) + 0x00800000u;
    return !(bad & 0x80000000u);
}

#ifdef UPD_X86
/* The same test 16 values at a time in two vector accumulators, looked at once at
 * the end; the tail by the portable code. */
TGT static int all_finite_avx2(const float *v, size_t n)
{
    const __m256i mask = _mm256_set1_epi32(0x7f800000), one = _mm256_set1_epi32(0x00800000);
    __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)(v + i));
        __m256i x1 = _mm256_loadu_si256((const __m256i *)(const void *)(v + i + 8));
        a0 = _mm256_or_si256(a0, _mm256_add_epi32(_mm256_and_si256(x0, mask), one));
        a1 = _mm256_or_si256(a1, _mm256_add_epi32(_mm256_and_si256(x1, mask), one));
    }
    if (_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_or_si256(a0, a1))))
        return 0;
    return all_finite_base(v + i, n - i);
}
#endif

int upd_all_finite(const float *v, size_t n)
{
#ifdef UPD_X86
    if (halfvec_on())
        return all_finite_avx2(v, n);
#endif
    return all_finite_base(v, n);
}
