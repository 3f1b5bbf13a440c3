/* sfollow: the reader's side of following a namespace (design in sfollow.h). */
#define _GNU_SOURCE
#include "sfollow.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "log.h"
#include "metrics.h"
#include "net.h"
#include "pskv_errors.h"
#include "smerge.h"
#include "timeutil.h"
#include "wire.h"

#define MAX_SERVERS 256
#define STATUS_MS 1000 /* how often the view is asked for */
#define RENEW_MS 1000  /* how often each server's subscription is renewed */
#define FULL_RETRY_MS 3000 /* a full copy asked for and not begun: asked again */
#define MAX_LEAD 65536

/* One training server followed. */
typedef struct srvc {
    uint32_t id;
    char host[256];
    uint32_t port;
    void *sock;
    uint64_t seq;      /* the last follow_seq taken */
    int awaiting_full; /* a full copy was asked for: deltas before it are dropped */
    int64_t asked_full_ms, renewed_ms;
    int seen;          /* in the latest view, alive */
    int refused;       /* its last answer was an error */
} srvc;

typedef struct fstate {
    const sfollow_cfg *cfg;
    void *ctx, *sched;
    int64_t status_ms;
    uint64_t job_id, epoch;
    int have_view;
    srvc s[MAX_SERVERS];
    int n;
    smerge *m;
    int64_t lead, round_ms;
    int followed;   /* rows arrived at least once */
    char denied[300]; /* a server refused the key this namespace (PSKV_EACCES): why */
    met_series *rows_in, *gaps;
} fstate;

/* A DEALER toward the scheduler or a server. ZeroMQ's heartbeat closes a
 * connection silent for HB_TIMEOUT_MS (a link cut: no FIN, no RST, the
 * connection half-open) and dials again, each attempt given up after CONNECT_MS:
 * once the link is back the next attempt gets through within about CONNECT_MS,
 * where the half-open connection would wait for TCP's retransmissions, backed
 * off by then to seconds (as long again as the cut). A server sees the new
 * connection as a new reader: its renewal subscribes anew, with a full copy. */
#define HB_IVL_MS 1000
#define HB_TIMEOUT_MS 3000
#define CONNECT_MS 1000
static void *follow_socket(void *ctx)
{
    void *s = net_socket(ctx, ZMQ_DEALER, 0, 0);
    int ivl = HB_IVL_MS, timeout = HB_TIMEOUT_MS, conn = CONNECT_MS;
    if (s && (zmq_setsockopt(s, ZMQ_HEARTBEAT_IVL, &ivl, sizeof ivl) ||
              zmq_setsockopt(s, ZMQ_HEARTBEAT_TIMEOUT, &timeout, sizeof timeout) ||
              zmq_setsockopt(s, ZMQ_CONNECT_TIMEOUT, &conn, sizeof conn)))
        LOG_W("cannot set ZeroMQ heartbeats (%s): a cut link is noticed only by TCP",
              zmq_strerror(errno));
    return s;
}

static void send_follow(fstate *F, srvc *s, int full, int64_t target)
{
    Pskv__Meta m;
    wire_meta_init(&m, PSKV__MSG_TYPE__FOLLOW);
    m.has_job_id = m.has_epoch = m.has_sender = 1;
    m.job_id = F->job_id;
    m.epoch = F->epoch;
    m.follow_ns = (char *)F->cfg->ns;
    m.has_follow_sync_ms = 1;
    m.follow_sync_ms = (uint32_t)F->cfg->sync_ms;
    m.has_follow_full = m.follow_full = full;
    m.has_follow_target = target >= 0;
    m.follow_target = target;
    if (full) {
        s->awaiting_full = 1;
        s->asked_full_ms = tu_now_ms();
    }
    s->renewed_ms = tu_now_ms();
    if (wire_send(s->sock, NULL, &m, NULL, NULL) < 0)
        LOG_D("cannot send FOLLOW to server %u: %s", s->id, zmq_strerror(errno));
}

