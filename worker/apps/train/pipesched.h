/* pipesched: what a pipeline stage (--app pipeline) does and in which order,
 * computed without I/O: the layers each stage holds (--split or a balanced cut by
 * parameter count) and the order of its forward and backward passes over the M
 * micro-batches of a mini-batch under each --schedule.
 *
 * OWNS: nothing (the caller's arrays).
 * THREADS: any. NEVER: allocates or does I/O. */
#ifndef PSKV_PIPESCHED_H
#define PSKV_PIPESCHED_H

#include <stddef.h>
#include <stdint.h>

#define PIPE_MAX_LAYERS 64 /* layer sizes in --layers at most */

typedef struct pipe_op {
    int fwd;   /* 1 forward, 0 backward */
    int micro; /* micro-batch index in the mini-batch, 0..M-1 */
} pipe_op;

/* Parses --layers "784,1024,10" into sizes[] (at most PIPE_MAX_LAYERS, each
 * 1..65536, at least two). Returns the count, or -1 with why. */
int pipesched_layers(const char *s, int *sizes, char *why, size_t whylen);

/* The cut of the nl-1 dense layers between nl sizes into S stages: stage k holds
 * layers first[k] .. first[k+1]-1 (first[] has S+1 entries). split: "" for the
 * cut that minimises the largest stage's parameter count, else layers per stage
 * ("2,1"), which must sum to nl-1 with each at least 1. Returns 0, or -1 with why. */
int pipesched_split(const int *sizes, int nl, int S, const char *split, int *first, char *why,
                    size_t whylen);

/* The cut of L layers, layer l costing cost[l] >= 0, into S stages (1 <= S <= L)
 * that minimises the costliest stage's sum: first[] as for pipesched_split. */
void pipesched_cut(const double *cost, int L, int S, int *first);

/* The same with stage k's sum weighed by factor[k] > 0 (how much slower stage k
 * runs a layer: --balance stages); factor NULL: all 1. */
void pipesched_cut_speed(const double *cost, int L, int S, const double *factor, int *first);

/* The first weights of layers l0 .. l1-1 (model.h's layout: each layer's
 * weights, then its biases) into params: uniform in +-1/sqrt(sizes[0]) (mlp's
 * bound), each a function of seed and the parameter's index in the whole
 * model, so any cut into stages starts from the weights of one stage. */
void pipesched_init(const int *sizes, int l0, int l1, uint64_t seed, float *params);

/* Stage k of S's 2M passes over M micro-batches into ops[] under schedule
 * "sequential", "gpipe" or "1f1b" (at most `bound` micro-batches in flight on
 * a stage, bound >= 1; 1f1b also at most S-k). Backward passes run in micro-batch
 * order under every schedule, so the gradient they accumulate is the same bits.
 * Returns the most micro-batches a stage holds at once, or -1 for an unknown
 * schedule. */
int pipesched_ops(const char *schedule, int S, int k, int M, int bound, pipe_op *ops);

#endif
