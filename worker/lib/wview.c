/* wview: the cluster view, the scheduler's answers, the clock hold, and the
 * heartbeat thread (contract in wview.h).
 *
 * Design: the view arrives on the scheduler socket, which the calling thread
 * polls with the data sockets (wpump); applying it re-points each partition's
 * head and tail, and parts it strands are re-planned at once (wsend_resend_due).
 * The heartbeat thread has a socket of its own, so a worker that computes for a
 * long time without entering the library stays alive; it shares with the calling
 * thread only atomics (its stop flag, the clock and the progress it reports) and
 * what is fixed at join. */
#define _GNU_SOURCE
#include "wview.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "log.h"
#include "member.h"
#include "net.h"
#include "secure.h"
#include "slice.h"
#include "timeutil.h"
#include "wfilter.h"
#include "wire.h"
#include "wsend.h"
#include "wshm.h"

static int srv_index(const pskv_worker *w, uint32_t id)
{
    for (int i = 0; i < w->nservers; i++)
        if (w->srv[i].id == id)
            return i;
    return -1;
}

/* Every server's next clock waits until each push sent so far is acknowledged
 * (wview_catch_up): after a placement change, or a push refused to be sent again,
 * a re-sent push then reaches its server before the clock that covers it. */
void wview_hold_clocks(pskv_worker *w)
{
    for (int i = 0; i < w->nservers; i++)
        w->srv[i].catchup = 1;
    w->catchup_ts = w->next_ts;
    w->catchup_epoch = w->mb.epoch;
}

/* Server k was replaced for good (a server declared dead never serves again):
 * its connection goes, and with it what ZeroMQ queued there (linger 0), lent
 * values too (logged when some were: a draining push then ends); kept, it would
 * reconnect for ever and hold its buffers. */
static void close_dead(pskv_worker *w, int k)
{
    int held = 0;
    for (int i = 0; i < w->window; i++) {
        const req *r = &w->reqs[i];
        for (int pi = 0; r->type == REQ_PUSH && r->lent && pi < r->nparts; pi++)
            if (r->parts[pi].server == k && !r->parts[pi].own && !r->parts[pi].answered) {
                held++;
                break;
            }
    }
    if (held)
        LOG_W("closing the connection to server node %u (%s:%d), which died or left: it held the "
              "values of %d pushes", w->srv[k].id, w->srv[k].host, w->srv[k].port, held);
    zmq_close(w->srv[k].sock);
    w->srv[k].sock = NULL;
    wshm_drop(w, k); /* a late write of a zombie lands in a retired segment */
}

/* A server slot for a server not seen before: one whose server the scheduler has
 * forgotten and that no request in the window still names, else a new one (the
 * slot arrays grow by one). So the slots, and the per-server arrays every request
 * sizes by them, stay bounded over a long job with many replacements. -1 when out
 * of memory. */
static int free_slot(pskv_worker *w, const Pskv__View *v)
{
    for (int k = 0; k < w->nservers; k++) {
        if (w->srv[k].sock || member_view_node(v, w->srv[k].id))
            continue;
        int used = 0;
        for (int i = 0; i < w->window && !used; i++) {
            const req *r = &w->reqs[i];
            for (int pi = 0; r->type != REQ_FREE && pi < r->nparts; pi++)
                used |= r->parts[pi].server == k;
        }
        if (!used)
            return k;
    }
    size_t ns = (size_t)w->nservers + 1;
    srv *s2 = realloc(w->srv, ns * sizeof *s2);
    if (s2)
        w->srv = s2;
    zmq_pollitem_t *it = realloc(w->items, (ns + 1) * sizeof *it);
    if (it)
        w->items = it;
    uint64_t *cnt = realloc(w->count, ns * sizeof *cnt);
    if (cnt)
        w->count = cnt;
    int *pi = realloc(w->pindex, ns * sizeof *pi);
    if (pi)
        w->pindex = pi;
    if (!s2 || !it || !cnt || !pi)
        return -1;
    w->srv[ns - 1].sock = NULL; /* counted at once, so close releases the socket */
    return w->nservers++;
}

/* Applies the latest view: servers (dialled once each, closed once dead or gone
 * from the view, their slots used again for new ones), their
 * liveness, and the head and tail of every partition. Called at open and on every
 * new view. */
