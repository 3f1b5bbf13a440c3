/* A group's resume in a service (grpresume.h). */
#define _GNU_SOURCE
#include "grpresume.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "events.h"
#include "log.h"
#include "pskv_errors.h"
#include "sched_net.h"
#include "timeutil.h"
#include "view.h"

#define GRPRESUME_WAIT_MS 60000

typedef struct gres {
    uint32_t gen;                   /* the group instance resuming */
    char group[GROUP_NAME_MAX + 1], ns[GROUP_NAME_MAX + 1];
    uint64_t seq, job;              /* the checkpoint */
    uint32_t partitions, replicas;
    uint32_t *chains;               /* its chains (partitions x replicas) */
    manifest_progress *workers;     /* the progress it recorded for this group */
    size_t nworkers;
    int sent, done;                 /* NS_RESTORE sent; every server answered */
    uint32_t *wait;                 /* servers not answered yet */
    int nwait;
    int64_t deadline_ms;
    uint64_t rows;                  /* rows loaded, summed over the servers */
} gres;

static gres *R[GROUP_MAX];
static int nr;

static gres *of_gen(uint32_t gen)
{
    for (int i = 0; i < nr; i++)
        if (R[i]->gen == gen)
            return R[i];
    return NULL;
}

static void forget(gres *x)
{
    for (int i = 0; i < nr; i++)
        if (R[i] == x) {
            R[i] = R[--nr];
            break;
        }
    free(x->chains);
    free(x->workers);
    free(x->wait);
    free(x);
}

int grpresume_prepare(const char *group, uint32_t gen, const char *ns, char *why, size_t whylen)
{
    char users[200];
    if (group_users(ns, users, sizeof users) > 0) {
        snprintf(why, whylen, "namespace '%s' is in use by live group %s: a resume would replace "
                 "its values", ns, users);
        return -1;
    }
    const manifest_entry *e = ckpt_newest_holding(ns, why, whylen);
    if (!e)
        return -1;
    gres *x = calloc(1, sizeof *x);
    size_t cells = (size_t)e->partitions * e->replicas;
    if (x) {
        x->chains = malloc(cells * sizeof *x->chains);
        x->workers = calloc(e->nworkers + 1, sizeof *x->workers);
        x->wait = calloc(VIEW_MAX_SERVERS, sizeof *x->wait);
    }
    if (!x || !x->chains || !x->workers || !x->wait || nr == GROUP_MAX) {
        if (x)
            forget(x);
        snprintf(why, whylen, "scheduler out of memory");
        return -1;
    }
    x->gen = gen;
    snprintf(x->group, sizeof x->group, "%s", group);
    snprintf(x->ns, sizeof x->ns, "%s", ns);
    x->seq = e->seq;
    x->job = e->job;
    x->partitions = e->partitions;
    x->replicas = e->replicas;
    memcpy(x->chains, e->chains, cells * sizeof *x->chains);
    /* a namespace's checkpoint recorded the group that used it (whatever its name);
     * one of every table, each group by its name */
    for (size_t k = 0; k < e->nworkers; k++)
        if (e->ns_only || !strcmp(e->workers[k].group, group))
            x->workers[x->nworkers++] = e->workers[k];
    R[nr++] = x;
    LOG_I("group %s: resumes namespace '%s' from checkpoint %llu (%s, %zu workers' progress) "
          "once its workers registered", *group ? group : "(unnamed)", ns,
          (unsigned long long)x->seq, e->ns_only ? "of that namespace" : "of every table",
          x->nworkers);
    return 0;
}

/* The resume of x failed: every worker of its group is told why, and the group goes. */
static void fail(gres *x, const char *why)
{
    char line[900];
    snprintf(line, sizeof line, "group %s: the resume of namespace '%s' from checkpoint %llu "
             "failed: %s", *x->group ? x->group : "(unnamed)", x->ns, (unsigned long long)x->seq,
             why);
    LOG_E("%s", line);
    sched_group *g = NULL;
    for (int i = 0; i < memb.nnodes && !g; i++)
        if (memb.nodes[i].role == PSKV__ROLE__WORKER && memb.nodes[i].group_gen == x->gen)
            g = group_of(&memb.nodes[i]);
    forget(x);
    if (g)
        group_fail(g, line);
}

static void send_restore(gres *x)
{
    Pskv__Meta m;
    sched_meta(&m, PSKV__MSG_TYPE__NS_RESTORE);
    m.has_seq = m.has_ckpt_job = m.has_ckpt_replicas = 1;
    m.seq = x->seq;
    m.ckpt_job = x->job;
    m.ckpt_ns = x->ns;
    m.ckpt_replicas = x->replicas;
    m.n_ckpt_chains = (size_t)x->partitions * x->replicas;
    m.ckpt_chains = x->chains;
    x->nwait = 0;
    for (int i = 0; i < memb.nnodes; i++) {
        memb_node *n = &memb.nodes[i];
        if (n->role == PSKV__ROLE__SERVER && !n->dead && n->state != NODE_FINISHED &&
            x->nwait < VIEW_MAX_SERVERS) {
            x->wait[x->nwait++] = n->id;
            sched_send(n, &m);
        }
    }
    x->sent = 1;
    x->deadline_ms = tu_now_ms() + GRPRESUME_WAIT_MS;
    LOG_I("group %s: namespace '%s' being loaded from checkpoint %llu on %d servers",
          *x->group ? x->group : "(unnamed)", x->ns, (unsigned long long)x->seq, x->nwait);
}

