/* shttp: pskv-serve's HTTP answers (libmicrohttpd, as common/metrics.c):
 *   POST /v1/predict  {"rows": [...], "table": optional}  scores of the built-in model
 *   POST /v1/lookup   {"table": NAME, "keys": [...]}       the rows of those keys
 *   GET  /v1/model    the tables, their versions and staleness
 *   GET  /metrics     Prometheus text (common/metrics.h), with pskv_serve_*
 * Every answer carries the served version (the clock and wall time it reflects and
 * its staleness) in its JSON and in X-Pskv-Clock / X-Pskv-Staleness headers.
 *
 * Design: MHD's thread pool (--threads threads) answers; each request takes a
 * reference to its table's snapshot (snap.h), so answers never block the apply
 * of a newer version. A request past --queue in flight gets 503 at once (counted
 * in pskv_serve_rejected_total); bad input gets 400 with {"error", "field"}
 * naming what was wrong, and the daemon keeps serving.
 *
 * OWNS: the MHD daemon and each request's body buffer; not the store.
 * THREADS: MHD's; shttp_start and shttp_stop from the main thread.
 * NEVER: holds the store's lock while it computes or writes an answer. */
#ifndef PSKV_SHTTP_H
#define PSKV_SHTTP_H

#include <stddef.h>

#include "snap.h"

typedef struct shttp_cfg {
    const char *bind;    /* IPv4 address or "*" */
    int port;            /* 0 = any free port (see shttp_port) */
    int threads;         /* answering threads */
    int queue;           /* requests in flight beyond which 503 */
    size_t max_body;     /* bytes of a request body */
    size_t max_rows;     /* rows of a /v1/predict */
    size_t max_keys;     /* keys of a /v1/lookup */
    const char *source;  /* what the copy follows, shown by /v1/model */
} shttp_cfg;

typedef struct shttp shttp;

/* Starts answering from st (which must outlive the server). Returns the server,
 * or NULL with why (the address cannot be bound, out of memory). */
shttp *shttp_start(const shttp_cfg *cfg, snapstore *st, char *why, size_t whylen);

/* The port it listens on. */
int shttp_port(const shttp *h);

/* Stops answering (waits for the answers in progress) and frees; NULL-safe;
 * nulls *self_p. */
void shttp_stop(shttp **self_p);

#endif
