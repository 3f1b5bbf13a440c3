/* Worker groups: ranks, barriers and the life of each group (group.h). */
#define _GNU_SOURCE
#include "group.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"
#include "grpresume.h"
#include "log.h"
#include "metrics.h"
#include "pskv_errors.h"
#include "sched_net.h"
#include "timeutil.h"
#include "view.h"

static sched_group groups[GROUP_MAX];
static int ngroups;     /* groups[0..ngroups) live, in creation order */
static uint32_t gens;   /* the last generation given: 0 is no group */

/* "group NAME: " before a refusal or a log line of a named group; "" for the
 * unnamed group, whose lines read as a job's always did. */
static const char *prefix(const sched_group *g, char *buf, size_t len)
{
    if (!*g->name)
        return "";
    snprintf(buf, len, "group %.64s: ", g->name);
    return buf;
}

sched_group *group_find(const char *name)
{
    for (int i = 0; i < ngroups; i++)
        if (!strcmp(groups[i].name, name))
            return &groups[i];
    return NULL;
}

sched_group *group_of(const memb_node *n)
{
    if (n->role != PSKV__ROLE__WORKER || !n->group_gen)
        return NULL;
    for (int i = 0; i < ngroups; i++)
        if (groups[i].gen == n->group_gen)
            return &groups[i];
    return NULL;
}

static int member_of(const memb_node *n, const sched_group *g)
{
    return n->role == PSKV__ROLE__WORKER && n->group_gen == g->gen;
}

int group_counts(const memb_node *n)
{
    return n->role == PSKV__ROLE__WORKER && n->state != NODE_FINISHED && !n->dead;
}

uint64_t group_barriers(const memb_node *n)
{
    const sched_group *g = group_of(n);
    return g ? g->barrier_done : 0;
}

/* A new group of `size` workers; NULL when the table is full. */
static sched_group *create(const char *name, int size)
{
    if (ngroups == GROUP_MAX)
        return NULL;
    sched_group *g = &groups[ngroups++];
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", name);
    g->gen = ++gens;
    g->size = g->declared = size;
    g->state = GROUP_WAITING;
    return g;
}

static void drop(sched_group *g)
{
    int i = (int)(g - groups);
    memmove(&groups[i], &groups[i + 1], (size_t)(ngroups - i - 1) * sizeof *g);
    ngroups--;
}

static int registered(const sched_group *g)
{
    int c = 0;
    for (int i = 0; i < memb.nnodes; i++)
        c += member_of(&memb.nodes[i], g) && !memb.nodes[i].replaced;
    return c;
}

/* ---- registration ------------------------------------------------------------ */

/* The servers' rank (clock slot) of a new worker of rank `rank`: in a job its
 * rank; in a service the lowest slot no worker still in the views holds, so that
 * two groups' workers never share a clock on the servers (a slot an ended group
 * left starts again from 0 there, as a rank taken over does). */
static int new_slot(int rank)
{
    if (!memb.service)
        return rank;
    for (int s = 0;; s++) {
        int held = 0;
        for (int i = 0; i < memb.nnodes && !held; i++)
            held = memb.nodes[i].role == PSKV__ROLE__WORKER && !memb.nodes[i].gone_ms &&
                   memb.nodes[i].slot == s;
        if (!held)
            return s;
    }
}

/* The group a worker's REGISTER names, created when it is the first of it. NULL
 * after refusing msg. */
