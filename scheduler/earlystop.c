/* Early stopping decided by the scheduler from the evaluators' reports (see
 * earlystop.h). The rule is Keras's EarlyStopping: a report improves on the best
 * when it is better by more than min_delta (lower val_loss, higher val_accuracy or
 * val_auc, sparse-lr's: reports without one do not count);
 * after `patience` reports in a row without improvement the job (in a service:
 * the evaluator's group) stops. Reports of a snapshot not newer than the last one
 * counted are ignored, so an evaluator that evaluates one snapshot twice does not
 * use up patience.
 *
 * One policy state per group (a job's is the unnamed group's): the flags are the
 * scheduler's, the best, the count and the evaluator's silence are each group's. */
#define _GNU_SOURCE
#include "earlystop.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "events.h"
#include "group.h"
#include "log.h"
#include "metrics.h"
#include "pskv_errors.h"
#include "sched_net.h"
#include "timeutil.h"
#include "view.h"

#define MAX_REPORTS 16 /* evaluator nodes remembered for status (a restarted one is new) */

/* One group's policy: created with its evaluator's registration or first report,
 * dropped when a service's group ends (a job's lives as long as the job). */
typedef struct pol {
    char group[GROUP_NAME_MAX + 1]; /* "" = the unnamed group (a job's) */
    double best;
    int64_t best_clock, last_clock;
    int have_best, fired, suspended;
    int64_t last_report_ms; /* the live evaluator's last report (0: none yet) */
    int64_t longest_gap_ms; /* between its reports */
    uint32_t silent_node;   /* taken as hung (0: none) */
    long long waits;        /* reports in a row without improvement */
    char reason[200];
    char state[256]; /* status text */
    struct met_series *m_waits, *m_best, *m_fired; /* a service's, group="NAME" */
} pol;

static struct {
    int evaluators;
    char metric[32]; /* "" = off */
    int lower_better;
    long long patience;
    double min_delta;
    int64_t silence_ms; /* --eval-silence, 0 = automatic */
    pol pols[GROUP_MAX + 1];
    int npols;
    struct {
        uint32_t node;
        uint64_t evals;
        int64_t clock;
        double loss, acc, auc; /* auc: NAN when not reported (softmax, mlp) */
        int ended; /* its group ended (on_group_ended): reports still in flight are
                      dropped, not a new policy of the group's name */
    } rep[MAX_REPORTS];
    int nrep;
} E;

