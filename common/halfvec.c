/* halfvec: AVX2 + F16C kernels of the 16-bit value paths (contract
 * in halfvec.h). Functions carry their instruction set as a target attribute, so
 * the rest of the program builds for the baseline CPU; halfvec_on() chooses at
 * run time. No FMA anywhere: a fused multiply-add rounds once where the portable
 * code rounds twice. */
#include "halfvec.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "half.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define HV_X86 1
#define TGT __attribute__((target("avx,avx2,f16c")))
#endif

static atomic_int enabled = 1;

int halfvec_on(void)
{
#ifdef HV_X86
    static atomic_int has = -1; /* threads may race to fill it: with the same value */
    int h = atomic_load_explicit(&has, memory_order_relaxed);
    if (h < 0) { /* half_has_f16c checked AVX, F16C and the OS's AVX state */
        unsigned a, b, c, d;
        h = half_has_f16c() && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX2);
        atomic_store_explicit(&has, h, memory_order_relaxed);
    }
    return h && atomic_load_explicit(&enabled, memory_order_relaxed);
#else
    return 0;
#endif
}

int halfvec_set(int on)
{
    return atomic_exchange_explicit(&enabled, on != 0, memory_order_relaxed);
}

#ifdef HV_X86
/* bf16 of 8 floats in the low halves of 32-bit lanes: half_bf16_from's
 * round to nearest even, a NaN kept quiet. */
TGT static __m256i bf16_of(__m256 x)
{
    __m256i u = _mm256_castps_si256(x);
    __m256i absu = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    __m256i nan = _mm256_cmpgt_epi32(absu, _mm256_set1_epi32(0x7f800000));
    __m256i hi = _mm256_srli_epi32(u, 16);
    __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    return _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
}

TGT static __m256 load_scaled(const float *src, __m256 sv, int mul)
{
    __m256 x = _mm256_loadu_ps(src);
    return mul ? _mm256_mul_ps(x, sv) : x;
}

TGT static size_t pack_avx2(int wire, uint16_t *dst, const float *src, size_t n, float scale)
{
    __m256 sv = _mm256_set1_ps(scale);
    int mul = scale != 1.0f;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a = load_scaled(src + i, sv, mul), b = load_scaled(src + i + 8, sv, mul);
        __m256i h;
        if (wire == HALF_BF16) /* packus interleaves the 128-bit lanes: put them back */
            h = _mm256_permute4x64_epi64(_mm256_packus_epi32(bf16_of(a), bf16_of(b)), 0xd8);
        else
            h = _mm256_setr_m128i(_mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT),
                                  _mm256_cvtps_ph(b, _MM_FROUND_TO_NEAREST_INT));
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), h);
    }
    return i;
}

TGT static __m256 unpack8(int wire, const uint16_t *src)
{
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)src);
    if (wire == HALF_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

TGT static size_t unpack_avx2(int wire, float *dst, const uint16_t *src, size_t n, float mul,
                              int add)
{
    __m256 mv = _mm256_set1_ps(mul);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = unpack8(wire, src + i);
        if (mul != 1.0f)
            x = _mm256_mul_ps(x, mv);
        if (add) /* dst first, as dst[i] += x */
            x = _mm256_add_ps(_mm256_loadu_ps(dst + i), x);
        _mm256_storeu_ps(dst + i, x);
    }
    return i;
}

/* 8 floats to 16 bits in the low halves of 32-bit lanes' worth: 8 halves */
TGT static __m128i pack8(int wire, __m256 x)
{
    if (wire != HALF_BF16)
        return _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
    __m256i b = bf16_of(x); /* each below 2^16: packus keeps it */
    return _mm_packus_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
}

/* 1 when d is a power of two whose reciprocal is a normal float: x / d and
 * x * (1 / d) are then the same bits for every x (one rounding of the same value). */
static int pow2_recip(float d)
{
    int e;
    return d > 0.0f && frexpf(d, &e) == 0.5f && e >= -124 && e <= 126;
}

TGT static size_t reduce_avx2(int wire, float *dst, const uint16_t *src, size_t n, float div,
                              int round, uint16_t *out)
{
    int mul = pow2_recip(div); /* a multiply for 2, 4, 8 ... ranks: a divide costs more */
    __m256 dv = _mm256_set1_ps(mul ? 1.0f / div : div);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_add_ps(_mm256_loadu_ps(dst + i), unpack8(wire, src + i));
        if (div != 1.0f)
            x = mul ? _mm256_mul_ps(x, dv) : _mm256_div_ps(x, dv);
        __m128i h = pack8(wire, x);
        _mm_storeu_si128((__m128i *)(void *)(out + i), h);
        if (round) /* pack(unpack(h)) is h: what was packed is what dst keeps */
            x = wire == HALF_BF16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
                                  : _mm256_cvtph_ps(h);
        _mm256_storeu_ps(dst + i, x);
    }
    return i;
}

TGT static size_t round_avx2(int wire, float *v, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(v + i);
        if (wire == HALF_BF16)
            x = _mm256_castsi256_ps(_mm256_slli_epi32(bf16_of(x), 16));
        else
            x = _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
        _mm256_storeu_ps(v + i, x);
    }
    return i;
}

TGT static size_t overflows_avx2(const float *src, size_t n, float scale, float lim, int *bad)
{
    __m256 sv = _mm256_set1_ps(scale), lv = _mm256_set1_ps(lim), acc = _mm256_setzero_ps();
    __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    size_t i = 0;
    for (; i + 8 <= n; i += 8) { /* not less than: a NaN is true too */
        __m256 a = _mm256_and_ps(_mm256_mul_ps(_mm256_loadu_ps(src + i), sv), absm);
        acc = _mm256_or_ps(acc, _mm256_cmp_ps(a, lv, _CMP_NLT_UQ));
    }
    if (!_mm256_testz_ps(acc, acc))
        *bad = 1;
    return i;
}
#endif

size_t halfvec_pack(int wire, uint16_t *dst, const float *src, size_t n, float scale)
{
#ifdef HV_X86
    if (halfvec_on())
        return pack_avx2(wire, dst, src, n, scale);
#endif
    (void)wire, (void)dst, (void)src, (void)n, (void)scale;
    return 0;
}

size_t halfvec_unpack(int wire, float *dst, const uint16_t *src, size_t n, float mul, int add)
{
#ifdef HV_X86
    if (halfvec_on())
        return unpack_avx2(wire, dst, src, n, mul, add);
#endif
    (void)wire, (void)dst, (void)src, (void)n, (void)mul, (void)add;
    return 0;
}

size_t halfvec_reduce(int wire, float *dst, const uint16_t *src, size_t n, float div, int round,
                      uint16_t *out)
{
#ifdef HV_X86
    if (halfvec_on())
        return reduce_avx2(wire, dst, src, n, div, round, out);
#endif
    (void)wire, (void)dst, (void)src, (void)n, (void)div, (void)round, (void)out;
    return 0;
}

size_t halfvec_round(int wire, float *v, size_t n)
{
#ifdef HV_X86
    if (halfvec_on())
        return round_avx2(wire, v, n);
#endif
    (void)wire, (void)v, (void)n;
    return 0;
}

size_t halfvec_overflows(const float *src, size_t n, float scale, float lim, int *bad)
{
#ifdef HV_X86
    if (halfvec_on())
        return overflows_avx2(src, n, scale, lim, bad);
#endif
    (void)src, (void)n, (void)scale, (void)lim, (void)bad;
    return 0;
}