static sched_group *group_for(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    const char *name = r->group ? r->group : "";
    uint32_t size = r->has_group_size ? r->group_size : 0;
    char why[500];
    if (strlen(name) > GROUP_NAME_MAX || strchr(name, '/')) {
        snprintf(why, sizeof why, "group '%.80s%s': field group: a group's name is 1..%d bytes "
                 "without '/'", name, strlen(name) > 80 ? "..." : "", GROUP_NAME_MAX);
        sched_refuse(msg, PSKV_EREFUSED, why);
        return NULL;
    }
    const char *ns = r->table_ns ? r->table_ns : name;
    if (strlen(ns) > GROUP_NAME_MAX || strchr(ns, '/')) {
        snprintf(why, sizeof why, "group %s: field table_ns: namespace '%.80s' is not 1..%d "
                 "bytes without '/'", *name ? name : "(unnamed)", ns, GROUP_NAME_MAX);
        sched_refuse(msg, PSKV_EREFUSED, why);
        return NULL;
    }
    if (*name && !memb.service) {
        snprintf(why, sizeof why, "group %s: field group: this scheduler runs one job of "
                 "--workers workers; groups need a service (pskv-scheduler --service)", name);
        sched_refuse(msg, PSKV_EREFUSED, why);
        return NULL;
    }
    if (size > 65536) {
        snprintf(why, sizeof why, "group %s: field group_size: %u is out of range 1..65536",
                 *name ? name : "(unnamed)", size);
        sched_refuse(msg, PSKV_EREFUSED, why);
        return NULL;
    }
    sched_group *g = group_find(name);
    int resume = r->has_resume && r->resume;
    if (resume && !memb.service) {
        snprintf(why, sizeof why, "group %s: field resume: a job resumes with pskv-scheduler "
                 "--resume, not its workers", *name ? name : "(unnamed)");
        sched_refuse(msg, PSKV_EREFUSED, why);
        return NULL;
    }
    if (g && g->state == GROUP_WAITING && resume != g->resume) {
        snprintf(why, sizeof why, "group %s: field resume: %s differs from its workers' (%s)",
                 *name ? name : "(unnamed)", resume ? "--resume" : "no --resume",
                 g->resume ? "--resume" : "no --resume");
        sched_refuse(msg, PSKV_EREFUSED, why);
        return NULL;
    }
    if (g && g->state != GROUP_WAITING && resume) {
        snprintf(why, sizeof why, "group %s: field resume: the group runs already; a worker "
                 "joining it takes its values as they are", *name ? name : "(unnamed)");
        sched_refuse(msg, PSKV_EREFUSED, why);
        return NULL;
    }
    if (g && size && (int)size != g->declared) {
        snprintf(why, sizeof why, "group %s: field group_size: %u differs from its workers' (%d)",
                 *name ? name : "(unnamed)", size, g->declared);
        sched_refuse(msg, PSKV_EREFUSED, why);
        return NULL;
    }
    if (g)
        return g;
    /* a job's unnamed group is --workers; a service's takes the first worker's size */
    if (!memb.service || !size)
        size = (uint32_t)memb.nworkers;
    if (*name && !(r->has_group_size && r->group_size)) {
        snprintf(why, sizeof why, "group %s: field group_size: a group's workers give its size "
                 "(--group-size W)", name);
        sched_refuse(msg, PSKV_EREFUSED, why);
        return NULL;
    }
    char rwhy[300];
    if (ngroups == GROUP_MAX) {
        snprintf(why, sizeof why, "group %s: the service holds %d groups already",
                 *name ? name : "(unnamed)", GROUP_MAX);
        sched_refuse(msg, PSKV_EREFUSED, why);
        return NULL;
    }
    if (resume && grpresume_prepare(name, gens + 1, ns, rwhy, sizeof rwhy) < 0) {
        snprintf(why, sizeof why, "group %s: field resume: %s", *name ? name : "(unnamed)", rwhy);
        sched_refuse(msg, PSKV_EREFUSED, why);
        return NULL;
    }
    g = create(name, (int)size); /* there is room: checked above */
    g->resume = resume;
    return g;
}

/* The rank a worker registering in waiting group g gets: the one it wishes (when
 * free) or the lowest free one. Returns -1 after refusing msg. */
static int waiting_rank(wire_msg *msg, const sched_group *g)
{
    Pskv__Meta *r = msg->meta;
    char why[400], p[GROUP_NAME_MAX + 16];
    int rank = -1;
    int want = r->has_rank ? r->rank : -1;
    if (want >= g->size) {
        snprintf(why, sizeof why, "%srank %d out of range 0..%d", prefix(g, p, sizeof p), want,
                 g->size - 1);
        sched_refuse(msg, PSKV_EREFUSED, why);
        return -1;
    }
    for (int cand = want >= 0 ? want : 0; cand < g->size && rank < 0; cand++) {
        int taken = 0;
        for (int i = 0; i < memb.nnodes; i++)
            if (member_of(&memb.nodes[i], g) && memb.nodes[i].rank == cand)
                taken = (int)memb.nodes[i].id;
        if (!taken) {
            rank = cand;
        } else if (want >= 0) {
            snprintf(why, sizeof why, "%srank %d is taken by node %d", prefix(g, p, sizeof p),
                     want, taken);
            sched_refuse(msg, PSKV_EREFUSED, why);
            return -1;
        }
    }
    if (rank < 0) {
        snprintf(why, sizeof why, "%s%s full: %d workers already registered",
                 prefix(g, p, sizeof p), *g->name ? "group" : "cluster", g->size);
        sched_refuse(msg, PSKV_EREFUSED, why);
    }
    return rank;
}

