/* libpskv's calls for early stopping and for the evaluator role (declared in
 * pskv.h): whether the scheduler asked the job to stop early, whether the job is
 * ending, the clocks a snapshot reflects, and the report of one evaluation.
 *
 * All run on the calling thread, which owns the scheduler socket; they read what
 * the pump (wpump, wview) last applied and never wait. */
#define _GNU_SOURCE
#include "pskv.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "member.h"
#include "wpump.h"
#include "wstate.h"

int pskv_stop_requested(const pskv_worker *w, char *why, size_t why_len)
{
    if (!w->stop_early)
        return 0;
    if (why && why_len)
        snprintf(why, why_len, "%s", w->stop_reason);
    return 1;
}

static int active(const pskv_worker *w)
{
    const Pskv__View *v = w->mb.view;
    int live = 0;
    for (size_t i = 0; v && i < v->n_nodes; i++) {
        const Pskv__Node *n = v->nodes[i];
        if (n->role == PSKV__ROLE__WORKER && n->state && strcmp(n->state, "finished") &&
            strcmp(n->state, "dead"))
            live++;
    }
    return live;
}

int pskv_workers_active(pskv_worker *w)
{
    wpump(w, 0);
    return active(w);
}

int pskv_rank_gone(pskv_worker *w)
{
    wpump(w, 0);
    const Pskv__View *v = w->mb.view;
    int gone = -1;
    for (int r = 0; v && r < pskv_num_workers(w); r++) {
        int held = 0, died = 0; /* a taken-over rank is listed twice: the dead node, its heir */
        for (size_t i = 0; i < v->n_nodes && !held; i++) {
            const Pskv__Node *n = v->nodes[i];
            if (n->role != PSKV__ROLE__WORKER || n->rank != r || !n->state)
                continue;
            died |= !strcmp(n->state, "dead");
            held = strcmp(n->state, "finished") && strcmp(n->state, "dead") &&
                   strcmp(n->state, "left");
        }
        if (!held && died)
            return r;
        if (!held && gone < 0)
            gone = r;
    }
    return gone;
}

int pskv_job_ending(const pskv_worker *w)
{
    return w->job_stopping || w->stop_early || (w->mb.view && active(w) == 0);
}

/* 1 when the servers' clock slot s is a worker's of this evaluator's view: in a
 * service the view holds its group's workers only, each with its slot as rank. */
static int slot_in_view(const Pskv__View *v, int64_t s)
{
    for (size_t i = 0; i < v->n_nodes; i++)
        if (v->nodes[i]->role == PSKV__ROLE__WORKER && v->nodes[i]->rank == s)
            return 1;
    return 0;
}

int pskv_values_clocks(const pskv_worker *w, int64_t *lo, int64_t *hi, int64_t *vc, int max)
{
    if (lo)
        *lo = w->values_clock;
    if (hi)
        *hi = w->values_clock_hi;
    const Pskv__View *v = w->mb.view;
    if (w->evaluator && v && v->service) { /* the servers' vector spans every group */
        int n = 0;
        for (int s = 0; s < w->nwclocks && n < max; s++)
            if (slot_in_view(v, s) && vc)
                vc[n++] = w->wclocks[s];
        return n;
    }
    int n = w->nwclocks < max ? w->nwclocks : max;
    if (vc && n > 0)
        memcpy(vc, w->wclocks, (size_t)n * sizeof *vc);
    return n > 0 ? n : 0;
}

const char *pskv_early_stop_metric(const pskv_worker *w)
{
    const Pskv__View *v = w->mb.view;
    return v && v->early_stop_metric ? v->early_stop_metric : "";
}

int pskv_report_eval(pskv_worker *w, int64_t clock, double epoch, double val_loss,
                     double val_accuracy, double val_auc)
{
    Pskv__Meta m;
    member_meta(&w->mb, &m, PSKV__MSG_TYPE__EVAL_REPORT);
    m.has_clock = m.has_eval_epoch = m.has_val_loss = m.has_val_accuracy = 1;
    m.clock = clock;
    m.eval_epoch = epoch;
    m.val_loss = val_loss;
    m.val_accuracy = val_accuracy;
    if (!isnan(val_auc)) {
        m.has_val_auc = 1;
        m.val_auc = val_auc;
    }
    return member_send(&w->mb, &m);
}
