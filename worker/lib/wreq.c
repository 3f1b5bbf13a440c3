/* wreq: the request window (contract in wreq.h). A slot is REQ_FREE or holds one
 * request from wreq_new until wreq_retire frees it; one whose lent values ZeroMQ
 * still holds stays, draining, until vbuf_drain retires it again. */
#include "wreq.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "vbuf.h"
#include "wmetrics.h"
#include "wpump.h"
#include "wshm.h"

/* A free request slot, waiting (bounded) while the window is full. */
static req *take_slot(pskv_worker *w)
{
    int64_t deadline = tu_now_ms() + w->request_timeout_ms;
    for (;;) {
        for (int i = 0; i < w->window; i++)
            if (w->reqs[i].type == REQ_FREE)
                return &w->reqs[i];
        if (tu_now_ms() >= deadline)
            return NULL;
        wpump(w, wst_remaining(deadline));
    }
}

req *wreq_new(pskv_worker *w, enum req_type type, int table, int nparts)
{
    req *r = take_slot(w);
    if (!r) {
        wst_error(w, PSKV_ETIMEDOUT, "window of %d requests still full after %d ms", w->window,
                  w->request_timeout_ms);
        return NULL;
    }
    r->parts = calloc((size_t)nparts, sizeof *r->parts);
    if (!r->parts) {
        wst_error(w, PSKV_ENOMEM, "out of memory");
        return NULL;
    }
    r->type = type;
    r->table = table;
    r->ts = w->next_ts++;
    r->t0_ns = tu_now_ns();
    r->clock = atomic_load(&w->clock);
    r->nparts = r->pending = nparts;
    r->deadline_ms = tu_now_ms() + w->request_timeout_ms;
    r->vclock = INT64_MAX;
    r->vclock_hi = -1;
    w->inflight++;
    return r;
}

/* A request with one part per live server (parts[i].server set); NULL with the
 * error in *err (and last_error) when no server lives or the window stays full. */
req *wreq_new_live(pskv_worker *w, enum req_type type, int table, int *err)
{
    int nlive = 0;
    for (int i = 0; i < w->nservers; i++)
        nlive += w->srv[i].alive;
    if (!nlive) {
        *err = wst_error(w, PSKV_ELOST, "no live server in view epoch %llu",
                         (unsigned long long)w->mb.epoch);
        return NULL;
    }
    req *r = wreq_new(w, type, table, nlive);
    *err = r ? 0 : -PSKV_ETIMEDOUT;
    for (int pi = 0, si = 0; r && pi < nlive; pi++, si++) {
        while (!w->srv[si].alive)
            si++;
        r->parts[pi].server = si;
    }
    return r;
}

void wreq_release(req *r)
{
    for (int i = 0; r->parts && i < r->nparts; i++) {
        wshm_release(&r->parts[i]);
        if (r->parts[i].own) {
            free(r->parts[i].idx);
            vbuf_unref(NULL, r->parts[i].own);
        }
    }
    if (r->pp_dst) /* a combined call's staged values */
        free(r->out);
    if (r->view) { /* a view pull that ended without being held: its memory goes */
        free(r->out);
        wshm_release(&r->view_part);
        if (r->has_view_frame)
            zmq_msg_close(&r->view_frame);
        r->has_view_frame = 0;
    }
    wshm_release(&r->pbuf); /* a push buffer's region, after the parts' borrows */
    free(r->pbuf_own);
    free(r->parts);
    free(r->segs);
    free(r->idx);
    vbuf_unref(NULL, r->buf);
    vbuf_unref(NULL, r->lend);
    memset(r, 0, sizeof *r);
}

static void record_failure(pskv_worker *w, int64_t ts, int err)
{
    if (w->nfailed >= FAILED_KEEP && w->failed[w->nfailed % FAILED_KEEP].ts > w->forgotten_ts)
        w->forgotten_ts = w->failed[w->nfailed % FAILED_KEEP].ts;
    w->failed[w->nfailed % FAILED_KEEP].ts = ts;
    w->failed[w->nfailed % FAILED_KEEP].err = err;
    w->nfailed++;
}

/* A view's copy buffer of `floats` values goes back: kept for the next view when
 * it is the larger (one spare, so that a pull a step does not allocate), else freed. */
static void view_give_back(pskv_worker *w, float *b, size_t floats)
{
    if (!b)
        return;
    if (w->view_spare && w->view_spare_floats >= floats) {
        free(b);
        return;
    }
    free(w->view_spare);
    w->view_spare = b;
    w->view_spare_floats = floats;
}

float *wreq_view_buffer(pskv_worker *w, size_t floats)
{
    if (w->view_spare && w->view_spare_floats >= floats) {
        float *b = w->view_spare;
        w->view_spare = NULL;
        return b;
    }
    return malloc(floats ? floats * sizeof(float) : 1);
}

int wreq_pp_stage(pskv_worker *w, req *r)
{
    if (!r->pp || !r->out || r->view || r->pp_dst || (r->nparts < 2 && w->R < 2))
        return 0;
    size_t floats = r->bytes / sizeof(float);
    float *b = wreq_view_buffer(w, floats);
    if (!b)
        return wst_error(w, PSKV_ENOMEM, "out of memory for pushpull %lld's %zu values",
                         (long long)r->ts, floats);
    r->pp_dst = r->out;
    r->out = b;
    r->view_floats = floats;
    return 0;
}

