/* The view: placement on the ring and the View message. See view.h. */
#define _GNU_SOURCE
#include "view.h"

#include <stdlib.h>
#include <string.h>

#include "group.h"
#include "holders.h"
#include "log.h"
#include "pskv_errors.h"
#include "ring.h"
#include "sched_net.h"
#include "timeutil.h"

static struct {
    uint64_t epoch;
    uint32_t nparts, replicas, vnodes;
    uint32_t *chains;    /* nparts x replicas node ids, head first; 0 = none */
    uint32_t lost;       /* partitions no live server holds whole (every replica
                            died, or the last whole one while the others awaited
                            their copies) */
    holders *holders;    /* who holds each partition whole (holders.h) */
    uint64_t place_epoch; /* the last view that changed the chains */
    int placed;          /* the chains changed since the last view sent */
    uint32_t *join_prev; /* while the view that lets a server join is built: the
                            chains before it, where its partitions come from */
} V;

/* The policies' parts of VIEW and STATUS_REPLY, in the order added. */
static struct {
    view_fill_fn view;
    view_node_fill_fn node;
    void *ctx;
} fillers[VIEW_MAX_FILLERS];
static int nfillers;

int view_add_filler(view_fill_fn view, view_node_fill_fn node, void *ctx)
{
    if (nfillers == VIEW_MAX_FILLERS)
        return -PSKV_ENOMEM;
    fillers[nfillers].view = view;
    fillers[nfillers].node = node;
    fillers[nfillers].ctx = ctx;
    nfillers++;
    return 0;
}

void view_init(uint32_t nparts, uint32_t replicas, uint32_t vnodes)
{
    V.nparts = nparts;
    V.replicas = replicas;
    V.vnodes = vnodes;
}

uint64_t view_epoch(void) { return V.epoch; }

uint32_t view_lost(void) { return V.lost; }

uint64_t view_place_epoch(void) { return V.place_epoch; }

const uint32_t *view_chains(uint32_t *nparts, uint32_t *replicas, uint32_t *vnodes)
{
    *nparts = V.nparts;
    *replicas = V.replicas;
    *vnodes = V.vnodes;
    return V.chains;
}

int view_adopt(uint32_t nparts, uint32_t replicas, uint32_t vnodes, const uint32_t *chains)
{
    size_t cells = (size_t)nparts * replicas;
    uint32_t *copy = malloc(cells * sizeof *copy);
    if (!copy)
        return -PSKV_ENOMEM;
    memcpy(copy, chains, cells * sizeof *copy);
    V.nparts = nparts;
    V.replicas = replicas;
    V.vnodes = vnodes;
    free(V.chains);
    V.chains = copy;
    holders_destroy(&V.holders); /* the first placement starts it afresh */
    return 0;
}

