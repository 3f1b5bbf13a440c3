/* Consistency models on range vector clocks (the paper's section 3).
 *
 * The server keeps, for the range it owns, a vector clock: for every worker rank
 * the number of iterations it has finished (CLOCK messages; a worker sends one to
 * every server, so each server knows every worker's clock even on keys the worker
 * did not touch). The clock set is the workers of the latest view that have not
 * finished or died. Each table has a model:
 *   async  pushes applied on arrival, pulls answered at once;
 *   ssp    pushes applied on arrival; a pull at clock c is parked until every
 *          worker in the clock set has finished clock c - tau - 1;
 *   bsp    pushes tagged t are summed per worker (in arrival order) and held; when
 *          every worker (or W - backup of them) has finished t, the held sums are
 *          combined in rank order, applied once (the mean for gradient updaters,
 *          the sum for `sum`), the pushes acknowledged, and pulls at t+1 answered.
 *          A push for a clock that has closed is answered "dropped: late".
 * Parked pulls and held acknowledgements keep copies of what they need (routing
 * id, request id, keys), never the received frames. Both are bounded.
 *
 * The engine in five files, each with its header:
 *   consist.h/.c  the front (this header): what the server loop calls; parks
 *                 pulls and answers them, applies async and ssp pushes
 *   vclock.h/.c   the vector clock and the clock set: what ssp waits on and
 *                 bsp closes by (shared by every model)
 *   bsp.h/.c      bsp's open clocks, held pushes and closes
 *   held.h/.c     a request kept to be answered later, and the answers
 *   model.h/.c    the models' ops table, a row per model (async and ssp in
 *                 model.c, bsp's in bsp.c): when a pull may go, the clock the
 *                 values reflect, whether clocks close; the server's files ask
 *                 the row (cons_of) rather than test CONS_* by name
 * async and ssp have no state of their own beyond the vector clock, so their
 * rows live in model.c rather than in a module each.
 *
 * This header, consist.c:
 * OWNS the parked pulls (up to MAX_PARKED, with copies of their keys or runs),
 * the engine's vclock and bsp, and the counters.
 * THREAD: the server's loop thread only.
 * NEVER blocks; never keeps a received frame past the call (a pull answered at
 * once reads its keys from the frame, a parked one copies them); a large dense
 * pull reply is lent from the table without a copy (shard_lend), any other is
 * copied into a buffer ZeroMQ frees. */
#ifndef PSKV_CONSIST_H
#define PSKV_CONSIST_H

#include <stdint.h>

#include "member.h"
#include "store/table.h"
#include "wire.h"

typedef struct consist consist;

/* The engine answers on `router` with headers from `mb`. NULL when out of memory. */
consist *consist_new(void *router, member *mb, table_set *tables);

/* Frees c and nulls *c_p; NULL-safe. */
void consist_destroy(consist **c_p);

/* The placement (chain.h) a bsp close reads: the partitions held here, each with
 * its own closed clock (table.closed), so that a server that took partitions from
 * servers a clock apart applies each clock to each row once. */
struct chain;
void consist_set_chain(consist *c, struct chain *ch);

/* The workers' shared-memory segments (sshm.h) the engine answers pulls into;
 * borrowed, c's for its life. */
struct sshm;
struct sshm *consist_shm(consist *c);

/* Re-reads the view in mb: worker ranks, the clock set. Releases what the new
 * set allows (parked pulls, bsp clocks). */
void consist_view(consist *c);

/* The placement changed in view `epoch`: parked pulls planned on an older view
 * are answered PSKV_ESTALE (the worker plans them again on the new view); bsp
 * pushes held for open clocks are refused PSKV_ESTALE (counted, so the clocks
 * their workers sent before hearing of it are ignored) to be sent again on the new
 * placement, and every worker's clock drops to the smallest closed bsp clock, to be
 * earned again by the clocks sent behind the re-sends. Call before consist_view. */
void consist_placement_changed(consist *c, uint64_t epoch);

/* A bsp close this head sent down its chains (chain_close's token) is on every
 * tail (code 0) or could not be sent: the pushes folded into it are answered. */
