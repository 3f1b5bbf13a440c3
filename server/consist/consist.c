/* The consistency engine's front (design in consist.h): it keeps the pulls
 * parked until their clock allows, applies async and ssp pushes on arrival, and
 * hands bsp pushes to bsp.c; vclock.c keeps the clocks all three read. */
#define _GNU_SOURCE
#include "consist.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "bsp.h"
#include "held.h"
#include "model.h"
#include "half.h"
#include "log.h"
#include "pskv_errors.h"
#include "update/upd_plugin.h"
#include "smetrics.h"
#include "sshm.h"
#include "timeutil.h"
#include "vclock.h"

#define MAX_PARKED 4096  /* pulls parked on this server */
#define LEND_MIN 65536   /* bytes: a smaller pull reply is copied */

struct consist {
    void *router;
    held_out out;         /* where answers go: router, mb, clocks */
    member *mb;
    table_set *tables;
    vclock *clocks;       /* the workers' clocks, the clock set, refusals */
    bsp *bsp;             /* bsp tables: open clocks, held pushes, closes */
    held *parked;
    size_t nparked;
    consist_stats st;     /* async and ssp pushes, pulls, parked pulls refused */
    int64_t finished;     /* the smallest worker clock plug-ins' finish last saw */
    sshm *shm;            /* workers' shared-memory segments: pushes read, replies written */
    uint64_t place_epoch; /* the view that last changed the chains (consist_placement_changed) */
    held ack;             /* a push applied on arrival whose PUSH_ACK waits (ack_on) */
    int64_t ack_clock;
    int ack_on;
};

consist *consist_new(void *router, member *mb, table_set *tables)
{
    consist *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->router = router;
    c->mb = mb;
    c->tables = tables;
    c->parked = calloc(MAX_PARKED, sizeof *c->parked);
    c->clocks = vclock_new();
    c->out = (held_out){router, mb, c->clocks};
    c->bsp = c->clocks ? bsp_new(&c->out) : NULL;
    c->shm = sshm_new();
    if (!c->parked || !c->clocks || !c->bsp || !c->shm) {
        bsp_destroy(&c->bsp);
        sshm_destroy(&c->shm);
        free(c->parked);
        vclock_destroy(&c->clocks);
        free(c);
        return NULL;
    }
    return c;
}

void consist_destroy(consist **c_p)
{
    if (!c_p || !*c_p)
        return;
    consist *c = *c_p;
    bsp_destroy(&c->bsp); /* before the clocks: it reads the rank count */
    for (size_t i = 0; i < c->nparked; i++) {
        free(c->parked[i].keys);
        free(c->parked[i].segs);
    }
    free(c->parked);
    vclock_destroy(&c->clocks);
    sshm_destroy(&c->shm);
    free(c);
    *c_p = NULL;
}

consist_stats consist_get_stats(const consist *c)
{
    consist_stats s = c->st;
    bsp_stats b = bsp_get_stats(c->bsp);
    s.pushes += b.pushes;
    s.push_ns += b.push_ns;
    s.dropped_late += b.dropped_late;
    s.refused += b.refused;
    s.bsp_closes = b.closes;
    s.bsp_close_ns = b.close_ns;
    s.parked_now = c->nparked;
    return s;
}

void consist_set_chain(consist *c, chain *ch) { bsp_set_chain(c->bsp, ch); }

sshm *consist_shm(consist *c) { return c->shm; }

void consist_close_done(consist *c, uint64_t token, int code)
{
    bsp_close_done(c->bsp, token, code);
}

/* ---- pulls ---------------------------------------------------------------- */

/* The values of h's rows in a new buffer of *bytes bytes (malloc'd): floats, or
 * for a table with a 16-bit wire (t->wire) 2 bytes a value with m's `wire` set, a
 * dense run converted straight from the shard. NULL when out of memory. */
