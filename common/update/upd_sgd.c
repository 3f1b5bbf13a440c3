/* upd_sgd: v = momentum*v + g + l2*w; w -= lr*v, with the proximal step of l1
 * (updater.h). State: the velocity plane when momentum > 0. Dense runs without
 * momentum go through OpenBLAS (sscal, saxpy); momentum through one pass of
 * AVX2 (where the CPU has it, halfvec_on), SSE2 and scalar lanes that give the
 * same bits. */
#include <cblas.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define UPD_X86 1 /* the AVX2 kernels, chosen at run time (halfvec_on) */
#define TGT __attribute__((target("avx,avx2")))
#endif

#include "halfvec.h"
#include "updater.h"

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

static int planes(const upd_opts *o) { return o->momentum > 0; }

static void apply(const upd_opts *o, float *w, float *state, size_t stride, const float *g,
                  size_t n, size_t width)
{
    (void)stride, (void)width;
    sgd(o, w, state, g, n);
}

const upd_ops upd_sgd_ops = {
    .name = "sgd",
    .state_planes = planes,
    .check = upd_check_own,
    .may_fail = 0,
    .apply = apply,
    .rules = {.takes = UPD_TAKES_MOMENTUM | UPD_TAKES_L1},
};
