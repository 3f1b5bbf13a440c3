/* pskv-garbage's messages: builders, templates of every type, mutations
 * (garbage_msg.h). A template is what a well-behaved sender of that type would
 * send, with small payloads; the mutations then break it the ways a bad peer or
 * a bad link would, from single bits to whole frames and fields appended to the
 * Meta (protobuf keeps the last value of a field, so an appended field overrides
 * the template's: semi-valid messages with one wild value). */
#include "garbage_msg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

static uint64_t rng = 1;

void gmsg_seed(uint64_t seed) { rng = seed ? seed : 1; }

uint64_t gmsg_rnd(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1DULL;
}

static uint64_t below(uint64_t n) { return n ? gmsg_rnd() % n : 0; }

void gmsg_fill_random(void *p, size_t n)
{
    uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(gmsg_rnd() >> 56);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "pskv-garbage: out of memory\n");
        exit(1);
    }
    return p;
}

void gmsg_add(gmsg *m, const void *data, size_t len)
{
    if (m->n >= GMSG_MAX_PARTS)
        abort(); /* a bug in a builder */
    void *copy = xmalloc(len);
    if (len)
        memcpy(copy, data, len);
    m->data[m->n] = copy;
    m->len[m->n] = len;
    m->n++;
}

void gmsg_add_meta(gmsg *m, const Pskv__Meta *meta)
{
    size_t len = pskv__meta__get_packed_size(meta);
    uint8_t *buf = xmalloc(len);
    pskv__meta__pack(meta, buf);
    gmsg_add(m, buf, len);
    free(buf);
}

void gmsg_add_keys(gmsg *m, uint64_t first, uint64_t n)
{
    uint64_t *keys = xmalloc(n * sizeof *keys);
    for (uint64_t i = 0; i < n; i++)
        keys[i] = first + i; /* little-endian hosts only, like pskv itself */
    gmsg_add(m, keys, n * sizeof *keys);
    free(keys);
}

void gmsg_add_vals(gmsg *m, uint64_t n)
{
    float *vals = xmalloc(n * sizeof *vals);
    for (uint64_t i = 0; i < n; i++)
        vals[i] = 0.25f * (float)i;
    gmsg_add(m, vals, n * sizeof *vals);
    free(vals);
}

void gmsg_free(gmsg *m)
{
    for (int i = 0; i < m->n; i++)
        free(m->data[i]);
    m->n = 0;
}

int gmsg_meta_parses(const void *data, size_t len)
{
    Pskv__Meta *m = pskv__meta__unpack(NULL, len, data);
    if (!m)
        return 0;
    pskv__meta__free_unpacked(m, NULL);
    return 1;
}

const int gmsg_types[] = {
    PSKV__MSG_TYPE__REGISTER,     PSKV__MSG_TYPE__REGISTER_ACK,   PSKV__MSG_TYPE__VIEW,
    PSKV__MSG_TYPE__HEARTBEAT,    PSKV__MSG_TYPE__BARRIER,        PSKV__MSG_TYPE__BARRIER_DONE,
    PSKV__MSG_TYPE__FINISH,       PSKV__MSG_TYPE__FINISH_ACK,     PSKV__MSG_TYPE__STOP,
    PSKV__MSG_TYPE__STOP_ACK,     PSKV__MSG_TYPE__STATUS,         PSKV__MSG_TYPE__STATUS_REPLY,
    PSKV__MSG_TYPE__HEARTBEAT_ACK, PSKV__MSG_TYPE__CHECKPOINT,    PSKV__MSG_TYPE__CHECKPOINT_ACK,
    PSKV__MSG_TYPE__TABLE_OPEN,   PSKV__MSG_TYPE__TABLE_OPEN_ACK, PSKV__MSG_TYPE__PUSH,
    PSKV__MSG_TYPE__PUSH_ACK,     PSKV__MSG_TYPE__PULL,           PSKV__MSG_TYPE__PULL_REPLY,
    PSKV__MSG_TYPE__CLOCK,        PSKV__MSG_TYPE__REPLICATE,      PSKV__MSG_TYPE__REPLICATE_ACK,
    PSKV__MSG_TYPE__FILL,         PSKV__MSG_TYPE__ERROR,          PSKV__MSG_TYPE__CHECKPOINT_PRUNE,
    PSKV__MSG_TYPE__FOLLOW,
};
const int gmsg_ntypes = (int)(sizeof gmsg_types / sizeof gmsg_types[0]);

