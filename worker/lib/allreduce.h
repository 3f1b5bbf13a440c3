/* allreduce: pskv_allreduce, a ring all-reduce among the job's workers over
 * worker-to-worker ZeroMQ sockets (the call itself is declared in pskv.h).
 * Internal to libpskv (see wstate.h).
 *
 * Design: every worker listens (wpeer_listen: a PULL bound at open on --bind/--port,
 * its port advertised in REGISTER, so the scheduler's view carries every worker's
 * address) and dials the next rank's with a PUSH, so that each rank receives
 * only from the previous one, in the order it sent. A call is 2(N-1) steps:
 * reduce-scatter (rank r sends chunk r-t at step t, adds chunk r-t-1 it
 * receives), then all-gather (the owner's reduced chunk goes round and is
 * copied). Chunks travel in pieces of chunk_bytes (at most 1024 a chunk), cut
 * by the chunk's first sender; a piece received is reduced and sent on as the
 * next step's piece at once, so sending and receiving overlap. fp32 pieces go
 * without a copy, from the caller's array; with a 16-bit wire (w->ar_wire,
 * common/half) each piece is converted into its own frame (in all-gather the
 * frame received goes on as it came), added in float on arrival, and a chunk's
 * owner rounds its final sum to the wire before all-gather. Each chunk is summed
 * in one fixed order along the ring and all-gather hands out its owner's bits,
 * so every rank ends with the same bits.
 * A failure on one rank (a bad n, a silence, a dead peer, a rank missing from
 * the view) is sent round as an abort, so every rank fails the same call with
 * the same message.
 * Re-forming the ring after a death: calls are counted per epoch, the barriers a
 * rank has called (every rank calls the same barriers between the same calls), and
 * a piece of another epoch is dropped. A call whose members (the node of each
 * rank) differ from those of the last call that succeeded fails with
 * PSKV_EPEERDEAD, in any epoch, until pskv_allreduce_rejoin (every rank live
 * again, then a barrier, which the worker that took a rank over meets as its
 * first) starts the next epoch with the new members.
 *
 * OWNS: w->ar (the connection to the next rank (wpeer.h), the epoch, its call
 *   counter, the last good members); it reads the ring's pieces from w->peer_in.
 * THREADS: the calling thread only (the handle's user).
 * NEVER: never blocks past the request time-out without a message from the
 *   previous rank; never trusts a piece: rank, call, step, n, op and bounds are
 *   checked before a float is touched. */
#ifndef PSKV_ALLREDUCE_H
#define PSKV_ALLREDUCE_H

#include "wstate.h"

/* Creates w->ar (PSKV_AR_TRACE read), before the listening socket (wpeer_listen)
 * and before the worker registers. Returns 0 or a negated error with last_error
 * set (w->ar may be left for war_close). */
WINTERNAL int war_open(pskv_worker *w);

/* Closes the connection to the next rank and frees w->ar; NULL-safe. Pieces still
 * queued to the next rank get up to 2 s to leave when the last call succeeded or
 * this rank sent an abort (so that the abort reaches a next rank that started
 * late), none else. The listening socket is wpeer_unlisten's. */
WINTERNAL void war_close(pskv_worker *w);

#endif
