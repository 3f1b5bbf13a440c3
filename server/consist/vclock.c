/* The range vector clock (vclock.h). Ranks only grow, so a worker that left keeps
 * its slot and a late CLOCK of it changes nothing the set reads. */
#define _GNU_SOURCE
#include "vclock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pskv_errors.h"

typedef struct source { /* a head whose pushes reach this replica through a chain */
    uint32_t head;
    int active;           /* heads of partitions this server holds as a replica */
    int64_t *vc;          /* per rank: clocks whose pushes that head has forwarded */
} source;

struct vclock {
    int nranks;
    int64_t *vc;          /* per rank: clocks finished */
    uint32_t *node_of;    /* per rank: the node holding it in the set (0: none yet) */
    int64_t *vc_sorted;   /* scratch of nranks for vclock_closable: no allocation per CLOCK */
    uint8_t *in_set;
    int nset;
    int *rank_of;         /* node id -> worker rank, -1 */
    size_t nrank_of;
    uint64_t *refused;    /* node id -> pushes refused as stale or not ready */
    size_t nrefused;
    source *src;          /* replicated tables: clocks as forwarded by each head */
    size_t nsrc;
    int use_src;          /* pulls here wait on the forwarded clocks (this server is a
                             replica of some partitions) */
    uint32_t read_head;   /* vclock_read_at: clocks read from this head's own stream */
    int *grp;             /* per rank: its worker group's index in gname (latest view) */
    char gname[VCLOCK_MAX_GROUPS][65]; /* the groups of the latest view's workers */
    int ngroups;
};

vclock *vclock_new(void) { return calloc(1, sizeof(vclock)); }

void vclock_destroy(vclock **v_p)
{
    if (!v_p || !*v_p)
        return;
    vclock *v = *v_p;
    free(v->vc);
    free(v->node_of);
    free(v->vc_sorted);
    free(v->in_set);
    free(v->rank_of);
    free(v->refused);
    free(v->grp);
    for (size_t i = 0; i < v->nsrc; i++)
        free(v->src[i].vc);
    free(v->src);
    free(v);
    *v_p = NULL;
}

int vclock_nranks(const vclock *v) { return v->nranks; }
int vclock_nset(const vclock *v) { return v->nset; }

int vclock_rank(const vclock *v, uint32_t node)
{
    return node < v->nrank_of ? v->rank_of[node] : -1;
}

/* Rank r's clock as this server may rely on for pulls: with replication, the
 * smallest over the heads it replicates of the clocks they forwarded (each came
 * down the chain behind that worker's pushes). */
static int64_t clock_of(const vclock *v, int r)
{
    if (v->read_head) { /* vclock_read_at */
        for (size_t i = 0; i < v->nsrc; i++)
            if (v->src[i].head == v->read_head)
                return v->src[i].vc[r];
        return v->use_src ? 0 : v->vc[r]; /* none forwarded yet; unreplicated: as heard */
    }
    if (!v->use_src)
        return v->vc[r];
    int64_t m = INT64_MAX;
    for (size_t i = 0; i < v->nsrc; i++)
        if (v->src[i].active && v->src[i].vc[r] < m)
            m = v->src[i].vc[r];
    return m == INT64_MAX ? v->vc[r] : m;
}

void vclock_read_at(vclock *v, uint32_t head) { v->read_head = head; }

int64_t vclock_min(const vclock *v) { return vclock_min_in(v, -1); }

int64_t vclock_min_in(const vclock *v, int group)
{
    int64_t m = -1;
    for (int r = 0; r < v->nranks; r++)
        if (v->in_set[r] && (group < 0 || v->grp[r] == group) && (m < 0 || clock_of(v, r) < m))
            m = clock_of(v, r);
    return m < 0 ? 0 : m;
}

int vclock_finished(const vclock *v, int r, int64_t t) { return vclock_finished_in(v, r, t, -1); }

int vclock_finished_in(const vclock *v, int r, int64_t t, int group)
{
    return r >= 0 && r < v->nranks && v->in_set[r] && v->vc[r] > t &&
           (group < 0 || v->grp[r] == group);
}

int vclock_group(const vclock *v, const char *ns)
{
    for (int g = 0; g < v->ngroups; g++)
        if (!strcmp(v->gname[g], ns))
            return v->ngroups > 1 ? g : -1; /* one group: every worker, as a job's */
    return -1;
}

static int cmp_desc(const void *x, const void *y)
{
    int64_t p = *(const int64_t *)x, q = *(const int64_t *)y;
    return p > q ? -1 : p < q;
}

