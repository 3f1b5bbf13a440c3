/* Forwards in flight down the chains, and the acknowledgements coming back up.
 *
 * Each push (or bsp close) this server applied and passes on is one pending
 * entry (chain_pend) in a fixed table of MAX_PEND slots, with one hop per next
 * server it goes to: the rows of the touched partitions whose chain continues
 * there, sent as one REPLICATE. Its request id names the slot, a sequence number
 * and the hop, so a REPLICATE_ACK finds its entry in O(1) and an answer to a hop
 * already sent elsewhere (after a view) is ignored. When every hop is answered
 * the entry answers upstream: PUSH_ACK to the worker (at the head), REPLICATE_ACK
 * to the predecessor, or the close callback (a head's own bsp close). After a
 * placement change every unanswered hop is sent again to the new next server of
 * its partitions. A hop unanswered for CHAIN_RESEND_MS is sent again to the same
 * server (chain_fwd_retry): a server whose lease has lapsed drops what reaches it,
 * and with no new view nothing else would send it again. A full table is
 * back-pressure: the push is refused with PSKV_ENOTREADY and the worker sends it
 * again. */
#define _GNU_SOURCE
#include "chain_fwd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chain_impl.h"
#include "dedupe.h"
#include "grow.h"
#include "half.h"
#include "log.h"
#include "net.h"
#include "pskv_errors.h"
#include "timeutil.h"
#include "wire.h"

#define MAX_PEND 4096 /* forwards waiting for the tail, per server */
#define MAX_FWD 255   /* successors one push is forwarded to */

typedef struct chain_hop {   /* the rows of one push forwarded to one successor */
    uint32_t node;
    vbuf *kb, *vb;     /* where keys and vals live (kb NULL: no keys), lent to ZeroMQ */
    uint64_t *keys;    /* a sparse table's rows */
    uint64_t *runs;    /* a dense table's: (first key, count) pairs, in the Meta */
    size_t nruns, runs_cap;
    float *vals;
    uint64_t n;
    int done;
    uint32_t *parts;   /* a bsp close: the partitions it closes there */
    size_t nparts;
    int64_t sent_ms;   /* when it was last sent */
    int resends;       /* times chain_fwd_retry sent it again */
} chain_hop;

/* The data of a new vbuf of `bytes` (one reference: the hop's) at *b, or NULL. */
static void *hop_buf_new(vbuf **b, size_t bytes)
{
    *b = vbuf_new(bytes);
    return *b ? (*b)->data : NULL;
}

static void pend_free(chain_pend *p)
{
    for (int i = 0; i < p->nfwd; i++) {
        vbuf_unref(NULL, p->fwds[i].kb);
        vbuf_unref(NULL, p->fwds[i].vb);
        free(p->fwds[i].runs);
        free(p->fwds[i].parts);
    }
    free(p->fwds);
    free(p->fnodes);
    free(p->fids);
    free(p->ffloors);
    memset(p, 0, sizeof *p);
}

int chain_fwd_init(chain *c)
{
    c->pend = calloc(MAX_PEND, sizeof *c->pend);
    c->next_seq = 1;
    return c->pend ? 0 : -PSKV_ENOMEM;
}

void chain_fwd_fini(chain *c)
{
    for (size_t i = 0; c->pend && i < MAX_PEND; i++)
        if (c->pend[i].seq)
            pend_free(&c->pend[i]);
    free(c->pend);
    c->pend = NULL;
}

void chain_on_refusal(chain *c, uint64_t (*fn)(uint32_t node, int code)) { c->refused = fn; }
void chain_on_close(chain *c, void (*fn)(uint64_t token, int code)) { c->closed = fn; }
size_t chain_pending(const chain *c) { return c->npend; }