int wview_apply(pskv_worker *w, int64_t max_message)
{
    Pskv__View *v = w->mb.view;
    int ns = 0, nw = 0;
    for (size_t i = 0; i < v->n_nodes; i++) {
        ns += v->nodes[i]->role == PSKV__ROLE__SERVER;
        /* ranks, not nodes: a rank taken over after a death is listed twice */
        if (v->nodes[i]->role == PSKV__ROLE__WORKER && v->nodes[i]->rank + 1 > nw)
            nw = v->nodes[i]->rank + 1;
    }
    if (w->evaluator && v->service && v->has_workers)
        nw = (int)v->workers; /* its ranks are the servers' clock slots: its group's size */
    if (ns == 0 || ns > MAX_PARTS)
        return wst_error(w, PSKV_EPROTO, "the view lists %d servers", ns);
    if (!v->partitions || !v->replicas || v->n_chains != (size_t)v->partitions * v->replicas)
        return wst_error(w, PSKV_EPROTO, "the view has no valid partition chains");
    if (w->nparts && (v->partitions != w->nparts || v->replicas != w->R))
        return wst_error(w, PSKV_EPROTO, "the view changed the partition count");
    long unused;
    if (wtest_view_keys_ready(&w->test, w->mb.rank, tu_now_ms(), &unused))
        secure_allow_view(&w->sec, v); /* the workers' keys, for the all-reduce socket */
    for (int k = 0; k < w->nservers; k++) /* forgotten by the scheduler: dead */
        if (!member_view_node(v, w->srv[k].id)) {
            w->srv[k].alive = 0;
            if (w->srv[k].sock)
                close_dead(w, k);
        }
    for (size_t i = 0; i < v->n_nodes; i++) {
        Pskv__Node *n = v->nodes[i];
        if (n->role != PSKV__ROLE__SERVER)
            continue;
        int dead = member_node_gone(n); /* dead, or drained and left */
        int k = srv_index(w, n->id);
        if (k < 0 && dead)
            continue; /* never dialled: no chain lists it */
        if (k < 0) {
            int was = w->nservers;
            k = free_slot(w, v);
            if (k < 0)
                return wst_error(w, PSKV_ENOMEM, "out of memory");
            if (k < was)
                LOG_I("server node %u takes the slot of server node %u, which left the view",
                      n->id, w->srv[k].id);
            srv *s = &w->srv[k];
            memset(s, 0, sizeof *s);
            s->id = n->id;
            snprintf(s->host, sizeof s->host, "%s", n->host ? n->host : "");
            s->port = (int)n->port;
            snprintf(s->key, sizeof s->key, "%s", n->pubkey ? n->pubkey : "");
            s->sock = net_socket(w->ctx, ZMQ_DEALER, max_message, 0);
            if (!s->sock || secure_dial(&w->sec, s->sock, s->key) < 0 ||
                net_connect(s->sock, s->host, s->port) < 0)
                return wst_error(w, PSKV_ENET, "cannot connect to server %s:%d: %s", s->host,
                                 s->port, zmq_strerror(errno));
        }
        w->srv[k].alive = !dead;
        if (!w->srv[k].alive && w->srv[k].sock)
            close_dead(w, k);
    }
    int first = !w->head, moved = 0;
    if (first) {
        w->nparts = v->partitions;
        w->R = v->replicas;
        w->head = malloc(w->nparts * sizeof *w->head);
        w->tail = malloc(w->nparts * sizeof *w->tail);
        w->chains = malloc(v->n_chains * sizeof *w->chains);
        if (!w->head || !w->tail || !w->chains)
            return wst_error(w, PSKV_ENOMEM, "out of memory");
    }
    /* any chain changed, a middle replica too: a server counts only the clocks sent
     * on its latest placement, so this worker's goes again once its re-sends are out
     * (wview_catch_up) */
    moved = !first && memcmp(w->chains, v->chains, v->n_chains * sizeof *w->chains) != 0;
    memcpy(w->chains, v->chains, v->n_chains * sizeof *w->chains);
    for (uint32_t p = 0; p < w->nparts; p++) {
        const uint32_t *c = &v->chains[(size_t)p * w->R];
        int head = -1, tail = -1;
        for (uint32_t j = 0; j < w->R && c[j]; j++) {
            int k = srv_index(w, c[j]);
            if (j == 0)
                head = k;
            tail = k;
        }
        moved |= !first && (head != w->head[p] || tail != w->tail[p]);
        w->head[p] = head;
        w->tail[p] = tail;
    }
    if (moved)
        wview_hold_clocks(w);
    w->nworkers = nw;
    if (v->has_stop_early && v->stop_early && !w->stop_early) {
        w->stop_early = 1;
        snprintf(w->stop_reason, sizeof w->stop_reason, "%s",
                 v->stop_reason ? v->stop_reason : "early stopping");
        LOG_I("the scheduler stops the job early: %s", w->stop_reason);
    }
    return 0;
}

