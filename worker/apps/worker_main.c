/* pskv-worker: joins a job through libpskv and runs one application. Built with
 * -DPSKV_EVALUATOR it is pskv-evaluator instead: the same flags (so the evaluator
 * takes every app flag the workers take), the evaluator role, app_eval.c. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps.h"
#include "apptab.h"
#include "filter.h"
#include "updflags.h"
#include "config.h"
#include "half.h"
#include "log.h"
#include "train/lrsched.h"
#include "member.h"
#include "metrics.h"
#include "net.h"
#include "pskv.h"
#include "train/lscale.h"
#include "train/train_ar.h"
#include "timeutil.h"

#ifdef PSKV_EVALUATOR
#define PROG "pskv-evaluator"
#else
#define PROG "pskv-worker"
#endif

extern void openblas_set_num_threads(int);

static void on_stop(int sig) { app_stop_signal = sig; }

/* With the endpoint on and the application done, before the worker leaves the
 * job: says the bytes pushed, then serves the final values for `seconds` (the
 * job, and so every daemon's endpoint, stays up meanwhile). SIGINT or SIGTERM
 * ends the linger; the worker then leaves as after the linger (exit status of
 * the application). */
static void linger_metrics(double seconds)
{
    if (!metrics_listening())
        return;
    LOG_I("pushed %.0f value bytes in all (pskv_push_bytes_total); serving metrics %.1f s more",
          metrics_sum("pskv_push_bytes_total"), seconds);
    for (int64_t until = tu_now_ms() + (int64_t)(seconds * 1000);
         !app_stop_signal && tu_now_ms() < until;)
        usleep(20000);
    app_stop_signal = 0;
}

