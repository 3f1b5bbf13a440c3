/* half: fp16 and bf16 conversions (contract in half.h). */
#include "half.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "halfvec.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define HALF_X86 1
#endif

#define BLOCK 256 /* floats converted on the stack at a time by unpack_add */

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

const char *half_name(int wire)
{
    return wire == HALF_FP32 ? "fp32" : wire == HALF_FP16 ? "fp16" : wire == HALF_BF16 ? "bf16"
                                                                                         : "?";
}

int half_parse(const char *name)
{
    for (int k = HALF_FP32; k <= HALF_BF16; k++)
        if (name && !strcmp(name, half_name(k)))
            return k;
    return -1;
}

size_t half_size(int wire) { return wire == HALF_FP16 || wire == HALF_BF16 ? 2 : 4; }

uint16_t half_fp16_from(float f)
{
    uint32_t u = bits_of(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t exp = (u >> 23) & 0xff, mant = u & 0x7fffff;
    if (exp == 0xff) /* inf, or a NaN: quiet, top payload bits kept (as F16C does) */
        return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 | (mant >> 13) : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00);
    if (e <= 0) { /* subnormal or zero: shift the full significand, round to even */
        if (e < -10)
            return sign;
        uint32_t sig = mant | 0x800000;
        int shift = 14 - e; /* 24-bit significand to a 10-bit field at 2^-24 */
        uint32_t h = sig >> shift, rest = sig & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rest > half || (rest == half && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (mant >> 13), rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
        h++; /* a carry into the exponent is right, up to infinity */
    return (uint16_t)(sign | h);
}

float half_fp16_to(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0x1f)
        return float_of(sign | 0x7f800000 | (mant ? 0x400000 | (mant << 13) : 0));
    if (exp == 0) { /* zero or subnormal: mant x 2^-24, exact in float */
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    return float_of(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t half_bf16_from(float f)
{
    uint32_t u = bits_of(f);
    if ((u & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

float half_bf16_to(uint16_t h) { return float_of((uint32_t)h << 16); }

void half_pack_portable(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = half_fp16_from(src[i]);
}

void half_unpack_portable(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = half_fp16_to(src[i]);
}

#ifdef HALF_X86
__attribute__((target("avx,f16c"))) static size_t pack_f16c(uint16_t *dst, const float *src,
                                                             size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(void *)(dst + i), h);
    }
    return i;
}

__attribute__((target("avx,f16c"))) static size_t unpack_f16c(float *dst, const uint16_t *src,
                                                               size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i,
                         _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + i))));
    return i;
}
#endif

int half_has_f16c(void)
{
#ifdef HALF_X86
    /* CPUID and XGETBV, not __builtin_cpu_supports: clang's knows no "f16c" (make
     * fuzz builds this file with clang) */
    static atomic_int has = -1; /* threads may race to fill it: with the same value */
    int h = atomic_load_explicit(&has, memory_order_relaxed);
    if (h < 0) {
        unsigned a, b, c, d, lo, hi;
        h = 0;
        if (__get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) && (c & bit_AVX) &&
            (c & bit_OSXSAVE)) {
            __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            h = (lo & 6) == 6; /* the OS saves the SSE and AVX registers */
        }
        atomic_store_explicit(&has, h, memory_order_relaxed);
    }
    return h;
#else
    return 0;
#endif
}

void half_pack(int wire, uint16_t *dst, const float *src, size_t n)
{
    size_t i = halfvec_pack(wire, dst, src, n, 1.0f);
    dst += i, src += i, n -= i, i = 0;
    if (wire == HALF_BF16) {
        for (; i < n; i++)
            dst[i] = half_bf16_from(src[i]);
        return;
    }
#ifdef HALF_X86
    if (half_has_f16c())
        i = pack_f16c(dst, src, n);
#endif
    half_pack_portable(dst + i, src + i, n - i);
}

void half_unpack(int wire, float *dst, const uint16_t *src, size_t n)
{
    size_t i = halfvec_unpack(wire, dst, src, n, 1.0f, 0);
    dst += i, src += i, n -= i, i = 0;
    if (wire == HALF_BF16) {
        for (; i < n; i++)
            dst[i] = half_bf16_to(src[i]);
        return;
    }
#ifdef HALF_X86
    if (half_has_f16c())
        i = unpack_f16c(dst, src, n);
#endif
    half_unpack_portable(dst + i, src + i, n - i);
}

void half_unpack_add(int wire, float *dst, const uint16_t *src, size_t n)
{
    float tmp[BLOCK];
    for (size_t i = halfvec_unpack(wire, dst, src, n, 1.0f, 1); i < n; i += BLOCK) {
        size_t k = n - i < BLOCK ? n - i : BLOCK;
        half_unpack(wire, tmp, src + i, k);
        for (size_t j = 0; j < k; j++)
            dst[i + j] += tmp[j];
    }
}

void half_reduce(int wire, float *dst, const uint16_t *src, size_t n, float div, int round,
                 uint16_t *out)
{
    size_t i = halfvec_reduce(wire, dst, src, n, div, round, out);
    dst += i, src += i, out += i, n -= i;
    half_unpack_add(wire, dst, src, n);
    for (size_t j = 0; div != 1.0f && j < n; j++)
        dst[j] /= div;
    if (round)
        half_round(wire, dst, n);
    half_pack(wire, out, dst, n);
}

void half_round(int wire, float *v, size_t n)
{
    uint16_t tmp[BLOCK];
    for (size_t i = halfvec_round(wire, v, n); i < n; i += BLOCK) {
        size_t k = n - i < BLOCK ? n - i : BLOCK;
        half_pack(wire, tmp, v + i, k);
        half_unpack(wire, v + i, tmp, k);
    }
}

/* The smallest magnitude that rounds to infinity in `wire` (to nearest even):
 * fp16 65520 (half-way between 65504 and 65536), bf16 the float half-way
 * between bf16's largest 0x7f7f and 0x7f80, fp32 infinity itself. */
static float overflow_at(int wire)
{
    return wire == HALF_FP16 ? 65520.0f
           : wire == HALF_BF16 ? float_of(0x7f7f8000u)
                               : float_of(0x7f800000u);
}

int half_overflows(int wire, const float *src, size_t n, float scale)
{
    float lim = overflow_at(wire);
    int bad = 0;
    for (size_t i = halfvec_overflows(src, n, scale, lim, &bad); i < n; i++) /* NaN too */
        bad |= !(__builtin_fabsf(src[i] * scale) < lim);
    return bad;
}

int half_scale_ok(float s)
{
    int e;
    return s >= 0x1p-24f && s <= 0x1p24f && frexpf(s, &e) == 0.5f;
}

void half_pack_scaled(int wire, uint16_t *dst, const float *src, size_t n, float scale)
{
    if (scale == 1.0f) {
        half_pack(wire, dst, src, n);
        return;
    }
    float tmp[BLOCK];
    for (size_t i = halfvec_pack(wire, dst, src, n, scale); i < n; i += BLOCK) {
        size_t k = n - i < BLOCK ? n - i : BLOCK;
        for (size_t j = 0; j < k; j++)
            tmp[j] = src[i + j] * scale;
        half_pack(wire, dst + i, tmp, k);
    }
}

void half_unpack_scaled(int wire, float *dst, const uint16_t *src, size_t n, float scale)
{
    float inv = 1.0f / scale; /* exact: scale is a power of two (half_scale_ok) */
    size_t i = halfvec_unpack(wire, dst, src, n, inv, 0);
    half_unpack(wire, dst + i, src + i, n - i);
    for (; scale != 1.0f && i < n; i++)
        dst[i] *= inv;
}
