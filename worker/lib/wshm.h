/* wshm: the worker's side of shared memory with servers on its host
 * (pskv_config.shm, --shm; docs/protocol.md "Shared memory"). Internal to libpskv
 * (see wstate.h).
 *
 * Per server the worker makes one segment (shmseg_create) when it first sends it a
 * large enough part. A push part's values are copied into a region of it instead
 * of travelling as a frame; a pull part reserves the region its reply's values are
 * written to. A part holds its region until it ends (wshm_release); the first
 * answer that proves the server mapped the segment unlinks its name, so a worker
 * killed after that leaves nothing in /dev/shm (one killed before: shmseg_sweep at
 * the next worker's start). Control (headers, acks, time-outs, re-sends) stays on
 * ZeroMQ. This host's identity (boot id and network namespace) goes with the
 * references to a server until it answered one: the server keeps it per worker.
 *
 * A region whose server may still touch it is never given out again: when a part
 * ends or is sent again without an answer to its last send (a time-out, a dead
 * server, a silent one re-sent), its segment is retired (unlinked, no new regions)
 * and the server gets a new one, of the next generation; the old mapping goes when
 * its last region does. A server that refuses shared memory (another host or user:
 * PSKV_ENOSHM) gets frames over TCP from then on.
 *
 * OWNS: the segments (srv[].shm holds one reference to its current one, each
 *   region one more); part.shm* a part's region.
 * THREADS: the calling thread only.
 * NEVER: never blocks; a region that cannot be had (segment full, cannot create)
 *   sends that part over TCP as before. */
#ifndef PSKV_WSHM_H
#define PSKV_WSHM_H

#include "wstate.h"

#define WSHM_MIN_BYTES 65536          /* smaller parts go as frames: nothing to save */
#define WSHM_SEG_BYTES (256ul << 20)  /* address space of one segment (pages on use) */

/* Whether a part of `bytes` value bytes of table t to server si goes through
 * shared memory: --shm, the server did not refuse it, float32 values with no
 * filter, and large enough. */
WINTERNAL int wshm_usable(const pskv_worker *w, const tbl *t, int si, size_t bytes);

/* A region of `bytes` bytes for part p (on its server's current segment, made if
 * need be) and the part's reference to it; the part's previous region is given
 * up first (retiring its segment when unanswered). NULL when none can be had:
 * the part goes over TCP. */
WINTERNAL float *wshm_take(pskv_worker *w, part *p, size_t bytes);

/* A region of `bytes` on server si's current segment (made if need be) for a push
 * buffer: res (a part of no request; res->server set here) holds it, as answered,
 * until wshm_release(res). NULL when none can be had. */
WINTERNAL float *wshm_reserve(pskv_worker *w, int si, part *res, size_t bytes);

/* Part p, on its first send, names the region res reserved instead of one of its
 * own, when `vals` (its values) are that region and it lies on p's server's
 * current segment with p's length: p borrows it (a reference to the segment, no
 * region of its own; its release retires the segment if the server may still read
 * it). Returns 1 (borrowed) or 0 (p takes a region as usual). */
WINTERNAL int wshm_borrow(pskv_worker *w, part *p, const part *res, const float *vals,
                          size_t bytes);

/* Sets the shared-memory fields of m (a PUSH or PULL) to p's region; this host's
 * identity (shm_host) only until p's server answered a reference (it keeps it). */
WINTERNAL void wshm_meta(const pskv_worker *w, const part *p, Pskv__Meta *m);

/* The server answered the latest send of p (m: the answer). A non-error answer
 * proves the server mapped the segment, having checked this worker's host: its
 * name is unlinked, and the host goes no more to that server. */
WINTERNAL void wshm_heard(pskv_worker *w, part *p, const Pskv__Meta *m);

/* A pull reply's values in p's region, or NULL when the reply names another
 * region (a reply to an earlier send of the part: dropped). */
WINTERNAL const float *wshm_reply(const part *p, const Pskv__Meta *m);

/* Server si refused shared memory (PSKV_ENOSHM): frames from now on. */
WINTERNAL void wshm_refused(pskv_worker *w, int si, const char *why);

/* Part p ends (its request is released): its region freed, or its segment retired
 * when the server may still touch the region. NULL-safe on a part without one. */
WINTERNAL void wshm_release(part *p);

/* Drops server si's current segment (it died, left, or the handle closes):
 * retired and unlinked; unmapped with its last region. */
WINTERNAL void wshm_drop(pskv_worker *w, int si);

#endif
