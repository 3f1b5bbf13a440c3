/* follow: a server's side of readers following a namespace (pskv-serve
 * --scheduler HOST:PORT --namespace NS; docs/protocol.md "Following a namespace").
 *
 * A reader subscribes with FOLLOW (and renews it every second; a subscription
 * not renewed within FOLLOW_LAPSE_MS lapses). It is then sent FOLLOW_DATA
 * messages, one per table of the namespace, of the rows in the partitions this
 * server heads:
 *   - a full copy when it asks for one (its first FOLLOW, a gap in follow_seq, a
 *     reconnect) and after a placement change (a failover makes new heads): the
 *     sparse tables in slices of FOLLOW_FULL_ROWS rows a sync (shard_scan), deltas
 *     flowing meanwhile, then the dense tables whole at the next clock boundary
 *     (never in the middle of a round);
 *   - sparse tables: the rows written since the last sync, every --sync-ms (the
 *     shards keep a second set of dirty bits for it: shard_follow_taken);
 *   - dense tables: the whole part, only at a clock boundary: when a CLOCK moves
 *     the table's values clock to the reader's follow_target or past it (just
 *     after the worker's pushes of that clock were applied), or when the table
 *     has been quiet (no write) for a sync period (and then not again while it
 *     stays unwritten and its clock tag the same: the reader holds those very
 *     parts). A part is the values of the partitions this server heads, copied
 *     once into the message span by span. Every server sees the same
 *     clocks, so the reader assembles parts tagged with one clock: a dense model
 *     that training held, never half of two versions.
 * The work per sync is bounded by the rows that changed (sparse; a dense table's
 * are only counted) and the dense parts asked for; nothing is done for a table
 * nobody follows.
 *
 * OWNS its subscriptions (routing ids copied) and a scratch buffer.
 * THREAD: the server's loop thread only.
 * NEVER blocks: a send that would block (the reader's queue at the socket's
 * SNDHWM) drops the message (the reader sees the gap in follow_seq and asks for
 * a full copy). A reader cut off or stopped sends no renewal: FOLLOW_LAPSE_MS
 * later it is unsubscribed and nothing more is copied for it, so what waits for
 * it in ZeroMQ's queue and the kernel's is at most those seconds of syncs. */
#ifndef PSKV_FOLLOW_H
#define PSKV_FOLLOW_H

#include <stddef.h>

#include "consist/consist.h"
#include "member.h"
#include "repl/chain.h"
#include "store/table.h"
#include "wire.h"

#define FOLLOW_LAPSE_MS 5000 /* a subscription not renewed for this long lapses */
#define FOLLOW_MAX_SUBS 64   /* readers at once on one server */

typedef struct follow follow;

/* A new follower registry over the server's sockets and state (borrowed; they
 * must outlive it). NULL when out of memory. */
follow *follow_new(void *router, member *mb, table_set *tables, chain *ch, consist *cons);

/* Frees it; NULL-safe; nulls *self_p. */
void follow_destroy(follow **self_p);

/* A reader's FOLLOW (job and role checked by the caller): subscribes or renews.
 * Returns 0, or a negated PSKV_E* with why (an unknown namespace -PSKV_ENOTABLE,
 * a key not bound to it -PSKV_EACCES, bad fields -PSKV_EPROTO, too many readers
 * -PSKV_EREFUSED); the caller answers the error. */
int follow_request(follow *f, wire_msg *msg, char *why, size_t whylen);

/* The tables of namespace ns are about to leave the table set (pskvctl drop):
 * its readers are unsubscribed (their next FOLLOW is refused, no table) and the
 * per-table bookkeeping of the others follows the set's new order. */
void follow_forget_ns(follow *f, const char *ns);

/* Once per loop turn: lapses silent readers, sends what a sync period owes. */
void follow_tick(follow *f);

/* After a CLOCK or a bsp close: sends the dense parts readers wait for. */
void follow_clock(follow *f);

/* The job is over (STOP): every reader gets the last changed rows and the dense
 * parts as they end, whatever it waited for. */
void follow_final(follow *f);

/* After a view that changed the placement: every reader gets full copies, their
 * dense parts only once every worker of the clock set has sent two CLOCKs on the
 * new placement (follow_worker_clock): until then a partition taken over may lack
 * pushes its worker still has to re-send here, and the first (sent once they
 * are acknowledged) may come in the middle of a round. */
void follow_placement(follow *f);

/* Worker rank's CLOCK was counted (consist_clock >= 0: sent on this placement). */
void follow_worker_clock(follow *f, int rank);

#endif
