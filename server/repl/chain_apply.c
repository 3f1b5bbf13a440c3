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

/* Applies rows not marked in skip, batching consecutive dense keys into runs.
 * Returns 0, -PSKV_ENOMEM, or -PSKV_EBADVALUE when the updater made some rows
 * non-finite (restored; the rest applied, as on every replica). */
static int apply_rows(table *t, const uint64_t *keys, const float *vals, uint64_t n,
                      const uint8_t *skip, int assign)
{
    uint32_t wd = t->width;
    int bad = 0;
    for (uint64_t i = 0; i < n;) {
        uint64_t j = i + 1;
        while (j < n && skip[j] == skip[i] && (!t->dense || keys[j] == keys[j - 1] + 1))
            j++;
        if (!skip[i]) {
            int rc;
            if (t->dense)
                rc = assign ? shard_assign(t->sh, NULL, keys[i], j - i, vals + i * wd)
                            : shard_push(t->sh, NULL, keys[i], j - i, vals + i * wd);
            else
                rc = assign ? shard_assign(t->sh, keys + i, 0, j - i, vals + i * wd)
                            : shard_push(t->sh, keys + i, 0, j - i, vals + i * wd);
            if (rc == -PSKV_EBADVALUE)
                bad = 1;
            else if (rc < 0)
                return rc;
        }
        i = j;
    }
    return bad ? -PSKV_EBADVALUE : 0;
}

/* Marks in c->skip the rows whose partition already applied (origin, id), and
 * records the id for the others. check 0: only record (a first send). */
static int dedupe_rows(chain *c, table *t, const uint64_t *keys, uint64_t n, uint32_t origin,
                       uint64_t id, int check)
{
    if (grow_array((void **)&c->skip, &c->skip_cap, n ? n : 1, 1) < 0)
        return -PSKV_ENOMEM;
    if (!c->dd && !(c->dd = dedupe_new(c->nparts)))
        return -PSKV_ENOMEM;
    /* a partition's rows of one message are applied together: its record is
     * looked up (and the id recorded) once per message */
    uint32_t ntouched = 0, p;
    int rc = 0;
    chain_cursor pc = {0, 0, 0};
    /* run by run (a dense table's keys follow each other inside a partition): a
     * width-1 table sends a row per value, and a lookup per row cost more than
     * the update */
    for (uint64_t i = 0, end; i < n; i = end) {
        end = chain_run_end(c, t, keys, i, n, &pc, &p);
        if (!c->pmark[p]) {
            int seen = check && dedupe_seen(c->dd, p, origin, id);
            if (!seen && dedupe_record(c->dd, p, origin, id) < 0)
                rc = -PSKV_ENOMEM;
            c->pmark[p] = seen ? 2 : 1;
            c->touched[ntouched++] = p;
        }
        memset(c->skip + i, c->pmark[p] == 2, end - i);
    }
    for (uint32_t k = 0; k < ntouched; k++)
        c->pmark[c->touched[k]] = 0;
    return rc;
}

/* Admission at the head (table option admit_after): only the rows whose key has
 * a row here after the push go down the chain, so every replica holds the rows
 * its head admitted and no others. A row of a re-sent push applied before has
 * its row here if it was admitted then. Compacts into c->akeys / c->avals. */
static int admitted_rows(chain *c, table *t, const uint64_t **keys, const float **vals,
                         uint64_t *n)
{
    uint32_t wd = t->width;
    if (grow_array((void **)&c->akeys, &c->akeys_cap, *n ? *n : 1, sizeof *c->akeys) < 0 ||
        grow_array((void **)&c->avals, &c->avals_cap, *n ? *n * wd : 1, sizeof *c->avals) < 0)
        return -PSKV_ENOMEM;
    uint64_t m = 0;
    for (uint64_t i = 0; i < *n; i++) {
        if (!shard_has_row(t->sh, (*keys)[i]))
            continue;
        c->akeys[m] = (*keys)[i];
        memcpy(c->avals + m * wd, *vals + i * wd, wd * sizeof(float));
        m++;
    }
    *keys = c->akeys;
    *vals = c->avals;
    *n = m;
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
static void apply_and_forward(chain *c, table *t, wire_msg *msg, const uint64_t *keys,
                              uint64_t n, int upstream_worker, int check)
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
    int rc = dedupe_rows(c, t, keys, n, origin, origin_id, check);
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
        rc = apply_rows(t, keys, msg->vals, n, c->skip, assign);
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
    const float *vals = msg->vals;
    if (upstream_worker == CHAIN_UP_WORKER && t->admit_after > 1 &&
        admitted_rows(c, t, &keys, &vals, &n) < 0)
        rc = -PSKV_ENOMEM;
    /* every row goes on, applied here or not: a re-sent push reaches the tail */
    if (rc < 0 || chain_fwd_rows(c, pd, keys, vals, n) < 0) {
        chain_answer_upstream(c, pd, PSKV_ENOMEM, "out of memory forwarding the push");
        chain_pend_release(c, pd);
        return;
    }
    if (pd->outstanding == 0)
        chain_pend_done(c, pd);
}