static cfg_entry config[] = {
    {"scheduler", CFG_STR, "127.0.0.1:7700", "PSKV_SCHEDULER", 1, 0, NULL,
     "scheduler address HOST:PORT", 0, 0, NULL, NULL},
    {"app", CFG_STR, "check", "PSKV_WORKER_APP", 1, 0, NULL,
     NULL /* "application: " and the app table's names: usage_texts */, 0, 0, NULL, NULL},
    {"rank", CFG_INT, "-1", "PSKV_WORKER_RANK", -1, 65535, NULL,
     "rank to take (-1 = the scheduler assigns one)", 0, 0, NULL, NULL},
    {"request-timeout", CFG_DOUBLE, "30", "PSKV_WORKER_REQUEST_TIMEOUT", 0.01, 86400, "s",
     "a push, pull or table open not answered by then fails", 0, 0, NULL, NULL},
    {"window", CFG_INT, "64", "PSKV_WORKER_WINDOW", 1, 4096, NULL,
     "requests in flight before push/pull block", 0, 0, NULL, NULL},
    {"retry-ms", CFG_INT, "1000", "PSKV_WORKER_RETRY_MS", 0, 3600000, "ms",
     "re-send a push or pull on an async table unanswered this long, to the owner of the "
     "latest view (0 = never)", 0, 0, NULL, NULL},
    {"spin-us", CFG_INT, "100", "PSKV_WORKER_SPIN_US", 0, 100000, "us",
     "wait for a reply to a small request (<= 64 KiB) without sleeping for up to this long",
     0, 0, NULL, NULL},
    {"slice-us", CFG_INT, "100", "PSKV_WORKER_SLICE_US", 0, 100000, "us",
     "scheduling slice libpskv's ZeroMQ I/O thread asks the kernel for (Linux 6.12 or "
     "later): replies taken in as they arrive while compute runs (0 = the kernel's default)",
     0, 0, NULL, NULL},
    {"shm", CFG_BOOL, "false", "PSKV_WORKER_SHM", 1, 0, NULL,
     "push and pull values of 64 KiB or more through shared memory (/dev/shm) with servers "
     "on this host run by the same user; headers, other servers and the rest over TCP", 0, 0,
     NULL, NULL},
    {"chunk-bytes", CFG_INT, "1048576", "PSKV_WORKER_CHUNK_BYTES", 4, 1073741824, "bytes",
     "dense runs travel in messages of at most this many value bytes", 0, 0, NULL, NULL},
    {"join-timeout", CFG_DOUBLE, "600", "PSKV_WORKER_JOIN_TIMEOUT", 1, 86400, "s",
     "how long to wait for the cluster to be complete", 0, 0, NULL, NULL},
    {"job-id", CFG_INT, "0", "PSKV_JOB_ID", 0, 9.2e18, NULL, "job to join (0 = the scheduler's)",
     0, 0, NULL, NULL},
    CFG_METRICS_ENTRY("PSKV_WORKER_METRICS_PORT"),
    {"metrics-linger", CFG_DOUBLE, "0", "PSKV_WORKER_METRICS_LINGER", 0, 86400, "s",
     "with --metrics-port: when the application is done, keep serving its final metrics this "
     "long before leaving the job (so that a scraper sees the last values; the job waits); "
     "SIGINT or SIGTERM ends it", 0, 0, NULL, NULL},
    /* consistency */
    {"consistency", CFG_STR, "async", "PSKV_WORKER_CONSISTENCY", 1, 0, NULL,
     "table consistency model: async, bsp or ssp:TAU (bounded delay)", 0, 0, NULL, NULL},
    {"filter", CFG_STR, "", "PSKV_WORKER_FILTER", 1, 0, NULL,
     "wire filters of the app's tables, comma-separated NAME[:ARGS] (repeatable: the lists "
     "join): keycache[:MB], lz4, "
     "zstd[:LEVEL]; lossy, for dense non-sum tables: int8, sign, significant:THRESH; "
     "sparse-lr with --updater sgd --momentum 0 --l1 L: kkt[:MARGIN] (rows at zero weight "
     "inside the L1 band not pushed) (docs/protocol.md, \"Filters\")", 0, 0, NULL, NULL},
    {"backup", CFG_INT, "0", "PSKV_WORKER_BACKUP", 0, 65535, NULL,
     "bsp: close each clock with the first W - backup workers", 0, 0, NULL, NULL},
    {"slowdown", CFG_DOUBLE, "1", "PSKV_WORKER_SLOWDOWN", 1, 1000, NULL,
     "make this worker's compute this many times slower (a straggler)", 0, 0, NULL, NULL},
    {"jitter", CFG_STR, "", "PSKV_WORKER_JITTER", 1, 0, NULL,
     "P:F: each iteration F times slower with probability P (transient delays)", 0, 0, NULL,
     NULL},
    {"accumulate", CFG_INT, "1", "PSKV_WORKER_ACCUMULATE", 1, 65536, NULL,
     "average this many micro-batch gradients locally before one push", 0, 0, NULL, NULL},
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
     "bench: serial, pipelined, both (serial then pipelined) or stream (pushes alone, 16 in "
     "flight)", 0, 0, NULL, NULL},
    {"steps", CFG_INT, "0", "PSKV_WORKER_STEPS", 0, 100000000, NULL,
     "bench: steps per run (0 = about 1 s worth); sparse-bench: update pushes per worker "
     "(0 = --rows keys in all)", 0, 0, NULL, NULL},
    {"warmup", CFG_INT, "20", "PSKV_WORKER_WARMUP", 0, 1000000, NULL, "bench: warm-up steps",
     0, 0, NULL, NULL},
    {"runs", CFG_INT, "5", "PSKV_WORKER_RUNS", 1, 1000, NULL, "bench: runs (median reported)",
     0, 0, NULL, NULL},
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
     "bench and check: a dense run is pushed with nocopy (pskv_push_nocopy) or copy (pskv_push); "
     "check also buffer (pskv_push_buffer: with --shm and one server, written straight "
     "into the region the server reads)", 0, 0, NULL, NULL},
    {"pull", CFG_STR, "copy", "PSKV_WORKER_PULL", 1, 0, NULL,
     "check: the dense table is pulled into the app's array (copy, pskv_pull) or read "
     "through pskv_pull_view (view)", 0, 0, NULL, NULL},
    {"baseline", CFG_STR, "", "PSKV_WORKER_BASELINE", 1, 0, NULL,
     "bench: raw ZeroMQ round-trip program (pskv-zmq-rtt) run before each run, for the ratio "
     "(empty = none)", 0, 0, NULL, NULL},
    {"rows", CFG_INT, "10000000", "PSKV_WORKER_ROWS", 1, 4e9, NULL,
     "sparse-bench: distinct random 64-bit keys (the table's rows after the fill)", 0, 0, NULL,
     NULL},
    {"push-keys", CFG_INT, "8192", "PSKV_WORKER_PUSH_KEYS", 1, 16777216, NULL,
     "sparse-bench: keys per push", 0, 0, NULL, NULL},
    /* training */
    {"sync", CFG_STR, "ps", "PSKV_WORKER_SYNC", 1, 0, NULL,
     "softmax, mlp: ps (push gradients to the servers, pull weights) or allreduce (the mean "
     "gradient by pskv_allreduce among the workers, the same update applied on every worker; "
     "the servers keep a copy of the weights, --copy-every) or local (no communication a "
     "step: each worker applies its own gradient to its own weights; rank 0's are copied to "
     "the servers every --copy-every steps: the compute-only ceiling)", 0, 0, NULL, NULL},
    {"loss-scale", CFG_STR, "", "PSKV_WORKER_LOSS_SCALE", 1, 0, NULL,
     "--sync allreduce: the gradient is multiplied by S before the all-reduce and divided "
     "after; a mean with an inf or NaN skips the step on every worker. mlp, softmax with "
     "--sync ps and --wire fp16|bf16: pushes carry the gradient times S, the servers divide; "
     "a step whose scaled gradient is not finite in the wire precision pushes nothing. "
     "dynamic: S starts at 65536, halves on a skipped step and doubles after --scale-window "
     "clean steps (within 2^-24 .. 2^24); a number: S fixed (with --sync ps a power of two) "
     "(empty = none)", 0, 0, NULL, NULL},
    {"scale-window", CFG_INT, "2000", "PSKV_WORKER_SCALE_WINDOW", 1, 1e9, "steps",
     "--loss-scale dynamic: clean steps before the scale doubles", 0, 0, NULL, NULL},
    {"plant-overflow", CFG_INT, "0", "PSKV_WORKER_PLANT_OVERFLOW", 0, 1e12, "step",
     "mlp, softmax, for tests: rank 0's gradient holds the largest float at this step "
     "(1 = the first; 0 = never)", 0, 0, NULL, NULL},
    {"zero", CFG_INT, "0", "PSKV_WORKER_ZERO", 0, 1, NULL,
     "--sync allreduce: 1 = ZeRO stage 1: gradients reduce-scattered, each worker updates "
     "its 1/N of the weights with that slice's optimizer state only, weights all-gathered "
     "(0 = every worker updates all)", 0, 0, NULL, NULL},
    {"copy-every", CFG_INT, "100", "PSKV_WORKER_COPY_EVERY", 1, 1e9, "steps",
     "--sync allreduce: rank 0 writes the weights to the servers (pskv_assign) every N steps "
     "and at the end, so checkpoints and --save-model hold them", 0, 0, NULL, NULL},
    {"rejoin-timeout", CFG_DOUBLE, "60", "PSKV_WORKER_REJOIN_TIMEOUT", 0.1, 86400, "s",
     "--sync allreduce: after a worker died, the others wait this long for a worker started "
     "with its --rank to take it over, then go on from the servers' copy (--copy-every); "
     "else they exit 1 naming the rank", 0, 0, NULL, NULL},
    {"epochs", CFG_INT, "5", "PSKV_WORKER_EPOCHS", 1, 100000, NULL, "training epochs", 0, 0, NULL,
     NULL},
    {"batch", CFG_INT, "32", "PSKV_WORKER_BATCH", 1, 65536, NULL, "examples per step per worker "
     "(mlp: default 16)", 0, 0, NULL, NULL},
    {"layers", CFG_STR, "784,1024,1024,1024,10", "PSKV_WORKER_LAYERS", 1, 0, NULL,
     "pipeline: layer sizes of the MLP, inputs first, classes last", 0, 0, NULL, NULL},
    {"stages", CFG_INT, "1", "PSKV_WORKER_STAGES", 1, 64, NULL,
     "pipeline: stages S (rank r is stage r mod S of pipeline r div S)", 0, 0, NULL, NULL},
    {"split", CFG_STR, "", "PSKV_WORKER_SPLIT", 1, 0, NULL,
     "pipeline: layers per stage (\"2,1\"); default the cut balancing parameter counts", 0, 0,
     NULL, NULL},
    {"pipelines", CFG_INT, "0", "PSKV_WORKER_PIPELINES", 0, 4096, NULL,
     "pipeline: data-parallel pipelines D (0 = workers / stages)", 0, 0, NULL, NULL},
    {"micro-batches", CFG_INT, "4", "PSKV_WORKER_MICRO_BATCHES", 1, 4096, NULL,
     "pipeline: micro-batches M per mini-batch", 0, 0, NULL, NULL},
    {"schedule", CFG_STR, "1f1b", "PSKV_WORKER_SCHEDULE", 1, 0, NULL,
     "pipeline: sequential, gpipe or 1f1b", 0, 0, NULL, NULL},
    {"max-inflight", CFG_INT, "0", "PSKV_WORKER_MAX_INFLIGHT", 0, 4096, NULL,
     "pipeline: micro-batches a stage holds at once at most (0 = the schedule's own depth)", 0,
     0, NULL, NULL},
    {"recompute", CFG_BOOL, "false", "PSKV_WORKER_RECOMPUTE", 1, 0, NULL,
     "pipeline: keep only each micro-batch's input; run the forward again for the backward",
     0, 0, NULL, NULL},
    {"suggest-split", CFG_BOOL, "false", "PSKV_WORKER_SUGGEST_SPLIT", 1, 0, NULL,
     "pipeline: time each layer, print the --split minimising the slowest stage and exit", 0,
     0, NULL, NULL},
    {"timeline-step", CFG_INT, "-1", "PSKV_WORKER_TIMELINE_STEP", -1, 9.2e18, NULL,
     "pipeline: log the passes of this mini-batch (0-based) for a timeline (-1 = none)", 0, 0,
     NULL, NULL},
    {"hidden", CFG_INT, "256", "PSKV_WORKER_HIDDEN", 1, 65536, NULL, "mlp: hidden units", 0, 0,
     NULL, NULL},
    {"updater", CFG_STR, "sgd", "PSKV_WORKER_UPDATER", 1, 0, NULL,
     "server-side optimizer: sgd, adagrad, adam, adamw, ftrl or plugin:PATH[:ARGS]", 0, 0, NULL,
     NULL},
    {"lr", CFG_DOUBLE, "0.01", "PSKV_WORKER_LR", 0, 1e6, NULL,
     "learning rate (left unset: softmax 0.02 and mlp 0.0075 with sgd or adagrad; 0.001 for "
     "adam/adamw; ftrl's alpha, 0.1)", 0, 0, NULL, NULL},
    {"beta1", CFG_DOUBLE, "0.9", "PSKV_WORKER_BETA1", 0, 0.999999, NULL, "adam/adamw beta1", 0, 0,
     NULL, NULL},
    {"beta2", CFG_DOUBLE, "0.999", "PSKV_WORKER_BETA2", 0, 0.999999, NULL, "adam/adamw beta2", 0,
     0, NULL, NULL},
    {"eps", CFG_DOUBLE, "1e-8", "PSKV_WORKER_EPS", 0, 1, NULL, "adam/adamw epsilon", 0, 0, NULL,
     NULL},
    {"weight-decay", CFG_DOUBLE, "0.01", "PSKV_WORKER_WEIGHT_DECAY", 0, 1e6, NULL,
     "adamw: decoupled weight decay", 0, 0, NULL, NULL},
    {"l1", CFG_DOUBLE, "0", "PSKV_WORKER_L1", 0, 1e6, NULL,
     "L1: sgd's proximal step; ftrl's lambda1 (left unset: 1/--batch for ftrl)", 0, 0, NULL,
     NULL},
    {"admit-after", CFG_INT, "0", "PSKV_WORKER_ADMIT_AFTER", 0, 255, "pushes",
     "sparse-lr: a feature gets a row on the server on its Nth push; earlier pushes are "
     "dropped (0 = at once)", 0, 0, NULL, NULL},
    {"evict-after", CFG_INT, "0", "PSKV_WORKER_EVICT_AFTER", 0, 4294967295.0, "clocks",
     "sparse-lr: rows not pushed for this many batches are removed (0 = never; the workers "
     "then end a clock per batch)", 0, 0, NULL, NULL},
    {"ftrl-beta", CFG_DOUBLE, "1", "PSKV_WORKER_FTRL_BETA", 0, 1e6, NULL,
     "ftrl: beta (left unset: 1/--batch)", 0, 0, NULL, NULL},
    {"lr-schedule", CFG_STR, "const", "PSKV_WORKER_LR_SCHEDULE", 1, 0, NULL,
     "softmax/mlp: const, linear or cosine decay to 0 over the run, or exp:G (x G per epoch) "
     "(default linear for softmax "
     "and mlp with sgd or adagrad; scales each pushed gradient: "
     "the learning-rate schedule of the sgd updater)", 0, 0, NULL, NULL},
    {"momentum", CFG_DOUBLE, "0.9", "PSKV_WORKER_MOMENTUM", 0, 0.999, NULL, "sgd momentum", 0, 0,
     NULL, NULL},
    {"l2", CFG_DOUBLE, "0", "PSKV_WORKER_L2", 0, 1e6, NULL, "L2 penalty", 0, 0, NULL, NULL},
    {"clip-norm", CFG_DOUBLE, NULL, "PSKV_WORKER_CLIP_NORM", 1, 0, NULL,
     "softmax, mlp, sparse-lr: scale each step's gradient down to this global L2 norm when it "
     "is larger (> 0; default: no clipping); check: push a planted huge gradient so clipped",
     0, 0, NULL, NULL},
    {"seed", CFG_INT, "1", "PSKV_WORKER_SEED", 0, 9.2e18, NULL, "seed of the initial weights and "
     "the shuffles", 0, 0, NULL, NULL},
    {"eval-every", CFG_DOUBLE, "1", "PSKV_WORKER_EVAL_EVERY", 0, 1e6, "epochs",
     "evaluate on the test set this often (0 = only at the end)", 0, 0, NULL, NULL},
    {"metrics", CFG_STR, "", "PSKV_WORKER_METRICS", 1, 0, NULL,
     "rank 0 writes one JSON object per evaluation here", 0, 0, NULL, NULL},
    {"save-model", CFG_STR, "", "PSKV_WORKER_SAVE_MODEL", 1, 0, NULL,
     "write the final weights here (docs/operations.md has the format)", 0, 0, NULL,
     NULL},
    {"checkpoint-epochs", CFG_INT, "0", "PSKV_WORKER_CHECKPOINT_EPOCHS", 0, 100000, "epochs",
     "softmax, mlp, sparse-lr, pipeline: after every N epochs, a checkpoint at a barrier "
     "(values and progress agree exactly; needs the scheduler's --data-dir; 0 = none); "
     "incr-check: after every N rounds", 0, 0, NULL, NULL},
    {"touch", CFG_DOUBLE, "10", "PSKV_WORKER_TOUCH", 0.01, 100, "%",
     "incr-check: the share of keys each round after the first pushes", 0, 0, NULL, NULL},
    {"init-from", CFG_STR, "", "PSKV_WORKER_INIT_FROM", 1, 0, NULL,
     "start from weights saved by --save-model", 0, 0, NULL, NULL},
    {"data", CFG_STR, "/usr/share/datasets/fashion-mnist", "PSKV_WORKER_DATA", 1, 0, NULL,
     "folder of the Fashion-MNIST idx .gz files", 0, 0, NULL, NULL},
    {"train-limit", CFG_INT, "0", "PSKV_WORKER_TRAIN_LIMIT", 0, 1e9, NULL,
     "use only the first N training images (0 = all)", 0, 0, NULL, NULL},
    {"test-limit", CFG_INT, "0", "PSKV_WORKER_TEST_LIMIT", 0, 1e9, NULL,
     "use only the first N test images (0 = all)", 0, 0, NULL, NULL},
    {"train", CFG_STR, "", "PSKV_WORKER_TRAIN", 1, 0, NULL, "sparse-lr: LIBSVM training file", 0,
     0, NULL, NULL},
    {"test", CFG_STR, "", "PSKV_WORKER_TEST", 1, 0, NULL,
     "sparse-lr: LIBSVM test file (default: the training file)", 0, 0, NULL, NULL},
    {"replay-wait", CFG_STR, "", "PSKV_WORKER_REPLAY_WAIT", 1, 0, NULL,
     "replay: halfway, wait (at most 120 s) for this file to exist; admit: for FILE.1 "
     "after admission, FILE.2 after eviction; sparse-bench: FILE.1 after the fill, FILE.2 "
     "after the updates", 0, 0, NULL, NULL},
    /* validation (pskv-evaluator; workers leave the validation set out) */
    {"validation-split", CFG_INT, "0", "PSKV_VALIDATION_SPLIT", 0, 1e9, "images",
     "softmax, mlp, sparse-lr: the last N training images (sparse-lr: examples of --train) "
     "are the validation set: workers leave them out of their shards, pskv-evaluator evaluates on them (0 = none; give workers and "
     "evaluator the same N, e.g. 10000)", 0, 0, NULL, NULL},
    {"freeze-after", CFG_INT, "-1", "PSKV_WORKER_FREEZE_AFTER", -1, 1e12, "steps",
     "softmax, mlp: from this step on push zero gradients (learning rate 0: a planted "
     "plateau for tests; -1 = never)", 0, 0, NULL, NULL},
    {"prefetch", CFG_BOOL, "false", "PSKV_WORKER_PREFETCH", 1, 0, NULL,
     "softmax, mlp, sparse-lr: send the pull for the next step before this step's compute, so "
     "that it travels meanwhile (the weights a step uses are then at most one step older); "
     "needs --consistency async or ssp:TAU with TAU >= 1, and --sync ps", 0, 0, NULL, NULL},
    {"print-digests", CFG_BOOL, "false", "PSKV_PRINT_DIGESTS", 1, 0, NULL,
     "softmax, mlp: print the clock and an FNV-1a digest of each bsp pull (workers) or "
     "snapshot (pskv-evaluator); pipeline: of each stage's and layer's final weights", 0, 0,
     NULL, NULL},
    {"save-best", CFG_STR, "", "PSKV_EVALUATOR_SAVE_BEST", 1, 0, NULL,
     "pskv-evaluator: keep the best snapshot here (the --save-model format, with its clock "
     "and metrics in the header)", 0, 0, NULL, NULL},
    {"evaluate", CFG_STR, "", "PSKV_EVALUATOR_EVALUATE", 1, 0, NULL,
     "pskv-evaluator: print the validation and test metrics of this saved model (a "
     "--save-best or --save-model file) and exit, with no job", 0, 0, NULL, NULL},
    {"best-metric", CFG_STR, "val_loss", "PSKV_EVALUATOR_BEST_METRIC", 1, 0, NULL,
     "pskv-evaluator: the best snapshot has the lowest val_loss or the highest val_accuracy "
     "(sparse-lr: or val_auc)", 0, 0, NULL, NULL},
    {"stall-after", CFG_INT, "0", "PSKV_EVALUATOR_STALL_AFTER", 0, 1e12, "evaluations",
     "pskv-evaluator: after this many evaluations evaluate nothing more and report nothing, "
     "staying in the job (its heartbeats go on): a hung evaluator, for tests (0 = never)", 0,
     0, NULL, NULL},
    {"blas-threads", CFG_INT, "1", "PSKV_WORKER_BLAS_THREADS", 1, 256, NULL,
     "OpenBLAS threads for compute", 0, 0, NULL, NULL},
    CFG_COMMON_ENTRIES("PSKV_WORKER_PORT", "0"),
    CFG_END};