static void send_replicate(chain *c, chain_pend *pd, int fi)
{
    chain_hop *f = &pd->fwds[fi];
    void *s = chain_peer_sock(c, f->node);
    f->sent_ms = tu_now_ms();
    Pskv__Meta m;
    member_meta(c->mb, &m, PSKV__MSG_TYPE__REPLICATE);
    size_t slot = (size_t)(pd - c->pend);
    m.has_request_id = m.has_table_id = m.has_num_keys = m.has_width = 1;
    m.request_id = ((pd->seq << 12 | slot) << 8) | (uint64_t)fi;
    m.table_id = pd->t->id;
    m.num_keys = f->n;
    m.width = pd->t->width;
    if (pd->close) { /* the partitions, the clocks and the pushes folded in */
        m.has_close = m.has_clock = m.has_upto = 1;
        m.close = 1;
        m.clock = pd->clock;
        m.upto = pd->upto;
        m.n_parts = f->nparts;
        m.parts = f->parts;
        m.n_folded_nodes = m.n_folded_ids = m.n_folded_floors = pd->nfolded;
        m.folded_nodes = pd->fnodes;
        m.folded_ids = pd->fids;
        m.folded_floors = pd->ffloors;
        m.has_num_keys = m.has_width = f->n > 0; /* a close with no rows: no frames */
    } else {
        m.has_origin = m.has_origin_id = m.has_clock = 1;
        m.clock = pd->clock; /* the push's: rows are stamped with it (eviction) */
        m.origin = pd->origin;
        m.origin_id = pd->origin_id;
        m.has_floor = pd->floor != 0;
        m.floor = pd->floor;
    }
    if (f->n && pd->t->dense) { /* dense rows go as runs: no keys frame */
        m.has_first_key = 1;
        m.first_key = 0;
        m.n_runs = 2 * f->nruns;
        m.runs = f->runs;
    }
    if (pd->assign) {
        m.has_assign = 1;
        m.assign = 1;
    } else { /* the lr it was applied with: every replica applies it alike */
        m.has_table_lr = 1;
        m.table_lr = pd->lr;
    }
    /* the hop's own rows go without a copy (lent); 16-bit values are packed again */
    zmq_msg_t km, vm, *kp = NULL, *vp = NULL;
    int rc = 0;
    if (f->n && !m.has_first_key) {
        rc = vbuf_lend(&km, f->kb, f->keys, f->n * sizeof(uint64_t));
        kp = rc < 0 ? NULL : &km;
    }
    size_t nv = f->n * pd->t->width;
    if (rc == 0 && f->n && pd->wire && !pd->close) { /* the push's 16-bit values, as they came */
        m.has_wire = 1;
        m.wire = pd->wire;
        m.has_loss_scale = pd->scale != 1.0f;
        m.loss_scale = pd->scale;
        rc = zmq_msg_init_size(&vm, nv * sizeof(uint16_t)) ? -PSKV_ENOMEM : 0;
        if (rc == 0)
            half_pack_scaled((int)pd->wire, zmq_msg_data(&vm), f->vals, nv, pd->scale);
        vp = rc < 0 ? NULL : &vm;
    } else if (rc == 0 && f->n) {
        rc = vbuf_lend(&vm, f->vb, f->vals, nv * sizeof(float));
        vp = rc < 0 ? NULL : &vm;
    }
    if (rc < 0) { /* sent again by chain_fwd_retry */
        if (kp)
            zmq_msg_close(kp);
        LOG_W("out of memory forwarding to server node %u", f->node);
    } else if (!s || wire_send(s, NULL, &m, kp, vp) < 0) {
        LOG_W("cannot forward to server node %u; waiting for a new view", f->node);
    }
}

/* The forward of pd to successor nx among those added since first_new, or -1. */
static int fwd_find(const chain_pend *pd, int first_new, uint32_t nx)
{
    for (int k = first_new; k < pd->nfwd; k++)
        if (pd->fwds[k].node == nx)
            return k;
    return -1;
}

/* The forward of pd to successor nx among those added since first_new, made when
 * there is none yet with room for n rows (their keys too, sparse; a dense table's
 * runs grow as they come) and np partitions. Returns its index or -PSKV_ENOMEM. */