/* Values that break code at its edges: zero, one, powers of two and their
 * neighbours, the ends of every integer width, -1. */
static uint64_t interesting(void)
{
    static const uint64_t v[] = {
        0, 1, 2, 3, 7, 8, 15, 16, 63, 64, 255, 256, 1023, 1024, 4096, 65535, 65536,
        0x7fffffffULL, 0x80000000ULL, 0xffffffffULL, 0x100000000ULL,
        0x7fffffffffffffffULL, 0x8000000000000000ULL, 0xffffffffffffffffULL,
        0xfffffffffffffffeULL, 1ULL << 40, 1ULL << 62,
    };
    return below(4) ? v[below(sizeof v / sizeof v[0])] : gmsg_rnd() >> below(64);
}

static const char *const table_names[] = {GMSG_TABLE "0", GMSG_TABLE "1", GMSG_TABLE "2",
                                          GMSG_TABLE "3"};

/* ---- templates ------------------------------------------------------------- */

/* What a template's Meta points to: lives as long as the packing. */
typedef struct tstore {
    Pskv__TableOptions table;
    Pskv__View view;
    Pskv__Node nodes[3];
    Pskv__Node *pnodes[3];
    char pubkeys[3][41];
    uint32_t chains[8];
    uint32_t resume_from[2];
    uint64_t refusals[5];
    uint32_t parts[2];
    uint32_t folded_nodes[1];
    uint64_t folded_ids[1], folded_floors[1];
    char *ckpts[1];
    uint8_t blob[16];
} tstore;

/* A view of 2 servers (node ids 1 and 2; at 127.0.0.1:port with key pub when
 * port is not 0, else at random ports with random or no keys) and a worker (node
 * id 3, rank 0), partitions in chains of 1 or 2. */
static void tmpl_view(tstore *st, Pskv__View *v, int port, const char *pub)
{
    static const char *const states[] = {"joined", "active", "finished", "dead"};
    pskv__view__init(v);
    v->has_epoch = v->has_heartbeat_ms = v->has_servers = v->has_workers = 1;
    v->epoch = 1 + below(3);
    v->heartbeat_ms = 100;
    v->servers = 2;
    v->workers = 1;
    v->has_partitions = v->has_replicas = v->has_lease_ms = v->has_vnodes = 1;
    v->partitions = 4;
    v->replicas = 1 + (uint32_t)below(2);
    v->lease_ms = 1000;
    v->vnodes = 16;
    for (int i = 0; i < 3; i++) {
        Pskv__Node *n = &st->nodes[i];
        pskv__node__init(n);
        n->has_id = n->has_role = n->has_rank = n->has_port = n->has_pid = n->has_alive = 1;
        n->id = (uint32_t)i + 1;
        n->role = i < 2 ? PSKV__ROLE__SERVER : PSKV__ROLE__WORKER;
        n->rank = i < 2 ? i : 0;
        n->host = "127.0.0.1";
        n->port = port && i < 2 ? (uint32_t)port : 1 + (uint32_t)below(65535);
        n->pid = 1;
        n->alive = 1;
        n->state = (char *)states[port ? 1 : below(4)];
        if (port && pub) {
            n->pubkey = (char *)pub;
        } else if (!port && below(2)) {
            for (int k = 0; k < 40; k++)
                st->pubkeys[i][k] = "0123456789abcdefghijklmnopqrstuvwxyzABCD"[below(40)];
            st->pubkeys[i][40] = '\0';
            n->pubkey = st->pubkeys[i];
        }
        st->pnodes[i] = n;
    }
    v->n_nodes = 3;
    v->nodes = st->pnodes;
    v->n_chains = (size_t)v->partitions * v->replicas;
    for (size_t i = 0; i < v->n_chains; i++)
        st->chains[i] = 1 + (uint32_t)((i + i / v->replicas) % 2);
    v->chains = st->chains;
    if (!port && !below(4)) {
        v->has_resume_seq = 1;
        v->resume_seq = 1 + below(3);
        st->resume_from[0] = 1;
        st->resume_from[1] = 1 + (uint32_t)below(4);
        v->n_resume_from = 2;
        v->resume_from = st->resume_from;
    }
    v->has_keys = 1;
    v->keys = port ? pub != NULL : below(2);
}