/* `--keys N` (digits, and no such directory) was the check app's key count
 * before --keys named a key directory: still taken so, with a warning, so that
 * old command lines keep working. Returns 0, or -1 after a usage error. */
static int legacy_keys(void)
{
    cfg_entry *k = cfg_find(config, "keys");
    const char *v = k->s;
    if (!*v || v[strspn(v, "0123456789")] || access(v, F_OK) == 0)
        return 0;
    char err[200];
    if (cfg_set(cfg_find(config, "check-keys"), v, err, sizeof err) < 0) {
        fprintf(stderr, PROG ": --keys %s: %s\n", v, err);
        return -1;
    }
    fprintf(stderr, PROG ": warning: --keys %s taken as --check-keys %s (--keys now names "
            "a key directory)\n", v, v);
    k->s = "";
    return 0;
}

/* The flags only one of pskv-worker and pskv-evaluator takes (they share the
 * table, so that the evaluator takes every app flag the workers take). Returns
 * -1 to go on, or 2 after saying which flag is wrong. */
static int role_checks(const app_row *row)
{
    const char *best = cfg_str(config, "save-best");
#ifdef PSKV_EVALUATOR
    int sparse = (row->needs & APP_AUC) != 0;
    if (!(row->needs & APP_EVALUATED)) {
        char names[256];
        fprintf(stderr, PROG ": --app %s: the evaluator evaluates %s\n", row->name,
                apptab_names(names, sizeof names, APP_EVALUATED, ", ", " and "));
        return 2;
    }
    if (cfg_int(config, "validation-split") == 0) {
        fprintf(stderr, PROG ": --validation-split N is needed: the last N training images "
                "(e.g. 10000), which the workers, given the same flag, leave out\n");
        return 2;
    }
    const char *bm = cfg_str(config, "best-metric");
    if (strcmp(bm, "val_loss") && strcmp(bm, "val_accuracy") &&
        (!sparse || strcmp(bm, "val_auc"))) {
        fprintf(stderr, PROG ": --best-metric must be val_loss or val_accuracy%s (got '%s')\n",
                sparse ? " or val_auc" : "", bm);
        return 2;
    }
    if (*best) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", best);
        char *slash = strrchr(dir, '/');
        if (!slash)
            snprintf(dir, sizeof dir, ".");
        else if (slash == dir)
            dir[1] = 0;
        else
            *slash = 0;
        if (access(dir, W_OK | X_OK) != 0) {
            fprintf(stderr, PROG ": --save-best %s: directory %s %s\n", best, dir,
                    access(dir, F_OK) ? "does not exist" : "is not writable");
            return 2;
        }
    }