static void close_server(fstate *F, int i)
{
    srvc *s = &F->s[i];
    LOG_I("server %u (%s:%u) left the view: no longer followed", s->id, s->host, s->port);
    zmq_close(s->sock);
    smerge_drop_node(F->m, s->id);
    F->s[i] = F->s[--F->n];
}

static int server_alive(const Pskv__Node *n)
{
    return n->role == PSKV__ROLE__SERVER && n->alive && n->host &&
           (!n->state || (strcmp(n->state, "dead") && strcmp(n->state, "left") &&
                          strcmp(n->state, "stopped")));
}

/* A view from STATUS_REPLY: dial new servers, drop those gone. */
static void apply_view(fstate *F, const Pskv__Meta *r)
{
    const Pskv__View *v = r->view;
    F->job_id = r->job_id;
    F->epoch = v->has_epoch ? v->epoch : r->epoch;
    F->have_view = 1;
    for (int i = 0; i < F->n; i++)
        F->s[i].seen = 0;
    for (size_t k = 0; k < v->n_nodes; k++) {
        const Pskv__Node *n = v->nodes[k];
        if (!server_alive(n))
            continue;
        srvc *s = NULL;
        for (int i = 0; i < F->n && !s; i++)
            if (F->s[i].id == n->id)
                s = &F->s[i];
        if (!s && F->n < MAX_SERVERS && strlen(n->host) < sizeof s->host) {
            void *sock = follow_socket(F->ctx);
            if (!sock || secure_dial(F->cfg->sec, sock, n->pubkey) < 0 ||
                net_connect(sock, n->host, (int)n->port) < 0) {
                LOG_W("cannot dial server %u at %s:%u%s", n->id, n->host, n->port,
                      F->cfg->sec && F->cfg->sec->keyed && !n->pubkey ? " (no key in the view)"
                                                                      : "");
                if (sock)
                    zmq_close(sock);
                continue;
            }
            s = &F->s[F->n++];
            memset(s, 0, sizeof *s);
            s->id = n->id;
            snprintf(s->host, sizeof s->host, "%s", n->host);
            s->port = n->port;
            s->sock = sock;
            LOG_I("following namespace '%s' at server %u (%s:%u)", F->cfg->ns, s->id, s->host,
                  s->port);
            send_follow(F, s, 1, -1);
        }
        if (s)
            s->seen = 1;
    }
    for (int i = 0; i < F->n; i++)
        if (!F->s[i].seen)
            close_server(F, i--);
}

static void ask_status(fstate *F)
{
    Pskv__Meta q;
    wire_meta_init(&q, PSKV__MSG_TYPE__STATUS);
    q.has_request_id = 1;
    q.request_id = 1;
    wire_send(F->sched, NULL, &q, NULL, NULL);
    F->status_ms = tu_now_ms();
}

static void on_status(fstate *F)
{
    char why[300];
    for (int k = 0; k < 16; k++) {
        wire_msg msg;
        int rc = wire_recv(F->sched, 0, &msg, why, sizeof why);
        if (rc == -PSKV_ETIMEDOUT) {
            wire_msg_close(&msg);
            return;
        }
        if (rc == 0 && msg.meta->type == PSKV__MSG_TYPE__STATUS_REPLY && msg.meta->view)
            apply_view(F, msg.meta);
        else
            LOG_W("scheduler %s: %s", F->cfg->scheduler,
                  rc < 0 ? why : msg.meta->error ? msg.meta->error : "not a STATUS_REPLY");
        wire_msg_close(&msg);
    }
}

static uint32_t ids_of(const fstate *F, uint32_t *ids)
{
    for (int i = 0; i < F->n; i++)
        ids[i] = F->s[i].id;
    return (uint32_t)F->n;
}

static void try_publish(fstate *F)
{
    uint32_t ids[MAX_SERVERS];
    int64_t hi;
    smerge_dense_publish(F->m, ids, ids_of(F, ids), &hi);
}

