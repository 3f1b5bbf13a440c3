/* wsend: parts onto the wire, and re-planned and re-sent (contract in wsend.h).
 * A part's request id is (timestamp << 16 | part index); a re-planned part is a new
 * part of the same request carrying its first send's id (`origin_id`), so a server
 * that applied it already drops it; a refused part whose rows keep one owner goes
 * again in place, under its own id. */
#define _GNU_SOURCE
#include "wsend.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "log.h"
#include "member.h"
#include "ring.h"
#include "timeutil.h"
#include "vbuf.h"
#include "wfilter.h"
#include "wire.h"
#include "wplan.h"
#include "wreq.h"
#include "wshm.h"

int wsend_part(pskv_worker *w, req *r, int pi, Pskv__Meta *m, zmq_msg_t *keys,
               zmq_msg_t *vals)
{
    part *p = &r->parts[pi];
    m->has_request_id = 1;
    m->request_id = ((uint64_t)r->ts << 16) | (uint64_t)pi;
    if (wire_send(w->srv[p->server].sock, NULL, m, keys, vals) < 0)
        return wst_error(w, PSKV_ENET, "cannot send to server %s:%d: %s", w->srv[p->server].host,
                         w->srv[p->server].port, zmq_strerror(errno));
    return 0;
}

/* Tells the live servers whose `catchup` flag equals `catchup` (0: the usual
 * ones; 1: those owed its clock since a placement change) that this worker
 * finished clock `clock`, on the data sockets: behind the pushes already sent to
 * the same server; but those the clock rode to on a push (`except_rode`, their
 * clock_rode flag). clock < 0 sends nothing. Servers keep the largest they hear. */
int wsend_clock(pskv_worker *w, int64_t clock, int catchup, int except_rode)
{
    w->clock_sent_ms = tu_now_ms();
    if (clock < 0)
        return 0;
    Pskv__Meta m;
    member_meta(&w->mb, &m, PSKV__MSG_TYPE__CLOCK);
    m.has_clock = m.has_refused = 1;
    m.clock = clock;
    /* test hook (wtest.h): the server with the smallest node id first, the others
     * after a pause */
    int first = -1;
    for (int i = 0; !catchup && wtest_clock_gap(&w->test, clock) && i < w->nservers; i++)
        if (w->srv[i].alive && (first < 0 || w->srv[i].id < w->srv[first].id))
            first = i;
    for (int pass = first < 0; pass < 2; pass++) {
        if (pass == 1 && first >= 0) {
            LOG_I("test hook: CLOCK %lld went to server node %u only; to the others in %d ms",
                  (long long)clock, w->srv[first].id, w->test.gap_ms);
            tu_sleep_ms(w->test.gap_ms);
        }
        for (int i = 0; i < w->nservers; i++) {
            if ((pass == 0) != (i == first))
                continue;
            m.refused = w->srv[i].refused; /* a server ignores the clock if it refused more */
            if (!w->srv[i].alive || w->srv[i].catchup != catchup ||
                (except_rode && w->srv[i].clock_rode))
                continue;
            if (wire_send(w->srv[i].sock, NULL, &m, NULL, NULL) < 0)
                return wst_error(w, PSKV_ENET, "cannot send CLOCK to server %s:%d: %s",
                                 w->srv[i].host, w->srv[i].port, zmq_strerror(errno));
            w->clock_msgs++;
        }
    }
    return 0;
}

/* Servers keep the largest clock they hear, and every push this clock covers went
 * before it (no clock is held back: none is owed a re-send), so sending it again
 * is harmless; it heals a clock a server could not forward down its chains. */
void wsend_clock_again(pskv_worker *w, int64_t now)
{
    if (w->catchup_ts || now - w->clock_sent_ms < CLOCK_AGAIN_MS)
        return;
    for (int i = 0; i < w->window; i++) {
        const req *r = &w->reqs[i];
        if ((r->type == REQ_PULL || r->pp) && !w->tables[r->table].async &&
            !w->tables[r->table].bsp) {
            if (wsend_clock(w, atomic_load(&w->clock) - 1, 0, 0) < 0)
                LOG_W("%s", w->last_error);
            return;
        }
    }
}

static void base_meta(pskv_worker *w, Pskv__Meta *m, Pskv__MsgType type, tbl *t,
                      int64_t clock)
{
    member_meta(&w->mb, m, type);
    m->has_clock = 1;
    m->clock = clock;
    m->has_table_id = m->has_width = 1;
    m->table_id = t->id;
    m->width = t->width;
}

