/* Where a training application is in its run, as a checkpoint records it: the
 * progress softmax, mlp and sparse-lr report after every step, the point a
 * resumed job continues from, and the checkpoints they take at epoch ends
 * (--checkpoint-epochs).
 *
 * Progress is (epoch, step, position): the 0-based epoch the next step belongs
 * to, the steps done, and the examples of that epoch already used (its in-epoch
 * step times the examples per step, at most the shard's size). Each worker's
 * order of examples in an epoch is a function of (seed, rank, epoch), so these
 * three numbers say exactly which example comes next.
 *
 * OWNS: nothing; THREADS: the application's thread; NEVER: allocates, except
 * trainpos_agree's buffer for the call. */
#ifndef PSKV_TRAINPOS_H
#define PSKV_TRAINPOS_H

#include <stdint.h>

#include "pskv.h"

/* A run's plan: steps per epoch, steps in all, examples per step, examples in
 * this worker's shard; every_rank: a checkpoint needs every rank alive (a
 * pipeline's stages: a stage that died is not in the barrier any more, and its
 * progress would be recorded stale). */
typedef struct trainpos_plan {
    int64_t steps_per_epoch, total_steps, per_step, n;
    int every_rank;
} trainpos_plan;

/* Tells the scheduler (pskv_set_progress) that `step` steps are done. */
void trainpos_report(pskv_worker *w, const trainpos_plan *p, int64_t step);

/* In a resumed job, the step to continue from into *step (0 when not resumed).
 * Returns 1 when resumed, 0 when not, or -1 after saying on stderr (prefixed by
 * app) that the recorded progress does not fit this run's plan (other --batch,
 * --accumulate, --train-limit, --epochs or workers than the checkpoint's). */
int trainpos_resume(pskv_worker *w, const char *app, const trainpos_plan *p, int64_t *step);

/* In a resumed job whose workers must step together (a pipeline's stages): the
 * smallest step any worker resumed at into *step. A checkpoint taken while
 * training ran (--checkpoint-every, pskvctl checkpoint) records each worker's
 * latest heartbeat, which may hold them a step apart; those ahead then repeat a
 * step. Every worker calls it (a dense table APP.resume of W entries: each
 * assigns its step, a barrier, each reads them all). Returns 0 or a negated
 * error (pskv_last_error says what). */
int trainpos_agree(pskv_worker *w, const char *app, int64_t *step, int timeout_ms);

/* 1 when `step` steps end an epoch that is a multiple of every_epochs (> 0; 0 =
 * never): a checkpoint is due (--checkpoint-epochs); else 0. */
int trainpos_due(const trainpos_plan *p, int every_epochs, int64_t step);

/* Every worker, after `step` steps (a due one): a consistent checkpoint. Every
 * request of this worker answered, a barrier (after which no push of any worker
 * is in flight), rank 0 asks for the checkpoint and prints `checkpoint N at
 * epoch E step S`, and a second barrier. Returns 0 or a negated error
 * (pskv_last_error says what). */
int trainpos_checkpoint(pskv_worker *w, const trainpos_plan *p, int64_t step, int timeout_ms);

#endif
