/* Updaters: how a pushed gradient (or increment) changes the stored values.
 *   sum      w += g                        (exact integer sums for tests and counters)
 *   sgd      v = momentum*v + g + l2*w; w -= lr*v   (no state when momentum is 0)
 *   adagrad  g' = g + l2*w; h += g'*g'; w -= lr*g'/(sqrt(h)+eps)
 * Dense runs go through OpenBLAS (saxpy/sscal); adagrad is an element loop.
 *
 * OWNS nothing: pure functions over the caller's arrays.
 * THREAD: any (no state); on the server it is the loop thread, through
 * shard_push (OpenBLAS uses --blas-threads threads of its own for a call).
 * NEVER allocates, blocks, logs or fails while applying: hyper-parameters are
 * checked once, by upd_check when a table is opened. */
#ifndef PSKV_UPDATER_H
#define PSKV_UPDATER_H

#include <stddef.h>

typedef enum { UPD_SUM = 0, UPD_SGD = 1, UPD_ADAGRAD = 2 } upd_kind;

typedef struct upd_opts {
    upd_kind kind;
    float lr, momentum, l2, eps;
} upd_opts;

/* Parses an updater name; returns its kind or -1. */
int upd_parse(const char *name);

/* Validates hyper-parameters; returns 0 or -PSKV_EINVAL with the reason in why. */
int upd_check(const upd_opts *o, char *why, size_t whylen);

/* Optimizer state floats per value (0 or 1). */
int upd_state_per_value(const upd_opts *o);

/* Applies gradient g to n values w with their state (NULL when none). */
void upd_apply(const upd_opts *o, float *w, float *state, const float *g, size_t n);

/* 1 when every one of the n floats is finite (no NaN or infinity). */
int upd_all_finite(const float *v, size_t n);

#endif