static int fwd_to(chain_pend *pd, int first_new, uint32_t nx, uint64_t n, size_t np, uint32_t wd)
{
    int fi = fwd_find(pd, first_new, nx);
    if (fi >= 0)
        return fi;
    if (pd->nfwd >= MAX_FWD)
        return -PSKV_ENOMEM;
    chain_hop *g = realloc(pd->fwds, (size_t)(pd->nfwd + 1) * sizeof *g);
    if (!g)
        return -PSKV_ENOMEM;
    pd->fwds = g;
    fi = pd->nfwd++;
    memset(&g[fi], 0, sizeof g[fi]);
    g[fi].node = nx;
    int keys = !pd->t->dense;
    g[fi].keys = keys ? hop_buf_new(&g[fi].kb, n * sizeof(uint64_t)) : NULL;
    g[fi].vals = hop_buf_new(&g[fi].vb, n * wd * sizeof(float));
    g[fi].parts = np ? malloc(np * sizeof(uint32_t)) : NULL;
    pd->outstanding++;
    return (!keys || g[fi].keys) && g[fi].vals && (!np || g[fi].parts) ? fi : -PSKV_ENOMEM;
}

/* Appends the piece w of b (rows of one partition) to the forward of the
 * partition's next server (none when it has no next server, or, make 0, no
 * forward was made for it): its keys, or its run, joined to the hop's last run
 * when it follows it. Returns 0 or -PSKV_ENOMEM. */
static int fwd_piece(chain *c, chain_pend *pd, int first_new, int make, const chain_batch *b,
                     const chain_piece *w)
{
    uint32_t wd = pd->t->width, nx = chain_next_of(c, w->p);
    if (!nx)
        return 0;
    int fi = make ? fwd_to(pd, first_new, nx, b->n, 0, wd) : fwd_find(pd, first_new, nx);
    if (fi < 0)
        return make ? fi : 0;
    chain_hop *f = &pd->fwds[fi];
    uint64_t m = w->end - w->i;
    if (f->keys) {
        memcpy(f->keys + f->n, b->keys + w->i, m * sizeof *b->keys);
    } else if (f->nruns && f->runs[2 * f->nruns - 2] + f->runs[2 * f->nruns - 1] == w->first) {
        f->runs[2 * f->nruns - 1] += m;
    } else {
        if (grow_array((void **)&f->runs, &f->runs_cap, 2 * f->nruns + 2, sizeof *f->runs) < 0)
            return -PSKV_ENOMEM;
        f->runs[2 * f->nruns] = w->first;
        f->runs[2 * f->nruns + 1] = m;
        f->nruns++;
    }
    memcpy(f->vals + f->n * wd, b->vals + w->i * wd, m * wd * sizeof(float));
    f->n += m;
    return 0;
}

/* Routes every piece of b to the forward of its partition's next server (make:
 * making the forwards as needed), then sends the forwards made since first_new. */
static int fwd_batch(chain *c, chain_pend *pd, int first_new, int make, const chain_batch *b)
{
    chain_piece w = {0};
    while (chain_piece_next(c, pd->t, b, &w))
        if (fwd_piece(c, pd, first_new, make, b, &w) < 0)
            return -PSKV_ENOMEM;
    for (int k = first_new; k < pd->nfwd; k++)
        send_replicate(c, pd, k);
    return 0;
}

int chain_fwd_rows(chain *c, chain_pend *pd, const chain_batch *b)
{
    return fwd_batch(c, pd, pd->nfwd, 1, b);
}

/* A bsp close's forwards: one per next server of its partitions, each with those
 * partitions and their rows (possibly none: the close still moves their clocks). */
int chain_fwd_close(chain *c, chain_pend *pd, const chain_batch *b, const uint32_t *parts,
                    size_t np)
{
    int first_new = pd->nfwd;
    for (size_t k = 0; k < np; k++) {
        uint32_t nx = chain_next_of(c, parts[k]);
        if (!nx)
            continue;
        int fi = fwd_to(pd, first_new, nx, b->n, np, pd->t->width);
        if (fi < 0)
            return fi;
        pd->fwds[fi].parts[pd->fwds[fi].nparts++] = parts[k];
    }
    return pd->nfwd == first_new ? 0 : fwd_batch(c, pd, first_new, 0, b);
}