static void tmpl_table(tstore *st, Pskv__TableOptions *t)
{
    static const char *const updaters[] = {"sum", "sgd", "adagrad", "nope"};
    static const char *const inits[] = {"zero", "const", "uniform", "normal"};
    static const char *const cons[] = {"async", "bsp", "ssp:2", "ssp:"};
    (void)st;
    pskv__table_options__init(t);
    t->name = (char *)table_names[below(4)];
    t->has_kind = t->has_size = t->has_width = 1;
    t->kind = below(2) ? PSKV__TABLE_KIND__DENSE : PSKV__TABLE_KIND__SPARSE;
    t->size = 1 + below(256);
    t->width = 1 + (uint32_t)below(4);
    t->updater = (char *)updaters[below(4)];
    t->has_lr = t->has_init_scale = t->has_seed = 1;
    t->lr = 0.1f;
    t->init = (char *)inits[below(4)];
    t->init_scale = 0.01f;
    t->seed = gmsg_rnd();
    t->consistency = (char *)cons[below(4)];
}

/* A dense run, a keys frame, or (PULL only) every row: the payload of a data
 * message with nkeys rows of width w. */
static void tmpl_rows(gmsg *m, Pskv__Meta *meta, int vals, int may_all)
{
    uint64_t n = 1 + below(8);
    uint32_t w = 1 + (uint32_t)below(4);
    meta->has_table_id = meta->has_num_keys = meta->has_width = 1;
    meta->table_id = wire_table_id(table_names[below(4)]);
    meta->num_keys = n;
    meta->width = w;
    int how = (int)below(may_all ? 3 : 2);
    if (how == 2) {
        meta->has_all = 1;
        meta->all = 1;
        meta->has_num_keys = meta->has_width = 0;
        gmsg_add_meta(m, meta);
        return;
    }
    if (how == 1) {
        meta->has_first_key = 1;
        meta->first_key = below(64);
        if (below(2)) {
            meta->has_span = 1;
            meta->span = n + below(16);
        }
    }
    gmsg_add_meta(m, meta);
    if (how == 0)
        gmsg_add_keys(m, below(1000), n);
    if (vals)
        gmsg_add_vals(m, n * w);
}

