/* common/half.c: fp16 and bf16 conversions: round trips within half an ulp,
 * ties to even, specials, and the portable path against F16C bit for bit. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "suites.h"

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* xorshift: the same values on every run */
static uint32_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 11);
}

/* fp16's ulp at |y| (y a half value, finite) */
static double fp16_ulp(double y)
{
    y = fabs(y);
    if (y < 0x1p-14)
        return 0x1p-24;
    return ldexp(1.0, ilogb(y) - 10);
}

START_TEST(fp16_round_trip_within_half_ulp)
{
    uint64_t s = 88172645463325252ULL;
    for (int k = 0; k < 200000; k++) {
        /* magnitudes from 2^-26 to 2^16, both signs */
        double x = ldexp(1.0 + (next_rand(&s) & 0xffffff) / 16777216.0, (int)(next_rand(&s) % 42) - 26);
        float f = (float)(k & 1 ? -x : x);
        uint16_t h = half_fp16_from(f);
        float y = half_fp16_to(h);
        if (fabsf(f) > 65519.99f) {
            ck_assert(isinf(y));
            continue;
        }
        ck_assert_msg(fabs((double)y - (double)f) <= fp16_ulp(y) / 2,
                      "%.9g -> 0x%04x = %.9g: more than half an ulp", (double)f, h, (double)y);
        ck_assert_int_eq(signbit(y) != 0, signbit(f) != 0);
    }
    /* every finite half comes back to its bits; ties between neighbours go to the even one */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00)
            continue;
        float y = half_fp16_to((uint16_t)h);
        ck_assert_int_eq(half_fp16_from(y), h);
        if ((h & 0x7fff) == 0x7bff)
            continue;
        float mid = (float)(((double)y + (double)half_fp16_to((uint16_t)(h + 1))) / 2);
        uint16_t want = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        ck_assert_msg(half_fp16_from(mid) == want, "tie %.9g above 0x%04x gave 0x%04x", (double)mid,
                      h, half_fp16_from(mid));
    }
}
END_TEST

START_TEST(fp16_specials)
{
    ck_assert_int_eq(half_fp16_from(INFINITY), 0x7c00);
    ck_assert_int_eq(half_fp16_from(-INFINITY), 0xfc00);
    ck_assert(isnan(half_fp16_to(half_fp16_from(NAN))));
    ck_assert(isnan(half_fp16_to(half_fp16_from(bitsf(0x7f800001))))); /* a signalling NaN */
    ck_assert(isinf(half_fp16_to(0x7c00)) && isnan(half_fp16_to(0x7e00)));
    ck_assert_int_eq(half_fp16_from(65504.0f), 0x7bff);
    ck_assert_int_eq(half_fp16_from(65519.0f), 0x7bff);
    ck_assert_int_eq(half_fp16_from(65520.0f), 0x7c00); /* the tie above the largest: even = inf */
    ck_assert_int_eq(half_fp16_from(1e10f), 0x7c00);
    ck_assert_int_eq(half_fp16_from(-0.0f), 0x8000);
    ck_assert_int_eq(half_fp16_from(0x1p-24f), 0x0001);  /* the smallest subnormal */
    ck_assert_int_eq(half_fp16_from(0x1p-25f), 0x0000);  /* its half: a tie, to even (0) */
    ck_assert_int_eq(half_fp16_from(0x1.8p-24f), 0x0002); /* 1.5 ulp: a tie, to even (2) */
    ck_assert_int_eq(half_fp16_from(0x1.0001p-25f), 0x0001);
    ck_assert_int_eq(half_fp16_from(0x1.ffcp-15f), 0x0400); /* a tie above the largest subnormal */
    ck_assert_int_eq(half_fp16_from(0x1.ffap-15f), 0x03ff);
    ck_assert(half_fp16_to(0x0001) == 0x1p-24f && half_fp16_to(0x03ff) == 0x1.ff8p-15f);
    ck_assert(half_fp16_to(0x3c00) == 1.0f && half_fp16_to(0xc000) == -2.0f);
}
END_TEST

START_TEST(bf16_round_trip_and_specials)
{
    uint64_t s = 1234567ULL;
    for (int k = 0; k < 200000; k++) {
        float f = bitsf(next_rand(&s) ^ ((uint32_t)k << 31));
        if (!isfinite(f) || fabsf(f) > 3.38e38f)
            continue;
        float y = half_bf16_to(half_bf16_from(f));
        int e = ilogb(y == 0 ? f : y);
        double ulp = ldexp(1.0, (e < -126 ? -126 : e) - 7);
        ck_assert_msg(fabs((double)y - (double)f) <= ulp / 2, "%.9g -> %.9g", (double)f, (double)y);
    }
    ck_assert_int_eq(half_bf16_from(bitsf(0x3f808000)), 0x3f80); /* a tie: to even */
    ck_assert_int_eq(half_bf16_from(bitsf(0x3f818000)), 0x3f82);
    ck_assert_int_eq(half_bf16_from(bitsf(0x3f808001)), 0x3f81);
    ck_assert_int_eq(half_bf16_from(INFINITY), 0x7f80);
    ck_assert_int_eq(half_bf16_from(-INFINITY), 0xff80);
    ck_assert_int_eq(half_bf16_from(3.4028235e38f), 0x7f80); /* above the largest + half an ulp */
    ck_assert(isnan(half_bf16_to(half_bf16_from(NAN))));
    ck_assert(isnan(half_bf16_to(half_bf16_from(bitsf(0x7f800001))))); /* stays a NaN */
    ck_assert_int_eq(half_bf16_from(-0.0f), 0x8000);
    ck_assert_int_eq(half_bf16_from(bitsf(0x00008000)), 0x0000); /* a subnormal tie: to even */
    ck_assert_int_eq(half_bf16_from(bitsf(0x00018000)), 0x0002);
}
END_TEST

