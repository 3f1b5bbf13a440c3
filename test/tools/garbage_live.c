/* pskv-garbage's live parts (garbage.h): the mutate kind, and --listen, a fake
 * scheduler and server for a worker to dial.
 *
 * A worker listens on nothing: it dials the scheduler and the servers the view
 * names. So its input is reached by being what it dials. The fake scheduler
 * answers a REGISTER with a REGISTER_ACK and a view naming the fake server (so the
 * worker gets as far as opening tables, pushing and pulling); barriers, finishes
 * and checkpoints get their acknowledgement; heartbeats now and then a new view
 * or a mutated scheduler message of any kind. The fake server answers each
 * request with the reply it asks for (request id echoed, a pull's values sized
 * to the request), or an ERROR. A share of everything sent is mutated. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "garbage.h"
#include "garbage_msg.h"
#include "net.h"
#include "pskv_errors.h"
#include "wire.h"

#define MUTATE_EVERY 64   /* mutated messages per DEALER before a fresh one */
#define FAKE_WORKER_ID 3  /* the node id the fake scheduler gives a worker (gmsg_view) */
#define TYPE_SLOTS 64
#define MAX_REPLY_FLOATS (1u << 20)

static uint64_t below(uint64_t n) { return n ? gmsg_rnd() % n : 0; }

/* Counts the replies waiting on s, without waiting. */
static void drain(void *s, tally *t)
{
    for (;;) {
        wire_msg m;
        char why[256];
        int rc = wire_recv(s, 0, &m, why, sizeof why);
        if (rc == -PSKV_ETIMEDOUT || rc == -PSKV_ENET) {
            wire_msg_close(&m);
            return;
        }
        if (rc == 0 && m.meta->type == PSKV__MSG_TYPE__ERROR)
            t->errors++;
        else
            t->others++;
        wire_msg_close(&m);
    }
}

void garbage_mutate_one(void *ctx, const opts *o, void **sock, int *used, tally *t,
                        uint64_t *per_type)
{
    if (*sock && *used >= MUTATE_EVERY) {
        drain(*sock, t);
        zmq_close(*sock);
        *sock = NULL;
    }
    if (!*sock) {
        *used = 0;
        if (!(*sock = garbage_dealer(ctx, o, 0))) {
            t->stalled++;
            return;
        }
    }
    int type = gmsg_types[below((uint64_t)gmsg_ntypes)];
    gmsg m = {0};
    gmsg_template(&m, type, o->job_id);
    gmsg_mutate(&m);
    if (gmsg_registers_worker(&m)) {
        t->skipped++;
        gmsg_free(&m);
        return;
    }
    t->sent++;
    per_type[type]++;
    (*used)++;
    for (int i = 0; i < m.n; i++) {
        if (zmq_send(*sock, m.data[i], m.len[i], i + 1 < m.n ? ZMQ_SNDMORE : 0) < 0) {
            printf("garbage: mutate %s -> send stalled: %s\n", wire_type_name(type),
                   zmq_strerror(errno));
            t->stalled++;
            break;
        }
    }
    gmsg_free(&m);
    drain(*sock, t);
}

/* ---- --listen: the fake scheduler and server --------------------------------- */

typedef struct fake {
    const opts *o;
    void *sched, *data;
    int dport;
    uint64_t epoch;
    uint64_t got[TYPE_SLOTS]; /* messages received, by type (0: undecodable) */
    uint64_t sent, mutated, registers;
} fake;