/* The fields each type carries beside version, type, job, epoch and sender. */
static void tmpl_fields(tstore *st, Pskv__Meta *x, int type)
{
    switch (type) {
    case PSKV__MSG_TYPE__REGISTER:
        x->has_role = x->has_rank = x->has_port = x->has_pid = x->has_nonce = 1;
        x->role = below(2) ? PSKV__ROLE__SERVER : PSKV__ROLE__EVALUATOR;
        x->rank = (int32_t)below(3) - 1;
        x->host = "127.0.0.1";
        x->port = 1 + (uint32_t)below(65535);
        x->pid = 1;
        x->nonce = gmsg_rnd();
        if (below(2)) {
            st->ckpts[0] = "1:1:1";
            x->n_ckpts = 1;
            x->ckpts = st->ckpts;
        }
        break;
    case PSKV__MSG_TYPE__REGISTER_ACK:
        x->has_rank = x->has_nonce = x->has_request_id = x->has_seq = 1;
        x->nonce = gmsg_rnd();
        x->request_id = 1 + below(4);
        tmpl_view(st, &st->view, 0, NULL);
        x->view = &st->view;
        break;
    case PSKV__MSG_TYPE__VIEW:
    case PSKV__MSG_TYPE__STATUS_REPLY:
        tmpl_view(st, &st->view, 0, NULL);
        st->view.state = type == PSKV__MSG_TYPE__STATUS_REPLY ? "running" : NULL;
        x->view = &st->view;
        break;
    case PSKV__MSG_TYPE__HEARTBEAT:
        x->has_clock = x->has_dropped = x->has_request_id = x->has_progress_step = 1;
        x->clock = (int64_t)below(100);
        x->request_id = gmsg_rnd() >> 20;
        x->progress_step = (int64_t)below(100);
        for (int i = 0; i < 5; i++)
            st->refusals[i] = below(3);
        x->n_refusals = 5;
        x->refusals = st->refusals;
        break;
    case PSKV__MSG_TYPE__BARRIER:
    case PSKV__MSG_TYPE__BARRIER_DONE:
    case PSKV__MSG_TYPE__CHECKPOINT_ACK:
    case PSKV__MSG_TYPE__CHECKPOINT_PRUNE:
    case PSKV__MSG_TYPE__STOP:
        x->has_seq = 1;
        x->seq = below(5);
        break;
    case PSKV__MSG_TYPE__HEARTBEAT_ACK:
    case PSKV__MSG_TYPE__CHECKPOINT:
    case PSKV__MSG_TYPE__TABLE_OPEN_ACK:
    case PSKV__MSG_TYPE__PUSH_ACK:
    case PSKV__MSG_TYPE__REPLICATE_ACK:
        x->has_request_id = 1;
        x->request_id = 1 + below(1000);
        break;
    case PSKV__MSG_TYPE__TABLE_OPEN:
        tmpl_table(st, &st->table);
        x->table = &st->table;
        break;
    case PSKV__MSG_TYPE__CLOCK:
        x->has_clock = 1;
        x->clock = (int64_t)below(100);
        if (below(2)) { /* forwarded down a chain */
            x->has_rank = x->has_origin_id = 1;
            x->origin_id = 1 + below(3);
        }
        break;
    case PSKV__MSG_TYPE__FOLLOW: /* a reader's subscription (server/follow.h) */
        x->has_follow_sync_ms = x->has_follow_full = x->has_follow_target = 1;
        x->follow_ns = below(2) ? "" : below(2) ? "fj" : "a/b";
        x->follow_sync_ms = (uint32_t)interesting();
        x->follow_full = below(2);
        x->follow_target = (int64_t)interesting();
        break;
    case PSKV__MSG_TYPE__ERROR:
        x->has_error_code = x->has_request_id = 1;
        x->error_code = (int32_t)below(22);
        x->error = "pskv-garbage";
        break;
    default:
        break;
    }
}

/* REPLICATE and FILL: rows, or the closing form without frames. */
static void tmpl_chain(tstore *st, gmsg *m, Pskv__Meta *x, int type)
{
    if (type == PSKV__MSG_TYPE__FILL) {
        x->has_partition = 1;
        x->partition = (uint32_t)below(4);
        if (below(2)) { /* the closing FILL: the dedupe record, no rows */
            gmsg_fill_random(st->blob, sizeof st->blob);
            x->has_blob = 1;
            x->blob.len = below(sizeof st->blob + 1);
            x->blob.data = st->blob;
            gmsg_add_meta(m, x);
            return;
        }
    } else {
        x->has_origin = x->has_origin_id = x->has_floor = x->has_clock = 1;
        x->origin = 3;
        x->origin_id = 1 + below(1000);
        x->floor = below(x->origin_id);
        if (below(3) == 0) { /* a bsp close */
            x->has_close = x->has_upto = 1;
            x->close = 1;
            x->upto = x->clock + 1;
            st->parts[0] = (uint32_t)below(4);
            x->n_parts = 1;
            x->parts = st->parts;
            st->folded_nodes[0] = 3;
            st->folded_ids[0] = 1;
            st->folded_floors[0] = 0;
            x->n_folded_nodes = x->n_folded_ids = x->n_folded_floors = 1;
            x->folded_nodes = st->folded_nodes;
            x->folded_ids = st->folded_ids;
            x->folded_floors = st->folded_floors;
            if (below(2)) {
                gmsg_add_meta(m, x);
                return;
            }
        }
    }
    tmpl_rows(m, x, 1, 0);
}

