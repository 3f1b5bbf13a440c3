/* pskv-hashmap-floor [--rows N] [--updates N] [--batch N]: the floor that a
 * server's sparse push throughput is compared with (scripts/bench-sparse-push.sh):
 * a bare hash map updated in a loop, in one thread of one process, with nothing
 * else: no messages, no routing, no updater call.
 *
 * The map holds what a width-1 sgd table holds: a uint64 key and one float per
 * key, in two parallel arrays (open addressing, linear probing, the key hashed
 * by ring_mix64, a power-of-two capacity doubled past 0.7 load). The keys are
 * the sparse-bench app's: key i is ring_mix64(i + 1). The fill inserts keys 0..N-1
 * in order (the map grows from 1024 slots); the updates draw keys uniformly
 * (the same xorshift64 as the app) and apply w -= 0.01 * g. Keys are made a
 * batch at a time outside the timed loop. Prints
 *   floor phase=fill keys=N seconds=S keys_per_s=X max_batch_ms=M
 *   floor phase=update keys=N seconds=S keys_per_s=X
 * (max_batch_ms: the slowest batch, one that doubled the map). Times are the
 * thread's CPU time, as the server's are in the comparison. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"
#include "timeutil.h"

#define EMPTY_KEY UINT64_MAX /* ring_mix64 is a bijection: one key value is reserved */

typedef struct map {
    uint64_t *keys;
    float *vals;
    size_t cap, used;
} map;

static size_t home(const map *m, uint64_t key)
{
    return (size_t)ring_mix64(key ^ 0x5bd1e995ULL) & (m->cap - 1);
}

static size_t probe(const map *m, uint64_t key)
{
    size_t i = home(m, key);
    while (m->keys[i] != EMPTY_KEY && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static int grow(map *m, size_t ncap)
{
    map n = {malloc(ncap * sizeof(uint64_t)), malloc(ncap * sizeof(float)), ncap, m->used};
    if (!n.keys || !n.vals)
        return -1;
    memset(n.keys, 0xff, ncap * sizeof(uint64_t));
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i] != EMPTY_KEY) {
            size_t j = probe(&n, m->keys[i]);
            n.keys[j] = m->keys[i];
            n.vals[j] = m->vals[i];
        }
    free(m->keys);
    free(m->vals);
    *m = n;
    return 0;
}

/* w -= lr * g for each key, inserting (value 0) keys not there. */
static int apply(map *m, const uint64_t *keys, const float *g, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        if ((m->used + 1) * 10 > m->cap * 7 && grow(m, m->cap * 2) < 0)
            return -1;
        size_t i = probe(m, keys[k]);
        if (m->keys[i] == EMPTY_KEY) {
            m->keys[i] = keys[k];
            m->vals[i] = 0.0f;
            m->used++;
        }
        m->vals[i] -= 0.01f * g[k];
    }
    return 0;
}

static void line(const char *phase, uint64_t keys, int64_t ns)
{
    printf("floor phase=%s keys=%llu seconds=%.3f keys_per_s=%.0f", phase,
           (unsigned long long)keys, (double)ns / 1e9, (double)keys / ((double)ns / 1e9));
}

int main(int argc, char **argv)
{
    uint64_t rows = 10000000, updates = 0;
    size_t batch = 8192;
    for (int i = 1; i + 1 < argc; i += 2) {
        char *end;
        unsigned long long v = strtoull(argv[i + 1], &end, 10);
        if (*end || v == 0 || (strcmp(argv[i], "--rows") && strcmp(argv[i], "--updates") &&
                               strcmp(argv[i], "--batch"))) {
            fprintf(stderr, "usage: %s [--rows N] [--updates N] [--batch N] (N > 0)\n", argv[0]);
            return 2;
        }
        if (!strcmp(argv[i], "--rows"))
            rows = v;
        else if (!strcmp(argv[i], "--updates"))
            updates = v;
        else
            batch = (size_t)v;
    }
    if (argc % 2 == 0) {
        fprintf(stderr, "usage: %s [--rows N] [--updates N] [--batch N]\n", argv[0]);
        return 2;
    }
    if (!updates)
        updates = rows;
    map m = {NULL, NULL, 0, 0};
    uint64_t *keys = malloc(batch * sizeof *keys);
    float *g = malloc(batch * sizeof *g);
    if (!keys || !g || grow(&m, 1024) < 0) {
        fprintf(stderr, "hashmap-floor: out of memory\n");
        return 1;
    }
    for (size_t k = 0; k < batch; k++)
        g[k] = 0.01f * (float)(1 + k % 7);
    int64_t total = 0, worst = 0;
    for (uint64_t i = 0; i < rows; i += batch) {
        size_t n = rows - i < batch ? (size_t)(rows - i) : batch;
        for (size_t k = 0; k < n; k++)
            keys[k] = ring_mix64(i + k + 1);
        int64_t t0 = tu_thread_cpu_ns();
        if (apply(&m, keys, g, n) < 0) {
            fprintf(stderr, "hashmap-floor: out of memory at %zu keys\n", m.used);
            return 1;
        }
        int64_t dt = tu_thread_cpu_ns() - t0;
        total += dt;
        worst = dt > worst ? dt : worst;
    }
    line("fill", rows, total);
    printf(" max_batch_ms=%.2f\n", (double)worst / 1e6);
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    total = 0;
    for (uint64_t u = 0; u < updates; u += batch) {
        size_t n = updates - u < batch ? (size_t)(updates - u) : batch;
        for (size_t k = 0; k < n; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            keys[k] = ring_mix64(x % rows + 1);
        }
        int64_t t0 = tu_thread_cpu_ns();
        apply(&m, keys, g, n); /* every key is there: no growth */
        total += tu_thread_cpu_ns() - t0;
    }
    line("update", updates, total);
    printf("\n");
    free(keys);
    free(g);
    free(m.keys);
    free(m.vals);
    return 0;
}