/* The keys (NULL for a run part) and values (pushes) of part p. */
static void part_data(const req *r, const part *p, size_t wd, const uint64_t **keys,
                      const float **vals, vbuf **buf)
{
    if (p->own) {
        *buf = p->own;
        *keys = (const uint64_t *)(void *)p->own->data;
        *vals = (const float *)(void *)(p->own->data + p->n * sizeof(uint64_t));
        return;
    }
    if (r->lent) { /* one run (wplan_run single), straight from the caller */
        *buf = r->lend;
        *keys = NULL;
        *vals = r->lent + (size_t)(r->segs[2 * p->seg0] - r->first) * wd;
        return;
    }
    *buf = r->buf;
    *keys = p->idx && r->buf ? (const uint64_t *)(void *)r->buf->data + p->off : NULL;
    *vals = r->buf ? (const float *)(void *)(r->buf->data + r->kbytes) + p->off * wd : NULL;
}

const uint64_t *wsend_part_keys(const req *r, const part *p)
{
    const uint64_t *keys;
    const float *vals;
    vbuf *b;
    part_data(r, p, 0, &keys, &vals, &b);
    return keys;
}

/* Smallest request id still in flight (this request's at most; a draining one is
 * answered and never sent again): the worker never re-sends one below it, so
 * servers may forget those (the push's `floor`). */
uint64_t wsend_inflight_floor(const pskv_worker *w)
{
    int64_t low = w->next_ts;
    for (int i = 0; i < w->window; i++)
        if (w->reqs[i].type != REQ_FREE && !w->reqs[i].draining_ms && w->reqs[i].ts < low)
            low = w->reqs[i].ts;
    return (uint64_t)low << 16;
}

/* Sends part pi of r (a push or pull) to its server; floor: wsend_inflight_floor(w),
 * computed once for all the parts sent together. */
int wsend_data_part(pskv_worker *w, req *r, int pi, int resend, uint64_t floor)
{
    part *p = &r->parts[pi];
    tbl *t = &w->tables[r->table];
    size_t wd = t->width, row = wd * sizeof(float);
    int push = r->type == REQ_PUSH;
    Pskv__Meta m;
    /* a re-sent part carries the clock of the iteration it was made in */
    base_meta(w, &m, push ? PSKV__MSG_TYPE__PUSH : PSKV__MSG_TYPE__PULL, t, r->clock);
    if (r->assign) {
        m.has_assign = 1;
        m.assign = 1;
    }
    if (push) {
        m.has_origin_id = m.has_floor = 1;
        m.origin_id = p->dedupe_id;
        m.floor = floor;
    }
    if (r->pp) { /* pskv_pushpull: the rows' values after it come back */
        p->pp_reply = p->pp_acked = 0; /* this send's answers */
        m.has_pull_after = m.pull_after = m.has_pull_clock = 1;
        m.pull_clock = r->pp_clock;
    }
    if (resend) {
        m.has_resend = 1;
        m.resend = 1;
    } else if (p->clock_end) {
        /* the worker's clock ends with this push, as a CLOCK right behind it would
         * say (refused: the same check). Never on a re-send: a part sent again goes
         * after a placement change or a refusal, and then the clock waits for every
         * re-send (wview_catch_up) */
        m.has_ends_clock = m.ends_clock = m.has_refused = 1;
        m.refused = w->srv[p->server].refused;
        w->clock_sent_ms = tu_now_ms();
        w->clock_rides++;
    }
    p->clock_end = 0;
    m.has_num_keys = 1;
    m.num_keys = p->n;
    m.has_request_id = 1;
    m.request_id = ((uint64_t)r->ts << 16) | (uint64_t)pi;
    const uint64_t *keys;
    const float *vals;
    vbuf *b;
    part_data(r, p, wd, &keys, &vals, &b);
    wframes f; /* the part through the table's filters, once (wfilter.h) */
    int rc = wfilter_encode(w, r, pi, resend, &m, keys, vals, b, &f);
    if (rc < 0)
        return rc;
    if (!push && wshm_usable(w, t, p->server, p->n * row) && wshm_take(w, p, p->n * row))
        wshm_meta(w, p, &m); /* the reply's values go to shared memory (wshm.h) */
    srv *s = &w->srv[p->server];
    p->sent_ms = tu_now_ms();
    p->epoch = m.epoch;
    if (wire_send(s->sock, NULL, &m, f.kp, f.vp) < 0)
        return wst_error(w, PSKV_ENET, "cannot send to server %s:%d: %s", s->host, s->port,
                         zmq_strerror(errno));
    return 0;
}

/* The number of servers that own the rows of part p on the latest view, each
 * one's row count in w->count and, when there is one, its index in *only; or
 * -PSKV_ELOST (last_error set) when a row's partition lost every replica.
 * Allocates nothing. */
