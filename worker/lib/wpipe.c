/* wpipe: messages between pipeline stages (design and contract in wpipe.h). */
#define _GNU_SOURCE
#include "wpipe.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "log.h"
#include "net.h"
#include "secure.h"
#include "timeutil.h"
#include "wire.h"
#include "wmetrics.h"
#include "wpeer.h"
#include "wpump.h"

#define MAX_PEERS 4 /* neighbours a stage sends to (two; more for safety) */

typedef struct peer {
    int rank;
    wpeer conn; /* PUSH to that rank's node's listening socket */
} peer;

struct wpipe {
    peer peers[MAX_PEERS];
    int npeers;
};

void wpipe_close(pskv_worker *w)
{
    if (!w->pipe)
        return;
    for (int i = 0; i < w->pipe->npeers; i++)
        wpeer_close(&w->pipe->peers[i].conn, WPEER_LINGER_MS);
    free(w->pipe);
    w->pipe = NULL;
}

/* The connection to `rank`'s current node, dialled when new, into *conn; 0 or
 * a negated error with last_error set. */
static int peer_conn(pskv_worker *w, int rank, wpeer **conn)
{
    if (!w->pipe && !(w->pipe = calloc(1, sizeof *w->pipe)))
        return wst_error(w, PSKV_ENOMEM, "pskv_pipe: out of memory");
    const Pskv__Node *n = wpeer_rank_node(w, rank);
    if (!n)
        return wst_error(w, PSKV_EPEERDEAD,
                         "pskv_pipe: rank %d is not in the job (dead or not joined)", rank);
    wpipe *p = w->pipe;
    peer *e = NULL;
    for (int i = 0; i < p->npeers; i++)
        if (p->peers[i].rank == rank)
            e = &p->peers[i];
    if (!e) {
        if (p->npeers == MAX_PEERS)
            return wst_error(w, PSKV_EINVAL, "pskv_pipe: more than %d peers", MAX_PEERS);
        e = &p->peers[p->npeers++];
        e->rank = rank;
    }
    *conn = &e->conn;
    return wpeer_dial(w, &e->conn, n, "pskv_pipe");
}

int pskv_pipe_send(pskv_worker *w, int rank, const pskv_pipe_msg *h, const float *vals, size_t n)
{
    wpeer *conn = NULL;
    int rc = peer_conn(w, rank, &conn);
    if (rc < 0)
        return rc;
    Pskv__Meta m;
    wire_meta_init(&m, PSKV__MSG_TYPE__PIPE);
    m.has_job_id = m.has_sender = m.has_rank = 1;
    m.job_id = w->mb.job_id;
    m.sender = w->mb.node_id;
    m.rank = w->mb.rank;
    m.has_pipe_pipeline = m.has_pipe_micro = m.has_pipe_dir = m.has_pipe_rows = 1;
    m.pipe_pipeline = (uint32_t)h->pipeline;
    m.pipe_micro = h->micro;
    m.pipe_dir = (uint32_t)h->dir;
    m.pipe_rows = (uint32_t)h->rows;
    m.has_first_key = m.has_num_keys = m.has_width = 1;
    m.first_key = 0;
    m.num_keys = n;
    m.width = 1;
    zmq_msg_t v;
    if (zmq_msg_init_size(&v, n * sizeof(float)) < 0)
        return wst_error(w, PSKV_ENOMEM, "pskv_pipe: out of memory");
    if (n)
        memcpy(zmq_msg_data(&v), vals, n * sizeof(float));
    return wpeer_send(w, conn, rank, &m, &v, tu_now_ms() + w->request_timeout_ms, "pskv_pipe");
}

/* A rank of from[] no live node holds, or that another node took over since
 * `nodes` was noted; -1 when all are there. */
static int dead_peer(pskv_worker *w, const int *from, int nfrom, const uint32_t *nodes)
{
    for (int i = 0; i < nfrom; i++) {
        const Pskv__Node *n = wpeer_rank_node(w, from[i]);
        if (!n || n->id != nodes[i])
            return from[i];
    }
    return -1;
}

/* Checks a received message and copies its floats; 0, 1 to drop it, or an
 * error. */
