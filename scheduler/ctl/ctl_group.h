/* ctl_group: the verbs of a service and its worker groups.
 *   pskvctl shutdown     the service stops its servers and exits (SHUTDOWN); prints
 *                        `shutdown: the servers of service J are stopping`
 *   pskvctl stop GROUP   the group's workers stop as early stopping stops them
 *                        (GROUP_STOP); prints `stopping group G: N workers told`
 *   pskvctl drop NS      the servers free every table of namespace NS (NS_DROP),
 *                        refused while a live group uses it; prints `dropped
 *                        namespace NS: T tables, R rows, B bytes freed (every replica)`
 * and the group lines of `pskvctl status`'s table (its JSON's are pskvctl.c's).
 *
 * OWNS nothing past the call. THREAD the caller's; uses the DEALER `sock`
 * (connected to the scheduler) alone. */
#ifndef PSKV_CTL_GROUP_H
#define PSKV_CTL_GROUP_H

#include "pskv.pb-c.h"

/* A drop waits this much longer than --timeout: the scheduler's own bound on a
 * drop (nsdrop.h, NSDROP_TIMEOUT_MS). */
#define CTL_DROP_WAIT_MS 20000

/* pskvctl shutdown. answer_ms bounds the wait for the answer. Returns the exit
 * status: 0 accepted, 1 refused (not a service, no control key) or no answer
 * (named on stderr). */
int ctl_shutdown(void *sock, const char *sched, int answer_ms);

/* pskvctl stop GROUP ("" = the unnamed group). Returns 0 told, 1 refused (no
 * such group, not running) or no answer (named on stderr). */
int ctl_stop_group(void *sock, const char *sched, const char *group, int answer_ms);

/* pskvctl drop NAMESPACE ("" = the unnamed one of a service). answer_ms bounds the
 * wait (the drop waits for copies under way and every live server's answer).
 * Returns 0 dropped, 1 refused (in use by a live group, no such namespace, a
 * job's unnamed one) or no answer (named on stderr). */
int ctl_drop_ns(void *sock, const char *sched, const char *ns, int answer_ms);

/* The status table's group lines ("group G  running  2/2 workers ..."), none
 * for a job's unnamed group alone. */
void ctl_group_print(const Pskv__View *v);

#endif
