/* wpeer: this worker's listening socket (w->peer_in: the all-reduce's pieces and
 * pskv_pipe's messages arrive on it), and its connection to another worker's (the
 * all-reduce's next rank, a pipeline neighbour). Internal to libpskv (see wstate.h).
 *
 * Design: a PUSH dialled at the address and key the scheduler's view gives the
 * peer's node (CURVE with keys). A peer that has not yet applied the view naming
 * this worker refuses the CURVE handshake (its ZAP handler does not know the key),
 * and ZeroMQ never dials again after a refused handshake; what was queued on that
 * connection is dropped with it. So until a handshake succeeded, a send first waits
 * for one (a monitor on the socket says how each ended) and dials again on a fresh
 * connection after a refusal, within the caller's deadline; nothing is queued before.
 * Once one succeeded, sends go at once, as on any PUSH.
 *
 * OWNS: w->peer_in; each wpeer's PUSH and its monitor. THREADS: the calling thread only (the handle's user).
 * NEVER: never waits past the caller's deadline; never sends to a node that is no
 *   longer the rank's live one in the view (PSKV_EPEERDEAD instead). */
#ifndef PSKV_WPEER_H
#define PSKV_WPEER_H

#include <zmq.h>

#include "wstate.h"

#define WPEER_LINGER_MS 2000 /* what is queued to a peer may take to leave at close */

/* A wait on the listening socket (the ring's, pskv_pipe_recv's) reads the
 * scheduler's views this often, to see a peer declared dead. */
#define WPEER_PUMP_MS 20

typedef struct wpeer {
    void *sock;    /* PUSH to the node's listening socket (NULL: none) */
    void *mon;     /* PAIR reading sock's handshake events until one succeeded */
    uint32_t node; /* node id sock is dialled to (0: none) */
    int ok;        /* a handshake succeeded on sock: what is sent goes through */
} wpeer;

/* Binds w->peer_in, a PULL on bind (NULL or "": loopback without keys, every
 * interface with keys or --insecure) and port (0 = any free), CURVE with keys,
 * before the worker registers. Returns the port bound (> 0) or a negated error
 * with last_error set (w->peer_in may be left for wpeer_unlisten). */
WINTERNAL int wpeer_listen(pskv_worker *w, const char *bind, int port);

/* Closes w->peer_in (NULL-safe) and sets it to NULL. */
WINTERNAL void wpeer_unlisten(pskv_worker *w);

/* The live node of worker `rank` in the latest view (the newest, when a rank was
 * taken over), or NULL when none is. */
WINTERNAL const Pskv__Node *wpeer_rank_node(const pskv_worker *w, int rank);

/* Points p at worker node n's listening socket: nothing when p is dialled to n
 * already, else its socket closed and made anew (lingering 2 s at close for what is
 * still queued) and p->node set to n once dialled (0 until then). `who` opens the
 * error messages. Returns 0, or a negated error with last_error set (p stays the
 * caller's: wpeer_close it). */
WINTERNAL int wpeer_dial(pskv_worker *w, wpeer *p, const Pskv__Node *n, const char *who);

/* Sends [m, vals] (vals NULL: the Meta alone; taken over, closed on failure) on p,
 * dialled to rank's node. Before the first handshake on p succeeded it waits for
 * one, reading the scheduler's views meanwhile, and dials again after a refused one,
 * until deadline_ms (CLOCK_MONOTONIC). Returns 0, or a negated error with last_error
 * set: PSKV_ETIMEDOUT (no handshake by the deadline), PSKV_EPEERDEAD (the rank's
 * node died or was replaced), PSKV_ECLOSED (a stop signal), PSKV_ENET. */
WINTERNAL int wpeer_send(pskv_worker *w, wpeer *p, int rank, const Pskv__Meta *m,
                         zmq_msg_t *vals, int64_t deadline_ms, const char *who);

/* Closes p's socket, letting what is queued leave for up to linger_ms, and zeroes
 * p; NULL-safe and safe on a zeroed p. */
WINTERNAL void wpeer_close(wpeer *p, int linger_ms);

#endif
