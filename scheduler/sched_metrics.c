/* The scheduler's metrics (sched_metrics.h). */
#include "sched_metrics.h"

#include <stdio.h>

#include "detect.h"
#include "events.h"
#include "group.h"
#include "membership.h"
#include "metrics.h"
#include "timeutil.h"
#include "view.h"

static met_series *alive_servers, *alive_workers, *alive_evaluators, *failovers, *drains, *ckpt_ok, *ckpt_failed,
    *ckpt_secs, *late, *lost;

int schedm_start(const char *bind_addr, int port)
{
    metrics_identity("scheduler", 0, -1);
    const char *nodes_help = "Live (not dead, not finished) nodes of the job, by role.";
    alive_servers = metrics_series("pskv_nodes_alive", MET_GAUGE, nodes_help, "of", "server");
    alive_workers = metrics_series("pskv_nodes_alive", MET_GAUGE, nodes_help, "of", "worker");
    alive_evaluators = metrics_series("pskv_nodes_alive", MET_GAUGE, nodes_help, "of",
                                      "evaluator");
    failovers = metrics_series("pskv_failovers_total", MET_COUNTER,
                               "Servers declared dead while the job ran, their partitions "
                               "given to others.", NULL, NULL);
    drains = metrics_series("pskv_drains_total", MET_COUNTER,
                            "Servers drained on purpose (pskvctl drain): their partitions "
                            "handed to the others, then let go.", NULL, NULL);
    const char *ck = "Checkpoints of the job, by result.";
    ckpt_ok = metrics_series("pskv_checkpoints_total", MET_COUNTER, ck, "result", "ok");
    ckpt_failed = metrics_series("pskv_checkpoints_total", MET_COUNTER, ck, "result", "failed");
    ckpt_secs = metrics_series("pskv_checkpoint_duration_seconds", MET_HISTOGRAM,
                               "Time from a checkpoint's start to its manifest entry.", NULL,
                               NULL);
    late = metrics_series("pskv_job_late_drops", MET_GAUGE,
                          "bsp pushes the live servers dropped as late (from heartbeats).",
                          NULL, NULL);
    lost = metrics_series("pskv_partitions_lost", MET_GAUGE,
                          "Partitions no live server holds whole: every replica died, or "
                          "the last whole one while the others awaited their copies.",
                          NULL, NULL);
    return metrics_start(bind_addr, port);
}

/* One series per worker rank (per group and rank in a service's named groups):
 * how many clocks it is ahead of its group's slowest live worker, 0 once it is
 * not live. A job's workers keep the one label worker_rank. */
static void worker_lags(void)
{
    for (int i = 0; i < memb.nnodes; i++) {
        memb_node *n = &memb.nodes[i];
        if (n->role != PSKV__ROLE__WORKER || n->replaced)
            continue;
        if (!n->lag) { /* looked up once per node: the registry search is linear */
            char rank[16];
            snprintf(rank, sizeof rank, "%d", n->rank);
            n->lag = metrics_series2("pskv_worker_clock_lag", MET_GAUGE,
                                     "Clocks this worker is ahead of the slowest live worker "
                                     "of its group.", *n->group ? "group" : "worker_rank",
                                     *n->group ? n->group : rank, *n->group ? "worker_rank"
                                     : NULL, rank);
        }
        int live = !n->dead && n->state != NODE_FINISHED;
        metrics_set(n->lag, live ? (double)(n->clock - group_slowest(n)) : 0);
    }
}

void schedm_tick(void)
{
    static int64_t next;
    int64_t now = tu_now_ms();
    if (now < next)
        return;
    next = now + 500;
    int servers = 0, workers = 0, evaluators = 0;
    double dropped = 0;
    for (int i = 0; i < memb.nnodes; i++) {
        const memb_node *n = &memb.nodes[i];
        int live = !n->dead && n->state != NODE_FINISHED;
        if (n->role == PSKV__ROLE__SERVER) {
            servers += live;
            dropped += live ? (double)n->dropped : 0;
        } else if (n->role == PSKV__ROLE__WORKER && live) {
            workers++;
        } else if (n->role == PSKV__ROLE__EVALUATOR) {
            evaluators += live;
        }
    }
    metrics_set(alive_servers, servers);
    metrics_set(alive_workers, workers);
    metrics_set(alive_evaluators, evaluators);
    metrics_set(late, dropped);
    metrics_set(lost, view_lost());
    group_metrics();
    detect_metrics(now);
    worker_lags();
}

static int on_died(void *ctx, const sched_ev *ev)
{
    (void)ctx;
    if (ev->node->role == PSKV__ROLE__SERVER && memb.state == JOB_RUNNING)
        metrics_add(failovers, 1);
    return 0;
}

void schedm_hooks(void) { events_subscribe(SCHED_EV_DIED, on_died, NULL); }

void schedm_drain(void) { metrics_add(drains, 1); }

void schedm_checkpoint(int ok, double seconds)
{
    metrics_add(ok ? ckpt_ok : ckpt_failed, 1);
    if (ok)
        metrics_observe(ckpt_secs, seconds);
}
