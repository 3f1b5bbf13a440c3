/* vbuf: values shared with ZeroMQ's zero-copy sends, and the drain of
 * pskv_push_nocopy's lent arrays. Internal to libpskv (see wstate.h).
 *
 * A vbuf is reference-counted: the request holds one reference, and each frame
 * handed to ZeroMQ one more, dropped by ZeroMQ through vbuf_unref when it has
 * sent the frame. A lent push's vbuf (r->lend) carries no data, only the count of
 * ZeroMQ's hold on the caller's array; such a request cannot leave the window
 * until the count falls back to its own reference (vbuf_drain).
 *
 * OWNS: the vbufs (freed by their last reference), a draining request's reset
 *   stages (r->lent_reset) and lent_resets; it replaces a server's connection
 *   (srv[].sock, srv[].reset_ms) when ZeroMQ will not let go of a lent array.
 *   Which requests drain (draining_ms, ndraining) is wreq_retire's to say.
 * THREADS: vbuf_unref may run on a ZeroMQ I/O thread (it touches only refs, an
 *   atomic, and frees at zero); everything else on the calling thread, which owns
 *   every data socket.
 * NEVER: never blocks, never copies values. */
#ifndef PSKV_VBUF_H
#define PSKV_VBUF_H

#include "wstate.h"

/* vbuf_new, vbuf_unref, vbuf_lend: common/wire.h (shared with the servers). */

/* Whether ZeroMQ still holds values r lent (pskv_push_nocopy). Inline: checked on
 * every retirement and every pump while a push drains. */
static inline int vbuf_lent_held(const req *r)
{
    return r->lend && atomic_load(&r->lend->refs) > 1;
}

/* For a draining request (ended, ZeroMQ holding its lent values): retires it once
 * ZeroMQ lets go; else resets, once per stage, the connections that may hold the
 * values: at once for unanswered parts on dead servers, after LENT_RESET_MS for
 * unanswered ones, after 2 * LENT_RESET_MS for all. now: tu_now_ms(). */
WINTERNAL void vbuf_drain(pskv_worker *w, req *r, int64_t now);

#endif