/* Builds the view (or the status reply) into v; nodes[] must hold memb.nnodes. */
static void fill_view(Pskv__View *v, Pskv__Node *nodes, Pskv__Node **ptrs, int status)
{
    int64_t now = tu_now_ms();
    pskv__view__init(v);
    v->has_epoch = v->has_heartbeat_ms = v->has_servers = v->has_workers = 1;
    v->epoch = V.epoch;
    v->heartbeat_ms = (uint32_t)memb.heartbeat_ms;
    v->servers = (uint32_t)memb.nservers;
    v->workers = (uint32_t)memb.nworkers;
    v->has_partitions = v->has_replicas = v->has_lease_ms = v->has_vnodes = v->has_lost = 1;
    v->partitions = V.nparts;
    v->replicas = V.replicas;
    v->lease_ms = (uint32_t)memb.lease_ms;
    v->vnodes = V.vnodes;
    v->lost = V.lost;
    if (V.chains) {
        v->n_chains = (size_t)V.nparts * V.replicas;
        v->chains = V.chains;
    }
    for (int f = 0; f < nfillers; f++) /* checkpoint.c: a resumed job's data, the best
                                          one; earlystop.c: whether every worker stops */
        if (fillers[f].view)
            fillers[f].view(fillers[f].ctx, v, status);
    if (V.join_prev) { /* a joining server's first view: where its partitions come from */
        v->n_prev_chains = (size_t)V.nparts * V.replicas;
        v->prev_chains = V.join_prev;
    }
    v->has_keys = sched_sec.keyed;
    v->keys = sched_sec.keyed;
    if (status) {
        static const char *const js[] = {"waiting", "running", "stopping", "finished"};
        v->state = (char *)js[memb.state];
        static uint64_t mine[REFUSE_COUNT];
        for (int i = 0; i < REFUSE_COUNT; i++)
            mine[i] = refuse_count((refuse_reason)i);
        v->n_refusals = REFUSE_COUNT;
        v->refusals = mine;
        v->has_forgotten = 1;
        v->forgotten = memb.forgotten;
        v->has_insecure = sched_sec.insecure;
        v->insecure = sched_sec.insecure;
        detect_fill_view(v);
    }
    v->n_nodes = 0;
    v->nodes = ptrs;
    for (int i = 0; i < memb.nnodes; i++) {
        memb_node *n = &memb.nodes[i];
        if (!status && !group_in_view(n))
            continue; /* a group not yet running, or ended (group.h) */
        Pskv__Node *p = &nodes[v->n_nodes];
        pskv__node__init(p);
        ptrs[v->n_nodes++] = p;
        p->has_id = p->has_role = p->has_rank = p->has_port = p->has_pid = p->has_alive = 1;
        p->id = n->id;
        p->role = n->role;
        p->rank = n->rank;
        p->host = n->host;
        p->port = (uint32_t)n->port;
        p->pid = n->pid;
        p->alive = !n->dead && n->drain != DRAIN_LEFT;
        if (n->role == PSKV__ROLE__SERVER && V.chains) {
            p->has_heads = p->has_holds = 1;
            p->heads = n->heads;
            p->holds = n->holds;
        }
        p->state = (char *)memb_state_name(n); /* servers take finished and dead workers
                                                  out of the clock set */
        for (int f = 0; f < nfillers; f++)
            if (fillers[f].node)
                fillers[f].node(fillers[f].ctx, p, n, status);
        if ((n->role == PSKV__ROLE__WORKER || n->role == PSKV__ROLE__EVALUATOR) &&
            (*n->group || memb.service))
            p->group = n->group; /* group_view_for keeps a worker's group by it */
        p->has_clock = n->role == PSKV__ROLE__WORKER;
        p->clock = n->clock;
        p->has_dropped = n->role == PSKV__ROLE__SERVER;
        p->dropped = n->dropped;
        if (n->key[0])
            p->pubkey = n->key;
        p->has_insecure = n->insecure;
        p->insecure = n->insecure;
        if (status) {
            p->has_heartbeat_age_ms = 1;
            p->heartbeat_age_ms = now - n->last_hb_ms;
            detect_fill_node(p, n, now);
            p->n_refusals = REFUSE_COUNT;
            p->refusals = n->refusals;
            p->has_pushes = p->has_pulls = n->role == PSKV__ROLE__SERVER;
            p->pushes = n->pushes;
            p->pulls = n->pulls;
            p->has_wait_ns = n->role == PSKV__ROLE__WORKER;
            p->wait_ns = n->wait_ns;
            if (n->traffic) {
                p->n_traffic = n->traffic->n;
                p->traffic = n->traffic->ptr;
            }
            p->has_pipe_pipeline = p->has_pipe_stage = n->pipe_place > 0;
            p->pipe_pipeline = (uint32_t)((n->pipe_place - 1) >> 32);
            p->pipe_stage = (uint32_t)((n->pipe_place - 1) & 0xffffffff);
            p->has_balance_batch = p->has_balance_us = n->bal_batch > 0;
            p->balance_batch = n->bal_batch;
            p->balance_us = n->bal_us;
            p->has_stage_layers = p->has_stage_ms = n->stage_layers > 0;
            p->stage_layers = n->stage_layers;
            p->stage_ms = n->stage_ms;
            p->has_ar_waiting = n->ar_waiting > 0;
            p->ar_waiting = n->ar_waiting;
            p->has_rss_bytes = n->rss > 0;
            p->rss_bytes = n->rss;
            if (n->role == PSKV__ROLE__SERVER) {
                p->has_rows = p->has_admitted = p->has_not_admitted = 1;
                p->has_evicted = p->has_bytes = 1;
                p->rows = n->rows;
                p->admitted = n->admitted;
                p->not_admitted = n->not_admitted;
                p->evicted = n->evicted;
                p->bytes = n->bytes;
                if (n->ns && p->alive) { /* a dead server's last report is not its
                                            tables any more (a replaced one exits) */
                    p->n_ns_names = p->n_ns_bytes = p->n_ns_quota = n->ns->n;
                    p->ns_names = n->ns->ptr;
                    p->ns_bytes = n->ns->bytes;
                    p->ns_quota = n->ns->quota;
                }
            }
        }
    }
}

/* Sends view v (m carries it) to node n: a worker (and a service's evaluator)
 * gets its group's view (group_view_for, built in gptrs from v's ptrs), any other
 * node v itself. */
static void send_to(memb_node *n, Pskv__Meta *m, Pskv__View *v, Pskv__Node **ptrs,
                    Pskv__Node **gptrs)
{
    if (n->role != PSKV__ROLE__WORKER && !(n->role == PSKV__ROLE__EVALUATOR && memb.service)) {
        sched_send(n, m);
        return;
    }
    Pskv__View gv = *v;
    memcpy(gptrs, ptrs, v->n_nodes * sizeof *gptrs);
    gv.nodes = gptrs;
    gv.n_nodes = group_view_for(n, &gv, gptrs, v->n_nodes);
    m->view = &gv;
    sched_send(n, m);
    m->view = v;
}