void chain_push(chain *c, table *t, wire_msg *msg, const rowset *rs)
{
    const uint64_t *keys = rs->keys;
    if (!keys) { /* dense runs travel down the chain as explicit indices */
        if (grow_array((void **)&c->keys, &c->keys_cap, rs->n ? rs->n : 1, sizeof *c->keys) < 0) {
            chain_pend tmp = {0};
            tmp.upstream_worker = CHAIN_UP_WORKER;
            tmp.t = t;
            chain_pend_reply_to(&tmp, msg);
            chain_answer_upstream(c, &tmp, PSKV_ENOMEM, "out of memory");
            return;
        }
        uint64_t at = 0;
        if (!rs->segs) {
            for (uint64_t i = 0; i < rs->n; i++)
                c->keys[at++] = rs->first + i;
        } else {
            for (size_t s = 0; s < rs->nsegs; s++)
                for (uint64_t i = 0; i < rs->segs[2 * s + 1]; i++)
                    c->keys[at++] = rs->segs[2 * s] + i;
        }
        keys = c->keys;
    }
    apply_and_forward(c, t, msg, keys, rs->n, 1, msg->meta->has_resend && msg->meta->resend);
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
    if (chain_pend_close(pd, t, clock, upto, fnodes, fids, ffloors, nfolded) < 0 ||
        chain_fwd_close(c, pd, keys, vals, n, parts, np) < 0) {
        chain_pend_release(c, pd);
        return -PSKV_ENOMEM;
    }
    if (pd->outstanding == 0) { /* nothing could be queued: reported at once */
        chain_pend_release(c, pd);
        return 0;
    }
    return token;
}

/* Partitions of the dense run [first, first + n): calls dedupe_record on each that
 * holds some of its rows (a re-send is checked row by row: dedupe_rows). */
static int record_run(chain *c, table *t, uint64_t first, uint64_t n, uint32_t origin,
                      uint64_t id)
{
    ring_run it;
    uint32_t p;
    uint64_t lo, hi;
    ring_run_init(&it, first, first + n, t->size, c->nparts);
    while (ring_run_next(&it, &p, &lo, &hi))
        if (dedupe_record(c->dd, p, origin, id) < 0)
            return -PSKV_ENOMEM;
    return 0;
}

int chain_record(chain *c, table *t, const rowset *rs, uint32_t origin, uint64_t id,
                 uint64_t floor)
{
    if (!c->dd && !(c->dd = dedupe_new(c->nparts)))
        return -PSKV_ENOMEM;
    if (floor)
        dedupe_set_floor(c->dd, origin, floor);
    if (rs->keys)
        return dedupe_rows(c, t, rs->keys, rs->n, origin, id, 0);
    if (!rs->segs)
        return rs->n ? record_run(c, t, rs->first, rs->n, origin, id) : 0;
    for (size_t i = 0; i < rs->nsegs; i++)
        if (record_run(c, t, rs->segs[2 * i], rs->segs[2 * i + 1], origin, id) < 0)
            return -PSKV_ENOMEM;
    return 0;
}

/* Checks a bsp close from the predecessor against what this replica holds and
 * marks its partitions (pmark 1: takes the rows, 2: already past them; listed in
 * touched, *nt of them) and, sparse, which rows to skip. Returns 0 or -1 (logged). */
