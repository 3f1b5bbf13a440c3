/* sweep: the eviction sweep, idle growth steps and the table counters for the
 * heartbeats (sweep.h). */
#include "sweep.h"

#include <malloc.h>
#include <string.h>

#include "lease.h"
#include "nspace.h"
#include "timeutil.h"

/* The namespaces of the tables with their bytes here and quotas, for the heartbeats
 * (every 100 ms: a heartbeat period is 100 ms or more). */
static int64_t next_ns; /* the next namespaces_pass */

static void namespaces_pass(table_set *ts)
{
    int64_t now = tu_now_ms();
    if (now < next_ns)
        return;
    next_ns = now + 100;
    lease_ns ns[LEASE_MAX_NS];
    size_t n = 0;
    for (size_t i = 0; i < tables_count(ts); i++) {
        const table *t = tables_at(ts, i);
        size_t k = 0;
        while (k < n && strcmp(ns[k].name, t->ns))
            k++;
        if (k < n || n == LEASE_MAX_NS)
            continue;
        memcpy(ns[n].name, t->ns, sizeof ns[n].name);
        ns[n].bytes = nspace_bytes(ts, t->ns);
        ns[n].quota = nspace_quota(ts, t->ns);
        n++;
    }
    lease_set_namespaces(ns, n);
}

/* The tables' totals (lease_set_tables) and namespaces for the heartbeats. */
static void report(table_set *ts)
{
    shard_mem all = {0};
    for (size_t i = 0; i < tables_count(ts); i++)
        shard_mem_add(tables_at(ts, i)->sh, &all);
    lease_set_tables(all.rows, all.admitted, all.not_admitted, all.evicted, all.bytes);
    namespaces_pass(ts);
}

void sweep_pass(table_set *ts, consist *c)
{
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
    }
    if (shrunk)
        malloc_trim(0);
    report(ts);
}

void sweep_report(table_set *ts)
{
    next_ns = 0; /* the namespaces now, not in up to 100 ms */
    report(ts);
}

int sweep_grow(table_set *ts, size_t budget)
{
    int growing = 0;
    for (size_t i = 0; i < tables_count(ts); i++)
        growing |= shard_grow_step(tables_at(ts, i)->sh, budget);
    return growing;
}
