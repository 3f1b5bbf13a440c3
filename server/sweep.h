/* The eviction sweep (table option evict_after) and the table counters the
 * heartbeats carry. Once per pass of the server's loop, between messages: each
 * sparse table with eviction looks at SWEEP_BUDGET map slots (shard_sweep, a few
 * tens of microseconds), so serving never waits for a whole table's sweep; when
 * a sweep moved a table to smaller arrays, malloc_trim gives the freed pages
 * back to the system. No thread, no lock.
 *
 * THREAD: the server's loop thread only. */
#ifndef PSKV_SWEEP_H
#define PSKV_SWEEP_H

#include "consist.h"
#include "table.h"

#define SWEEP_BUDGET 16384 /* map slots per table per loop pass */

/* One step of the sweep, then the totals for the heartbeats (lease_set_tables). */
void sweep_pass(table_set *ts, consist *c);

#endif
