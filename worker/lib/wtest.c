/* Test-only hooks of libpskv (wtest.h). */
#define _GNU_SOURCE
#include "wtest.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "pskv_errors.h"

int wtest_init(wtest *t)
{
    t->view_delay_ms = 0;
    t->sched_seen = 0;
    t->gap_clock = -1;
    t->gap_ms = 0;
    t->keys_rank = -1;
    t->keys_ms = 0;
    t->keys_due = 0;
    const char *v = getenv("PSKV_TEST_VIEW_DELAY_MS");
    if (v && *v) {
        char *end;
        long ms = strtol(v, &end, 10);
        if (*end || ms < 0 || ms > 600000) {
            LOG_E("PSKV_TEST_VIEW_DELAY_MS '%s': not a number of ms from 0 to 600000", v);
            return -PSKV_EINVAL;
        }
        t->view_delay_ms = (int)ms;
        LOG_W("test hook PSKV_TEST_VIEW_DELAY_MS: views are read %ld ms late", ms);
    }
    const char *g = getenv("PSKV_TEST_CLOCK_GAP");
    if (g && *g) {
        int64_t clock;
        int ms, used = 0;
        if (sscanf(g, "%" SCNd64 ":%d%n", &clock, &ms, &used) != 2 || g[used] || clock < 0 ||
            ms < 0 || ms > 600000) {
            LOG_E("PSKV_TEST_CLOCK_GAP '%s': not CLOCK:MS (a clock >= 0, 0 to 600000 ms)", g);
            return -PSKV_EINVAL;
        }
        t->gap_clock = clock;
        t->gap_ms = ms;
        LOG_W("test hook PSKV_TEST_CLOCK_GAP: CLOCK %" PRId64 " reaches all but the first "
              "server %d ms late", clock, ms);
    }
    const char *k = getenv("PSKV_TEST_FIRST_VIEW_DELAY");
    if (k && *k) {
        int rank, ms, used = 0;
        if (sscanf(k, "%d:%d%n", &rank, &ms, &used) != 2 || k[used] || rank < 0 || ms < 0 ||
            ms > 600000) {
            LOG_E("PSKV_TEST_FIRST_VIEW_DELAY '%s': not RANK:MS (a rank >= 0, 0 to 600000 ms)",
                  k);
            return -PSKV_EINVAL;
        }
        t->keys_rank = rank;
        t->keys_ms = ms;
    }
    return 0;
}

int wtest_sched_ready(wtest *t, int64_t now, long *wait_ms)
{
    if (!t->view_delay_ms)
        return 1;
    if (!t->sched_seen)
        t->sched_seen = now;
    int64_t due = t->sched_seen + t->view_delay_ms;
    if (now >= due)
        return 1;
    *wait_ms = (long)(due - now);
    return 0;
}

void wtest_sched_read(wtest *t) { t->sched_seen = 0; }

int wtest_clock_gap(const wtest *t, int64_t clock) { return t->gap_ms && clock == t->gap_clock; }

int wtest_view_keys_ready(wtest *t, int rank, int64_t now, long *wait_ms)
{
    if (t->keys_rank < 0 || rank != t->keys_rank || t->keys_due < 0)
        return 1;
    if (!t->keys_due) {
        t->keys_due = now + t->keys_ms;
        LOG_W("test hook PSKV_TEST_FIRST_VIEW_DELAY: this worker's listening socket admits "
              "its peers' keys only in %d ms", t->keys_ms);
    }
    if (now < t->keys_due) {
        *wait_ms = (long)(t->keys_due - now);
        return 0;
    }
    t->keys_due = -1;
    LOG_W("test hook PSKV_TEST_FIRST_VIEW_DELAY: the listening socket admits the view's keys "
          "now");
    return 1;
}

int wtest_view_keys_held(const wtest *t) { return t->keys_due > 0; }
