/* Key placement on the 64-bit ring and the range map.
 *
 * A sparse key k sits at mix64(k) (the splitmix64 finaliser, documented in
 * docs/protocol.md). Dense key i of an n-key table sits at floor(i * 2^64 / n),
 * so contiguous indices stay contiguous on the ring. The ring is cut into
 * ranges [begin, end] (inclusive), each owned by one server. This release splits
 * the ring evenly among the servers; the range map is the one place that knows
 * how, so a consistent-hash ring can replace the split without touching callers. */
#ifndef PSKV_RING_H
#define PSKV_RING_H

#include <stddef.h>
#include <stdint.h>

typedef struct ring_range {
    uint64_t begin; /* first ring position, inclusive */
    uint64_t end;   /* last ring position, inclusive */
    uint32_t owner; /* node id of the owning server */
} ring_range;

/* The fixed mixing function for sparse keys (splitmix64's finaliser, a bijection). */
uint64_t ring_mix64(uint64_t key);

/* Ring position of dense key i in an n-key table (i < n). */
uint64_t ring_dense_pos(uint64_t i, uint64_t n);

/* Dense indices whose positions fall in [begin, end]: [*first, *first + *count). */
void ring_dense_span(uint64_t begin, uint64_t end, uint64_t n, uint64_t *first, uint64_t *count);

/* Fills `out[0..nservers-1]` with an even split of the ring; owner = owners[i]. */
void ring_split_even(ring_range *out, const uint32_t *owners, size_t nservers);

/* Index of the range holding `pos` in sorted, gap-free `ranges` (binary search). */
size_t ring_find(const ring_range *ranges, size_t n, uint64_t pos);

#endif
