/* pskv_allreduce from the command line:
 *   --app allreduce-check: --rounds all-reduces of --ar-floats integer-valued
 *     floats (--reduce sum or mean); each result must equal, bit for bit, the
 *     exact sum (or the exact sum / N) computed here; prints a digest of every
 *     result, which must be the same on every rank:
 *     (--wire fp16 or bf16: values small enough that every partial sum is exact
 *     in it; a mean is the exact mean rounded to it)
 *       allreduce-check rank=R workers=N n=F rounds=K reduce=OP wire=W digest=HEX
 *   --app bench --op allreduce: the step time of one all-reduce of --size bytes
 *     (median of --runs runs of --steps steps, each run starting at a barrier):
 *       allreduce size=BYTES workers=N step_us=U algbw_GBps=A busbw_GBps=B wire=W
 *     (BYTES: the floats' size in memory; --wire fp16 or bf16 sends half of it)
 *     algbw = size / step time; busbw = algbw x 2(N-1)/N, the bytes each rank
 *     sends (and receives) per step over the step time (NCCL's definition). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps.h"
#include "half.h"
#include "timeutil.h"

/* Integer-valued, different on every rank, round and element, below `mod` + 2;
 * with mod = value_mod(N, wire) every partial sum over N ranks is an integer the
 * wire carries exactly (below 2^24 in fp32, 2^11 in fp16, 2^8 in bf16), so the
 * sums are exact in any order and on any wire. */
static float value_of(uint64_t i, int rank, int round, uint64_t mod)
{
    return (float)((i * 7 + (uint64_t)rank * 13 + (uint64_t)round) % mod) + (float)(rank % 3);
}

static uint64_t value_mod(int N, int wire)
{
    uint64_t top = wire == HALF_FP16 ? 1u << 11 : wire == HALF_BF16 ? 1u << 8 : 1u << 24;
    uint64_t mod = top / (uint64_t)N > 3 ? top / (uint64_t)N - 2 : 1;
    return mod < 1000 ? mod : 1000;
}

int app_allreduce_check(pskv_worker *w, cfg_entry *cfg)
{
    uint64_t n = (uint64_t)cfg_int(cfg, "ar-floats");
    int rounds = (int)cfg_int(cfg, "rounds"), N = pskv_num_workers(w), rank = pskv_rank(w);
    int mean = !strcmp(cfg_str(cfg, "reduce"), "mean");
    int wire = half_parse(cfg_str(cfg, "wire"));
    uint64_t mod = value_mod(N, wire);
    float *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) {
        fprintf(stderr, "allreduce-check: out of memory for %llu floats\n",
                (unsigned long long)n);
        return 1;
    }
    uint64_t digest = APP_DIGEST_START;
    for (int k = 0; k < rounds; k++) {
        if (app_stop_signal) {
            free(v);
            return app_stopped("allreduce-check");
        }
        for (uint64_t i = 0; i < n; i++)
            v[i] = value_of(i, rank, k, mod);
        int rc = pskv_allreduce(w, -1, v, n, mean ? PSKV_OP_MEAN : PSKV_OP_SUM);
        if (rc < 0) {
            fprintf(stderr, "allreduce-check: rank %d: call %d failed: %s: %s\n", rank, k + 1,
                    pskv_strerror(rc), pskv_last_error(w));
            free(v);
            return 1;
        }
        for (uint64_t i = 0; i < n; i++) {
            float sum = 0;
            for (int r = 0; r < N; r++)
                sum += value_of(i, r, k, mod);
            if (mean)
                sum /= (float)N;
            if (wire != HALF_FP32) /* the mean's last rounding is the wire's */
                half_round(wire, &sum, 1);
            if (memcmp(&sum, &v[i], sizeof sum)) {
                fprintf(stderr, "allreduce-check: rank %d: call %d: element %llu is %.9g, "
                        "expected %.9g\n", rank, k + 1, (unsigned long long)i, v[i], sum);
                free(v);
                return 1;
            }
        }
        digest = app_digest_add(digest, v, n * sizeof *v);
    }
    printf("allreduce-check rank=%d workers=%d n=%llu rounds=%d reduce=%s wire=%s digest=%016llx\n",
           rank, N, (unsigned long long)n, rounds, mean ? "mean" : "sum", half_name(wire),
           (unsigned long long)digest);
    free(v);
    return 0;
}

int app_allreduce_bench(pskv_worker *w, cfg_entry *cfg)
{
    uint64_t size = (uint64_t)cfg_int(cfg, "size"), n = size / 4;
    int runs = (int)cfg_int(cfg, "runs"), warm = (int)cfg_int(cfg, "warmup");
    int N = pskv_num_workers(w);
    long steps = (long)cfg_int(cfg, "steps");
    if (steps == 0) {
        steps = (long)(300000000.0 / (double)(size + 20000));
        steps = steps < 10 ? 10 : steps > 5000 ? 5000 : steps;
    }
    float *v = malloc(n * sizeof *v);
    double *us = malloc((size_t)runs * sizeof *us);
    if (!v || !us) {
        free(v);
        free(us);
        fprintf(stderr, "bench: out of memory for %llu bytes\n", (unsigned long long)size);
        return 1;
    }
    for (uint64_t i = 0; i < n; i++)
        v[i] = 1e-3f * (float)(i % 17);
    int rc = 0;
    for (int r = 0; r < runs && rc == 0; r++) {
        if ((rc = pskv_barrier(w, 120000)) < 0)
            break;
        for (int s = 0; s < warm && rc == 0; s++)
            rc = pskv_allreduce(w, -1, v, n, PSKV_OP_MEAN);
        int64_t t0 = tu_now_ns();
        for (long s = 0; s < steps && rc == 0; s++) {
            if (app_stop_signal) {
                free(v);
                free(us);
                return app_stopped("bench");
            }
            rc = pskv_allreduce(w, -1, v, n, PSKV_OP_MEAN);
        }
        us[r] = (double)(tu_now_ns() - t0) / 1000.0 / (double)steps;
        if (rc == 0)
            printf("allreduce run=%d size=%llu workers=%d step_us=%.1f\n", r,
                   (unsigned long long)size, N, us[r]);
    }
    if (rc < 0) {
        fprintf(stderr, "bench: all-reduce failed: %s: %s\n", pskv_strerror(rc),
                pskv_last_error(w));
        free(v);
        free(us);
        return 1;
    }
    double med = app_median(us, runs);
    double alg = (double)size / (med * 1000.0);
    printf("allreduce size=%llu workers=%d step_us=%.1f algbw_GBps=%.3f busbw_GBps=%.3f "
           "wire=%s\n", (unsigned long long)size, N, med, alg, alg * 2.0 * (N - 1) / N,
           cfg_str(cfg, "wire"));
    fflush(stdout);
    free(v);
    free(us);
    return 0;
}