static int take(pskv_worker *w, wire_msg *m, const int *from, int nfrom, pskv_pipe_slot slot,
                void *arg, pskv_pipe_msg *h)
{
    const Pskv__Meta *x = m->meta;
    if (x->type != PSKV__MSG_TYPE__PIPE || x->job_id != w->mb.job_id || !x->has_rank) {
        LOG_D("pskv_pipe: dropped a %s from %s", wire_type_name((int)x->type), m->peer);
        return 1;
    }
    int known = 0;
    for (int i = 0; i < nfrom; i++)
        known |= from[i] == (int)x->rank;
    if (!known || !x->has_pipe_dir || !x->has_pipe_micro ||
        (x->pipe_dir != PSKV_PIPE_FWD && x->pipe_dir != PSKV_PIPE_BWD))
        return wst_error(w, PSKV_EPROTO, "pskv_pipe: unexpected message from rank %d at %s "
                         "(dir %u)", (int)x->rank, m->peer, x->pipe_dir);
    h->from_rank = (int)x->rank;
    h->pipeline = (int)x->pipe_pipeline;
    h->micro = x->pipe_micro;
    h->dir = (int)x->pipe_dir;
    h->rows = (int)x->pipe_rows;
    h->n = (size_t)m->nvals;
    float *dst = slot(arg, h);
    if (!dst)
        return wst_error(w, PSKV_EPROTO,
                         "pskv_pipe: rank %d sent micro-batch %llu (%s, %zu "
                         "floats, %d rows) that this stage did not expect",
                         h->from_rank, (unsigned long long)h->micro,
                         h->dir == PSKV_PIPE_FWD ? "forward" : "backward", h->n, h->rows);
    if (h->n)
        memcpy(dst, m->vals, h->n * sizeof(float));
    return 0;
}

int pskv_pipe_recv(pskv_worker *w, const int *from, int nfrom, pskv_pipe_slot slot, void *arg,
                   pskv_pipe_msg *h)
{
    void *in = w->peer_in;
    if (!in || nfrom < 1 || nfrom > MAX_PEERS)
        return wst_error(w, PSKV_EINVAL, "pskv_pipe_recv: no listening socket or bad peers");
    uint32_t nodes[MAX_PEERS];
    wpump(w, 0);
    for (int i = 0; i < nfrom; i++) {
        const Pskv__Node *n = wpeer_rank_node(w, from[i]);
        if (!n)
            return wst_error(w, PSKV_EPEERDEAD,
                             "pskv_pipe: rank %d is not in the job (dead or not joined)",
                             from[i]);
        nodes[i] = n->id;
    }
    int64_t deadline = tu_now_ms() + w->request_timeout_ms;
    for (;;) {
        wire_msg m;
        char why[300];
        memset(&m, 0, sizeof m);
        int rc = wire_recv(in, 0, &m, why, sizeof why);
        if (rc == 0) {
            rc = take(w, &m, from, nfrom, slot, arg, h);
            wire_msg_close(&m);
            if (rc <= 0)
                return rc;
            if (tu_now_ms() < deadline)
                continue; /* dropped: the next one (a stream of them still times out) */
        } else {
            wire_msg_close(&m);
            if (rc != -PSKV_ETIMEDOUT)
                LOG_W("pskv_pipe: dropped a malformed message: %s", why);
        }
        wpump(w, 0); /* views: a neighbour declared dead */
        int dead = dead_peer(w, from, nfrom, nodes);
        if (dead >= 0)
            return wst_error(w, PSKV_EPEERDEAD, "pskv_pipe: rank %d died (the scheduler "
                             "declared it dead or replaced it)", dead);
        int64_t left = deadline - tu_now_ms();
        if (left <= 0)
            return wst_error(w, PSKV_ETIMEDOUT, "pskv_pipe: nothing from rank %d%s within %d ms "
                             "(--request-timeout)", from[0],
                             nfrom > 1 ? " nor its other neighbour" : "", w->request_timeout_ms);
        zmq_pollitem_t it = {in, 0, ZMQ_POLLIN, 0};
        zmq_poll(&it, 1, left < WPEER_PUMP_MS ? left : WPEER_PUMP_MS);
    }
}

void pskv_set_stage(pskv_worker *w, int pipeline, int stage)
{
    if (w && pipeline >= 0 && stage >= 0)
        atomic_store(&w->pipe_place, ((int64_t)pipeline << 32 | stage) + 1);
}

void pskv_set_stage_layers(pskv_worker *w, int first, int last, float ms_per_micro)
{
    uint32_t bits;
    if (!w || first < 0 || last < first || last >= 65535)
        return;
    memcpy(&bits, &ms_per_micro, sizeof bits);
    atomic_store(&w->stage_bal, (uint64_t)((uint32_t)first << 16 | (uint32_t)(last + 1)) << 32 | bits);
    wmet_stage(first, last, ms_per_micro);
}

void pskv_set_balance(pskv_worker *w, int batch, float us_per_example)
{
    uint32_t bits;
    if (!w || batch < 1)
        return;
    memcpy(&bits, &us_per_example, sizeof bits);
    atomic_store(&w->balance, (uint64_t)(uint32_t)batch << 32 | bits);
    wmet_balance(batch, us_per_example);
}
