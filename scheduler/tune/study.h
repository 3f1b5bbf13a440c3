/* The study: one SQLite file in WAL mode that holds everything pskv-tune knows
 * (settings, trials, per-epoch metrics, decisions) so that `run` after a kill -9
 * resumes where it was. The tuner is the only writer and writes every action as
 * an intent before doing it (a trial LAUNCHING before its fork, STOPPING before
 * its kill); readers (status, export, plot) open it read-only and never block
 * the writer (WAL), with a busy time-out so a checkpoint never makes them fail.
 * Writes are synchronous=FULL: a row the tuner wrote survives a power cut.
 *
 * OWNS the connection and its statements. THREAD: the opening thread. NEVER
 * blocks longer than its busy time-out (5 s). */
#ifndef PSKV_TUNE_STUDY_H
#define PSKV_TUNE_STUDY_H

#include <stddef.h>

typedef struct tune_study tune_study;

/* A trial's lifecycle, as the study stores it. */
typedef enum {
    TRIAL_PENDING,   /* suggested and written; not yet started */
    TRIAL_LAUNCHING, /* intent: about to start (attempt counted); the job may exist */
    TRIAL_RUNNING,   /* started: its job holds the lock in its directory */
    TRIAL_STOPPING,  /* intent: the scheduler decided to stop it; the kill may not be sent */
    TRIAL_COMPLETE,  /* ran all its epochs */
    TRIAL_STOPPED,   /* stopped early by the scheduler */
    TRIAL_FAILED,    /* exited non-zero, hung past --trial-timeout, or would not start */
    TRIAL_PAUSED,    /* asha promote=1: reached its rung with a checkpoint; may be promoted */
    TRIAL_NSTATES
} trial_state;

const char *study_state_name(trial_state s);

typedef struct study_trial {
    long id;
    char params[1024]; /* the worker flags it adds: "--lr 0.01 --momentum 0.9" */
    char u[512];       /* its point in the unit cube, space-separated */
    trial_state state;
    int attempt;       /* launches so far */
    long pgid;         /* its job's process group (0: none yet) */
    char reason[256];  /* why it stopped or failed */
    double best;       /* best metric so far (as reported: not sign-adjusted); NAN: none */
    int epochs;        /* epochs reported */
    double started, ended; /* wall time, s since the epoch (0: not yet) */
} study_trial;

/* Opens (writer: creates) the study at path. A writer sets WAL and FULL sync and
 * creates the tables; a reader opens read-only. Returns 0 or -PSKV_EIO with err
 * saying why (the file, SQLite's message). The caller closes with study_close. */
int study_open(const char *path, int writer, tune_study **out, char *err, size_t len);
void study_close(tune_study **self_p);

/* A setting of the study: set (writer) and get (0, or -PSKV_ENOTFOUND). */
int study_set(tune_study *st, const char *key, const char *value);
int study_get(tune_study *st, const char *key, char *buf, size_t len);

/* Draws a new study's id (8 hex digits from getrandom: the setting `study_id`,
 * which names its trials' groups SID-trial-ID) into buf. 0, or -PSKV_EIO. */
int study_id_new(char *buf, size_t len);

/* Takes the run lock: refused (-PSKV_ELOCKED, err naming the pid and host of the
 * holder) while another live pskv-tune holds it; a dead holder's lock is taken
 * over. study_unlock releases it (at the end of run). */
int study_lock(tune_study *st, char *err, size_t len);
void study_unlock(tune_study *st);

/* A batch of writes made durable together (one fsync, not one each):
 * study_batch opens one unless one is open; study_sync commits the open one (none
 * open: nothing to do). The tuner syncs before every action outside the study (a
 * fork, a stop), so what it wrote before an action is durable before the action.
 * Returns 0 or -PSKV_EIO. */
int study_batch(tune_study *st);
int study_sync(tune_study *st);

/* Adds a PENDING trial; its id goes to *id. */
int study_trial_add(tune_study *st, const char *params, const char *u, long *id);
/* Writes every field of t (by id). */
int study_trial_put(tune_study *st, const study_trial *t);
/* All trials in id order into a new array (*out, the caller frees), count in *n. */
int study_trials(tune_study *st, study_trial **out, int *n);

/* Records a metric (the same trial and epoch twice: the first stays). */
int study_metric_add(tune_study *st, long trial, int epoch, double value, double t);
/* Trial's metrics into v[0..max-1] by epoch (v[e-1]; NAN where none); returns the
 * largest epoch seen. */
int study_metrics(tune_study *st, long trial, double *v, int max);

/* The decision logged for (trial, epoch): 1 stop, 0 go on, -PSKV_ENOTFOUND none. */
int study_decision_get(tune_study *st, long trial, int epoch);
int study_decision_add(tune_study *st, long trial, int epoch, int stop, const char *why);
/* Every decision in order as "trial epoch stop" lines into buf (tests compare runs). */
int study_decisions(tune_study *st, char *buf, size_t len);

#endif