#else
    (void)row;
    if (*best || *cfg_str(config, "evaluate") || cfg_int(config, "stall-after")) {
        fprintf(stderr, PROG ": %s is pskv-evaluator's flag\n", *best ? "--save-best"
                : *cfg_str(config, "evaluate") ? "--evaluate" : "--stall-after");
        return 2;
    }
#endif
    return -1;
}

/* The library's settings from the flags (the evaluator's role included). */
static void library_config(pskv_config *pc)
{
    pskv_config_init(pc);
    pc->scheduler = cfg_str(config, "scheduler");
    pc->rank = (int)cfg_int(config, "rank");
    pc->keys = cfg_str(config, "keys");
    pc->insecure = (int)cfg_int(config, "insecure");
    pc->advertise = cfg_str(config, "advertise");
    pc->interface = cfg_str(config, "interface");
    pc->connect_timeout_s = cfg_double(config, "connect-timeout");
    pc->join_timeout_s = cfg_double(config, "join-timeout");
    pc->request_timeout_ms = (int)(cfg_double(config, "request-timeout") * 1000);
    pc->window = (int)cfg_int(config, "window");
    pc->job_id = (uint64_t)cfg_int(config, "job-id");
    pc->max_message = cfg_int(config, "max-message");
    pc->chunk_bytes = (size_t)cfg_int(config, "chunk-bytes");
    pc->spin_us = (int)cfg_int(config, "spin-us");
    pc->slice_us = (int)cfg_int(config, "slice-us");
    pc->retry_ms = (int)cfg_int(config, "retry-ms");
    pc->shm = (int)cfg_int(config, "shm");
    pc->metrics_port = (int)cfg_int(config, "metrics-port");
    pc->metrics_bind = cfg_str(config, "bind");
    pc->listen_bind = cfg_str(config, "bind");
    pc->listen_port = (int)cfg_int(config, "port");
    int wire = half_parse(cfg_str(config, "wire")); /* checked by allreduce_flags */
    pc->allreduce_wire = wire > 0 ? wire : PSKV_WIRE_FP32;
#ifdef PSKV_EVALUATOR
    pc->evaluator = 1;
#endif
}

