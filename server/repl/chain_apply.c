/* What a chain member does with what reaches it: a push at the head of its
 * partitions, a REPLICATE or a bsp close from its predecessor. Each is checked
 * against this server's place in the chains, applied where its (worker, id) is
 * not recorded yet (the dedupe record of each touched partition), recorded, and
 * handed to chain_fwd.c to go on down the chains. A re-sent push goes on whole,
 * applied here or not, so it reaches the tail. */
#define _GNU_SOURCE
#include "chain_apply.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chain_impl.h"
#include "grow.h"
#include "log.h"
#include "pskv_errors.h"
#include "consist/model.h"

/* Applies the rows of b not marked in skip (NULL: all), batching consecutive
 * rows with the same mark (dense: inside a run) into one call of the updater.
 * Returns 0, -PSKV_ENOMEM, or -PSKV_EBADVALUE when the updater made some rows
 * non-finite (restored; the rest applied, as on every replica). */
static int apply_rows(table *t, const chain_batch *b, const uint8_t *skip, int assign)
{
    static const uint64_t all[2] = {0, 0};
    uint32_t wd = t->width;
    int bad = 0;
    /* a sparse batch is one run of keyed rows */
    const uint64_t *runs = t->dense ? b->runs : all;
    uint64_t at = 0;
    for (size_t r = 0; r < (t->dense ? b->nruns : 1); r++) {
        uint64_t len = t->dense ? runs[2 * r + 1] : b->n;
        for (uint64_t i = 0, j; i < len; i = j) {
            for (j = i + 1; skip && j < len && skip[at + j] == skip[at + i];)
                j++;
            if (!skip)
                j = len;
            if (skip && skip[at + i])
                continue;
            const uint64_t *keys = t->dense ? NULL : b->keys + at + i;
            uint64_t first = t->dense ? runs[2 * r] + i : 0;
            const float *v = b->vals + (at + i) * wd;
            int rc = assign ? shard_assign(t->sh, keys, first, j - i, v)
                            : shard_push(t->sh, keys, first, j - i, v);
            if (rc == -PSKV_EBADVALUE)
                bad = 1;
            else if (rc < 0)
                return rc;
        }
        at += len;
    }
    return bad ? -PSKV_EBADVALUE : 0;
}

/* Marks in c->skip the rows of b whose partition already applied (origin, id)
 * (check 1; check 0: a first send, nothing is marked), and records the id for
 * the others. */
static int dedupe_rows(chain *c, table *t, const chain_batch *b, uint32_t origin, uint64_t id,
                       int check)
{
    if (check && grow_array((void **)&c->skip, &c->skip_cap, b->n ? b->n : 1, 1) < 0)
        return -PSKV_ENOMEM;
    if (!c->dd && !(c->dd = dedupe_new(c->nparts)))
        return -PSKV_ENOMEM;
    /* a partition's rows of one message are applied together: its record is
     * looked up (and the id recorded) once per message, piece by piece (a dense
     * table's runs inside a partition): a width-1 table sends a row per value,
     * and a lookup per row cost more than the update */
    uint32_t ntouched = 0;
    int rc = 0;
    chain_piece w = {0};
    while (chain_piece_next(c, t, b, &w)) {
        uint32_t p = w.p;
        if (!c->pmark[p]) {
            int seen = check && dedupe_seen(c->dd, p, origin, id);
            if (!seen && dedupe_record(c->dd, p, origin, id) < 0)
                rc = -PSKV_ENOMEM;
            c->pmark[p] = seen ? 2 : 1;
            c->touched[ntouched++] = p;
        }
        if (check)
            memset(c->skip + w.i, c->pmark[p] == 2, w.end - w.i);
    }
    for (uint32_t k = 0; k < ntouched; k++)
        c->pmark[c->touched[k]] = 0;
    return rc;
}

/* The rows of rs (values vals) as a batch: a sparse table's keys; a dense
 * table's runs (rs's, or made in c->runs from its run or keys). 0 or -PSKV_ENOMEM. */
