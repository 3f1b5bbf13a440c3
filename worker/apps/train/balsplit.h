/* balsplit: the rule --balance batch splits a global batch by (balance.h has
 * the design): per worker a window of the last 8 clocks' times per example, their
 * median, batches proportional to speed (each at least 1, summing to B), the
 * move capped at B / (2W) per worker, taken only when it cuts the predicted clock
 * time (the slowest b_i x t_i) to GAIN or less; the window restarts after a
 * re-split. A worker that died is dropped: its batch goes to the others. A pure function of the times it is given: every rank that feeds it
 * the same numbers holds the same split.
 *
 * OWNS: its arrays. THREAD: one. NEVER: allocates after balsplit_new. */
#ifndef PSKV_BALSPLIT_H
#define PSKV_BALSPLIT_H

#define BALSPLIT_WIN 8     /* clocks in the window */
#define BALSPLIT_GAIN 0.85 /* per-example CPU times of equal workers differed by up to 25% */

typedef struct balsplit balsplit;

/* A split of B (>= W) among W (>= 1) workers, even to start. NULL: out of memory. */
balsplit *balsplit_new(int W, int B);

/* Frees s; NULL-safe, nulls *s_p. */
void balsplit_destroy(balsplit **s_p);

/* Back to the even split (the first ranks one more), the window emptied. */
void balsplit_even(balsplit *s);

/* The even split over the workers whose live[i] is non-zero (the first of them
 * one more), the others dropped (batch 0), the window and the step-time models
 * emptied: what every rank computes alike when a worker takes a dead one's rank
 * back. Returns 0, or -1 (nothing changed) when none is live. */
int balsplit_even_among(balsplit *s, const char *live);

/* The split given (W batches summing to B: the caller checked), the window emptied. */
void balsplit_set(balsplit *s, const int *batches);

/* The current batches, W of them. */
const int *balsplit_cur(const balsplit *s);

/* The window's medians, us per example (valid after a re-split). */
const double *balsplit_est(const balsplit *s);

/* Workers still in the split (W less those dropped). */
int balsplit_live(const balsplit *s);

/* 1 when worker i was dropped. */
int balsplit_gone(const balsplit *s, int i);

/* Worker i died: its batch goes to the others in proportion to theirs (the sum
 * stays B), its own is 0 from now on and the window starts again. Returns 1 when
 * the split changed; 0 for a worker already dropped, out of range, or the last one. */
int balsplit_drop(balsplit *s, int i);

/* One clock's times per example, W of them (0: not measured, the worker's last
 * one stands). Returns 1 when the split changed, else 0. */
int balsplit_observe(balsplit *s, const float *us);

#endif