/* --op, --reduce and --sync: their values, and --sync allreduce only where an
 * app trains densely. Returns 0, or -1 after a usage error. */
static int allreduce_flags(const app_row *row)
{
    const char *app = row->name;
    const char *op = cfg_str(config, "op"), *red = cfg_str(config, "reduce"),
               *sync = cfg_str(config, "sync");
    const char *bad = strcmp(op, "push-pull") && strcmp(op, "allreduce") ? "--op must be "
                      "push-pull or allreduce"
                      : strcmp(red, "sum") && strcmp(red, "mean") ? "--reduce must be sum or mean"
                      : strcmp(sync, "ps") && strcmp(sync, "allreduce") && strcmp(sync, "local")
                          ? "--sync must be ps, allreduce or local"
                          : NULL;
    char why[300];
    int train = (row->needs & APP_DENSE) != 0;
    if (!bad && strcmp(sync, "ps") && !train) {
        snprintf(why, sizeof why, "--sync %s applies to --app %s",
                 strcmp(sync, "local") ? "allreduce" : "local", apptab_phrase(APP_DENSE));
        bad = why;
    }
    const char *wire = cfg_str(config, "wire");
    int ar = !strcmp(sync, "allreduce") || (row->needs & APP_ALLREDUCE) ||
             ((row->needs & APP_OP) && !strcmp(op, "allreduce"));
    /* parameter-server apps whose tables take --wire (pskv_table_opts.wire) */
    int ps = !ar && (row->needs & APP_PS_WIRE);
    lscale ls;
    if (!bad && lscale_parse(&ls, cfg_str(config, "loss-scale"), 1) < 0)
        bad = "--loss-scale must be dynamic or a number > 0";
    if (!bad && cfg_int(config, "zero") && strcmp(sync, "allreduce"))
        bad = "--zero 1 applies to --sync allreduce";
    if (!bad && half_parse(wire) < 0)
        bad = "--wire must be fp32, fp16 or bf16";
    if (!bad && half_parse(wire) != HALF_FP32 && !ar && !ps) {
        snprintf(why, sizeof why, "--wire applies to --sync allreduce, --app %s and the tables "
                 "of --app %s", apptab_phrase(APP_ALLREDUCE), apptab_phrase(APP_PS_WIRE));
        bad = why;
    }
    if (!bad && ls.scale > 0 && strcmp(sync, "allreduce") &&
        (!train || half_parse(wire) == HALF_FP32)) {
        snprintf(why, sizeof why, "--loss-scale applies to --sync allreduce, or to --app %s "
                 "with --wire fp16 or bf16", apptab_phrase(APP_DENSE));
        bad = why;
    }
    if (!bad && ls.scale > 0 && !ls.dynamic && strcmp(sync, "allreduce") &&
        !half_scale_ok((float)ls.scale))
        bad = "--loss-scale N with --sync ps must be a power of two in 2^-24 .. 2^24 (the "
              "servers divide by it exactly)";
    if (bad)
        fprintf(stderr, PROG ": %s (got --op %s, --reduce %s, --sync %s, --wire %s, --app %s)\n",
                bad, op, red, sync, wire, app);
    return bad ? -1 : 0;
}

