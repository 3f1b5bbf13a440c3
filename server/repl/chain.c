/* The chain's placement (design in chain.h): the chains of the latest view, this
 * server's place in each, which rows of a request it may serve, and applying a
 * new view: sizing the per-partition state once, the peers, then asking
 * chain_fill.c what each partition's move means and chain_fwd.c to send again
 * what the move left unanswered. */
#define _GNU_SOURCE
#include "chain.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain_fill.h"
#include "chain_impl.h"
#include "dedupe.h"
#include "grow.h"
#include "log.h"
#include "net.h"
#include "secure.h"
#include "pskv_errors.h"
#include "ring.h"
#include "timeutil.h"

chain *chain_new(void *ctx, void *router, member *mb, table_set *tables, int64_t max_message)
{
    chain *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->ctx = ctx;
    c->router = router;
    c->mb = mb;
    c->tables = tables;
    c->max_message = max_message;
    if (chain_fwd_init(c) < 0) {
        free(c);
        return NULL;
    }
    return c;
}

void chain_destroy(chain **c_p)
{
    if (!c_p || !*c_p)
        return;
    chain *c = *c_p;
    chain_fwd_fini(c);
    for (size_t i = 0; i < c->npeers; i++)
        chain_peer_close(&c->peers[i]);
    dedupe_destroy(&c->dd);
    free(c->peers);
    free(c->chains);
    free(c->index);
    free(c->ready);
    free(c->fills);
    free(c->fresh_next);
    free(c->gone);
    free(c->pmark);
    free(c->touched);
    free(c->segs);
    free(c->runs);
    free(c->skip);
    free(c->akeys);
    free(c->avals);
    free(c);
    *c_p = NULL;
}

uint32_t chain_replicas(const chain *c) { return c->R ? c->R : 1; }
uint32_t chain_nparts(const chain *c) { return c->nparts; }
int chain_holds(const chain *c, uint32_t p) { return p < c->nparts && c->index[p] >= 0 && c->ready[p]; }

int chain_filling(const chain *c)
{
    for (uint32_t p = 0; p < c->nparts; p++)
        if (c->index[p] >= 0 && !c->ready[p])
            return 1;
    return 0;
}

size_t chain_awaited(const chain *c, uint32_t *out, size_t cap)
{
    size_t n = 0;
    for (uint32_t p = 0; p < c->nparts; p++)
        if (c->index[p] >= 0 && !c->ready[p]) {
            if (n < cap)
                out[n] = p;
            n++;
        }
    return n;
}

void chain_dense_span(const chain *c, const table *t, uint32_t p, uint64_t *first,
                      uint64_t *count)
{
    chain_span(c, t, p, first, count);
}

size_t chain_dedupe_export(const chain *c, uint32_t p, void *buf, size_t cap)
{
    return c->dd ? dedupe_export(c->dd, p, buf, cap) : 0;
}

int chain_dedupe_import(chain *c, uint32_t nparts, uint32_t p, const void *buf, size_t len)
{
    if (!c->dd && !(c->dd = dedupe_new(nparts)))
        return -PSKV_ENOMEM;
    return dedupe_import(c->dd, p, buf, len);
}
uint64_t chain_place_epoch(const chain *c) { return c->place_epoch; }

uint64_t chain_dedupe_forced(const chain *c) { return c->dd ? dedupe_forced(c->dd) : 0; }

uint32_t chain_partition_of(const chain *c, const table *t, uint64_t key)
{
    return chain_part(c, t, key);
}

uint32_t chain_next(const chain *c, uint32_t p) { return p < c->nparts ? chain_next_of(c, p) : 0; }

int chain_heads(const chain *c, uint32_t p) { return chain_holds(c, p) && c->index[p] == 0; }

chain_peer *chain_peer_of(chain *c, uint32_t id)
{
    for (size_t i = 0; i < c->npeers; i++)
        if (c->peers[i].id == id)
            return &c->peers[i];
    return NULL;
}

