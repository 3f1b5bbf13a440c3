/* The trial launcher: the one place that knows how a trial runs. A trial is a
 * worker group of one service (tservice.h): W x `pskv-worker --scheduler ADDR
 * --group SID-trial-ID --group-size W --drop-namespace --rank I` with the
 * trial's flags (W the study's --workers, 1 by default), on this host or, through
 * the launcher (tplace.h: ssh, Slurm), each rank's worker under its own client
 * (ssh, srun) that runs here, in the trial's session; its tables in the
 * namespace SID-trial-ID, dropped when the group ends. SID is the study's id
 * (drawn at create), so that studies sharing one service never share a group. Its workers are started in a session of
 * their own, so that they outlive a killed tuner (its service does too), and are
 * stopped through the group stop (GROUP_STOP, as `pskvctl stop` sends it), which
 * reaches them at their next evaluation. *
 * A trial's directory holds: `lock`, flock()ed by the worker for its whole life
 * (the launcher takes it before fork and the child inherits it, so there is no
 * moment when the trial runs unlocked: a resumed tuner that finds the lock free
 * knows it is gone; a remote worker's client holds it for it); `pid`, its process
 * group; `place`, where its workers run (`local`, `ssh DEST`, `slurm`: written
 * before the fork); `exit`, written when the worker ends with its exit status;
 * `logs/worker-I.log`, rank I's output (rank 0's has the metric lines; a remote
 * worker's comes back through its client).
 *
 * OWNS nothing across calls. THREAD: the tuner's. NEVER blocks but for the stop's
 * answer (at most 2 s): a launch forks and returns. */
#ifndef PSKV_TUNE_TRIAL_H
#define PSKV_TUNE_TRIAL_H

#include <stddef.h>
#include <stdint.h>

#include "tplace.h"
#include "tservice.h"

typedef struct trial_opts {
    const char *bin_dir;  /* pskv-worker's directory */
    tservice *svc;        /* the service the groups run on (set by the caller) */
    double join_timeout;  /* s: the worker's --join-timeout */
    int workers;          /* W: the group's size */
    const char *study_id; /* SID; "" for a study created before ids (trial-ID) */
    const tplace *place;  /* the launcher (NULL: local) */
    int insecure;         /* the workers run with --insecure */
} trial_opts;

/* A trial's group (and namespace) name: SID-trial-ID (trial-ID without an id). */
void trial_group(const trial_opts *o, long id, char *buf, size_t len);

/* Starts trial id's workers in dir (created) with the worker flags
 * argv[0..argc-1], on the launcher's host `host` (tplace_pick; local, slurm: 0);
 * held: they start their processes but join the service only once trial_release
 * (--start-file dir/go), so that a trial's process start overlaps the end of the
 * one before it. Returns 0 with their process group in *pgid, or -PSKV_EIO with
 * err. */
int trial_launch(const trial_opts *o, const char *dir, long id, int host, int held,
                 char *const *argv, int argc, long *pgid, char *err, size_t len);

/* Where trial dir's workers run (its `place` file: "local", "ssh DEST", "slurm");
 * "local" when there is none (a trial launched before places). */
void trial_where(const char *dir, char *buf, size_t len);

/* Lets a held trial's workers join (creates dir/go; nothing to a trial not held).
 * Returns 0 or -PSKV_EIO. */
int trial_release(const char *dir);

/* 1 while the trial's worker in dir holds its lock, 0 when it is gone. */
int trial_alive(const char *dir);

/* The process group recorded in dir, or 0. */
long trial_pgid(const char *dir);

/* The worker's exit status once ended (its `exit` file), else -1. */
int trial_exit_status(const char *dir);

/* Stops trial id (directory dir): its group stop (a worker that has not joined
 * its group yet, or a service that does not answer: SIGTERM to its workers);
 * hard: SIGKILL, on their host first (tplace_kill) when they run on another.
 * Returns 0, or -PSKV_EIO when a remote host did not confirm (hard: its workers
 * may still run there). */
int trial_stop(const trial_opts *o, const char *dir, long id, long pgid, int hard);

/* Reads the metric lines `... epoch E METRIC V ...` of the worker's log from
 * *offset on, calling cb for each; *offset moves past whole lines read. Returns
 * the number of lines handed to cb, or the first negative cb returned. */
int trial_read_metrics(const char *dir, long *offset, const char *metric,
                       int (*cb)(void *arg, int epoch, double value), void *arg);

/* The last line the trial's worker wrote on stderr or stdout (why it failed). */
void trial_last_words(const char *dir, char *buf, size_t len);

/* Reaps exited children of this tuner (never blocks). */
void trial_reap(void);

/* What wakes the tuner when a trial's worker writes its log (inotify on each
 * watched trial's logs/), so that a metric line is read as it is written rather
 * than at the next --poll. */
typedef struct trial_watch trial_watch;

/* A watch with nothing watched; NULL when inotify is not there (then
 * trial_watch_wait only sleeps). Free with trial_watch_destroy (NULL is fine). */
trial_watch *trial_watch_new(void);
void trial_watch_destroy(trial_watch **self_p);

/* Watches trial dir's logs/: its handle (>= 0), or -1 (not watched: the --poll
 * finds its lines). trial_watch_remove forgets a handle (-1 is fine). */
int trial_watch_add(trial_watch *w, const char *dir);
void trial_watch_remove(trial_watch *w, int handle);

/* Waits until a watched log is written or max_ms pass, but returns no sooner
 * than min_ms after since_ms (CLOCK_MONOTONIC ms: the last pass's start), so a
 * chatty worker cannot spin the tuner. */
void trial_watch_wait(trial_watch *w, int64_t since_ms, int min_ms, int max_ms);

#endif