static void *reply_rows(const held *h, Pskv__Meta *m, size_t *bytes)
{
    const table *t = h->t;
    size_t nv = (size_t)h->n * t->width;
    rowset rs = {h->keys, h->first, h->n, h->segs, h->nsegs};
    int direct = t->wire && t->dense && !h->keys && !h->segs; /* converted from the shard */
    float *f = direct ? NULL : malloc(nv ? nv * sizeof *f : 1);
    if (!direct && !f)
        return NULL;
    if (f)
        shard_pull_rows(t->sh, &rs, f);
    if (!t->wire) {
        *bytes = nv * sizeof *f;
        return f;
    }
    uint16_t *out = malloc(nv ? nv * sizeof *out : 1);
    if (out)
        half_pack(t->wire, out, f ? f : shard_dense_values(t->sh) +
                                            (size_t)(h->first - shard_dense_first(t->sh)) * t->width,
                  nv);
    free(f);
    m->has_wire = 1;
    m->wire = (uint32_t)t->wire;
    *bytes = nv * sizeof *out;
    return out;
}

/* The PUSH_ACK waiting (consist_flush_ack) rides on a pull reply to the same
 * worker (acked_push): one message less each way for a pipelined push then pull;
 * one to another worker goes first on its own. */
static void ack_ride(consist *c, const held *h, Pskv__Meta *m)
{
    if (!c->ack_on)
        return;
    if (c->ack.ridlen != h->ridlen || memcmp(c->ack.rid, h->rid, h->ridlen)) {
        consist_flush_ack(c);
        return;
    }
    c->ack_on = 0;
    c->st.acks_ridden++;
    m->has_acked_push = 1;
    m->acked_push = c->ack.request_id;
}

/* A pull that named a region of its worker's segment (sshm.h) is answered into
 * it, with no values frame (its bounds were checked on arrival; the generation is
 * checked again now: a segment the worker retired since is not written). Returns
 * 1 (answered), or 0 for a combined call's whose segment was retired: its push is
 * applied, so it is answered with a values frame rather than sent again. */
static int answer_pull_shm(consist *c, const held *h, Pskv__Meta *m, int64_t t0)
{
    table *t = h->t;
    float *dst = sshm_region(c->shm, h->sender, h->shm_gen, h->shm_off, h->shm_len);
    if (!dst && h->at_head)
        return 0;
    if (!dst) {
        held_answer(&c->out, h, PSKV_ESTALE, "the pull's shared-memory segment was retired; "
                    "send it again", m->clock, 0);
        return 1;
    }
    rowset rs = {h->keys, h->first, h->n, h->segs, h->nsegs};
    shard_pull_rows(t->sh, &rs, dst);
    m->has_shm_gen = m->has_shm_off = m->has_shm_len = 1;
    m->shm_gen = h->shm_gen;
    m->shm_off = h->shm_off;
    m->shm_len = h->shm_len;
    m->has_num_keys = m->has_width = 1;
    m->num_keys = h->n;
    m->width = t->width;
    ack_ride(c, h, m);
    held_send(&c->out, h, m, NULL);
    c->st.pulls++;
    c->st.pull_ns += tu_now_ns() - t0;
    return 1;
}

/* A large run of a dense table is lent to ZeroMQ without a copy (shard_lend: an
 * update of its rows while they are on the wire moves the shard to a fresh
 * buffer; other rows are updated in place, so the parts of a combined
 * push-and-pull, each lending its rows, cost no move); anything else is copied
 * into a fresh buffer that ZeroMQ sends and frees. Either way an update after
 * this point cannot change what is on the wire. A lend must cover a sixteenth of
 * the shard at least, so that the copy a push of the same rows may pay stays
 * within 16 times the copy saved. */
