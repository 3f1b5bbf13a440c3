/* The trial launcher: the one place that knows how a trial's job runs, so that
 * moving trials onto worker groups of one server group (issue 35) changes this
 * module only. Today each trial is a separate local job (scripts/launch-local.sh:
 * a scheduler, --servers servers and one worker on free loopback ports) started
 * in a session of its own, so that it outlives a killed tuner and stops as one
 * process group.
 *
 * A trial's directory holds: `lock`, flock()ed by the job for its whole life (the
 * launcher takes it before fork and the child inherits it, so there is no moment
 * when the job runs unlocked: a resumed tuner that finds the lock free knows the
 * job is gone); `pid`, the job's process group; `exit`, written when the job
 * ends with its exit status; `logs/worker-0.log`, the metric lines.
 *
 * OWNS nothing across calls. THREAD: the tuner's. NEVER blocks: a launch forks
 * and returns. */
#ifndef PSKV_TUNE_TRIAL_H
#define PSKV_TUNE_TRIAL_H

#include <stddef.h>

typedef struct trial_opts {
    const char *launcher; /* scripts/launch-local.sh */
    const char *bin_dir;  /* the daemons' directory */
    int servers;
    double timeout;       /* s: the job's hard time-out (launch-local's --timeout) */
} trial_opts;

/* Starts a trial's job in dir (created) with the worker flags argv[0..argc-1].
 * Returns 0 with the job's process group in *pgid, or -PSKV_EIO with err. */
int trial_launch(const trial_opts *o, const char *dir, char *const *argv, int argc, long *pgid,
                 char *err, size_t len);

/* 1 while the job in dir holds its lock, 0 when it is gone. */
int trial_alive(const char *dir);

/* The process group recorded in dir, or 0. */
long trial_pgid(const char *dir);

/* The job's exit status once ended (its `exit` file), else -1. */
int trial_exit_status(const char *dir);

/* Stops the job: SIGTERM to its process group (SIGKILL when hard). */
void trial_stop(long pgid, int hard);

/* Reads the metric lines `... epoch E METRIC V ...` of the worker's log from
 * *offset on, calling cb for each; *offset moves past whole lines read. Returns
 * the number of lines handed to cb, or the first negative cb returned. */
int trial_read_metrics(const char *dir, long *offset, const char *metric,
                       int (*cb)(void *arg, int epoch, double value), void *arg);

/* The last line the job's worker wrote on stderr or stdout (why it failed). */
void trial_last_words(const char *dir, char *buf, size_t len);

/* Reaps exited children of this tuner (never blocks). */
void trial_reap(void);

#endif
