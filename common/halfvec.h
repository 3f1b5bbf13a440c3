/* halfvec: the vector (AVX2 + F16C) kernels behind half.c (and the switch fquantvec.c obeys), chosen at
 * run time. Each kernel does a prefix of its n values (or a whole block) and says
 * how much; the caller does the rest with its portable code. Every kernel gives
 * the portable code's bits exactly: the same IEEE operations per value (no fused
 * multiply-add, rounding as the portable code rounds), and where an order of
 * operations matters (a sum) it runs only where the result cannot depend on it.
 * NEVER: never reads or writes past n values; no state but the CPU check and the
 * switch below. THREAD any. */
#ifndef PSKV_HALFVEC_H
#define PSKV_HALFVEC_H

#include <stddef.h>
#include <stdint.h>

/* 1 when the kernels below run (the CPU and the OS have AVX2 and F16C, and
 * halfvec_set has not turned them off); 0: they do nothing (return 0). */
int halfvec_on(void);

/* Turns the kernels off (0) or back on (1, where the CPU has them); returns the
 * previous setting. For tests and benchmarks that compare with the portable code;
 * not for use while other threads convert. */
int halfvec_set(int on);

/* pack(src[i] * scale) (scale 1: no multiply) into dst, wire HALF_FP16 or
 * HALF_BF16; returns the values done (a multiple of 8 or 16). */
size_t halfvec_pack(int wire, uint16_t *dst, const float *src, size_t n, float scale);

/* unpack(src[i]) * mul (mul 1: no multiply), added to dst[i] when add, else
 * stored; returns the values done. */
size_t halfvec_unpack(int wire, float *dst, const uint16_t *src, size_t n, float mul, int add);

/* half_reduce (half.h) on the first values; returns the values done. */
size_t halfvec_reduce(int wire, float *dst, const uint16_t *src, size_t n, float div, int round,
                      uint16_t *out);

/* v[i] = unpack(pack(v[i])); returns the values done. */
size_t halfvec_round(int wire, float *v, size_t n);

/* Sets *bad when some |src[i] * scale| is not < lim (NaN too); returns the values
 * looked at. */
size_t halfvec_overflows(const float *src, size_t n, float scale, float lim, int *bad);

#endif
