/* The area under the ROC curve of scored examples by the rank-sum (Mann-Whitney),
 * ties at their average rank: sparse-lr's evaluation (sparse_eval.c) and the
 * planted AUC pskv-gen-sparse prints compute it here.
 *
 * THREADS: any thread; no global state. */
#ifndef PSKV_AUC_H
#define PSKV_AUC_H

#include <stddef.h>

typedef struct auc_item {
    double score;
    int label; /* 1 = positive, 0 = negative */
} auc_item;

/* Sorts v[0..n) by score and returns the AUC; NAN when v holds one class only
 * (or nothing). */
double auc_rank_sum(auc_item *v, size_t n);

#endif
