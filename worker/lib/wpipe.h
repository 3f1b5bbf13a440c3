/* wpipe: pskv_pipe_send / pskv_pipe_recv (declared in pskv.h), point-to-point
 * messages between neighbouring pipeline stages (--app pipeline).
 * Internal to libpskv (see wstate.h).
 *
 * Design: a PIPE message arrives on the worker's listening PULL socket, the one
 * the view advertises (w->peer_in, wpeer_listen), so a stage's address
 * comes from the scheduler's view and works across hosts and under CURVE. The
 * sender keeps one PUSH per neighbour rank (wpeer.h), dialled from the view and
 * dialled again when that rank's node changes or refused the handshake. A message is [Meta, floats]: the Meta
 * names the pipeline, micro-batch, direction and rows. A receiver waits at most
 * the request time-out, reading the scheduler's views meanwhile: a neighbour the
 * scheduler declares dead fails the wait at once with PSKV_EPEERDEAD naming its
 * rank.
 *
 * OWNS: w->pipe (the PUSH sockets).
 * THREADS: the calling thread only (the handle's user).
 * NEVER: never blocks past the request time-out; never trusts a message: type,
 *   job, sender rank, direction and the float count are checked before a float
 *   is copied. */
#ifndef PSKV_WPIPE_H
#define PSKV_WPIPE_H

#include "wstate.h"

/* Closes the PUSH sockets and frees w->pipe; NULL-safe. Messages still queued
 * get up to 2 s to leave. */
WINTERNAL void wpipe_close(pskv_worker *w);

#endif