static int batch_of(chain *c, const table *t, const rowset *rs, const float *vals,
                    chain_batch *b)
{
    *b = (chain_batch){t->dense ? NULL : rs->keys, rs->segs, rs->nsegs, vals, rs->n};
    if (!t->dense || rs->segs)
        return 0;
    if (grow_array((void **)&c->runs, &c->runs_cap, rs->keys ? 2 * rs->n + 2 : 2,
                   sizeof *c->runs) < 0)
        return -PSKV_ENOMEM;
    size_t nr = 0;
    for (uint64_t i = 0; rs->keys && i < rs->n; i++) { /* keys that follow each other: a run */
        if (nr && c->runs[2 * nr - 2] + c->runs[2 * nr - 1] == rs->keys[i]) {
            c->runs[2 * nr - 1]++;
        } else {
            c->runs[2 * nr] = rs->keys[i];
            c->runs[2 * nr + 1] = 1;
            nr++;
        }
    }
    if (!rs->keys && rs->n) {
        c->runs[0] = rs->first;
        c->runs[1] = rs->n;
        nr = 1;
    }
    b->runs = c->runs;
    b->nruns = nr;
    return 0;
}

/* Admission at the head (table option admit_after): only the rows whose key has
 * a row here after the push go down the chain, so every replica holds the rows
 * its head admitted and no others. A row of a re-sent push applied before has
 * its row here if it was admitted then. Compacts into c->akeys / c->avals. */
static int admitted_rows(chain *c, table *t, chain_batch *b)
{
    uint32_t wd = t->width;
    if (grow_array((void **)&c->akeys, &c->akeys_cap, b->n ? b->n : 1, sizeof *c->akeys) < 0 ||
        grow_array((void **)&c->avals, &c->avals_cap, b->n ? b->n * wd : 1, sizeof *c->avals) < 0)
        return -PSKV_ENOMEM;
    uint64_t m = 0;
    for (uint64_t i = 0; i < b->n; i++) {
        if (!shard_has_row(t->sh, b->keys[i]))
            continue;
        c->akeys[m] = b->keys[i];
        memcpy(c->avals + m * wd, b->vals + i * wd, wd * sizeof(float));
        m++;
    }
    b->keys = c->akeys;
    b->vals = c->avals;
    b->n = m;
    return 0;
}

/* 1 when a forward's table_lr is one the table's updater takes (else logged: the
 * rows go with this server's lr, as before TABLE_LR existed). */
static int chain_lr_ok(const table *t, const Pskv__Meta *r)
{
    upd_opts u = t->upd;
    u.lr = r->table_lr;
    char why[200];
    if (isfinite(r->table_lr) && r->table_lr > 0 && upd_check(&u, why, sizeof why) == 0)
        return 1;
    LOG_W("a forward of table '%s' from node %u carries lr %g, which its updater does not "
          "take: applied with this server's lr %g", t->name, r->sender, (double)r->table_lr,
          (double)shard_lr(t->sh));
    return 0;
}

/* The common path of a push from a worker and a forward from a predecessor. */
static void apply_and_forward(chain *c, table *t, wire_msg *msg, chain_batch *b,
                              int upstream_worker, int check)
{
    Pskv__Meta *r = msg->meta;
    uint32_t origin = upstream_worker ? r->sender : r->origin;
    uint64_t origin_id = upstream_worker ? (r->has_origin_id ? r->origin_id : r->request_id)
                                         : r->origin_id;
    int assign = r->has_assign && r->assign;
    if (r->has_floor && (c->dd || (c->dd = dedupe_new(c->nparts))))
        dedupe_set_floor(c->dd, origin, r->floor);
    chain_pend tmp;
    memset(&tmp, 0, sizeof tmp);
    int rc = dedupe_rows(c, t, b, origin, origin_id, check);
    int64_t clock = r->has_clock ? r->clock : 0;
    /* admission is decided at the head; the successors apply what it passes on */
    shard_tag(t->sh, clock, upstream_worker != CHAIN_UP_WORKER);
    /* a forward is applied with the lr its head applied it with (TABLE_LR may reach
     * the servers of a chain at other points of its stream of forwards) */
    float lr = shard_lr(t->sh), own = lr;
    if (upstream_worker != CHAIN_UP_WORKER && r->has_table_lr && !assign &&
        chain_lr_ok(t, r))
        lr = r->table_lr;
    shard_set_lr(t->sh, lr);
    if (rc == 0)
        rc = apply_rows(t, b, check ? c->skip : NULL, assign);
    shard_set_lr(t->sh, own);
    int bad = rc == -PSKV_EBADVALUE; /* the same rows are restored down the chain */
    if (bad) {
        rc = 0;
        LOG_W("updater of table '%s' made rows of a push from node %u NaN or infinite: those "
              "rows left as they were", t->name, origin);
    }
    chain_pend *pd = rc == 0 ? chain_pend_new(c) : NULL;
    if (!pd) {
        tmp.upstream_worker = upstream_worker;
        tmp.t = t;
        chain_pend_reply_to(&tmp, msg);
        /* back-pressure: the worker tries again shortly (PSKV_ENOTREADY) */
        chain_answer_upstream(c, &tmp, rc < 0 ? -rc : PSKV_ENOTREADY,
                              rc < 0 ? "out of memory applying the push"
                                     : "too many pushes waiting for their replicas; retry");
        return;
    }
    pd->upstream_worker = upstream_worker;
    pd->t = t;
    pd->bad = bad && upstream_worker == CHAIN_UP_WORKER;
    pd->assign = assign;
    pd->origin = origin;
    pd->origin_id = origin_id;
    pd->floor = r->has_floor ? r->floor : 0;
    pd->clock = clock;
    pd->wire = r->wire;
    pd->scale = r->has_loss_scale ? r->loss_scale : 1.0f;
    pd->lr = lr;
    chain_pend_reply_to(pd, msg);
    if (upstream_worker == CHAIN_UP_WORKER && t->admit_after > 1 && admitted_rows(c, t, b) < 0)
        rc = -PSKV_ENOMEM; /* admission: sparse tables only */
    /* every row goes on, applied here or not: a re-sent push reaches the tail */
    if (rc < 0 || chain_fwd_rows(c, pd, b) < 0) {
        chain_answer_upstream(c, pd, PSKV_ENOMEM, "out of memory forwarding the push");
        chain_pend_release(c, pd);
        return;
    }
    if (pd->outstanding == 0)
        chain_pend_done(c, pd);
}