void chain_peer_close(chain_peer *p)
{
    net_monitor_stop(p->sock, &p->mon); /* first: see net.h */
    if (p->sock)
        zmq_close(p->sock);
    p->sock = NULL;
}

void *chain_peer_sock(chain *c, uint32_t id)
{
    chain_peer *p = chain_peer_of(c, id);
    if (!p || !p->alive) /* a dead server never serves again: not dialled */
        return NULL;
    if (!p->sock) {
        p->sock = net_socket(c->ctx, ZMQ_DEALER, c->max_message, 0);
        /* never wait on a peer: one that died (or cannot keep up) would stall this
         * server's loop and its heartbeats. A forward that cannot be queued is sent
         * again after the next view, or re-sent by the worker. */
        int nowait = 0;
        if (p->sock)
            zmq_setsockopt(p->sock, ZMQ_SNDTIMEO, &nowait, sizeof nowait);
        if (p->sock && (secure_dial(c->mb->sec, p->sock, p->key) < 0 ||
                        net_connect(p->sock, p->host, p->port) < 0)) {
            LOG_W("cannot dial server node %u at %s:%d: %s", id, p->host, p->port,
                  *p->key || !c->mb->sec || !c->mb->sec->keyed ? zmq_strerror(errno)
                                                                : "the view has no key for it");
            zmq_close(p->sock);
            p->sock = NULL;
        }
        if (p->sock) { /* its close tells the scheduler (chain_peer_events) */
            static unsigned seq; /* a closed monitor's endpoint may linger a while */
            char ep[80];
            snprintf(ep, sizeof ep, "inproc://pskv-peer-%p-%u-%u", (void *)c, id, seq++);
            p->mon = net_monitor(c->ctx, p->sock, ep, ZMQ_EVENT_DISCONNECTED);
            if (!p->mon)
                LOG_W("cannot watch the connection to server node %u (%s): its crash is "
                      "left to the scheduler", id, zmq_strerror(errno));
        }
    }
    return p->sock;
}

/* ---- rows of a request ----------------------------------------------------- */