/* The rank a worker registering in running group g gets: a dead worker's it
 * wishes (*replaced set) or the next one. Returns -1 after refusing msg. */
static int running_rank(wire_msg *msg, const sched_group *g, int *replaced)
{
    Pskv__Meta *r = msg->meta;
    char why[400], p[GROUP_NAME_MAX + 16];
    *replaced = 0;
    if (g->state == GROUP_STOPPING) {
        snprintf(why, sizeof why, "group %s is being stopped (%s); no worker can join it",
                 g->name, g->stopped_by);
        sched_refuse(msg, PSKV_EREFUSED, why);
        return -1;
    }
    for (int i = 0; r->has_rank && r->rank >= 0 && i < memb.nnodes; i++) {
        memb_node *o = &memb.nodes[i];
        if (!member_of(o, g) || o->rank != r->rank || o->replaced)
            continue;
        if (!o->dead) {
            snprintf(why, sizeof why, "%srank %d is held by live node %u (%s)",
                     prefix(g, p, sizeof p), r->rank, o->id, memb_state_name(o));
            sched_refuse(msg, PSKV_EREFUSED, why);
            return -1;
        }
        *replaced = 1;
        return r->rank;
    }
    if (r->has_rank && r->rank >= 0 && r->rank != g->size) {
        snprintf(why, sizeof why, "%srank %d is not free: a worker joining the running job "
                 "takes the next rank (%d) or a dead worker's", prefix(g, p, sizeof p), r->rank,
                 g->size);
        sched_refuse(msg, PSKV_EREFUSED, why);
        return -1;
    }
    if (g->size >= 65536) {
        sched_refuse(msg, PSKV_EREFUSED, "cluster full: 65536 workers");
        return -1;
    }
    return g->size;
}

/* New worker n is of group g: its group, and the namespace its REGISTER names
 * (table_ns; else the group's name, as libpskv opens it) and whether to drop it at
 * the group's end. */
static void note_member(memb_node *n, const sched_group *g, const Pskv__Meta *r)
{
    snprintf(n->group, sizeof n->group, "%s", g->name);
    n->group_gen = g->gen;
    snprintf(n->table_ns, sizeof n->table_ns, "%s", r->table_ns ? r->table_ns : g->name);
    n->drop_ns = r->has_drop_namespace && r->drop_namespace;
    if (n->drop_ns && !memb.service)
        LOG_I("worker node %u asks to drop namespace '%s' at its group's end: a job's servers "
              "stop with it, nothing to drop", n->id, n->table_ns);
}

/* Group g is complete and the servers are in: its workers take the view. */
static void start(sched_group *g)
{
    char p[GROUP_NAME_MAX + 16];
    g->state = GROUP_RUNNING;
    g->started_ms = tu_now_ms();
    for (int i = 0; i < memb.nnodes; i++)
        if (member_of(&memb.nodes[i], g) && memb.nodes[i].state == NODE_JOINED)
            memb.nodes[i].state = NODE_ACTIVE;
    if (*g->name)
        LOG_I("%sstarted: %d workers", prefix(g, p, sizeof p), g->size);
}

void group_start_ready(int publish)
{
    int started = 0;
    for (int i = 0; i < ngroups; i++)
        if (groups[i].state == GROUP_WAITING && registered(&groups[i]) >= groups[i].size &&
            grpresume_ready(&groups[i])) {
            start(&groups[i]);
            started = 1;
        }
    if (started && publish)
        view_send();
}

/* The node of msg takes `rank` of running group g: a dead worker's (replaced), or
 * the next one (the group grows by one). */
static void join_running(wire_msg *msg, sched_group *g, int rank, int replaced)
{
    int slot = replaced ? -1 : new_slot(rank);
    memb_node *n = memb_add_node(msg, rank);
    if (!n)
        return;
    note_member(n, g, msg->meta);
    for (int i = 0; replaced && i < memb.nnodes - 1; i++) {
        memb_node *o = &memb.nodes[i];
        if (member_of(o, g) && o->rank == rank && o->dead && !o->replaced) {
            o->replaced = 1;
            o->gone_ms = tu_now_ms();
            slot = o->slot; /* the dead worker's clock on the servers is taken over */
        }
    }
    n->slot = slot >= 0 ? slot : new_slot(rank);
    n->state = NODE_ACTIVE;
    n->barrier = g->barrier_done; /* it starts after the barriers already passed */
    char p[GROUP_NAME_MAX + 16];
    if (replaced) {
        LOG_I("%sworker rank %d rejoined as node %u at %s pid %u", prefix(g, p, sizeof p), rank,
              n->id, n->host, n->pid);
    } else {
        g->size++;
        if (!memb.service)
            memb.nworkers = g->size; /* the job's workers */
        LOG_I("%sworker node %u joined the running job as rank %d at %s pid %u (%d workers)",
              prefix(g, p, sizeof p), n->id, n->rank, n->host, n->pid, g->size);
    }
    memb_ack_register(n);
    events_node(SCHED_EV_JOINED, n);
    view_send(); /* in the clock set, at the slowest live worker's clock */
}

