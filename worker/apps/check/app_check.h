/* The check app's shared state, private to its two files: app_check.c (exact
 * sums over dense and sparse tables, the app's entry) and app_check_acked.c
 * (--backup and --count-acked: final values against the acknowledged pushes,
 * counted per rank and partition, across kill -9 with --acked-log).
 *
 * OWNS nothing beyond the ck a caller hands in: the check's options, table
 * handles, buffers and verdict (status and the first mismatch's detail).
 * THREADS: the worker's main thread only (the one that opened the handle).
 * NEVER closes the handle or exits the process; prints on stdout. */
#ifndef PSKV_APP_CHECK_H
#define PSKV_APP_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "pskv.h"

#define ACK_RANKS 256 /* ranks the report table has room for: workers may join mid-run */

/* One check run, shared by the steps of both files: the options, the tables, the
 * buffers, and the verdict so far (status, and the first mismatch's detail). */
typedef struct ck {
    pskv_worker *w;
    int W, r, R;       /* workers, this rank, rounds */
    uint64_t n;        /* keys */
    const char *cons;  /* --consistency */
    int bsp, ssp, tau;
    double slow;       /* --slowdown */
    pskv_table_opts o; /* the sum tables' options: updater, consistency, backup */
    int td, ts;
    int tf;            /* bsp: the float table trained with sgd; -1 = none */
    float *dv, *sv;
    float *dn;         /* --push nocopy: the dense run's values, lent until waited for */
    int64_t dn_ts;     /* the push that has them (0: none) */
    int view;          /* --pull view: the dense table read through pskv_pull_view */
    int pp;            /* --pull pushpull: each round ends with pskv_pushpull of the dense
                          run (its clock ended with it), whose values are checked */
    int ppview;        /* --pull pushpull-view: ... its values read through a view
                          (PSKV_PP_VIEW), copied out and released */
    int pbuf;          /* --push buffer: the dense run pushed from pskv_push_buffer's */
    int pbclock;       /* --push buffer-clock: ... last in the round, ending the clock
                          (pskv_push_buffer_send_clock) */
    uint64_t *sk, *dk;
    size_t own_n;      /* every worker's own sparse keys ... */
    uint64_t *ok;      /* ... their ids */
    float *ov;         /* ... their values */
    float *fv;         /* check.float's values */
    int64_t max_lead;  /* ssp: the largest lead over the slowest worker seen */
    int status;
    char detail[256];
} ck;

/* Prints `check FAILED: what: error (detail)` and returns 1 (the exit status). */
int ck_fail(pskv_worker *w, const char *what, int rc);

/* Pulls and waits (up to 120 s): 0 or a negated PSKV_E* code. */
int ck_pull_wait(pskv_worker *w, int t, const uint64_t *keys, size_t n, float *out);

/* Marks the check failed; the first mismatch's detail is kept for the last line. */
void ck_mismatch(ck *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* --backup B or --count-acked (app_check_acked.c): runs the check and prints its
 * last line. Returns the exit status: 0 (check ok), 1 (failed, said why), or
 * 128 + N when stopped by signal N. */
int ck_run_acked(ck *c, cfg_entry *cfg);

#endif
