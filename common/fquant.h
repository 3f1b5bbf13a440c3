/* fquant: the lossy value encodings of the `int8` and `sign` filters (filter.h):
 * a push's values in blocks of FQUANT_BLOCK, each block one float32 scale then
 * its codes. int8: scale = max|x| / 127, codes round(x / scale) in -127..127 (one
 * byte each); sign: scale = mean |x|, one bit per value (1 = negative; value =
 * -scale, else +scale), bytes rounded up per block. The worker keeps what the
 * encoding lost as a residual it adds to the next push (error feedback).
 *
 * OWNS nothing. THREAD any. NEVER allocates. */
#ifndef PSKV_FQUANT_H
#define PSKV_FQUANT_H

#include <stddef.h>
#include <stdint.h>

#define FQUANT_BLOCK 256
enum { FQUANT_NONE = 0, FQUANT_INT8 = 1, FQUANT_SIGN = 2 };

/* Bytes of the encoding of n values (0 for an unknown quant or one that overflows). */
uint64_t fquant_bytes(uint32_t quant, uint64_t n);

/* Encodes x[0..n-1] into out (fquant_bytes long) and writes the values it stands for
 * into q (q may be x). */
void fquant_encode(uint32_t quant, const float *x, uint64_t n, uint8_t *out, float *q);

/* The encoding with error feedback, in one pass over the memory: x = v[i] + res[i]
 * encoded into out (fquant_bytes long), then v[i] = the value x's code stands for
 * (what is sent) and res[i] = x - v[i] (what it lost); the same bits as adding,
 * fquant_encode and subtracting in turn. */
void fquant_encode_feedback(uint32_t quant, float *v, float *res, uint64_t n, uint8_t *out);

/* Decodes in (fquant_bytes(quant, n) bytes) into out[0..n-1]. Returns 0, or
 * -PSKV_EPROTO when a block's scale is not finite or negative (why names the
 * block). */
int fquant_decode(uint32_t quant, const uint8_t *in, uint64_t n, float *out, char *why,
                  size_t whylen);

/* "int8", "sign" or "quant N", for errors. */
const char *fquant_name(uint32_t quant);

#endif
