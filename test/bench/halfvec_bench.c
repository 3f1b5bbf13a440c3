/* pskv-halfvec-bench [--n N] [--reps R]: the CPU cost of one push's value
 * conversions (N floats, default 203530: the MLP 784-256-10's parameters) with the
 * vector kernels (halfvec.h, fquantvec.h) and with the portable code they replace
 * (halfvec_set(0): the code before them, F16C conversion included), in the same
 * process, one after the other R times (default 21), each the thread's CPU time.
 * Per operation one line:
 *   halfvec op=NAME n=N portable_us=P vector_us=V speedup=P/V
 * (P and V the medians). The values are gradient-like (normal-ish, |x| around
 * 1e-3, a few zeros), so no block takes the portable path for being special.
 * The operations are those of a push (the overflow check, pack, pack times a loss
 * scale), of a server (unpack divided by it, int8 and sign decoding), of the
 * all-reduce (unpack-add; reduce: add, divide, round and pack) and of int8 and
 * sign with error feedback (fquant_encode_feedback). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fquant.h"
#include "half.h"
#include "halfvec.h"
#include "timeutil.h"

enum { OVERFLOW, PACK16, PACK16_SCALED, UNPACK16_SCALED, PACKBF, UNPACKBF, UNPACK_ADD16,
       REDUCE16, INT8_EF, SIGN_EF, INT8_DEC, SIGN_DEC, NOPS };
static const char *names[NOPS] = {"fp16_overflow_check", "fp16_pack", "fp16_pack_scaled",
                                  "fp16_unpack_scaled", "bf16_pack", "bf16_unpack",
                                  "fp16_unpack_add", "fp16_reduce_mean", "int8_encode_feedback",
                                  "sign_encode_feedback", "int8_decode", "sign_decode"};

typedef struct bufs {
    float *x, *y, *res;
    uint16_t *h;
    uint8_t *q8, *qs;
} bufs;

static void run(int op, bufs *b, size_t n)
{
    char why[100];
    switch (op) {
    case OVERFLOW: (void)half_overflows(HALF_FP16, b->x, n, 1024.0f); break;
    case PACK16: half_pack(HALF_FP16, b->h, b->x, n); break;
    case PACK16_SCALED: half_pack_scaled(HALF_FP16, b->h, b->x, n, 1024.0f); break;
    case UNPACK16_SCALED: half_unpack_scaled(HALF_FP16, b->y, b->h, n, 1024.0f); break;
    case PACKBF: half_pack(HALF_BF16, b->h, b->x, n); break;
    case UNPACKBF: half_unpack(HALF_BF16, b->y, b->h, n); break;
    case UNPACK_ADD16: half_unpack_add(HALF_FP16, b->y, b->h, n); break;
    case REDUCE16: half_reduce(HALF_FP16, b->y, b->h, n, 2.0f, 1, b->h); break;
    case INT8_EF: fquant_encode_feedback(FQUANT_INT8, b->y, b->res, n, b->q8); break;
    case SIGN_EF:
        fquant_encode_feedback(FQUANT_SIGN, b->y, b->res, n, b->qs);
        break;
    case INT8_DEC: (void)fquant_decode(FQUANT_INT8, b->q8, n, b->y, why, sizeof why); break;
    default: (void)fquant_decode(FQUANT_SIGN, b->qs, n, b->y, why, sizeof why); break;
    }
}

static int cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    size_t n = 203530;
    int reps = 21, bad = argc % 2 == 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--n"))
            n = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else
            bad = 1;
    }
    if (bad || !n || n > (1u << 28) || reps < 1 || reps > 1000) {
        fprintf(stderr, "usage: pskv-halfvec-bench [--n 1..268435456] [--reps 1..1000]\n");
        return 2;
    }
    if (!halfvec_on())
        printf("halfvec: this CPU has no AVX2 and F16C: both columns are the portable code\n");
    bufs b = {malloc(n * 4), malloc(n * 4), calloc(n, 4), malloc(n * 2),
              malloc(fquant_bytes(FQUANT_INT8, n)), malloc(fquant_bytes(FQUANT_SIGN, n))};
    int64_t *t = malloc((size_t)reps * 2 * sizeof *t);
    if (!b.x || !b.y || !b.res || !b.h || !b.q8 || !b.qs || !t) {
        fprintf(stderr, "pskv-halfvec-bench: out of memory\n");
        return 1;
    }
    uint64_t s = 88172645463325252ULL;
    for (size_t i = 0; i < n; i++) { /* the sum of 4 uniforms: bell-shaped */
        float v = 0;
        for (int k = 0; k < 4; k++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            v += (float)(s >> 40) / 16777216.0f - 0.5f;
        }
        b.x[i] = i % 50 == 7 ? 0.0f : v * 2e-3f;
    }
    half_pack(HALF_FP16, b.h, b.x, n);
    memcpy(b.y, b.x, n * 4);
    fquant_encode_feedback(FQUANT_INT8, b.y, b.res, n, b.q8);
    fquant_encode_feedback(FQUANT_SIGN, b.y, b.res, n, b.qs);
    for (int op = 0; op < NOPS; op++) {
        for (int r = 0; r < 2 * reps; r++) { /* alternating: portable, vector, ... */
            halfvec_set(r & 1);
            if (op == REDUCE16 || op == UNPACK_ADD16 || op == INT8_EF || op == SIGN_EF)
                memcpy(b.y, b.x, n * 4); /* the same sums, the same push's values */
            int64_t t0 = tu_thread_cpu_ns();
            run(op, &b, n);
            t[(r & 1) * reps + r / 2] = tu_thread_cpu_ns() - t0;
            if (op == REDUCE16)
                half_pack(HALF_FP16, b.h, b.x, n);
        }
        halfvec_set(1);
        qsort(t, (size_t)reps, sizeof *t, cmp);
        qsort(t + reps, (size_t)reps, sizeof *t, cmp);
        double p = (double)t[reps / 2] / 1e3, v = (double)t[reps + reps / 2] / 1e3;
        printf("halfvec op=%s n=%zu portable_us=%.1f vector_us=%.1f speedup=%.1f\n", names[op], n,
               p, v, v > 0 ? p / v : 0);
    }
    free(b.x), free(b.y), free(b.res), free(b.h), free(b.q8), free(b.qs), free(t);
    return 0;
}