void group_on_register(wire_msg *msg)
{
    sched_group *g = group_for(msg);
    if (!g)
        return;
    if (g->state != GROUP_WAITING) {
        int replaced, rank = running_rank(msg, g, &replaced);
        if (rank >= 0)
            join_running(msg, g, rank, replaced);
        return;
    }
    int rank = waiting_rank(msg, g);
    if (rank < 0)
        return;
    int slot = new_slot(rank);
    memb_node *n = memb_add_node(msg, rank);
    if (!n)
        return;
    n->slot = slot;
    note_member(n, g, msg->meta);
    char p[GROUP_NAME_MAX + 16];
    LOG_I("%sworker registered: node %u rank %d at %s:%d pid %u (%d/%d servers, %d/%d workers)",
          prefix(g, p, sizeof p), n->id, n->rank, n->host, n->port, n->pid,
          memb_count_role(PSKV__ROLE__SERVER), memb.nservers, registered(g), g->size);
    memb_ack_register(n);
    events_node(SCHED_EV_JOINED, n);
    if (memb.state == JOB_RUNNING)
        group_start_ready(1);
    else
        memb_check_complete();
}

/* ---- barriers, the end, stop ----------------------------------------------------- */

/* Releases the barriers every counting worker of g has reached. */
static void check_barriers(sched_group *g)
{
    for (;;) {
        uint64_t next = g->barrier_done + 1;
        int waiting = 0, all = 1;
        for (int i = 0; i < memb.nnodes; i++) {
            memb_node *n = &memb.nodes[i];
            if (!member_of(n, g) || !group_counts(n))
                continue;
            if (n->barrier >= next)
                waiting++;
            else
                all = 0;
        }
        if (!all || waiting == 0)
            return;
        g->barrier_done = next;
        Pskv__Meta m;
        sched_meta(&m, PSKV__MSG_TYPE__BARRIER_DONE);
        m.has_seq = 1;
        m.seq = next;
        for (int i = 0; i < memb.nnodes; i++)
            if (member_of(&memb.nodes[i], g) && memb.nodes[i].barrier >= next)
                sched_send(&memb.nodes[i], &m);
        LOG_D("barrier %llu released (%d workers)", (unsigned long long)next, waiting);
    }
}

/* No worker of running group g counts any more: a job stops its servers; a
 * service drops the group, its workers forgotten MEMB_FORGET_MS later. */
static void end(sched_group *g)
{
    if (!memb.service) {
        memb_begin_stop("every worker is done; stopping the servers");
        return;
    }
    int64_t now = tu_now_ms();
    int finished = 0, dead = 0;
    for (int i = 0; i < memb.nnodes; i++) {
        memb_node *n = &memb.nodes[i];
        if (!member_of(n, g))
            continue;
        finished += n->state == NODE_FINISHED;
        dead += n->dead && !n->replaced;
        if (!n->gone_ms)
            n->gone_ms = now;
    }
    metrics_set(g->met, 0);
    metrics_set(g->met_clock, 0);
    LOG_I("group %s ended after %.1f s: %d workers finished, %d dead%s%s; the service goes on",
          *g->name ? g->name : "(unnamed)", (double)(now - g->started_ms) / 1e3, finished,
          dead, *g->stopped_by ? "; " : "", g->stopped_by);
    char name[GROUP_NAME_MAX + 1], ns[GROUP_NAME_MAX + 1] = "";
    snprintf(name, sizeof name, "%s", g->name);
    int asked = 0; /* --drop-namespace: its namespace goes too */
    for (int i = 0; i < memb.nnodes; i++)
        if (member_of(&memb.nodes[i], g) && memb.nodes[i].drop_ns && !asked++)
            snprintf(ns, sizeof ns, "%s", memb.nodes[i].table_ns);
    drop(g);
    sched_ev ev = {.kind = SCHED_EV_GROUP_ENDED, .group = name, .ns = asked ? ns : NULL};
    events_publish(&ev); /* nsdrop.c: the namespace its workers asked to drop */
}

