/* What a chain member does with an update that reaches it: a checked push at
 * the head of its partitions, a REPLICATE or a bsp close from its predecessor,
 * a head's own bsp close. Each is applied where its (worker, id) is not in the
 * touched partition's dedupe record yet, recorded there, and handed to
 * chain_fwd.c to go on down the chains; the answer goes back when every next
 * server has it.
 *
 * OWNS the scratch of one message (a dense push's or close's rows as runs, the
 * rows to skip, the partitions marked) and writes the dedupe record, the rows of
 * the shards and, for a bsp close from the predecessor, the table's per-partition
 * closed clocks.
 * THREAD: the server's loop thread only.
 * NEVER blocks or waits for an acknowledgement (that arrives through chain_drain);
 * never drops input silently: a malformed REPLICATE or close is logged with its
 * sender and dropped, a push this server cannot take is answered with an error. */
#ifndef PSKV_CHAIN_APPLY_H
#define PSKV_CHAIN_APPLY_H

#include <stddef.h>
#include <stdint.h>

#include "chain.h"
#include "store/shard.h"
#include "store/table.h"
#include "wire.h"

/* A checked PUSH with R > 1 (or a re-sent async one): applied here (a re-sent one
 * only where its id is not recorded), forwarded down the chains, acknowledged when
 * every tail has it. Answers the worker itself, also on errors; msg stays the
 * caller's. */
void chain_push(chain *c, table *t, wire_msg *msg, const rowset *rs);

/* Records a push's (worker, id) in every partition it touches, so that a re-sent
 * copy is recognised (R = 1 async tables, whose pushes skip chain_push); floor
 * (0 = none): the worker re-sends no id below it.
 * Returns 0 or -PSKV_ENOMEM. */
int chain_record(chain *c, table *t, const rowset *rs, uint32_t origin, uint64_t id,
                 uint64_t floor);

/* Records the pushes (fnodes[j], fids[j], floor ffloors[j]) folded into a bsp close
 * of partitions parts, as folded (chain_push_closed): by a replica the close
 * reaches, and by the head that applied it, so that a re-sent copy is acknowledged
 * there, not dropped as late. Returns 0 or -PSKV_ENOMEM (some not recorded). */
int chain_record_folded(chain *c, const uint32_t *parts, size_t np, const uint32_t *fnodes,
                        const uint64_t *fids, const uint64_t *ffloors, size_t nfolded);

/* A bsp close on this head (bsp with R > 1): clocks [clock, upto) of table t are
 * applied here to the partitions `parts` (each now closed at upto), `keys`/`vals`
 * the rows of the combined update applied (none for clocks that held no
 * pushes): a sparse table's with explicit keys; a dense table's the whole spans
 * of the partitions, in the order of `parts`, keys NULL (they travel without).
 * Sends it down each partition's chain with the (node, dedupe id, floor) of every
 * push folded in; replicas apply it with the updater, move their closed clock and
 * record the ids. Everything is copied. Returns a token (> 0) that the close
 * callback (chain_on_close) reports once every tail has it, 0 when no partition
 * has a next server (nothing to wait for), or -PSKV_ENOTREADY / -PSKV_ENOMEM. */
int64_t chain_close(chain *c, table *t, int64_t clock, int64_t upto, const uint64_t *keys,
                    const float *vals, uint64_t n, const uint32_t *parts, size_t np,
                    const uint32_t *fnodes, const uint64_t *fids, const uint64_t *ffloors,
                    size_t nfolded);

/* A REPLICATE from the predecessor (epoch already checked): a forwarded push, or
 * a bsp close (applied to the partitions still below its clocks, then forwarded).
 * A malformed one, or one for partitions not replicated here, is logged and
 * dropped unanswered (the head sends it again after the next view). */
void chain_replicate(chain *c, wire_msg *msg);

#endif