void consist_close_done(consist *c, uint64_t token, int code);

/* Table t is being removed (its namespace dropped): its parked pulls and held
 * bsp pushes are answered PSKV_ENOTABLE with why; nothing of it is kept. */
void consist_forget_table(consist *c, const table *t, const char *why);

/* Answers what the closed clocks of replicated partitions now allow (after a bsp
 * close came down a chain). */
void consist_advance(consist *c);

/* A validated PUSH (table, width, ranges and values checked) on table t, for the
 * rows `rs` (borrowed for the call). A push with pull_after applied at once (async,
 * ssp) gets no PUSH_ACK: the pull the caller serves next answers it. The PUSH_ACK
 * of another push applied at once waits (one at a time) for the next pull reply
 * to its worker, which carries it (acked_push), or for consist_flush_ack. */
void consist_push(consist *c, table *t, wire_msg *msg, const rowset *rs);

/* Sends the PUSH_ACK consist_push left waiting, if any. The caller calls it before
 * any message but a PULL and whenever it stops reading, so an ack waits only past
 * the PULLs already queued behind its push. */
void consist_flush_ack(consist *c);

/* A validated PULL on table t for the rows `rs`: answered now or parked (the
 * engine copies what it keeps). */
void consist_pull(consist *c, table *t, wire_msg *msg, const rowset *rs);

/* A CLOCK message from a worker: it finished iteration meta->clock. Returns the
 * worker's rank, -1 (dropped: not a worker of the view), -2 (ignored: sent
 * before the worker heard of a push this server refused, which it will send
 * again, so the clock may run ahead of its pushes) or -3 (ignored: sent on a view
 * older than the last placement change, before the worker re-sent what it had
 * sent to a server that died; it sends the clock again after). */
int consist_clock(consist *c, wire_msg *msg);

/* This server refuses a push of worker node `node` with `code`: when the worker
 * will send it again (PSKV_ESTALE, PSKV_ENOTREADY) the refusal is counted and the
 * count returned, for the reply; else 0. The node's CLOCKs count only once they
 * carry that many (consist_clock). */
uint64_t consist_refusal(consist *c, uint32_t node, int code);

/* Replicated tables: worker `rank` finished `clock` as forwarded by `head`, behind
 * every push of that worker the head forwarded. */
void consist_clock_from(consist *c, uint32_t head, int rank, int64_t clock);

/* The heads whose partitions this server holds as a replica (from the view):
 * ssp pulls here wait on the clocks they forwarded, not on the workers' own
 * CLOCK messages, which may overtake pushes still on their way down a chain.
 * placement_changed: forget every clock the heads forwarded before (a head that
 * took partitions over vouches only for what it forwards on the new placement). */
void consist_set_sources(consist *c, const uint32_t *heads, size_t n, int placement_changed);

/* For checkpoints: the vector clock (clocks finished per worker rank; *vc valid
 * until the next view) and a bsp table's closed clocks; and restoring both after
 * the first view of a resumed job. */
int consist_clocks(const consist *c, const int64_t **vc);
void consist_restore_clocks(consist *c, const int64_t *vc, int nranks);
int64_t consist_bsp_closed(consist *c, table *t); /* -1: partitions at different clocks */
int consist_in_set(const consist *c, int rank); /* 1: rank is of the clock set */
void consist_restore_bsp(consist *c, table *t, int64_t closed);

/* The clock table t's values reflect here (bsp: clocks closed; else the
 * smallest clock every worker of the clock set finished): eviction's "now". */
int64_t consist_values_clock(consist *c, table *t);

/* Counters for logs and heartbeats. */
typedef struct consist_stats {
    uint64_t pushes, pulls, dropped_late, parked_now, refused;
    int64_t push_ns, pull_ns;
    uint64_t bsp_closes;  /* bsp clocks closed that held pushes, and the time in them */
    int64_t bsp_close_ns;
    uint64_t acks_ridden; /* PUSH_ACKs sent on a pull reply (acked_push) */
} consist_stats;
consist_stats consist_get_stats(const consist *c);

#endif
