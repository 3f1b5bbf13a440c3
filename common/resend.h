/* resend: when a request sent to a live peer and still unanswered goes again, the
 * one rule the worker's parts (worker/lib/wsend.c) and the servers' chain forwards
 * (server/repl/chain_fwd.c) share.
 *
 * A copy goes after `base_ms`, then twice, 4 and at most 8 times as long for the
 * same request (`tries` copies so far), and never while the peer answers requests
 * sent before it (it works through its queue in order: this one is behind them, not
 * lost; on a starved machine copies of what a peer has queued only lengthened its
 * queue until requests timed out). A peer that answered a request sent after this
 * one, or nothing for as long as this one has waited, may have dropped it.
 *
 * Times are CLOCK_MONOTONIC milliseconds (tu_now_ms). heard_ms 0 stands for "never":
 * a peer heard in the very first millisecond of the clock counts as unheard.
 *
 * OWNS nothing. THREAD any (the caller guards its resend_peer). NEVER blocks. */
#ifndef PSKV_RESEND_H
#define PSKV_RESEND_H

#include <stdint.h>

/* What the sender knows of one peer's answers; zeroed: never heard. */
typedef struct resend_peer {
    int64_t heard_ms;      /* when it last answered, or 0 */
    int64_t heard_sent_ms; /* the latest send time of a request it answered */
} resend_peer;

/* resend_heard's sent_ms for an answer to nothing still awaited (a request already
 * re-sent elsewhere or done): the peer is alive and working, but that answer says
 * nothing of where its queue is. */
#define RESEND_NOTHING INT64_MIN

/* A request sent at sent_ms (or RESEND_NOTHING) was answered now. */
void resend_heard(resend_peer *p, int64_t sent_ms, int64_t now);

/* 1 when a request sent at sent_ms, after `tries` copies (>= 0), is due another
 * at `now`; 0 while it is young or behind (see above). */
int resend_due(const resend_peer *p, int64_t sent_ms, int tries, int64_t base_ms, int64_t now);

#endif
