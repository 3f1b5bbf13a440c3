/* The trial schedulers: whether a running trial goes on after an epoch's metric.
 * FIFO never stops one; median stopping is Vizier's rule; ASHA is the stopping
 * variant of asynchronous successive halving (Li et al. 2020) with Ray Tune's
 * cut-off. With promote=1 it is the promotion variant (Li et al.'s algorithm 2):
 * a trial runs to its rung and pauses with a checkpoint; a free slot promotes,
 * rungs from the top down, the best paused trial among the top 1/eta of those
 * that reached its rung (resumed with more epochs), else starts a new trial at
 * the first rung. Decisions are pure functions of the curves seen so far, so a resumed
 * tuner that replays its decision log and one that never died agree.
 *
 * OWNS nothing. THREAD: any. NEVER allocates or blocks. */
#ifndef PSKV_TUNE_TSCHED_H
#define PSKV_TUNE_TSCHED_H

#include <stddef.h>

typedef enum { TSCHED_FIFO, TSCHED_MEDIAN, TSCHED_ASHA } tsched_kind;

typedef struct tsched {
    tsched_kind kind;
    int eta;        /* asha: reduction factor (>= 2) */
    int min, max;   /* asha: first rung and largest epochs; median: grace epochs (min) */
    int min_trials; /* median: other trials needed before it stops any */
    int promote;    /* asha: 1 = pause at rungs and promote (never stops a running trial) */
} tsched;

/* Parses "fifo", "median[:min=M,trials=K]" or "asha[:eta=3,min=1,max=27,promote=1]".
 * Returns 0, or -PSKV_EINVAL with err naming the part that is wrong. */
int tsched_parse(tsched *s, const char *text, char *err, size_t errlen);

/* Writes the canonical text of s into buf; returns buf. */
char *tsched_format(const tsched *s, char *buf, size_t len);

/* The curves: curve[t][e-1] is trial t's metric after epoch e (NAN: not seen),
 * for t < ntrials and e <= epochs, sign-adjusted so that larger is better. */
typedef struct tsched_curves {
    int ntrials, epochs;
    const double *v; /* ntrials x epochs, row-major */
} tsched_curves;

/* 1 when trial t should stop after reporting epoch e, else 0; why says the rule
 * that fired (or the rung it passed). */
int tsched_decide(const tsched *s, const tsched_curves *c, int t, int e, char *why,
                  size_t len);

/* The rung at epoch e (0, 1, ...), or -1 when e is not an asha rung. */
int tsched_rung(const tsched *s, int e);

/* Promotion asha: the epochs a new trial runs to (the first rung below max, else
 * max); other schedulers: max. */
int tsched_first_target(const tsched *s);

/* Promotion asha: the trial to resume now, or -1 when none may be. paused_at[t]
 * is the epoch trial t is paused at (0: not paused). For rungs from the top
 * down: the n trials with a value at the rung's epoch, the top floor(n/eta) of
 * them (ties: the earlier trial), the best of those that is paused there. It
 * then runs to *to_epoch (the next rung, or max); why says so. */
int tsched_promote(const tsched *s, const tsched_curves *c, const int *paused_at, int *to_epoch,
                   char *why, size_t len);

#endif
