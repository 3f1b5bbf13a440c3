/* The layout of struct chain, private to the chain's files: chain.c (placement
 * and views), chain_apply.c (what a member does with a push, a REPLICATE or a
 * bsp close), chain_fwd.c (forwards in flight down the chains, acknowledgements
 * back up) and chain_fill.c (copies to new members, hand-over). Nothing else
 * includes this header: the rest of the server sees the opaque chain of
 * chain.h. Like nng's sockimpl.h, it lays out one object several files work on,
 * and declares the calls between those files.
 *
 * OWNS nothing of its own. The fields of struct chain are grouped by the file
 * that owns them (writes them outside chain_new/chain_destroy and the view's
 * sizing); the others only read them. The one shared record is the dedupe
 * record: chain_apply.c records push ids into it, chain_fill.c copies it to and
 * from other servers and forgets a partition that left, chain.c raises floors
 * and serves checkpoints.
 * THREAD: the server's loop thread only, like every chain_ call.
 * NEVER: the static inline lookups here never allocate, block, log or touch a
 * socket; they run per key on the push path, and stay inline for that. */
#ifndef PSKV_CHAIN_IMPL_H
#define PSKV_CHAIN_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "chain.h"
#include "dedupe.h"
#include "resend.h"
#include "ring.h"
#include "wire.h"

typedef struct chain_peer {
    uint32_t id;
    char host[128];
    int port;
    int alive;
    char key[41]; /* its CURVE public key from the view ("" without keys) */
    void *sock; /* DEALER, dialled on first use */
    void *mon;  /* its socket monitor's PAIR (closes: chain_peer_events), or NULL */
    resend_peer heard; /* its acknowledgements (chain_fwd_retry; common/resend.h) */
} chain_peer;

/* Whom a pending forward answers once every hop is acknowledged. */
enum {
    CHAIN_UP_SERVER, /* the predecessor: REPLICATE_ACK */
    CHAIN_UP_WORKER, /* the pushing worker: PUSH_ACK */
    CHAIN_UP_CLOSE,  /* this head's own bsp close: the close callback */
};

struct chain_hop; /* the rows of one forward to one next server (chain_fwd.c) */

/* A push (or bsp close) applied here, waiting for its next servers (chain_fwd.c's
 * table; chain_apply.c fills in what it answers and how it was applied). */
typedef struct chain_pend {
    uint64_t seq;      /* 0 = free slot */
    int upstream_worker; /* CHAIN_UP_*: who is answered */
    int close;         /* a bsp close of clocks [clock, upto) */
    int64_t clock, upto;
    uint32_t *fnodes;  /* the pushes folded into the close: (node, dedupe id, floor) */
    uint64_t *fids, *ffloors;
    size_t nfolded;
    unsigned char rid[256];
    size_t ridlen;
    uint64_t request_id;
    uint32_t sender;
    table *t;
    int assign;
    int bad;           /* the updater made rows of it non-finite: the worker is told so */
    int moved;         /* a push whose rows' partitions this server left (drained) before
                          the next servers answered: not acknowledged, refused PSKV_ESTALE */
    uint32_t origin;
    uint64_t origin_id, floor;
    uint32_t wire;     /* a push's values' precision and loss scale, as they came: its */
    float scale;       /* forwards carry the same (16-bit values re-packed exactly) */
    float lr;          /* the lr its rows were applied with here: forwards carry it
                          (table_lr), so every replica applies them alike */
    struct chain_hop *fwds;
    int nfwd, outstanding;
} chain_pend;

struct chain {
    /* given to chain_new */
    void *ctx, *router;
    member *mb;
    table_set *tables;
    int64_t max_message;
    /* placement (chain.c): the chains of the latest view and this server's place */
    uint32_t nparts, R;
    uint32_t *chains;      /* nparts x R, head first; 0 = none */
    int *index;            /* per partition: this server's place in the chain, -1 */
    uint64_t place_epoch;
    chain_peer *peers;     /* every server of the views, dialled on first use */
    size_t npeers;
    uint64_t *segs;        /* scratch: chain_rows's runs */
    size_t segs_cap;
    dedupe *dd;            /* per partition: the push ids applied (made on first use) */
    /* filling (chain_fill.c): which partitions are whole here, copies under way */
    uint8_t *ready;        /* per partition: holds a whole copy */
    int *fills;            /* per partition: FILL messages received this round */
    uint8_t *fresh_next;   /* per partition: the next member is new; fill it once ready */
    uint8_t *gone;         /* per partition: let go by the view being applied; its
                              sparse rows go once the view is (chain_fill_drop) */
    /* applying (chain_apply.c): scratch of one message */
    uint64_t *runs;        /* a dense push's or close's rows as (first, count) runs */
    size_t runs_cap;
    uint8_t *skip;         /* per row: already applied here */
    size_t skip_cap;
    uint64_t *akeys;       /* admission: the rows the head passes on (admitted_rows) */
    size_t akeys_cap;
    float *avals;
    size_t avals_cap;
    uint8_t *pmark;        /* per partition: 0 unseen, 1 apply, 2 skip (sized by the view) */
    uint32_t *touched;     /* partitions marked, to reset */
    /* forwarding (chain_fwd.c) */
    chain_pend *pend;      /* MAX_PEND slots */
    uint64_t next_seq;
    size_t npend;
    int64_t next_retry_ms; /* chain_fwd_retry's next look */
    uint64_t resent;       /* hops it sent again */
    uint64_t obsolete;     /* forwards let go: their worker had its answer */
    uint64_t (*refused)(uint32_t node, int code); /* counts a worker's push refused for a
                                                    retry (consist_refusal) */
    void (*closed)(uint64_t token, int code); /* a head's bsp close reached every tail */
};