void group_fail(sched_group *g, const char *why)
{
    Pskv__Meta m;
    sched_meta(&m, PSKV__MSG_TYPE__ERROR);
    m.has_error_code = m.has_resume = m.resume = 1;
    m.error_code = PSKV_EREFUSED;
    m.error = (char *)why;
    int64_t now = tu_now_ms();
    for (int i = 0; i < memb.nnodes; i++) {
        memb_node *n = &memb.nodes[i];
        if (!member_of(n, g))
            continue;
        sched_send(n, &m);
        n->state = NODE_FINISHED;
        n->group_gen = 0; /* out of every group: forgotten later */
        if (!n->gone_ms)
            n->gone_ms = now;
    }
    drop(g);
}

void group_changed(memb_node *n)
{
    sched_group *g = group_of(n);
    if (!g)
        return;
    check_barriers(g);
    if (g->state == GROUP_WAITING || (!memb.service && memb.state != JOB_RUNNING))
        return;
    for (int i = 0; i < memb.nnodes; i++)
        if (member_of(&memb.nodes[i], g) && group_counts(&memb.nodes[i]))
            return;
    end(g);
}

void group_on_stop(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    const char *name = r->group ? r->group : "";
    sched_group *g = group_find(name);
    char why[300];
    if (!g || g->state == GROUP_WAITING) {
        snprintf(why, sizeof why, "group %s: %s", *name ? name : "(unnamed)",
                 g ? "not running yet (its workers are still registering)"
                   : "no such group (pskvctl status lists them)");
        sched_refuse(msg, PSKV_EREFUSED, why);
        return;
    }
    if (g->state != GROUP_STOPPING) {
        g->state = GROUP_STOPPING;
        snprintf(g->stopped_by, sizeof g->stopped_by, "group %s stopped by pskvctl stop from %s%s%.12s",
                 *name ? name : "(unnamed)", msg->peer, *msg->key ? " key " : "", msg->key);
        LOG_I("%s", g->stopped_by);
        view_send(); /* its workers stop at their next clock, as early stopping */
    }
    int told = 0;
    for (int i = 0; i < memb.nnodes; i++)
        told += member_of(&memb.nodes[i], g) && group_counts(&memb.nodes[i]);
    Pskv__Meta a;
    sched_meta(&a, PSKV__MSG_TYPE__GROUP_STOP_ACK);
    a.has_request_id = r->has_request_id;
    a.request_id = r->request_id;
    a.has_group_size = 1;
    a.group_size = (uint32_t)told;
    sched_reply(&msg->rid, &a);
}

void group_stop_early(sched_group *g, const char *why)
{
    if (!g || g->state != GROUP_RUNNING)
        return;
    g->state = GROUP_STOPPING;
    snprintf(g->stopped_by, sizeof g->stopped_by, "%s", why);
    view_send(); /* its workers stop at their next clock */
}

/* ---- the view each group sees, and status ---------------------------------------- */

/* The group a service's evaluator evaluates (by name: it may register before its
 * group's first worker), or NULL. */
static const sched_group *evaluated(const memb_node *n)
{
    return memb.service && n->role == PSKV__ROLE__EVALUATOR ? group_find(n->group) : NULL;
}

int group_in_view(const memb_node *n)
{
    if (n->role == PSKV__ROLE__EVALUATOR && memb.service) {
        const sched_group *g = evaluated(n); /* its view waits for its group */
        return g && g->state != GROUP_WAITING;
    }
    if (n->role != PSKV__ROLE__WORKER)
        return 1;
    return n->state != NODE_JOINED && (!memb.service || group_of(n));
}

size_t group_view_for(const memb_node *n, Pskv__View *v, Pskv__Node **ptrs, size_t n_nodes)
{
    const sched_group *g = n->role == PSKV__ROLE__WORKER ? group_of(n) : evaluated(n);
    size_t kept = 0;
    for (size_t i = 0; i < n_nodes; i++) {
        const Pskv__Node *p = ptrs[i];
        if ((p->role == PSKV__ROLE__WORKER || p->role == PSKV__ROLE__EVALUATOR) &&
            strcmp(p->group ? p->group : "", n->group))
            continue;
        ptrs[kept++] = ptrs[i];
    }
    if (g) {
        v->workers = (uint32_t)g->size;
        if (g->state == GROUP_STOPPING) {
            v->has_stop_early = v->stop_early = 1;
            v->stop_reason = (char *)g->stopped_by;
        }
    }
    return kept;
}