/* --prefetch: only for the training apps, and only where the consistency model
 * lets a step use weights one step older (async, ssp:TAU with TAU >= 1). Returns
 * 0, or -1 after a usage error. */
static int prefetch_flag(const app_row *row)
{
    const char *app = row->name;
    if (!cfg_int(config, "prefetch"))
        return 0;
    const char *cons = cfg_str(config, "consistency"), *sync = cfg_str(config, "sync");
    char *end = NULL;
    long long tau = !strncmp(cons, "ssp:", 4) ? strtoll(cons + 4, &end, 10) : -1;
    int later = !strcmp(cons, "async") || !strcmp(cons, "ssp:inf") ||
                (end && end != cons + 4 && !*end && tau >= 1);
    char why[200];
    snprintf(why, sizeof why, "applies to --app %s", apptab_phrase(APP_PREFETCH));
    const char *bad = !(row->needs & APP_PREFETCH) ? why
                      : strcmp(sync, "ps") ? "applies to --sync ps (an all-reduce step needs "
                                             "every worker's gradient of this step)"
                      : !later ? "needs --consistency async or ssp:TAU with TAU >= 1 (a step "
                                 "under bsp or ssp:0 must see every push of the clock before)"
                               : NULL;
    if (bad)
        fprintf(stderr, PROG ": --prefetch %s (got --app %s, --consistency %s, --sync %s)\n",
                bad, app, cons, sync);
    return bad ? -1 : 0;
}

