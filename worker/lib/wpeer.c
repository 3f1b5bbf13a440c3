/* wpeer: connections to other workers' listening sockets (design in wpeer.h). */
#define _GNU_SOURCE
#include "wpeer.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "net.h"
#include "secure.h"
#include "timeutil.h"
#include "wire.h"
#include "wpump.h"

#define WAIT_SLICE_MS 20    /* a handshake wait reads the views this often */
#define REDIAL_MIN_MS 100   /* after a refused handshake, dialled again this late, */
#define REDIAL_MAX_MS 1000  /* doubling up to this */

/* Monitor endpoints: unique in the process (a closed socket's may linger). */
static atomic_uint next_monitor;

int wpeer_listen(pskv_worker *w, const char *bind, int port)
{
    char why[400];
    w->peer_in = net_socket(w->ctx, ZMQ_PULL, w->max_message, 0);
    if (!w->peer_in)
        return wst_error(w, PSKV_ENET, "cannot make the all-reduce socket: %s",
                         zmq_strerror(zmq_errno()));
    int rc = secure_listen(&w->sec, w->ctx, w->peer_in, 1u << KEY_ROLE_WORKER, why, sizeof why);
    if (rc < 0)
        return wst_error(w, rc, "all-reduce socket: %s", why);
    rc = net_bind(w->peer_in, secure_bind_addr(&w->sec, bind), port, why, sizeof why);
    if (rc < 0)
        return wst_error(w, rc, "all-reduce socket (--bind, --port): %s", why);
    return rc;
}

void wpeer_unlisten(pskv_worker *w)
{
    if (w->peer_in)
        zmq_close(w->peer_in);
    w->peer_in = NULL;
}

const Pskv__Node *wpeer_rank_node(const pskv_worker *w, int rank)
{
    const Pskv__View *v = w->mb.view;
    const Pskv__Node *best = NULL;
    for (size_t i = 0; v && i < v->n_nodes; i++) {
        const Pskv__Node *n = v->nodes[i];
        if (n->role != PSKV__ROLE__WORKER || n->rank != rank || !n->alive ||
            (n->state && !strcmp(n->state, "dead")))
            continue;
        if (!best || n->id > best->id)
            best = n;
    }
    return best;
}

