/* wtest: test-only hooks of libpskv, set by environment variables that a real job
 * never sets (docs/operations.md, "Test hooks"). They make rare orderings of a
 * failover happen every time, so that a fault test can pin them:
 *
 *   PSKV_TEST_VIEW_DELAY_MS=MS  after the first view, the scheduler's messages (a
 *     new view among them) are read only MS ms after the worker first finds them
 *     waiting: a worker that hears of a failover late, as a loaded machine makes
 *     one now and then.
 *   PSKV_TEST_CLOCK_GAP=CLOCK:MS  the CLOCK of iteration CLOCK goes to the server
 *     with the smallest node id at once, and to the others MS ms later (the
 *     caller's thread sleeps): a worker preempted halfway through its clock, so
 *     that one server closes the clock while the others still hold it open.
 *   PSKV_TEST_FIRST_VIEW_DELAY=RANK:MS  worker RANK's listening socket (the
 *     all-reduce's and pskv_pipe's) admits the keys of the view's workers only MS
 *     ms after its first view came: a peer dialling it before then has its CURVE
 *     handshake refused (unknown key), as when it applies the view naming that
 *     peer late. Later views wait for the same moment.
 *
 * Internal to libpskv (see wstate.h). THREADS: the calling thread only. */
#ifndef PSKV_WTEST_H
#define PSKV_WTEST_H

#include <stdint.h>

typedef struct wtest {
    int view_delay_ms;    /* 0: scheduler messages read as they come */
    int64_t sched_seen;   /* when the waiting scheduler messages were first seen (0: none) */
    int64_t gap_clock;    /* -1: no clock gap */
    int gap_ms;
    int keys_rank;        /* -1: no delay of the first view's keys */
    int keys_ms;
    int64_t keys_due;     /* 0: not started; > 0: held until then; -1: done */
} wtest;

/* Reads the hooks from the environment. Returns 0, or -PSKV_EINVAL after logging
 * which variable is malformed. A hook that is set is logged (warning). */
int wtest_init(wtest *t);

/* The scheduler socket has messages waiting at `now` (ms, CLOCK_MONOTONIC), and
 * the worker has its first view: 1 when they may be read now, else 0 (then
 * *wait_ms is how long until they may). Always 1 without the view delay. */
int wtest_sched_ready(wtest *t, int64_t now, long *wait_ms);

/* The scheduler's messages were read: the next ones wait their own delay. */
void wtest_sched_read(wtest *t);

/* 1 when the CLOCK of iteration `clock` takes the gap. */
int wtest_clock_gap(const wtest *t, int64_t clock);

/* Worker `rank` has a view to give its listening socket's allowlist at `now`
 * (ms, CLOCK_MONOTONIC): 1 when it may now, else 0 (then *wait_ms is how long
 * until it may; the first call starts the delay). Always 1 without the hook. */
int wtest_view_keys_ready(wtest *t, int rank, int64_t now, long *wait_ms);

/* 1 while keys are held back by PSKV_TEST_FIRST_VIEW_DELAY (the event loop gives
 * them once wtest_view_keys_ready says so). */
int wtest_view_keys_held(const wtest *t);

#endif