void chain_push(chain *c, table *t, wire_msg *msg, const rowset *rs)
{
    chain_batch b;
    if (batch_of(c, t, rs, msg->vals, &b) < 0) {
        chain_pend tmp = {0};
        tmp.upstream_worker = CHAIN_UP_WORKER;
        tmp.t = t;
        chain_pend_reply_to(&tmp, msg);
        chain_answer_upstream(c, &tmp, PSKV_ENOMEM, "out of memory");
        return;
    }
    apply_and_forward(c, t, msg, &b, 1, msg->meta->has_resend && msg->meta->resend);
}

int chain_record_folded(chain *c, const uint32_t *parts, size_t np, const uint32_t *fnodes,
                        const uint64_t *fids, const uint64_t *ffloors, size_t nfolded)
{
    if (!c->dd && !(c->dd = dedupe_new(c->nparts)))
        return -PSKV_ENOMEM;
    int rc = 0;
    for (size_t j = 0; j < nfolded; j++)
        dedupe_set_floor(c->dd, fnodes[j], ffloors[j]);
    for (size_t k = 0; k < np; k++)
        for (size_t j = 0; j < nfolded; j++)
            if (dedupe_record(c->dd, parts[k], fnodes[j], fids[j]) < 0)
                rc = -PSKV_ENOMEM;
    return rc;
}

int64_t chain_close(chain *c, table *t, int64_t clock, int64_t upto, const uint64_t *keys,
                    const float *vals, uint64_t n, const uint32_t *parts, size_t np,
                    const uint32_t *fnodes, const uint64_t *fids, const uint64_t *ffloors,
                    size_t nfolded)
{
    int any = 0;
    for (size_t k = 0; k < np && !any; k++)
        any = chain_next_of(c, parts[k]) != 0;
    if (!any)
        return 0;
    chain_pend *pd = chain_pend_new(c);
    if (!pd)
        return -PSKV_ENOTREADY;
    pd->upstream_worker = CHAIN_UP_CLOSE;
    pd->lr = shard_lr(t->sh); /* the lr the close was applied with (bsp.c) */
    int64_t token = (int64_t)pd->seq;
    chain_batch b = {keys, NULL, 0, vals, n};
    if (t->dense && n) { /* the whole spans of the partitions, in list order */
        if (grow_array((void **)&c->runs, &c->runs_cap, 2 * np, sizeof *c->runs) < 0) {
            chain_pend_release(c, pd);
            return -PSKV_ENOMEM;
        }
        b.runs = c->runs;
        for (size_t k = 0; k < np; k++) {
            chain_span(c, t, parts[k], &c->runs[2 * b.nruns], &c->runs[2 * b.nruns + 1]);
            b.nruns += c->runs[2 * b.nruns + 1] > 0; /* empty spans left out */
        }
    }
    if (chain_pend_close(pd, t, clock, upto, fnodes, fids, ffloors, nfolded) < 0 ||
        chain_fwd_close(c, pd, &b, parts, np) < 0) {
        chain_pend_release(c, pd);
        return -PSKV_ENOMEM;
    }
    if (pd->outstanding == 0) { /* nothing could be queued: reported at once */
        chain_pend_release(c, pd);
        return 0;
    }
    return token;
}