#ifndef PSKV_EVALUATOR
/* The end-of-run report's traffic: per table, bytes on the wire and before the
 * filters, each way, and the time spent in filters. */
static void print_traffic(pskv_worker *w)
{
    pskv_traffic t;
    for (int i = 0; pskv_traffic_get(w, i, &t) == 0; i++)
        printf("rank %d table %s: sent %llu bytes (%llu before filters), received %llu "
               "(%llu before), %.1f ms in filters\n", pskv_rank(w), t.name,
               (unsigned long long)t.sent, (unsigned long long)t.sent_raw,
               (unsigned long long)t.received, (unsigned long long)t.received_raw,
               t.filter_s * 1e3);
}
#endif

/* --filter may be given more than once: the lists join ("--filter keycache --filter
 * lz4" is "keycache,lz4"); the config table keeps only the last. Returns 0, or -1
 * after saying why (exit 2). */
static int join_filters(int argc, char **argv)
{
    static char joined[512];
    size_t used = 0;
    int n = 0;
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
        const char *v = NULL;
        if (!strcmp(argv[i], "--filter") && i + 1 < argc)
            v = argv[++i];
        else if (!strncmp(argv[i], "--filter=", 9))
            v = argv[i] + 9;
        if (!v || !*v)
            continue;
        int w = snprintf(joined + used, sizeof joined - used, "%s%s", n++ ? "," : "", v);
        if (w < 0 || (size_t)w >= sizeof joined - used) {
            fprintf(stderr, PROG ": --filter: longer than %zu characters in all\n",
                    sizeof joined - 1);
            return -1;
        }
        used += (size_t)w;
    }
    char err[200];
    if (n > 1 && cfg_set(cfg_find(config, "filter"), joined, err, sizeof err) < 0) {
        fprintf(stderr, PROG ": %s\n", err);
        return -1;
    }
    return 0;
}

/* The bench and check apps' --push and --pull. Returns 0, or -1 after saying
 * what is wrong. */
static int push_pull_flags(const app_row *row)
{
    const char *push = cfg_str(config, "push");
    if ((strcmp(push, "nocopy") && strcmp(push, "copy") && strcmp(push, "buffer")) ||
        (!strcmp(push, "buffer") && !(row->needs & APP_PUSH_BUFFER))) {
        fprintf(stderr, PROG ": --push must be nocopy or copy (or buffer, with --app %s), "
                "not '%s'\n", apptab_phrase(APP_PUSH_BUFFER), push);
        return -1;
    }
    const char *pull = cfg_str(config, "pull");
    if (strcmp(pull, "view") && strcmp(pull, "copy")) {
        fprintf(stderr, PROG ": --pull must be copy or view, not '%s'\n", pull);
        return -1;
    }
    return 0;
}

/* The usage line and --app's help, from the app table (the evaluator's usage
 * names the apps it evaluates). Returns the usage line (static). */
static const char *usage_texts(void)
{
    static char usage[512], help[512];
    char names[400];
#ifdef PSKV_EVALUATOR
    snprintf(usage, sizeof usage, PROG " --scheduler HOST:PORT --app %s --validation-split N "
             "[flags]", apptab_names(names, sizeof names, APP_EVALUATED, "|", "|"));
#else
    snprintf(usage, sizeof usage, PROG " --scheduler HOST:PORT --app %s [flags]",
             apptab_names(names, sizeof names, 0, "|", "|"));
#endif
    snprintf(help, sizeof help, "application: %s",
             apptab_names(names, sizeof names, 0, ", ", " or "));
    cfg_find(config, "app")->help = help;
    return usage;
}