static void answer_pull(consist *c, const held *h, int64_t clock)
{
    int64_t t0 = tu_now_ns();
    table *t = h->t;
    size_t bytes = (size_t)h->n * t->width * sizeof(float);
    zmq_msg_t vals;
    Pskv__Meta m;
    held_meta(&c->out, &m, PSKV__MSG_TYPE__PULL_REPLY, h, clock);
    if (h->shm_len && answer_pull_shm(c, h, &m, t0)) /* into the worker's segment */
        return;
    void *token = NULL;
    const float *run = NULL; /* stays NULL when every lend slot is taken: copied */
    if (t->dense && !h->keys && !h->segs && bytes >= LEND_MIN && !t->filters.codec && !t->wire &&
        h->n * 16 >= shard_dense_count(t->sh))
        run = shard_lend(t->sh, h->first, h->n, &token);
    if (run) {
        if (wire_frame_lend(&vals, (void *)run, bytes, shard_lend_end, token) < 0) {
            held_answer(&c->out, h, PSKV_ENOMEM, "out of memory for the pull reply", clock, 0);
            return;
        }
    } else {
        void *buf = reply_rows(h, &m, &bytes);
        if (!buf) {
            held_answer(&c->out, h, PSKV_ENOMEM, "out of memory for the pull reply", clock, 0);
            return;
        }
        int packed = filter_pack(&t->filters, FILTER_ZVALS, buf, bytes, &m, &vals);
        if (packed)
            free(buf); /* packed into vals, or out of memory */
        if (packed < 0 || (!packed && wire_frame_lend(&vals, buf, bytes, wire_frame_free, NULL) < 0)) {
            held_answer(&c->out, h, PSKV_ENOMEM, "out of memory for the pull reply", clock, 0);
            return;
        }
    }
    if (h->rank < 0) { /* not a worker (the evaluator): the clocks its snapshot reflects */
        const int64_t *vc;
        int n = vclock_get(c->clocks, &vc);
        m.n_worker_clocks = n > 0 ? (size_t)n : 0;
        m.worker_clocks = (int64_t *)vc;
    }
    m.has_num_keys = m.has_width = 1;
    m.num_keys = h->n;
    m.width = t->width;
    ack_ride(c, h, &m);
    held_send(&c->out, h, &m, &vals);
    c->st.pulls++;
    c->st.pull_ns += tu_now_ns() - t0;
}

static int64_t values_clock(consist *c, table *t)
{
    return cons_of(t)->values_clock(c->clocks, c->bsp, t);
}

int64_t consist_values_clock(consist *c, table *t) { return values_clock(c, t); }

/* A pull at the head of its rows (pskv_pushpull's, held at_head) under a model
 * whose replicas wait on forwarded clocks (ssp) waits on the clocks this head
 * counted itself: the forwarded ones vouch for the pushes to other heads. */
static int pull_ready(consist *c, const held *h)
{
    int own = h->at_head && cons_of(h->t)->chain_clocks;
    if (own)
        vclock_read_at(c->clocks, c->mb->node_id);
    int ok = cons_of(h->t)->pull_ready(c->clocks, c->bsp, h->t, h->clock);
    if (own)
        vclock_read_at(c->clocks, 0);
    return ok;
}

/* Plug-in updaters hear of each rise of the smallest worker clock (finish). */
static void finish_plugins(consist *c)
{
    if (vclock_nset(c->clocks) == 0)
        return;
    int64_t m = vclock_min(c->clocks);
    if (m <= c->finished)
        return;
    c->finished = m;
    for (size_t i = 0; i < tables_count(c->tables); i++)
        upd_plugin_finish(tables_at(c->tables, i)->plug, m);
}

/* Applies every bsp clock that may close and answers every pull that may go. */
static void advance(consist *c)
{
    bsp_advance_all(c->bsp);
    finish_plugins(c);
    size_t keep = 0;
    for (size_t i = 0; i < c->nparked; i++) {
        held *h = &c->parked[i];
        if (pull_ready(c, h)) {
            answer_pull(c, h, values_clock(c, h->t));
            free(h->keys);
            free(h->segs);
        } else {
            c->parked[keep++] = *h;
        }
    }
    c->nparked = keep;
}

/* ---- views and clocks ----------------------------------------------------- */

