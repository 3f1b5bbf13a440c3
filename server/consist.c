#define _GNU_SOURCE
#include "consist.h"

#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "chain.h"
#include "chain_apply.h"
#include "grow.h"
#include "held.h"
#include "log.h"
#include "pskv_errors.h"
#include "timeutil.h"
#include "vclock.h"

#define MAX_OPEN 64      /* bsp clocks a table holds open at once */
#define MAX_PARKED 4096  /* pulls parked on this server */
#define LEND_MIN 65536   /* bytes: a smaller pull reply is copied */

typedef struct bsp_open { /* one open clock of a bsp table */
    int64_t t;            /* -1 when the slot is free */
    shard **acc;          /* per rank: the sum of its pushes tagged t, NULL if none */
    held *acks;
    size_t nacks, capacks;
} bsp_open;

/* Rows of a bsp close that go down the chains: sparse rows with their keys; a
 * dense table's are its partitions' whole spans, without keys. */
typedef struct close_rows {
    uint64_t *keys;
    float *vals;
    uint64_t n;
    size_t capkeys, capvals;
    int err;
} close_rows;

typedef struct bsp_state {
    table *t;
    int64_t closed;       /* clocks 0..closed-1 are applied to every partition held here
                             (the smallest of the table's per-partition closed clocks) */
    bsp_open open[MAX_OPEN];
    shard **spare;        /* cleared accumulators for reuse: no allocation per clock */
    size_t nspare, capspare;
    float *comb;          /* dense: combined update */
    shard *scomb;         /* sparse: combined update */
    float *row;           /* sparse: one scaled row, scratch */
    close_rows rows;      /* with replicas: a close's rows for the chains, scratch */
} bsp_state;

typedef struct waiting { /* a held push answered when its bsp close is on every tail */
    uint64_t token;
    held h;
    int code;
    int64_t clock;
} waiting;

struct consist {
    void *router;
    held_out out;         /* where answers go: router, mb, clocks */
    chain *ch;            /* placement: which partitions a bsp close applies to */
    member *mb;
    table_set *tables;
    vclock *clocks;       /* the workers' clocks, the clock set, refusals */
    held *parked;
    size_t nparked;
    bsp_state **bsp;
    size_t nbsp;
    consist_stats st;
    waiting *wait;        /* bsp with R > 1: pushes whose close is on its way down */
    size_t nwait, capwait;
    uint32_t *parts, *fnodes; /* scratch of a close sent down the chains: its partitions */
    uint64_t *fids, *ffloors; /* and the (node, id, floor) of the pushes folded in */
    size_t capparts, capfnodes, capfids, capffloors;
};

static const upd_opts SUM = {UPD_SUM, 0, 0, 0, 0};
static const shard_init ZERO = {INIT_ZERO, 0, 0};

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
    if (!c->parked || !c->clocks) {
        free(c->parked);
        vclock_destroy(&c->clocks);
        free(c);
        return NULL;
    }
    return c;
}

static void bsp_free(bsp_state *b)
{
    for (int i = 0; i < MAX_OPEN; i++)
        free(b->open[i].acks);
    for (size_t i = 0; i < b->nspare; i++)
        shard_destroy(&b->spare[i]);
    free(b->spare);
    free(b->comb);
    free(b->row);
    free(b->rows.keys);
    free(b->rows.vals);
    shard_destroy(&b->scomb);
    free(b);
}

void consist_destroy(consist **c_p)
{
    if (!c_p || !*c_p)
        return;
    consist *c = *c_p;
    for (size_t i = 0; i < c->nbsp; i++) {
        bsp_state *b = c->bsp[i];
        for (int s = 0; s < MAX_OPEN; s++) {
            if (!b->open[s].acc)
                continue;
            for (int r = 0; r < vclock_nranks(c->clocks); r++)
                shard_destroy(&b->open[s].acc[r]);
            free(b->open[s].acc);
            b->open[s].acc = NULL;
        }
        bsp_free(b);
    }
    for (size_t i = 0; i < c->nparked; i++) {
        free(c->parked[i].keys);
        free(c->parked[i].segs);
    }
    free(c->bsp);
    free(c->parked);
    vclock_destroy(&c->clocks);
    free(c->wait);
    free(c->parts);
    free(c->fnodes);
    free(c->fids);
    free(c->ffloors);
    free(c);
    *c_p = NULL;
}