/* Sends the current view to `only` (in the table or not), or (NULL) to every live
 * node that still takes part. */
static void send_view_msg(memb_node *only)
{
    Pskv__Node *nodes = calloc((size_t)memb.nnodes, sizeof *nodes);
    Pskv__Node **ptrs = calloc((size_t)memb.nnodes, sizeof *ptrs);
    Pskv__Node **gptrs = calloc((size_t)memb.nnodes, sizeof *gptrs);
    if (!nodes || !ptrs || !gptrs) {
        LOG_E("out of memory publishing the view");
        exit(1);
    }
    Pskv__View v;
    fill_view(&v, nodes, ptrs, 0);
    Pskv__Meta m;
    sched_meta(&m, PSKV__MSG_TYPE__VIEW);
    m.view = &v;
    /* not to the dead: a node heard again is sent a view then (membership.c), and
     * one cut off or stopped would only queue views that it never reads. In table
     * order, as always; a worker sees its group's ranks, the servers and the
     * evaluator each worker's clock slot as its rank (group.h; in a job the same) */
    int slotted = 0;
    for (int i = 0; i < (only ? 1 : memb.nnodes); i++) {
        memb_node *n = only ? only : &memb.nodes[i];
        if (!only && (n->state == NODE_FINISHED || n->dead || !group_in_view(n)))
            continue; /* a worker (a service's evaluator) of a group not yet running
                         has no view yet */
        if (memb.service && slotted != (n->role != PSKV__ROLE__WORKER)) {
            slotted = n->role != PSKV__ROLE__WORKER;
            for (int j = 0, k = 0; j < memb.nnodes; j++)
                if (group_in_view(&memb.nodes[j]) && ptrs[k++]->role == PSKV__ROLE__WORKER)
                    ptrs[k - 1]->rank = slotted ? memb.nodes[j].slot : memb.nodes[j].rank;
        }
        send_to(n, &m, &v, ptrs, gptrs);
    }
    free(gptrs);
    free(nodes);
    free(ptrs);
}

void view_send(void)
{
    V.epoch++;
    if (V.placed)
        V.place_epoch = V.epoch;
    V.placed = 0;
    send_view_msg(NULL);
}

void view_send_to(memb_node *n) { send_view_msg(n); }

size_t view_live_servers(uint32_t *out)
{
    size_t ns = 0;
    for (int i = 0; i < memb.nnodes && ns < VIEW_MAX_SERVERS; i++)
        if (memb.nodes[i].role == PSKV__ROLE__SERVER && !memb.nodes[i].dead &&
            memb.nodes[i].drain == DRAIN_NONE)
            out[ns++] = memb.nodes[i].id;
    return ns;
}

/* Partitions lost, and headed and held by each server, from V.chains. */
static void count_holds(void)
{
    V.lost = 0;
    for (int i = 0; i < memb.nnodes; i++)
        memb.nodes[i].heads = memb.nodes[i].holds = 0;
    for (uint32_t p = 0; p < V.nparts; p++) {
        const uint32_t *c = &V.chains[(size_t)p * V.replicas];
        if (!c[0]) {
            V.lost++;
            continue;
        }
        for (uint32_t j = 0; j < V.replicas && c[j]; j++) {
            memb_node *n = memb_find(c[j]);
            n->holds++;
            n->heads += j == 0;
        }
    }
}

/* 1 when partition p's chain in V.chains holds a server being drained (alive, so
 * its data is not lost). */
static int held_by_draining(uint32_t p)
{
    for (uint32_t j = 0; j < V.replicas; j++) {
        memb_node *n = memb_find(V.chains[(size_t)p * V.replicas + j]);
        if (n && n->drain == DRAIN_HANDING && !n->dead)
            return 1;
    }
    return 0;
}

/* A partition whose only live members are being drained (R = 1) is not lost:
 * it takes the chain a first placement would give it, and its drained head
 * hands it over (chain_fill.c). Returns 0 or -PSKV_ENOMEM. */
static int place_drained(uint32_t *next, const uint32_t *live, size_t ns)
{
    uint32_t *fresh = NULL;
    for (uint32_t p = 0; V.chains && ns && p < V.nparts; p++) {
        uint32_t *c = &next[(size_t)p * V.replicas];
        if (c[0] || !held_by_draining(p))
            continue;
        if (!fresh && (!(fresh = calloc((size_t)V.nparts * V.replicas, sizeof *fresh)) ||
                       ring_chains(fresh, V.nparts, V.replicas, live, ns, V.vnodes, NULL) < 0)) {
            free(fresh);
            return -PSKV_ENOMEM;
        }
        memcpy(c, &fresh[(size_t)p * V.replicas], V.replicas * sizeof *c);
    }
    free(fresh);
    return 0;
}

