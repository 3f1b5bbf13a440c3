/* libpskv's exported calls on an open handle (pskv.h): tables, push, pull, wait,
 * the whole-table pull, clocks, barriers, checkpoints, progress. Opening and
 * closing the handle are in open.c; the design and the module map are in
 * wstate.h.
 *
 * Every call here runs on the calling thread, which owns every socket; a call
 * that waits (for a slot, an answer, a barrier) does so by pumping (wpump), which
 * applies whatever replies have come meanwhile. */
#define _GNU_SOURCE
#include "pskv.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "member.h"
#include "vbuf.h"
#include "wfilter.h"
#include "wkkt.h"
#include "wmetrics.h"
#include "wire.h"
#include "wplan.h"
#include "wpump.h"
#include "wreq.h"
#include "wsend.h"
#include "wshm.h"
#include "wstate.h"

int pskv_rank(const pskv_worker *w) { return w->mb.rank; }
int pskv_num_workers(const pskv_worker *w) { return w->nworkers; }
int pskv_num_servers(const pskv_worker *w) { return w->nservers; }
int pskv_num_partitions(const pskv_worker *w) { return (int)w->nparts; }
int pskv_num_replicas(const pskv_worker *w) { return (int)w->R; }
const char *pskv_last_error(const pskv_worker *w) { return w->last_error; }

/* ---- push and pull -------------------------------------------------------- */

#define SUBMIT_LEND 1 /* submit's flags: values lent (pskv_push_nocopy) */
#define SUBMIT_RAW 2  /* no quantising filter (pskv_filter_flush) */
#define SUBMIT_VIEW 4 /* a pull into the library's memory (pskv_pull_view) */
#define SUBMIT_PBUF 8 /* a push of w->pbuf_next's buffer (pskv_push_buffer_send) */
#define SUBMIT_PP 16  /* a push answered by the rows after it (pskv_pushpull) */
#define SUBMIT_PP_CLOCK 32 /* ... whose pull is tagged with the next clock */
#define SUBMIT_CLOCK 64 /* the worker's clock ends on the request's parts (ride_clock) */

/* pskv_pushpull with PSKV_PP_CLOCK, pskv_push_buffer_send_clock: the worker's clock
 * ends on the request's last
 * part to each server (the parts before it to that server go first), but to a
 * server owed its clock only after re-sends (wview_catch_up) and under the test
 * hook that staggers clocks (wtest_clock_gap); clock_end then sends CLOCK to the
 * servers it did not ride to. */
static void ride_clock(pskv_worker *w, req *r)
{
    for (int i = 0; i < w->nservers; i++)
        w->srv[i].clock_rode = 0;
    if (wtest_clock_gap(&w->test, r->clock))
        return;
    for (int pi = r->nparts - 1; pi >= 0; pi--) {
        srv *s = &w->srv[r->parts[pi].server];
        if (!s->clock_rode && !s->catchup && s->alive)
            r->parts[pi].clock_end = s->clock_rode = 1;
    }
}

/* Ends the worker's clock: CLOCK to every live server (except_rode: but those
 * the clock rode to on pskv_pushpull's parts, ride_clock), then the next clock. */
static int clock_end(pskv_worker *w, int except_rode)
{
    int rc = wsend_clock(w, atomic_load(&w->clock), 0, except_rode);
    if (rc == 0)
        atomic_fetch_add(&w->clock, 1);
    wmet_worker(w);
    return rc;
}

/* The body of push, push_nocopy, assign and pull: checks the request, plans its
 * parts (wplan), copies a push's values once into a vbuf grouped by part (none
 * when lent), and sends every part (wsend). Returns the timestamp, or a negated
 * error (a request already made is failed: wreq_fail). */
