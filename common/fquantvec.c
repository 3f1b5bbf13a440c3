/* fquantvec: AVX2 int8 and sign block kernels (contract in fquantvec.h). */
#include "fquantvec.h"

#include <string.h>

#include "fquant.h"
#include "halfvec.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define FV_X86 1
#define TGT __attribute__((target("avx,avx2")))
#endif

#ifdef FV_X86
/* |x| of 8 floats, its bits, and whether one is not finite (in *big). */
TGT static __m256i abs_bits(const float *x, __m256i *big)
{
    __m256i a = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)x),
                                 _mm256_set1_epi32(0x7fffffff));
    *big = _mm256_or_si256(*big, _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f7fffff)));
    return a;
}

TGT static float hmax(__m256 m)
{
    __m128 v = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    v = _mm_max_ps(v, _mm_movehl_ps(v, v));
    v = _mm_max_ss(v, _mm_shuffle_ps(v, v, 1));
    return _mm_cvtss_f32(v);
}

TGT static int int8_block(const float *x, uint8_t *out, float *q)
{
    __m256i big = _mm256_setzero_si256();
    __m256 mx = _mm256_setzero_ps();
    for (size_t i = 0; i < FQUANT_BLOCK; i += 8) /* finite: max is fmaxf's max */
        mx = _mm256_max_ps(mx, _mm256_castsi256_ps(abs_bits(x + i, &big)));
    if (!_mm256_testz_si256(big, big))
        return 0;
    float scale = hmax(mx) / 127.0f;
    memcpy(out, &scale, sizeof scale);
    out += sizeof scale;
    if (!(scale > 0)) { /* the portable code's codes 0 and values 0 * 0 */
        memset(out, 0, FQUANT_BLOCK);
        memset(q, 0, FQUANT_BLOCK * sizeof *q);
        return 1;
    }
    __m256 sv = _mm256_set1_ps(scale), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    /* packs interleave the 128-bit lanes; this puts the 8 groups of 4 back */
    __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (size_t i = 0; i < FQUANT_BLOCK; i += 32) {
        __m256i c32[4];
        for (int k = 0; k < 4; k++) {
            __m256 c = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + i + 8 * k), sv),
                                       _MM_FROUND_CUR_DIRECTION);
            c = _mm256_min_ps(_mm256_max_ps(c, lo), hi); /* -0 stays -0, as the portable */
            _mm256_storeu_ps(q + i + 8 * k, _mm256_mul_ps(c, sv));
            c32[k] = _mm256_cvttps_epi32(c);
        }
        __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(c32[0], c32[1]),
                                       _mm256_packs_epi32(c32[2], c32[3]));
        _mm256_storeu_si256((__m256i *)(void *)(out + i), _mm256_permutevar8x32_epi32(b, order));
    }
    return 1;
}

TGT static int hmax_epi32(__m256i v)
{
    __m128i m = _mm_max_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0x4e));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0xb1));
    return _mm_cvtsi128_si32(m);
}

/* The sum of |x| over the block, in double, when no partial sum can round: the
 * values are multiples of the smallest one's ulp and the sum is below 2^8 times
 * the largest, so with exponents at most 21 apart every partial sum fits in 53
 * bits and any order gives the in-order sum. Returns 0 when it cannot. */
TGT static int sign_sum(const float *x, double *sum)
{
    __m256i big = _mm256_setzero_si256(), emax = _mm256_setzero_si256();
    __m256i nemin = _mm256_set1_epi32(-255), one = _mm256_set1_epi32(1);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    for (size_t i = 0; i < FQUANT_BLOCK; i += 8) {
        __m256i a = abs_bits(x + i, &big), e = _mm256_srli_epi32(a, 23);
        __m256i nz = _mm256_cmpgt_epi32(a, _mm256_setzero_si256());
        emax = _mm256_max_epi32(emax, e); /* a subnormal's ulp is exponent 1's */
        __m256i emin = _mm256_blendv_epi8(_mm256_set1_epi32(255), _mm256_max_epi32(e, one), nz);
        nemin = _mm256_max_epi32(nemin, _mm256_sub_epi32(_mm256_setzero_si256(), emin));
        __m256 f = _mm256_castsi256_ps(a);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(f)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));
    }
    if (!_mm256_testz_si256(big, big) || hmax_epi32(emax) + hmax_epi32(nemin) > 21)
        return 0;
    __m256d s = _mm256_add_pd(s0, s1);
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    *sum = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    return 1;
}

TGT static int sign_block(const float *x, uint8_t *out, float *q)
{
    double sum;
    if (!sign_sum(x, &sum))
        return 0;
    float scale = (float)(sum / (double)FQUANT_BLOCK);
    memcpy(out, &scale, sizeof scale);
    out += sizeof scale;
    __m256 pos = _mm256_set1_ps(scale), neg = _mm256_set1_ps(-scale), zero = _mm256_setzero_ps();
    for (size_t i = 0; i < FQUANT_BLOCK; i += 8) {
        __m256 lt = _mm256_cmp_ps(_mm256_loadu_ps(x + i), zero, _CMP_LT_OQ);
        out[i / 8] = (uint8_t)_mm256_movemask_ps(lt);
        _mm256_storeu_ps(q + i, _mm256_blendv_ps(pos, neg, lt));
    }
    return 1;
}

TGT static size_t decode_avx2(uint32_t quant, const uint8_t *in, size_t len, float scale,
                              float *out)
{
    __m256 pos = _mm256_set1_ps(scale), neg = _mm256_set1_ps(-scale);
    __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        __m256 v;
        if (quant == FQUANT_INT8) {
            __m256i c = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(in + i)));
            v = _mm256_mul_ps(_mm256_cvtepi32_ps(c), pos);
        } else {
            __m256i m = _mm256_and_si256(_mm256_set1_epi32(in[i / 8]), bit);
            v = _mm256_blendv_ps(pos, neg, _mm256_castsi256_ps(_mm256_cmpeq_epi32(m, bit)));
        }
        _mm256_storeu_ps(out + i, v);
    }
    return i;
}

TGT static size_t add_avx2(float *x, const float *a, const float *b, size_t n, int sub)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 u = _mm256_loadu_ps(a + i), v = b ? _mm256_loadu_ps(b + i) : _mm256_setzero_ps();
        _mm256_storeu_ps(x + i, sub ? _mm256_sub_ps(u, v) : _mm256_add_ps(u, v));
    }
    return i;
}
#endif

int fquantvec_block(uint32_t quant, const float *x, uint8_t *out, float *q)
{
#ifdef FV_X86
    if (halfvec_on())
        return quant == FQUANT_INT8 ? int8_block(x, out, q) : sign_block(x, out, q);
#endif
    (void)quant, (void)x, (void)out, (void)q;
    return 0;
}

size_t fquantvec_decode(uint32_t quant, const uint8_t *in, size_t len, float scale, float *out)
{
#ifdef FV_X86
    if (halfvec_on())
        return decode_avx2(quant, in, len, scale, out);
#endif
    (void)quant, (void)in, (void)len, (void)scale, (void)out;
    return 0;
}

size_t fquantvec_add(float *x, const float *a, const float *b, size_t n, int sub)
{
#ifdef FV_X86
    if (halfvec_on())
        return add_avx2(x, a, b, n, sub);
#endif
    (void)x, (void)a, (void)b, (void)n, (void)sub;
    return 0;
}
