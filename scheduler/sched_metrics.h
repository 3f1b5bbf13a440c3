/* sched_metrics: the scheduler's Prometheus metrics (common/metrics.h holds the
 * registry and the endpoint): nodes alive by role, each worker's clock lag
 * behind the slowest, late drops the servers report, server failovers, drains,
 * checkpoints and their durations.
 *
 * THREAD the scheduler's loop thread. NEVER fails the caller. */
#ifndef PSKV_SCHED_METRICS_H
#define PSKV_SCHED_METRICS_H

/* Registers the series and starts the endpoint on bind_addr:port (0 = off).
 * Returns 0, or -1 after logging why. */
int schedm_start(const char *bind_addr, int port);

/* The periodic refresh (at most every 500 ms) from the node table. */
void schedm_tick(void);

/* Subscribes to the node events (events.h): a server declared dead while the job
 * runs, its partitions re-placed, counts a failover. Once, before the event loop,
 * after the policies' hooks (as the failover was counted after checkpoint.c was
 * told). */
void schedm_hooks(void);

/* A server drained (pskvctl drain) and let go, its partitions handed over. */
void schedm_drain(void);

/* Checkpoint finished (ok) or failed after `seconds`. */
void schedm_checkpoint(int ok, double seconds);

#endif