static int64_t submit(pskv_worker *w, enum req_type type, int table, const uint64_t *keys,
                      size_t nkeys, const float *vals, float *out, int flags)
{
    int lend = flags & SUBMIT_LEND;
    int assign = type == REQ_ASSIGN;
    if (assign)
        type = REQ_PUSH; /* travels as a PUSH with the assign flag */
    int err = 0;
    tbl *t = wplan_check_table(w, table, keys, nkeys, &err);
    if (!t)
        return err;
    /* 16-bit values: a step whose scaled values do not fit is skipped (loss scaling) */
    if (type == REQ_PUSH && !assign && t->wire &&
        half_overflows(t->wire, vals, nkeys * t->width, t->scale))
        return wst_error(w, PSKV_EBADVALUE, "table '%s': a value x loss scale %g is not finite "
                         "in %s: nothing pushed", t->name, (double)t->scale, half_name(t->wire));
    /* kkt: rows at zero inside the L1 band are not sent (wkkt.h) */
    int kkt = t->kkt && type == REQ_PUSH && !assign && !(flags & SUBMIT_RAW);
    if (kkt) {
        int64_t f0 = tu_now_ns();
        if (wkkt_filter(t->kkt, &t->fs, keys, vals, nkeys, t->width, &keys, &vals, &nkeys,
                        &t->fst) < 0)
            return wst_error(w, PSKV_ENOMEM, "table '%s': out of memory in the kkt filter",
                             t->name);
        t->fst.ns += tu_now_ns() - f0;
    }
    uint64_t first = 0;
    if (keys && t->dense && wplan_is_run(keys, nkeys)) {
        first = keys[0];
        keys = NULL;
    }
    /* runs: at most one part per partition run and chunk cut; gathered: one per server */
    uint64_t chunk = w->chunk_bytes / ((uint64_t)t->width * sizeof(float));
    uint64_t cap = (uint64_t)w->nservers +
                   (keys ? 0 : (nkeys < w->nparts ? nkeys : w->nparts) + nkeys / (chunk ? chunk : 1));
    if (cap > MAX_PARTS)
        return wst_error(w, PSKV_EINVAL, "table '%s': %zu keys make %llu parts (at most %d)",
                         t->name, nkeys, (unsigned long long)cap, MAX_PARTS);
    if ((flags & SUBMIT_VIEW) && w->nviews >= PSKV_MAX_VIEWS)
        return wst_error(w, PSKV_EINVAL, "%d views held or in flight: release one first "
                         "(pskv_view_release)", w->nviews);
    req *r = wreq_new(w, type, table, (int)cap);
    if (!r)
        return -PSKV_ETIMEDOUT;
    if ((flags & SUBMIT_PBUF) && w->pbuf_next) { /* the request holds the buffer now */
        r->pbuf = w->pbuf_next->res;
        r->pbuf_own = r->pbuf.shm ? NULL : w->pbuf_next->vals;
        memset(w->pbuf_next, 0, sizeof *w->pbuf_next);
        w->pbuf_next = NULL;
    }
    if (flags & SUBMIT_VIEW) { /* counted from here: a failure below uncounts it */
        r->view = 1;
        r->view_floats = nkeys * t->width;
        w->nviews++;
    }
    int pull = type == REQ_PULL;
    if (t->kkt && pull)
        r->kkt_floor = wkkt_floor(w, table);
    else if (kkt)
        wkkt_sent(t->kkt, r->ts);
    else if (t->kkt) /* an assign: readings before it are stale */
        wkkt_pushed(t->kkt, keys, nkeys, r->ts);
    /* only a run can be sent from the caller's array as it is (a 16-bit wire packs
     * from it into frames of its own, on every send); a quantising table's values
     * change as they go (wfilter_quant) */
    lend = lend && !keys && !t->fs.quant && !t->fs.significant;
    int rc = keys   ? wplan_keys(w, r, t, keys, nkeys, pull)
             : lend ? wplan_run_lend(w, r, t, first, nkeys) /* a push; 0: copied after all */
                    : wplan_run(w, r, t, first, nkeys, pull, 0);
    if (rc < 0)
        return wreq_fail(w, r, rc);
    if (lend)
        lend = rc;
    r->out = out;
    r->assign = assign;
    r->pp = (flags & SUBMIT_PP) != 0;
    r->pp_clock = r->clock + ((flags & SUBMIT_PP_CLOCK) ? 1 : 0);
    r->raw = (flags & SUBMIT_RAW) != 0;
    r->scale = t->scale;
    size_t wd = t->width, row = wd * sizeof(float);
    r->bytes = nkeys * row;
    if ((rc = wreq_pp_stage(w, r)) < 0) /* so that a refusal leaves out untouched */
        return wreq_fail(w, r, rc);
    r->kbytes = keys ? nkeys * sizeof(uint64_t) : 0;
    wmet_request(t, pull, nkeys, r->bytes);
    if (lend) {
        r->lend = vbuf_new(0);
        if (!r->lend)
            return wreq_fail(w, r, wst_error(w, PSKV_ENOMEM, "out of memory"));
        r->lent = vals;
        w->lent_pushes++;
    } else if (type == REQ_PUSH || keys) {
        /* one copy: gathered keys, then values (push), grouped by part */
        size_t vbytes = type == REQ_PUSH ? nkeys * row : 0;
        r->buf = vbuf_new(vbytes + r->kbytes);
        if (!r->buf)
            return wreq_fail(w, r, wst_error(w, PSKV_ENOMEM, "out of memory for %zu bytes",
                                            vbytes + r->kbytes));
        /* keys first: 8-byte aligned whatever the number of values */
        uint64_t *gk = (uint64_t *)(void *)r->buf->data;
        float *gv = (float *)(void *)(r->buf->data + r->kbytes);
        if (keys) {
            for (uint64_t i = 0; i < nkeys; i++) {
                uint32_t src = r->idx[i];
                gk[i] = keys[src];
                if (vbytes)
                    memcpy(gv + i * wd, vals + (size_t)src * wd, row);
            }
        }
    }
    if (flags & SUBMIT_CLOCK)
        ride_clock(w, r);
    uint64_t floor = type == REQ_PUSH ? wsend_inflight_floor(w) : 0;
    for (int pi = 0; pi < r->nparts; pi++) {
        part *p = &r->parts[pi];
        if (type == REQ_PUSH && !keys && !lend) {
            /* copy each part's runs just before it is sent, so sending overlaps */
            float *dst = (float *)(void *)r->buf->data + p->off * wd;
            for (uint64_t g = p->seg0; g < p->seg0 + p->nseg; g++) {
                uint64_t f = r->segs[2 * g], c = r->segs[2 * g + 1];
                memcpy(dst, vals + (f - first) * wd, c * row);
                dst += c * wd;
            }
        }
        rc = wsend_data_part(w, r, pi, 0, floor);
        if (rc < 0)
            return wreq_fail(w, r, rc);
    }
    return r->ts;
}