void gmsg_template(gmsg *m, int type, uint64_t job)
{
    tstore st;
    Pskv__Meta x;
    memset(&st, 0, sizeof st);
    wire_meta_init(&x, (Pskv__MsgType)type);
    if (job) {
        x.has_job_id = 1;
        x.job_id = job;
    }
    x.has_epoch = x.has_sender = x.has_request_id = 1;
    x.epoch = below(4);
    x.sender = below(4) ? 1000 + (uint32_t)below(100) : 0; /* no node of a real job */
    x.request_id = 1 + below(1 << 20);
    switch (type) {
    case PSKV__MSG_TYPE__PUSH:
        x.has_origin_id = x.has_floor = x.has_clock = 1;
        x.origin_id = x.request_id;
        x.clock = (int64_t)below(10);
        x.has_resend = below(2);
        x.resend = 1;
        tmpl_rows(m, &x, 1, 0);
        return;
    case PSKV__MSG_TYPE__PULL:
        x.has_clock = 1;
        tmpl_rows(m, &x, 0, 1);
        return;
    case PSKV__MSG_TYPE__PULL_REPLY:
        tmpl_rows(m, &x, 1, 0);
        if (m->n == 3) { /* a reply carries values only, unless it answers `all` */
            free(m->data[1]);
            m->data[1] = m->data[2];
            m->len[1] = m->len[2];
            m->n = 2;
        }
        return;
    case PSKV__MSG_TYPE__REPLICATE:
    case PSKV__MSG_TYPE__FILL:
        tmpl_chain(&st, m, &x, type);
        return;
    default:
        tmpl_fields(&st, &x, type);
        gmsg_add_meta(m, &x);
    }
}

void gmsg_view(gmsg *m, uint64_t job, uint64_t epoch, int port, const char *pub)
{
    tstore st;
    Pskv__Meta x;
    memset(&st, 0, sizeof st);
    wire_meta_init(&x, PSKV__MSG_TYPE__VIEW);
    x.has_job_id = x.has_epoch = x.has_sender = 1;
    x.job_id = job;
    x.epoch = epoch;
    tmpl_view(&st, &st.view, port, pub);
    st.view.epoch = epoch;
    x.view = &st.view;
    gmsg_add_meta(m, &x);
}

/* ---- mutations ------------------------------------------------------------- */

static void put_varint(uint8_t *buf, size_t *len, uint64_t v)
{
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        buf[(*len)++] = (uint8_t)(b | (v ? 0x80 : 0));
    } while (v);
}

/* Replaces frame f by len bytes of buf. */
static void set_frame(gmsg *m, int f, const void *buf, size_t len)
{
    void *copy = xmalloc(len);
    if (len)
        memcpy(copy, buf, len);
    free(m->data[f]);
    m->data[f] = copy;
    m->len[f] = len;
}

/* A field appended to the Meta: any field number (known or not), any wire type,
 * an edge value; it overrides the template's value of that field. */
static void mut_field(gmsg *m)
{
    uint8_t add[64];
    size_t n = 0;
    uint32_t field = 1 + (uint32_t)below(52);
    int wt = below(4) ? -1 : (int)below(6);
    uint64_t v = interesting();
    if (wt < 0) /* the field's own wire type, mostly: a wild value, not a wild type */
        wt = field == 17 || field == 20 || field == 25 || field == 26 || field == 34 ||
                     field == 35
                 ? 2
                 : 0;
    put_varint(add, &n, (uint64_t)field << 3 | (uint64_t)wt);
    if (wt == 0) {
        put_varint(add, &n, v);
    } else if (wt == 1 || wt == 5) {
        size_t w = wt == 1 ? 8 : 4;
        memcpy(add + n, &v, w);
        n += w;
    } else if (wt == 2) {
        size_t len = below(5) ? below(24) : v; /* sometimes a length that lies */
        put_varint(add, &n, len);
        size_t room = sizeof add - n;
        size_t k = len < room ? len : room;
        gmsg_fill_random(add + n, k);
        n += k;
    }
    size_t old = m->len[0];
    uint8_t *buf = xmalloc(old + n);
    memcpy(buf, m->data[0], old);
    memcpy(buf + old, add, n);
    set_frame(m, 0, buf, old + n);
    free(buf);
}

/* Byte-level damage to one frame: a flipped bit, an edge byte, bytes cut,
 * appended or inserted. */