int chain_record(chain *c, table *t, const rowset *rs, uint32_t origin, uint64_t id,
                 uint64_t floor)
{
    if (!c->dd && !(c->dd = dedupe_new(c->nparts)))
        return -PSKV_ENOMEM;
    if (floor)
        dedupe_set_floor(c->dd, origin, floor);
    chain_batch b;
    if (batch_of(c, t, rs, NULL, &b) < 0)
        return -PSKV_ENOMEM;
    return dedupe_rows(c, t, &b, origin, id, 0);
}

/* The rows of a REPLICATE (push or close) from the predecessor as a batch: keys
 * (sparse) or runs (dense, each inside the table), as many rows as values.
 * Returns 0 or -1 (logged). */
static int replicate_batch(const table *t, const wire_msg *msg, chain_batch *b)
{
    const Pskv__Meta *r = msg->meta;
    *b = (chain_batch){msg->keys, r->runs, r->n_runs / 2, msg->vals, msg->nkeys};
    uint64_t rows = 0;
    int ok = msg->nkeys == 0 || r->width == t->width;
    if (t->dense) {
        ok = ok && !msg->keys && r->n_runs % 2 == 0 && (msg->nkeys == 0 || r->has_first_key);
        for (size_t k = 0; ok && k < b->nruns; k++) {
            uint64_t first = r->runs[2 * k], n = r->runs[2 * k + 1];
            ok = n > 0 && first < t->size && n <= t->size - first;
            rows += n;
        }
    } else {
        ok = ok && (msg->keys || !msg->nkeys) && !r->n_runs;
        rows = msg->nkeys;
    }
    if (!ok || rows != msg->nkeys) {
        LOG_W("dropped a REPLICATE of table '%s' from node %u: its %llu rows do not match its "
              "width, keys or runs", t->name, r->sender, (unsigned long long)msg->nkeys);
        return -1;
    }
    if (msg->nvals && !upd_all_finite(msg->vals, msg->nvals)) {
        LOG_W("dropped a REPLICATE from node %u: non-finite values", r->sender);
        return -1;
    }
    return 0;
}

/* Checks a bsp close from the predecessor (its rows b) against what this replica
 * holds and marks its partitions (pmark 1: takes the rows, 2: already past them;
 * listed in touched, *nt of them) and in c->skip the rows of the latter. Returns
 * 0 or -1 (logged). */
static int close_check(chain *c, table *t, const wire_msg *msg, const chain_batch *b,
                       const int64_t *pc, uint32_t *nt)
{
    const Pskv__Meta *r = msg->meta;
    for (size_t k = 0; k < r->n_parts; k++) {
        uint32_t p = r->parts[k];
        if (p >= c->nparts || c->index[p] <= 0 || !c->ready[p] || c->pmark[p]) {
            LOG_W("dropped a bsp close of table '%s' from node %u: partition %u is not "
                  "replicated here in view epoch %llu (or listed twice)", t->name, r->sender, p,
                  (unsigned long long)c->mb->epoch);
            return -1;
        }
        if (pc[p] < r->clock) {
            /* a close missed: applying this one would skip it. Left unanswered,
             * the head waits (and sends again after the next view) */
            LOG_E("bsp close of clocks %lld..%lld of table '%s', partition %u, from node %u: "
                  "this replica has closed only clocks below %lld; not applied",
                  (long long)r->clock, (long long)r->upto - 1, t->name, p, r->sender,
                  (long long)pc[p]);
            return -1;
        }
        c->pmark[p] = pc[p] < r->upto ? 1 : 2;
        c->touched[(*nt)++] = p;
    }
    if (grow_array((void **)&c->skip, &c->skip_cap, b->n ? b->n : 1, 1) < 0)
        return -1;
    chain_piece w = {0};
    while (chain_piece_next(c, t, b, &w)) {
        if (!c->pmark[w.p]) {
            LOG_W("dropped a bsp close from node %u: key %llu is outside its partitions",
                  r->sender, (unsigned long long)w.first);
            return -1;
        }
        memset(c->skip + w.i, c->pmark[w.p] == 2, w.end - w.i);
    }
    return 0;
}

