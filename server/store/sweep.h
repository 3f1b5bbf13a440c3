/* The eviction sweep (table option evict_after), the growth of sparse maps while
 * the loop is idle (sweep_grow) and the table counters the
 * heartbeats carry. Once per pass of the server's loop, between messages: each
 * sparse table with eviction looks at SWEEP_BUDGET map slots (shard_sweep, a few
 * tens of microseconds), so serving never waits for a whole table's sweep; when
 * a sweep moved a table to smaller arrays, malloc_trim gives the freed pages
 * back to the system. No thread, no lock.
 *
 * THREAD: the server's loop thread only. */
#ifndef PSKV_SWEEP_H
#define PSKV_SWEEP_H

#include "consist/consist.h"
#include "table.h"

#define SWEEP_BUDGET 16384 /* map slots per table per loop pass */
/* Rows a growing table moves per idle pass of the loop (sweep_grow): about
 * 1 ms at 10^8 rows, the most a message arriving meanwhile waits for it. */
#define GROW_IDLE_BUDGET 16384

/* One step of the sweep, then the totals for the heartbeats (lease_set_tables). */
void sweep_pass(table_set *ts, consist *c);

/* The totals and namespaces for the heartbeats, now (after tables were removed:
 * the next heartbeat no longer carries them). */
void sweep_report(table_set *ts);

/* The growth of sparse tables between messages: moves up to budget rows of each
 * table whose map is doubling (shard_grow_step; 0: none, only asks). Returns 1
 * while a table still has rows to move: the loop then polls without waiting and
 * calls it again with GROW_IDLE_BUDGET when no message was there. */
int sweep_grow(table_set *ts, size_t budget);

#endif
