/* The server's heartbeats and lease. Heartbeats come from a thread of their own,
 * on a socket of their own, so that one long step of the loop (growing a hash
 * map of millions of keys, a large copy) does not get this server declared
 * dead; the loop stamps each pass, and a loop stuck for 10 death time-outs (at
 * least 2 s) stops the heartbeats, so a wedged server is still replaced. The
 * thread renews the lease from the acknowledgements: a server serves only
 * within the lease its latest acknowledgement grants (lease_ms in the ack, else
 * the view's lease-ms) of that heartbeat's send time, which ends before the
 * scheduler can declare it dead (scheduler/detect.h).
 *
 * Owns: the heartbeat thread, its DEALER to the scheduler, the lease deadline.
 * lease_start, lease_view, lease_stop: the loop thread. lease_pass,
 * lease_set_stats, lease_set_whole, lease_valid: the loop thread (atomics shared with the
 * heartbeat thread). The heartbeat thread touches nothing but its own socket
 * and these atomics; it never changes job state. */
#ifndef PSKV_LEASE_H
#define PSKV_LEASE_H

#include <stdint.h>

#include "member.h"

/* Starts heartbeating for the registered member mb (its scheduler address,
 * period, job and node id are copied; its keys, mb->sec, must outlive the
 * thread). Returns 0 or -1 (logged: the server will be declared dead). */
int lease_start(void *ctx, const member *mb);

/* The loop made a pass now. */
void lease_pass(void);

/* Pushes dropped as late, pushes and pulls served so far, sent with the
 * heartbeats (with the resident memory). */
void lease_set_stats(uint64_t dropped, uint64_t pushes, uint64_t pulls);

/* What the tables hold (rows, admitted, not admitted, evicted, bytes), sent
 * with the heartbeats. */
void lease_set_tables(uint64_t rows, uint64_t admitted, uint64_t not_admitted, uint64_t evicted,
                      uint64_t bytes);

/* The latest view epoch whose placement this server holds whole (no partition
 * placed here still waits for its copy), sent with the heartbeats: the scheduler
 * lets a drained server go once every other holds the drain's placement whole. */
void lease_set_whole(uint64_t epoch);

#define LEASE_MAX_AWAITED 4096 /* partitions awaited that a heartbeat lists */

/* While copies are under way: the partitions of view `epoch`'s placement whose copy
 * this server awaits (ascending, n of them, copied), sent with the heartbeats so
 * that the scheduler knows the others are whole here (scheduler/holders.h);
 * epoch 0, or n > LEASE_MAX_AWAITED: none sent. The loop thread (a mutex guards
 * the copy). */
void lease_set_awaited(uint64_t epoch, const uint32_t *parts, size_t n);

#define LEASE_MAX_NS 16 /* namespaces a heartbeat carries */

/* One namespace of this server's tables, for the heartbeats (pskvctl status). */
typedef struct lease_ns {
    char name[65];
    uint64_t bytes, quota;
} lease_ns;

/* The namespaces of the tables (the first LEASE_MAX_NS of n), copied; the loop thread
 * (a mutex guards the copy the heartbeat thread reads). */
void lease_set_namespaces(const lease_ns *ns, size_t n);

/* A view arrived with lease_ms; the first one starts the first lease. */
void lease_view(int lease_ms);

/* 1 while the lease holds. */
int lease_valid(void);

/* Stops and joins the thread; safe when it never started. */
void lease_stop(void);

#endif
