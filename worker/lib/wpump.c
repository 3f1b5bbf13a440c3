/* wpump: the calling thread's event loop (contract in wpump.h): one zmq_poll over
 * the scheduler socket and every data socket, each reply applied to its part
 * (on_reply), then the timers (expire). Replies are matched by request id
 * (timestamp << 16 | part) and checked against the part they answer before any
 * of their data is used. */
#define _GNU_SOURCE
#include "wpump.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "log.h"
#include "secure.h"
#include "vbuf.h"
#include "wfilter.h"
#include "wire.h"
#include "wkkt.h"
#include "wmetrics.h"
#include "wreq.h"
#include "wshm.h"
#include "wsend.h"
#include "wview.h"

/* An evaluator's pull reply carries the server's vector of worker clocks: the
 * pull's vector is, per rank, the smallest over its parts' servers (the clocks
 * every part's values reflect at least). */
static void wpump_worker_clocks(pskv_worker *w, int64_t ts, const Pskv__Meta *m)
{
    size_t n = m->n_worker_clocks < WST_MAX_WCLOCKS ? m->n_worker_clocks : WST_MAX_WCLOCKS;
    if (w->wclocks_ts != ts) {
        w->wclocks_ts = ts;
        w->nwclocks = (int)n;
        memcpy(w->wclocks, m->worker_clocks, n * sizeof *w->wclocks);
        return;
    }
    for (size_t i = 0; i < n && i < (size_t)w->nwclocks; i++)
        if (m->worker_clocks[i] < w->wclocks[i])
            w->wclocks[i] = m->worker_clocks[i];
}

/* What a reply to part p says of its region in shared memory (wshm.h): a pull's
 * values are there (msg->vals set; a reply with a values frame has its own), or the
 * server refused shared memory (the part goes again, as frames). -1: the reply
 * names another region than the part's (an answer to an earlier send): dropped. */
static int shm_reply(pskv_worker *w, int si, part *p, wire_msg *msg)
{
    const Pskv__Meta *m = msg->meta;
    if (m->type == PSKV__MSG_TYPE__PULL_REPLY && m->has_shm_len &&
        !(msg->vals = wshm_reply(p, m))) {
        LOG_D("dropped a pull reply from %s naming another region than its part's", msg->peer);
        return -1;
    }
    wshm_heard(w, p, m);
    if (m->type == PSKV__MSG_TYPE__ERROR && m->error_code == PSKV_ENOSHM)
        wshm_refused(w, si, m->error ? m->error : "refused");
    return 0;
}

/* 1 when run part p's runs follow each other from the request's first key: its
 * values are the view's, in key order, as they came. */
static int runs_in_order(const req *r, const part *p)
{
    uint64_t at = r->first;
    for (uint64_t g = p->seg0; g < p->seg0 + p->nseg; g++) {
        if (r->segs[2 * g] != at)
            return 0;
        at += r->segs[2 * g + 1];
    }
    return 1;
}

/* A view pull (pskv_pull_view) answered whole, in key order, into its one part's
 * region: the region moves to the request (held with the view, wreq.h), and the
 * values stay where the server wrote them. 0: they are copied as any pull's. */
static int view_in_place(req *r, part *p, const wire_msg *msg, size_t wd)
{
    if (r->nparts != 1 || p->idx || !p->shm || !msg->meta->has_shm_len ||
        (size_t)p->n * wd != r->view_floats || !runs_in_order(r, p))
        return 0;
    r->view_vals = msg->vals;
    r->view_part = *p;
    p->shm = NULL;
    return 1;
}

/* A view pull answered whole, in key order, over TCP: the reply's values frame moves
 * to the request (held with the view until pskv_view_release) and the values are
 * read where ZeroMQ received them. Not a frame the wire copied (unaligned, unpacked
 * by a filter, 16-bit) nor a small one (ZeroMQ keeps those inside the zmq_msg_t,
 * which moves). 0: they are copied as any pull's. */
