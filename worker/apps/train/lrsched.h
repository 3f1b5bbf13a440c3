/* --lr-schedule and --lr-warmup (softmax, mlp): the learning-rate factor a worker
 * scales each pushed gradient by, at a step of the run. The schedule: const 1;
 * linear 1 -> 0 and cosine 0.5 (1 + cos(pi x)) over the run's steps; exp:G,
 * G^(epochs done) (torch's ExponentialLR, step by step), which does not depend
 * on --epochs: a run converges at the same epoch whatever its budget, as early
 * stopping needs. The warm-up (Goyal et al. 2017, "gradual warmup", for a
 * learning rate scaled up with the global batch): over its first E epochs the
 * factor is multiplied by (step + 1) / ceil(E x steps per epoch), rising
 * linearly to 1 from about 0 (torch's LinearLR chained with the schedule); E = 0,
 * none. A function of the step alone, so a resumed job goes on with the same
 * factor.
 *
 * OWNS nothing. THREAD: any. NEVER allocates. */
#ifndef PSKV_LRSCHED_H
#define PSKV_LRSCHED_H

#include <stdint.h>

typedef struct lr_sched {
    enum { LR_CONST, LR_LINEAR, LR_COSINE, LR_EXP } kind;
    double gamma;  /* exp:G */
    double warmup; /* --lr-warmup: epochs, 0 = none */
} lr_sched;

/* Parses --lr-schedule's value into *s (no warm-up); returns 0, or -1 when it is
 * none of const, linear, cosine, exp:G with 0 < G <= 1. */
int lrsched_parse(const char *text, lr_sched *s);

/* --lr-warmup's value E (epochs) against a run of `epochs`: returns 0, or -1
 * unless 0 <= E < epochs (a warm-up must end within the run). */
int lrsched_check_warmup(double warmup, int epochs);

/* The factor at step `step` (0-based) of a run of `epochs` epochs of
 * `steps_per_epoch` steps each. */
double lrsched_factor(const lr_sched *s, int64_t step, int64_t steps_per_epoch, int epochs);

#endif
