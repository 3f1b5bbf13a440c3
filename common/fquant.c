/* fquant: int8 and sign block encodings (contract in fquant.h). */
#include "fquant.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fquantvec.h"
#include "pskv_errors.h"

static uint64_t block_bytes(uint32_t quant, uint64_t len)
{
    return sizeof(float) + (quant == FQUANT_INT8 ? len : (len + 7) / 8);
}

uint64_t fquant_bytes(uint32_t quant, uint64_t n)
{
    if ((quant != FQUANT_INT8 && quant != FQUANT_SIGN) || n > (UINT64_MAX / 8))
        return 0;
    uint64_t full = n / FQUANT_BLOCK, rest = n % FQUANT_BLOCK;
    return full * block_bytes(quant, FQUANT_BLOCK) + (rest ? block_bytes(quant, rest) : 0);
}

const char *fquant_name(uint32_t quant)
{
    return quant == FQUANT_INT8 ? "int8" : quant == FQUANT_SIGN ? "sign" : "unknown quant";
}

void fquant_encode(uint32_t quant, const float *x, uint64_t n, uint8_t *out, float *q)
{
    for (uint64_t b = 0; b < n; b += FQUANT_BLOCK) {
        uint64_t len = n - b < FQUANT_BLOCK ? n - b : FQUANT_BLOCK;
        if (len == FQUANT_BLOCK && fquantvec_block(quant, x + b, out, q + b)) {
            out += block_bytes(quant, len);
            continue;
        }
        float scale = 0;
        if (quant == FQUANT_INT8) {
            for (uint64_t i = 0; i < len; i++)
                scale = fmaxf(scale, fabsf(x[b + i]));
            if (!isfinite(scale)) /* sent as it is: the receiver refuses the block */
                scale = NAN;
            scale /= 127.0f;
        } else {
            double sum = 0;
            for (uint64_t i = 0; i < len; i++)
                sum += fabs((double)x[b + i]);
            scale = (float)(sum / (double)len);
        }
        memcpy(out, &scale, sizeof scale);
        out += sizeof scale;
        if (quant == FQUANT_INT8) {
            for (uint64_t i = 0; i < len; i++) {
                float c = scale > 0 ? rintf(x[b + i] / scale) : 0;
                c = c > 127 ? 127 : c < -127 ? -127 : c;
                out[i] = (uint8_t)(int8_t)c;
                q[b + i] = c * scale;
            }
            out += len;
        } else {
            memset(out, 0, (len + 7) / 8);
            for (uint64_t i = 0; i < len; i++) {
                int neg = x[b + i] < 0;
                out[i / 8] |= (uint8_t)(neg << (i % 8));
                q[b + i] = neg ? -scale : scale;
            }
            out += (len + 7) / 8;
        }
    }
}

void fquant_encode_feedback(uint32_t quant, float *v, float *res, uint64_t n, uint8_t *out)
{
    float x[FQUANT_BLOCK];
    for (uint64_t b = 0; b < n; b += FQUANT_BLOCK) {
        size_t len = n - b < FQUANT_BLOCK ? (size_t)(n - b) : FQUANT_BLOCK, i;
        for (i = fquantvec_add(x, v + b, res + b, len, 0); i < len; i++)
            x[i] = v[b + i] + res[b + i];
        fquant_encode(quant, x, len, out, v + b);
        out += block_bytes(quant, len);
        for (i = fquantvec_add(res + b, x, v + b, len, 1); i < len; i++)
            res[b + i] = x[i] - v[b + i];
    }
}

int fquant_decode(uint32_t quant, const uint8_t *in, uint64_t n, float *out, char *why,
                  size_t whylen)
{
    for (uint64_t b = 0; b < n; b += FQUANT_BLOCK) {
        uint64_t len = n - b < FQUANT_BLOCK ? n - b : FQUANT_BLOCK;
        float scale;
        memcpy(&scale, in, sizeof scale);
        in += sizeof scale;
        if (!isfinite(scale) || scale < 0) {
            snprintf(why, whylen, "block %llu has scale %g (a finite scale >= 0 only)",
                     (unsigned long long)(b / FQUANT_BLOCK), (double)scale);
            return -PSKV_EPROTO;
        }
        for (uint64_t i = fquantvec_decode(quant, in, len, scale, out + b); i < len; i++)
            out[b + i] = quant == FQUANT_INT8 ? (float)(int8_t)in[i] * scale
                                              : ((in[i / 8] >> (i % 8)) & 1) ? -scale : scale;
        in += quant == FQUANT_INT8 ? len : (len + 7) / 8;
    }
    return 0;
}
