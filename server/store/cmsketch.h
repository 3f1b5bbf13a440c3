/* A bounded count-min sketch of how often keys were pushed, for feature
 * admission (--admit-after): CMS_DEPTH rows of CMS_WIDTH one-byte counters
 * (4 MiB), conservative update (only the smallest counters of a key go up), and
 * all counters halved after every CMS_HALVE_EVERY counted pushes, so that old
 * pushes fade and the error stays bounded however long the job runs.
 *
 * Error: a count is never under the key's pushes since the last halving (less
 * what halving took off). The counters hold at most 2 * CMS_HALVE_EVERY = 2^20
 * pushes, so count-min's bound (over by more than e * mass / width with
 * probability at most e^-depth) says over by at most 2 with probability 98%;
 * measured, with every push a new key (the worst case): 0.6% of keys pushed once
 * read 2, none read 3 (test_admit.c checks under 2% before the first halving).
 * A key pushed N times within about one halving period is admitted; one pushed
 * more slowly may never be (docs/benchmarks.md: 70-80% of the keys pushed N
 * times or more in a power-law run got a row).
 *
 * OWNS its counters. THREAD: one caller at a time (the server's loop). NEVER
 * blocks, logs or allocates after cms_new. */
#ifndef PSKV_CMSKETCH_H
#define PSKV_CMSKETCH_H

#include <stddef.h>
#include <stdint.h>

#define CMS_DEPTH 4
#define CMS_WIDTH (1u << 20)
#define CMS_HALVE_EVERY (CMS_WIDTH / 2)

typedef struct cms cms;

/* A sketch with every count 0; NULL when out of memory. */
cms *cms_new(void);

/* Frees *c_p and nulls it; NULL-safe. */
void cms_destroy(cms **c_p);

/* Counts one push of key and returns its estimated count, this one included
 * (saturates at 255). */
uint32_t cms_add(cms *c, uint64_t key);

/* The estimated count of key, without counting. */
uint32_t cms_count(const cms *c, uint64_t key);

/* Bytes the sketch takes. */
size_t cms_bytes(void);

/* Halvings so far (each after CMS_HALVE_EVERY counted pushes). */
uint64_t cms_halvings(const cms *c);

#endif
