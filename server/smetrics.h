/* smetrics: the server's Prometheus metrics (common/metrics.h holds the registry
 * and the endpoint): per table pushes, pulls, rows and bytes, update-apply time,
 * rows held; late drops, lease lapses, checkpoints.
 *
 * THREAD the server's loop thread, except smet_checkpoint (the checkpoint's
 *        writer thread may call it: the registry is locked).
 * NEVER  fails the caller: without --metrics-port the counters still count and
 *        nobody reads them. */
#ifndef PSKV_SMETRICS_H
#define PSKV_SMETRICS_H

#include <stddef.h>
#include <stdint.h>

#include "consist/consist.h"
#include "store/table.h"

/* Starts the endpoint on bind_addr:port (port 0: off) as server node/rank.
 * Returns 0, or -1 after logging why. */
int smet_start(const char *bind_addr, int port, int node, int rank);

/* A validated push (pull = 0) or pull of `rows` rows of t. */
void smet_request(const table *t, int pull, uint64_t rows);

/* One update applied to t's rows in `seconds`. */
void smet_apply(const table *t, double seconds);

/* Table t is being removed (its namespace dropped): its rows and its namespace's
 * bytes and quota read 0 from now on. */
void smet_table_dropped(const table *t);

/* The periodic refresh (at most every 500 ms): rows per table, late drops. */
void smet_tick(table_set *ts, const consist_stats *st);

/* The lease lapsed (once per lapse). */
void smet_lease_lapse(void);

/* A checkpoint written (ok) or failed, after `seconds`, of `bytes` (0 unknown). */
void smet_checkpoint(int ok, double seconds, uint64_t bytes);

#endif
