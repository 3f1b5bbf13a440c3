/* A worker's metrics (wmetrics.h). */
#include "wmetrics.h"

#include "metrics.h"

static met_series *late, *clock_now, *clock_msgs, *clock_rides, *ar_bytes;
static met_series *bal_batch, *bal_us, *st_first, *st_last, *st_ms; /* on first use */

void wmet_table(tbl *t)
{
    const char *n = t->name;
    t->m_push = metrics_series("pskv_pushes_total", MET_COUNTER,
                               "Push requests this worker made.", "table", n);
    t->m_pull = metrics_series("pskv_pulls_total", MET_COUNTER,
                               "Pull requests this worker made.", "table", n);
    t->m_push_rows = metrics_series("pskv_push_rows_total", MET_COUNTER,
                                    "Rows this worker pushed.", "table", n);
    t->m_pull_rows = metrics_series("pskv_pull_rows_total", MET_COUNTER,
                                    "Rows this worker pulled.", "table", n);
    t->m_push_bytes = metrics_series("pskv_push_bytes_total", MET_COUNTER,
                                     "Value bytes this worker pushed (rows x width x 4; keys "
                                     "and headers not counted).", "table", n);
    t->m_pull_bytes = metrics_series("pskv_pull_bytes_total", MET_COUNTER,
                                     "Value bytes this worker pulled.", "table", n);
    t->m_latency = metrics_series("pskv_request_seconds", MET_HISTOGRAM,
                                  "Time from a push or pull's send to its last answer, as "
                                  "this worker saw it.", "table", n);
}

void wmet_request(const tbl *t, int pull, uint64_t rows, uint64_t bytes)
{
    metrics_add(pull ? t->m_pull : t->m_push, 1);
    metrics_add(pull ? t->m_pull_rows : t->m_push_rows, (double)rows);
    metrics_add(pull ? t->m_pull_bytes : t->m_push_bytes, (double)bytes);
}

void wmet_done(const pskv_worker *w, const req *r)
{
    if ((r->type != REQ_PUSH && r->type != REQ_PULL) || r->table < 0 ||
        r->table >= w->ntables || r->err)
        return;
    metrics_observe(w->tables[r->table].m_latency, (double)(tu_now_ns() - r->t0_ns) / 1e9);
}

int wmet_start(pskv_worker *w, const char *bind_addr, int port)
{
    metrics_identity(w->evaluator ? "evaluator" : "worker", (int)w->mb.node_id, w->mb.rank);
    late = metrics_series("pskv_late_drops_total", MET_COUNTER,
                          "bsp pushes of this worker dropped as late.", NULL, NULL);
    clock_now = metrics_series("pskv_worker_clock", MET_GAUGE,
                               "Iterations this worker finished (its clock).", NULL, NULL);
    clock_msgs = metrics_series("pskv_worker_clock_messages_total", MET_COUNTER,
                                "CLOCK messages this worker sent (one a server a clock, but "
                                "where the clock rode on a push part).", NULL, NULL);
    clock_rides = metrics_series("pskv_worker_clock_rides_total", MET_COUNTER,
                                 "Clock ends that rode on a push part to its server (pskv_pushpull, "
                                 "pskv_push_buffer_send_clock) "
                                 "instead of a CLOCK message.", NULL, NULL);
    ar_bytes = metrics_series("pskv_allreduce_bytes_total", MET_COUNTER,
                              "Value bytes this worker sent in all-reduce pieces (4 a value, "
                              "2 with an fp16 or bf16 wire; headers not counted).", NULL, NULL);
    if (port <= 0 || metrics_listening())
        return 0;
    char why[300];
    int rc = metrics_listen(bind_addr, port, why, sizeof why);
    return rc < 0 ? wst_error(w, rc, "%s", why) : 0;
}

void wmet_worker(const pskv_worker *w)
{
    metrics_set(late, (double)w->late_drops);
    metrics_set(clock_now, (double)atomic_load(&w->clock));
    metrics_set(clock_msgs, (double)w->clock_msgs);
    metrics_set(clock_rides, (double)w->clock_rides);
}

void wmet_allreduce_sent(uint64_t bytes) { metrics_add(ar_bytes, (double)bytes); }

void wmet_balance(int batch, double us_per_example)
{
    if (!bal_batch) {
        bal_batch = metrics_series("pskv_worker_batch", MET_GAUGE,
                                   "--balance batch: this worker's share of the global batch "
                                   "(examples a step).", NULL, NULL);
        bal_us = metrics_series("pskv_worker_us_per_example", MET_GAUGE,
                                "--balance batch: this worker's latest measured compute time "
                                "per example (us; 0 = not measured).", NULL, NULL);
    }
    metrics_set(bal_batch, batch);
    metrics_set(bal_us, us_per_example);
}

void wmet_stage(int first, int last, double ms_per_micro)
{
    if (!st_first) {
        st_first = metrics_series("pskv_stage_first_layer", MET_GAUGE,
                                  "--balance stages: this stage's first layer.", NULL, NULL);
        st_last = metrics_series("pskv_stage_last_layer", MET_GAUGE,
                                 "--balance stages: this stage's last layer.", NULL, NULL);
        st_ms = metrics_series("pskv_stage_ms_per_micro", MET_GAUGE,
                               "--balance stages: this stage's latest time per micro-batch "
                               "(ms; 0 = not measured).", NULL, NULL);
    }
    metrics_set(st_first, first);
    metrics_set(st_last, last);
    metrics_set(st_ms, ms_per_micro);
}
