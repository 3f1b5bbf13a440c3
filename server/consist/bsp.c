/* The bsp engine (bsp.h): per table, open clocks with per-rank accumulators and
 * the pushes held for them; a clock closes when vclock_closable says enough
 * workers finished it, and the close goes down the chains when there are
 * replicas (raise_closed -> chain_close). */
#define _GNU_SOURCE
#include "bsp.h"
#include "model.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repl/chain_apply.h"
#include "grow.h"
#include "log.h"
#include "pskv_errors.h"
#include "timeutil.h"

#define MAX_OPEN 64      /* bsp clocks a table holds open at once */
#define CLOSE_BLOCK 4096 /* floats of a dense close combined and applied at a time */

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
    shard **spare;        /* accumulators for reuse, holding the sums of a closed clock:
                             no allocation per clock, no clearing (bsp_push) */
    size_t nspare, capspare;
    float *comb;          /* dense: a block of the combined update (CLOSE_BLOCK floats) */
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

struct bsp {
    held_out out;         /* where answers go; out.clocks: the clock set */
    chain *ch;            /* placement: which partitions a bsp close applies to */
    bsp_state **tab;      /* one per bsp table, made on first use */
    size_t ntab;
    bsp_stats st;
    waiting *wait;        /* with R > 1: pushes whose close is on its way down */
    size_t nwait, capwait;
    uint32_t *parts, *fnodes; /* scratch of a close sent down the chains: its partitions */
    uint64_t *fids, *ffloors; /* and the (node, id, floor) of the pushes folded in */
    size_t capparts, capfnodes, capfids, capffloors;
    shard **accs;         /* scratch of a dense close: the accumulators it combines */
    size_t capaccs;
};

static const upd_opts SUM = {.kind = UPD_SUM};
static const shard_init ZERO = {INIT_ZERO, 0, 0};

static void state_free(bsp_state *b)
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

bsp *bsp_new(const held_out *out)
{
    bsp *e = calloc(1, sizeof *e);
    if (e)
        e->out = *out;
    return e;
}

/* Frees b with its open clocks' accumulators. */
static void state_drop(const bsp *e, bsp_state *b)
{
    int nranks = vclock_nranks(e->out.clocks);
    for (int s = 0; s < MAX_OPEN; s++) {
        if (!b->open[s].acc)
            continue;
        for (int r = 0; r < nranks; r++)
            shard_destroy(&b->open[s].acc[r]);
        free(b->open[s].acc);
        b->open[s].acc = NULL;
    }
    state_free(b);
}

void bsp_destroy(bsp **e_p)
{
    if (!e_p || !*e_p)
        return;
    bsp *e = *e_p;
    for (size_t i = 0; i < e->ntab; i++)
        state_drop(e, e->tab[i]);
    free(e->tab);
    free(e->wait);
    free(e->parts);
    free(e->fnodes);
    free(e->fids);
    free(e->ffloors);
    free(e->accs);
    free(e);
    *e_p = NULL;
}

bsp_stats bsp_get_stats(const bsp *e) { return e->st; }

void bsp_forget(bsp *e, const table *t, const char *why)
{
    size_t keep = 0;
    for (size_t i = 0; i < e->nwait; i++)
        if (e->wait[i].h.t == t)
            held_answer_push(&e->out, &e->wait[i].h, PSKV_ENOTABLE, why, e->wait[i].clock);
        else
            e->wait[keep++] = e->wait[i];
    e->nwait = keep;
    keep = 0;
    for (size_t i = 0; i < e->ntab; i++) {
        bsp_state *b = e->tab[i];
        if (b->t != t) {
            e->tab[keep++] = b;
            continue;
        }
        for (int s = 0; s < MAX_OPEN; s++)
            for (size_t k = 0; b->open[s].t >= 0 && k < b->open[s].nacks; k++)
                held_answer_push(&e->out, &b->open[s].acks[k], PSKV_ENOTABLE, why, b->closed);
        state_drop(e, b);
    }
    e->ntab = keep;
}

void bsp_set_chain(bsp *e, chain *ch) { e->ch = ch; }