int grpresume_ready(const sched_group *g)
{
    gres *x = of_gen(g->gen);
    if (!x || x->done)
        return 1;
    if (!x->sent)
        send_restore(x);
    return 0;
}

/* The server of r answered x: x is done when it was the last. */
static void answered(gres *x, uint32_t server)
{
    for (int k = 0; k < x->nwait; k++)
        if (x->wait[k] == server)
            x->wait[k--] = x->wait[--x->nwait];
    if (x->nwait || x->done)
        return;
    x->done = 1;
    LOG_I("group %s: namespace '%s' resumed from checkpoint %llu: %llu rows loaded; the group "
          "starts", *x->group ? x->group : "(unnamed)", x->ns, (unsigned long long)x->seq,
          (unsigned long long)x->rows);
    group_start_ready(1);
}

/* The resume in progress an answer of the server of r is for, or NULL. */
static gres *answering(const Pskv__Meta *r)
{
    for (int i = 0; r->has_sender && r->ckpt_ns && i < nr; i++)
        if (R[i]->sent && !R[i]->done && R[i]->seq == r->seq && !strcmp(R[i]->ns, r->ckpt_ns))
            return R[i];
    return NULL;
}

void grpresume_on_ack(wire_msg *msg)
{
    gres *x = answering(msg->meta);
    if (!x)
        return; /* a late answer to a resume that failed */
    x->rows += msg->meta->rows;
    answered(x, msg->meta->sender);
}

int grpresume_on_error(const Pskv__Meta *r)
{
    gres *x = answering(r);
    if (!x)
        return 0;
    char why[700];
    snprintf(why, sizeof why, "server node %u: %s", r->sender,
             r->error ? r->error : pskv_strerror(r->error_code));
    fail(x, why);
    return 1;
}

void grpresume_tick(int64_t now)
{
    for (int i = 0; i < nr; i++) {
        gres *x = R[i];
        if (!x->sent || x->done || now < x->deadline_ms)
            continue;
        char why[200];
        snprintf(why, sizeof why, "server node %u did not answer within %d s", x->wait[0],
                 GRPRESUME_WAIT_MS / 1000);
        fail(x, why);
        i--;
    }
}

/* A server died: a resume under way cannot count on its partitions (they move to
 * servers that may have loaded before they held them). */
static int on_died(void *ctx, const sched_ev *ev)
{
    (void)ctx;
    if (!ev->node || ev->node->role != PSKV__ROLE__SERVER)
        return 0;
    for (int i = 0; i < nr; i++)
        if (R[i]->sent && !R[i]->done) {
            char why[120];
            snprintf(why, sizeof why, "server node %u died while it loaded", ev->node->id);
            fail(R[i], why);
            i--;
        }
    return 0;
}

/* A group ended: its resume is over. */
static int on_group_ended(void *ctx, const sched_ev *ev)
{
    (void)ctx;
    for (int i = 0; ev->group && i < nr; i++)
        if (!strcmp(R[i]->group, ev->group) && !group_find(ev->group)) {
            forget(R[i]);
            i--;
        }
    return 0;
}

/* A resumed group's worker continues where the checkpoint left its rank. */
static void fill_node(void *ctx, Pskv__Node *p, const memb_node *n, int status)
{
    (void)ctx;
    (void)status;
    const gres *x = n->role == PSKV__ROLE__WORKER ? of_gen(n->group_gen) : NULL;
    if (x && x->done) /* its checkpoint's progress, not a resumed service's */
        p->has_resume_epoch = p->has_resume_step = p->has_resume_pos = 0;
    for (size_t k = 0; x && x->done && k < x->nworkers; k++) {
        if (x->workers[k].rank != n->rank)
            continue;
        p->has_resume_epoch = p->has_resume_step = p->has_resume_pos = 1;
        p->resume_epoch = x->workers[k].epoch;
        p->resume_step = x->workers[k].step;
        p->resume_pos = x->workers[k].pos;
    }
}

void grpresume_hooks(void)
{
    events_subscribe(SCHED_EV_DIED, on_died, NULL);
    events_subscribe(SCHED_EV_GROUP_ENDED, on_group_ended, NULL);
    view_add_filler(NULL, fill_node, NULL);
}

void grpresume_reset(void)
{
    while (nr)
        forget(R[0]);
}
