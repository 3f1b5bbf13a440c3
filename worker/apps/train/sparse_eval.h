/* sparse-lr's evaluation set and metrics, shared by rank 0 of --app sparse-lr
 * (on --test) and pskv-evaluator (on the held-out --validation-split examples):
 * the set's distinct keys (plus the bias), their weights, and log-loss, AUC and
 * accuracy of the weights pulled into it.
 *
 * OWNS: the arrays of an evalset (sparse_eval_free frees them).
 * THREADS: any thread; no global state.
 * NEVER: talks to the servers (the caller pulls keys[0..nkeys) into w) or prints. */
#ifndef PSKV_SPARSE_EVAL_H
#define PSKV_SPARSE_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "auc.h"
#include "libsvm.h"

#define SPARSE_BIAS_KEY UINT64_MAX

typedef struct evalset {
    libsvm_set d;
    uint64_t *keys; /* distinct keys of the whole set + bias, sorted */
    size_t nkeys;
    float *w;       /* their weights, pulled by the caller */
    auc_item *sc;   /* scratch for the AUC */
} evalset;

/* The distinct keys of examples [lo, hi) of d plus the bias, sorted, into keys
 * (room for their features + 1); returns how many. */
size_t sparse_batch_keys(const libsvm_set *d, size_t lo, size_t hi, uint64_t *keys);


double sparse_sigmoid(double z);

/* Loads the set from path (libsvm_load_split's holdout and held) and sizes its
 * keys and weights. Returns 0, or a negated error with why (-PSKV_ENOMEM: why
 * says so); on failure e holds what to free with sparse_eval_free. */
int sparse_eval_load(evalset *e, const char *path, uint64_t holdout, int held, char *why,
                     size_t whylen);

/* Mean log-loss (probabilities clipped to [1e-7, 1-1e-7]), AUC (rank-sum, ties
 * at their average rank; NAN with one class only) and accuracy at the weights in
 * e->w. */
void sparse_eval_score(evalset *e, double *logloss, double *auc, double *acc);

void sparse_eval_free(evalset *e);

#endif
