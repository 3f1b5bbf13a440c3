/* pskv-tune run: the study's driver. One loop on the main thread: launch trials up
 * to --parallel (trial.h: worker groups of one service), read their metric lines, ask the trial scheduler
 * (tsched.h) after each epoch, stop the trials it rejects, record how each ended,
 * and suggest new trials (suggest.h) until the budget, the trial count or the grid
 * runs out. Every action is written to the study first (study.h): on start it
 * re-attaches the jobs that still run, restarts the ones that died before they
 * ended, finishes the stops it had decided, and replays logged decisions rather
 * than deciding again.
 *
 * OWNS the trials' in-memory state for the call. THREAD: the caller's. NEVER
 * returns before the study is finished, a stop signal, or an error. */
#ifndef PSKV_TUNE_RUN_H
#define PSKV_TUNE_RUN_H

#include <signal.h>

#include "study.h"
#include "trial.h"

typedef struct tune_run_opts {
    trial_opts trial;     /* how trials launch */
    const char *dir;      /* the study's trial directories: STUDY.db.d */
    double trial_timeout; /* s without a metric before a trial counts as hung */
    double poll;          /* s between looks at the trials */
    volatile sig_atomic_t *stop; /* set by SIGINT/SIGTERM: exit */
    int prestart;         /* start the next trial's workers while the slots are full
                           * (--prestart): their start overlaps the trials' ends */
    int service_replaced; /* the study's service was gone and a new one started: the
                           * trials that ran on the old one run again */
    int end_trials_on_stop; /* on *stop: the running trials are stopped and written back
                             * pending (the service ends with the tuner); else they go on */
} tune_run_opts;

/* Runs (or resumes) the study until it is finished. Returns 0 finished, 1 when
 * stopped by a signal (run again to re-attach or relaunch the trials), or a
 * negated PSKV_E* code after logging why. */
int tune_run(tune_study *st, const tune_run_opts *o);

#endif
