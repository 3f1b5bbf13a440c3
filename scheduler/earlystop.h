/* The evaluator role on the scheduler's side and early stopping: whether an
 * evaluator may register (--evaluators), the evaluations it reports
 * (EVAL_REPORT), the policy (--early-stop-metric, --patience, --min-delta) and,
 * when it fires, the view that tells every worker to stop at its next clock.
 *
 * OWNS   the policy's state (best value, evaluations without improvement, fired)
 *        and the latest report of each evaluator node, by node id.
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

/* REGISTER with the evaluator role: 1 when it may join (--evaluators 1 and no
 * live evaluator); else 0 after refusing msg with the reason. */
int estop_may_register(wire_msg *msg);

/* EVAL_REPORT from node n (the evaluator): records it and runs the policy; when
 * it fires, a new view (stop_early) goes to every node. */
void estop_on_report(memb_node *n, wire_msg *msg);

/* The evaluator n was declared dead: logged; the policy waits for a live one. */
void estop_on_death(const memb_node *n);

/* Fills the view's stop_early, stop_reason and evaluators; with status, the
 * policy's state too (strings stay this module's). */
void estop_fill_view(Pskv__View *v, int status);

/* Status: an evaluator node's latest report. */
void estop_fill_node(Pskv__Node *p, const memb_node *n, int status);

#endif
