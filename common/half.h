/* half: 16-bit floating point for the wire: IEEE binary16 (fp16) and bfloat16
 * (bf16), to and from float.
 *
 * fp16 conversions use the CPU's F16C instructions when it has them (chosen at
 * run time), else a portable path with the same bits: round to nearest even,
 * overflow to infinity, subnormals kept, a NaN stays a NaN (quiet, sign and
 * top payload bits kept). bf16 is a float's top 16 bits, rounded to nearest
 * even (a NaN stays a quiet NaN).
 * NEVER: never reads or writes past n values; no state but the CPU check. */
#ifndef PSKV_HALF_H
#define PSKV_HALF_H

#include <stddef.h>
#include <stdint.h>

/* Wire precisions (the values of Meta.ar_wire and pskv_wire). */
enum { HALF_FP32 = 0, HALF_FP16 = 1, HALF_BF16 = 2 };

/* "fp32", "fp16", "bf16" (or "?"), and the inverse (-1 for an unknown name). */
const char *half_name(int wire);
int half_parse(const char *name);

/* Bytes a value takes on the wire in precision `wire` (4 or 2). */
size_t half_size(int wire);

/* One value, portable path. */
uint16_t half_fp16_from(float f);
float half_fp16_to(uint16_t h);
uint16_t half_bf16_from(float f);
float half_bf16_to(uint16_t h);

/* 1 when the fp16 conversions below use F16C. */
int half_has_f16c(void);

/* n values to (pack) and from (unpack) the 16-bit precision `wire` (HALF_FP16
 * or HALF_BF16); unpack_add adds the values unpacked to dst (in float). */
void half_pack(int wire, uint16_t *dst, const float *src, size_t n);
void half_unpack(int wire, float *dst, const uint16_t *src, size_t n);
void half_unpack_add(int wire, float *dst, const uint16_t *src, size_t n);

/* One reduce step of a ring all-reduce in one pass: dst[i] += unpack(src[i]),
 * then dst[i] /= div (div 1: no division), out[i] = pack(dst[i]), and with `round`
 * dst[i] = unpack(out[i]); the same bits as half_unpack_add, the division,
 * half_round and half_pack in turn. */
void half_reduce(int wire, float *dst, const uint16_t *src, size_t n, float div, int round,
                 uint16_t *out);

/* v[i] = unpack(pack(v[i])): the value the wire would carry. */
void half_round(int wire, float *v, size_t n);

/* 1 when some src[i] * scale is not finite in precision `wire` (HALF_FP32 too):
 * a NaN, an infinity, or a value that converts to infinity. */
int half_overflows(int wire, const float *src, size_t n, float scale);

/* 1 when s is a loss scale the wire accepts: a power of two in 2^-24 .. 2^24, so
 * that multiplying and dividing by it are exact. */
int half_scale_ok(float s);

/* pack(src[i] * scale) into dst; unpack(src[i]) / scale into dst (scale as
 * half_scale_ok says; 1: plain half_pack, half_unpack). */
void half_pack_scaled(int wire, uint16_t *dst, const float *src, size_t n, float scale);
void half_unpack_scaled(int wire, float *dst, const uint16_t *src, size_t n, float scale);

/* The portable fp16 paths over n values (tests compare them with half_pack). */
void half_pack_portable(uint16_t *dst, const float *src, size_t n);
void half_unpack_portable(float *dst, const uint16_t *src, size_t n);

#endif
