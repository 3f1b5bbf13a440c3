/* vbuf: buffers shared with ZeroMQ, and the drain of lent arrays (contract in
 * vbuf.h). A lent push (pskv_push_nocopy) may end, answered or failed, while
 * ZeroMQ still holds slices of the caller's array: its I/O thread lets go of a
 * frame only after sending it, and a part queued for a server that died is never
 * sent. Resetting a connection makes ZeroMQ drop what it queued there (linger 0),
 * and so let go of the array. */
#define _GNU_SOURCE
#include "vbuf.h"

#include <errno.h>
#include <stdlib.h>
#include <zmq.h>

#include "log.h"
#include "net.h"
#include "secure.h"
#include "wire.h"
#include "wreq.h"

/* A new connection to server si in place of the old one, whose queued messages
 * ZeroMQ drops (linger 0) and whose lent slices it so lets go of. Requests that
 * had parts queued there are answered by re-sends or time out, as after a loss. */
static void srv_reset(pskv_worker *w, int si)
{
    srv *s = &w->srv[si];
    LOG_W("resetting the connection to server node %u (%s:%d): it still holds the values "
          "of a push that ended", s->id, s->host, s->port);
    zmq_close(s->sock);
    s->reset_ms = tu_now_ms();
    s->sock = net_socket(w->ctx, ZMQ_DEALER, w->max_message, 0);
    if (!s->sock || secure_dial(&w->sec, s->sock, s->key) < 0 ||
        net_connect(s->sock, s->host, s->port) < 0)
        LOG_E("cannot connect again to server %s:%d: %s", s->host, s->port,
              zmq_strerror(errno));
    w->lent_resets++;
}

/* Whether drain stage `stage` resets the connection of part p of a draining push:
 * a part with lent values sent since that connection was last reset (a reset
 * drops what was queued before it), unanswered and its server dead (1), or
 * unanswered (2), or any (3). */
static int drain_resets(const pskv_worker *w, const part *p, int stage)
{
    const srv *s = &w->srv[p->server];
    if (p->own || p->sent_ms < s->reset_ms || !s->sock) /* closed: ZeroMQ let go */
        return 0;
    return stage == 3 || (!p->answered && (stage == 2 || !s->alive));
}

/* An ended push whose lent values ZeroMQ still holds: released when it lets go.
 * The connections of its unanswered parts are reset at once when their server
 * died, else after LENT_RESET_MS; then every connection it used (an answered part
 * was sent whole, so this should not happen). Each stage once, each connection
 * once per stage. */
void vbuf_drain(pskv_worker *w, req *r, int64_t now)
{
    if (!vbuf_lent_held(r)) {
        wreq_retire(w, r);
        return;
    }
    int stage = now - r->draining_ms >= 2 * LENT_RESET_MS ? 3
                : now - r->draining_ms >= LENT_RESET_MS ? 2 : 1;
    while (r->lent_reset < stage) {
        r->lent_reset++;
        for (int pi = 0; pi < r->nparts; pi++)
            if (drain_resets(w, &r->parts[pi], r->lent_reset))
                srv_reset(w, r->parts[pi].server); /* later parts there: sent before it */
    }
}