int64_t pskv_push(pskv_worker *w, int table, const uint64_t *keys, size_t nkeys,
                  const float *vals)
{
    if (!vals)
        return w ? wst_error(w, PSKV_EINVAL, "push without values") : -PSKV_EINVAL;
    return submit(w, REQ_PUSH, table, keys, nkeys, vals, NULL, 0);
}

int64_t pskv_push_nocopy(pskv_worker *w, int table, const uint64_t *keys, size_t nkeys,
                         const float *vals)
{
    if (!vals)
        return w ? wst_error(w, PSKV_EINVAL, "push without values") : -PSKV_EINVAL;
    return submit(w, REQ_PUSH, table, keys, nkeys, vals, NULL, SUBMIT_LEND);
}

float *pskv_push_buffer(pskv_worker *w, int table, const uint64_t *keys, size_t nkeys)
{
    int err = 0;
    tbl *t = w ? wplan_check_table(w, table, keys, nkeys, &err) : NULL;
    if (!t)
        return NULL;
    wpbuf *b = NULL;
    for (int i = 0; i < PSKV_MAX_PUSH_BUFFERS && !b; i++)
        if (!w->pbufs[i].vals)
            b = &w->pbufs[i];
    if (!b) {
        wst_error(w, PSKV_EINVAL, "%d push buffers held unsent: send or drop one first",
                  PSKV_MAX_PUSH_BUFFERS);
        return NULL;
    }
    size_t floats = nkeys * t->width, bytes = floats * sizeof(float);
    int si = !keys || wplan_is_run(keys, nkeys)
                 ? wplan_run_server(w, t, keys ? keys[0] : 0, nkeys)
                 : -1;
    float *v = si >= 0 && wshm_usable(w, t, si, bytes) ? wshm_reserve(w, si, &b->res, bytes)
                                                         : NULL;
    if (!v && !(v = malloc(bytes ? bytes : 1))) {
        wst_error(w, PSKV_ENOMEM, "out of memory for a push buffer of %zu bytes", bytes);
        return NULL;
    }
    b->vals = v;
    b->floats = floats;
    b->table = table;
    return v;
}

/* The unsent push buffer at vals, or NULL. */
static wpbuf *push_buffer_of(pskv_worker *w, const float *vals)
{
    for (int i = 0; vals && i < PSKV_MAX_PUSH_BUFFERS; i++)
        if (w->pbufs[i].vals == vals)
            return &w->pbufs[i];
    return NULL;
}

/* pskv_push_buffer_send, and with SUBMIT_CLOCK in flags the clock ended after it
 * (riding on the push's parts). */