consist_stats consist_get_stats(const consist *c)
{
    consist_stats s = c->st;
    s.parked_now = c->nparked;
    return s;
}

/* ---- replies ------------------------------------------------------------ */

static void free_buf(void *data, void *hint)
{
    (void)hint;
    free(data);
}

/* A large run of a dense table is lent to ZeroMQ without a copy (shard_lend: an
 * update while it is on the wire moves the shard to a fresh buffer); anything
 * else is copied into a fresh buffer that ZeroMQ sends and frees. Either way an
 * update after this point cannot change what is on the wire. A lend must cover a
 * sixteenth of the shard at least, so that the copy the next push may pay stays
 * within 16 times the copy saved. */
static void answer_pull(consist *c, const held *h, int64_t clock)
{
    int64_t t0 = tu_now_ns();
    table *t = h->t;
    size_t bytes = (size_t)h->n * t->width * sizeof(float);
    zmq_msg_t vals;
    if (t->dense && !h->keys && !h->segs && bytes >= LEND_MIN &&
        h->n * 16 >= shard_dense_count(t->sh)) {
        void *token;
        const float *run = shard_lend(t->sh, h->first, &token);
        zmq_msg_init_data(&vals, (void *)run, bytes, shard_lend_end, token);
    } else {
        float *buf = malloc(bytes ? bytes : 1);
        if (!buf) {
            held_answer(&c->out, h, PSKV_ENOMEM, "out of memory for the pull reply", clock, 0);
            return;
        }
        rowset rs = {h->keys, h->first, h->n, h->segs, h->nsegs};
        shard_pull_rows(t->sh, &rs, buf);
        zmq_msg_init_data(&vals, buf, bytes, free_buf, NULL);
    }
    Pskv__Meta m;
    held_meta(&c->out, &m, PSKV__MSG_TYPE__PULL_REPLY, h, clock);
    m.has_num_keys = m.has_width = 1;
    m.num_keys = h->n;
    m.width = t->width;
    held_send(&c->out, h, &m, &vals);
    c->st.pulls++;
    c->st.pull_ns += tu_now_ns() - t0;
}

/* ---- clocks -------------------------------------------------------------- */

void consist_set_chain(consist *c, chain *ch) { c->ch = ch; }

/* The table's per-partition closed clocks, with room for every partition of the
 * placement; NULL before the first view (or without memory). */
static int64_t *part_closed(const consist *c, table *t)
{
    uint32_t np = c->ch ? chain_nparts(c->ch) : 0;
    return np ? table_closed(t, np) : NULL;
}

/* Partition p is one whose clocks this server closes (it heads it). A replica's
 * partitions move when their head's close comes down the chain (chain_close). */
static int closes_here(const consist *c, uint32_t p) { return chain_heads(c->ch, p); }

/* The smallest and the largest closed clock over the partitions held here (heads
 * only: those this server closes; else every partition held, as reads see
 * them), both b->closed when none is held yet, as on a joining server before its
 * copies arrive; returns the smallest. */
static int64_t held_closed_range(const consist *c, bsp_state *b, int64_t *hi, int heads)
{
    int64_t *pc = part_closed(c, b->t), lo = INT64_MAX, top = INT64_MIN;
    for (uint32_t p = 0; pc && p < chain_nparts(c->ch); p++)
        if (heads ? closes_here(c, p) : chain_holds(c->ch, p)) {
            lo = pc[p] < lo ? pc[p] : lo;
            top = pc[p] > top ? pc[p] : top;
        }
    if (lo == INT64_MAX)
        lo = top = b->closed;
    if (hi)
        *hi = top;
    return lo;
}

/* The clock this server closes next (the smallest over the partitions it heads). */
static int64_t held_closed(const consist *c, bsp_state *b)
{
    return held_closed_range(c, b, NULL, 1);
}

/* Clocks every partition held here has closed: what a pull here reads. */
static int64_t read_closed(const consist *c, bsp_state *b)
{
    return held_closed_range(c, b, NULL, 0);
}

/* Partitions headed here whose closed clock is in [from, upto) move up to it;
 * with replicas, the close goes down their chains (its rows, NULL for none, and
 * the pushes folded in). Returns chain_close's token, 0 or an error: rows that
 * could not all be gathered (rows->err) are not sent, lest replicas move their
 * clock without them. */
