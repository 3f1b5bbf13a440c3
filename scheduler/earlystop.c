/* Early stopping decided by the scheduler from the evaluator's reports (see
 * earlystop.h). The rule is Keras's EarlyStopping: a report improves on the best
 * when it is better by more than min_delta (lower val_loss, higher val_accuracy or
 * val_auc, sparse-lr's: reports without one do not count);
 * after `patience` reports in a row without improvement the job stops. Reports
 * of a snapshot not newer than the last one counted are ignored, so an evaluator
 * that evaluates one snapshot twice does not use up patience. */
#define _GNU_SOURCE
#include "earlystop.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "events.h"
#include "log.h"
#include "pskv_errors.h"
#include "sched_net.h"
#include "timeutil.h"
#include "view.h"

#define MAX_REPORTS 16 /* evaluator nodes remembered for status (a restarted one is new) */

static struct {
    int evaluators;
    char metric[32]; /* "" = off */
    int lower_better;
    long long patience;
    double min_delta;
    double best;
    int64_t best_clock, last_clock;
    int have_best, fired, suspended;
    int64_t silence_ms;     /* --eval-silence, 0 = automatic */
    int64_t last_report_ms; /* the live evaluator's last report (0: none yet) */
    int64_t longest_gap_ms; /* between its reports */
    uint32_t silent_node;   /* taken as hung (0: none) */
    long long waits; /* reports in a row without improvement */
    char reason[200];
    char state[256]; /* status text */
    struct {
        uint32_t node;
        uint64_t evals;
        int64_t clock;
        double loss, acc, auc; /* auc: NAN when not reported (softmax, mlp) */
    } rep[MAX_REPORTS];
    int nrep;
} E = {.last_clock = -1};

int estop_init(int evaluators, const char *metric, long long patience, double min_delta,
               double silence_s)
{
    E.evaluators = evaluators;
    E.silence_ms = (int64_t)(silence_s * 1000);
    if (patience < 1) {
        fprintf(stderr, "pskv-scheduler: --patience must be at least 1 evaluation (got %lld)\n",
                patience);
        return 2;
    }
    if (*metric && strcmp(metric, "val_loss") && strcmp(metric, "val_accuracy") &&
        strcmp(metric, "val_auc")) {
        fprintf(stderr, "pskv-scheduler: --early-stop-metric must be val_loss, val_accuracy or "
                "val_auc (sparse-lr's) (got '%s')\n", metric);
        return 2;
    }
    if (*metric && !evaluators) {
        fprintf(stderr, "pskv-scheduler: --early-stop-metric needs --evaluators 1 (the metric "
                "comes from the evaluator)\n");
        return 2;
    }
    snprintf(E.metric, sizeof E.metric, "%s", metric);
    E.lower_better = !strcmp(metric, "val_loss");
    E.patience = patience;
    E.min_delta = min_delta;
    return -1;
}

static memb_node *live_evaluator(void)
{
    for (int i = 0; i < memb.nnodes; i++)
        if (memb.nodes[i].role == PSKV__ROLE__EVALUATOR && !memb.nodes[i].dead &&
            memb.nodes[i].state != NODE_FINISHED)
            return &memb.nodes[i];
    return NULL;
}

/* REGISTER with the evaluator role: 1 when it may join (--evaluators 1 and no
 * live evaluator); else 0 after refusing msg with the reason. */
static int estop_may_register(wire_msg *msg)
{
    char why[200];
    memb_node *o = live_evaluator();
    if (!E.evaluators)
        snprintf(why, sizeof why, "this job runs no evaluator (the scheduler's --evaluators is 0)");
    else if (o)
        snprintf(why, sizeof why, "the job's evaluator is node %u, alive (--evaluators 1)", o->id);
    else
        return 1;
    sched_refuse(msg, PSKV_EREFUSED, why);
    return 0;
}

/* The report slot of node id (a new one, the oldest dropped, when unknown). */
static int slot(uint32_t node)
{
    for (int i = 0; i < E.nrep; i++)
        if (E.rep[i].node == node)
            return i;
    if (E.nrep == MAX_REPORTS) {
        memmove(&E.rep[0], &E.rep[1], (MAX_REPORTS - 1) * sizeof E.rep[0]);
        E.nrep--;
    }
    memset(&E.rep[E.nrep], 0, sizeof E.rep[0]);
    E.rep[E.nrep].node = node;
    return E.nrep++;
}