static int64_t push_buffer_send(pskv_worker *w, int table, const uint64_t *keys, size_t nkeys,
                                float *buf, int flags)
{
    wpbuf *b = w ? push_buffer_of(w, buf) : NULL;
    if (!b)
        return w ? wst_error(w, PSKV_EINVAL, "not an unsent push buffer of this handle")
                 : -PSKV_EINVAL;
    int64_t ts;
    if (b->table != table || b->floats != nkeys * w->tables[table].width) {
        ts = wst_error(w, PSKV_EINVAL, "push buffer of %zu values sent to table %d with %zu "
                       "keys: not what it was made for", b->floats, table, nkeys);
    } else {
        w->pbuf_next = b;
        ts = submit(w, REQ_PUSH, table, keys, nkeys, buf, NULL,
                    SUBMIT_LEND | SUBMIT_PBUF | (flags & SUBMIT_CLOCK));
        w->pbufs_sent += ts > 0;
    }
    if (b->vals) /* refused before a request held it (a request clears it) */
        wreq_pbuf_free(b);
    w->pbuf_next = NULL;
    int rc;
    if (ts >= 0 && (flags & SUBMIT_CLOCK) && (rc = clock_end(w, 1)) < 0)
        return rc; /* the push goes on: pskv_wait_all ends it */
    return ts;
}

int64_t pskv_push_buffer_send(pskv_worker *w, int table, const uint64_t *keys, size_t nkeys,
                              float *buf)
{
    return push_buffer_send(w, table, keys, nkeys, buf, 0);
}

int64_t pskv_push_buffer_send_clock(pskv_worker *w, int table, const uint64_t *keys,
                                    size_t nkeys, float *buf)
{
    return push_buffer_send(w, table, keys, nkeys, buf, SUBMIT_CLOCK);
}

int pskv_push_buffer_drop(pskv_worker *w, float *buf)
{
    wpbuf *b = w ? push_buffer_of(w, buf) : NULL;
    if (!b)
        return w ? wst_error(w, PSKV_ENOTFOUND, "not an unsent push buffer of this handle")
                 : -PSKV_EINVAL;
    wreq_pbuf_free(b);
    return 0;
}

int64_t pskv_assign(pskv_worker *w, int table, const uint64_t *keys, size_t nkeys,
                    const float *vals)
{
    if (!vals)
        return w ? wst_error(w, PSKV_EINVAL, "assign without values") : -PSKV_EINVAL;
    return submit(w, REQ_ASSIGN, table, keys, nkeys, vals, NULL, 0);
}

int64_t pskv_filter_flush(pskv_worker *w, int table)
{
    if (!w || table < 0 || table >= w->ntables)
        return w ? wst_error(w, PSKV_EINVAL, "no table handle %d", table) : -PSKV_EINVAL;
    tbl *t = &w->tables[table];
    if (!t->resid)
        return 0;
    float *res = t->resid; /* the push copies it; the table starts a fresh residual */
    t->resid = NULL;
    int64_t ts = submit(w, REQ_PUSH, table, NULL, t->size, res, NULL, SUBMIT_RAW);
    if (ts < 0)
        t->resid = res;
    else
        free(res);
    return ts;
}

int pskv_set_loss_scale(pskv_worker *w, int table, float scale)
{
    if (!w || table < 0 || table >= w->ntables)
        return w ? wst_error(w, PSKV_EINVAL, "no table handle %d", table) : -PSKV_EINVAL;
    tbl *t = &w->tables[table];
    if (!t->wire)
        return wst_error(w, PSKV_EINVAL, "table '%s': a loss scale needs wire fp16 or bf16 (its "
                         "values travel as fp32)", t->name);
    if (!half_scale_ok(scale))
        return wst_error(w, PSKV_EINVAL, "table '%s': loss scale %g is not a power of two in "
                         "2^-24 .. 2^24", t->name, (double)scale);
    t->scale = scale;
    return 0;
}

int pskv_traffic_get(const pskv_worker *w, int table, pskv_traffic *out)
{
    if (!w || !out || table < -1 || table >= w->ntables)
        return -PSKV_EINVAL;
    memset(out, 0, sizeof *out);
    for (int i = table < 0 ? 0 : table; i < (table < 0 ? w->ntables : table + 1); i++) {
        const filter_stats *f = &w->tables[i].fst;
        out->sent += f->wire_out;
        out->sent_raw += f->raw_out;
        out->received += f->wire_in;
        out->received_raw += f->raw_in;
        out->filter_s += (double)f->ns / 1e9;
    }
    out->name = table < 0 ? NULL : w->tables[table].name;
    return 0;
}

