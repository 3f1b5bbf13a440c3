/* --lr-schedule (softmax, mlp): the learning-rate factor a worker scales each
 * pushed gradient by, at a point of the run. const 1; linear 1 -> 0 and cosine
 * 0.5 (1 + cos(pi x)) over the run's steps; exp:G, G^(epochs done) (torch's
 * ExponentialLR, step by step), which does not depend on --epochs: a run
 * converges at the same epoch whatever its budget, as early stopping needs.
 *
 * OWNS nothing. THREAD: any. NEVER allocates. */
#ifndef PSKV_LRSCHED_H
#define PSKV_LRSCHED_H

typedef struct lr_sched {
    enum { LR_CONST, LR_LINEAR, LR_COSINE, LR_EXP } kind;
    double gamma; /* exp:G */
} lr_sched;

/* Parses the flag's value into *s; returns 0, or -1 when it is none of const,
 * linear, cosine, exp:G with 0 < G <= 1. */
int lrsched_parse(const char *text, lr_sched *s);

/* The factor at fraction done (0..1) of a run of `epochs` epochs. */
double lrsched_factor(const lr_sched *s, double done, int epochs);

#endif