/* The policy on one value of the metric, at snapshot `clock`. */
static void judge(double value, int64_t clock)
{
    if (clock <= E.last_clock || E.fired)
        return;
    E.last_clock = clock;
    int better = !E.have_best ||
                 (E.lower_better ? value < E.best - E.min_delta : value > E.best + E.min_delta);
    if (better) {
        E.best = value;
        E.best_clock = clock;
        E.have_best = 1;
        E.waits = 0;
        return;
    }
    if (++E.waits < E.patience)
        return;
    E.fired = 1;
    snprintf(E.reason, sizeof E.reason, "%s did not improve by %g for %lld evaluations", E.metric,
             E.min_delta, E.patience);
    LOG_I("early stopping: %s (best %.6f at clock %lld); every worker stops at its next clock",
          E.reason, E.best, (long long)E.best_clock);
    if (memb.state == JOB_RUNNING)
        view_send(); /* stop_early: every node hears it with the new view */
}

void estop_on_report(memb_node *n, wire_msg *msg)
{
    const Pskv__Meta *r = msg->meta;
    if (n->role != PSKV__ROLE__EVALUATOR) {
        sched_refuse(msg, PSKV_EPROTO, "EVAL_REPORT from a node that is not the evaluator");
        return;
    }
    if (!r->has_clock || !r->has_val_loss || !r->has_val_accuracy || !isfinite(r->val_loss) ||
        !isfinite(r->val_accuracy) || r->clock < 0) {
        LOG_W("dropped an EVAL_REPORT from node %u: no clock or a metric not finite", n->id);
        return;
    }
    int i = slot(n->id);
    E.rep[i].evals++;
    E.rep[i].clock = r->clock;
    E.rep[i].loss = r->val_loss;
    E.rep[i].acc = r->val_accuracy;
    int auc = r->has_val_auc && isfinite(r->val_auc);
    E.rep[i].auc = auc ? r->val_auc : NAN;
    char aucs[40] = "";
    if (auc)
        snprintf(aucs, sizeof aucs, " val_auc %.6f", r->val_auc);
    LOG_I("evaluation %llu from node %u: clock %lld epoch %.2f val_loss %.6f val_accuracy %.4f%s",
          (unsigned long long)E.rep[i].evals, n->id, (long long)r->clock,
          r->has_eval_epoch ? r->eval_epoch : 0.0, r->val_loss, r->val_accuracy, aucs);
    int64_t now = tu_now_ms();
    if (E.last_report_ms && now - E.last_report_ms > E.longest_gap_ms)
        E.longest_gap_ms = now - E.last_report_ms;
    E.last_report_ms = now;
    if (E.suspended || E.silent_node) {
        LOG_I("early stopping resumes: evaluator node %u reports%s", n->id,
              E.silent_node == n->id ? " again after its silence" : "");
        E.suspended = 0;
        E.silent_node = 0;
    }
    int by_auc = !strcmp(E.metric, "val_auc");
    /* the checkpoint marked best follows the policy's metric, else val_loss */
    sched_ev ev = {.kind = SCHED_EV_EVALUATED, .node = n, .clock = r->clock};
    if (!*E.metric || !strcmp(E.metric, "val_loss")) {
        ev.metric = "val_loss";
        ev.value = r->val_loss;
        events_publish(&ev);
    } else if (!by_auc || auc) {
        ev.metric = E.metric;
        ev.value = by_auc ? r->val_auc : r->val_accuracy;
        events_publish(&ev);
    }
    if (by_auc && !auc) {
        LOG_W("--early-stop-metric val_auc: evaluator node %u reports no AUC (not --app "
              "sparse-lr): early stopping ignores its evaluation", n->id);
        return;
    }
    if (*E.metric && memb.state == JOB_RUNNING)
        judge(E.lower_better ? r->val_loss : by_auc ? r->val_auc : r->val_accuracy, r->clock);
}

