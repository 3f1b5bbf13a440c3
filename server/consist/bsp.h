/* The bsp model (the paper's section 3, "sequential"): pushes tagged with clock t
 * are summed per worker (in arrival order) and held; when every worker of the
 * clock set (or W - backup of them) has finished t, the held sums are combined in
 * rank order, applied once to the partitions this server heads at clock t (the
 * mean for gradient updaters, the sum for `sum`), the pushes acknowledged, and
 * pulls at t+1 may go. A push for a clock that has closed is answered "dropped:
 * late". With replicas (R > 1) the close goes down the chains (chain_close) with
 * the ids of the pushes folded in, and those pushes are acknowledged only once it
 * is on every tail; a replica moves its partitions' clocks when the close reaches
 * it (chain_apply.c), not here.
 *
 * Each partition keeps its own closed clock (table.closed): a server that took
 * partitions over from servers a clock apart applies each clock to each row once.
 *
 * OWNS per bsp table: the open clocks (up to MAX_OPEN ahead of the last closed),
 * each with one accumulator shard per rank and the pushes held for it; spare
 * accumulators for reuse; the combine scratch. And the pushes whose close is on
 * its way down the chains. Writes the tables' per-partition closed clocks of the
 * partitions this server heads.
 * THREAD: the server's loop thread only.
 * NEVER parks pulls (consist.c does, asking bsp_pull_ready), never reads a
 * worker's CLOCK itself (vclock.h). Allocates only when a clock opens with no
 * spare accumulator or a scratch grows; closing a clock reuses what it has. */
#ifndef PSKV_BSP_H
#define PSKV_BSP_H

#include <stddef.h>
#include <stdint.h>

#include "repl/chain.h"
#include "held.h"
#include "store/table.h"
#include "vclock.h"
#include "wire.h"

typedef struct bsp bsp;

/* The engine answers through `out` (copied; its router, member and clocks are
 * borrowed and must outlive the engine; the clocks give the clock set). NULL when
 * out of memory. */
bsp *bsp_new(const held_out *out);

/* Frees e (the pushes still held are not answered) and nulls *e_p; NULL-safe. */
void bsp_destroy(bsp **e_p);

/* The placement a close reads (chain.h): the partitions this server heads, their
 * next servers. Before it is set (or before the first view) a close applies to
 * the whole table. */
void bsp_set_chain(bsp *e, chain *ch);

/* The clock's ranks grew from `from` to `to` (vclock_view): the accumulators of
 * open clocks get room for the new ranks (kept as they are when memory runs out). */
void bsp_grow_ranks(bsp *e, int from, int to);

/* A validated bsp PUSH (not an assign) on table t for rows rs: held for its clock,
 * or answered now (late, already folded into a close, stale placement, too far
 * ahead, out of memory). The values are summed into the rank's accumulator; msg
 * stays the caller's. */
void bsp_push(bsp *e, table *t, wire_msg *msg, const rowset *rs);

/* 1 when a pull of bsp table t at `clock` may be answered: every partition held
 * here has closed the clocks below it (also 1 when the table's state cannot be
 * made: out of memory, a pull is not parked for ever). */
int bsp_pull_ready(bsp *e, table *t, int64_t clock);

/* The clock the values of bsp table t read here are at (every partition held
 * here has closed the clocks below it); 0 when out of memory. */
int64_t bsp_values_clock(bsp *e, table *t);

/* Closes every clock of every bsp table that the clock set allows. Clocks nobody
 * pushed to are passed in one step. */
void bsp_advance_all(bsp *e);

/* The placement changed: pushes held for open clocks are refused PSKV_ESTALE
 * (counted, to be sent again on the new placement) and their clocks emptied.
 * Returns the smallest closed clock over the bsp tables (INT64_MAX: none), to
 * which every worker's clock drops. */
int64_t bsp_placement_changed(bsp *e);

/* A close this head sent down its chains (chain_close's token) is on every tail
 * (code 0) or could not be sent (logged): the pushes folded into it are answered;
 * PSKV_ESTALE: this server left the close's partitions before every replica had
 * it (a drained server): the pushes are refused, to be sent to the new heads. */
void bsp_close_done(bsp *e, uint64_t token, int code);

/* For checkpoints: the clock every partition of t held here has closed, or -1
 * when they differ (just after a join, or while a close goes down a chain); and
 * raising t's closed clock (every partition's) to a saved one. 0 / nothing when
 * out of memory. */
int64_t bsp_table_closed(bsp *e, table *t);
void bsp_restore(bsp *e, table *t, int64_t closed);

/* Table t is being removed (its namespace dropped): the pushes held for its open
 * clocks or its closes are answered PSKV_ENOTABLE with why, and its state freed. */
void bsp_forget(bsp *e, const table *t, const char *why);

/* Counters, summed into consist_stats. */
typedef struct bsp_stats {
    uint64_t pushes, dropped_late, refused;
    uint64_t closes;      /* clocks closed that held pushes */
    int64_t push_ns;
    int64_t close_ns;     /* in those closes: combining, applying, answering the pushes */
} bsp_stats;
bsp_stats bsp_get_stats(const bsp *e);

#endif
