/* Applications that pskv-worker runs on top of libpskv, one per --app: worker_main
 * checks the flags, joins the job and calls one of them once.
 *
 * OWNS: an app owns the tables it opens and the buffers it allocates, for its one
 * call; the pskv_worker handle stays worker_main's, which closes it afterwards.
 * THREADS: the main thread only, the one that opened the handle (OpenBLAS may
 * compute on threads of its own inside a model call).
 * NEVER: an app never closes the handle, exits the process or installs signal
 * handlers; it prints its results on stdout, says why it failed (stdout for check
 * and resume-check, stderr for the others) and returns the exit status: 0 on
 * success, 1 on a failure, 128 + N when stopped by signal N. After a failure a
 * request may still be in flight into an app's buffers (pskv_worker_close waits
 * for it): check, bench and the evaluator hand them to app_free_after_close; train and
 * sparse-lr return without freeing, and the process exits next. */
#ifndef PSKV_APPS_H
#define PSKV_APPS_H

#include <signal.h>
#include <stdatomic.h>

#include "config.h"
#include "pskv.h"

/* Set by pskv-worker's SIGINT/SIGTERM handler: applications stop at the next step,
 * close their handle (so the scheduler hears FINISH at once) and exit 128 + it. A
 * lock-free atomic, not sig_atomic_t: the handler may run on another thread (the
 * heartbeat thread, OpenBLAS's), and only an atomic is safe across threads too. */
extern atomic_int app_stop_signal;

/* The exit status for a stop by signal, after saying so on stderr. */
int app_stopped(const char *app);

/* An app's failed call: "APP: WHAT: ERROR (LAST ERROR)" on stderr and 1, or, when
 * the call ended because a stop signal came (pskv_wait), app_stopped(app). */
int app_fail(const char *app, pskv_worker *w, const char *what, int rc);

/* For tests that act at a set point of a run (--replay-wait): prints "APP:
 * waiting for PATH" and waits, at most 120 s, for the file PATH to exist.
 * Returns 0, or -1 on a stop signal or after saying on stderr that it did not
 * appear. */
int app_wait_file(const char *app, const char *path);
/* The tests' pause N of a run: app_wait_file for BASE.N; 0 at once when base is
 * "" (no --replay-wait). */
int app_wait_file_n(const char *app, const char *base, int n);

/* Frees p (NULL: nothing) once worker_main's pskv_worker_close has returned: for
 * the buffers of an app that fails while a pull may still be in flight into them
 * or a no-copy push may still lend them. At most 16 per process. */
void app_free_after_close(void *p);
/* Frees what app_free_after_close was given: for main, after pskv_worker_close. */
void app_free_closed(void);

/* --app check: exact integer sums over dense and sparse tables on every server. */
int app_check(pskv_worker *w, cfg_entry *cfg);

/* --app resume-check: checkpoint, kill, resume: values, optimizer state and
 * progress as they were (app_resume.c). */
int app_resume_check(pskv_worker *w, cfg_entry *cfg);

/* --app incr-check: rounds touching a share of the keys, checkpoints (delta or
 * full, as the scheduler's --full-every says) and the digest at each (app_incr.c). */
int app_incr_check(pskv_worker *w, cfg_entry *cfg);

/* --app filter-check: a quantising filter's residual carried, flushed and summed
 * exactly by the servers (app_fcheck.c). */
int app_filter_check(pskv_worker *w, cfg_entry *cfg);

/* --app bench: push/pull step time and throughput for one value size. */
int app_bench(pskv_worker *w, cfg_entry *cfg);
/* bench's flags before joining (--size, --mode): 0, or -1 after saying on stderr,
 * prefixed by prog, what is wrong (the app table's check). */
int app_bench_flags(cfg_entry *cfg, const char *prog);

/* --app sparse-bench: sparse push throughput and a growing table's push
 * latency (app_sparse_bench.c). */
int app_sparse_bench(pskv_worker *w, cfg_entry *cfg);

/* --app softmax | mlp: Fashion-MNIST training (app_train.c). */
int app_train(pskv_worker *w, cfg_entry *cfg);

