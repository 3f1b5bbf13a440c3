/* The end-of-run report of the server's tables (tabstats.h). */
#include "tabstats.h"

#include <stdio.h>

#include "log.h"
#include "metrics.h"

void tabstats_log(table_set *ts)
{
    uint64_t keys = 0;
    for (size_t i = 0; i < tables_count(ts); i++) {
        table *t = tables_at(ts, i);
        keys += shard_size(t->sh);
        uint64_t lends, moves;
        shard_lend_stats(t->sh, &lends, &moves);
        LOG_I("table '%s': %llu keys here; %llu pull replies sent without a copy, %llu updates "
              "moved off values still being sent", t->name, (unsigned long long)shard_size(t->sh),
              (unsigned long long)lends, (unsigned long long)moves);
        shard_mem m = {0};
        shard_mem_add(t->sh, &m);
        char adm[160] = "", ev[96] = "";
        if (t->admit_after > 1)
            snprintf(adm, sizeof adm, "; %llu admitted, %llu pushes dropped before admission "
                     "(admit_after %u)", (unsigned long long)m.admitted,
                     (unsigned long long)m.not_admitted, t->admit_after);
        if (t->evict_after)
            snprintf(ev, sizeof ev, "; %llu rows evicted (evict_after %u clocks)",
                     (unsigned long long)m.evicted, t->evict_after);
        if (!t->dense)
            LOG_I("table '%s': %llu rows, %llu bytes%s%s; longest push %.2f ms of CPU", t->name,
                  (unsigned long long)m.rows, (unsigned long long)m.bytes, adm, ev,
                  (double)shard_longest_push_ns(t->sh) / 1e6);
        uint64_t bad, unstored;
        shard_update_stats(t->sh, &bad, &unstored);
        if (bad || unstored)
            LOG_I("table '%s': %llu rows restored after the updater made them NaN or infinite, "
                  "%llu ftrl pushes to new keys stored no row (weights left zero)", t->name,
                  (unsigned long long)bad, (unsigned long long)unstored);
    }
    double rss_bytes = metrics_resident_bytes();
    LOG_I("resident memory %.1f MiB for %llu keys (%.1f bytes per key)", rss_bytes / 1048576.0,
          (unsigned long long)keys, keys ? rss_bytes / (double)keys : 0.0);
}