static int close_check(chain *c, table *t, const wire_msg *msg, const int64_t *pc, uint32_t *nt)
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
    if (t->dense) {
        /* the rows are the whole spans of the listed partitions, in list order (empty
         * spans left out), without a keys frame */
        uint64_t rows = 0, pf, pn;
        for (size_t k = 0; msg->nkeys && k < r->n_parts; k++, rows += pn)
            chain_span(c, t, r->parts[k], &pf, &pn);
        if (msg->nkeys && (msg->keys || !r->has_first_key || rows != msg->nkeys)) {
            LOG_W("dropped a bsp close from node %u: %llu dense rows (with keys: %d) for "
                  "partitions of %llu", r->sender, (unsigned long long)msg->nkeys,
                  msg->keys != NULL, (unsigned long long)rows);
            return -1;
        }
    } else {
        if (grow_array((void **)&c->skip, &c->skip_cap, msg->nkeys ? msg->nkeys : 1, 1) < 0)
            return -1;
        chain_cursor cur = {0, 0, 0};
        uint32_t p;
        for (uint64_t i = 0, end; i < msg->nkeys; i = end) {
            end = chain_run_end(c, t, msg->keys, i, msg->nkeys, &cur, &p); /* one sparse row */
            if (!c->pmark[p]) {
                LOG_W("dropped a bsp close from node %u: key %llu is outside its partitions",
                      r->sender, (unsigned long long)msg->keys[i]);
                return -1;
            }
            memset(c->skip + i, c->pmark[p] == 2, end - i);
        }
    }
    if (msg->nvals && !upd_all_finite(msg->vals, msg->nvals)) {
        LOG_W("dropped a bsp close from node %u: non-finite values", r->sender);
        return -1;
    }
    return 0;
}

/* Applies a checked close's rows to the partitions marked 1, span by span (dense)
 * as the head applied them. Returns 0 or -1 (logged). */
static int close_apply(chain *c, table *t, const wire_msg *msg)
{
    const Pskv__Meta *r = msg->meta;
    int rc = 0;
    if (t->dense) {
        uint64_t off = 0, pf, pn;
        for (size_t k = 0; msg->nkeys && k < r->n_parts && rc != -PSKV_ENOMEM; k++, off += pn) {
            chain_span(c, t, r->parts[k], &pf, &pn);
            int prc = 0;
            if (pn && c->pmark[r->parts[k]] == 1)
                prc = shard_push(t->sh, NULL, pf, pn, msg->vals + off * t->width);
            if (prc < 0)
                rc = prc;
        }
    } else if (msg->nkeys) {
        rc = apply_rows(t, msg->keys, msg->vals, msg->nkeys, c->skip, 0);
    }
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
    if (!cons_of(t)->closes || !r->has_clock || !r->has_upto || r->upto <= r->clock ||
        !r->n_parts || r->n_folded_ids != r->n_folded_nodes ||
        (msg->nkeys && (r->width != t->width || (!t->dense && !msg->keys))) ||
        r->n_folded_floors != r->n_folded_nodes || !pc) {
        LOG_W("dropped a bsp close from node %u: not a bsp table, or malformed clocks, "
              "partitions, ids, width or keys", r->sender);
        return;
    }
    uint32_t nt = 0;
    float own = shard_lr(t->sh), lr = r->has_table_lr && chain_lr_ok(t, r) ? r->table_lr : own;
    shard_set_lr(t->sh, lr); /* the head's lr for this close */
    int ok = close_check(c, t, msg, pc, &nt) == 0 &&
             (c->dd || (c->dd = dedupe_new(c->nparts))) && close_apply(c, t, msg) == 0;
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
    if (chain_fwd_close(c, pd, msg->keys, msg->vals, msg->nkeys, r->parts, r->n_parts) < 0)
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
    if (!t || r->width != t->width || !msg->keys || !r->has_origin || !r->has_origin_id) {
        LOG_W("dropped a REPLICATE from node %u: unknown table, wrong width or no ids",
              r->sender);
        return;
    }
    chain_cursor pc = {0, 0, 0};
    uint32_t p = 0;
    for (uint64_t i = 0, end; i < msg->nkeys; i = end) { /* run by run, as dedupe_rows */
        uint64_t k = msg->keys[i];
        int outside = t->dense && k >= t->size;
        end = outside ? i + 1 : chain_run_end(c, t, msg->keys, i, msg->nkeys, &pc, &p);
        if (outside || c->index[p] <= 0) {
            LOG_W("dropped a REPLICATE from node %u: key %llu of table '%s' is not replicated "
                  "here in view epoch %llu", r->sender, (unsigned long long)k, t->name,
                  (unsigned long long)c->mb->epoch);
            return;
        }
    }
    if (!upd_all_finite(msg->vals, msg->nvals)) {
        LOG_W("dropped a REPLICATE from node %u: non-finite values", r->sender);
        return;
    }
    apply_and_forward(c, t, msg, msg->keys, msg->nkeys, 0, 1);
}
