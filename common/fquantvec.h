/* fquantvec: AVX2 kernels of fquant.c's int8 and sign encodings, on when
 * halfvec_on() (halfvec.h) is. Same bits as fquant.c's portable code: per value
 * the same IEEE operations (x / scale rounded in the current rounding mode, no
 * fused multiply-add); a sign block's sum of |x| (a double, in order in the
 * portable code) runs here only where every partial sum is exact, so that no
 * order can change it.
 * OWNS nothing. THREAD any. NEVER allocates, never touches past a block. */
#ifndef PSKV_FQUANTVEC_H
#define PSKV_FQUANTVEC_H

#include <stddef.h>
#include <stdint.h>

/* One full block of FQUANT_BLOCK values x: the encoding `quant` (FQUANT_INT8 or
 * FQUANT_SIGN) into out (its scale, then its codes) and the values it stands for
 * into q. Returns 1, or 0 having written nothing when the block is for the
 * portable code (the kernels off, a value not finite, or a sign block whose sum
 * could round). */
int fquantvec_block(uint32_t quant, const float *x, uint8_t *out, float *q);

/* Decodes the first values of one block (len values, codes `in`, its scale, finite
 * and >= 0) into out; returns how many it did (a multiple of 8; 0 when off). */
size_t fquantvec_decode(uint32_t quant, const uint8_t *in, size_t len, float scale,
                        float *out);

/* x[i] = a[i] + b[i] (sub: a[i] - b[i]; b NULL: a[i] + 0) for the first of n
 * values (the error feedback around an encoding); returns how many it did (a
 * multiple of 8; 0 when off). x may be a or b. */
size_t fquantvec_add(float *x, const float *a, const float *b, size_t n, int sub);

#endif
