/* szmq: pskv-serve's ZeroMQ side (--zmq-port): LOOKUP answered with LOOKUP_REPLY in
 * the project's own framing (docs/protocol.md "Lookups in a served model"), the
 * same rows as POST /v1/lookup; libpskv's pskv_serve_lookup is its client.
 *
 * Design: one thread, one ROUTER socket, polled every 100 ms for the stop flag;
 * each request takes a reference to its table's snapshot (snap.h), so answers
 * never block the apply of a newer version. Bad input (malformed frames, an
 * unknown table, more keys than --max-keys) is answered with ERROR naming what
 * was wrong; the thread keeps serving.
 *
 * With keys (--keys) the socket is a CURVE server like every daemon's: the ZAP
 * handler (common/zap.h) admits only the keys the authorized file lists, of any
 * role; a plaintext client or an unlisted key gets nothing (counted and logged as
 * refusals, common/refuse.h).
 *
 * OWNS its context, socket and thread; not the store.
 * THREAD: its own; szmq_start and szmq_stop from the main thread.
 * NEVER holds the store's lock while it writes an answer. */
#ifndef PSKV_SZMQ_H
#define PSKV_SZMQ_H

#include <stddef.h>

#include "secure.h"
#include "snap.h"

typedef struct szmq szmq;

/* Binds tcp://bind:port (port 0: any free port) and starts answering from st
 * (which must outlive it). sec (borrowed; must outlive it) with keys makes the
 * socket a CURVE server: its ZAP handler runs in this side's context, so
 * szmq_stop ends it (secure_close) before the context. Returns it, or NULL with why. */
szmq *szmq_start(const char *bind, int port, size_t max_keys, snapstore *st, secure *sec,
                 char *why, size_t whylen);

/* The port it listens on. */
int szmq_port(const szmq *z);

/* Stops the thread, then sec's ZAP handler (secure_close, with keys), and frees;
 * NULL-safe; nulls *self_p. */
void szmq_stop(szmq **self_p);

#endif