int64_t vclock_closable(vclock *v, uint32_t backup, int64_t none)
{
    return vclock_closable_in(v, backup, none, -1);
}

int64_t vclock_closable_in(vclock *v, uint32_t backup, int64_t none, int group)
{
    int64_t *vcs = v->vc_sorted;
    int n = 0;
    for (int r = 0; r < v->nranks; r++)
        if (v->in_set[r] && (group < 0 || v->grp[r] == group))
            vcs[n++] = v->vc[r];
    if (n == 0)
        return none;
    qsort(vcs, (size_t)n, sizeof vcs[0], cmp_desc);
    int need = n - (int)backup;
    if (need < 1)
        need = 1;
    return vcs[need - 1];
}

/* Rank r is in the set as node `node`. Another node than before took a dead
 * worker's rank over: the clocks known are that one's, and the new worker starts
 * at its own (it sends a CLOCK of the iteration before it first thing). */
static void take_over(vclock *v, int r, uint32_t node)
{
    if (v->node_of[r] && v->node_of[r] != node) {
        LOG_I("worker rank %d is node %u now (was node %u): its clock starts again from "
              "what the new worker says", r, node, v->node_of[r]);
        v->vc[r] = 0;
        for (size_t i = 0; i < v->nsrc; i++)
            v->src[i].vc[r] = 0;
    }
    v->node_of[r] = node;
}

/* The index of group `name` among the view's groups, added when new; -1 (every
 * worker's set) past VCLOCK_MAX_GROUPS. */
static int intern_group(vclock *v, const char *name)
{
    for (int g = 0; g < v->ngroups; g++)
        if (!strcmp(v->gname[g], name))
            return g;
    if (v->ngroups == VCLOCK_MAX_GROUPS)
        return -1;
    snprintf(v->gname[v->ngroups], sizeof v->gname[0], "%.64s", name);
    return v->ngroups++;
}

int vclock_view(vclock *v, const Pskv__View *view)
{
    int was = v->nranks, nranks = 0;
    uint32_t maxid = 0;
    for (size_t i = 0; i < view->n_nodes; i++) {
        if (view->nodes[i]->role == PSKV__ROLE__WORKER && view->nodes[i]->rank + 1 > nranks)
            nranks = view->nodes[i]->rank + 1;
        if (view->nodes[i]->id > maxid)
            maxid = view->nodes[i]->id;
    }
    if (nranks > v->nranks) { /* ranks only grow: keep the clocks already known */
        int64_t *vc = realloc(v->vc, (size_t)nranks * sizeof *vc);
        if (vc)
            v->vc = vc;
        uint8_t *in = realloc(v->in_set, (size_t)nranks);
        if (in)
            v->in_set = in;
        int64_t *sorted = realloc(v->vc_sorted, (size_t)nranks * sizeof *sorted);
        if (sorted)
            v->vc_sorted = sorted;
        uint32_t *no = realloc(v->node_of, (size_t)nranks * sizeof *no);
        if (no)
            v->node_of = no;
        int *grp = realloc(v->grp, (size_t)nranks * sizeof *grp);
        if (grp)
            v->grp = grp;
        if (!vc || !in || !sorted || !no || !grp) {
            LOG_E("out of memory applying the view");
            return -PSKV_ENOMEM;
        }
        for (int r = v->nranks; r < nranks; r++) {
            vc[r] = 0;
            no[r] = 0;
        }
        v->vc = vc;
        v->in_set = in;
        for (size_t i = 0; i < v->nsrc; i++) {
            int64_t *g = realloc(v->src[i].vc, (size_t)nranks * sizeof *g);
            if (!g) {
                LOG_E("out of memory applying the view");
                return -PSKV_ENOMEM;
            }
            for (int r = v->nranks; r < nranks; r++)
                g[r] = 0;
            v->src[i].vc = g;
        }
        v->nranks = nranks;
    }
    int *ro = realloc(v->rank_of, (maxid + 1) * sizeof *ro);
    if (ro) {
        v->rank_of = ro;
        v->nrank_of = maxid + 1;
        for (size_t i = 0; i <= maxid; i++)
            ro[i] = -1;
    }
    if (v->nranks) /* a service with no worker yet has no set at all */
        memset(v->in_set, 0, (size_t)v->nranks);
    v->nset = 0;
    v->ngroups = 0;
    for (size_t i = 0; i < view->n_nodes; i++) {
        Pskv__Node *n = view->nodes[i];
        if (n->role != PSKV__ROLE__WORKER || n->rank < 0 || n->rank >= v->nranks)
            continue;
        if (ro)
            ro[n->id] = n->rank;
        v->grp[n->rank] = intern_group(v, n->group ? n->group : "");
        int gone = n->state && (!strcmp(n->state, "finished") || !strcmp(n->state, "dead"));
        if (!gone) {
            v->in_set[n->rank] = 1;
            v->nset++;
            take_over(v, n->rank, n->id);
        }
    }
    return was;
}