static Pskv__GroupStatus gs[GROUP_MAX];
static Pskv__GroupStatus *gsp[GROUP_MAX];

static void fill_groups(void *ctx, Pskv__View *v, int status)
{
    (void)ctx;
    v->has_service = memb.service;
    v->service = memb.service;
    if (!status)
        return;
    static const char *const names[] = {"waiting", "running", "stopping"};
    for (int i = 0; i < ngroups; i++) {
        sched_group *g = &groups[i];
        Pskv__GroupStatus *s = &gs[i];
        pskv__group_status__init(s);
        s->name = g->name;
        s->has_size = s->has_registered = s->has_barrier = s->has_clock = 1;
        s->size = (uint32_t)g->size;
        s->registered = (uint32_t)registered(g);
        s->state = (char *)names[g->state];
        s->barrier = g->barrier_done;
        s->clock = -1;
        for (int k = 0; k < memb.nnodes; k++)
            if (member_of(&memb.nodes[k], g) && group_counts(&memb.nodes[k]) &&
                (s->clock < 0 || memb.nodes[k].clock < s->clock))
                s->clock = memb.nodes[k].clock;
        s->has_clock = s->clock >= 0;
        if (*g->stopped_by)
            s->stopped_by = g->stopped_by;
        gsp[i] = s;
    }
    v->n_groups = (size_t)ngroups;
    v->groups = gsp;
}

void group_hooks(void) { view_add_filler(fill_groups, NULL, NULL); }

/* 1 when a counting worker of g names namespace ns: registered in it, or opened a
 * table of it (its heartbeats' traffic: full names NS/NAME, or NAME in ""). */
static int uses(const sched_group *g, const char *ns)
{
    size_t len = strlen(ns);
    for (int i = 0; i < memb.nnodes; i++) {
        const memb_node *n = &memb.nodes[i];
        if (!member_of(n, g) || !group_counts(n))
            continue;
        if (!strcmp(n->table_ns, ns))
            return 1;
        for (size_t k = 0; n->traffic && k < n->traffic->n; k++) {
            const char *t = n->traffic->names[k], *slash = strchr(t, '/');
            if (len ? slash && (size_t)(slash - t) == len && !memcmp(t, ns, len) : !slash)
                return 1;
        }
    }
    return 0;
}

int group_users(const char *ns, char *names, size_t len)
{
    int c = 0;
    size_t at = 0;
    names[0] = '\0';
    for (int i = 0; i < ngroups; i++) {
        const sched_group *g = &groups[i];
        if (strcmp(g->name, ns) && !uses(g, ns))
            continue;
        if (at < len)
            at += (size_t)snprintf(names + at, len - at, "%s%s", c ? ", " : "",
                                   *g->name ? g->name : "(unnamed)");
        c++;
    }
    return c;
}

/* The live (counting) workers of g; in *slowest the smallest clock among them (-1:
 * none live). */
static int live_of(const sched_group *g, int64_t *slowest)
{
    int live = 0;
    *slowest = -1;
    for (int k = 0; k < memb.nnodes; k++) {
        const memb_node *n = &memb.nodes[k];
        if (!member_of(n, g) || !group_counts(n))
            continue;
        live++;
        if (*slowest < 0 || n->clock < *slowest)
            *slowest = n->clock;
    }
    return live;
}

int64_t group_slowest(const memb_node *n)
{
    const sched_group *g = group_of(n);
    int64_t lo = -1;
    if (g)
        live_of(g, &lo);
    return lo < 0 ? n->clock : lo;
}

void group_metrics(void)
{
    for (int i = 0; memb.service && i < ngroups; i++) {
        sched_group *g = &groups[i];
        if (!g->met) { /* once per group: the registry search is linear */
            g->met = metrics_series("pskv_group_workers", MET_GAUGE,
                                    "Live workers of this worker group of the service.",
                                    "group", g->name);
            g->met_clock = metrics_series("pskv_group_clock", MET_GAUGE,
                                          "The slowest live worker's clock in this group.",
                                          "group", g->name);
        }
        int64_t slowest;
        int live = live_of(g, &slowest);
        metrics_set(g->met, live);
        metrics_set(g->met_clock, slowest < 0 ? 0 : (double)slowest);
    }
}

void group_reset(void)
{
    ngroups = 0;
    gens = 0;
}