/* Frees the slot of an ended request, unless ZeroMQ still holds the caller's
 * lent values: then it stays in the window, `draining`, until vbuf_drain (from
 * wpump's timers) sees them released, so pskv_wait cannot return while ZeroMQ
 * may still read them. */
void wreq_retire(pskv_worker *w, req *r)
{
    for (int pi = 0; pi < r->nparts; pi++) { /* late replies to it are dropped */
        part *p = &r->parts[pi];
        if (p->retry_at) {
            p->retry_at = 0;
            w->nretry--;
        }
        p->done = 1;
    }
    if (vbuf_lent_held(r)) {
        if (!r->draining_ms) {
            r->draining_ms = tu_now_ms();
            w->ndraining++;
            w->lent_drained++;
        }
        return;
    }
    if (r->draining_ms)
        w->ndraining--;
    if (r->view || r->pp_dst) { /* failed or abandoned: not held (wreq_finish holds the
                                   others); a combined call's staging buffer, copied or not */
        view_give_back(w, r->out, r->view_floats);
        r->out = NULL;
        w->nviews -= r->view;
    }
    wreq_release(r);
    w->inflight--;
}

/* A completed view pull: its values (in place in its region, or its buffer) move
 * to a free entry of w->views until pskv_view_release. */
static void hold_view(pskv_worker *w, req *r)
{
    wview_held *v = NULL;
    for (int i = 0; i < PSKV_MAX_VIEWS && !v; i++)
        if (!w->views[i].ts)
            v = &w->views[i];
    if (!v) { /* cannot be: nviews bounds them at the pull */
        r->err = wst_error(w, PSKV_EINVAL, "view %lld: no free entry", (long long)r->ts);
        return;
    }
    v->ts = r->ts;
    if (r->view_vals) /* in place: the server's shared-memory region, or a TCP frame */
        w->views_in_place++;
    else
        w->views_copied++;
    if (r->has_view_frame) { /* over TCP: the frame moves to the entry (same bytes) */
        zmq_msg_init(&v->frame);
        zmq_msg_move(&v->frame, &r->view_frame);
        v->has_frame = 1;
        r->has_view_frame = 0;
        w->views_in_frame++;
    }
    v->vals = r->view_vals ? r->view_vals : r->out;
    v->own = r->view_vals ? NULL : r->out;
    v->shm = r->view_part;
    v->floats = r->view_floats;
    if (r->view_vals) /* the copy buffer, if one was made for an earlier send, goes */
        view_give_back(w, r->out, r->view_floats);
    r->out = NULL;
    r->view_part.shm = NULL;
    r->view = 0;
}

void wreq_pbuf_free(wpbuf *b)
{
    if (b->res.shm)
        wshm_release(&b->res);
    else
        free(b->vals);
    memset(b, 0, sizeof *b);
}

wview_held *wreq_view(pskv_worker *w, int64_t ts)
{
    for (int i = 0; ts > 0 && i < PSKV_MAX_VIEWS; i++)
        if (w->views[i].ts == ts)
            return &w->views[i];
    return NULL;
}

void wreq_view_release(pskv_worker *w, wview_held *v)
{
    view_give_back(w, v->own, v->floats);
    wshm_release(&v->shm);
    if (v->has_frame) /* ZeroMQ frees the received bytes */
        zmq_msg_close(&v->frame);
    memset(v, 0, sizeof *v);
    w->nviews--;
}

void wreq_finish(pskv_worker *w, req *r)
{
    wmet_done(w, r);
    if ((r->type == REQ_PULL || r->pp) && !r->err && r->vclock != INT64_MAX) {
        w->values_clock = r->vclock;
        w->values_clock_hi = r->vclock_hi;
    }
    if (r->view && !r->err && !r->view_vals && !r->out && r->view_floats)
        r->err = wst_error(w, PSKV_EPROTO, "view %lld: completed with no values",
                           (long long)r->ts);
    if (r->view && !r->err)
        hold_view(w, r);
    if (r->pp_dst && !r->err) /* every part answered, none refused */
        memcpy(r->pp_dst, r->out, r->view_floats * sizeof(float));
    if (r->err) {
        record_failure(w, r->ts, r->err);
        if (r->err == -PSKV_ELATE)
            LOG_D("push %lld dropped: late", (long long)r->ts);
        else
            LOG_W("request %lld failed: %s", (long long)r->ts, w->last_error);
    }
    wreq_retire(w, r);
}

/* Abandons a request that could not be sent whole: parts already sent are
 * answered into nothing (their replies no longer match a request). */
int64_t wreq_fail(pskv_worker *w, req *r, int err)
{
    record_failure(w, r->ts, err);
    int64_t ts = r->ts, deadline = tu_now_ms() + 2 * LENT_RESET_MS + 1000;
    wreq_retire(w, r);
    /* parts already sent may still read lent values, which the caller is free to
     * reuse once this returns: wait for ZeroMQ to let go (vbuf_drain, from wpump) */
    while (wreq_find(w, ts) && tu_now_ms() < deadline)
        wpump(w, wst_remaining(deadline));
    if (wreq_find(w, ts))
        LOG_E("push %lld failed, and ZeroMQ still holds its values after %lld ms: keep them "
              "until pskv_worker_close", (long long)ts, (long long)(2 * LENT_RESET_MS + 1000));
    return err;
}

int wreq_failure_of(const pskv_worker *w, int64_t ts)
{
    int n = w->nfailed < FAILED_KEEP ? w->nfailed : FAILED_KEEP;
    for (int i = 0; i < n; i++)
        if (w->failed[i].ts == ts)
            return w->failed[i].err;
    return 0;
}
