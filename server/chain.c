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
#include "pskv_errors.h"
#include "ring.h"
#include "timeutil.h"

#define MAX_PEND 4096 /* forwards waiting for the tail, per server */
#define MAX_FWD 255   /* successors one push is forwarded to */

typedef struct fwd {   /* the rows of one push forwarded to one successor */
    uint32_t node;
    uint64_t *keys;
    float *vals;
    uint64_t n;
    int done;
    uint32_t *parts;   /* a bsp close: the partitions it closes there */
    size_t nparts;
} fwd;

enum { UP_SERVER, UP_WORKER, UP_CLOSE };

typedef struct chain_pend {  /* a push (or bsp close) applied here, waiting for its successors */
    uint64_t seq;      /* 0 = free slot */
    int upstream_worker; /* UP_WORKER: answer PUSH_ACK to a worker; UP_SERVER:
                            REPLICATE_ACK upstream; UP_CLOSE: this head's own bsp
                            close, reported through the close callback */
    int close;         /* a bsp close of clocks [clock, upto) */
    int64_t clock, upto;
    uint32_t *fnodes;  /* the pushes folded into the close: (node, dedupe id, floor) */
    uint64_t *fids, *ffloors;
    size_t nfolded;
    unsigned char rid[256];
    size_t ridlen;
    uint64_t request_id;
    uint32_t sender;
    table *t;
    int assign;
    uint32_t origin;
    uint64_t origin_id, floor;
    fwd *fwds;
    int nfwd, outstanding;
} pend;

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
    c->pend = calloc(MAX_PEND, sizeof *c->pend);
    c->next_seq = 1;
    if (!c->pend) {
        free(c);
        return NULL;
    }
    return c;
}

static void pend_free(pend *p)
{
    for (int i = 0; i < p->nfwd; i++) {
        free(p->fwds[i].keys);
        free(p->fwds[i].vals);
        free(p->fwds[i].parts);
    }
    free(p->fwds);
    free(p->fnodes);
    free(p->fids);
    free(p->ffloors);
    memset(p, 0, sizeof *p);
}

void chain_destroy(chain **c_p)
{
    if (!c_p || !*c_p)
        return;
    chain *c = *c_p;
    for (size_t i = 0; i < MAX_PEND; i++)
        if (c->pend[i].seq)
            pend_free(&c->pend[i]);
    for (size_t i = 0; i < c->npeers; i++)
        if (c->peers[i].sock)
            zmq_close(c->peers[i].sock);
    dedupe_destroy(&c->dd);
    free(c->pend);
    free(c->peers);
    free(c->chains);
    free(c->index);
    free(c->ready);
    free(c->fills);
    free(c->fresh_next);
    free(c->pmark);
    free(c->touched);
    free(c->segs);
    free(c->keys);
    free(c->skip);
    free(c);
    *c_p = NULL;
}

uint32_t chain_replicas(const chain *c) { return c->R ? c->R : 1; }
uint32_t chain_nparts(const chain *c) { return c->nparts; }
int chain_holds(const chain *c, uint32_t p) { return p < c->nparts && c->index[p] >= 0 && c->ready[p]; }