static int count_owners(pskv_worker *w, const req *r, const part *p, const tbl *t,
                        const uint64_t *keys, int pull, int *only)
{
    int owners = 0;
    memset(w->count, 0, (size_t)w->nservers * sizeof *w->count);
    uint64_t nrun = p->nseg ? p->nseg : 1; /* a gathered part: one "run" of its keys */
    for (uint64_t g = 0, k = 0; g < nrun; g++) {
        uint64_t first = p->nseg ? r->segs[2 * (p->seg0 + g)] : 0;
        uint64_t cnt = p->nseg ? r->segs[2 * (p->seg0 + g) + 1] : p->n;
        for (uint64_t i = 0; i < cnt; i++, k++) {
            uint64_t key = p->nseg ? first + i : keys[k];
            int o = wplan_owner_of(w, wplan_key_pos(t, key), pull);
            if (o < 0)
                return wplan_lost_error(w, t, key);
            if (!w->count[o]++) {
                owners++;
                *only = o;
            }
        }
    }
    return owners;
}

/* Whether server si, on the latest view, owns (heads for a push, tails for a pull)
 * exactly the n rows of run part p among the keys its span covers: a run part
 * names only its span, and a server takes as the part's rows every key of the
 * span in partitions it owns, as chain.c does. A new owner that also owns other
 * partitions inside the span would refuse the part as stale on every try. The
 * same walk as the server's (ring_run). */
static int span_rows_are(const pskv_worker *w, const req *r, const part *p, const tbl *t,
                         int si, int pull)
{
    uint64_t last = p->seg0 + p->nseg - 1, rows = 0, lo, hi;
    ring_run it;
    ring_run_init(&it, r->segs[2 * p->seg0], r->segs[2 * last] + r->segs[2 * last + 1], t->size,
                  w->nparts);
    for (uint32_t q; ring_run_next(&it, &q, &lo, &hi);)
        if ((pull ? w->tail[q] : w->head[q]) == si)
            rows += hi - lo;
    return rows == p->n;
}

/* Sends part pi, refused by its server and so answered, again as it is: to the
 * one server that now owns all its rows, from the same rows (the part's own copy,
 * the request's buffer or the caller's lent array), with the same request id. A
 * refused part goes again every RETRY_DELAY_MS until its placement settles: in
 * place, those tries allocate nothing (a new part each time would keep a copy
 * of the rows per try until the request ends, and could pass MAX_PARTS). */
static int resend_in_place(pskv_worker *w, req *r, int pi, int si)
{
    part *p = &r->parts[pi];
    p->retry_at = 0;
    w->nretry--;
    p->server = si;
    return wsend_data_part(w, r, pi, 1, r->type == REQ_PUSH ? wsend_inflight_floor(w) : 0);
}

/* Plans the rows of part pi again on the latest view and sends them: in place
 * when one server owns all its rows (and, for a run part, no other row of its
 * span) and either the part was refused (`refused`: its server answered) or it
 * went unanswered and that server is the one it went to (not through shared
 * memory, whose region a late answer could still write): its request id stays, so
 * the answer to either send ends it, and a server behind its queue still answers
 * the first. Else as new parts with the same dedupe id (a server that applied
 * them already drops them), the old part closed and a late answer to it dropped. */
