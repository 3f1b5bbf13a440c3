/* Key placement on the 64-bit ring, partitions and replica chains.
 *
 * A sparse key k sits at mix64(k) (the splitmix64 finaliser, documented in
 * docs/protocol.md). Dense key i of an n-key table sits at floor(i * 2^64 / n),
 * so contiguous indices stay contiguous on the ring.
 *
 * The ring is cut into `nparts` fixed, equal partitions: position pos belongs to
 * partition (pos * nparts) >> 64. A partition is the unit of ownership,
 * replication and movement; its bounds never change, only who holds it.
 * Partitions are placed on servers by consistent hashing with virtual nodes:
 * each server id has `vnodes` tokens on the ring (token v of server id sits at
 * mix64(id << 32 | v)). A partition's chain is the first R distinct servers met
 * walking clockwise from the partition's first position; the head serves it and
 * the rest hold replicas. Given the previous chains, survivors keep their places
 * and only the gaps are refilled, so losing a server changes only the chains that
 * held it, and a partition whose whole chain died is reported lost, not silently
 * re-homed empty.
 *
 * ring_dense_span gives the dense indices whose positions fall in a range of the
 * ring, such as a partition's [begin, end].
 *
 * OWNS   nothing: pure functions of their arguments; every array is the caller's.
 * THREAD any (no state of its own).
 * NEVER  keeps anything between calls; only ring_chains and ring_join allocate
 *        (temporary token tables, freed before they return), and they leave the
 *        chains untouched when that fails. */
#ifndef PSKV_RING_H
#define PSKV_RING_H

#include <stddef.h>
#include <stdint.h>

/* The fixed mixing function for sparse keys (splitmix64's finaliser, a bijection).
 * Inline: a sparse push hashes every key more than once (partition, map slot). */
static inline uint64_t ring_mix64(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return z;
}

/* Ring position of dense key i in an n-key table (i < n). */
uint64_t ring_dense_pos(uint64_t i, uint64_t n);

/* Dense indices whose positions fall in [begin, end]: [*first, *first + *count). */
void ring_dense_span(uint64_t begin, uint64_t end, uint64_t n, uint64_t *first, uint64_t *count);

/* Most partitions a ring may be cut into. */
#define RING_MAX_PARTS 65536u

/* Partition holding ring position pos: (pos * nparts) >> 64. nparts in 1..65536. */
uint32_t ring_partition_of(uint64_t pos, uint32_t nparts);

/* First and last (inclusive) ring positions of partition p < nparts:
 * begin = ceil(p * 2^64 / nparts), end = begin(p + 1) - 1 (UINT64_MAX for the
 * last). Consistent with ring_partition_of for every position. */
uint64_t ring_partition_begin(uint32_t p, uint32_t nparts);
uint64_t ring_partition_end(uint32_t p, uint32_t nparts);

/* The partitions a dense run [first, end) of an n-key table meets, in ring
 * order, and the run's keys in each: a server takes as a run message's rows
 * every key of its span in the partitions it owns (chain.c), and a worker checks
 * a run part against the same rule (wsend.c). ring_run_next gives the next
 * partition *p and the run's keys in it, [*lo, *hi) (never empty); 0 when none
 * is left. first < n unless the run is empty. */
typedef struct ring_run {
    uint64_t first, end, n; /* first: the next key not yet given */
    uint32_t nparts;
    int shift; /* nparts = 2^shift and n <= 2^47: the same walk in 64-bit integers; else -1 */
} ring_run;
void ring_run_init(ring_run *it, uint64_t first, uint64_t end, uint64_t n, uint32_t nparts);
int ring_run_next(ring_run *it, uint32_t *p, uint64_t *lo, uint64_t *hi);

/* Token v of server `id` on the ring: ring_mix64(((uint64_t)id << 32) | v). */
uint64_t ring_token(uint32_t id, uint32_t v);

/* Fills chains[p * R + j] (j < R) for every partition p < nparts with server ids.
 * servers[0..ns-1]: the live server ids (non-zero, distinct); each has `vnodes`
 * tokens (vnodes >= 1).
 * prev == NULL: chain(p) is the first R distinct servers whose tokens are met
 * walking clockwise (wrapping) from ring_partition_begin(p); a token exactly at
 * that position counts.
 * prev != NULL (the previous chains, same nparts and R): members of prev's chain
 * for p still in `servers` stay first, in their previous order; the chain is then
 * filled up to R with the next distinct servers walking clockwise from the
 * partition's begin, skipping members already in it. A partition whose previous
 * chain has no member in `servers` (all dead, or all 0) is lost: its chain is all
 * 0 (its data is gone; the caller reports it).
 * With fewer than R servers, chains are shorter and padded with 0.
 * The caller owns all arrays; chains may be prev itself (updated in place) but
 * must not otherwise overlap it. Returns 0, or -PSKV_ENOMEM with chains untouched. */
int ring_chains(uint32_t *chains, uint32_t nparts, uint32_t R, const uint32_t *servers, size_t ns,
                uint32_t vnodes, const uint32_t *prev);

/* A server joins (elastic growth). For every partition whose chain in a fresh
 * placement over `servers` (which include `joiner`) holds the joiner at index i,
 * the joiner is inserted into the current chain at min(i, its length): the members
 * after it shift down and a full chain drops its last one. Other chains, and lost
 * partitions (all 0), are left as they are, so only the partitions the joiner's
 * tokens take move, and every chain keeps R members. chains is updated in place.
 * Returns the number of chains changed, or -PSKV_ENOMEM with chains untouched. */
int ring_join(uint32_t *chains, uint32_t nparts, uint32_t R, const uint32_t *servers, size_t ns,
              uint32_t vnodes, uint32_t joiner);

#endif
