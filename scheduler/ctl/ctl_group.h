/* ctl_group: the verbs of a service and its worker groups.
 *   pskvctl shutdown     the service stops its servers and exits (SHUTDOWN); prints
 *                        `shutdown: the servers of service J are stopping`
 *   pskvctl stop GROUP   the group's workers stop as early stopping stops them
 *                        (GROUP_STOP); prints `stopping group G: N workers told`
 * and the group lines of `pskvctl status`'s table (its JSON's are pskvctl.c's).
 *
 * OWNS nothing past the call. THREAD the caller's; uses the DEALER `sock`
 * (connected to the scheduler) alone. */
#ifndef PSKV_CTL_GROUP_H
#define PSKV_CTL_GROUP_H

#include "pskv.pb-c.h"

/* pskvctl shutdown. answer_ms bounds the wait for the answer. Returns the exit
 * status: 0 accepted, 1 refused (not a service, no control key) or no answer
 * (named on stderr). */
int ctl_shutdown(void *sock, const char *sched, int answer_ms);

/* pskvctl stop GROUP ("" = the unnamed group). Returns 0 told, 1 refused (no
 * such group, not running) or no answer (named on stderr). */
int ctl_stop_group(void *sock, const char *sched, const char *group, int answer_ms);

/* The status table's group lines ("group G  running  2/2 workers ..."), none
 * for a job's unnamed group alone. */
void ctl_group_print(const Pskv__View *v);

#endif
