/* The evaluator role on the scheduler's side and early stopping: whether an
 * evaluator may register (--evaluators: one per job; in a service one per worker
 * group, pskv-evaluator --group), the evaluations it reports (EVAL_REPORT), the
 * policy (--early-stop-metric, --patience, --min-delta) and, when it fires, the
 * view that tells every worker to stop at its next clock (in a service: the
 * evaluator's group only, as pskvctl stop GROUP does; the others go on).
 *
 * OWNS   each group's policy state (best value, evaluations without improvement,
 *        fired; a job's is the unnamed group's) and the latest report of each
 *        evaluator node, by node id.
 * THREAD the scheduler's one thread (its event loop), as every scheduler module.
 * NEVER  slows or stops training on its own account: an evaluator that dies or
 *        hangs (silent: estop_tick) only suspends the policy (logged, shown by status) until one
 *        reports again; nothing waits for an evaluator. */
#ifndef PSKV_SCHED_EARLYSTOP_H
#define PSKV_SCHED_EARLYSTOP_H

#include "membership.h"
#include "pskv.pb-c.h"
#include "wire.h"

/* Takes the flags: evaluators 0 or 1; metric "" (off), "val_loss",
 * "val_accuracy" or "val_auc"; patience >= 1 (in evaluations); min_delta >= 0;
 * silence_s (--eval-silence, 0 = automatic). Returns -1 to go on, or 2 after
 * saying on stderr which flag is wrong. */
int estop_init(int evaluators, const char *metric, long long patience, double min_delta,
               double silence_s);

/* The periodic tick at `now` (ms): a live evaluator silent for longer than
 * --eval-silence (automatic: 5 times the longest gap between its reports so far,
 * at least 10 s) is taken as hung (its heartbeats may go on while it evaluates
 * nothing): logged, shown by status, the policy suspended until it reports. */
void estop_tick(int64_t now);

/* Subscribes to the node events (events.h) and adds the view fillers (view.h):
 * an evaluator registers only when the job runs one and none of its group lives
 * (a named group only in a service); an evaluator's death suspends its group's
 * policy; a service's group's end tells its evaluator STOP and drops its policy;
 * VIEW carries stop_early (a job's), STATUS_REPLY the policy's state (a service:
 * on each group's line) and each evaluator's latest report. Once, before the
 * loop, after group_hooks (its group lines are filled first). */
void estop_hooks(void);

/* EVAL_REPORT from node n (the evaluator): records it, publishes it (the unnamed
 * group's only, SCHED_EV_EVALUATED: the best checkpoint follows it) and runs its
 * group's policy; when it fires, a new view (stop_early) goes to every node (a
 * service: group_stop_early of its group). */
void estop_on_report(memb_node *n, wire_msg *msg);

#endif