int estop_init(int evaluators, const char *metric, long long patience, double min_delta,
               double silence_s)
{
    E.evaluators = evaluators;
    E.silence_ms = (int64_t)(silence_s * 1000);
    E.npols = 0;
    E.nrep = 0;
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

/* "group NAME: " before a line of a named group's policy; "" for the unnamed one,
 * whose lines read as a job's always did. */
static const char *gpre(const char *group, char *buf, size_t len)
{
    if (!*group)
        return "";
    snprintf(buf, len, "group %s: ", group);
    return buf;
}

static pol *pol_find(const char *group)
{
    for (int i = 0; i < E.npols; i++)
        if (!strcmp(E.pols[i].group, group))
            return &E.pols[i];
    return NULL;
}

/* group's policy, created when new (NULL only when the table is full: a bug, as
 * the live groups are at most GROUP_MAX). */
static pol *pol_get(const char *group)
{
    pol *p = pol_find(group);
    if (p || E.npols == GROUP_MAX + 1)
        return p;
    p = &E.pols[E.npols++];
    memset(p, 0, sizeof *p);
    snprintf(p->group, sizeof p->group, "%s", group);
    p->last_clock = -1;
    if (memb.service && *E.metric) {
        p->m_waits = metrics_series("pskv_group_early_stop_waits", MET_GAUGE,
                                    "Evaluations in a row without improvement (early stopping).",
                                    "group", group);
        p->m_best = metrics_series("pskv_group_early_stop_best", MET_GAUGE,
                                   "The best value of --early-stop-metric so far.", "group",
                                   group);
        p->m_fired = metrics_series("pskv_group_stopped_early", MET_GAUGE,
                                    "1 once early stopping stopped this group.", "group", group);
        metrics_set(p->m_waits, 0);
        metrics_set(p->m_best, 0);
        metrics_set(p->m_fired, 0);
    }
    return p;
}

static void pol_drop(pol *p)
{
    int i = (int)(p - E.pols);
    memmove(&E.pols[i], &E.pols[i + 1], (size_t)(E.npols - i - 1) * sizeof *p);
    E.npols--;
}

/* The evaluator's group: its REGISTER's, kept in its node (membership.c). */
static const char *group_name(const memb_node *n) { return n->group; }

static memb_node *live_evaluator(const char *group)
{
    for (int i = 0; i < memb.nnodes; i++)
        if (memb.nodes[i].role == PSKV__ROLE__EVALUATOR && !memb.nodes[i].dead &&
            memb.nodes[i].state != NODE_FINISHED && !strcmp(memb.nodes[i].group, group))
            return &memb.nodes[i];
    return NULL;
}

/* REGISTER with the evaluator role: 1 when it may join (--evaluators 1 and no
 * live evaluator of its group; a named group only in a service); else 0 after
 * refusing msg with the reason. */
static int estop_may_register(wire_msg *msg)
{
    char why[300];
    const char *group = msg->meta->group ? msg->meta->group : "";
    memb_node *o = live_evaluator(group);
    if (!E.evaluators)
        snprintf(why, sizeof why, "%sthis %s runs no evaluator (the scheduler's --evaluators is 0)",
                 *group ? "group " : "", *group ? group : "job");
    else if (strlen(group) > GROUP_NAME_MAX || strchr(group, '/'))
        snprintf(why, sizeof why, "group '%.80s': field group: a group's name is 1..%d bytes "
                 "without '/'", group, GROUP_NAME_MAX);
    else if (*group && !memb.service)
        snprintf(why, sizeof why, "group %s: field group: this scheduler runs one job; an "
                 "evaluator of a group needs a service (pskv-scheduler --service)", group);
    else if (o && *group)
        snprintf(why, sizeof why, "group %s: the group's evaluator is node %u, alive (one "
                 "evaluator per group)", group, o->id);
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

/* p fired: a job's workers (every node) hear it with the next view; a service's
 * group is stopped as pskvctl stop does, with the policy's reason. */
static void fire(pol *p)
{
    char g[GROUP_NAME_MAX + 16];
    p->fired = 1;
    metrics_set(p->m_fired, 1);
    snprintf(p->reason, sizeof p->reason, "%s%s did not improve by %g for %lld evaluations",
             gpre(p->group, g, sizeof g), E.metric, E.min_delta, E.patience);
    if (!memb.service) {
        LOG_I("early stopping: %s (best %.6f at clock %lld); every worker stops at its next "
              "clock", p->reason, p->best, (long long)p->best_clock);
        if (memb.state == JOB_RUNNING)
            view_send(); /* stop_early: every node hears it with the new view */
        return;
    }
    LOG_I("early stopping: %s (best %.6f at clock %lld); the group's workers stop at their "
          "next clock, the service and its other groups go on", p->reason, p->best,
          (long long)p->best_clock);
    group_stop_early(group_find(p->group), p->reason);
}

/* The policy on one value of the metric, at snapshot `clock`. */
static void judge(pol *p, double value, int64_t clock)
{
    if (clock <= p->last_clock || p->fired)
        return;
    p->last_clock = clock;
    int better = !p->have_best ||
                 (E.lower_better ? value < p->best - E.min_delta : value > p->best + E.min_delta);
    if (better) {
        p->best = value;
        p->best_clock = clock;
        p->have_best = 1;
        p->waits = 0;
        metrics_set(p->m_best, value);
        metrics_set(p->m_waits, 0);
        return;
    }
    metrics_set(p->m_waits, (double)++p->waits);
    if (p->waits >= E.patience)
        fire(p);
}

/* 1 when the policy of the evaluator's group may judge now: a job running, or in
 * a service its group running. */
static int judging(const char *group)
{
    if (memb.state != JOB_RUNNING)
        return 0;
    if (!memb.service)
        return 1;
    const sched_group *g = group_find(group);
    return g && g->state == GROUP_RUNNING;
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
    const char *group = group_name(n);
    int i = slot(n->id);
    if (E.rep[i].ended) { /* sent before it heard the STOP */
        LOG_D("dropped an evaluation from node %u: group %s has ended", n->id, group);
        return;
    }
    pol *p = pol_get(group);
    if (!p)
        return;
    char g[GROUP_NAME_MAX + 16];
    E.rep[i].evals++;
    E.rep[i].clock = r->clock;
    E.rep[i].loss = r->val_loss;
    E.rep[i].acc = r->val_accuracy;
    int auc = r->has_val_auc && isfinite(r->val_auc);
    E.rep[i].auc = auc ? r->val_auc : NAN;
    char aucs[40] = "";
    if (auc)
        snprintf(aucs, sizeof aucs, " val_auc %.6f", r->val_auc);
    LOG_I("%sevaluation %llu from node %u: clock %lld epoch %.2f val_loss %.6f val_accuracy "
          "%.4f%s", gpre(group, g, sizeof g), (unsigned long long)E.rep[i].evals, n->id,
          (long long)r->clock, r->has_eval_epoch ? r->eval_epoch : 0.0, r->val_loss,
          r->val_accuracy, aucs);
    int64_t now = tu_now_ms();
    if (p->last_report_ms && now - p->last_report_ms > p->longest_gap_ms)
        p->longest_gap_ms = now - p->last_report_ms;
    p->last_report_ms = now;
    if (p->suspended || p->silent_node) {
        LOG_I("%searly stopping resumes: evaluator node %u reports%s", gpre(group, g, sizeof g),
              n->id, p->silent_node == n->id ? " again after its silence" : "");
        p->suspended = 0;
        p->silent_node = 0;
    }
    int by_auc = !strcmp(E.metric, "val_auc");
    /* the checkpoint marked best follows the policy's metric, else val_loss; the
     * job's (the unnamed group's) evaluations only: checkpoints are the job's */
    sched_ev ev = {.kind = SCHED_EV_EVALUATED, .node = n, .clock = r->clock};
    if (*group) {
        /* a named group's evaluations mark no checkpoint (operations.md) */
    } else if (!*E.metric || !strcmp(E.metric, "val_loss")) {
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
    if (*E.metric && judging(group))
        judge(p, E.lower_better ? r->val_loss : by_auc ? r->val_auc : r->val_accuracy, r->clock);
}

/* The evaluator n was declared dead: logged; its group's policy waits for a live
 * one. */
static void estop_on_death(const memb_node *n)
{
    pol *p = pol_get(group_name(n));
    if (!p)
        return;
    p->last_report_ms = p->longest_gap_ms = 0; /* a new evaluator starts afresh */
    p->silent_node = 0;
    if (p->fired || !judging(p->group))
        return;
    p->suspended = 1;
    char g[GROUP_NAME_MAX + 16];
    LOG_W("%sevaluator node %u is dead: training goes on%s until an evaluator reports again",
          gpre(p->group, g, sizeof g), n->id, *E.metric ? "; early stopping is suspended" : "");
}

void estop_tick(int64_t now)
{
    for (int i = 0; i < E.npols; i++) {
        pol *p = &E.pols[i];
        memb_node *ev = live_evaluator(p->group);
        if (!ev || !p->last_report_ms || p->silent_node || p->fired || !judging(p->group))
            continue;
        int64_t limit = E.silence_ms;
        if (limit <= 0)
            limit = 5 * p->longest_gap_ms > 10000 ? 5 * p->longest_gap_ms : 10000;
        if (now - p->last_report_ms <= limit)
            continue;
        p->silent_node = ev->id;
        char g[GROUP_NAME_MAX + 16];
        LOG_W("%sevaluator node %u is alive but has reported no evaluation for %.1f s (%s %.1f "
              "s): hung? training goes on%s until it reports again", gpre(p->group, g, sizeof g),
              ev->id, (double)(now - p->last_report_ms) / 1e3,
              E.silence_ms > 0 ? "--eval-silence" : "5 times its longest gap, at least",
              (double)limit / 1e3, *E.metric ? "; early stopping is suspended" : "");
    }
}

/* p's state for status, in p->state. */
static char *state_text(pol *p)
{
    char silent[96];
    snprintf(silent, sizeof silent, "suspended (evaluator node %u silent for %.0f s)",
             p->silent_node, (double)(tu_now_ms() - p->last_report_ms) / 1e3);
    const char *what = p->fired                                      ? "fired"
                       : (p->suspended || !live_evaluator(p->group)) ? "suspended (no live evaluator)"
                       : p->silent_node                              ? silent
                                                                     : "watching";
    if (p->have_best)
        snprintf(p->state, sizeof p->state, "%s: best %s %.6f at clock %lld, %lld of %lld "
                 "evaluations without improvement by %g", what, E.metric, p->best,
                 (long long)p->best_clock, p->waits, E.patience, E.min_delta);
    else
        snprintf(p->state, sizeof p->state, "%s: %s, patience %lld, min delta %g, no evaluation "
                 "yet", what, E.metric, E.patience, E.min_delta);
    return p->state;
}

/* Fills the view's stop_early, stop_reason and evaluators (a job's); with status,
 * the unnamed group's policy and each listed group's (group.c's lines: its
 * filler runs first). Strings stay this module's. */
static void estop_fill_view(void *ctx, Pskv__View *v, int status)
{
    (void)ctx;
    v->has_evaluators = 1;
    v->evaluators = (uint32_t)E.evaluators;
    if (*E.metric)
        v->early_stop_metric = E.metric;
    pol *job = pol_find("");
    if (job && job->fired && !memb.service) {
        v->has_stop_early = v->stop_early = 1;
        v->stop_reason = job->reason;
    }
    if (!status || !*E.metric)
        return;
    if (!memb.service)
        v->early_stop = state_text(job ? job : pol_get(""));
    for (size_t i = 0; memb.service && i < v->n_groups; i++) {
        pol *p = pol_find(v->groups[i]->name ? v->groups[i]->name : "");
        if (p)
            v->groups[i]->early_stop = state_text(p);
    }
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

static int on_joined(void *ctx, const sched_ev *ev)
{
    (void)ctx;
    if (ev->node->role == PSKV__ROLE__EVALUATOR && *E.metric)
        pol_get(group_name(ev->node)); /* status shows its group's policy from now on */
    return 0;
}

static int on_died(void *ctx, const sched_ev *ev)
{
    (void)ctx;
    if (ev->node->role == PSKV__ROLE__EVALUATOR)
        estop_on_death(ev->node);
    return 0;
}

/* A service's group ended: its evaluator is told STOP (as a job's at the job's
 * end) and its policy dropped; a group of that name later starts afresh. */
static int on_group_ended(void *ctx, const sched_ev *ev)
{
    (void)ctx;
    memb_node *e = live_evaluator(ev->group);
    if (e) {
        Pskv__Meta m;
        sched_meta(&m, PSKV__MSG_TYPE__STOP);
        sched_send(e, &m); /* it answers nothing */
        E.rep[slot(e->id)].ended = 1;
        LOG_I("group %s ended: its evaluator node %u is told to stop", ev->group, e->id);
    }
    pol *p = pol_find(ev->group);
    if (p) {
        metrics_set(p->m_waits, 0);
        pol_drop(p);
    }
    return 0;
}

void estop_hooks(void)
{
    events_subscribe(SCHED_EV_REGISTERING, on_registering, NULL);
    events_subscribe(SCHED_EV_JOINED, on_joined, NULL);
    events_subscribe(SCHED_EV_DIED, on_died, NULL);
    events_subscribe(SCHED_EV_GROUP_ENDED, on_group_ended, NULL);
    view_add_filler(estop_fill_view, estop_fill_node, NULL);
}