static int view_in_frame(tbl *t, req *r, part *p, wire_msg *msg)
{
    size_t wd = t->width;
    zmq_msg_t *f = &msg->frames[msg->nframes - 1];
    if (r->nparts != 1 || p->idx || p->shm || msg->nframes < 2 || zmq_msg_size(f) < 64 ||
        (const void *)msg->vals != zmq_msg_data(f) || (size_t)p->n * wd != r->view_floats ||
        zmq_msg_size(f) != r->view_floats * sizeof(float) || !runs_in_order(r, p))
        return 0;
    wfilter_received(t, msg); /* counted as the frames came, before one moves */
    zmq_msg_init(&r->view_frame);
    zmq_msg_move(&r->view_frame, f); /* cannot fail on two initialised messages */
    r->has_view_frame = 1;
    r->view_vals = zmq_msg_data(&r->view_frame); /* the same bytes: not a small frame */
    return 1;
}

/* A pull's reply to part p (from server s): its clocks noted, its values copied to
 * the caller's array (or the view's buffer, or left in place: view_in_place). */
static void pull_reply(pskv_worker *w, req *r, part *p, wire_msg *msg, const srv *s)
{
    Pskv__Meta *m = msg->meta;
    tbl *t = &w->tables[r->table];
    if (r->has_view_frame) {
        /* a combined call's part sent again (pskv_pushpull with PSKV_PP_VIEW waiting
         * for its PUSH_ACK, or planned again): the newer reply's values replace the
         * frame an earlier one left with the request */
        zmq_msg_close(&r->view_frame);
        r->has_view_frame = 0;
        r->view_vals = NULL;
    } else if (r->view_part.shm) { /* the same, through shared memory (view_in_place) */
        wshm_release(&r->view_part);
        r->view_vals = NULL;
    }
    if (m->has_clock && m->clock < r->vclock)
        r->vclock = m->clock; /* the oldest part decides */
    if (m->has_clock && m->clock > r->vclock_hi)
        r->vclock_hi = m->clock;
    if (m->n_worker_clocks)
        wpump_worker_clocks(w, r->ts, m);
    if (m->type != PSKV__MSG_TYPE__PULL_REPLY || msg->nkeys != p->n || m->width != t->width) {
        if (!r->err)
            r->err = wst_error(w, PSKV_EPROTO,
                               "server node %u sent a malformed pull reply (%s, %llu keys)",
                               s->id, wire_type_name((int)m->type),
                               (unsigned long long)msg->nkeys);
    } else if (r->view && view_in_place(r, p, msg, t->width)) {
        wfilter_received(t, msg); /* the values stay in the region: no copy */
    } else if (r->view && view_in_frame(t, r, p, msg)) {
        /* the values stay in the received frame: no copy */
    } else if (r->view && !r->out && !(r->out = wreq_view_buffer(w, r->view_floats))) {
        if (!r->err)
            r->err = wst_error(w, PSKV_ENOMEM, "out of memory for view %lld's %zu values",
                               (long long)r->ts, r->view_floats);
    } else if (!p->idx) {
        size_t wd = t->width;
        const float *src = msg->vals;
        wfilter_received(t, msg);
        for (uint64_t g = p->seg0; g < p->seg0 + p->nseg; g++) {
            uint64_t f = r->segs[2 * g], c = r->segs[2 * g + 1];
            memcpy(r->out + (f - r->first) * wd, src, c * wd * sizeof(float));
            src += c * wd;
        }
    } else {
        size_t wd = t->width;
        wfilter_received(t, msg);
        for (uint64_t k = 0; k < p->n; k++)
            memcpy(r->out + (size_t)p->idx[k] * wd, msg->vals + k * wd, wd * sizeof(float));
        if (t->kkt)
            wkkt_pulled(t->kkt, wsend_part_keys(r, p), msg->vals, p->n, t->width,
                        r->kkt_floor);
    }
}

/* Applies a reply from server si to the part it answers: a refusal (stale view,
 * copy on its way) schedules the part again, an error fails the request, a pull's
 * values go to the caller's array; the request ends with its last part. */
