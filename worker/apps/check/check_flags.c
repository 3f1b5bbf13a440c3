/* The flags of the check and bench apps (check/): pskv-worker's flag table
 * (worker_main.c) takes them between its own head and the training flags, in
 * this order, which is --help's. apptab.h says how the table is composed. */
#include "apptab.h"

const cfg_entry apptab_check_flags[] = {
    /* check */
    {"leave", CFG_BOOL, "false", "PSKV_WORKER_LEAVE", 1, 0, NULL,
     "check --count-acked: close right after the rounds, without waiting for the others", 0,
     0, NULL, NULL},
    {"count-acked", CFG_BOOL, "false", "PSKV_WORKER_COUNT_ACKED", 1, 0, NULL,
     "check: +1 per key per clock; final values must equal the acknowledged pushes "
     "(workers may leave early or be late)", 0, 0, NULL, NULL},
    {"dead-ok", CFG_BOOL, "false", "PSKV_WORKER_DEAD_OK", 1, 0, NULL,
     "check --count-acked: a worker may die without reporting; values may exceed the "
     "acknowledged pushes by its rounds", 0, 0, NULL, NULL},
    {"acked-log", CFG_STR, "", "PSKV_WORKER_ACKED_LOG", 1, 0, NULL,
     "check --count-acked: keep the count of acknowledged pushes in this file, so that a "
     "worker started again with the same --rank and file goes on from it after kill -9", 0, 0,
     NULL, NULL},
    {"stop-file", CFG_STR, "", "PSKV_WORKER_STOP_FILE", 1, 0, NULL,
     "check --count-acked (async, ssp): end the rounds at the first clock after this file "
     "exists", 0, 0, NULL, NULL},
    {"rounds", CFG_INT, "3", "PSKV_WORKER_ROUNDS", 1, 1000000, NULL, "check: push rounds", 0, 0,
     NULL, NULL},
    {"check-keys", CFG_INT, "1000", "PSKV_WORKER_KEYS", 1, 100000000, NULL,
     "check: keys per table (was --keys N; --keys now names a key directory)", 0, 0, NULL,
     NULL},
    /* bench */
    {"size", CFG_INT, "1048576", "PSKV_WORKER_SIZE", 4, 1073741824, "bytes",
     "bench: value bytes per push and per pull (multiple of 4)", 0, 0, NULL, NULL},
    {"mode", CFG_STR, "both", "PSKV_WORKER_MODE", 1, 0, NULL,
     "bench: serial, pipelined, both (serial, pipelined, then pushpull where it applies: "
     "no --shm, --filter or 16-bit --wire), stream (pushes alone, 16 in flight) or pushpull "
     "(pskv_pushpull: one round trip a step)", 0, 0, NULL, NULL},
    {"steps", CFG_INT, "0", "PSKV_WORKER_STEPS", 0, 100000000, NULL,
     "bench: steps per run (0 = about 1 s worth); sparse-bench: update pushes per worker "
     "(0 = --rows keys in all)", 0, 0, NULL, NULL},
    {"warmup", CFG_INT, "20", "PSKV_WORKER_WARMUP", 0, 1000000, NULL, "bench: warm-up steps",
     0, 0, NULL, NULL},
    {"runs", CFG_INT, "5", "PSKV_WORKER_RUNS", 1, 1000, NULL, "bench: runs (median reported)",
     0, 0, NULL, NULL},
    {"gate", CFG_BOOL, "false", "PSKV_WORKER_GATE", 1, 0, NULL,
     "bench: before each run of a mode, read a line from stdin (end of input ends the bench; none in 600 s: exit 1): "
     "a driver takes turns with another worker on the same servers, run by run "
     "(python/bench/pushpull.py)", 0, 0, NULL, NULL},
    {"op", CFG_STR, "push-pull", "PSKV_WORKER_OP", 1, 0, NULL,
     "bench: push-pull (through the servers, --mode) or allreduce (pskv_allreduce among the "
     "workers)", 0, 0, NULL, NULL},
    {"reduce", CFG_STR, "sum", "PSKV_WORKER_REDUCE", 1, 0, NULL,
     "allreduce-check: sum or mean", 0, 0, NULL, NULL},
    {"wire", CFG_STR, "fp32", "PSKV_WORKER_WIRE", 1, 0, NULL,
     "values travel as fp32, fp16 or bf16: all-reduce chunks (--sync allreduce, bench --op "
     "allreduce, allreduce-check; added in float on arrival, every worker alike), or the "
     "pushes and pull replies of the tables of check, bench, mlp, softmax and sparse-lr "
     "(TableOptions wire: applied in fp32 by the servers; every worker alike)", 0, 0, NULL,
     NULL},
    {"ar-floats", CFG_INT, "1000", "PSKV_WORKER_AR_FLOATS", 0, 268435456, NULL,
     "allreduce-check: floats per all-reduce (each rank may give its own: a mismatch fails)",
     0, 0, NULL, NULL},
    {"push", CFG_STR, "nocopy", "PSKV_WORKER_PUSH", 1, 0, NULL,
     "bench and check: a dense run is pushed with nocopy (pskv_push_nocopy; bench's pushpull "
     "with PSKV_PP_NOCOPY) or copy (pskv_push; pskv_pushpull without it); "
     "check also buffer (pskv_push_buffer: with --shm and one server, written straight "
     "into the region the server reads) or buffer-clock (the same, last in each round, "
     "ending the clock: pskv_push_buffer_send_clock)", 0, 0, NULL, NULL},
    {"pull", CFG_STR, "copy", "PSKV_WORKER_PULL", 1, 0, NULL,
     "check: the dense table is pulled into the app's array (copy, pskv_pull) or read "
     "through pskv_pull_view (view), or each round ends with pskv_pushpull of the dense run "
     "(pushpull: its values after the push checked against the consistency model; "
     "pushpull-view: the same, read through a view, PSKV_PP_VIEW); bench: copy, or view "
     "(every mode's pulls into views, pskv_pull_view and PSKV_PP_VIEW, released each "
     "step)", 0, 0, NULL, NULL},
    {"baseline", CFG_STR, "", "PSKV_WORKER_BASELINE", 1, 0, NULL,
     "bench: raw ZeroMQ round-trip program (pskv-zmq-rtt) run before each run, for the ratio, "
     "with --own-io (--curve with --keys) (empty = none)", 0, 0, NULL, NULL},
    {"rows", CFG_INT, "10000000", "PSKV_WORKER_ROWS", 1, 4e9, NULL,
     "sparse-bench: distinct random 64-bit keys (the table's rows after the fill)", 0, 0, NULL,
     NULL},
    {"push-keys", CFG_INT, "8192", "PSKV_WORKER_PUSH_KEYS", 1, 16777216, NULL,
     "sparse-bench: keys per push", 0, 0, NULL, NULL},
    CFG_END};