uint64_t vclock_refusal(vclock *v, uint32_t node, int code)
{
    if (code != PSKV_ESTALE && code != PSKV_ENOTREADY && code != PSKV_EKEYMISS &&
        code != PSKV_ENOSHM) /* ENOSHM: sent again over TCP */
        return 0; /* final: nothing is sent again */
    if (node >= v->nrefused) {
        size_t n = (size_t)node + 64;
        uint64_t *g = realloc(v->refused, n * sizeof *g);
        if (!g) {
            LOG_E("out of memory counting refusals: the clocks of node %u stay trusted", node);
            return 0;
        }
        memset(g + v->nrefused, 0, (n - v->nrefused) * sizeof *g);
        v->refused = g;
        v->nrefused = n;
    }
    return ++v->refused[node];
}

int vclock_clock(vclock *v, const wire_msg *msg)
{
    const Pskv__Meta *m = msg->meta;
    int r = vclock_rank(v, m->sender);
    if (r < 0 || !m->has_clock || m->clock < 0 || m->clock > ((int64_t)1 << 62)) {
        LOG_W("dropped a CLOCK from node %u at %s: not a worker of the view or no clock",
              m->sender, msg->peer);
        return -1;
    }
    uint64_t owed = m->sender < v->nrefused ? v->refused[m->sender] : 0;
    if ((m->has_refused ? m->refused : 0) < owed) {
        /* sent before the worker heard of a push refused here: that push is still
         * to come, and the clock covers it */
        LOG_D("ignored CLOCK %lld from node %u: it has heard of %llu of the %llu pushes "
              "refused here", (long long)m->clock, m->sender,
              (unsigned long long)(m->has_refused ? m->refused : 0), (unsigned long long)owed);
        return -2;
    }
    if (m->clock + 1 > v->vc[r])
        v->vc[r] = m->clock + 1;
    return r;
}

static source *source_of(vclock *v, uint32_t head)
{
    for (size_t i = 0; i < v->nsrc; i++)
        if (v->src[i].head == head)
            return &v->src[i];
    source *g = realloc(v->src, (v->nsrc + 1) * sizeof *g);
    if (!g)
        return NULL;
    v->src = g;
    source *s = &g[v->nsrc];
    s->head = head;
    s->active = 0;
    s->vc = calloc(v->nranks ? (size_t)v->nranks : 1, sizeof *s->vc);
    if (!s->vc)
        return NULL;
    v->nsrc++;
    return s;
}

int vclock_from(vclock *v, uint32_t head, int rank, int64_t clock)
{
    source *s = rank >= 0 && rank < v->nranks ? source_of(v, head) : NULL;
    if (!s)
        return 0;
    if (clock + 1 > s->vc[rank])
        s->vc[rank] = clock + 1;
    return 1;
}

void vclock_set_sources(vclock *v, const uint32_t *heads, size_t n, int placement_changed)
{
    for (size_t i = 0; i < v->nsrc; i++) {
        v->src[i].active = 0;
        /* a head that took over partitions vouches only for the clocks it forwards
         * from now on: the ones before cover none of the pushes re-sent to it */
        if (placement_changed)
            memset(v->src[i].vc, 0, (size_t)v->nranks * sizeof *v->src[i].vc);
    }
    for (size_t k = 0; k < n; k++) {
        source *s = source_of(v, heads[k]);
        if (s)
            s->active = 1;
    }
    v->use_src = n > 0;
}

int vclock_get(const vclock *v, const int64_t **vc)
{
    *vc = v->vc;
    return v->nranks;
}

void vclock_restore(vclock *v, const int64_t *vc, int nranks)
{
    for (int r = 0; r < nranks && r < v->nranks; r++)
        if (vc[r] > v->vc[r])
            v->vc[r] = vc[r];
}

void vclock_cap(vclock *v, int64_t floor)
{
    for (int r = 0; r < v->nranks; r++)
        if (v->vc[r] > floor)
            v->vc[r] = floor;
}
