/* What a training run shows: a progress line on a terminal, plain log lines
 * otherwise, and the JSON Lines metrics file (--metrics) that tools read.
 *
 * OWNS: the metrics file (opened, truncated, flushed after every line, closed by
 * report_destroy) and whether a progress line is on screen.
 * THREADS: the application's thread only (it writes stdout and one FILE).
 * NEVER: talks to pskv, computes a metric (the caller fills report_line) or
 * fails once opened: a write error to the metrics file is not reported. */
#ifndef PSKV_REPORT_H
#define PSKV_REPORT_H

#include <stdint.h>

typedef struct report_line {
    double epoch;         /* the evaluating worker's fractional epoch */
    int64_t step;         /* its step count */
    double time;          /* seconds since training began */
    double train_loss;    /* its mean training loss since the previous line */
    double test_loss;     /* test loss (log-loss for sparse-lr) */
    double accuracy;      /* test accuracy */
    double samples_per_s; /* the whole job's training throughput since the previous line */
    double auc;           /* sparse-lr only; NaN = absent */
    int64_t clipped_steps; /* steps whose gradient --clip-norm scaled so far, every
                              worker's; -1 = no clipping (absent) */
} report_line;

typedef struct report report;

/* Opens the metrics file (NULL or "" = none; truncated). NULL on failure with why. */
report *report_new(const char *metrics_path, char *why, unsigned long whylen);

/* Closes the file; NULL-safe; nulls *r_p. */
void report_destroy(report **r_p);

/* Progress while training: rewrites one line on a terminal, else silent. */
void report_progress(report *r, double epoch, double pct, double samples_per_s, double loss);

/* One evaluation: a JSON line into the metrics file and a summary line on stdout. */
void report_eval(report *r, const report_line *l);

#endif