void bsp_grow_ranks(bsp *e, int from, int to)
{
    for (size_t i = 0; to > from && i < e->ntab; i++)
        for (int s = 0; s < MAX_OPEN; s++)
            if (e->tab[i]->open[s].acc) {
                shard **acc = realloc(e->tab[i]->open[s].acc, (size_t)to * sizeof *acc);
                if (acc) {
                    for (int r = from; r < to; r++)
                        acc[r] = NULL;
                    e->tab[i]->open[s].acc = acc;
                }
            }
}

/* The table's per-partition closed clocks, with room for every partition of the
 * placement; NULL before the first view (or without memory). */
static int64_t *part_closed(const bsp *e, table *t)
{
    uint32_t np = e->ch ? chain_nparts(e->ch) : 0;
    return np ? table_closed(t, np) : NULL;
}

/* Partition p is one whose clocks this server closes (it heads it). A replica's
 * partitions move when their head's close comes down the chain (chain_close). */
static int closes_here(const bsp *e, uint32_t p) { return chain_heads(e->ch, p); }

/* The smallest and the largest closed clock over the partitions held here (heads
 * only: those this server closes; else every partition held, as reads see
 * them), both b->closed when none is held yet, as on a joining server before its
 * copies arrive; returns the smallest. */
static int64_t closed_range(const bsp *e, bsp_state *b, int64_t *hi, int heads)
{
    int64_t *pc = part_closed(e, b->t), lo = INT64_MAX, top = INT64_MIN;
    for (uint32_t p = 0; pc && p < chain_nparts(e->ch); p++)
        if (heads ? closes_here(e, p) : chain_holds(e->ch, p)) {
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
static int64_t heads_closed(const bsp *e, bsp_state *b)
{
    return closed_range(e, b, NULL, 1);
}

/* Clocks every partition held here has closed: what a pull here reads. */
static int64_t read_closed(const bsp *e, bsp_state *b)
{
    return closed_range(e, b, NULL, 0);
}

/* Partitions headed here whose closed clock is in [from, upto) move up to it;
 * with replicas, the close goes down their chains (its rows, NULL for none, and
 * the pushes folded in). Returns chain_close's token, 0 or an error: rows that
 * could not all be gathered (rows->err) are not sent, lest replicas move their
 * clock without them. */
static int64_t raise_closed(bsp *e, bsp_state *b, int64_t from, int64_t upto,
                            const close_rows *rows, const held *folded, size_t nfolded)
{
    int64_t *pc = part_closed(e, b->t);
    uint32_t np = pc ? chain_nparts(e->ch) : 0, nparts = 0;
    int repl = np && chain_replicas(e->ch) > 1;
    int64_t token = 0;
    if (repl && ((rows && rows->err) ||
                 grow_array((void **)&e->parts, &e->capparts, np, sizeof *e->parts) < 0 ||
                 grow_array((void **)&e->fnodes, &e->capfnodes, nfolded, sizeof *e->fnodes) < 0 ||
                 grow_array((void **)&e->fids, &e->capfids, nfolded, sizeof *e->fids) < 0 ||
                 grow_array((void **)&e->ffloors, &e->capffloors, nfolded,
                            sizeof *e->ffloors) < 0)) {
        token = -PSKV_ENOMEM;
        repl = 0;
    }
    for (uint32_t p = 0; p < np; p++)
        if (closes_here(e, p) && pc[p] >= from && pc[p] < upto) {
            pc[p] = upto;
            if (repl)
                e->parts[nparts++] = p;
        }
    for (size_t k = 0; nparts && k < nfolded; k++) {
        e->fnodes[k] = folded[k].sender;
        e->fids[k] = folded[k].origin_id;
        e->ffloors[k] = folded[k].floor;
    }
    /* a re-sent copy of a push folded here (its part's reply refused at a placement
     * change: a pushpull's parked pull) is then acknowledged, not dropped as late */
    if (nparts && nfolded &&
        chain_record_folded(e->ch, e->parts, nparts, e->fnodes, e->fids, e->ffloors, nfolded) < 0)
        LOG_W("out of memory recording the pushes folded into clock %lld of table '%s': a "
              "re-send of one may be dropped as late", (long long)upto - 1, b->t->name);
    uint32_t nnext = 0; /* the close goes down the chains of the partitions with a next */
    for (uint32_t k = 0; k < nparts; k++)
        if (chain_next(e->ch, e->parts[k]))
            e->parts[nnext++] = e->parts[k];
    nparts = nnext;
    if (nparts) {
        token = chain_close(e->ch, b->t, from, upto, rows ? rows->keys : NULL,
                            rows ? rows->vals : NULL, rows ? rows->n : 0, e->parts, nparts,
                            e->fnodes, e->fids, e->ffloors, nfolded);
    }
    if (token < 0)
        LOG_E("bsp clocks %lld..%lld of table '%s' could not be sent down the chains (%s): "
              "replicas of its partitions miss them", (long long)from, (long long)upto - 1,
              b->t->name, pskv_strerror((int)token));
    return token;
}

static void advance_state(bsp *e, bsp_state *b);

/* The state of table t, made on first use: a table opened while the workers' clocks
 * were already past 0 (the worker ran another table first) starts at the clocks
 * they closed (advance_state), or a pull at its worker's clock would wait for
 * CLOCKs that came before the table existed, and never come again. */
static bsp_state *state_of(bsp *e, table *t)
{
    for (size_t i = 0; i < e->ntab; i++)
        if (e->tab[i]->t == t)
            return e->tab[i];
    bsp_state **grown = realloc(e->tab, (e->ntab + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    e->tab = grown;
    bsp_state *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->t = t;
    for (int i = 0; i < MAX_OPEN; i++)
        b->open[i].t = -1;
    b->closed = heads_closed(e, b); /* a joining server: as its copies say */
    e->tab[e->ntab++] = b;
    advance_state(e, b);
    return b;
}

int bsp_pull_ready(bsp *e, table *t, int64_t clock)
{
    bsp_state *b = state_of(e, t);
    return !b || read_closed(e, b) >= clock;
}

int64_t bsp_values_clock(bsp *e, table *t)
{
    bsp_state *b = state_of(e, t);
    return b ? read_closed(e, b) : 0;
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
    const bsp *e;       /* with pc: only rows of partitions held here at clock t */
    const table *t;
    const int64_t *pc;
    int64_t clock;
    close_rows *out;    /* with replicas: the rows applied whose partition has a next */
    int bad;            /* the updater made a row non-finite (restored) */
} fold_ctx;

static void fold_row(void *ctx, uint64_t key, const float *row)
{
    fold_ctx *f = ctx;
    uint32_t p = f->pc ? chain_partition_of(f->e->ch, f->t, key) : 0;
    if (f->pc && (!closes_here(f->e, p) || f->pc[p] != f->clock))
        return;
    const float *src = row;
    if (f->scale != 1.0f) {
        for (uint32_t j = 0; j < f->width; j++)
            f->row[j] = row[j] * f->scale;
        src = f->row;
    }
    int rc = shard_push(f->into, &key, 0, 1, src);
    if (rc == -PSKV_EBADVALUE)
        f->bad = 1;
    else if (rc < 0)
        f->err = 1;
    if (f->out && chain_next(f->e->ch, p)) /* f->out only with f->pc */
        rows_add(f->out, key, src, 1, f->width);
}

/* The accumulators of open clock o go back to the spares as they are: the push
 * that takes one assigns over its sums or clears it first (acc_push), off the
 * close that every worker waits for. */
static void recycle_open(bsp *e, bsp_state *b, bsp_open *o)
{
    int nranks = vclock_nranks(e->out.clocks);
    for (int r = 0; r < nranks; r++) {
        if (!o->acc[r])
            continue;
        if (grow_array((void **)&b->spare, &b->capspare, b->nspare + 1, sizeof *b->spare) == 0)
            b->spare[b->nspare++] = o->acc[r];
        else
            shard_destroy(&o->acc[r]);
        o->acc[r] = NULL;
    }
    o->nacks = 0;
    o->t = -1;
}

/* Dense rows [pf, pf + pn) of clock t's update, CLOSE_BLOCK floats at a time:
 * the block of each of the nacc accumulators added in rank order into zeroed
 * scratch, scaled, then applied (and with `out` kept for the chains) while it is
 * in cache. The sums and the scale are per value, so the bits are those of one
 * pass of each over the whole table; the table, the accumulators and the state
 * are each read once. */
static int apply_span(bsp_state *b, shard *const *acc, int nacc, float scale, uint64_t pf,
                      uint64_t pn, close_rows *out)
{
    table *tb = b->t;
    uint32_t wd = tb->width;
    uint64_t first = shard_dense_first(tb->sh), per = CLOSE_BLOCK / wd ? CLOSE_BLOCK / wd : 1;
    if (!b->comb)
        b->comb = malloc((size_t)per * wd * sizeof(float));
    if (!b->comb)
        return -PSKV_ENOMEM;
    int rc = 0;
    for (uint64_t r = pf; r < pf + pn; r += per) {
        uint64_t m = pf + pn - r < per ? pf + pn - r : per;
        size_t n = (size_t)m * wd, at = (size_t)(r - first) * wd;
        memset(b->comb, 0, n * sizeof(float));
        for (int k = 0; k < nacc; k++)
            cblas_saxpy((blasint)n, 1.0f, shard_dense_values(acc[k]) + at, 1, b->comb, 1);
        if (scale != 1.0f)
            cblas_sscal((blasint)n, scale, b->comb, 1);
        int prc = shard_push(tb->sh, NULL, r, m, b->comb);
        if (prc < 0 && rc != -PSKV_ENOMEM)
            rc = prc;
        if (out)
            rows_add(out, UINT64_MAX, b->comb, m, wd);
    }
    return rc;
}

/* Dense: applies clock t's update, the sums of the nacc accumulators `acc` (rank
 * order) times `scale`, to the rows of the partitions held here whose closed
 * clock is t, or to every row before the first view. */
static int apply_dense(bsp *e, bsp_state *b, shard *const *acc, int nacc, float scale, int64_t t,
                       close_rows *out)
{
    table *tb = b->t;
    int64_t *pc = part_closed(e, tb);
    if (!pc)
        return apply_span(b, acc, nacc, scale, shard_dense_first(tb->sh),
                          shard_dense_count(tb->sh), NULL);
    int rc = 0;
    for (uint32_t p = 0; p < chain_nparts(e->ch); p++) {
        uint64_t pf, pn;
        if (!closes_here(e, p) || pc[p] != t)
            continue;
        chain_dense_span(e->ch, tb, p, &pf, &pn);
        if (!pn || !shard_owns_run(tb->sh, pf, pn))
            continue;
        /* every row goes down: momentum moves rows with no gradient */
        int prc = apply_span(b, acc, nacc, scale, pf, pn, out && chain_next(e->ch, p) ? out : NULL);
        if (prc < 0 && rc != -PSKV_ENOMEM)
            rc = prc;
    }
    return rc;
}

/* The answer to a push held for closed clock t (code 0, PSKV_ELATE or an error). */
static void answer_closed(bsp *e, const held *h, int code, int64_t clock)
{
    held_answer_push(&e->out, h, code,
                     code == PSKV_ELATE ? "dropped: late (the clock closed without it)"
                     : code == PSKV_EBADVALUE
                         ? "the updater made rows NaN or infinite: those rows left as they were"
                     : code ? "out of memory applying the clock"
                                        : NULL,
                     clock);
}

/* h waits for the close `token` to reach every tail (chain_close); answered now
 * when the list cannot grow. */
static void wait_close(bsp *e, uint64_t token, const held *h, int code, int64_t clock)
{
    if (grow_array((void **)&e->wait, &e->capwait, e->nwait + 1, sizeof *e->wait) < 0) {
        LOG_E("out of memory holding a push for its replicas: acknowledged now");
        answer_closed(e, h, code, clock);
        return;
    }
    e->wait[e->nwait++] = (waiting){token, *h, code, clock};
}

void bsp_close_done(bsp *e, uint64_t token, int code)
{
    if (code && code != PSKV_ESTALE)
        LOG_E("a bsp close could not be sent down its chains (%s): its pushes are "
              "acknowledged without every replica", pskv_strerror(-code));
    size_t keep = 0;
    for (size_t i = 0; i < e->nwait; i++) {
        waiting *w = &e->wait[i];
        if (w->token == token && code == PSKV_ESTALE) /* this server left its partitions */
            held_answer_push(&e->out, &w->h, PSKV_ESTALE, "this server left the partitions "
                             "before their replicas had the clock's close; send it again",
                             w->clock - 1);
        else if (w->token == token)
            answer_closed(e, &w->h, w->code, w->clock);
        else
            e->wait[keep++] = *w;
    }
    e->nwait = keep;
}

/* Applies clock `t` of bsp table b: the held sums of the workers that finished t,
 * combined in rank order, applied once to the partitions held here at clock t;
 * then the held pushes are answered. */
static void close_clock(bsp *e, bsp_state *b, int64_t t)
{
    int64_t t0 = tu_now_ns();
    table *tb = b->t;
    bsp_open *o = &b->open[t % MAX_OPEN];
    int nranks = vclock_nranks(e->out.clocks);
    int grp = vclock_group(e->out.clocks, tb->ns); /* its group's workers, or all */
    if (o->t == t) {
        close_rows *cr = &b->rows;
        cr->n = 0;
        cr->err = 0;
        int repl = e->ch && chain_replicas(e->ch) > 1;
        int ncomb = 0;
        for (int r = 0; r < nranks; r++) /* every worker's, or the pushers' (mean_pushed) */
            ncomb +=
                vclock_finished_in(e->out.clocks, r, t, grp) && (!tb->mean_pushed || o->acc[r]);
        int sums = upd_ops_of(tb->upd.kind)->bsp_sums; /* the others average */
        float scale = (sums || ncomb == 0) ? 1.0f : 1.0f / (float)ncomb;
        int rc = 0;
        if (tb->dense) { /* the finished ranks' sums, in rank order */
            int nacc = 0;
            if (grow_array((void **)&e->accs, &e->capaccs, (size_t)nranks, sizeof *e->accs) < 0) {
                rc = -PSKV_ENOMEM;
            } else {
                for (int r = 0; r < nranks; r++)
                    if (o->acc[r] && vclock_finished_in(e->out.clocks, r, t, grp))
                        e->accs[nacc++] = o->acc[r];
                rc = apply_dense(e, b, e->accs, nacc, scale, t, repl ? cr : NULL);
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
                fold_ctx f = {b->scomb, 1.0f, NULL, tb->width, 0, NULL, NULL, NULL, 0, NULL, 0};
                for (int r = 0; r < nranks; r++)
                    if (o->acc[r] && vclock_finished_in(e->out.clocks, r, t, grp))
                        shard_foreach(o->acc[r], fold_row, &f);
                fold_ctx g = {tb->sh,         scale, b->row, tb->width,        0, e,
                              tb,             part_closed(e, tb), t, repl ? cr : NULL, 0};
                shard_foreach(b->scomb, fold_row, &g);
                rc = f.err || g.err ? -PSKV_ENOMEM : g.bad ? -PSKV_EBADVALUE : 0;
            }
        }
        if (rc == -PSKV_EBADVALUE)
            LOG_W("updater of table '%s' made rows NaN or infinite at clock %lld: those rows "
                  "left as they were", tb->name, (long long)t);
        else if (rc < 0)
            LOG_E("out of memory applying clock %lld of table '%s'", (long long)t, tb->name);
        /* the pushes folded in go down with the close: a new head that received it
         * acknowledges a re-sent copy instead of dropping it as late */
        size_t nfold = 0;
        for (size_t i = 0; i < o->nacks; i++)
            if (vclock_finished_in(e->out.clocks, o->acks[i].rank, t, grp)) {
                held tmp = o->acks[i];
                o->acks[i] = o->acks[nfold];
                o->acks[nfold++] = tmp;
            }
        /* dense rows go as their partitions' spans, without keys */
        int64_t token = raise_closed(e, b, t, t + 1, cr, o->acks, nfold);
        for (size_t i = 0; i < o->nacks; i++) {
            held *h = &o->acks[i];
            int code = rc < 0 ? -rc : i < nfold ? 0 : PSKV_ELATE;
            e->st.dropped_late += code == PSKV_ELATE;
            if (token > 0)
                wait_close(e, (uint64_t)token, h, code, t + 1);
            else
                answer_closed(e, h, code, t + 1);
        }
        recycle_open(e, b, o);
        e->st.closes++;
        e->st.close_ns += tu_now_ns() - t0;
    } else {
        raise_closed(e, b, t, t + 1, NULL, NULL, 0);
    }
    b->closed = t + 1;
}

/* Applies every clock of b that may close. Clocks nobody pushed to are passed in
 * one step, so a worker's clock far ahead costs nothing. */
static void advance_state(bsp *e, bsp_state *b)
{
    b->closed = heads_closed(e, b); /* the partitions held may have changed */
    int64_t upto = vclock_closable_in(e->out.clocks, b->t->backup, b->closed,
                                      vclock_group(e->out.clocks, b->t->ns));
    while (b->closed < upto) {
        int64_t next = upto; /* the next clock that holds pushes */
        for (int s = 0; s < MAX_OPEN; s++)
            if (b->open[s].t >= b->closed && b->open[s].t < next)
                next = b->open[s].t;
        if (next > b->closed) { /* nothing held in between */
            raise_closed(e, b, b->closed, next, NULL, NULL, 0);
            b->closed = next;
        } else {
            close_clock(e, b, b->closed); /* every held partition at b->closed moves up */
        }
    }
}

void bsp_advance_all(bsp *e)
{
    for (size_t i = 0; i < e->ntab; i++)
        advance_state(e, e->tab[i]);
}

int64_t bsp_placement_changed(bsp *e)
{
    /* the pushes held for open clocks are refused, to be sent again on the new
     * placement (their rows may have moved; the rest come back here); the caller
     * lowers every worker's clock to the floor returned, to be earned again by
     * clocks sent behind those re-sends */
    int64_t floor = INT64_MAX;
    for (size_t i = 0; i < e->ntab; i++) {
        bsp_state *b = e->tab[i];
        for (int s = 0; s < MAX_OPEN; s++) {
            bsp_open *o = &b->open[s];
            if (o->t < 0)
                continue;
            for (size_t k = 0; k < o->nacks; k++)
                held_answer_push(&e->out, &o->acks[k], PSKV_ESTALE,
                                 "the placement changed while its bsp clock was open; send it "
                                 "again",
                                 b->closed);
            recycle_open(e, b, o);
        }
        b->closed = heads_closed(e, b);
        if (b->closed < floor)
            floor = b->closed;
    }
    return floor;
}

/* Adds a push of table t (rows rs, values vals) to a rank's accumulator. The
 * rank's first push of the clock into a spare (which holds a closed clock's sums)
 * copies its values over them when it is a dense run over the whole accumulator,
 * the sum of one push being that push: one pass where a clear and an add were
 * two, and none on a clock's close; any other first push into a spare clears it
 * first. Returns 0 or -PSKV_ENOMEM. */
static int acc_push(shard *acc, const table *t, const rowset *rs, const float *vals, int first,
                    int spare)
{
    if (first && t->dense && !rs->keys && !rs->segs && rs->first == shard_dense_first(acc) &&
        rs->n == shard_dense_count(acc))
        return shard_assign(acc, NULL, rs->first, rs->n, vals);
    if (spare)
        shard_clear(acc);
    return shard_push_rows(acc, rs, vals);
}

static void refuse(bsp *e, wire_msg *msg, int code, const char *why, int64_t clock)
{
    e->st.refused++;
    held_refuse(&e->out, msg, code, why, clock);
}

void bsp_push(bsp *e, table *t, wire_msg *msg, const rowset *rs)
{
    int64_t t0 = tu_now_ns();
    Pskv__Meta *r = msg->meta;
    held h;
    int rank = vclock_rank(e->out.clocks, r->sender);
    bsp_state *b = state_of(e, t);
    int64_t clock = r->has_clock ? r->clock : 0;
    char why[200];
    if (b)
        b->closed = heads_closed(e, b); /* copies may have arrived since */
    if (b && r->has_epoch && e->ch && r->epoch < chain_place_epoch(e->ch)) {
        /* like the pushes held for open clocks at the change (bsp_placement_changed):
         * the worker waits for this answer before its clock goes out again */
        snprintf(why, sizeof why, "bsp push planned on view epoch %llu, before the placement "
                 "changed in epoch %llu; send it again", (unsigned long long)r->epoch,
                 (unsigned long long)chain_place_epoch(e->ch));
        refuse(e, msg, PSKV_ESTALE, why, b->closed);
        return;
    }
    if (rank < 0 || !b) {
        refuse(e, msg, b ? PSKV_EPROTO : PSKV_ENOMEM,
               b ? "a bsp push from a node that is not a worker of the view" : "out of memory", 0);
        return;
    }
    /* late when a row's partition has closed the clock without it (before the first
     * view: the table's closed clock); nothing of it is applied then. A re-sent copy
     * of a push folded into a close this server received as a replica is
     * acknowledged (all its partitions closed) or held for the rest (some open) */
    int folded = 0;
    int closed = e->ch && chain_nparts(e->ch)
                     ? chain_push_closed(e->ch, t, rs, clock, r->sender,
                                         r->has_origin_id ? r->origin_id : r->request_id,
                                         &folded)
                     : clock < b->closed;
    if (closed && !(folded && closed == 2)) {
        held_take(&h, msg, t, rank);
        if (folded) {
            LOG_D("push %llu of node %u for closed clock %lld: already folded into its close",
                  (unsigned long long)h.origin_id, h.sender, (long long)clock);
            held_answer_push(&e->out, &h, 0, NULL, read_closed(e, b));
            return;
        }
        e->st.dropped_late++;
        held_answer_push(&e->out, &h, PSKV_ELATE, "dropped: late (its clock has closed)",
                         b->closed);
        return;
    }
    if (clock >= b->closed + MAX_OPEN) {
        snprintf(why, sizeof why, "clock %lld is %d or more ahead of the last closed clock %lld",
                 (long long)clock, MAX_OPEN, (long long)b->closed);
        refuse(e, msg, PSKV_EREFUSED, why, b->closed);
        return;
    }
    bsp_open *o = &b->open[clock % MAX_OPEN];
    if (o->t != clock) {
        if (!o->acc)
            o->acc = calloc((size_t)vclock_nranks(e->out.clocks), sizeof *o->acc);
        if (!o->acc) {
            refuse(e, msg, PSKV_ENOMEM, "out of memory", b->closed);
            return;
        }
        o->t = clock;
        o->nacks = 0;
    }
    if (o->nacks == o->capacks) {
        size_t cap = o->capacks ? o->capacks * 2 : 16;
        held *g = realloc(o->acks, cap * sizeof *g);
        if (g) {
            o->acks = g;
            o->capacks = cap;
        }
    }
    int first = !o->acc[rank], spare = first && b->nspare;
    if (o->nacks < o->capacks && first)
        o->acc[rank] = spare ? b->spare[--b->nspare]
                       : t->dense ? shard_new(1, shard_dense_first(t->sh),
                                              shard_dense_count(t->sh), 0, UINT64_MAX, t->width,
                                              &SUM, &ZERO)
                                  : shard_new(0, 0, 0, 0, UINT64_MAX, t->width, &SUM, &ZERO);
    if (o->nacks == o->capacks || !o->acc[rank] ||
        acc_push(o->acc[rank], t, rs, msg->vals, first, spare) < 0) {
        refuse(e, msg, PSKV_ENOMEM, "out of memory holding the push", b->closed);
        return;
    }
    held_take(&o->acks[o->nacks++], msg, t, rank);
    e->st.pushes++;
    e->st.push_ns += tu_now_ns() - t0;
}

int64_t bsp_table_closed(bsp *e, table *t)
{
    bsp_state *b = state_of(e, t);
    if (!b)
        return 0;
    int64_t hi, lo = closed_range(e, b, &hi, 0);
    return lo == hi ? lo : -1; /* -1 just after a join, until the lagging partitions catch up */
}

void bsp_restore(bsp *e, table *t, int64_t closed)
{
    bsp_state *b = state_of(e, t);
    if (!b || closed <= b->closed)
        return;
    int64_t *pc = part_closed(e, t);
    for (uint32_t p = 0; pc && p < chain_nparts(e->ch); p++)
        pc[p] = closed;
    b->closed = closed;
}

/* bsp's row of the models' table (model.h). */
static int row_ready(const vclock *vc, bsp *b, table *t, int64_t clock)
{
    (void)vc;
    return bsp_pull_ready(b, t, clock);
}

static int64_t row_values_clock(const vclock *vc, bsp *b, table *t)
{
    (void)vc;
    return bsp_values_clock(b, t);
}

static int bsp_parse(const char *spec, int64_t *tau, char *why, size_t whylen)
{
    (void)tau, (void)why, (void)whylen;
    return !strcmp(spec, "bsp");
}

const cons_ops cons_bsp_ops = {
    .name = "bsp",
    .parse = bsp_parse,
    .pull_ready = row_ready,
    .values_clock = row_values_clock,
    .closes = 1,
};