/* half_pack and half_unpack (F16C when the CPU has it) give the portable path's
 * bits: every half, every tie between halves, and 1M random float bit patterns
 * (NaNs, subnormals and out-of-range values among them), at every offset. */
START_TEST(portable_equals_f16c)
{
    if (!half_has_f16c()) {
        fprintf(stderr, "half: this CPU has no F16C: the portable path only\n");
        return;
    }
    size_t n = 0x10000 * 2 + 1000003;
    float *f = malloc(n * sizeof *f), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    uint16_t *h = malloc(n * sizeof *h), *p = malloc(n * sizeof *p);
    ck_assert(f && a && b && h && p);
    for (uint32_t k = 0; k < 0x10000; k++) {
        h[k] = (uint16_t)k;
        f[2 * k] = half_fp16_to((uint16_t)k);
        f[2 * k + 1] = bitsf(fbits(f[2 * k]) + (1u << 12)); /* a tie (or near one) above it */
    }
    half_unpack(HALF_FP16, a, h, 0x10000);
    half_unpack_portable(b, h, 0x10000);
    ck_assert_int_eq(memcmp(a, b, 0x10000 * sizeof *a), 0);
    uint64_t s = 42;
    for (size_t k = 0x20000; k < n; k++)
        f[k] = bitsf(next_rand(&s) * 2654435761u);
    for (size_t off = 0; off < 8; off++) {
        half_pack(HALF_FP16, h, f + off, n - off);
        half_pack_portable(p, f + off, n - off);
        if (!memcmp(h, p, (n - off) * sizeof *h))
            continue;
        for (size_t k = 0; k < n - off; k++)
            ck_assert_msg(h[k] == p[k], "float 0x%08x: F16C 0x%04x, portable 0x%04x",
                          fbits(f[k + off]), h[k], p[k]);
    }
    free(f);
    free(a);
    free(b);
    free(h);
    free(p);
}
END_TEST

START_TEST(round_and_add)
{
    float v[11] = {1.0f, 1.0f / 3, 70000.0f, -2.5f, 1e-9f, 0, 3, 5, 7, 9, 1e-3f};
    float w[11];
    memcpy(w, v, sizeof v);
    half_round(HALF_FP16, w, 11);
    ck_assert(w[0] == 1.0f && w[1] == half_fp16_to(half_fp16_from(1.0f / 3)) && isinf(w[2]));
    uint16_t h[11];
    half_pack(HALF_BF16, h, v, 11);
    float acc[11] = {0};
    half_unpack_add(HALF_BF16, acc, h, 11);
    half_unpack_add(HALF_BF16, acc, h, 11);
    for (int k = 0; k < 11; k++)
        ck_assert(acc[k] == 2 * half_bf16_to(h[k]));
    ck_assert_int_eq(half_parse("fp16"), HALF_FP16);
    ck_assert_int_eq(half_parse("bf16"), HALF_BF16);
    ck_assert_int_eq(half_parse("fp32"), HALF_FP32);
    ck_assert_int_eq(half_parse("f16"), -1);
    ck_assert_int_eq((int)half_size(HALF_FP16), 2);
}
END_TEST

/* half_overflows says exactly which values convert to inf or NaN (the worker's
 * skip test for a loss-scaled push), at the edges of fp16's and bf16's range;
 * half_scale_ok takes powers of two 2^-24 .. 2^24 only. */
START_TEST(overflow_matches_conversion)
{
    uint32_t bf_edge = 0x7f7f8000u; /* half-way between bf16's largest and infinity */
    float bf_lim, below;
    memcpy(&bf_lim, &bf_edge, sizeof bf_lim);
    below = nextafterf(bf_lim, 0);
    const float v[] = {65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e-9f, 0, bf_lim, below,
                       INFINITY, NAN, 3.0f, -1e5f};
    for (int wire = HALF_FP16; wire <= HALF_BF16; wire++)
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
            for (float s = 0.25f; s <= 4.0f; s *= 2) {
                uint16_t h;
                float x = v[i] * s, back;
                half_pack(wire, &h, &x, 1);
                half_unpack(wire, &back, &h, 1);
                ck_assert_msg(half_overflows(wire, &v[i], 1, s) == !isfinite(back),
                              "%s: %g x %g", half_name(wire), (double)v[i], (double)s);
            }
    ck_assert(!half_overflows(HALF_FP16, v, 2, 1.0f) && half_overflows(HALF_FP16, v, 3, 1.0f));
    ck_assert(half_scale_ok(1.0f) && half_scale_ok(65536.0f) && half_scale_ok(0x1p-24f) &&
              half_scale_ok(0x1p24f));
    ck_assert(!half_scale_ok(1000.0f) && !half_scale_ok(0x1p25f) && !half_scale_ok(0x1p-25f) &&
              !half_scale_ok(0) && !half_scale_ok(-2.0f) && !half_scale_ok(NAN) &&
              !half_scale_ok(INFINITY));
}
END_TEST

Suite *half_suite(void)
{
    Suite *s = suite_create("half");
    TCase *tc = tcase_create("convert");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, fp16_round_trip_within_half_ulp);
    tcase_add_test(tc, fp16_specials);
    tcase_add_test(tc, bf16_round_trip_and_specials);
    tcase_add_test(tc, portable_equals_f16c);
    tcase_add_test(tc, round_and_add);
    tcase_add_test(tc, overflow_matches_conversion);
    suite_add_tcase(s, tc);
    return s;
}
