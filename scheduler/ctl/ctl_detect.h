/* ctl_detect: what `pskvctl status` shows of the scheduler's failure detector
 * (scheduler/detect.h): per node its phi now, its heartbeat gaps (mean, sd, how
 * many), the silence that would declare it dead, and for a dead node which
 * detector fired ("connection closed" or "silent N ms, phi P"); for the job the
 * settings and the nodes declared dead then heard from, by role.
 *
 * OWNS nothing. THREAD the caller's. NEVER fails: fields the scheduler did not
 * send (an older one) are left out. */
#ifndef PSKV_CTL_DETECT_H
#define PSKV_CTL_DETECT_H

#include "pskv.pb-c.h"

/* The table's section, after the node table. */
void ctl_detect_print(const Pskv__View *v);

/* JSON members (each starting with a comma) of node n and of the view. */
void ctl_detect_json_node(const Pskv__Node *n);
void ctl_detect_json_view(const Pskv__View *v);

#endif
