/* A bounded count-min sketch of how often keys were pushed, for feature
 * admission (--admit-after): CMS_DEPTH rows of CMS_WIDTH one-byte counters
 * (4 MiB), conservative update (only the smallest counters of a key go up), and
 * all counters halved after every CMS_WIDTH / 8 counted pushes, so that old
 * pushes fade and the error stays bounded however long the job runs.
 *
 * Error: a count is never under the key's pushes since the last halving (less
 * what halving took); it is over by at least 1 with probability under
 * e^-CMS_DEPTH (2%), since the counters hold at most 2 * CMS_WIDTH / 8 pushes
 * (count-min: over by more than e * mass / width with probability e^-depth,
 * and e * 2 / 8 < 1). A key pushed N times within one or two halving periods is
 * admitted; one pushed more slowly may never be.
 *
 * OWNS its counters. THREAD: one caller at a time (the server's loop). NEVER
 * blocks, logs or allocates after cms_new. */
#ifndef PSKV_CMSKETCH_H
#define PSKV_CMSKETCH_H

#include <stddef.h>
#include <stdint.h>

#define CMS_DEPTH 4
#define CMS_WIDTH (1u << 20)

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

/* Halvings so far (each after CMS_WIDTH / 8 counted pushes). */
uint64_t cms_halvings(const cms *c);

#endif
