/* pskv-fault-cost [--mib N] [--small]: what a page fault costs on this machine,
 * the floor under a push that writes fresh memory (docs/benchmarks.md, sparse
 * growth). Maps N MiB (default 1024) as the shards map their arrays (private,
 * anonymous, huge pages asked for unless --small) and faults them in 2 MiB at a
 * time (MADV_POPULATE_WRITE), timing each by the thread's CPU time. Prints
 *   fault-cost huge=H mib=N per_2mib_ms: mean= p50= p99= max=
 * then unmaps it. Run twice: memory the system had not used since it started (or
 * had given back to the host of a virtual machine) costs more the first time. */
#define _GNU_SOURCE /* madvise, MADV_POPULATE_WRITE */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "timeutil.h"

#define SLICE (2u << 20)

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    size_t mib = 1024;
    int huge = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mib") && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 2 || v > (1L << 20)) {
                fprintf(stderr, "pskv-fault-cost: --mib must be 2 .. 1048576\n");
                return 2;
            }
            mib = (size_t)v;
        } else if (!strcmp(argv[i], "--small")) {
            huge = 0;
        } else {
            fprintf(stderr, "usage: pskv-fault-cost [--mib N] [--small]\n");
            return 2;
        }
    }
    size_t n = mib / 2, bytes = n * SLICE;
    char *map = mmap(NULL, bytes + SLICE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    double *ms = malloc(n * sizeof *ms);
    if (map == MAP_FAILED || !ms) {
        fprintf(stderr, "pskv-fault-cost: out of memory for %zu MiB\n", mib);
        return 1;
    }
    char *p = (char *)(((uintptr_t)map + SLICE - 1) & ~(uintptr_t)(SLICE - 1)); /* huge-page aligned */
    if (huge)
        madvise(p, bytes, MADV_HUGEPAGE);
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t t0 = tu_thread_cpu_ns();
        if (madvise(p + i * SLICE, SLICE, MADV_POPULATE_WRITE) < 0) {
            perror("pskv-fault-cost: madvise(MADV_POPULATE_WRITE)");
            return 1;
        }
        ms[i] = (double)(tu_thread_cpu_ns() - t0) / 1e6;
        sum += ms[i];
    }
    qsort(ms, n, sizeof *ms, cmp_double);
    printf("fault-cost huge=%d mib=%zu per_2mib_ms: mean=%.3f p50=%.3f p99=%.3f max=%.3f\n", huge,
           mib, sum / (double)n, ms[n / 2], ms[n * 99 / 100], ms[n - 1]);
    munmap(map, bytes + SLICE);
    free(ms);
    return 0;
}