/* Sends m to the peer of rid on s, mutated pct percent of the time; frees m. */
static void send_to(fake *f, void *s, zmq_msg_t *rid, gmsg *m, int pct)
{
    if ((int)below(100) < pct) {
        gmsg_mutate(m);
        f->mutated++;
    }
    zmq_msg_t id;
    zmq_msg_init(&id);
    zmq_msg_copy(&id, rid);
    int ok = zmq_msg_send(&id, s, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0;
    if (!ok)
        zmq_msg_close(&id);
    for (int i = 0; ok && i < m->n; i++)
        ok = zmq_send(s, m->data[i], m->len[i], i + 1 < m->n ? ZMQ_SNDMORE : 0) >= 0;
    f->sent += ok;
    gmsg_free(m);
}

/* A mutated message of a type a scheduler sends. */
static void sched_noise(fake *f, zmq_msg_t *rid)
{
    static const int types[] = {
        PSKV__MSG_TYPE__REGISTER_ACK, PSKV__MSG_TYPE__VIEW,          PSKV__MSG_TYPE__BARRIER_DONE,
        PSKV__MSG_TYPE__FINISH_ACK,   PSKV__MSG_TYPE__STOP,          PSKV__MSG_TYPE__STATUS_REPLY,
        PSKV__MSG_TYPE__HEARTBEAT_ACK, PSKV__MSG_TYPE__CHECKPOINT_ACK, PSKV__MSG_TYPE__ERROR,
    };
    gmsg m = {0};
    gmsg_template(&m, types[below(sizeof types / sizeof types[0])], f->o->job_id);
    send_to(f, f->sched, rid, &m, 100);
}

static void send_view(fake *f, zmq_msg_t *rid, int pct)
{
    gmsg m = {0};
    gmsg_view(&m, f->o->job_id, ++f->epoch, f->dport, f->o->keyed ? f->o->ks.pub : NULL);
    send_to(f, f->sched, rid, &m, pct);
}

/* What the fake scheduler answers to r (NULL: undecodable). */
static void on_sched(fake *f, zmq_msg_t *rid, const Pskv__Meta *r)
{
    Pskv__Meta a;
    gmsg m = {0};
    int type = r ? (int)r->type : -1;
    int ack = type == PSKV__MSG_TYPE__REGISTER     ? PSKV__MSG_TYPE__REGISTER_ACK
              : type == PSKV__MSG_TYPE__BARRIER    ? PSKV__MSG_TYPE__BARRIER_DONE
              : type == PSKV__MSG_TYPE__FINISH     ? PSKV__MSG_TYPE__FINISH_ACK
              : type == PSKV__MSG_TYPE__CHECKPOINT ? PSKV__MSG_TYPE__CHECKPOINT_ACK
                                                   : 0;
    if (!ack) {
        if (type != PSKV__MSG_TYPE__HEARTBEAT || !below(8))
            sched_noise(f, rid);
        else if (!below(8))
            send_view(f, rid, 30); /* placement changes under the worker's feet */
        return;
    }
    wire_meta_init(&a, (Pskv__MsgType)ack);
    a.has_job_id = a.has_epoch = a.has_request_id = a.has_seq = 1;
    a.job_id = f->o->job_id;
    a.epoch = f->epoch;
    a.request_id = r->request_id;
    a.seq = r->seq;
    Pskv__View hb;
    if (ack == PSKV__MSG_TYPE__REGISTER_ACK) {
        f->registers++;
        a.has_nonce = a.has_rank = 1;
        a.nonce = r->nonce;
        a.request_id = FAKE_WORKER_ID;
        a.rank = 0;
        a.seq = 0;
        pskv__view__init(&hb);
        hb.has_heartbeat_ms = 1;
        hb.heartbeat_ms = 100;
        a.view = &hb;
    } else if (ack == PSKV__MSG_TYPE__CHECKPOINT_ACK) {
        a.seq = 1 + below(3);
    }
    gmsg_add_meta(&m, &a);
    send_to(f, f->sched, rid, &m, 20);
    if (ack == PSKV__MSG_TYPE__REGISTER_ACK)
        send_view(f, rid, 30);
}

/* What the fake server answers to r: the reply it asks for, or an ERROR. */
static void on_data(fake *f, zmq_msg_t *rid, const Pskv__Meta *r)
{
    static const int codes[] = {PSKV_ESTALE, PSKV_ENOTREADY, PSKV_ELATE, PSKV_EPROTO,
                                PSKV_ENOTABLE, PSKV_EMISMATCH, PSKV_EPERM, 0, 9999};
    int type = r ? (int)r->type : -1;
    int reply = type == PSKV__MSG_TYPE__TABLE_OPEN ? PSKV__MSG_TYPE__TABLE_OPEN_ACK
                : type == PSKV__MSG_TYPE__PUSH     ? PSKV__MSG_TYPE__PUSH_ACK
                : type == PSKV__MSG_TYPE__PULL     ? PSKV__MSG_TYPE__PULL_REPLY
                                                   : 0;
    if (type == PSKV__MSG_TYPE__CLOCK && below(8))
        return; /* no reply is due */
    Pskv__Meta a;
    gmsg m = {0};
    uint64_t n = r ? r->num_keys : 0, w = r ? r->width : 0;
    if (!reply || !below(8) || n * w > MAX_REPLY_FLOATS || w > MAX_REPLY_FLOATS) {
        wire_meta_init(&a, PSKV__MSG_TYPE__ERROR);
        a.has_error_code = 1;
        a.error_code = codes[below(sizeof codes / sizeof codes[0])];
        a.error = "pskv-garbage";
    } else {
        wire_meta_init(&a, (Pskv__MsgType)reply);
    }
    a.has_job_id = a.has_epoch = a.has_request_id = a.has_sender = 1;
    a.job_id = f->o->job_id;
    a.epoch = f->epoch;
    a.request_id = r ? r->request_id : gmsg_rnd();
    a.sender = 1 + (uint32_t)below(2);
    if (r && r->has_clock && below(2)) {
        a.has_clock = 1;
        a.clock = r->clock;
    }
    if (a.type != PSKV__MSG_TYPE__PULL_REPLY) {
        gmsg_add_meta(&m, &a);
    } else if (r->has_all && r->all) { /* every row: a few, with their keys */
        uint64_t k = below(5);
        a.has_table_id = a.has_all = a.has_num_keys = a.has_width = 1;
        a.table_id = r->table_id;
        a.all = 1;
        a.num_keys = k;
        a.width = 1 + (uint32_t)below(4);
        gmsg_add_meta(&m, &a);
        if (k) {
            gmsg_add_keys(&m, below(100), k);
            gmsg_add_vals(&m, k * a.width);
        }
    } else {
        a.has_table_id = a.has_num_keys = a.has_width = 1;
        a.table_id = r->table_id;
        a.num_keys = n;
        a.width = (uint32_t)w;
        a.has_first_key = r->has_first_key;
        a.first_key = r->first_key;
        gmsg_add_meta(&m, &a);
        gmsg_add_vals(&m, n * w);
    }
    send_to(f, f->data, rid, &m, 25);
}

/* Receives one message on s: its routing id into rid, its Meta decoded (NULL
 * when it does not decode), the type counted. Returns 0, or -1 when none waits. */
static int take(fake *f, void *s, zmq_msg_t *rid, Pskv__Meta **meta)
{
    *meta = NULL;
    zmq_msg_init(rid);
    if (zmq_msg_recv(rid, s, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(rid);
        return -1;
    }
    for (int more = zmq_msg_more(rid), part = 0; more; part++) {
        zmq_msg_t p;
        zmq_msg_init(&p);
        if (zmq_msg_recv(&p, s, 0) < 0) {
            zmq_msg_close(&p);
            break;
        }
        more = zmq_msg_more(&p);
        if (part == 0)
            *meta = pskv__meta__unpack(NULL, zmq_msg_size(&p), zmq_msg_data(&p));
        zmq_msg_close(&p);
    }
    int type = *meta ? (int)(*meta)->type : 0;
    f->got[type >= 0 && type < TYPE_SLOTS ? type : 0]++;
    return 0;
}

/* A ROUTER on 127.0.0.1:port (0: any), a CURVE server with the tool's key when
 * keyed. Returns it with the port bound in *bound, or NULL (printed). */
static void *listener(void *ctx, const opts *o, int port, int *bound)
{
    void *s = zmq_socket(ctx, ZMQ_ROUTER);
    int linger = 0;
    char ep[64];
    if (s)
        zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    if (!s || (o->keyed && net_curve_server(s, &o->ks) < 0) || zmq_bind(s, ep) != 0) {
        fprintf(stderr, "pskv-garbage: cannot listen on %s: %s\n", ep, zmq_strerror(errno));
        if (s)
            zmq_close(s);
        return NULL;
    }
    size_t len = sizeof ep;
    zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &len);
    const char *colon = strrchr(ep, ':');
    *bound = colon ? atoi(colon + 1) : port;
    return s;
}

int garbage_serve(void *ctx, const opts *o)
{
    fake f = {.o = o};
    int sport;
    f.sched = listener(ctx, o, o->listen, &sport);
    f.data = f.sched ? listener(ctx, o, 0, &f.dport) : NULL;
    if (!f.data) {
        if (f.sched)
            zmq_close(f.sched);
        return 1;
    }
    double seconds = o->seconds > 0 ? o->seconds : 60;
    printf("garbage: fake scheduler on 127.0.0.1:%d, fake server on port %d, for %.0f s%s\n",
           sport, f.dport, seconds, o->keyed ? " (CURVE)" : "");
    fflush(stdout);
    int64_t end = garbage_now_ms() + (int64_t)(seconds * 1000);
    while (garbage_now_ms() < end) {
        zmq_pollitem_t it[2] = {{f.sched, 0, ZMQ_POLLIN, 0}, {f.data, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(it, 2, 100) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2; i++) {
            zmq_msg_t rid;
            Pskv__Meta *r;
            while ((it[i].revents & ZMQ_POLLIN) && take(&f, i ? f.data : f.sched, &rid, &r) == 0) {
                if (i)
                    on_data(&f, &rid, r);
                else
                    on_sched(&f, &rid, r);
                if (r)
                    pskv__meta__free_unpacked(r, NULL);
                zmq_msg_close(&rid);
            }
        }
    }
    zmq_close(f.sched);
    zmq_close(f.data);
    uint64_t got = 0;
    for (int t = 0; t < TYPE_SLOTS; t++) {
        got += f.got[t];
        if (f.got[t])
            printf("garbage: listen got %s %llu\n", t ? wire_type_name(t) : "(undecodable)",
                   (unsigned long long)f.got[t]);
    }
    printf("garbage: listen: %llu messages from workers (%llu registrations), %llu sent to "
           "them (%llu mutated) (seed %llu)\n", (unsigned long long)got,
           (unsigned long long)f.registers, (unsigned long long)f.sent,
           (unsigned long long)f.mutated, (unsigned long long)o->seed);
    return 0;
}