void wpeer_close(wpeer *p, int linger_ms)
{
    if (!p)
        return;
    net_monitor_stop(p->sock, &p->mon);
    if (p->sock) {
        zmq_setsockopt(p->sock, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
        zmq_close(p->sock);
    }
    memset(p, 0, sizeof *p);
}

int wpeer_dial(pskv_worker *w, wpeer *p, const Pskv__Node *n, const char *who)
{
    if (p->sock && p->node == n->id)
        return 0;
    wpeer_close(p, WPEER_LINGER_MS);
    p->sock = net_socket(w->ctx, ZMQ_PUSH, w->max_message, WPEER_LINGER_MS);
    if (!p->sock)
        return wst_error(w, PSKV_ENET, "%s: cannot make a socket", who);
    if (w->sec.keyed && !(n->pubkey && *n->pubkey))
        return wst_error(w, PSKV_EPROTO, "%s: the view has no key for rank %d", who, n->rank);
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://pskv-wpeer-%u", atomic_fetch_add(&next_monitor, 1));
    p->mon = net_monitor(w->ctx, p->sock, ep,
                         ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                             ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                             ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL);
    p->ok = !p->mon; /* unwatched: sends go at once (a refused handshake stays refused) */
    if (!p->mon)
        LOG_W("%s: cannot watch the handshake with rank %d: a refused one is not dialled again",
              who, n->rank);
    if (secure_dial(&w->sec, p->sock, n->pubkey) < 0 || !n->host || !n->port ||
        net_connect(p->sock, n->host, (int)n->port) < 0)
        return wst_error(w, PSKV_ENET, "%s: cannot dial rank %d at %s:%u", who, n->rank,
                         n->host ? n->host : "?", n->port);
    p->node = n->id;
    return 0;
}

/* The handshake events waiting on p's monitor, within timeout_ms: 1 when one
 * succeeded, -1 when one failed (and none succeeded), 0 when none came. */
static int handshake_event(wpeer *p, long timeout_ms)
{
    zmq_pollitem_t it = {p->mon, 0, ZMQ_POLLIN, 0};
    int got = 0;
    while (zmq_poll(&it, 1, got ? 0 : timeout_ms) > 0) {
        zmq_msg_t f;
        zmq_msg_init(&f);
        if (zmq_msg_recv(&f, p->mon, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&f);
            break;
        }
        uint16_t ev = 0;
        if (zmq_msg_size(&f) >= 2)
            memcpy(&ev, zmq_msg_data(&f), 2);
        int more = zmq_msg_more(&f);
        zmq_msg_close(&f);
        while (more) { /* the endpoint's frame */
            zmq_msg_init(&f);
            more = zmq_msg_recv(&f, p->mon, 0) >= 0 && zmq_msg_more(&f);
            zmq_msg_close(&f);
        }
        if (ev == ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
            return 1;
        got = -1;
    }
    return got;
}

/* Waits until a handshake on p succeeded (see wpeer_send). */
static int wait_handshake(pskv_worker *w, wpeer *p, int rank, int64_t deadline, const char *who)
{
    int backoff = REDIAL_MIN_MS, refusals = 0;
    int64_t redial_at = 0;
    for (;;) {
        if (p->ok) /* dialled again without a monitor: sends go at once */
            return 0;
        int ev = handshake_event(p, WAIT_SLICE_MS);
        if (ev > 0) {
            net_monitor_stop(p->sock, &p->mon);
            p->ok = 1;
            if (refusals)
                LOG_I("%s: rank %d admitted this worker after %d refused handshakes", who,
                      rank, refusals);
            return 0;
        }
        int64_t now = tu_now_ms();
        if (ev < 0 && !redial_at) {
            if (!refusals++)
                LOG_W("%s: rank %d refused the handshake (it has not applied the view naming "
                      "this worker yet?): dialling it again", who, rank);
            redial_at = now + backoff;
            backoff = backoff * 2 < REDIAL_MAX_MS ? backoff * 2 : REDIAL_MAX_MS;
        }
        if (member_stop_requested())
            return wst_error(w, PSKV_ECLOSED, "%s: stopped by a signal", who);
        if (now >= deadline)
            return wst_error(w, PSKV_ETIMEDOUT, "%s: no handshake with rank %d within %d ms%s",
                             who, rank, w->request_timeout_ms,
                             refusals ? " (it refused this worker's key each time)" : "");
        wpump(w, 0); /* views: the rank died or was taken over */
        const Pskv__Node *n = wpeer_rank_node(w, rank);
        if (!n || n->id != p->node)
            return wst_error(w, PSKV_EPEERDEAD, "%s: rank %d died (the scheduler declared "
                             "it dead or replaced it)", who, rank);
        if (redial_at && now >= redial_at) {
            p->node = 0; /* a fresh connection */
            int rc = wpeer_dial(w, p, n, who);
            if (rc < 0)
                return rc;
            redial_at = 0;
        }
    }
}

int wpeer_send(pskv_worker *w, wpeer *p, int rank, const Pskv__Meta *m, zmq_msg_t *vals,
               int64_t deadline_ms, const char *who)
{
    int rc = !p->sock ? wst_error(w, PSKV_ENET, "%s: rank %d is not dialled", who, rank)
             : p->ok  ? 0
                      : wait_handshake(w, p, rank, deadline_ms, who);
    if (rc < 0) {
        if (vals)
            zmq_msg_close(vals);
        return rc;
    }
    if (wire_send(p->sock, NULL, m, NULL, vals) < 0)
        return wst_error(w, PSKV_ENET, "%s: cannot send to rank %d: %s", who, rank,
                         zmq_strerror(zmq_errno()));
    return 0;
}
