/* ctl_drain: `pskvctl drain NODE`, the planned removal of a server. NODE is the
 * server's node id as `pskvctl status` shows it, or its address HOST:PORT from
 * the same table. Sends DRAIN; the scheduler refuses (the reason is printed) or
 * accepts and moves the server's partitions to the others (while copies of an
 * earlier placement change are under way it says not yet, and this asks again
 * every 500 ms); this then follows
 * the node's state in STATUS every 200 ms until it is "left" (its partitions
 * whole on the others, the server told to exit), and prints
 * `drained node N: K partitions handed over in S s`.
 *
 * OWNS nothing past the call. THREAD the caller's; uses the DEALER `sock`
 * (connected to the scheduler) alone. */
#ifndef PSKV_CTL_DRAIN_H
#define PSKV_CTL_DRAIN_H

/* Drains NODE. answer_ms bounds each wait for an answer, wait_ms the whole
 * drain. Returns the exit status: 0 drained; 1 refused, no answer, the node
 * died or the job ended during the drain, or still draining after wait_ms (each
 * named on stderr); 2 when NODE is neither a node id nor HOST:PORT. */
int ctl_drain(void *sock, const char *sched, const char *node, int answer_ms, int wait_ms);

#endif