int chain_rows(chain *c, table *t, wire_msg *msg, int for_pull, rowset *rs, char *why,
               size_t whylen)
{
    Pskv__Meta *r = msg->meta;
    memset(rs, 0, sizeof *rs);
    const char *role = for_pull ? "tail" : "head";
    if (msg->keys) {
        uint32_t lastp = UINT32_MAX;
        for (uint64_t i = 0; i < msg->nkeys; i++) {
            uint64_t k = msg->keys[i];
            if (t->dense && k >= t->size) {
                snprintf(why, whylen, "key %llu (#%llu) is outside table '%s' (size %llu)",
                         (unsigned long long)k, (unsigned long long)i, t->name,
                         (unsigned long long)t->size);
                return -PSKV_ERANGE;
            }
            uint32_t p = chain_part(c, t, k);
            if (p == lastp)
                continue;
            lastp = p;
            int want = for_pull ? chain_tail(c, p) : 0;
            if (c->index[p] != want || want < 0) {
                snprintf(why, whylen, "this server is not the %s of partition %u (key %llu of "
                         "table '%s') in view epoch %llu", role, p, (unsigned long long)k,
                         t->name, (unsigned long long)c->mb->epoch);
                return -PSKV_ESTALE;
            }
            if (!c->ready[p]) { /* a joining head, or a tail, still being filled */
                snprintf(why, whylen, "partition %u is still being copied to this server", p);
                return -PSKV_ENOTREADY;
            }
        }
        rs->keys = msg->keys;
        rs->n = msg->nkeys;
        return 0;
    }
    if (!t->dense) {
        snprintf(why, whylen, "a dense run addresses sparse table '%s'", t->name);
        return -PSKV_EPROTO;
    }
    /* a run names its span and row count, not its rows: on another placement the
     * same count can be other rows (the tail of one partition for the tail of
     * another), which would be answered or applied in the worker's order of rows it
     * never asked for. So a run planned before the placement changed is stale,
     * whatever it counts (a keyed request is checked key by key above) */
    if (r->has_epoch && r->epoch < c->place_epoch) {
        snprintf(why, whylen, "a run of table '%s' planned on view epoch %llu, before the "
                 "placement changed in epoch %llu; send it again", t->name,
                 (unsigned long long)r->epoch, (unsigned long long)c->place_epoch);
        return -PSKV_ESTALE;
    }
    uint64_t first = r->first_key, span = r->has_span ? r->span : msg->nkeys;
    if (first >= t->size || span > t->size - first) {
        snprintf(why, whylen, "keys %llu..%llu are outside table '%s' (size %llu)",
                 (unsigned long long)first, (unsigned long long)(first + span - 1), t->name,
                 (unsigned long long)t->size);
        return -PSKV_ERANGE;
    }
    /* the runs of this server's partitions (with the wanted role) inside the span */
    size_t nsegs = 0;
    uint64_t rows = 0, end = first + span;
    ring_run it;
    ring_run_init(&it, first, end, t->size, c->nparts);
    uint32_t p;
    uint64_t lo, hi;
    while (ring_run_next(&it, &p, &lo, &hi)) {
        int want = for_pull ? chain_tail(c, p) : 0;
        if (c->index[p] != want || want < 0)
            continue;
        if (!c->ready[p]) {
            snprintf(why, whylen, "partition %u is still being copied to this server", p);
            return -PSKV_ENOTREADY;
        }
        if (nsegs && c->segs[2 * nsegs - 2] + c->segs[2 * nsegs - 1] == lo) {
            c->segs[2 * nsegs - 1] += hi - lo; /* adjacent partitions: one run */
        } else {
            if (grow_array((void **)&c->segs, &c->segs_cap, 2 * nsegs + 2, sizeof *c->segs) < 0) {
                snprintf(why, whylen, "out of memory");
                return -PSKV_ENOMEM;
            }
            c->segs[2 * nsegs] = lo;
            c->segs[2 * nsegs + 1] = hi - lo;
            nsegs++;
        }
        rows += hi - lo;
    }
    if (rows != msg->nkeys) {
        snprintf(why, whylen, "keys %llu..%llu of table '%s' hold %llu rows whose %s is this "
                 "server in view epoch %llu, not %llu", (unsigned long long)first,
                 (unsigned long long)(end - 1), t->name, (unsigned long long)rows, role,
                 (unsigned long long)c->mb->epoch, (unsigned long long)msg->nkeys);
        return -PSKV_ESTALE;
    }
    if (nsegs == 1) {
        rs->first = c->segs[0];
        rs->n = c->segs[1];
    } else {
        rs->segs = c->segs;
        rs->nsegs = nsegs;
        rs->n = rows;
    }
    return 0;
}

/* chain_push_closed's count over the partitions of a push. */
typedef struct closed_tally {
    const chain *c;
    const int64_t *pc;
    int64_t clock;
    uint32_t origin;
    uint64_t id;
    int nclosed, nopen, folded;
} closed_tally;

static void tally_part(closed_tally *k, uint32_t p)
{
    if (k->pc[p] <= k->clock) {
        k->nopen++;
        return;
    }
    k->nclosed++;
    k->folded &= k->c->dd && dedupe_seen(k->c->dd, p, k->origin, k->id);
}