static void on_data(fstate *F, srvc *s, const wire_msg *msg)
{
    const Pskv__Meta *r = msg->meta;
    char why[300];
    if (!r->has_follow_seq || !r->follow_table || !r->has_width) {
        LOG_W("server %u: FOLLOW_DATA without follow_seq, follow_table or width: dropped", s->id);
        return;
    }
    if (r->follow_full && r->follow_seq == 1) /* a full copy asked for begins: numbered anew */
        s->awaiting_full = 0, s->seq = 0;
    if (s->awaiting_full)
        return; /* from before the full copy asked for */
    if (!s->awaiting_full && r->follow_seq != s->seq + 1) {
        LOG_W("server %u: follow_seq %llu after %llu (rows lost): asking for a full copy", s->id,
              (unsigned long long)r->follow_seq, (unsigned long long)s->seq);
        metrics_add(F->gaps, 1);
        send_follow(F, s, 1, -1);
        return;
    }
    LOG_D("server %u: %s%s %s, %llu rows %sat clock %lld", s->id, r->follow_full ? "full " : "",
          r->follow_dense ? "dense" : "sparse", r->follow_table, (unsigned long long)msg->nkeys,
          r->follow_removed ? "removed " : "",
          (long long)r->clock);
    s->awaiting_full = 0;
    s->seq = r->follow_seq;
    s->refused = 0;
    smerge_rows rows = {s->id, r->follow_table, r->follow_dense, r->follow_size, r->width,
                        msg->keys, msg->vals, (size_t)msg->nkeys, r->clock, r->follow_removed};
    int rc = smerge_apply(F->m, &rows, why, sizeof why);
    if (rc < 0) {
        LOG_W("server %u: %s: dropped (%s)", s->id, why, pskv_strerror(rc));
        return;
    }
    F->followed = 1;
    metrics_add(F->rows_in, (double)msg->nkeys);
    if (r->follow_dense)
        try_publish(F);
}

static void on_server(fstate *F, srvc *s)
{
    char why[300];
    for (int k = 0; k < 64; k++) {
        wire_msg msg;
        int rc = wire_recv(s->sock, 0, &msg, why, sizeof why);
        if (rc == -PSKV_ETIMEDOUT) {
            wire_msg_close(&msg);
            return;
        }
        if (rc < 0) {
            LOG_W("server %u: bad message: %s", s->id, why);
        } else if (msg.meta->type == PSKV__MSG_TYPE__FOLLOW_DATA) {
            on_data(F, s, &msg);
        } else if (msg.meta->type == PSKV__MSG_TYPE__ERROR) {
            if (!s->refused)
                LOG_W("server %u refused to be followed: %s", s->id,
                      msg.meta->error ? msg.meta->error : "?");
            s->refused = msg.meta->has_error_code ? msg.meta->error_code : PSKV_EPROTO;
            if (s->refused == PSKV_EACCES && !F->denied[0])
                snprintf(F->denied, sizeof F->denied, "server %u: %s", s->id,
                         msg.meta->error ? msg.meta->error : "access refused");
            s->awaiting_full = 1; /* the next renewal asks again */
        }
        wire_msg_close(&msg);
    }
}

/* Renewals, full copies not begun, and the next round of dense parts. */
static void renew(fstate *F, int64_t now)
{
    int64_t target = -1;
    if (smerge_dense_count(F->m) && now - F->round_ms >= F->cfg->sync_ms) {
        uint32_t ids[MAX_SERVERS];
        int64_t hi;
        int waiting = smerge_dense_publish(F->m, ids, ids_of(F, ids), &hi);
        F->lead = waiting ? (F->lead * 2 > MAX_LEAD ? MAX_LEAD : F->lead * 2)
                          : (F->lead * 3 / 4 < 2 ? 2 : F->lead * 3 / 4);
        target = hi + F->lead;
        F->round_ms = now;
    }
    for (int i = 0; i < F->n; i++) {
        srvc *s = &F->s[i];
        int full = s->awaiting_full && now - s->asked_full_ms >= FULL_RETRY_MS;
        if (full || target >= 0 || now - s->renewed_ms >= RENEW_MS)
            send_follow(F, s, full, target);
    }
}