/* The evaluator n was declared dead: logged; the policy waits for a live one. */
static void estop_on_death(const memb_node *n)
{
    E.last_report_ms = E.longest_gap_ms = 0; /* a new evaluator starts afresh */
    E.silent_node = 0;
    if (E.fired || memb.state != JOB_RUNNING)
        return;
    E.suspended = 1;
    LOG_W("evaluator node %u is dead: training goes on%s until an evaluator reports again",
          n->id, *E.metric ? "; early stopping is suspended" : "");
}

void estop_tick(int64_t now)
{
    memb_node *ev = live_evaluator();
    if (!ev || !E.last_report_ms || E.silent_node || E.fired || memb.state != JOB_RUNNING)
        return;
    int64_t limit = E.silence_ms;
    if (limit <= 0)
        limit = 5 * E.longest_gap_ms > 10000 ? 5 * E.longest_gap_ms : 10000;
    if (now - E.last_report_ms <= limit)
        return;
    E.silent_node = ev->id;
    LOG_W("evaluator node %u is alive but has reported no evaluation for %.1f s (%s %.1f s): "
          "hung? training goes on%s until it reports again", ev->id,
          (double)(now - E.last_report_ms) / 1e3,
          E.silence_ms > 0 ? "--eval-silence" : "5 times its longest gap, at least",
          (double)limit / 1e3, *E.metric ? "; early stopping is suspended" : "");
}

/* Fills the view's stop_early, stop_reason and evaluators; with status, the
 * policy's state too (strings stay this module's). */
static void estop_fill_view(void *ctx, Pskv__View *v, int status)
{
    (void)ctx;
    v->has_evaluators = 1;
    v->evaluators = (uint32_t)E.evaluators;
    if (*E.metric)
        v->early_stop_metric = E.metric;
    if (E.fired) {
        v->has_stop_early = v->stop_early = 1;
        v->stop_reason = E.reason;
    }
    if (!status || !*E.metric)
        return;
    char silent[96];
    snprintf(silent, sizeof silent, "suspended (evaluator node %u silent for %.0f s)",
             E.silent_node, (double)(tu_now_ms() - E.last_report_ms) / 1e3);
    const char *what = E.fired                                   ? "fired"
                       : (E.suspended || !live_evaluator())      ? "suspended (no live evaluator)"
                       : E.silent_node                           ? silent
                                                                 : "watching";
    if (E.have_best)
        snprintf(E.state, sizeof E.state, "%s: best %s %.6f at clock %lld, %lld of %lld "
                 "evaluations without improvement by %g", what, E.metric, E.best,
                 (long long)E.best_clock, E.waits, E.patience, E.min_delta);
    else
        snprintf(E.state, sizeof E.state, "%s: %s, patience %lld, min delta %g, no evaluation "
                 "yet", what, E.metric, E.patience, E.min_delta);
    v->early_stop = E.state;
}

/* Status: an evaluator node's latest report. */
static void estop_fill_node(void *ctx, Pskv__Node *p, const memb_node *n, int status)
{
    (void)ctx;
    if (!status || n->role != PSKV__ROLE__EVALUATOR)
        return;
    for (int i = 0; i < E.nrep; i++) {
        if (E.rep[i].node != n->id)
            continue;
        p->has_evals = p->has_eval_clock = p->has_val_loss = p->has_val_accuracy = 1;
        p->evals = E.rep[i].evals;
        p->eval_clock = E.rep[i].clock;
        p->val_loss = E.rep[i].loss;
        p->val_accuracy = E.rep[i].acc;
        if (!isnan(E.rep[i].auc)) {
            p->has_val_auc = 1;
            p->val_auc = E.rep[i].auc;
        }
    }
}

static int on_registering(void *ctx, const sched_ev *ev)
{
    (void)ctx;
    return ev->msg->meta->role == PSKV__ROLE__EVALUATOR && !estop_may_register(ev->msg);
}

static int on_died(void *ctx, const sched_ev *ev)
{
    (void)ctx;
    if (ev->node->role == PSKV__ROLE__EVALUATOR)
        estop_on_death(ev->node);
    return 0;
}

void estop_hooks(void)
{
    events_subscribe(SCHED_EV_REGISTERING, on_registering, NULL);
    events_subscribe(SCHED_EV_DIED, on_died, NULL);
    view_add_filler(estop_fill_view, estop_fill_node, NULL);
}