int chain_push_closed(const chain *c, table *t, const rowset *rs, int64_t clock,
                      uint32_t origin, uint64_t id, int *folded)
{
    int64_t *pc = c->nparts ? table_closed(t, c->nparts) : NULL;
    *folded = 0;
    if (!pc)
        return 0;
    closed_tally k = {c, pc, clock, origin, id, 0, 0, 1};
    if (rs->keys) {
        chain_cursor cur = {0, 0, 0};
        uint32_t last = UINT32_MAX;
        for (uint64_t i = 0; i < rs->n; i++) {
            uint32_t p = chain_part_at(c, t, rs->keys[i], &cur);
            if (p != last)
                tally_part(&k, p);
            last = p;
        }
    } else { /* dense runs: the partitions from each run's first row to its last */
        size_t nruns = rs->segs ? rs->nsegs : 1;
        for (size_t r = 0; r < nruns; r++) {
            uint64_t f = rs->segs ? rs->segs[2 * r] : rs->first;
            uint64_t cnt = rs->segs ? rs->segs[2 * r + 1] : rs->n;
            for (uint32_t p = chain_part(c, t, f); cnt && p <= chain_part(c, t, f + cnt - 1); p++)
                tally_part(&k, p);
        }
    }
    *folded = k.nclosed && k.folded;
    return k.nclosed ? (k.nopen ? 2 : 1) : 0;
}

size_t chain_sources(const chain *c, uint32_t *out, size_t max)
{
    size_t n = 0;
    for (uint32_t p = 0; p < c->nparts; p++) {
        int i = c->index[p];
        if (i < 0 || (i == 0 && chain_tail(c, p) > 0))
            continue; /* not here, or here as a head with replicas after it */
        uint32_t h = chain_members(c, p)[0];
        int dup = 0;
        for (size_t k = 0; k < n && !dup; k++)
            dup = out[k] == h;
        if (!dup && n < max)
            out[n++] = h;
    }
    return n;
}

static int in_served(void *ctx, uint64_t key)
{
    chain_filter *f = ctx;
    uint32_t p = chain_part(f->c, f->t, key);
    return f->c->index[p] >= 0 && f->c->index[p] == chain_tail(f->c, p) && f->c->ready[p];
}

uint64_t chain_export_served(const chain *c, const table *t, uint64_t *keys, float *rows)
{
    if (!c->nparts)
        return 0;
    chain_filter f = {c, t, 0};
    return shard_export(t->sh, in_served, &f, keys, rows);
}

/* ---- views ------------------------------------------------------------------ */

/* Per-partition state, sized by the first view (or a resumed job's). */
static void set_shape(chain *c, const Pskv__View *v)
{
    c->nparts = v->partitions;
    c->R = v->replicas;
    c->index = malloc(c->nparts * sizeof *c->index);
    c->ready = calloc(c->nparts, 1);
    c->fills = calloc(c->nparts, sizeof *c->fills);
    c->fresh_next = calloc(c->nparts, 1);
    c->gone = calloc(c->nparts, 1);
    c->pmark = calloc(c->nparts, 1);
    c->touched = malloc(c->nparts * sizeof *c->touched);
    if (!c->index || !c->ready || !c->fills || !c->fresh_next || !c->gone || !c->pmark ||
        !c->touched) {
        LOG_E("out of memory applying the view");
        exit(1);
    }
}

/* Peers: every server of the view but this one, alive or not; a dead one's
 * connection is closed, and one the scheduler forgot (absent from the view) goes
 * from the list. */
static void view_peers(chain *c, const Pskv__View *v, uint32_t me)
{
    size_t kept = 0;
    for (size_t k = 0; k < c->npeers; k++) {
        if (!member_view_node(v, c->peers[k].id)) {
            chain_peer_close(&c->peers[k]);
            continue;
        }
        c->peers[kept++] = c->peers[k];
    }
    c->npeers = kept;
    for (size_t i = 0; i < v->n_nodes; i++) {
        Pskv__Node *n = v->nodes[i];
        if (n->role != PSKV__ROLE__SERVER || n->id == me)
            continue;
        chain_peer *pp = chain_peer_of(c, n->id);
        if (!pp) {
            chain_peer *g = realloc(c->peers, (c->npeers + 1) * sizeof *g);
            if (!g)
                continue;
            c->peers = g;
            pp = &g[c->npeers++];
            memset(pp, 0, sizeof *pp);
            pp->id = n->id;
            snprintf(pp->host, sizeof pp->host, "%s", n->host ? n->host : "");
            pp->port = (int)n->port;
            snprintf(pp->key, sizeof pp->key, "%s", n->pubkey ? n->pubkey : "");
        }
        pp->alive = !member_node_gone(n); /* not dead, not drained and left */
        if (!pp->alive && pp->sock) {
            /* replaced for good: its connection goes, and what ZeroMQ queued there
             * (linger 0); kept, it would reconnect for ever and hold its buffers */
            chain_peer_close(pp);
        }
    }
}