static int resend_part(pskv_worker *w, req *r, int pi, int refused)
{
    tbl *t = &w->tables[r->table];
    size_t wd = t->width, row = wd * sizeof(float);
    int push = r->type == REQ_PUSH, pull = r->type == REQ_PULL;
    part old = r->parts[pi];
    uint64_t n = old.n;
    const uint64_t *keys;
    const float *vals;
    vbuf *b;
    part_data(r, &old, wd, &keys, &vals, &b);
    int only = -1, owners = count_owners(w, r, &old, t, keys, pull, &only);
    if (owners < 0)
        return owners;
    int in_place = owners == 1 && (!old.nseg || span_rows_are(w, r, &old, t, only, pull));
    if (refused && in_place)
        return resend_in_place(w, r, pi, only);
    if (in_place && only == old.server && !old.shm && !old.retry_at)
        return wsend_data_part(w, r, pi, 1, push ? wsend_inflight_floor(w) : 0);
    uint64_t *rk = malloc(n * sizeof *rk);   /* key of each row */
    uint32_t *rc = malloc(n * sizeof *rc);   /* caller row of each row */
    int *ro = malloc(n * sizeof *ro);        /* new owner of each row */
    int err = 0;
    if (!rk || !rc || !ro) {
        err = wst_error(w, PSKV_ENOMEM, "out of memory");
        goto out;
    }
    uint64_t k = 0;
    if (old.nseg) {
        for (uint64_t g = old.seg0; g < old.seg0 + old.nseg; g++)
            for (uint64_t i = 0; i < r->segs[2 * g + 1]; i++, k++) {
                rk[k] = r->segs[2 * g] + i;
                rc[k] = (uint32_t)(rk[k] - r->first);
            }
    } else {
        for (; k < n; k++) {
            rk[k] = keys[k];
            rc[k] = old.idx[k];
        }
    }
    uint64_t floor = push ? wsend_inflight_floor(w) : 0;
    for (k = 0; k < n; k++) /* w->count holds each owner's rows (count_owners) */
        ro[k] = wplan_owner_of(w, wplan_key_pos(t, rk[k]), pull);
    int nnew = owners;
    if (r->nparts + nnew > MAX_PARTS) {
        err = wst_error(w, PSKV_EINVAL, "request %lld re-planned into too many parts",
                        (long long)r->ts);
        goto out;
    }
    part *grown = realloc(r->parts, (size_t)(r->nparts + nnew) * sizeof *grown);
    if (!grown) {
        err = wst_error(w, PSKV_ENOMEM, "out of memory");
        goto out;
    }
    r->parts = grown;
    if (r->parts[pi].retry_at) {
        r->parts[pi].retry_at = 0;
        w->nretry--;
    }
    r->parts[pi].done = 1;
    r->pending--;
    for (int si = 0; si < w->nservers; si++) {
        uint64_t c = w->count[si];
        if (!c)
            continue;
        int ni = r->nparts++;
        part *p = &r->parts[ni];
        memset(p, 0, sizeof *p);
        p->server = si;
        p->dedupe_id = old.dedupe_id;
        p->silences = old.silences;
        p->own = vbuf_new(c * sizeof(uint64_t) + (push ? c * row : 0));
        p->idx = malloc(c * sizeof *p->idx);
        r->pending++;
        if (!p->own || !p->idx) {
            err = wst_error(w, PSKV_ENOMEM, "out of memory");
            goto out;
        }
        uint64_t *pk = (uint64_t *)(void *)p->own->data;
        float *pv = (float *)(void *)(p->own->data + c * sizeof(uint64_t));
        for (k = 0; k < n; k++) {
            if (ro[k] != si)
                continue;
            pk[p->n] = rk[k];
            p->idx[p->n] = rc[k];
            if (push)
                memcpy(pv + p->n * wd, vals + k * wd, row);
            p->n++;
        }
        if ((err = wsend_data_part(w, r, ni, 1, floor)) < 0)
            goto out;
    }
    err = wreq_pp_stage(w, r); /* a combined call now in several parts: its values wait */
out:
    free(rk);
    free(rc);
    free(ro);
    return err;
}

/* Parts whose server died, or that are due for another try, are planned again. */
void wsend_resend_due(pskv_worker *w, int view_changed)
{
    int64_t now = tu_now_ms();
    for (int i = 0; i < w->window; i++) {
        req *r = &w->reqs[i];
        if (r->type != REQ_PUSH && r->type != REQ_PULL)
            continue;
        for (int pi = 0; pi < r->nparts && r->type != REQ_FREE; pi++) {
            part *p = &r->parts[pi];
            if (p->done)
                continue;
            int dead = view_changed && !w->srv[p->server].alive;
            int due = p->retry_at && now >= p->retry_at;
            /* silence on an async table: asked again of the latest view's owner */
            int silent = !view_changed && !p->retry_at && w->retry_ms &&
                         w->tables[r->table].async &&
                         resend_due(&w->srv[p->server].heard, p->sent_ms, p->silences,
                                    w->retry_ms, now);
            if (silent) {
                LOG_I("request %lld: no answer from server node %u in %lld ms; asking again",
                      (long long)r->ts, w->srv[p->server].id, (long long)(now - p->sent_ms));
                p->silences++;
                due = 1;
            }
            if (!dead && !due)
                continue;
            if (dead && r->type == REQ_PUSH && !w->failover_node) {
                w->failover_node = w->srv[p->server].id;
                w->failover_ms = now;
            }
            if (dead)
                LOG_D("request %lld: server node %u died; sending its part again to the new "
                      "owners", (long long)r->ts, w->srv[p->server].id);
            int err = resend_part(w, r, pi, !dead && p->retry_at && now >= p->retry_at);
            if (err < 0) {
                r->err = err;
                wreq_finish(w, r); /* the failure is recorded; the slot is free */
                break;
            }
        }
    }
}