void consist_placement_changed(consist *c, uint64_t epoch)
{
    c->place_epoch = epoch;
    /* bsp: the pushes held for open clocks are refused, to be sent again on the new
     * placement, and every worker's clock must be earned again by clocks sent
     * behind those re-sends */
    int64_t floor = bsp_placement_changed(c->bsp);
    if (floor != INT64_MAX)
        vclock_cap(c->clocks, floor);
    size_t keep = 0;
    for (size_t i = 0; i < c->nparked; i++) {
        held *h = &c->parked[i];
        if (h->epoch >= epoch) {
            c->parked[keep++] = *h;
            continue;
        }
        /* its rows may have moved: answered here later it would miss the pushes
         * their new owner applies */
        held_answer(&c->out, h, PSKV_ESTALE,
                    "pull planned on an older view waited across a placement change; send it "
                    "again", 0, 0);
        free(h->keys);
        free(h->segs);
    }
    c->nparked = keep;
}

void consist_advance(consist *c) { advance(c); }

void consist_forget_table(consist *c, const table *t, const char *why)
{
    bsp_forget(c->bsp, t, why);
    size_t keep = 0;
    for (size_t i = 0; i < c->nparked; i++) {
        held *h = &c->parked[i];
        if (h->t != t) {
            c->parked[keep++] = *h;
            continue;
        }
        held_answer(&c->out, h, PSKV_ENOTABLE, why, 0, 0);
        free(h->keys);
        free(h->segs);
    }
    c->nparked = keep;
}

void consist_view(consist *c)
{
    Pskv__View *v = c->mb->view;
    if (!v)
        return;
    sshm_view(c->shm, v); /* workers gone from the job: their segments unmapped */
    int was = vclock_view(c->clocks, v);
    if (was < 0)
        return;
    bsp_grow_ranks(c->bsp, was, vclock_nranks(c->clocks)); /* ranks only grow */
    advance(c);
}

uint64_t consist_refusal(consist *c, uint32_t node, int code)
{
    return vclock_refusal(c->clocks, node, code);
}

int consist_clock(consist *c, wire_msg *msg)
{
    const Pskv__Meta *m = msg->meta;
    if (m->has_epoch && m->epoch < c->place_epoch) {
        /* only a clock sent on this placement or a newer one counts: the worker had
         * then re-sent here whatever it had sent to a server that died, so every
         * push the clock covers is here before it. One sent before the worker heard
         * of the change could close a clock without a push still to be re-sent here
         * (dropped as late); the worker sends its clock again once its re-sends are
         * out (wview_catch_up: after every view that changed a chain) */
        LOG_D("ignored CLOCK %lld from node %u: sent on view epoch %llu, before the "
              "placement changed in epoch %llu", (long long)m->clock, m->sender,
              (unsigned long long)m->epoch, (unsigned long long)c->place_epoch);
        return -3;
    }
    int r = vclock_clock(c->clocks, msg);
    if (r >= 0)
        advance(c);
    return r;
}

void consist_clock_from(consist *c, uint32_t head, int rank, int64_t clock)
{
    if (vclock_from(c->clocks, head, rank, clock))
        advance(c);
}

void consist_set_sources(consist *c, const uint32_t *heads, size_t n, int placement_changed)
{
    vclock_set_sources(c->clocks, heads, n, placement_changed);
    advance(c);
}

static void refuse(consist *c, wire_msg *msg, int code, const char *why, int64_t clock)
{
    c->st.refused++;
    held_refuse(&c->out, msg, code, why, clock);
}

/* ---- pushes --------------------------------------------------------------- */