/* 1 when following has not begun within wait_s, or a server refused this key
 * the namespace (logged why). */
static int gave_up(const fstate *F, int64_t started)
{
    int keyed = F->cfg->sec && F->cfg->sec->keyed;
    if (!F->followed && F->denied[0]) {
        LOG_E("namespace '%s' may not be followed with this key (PSKV_EACCES: %s); the "
              "servers' authorized file binds it: `reader %s KEY`", F->cfg->ns, F->denied,
              F->cfg->ns[0] ? F->cfg->ns : "NS");
        return 1;
    }
    if (F->followed || tu_now_ms() - started < (int64_t)F->cfg->wait_s * 1000)
        return 0;
    if (!F->have_view)
        LOG_E("no answer from scheduler %s within %d s%s", F->cfg->scheduler, F->cfg->wait_s,
              keyed ? " (with --keys: is this key in its authorized file, and scheduler.pub "
                      "its key?)" : "");
    else if (!F->n)
        LOG_E("the job of scheduler %s has no live server to follow", F->cfg->scheduler);
    else if (F->s[0].refused == PSKV_ENOTABLE)
        LOG_E("namespace '%s' does not exist: no server of scheduler %s has a table in it "
              "(pskv-worker --namespace NS opens them)", F->cfg->ns, F->cfg->scheduler);
    else
        LOG_E("no rows of namespace '%s' arrived within %d s%s", F->cfg->ns, F->cfg->wait_s,
              keyed ? " (with --keys: do the servers' authorized files list this key?)" : "");
    return 1;
}

int sfollow_run(const sfollow_cfg *cfg, snapstore *st, atomic_int *stop)
{
    fstate *F = calloc(1, sizeof *F);
    char host[256];
    int port = 0, rc = 1;
    if (!F || net_split_hostport(cfg->scheduler, host, sizeof host, &port) < 0) {
        LOG_E("--scheduler '%s' is not HOST:PORT", cfg->scheduler);
        free(F);
        return 1;
    }
    F->cfg = cfg;
    F->lead = 2;
    F->ctx = zmq_ctx_new();
    F->sched = follow_socket(F->ctx);
    F->m = smerge_new(st);
    F->rows_in = metrics_series("pskv_serve_follow_rows_total", MET_COUNTER,
                                "rows received from the training servers", NULL, NULL);
    F->gaps = metrics_series("pskv_serve_follow_gaps_total", MET_COUNTER,
                             "full copies asked for after rows were lost", NULL, NULL);
    if (!F->sched || !F->m || secure_dial(cfg->sec, F->sched, NULL) < 0 ||
        net_connect(F->sched, host, port) < 0) {
        LOG_E("cannot dial scheduler %s", cfg->scheduler);
        goto out;
    }
    int64_t started = tu_now_ms();
    ask_status(F);
    while (!*stop) {
        zmq_pollitem_t it[1 + MAX_SERVERS];
        it[0] = (zmq_pollitem_t){F->sched, 0, ZMQ_POLLIN, 0};
        for (int i = 0; i < F->n; i++)
            it[1 + i] = (zmq_pollitem_t){F->s[i].sock, 0, ZMQ_POLLIN, 0};
        int nsrv = F->n;
        if (zmq_poll(it, 1 + nsrv, 50) < 0 && errno != EINTR)
            break;
        if (it[0].revents & ZMQ_POLLIN)
            on_status(F);
        for (int i = 0; i < nsrv && i < F->n; i++)
            if (it[1 + i].revents & ZMQ_POLLIN)
                on_server(F, &F->s[i]);
        int64_t now = tu_now_ms();
        if (now - F->status_ms >= STATUS_MS)
            ask_status(F);
        renew(F, now);
        if (gave_up(F, started))
            goto out;
    }
    rc = 0;
out:
    for (int i = 0; i < F->n; i++)
        zmq_close(F->s[i].sock);
    if (F->sched)
        zmq_close(F->sched);
    zmq_ctx_term(F->ctx);
    smerge_destroy(&F->m);
    free(F);
    return rc;
}