/* Applies a checked close's rows b (the partitions marked 1: rows not in c->skip)
 * with the updater, as the head applied them. Returns 0 or -1 (logged). */
static int close_apply(chain *c, table *t, const chain_batch *b)
{
    int rc = b->n ? apply_rows(t, b, c->skip, 0) : 0;
    if (rc == -PSKV_EBADVALUE) {
        LOG_W("updater of table '%s' made rows of a bsp close NaN or infinite: those rows "
              "left as they were", t->name);
        rc = 0;
    }
    if (rc < 0)
        LOG_E("out of memory applying a bsp close of table '%s'", t->name);
    return rc < 0 ? -1 : 0;
}

/* A bsp close from the predecessor: each listed partition at a clock in
 * [clock, upto) takes the rows and moves to upto, one already there skips them;
 * the folded pushes' ids are recorded; then on down the chain like a push. */
static void close_replicate(chain *c, table *t, wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    int64_t *pc = table_closed(t, c->nparts);
    chain_batch b;
    if (!cons_of(t)->closes || !r->has_clock || !r->has_upto || r->upto <= r->clock ||
        !r->n_parts || r->n_folded_ids != r->n_folded_nodes ||
        r->n_folded_floors != r->n_folded_nodes || !pc) {
        LOG_W("dropped a bsp close from node %u: not a bsp table, or malformed clocks, "
              "partitions or ids", r->sender);
        return;
    }
    if (replicate_batch(t, msg, &b) < 0)
        return;
    uint32_t nt = 0;
    float own = shard_lr(t->sh), lr = r->has_table_lr && chain_lr_ok(t, r) ? r->table_lr : own;
    shard_set_lr(t->sh, lr); /* the head's lr for this close */
    int ok = close_check(c, t, msg, &b, pc, &nt) == 0 &&
             (c->dd || (c->dd = dedupe_new(c->nparts))) && close_apply(c, t, &b) == 0;
    shard_set_lr(t->sh, own);
    if (ok && chain_record_folded(c, c->touched, nt, r->folded_nodes, r->folded_ids,
                                  r->folded_floors, r->n_folded_nodes) < 0)
        LOG_W("out of memory recording a folded push id");
    for (uint32_t k = 0; k < nt; k++) {
        uint32_t p = c->touched[k];
        if (ok && c->pmark[p] == 1)
            pc[p] = r->upto;
        c->pmark[p] = 0;
    }
    if (!ok)
        return;
    chain_pend *pd = chain_pend_new(c);
    if (!pd || chain_pend_close(pd, t, r->clock, r->upto, r->folded_nodes, r->folded_ids,
                                r->folded_floors, r->n_folded_nodes) < 0) {
        /* applied here; the head sends it again after the next view */
        LOG_E("cannot forward a bsp close of table '%s': too many forwards waiting or out "
              "of memory", t->name);
        if (pd)
            chain_pend_release(c, pd);
        return;
    }
    pd->upstream_worker = CHAIN_UP_SERVER;
    pd->lr = lr;
    chain_pend_reply_to(pd, msg);
    if (chain_fwd_close(c, pd, &b, r->parts, r->n_parts) < 0)
        LOG_E("out of memory forwarding a bsp close of table '%s'", t->name);
    if (pd->outstanding == 0)
        chain_pend_done(c, pd);
}

void chain_replicate(chain *c, wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    table *t = r->has_table_id ? tables_find(c->tables, r->table_id) : NULL;
    if (t && r->has_close && r->close) {
        close_replicate(c, t, msg);
        return;
    }
    chain_batch b;
    if (!t || !r->has_origin || !r->has_origin_id) {
        LOG_W("dropped a REPLICATE from node %u: unknown table or no ids", r->sender);
        return;
    }
    if (replicate_batch(t, msg, &b) < 0)
        return;
    chain_piece w = {0};
    while (chain_piece_next(c, t, &b, &w)) { /* piece by piece, as dedupe_rows */
        if (c->index[w.p] <= 0) {
            LOG_W("dropped a REPLICATE from node %u: key %llu of table '%s' is not replicated "
                  "here in view epoch %llu", r->sender, (unsigned long long)w.first, t->name,
                  (unsigned long long)c->mb->epoch);
            return;
        }
    }
    apply_and_forward(c, t, msg, &b, 0, 1);
}