void wview_on_scheduler(pskv_worker *w)
{
    for (;;) {
        wire_msg msg;
        int rc = member_recv(&w->mb, &msg);
        if (rc == -PSKV_ETIMEDOUT)
            return;
        if (rc < 0)
            continue;
        Pskv__Meta *m = msg.meta;
        if (!m) { /* a new view: parts sent to a server that died go to the new owners */
            if (wview_apply(w, w->max_message) < 0) {
                LOG_E("view epoch %llu: %s", (unsigned long long)w->mb.epoch, w->last_error);
            } else {
                wsend_resend_due(w, 1);
            }
        } else if (m->type == PSKV__MSG_TYPE__BARRIER_DONE && m->seq > w->barrier_done)
            w->barrier_done = m->seq;
        else if (m && m->type == PSKV__MSG_TYPE__FINISH_ACK)
            w->finish_acked = 1;
        else if (m && m->type == PSKV__MSG_TYPE__STOP && w->evaluator)
            w->job_stopping = 1; /* the evaluator hears the end of the job as servers do */
        else if (m && m->type == PSKV__MSG_TYPE__CHECKPOINT_ACK && m->request_id == w->ckpt_req)
            w->ckpt_done = m->seq ? m->seq : 1;
        else if (m && m->type == PSKV__MSG_TYPE__ERROR && w->ckpt_req &&
                 m->request_id == w->ckpt_req) {
            w->ckpt_err = wst_error(w, m->error_code ? m->error_code : PSKV_EIO,
                                    "checkpoint: %s", m->error ? m->error : "failed");
        }
        else if (m && m->type == PSKV__MSG_TYPE__ERROR)
            wst_error(w, m->error_code, "scheduler: %s", m->error ? m->error : "error");
        wire_msg_close(&msg);
    }
}

/* Whether every part of pskv_pushpull request r still open has had its push
 * acknowledged (pp_acked: a PUSH_ACK to its latest send, as with replicas) and
 * waits only for its pull's reply. */
static int pp_pushes_landed(const req *r)
{
    for (int p = 0; p < r->nparts; p++)
        if (!r->parts[p].done && !r->parts[p].pp_acked)
            return 0;
    return 1;
}

/* After a placement change (a death, a join) or a push refused to be sent again
 * (wview_hold_clocks), this worker's clock goes to the servers only once every
 * push sent before is acknowledged (bsp: sent again, see below): a part re-sent to
 * a new owner, or refused and planned again, then reaches its server before the
 * clock that covers it, as the ssp bound and bsp closes need. */
void wview_catch_up(pskv_worker *w)
{
    for (int i = 0; i < w->window; i++) {
        req *r = &w->reqs[i];
        if (r->type != REQ_PUSH || r->ts >= w->catchup_ts || r->draining_ms)
            continue; /* a draining push was answered: only ZeroMQ's hold remains */
        if (!w->tables[r->table].bsp) {
            if (r->pp && pp_pushes_landed(r))
                continue; /* only its pull waits, maybe on this very clock (ssp) */
            return; /* not acknowledged yet */
        }
        /* a bsp push is acknowledged only when its clock closes, which needs this
         * very clock. Servers refuse every bsp part planned on a view older than
         * their placement, held or arriving: enough that each such part has been
         * answered and none waits to be sent again (the clock then follows every
         * part on its connection) */
        for (int p = 0; p < r->nparts; p++) {
            part *pt = &r->parts[p];
            if (!pt->done && (pt->retry_at || pt->epoch < w->catchup_epoch))
                return;
        }
    }
    if (wsend_clock(w, atomic_load(&w->clock) - 1, 1, 0) < 0)
        LOG_W("%s", w->last_error);
    for (int i = 0; i < w->nservers; i++)
        w->srv[i].catchup = 0;
    w->catchup_ts = 0;
}

/* ---- heartbeat thread ---------------------------------------------------- */