/* ---- placement lookups (hot: per key or per run) ------------------------------ */

/* Dense index span [*first, *first + *count) of partition p in table t. */
static inline void chain_span(const chain *c, const table *t, uint32_t p, uint64_t *first,
                              uint64_t *count)
{
    ring_dense_span(ring_partition_begin(p, c->nparts), ring_partition_end(p, c->nparts), t->size,
                    first, count);
}

/* The ring partition of table t's key (dense index below t->size, or sparse key). */
static inline uint32_t chain_part(const chain *c, const table *t, uint64_t key)
{
    uint64_t pos = t->dense ? ring_dense_pos(key, t->size) : ring_mix64(key);
    return ring_partition_of(pos, c->nparts);
}

/* Partition of a key, remembering the dense index span of the last one: the keys
 * of a dense request come in runs, so a whole partition costs one ring lookup
 * instead of one 128-bit division per row. Start one at {0, 0, 0}. */
typedef struct chain_cursor {
    uint64_t lo, hi; /* dense indices [lo, hi) are partition p */
    uint32_t p;
} chain_cursor;

static inline uint32_t chain_part_at(const chain *c, const table *t, uint64_t key,
                                     chain_cursor *pc)
{
    if (t->dense && key >= pc->lo && key < pc->hi)
        return pc->p;
    uint32_t p = chain_part(c, t, key);
    if (t->dense) {
        uint64_t first, count;
        chain_span(c, t, p, &first, &count);
        *pc = (chain_cursor){first, first + count, p};
    }
    return p;
}

/* The rows of one update as they travel down a chain: a sparse table's keys, or
 * a dense table's runs of consecutive keys (no keys: a width-1 table would send
 * two keys' bytes per value), with their values in row order. */
typedef struct chain_batch {
    const uint64_t *keys; /* sparse: n keys; NULL for a dense table */
    const uint64_t *runs; /* dense: nruns (first key, count) pairs, n rows in all */
    size_t nruns;
    const float *vals;    /* n rows of the table's width */
    uint64_t n;
} chain_batch;

/* A walk of a batch piece by piece: rows [i, end) of one partition p, whose first
 * key is `first` (the rest follow it, dense), one row for a sparse table. Start
 * one zeroed; dense runs' keys must be below the table's size. */
typedef struct chain_piece {
    uint64_t i, end, first;
    uint32_t p;
    size_t run;   /* dense: the run walked, and its rows walked so far */
    uint64_t off;
    chain_cursor pc;
} chain_piece;

/* The next piece of b into *w: 1, or 0 at the end. */
static inline int chain_piece_next(const chain *c, const table *t, const chain_batch *b,
                                   chain_piece *w)
{
    w->i = w->end;
    if (w->i >= b->n)
        return 0;
    if (!t->dense) {
        w->first = b->keys[w->i];
        w->p = chain_part(c, t, w->first);
        w->end = w->i + 1;
        return 1;
    }
    while (w->run < b->nruns && w->off >= b->runs[2 * w->run + 1]) {
        w->run++;
        w->off = 0;
    }
    if (w->run >= b->nruns)
        return 0;
    uint64_t k = b->runs[2 * w->run] + w->off, left = b->runs[2 * w->run + 1] - w->off;
    w->p = chain_part_at(c, t, k, &w->pc);
    uint64_t m = w->pc.hi - k < left ? w->pc.hi - k : left;
    w->first = k;
    w->off += m;
    w->end = w->i + m;
    return 1;
}

/* Partition p's chain: R server ids, head first, 0 = none. */
static inline const uint32_t *chain_members(const chain *c, uint32_t p)
{
    return &c->chains[(size_t)p * c->R];
}

