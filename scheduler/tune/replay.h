/* pskv-tune replay: search runs replayed on the curves a study recorded, to
 * measure a search's efficiency over many seeds without training again (a
 * tabular benchmark). The recorded study is a grid over `choice` dimensions run
 * with fifo (every trial to its last epoch), so that any point a search suggests
 * is one that ran; a replayed trial "runs" by reading its recorded metric epoch
 * by epoch, and the trial scheduler decides on it as it would live.
 *
 * Per seed, one run of random search with fifo under the budget gives the target
 * (its final best); the run of --algo/--sched with the same seed is then scored
 * by the epochs it spent until its best reached that target. Trials run one at a
 * time (--parallel 1), a new one starting while fewer than --budget-epochs are
 * spent, as pskv-tune run does.
 *
 * OWNS nothing across calls. THREAD: the caller's. NEVER blocks. */
#ifndef PSKV_TUNE_REPLAY_H
#define PSKV_TUNE_REPLAY_H

typedef struct tune_replay_opts {
    const char *algo;         /* grid, random, gp */
    const char *sched;        /* fifo, median..., asha... (max: the recorded epochs) */
    long budget;              /* epochs; 0: all the recorded trials' epochs */
    long max_trials;
    int seeds;                /* seeds first..first+seeds-1 */
    int levels;               /* grid levels */
    unsigned long long first; /* the first seed */
} tune_replay_opts;

/* Replays o on the study at path and prints a line per seed and the medians on
 * stdout. Returns the exit status: 0, 1 (the study cannot be read, a suggested
 * point was not recorded) or 2 (bad options), after saying why on stderr. */
int tune_replay(const char *path, const tune_replay_opts *o);

#endif