static int64_t raise_closed(consist *c, bsp_state *b, int64_t from, int64_t upto,
                            const close_rows *rows, const held *folded, size_t nfolded)
{
    int64_t *pc = part_closed(c, b->t);
    uint32_t np = pc ? chain_nparts(c->ch) : 0, nparts = 0;
    int repl = np && chain_replicas(c->ch) > 1;
    int64_t token = 0;
    if (repl && ((rows && rows->err) ||
                 grow_array((void **)&c->parts, &c->capparts, np, sizeof *c->parts) < 0 ||
                 grow_array((void **)&c->fnodes, &c->capfnodes, nfolded, sizeof *c->fnodes) < 0 ||
                 grow_array((void **)&c->fids, &c->capfids, nfolded, sizeof *c->fids) < 0 ||
                 grow_array((void **)&c->ffloors, &c->capffloors, nfolded,
                            sizeof *c->ffloors) < 0)) {
        token = -PSKV_ENOMEM;
        repl = 0;
    }
    for (uint32_t p = 0; p < np; p++)
        if (closes_here(c, p) && pc[p] >= from && pc[p] < upto) {
            pc[p] = upto;
            if (repl && chain_next(c->ch, p))
                c->parts[nparts++] = p;
        }
    if (nparts) {
        for (size_t k = 0; k < nfolded; k++) {
            c->fnodes[k] = folded[k].sender;
            c->fids[k] = folded[k].origin_id;
            c->ffloors[k] = folded[k].floor;
        }
        token = chain_close(c->ch, b->t, from, upto, rows ? rows->keys : NULL,
                            rows ? rows->vals : NULL, rows ? rows->n : 0, c->parts, nparts,
                            c->fnodes, c->fids, c->ffloors, nfolded);
    }
    if (token < 0)
        LOG_E("bsp clocks %lld..%lld of table '%s' could not be sent down the chains (%s): "
              "replicas of its partitions miss them", (long long)from, (long long)upto - 1,
              b->t->name, pskv_strerror((int)token));
    return token;
}

