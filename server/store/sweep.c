/* sweep: the eviction sweep, idle growth steps and the table counters for the
 * heartbeats (sweep.h). */
#include "sweep.h"

#include <malloc.h>

#include "lease.h"

void sweep_pass(table_set *ts, consist *c)
{
    shard_mem all = {0};
    int shrunk = 0;
    for (size_t i = 0; i < tables_count(ts); i++) {
        table *t = tables_at(ts, i);
        if (t->evict_after) {
            shard_mem before = {0}, after = {0};
            shard_mem_add(t->sh, &before);
            shard_sweep(t->sh, consist_values_clock(c, t), SWEEP_BUDGET);
            shard_mem_add(t->sh, &after);
            shrunk |= after.bytes < before.bytes;
        }
        shard_mem_add(t->sh, &all);
    }
    if (shrunk)
        malloc_trim(0);
    lease_set_tables(all.rows, all.admitted, all.not_admitted, all.evicted, all.bytes);
}

int sweep_grow(table_set *ts, size_t budget)
{
    int growing = 0;
    for (size_t i = 0; i < tables_count(ts); i++)
        growing |= shard_grow_step(tables_at(ts, i)->sh, budget);
    return growing;
}