int64_t pskv_pull(pskv_worker *w, int table, const uint64_t *keys, size_t nkeys, float *out)
{
    if (!out)
        return w ? wst_error(w, PSKV_EINVAL, "pull without an output array") : -PSKV_EINVAL;
    return submit(w, REQ_PULL, table, keys, nkeys, NULL, out, 0);
}

int64_t pskv_pushpull(pskv_worker *w, int table, const uint64_t *keys, size_t nkeys,
                      const float *grad, float *out, int flags)
{
    if (!w)
        return -PSKV_EINVAL;
    int view = (flags & PSKV_PP_VIEW) != 0;
    if (!grad || (out == NULL) != view || (flags & ~(PSKV_PP_CLOCK | PSKV_PP_NOCOPY | PSKV_PP_VIEW)))
        return wst_error(w, PSKV_EINVAL, "pushpull: %s", !grad ? "no gradient"
                         : (flags & ~(PSKV_PP_CLOCK | PSKV_PP_NOCOPY | PSKV_PP_VIEW))
                             ? "unknown flags"
                         : view ? "an output array with PSKV_PP_VIEW (the values are the "
                                  "view's: pass NULL)"
                                : "no output array");
    int err = 0;
    tbl *t = wplan_check_table(w, table, keys, nkeys, &err);
    if (!t)
        return err;
    size_t floats = nkeys * t->width;
    /* a lent gradient is read by ZeroMQ while replies write out */
    if ((flags & PSKV_PP_NOCOPY) && out && (uintptr_t)out < (uintptr_t)(grad + floats) &&
        (uintptr_t)grad < (uintptr_t)(out + floats))
        return wst_error(w, PSKV_EINVAL, "pushpull on table '%s' with PSKV_PP_NOCOPY: out "
                         "overlaps grad (sent from where it is)", t->name);
    if (t->fs.n || t->wire || t->kkt)
        return wst_error(w, PSKV_EINVAL, "pushpull on table '%s': not yet with %s; push, then "
                         "pull", t->name, t->wire ? "a 16-bit wire" : "wire filters");
    int64_t ts = submit(w, REQ_PUSH, table, keys, nkeys, grad, out,
                        SUBMIT_PP | (flags & PSKV_PP_CLOCK ? SUBMIT_PP_CLOCK | SUBMIT_CLOCK : 0) |
                            (flags & PSKV_PP_NOCOPY ? SUBMIT_LEND : 0) |
                            (view ? SUBMIT_VIEW : 0));
    int rc;
    if (ts >= 0 && (flags & PSKV_PP_CLOCK) && (rc = clock_end(w, 1)) < 0)
        return rc; /* the request goes on: pskv_wait_all ends it */
    return ts;
}

int64_t pskv_pull_view(pskv_worker *w, int table, const uint64_t *keys, size_t nkeys)
{
    return w ? submit(w, REQ_PULL, table, keys, nkeys, NULL, NULL, SUBMIT_VIEW) : -PSKV_EINVAL;
}

const float *pskv_view(pskv_worker *w, int64_t ts)
{
    if (!w)
        return NULL;
    wview_held *v = wreq_view(w, ts);
    if (v)
        return v->vals;
    if (wreq_find(w, ts))
        wst_error(w, PSKV_EINVAL, "view %lld: still in flight (pskv_wait it first)",
                  (long long)ts);
    else
        wst_error(w, PSKV_ENOTFOUND, "no view %lld held (not a view pull, failed, or released)",
                  (long long)ts);
    return NULL;
}

int pskv_view_release(pskv_worker *w, int64_t ts)
{
    if (!w)
        return -PSKV_EINVAL;
    wview_held *v = wreq_view(w, ts);
    if (!v)
        return wst_error(w, PSKV_ENOTFOUND, "no view %lld held", (long long)ts);
    wreq_view_release(w, v);
    return 0;
}

/* ---- wait ---------------------------------------------------------------- */