/* Opens the softmax / mlp parameter table as every worker does (name, size,
 * updater, init, consistency from the flags): a handle, or a negated error. */
int app_train_table(pskv_worker *w, cfg_entry *cfg, uint32_t dim, int hidden, size_t P);

/* --init-from: rank 0 assigns the saved weights of the same model (hidden 0:
 * softmax) to table t before anyone trains. Returns 0, or 1 after saying why. */
int app_train_init_from(pskv_worker *w, cfg_entry *cfg, int t, int rank, uint32_t dim, int hidden,
                        size_t P);

/* sparse-lr's weight table ("sparse-lr.w", as the flags set it up), for the
 * workers and pskv-evaluator. Returns its id or a negated error. */
int app_sparse_lr_table(pskv_worker *w, cfg_entry *cfg);
/* A training table's options: one dense run of P floats, the updater flags, and
 * uniform initial values within 1/sqrt(dim) (dim: the first layer's inputs). */
void app_train_table_opts(cfg_entry *cfg, uint32_t dim, size_t P, pskv_table_opts *o);
/* Shuffles a[0..n) in place (Fisher-Yates); the same seed gives the same order. */
void app_shuffle(uint32_t *a, uint32_t n, uint64_t seed);
/* 1 when the training apps' --pushpull may use pskv_pushpull: it takes no wire
 * filter (--filter) and no 16-bit --wire yet (pskv.h); 0 otherwise. */
int app_pushpull_fits(cfg_entry *cfg);

/* --app pipeline: an MLP cut into stages on separate workers (app_pipeline.c). */
int app_pipeline(pskv_worker *w, cfg_entry *cfg);

/* --app synth: a validation curve that is a known function of --lr, --momentum,
 * --seed and --epochs, printed per epoch, for pskv-tune's tests (app_synth.c). */
int app_synth(pskv_worker *w, cfg_entry *cfg);

/* pskv-evaluator (app_eval.c): evaluates snapshots of the softmax / mlp model on
 * the validation set while the workers train, reports them to the scheduler and
 * keeps the best (--save-best). Returns the exit status. */
int app_evaluate(pskv_worker *w, cfg_entry *cfg);

/* pskv-evaluator --evaluate PATH: the validation (and test) metrics of a saved
 * model, with no job. Returns the exit status. */
int app_evaluate_file(cfg_entry *cfg);

/* FNV-1a over n floats' bytes: equal digests, equal values bit for bit. */
uint64_t app_digest(const float *v, size_t n);
/* FNV-1a over several pieces: h = APP_DIGEST_START, then h = app_digest_add(h,
 * piece, bytes) for each (app_digest is one piece of floats). */
#define APP_DIGEST_START 1469598103934665603ULL
uint64_t app_digest_add(uint64_t h, const void *p, size_t bytes);

/* Checks, before joining, that the Fashion-MNIST files exist; prints which path
 * was tried and how to install the data when they do not. Returns 0 or -1. */
int app_train_check_data(cfg_entry *cfg);

/* --app allreduce-check: pskv_allreduce against exact sums, a digest per rank
 * (app_allreduce.c). */
int app_allreduce_check(pskv_worker *w, cfg_entry *cfg);

/* --app bench --op allreduce: all-reduce step time, algbw and busbw (app_allreduce.c). */
int app_allreduce_bench(pskv_worker *w, cfg_entry *cfg);
/* The median of v[0..n) (n >= 1; sorts v in place): bench's summary lines. */
double app_median(double *v, int n);

/* --app replay: a fixed gradient schedule through --updater, final values printed
 * (app_replay.c). */
int app_replay(pskv_worker *w, cfg_entry *cfg);

/* --app admit: feature admission and eviction checked against what the servers
 * hold (app_admit.c). */
int app_admit(pskv_worker *w, cfg_entry *cfg);

/* --app sparse-lr: logistic regression on LIBSVM data (app_sparse_lr.c). */
int app_sparse_lr(pskv_worker *w, cfg_entry *cfg);
/* sparse-lr's flags before joining (--train given): 0, or -1 after saying on
 * stderr, prefixed by prog, what is wrong (the app table's check). */
int app_sparse_lr_flags(cfg_entry *cfg, const char *prog);

#endif