void chain_dense_span(const chain *c, const table *t, uint32_t p, uint64_t *first,
                      uint64_t *count)
{
    ring_dense_span(ring_partition_begin(p, c->nparts), ring_partition_end(p, c->nparts), t->size,
                    first, count);
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

void chain_on_refusal(chain *c, uint64_t (*fn)(uint32_t node, int code)) { c->refused = fn; }
void chain_on_close(chain *c, void (*fn)(uint64_t token, int code)) { c->closed = fn; }
size_t chain_pending(const chain *c) { return c->npend; }
uint64_t chain_dedupe_forced(const chain *c) { return c->dd ? dedupe_forced(c->dd) : 0; }

uint32_t chain_partition_of(const chain *c, const table *t, uint64_t key)
{
    return chain_part(c, t, key);
}

uint32_t chain_next(const chain *c, uint32_t p) { return p < c->nparts ? chain_next_of(c, p) : 0; }

int chain_heads(const chain *c, uint32_t p) { return chain_holds(c, p) && c->index[p] == 0; }

static chain_peer *peer_of(chain *c, uint32_t id)
{
    for (size_t i = 0; i < c->npeers; i++)
        if (c->peers[i].id == id)
            return &c->peers[i];
    return NULL;
}

void *chain_peer_sock(chain *c, uint32_t id)
{
    chain_peer *p = peer_of(c, id);
    if (!p)
        return NULL;
    if (!p->sock) {
        p->sock = net_socket(c->ctx, ZMQ_DEALER, c->max_message, 0);
        /* never wait on a peer: one that died (or cannot keep up) would stall this
         * server's loop and its heartbeats. A forward that cannot be queued is sent
         * again after the next view, or re-sent by the worker. */
        int nowait = 0;
        if (p->sock)
            zmq_setsockopt(p->sock, ZMQ_SNDTIMEO, &nowait, sizeof nowait);
        if (p->sock && net_connect(p->sock, p->host, p->port) < 0) {
            LOG_W("cannot dial server node %u at %s:%d: %s", id, p->host, p->port,
                  zmq_strerror(errno));
            zmq_close(p->sock);
            p->sock = NULL;
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
    uint32_t p = ring_partition_of(ring_dense_pos(first, t->size), c->nparts);
    for (; p < c->nparts; p++) {
        uint64_t pf, pc;
        ring_dense_span(ring_partition_begin(p, c->nparts), ring_partition_end(p, c->nparts),
                        t->size, &pf, &pc);
        if (pf >= end)
            break;
        uint64_t lo = pf > first ? pf : first, hi = pf + pc < end ? pf + pc : end;
        if (lo >= hi)
            continue;
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

/* ---- applying and forwarding --------------------------------------------- */

/* Applies rows not marked in skip, batching consecutive dense keys into runs. */
static int apply_rows(table *t, const uint64_t *keys, const float *vals, uint64_t n,
                      const uint8_t *skip, int assign)
{
    uint32_t wd = t->width;
    for (uint64_t i = 0; i < n;) {
        uint64_t j = i + 1;
        while (j < n && skip[j] == skip[i] && (!t->dense || keys[j] == keys[j - 1] + 1))
            j++;
        if (!skip[i]) {
            int rc;
            if (t->dense)
                rc = assign ? shard_assign(t->sh, NULL, keys[i], j - i, vals + i * wd)
                            : shard_push(t->sh, NULL, keys[i], j - i, vals + i * wd);
            else
                rc = assign ? shard_assign(t->sh, keys + i, 0, j - i, vals + i * wd)
                            : shard_push(t->sh, keys + i, 0, j - i, vals + i * wd);
            if (rc < 0)
                return rc;
        }
        i = j;
    }
    return 0;
}

/* Marks in c->skip the rows whose partition already applied (origin, id), and
 * records the id for the others. check 0: only record (a first send). */
static int dedupe_rows(chain *c, table *t, const uint64_t *keys, uint64_t n, uint32_t origin,
                       uint64_t id, int check)
{
    if (grow_array((void **)&c->skip, &c->skip_cap, n ? n : 1, 1) < 0)
        return -PSKV_ENOMEM;
    if (!c->dd && !(c->dd = dedupe_new(c->nparts)))
        return -PSKV_ENOMEM;
    /* a partition's rows of one message are applied together: its record is
     * looked up (and the id recorded) once per message */
    uint32_t ntouched = 0;
    int rc = 0;
    chain_cursor pc = {0, 0, 0};
    for (uint64_t i = 0; i < n; i++) {
        uint32_t p = chain_part_at(c, t, keys[i], &pc);
        if (!c->pmark[p]) {
            int seen = check && dedupe_seen(c->dd, p, origin, id);
            if (!seen && dedupe_record(c->dd, p, origin, id) < 0)
                rc = -PSKV_ENOMEM;
            c->pmark[p] = seen ? 2 : 1;
            c->touched[ntouched++] = p;
        }
        c->skip[i] = c->pmark[p] == 2;
    }
    for (uint32_t k = 0; k < ntouched; k++)
        c->pmark[c->touched[k]] = 0;
    return rc;
}

static void send_replicate(chain *c, pend *pd, int fi)
{
    fwd *f = &pd->fwds[fi];
    void *s = chain_peer_sock(c, f->node);
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
        /* dense rows are the spans of its partitions: no keys frame */
        m.has_first_key = f->n > 0 && pd->t->dense;
        m.first_key = 0;
    } else {
        m.has_origin = m.has_origin_id = 1;
        m.origin = pd->origin;
        m.origin_id = pd->origin_id;
        m.has_floor = pd->floor != 0;
        m.floor = pd->floor;
    }
    if (pd->assign) {
        m.has_assign = 1;
        m.assign = 1;
    }
    zmq_msg_t km, vm, *kp = NULL, *vp = NULL;
    if (f->n && !m.has_first_key) {
        zmq_msg_init_size(&km, f->n * sizeof(uint64_t));
        memcpy(zmq_msg_data(&km), f->keys, f->n * sizeof(uint64_t));
        kp = &km;
    }
    if (f->n) {
        zmq_msg_init_size(&vm, f->n * pd->t->width * sizeof(float));
        memcpy(zmq_msg_data(&vm), f->vals, f->n * pd->t->width * sizeof(float));
        vp = &vm;
    }
    if (!s || wire_send(s, NULL, &m, kp, vp) < 0)
        LOG_W("cannot forward to server node %u; waiting for a new view", f->node);
}

/* The forward of pd to successor nx among those added since first_new, or -1. */
static int fwd_find(const pend *pd, int first_new, uint32_t nx)
{
    for (int k = first_new; k < pd->nfwd; k++)
        if (pd->fwds[k].node == nx)
            return k;
    return -1;
}

/* The forward of pd to successor nx among those added since first_new, made when
 * there is none yet with room for n rows (their keys too unless a dense close's,
 * whose rows are its partitions' spans) and np partitions. Returns its index or
 * -PSKV_ENOMEM. */
static int fwd_to(pend *pd, int first_new, uint32_t nx, uint64_t n, size_t np, uint32_t wd)
{
    int fi = fwd_find(pd, first_new, nx);
    if (fi >= 0)
        return fi;
    if (pd->nfwd >= MAX_FWD)
        return -PSKV_ENOMEM;
    fwd *g = realloc(pd->fwds, (size_t)(pd->nfwd + 1) * sizeof *g);
    if (!g)
        return -PSKV_ENOMEM;
    pd->fwds = g;
    fi = pd->nfwd++;
    memset(&g[fi], 0, sizeof g[fi]);
    g[fi].node = nx;
    int keys = !(pd->close && pd->t->dense);
    g[fi].keys = keys ? malloc((n ? n : 1) * sizeof(uint64_t)) : NULL;
    g[fi].vals = malloc((n ? n : 1) * wd * sizeof(float));
    g[fi].parts = np ? malloc(np * sizeof(uint32_t)) : NULL;
    pd->outstanding++;
    return (!keys || g[fi].keys) && g[fi].vals && (!np || g[fi].parts) ? fi : -PSKV_ENOMEM;
}

/* Appends the rows [i, end) of one partition (p) to the forward of its successor
 * (none when it has no next server, or, make 0, no forward was made for it). */
static int fwd_run(chain *c, pend *pd, int first_new, int make, const uint64_t *keys,
                   const float *vals, uint64_t i, uint64_t end, uint64_t n, uint32_t p)
{
    uint32_t wd = pd->t->width, nx = chain_next_of(c, p);
    if (!nx)
        return 0;
    int fi = make ? fwd_to(pd, first_new, nx, n, 0, wd) : fwd_find(pd, first_new, nx);
    if (fi < 0)
        return make ? fi : 0;
    fwd *f = &pd->fwds[fi];
    if (f->keys) /* none for a dense close: its rows are its partitions' spans */
        memcpy(f->keys + f->n, keys + i, (end - i) * sizeof *keys);
    memcpy(f->vals + f->n * wd, vals + i * wd, (end - i) * wd * sizeof(float));
    f->n += end - i;
    return 0;
}

/* Adds forwards for the rows whose partition has a next server, grouped by it. */
static int forward_rows(chain *c, pend *pd, const uint64_t *keys, const float *vals, uint64_t n)
{
    int first_new = pd->nfwd;
    chain_cursor pc = {0, 0, 0};
    uint32_t p;
    for (uint64_t i = 0, end; i < n; i = end) {
        end = chain_run_end(c, pd->t, keys, i, n, &pc, &p);
        if (fwd_run(c, pd, first_new, 1, keys, vals, i, end, n, p) < 0)
            return -PSKV_ENOMEM;
    }
    for (int k = first_new; k < pd->nfwd; k++)
        send_replicate(c, pd, k);
    return 0;
}

/* A bsp close's forwards: one per next server of its partitions, each with those
 * partitions and their rows (possibly none: the close still moves their clocks). */
static int forward_close(chain *c, pend *pd, const uint64_t *keys, const float *vals, uint64_t n,
                         const uint32_t *parts, size_t np)
{
    int first_new = pd->nfwd;
    for (size_t k = 0; k < np; k++) {
        uint32_t nx = chain_next_of(c, parts[k]);
        if (!nx)
            continue;
        int fi = fwd_to(pd, first_new, nx, n, np, pd->t->width);
        if (fi < 0)
            return fi;
        pd->fwds[fi].parts[pd->fwds[fi].nparts++] = parts[k];
    }
    if (pd->nfwd == first_new)
        return 0; /* the tail: nothing goes on */
    if (pd->t->dense && n) { /* whole partition spans, in list order (close_replicate) */
        uint64_t off = 0, pf, pn;
        for (size_t k = 0; k < np; k++, off += pn) {
            chain_dense_span(c, pd->t, parts[k], &pf, &pn);
            fwd_run(c, pd, first_new, 0, keys, vals, off, off + pn, n, parts[k]);
        }
    } else {
        chain_cursor pc = {0, 0, 0};
        uint32_t p;
        for (uint64_t i = 0, end; i < n; i = end) {
            end = chain_run_end(c, pd->t, keys, i, n, &pc, &p);
            fwd_run(c, pd, first_new, 0, keys, vals, i, end, n, p);
        }
    }
    for (int k = first_new; k < pd->nfwd; k++)
        send_replicate(c, pd, k);
    return 0;
}

static pend *pend_new(chain *c)
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

/* The slot of pd is free again (pend_new's undo). */
static void pend_release(chain *c, pend *pd)
{
    pend_free(pd);
    c->npend--;
}

static void answer_upstream(chain *c, pend *pd, int code, const char *why)
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

/* The answer to whoever waits for pd: a worker, the predecessor, or (UP_CLOSE)
 * this head's bsp engine. */
static void pend_answer(chain *c, pend *pd, int code, const char *why)
{
    if (pd->upstream_worker == UP_CLOSE) {
        if (c->closed)
            c->closed(pd->seq, code);
        return;
    }
    answer_upstream(c, pd, code, why);
}

static void pend_done(chain *c, pend *pd)
{
    pend_answer(c, pd, 0, NULL);
    pend_release(c, pd);
}

/* pd answers msg's sender: its request id and routing id. */
static void pend_reply_to(pend *pd, const wire_msg *msg)
{
    pd->request_id = msg->meta->request_id;
    pd->sender = msg->meta->sender;
    pd->ridlen = msg->has_rid ? zmq_msg_size((zmq_msg_t *)&msg->rid) : 0;
    if (pd->ridlen > sizeof pd->rid)
        pd->ridlen = sizeof pd->rid;
    if (pd->ridlen)
        memcpy(pd->rid, zmq_msg_data((zmq_msg_t *)&msg->rid), pd->ridlen);
}

/* The common path of a push from a worker and a forward from a predecessor. */
static void apply_and_forward(chain *c, table *t, wire_msg *msg, const uint64_t *keys,
                              uint64_t n, int upstream_worker, int check)
{
    Pskv__Meta *r = msg->meta;
    uint32_t origin = upstream_worker ? r->sender : r->origin;
    uint64_t origin_id = upstream_worker ? (r->has_origin_id ? r->origin_id : r->request_id)
                                         : r->origin_id;
    int assign = r->has_assign && r->assign;
    if (r->has_floor && (c->dd || (c->dd = dedupe_new(c->nparts))))
        dedupe_set_floor(c->dd, origin, r->floor);
    pend tmp;
    memset(&tmp, 0, sizeof tmp);
    int rc = dedupe_rows(c, t, keys, n, origin, origin_id, check);
    if (rc == 0)
        rc = apply_rows(t, keys, msg->vals, n, c->skip, assign);
    pend *pd = rc == 0 ? pend_new(c) : NULL;
    if (!pd) {
        tmp.upstream_worker = upstream_worker;
        tmp.t = t;
        pend_reply_to(&tmp, msg);
        /* back-pressure: the worker tries again shortly (PSKV_ENOTREADY) */
        answer_upstream(c, &tmp, rc < 0 ? -rc : PSKV_ENOTREADY,
                        rc < 0 ? "out of memory applying the push"
                               : "too many pushes waiting for their replicas; retry");
        return;
    }
    pd->upstream_worker = upstream_worker;
    pd->t = t;
    pd->assign = assign;
    pd->origin = origin;
    pd->origin_id = origin_id;
    pd->floor = r->has_floor ? r->floor : 0;
    pend_reply_to(pd, msg);
    /* every row goes on, applied here or not: a re-sent push reaches the tail */
    if (forward_rows(c, pd, keys, msg->vals, n) < 0) {
        answer_upstream(c, pd, PSKV_ENOMEM, "out of memory forwarding the push");
        pend_release(c, pd);
        return;
    }
    if (pd->outstanding == 0)
        pend_done(c, pd);
}

void chain_push(chain *c, table *t, wire_msg *msg, const rowset *rs)
{
    const uint64_t *keys = rs->keys;
    if (!keys) { /* dense runs travel down the chain as explicit indices */
        if (grow_array((void **)&c->keys, &c->keys_cap, rs->n ? rs->n : 1, sizeof *c->keys) < 0) {
            pend tmp = {0};
            tmp.upstream_worker = UP_WORKER;
            tmp.t = t;
            pend_reply_to(&tmp, msg);
            answer_upstream(c, &tmp, PSKV_ENOMEM, "out of memory");
            return;
        }
        uint64_t at = 0;
        if (!rs->segs) {
            for (uint64_t i = 0; i < rs->n; i++)
                c->keys[at++] = rs->first + i;
        } else {
            for (size_t s = 0; s < rs->nsegs; s++)
                for (uint64_t i = 0; i < rs->segs[2 * s + 1]; i++)
                    c->keys[at++] = rs->segs[2 * s] + i;
        }
        keys = c->keys;
    }
    apply_and_forward(c, t, msg, keys, rs->n, 1, msg->meta->has_resend && msg->meta->resend);
}

/* pd becomes a close of clocks [clock, upto) folding the given pushes. */
static int pend_close(pend *pd, table *t, int64_t clock, int64_t upto, const uint32_t *fnodes,
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

int64_t chain_close(chain *c, table *t, int64_t clock, int64_t upto, const uint64_t *keys,
                    const float *vals, uint64_t n, const uint32_t *parts, size_t np,
                    const uint32_t *fnodes, const uint64_t *fids, const uint64_t *ffloors,
                    size_t nfolded)
{
    int any = 0;
    for (size_t k = 0; k < np && !any; k++)
        any = chain_next_of(c, parts[k]) != 0;
    if (!any)
        return 0;
    pend *pd = pend_new(c);
    if (!pd)
        return -PSKV_ENOTREADY;
    pd->upstream_worker = UP_CLOSE;
    int64_t token = (int64_t)pd->seq;
    if (pend_close(pd, t, clock, upto, fnodes, fids, ffloors, nfolded) < 0 ||
        forward_close(c, pd, keys, vals, n, parts, np) < 0) {
        pend_release(c, pd);
        return -PSKV_ENOMEM;
    }
    if (pd->outstanding == 0) { /* nothing could be queued: reported at once */
        pend_release(c, pd);
        return 0;
    }
    return token;
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

/* Partitions of the dense run [first, first + n): calls dedupe_record on each. */
static int record_run(chain *c, table *t, uint64_t first, uint64_t n, uint32_t origin,
                      uint64_t id)
{
    uint32_t p = chain_part(c, t, first), last = chain_part(c, t, first + n - 1);
    for (; p <= last; p++)
        if (dedupe_record(c->dd, p, origin, id) < 0)
            return -PSKV_ENOMEM;
    return 0;
}

int chain_record(chain *c, table *t, const rowset *rs, uint32_t origin, uint64_t id,
                 uint64_t floor)
{
    if (!c->dd && !(c->dd = dedupe_new(c->nparts)))
        return -PSKV_ENOMEM;
    if (floor)
        dedupe_set_floor(c->dd, origin, floor);
    if (rs->keys)
        return dedupe_rows(c, t, rs->keys, rs->n, origin, id, 0);
    if (!rs->segs)
        return rs->n ? record_run(c, t, rs->first, rs->n, origin, id) : 0;
    for (size_t i = 0; i < rs->nsegs; i++)
        if (record_run(c, t, rs->segs[2 * i], rs->segs[2 * i + 1], origin, id) < 0)
            return -PSKV_ENOMEM;
    return 0;
}

/* Checks a bsp close from the predecessor against what this replica holds and
 * marks its partitions (pmark 1: takes the rows, 2: already past them; listed in
 * touched, *nt of them) and, sparse, which rows to skip. Returns 0 or -1 (logged). */
static int close_check(chain *c, table *t, const wire_msg *msg, const int64_t *pc, uint32_t *nt)
{
    const Pskv__Meta *r = msg->meta;
    for (size_t k = 0; k < r->n_parts; k++) {
        uint32_t p = r->parts[k];
        if (p >= c->nparts || c->index[p] <= 0 || !c->ready[p] || c->pmark[p]) {
            LOG_W("dropped a bsp close of table '%s' from node %u: partition %u is not "
                  "replicated here in view epoch %llu (or listed twice)", t->name, r->sender, p,
                  (unsigned long long)c->mb->epoch);
            return -1;
        }
        if (pc[p] < r->clock) {
            /* a close missed: applying this one would skip it. Left unanswered,
             * the head waits (and sends again after the next view) */
            LOG_E("bsp close of clocks %lld..%lld of table '%s', partition %u, from node %u: "
                  "this replica has closed only clocks below %lld; not applied",
                  (long long)r->clock, (long long)r->upto - 1, t->name, p, r->sender,
                  (long long)pc[p]);
            return -1;
        }
        c->pmark[p] = pc[p] < r->upto ? 1 : 2;
        c->touched[(*nt)++] = p;
    }
    if (t->dense) {
        /* the rows are the whole spans of the listed partitions, in list order (empty
         * spans left out), without a keys frame */
        uint64_t rows = 0, pf, pn;
        for (size_t k = 0; msg->nkeys && k < r->n_parts; k++, rows += pn)
            chain_dense_span(c, t, r->parts[k], &pf, &pn);
        if (msg->nkeys && (msg->keys || !r->has_first_key || rows != msg->nkeys)) {
            LOG_W("dropped a bsp close from node %u: %llu dense rows (with keys: %d) for "
                  "partitions of %llu", r->sender, (unsigned long long)msg->nkeys,
                  msg->keys != NULL, (unsigned long long)rows);
            return -1;
        }
    } else {
        if (grow_array((void **)&c->skip, &c->skip_cap, msg->nkeys ? msg->nkeys : 1, 1) < 0)
            return -1;
        chain_cursor cur = {0, 0, 0};
        uint32_t p;
        for (uint64_t i = 0, end; i < msg->nkeys; i = end) {
            end = chain_run_end(c, t, msg->keys, i, msg->nkeys, &cur, &p); /* one sparse row */
            if (!c->pmark[p]) {
                LOG_W("dropped a bsp close from node %u: key %llu is outside its partitions",
                      r->sender, (unsigned long long)msg->keys[i]);
                return -1;
            }
            memset(c->skip + i, c->pmark[p] == 2, end - i);
        }
    }
    if (msg->nvals && !upd_all_finite(msg->vals, msg->nvals)) {
        LOG_W("dropped a bsp close from node %u: non-finite values", r->sender);
        return -1;
    }
    return 0;
}

/* Applies a checked close's rows to the partitions marked 1, span by span (dense)
 * as the head applied them. Returns 0 or -1 (logged). */
static int close_apply(chain *c, table *t, const wire_msg *msg)
{
    const Pskv__Meta *r = msg->meta;
    int rc = 0;
    if (t->dense) {
        uint64_t off = 0, pf, pn;
        for (size_t k = 0; msg->nkeys && k < r->n_parts && rc == 0; k++, off += pn) {
            chain_dense_span(c, t, r->parts[k], &pf, &pn);
            if (pn && c->pmark[r->parts[k]] == 1)
                rc = shard_push(t->sh, NULL, pf, pn, msg->vals + off * t->width);
        }
    } else if (msg->nkeys) {
        rc = apply_rows(t, msg->keys, msg->vals, msg->nkeys, c->skip, 0);
    }
    if (rc < 0)
        LOG_E("out of memory applying a bsp close of table '%s'", t->name);
    return rc < 0 ? -1 : 0;
}

/* A bsp close from the predecessor: each listed partition at a clock in
 * [clock, upto) takes the rows and moves to upto, one already there skips them;
 * the folded pushes' ids are recorded; then on down the chain like a push. */
static void close_replicate(chain *c, table *t, wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    int64_t *pc = table_closed(t, c->nparts);
    if (t->model != CONS_BSP || !r->has_clock || !r->has_upto || r->upto <= r->clock ||
        !r->n_parts || r->n_folded_ids != r->n_folded_nodes ||
        (msg->nkeys && (r->width != t->width || (!t->dense && !msg->keys))) ||
        r->n_folded_floors != r->n_folded_nodes || !pc) {
        LOG_W("dropped a bsp close from node %u: not a bsp table, or malformed clocks, "
              "partitions, ids, width or keys", r->sender);
        return;
    }
    uint32_t nt = 0;
    int ok = close_check(c, t, msg, pc, &nt) == 0 &&
             (c->dd || (c->dd = dedupe_new(c->nparts))) && close_apply(c, t, msg) == 0;
    for (size_t j = 0; ok && j < r->n_folded_nodes; j++)
        dedupe_set_floor(c->dd, r->folded_nodes[j], r->folded_floors[j]);
    for (uint32_t k = 0; k < nt; k++) {
        uint32_t p = c->touched[k];
        if (ok && c->pmark[p] == 1)
            pc[p] = r->upto;
        for (size_t j = 0; ok && j < r->n_folded_nodes; j++)
            if (dedupe_record(c->dd, p, r->folded_nodes[j], r->folded_ids[j]) < 0)
                LOG_W("out of memory recording a folded push id");
        c->pmark[p] = 0;
    }
    if (!ok)
        return;
    pend *pd = pend_new(c);
    if (!pd || pend_close(pd, t, r->clock, r->upto, r->folded_nodes, r->folded_ids,
                          r->folded_floors, r->n_folded_nodes) < 0) {
        /* applied here; the head sends it again after the next view */
        LOG_E("cannot forward a bsp close of table '%s': too many forwards waiting or out "
              "of memory", t->name);
        if (pd)
            pend_release(c, pd);
        return;
    }
    pd->upstream_worker = UP_SERVER;
    pend_reply_to(pd, msg);
    if (forward_close(c, pd, msg->keys, msg->vals, msg->nkeys, r->parts, r->n_parts) < 0)
        LOG_E("out of memory forwarding a bsp close of table '%s'", t->name);
    if (pd->outstanding == 0)
        pend_done(c, pd);
}

void chain_replicate(chain *c, wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    table *t = r->has_table_id ? tables_find(c->tables, r->table_id) : NULL;
    if (t && r->has_close && r->close) {
        close_replicate(c, t, msg);
        return;
    }
    if (!t || r->width != t->width || !msg->keys || !r->has_origin || !r->has_origin_id) {
        LOG_W("dropped a REPLICATE from node %u: unknown table, wrong width or no ids",
              r->sender);
        return;
    }
    chain_cursor pc = {0, 0, 0};
    for (uint64_t i = 0; i < msg->nkeys; i++) {
        uint64_t k = msg->keys[i];
        uint32_t p = t->dense && k >= t->size ? UINT32_MAX : chain_part_at(c, t, k, &pc);
        if (p == UINT32_MAX || c->index[p] <= 0) {
            LOG_W("dropped a REPLICATE from node %u: key %llu of table '%s' is not replicated "
                  "here in view epoch %llu", r->sender, (unsigned long long)k, t->name,
                  (unsigned long long)c->mb->epoch);
            return;
        }
    }
    if (!upd_all_finite(msg->vals, msg->nvals)) {
        LOG_W("dropped a REPLICATE from node %u: non-finite values", r->sender);
        return;
    }
    apply_and_forward(c, t, msg, msg->keys, msg->nkeys, 0, 1);
}

static void on_ack(chain *c, wire_msg *msg)
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
    pend *pd = &c->pend[slot];
    if (!pd->seq || pd->seq != seq || fi >= pd->nfwd || pd->fwds[fi].done ||
        pd->fwds[fi].node != m->sender)
        return; /* an answer to a forward already re-sent elsewhere or done */
    pd->fwds[fi].done = 1;
    if (--pd->outstanding == 0)
        pend_done(c, pd);
}

int chain_poll_items(chain *c, zmq_pollitem_t *items, int max)
{
    int n = 0;
    for (size_t i = 0; i < c->npeers && n < max; i++)
        if (c->peers[i].sock)
            items[n++] = (zmq_pollitem_t){c->peers[i].sock, 0, ZMQ_POLLIN, 0};
    return n;
}

void chain_drain(chain *c)
{
    for (size_t i = 0; i < c->npeers; i++) {
        if (!c->peers[i].sock)
            continue;
        for (int budget = 0; budget < 1024; budget++) {
            wire_msg msg;
            char why[200];
            int rc = wire_recv(c->peers[i].sock, 0, &msg, why, sizeof why);
            if (rc == 0)
                on_ack(c, &msg);
            else if (rc != -PSKV_ETIMEDOUT)
                LOG_W("dropped a message from server node %u: %s", c->peers[i].id, why);
            wire_msg_close(&msg);
            if (rc == -PSKV_ETIMEDOUT)
                break;
        }
    }
}

void chain_forward_clock(chain *c, uint32_t head, int rank, int64_t clock)
{
    uint32_t sent[MAX_FWD];
    int nsent = 0;
    for (uint32_t p = 0; p < c->nparts; p++) {
        if (chain_members(c, p)[0] != head || c->index[p] < 0)
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


/* After a placement change, sends again every forward still unanswered, to the
 * next server of its partitions in the new view: the old target may have died,
 * and a live one drops forwards planned on an older placement (it could no
 * longer tell whether they are its to apply). A copy it did apply is dropped
 * there by its id. */
static void reforward(chain *c)
{
    for (size_t s = 0; s < MAX_PEND; s++) {
        pend *pd = &c->pend[s];
        if (!pd->seq)
            continue;
        int n0 = pd->nfwd;
        for (int fi = 0; fi < n0; fi++) {
            fwd *f = &pd->fwds[fi];
            if (f->done)
                continue;
            f->done = 1; /* replaced by the forwards below */
            pd->outstanding--;
            int rc = pd->close ? forward_close(c, pd, f->keys, f->vals, f->n, f->parts, f->nparts)
                               : forward_rows(c, pd, f->keys, f->vals, f->n);
            if (rc < 0)
                LOG_E("out of memory forwarding again");
            /* forward_rows may move pd->fwds */
        }
        if (pd->outstanding == 0)
            pend_done(c, pd);
    }
}

/* Per-partition state, sized by the first view (or a resumed job's). */
static void set_shape(chain *c, const Pskv__View *v)
{
    c->nparts = v->partitions;
    c->R = v->replicas;
    c->index = malloc(c->nparts * sizeof *c->index);
    c->ready = calloc(c->nparts, 1);
    c->fills = calloc(c->nparts, sizeof *c->fills);
    c->fresh_next = calloc(c->nparts, 1);
    c->pmark = calloc(c->nparts, 1);
    c->touched = malloc(c->nparts * sizeof *c->touched);
    if (!c->index || !c->ready || !c->fills || !c->fresh_next || !c->pmark || !c->touched) {
        LOG_E("out of memory applying the view");
        exit(1);
    }
}

int chain_view(chain *c)
{
    Pskv__View *v = c->mb->view;
    if (!v || !v->has_partitions || !v->partitions || !v->replicas ||
        v->n_chains != (size_t)v->partitions * v->replicas)
        return 0;
    uint32_t me = c->mb->node_id;
    for (size_t i = 0; i < v->n_nodes; i++)
        if (v->nodes[i]->id == me && v->nodes[i]->state && !strcmp(v->nodes[i]->state, "dead"))
            return 1;
    uint32_t *old = c->chains;
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
    /* peers: every server of the view, alive or not */
    for (size_t i = 0; i < v->n_nodes; i++) {
        Pskv__Node *n = v->nodes[i];
        if (n->role != PSKV__ROLE__SERVER || n->id == me)
            continue;
        chain_peer *pp = peer_of(c, n->id);
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
        }
        pp->alive = !(n->state && !strcmp(n->state, "dead"));
    }
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
    if (changed)
        LOG_I("view epoch %llu: heads %u and holds %u of %u partitions (R = %u)%s",
              (unsigned long long)c->mb->epoch, heads, holds, c->nparts, c->R,
              fresh ? "; waiting for copies of new ones" : "");
    if (old && changed) {
        /* copies first: a forward sent again after them is dropped there by its id */
        chain_fill_owed(c);
        reforward(c);
    }
    free(old);
    return 0;
}