/* A group's resume in a service (pskv-worker --group G --group-size W --resume):
 * the group's namespace gets its tables back from the newest complete checkpoint
 * that holds it (one of that namespace, or of every table), and its workers the
 * progress that checkpoint recorded for them, as the workers of a resumed job do.
 * Other namespaces' current values are not touched.
 *
 * At the group's first worker's REGISTER the checkpoint is chosen (refused, naming
 * the group and the field, when none holds the namespace or another live group
 * uses it). When its W workers registered, NS_RESTORE goes to every live server
 * (each drops the namespace's tables and loads their rows of the partitions it
 * holds from the checkpoint's files); when every one answered NS_RESTORE_ACK the
 * group starts (its workers get their view and their progress). A server's ERROR,
 * a server's death or 60 s without every answer fails it: each worker of the group
 * is told (ERROR with resume set; it exits 1 naming the reason) and the group is
 * dropped.
 *
 * OWNS   the resumes in progress or done for live groups: the checkpoint chosen
 *        (seq, job, chains, its workers' progress) and the servers waited for.
 * THREAD the scheduler's thread only.
 * NEVER  reads a checkpoint file (the servers do), never starts a group (group.c
 *        does, once grpresume_ready says so). */
#ifndef PSKV_SCHED_GRPRESUME_H
#define PSKV_SCHED_GRPRESUME_H

#include <stddef.h>
#include <stdint.h>

#include "group.h"
#include "wire.h"

/* A new group of generation gen named `group`, resuming namespace ns: chooses the
 * checkpoint. Returns 0, or -1 with why (no --data-dir, no checkpoint holds ns,
 * ns used by a live group, out of memory). */
int grpresume_prepare(const char *group, uint32_t gen, const char *ns, char *why, size_t whylen);

/* 1 when group g may start: not resuming, or its namespace is loaded on every
 * server. Else 0, and the NS_RESTORE is sent when it was not yet. */
int grpresume_ready(const sched_group *g);

/* NS_RESTORE_ACK from a server. */
void grpresume_on_ack(wire_msg *msg);

/* ERROR from a server: 1 when it answered an NS_RESTORE (the resume failed), else 0. */
int grpresume_on_error(const Pskv__Meta *r);

/* The 60 s bound on every resume in progress (the scheduler's tick). */
void grpresume_tick(int64_t now);

/* Subscribes the view filler (a resumed group's workers' progress) and the events
 * (a server's death fails the resumes in progress; a group's end forgets its
 * resume). Once, after ckpt_hooks. */
void grpresume_hooks(void);

/* Forgets every resume (at exit, and between unit tests). */
void grpresume_reset(void);

#endif
