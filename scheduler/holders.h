/* Which servers hold each partition whole, so that a partition whose last whole
 * replica dies is counted lost even when a member of its chain is left: one that
 * was still receiving its copy (FILL) when the sender died holds only part of it.
 *
 * A member of the first placement holds its partitions whole. A server new to a
 * chain (after a failover, a join, a drain) holds the partition whole once its
 * HEARTBEAT's `whole_epoch` (the latest view whose placement it holds whole)
 * reaches the view that added it, or once a HEARTBEAT's `awaited_epoch` does and
 * its `awaited` (the partitions whose copies it still awaits there) omits it. A server that left a chain while alive (a
 * drained server, the old head of a join with R = 1) still holds the partition
 * whole and hands it over: it counts until a chain member holds it whole.
 *
 * A copy counts from the heartbeat after it completed: a last whole replica that
 * dies in between loses the partition (on the safe side: never read partial).
 *
 * OWNS   per chain cell the view epoch from which its member must report itself
 *        whole (0: whole), per partition the one whole holder out of its chain.
 * THREAD the scheduler's (view.c calls it); the pure decision holders_update is
 *        tested alone (test/unit/test_holders.c).
 * NEVER  knows who is alive (the caller's callback says) or sends anything; it
 *        only marks lost partitions in the chains it is handed (all 0, as ring.h
 *        marks a partition with no live member). */
#ifndef PSKV_SCHED_HOLDERS_H
#define PSKV_SCHED_HOLDERS_H

#include <stddef.h>
#include <stdint.h>

typedef struct holders holders;

/* Tracks nparts x R chain cells, none placed yet. Returns NULL when out of memory;
 * the caller frees it with holders_destroy. */
holders *holders_new(uint32_t nparts, uint32_t R);

/* Frees *self_p (NULL accepted) and sets it to NULL. */
void holders_destroy(holders **self_p);

/* 1 when server `id` still takes part (not dead, not let go). */
typedef int (*holders_alive_fn)(void *ctx, uint32_t id);

/* A partition lost by holders_update: `whole` the last server that held it whole
 * (dead now), `filling` a live member of its chain that was still receiving its
 * copy (0 when none). */
typedef struct holders_loss {
    uint32_t p, whole, filling;
} holders_loss;

/* The placement changes from `old` to `next` (nparts x R ids, head first, 0 =
 * none), published as view `epoch`. old NULL (the first placement): every member
 * of next is whole. Otherwise a partition whose chain had members, of which no
 * whole holder is alive, is lost: its chain in next is set to all 0 and, when
 * next still had members, it is written to loss[] (up to cap entries; the rest
 * are counted, not listed). Members new to a chain must then report themselves
 * whole (holders_heard) for epoch or later. Returns the partitions lost that way
 * (not those ring.h already found without a live member). */
uint32_t holders_update(holders *h, const uint32_t *old, uint32_t *next, uint64_t epoch,
                        holders_alive_fn alive, void *ctx, holders_loss *loss, size_t cap);

/* Server `id` holds the placement of view `epoch` whole but for the n partitions
 * of awaited[] (its HEARTBEAT: `whole_epoch` with none, or `awaited_epoch` and
 * `awaited`): it now counts as a whole holder of every other partition of
 * `chains` (the current ones) it was added to at that epoch or before. Returns 0,
 * or -1 (nothing changed) when awaited[] is not strictly ascending. */
int holders_heard(holders *h, const uint32_t *chains, uint32_t id, uint64_t epoch,
                  const uint32_t *awaited, size_t n);

/* 1 when server `id` (a member of p's chain in `chains`) holds p whole. */
int holders_is_whole(const holders *h, const uint32_t *chains, uint32_t p, uint32_t id);

#endif