int pskv_wait(pskv_worker *w, int64_t ts, int timeout_ms)
{
    if (!w || ts <= 0 || ts >= w->next_ts)
        return w ? wst_error(w, PSKV_ENOTFOUND, "no request with timestamp %lld", (long long)ts)
                 : -PSKV_EINVAL;
    int64_t deadline = tu_now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
    req *r;
    while ((r = wreq_find(w, ts))) {
        if (tu_now_ms() >= deadline)
            return wst_error(w, PSKV_ETIMEDOUT, "request %lld still in flight after %d ms",
                             (long long)ts, timeout_ms);
        if (member_stop_requested()) /* the daemon's SIGTERM: scancel, Ctrl-C */
            return wst_error(w, PSKV_ECLOSED, "request %lld: the wait ended by a stop signal "
                             "(it stays in flight)", (long long)ts);
        wpump_spin(w, wst_remaining(deadline), r->bytes <= 65536 ? w->spin_us : 0);
    }
    int err = wreq_failure_of(w, ts);
    if (!err && ts <= w->forgotten_ts) /* never report success for an outcome we lost */
        return wst_error(w, PSKV_ENOTFOUND,
                         "request %lld: outcome no longer known (more than %d failures since)",
                         (long long)ts, FAILED_KEEP);
    return err;
}

int pskv_wait_all(pskv_worker *w, int timeout_ms)
{
    if (!w)
        return -PSKV_EINVAL;
    int failed_before = w->nfailed;
    int64_t deadline = tu_now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
    while (w->inflight > 0) {
        if (tu_now_ms() >= deadline)
            return wst_error(w, PSKV_ETIMEDOUT, "%d requests still in flight after %d ms",
                             w->inflight, timeout_ms);
        wpump(w, wst_remaining(deadline));
    }
    /* late drops are expected under bsp with backups: counted, not failures */
    for (int i = failed_before; i < w->nfailed; i++)
        if (w->failed[i % FAILED_KEEP].err != -PSKV_ELATE)
            return w->failed[i % FAILED_KEEP].err;
    return 0;
}

/* ---- tables -------------------------------------------------------------- */

int pskv_table_open(pskv_worker *w, const char *name, const pskv_table_opts *o_in)
{
    if (!w)
        return -PSKV_EINVAL;
    pskv_table_opts o;
    pskv_table_opts_init(&o);
    if (o_in)
        o = *o_in;
    char full[sizeof w->tables[0].name]; /* NAMESPACE/NAME in a named namespace */
    if (!name || !*name || (size_t)snprintf(full, sizeof full, "%s%s%s", w->ns,
                                            *w->ns ? "/" : "", name) >= sizeof full)
        return wst_error(w, PSKV_EINVAL, "table name must be 1..127 characters with its "
                         "namespace");
    if (*w->ns && strchr(name, '/'))
        return wst_error(w, PSKV_EINVAL, "table '%s' in namespace '%s': a name has no '/' "
                         "(the namespace is given once, by the worker)", name, w->ns);
    name = full;
    if (o.kind != PSKV_DENSE && o.kind != PSKV_SPARSE)
        return wst_error(w, PSKV_EINVAL, "table '%s': kind must be PSKV_DENSE or PSKV_SPARSE", name);
    if (o.kind == PSKV_DENSE && o.size == 0)
        return wst_error(w, PSKV_EINVAL, "dense table '%s' needs a size", name);
    uint64_t id = wire_table_id(name);
    int existing = -1; /* opened before: the servers still check the options */
    for (int i = 0; i < w->ntables; i++)
        if (w->tables[i].id == id)
            existing = i;
    tbl *grown = realloc(w->tables, (size_t)(w->ntables + 1) * sizeof *grown);
    if (!grown)
        return wst_error(w, PSKV_ENOMEM, "out of memory");
    w->tables = grown;
    tbl *t = &w->tables[w->ntables];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->id = id;
    t->dense = o.kind == PSKV_DENSE;
    t->size = t->dense ? o.size : 0;
    t->width = o.width;
    t->async = !o.consistency || !strcmp(o.consistency, "async") ||
               !strcmp(o.consistency, "ssp:inf");
    t->bsp = o.consistency && !strcmp(o.consistency, "bsp");
    Pskv__TableOptions to;
    pskv__table_options__init(&to);
    to.name = (char *)name;
    to.has_kind = to.has_size = to.has_width = to.has_lr = to.has_momentum = to.has_l2 =
        to.has_eps = to.has_init_scale = to.has_seed = 1;
    to.kind = t->dense ? PSKV__TABLE_KIND__DENSE : PSKV__TABLE_KIND__SPARSE;
    to.size = t->size;
    to.width = o.width;
    to.updater = (char *)(o.updater ? o.updater : "sgd");
    to.lr = o.lr;
    to.momentum = o.momentum;
    to.l2 = o.l2;
    to.eps = o.eps;
    to.has_l1 = to.has_beta1 = to.has_beta2 = to.has_weight_decay = to.has_beta = 1;
    to.l1 = o.l1;
    to.beta1 = o.beta1;
    to.beta2 = o.beta2;
    to.weight_decay = o.weight_decay;
    to.beta = o.beta;
    to.init = (char *)(o.init ? o.init : "zero");
    to.init_scale = o.init_scale;
    to.seed = o.seed;
    to.consistency = (char *)(o.consistency ? o.consistency : "async");
    to.has_backup = 1;
    to.backup = o.backup;
    to.has_bsp_mean_pushed = o.bsp_mean_pushed != 0;
    to.bsp_mean_pushed = o.bsp_mean_pushed != 0;
    to.has_admit_after = o.admit_after != 0;
    to.admit_after = o.admit_after;
    to.has_evict_after = o.evict_after != 0;
    to.evict_after = o.evict_after;
    to.wire = (char *)o.wire; /* the servers refuse a name they do not know */
    to.has_quota_bytes = w->quota_bytes != 0;
    to.quota_bytes = w->quota_bytes;
    t->wire = half_parse(o.wire && *o.wire ? o.wire : "fp32");
    t->scale = 1.0f;
    int rc = wfilter_open(w, t, o.filters, o.l1);
    if (rc < 0)
        goto fail;
    char *fnames[FILTER_MAX];
    for (int i = 0; i < t->fs.n; i++)
        fnames[i] = t->fs.names[i];
    to.n_filters = (size_t)t->fs.n;
    to.filters = fnames;

    req *r = wreq_new_live(w, REQ_OPEN, w->ntables, &rc);
    if (!r)
        goto fail;
    for (int pi = 0; pi < r->nparts; pi++) {
        Pskv__Meta m;
        member_meta(&w->mb, &m, PSKV__MSG_TYPE__TABLE_OPEN);
        m.has_table_id = 1;
        m.table_id = id;
        m.table = &to;
        m.group = *w->group ? w->group : NULL; /* a refusal names it */
        rc = wsend_part(w, r, pi, &m, NULL, NULL);
        if (rc < 0) {
            wreq_fail(w, r, rc);
            goto fail;
        }
    }
    rc = pskv_wait(w, r->ts, w->request_timeout_ms + 1000);
    if (rc >= 0 && t->wire < 0)
        rc = wst_error(w, PSKV_EINVAL, "table '%s': wire '%s' is not fp32, fp16 or bf16", name,
                       o.wire);
    if (rc < 0)
        goto fail;
    if (existing >= 0) {
        wfilter_close(&w->tables[w->ntables]); /* the first open's state stays */
        return existing;
    }
    wmet_table(&w->tables[w->ntables]);
    return w->ntables++;
fail:
    wfilter_close(&w->tables[w->ntables]);
    return rc;
}

