/* Dedupe: the server's record of applied (worker, request id) pairs per
 * partition, so a re-sent push is never applied twice.
 *
 * Bounded by what can still be re-sent: every push carries its worker's floor,
 * the smallest id it still has in flight (below it every request is answered and
 * will never be sent again); a pair below its worker's floor, or of a worker that
 * finished, is forgotten, and every id below the floor counts as seen (a copy that
 * arrives then is a server sending an old forward again: applied once already,
 * the worker has its answer). Pairs are forgotten from the front of a partition's
 * ring as floors rise, and all at once, wherever they are, when the ring is full:
 * a worker that died with pushes in flight (its floor never rises again) keeps
 * only its own pairs. The record grows while a slow worker holds its floor down,
 * up to a hard cap (then the oldest pair is forgotten anyway and counted). Each
 * partition keeps its pairs in a ring, oldest first, indexed by an open-addressing
 * hash: dedupe_seen is O(1), dedupe_record O(1) amortized.
 *
 * OWNS per partition the ring of pairs and its index, and per worker its floor.
 * THREAD: the server's loop thread only (the chain's files; checkpoints reach it
 * through chain_dedupe_export/import); the unit tests.
 * NEVER blocks, logs or touches a socket; never forgets a pair its worker may
 * still re-send except at the hard cap, and counts those (dedupe_forced).
 * Allocates a partition's record on first use and when its ring doubles. */
#ifndef PSKV_DEDUPE_H
#define PSKV_DEDUPE_H

#include <stddef.h>
#include <stdint.h>

#define DEDUPE_MAX (1u << 20) /* pairs per partition at most */

typedef struct dedupe dedupe;

/* A record for partitions 0..nparts-1 (memory per partition allocated on first
 * use). NULL when out of memory. */
dedupe *dedupe_new(uint32_t nparts);

/* Frees d and nulls *d_p; NULL-safe. */
void dedupe_destroy(dedupe **d_p);

/* Lowers the hard cap (for tests); max >= 1. */
void dedupe_set_max(dedupe *d, uint32_t max);

/* Records that request `id` of worker node `worker` was applied to partition
 * `part`. Recording a pair already recorded changes nothing. Returns 0,
 * -PSKV_EINVAL (part out of range) or -PSKV_ENOMEM. */
int dedupe_record(dedupe *d, uint32_t part, uint32_t worker, uint64_t id);

/* 1 when (worker, id) is recorded for part, or id is below the worker's floor (0
 * for a part out of range). */
int dedupe_seen(const dedupe *d, uint32_t part, uint32_t worker, uint64_t id);

/* The worker's floor (0 when none is known). */
uint64_t dedupe_floor(const dedupe *d, uint32_t worker);

/* Worker `worker` will never re-send an id below `floor`: such pairs may be
 * forgotten. Floors only rise. UINT64_MAX: the worker finished. */
void dedupe_set_floor(dedupe *d, uint32_t worker, uint64_t floor);

/* Pairs forgotten at the hard cap while still above their worker's floor. */
uint64_t dedupe_forced(const dedupe *d);

/* Pairs held for part. */
uint32_t dedupe_count(const dedupe *d, uint32_t part);

/* Forgets everything about part (the partition left this server). */
void dedupe_clear(dedupe *d, uint32_t part);

/* Serialises part's record (for copying a partition to a new replica or a
 * checkpoint): returns the bytes needed; writes them to buf when cap is large
 * enough. Format: little-endian uint32 count, then count entries of
 * {uint32 worker, uint64 id} packed (12 bytes), oldest first. */
size_t dedupe_export(const dedupe *d, uint32_t part, void *buf, size_t cap);

/* Replaces part's record with an exported one; returns 0, or -PSKV_EPROTO when
 * len does not match the format (count above the cap or size mismatch; the
 * record is then unchanged), -PSKV_EINVAL (part out of range), -PSKV_ENOMEM. */
int dedupe_import(dedupe *d, uint32_t part, const void *buf, size_t len);

#endif
