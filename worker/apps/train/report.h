/* What a training run shows: a progress line on a terminal, plain log lines
 * otherwise, and the JSON Lines metrics file (--metrics) that tools read.
 *
 * OWNS: the metrics file (opened, truncated or in a resumed job appended to,
 * flushed after every line, closed by report_destroy) and whether a progress
 * line is on screen.
 * THREADS: the application's thread only (it writes stdout and one FILE).
 * NEVER: talks to pskv, computes a metric (the caller fills report_line) or
 * fails once opened: a write error to the metrics file is not reported. */
#ifndef PSKV_REPORT_H
#define PSKV_REPORT_H

#include <stdint.h>

/* One evaluation. Filled with designated initialisers: a field left out is 0,
 * which reads as absent for every field but auc (give NAN) and clipped_steps
 * (give -1). */
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
    double bytes_per_step; /* the evaluating worker's data bytes on the wire (after
                              filters, both ways, all tables) per step so far; 0 = absent */
    double loss_scale;     /* --sync allreduce --loss-scale: the current scale, with
                              skipped_steps; 0 = none (both absent) */
    int64_t skipped_steps; /* steps skipped for inf/NaN in the mean gradient */
    int64_t opt_state;     /* --zero 1: this worker's optimizer-state floats; 0 = absent */
    double train_time;     /* time less the evaluating worker's evaluations; 0 = absent */
    double samples;        /* the whole job's samples trained so far, as last counted; 0 = absent */
} report_line;

typedef struct report report;

/* Opens the metrics file (NULL or "" = none; truncated, or appended to when
 * append is set: a resumed job). NULL on failure with why. */
report *report_new(const char *metrics_path, int append, char *why, unsigned long whylen);

/* Closes the file; NULL-safe; nulls *r_p. */
void report_destroy(report **r_p);

/* Progress while training: rewrites one line on a terminal, else silent. */
void report_progress(report *r, double epoch, double pct, double samples_per_s, double loss);

/* One evaluation: a JSON line into the metrics file and a summary line on stdout. */
void report_eval(report *r, const report_line *l);

/* A job resumed from a checkpoint at this (0-based) epoch and step: a line on
 * stdout and a {"resumed_at_epoch":E,"resumed_at_step":S} line in the metrics
 * file (which readers that want the evaluation fields skip); r NULL: the line
 * on stdout only. */
void report_resumed(report *r, int64_t epoch, int64_t step, int64_t total_steps);

/* A JSON object of the caller's (one line, no newline) written as a line of the
 * metrics file, for records of their own (a pipeline's bubble fraction); NULL-
 * safe, and a no-op without a metrics file. */
void report_json(report *r, const char *json);

#endif