int pskv_pull_all(pskv_worker *w, int table, uint64_t **keys, float **vals, size_t *n,
                  int timeout_ms)
{
    if (!keys || !vals || !n)
        return w ? wst_error(w, PSKV_EINVAL, "pskv_pull_all without output pointers")
                 : -PSKV_EINVAL;
    *keys = NULL;
    *vals = NULL;
    *n = 0;
    if (!w || table < 0 || table >= w->ntables)
        return w ? wst_error(w, PSKV_EINVAL, "no table handle %d", table) : -PSKV_EINVAL;
    tbl *t = &w->tables[table];
    for (uint32_t p = 0; p < w->nparts; p++)
        if (w->tail[p] < 0)
            return wst_error(w, PSKV_ELOST, "table '%s': partition %u has no live copy (view "
                             "epoch %llu): its rows are gone", t->name, p,
                             (unsigned long long)w->mb.epoch);
    scan_out out = {NULL, NULL, 0, 0};
    int rc;
    req *r = wreq_new_live(w, REQ_SCAN, table, &rc);
    if (!r)
        return rc;
    r->scan = &out;
    /* the request ends (answered or failed at its deadline) before the wait gives
     * up; should it not, it is failed below: no reply reaches `out` after return */
    r->deadline_ms = tu_now_ms() + (timeout_ms > 0 ? timeout_ms : w->request_timeout_ms);
    int64_t ts = r->ts;
    for (int pi = 0; pi < r->nparts; pi++) {
        Pskv__Meta m;
        member_meta(&w->mb, &m, PSKV__MSG_TYPE__PULL);
        m.has_table_id = m.has_width = m.has_all = m.all = 1;
        m.table_id = t->id;
        m.width = t->width;
        rc = wsend_part(w, r, pi, &m, NULL, NULL);
        if (rc < 0) {
            wreq_fail(w, r, rc);
            free(out.keys);
            free(out.vals);
            return rc;
        }
    }
    rc = pskv_wait(w, ts, (timeout_ms > 0 ? timeout_ms : w->request_timeout_ms) + 2000);
    if ((r = wreq_find(w, ts)) != NULL) /* still in flight: no reply may reach `out` */
        wreq_fail(w, r, rc < 0 ? rc : -PSKV_ETIMEDOUT);
    if (rc < 0) {
        free(out.keys);
        free(out.vals);
        return rc;
    }
    *keys = out.keys;
    *vals = out.vals;
    *n = out.n;
    return 0;
}

