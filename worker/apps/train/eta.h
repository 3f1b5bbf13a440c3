/* eta: how long a training job will take, and how well it scales, from the steps
 * timed so far: the job's predicted wall time ("time per step x steps per epoch x
 * epochs", plus the evaluations) and its scaling efficiency, the job's samples/s
 * over W x one worker's compute-only samples/s (the step of --sync local without
 * its local apply: gathering the batch and computing the gradient). softmax and
 * mlp print it on rank 0 during the first epoch and after each (eta_due), and
 * --estimate prints the prediction after a few steps and exits (eta_estimate).
 *
 * The job's rate is taken as W x this worker's: the workers of a dense job step
 * together (bsp, ssp) or at the same pace (async, same shard sizes).
 *
 * OWNS: nothing. THREADS: the application's thread. NEVER: talks to pskv. */
#ifndef PSKV_ETA_H
#define PSKV_ETA_H

#include <stdint.h>

/* --estimate: a fifth of the job's steps, at least 40 and at most 1000, timed after
 * a warm-up of a tenth of them, at least 5 and at most 100 (the first pulls fault
 * memory in, the first pushes create the servers' state, the workers fall into
 * step: the first tenth of an epoch runs 10-100% slower than the rest), itself
 * timed as a part of the job: a count every worker computes alike (a bsp worker
 * stopping alone would hold the others' clocks), long enough that a burst of load
 * on a shared machine weighs on it as on the job. */
#define ETA_ESTIMATE_MIN 40
#define ETA_ESTIMATE_MAX 1000
#define ETA_ESTIMATE_WARMUP_MIN 5
#define ETA_ESTIMATE_WARMUP_MAX 100
#define ETA_BLOCKS 10 /* the timed steps in blocks, each timed (a trimmed mean) */

typedef struct eta {
    int64_t total_steps;     /* the job's steps (this worker's) */
    int64_t steps_per_epoch;
    int64_t evals;           /* evaluations the job makes, the final one included */
    int W;
    double per_step;         /* examples per step per worker */
    int64_t app_t0_ns;       /* the app started (setup counts in the wall time) */
    int64_t loop_t0_ns;      /* the first timed step started */
    int64_t steps;           /* steps timed */
    int64_t warm_steps;      /* steps before the timed ones (--estimate's warm-up) */
    int64_t compute_ns;      /* their compute-only time */
    int64_t eval_ns, nevals; /* evaluations timed since eta_start */
    int64_t last_eval_ns;    /* the latest evaluation's time */
    int64_t next_print;      /* the step count at which eta_due next fires */
    int64_t block_len;       /* steps a block (a tenth of --estimate's) */
    int64_t block_t0_ns, block_eval0_ns;
    int nblocks;
    int64_t block_ns[ETA_BLOCKS]; /* the first blocks' times, evaluations left out */
} eta;

/* Zeroes *e for a job of total_steps (steps_per_epoch each epoch, evals
 * evaluations) on W workers of per_step examples a step; app_t0_ns: when the app
 * began (CLOCK_MONOTONIC). */
void eta_init(eta *e, int64_t total_steps, int64_t steps_per_epoch, int64_t evals, int W,
              double per_step, int64_t app_t0_ns);

/* --estimate: the steps to time for a job of total_steps, and the warm-up's. */
int64_t eta_estimate_steps(int64_t total_steps);
int64_t eta_estimate_warmup(int64_t total_steps);

/* The timed steps (and evaluations) start now (after a resume or --estimate's
 * warm-up: from scratch; the steps before, warm_steps, are the warm-up's). */
void eta_start(eta *e);

/* One step timed: its compute-only time. */
void eta_step(eta *e, int64_t compute_ns);

/* One evaluation's time (the final one not counted). */
void eta_eval(eta *e, int64_t ns);

/* 1 when a line is due after `done` steps of the job: at a tenth and half of the
 * first epoch, then at each epoch's end; else 0. */
int eta_due(eta *e, int64_t done);

/* Prints "eta: ..." with `done` of the job's steps done: the predicted remaining
 * and total wall time, the step time, the compute-only step and the scaling
 * efficiency. */
void eta_print(const eta *e, int64_t done);

/* --estimate: prints "estimate: predicted wall time S s ..." for the job as
 * configured from the steps timed (mine_ns: this worker's, from the first timed
 * step to the end of the last, the evaluations among them included; slowest_ns:
 * from the same start until every worker had ended its timed steps, a barrier's
 * exit; both less this worker's evaluations among the steps and scaled by the
 * blocks' trimmed mean over their mean), the setup and
 * warm-up steps (setup_ns: from the app's start to the first
 * timed step) and the evaluations: the last one eta_eval'd is the
 * final evaluation's (made after a barrier, the others idle, as the job's last),
 * the earlier ones (made among the timed steps, the others training, as the job's
 * in its loop) time the rest, else the final one does. The job: the setup and
 * warm-up, then the later of this worker's steps and evaluations and the slowest
 * worker's steps, then the final evaluation. */
void eta_estimate(const eta *e, int64_t setup_ns, int64_t mine_ns, int64_t slowest_ns);

#endif
