/* train_ar: data-parallel training by all-reduce for the training apps
 * (--sync allreduce on --app softmax and mlp). Each step the workers' gradients
 * are averaged by pskv_allreduce and every worker applies the same update to its
 * own copy of the weights with the server's own updater code (common/update/updater.c,
 * linked into pskv-worker), so the copies stay identical bit for bit. The
 * servers hold only a copy: rank 0 assigns the weights to the parameter table
 * every --copy-every steps, before each checkpoint and at the end, so
 * checkpoints, --save-model and a resumed job see them (a resumed job starts
 * its optimizer state afresh: momentum and the like live on the workers), and
 * with each copy the step it is at (the table APP.copystep). After a worker's
 * death the others wait for a worker to take its rank over, and every rank goes
 * on from that copy and step with its optimizer state zeroed (train_ar_recover;
 * the new worker: train_ar_begin).
 *
 * OWNS: the optimizer state (its floats per weight, upd_state_per_value; with
 *   --zero 1 for this worker's slice of the weights only).
 * --sync local is the same without the all-reduce: each worker applies its own
 * gradient to its own weights, no communication a step (the compute-only ceiling
 * of scripts/bench-train.sh; the workers' copies drift apart, rank 0's is copied).
 *
 * THREAD: the app's main thread. NEVER: touches the weights but in train_ar_step. */
#ifndef PSKV_TRAIN_AR_H
#define PSKV_TRAIN_AR_H

#include <stddef.h>

#include "config.h"
#include "pskv.h"
#include "report.h"

typedef struct train_ar train_ar;

/* With --sync allreduce (or local), *out gets a new trainer for P weights updated as table
 * options o say (with --zero 1: the optimizer state of this worker's slice of
 * the weights only, pskv_allreduce_slice); with --sync ps, *out = NULL. Returns 0, or 1 after saying on
 * stderr what cannot train so (a plug-in updater, a consistency other than
 * async, out of memory). */
int train_ar_new(cfg_entry *cfg, pskv_worker *w, const pskv_table_opts *o, size_t P,
                 train_ar **out);

/* One step: grad becomes the mean of every worker's grad, weights get the
 * update (--zero 1: grad is reduce-scattered, this worker updates its slice of
 * the weights and the weights are all-gathered; the same bits as without; with --loss-scale: grad is multiplied by the scale before the
 * all-reduce and divided after; a mean with an inf or NaN skips the update on
 * every worker and halves a dynamic scale; --plant-overflow puts FLT_MAX into
 * rank 0's gradient at that step); rank 0 then assigns the weights to `table` when --copy-every says so.
 * Returns 0 or the negated error of pskv_allreduce or the assign. */
int train_ar_step(train_ar *a, pskv_worker *w, int table, float *grad, float *weights);

/* Adds to a metrics line the loss scale (0 = none) and the steps skipped. */
void train_ar_report(const train_ar *a, report_line *l);

/* Rank 0 assigns the weights to `table` and waits for it, then the step they are
 * at (the steps done) to a small table of its own; others return 0. */
int train_ar_copy(train_ar *a, pskv_worker *w, int table, const float *weights);

/* Before the first step, *step steps done (a resumed job's, else 0): rank 0
 * records that step as the servers' copy's. A worker that took a dead rank over
 * instead goes on from the servers' copy (train_ar_resume: *step, weights).
 * Returns 0 or a negated error. */
int train_ar_begin(train_ar *a, pskv_worker *w, int table, float *weights, int64_t *step);

/* Every rank goes on from the servers' copy: *step gets its step, weights its
 * values (P floats, pulled), the optimizer state is zeroed and the loss scale
 * starts again. Returns 0 or a negated error (-PSKV_EPROTO: a step that is no step). */
int train_ar_resume(train_ar *a, pskv_worker *w, int table, float *weights, int64_t *step);

/* After a step failed with -PSKV_EPEERDEAD: waits up to --rejoin-timeout for a
 * worker to take the dead rank over (pskv_allreduce_rejoin), meets every rank at a
 * barrier (the new worker's first), then train_ar_resume. Returns 0 or a negated
 * error (-PSKV_ETIMEDOUT: pskv_last_error names the rank nobody took over). */
int train_ar_recover(train_ar *a, pskv_worker *w, int table, float *weights, int64_t *step);

/* Frees a; NULL-safe, nulls *a_p. */
void train_ar_destroy(train_ar **a_p);

#endif