/* ---- clocks, barriers, checkpoints, progress ----------------------------- */

int pskv_clock(pskv_worker *w)
{
    return w ? clock_end(w, 0) : -PSKV_EINVAL;
}

int64_t pskv_current_clock(const pskv_worker *w) { return atomic_load(&w->clock); }

int64_t pskv_values_clock(const pskv_worker *w) { return w->values_clock; }

uint64_t pskv_late_drops(const pskv_worker *w) { return w->late_drops; }

int pskv_barrier(pskv_worker *w, int timeout_ms)
{
    if (!w)
        return -PSKV_EINVAL;
    int64_t deadline = tu_now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
    int rc = pskv_wait_all(w, timeout_ms);
    if (rc < 0)
        return rc;
    uint64_t seq = ++w->barrier_seq;
    Pskv__Meta m;
    member_meta(&w->mb, &m, PSKV__MSG_TYPE__BARRIER);
    m.has_seq = 1;
    m.seq = seq;
    /* progress rides along: a checkpoint right after the barrier records it */
    m.has_progress_epoch = m.has_progress_step = m.has_progress_pos = 1;
    m.progress_epoch = atomic_load(&w->progress[0]);
    m.progress_step = atomic_load(&w->progress[1]);
    m.progress_pos = atomic_load(&w->progress[2]);
    m.has_clock = 1;
    m.clock = atomic_load(&w->clock);
    if (member_send(&w->mb, &m) < 0)
        return wst_error(w, PSKV_ENET, "cannot reach the scheduler for barrier %llu",
                         (unsigned long long)seq);
    while (w->barrier_done < seq) {
        if (tu_now_ms() >= deadline)
            return wst_error(w, PSKV_ETIMEDOUT, "barrier %llu not reached by every worker in %d ms",
                             (unsigned long long)seq, timeout_ms);
        wpump(w, wst_remaining(deadline));
    }
    return 0;
}

int64_t pskv_checkpoint(pskv_worker *w, int timeout_ms)
{
    if (!w)
        return -PSKV_EINVAL;
    int64_t deadline = tu_now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
    w->ckpt_done = 0;
    w->ckpt_err = 0;
    w->ckpt_req = (uint64_t)w->next_ts << 16 | 0xffff; /* unique per call */
    Pskv__Meta m;
    member_meta(&w->mb, &m, PSKV__MSG_TYPE__CHECKPOINT);
    m.has_request_id = 1;
    m.request_id = w->ckpt_req;
    if (member_send(&w->mb, &m) < 0)
        return wst_error(w, PSKV_ENET, "cannot reach the scheduler for a checkpoint");
    while (!w->ckpt_done && !w->ckpt_err) {
        if (tu_now_ms() >= deadline)
            return wst_error(w, PSKV_ETIMEDOUT, "checkpoint not complete after %d ms",
                             timeout_ms);
        wpump(w, wst_remaining(deadline));
    }
    w->ckpt_req = 0;
    return w->ckpt_err ? w->ckpt_err : (int64_t)w->ckpt_done;
}

void pskv_set_progress(pskv_worker *w, int64_t epoch, int64_t step, int64_t position)
{
    if (!w)
        return;
    atomic_store(&w->progress[0], epoch);
    atomic_store(&w->progress[1], step);
    atomic_store(&w->progress[2], position);
}

int pskv_resume_progress(const pskv_worker *w, int64_t *epoch, int64_t *step, int64_t *position)
{
    if (!w || !w->mb.resumed)
        return 0;
    if (epoch)
        *epoch = w->mb.progress[0];
    if (step)
        *step = w->mb.progress[1];
    if (position)
        *position = w->mb.progress[2];
    return 1;
}
