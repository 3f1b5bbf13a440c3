/* wmetrics: a worker's Prometheus metrics (common/metrics.h holds the registry
 * and the endpoint). INTERNAL to libpskv. Per table: pushes, pulls, rows and
 * value bytes, and each request's latency from its send to its last answer;
 * per worker: late drops, its clock, its CLOCK messages and clock ends riding on
 * pushpull parts, and the value bytes its all-reduce pieces carried;
 * with load balancing its batch and time per example, or its stage's layers and time.
 *
 * The series live in the process's registry; the endpoint, once started by
 * pskv_worker_open (pskv_config.metrics_port), serves until the process ends
 * (pskv-worker stops it with metrics_stop at its end, after --metrics-linger has
 * kept the final values up before the worker left the job).
 * THREAD the thread that uses the handle (the registry is locked). */
#ifndef PSKV_WMETRICS_H
#define PSKV_WMETRICS_H

#include "wstate.h"

/* The series of table `t` (by its name). */
WINTERNAL void wmet_table(tbl *t);

/* A push (pull = 0) or pull of `rows` rows, `bytes` value bytes, made on t. */
WINTERNAL void wmet_request(const tbl *t, int pull, uint64_t rows, uint64_t bytes);

/* Request r (a push or pull) answered, made at r->t0_ns. */
WINTERNAL void wmet_done(const pskv_worker *w, const req *r);

/* Identity and worker-wide series; starts the endpoint on bind_addr:port when
 * port > 0 and none runs yet. Returns 0 or a negated error (in last_error). */
WINTERNAL int wmet_start(pskv_worker *w, const char *bind_addr, int port);

/* An all-reduce piece of `bytes` value bytes sent. */
WINTERNAL void wmet_allreduce_sent(uint64_t bytes);

/* --balance batch (pskv_set_balance): this worker's batch and time per example,
 * gauges registered on the first call (a worker without it shows none). */
WINTERNAL void wmet_balance(int batch, double us_per_example);

/* --balance stages (pskv_set_stage_layers): this stage's layers and time per
 * micro-batch, registered on the first call. */
WINTERNAL void wmet_stage(int first, int last, double ms_per_micro);

/* After a late drop or a clock change: the worker-wide series. */
WINTERNAL void wmet_worker(const pskv_worker *w);

#endif