chain_pend *chain_pend_new(chain *c)
{
    if (c->npend >= MAX_PEND)
        return NULL;
    for (size_t i = 0; i < MAX_PEND; i++) {
        size_t s = (size_t)(c->next_seq + i) % MAX_PEND;
        if (!c->pend[s].seq) {
            c->pend[s].seq = c->next_seq++ & ((1ULL << 40) - 1);
            if (!c->pend[s].seq)
                c->pend[s].seq = c->next_seq++;
            c->npend++;
            return &c->pend[s];
        }
    }
    return NULL;
}

/* The slot of pd is free again (chain_pend_new's undo). */
void chain_pend_release(chain *c, chain_pend *pd)
{
    pend_free(pd);
    c->npend--;
}

void chain_answer_upstream(chain *c, const chain_pend *pd, int code, const char *why)
{
    Pskv__Meta m;
    Pskv__MsgType type = code ? PSKV__MSG_TYPE__ERROR
                              : pd->upstream_worker ? PSKV__MSG_TYPE__PUSH_ACK
                                                    : PSKV__MSG_TYPE__REPLICATE_ACK;
    member_meta(c->mb, &m, type);
    m.has_request_id = m.has_table_id = 1;
    m.request_id = pd->request_id;
    m.table_id = pd->t ? pd->t->id : 0;
    if (code) {
        m.has_error_code = 1;
        m.error_code = code;
        m.error = (char *)why;
        m.refused = pd->upstream_worker && c->refused ? c->refused(pd->sender, code) : 0;
        m.has_refused = m.refused > 0;
    }
    zmq_msg_t rid;
    zmq_msg_init_size(&rid, pd->ridlen);
    memcpy(zmq_msg_data(&rid), pd->rid, pd->ridlen);
    if (wire_send(c->router, &rid, &m, NULL, NULL) < 0)
        LOG_W("cannot answer node %u: %s", pd->sender, zmq_strerror(errno));
    zmq_msg_close(&rid);
}

/* The answer to whoever waits for pd: a worker, the predecessor, or (CHAIN_UP_CLOSE)
 * this head's bsp engine. */
static void pend_answer(chain *c, chain_pend *pd, int code, const char *why)
{
    if (pd->upstream_worker == CHAIN_UP_CLOSE) {
        if (c->closed)
            c->closed(pd->seq, code);
        return;
    }
    chain_answer_upstream(c, pd, code, why);
}

void chain_pend_done(chain *c, chain_pend *pd)
{
    char why[300];
    if (pd->moved) { /* the new heads have it, or will have it again from its senders */
        if (pd->upstream_worker == CHAIN_UP_WORKER)
            chain_answer_upstream(c, pd, PSKV_ESTALE, "this server left the chains of the "
                                  "push's partitions before their replicas acknowledged it: "
                                  "send it to their new heads");
        else if (pd->upstream_worker == CHAIN_UP_CLOSE && c->closed)
            c->closed(pd->seq, PSKV_ESTALE); /* its held pushes are refused (bsp.c) */
        chain_pend_release(c, pd);
        return;
    }
    if (pd->bad)
        snprintf(why, sizeof why, "the updater of table '%s' made rows NaN or infinite: those "
                 "rows left as they were, the others applied", pd->t ? pd->t->name : "?");
    pend_answer(c, pd, pd->bad ? PSKV_EBADVALUE : 0, pd->bad ? why : NULL);
    chain_pend_release(c, pd);
}

void chain_forget_table(chain *c, const table *t, const char *why)
{
    for (size_t i = 0; c->pend && i < MAX_PEND; i++) {
        chain_pend *pd = &c->pend[i];
        if (!pd->seq || pd->t != t)
            continue;
        if (pd->upstream_worker != CHAIN_UP_CLOSE) /* a close's pushes: bsp_forget's */
            chain_answer_upstream(c, pd, PSKV_ENOTABLE, why);
        chain_pend_release(c, pd);
    }
}

