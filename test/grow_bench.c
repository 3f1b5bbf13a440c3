/* pskv-grow-bench [--rows N]: the longest sparse pushes while a table grows, in
 * process, without messages or other daemons (docs/benchmarks.md, sparse growth).
 * A width-1 sgd shard (server/shard.c) is filled with N random keys (default
 * 10^8; key i is ring_mix64(i), as sparse-bench's), 8,192 a push, each push timed
 * by the thread's CPU time as the server's exit report times it. Prints
 *   grow-bench rows= pushes= cpu_s= ns_per_key= over_8ms= over_10ms= p99_ms=
 *     p999_ms= longest_ms= longest_at_rows= longest_growing=
 * (growing: rows were still moving to a doubled map in that push). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"
#include "shard.h"
#include "shard_impl.h"
#include "timeutil.h"

enum { BATCH = 8192 };

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    uint64_t rows = 100000000;
    if (argc == 3 && !strcmp(argv[1], "--rows")) {
        char *end;
        rows = strtoull(argv[2], &end, 10);
        if (*end || rows < BATCH || rows > 1000000000) {
            fprintf(stderr, "pskv-grow-bench: --rows must be 8192 .. 10^9\n");
            return 2;
        }
    } else if (argc != 1) {
        fprintf(stderr, "usage: pskv-grow-bench [--rows N]\n");
        return 2;
    }
    upd_opts u = {.kind = UPD_SGD, .lr = 0.01f};
    shard_init init = {INIT_ZERO, 0, 0};
    shard *s = shard_new(0, 0, 0, 0, UINT64_MAX, 1, &u, &init);
    size_t np = (size_t)(rows / BATCH);
    double *ms = malloc(np * sizeof *ms), *sorted = malloc(np * sizeof *sorted);
    uint64_t *keys = malloc(BATCH * sizeof *keys);
    float *g = malloc(BATCH * sizeof *g);
    if (!s || !ms || !sorted || !keys || !g) {
        fprintf(stderr, "pskv-grow-bench: out of memory\n");
        return 1;
    }
    for (int k = 0; k < BATCH; k++)
        g[k] = 1;
    uint64_t next = 1;
    size_t worst = 0, worst_rows = 0;
    int worst_growing = 0, over8 = 0, over10 = 0;
    double total = 0;
    for (size_t p = 0; p < np; p++) {
        for (int k = 0; k < BATCH; k++)
            keys[k] = ring_mix64(next++);
        int growing = s->old_slots != NULL;
        int64_t t0 = tu_thread_cpu_ns();
        if (shard_push(s, keys, 0, BATCH, g) < 0) {
            fprintf(stderr, "pskv-grow-bench: push %zu failed: out of memory\n", p);
            return 1;
        }
        ms[p] = (double)(tu_thread_cpu_ns() - t0) / 1e6;
        total += ms[p];
        over8 += ms[p] > 8;
        over10 += ms[p] > 10;
        if (ms[p] > ms[worst]) {
            worst = p;
            worst_rows = shard_size(s);
            worst_growing = growing || s->old_slots != NULL;
        }
    }
    memcpy(sorted, ms, np * sizeof *ms);
    qsort(sorted, np, sizeof *sorted, cmp_double);
    printf("grow-bench rows=%zu pushes=%zu cpu_s=%.2f ns_per_key=%.1f over_8ms=%d over_10ms=%d "
           "p99_ms=%.2f p999_ms=%.2f longest_ms=%.2f longest_at_rows=%zu longest_growing=%d\n",
           np * BATCH, np, total / 1e3, total * 1e6 / (double)(np * BATCH), over8, over10,
           sorted[np * 99 / 100], sorted[np * 999 / 1000], ms[worst], worst_rows, worst_growing);
    shard_destroy(&s);
    free(ms);
    free(sorted);
    free(keys);
    free(g);
    return 0;
}
