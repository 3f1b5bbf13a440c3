/* pipebal: --balance stages on --app pipeline: the layer boundaries between
 * neighbouring stages move at run time to follow the stages' measured speeds.
 *
 * Measure: each stage times every pass of each of its layers in the thread's CPU
 * time (a loaded host's preemptions left out, as --suggest-split does), times the
 * step's planted --slowdown/--jitter factor: per layer l its cost c_l per
 * micro-batch, per stage k its factor f_k (how much slower it runs a layer).
 * Share: every step each stage pushes, in the step's clock, its layers' costs and
 * its factor (with a count each) to a bsp `sum` table of 2L + 2S + 2 floats
 * (`pipeline-LAYERS-balance`); at the run's first step (a baseline) and every 8
 * steps (steps 7, 15, ... of the job, the same on every rank) every rank pulls
 * it once the clock closed, so all hold the same bits and take the same
 * decision without a coordinator.
 * The wall time: each stage also times its steps (from its pull to its push's
 * answer, which under bsp comes once every stage's clock closed, so every stage's
 * step takes the same wall time), leaving out the step of a decision and the
 * first step after a move (its new layers' tables pulled cold), and at each
 * decision step pushes the median of its steps since the last one; the table's
 * mean over the stages is the window's step.
 * Decide (pipemove.h): over the window since the last pull, c_l and f_k are the
 * means; the cut minimising the slowest stage's f_k x sum c_l
 * (pipesched_cut_speed) is the model's, taken straight when it cuts that time
 * by 15% or more; the next window's step judges it: slower by more than 10%
 * and the boundaries move back, the cut remembered as worse; a model that
 * gained less than it predicted has its neighbouring cuts tried, each kept only
 * when a step gets 10% faster.
 * Hand-over: with --balance stages every layer is a table of its own
 * (`pipeline-LAYERS-lLofL`, weights and the servers' optimizer state), so a
 * moved layer is pulled by its new stage at the next step: under bsp that
 * holds every push of the step before, and the weights stay those of an
 * unmoved run bit for bit (the gradient of a layer is the same bits whichever
 * stage computes it).
 *
 * OWNS: its arrays. THREAD: the stage's. NEVER: allocates after pipebal_new. */
#ifndef PSKV_PIPEBAL_H
#define PSKV_PIPEBAL_H

#include <stdint.h>

#include "config.h"
#include "pskv.h"
#include "report.h"

#define PIPEBAL_WIN 8 /* steps between decisions */

typedef struct pipebal pipebal;

/* Reads --balance for the pipeline: none (*out NULL) or stages, for L layers in
 * S stages, this rank stage k. Returns 0, 2 after naming the flag (batch or a
 * plan file: those are for mlp and softmax; stages with --stages 1), or 1 out of
 * memory. */
int pipebal_new(cfg_entry *cfg, int L, int S, int k, pipebal **out);

/* Opens the exchange table for --layers `layers`. Returns 0, or 1 after saying why. */
int pipebal_open(pipebal *b, pskv_worker *w, const char *layers);

/* A pass of layer l took ns of the thread's CPU time (forward or backward). */
void pipebal_time(pipebal *b, int l, int64_t ns);

/* Step `step` (one with rows) took ns of wall time, its pull to its push's answer. */
void pipebal_wall(pipebal *b, int64_t step, int64_t ns);

/* Before step `step`'s clock: its layers l0..l1-1's times over m micro-batches and
 * the step's factor pushed, on a decision step with the median of the steps'
 * wall times since the last; the times start again. Returns 0 or a negated error. */
int pipebal_push(pipebal *b, pskv_worker *w, int64_t step, int l0, int l1, int m,
                 double factor);

/* After step `step`'s clock: on a decision step, the table pulled and the cut
 * first[] (S + 1 entries) perhaps moved (or moved back); a move is printed (stage
 * 0 of pipeline 0, `print`), and written to the metrics (rep, NULL elsewhere).
 * Returns 1 when first[] changed, 0, or a negated error of the pull. */
int pipebal_after(pipebal *b, pskv_worker *w, report *rep, int print, int64_t step, int *first);

/* Re-splits so far (moves back included). */
int pipebal_resplits(const pipebal *b);

/* The latest window's time per micro-batch of stage k (ms; 0 before the first). */
double pipebal_stage_ms(const pipebal *b, int k);

/* Frees b; NULL-safe, nulls *b_p. */
void pipebal_destroy(pipebal **b_p);

#endif