static void on_reply(pskv_worker *w, int si, wire_msg *msg)
{
    Pskv__Meta *m = msg->meta;
    if (m->type == PSKV__MSG_TYPE__PULL_REPLY && m->has_acked_push) {
        /* the PUSH_ACK of an earlier push rides on this reply: answered first */
        Pskv__Meta am = *m;
        am.type = PSKV__MSG_TYPE__PUSH_ACK;
        am.request_id = m->acked_push;
        am.has_acked_push = am.has_shm_len = am.has_pull_after = 0;
        wire_msg ack = {.meta = &am};
        memcpy(ack.peer, msg->peer, sizeof ack.peer);
        on_reply(w, si, &ack);
    }
    if (m->has_refused && m->refused > w->srv[si].refused) {
        /* a push this server will see again: no clock of this worker may reach any
         * server before it has landed (whether or not the request is still here) */
        w->srv[si].refused = m->refused;
        wview_hold_clocks(w);
    }
    int64_t ts = (int64_t)(m->request_id >> 16);
    int pi = (int)(m->request_id & 0xffff);
    req *r = m->has_request_id ? wreq_find(w, ts) : NULL;
    if (!r || pi >= r->nparts || r->parts[pi].server != si || r->parts[pi].done) {
        LOG_D("dropped a %s for no request in flight (id %llu) from %s",
              wire_type_name((int)m->type), (unsigned long long)m->request_id, msg->peer);
        return;
    }
    part *p = &r->parts[pi];
    srv *s = &w->srv[si];
    resend_heard(&s->heard, p->sent_ms, tu_now_ms());
    if (shm_reply(w, si, p, msg) < 0)
        return;
    if (m->type == PSKV__MSG_TYPE__ERROR && m->error_code == PSKV_EKEYMISS && p->key_sig &&
        (r->type == REQ_PUSH || r->type == REQ_PULL)) {
        /* keycache: the server lacks the key list; at once, with the keys, in place
         * (a server that no longer owns the rows refuses it as stale: re-planned) */
        wfilter_miss(&w->tables[r->table], s->id, p->key_sig);
        int err = wsend_data_part(w, r, pi, 1, r->type == REQ_PUSH ? wsend_inflight_floor(w) : 0);
        if (err < 0) {
            r->err = err;
            wreq_finish(w, r);
        }
        return;
    }
    if (m->type == PSKV__MSG_TYPE__ERROR &&
        (m->error_code == PSKV_ESTALE || m->error_code == PSKV_ENOTREADY ||
         m->error_code == PSKV_ENOSHM) &&
        r->type != REQ_OPEN && r->type != REQ_SCAN && r->type != REQ_LR) {
        /* planned on a view the server no longer serves, or a copy still on its
         * way: not applied; planned again on the latest view shortly */
        LOG_D("request %lld part %d: %s; sending again", (long long)r->ts, pi,
              m->error ? m->error : "stale");
        if (!p->retry_at)
            w->nretry++;
        p->retry_at = tu_now_ms() + RETRY_DELAY_MS;
        return;
    }
    /* a reply says which clock its values reflect; a worker left behind (its clock
     * closed without it under bsp with backups) moves up to it. Only bsp's: an
     * async or ssp reply carries the slowest clock of the workers the server
     * counts, which is ahead of this worker's only while the view has it dead
     * (silent for a while on a loaded machine): it would skip steps it never did.
     * Except before this process's first clock: a resumed job's worker, or one
     * taking over a dead worker's rank, starts where the servers' clocks are */
    int64_t mine = atomic_load(&w->clock);
    if (m->has_clock && m->clock > mine && r->table >= 0 && r->table < w->ntables &&
        (w->tables[r->table].bsp || mine == 0))
        atomic_store(&w->clock, m->clock);
    if (m->type == PSKV__MSG_TYPE__ERROR && m->error_code == PSKV_ELATE) {
        if (!r->err) { /* once per push, whatever the number of servers */
            r->err = wst_error(w, PSKV_ELATE, "push %lld dropped by server node %u: late "
                               "(clock %lld had closed)", (long long)r->ts, s->id,
                               (long long)m->clock);
            w->late_drops++;
            wmet_worker(w);
        }
    } else if (m->type == PSKV__MSG_TYPE__ERROR) {
        if (!r->err)
            r->err = wst_error(w, m->error_code ? m->error_code : PSKV_EPROTO,
                               "server node %u (%s:%d): %s", s->id, s->host, s->port,
                               m->error ? m->error : pskv_strerror(m->error_code));
    } else if (r->type == REQ_SCAN) {
        tbl *t = &w->tables[r->table];
        scan_out *o = r->scan;
        size_t k = msg->nkeys, wd = t->width;
        if (m->type != PSKV__MSG_TYPE__PULL_REPLY || m->width != t->width ||
            (k && !msg->keys)) {
            if (!r->err)
                r->err = wst_error(w, PSKV_EPROTO, "server node %u sent a malformed whole-table "
                                   "reply (%s)", s->id, wire_type_name((int)m->type));
        } else if (k && o->n + k > o->cap) {
            size_t cap = o->cap ? o->cap : 1024;
            while (cap < o->n + k)
                cap *= 2;
            uint64_t *gk = realloc(o->keys, cap * sizeof *gk);
            if (gk)
                o->keys = gk;
            float *gv = realloc(o->vals, cap * wd * sizeof *gv);
            if (gv)
                o->vals = gv;
            if (gk && gv)
                o->cap = cap;
            else if (!r->err)
                r->err = wst_error(w, PSKV_ENOMEM, "out of memory gathering the table");
        }
        if (!r->err && k) {
            memcpy(o->keys + o->n, msg->keys, k * sizeof *o->keys);
            memcpy(o->vals + o->n * wd, msg->vals, k * wd * sizeof *o->vals);
            o->n += k;
        }
    } else if (r->pp && m->type == PSKV__MSG_TYPE__PUSH_ACK) {
        p->pp_acked = 1; /* pskv_pushpull (bsp, replicas, a re-send): and its reply? */
        if (!p->pp_reply)
            return;
    } else if (r->pp && m->type == PSKV__MSG_TYPE__PULL_REPLY && !p->pp_reply) {
        pull_reply(w, r, p, msg, s);
        p->pp_reply = 1; /* the part ends now, or with the PUSH_ACK the reply announces */
        if (m->has_pull_after && m->pull_after && !p->pp_acked && !r->err)
            return;
    } else if (r->pp && m->type == PSKV__MSG_TYPE__PULL_REPLY) {
        /* the reply to the other send of a part asked again (resend_due), while the
         * part waits for its PUSH_ACK: the values written stand (not a protocol error) */
        return;
    } else if (r->type == REQ_PULL) {
        pull_reply(w, r, p, msg, s);
    } else {
        Pskv__MsgType want = r->type == REQ_PUSH ? PSKV__MSG_TYPE__PUSH_ACK
                             : r->type == REQ_LR ? PSKV__MSG_TYPE__TABLE_LR_ACK
                                                 : PSKV__MSG_TYPE__TABLE_OPEN_ACK;
        if (m->type != want && !r->err)
            r->err = wst_error(w, PSKV_EPROTO, "server node %u answered %s to a %s", s->id,
                               wire_type_name((int)m->type), wire_type_name((int)want));
    }
    p->done = p->answered = 1;
    if (p->own && r->type == REQ_PUSH && !r->err && w->failover_node) {
        LOG_I("failover: first push acknowledged by a new owner %lld ms after the view that "
              "replaced server node %u", (long long)(tu_now_ms() - w->failover_ms),
              w->failover_node);
        w->failover_node = 0;
    }
    if (--r->pending == 0)
        wreq_finish(w, r);
}