int main(int argc, char **argv)
{
    apptab_verify();
    int rc = cfg_start(config, PROG + 5, usage_texts(), argc, argv, NULL);
    if (rc >= 0)
        return rc;
    if (join_filters(argc, argv) < 0 || legacy_keys() < 0)
        return 2;
    const char *app = cfg_str(config, "app");
    const app_row *row = apptab_find(app);
    if (!row) {
        char names[400];
        fprintf(stderr, PROG ": unknown --app '%s' (%s)\n", app,
                apptab_names(names, sizeof names, 0, ", ", ", "));
        return 2;
    }
    if (allreduce_flags(row) < 0 || prefetch_flag(row) < 0)
        return 2;
    const char *adm = cfg_int(config, "admit-after") ? "--admit-after"
                      : cfg_int(config, "evict-after") ? "--evict-after" : NULL;
    if (adm && !(row->needs & APP_ADMIT) &&
        (!(row->needs & APP_EVICT) || cfg_int(config, "admit-after"))) {
        fprintf(stderr, PROG ": %s applies to sparse tables: --app %s (--evict-after: %s "
                "too; got --app %s)\n", adm, apptab_phrase(APP_ADMIT), apptab_phrase(APP_EVICT),
                app);
        return 2;
    }
    apptab_apply_defaults(row, config);
    if (updflags_check(config) < 0)
        return 2;
    filter_set fs;
    char fwhy[300];
    if (filter_parse_list(&fs, cfg_str(config, "filter"), fwhy, sizeof fwhy) < 0) {
        fprintf(stderr, PROG ": --filter: %s\n", fwhy);
        return 2;
    }
    const cfg_entry *clip = cfg_find(config, "clip-norm");
    if (strcmp(clip->from, "default") && !(clip->d > 0)) {
        fprintf(stderr, PROG ": --clip-norm must be a number > 0 (got %g)\n", clip->d);
        return 2;
    }
    const char *sched = cfg_str(config, "lr-schedule");
    lr_sched lrs;
    if (lrsched_parse(sched, &lrs) < 0) {
        fprintf(stderr, PROG ": --lr-schedule must be const, linear, cosine or exp:G with 0 < G "
                "<= 1 (got '%s')\n", sched);
        return 2;
    }
    if (row->check && row->check(config, PROG) < 0)
        return 2;
    char shost[256];
    int sport;
    if (net_split_hostport(cfg_str(config, "scheduler"), shost, sizeof shost, &sport) < 0) {
        fprintf(stderr, PROG ": --scheduler '%s' is not HOST:PORT\n",
                cfg_str(config, "scheduler"));
        return 2;
    }
    if (push_pull_flags(row) < 0)
        return 2;
    if ((rc = role_checks(row)) >= 0)
        return rc;
    if ((row->needs & APP_DENSE) && app_train_check_data(config) < 0)
        return 1;
    openblas_set_num_threads((int)cfg_int(config, "blas-threads"));
#ifdef PSKV_EVALUATOR
    if (*cfg_str(config, "evaluate")) /* a saved model's metrics, no job */
        return app_evaluate_file(config);
#endif
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop; /* no SA_RESTART: a wait returns early and the loop checks */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* Keep freed message buffers in the heap: without this glibc maps and unmaps
     * every large buffer, and the page faults cost as much as a copy. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20); /* progress lines reach logs and pipes as they come */
    pskv_config pc;
    library_config(&pc);
    cfg_log(config);
    member_set_stop_flag(&app_stop_signal); /* a signal also ends the wait to join */
    pskv_worker *w = NULL;
    rc = pskv_worker_open(&pc, &w);
    if (rc < 0) {
        fprintf(stderr, PROG ": cannot join the job: %s\n", pskv_strerror(rc));
        /* invalid settings (bad --keys, a non-loopback address without keys) are
         * usage errors, as in the daemons */
        return rc == -PSKV_EINVAL ? 2 : 1;
    }
#ifdef PSKV_EVALUATOR
    int status = app_evaluate(w, config);
#else
    int status = row->run(w, config);
    if (status == 0 && (row->needs & APP_TRAFFIC))
        print_traffic(w);
#endif
    if (!app_stop_signal)
        linger_metrics(cfg_double(config, "metrics-linger"));
    if (app_stop_signal) {
        /* stopped on request: tell the scheduler (FINISH) and leave at once; the
         * application's buffers go with the process */
        pskv_worker_close(&w);
        fflush(stdout);
        _exit(128 + (int)app_stop_signal);
    }
    rc = pskv_worker_close(&w);
#ifdef PSKV_EVALUATOR
    if (rc == -PSKV_ETIMEDOUT) /* a snapshot's pull the job's end left unanswered */
        rc = 0;
#endif
    app_free_closed(); /* nothing is in flight into them now */
    if (rc < 0 && status == 0) {
        fprintf(stderr, PROG ": close: %s\n", pskv_strerror(rc));
        status = 1;
    }
    metrics_stop();
    return status;
}