static bsp_state *bsp_of(consist *c, table *t)
{
    for (size_t i = 0; i < c->nbsp; i++)
        if (c->bsp[i]->t == t)
            return c->bsp[i];
    bsp_state **grown = realloc(c->bsp, (c->nbsp + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    c->bsp = grown;
    bsp_state *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->t = t;
    for (int i = 0; i < MAX_OPEN; i++)
        b->open[i].t = -1;
    b->closed = held_closed(c, b); /* a joining server: as its copies say */
    c->bsp[c->nbsp++] = b;
    return b;
}

static int64_t values_clock(consist *c, table *t)
{
    if (t->model == CONS_BSP) {
        bsp_state *b = bsp_of(c, t);
        return b ? read_closed(c, b) : 0;
    }
    return vclock_min(c->clocks);
}

static int pull_ready(consist *c, table *t, int64_t clock)
{
    switch (t->model) {
    case CONS_ASYNC:
        return 1;
    case CONS_SSP:
        return vclock_nset(c->clocks) == 0 || vclock_min(c->clocks) >= clock - t->tau;
    case CONS_BSP: {
        bsp_state *b = bsp_of(c, t);
        return !b || read_closed(c, b) >= clock;
    }
    }
    return 1;
}

/* Appends nrows rows (key: a sparse row's key, or UINT64_MAX for a dense span). */
static void rows_add(close_rows *cr, uint64_t key, const float *row, uint64_t nrows,
                     uint32_t width)
{
    if ((key != UINT64_MAX &&
         grow_array((void **)&cr->keys, &cr->capkeys, cr->n + nrows, sizeof *cr->keys) < 0) ||
        grow_array((void **)&cr->vals, &cr->capvals, (cr->n + nrows) * width,
                   sizeof *cr->vals) < 0) {
        cr->err = 1;
        return;
    }
    if (key != UINT64_MAX)
        cr->keys[cr->n] = key;
    memcpy(cr->vals + cr->n * width, row, nrows * width * sizeof(float));
    cr->n += nrows;
}

typedef struct fold_ctx {
    shard *into;
    float scale;
    float *row; /* scratch of one row when scale != 1 */
    uint32_t width;
    int err;
    const consist *c;   /* with pc: only rows of partitions held here at clock t */
    const table *t;
    const int64_t *pc;
    int64_t clock;
    close_rows *out;    /* with replicas: the rows applied whose partition has a next */
} fold_ctx;

static void fold_row(void *ctx, uint64_t key, const float *row)
{
    fold_ctx *f = ctx;
    uint32_t p = f->pc ? chain_partition_of(f->c->ch, f->t, key) : 0;
    if (f->pc && (!closes_here(f->c, p) || f->pc[p] != f->clock))
        return;
    const float *src = row;
    if (f->scale != 1.0f) {
        for (uint32_t j = 0; j < f->width; j++)
            f->row[j] = row[j] * f->scale;
        src = f->row;
    }
    if (shard_push(f->into, &key, 0, 1, src) < 0)
        f->err = 1;
    if (f->out && chain_next(f->c->ch, p)) /* f->out only with f->pc */
        rows_add(f->out, key, src, 1, f->width);
}

/* The accumulators of open clock o go back to the spares, cleared. */
static void bsp_recycle(consist *c, bsp_state *b, bsp_open *o)
{
    for (int r = 0; r < vclock_nranks(c->clocks); r++) {
        if (!o->acc[r])
            continue;
        shard_clear(o->acc[r]);
        if (grow_array((void **)&b->spare, &b->capspare, b->nspare + 1, sizeof *b->spare) == 0)
            b->spare[b->nspare++] = o->acc[r];
        else
            shard_destroy(&o->acc[r]);
        o->acc[r] = NULL;
    }
    o->nacks = 0;
    o->t = -1;
}

/* Dense: applies the combined update `comb` (the whole table) to the rows of the
 * partitions held here whose closed clock is t, or to every row before the
 * first view. */
static int apply_dense(consist *c, table *tb, const float *comb, int64_t t, close_rows *out)
{
    uint64_t first = shard_dense_first(tb->sh), count = shard_dense_count(tb->sh);
    int64_t *pc = part_closed(c, tb);
    if (!pc)
        return shard_push(tb->sh, NULL, first, count, comb);
    int rc = 0;
    for (uint32_t p = 0; p < chain_nparts(c->ch); p++) {
        uint64_t pf, pn;
        if (!closes_here(c, p) || pc[p] != t)
            continue;
        chain_dense_span(c->ch, tb, p, &pf, &pn);
        if (!pn || !shard_owns_run(tb->sh, pf, pn))
            continue;
        const float *rows = comb + (size_t)(pf - first) * tb->width;
        if (shard_push(tb->sh, NULL, pf, pn, rows) < 0)
            rc = -PSKV_ENOMEM;
        if (out && chain_next(c->ch, p)) /* every row: momentum moves rows with no gradient */
            rows_add(out, UINT64_MAX, rows, pn, tb->width);
    }
    return rc;
}

/* The answer to a push held for closed clock t (code 0, PSKV_ELATE or an error). */
static void answer_closed(consist *c, const held *h, int code, int64_t clock)
{
    held_answer_push(&c->out, h, code,
                     code == PSKV_ELATE ? "dropped: late (the clock closed without it)"
                     : code             ? "out of memory applying the clock"
                                        : NULL,
                     clock);
}

/* h waits for the close `token` to reach every tail (chain_close); answered now
 * when the list cannot grow. */
static void wait_close(consist *c, uint64_t token, const held *h, int code, int64_t clock)
{
    if (grow_array((void **)&c->wait, &c->capwait, c->nwait + 1, sizeof *c->wait) < 0) {
        LOG_E("out of memory holding a push for its replicas: acknowledged now");
        answer_closed(c, h, code, clock);
        return;
    }
    c->wait[c->nwait++] = (waiting){token, *h, code, clock};
}

void consist_close_done(consist *c, uint64_t token, int code)
{
    if (code)
        LOG_E("a bsp close could not be sent down its chains (%s): its pushes are "
              "acknowledged without every replica", pskv_strerror(-code));
    size_t keep = 0;
    for (size_t i = 0; i < c->nwait; i++) {
        waiting *w = &c->wait[i];
        if (w->token == token)
            answer_closed(c, &w->h, w->code, w->clock);
        else
            c->wait[keep++] = *w;
    }
    c->nwait = keep;
}

/* Applies clock `t` of bsp table b: the held sums of the workers that finished t,
 * combined in rank order, applied once to the partitions held here at clock t;
 * then the held pushes are answered. */
static void bsp_close(consist *c, bsp_state *b, int64_t t)
{
    table *tb = b->t;
    bsp_open *o = &b->open[t % MAX_OPEN];
    if (o->t == t) {
        close_rows *cr = &b->rows;
        cr->n = 0;
        cr->err = 0;
        int repl = c->ch && chain_replicas(c->ch) > 1;
        int ncomb = 0;
        for (int r = 0; r < vclock_nranks(c->clocks); r++)
            ncomb += vclock_finished(c->clocks, r, t);
        float scale = (tb->upd.kind == UPD_SUM || ncomb == 0) ? 1.0f : 1.0f / (float)ncomb;
        int rc = 0;
        if (tb->dense) {
            uint64_t count = shard_dense_count(tb->sh);
            size_t n = (size_t)count * tb->width;
            if (!b->comb && n)
                b->comb = malloc(n * sizeof(float));
            if (n && !b->comb) {
                rc = -PSKV_ENOMEM;
            } else if (n) {
                memset(b->comb, 0, n * sizeof(float));
                for (int r = 0; r < vclock_nranks(c->clocks); r++)
                    if (o->acc[r] && vclock_finished(c->clocks, r, t))
                        cblas_saxpy((blasint)n, 1.0f, shard_dense_values(o->acc[r]), 1, b->comb,
                                    1);
                if (scale != 1.0f)
                    cblas_sscal((blasint)n, scale, b->comb, 1);
                rc = apply_dense(c, tb, b->comb, t, repl ? cr : NULL);
            }
        } else {
            if (!b->scomb)
                b->scomb = shard_new(0, 0, 0, 0, UINT64_MAX, tb->width, &SUM, &ZERO);
            if (!b->row)
                b->row = malloc(tb->width * sizeof(float));
            if (!b->scomb || !b->row) {
                rc = -PSKV_ENOMEM;
            } else {
                shard_clear(b->scomb);
                fold_ctx f = {b->scomb, 1.0f, NULL, tb->width, 0, NULL, NULL, NULL, 0, NULL};
                for (int r = 0; r < vclock_nranks(c->clocks); r++)
                    if (o->acc[r] && vclock_finished(c->clocks, r, t))
                        shard_foreach(o->acc[r], fold_row, &f);
                fold_ctx g = {tb->sh,         scale, b->row, tb->width,        0, c,
                              tb,             part_closed(c, tb), t, repl ? cr : NULL};
                shard_foreach(b->scomb, fold_row, &g);
                rc = f.err || g.err ? -PSKV_ENOMEM : 0;
            }
        }
        if (rc < 0)
            LOG_E("out of memory applying clock %lld of table '%s'", (long long)t, tb->name);
        /* the pushes folded in go down with the close: a new head that received it
         * acknowledges a re-sent copy instead of dropping it as late */
        size_t nfold = 0;
        for (size_t i = 0; i < o->nacks; i++)
            if (vclock_finished(c->clocks, o->acks[i].rank, t)) {
                held tmp = o->acks[i];
                o->acks[i] = o->acks[nfold];
                o->acks[nfold++] = tmp;
            }
        /* dense rows go as their partitions' spans, without keys */
        int64_t token = raise_closed(c, b, t, t + 1, cr, o->acks, nfold);
        for (size_t i = 0; i < o->nacks; i++) {
            held *h = &o->acks[i];
            int code = rc < 0 ? PSKV_ENOMEM : i < nfold ? 0 : PSKV_ELATE;
            c->st.dropped_late += code == PSKV_ELATE;
            if (token > 0)
                wait_close(c, (uint64_t)token, h, code, t + 1);
            else
                answer_closed(c, h, code, t + 1);
        }
        bsp_recycle(c, b, o);
    } else {
        raise_closed(c, b, t, t + 1, NULL, NULL, 0);
    }
    b->closed = t + 1;
}

/* Applies every clock of b that may close. Clocks nobody pushed to are passed in
 * one step, so a worker's clock far ahead costs nothing. */
static void bsp_advance(consist *c, bsp_state *b)
{
    b->closed = held_closed(c, b); /* the partitions held may have changed */
    int64_t upto = vclock_closable(c->clocks, b->t->backup, b->closed);
    while (b->closed < upto) {
        int64_t next = upto; /* the next clock that holds pushes */
        for (int s = 0; s < MAX_OPEN; s++)
            if (b->open[s].t >= b->closed && b->open[s].t < next)
                next = b->open[s].t;
        if (next > b->closed) { /* nothing held in between */
            raise_closed(c, b, b->closed, next, NULL, NULL, 0);
            b->closed = next;
        } else {
            bsp_close(c, b, b->closed); /* every held partition at b->closed moves up */
        }
    }
}

/* Applies every bsp clock that may close and answers every pull that may go. */
static void advance(consist *c)
{
    for (size_t i = 0; i < c->nbsp; i++)
        bsp_advance(c, c->bsp[i]);
    size_t keep = 0;
    for (size_t i = 0; i < c->nparked; i++) {
        held *h = &c->parked[i];
        if (pull_ready(c, h->t, h->clock)) {
            answer_pull(c, h, values_clock(c, h->t));
            free(h->keys);
            free(h->segs);
        } else {
            c->parked[keep++] = *h;
        }
    }
    c->nparked = keep;
}

void consist_placement_changed(consist *c, uint64_t epoch)
{
    /* bsp: the pushes held for open clocks are refused, to be sent again on the new
     * placement (their rows may have moved; the rest come back here), and every
     * worker's clock must be earned again by clocks sent behind those re-sends */
    int64_t floor = INT64_MAX;
    for (size_t i = 0; i < c->nbsp; i++) {
        bsp_state *b = c->bsp[i];
        for (int s = 0; s < MAX_OPEN; s++) {
            bsp_open *o = &b->open[s];
            if (o->t < 0)
                continue;
            for (size_t k = 0; k < o->nacks; k++)
                held_answer_push(&c->out, &o->acks[k], PSKV_ESTALE,
                                 "the placement changed while its bsp clock was open; send it "
                                 "again",
                                 b->closed);
            bsp_recycle(c, b, o);
        }
        b->closed = held_closed(c, b);
        if (b->closed < floor)
            floor = b->closed;
    }
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

void consist_view(consist *c)
{
    Pskv__View *v = c->mb->view;
    if (!v)
        return;
    int was = vclock_view(c->clocks, v), nranks = vclock_nranks(c->clocks);
    if (was < 0)
        return;
    for (size_t i = 0; nranks > was && i < c->nbsp; i++) /* ranks only grow */
        for (int s = 0; s < MAX_OPEN; s++)
            if (c->bsp[i]->open[s].acc) {
                shard **acc = realloc(c->bsp[i]->open[s].acc, (size_t)nranks * sizeof *acc);
                if (acc) {
                    for (int r = was; r < nranks; r++)
                        acc[r] = NULL;
                    c->bsp[i]->open[s].acc = acc;
                }
            }
    advance(c);
}

uint64_t consist_refusal(consist *c, uint32_t node, int code)
{
    return vclock_refusal(c->clocks, node, code);
}

int consist_clock(consist *c, wire_msg *msg)
{
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

void consist_push(consist *c, table *t, wire_msg *msg, const rowset *rs)
{
    int64_t t0 = tu_now_ns();
    Pskv__Meta *r = msg->meta;
    held h;
    if (t->model != CONS_BSP || r->assign) {
        int rc = r->assign ? shard_assign_rows(t->sh, rs, msg->vals)
                           : shard_push_rows(t->sh, rs, msg->vals);
        held_take(&h, msg, t, -1);
        if (rc < 0)
            held_answer_push(&c->out, &h, PSKV_ENOMEM,
                             "out of memory applying the push (partially applied)", 0);
        else
            held_answer_push(&c->out, &h, 0, NULL, values_clock(c, t));
        c->st.pushes++;
        c->st.push_ns += tu_now_ns() - t0;
        return;
    }
    int rank = vclock_rank(c->clocks, r->sender);
    bsp_state *b = bsp_of(c, t);
    int64_t clock = r->has_clock ? r->clock : 0;
    char why[200];
    if (b)
        b->closed = held_closed(c, b); /* copies may have arrived since */
    if (b && r->has_epoch && c->ch && r->epoch < chain_place_epoch(c->ch)) {
        /* like the pushes held for open clocks at the change (consist_placement_changed):
         * the worker waits for this answer before its clock goes out again */
        snprintf(why, sizeof why, "bsp push planned on view epoch %llu, before the placement "
                 "changed in epoch %llu; send it again", (unsigned long long)r->epoch,
                 (unsigned long long)chain_place_epoch(c->ch));
        refuse(c, msg, PSKV_ESTALE, why, b->closed);
        return;
    }
    if (rank < 0 || !b) {
        refuse(c, msg, b ? PSKV_EPROTO : PSKV_ENOMEM,
               b ? "a bsp push from a node that is not a worker of the view" : "out of memory", 0);
        return;
    }
    /* late when a row's partition has closed the clock without it (before the first
     * view: the table's closed clock); nothing of it is applied then. A re-sent copy
     * of a push folded into a close this server received as a replica is
     * acknowledged (all its partitions closed) or held for the rest (some open) */
    int folded = 0;
    int closed = c->ch && chain_nparts(c->ch)
                     ? chain_push_closed(c->ch, t, rs, clock, r->sender,
                                         r->has_origin_id ? r->origin_id : r->request_id,
                                         &folded)
                     : clock < b->closed;
    if (closed && !(folded && closed == 2)) {
        held_take(&h, msg, t, rank);
        if (folded) {
            LOG_D("push %llu of node %u for closed clock %lld: already folded into its close",
                  (unsigned long long)h.origin_id, h.sender, (long long)clock);
            held_answer_push(&c->out, &h, 0, NULL, read_closed(c, b));
            return;
        }
        c->st.dropped_late++;
        held_answer_push(&c->out, &h, PSKV_ELATE, "dropped: late (its clock has closed)",
                         b->closed);
        return;
    }
    if (clock >= b->closed + MAX_OPEN) {
        snprintf(why, sizeof why, "clock %lld is %d or more ahead of the last closed clock %lld",
                 (long long)clock, MAX_OPEN, (long long)b->closed);
        refuse(c, msg, PSKV_EREFUSED, why, b->closed);
        return;
    }
    bsp_open *o = &b->open[clock % MAX_OPEN];
    if (o->t != clock) {
        if (!o->acc)
            o->acc = calloc((size_t)vclock_nranks(c->clocks), sizeof *o->acc);
        if (!o->acc) {
            refuse(c, msg, PSKV_ENOMEM, "out of memory", b->closed);
            return;
        }
        o->t = clock;
        o->nacks = 0;
    }
    if (!o->acc[rank]) {
        if (b->nspare)
            o->acc[rank] = b->spare[--b->nspare];
        else
            o->acc[rank] = t->dense ? shard_new(1, shard_dense_first(t->sh),
                                                shard_dense_count(t->sh), 0, UINT64_MAX, t->width,
                                                &SUM, &ZERO)
                                    : shard_new(0, 0, 0, 0, UINT64_MAX, t->width, &SUM, &ZERO);
    }
    if (o->nacks == o->capacks) {
        size_t cap = o->capacks ? o->capacks * 2 : 16;
        held *g = realloc(o->acks, cap * sizeof *g);
        if (g) {
            o->acks = g;
            o->capacks = cap;
        }
    }
    if (!o->acc[rank] || o->nacks == o->capacks ||
        shard_push_rows(o->acc[rank], rs, msg->vals) < 0) {
        refuse(c, msg, PSKV_ENOMEM, "out of memory holding the push", b->closed);
        return;
    }
    held_take(&o->acks[o->nacks++], msg, t, rank);
    c->st.pushes++;
    c->st.push_ns += tu_now_ns() - t0;
}

void consist_pull(consist *c, table *t, wire_msg *msg, const rowset *rs)
{
    held h;
    held_take(&h, msg, t, vclock_rank(c->clocks, msg->meta->sender));
    if (pull_ready(c, t, h.clock)) {
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

void consist_restore_clocks(consist *c, const int64_t *vc, int nranks)
{
    vclock_restore(c->clocks, vc, nranks);
    advance(c);
}

int64_t consist_bsp_closed(consist *c, table *t)
{
    if (t->model != CONS_BSP)
        return 0;
    bsp_state *b = bsp_of(c, t);
    if (!b)
        return 0;
    int64_t hi, lo = held_closed_range(c, b, &hi, 0);
    return lo == hi ? lo : -1; /* -1 just after a join, until the lagging partitions catch up */
}

void consist_restore_bsp(consist *c, table *t, int64_t closed)
{
    bsp_state *b = t->model == CONS_BSP ? bsp_of(c, t) : NULL;
    if (!b || closed <= b->closed)
        return;
    int64_t *pc = part_closed(c, t);
    for (uint32_t p = 0; pc && p < chain_nparts(c->ch); p++)
        pc[p] = closed;
    b->closed = closed;
}