/* The heartbeat thread's body: touches nothing but its own socket `s`; of w it
 * reads only the atomics (hb_stop, clock, progress), the tables' traffic under its
 * mutex (wfilter_traffic) and what wview_heartbeat_start wrote before starting it (never w->mb: the caller's thread applies new views to
 * it at any time). */
static void *heartbeat_main(void *arg)
{
    pskv_worker *w = arg;
    /* a short slice: woken for a heartbeat, it runs before the caller's compute
     * threads finish their own slices, so a busy worker is not taken for dead */
    if (w->hb_slice_us > 0)
        slice_apply(w->hb_slice_us, "libpskv's heartbeat thread");
    void *s = member_hb_socket(w->ctx, &w->sec, w->sched);
    if (!s)
        return NULL;
    const int period = w->hb_period_ms;
    int64_t next = tu_now_ms();
    while (!atomic_load(&w->hb_stop)) {
        Pskv__Meta hb;
        member_hb_meta(&hb, w->hb_job, w->hb_node);
        hb.has_clock = 1;
        hb.clock = atomic_load(&w->clock);
        hb.has_progress_epoch = hb.has_progress_step = hb.has_progress_pos = 1;
        hb.progress_epoch = atomic_load(&w->progress[0]);
        hb.progress_step = atomic_load(&w->progress[1]);
        hb.progress_pos = atomic_load(&w->progress[2]);
        hb.has_wait_ns = hb.has_rss_bytes = 1;
        hb.wait_ns = (uint64_t)atomic_load(&w->wait_ns);
        int64_t place = atomic_load(&w->pipe_place);
        if (place > 0) {
            hb.has_pipe_pipeline = hb.has_pipe_stage = 1;
            hb.pipe_pipeline = (uint32_t)((place - 1) >> 32);
            hb.pipe_stage = (uint32_t)((place - 1) & 0xffffffff);
        }
        uint64_t bal = atomic_load(&w->balance);
        if (bal) {
            uint32_t bits = (uint32_t)(bal & 0xffffffffu);
            hb.has_balance_batch = hb.has_balance_us = 1;
            hb.balance_batch = (uint32_t)(bal >> 32);
            memcpy(&hb.balance_us, &bits, sizeof bits);
        }
        uint64_t sb = atomic_load(&w->stage_bal);
        if (sb) {
            uint32_t bits = (uint32_t)(sb & 0xffffffffu);
            hb.has_stage_layers = hb.has_stage_ms = 1;
            hb.stage_layers = (uint32_t)(sb >> 32);
            memcpy(&hb.stage_ms, &bits, sizeof bits);
        }
        hb.rss_bytes = (uint64_t)metrics_resident_bytes();
        hb.ar_waiting = (uint32_t)atomic_load(&w->ar_waiting);
        hb.has_ar_waiting = hb.ar_waiting > 0;
        Pskv__TableTraffic tt[WST_MAX_TRAFFIC], *ttp[WST_MAX_TRAFFIC];
        char names[WST_MAX_TRAFFIC][128];
        hb.n_traffic = wfilter_traffic(w, tt, ttp, names, WST_MAX_TRAFFIC);
        hb.traffic = ttp;
        wire_send(s, NULL, &hb, NULL, NULL);
        /* to the next beat on the clock, not `period` of sleeps: on a loaded host each
         * wake-up waits for a core, and ten late 10 ms naps made a 100 ms period
         * stretch to most of a second (a false death) */
        next += period;
        int64_t now = tu_now_ms();
        if (next < now)
            next = now; /* late: beat now, do not burst to catch up */
        while (now < next && !atomic_load(&w->hb_stop)) {
            tu_sleep_ms(next - now < 10 ? (int)(next - now) : 10);
            now = tu_now_ms();
        }
    }
    zmq_close(s);
    return NULL;
}

void wview_heartbeat_start(pskv_worker *w)
{
    w->hb_job = w->mb.job_id;
    w->hb_node = w->mb.node_id;
    w->hb_period_ms = w->mb.heartbeat_ms;
    if (pthread_create(&w->hb_thread, NULL, heartbeat_main, w) == 0)
        w->hb_started = 1;
}

void wview_heartbeat_stop(pskv_worker *w)
{
    if (w->hb_started) {
        atomic_store(&w->hb_stop, 1);
        pthread_join(w->hb_thread, NULL);
    }
}