/* pd answers msg's sender: its request id and routing id. */
void chain_pend_reply_to(chain_pend *pd, const wire_msg *msg)
{
    pd->request_id = msg->meta->request_id;
    pd->sender = msg->meta->sender;
    pd->ridlen = msg->has_rid ? zmq_msg_size((zmq_msg_t *)&msg->rid) : 0;
    if (pd->ridlen > sizeof pd->rid)
        pd->ridlen = sizeof pd->rid;
    if (pd->ridlen)
        memcpy(pd->rid, zmq_msg_data((zmq_msg_t *)&msg->rid), pd->ridlen);
}

/* pd becomes a close of clocks [clock, upto) folding the given pushes. */
int chain_pend_close(chain_pend *pd, table *t, int64_t clock, int64_t upto, const uint32_t *fnodes,
                     const uint64_t *fids, const uint64_t *ffloors, size_t nfolded)
{
    pd->t = t;
    pd->close = 1;
    pd->clock = clock;
    pd->upto = upto;
    pd->nfolded = nfolded;
    pd->fnodes = malloc((nfolded ? nfolded : 1) * sizeof *pd->fnodes);
    pd->fids = malloc((nfolded ? nfolded : 1) * sizeof *pd->fids);
    pd->ffloors = malloc((nfolded ? nfolded : 1) * sizeof *pd->ffloors);
    if (!pd->fnodes || !pd->fids || !pd->ffloors)
        return -PSKV_ENOMEM;
    if (nfolded) {
        memcpy(pd->fnodes, fnodes, nfolded * sizeof *fnodes);
        memcpy(pd->fids, fids, nfolded * sizeof *fids);
        memcpy(pd->ffloors, ffloors, nfolded * sizeof *ffloors);
    }
    return 0;
}

static void on_ack(chain *c, chain_peer *peer, wire_msg *msg)
{
    Pskv__Meta *m = msg->meta;
    if (m->type != PSKV__MSG_TYPE__REPLICATE_ACK) {
        LOG_W("server node %u answered a forward with %s: %s", m->sender,
              wire_type_name((int)m->type), m->error ? m->error : "");
        return;
    }
    uint64_t id = m->request_id;
    int fi = (int)(id & 0xff);
    size_t slot = (size_t)((id >> 8) & 0xfff);
    uint64_t seq = id >> 20;
    chain_pend *pd = &c->pend[slot];
    int64_t now = tu_now_ms();
    if (!pd->seq || pd->seq != seq || fi >= pd->nfwd || pd->fwds[fi].done ||
        pd->fwds[fi].node != m->sender) {
        resend_heard(&peer->heard, RESEND_NOTHING, now); /* alive, working */
        return; /* an answer to a forward already re-sent elsewhere or done */
    }
    resend_heard(&peer->heard, pd->fwds[fi].sent_ms, now);
    pd->fwds[fi].done = 1;
    if (--pd->outstanding == 0)
        chain_pend_done(c, pd);
}

int chain_poll_items(chain *c, zmq_pollitem_t *items, int max)
{
    int n = 0;
    for (size_t i = 0; i < c->npeers && n < max; i++) {
        if (c->peers[i].sock)
            items[n++] = (zmq_pollitem_t){c->peers[i].sock, 0, ZMQ_POLLIN, 0};
        if (c->peers[i].mon && n < max)
            items[n++] = (zmq_pollitem_t){c->peers[i].mon, 0, ZMQ_POLLIN, 0};
    }
    return n;
}

/* A connection to a live peer closed: the scheduler is told (PEER_CLOSED), and
 * probes that server (a closed connection alone is no proof of its death). Once
 * per close: the DEALER's reconnects to a dead port close nothing more. */
