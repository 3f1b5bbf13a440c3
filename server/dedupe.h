/* Dedupe: the server's bounded record of applied (worker, request id) pairs per
 * partition, so a re-sent push is never applied twice. Each partition keeps its
 * last DEDUPE_KEEP pairs in a ring (oldest forgotten first) indexed by an
 * open-addressing hash, so dedupe_seen and dedupe_record are O(1) and do not
 * allocate once the partition's memory exists. */
#ifndef PSKV_DEDUPE_H
#define PSKV_DEDUPE_H

#include <stddef.h>
#include <stdint.h>

#define DEDUPE_KEEP 2048 /* ids remembered per partition */

typedef struct dedupe dedupe;

/* A record for partitions 0..nparts-1 (memory per partition allocated on first
 * use). NULL when out of memory. */
dedupe *dedupe_new(uint32_t nparts);

/* Frees d and nulls *d_p; NULL-safe. */
void dedupe_destroy(dedupe **d_p);

/* Records that request `id` of worker node `worker` was applied to partition
 * `part`; the oldest of more than DEDUPE_KEEP ids of that partition is forgotten.
 * Recording a pair already recorded changes nothing. Returns 0, -PSKV_EINVAL
 * (part out of range) or -PSKV_ENOMEM (first use of part). */
int dedupe_record(dedupe *d, uint32_t part, uint32_t worker, uint64_t id);

/* 1 when (worker, id) is recorded for part (0 for a part out of range). */
int dedupe_seen(const dedupe *d, uint32_t part, uint32_t worker, uint64_t id);

/* Forgets everything about part (the partition left this server) and frees its
 * memory. Out-of-range parts are ignored. */
void dedupe_clear(dedupe *d, uint32_t part);

/* Serialises part's record (for copying a partition to a new replica or a
 * checkpoint): returns the bytes needed; writes them to buf when cap is large
 * enough. Format: little-endian uint32 count, then count entries of
 * {uint32 worker, uint64 id} packed (12 bytes), oldest first. An unused or
 * out-of-range part exports as count 0. */
size_t dedupe_export(const dedupe *d, uint32_t part, void *buf, size_t cap);

/* Replaces part's record with an exported one (buf is only read); returns 0,
 * -PSKV_EPROTO when len does not match the format (count too big or size
 * mismatch; then the record is unchanged), -PSKV_EINVAL (part out of range),
 * -PSKV_ENOMEM (record unchanged). */
int dedupe_import(dedupe *d, uint32_t part, const void *buf, size_t len);

#endif