void consist_push(consist *c, table *t, wire_msg *msg, const rowset *rs)
{
    Pskv__Meta *r = msg->meta;
    if (cons_of(t)->closes && !r->assign) {
        bsp_push(c->bsp, t, msg, rs); /* held for its clock */
        return;
    }
    /* async and ssp (and a bsp assign): applied on arrival, answered at once */
    int64_t t0 = tu_now_ns();
    held h;
    shard_tag(t->sh, r->has_clock ? r->clock : 0, 0);
    int rc = r->assign ? shard_assign_rows(t->sh, rs, msg->vals)
                       : shard_push_rows(t->sh, rs, msg->vals);
    held_take(&h, msg, t, -1);
    char why[300];
    if (rc == -PSKV_EBADVALUE) {
        LOG_W("updater of table '%s' made rows of a push from node %u NaN or infinite: those "
              "rows left as they were", t->name, r->sender);
        snprintf(why, sizeof why, "the updater of table '%s' made rows NaN or infinite: those "
                 "rows left as they were, the others applied", t->name);
        held_answer_push(&c->out, &h, PSKV_EBADVALUE, why, values_clock(c, t));
    } else if (rc < 0)
        held_answer_push(&c->out, &h, PSKV_ENOMEM,
                         "out of memory applying the push (partially applied)", 0);
    else if (!(r->has_pull_after && r->pull_after)) { /* else its pull's reply answers it */
        consist_flush_ack(c); /* waits for a PULL queued behind it (consist.h) */
        c->ack = h;
        c->ack_clock = values_clock(c, t);
        c->ack_on = 1;
    }
    c->st.pushes++;
    c->st.push_ns += tu_now_ns() - t0;
    smet_apply(t, (double)(tu_now_ns() - t0) / 1e9);
}

void consist_flush_ack(consist *c)
{
    if (!c->ack_on)
        return;
    c->ack_on = 0;
    held_answer_push(&c->out, &c->ack, 0, NULL, c->ack_clock);
}

void consist_pull(consist *c, table *t, wire_msg *msg, const rowset *rs)
{
    held h;
    held_take(&h, msg, t, vclock_rank(c->clocks, msg->meta->sender));
    if (pull_ready(c, &h)) {
        h.keys = (uint64_t *)rs->keys; /* answered now: the frame is still ours */
        h.segs = (uint64_t *)rs->segs;
        h.nsegs = rs->nsegs;
        answer_pull(c, &h, values_clock(c, t));
        return;
    }
    if (c->nparked == MAX_PARKED) {
        refuse(c, msg, PSKV_EREFUSED, "too many parked pulls on this server", 0);
        return;
    }
    if (msg->keys) {
        h.keys = malloc(msg->nkeys * sizeof *h.keys);
        if (!h.keys) {
            refuse(c, msg, PSKV_ENOMEM, "out of memory parking the pull", 0);
            return;
        }
        memcpy(h.keys, msg->keys, msg->nkeys * sizeof *h.keys);
    } else if (rs->segs) {
        h.segs = malloc(rs->nsegs * 2 * sizeof *h.segs);
        if (!h.segs) {
            refuse(c, msg, PSKV_ENOMEM, "out of memory parking the pull", 0);
            return;
        }
        memcpy(h.segs, rs->segs, rs->nsegs * 2 * sizeof *h.segs);
        h.nsegs = rs->nsegs;
    }
    c->parked[c->nparked++] = h;
}

int consist_clocks(const consist *c, const int64_t **vc)
{
    return vclock_get(c->clocks, vc);
}

int consist_in_set(const consist *c, int rank)
{
    return vclock_finished(c->clocks, rank, INT64_MIN);
}

void consist_restore_clocks(consist *c, const int64_t *vc, int nranks)
{
    /* A checkpoint taken while a worker was ahead of the others holds none of its
     * pushes for clocks still open then (bsp closes a clock before applying it):
     * resumed, that worker does those steps again, so it counts from the slowest
     * worker's clock like the others, not from its own (its repeated pushes would
     * reach clocks the others close first, and be dropped as late). */
    int64_t lo = nranks > 0 ? vc[0] : 0;
    for (int r = 1; r < nranks; r++)
        lo = vc[r] < lo ? vc[r] : lo;
    vclock_restore(c->clocks, vc, nranks);
    vclock_cap(c->clocks, lo);
    advance(c);
}

int64_t consist_bsp_closed(consist *c, table *t)
{
    return cons_of(t)->closes ? bsp_table_closed(c->bsp, t) : 0;
}

void consist_restore_bsp(consist *c, table *t, int64_t closed)
{
    if (cons_of(t)->closes)
        bsp_restore(c->bsp, t, closed);
}