static void peer_events(chain *c, chain_peer *p)
{
    uint16_t event;
    int32_t fd;
    while (net_monitor_event(p->mon, &event, &fd)) {
        if (event != ZMQ_EVENT_DISCONNECTED || !p->alive || !c->mb->view)
            continue;
        Pskv__Meta m;
        member_meta(c->mb, &m, PSKV__MSG_TYPE__PEER_CLOSED);
        m.has_closed_node = 1;
        m.closed_node = p->id;
        int rc = member_send(c->mb, &m);
        LOG_I("the connection to server node %u (%s:%d) closed: %s", p->id, p->host, p->port,
              rc < 0 ? "could not tell the scheduler" : "told the scheduler");
    }
}

/* 1 when sock is among the n items and the poll found it readable. An empty
 * read costs a pass through ZeroMQ's socket; with R > 1 the loop wakes for
 * every message, and most wakes find the peers' sockets empty. */
static int readable(const zmq_pollitem_t *items, int n, const void *sock)
{
    for (int i = 0; sock && i < n; i++)
        if (items[i].socket == sock)
            return (items[i].revents & ZMQ_POLLIN) != 0;
    return 0;
}

void chain_drain(chain *c, const zmq_pollitem_t *items, int n)
{
    for (size_t i = 0; i < c->npeers; i++)
        if (readable(items, n, c->peers[i].mon))
            peer_events(c, &c->peers[i]);
    for (size_t i = 0; i < c->npeers; i++) {
        if (!readable(items, n, c->peers[i].sock))
            continue;
        for (int budget = 0; budget < 1024; budget++) {
            wire_msg msg;
            char why[200];
            int rc = wire_recv(c->peers[i].sock, 0, &msg, why, sizeof why);
            if (rc == 0)
                on_ack(c, &c->peers[i], &msg);
            else if (rc != -PSKV_ETIMEDOUT)
                LOG_W("dropped a message from server node %u: %s", c->peers[i].id, why);
            wire_msg_close(&msg);
            if (rc == -PSKV_ETIMEDOUT)
                break;
        }
    }
}

void chain_forward_clock(chain *c, uint32_t head, uint32_t from, int rank, int64_t clock)
{
    uint32_t sent[MAX_FWD];
    int nsent = 0;
    for (uint32_t p = 0; p < c->nparts; p++) {
        int i = c->index[p];
        if (chain_members(c, p)[0] != head || i < 0)
            continue;
        /* down the chain it came by only: two chains of one head in opposite
         * orders ([H, B, C] and [H, C, B], as refills after deaths make) would
         * otherwise bounce it between B and C until the next view, a storm that
         * filled the send queues and crowded out the copies (FILL) to new members */
        if (from && (i == 0 || chain_members(c, p)[i - 1] != from))
            continue;
        uint32_t nx = chain_next_of(c, p);
        int dup = !nx;
        for (int k = 0; k < nsent && !dup; k++)
            dup = sent[k] == nx;
        if (dup || nsent == MAX_FWD)
            continue;
        sent[nsent++] = nx;
        void *s = chain_peer_sock(c, nx);
        Pskv__Meta m;
        member_meta(c->mb, &m, PSKV__MSG_TYPE__CLOCK);
        m.has_rank = m.has_clock = m.has_origin_id = 1;
        m.rank = rank;
        m.clock = clock;
        m.origin_id = head;
        if (!s || wire_send(s, NULL, &m, NULL, NULL) < 0)
            LOG_W("cannot forward a clock to server node %u", nx);
    }
}

/* 1 when pd forwards a push whose worker has had its answer (its id is below the
 * worker's floor: the push went down the chain as another forward, sent again by
 * the worker, or failed): then pd is let go, unanswered. Sent again now it could
 * reach a server that forgot the id and apply the push twice. */
static int pend_obsolete(chain *c, chain_pend *pd)
{
    if (pd->close || !c->dd || pd->origin_id >= dedupe_floor(c->dd, pd->origin))
        return 0;
    c->obsolete++;
    chain_pend_release(c, pd);
    return 1;
}

/* 1 when some partition a bsp close's hop f closes is no longer held here. */
static int parts_left(const chain *c, const chain_hop *f)
{
    for (size_t k = 0; k < f->nparts; k++)
        if (c->index[f->parts[k]] < 0)
            return 1;
    return 0;
}