/* The timers, after every poll: parts due again and silent ones (every 50 ms),
 * then the clock held behind them, draining pushes, and request deadlines. */
static void expire(pskv_worker *w)
{
    int64_t now0 = tu_now_ms();
    secure_tick(&w->sec); /* --insecure: the warning every 60 s */
    if (w->nretry || (w->retry_ms && now0 >= w->next_silence_check)) {
        wsend_resend_due(w, 0);
        w->next_silence_check = now0 + 50;
    }
    if (w->catchup_ts) /* after the re-sends: the clock goes out behind them */
        wview_catch_up(w);
    wsend_clock_again(w, now0);
    int64_t now = tu_now_ms();
    for (int i = 0; i < w->window; i++) {
        req *r = &w->reqs[i];
        if (r->type != REQ_FREE && r->draining_ms) {
            vbuf_drain(w, r, now);
            continue;
        }
        if (r->type == REQ_FREE || now < r->deadline_ms)
            continue;
        for (int p = 0; p < r->nparts; p++)
            if (!r->parts[p].done) {
                srv *s = &w->srv[r->parts[p].server];
                r->err = wst_error(w, PSKV_ETIMEDOUT,
                                   "request %lld: no answer from server node %u (%s:%d) within %d ms",
                                   (long long)r->ts, s->id, s->host, s->port,
                                   w->request_timeout_ms);
                break;
            }
        wreq_finish(w, r);
    }
}