/* The server after this one in p's chain, 0 when this one is the tail or not in it. */
static inline uint32_t chain_next_of(const chain *c, uint32_t p)
{
    int i = c->index[p];
    return i >= 0 && (uint32_t)i + 1 < c->R ? chain_members(c, p)[i + 1] : 0;
}

/* The index of p's tail in its chain, -1 when the chain is empty (lost). */
static inline int chain_tail(const chain *c, uint32_t p)
{
    int last = -1;
    for (uint32_t j = 0; j < c->R; j++)
        if (chain_members(c, p)[j])
            last = (int)j;
    return last;
}

/* Keeps the keys of table t in partition p (shard_export's filter); p unused by
 * chain_export_served's. */
typedef struct chain_filter {
    const chain *c;
    const table *t;
    uint32_t p;
} chain_filter;

/* ---- calls between the chain's files ------------------------------------------ */

/* chain.c: the DEALER to server `id`, dialled on first use (sends never wait);
 * NULL when the id is no server of the views or it cannot be dialled (logged). */
void *chain_peer_sock(chain *c, uint32_t id);

/* The peer of that node id, or NULL. */
chain_peer *chain_peer_of(chain *c, uint32_t id);

/* Closes a peer's connection (and its monitor); the peer stays listed. */
void chain_peer_close(chain_peer *p);

/* chain_fwd.c: the table of pending forwards. init: 0 or -PSKV_ENOMEM; fini frees
 * every entry (unanswered) and the table; NULL-safe on a table never made. */
int chain_fwd_init(chain *c);
void chain_fwd_fini(chain *c);

/* chain_fwd.c: a free entry, or NULL when MAX_PEND forwards wait (back-pressure).
 * release frees it again (undoes chain_pend_new, answering nobody). */
chain_pend *chain_pend_new(chain *c);
void chain_pend_release(chain *c, chain_pend *pd);

/* chain_fwd.c: pd answers msg's sender (its routing and request ids). */
void chain_pend_reply_to(chain_pend *pd, const wire_msg *msg);

/* chain_fwd.c: pd becomes a close of clocks [clock, upto) folding the given pushes
 * (copied). Returns 0 or -PSKV_ENOMEM (pd still the caller's to release). */
int chain_pend_close(chain_pend *pd, table *t, int64_t clock, int64_t upto,
                     const uint32_t *fnodes, const uint64_t *fids, const uint64_t *ffloors,
                     size_t nfolded);

/* chain_fwd.c: answers whoever waits for pd (worker, predecessor or the close
 * callback) with success, and releases pd. */
void chain_pend_done(chain *c, chain_pend *pd);

/* chain_fwd.c: answers pd's sender on the ROUTER: PUSH_ACK or REPLICATE_ACK (code
 * 0), or ERROR with code and why (a worker's stamped with its refusal count).
 * pd may be a stack copy that was never in the table. */
void chain_answer_upstream(chain *c, const chain_pend *pd, int code, const char *why);

/* chain_fwd.c: adds pd's hops for the rows of b whose partition has a next
 * server, grouped by it (dense: as runs), and sends them. Rows are copied.
 * Returns 0 or -PSKV_ENOMEM. */
int chain_fwd_rows(chain *c, chain_pend *pd, const chain_batch *b);

/* chain_fwd.c: a bsp close's hops: one per next server of the partitions `parts`,
 * each with those partitions and their rows of b (a dense close's: the whole
 * spans of the partitions), possibly none. Returns 0 or -PSKV_ENOMEM. */
int chain_fwd_close(chain *c, chain_pend *pd, const chain_batch *b, const uint32_t *parts,
                    size_t np);

/* chain_fwd.c: after a placement change, sends every unanswered hop again to the
 * next server of its partitions in the new view (after the copies: chain_fill_owed). */
void chain_fwd_again(chain *c);

/* chain_fill.c: partition p's place in a new view is set (c->chains, c->index[p];
 * `old`: the chains before, NULL on the first view). A head that held p hands it
 * to a joining head; a partition that left this server is let go (not ready, its
 * dedupe record forgotten); one that stays is ready when this server held it
 * before, and its next member is owed a copy when new to the chain. Returns 1
 * when this server now waits for p's copy. */
int chain_fill_transfer(chain *c, const uint32_t *old, uint32_t p);

/* chain_fill.c: after a placement change, copies each partition to the next
 * member owed one (before any forward is sent again: chain_fwd_again). */
void chain_fill_owed(chain *c);

/* chain_fill.c: after chain_fill_transfer for every partition, removes the rows
 * of the partitions this server let go from its sparse tables (one pass per
 * table), so a server keeps rows of the partitions it holds only. */
void chain_fill_drop(chain *c);

#endif