/* The rows of hop f as a batch. */
static chain_batch hop_batch(const chain_hop *f)
{
    return (chain_batch){f->keys, f->runs, f->nruns, f->vals, f->n};
}

/* 1 when some row of hop f is in a partition this server no longer holds. */
static int hop_left(const chain *c, const chain_pend *pd, const chain_hop *f)
{
    chain_batch b = hop_batch(f);
    chain_piece w = {0};
    while (chain_piece_next(c, pd->t, &b, &w))
        if (c->index[w.p] < 0)
            return 1;
    return 0;
}

/* After a placement change, sends again every forward still unanswered, to the
 * next server of its partitions in the new view: the old target may have died,
 * and a live one drops forwards planned on an older placement (it could no
 * longer tell whether they are its to apply). A copy it did apply is dropped
 * there by its id. Rows of partitions this server left (a drained server) go
 * nowhere: the push is refused once the rest is answered (chain_pend_done), and
 * its sender sends it to the new heads, which drop what they already applied. */
void chain_fwd_again(chain *c)
{
    size_t moved = 0;
    for (size_t s = 0; s < MAX_PEND; s++) {
        chain_pend *pd = &c->pend[s];
        if (!pd->seq || pend_obsolete(c, pd))
            continue;
        int n0 = pd->nfwd;
        for (int fi = 0; fi < n0; fi++) {
            chain_hop *f = &pd->fwds[fi];
            if (f->done)
                continue;
            f->done = 1; /* replaced by the forwards below */
            pd->outstanding--;
            if (!pd->moved && (pd->close ? parts_left(c, f) : hop_left(c, pd, f))) {
                pd->moved = 1;
                moved++;
            }
            chain_batch b = hop_batch(f);
            int rc = pd->close ? chain_fwd_close(c, pd, &b, f->parts, f->nparts)
                               : chain_fwd_rows(c, pd, &b);
            if (rc < 0)
                LOG_E("out of memory forwarding again");
            /* chain_fwd_rows may move pd->fwds */
        }
        if (pd->outstanding == 0)
            chain_pend_done(c, pd);
    }
    if (moved)
        LOG_I("%zu pushes or bsp closes applied here still wait for replicas of partitions "
              "this server left: refused once the rest is answered, sent to the new heads",
              moved);
}


/* Sends again, to the same server, every hop due by resend.h's rule (after
 * CHAIN_RESEND_MS, then 2, 4, 8 times as long; never while that server answers
 * hops sent before it). Each hop of a placement goes to the next server of its
 * partitions in it (after a placement change chain_fwd_again has replaced the
 * hops). Looks at most every CHAIN_RESEND_MS / 4. A copy the server already
 * applied is dropped there by its id (a push) or its clocks (a bsp close), and
 * answered. */
void chain_fwd_retry(chain *c)
{
    static const resend_peer unheard; /* a hop to a node with no peer entry */
    int64_t now = tu_now_ms();
    if (!c->npend || now < c->next_retry_ms)
        return;
    c->next_retry_ms = now + CHAIN_RESEND_MS / 4;
    uint64_t again = 0;
    for (size_t s = 0; s < MAX_PEND; s++) {
        chain_pend *pd = &c->pend[s];
        if (!pd->seq || pend_obsolete(c, pd))
            continue;
        for (int fi = 0; fi < pd->nfwd; fi++) {
            chain_hop *f = &pd->fwds[fi];
            if (f->done)
                continue;
            const chain_peer *p = chain_peer_of(c, f->node);
            if (!resend_due(p ? &p->heard : &unheard, f->sent_ms, f->resends, CHAIN_RESEND_MS, now))
                continue;
            send_replicate(c, pd, fi);
            f->resends++;
            again++;
        }
    }
    if (again)
        LOG_I("%llu forwards sent again: unanswered for %d ms", (unsigned long long)again,
              CHAIN_RESEND_MS);
    c->resent += again;
}

uint64_t chain_resent(const chain *c) { return c->resent; }
uint64_t chain_obsolete(const chain *c) { return c->obsolete; }