/* Like wpump, but first looks again without sleeping for up to spin_us: a reply to
 * a small request usually comes within tens of microseconds, and sleeping costs a
 * wake-up per reply (the 4 KiB step is a third faster). Not for large transfers,
 * where the spinning core is better left to ZeroMQ's I/O threads. */
void wpump_spin(pskv_worker *w, long timeout_ms, int spin_us)
{
    zmq_pollitem_t *items = w->items;
    if (!items) /* no view applied (a failed open): nothing to poll */
        return;
    /* test hook (wtest.h): the scheduler's messages read late, polled for again
     * when they may be read */
    long sched_wait = 0;
    int sched_late = w->test.sched_seen && !wtest_sched_ready(&w->test, tu_now_ms(), &sched_wait);
    if (sched_late && timeout_ms > sched_wait)
        timeout_ms = sched_wait;
    long keys_wait = 0; /* PSKV_TEST_FIRST_VIEW_DELAY: the view's keys, once due */
    if (wtest_view_keys_held(&w->test)) {
        if (wtest_view_keys_ready(&w->test, w->mb.rank, tu_now_ms(), &keys_wait))
            secure_allow_view(&w->sec, w->mb.view);
        else if (timeout_ms > keys_wait)
            timeout_ms = keys_wait;
    }
    items[0] = (zmq_pollitem_t){w->mb.sock, 0, sched_late ? 0 : ZMQ_POLLIN, 0};
    for (int i = 0; i < w->nservers; i++) /* a dead server's (closed): no socket, no fd */
        items[i + 1] = w->srv[i].sock ? (zmq_pollitem_t){w->srv[i].sock, 0, ZMQ_POLLIN, 0}
                                      : (zmq_pollitem_t){NULL, -1, 0, 0};
    int n = 0;
    int64_t t0 = tu_now_ns(), spin_until = tu_now_us() + spin_us;
    while (spin_us > 0 && timeout_ms > 0 && (n = zmq_poll(items, w->nservers + 1, 0)) == 0 &&
           tu_now_us() < spin_until)
        ;
    /* a part to send again is due within milliseconds (PSKV_ESTALE/ENOTREADY): no
     * sleeping past it waiting for a message that may not come */
    if (w->nretry && timeout_ms > RETRY_DELAY_MS)
        timeout_ms = RETRY_DELAY_MS;
    /* ZeroMQ letting go of a draining push's values wakes no poll: look every ms */
    if (w->ndraining && timeout_ms > 1)
        timeout_ms = 1;
    if (n == 0)
        n = zmq_poll(items, w->nservers + 1, timeout_ms);
    atomic_fetch_add(&w->wait_ns, tu_now_ns() - t0);
    if (n > 0) {
        int polled = w->nservers;
        long unused;
        if ((items[0].revents & ZMQ_POLLIN) &&
            wtest_sched_ready(&w->test, tu_now_ms(), &unused)) {
            /* a view may grow the items (realloc keeps what poll wrote) and close
             * a dead server's socket */
            wview_on_scheduler(w);
            wtest_sched_read(&w->test);
            items = w->items;
        }
        for (int i = 0; i < polled; i++) {
            if (!(items[i + 1].revents & ZMQ_POLLIN) || !w->srv[i].sock)
                continue;
            for (;;) {
                wire_msg msg;
                char why[300];
                int rc = wire_recv(w->srv[i].sock, 0, &msg, why, sizeof why);
                if (rc == 0)
                    on_reply(w, i, &msg);
                else if (rc != -PSKV_ETIMEDOUT)
                    LOG_W("dropped a message from server %s:%d: %s", w->srv[i].host,
                          w->srv[i].port, why);
                wire_msg_close(&msg);
                if (rc == -PSKV_ETIMEDOUT)
                    break;
            }
        }
    }
    expire(w);
    wfilter_publish(w, 0);
}
