/* Partition placement on this server and chain replication (docs/architecture.md,
 * "Replication and failover"; docs/protocol.md, "Chains").
 *
 * The view lists, for every fixed partition of the key ring, a chain of R server
 * ids, head first. A push is applied by the head and forwarded (REPLICATE, with
 * the pushing worker's (node, request) id) to the next server of each touched
 * partition's chain; every replica applies it, dropping an id it already applied,
 * and forwards it on; the tail answers REPLICATE_ACK, which travels back up, and
 * the head acknowledges the worker only then. Pulls are answered by the tail, so
 * no read sees an update that is not on every replica.
 *
 * On a new view: forwards still waiting on a server that died are sent again to
 * the new next server of their partitions; a server that becomes the predecessor
 * of a new chain member copies it the partition (FILL: table options, values,
 * optimizer state, dedupe record) before forwarding anything else to it; a head
 * whose chain gets a joining server as its new head hands the partition over the
 * same way (elastic join). A new member answers pushes and pulls for the
 * partition only once the copy is whole (PSKV_ENOTREADY until then).
 *
 * One object, `chain`, in four files, each with its header:
 *   chain.h/.c        placement: the view's chains, this server's place in each,
 *                     which rows of a request it may serve, the dedupe record's
 *                     checkpoint face; applies a view (this header)
 *   chain_apply.h/.c  a push at the head, a REPLICATE or bsp close at a replica:
 *                     checked, deduplicated, applied, passed on
 *   chain_fwd.h/.c    forwards in flight and their acknowledgements, clocks
 *                     forwarded down the chains
 *   chain_fill.h/.c   copies to new members and hand-over on a new view
 * chain_impl.h lays out struct chain for those files only.
 *
 * This header, chain.c:
 * OWNS the placement: the chains of the latest view, this server's index in each,
 * the placement epoch, the peer list (a DEALER per other server, dialled on first
 * use) and the dedupe record's life (made on first use, freed with the chain).
 * THREAD: the server's loop thread only (the heartbeat and checkpoint-commit
 * threads never call a chain_ function).
 * NEVER blocks or waits on a peer; never answers a worker (chain_rows only says
 * why, the caller answers); chain_rows and the lookups never allocate once the
 * scratch has grown to the largest request. */
#ifndef PSKV_CHAIN_H
#define PSKV_CHAIN_H

#include <stddef.h>
#include <stdint.h>

#include "member.h"
#include "store/shard.h"
#include "store/table.h"
#include "wire.h"

typedef struct chain chain;

/* NULL when out of memory. Answers on `router`; dials other servers from ctx.
 * Borrows mb and tables (they outlive the chain). */
chain *chain_new(void *ctx, void *router, member *mb, table_set *tables, int64_t max_message);

/* Frees c (closing its peer sockets, dropping unanswered forwards) and nulls *c_p;
 * NULL-safe. */
void chain_destroy(chain **c_p);

/* Applies the latest view in mb: the chains, peers and this server's place; then
 * the copies and hand-overs it calls for (chain_fill.c) and, when the placement
 * changed, the forwards sent again (chain_fwd.c). Returns 1 when the view says
 * this server is dead, or does not list it (replaced, and forgotten by the
 * scheduler: it must serve nothing more), else 0. Exits the
 * process when it cannot size the per-partition state (out of memory). */
int chain_view(chain *c);

/* Chain length R of the view (1 = no replication). */
uint32_t chain_replicas(const chain *c);

/* Epoch of the latest view that changed the placement: requests planned with an
 * older view are refused as stale. */
uint64_t chain_place_epoch(const chain *c);

/* Checks that this server is the head (for_pull 0) or the tail (for_pull 1) of
 * the partition of every row of a PUSH or PULL, and that the tail holds a whole
 * copy; fills rs (a dense span becomes the runs of this server's partitions in
 * it, in chain-owned scratch valid until the next call; a dense run planned on a
 * view older than the placement is stale: its rows cannot be checked). Returns 0,
 * or a negated PSKV_ESTALE / PSKV_ERANGE / PSKV_ENOTREADY with the reason in why. */
int chain_rows(chain *c, table *t, wire_msg *msg, int for_pull, rowset *rs, char *why,
               size_t whylen);

/* A bsp push of `clock` on rows rs of table t, against the closed clocks of the
 * rows' partitions here: 0 when none has closed that clock, 1 when all have, 2 when
 * some have (a server holding partitions a clock apart, after a join or failover).
 * *folded is 1 when every partition that closed it recorded (origin, id) as folded
 * into its close (a re-sent copy of a push this server received as a replica). */
int chain_push_closed(const chain *c, table *t, const rowset *rs, int64_t clock,
                      uint32_t origin, uint64_t id, int *folded);

/* The server after this one in partition p's chain (0: none); 1 when this server
 * is p's head and holds a whole copy. */
uint32_t chain_next(const chain *c, uint32_t p);
int chain_heads(const chain *c, uint32_t p);

/* Partitions of the ring (0 before the first view). */
uint32_t chain_nparts(const chain *c);

/* The ring partition of table t's key (dense index or sparse key). */
uint32_t chain_partition_of(const chain *c, const table *t, uint64_t key);

/* 1 when this server holds a whole copy of partition p. */
int chain_holds(const chain *c, uint32_t p);

/* 1 while some partition this server holds waits for its copy (FILL): until
 * then it may not know every table (a joining server learns them from copies). */
int chain_filling(const chain *c);

/* The partitions this server holds that wait for their copy, ascending, into
 * out[0..cap-1]. Returns how many there are (more than cap: out holds the first
 * cap). */
size_t chain_awaited(const chain *c, uint32_t *out, size_t cap);

/* Dense index span [*first, *first + *count) of partition p in table t. */
void chain_dense_span(const chain *c, const table *t, uint32_t p, uint64_t *first,
                      uint64_t *count);

/* Partition p's dedupe record (dedupe_export format), for checkpoints: the bytes
 * needed, written to buf when cap allows; and loading one (nparts of the view):
 * 0 or a negated dedupe_import error. */
size_t chain_dedupe_export(const chain *c, uint32_t p, void *buf, size_t cap);
int chain_dedupe_import(chain *c, uint32_t nparts, uint32_t p, const void *buf, size_t len);

/* Push ids forgotten at the dedupe cap while their worker could still re-send
 * them (should stay 0), for logs. */
uint64_t chain_dedupe_forced(const chain *c);

/* The heads whose pushes reach this server down a chain (and this server itself
 * when it is alone in some chain): up to max ids in out; returns how many. */
size_t chain_sources(const chain *c, uint32_t *out, size_t max);

/* Copies every stored row of t in the partitions this server answers pulls for
 * (it is their tail and holds a whole copy) into keys[]/rows[] (shard_export's
 * rows: values, then optimizer state) and returns how many; NULL arrays only
 * count. */
uint64_t chain_export_served(const chain *c, const table *t, uint64_t *keys, float *rows);

#endif
