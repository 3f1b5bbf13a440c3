/* ctl_top: `pskvctl top`, a live view of a running job refreshed every interval
 * from the scheduler's STATUS: workers with clock, step rate and the fraction of
 * time their caller waited in libpskv; servers with partitions headed, chains
 * held, pushes and pulls served per second and memory; the slowest worker
 * marked. On a terminal it redraws the screen and ends on `q` or Ctrl-C; else
 * (or with plain) it prints plain lines, one per node and refresh.
 *
 * OWNS nothing past the call. THREAD the caller's; uses the DEALER `sock`
 * (connected to the scheduler) alone. */
#ifndef PSKV_CTL_TOP_H
#define PSKV_CTL_TOP_H

#include "pskv.pb-c.h"
#include "wire.h"

/* Asks the scheduler on sock for STATUS: 0 with *out (the caller closes it), or
 * -1 when no STATUS_REPLY came within timeout_ms (told on stderr, as `pskvctl
 * CMD: ...`). pskvctl top and drain use it. */
int ctl_status(void *sock, const char *sched, const char *cmd, int timeout_ms, wire_msg *out);

/* The live worker still in the clock set (not finished) with the smallest clock,
 * or NULL: the one `top` marks and `status` names. */
const Pskv__Node *ctl_slowest_worker(const Pskv__View *v);

/* Runs the view: refreshes every interval_s until count refreshes (0 = until q
 * or a signal). Returns the exit status: 0, or 1 when the scheduler did not
 * answer within timeout_ms (named on stderr). */
int ctl_top(void *sock, const char *sched, double interval_s, long count, int plain,
            int timeout_ms);

#endif