static int alive_server(void *ctx, uint32_t id)
{
    (void)ctx;
    const memb_node *n = memb_find(id);
    return n && !n->dead && n->drain != DRAIN_LEFT;
}

#define VIEW_LOSSES_LOGGED 16 /* partitions named one by one in the log */

/* The chains change from old to next (the view after the current one): a
 * partition whose last whole holder died while other members still waited for
 * their copies is lost (its chain in next all 0), as ring.h marks one with no
 * live member. Logged per partition. */
static void drop_partial(const uint32_t *old, uint32_t *next)
{
    if (!V.holders && !(V.holders = holders_new(V.nparts, V.replicas))) {
        LOG_E("out of memory placing %u partitions", V.nparts);
        exit(1);
    }
    holders_loss loss[VIEW_LOSSES_LOGGED];
    uint32_t n = holders_update(V.holders, old, next, V.epoch + 1, alive_server, NULL, loss,
                                VIEW_LOSSES_LOGGED);
    for (uint32_t i = 0; i < n && i < VIEW_LOSSES_LOGGED; i++)
        if (loss[i].filling)
            LOG_E("partition %u lost: its only whole replica (node %u) died while node %u was "
                  "still receiving its copy", loss[i].p, loss[i].whole, loss[i].filling);
        else
            LOG_E("partition %u lost: its only whole replica (node %u) died before another "
                  "member held it whole", loss[i].p, loss[i].whole);
    if (n > VIEW_LOSSES_LOGGED)
        LOG_E("%u more partitions lost the same way", n - VIEW_LOSSES_LOGGED);
}

void view_heard_whole(uint32_t id, uint64_t epoch, const uint32_t *awaited, size_t n)
{
    if (V.holders && holders_heard(V.holders, V.chains, id, epoch, awaited, n) < 0)
        LOG_W("heartbeat from server node %u: its %zu partitions awaited are not in ascending "
              "order: ignored", id, n);
}

/* ring.h owns how partitions are placed; this keeps the chains and the counts. */
void view_place(void)
{
    uint32_t live[VIEW_MAX_SERVERS];
    size_t ns = view_live_servers(live);
    size_t cells = (size_t)V.nparts * V.replicas;
    uint32_t *next = calloc(cells, sizeof *next);
    if (!next || ring_chains(next, V.nparts, V.replicas, live, ns, V.vnodes, V.chains) < 0 ||
        place_drained(next, live, ns) < 0) {
        LOG_E("out of memory placing %u partitions", V.nparts);
        exit(1);
    }
    drop_partial(V.chains, next);
    free(V.chains);
    V.chains = next;
    V.placed = 1;
    count_holds();
}

int view_join_server(uint32_t id)
{
    size_t cells = (size_t)V.nparts * V.replicas;
    uint32_t live[VIEW_MAX_SERVERS];
    size_t ns = view_live_servers(live);
    V.join_prev = malloc(cells * sizeof *V.join_prev);
    if (!V.join_prev) {
        LOG_E("out of memory placing a joining server");
        exit(1);
    }
    memcpy(V.join_prev, V.chains, cells * sizeof *V.join_prev);
    int moved = ring_join(V.chains, V.nparts, V.replicas, live, ns, V.vnodes, id);
    if (moved < 0) {
        LOG_E("out of memory placing a joining server");
        exit(1);
    }
    drop_partial(V.join_prev, V.chains);
    count_holds();
    V.placed = 1;
    view_send(); /* the joiner's first view: with the chains before it joined */
    free(V.join_prev);
    V.join_prev = NULL;
    return moved;
}

void view_status(wire_msg *msg)
{
    Pskv__Node *nodes = calloc((size_t)memb.nnodes + 1, sizeof *nodes);
    Pskv__Node **ptrs = calloc((size_t)memb.nnodes + 1, sizeof *ptrs);
    if (!nodes || !ptrs) {
        free(nodes);
        free(ptrs);
        sched_refuse(msg, PSKV_ENOMEM, "scheduler out of memory");
        return;
    }
    Pskv__View v;
    fill_view(&v, nodes, ptrs, 1);
    Pskv__Meta m;
    sched_meta(&m, PSKV__MSG_TYPE__STATUS_REPLY);
    m.view = &v;
    if (msg->meta->has_request_id) {
        m.has_request_id = 1;
        m.request_id = msg->meta->request_id;
    }
    sched_reply(&msg->rid, &m);
    free(nodes);
    free(ptrs);
}

void view_free(void)
{
    free(V.chains);
    V.chains = NULL;
    holders_destroy(&V.holders);
    nfillers = 0;
}
