/* common/halfvec.c and fquantvec.c: the vector kernels against the portable code,
 * bit for bit, on random bit patterns (NaNs with payloads, infinities, subnormals,
 * out-of-range values), ties, and blocks made to hit each special case; at odd
 * lengths and offsets so that the portable tails run too. The same call runs with
 * the kernels on and off (halfvec_set). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fquant.h"
#include "half.h"
#include "halfvec.h"
#include "suites.h"

#define N 100003

static uint64_t seed;

static uint32_t rnd(void)
{
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return (uint32_t)(seed >> 11) * 2654435761u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Values of kind k: 0 random bits, 1 values near 1 (normal gradients), 2 ties of
 * fp16 and bf16 (low bits exactly half an ulp), 3 fp16's range edges and
 * subnormals; every 97th value a NaN with a payload or an infinity. */
static void fill(float *f, size_t n, int kind)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t r = rnd();
        switch (kind) {
        case 0: f[i] = bitsf(r); break;
        case 1: f[i] = ldexpf((float)(r >> 8) / 16777216.0f, (int)(r % 20) - 10) * (r & 1 ? -1 : 1); break;
        case 2: f[i] = bitsf((r & 0xffff0000u) | (i & 1 ? 0x8000u : 0x1000u)); break;
        default: f[i] = ldexpf(1.0f + (float)(r >> 9) / 8388608.0f, (int)(r % 44) - 28) * (r & 1 ? -1 : 1);
        }
        if (i % 97 == 13)
            f[i] = bitsf(r & 4 ? 0x7f800000u | (r & 0x807fffffu) : (r & 0x80000000u) | 0x7f800000u);
    }
}

static void check_same(const void *a, const void *b, size_t bytes, const char *what, int kind)
{
    halfvec_set(1); /* back on for the next call */
    ck_assert(halfvec_on());
    if (!memcmp(a, b, bytes))
        return;
    const uint8_t *x = a, *y = b;
    size_t k = 0;
    while (x[k] == y[k])
        k++;
    ck_abort_msg("%s, values of kind %d: byte %zu differs (vector 0x%02x, portable 0x%02x)",
                 what, kind, k, x[k], y[k]);
}

/* pack, pack scaled, unpack, unpack scaled, unpack-add, reduce, round, overflows */
START_TEST(half_paths_same_bits)
{
    if (!halfvec_on()) {
        fprintf(stderr, "halfvec: this CPU has no AVX2 and F16C: the portable code only\n");
        return;
    }
    seed = 1234567 + (uint64_t)_i;
    int wire = _i & 1 ? HALF_BF16 : HALF_FP16, kind = _i / 2;
    float *f = malloc(N * sizeof *f), *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    uint16_t *h = malloc(N * sizeof *h), *p = malloc(N * sizeof *p), *hr = malloc(N * sizeof *hr);
    ck_assert(f && a && b && h && p && hr);
    fill(f, N, kind);
    for (size_t i = 0; i < N; i++)
        hr[i] = (uint16_t)rnd();
    for (size_t off = 0; off < 3; off++) {
        size_t n = N - off * 7;
        const float *src = f + off;
        for (float s = 0x1p-3f; s <= 0x1p3f; s *= 4) { /* 1/8, 1/2, 2, 8 and 1 */
            float sc = s == 0x1p-1f ? 1.0f : s;
            half_pack_scaled(wire, h, src, n, sc);
            halfvec_set(0);
            half_pack_scaled(wire, p, src, n, sc);
            check_same(h, p, n * sizeof *h, "pack", kind);
            half_unpack_scaled(wire, a, hr + off, n, sc);
            halfvec_set(0);
            half_unpack_scaled(wire, b, hr + off, n, sc);
            check_same(a, b, n * sizeof *a, "unpack", kind);
            /* the whole (a NaN at 13), and windows between the NaNs and infinities */
            static const size_t at[][2] = {{0, N - 30}, {14, 96}, {14, 83}, {111, 9}, {208, 40}};
            for (size_t w = 0; w < sizeof at / sizeof at[0]; w++) {
                int bad = half_overflows(wire, src + at[w][0], at[w][1], sc);
                halfvec_set(0);
                ck_assert_int_eq(bad, half_overflows(wire, src + at[w][0], at[w][1], sc));
                halfvec_set(1);
            }
        }
        memcpy(a, src, n * sizeof *a);
        memcpy(b, src, n * sizeof *b);
        half_round(wire, a, n);
        halfvec_set(0);
        half_round(wire, b, n);
        check_same(a, b, n * sizeof *a, "round", kind);
        for (size_t i = 0; i < n; i++) /* finite sums: NaN + NaN's payload is the CPU's */
            a[i] = b[i] = isnan(src[i]) ? 1.0f : src[i];
        half_unpack_add(wire, a, hr + off, n);
        halfvec_set(0);
        half_unpack_add(wire, b, hr + off, n);
        check_same(a, b, n * sizeof *a, "unpack_add", kind);
        /* the ring's reduce: divide by N (a power of two is a multiply in the kernel) */
        static const float divs[] = {1, 2, 3, 1, 4, 8, 6};
        for (int step = 0; step < (int)(sizeof divs / sizeof divs[0]); step++) {
            float div = divs[step];
            half_reduce(wire, a, hr + off, n, div, step & 1, h);
            halfvec_set(0);
            half_reduce(wire, b, hr + off, n, div, step & 1, p);
            check_same(a, b, n * sizeof *a, "reduce (floats)", kind);
            check_same(h, p, n * sizeof *h, "reduce (packed)", kind);
        }
    }
    float big[40] = {0};
    big[37] = 1e30f;
    ck_assert(half_overflows(HALF_FP16, big, 40, 1.0f) && !half_overflows(HALF_FP16, big, 37, 1.0f));
    free(f);
    free(a);
    free(b);
    free(h);
    free(p);
    free(hr);
}
END_TEST