int chain_view(chain *c)
{
    Pskv__View *v = c->mb->view;
    if (!v || !v->has_partitions || !v->partitions || !v->replicas ||
        v->n_chains != (size_t)v->partitions * v->replicas)
        return 0;
    uint32_t me = c->mb->node_id;
    const Pskv__Node *self = member_view_node(v, me); /* absent: replaced and forgotten */
    if (!self || (self->state && !strcmp(self->state, "dead")))
        return 1;
    uint32_t *old = c->chains;
    int first = !old; /* this server's first view: its place is logged */
    if (!old && v->n_prev_chains == (size_t)v->partitions * v->replicas) {
        /* a resumed job: the members of these chains loaded the partition from
         * their checkpoint files; a server joining a running job: these are the
         * chains before it joined. Any other member is filled like after a death */
        old = malloc(v->n_prev_chains * sizeof *old);
        if (!old) {
            LOG_E("out of memory applying the view");
            exit(1);
        }
        memcpy(old, v->prev_chains, v->n_prev_chains * sizeof *old);
        set_shape(c, v);
        for (size_t i = 0; i < v->n_prev_chains; i++)
            if (old[i] == me) /* loaded here: whole, and handed on if it goes */
                c->ready[i / c->R] = 1;
    }
    if (old && (v->partitions != c->nparts || v->replicas != c->R)) {
        LOG_E("the view changed the partition count or R: ignored");
        return 0;
    }
    size_t cells = (size_t)v->partitions * v->replicas;
    uint32_t *chains = malloc(cells * sizeof *chains);
    if (!chains) {
        LOG_E("out of memory applying the view");
        return 0;
    }
    memcpy(chains, v->chains, cells * sizeof *chains);
    if (!c->index) {
        set_shape(c, v);
    }
    int changed = !old || memcmp(old, chains, cells * sizeof *chains) != 0;
    c->chains = chains;
    if (changed)
        c->place_epoch = c->mb->epoch;
    view_peers(c, v, me);
    /* a worker that finished re-sends nothing: its pushes' ids may go. Not one
     * declared dead: cut off by the network it comes back alive and re-sends what
     * it sent during the cut (its pairs go with its floor, or at the cap) */
    for (size_t i = 0; c->dd && i < v->n_nodes; i++) {
        Pskv__Node *n = v->nodes[i];
        if (n->role == PSKV__ROLE__WORKER && n->state && !strcmp(n->state, "finished"))
            dedupe_set_floor(c->dd, n->id, UINT64_MAX);
    }
    uint32_t heads = 0, holds = 0, fresh = 0;
    for (uint32_t p = 0; p < c->nparts; p++) {
        int idx = -1;
        for (uint32_t j = 0; j < c->R; j++)
            if (chains[(size_t)p * c->R + j] == me)
                idx = (int)j;
        c->index[p] = idx;
        /* copies to, from and for new members (chain_fill.c) */
        int waits = chain_fill_transfer(c, old, p);
        if (idx < 0)
            continue;
        holds++;
        heads += idx == 0;
        fresh += waits;
    }
    chain_fill_drop(c);
    if (changed || first)
        LOG_I("view epoch %llu: heads %u and holds %u of %u partitions (R = %u)%s",
              (unsigned long long)c->mb->epoch, heads, holds, c->nparts, c->R,
              fresh ? "; waiting for copies of new ones" : "");
    if (old && changed) {
        /* copies first: a forward sent again after them is dropped there by its id */
        chain_fill_owed(c);
        chain_fwd_again(c);
    }
    free(old);
    return 0;
}