static void mut_bytes(gmsg *m, int f)
{
    size_t len = m->len[f];
    uint8_t *b = m->data[f];
    switch (below(5)) {
    case 0:
        if (len)
            b[below(len)] ^= (uint8_t)(1u << below(8));
        break;
    case 1:
        if (len) {
            static const uint8_t edge[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
            b[below(len)] = edge[below(sizeof edge)];
        }
        break;
    case 2:
        m->len[f] = below(len + 1); /* cut short (the allocation stays) */
        break;
    default: {
        size_t k = 1 + below(16), at = below(3) == 0 ? below(len + 1) : len;
        uint8_t *nb = xmalloc(len + k);
        memcpy(nb, b, at);
        gmsg_fill_random(nb + at, k);
        memcpy(nb + at + k, b + at, len - at);
        set_frame(m, f, nb, len + k);
        free(nb);
    }
    }
}

/* A payload frame's floats made NaN, infinite or huge, or its keys wild. */
static void mut_payload(gmsg *m)
{
    int f = 1 + (int)below((uint64_t)m->n - 1);
    size_t len = m->len[f];
    uint8_t *b = m->data[f];
    if (below(2) && len >= 4) {
        static const float odd[] = {NAN, INFINITY, -INFINITY, 3.4e38f, -0.0f, 1e-45f};
        float x = odd[below(sizeof odd / sizeof odd[0])];
        memcpy(b + 4 * below(len / 4), &x, 4);
    } else if (len >= 8) {
        uint64_t k = below(2) ? interesting() : 0; /* 0 also makes duplicates */
        memcpy(b + 8 * below(len / 8), &k, 8);
    }
}

/* Whole frames: dropped, duplicated, swapped, emptied. */
static void mut_frames(gmsg *m)
{
    int f = (int)below((uint64_t)m->n);
    switch (below(4)) {
    case 0:
        if (m->n > 1) {
            free(m->data[f]);
            for (int i = f; i + 1 < m->n; i++) {
                m->data[i] = m->data[i + 1];
                m->len[i] = m->len[i + 1];
            }
            m->n--;
        }
        break;
    case 1:
        if (m->n < GMSG_MAX_PARTS)
            gmsg_add(m, m->data[f], m->len[f]);
        break;
    case 2:
        if (m->n > 1) {
            int g = (int)below((uint64_t)m->n);
            void *d = m->data[f];
            size_t l = m->len[f];
            m->data[f] = m->data[g];
            m->len[f] = m->len[g];
            m->data[g] = d;
            m->len[g] = l;
        }
        break;
    default:
        m->len[f] = 0;
    }
}

/* The Meta of another type's template in place of this one's (the payload
 * frames stay): fields meant for one type read as another. */
static void mut_splice(gmsg *m)
{
    gmsg other = {0};
    gmsg_template(&other, gmsg_types[below((uint64_t)gmsg_ntypes)], 0);
    set_frame(m, 0, other.data[0], other.len[0]);
    gmsg_free(&other);
}

void gmsg_mutate(gmsg *m)
{
    int k = 1 + (int)below(4);
    for (int i = 0; i < k; i++) {
        switch (below(8)) {
        case 0:
        case 1:
        case 2: mut_field(m); break;
        case 3:
        case 4: mut_bytes(m, below(3) ? 0 : (int)below((uint64_t)m->n)); break;
        case 5:
            if (m->n > 1)
                mut_payload(m);
            else
                mut_field(m);
            break;
        case 6: mut_frames(m); break;
        default: mut_splice(m);
        }
    }
}

int gmsg_type(const gmsg *m)
{
    if (m->n < 1)
        return -1;
    Pskv__Meta *x = pskv__meta__unpack(NULL, m->len[0], m->data[0]);
    if (!x)
        return -1;
    int type = (int)x->type;
    pskv__meta__free_unpacked(x, NULL);
    return type;
}

int gmsg_registers_worker(const gmsg *m)
{
    if (m->n < 1)
        return 0;
    Pskv__Meta *x = pskv__meta__unpack(NULL, m->len[0], m->data[0]);
    if (!x)
        return 0;
    int join = x->type == PSKV__MSG_TYPE__REGISTER && x->has_role &&
               x->role == PSKV__ROLE__WORKER;
    pskv__meta__free_unpacked(x, NULL);
    return join;
}