/* int8 and sign: every kind, plus blocks of zeros, of one subnormal, of exponents
 * far apart (the sign sum that could round: the portable code's), of int8 ties
 * (x / scale exactly k + 1/2), of a sum whose rounding depends on the order */
START_TEST(quant_same_bits)
{
    if (!halfvec_on())
        return;
    uint32_t quant = _i & 1 ? FQUANT_SIGN : FQUANT_INT8;
    int kind = _i / 2;
    seed = 7654321 + (uint64_t)_i;
    size_t n = 64 * FQUANT_BLOCK + 77;
    float *x = malloc(n * sizeof *x), *q = malloc(n * sizeof *q), *q2 = malloc(n * sizeof *q2);
    float *d = malloc(n * sizeof *d), *d2 = malloc(n * sizeof *d2);
    uint64_t bytes = fquant_bytes(quant, n);
    uint8_t *e = malloc(bytes), *e2 = malloc(bytes);
    ck_assert(x && q && q2 && d && d2 && e && e2);
    if (kind < 4) {
        fill(x, n, kind);
    } else { /* kind 4: special blocks */
        fill(x, n, 1);
        memset(x, 0, FQUANT_BLOCK * sizeof *x);                  /* block 0: zeros */
        x[FQUANT_BLOCK + 5] = bitsf(1);                          /* block 1: a subnormal */
        for (size_t i = 0; i < FQUANT_BLOCK; i++) {
            x[FQUANT_BLOCK + i] = i == 5 ? x[FQUANT_BLOCK + i] : 0.0f;
            x[2 * FQUANT_BLOCK + i] = ldexpf(1.0f + (float)i / 256, (int)(i % 60) - 30);
            x[3 * FQUANT_BLOCK + i] = i ? (float)((int)i % 255 - 127) + 0.5f : 127.0f;
            x[4 * FQUANT_BLOCK + i] = -0.0f;
            /* block 5: 1 + 2^-24 (a tie of float at 1 once divided by 256, in order)
             * and 254 values under half a double ulp of 1, which in order vanish and
             * summed first do not: a sign scale that depends on the order */
            x[5 * FQUANT_BLOCK + i] = i == 0 ? 1.0f : i == 1 ? 0x1p-24f : 0x3p-55f;
        }
    }
    fquant_encode(quant, x, n, e, q);
    halfvec_set(0);
    fquant_encode(quant, x, n, e2, q2);
    check_same(e, e2, bytes, "encode", kind);
    check_same(q, q2, n * sizeof *q, "encoded values", kind);
    char why[200];
    int rc = fquant_decode(quant, e, n, d, why, sizeof why);
    halfvec_set(0);
    ck_assert_int_eq(rc, fquant_decode(quant, e, n, d2, why, sizeof why));
    halfvec_set(1);
    if (rc == 0)
        check_same(d, d2, n * sizeof *d, "decode", kind);
    free(x);
    free(q);
    free(q2);
    free(d);
    free(d2);
    free(e);
    free(e2);
}
END_TEST

Suite *halfvec_suite(void)
{
    Suite *s = suite_create("halfvec");
    TCase *tc = tcase_create("same_bits");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, half_paths_same_bits, 0, 8);
    tcase_add_loop_test(tc, quant_same_bits, 0, 10);
    suite_add_tcase(s, tc);
    return s;
}
