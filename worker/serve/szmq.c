/* szmq: LOOKUP over ZeroMQ (contract in szmq.h). */
#define _GNU_SOURCE
#include "szmq.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "log.h"
#include "metrics.h"
#include "net.h"
#include "pskv_errors.h"
#include "wire.h"

struct szmq {
    void *ctx, *sock;
    int port;
    size_t max_keys;
    snapstore *st;
    secure *sec; /* borrowed: its ZAP handler lives in ctx */
    pthread_t th;
    atomic_int stop;
    met_series *answered, *refused;
};

static void refuse(szmq *z, wire_msg *msg, int code, const char *why)
{
    metrics_add(z->refused, 1);
    LOG_D("refused a LOOKUP from %s: %s", msg->peer, why);
    if (msg->has_rid)
        wire_send_error(z->sock, &msg->rid, msg->meta, 0, 0, code, why, 0);
}

static void answer(szmq *z, wire_msg *msg)
{
    char why[300];
    const Pskv__Meta *r = msg->meta;
    if (r->type != PSKV__MSG_TYPE__LOOKUP) {
        snprintf(why, sizeof why, "message type %s is not served by pskv-serve (LOOKUP only)",
                 wire_type_name((int)r->type));
        refuse(z, msg, PSKV_EPROTO, why);
        return;
    }
    if (!r->follow_table || msg->nkeys > z->max_keys) {
        snprintf(why, sizeof why, r->follow_table ? "keys: %llu keys, more than --max-keys %zu"
                                                  : "table: missing (follow_table)",
                 (unsigned long long)msg->nkeys, z->max_keys);
        refuse(z, msg, PSKV_EINVAL, why);
        return;
    }
    snap *s = snap_acquire(z->st, r->follow_table);
    if (!s) {
        snprintf(why, sizeof why, "table: no table %.100s is served", r->follow_table);
        refuse(z, msg, PSKV_ENOTABLE, why);
        return;
    }
    uint32_t w = snap_width(s);
    size_t n = (size_t)msg->nkeys;
    zmq_msg_t vm;
    if (zmq_msg_init_size(&vm, n * w * sizeof(float)) != 0) {
        snap_release(z->st, &s);
        refuse(z, msg, PSKV_ENOMEM, "out of memory");
        return;
    }
    float *out = zmq_msg_data(&vm);
    for (size_t i = 0; i < n; i++) {
        const float *row = snap_row(s, msg->keys[i]);
        for (uint32_t j = 0; j < w; j++)
            out[i * w + j] = row ? row[j] : NAN;
    }
    Pskv__Meta m;
    wire_meta_init(&m, PSKV__MSG_TYPE__LOOKUP_REPLY);
    m.has_request_id = r->has_request_id;
    m.request_id = r->request_id;
    m.has_num_keys = m.has_width = m.has_clock = 1;
    m.num_keys = n;
    m.width = w;
    m.clock = s->clock;
    snap_release(z->st, &s);
    if (wire_send(z->sock, &msg->rid, &m, NULL, n ? &vm : NULL) < 0)
        LOG_D("cannot answer a LOOKUP from %s", msg->peer);
    if (!n)
        zmq_msg_close(&vm);
    metrics_add(z->answered, 1);
}

static void *run(void *arg)
{
    szmq *z = arg;
    char why[300];
    while (!z->stop) {
        zmq_pollitem_t it = {z->sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) <= 0)
            continue;
        for (int k = 0; k < 64; k++) {
            wire_msg msg;
            int rc = wire_recv(z->sock, 1, &msg, why, sizeof why);
            if (rc == -PSKV_ETIMEDOUT) {
                wire_msg_close(&msg);
                break;
            }
            if (rc < 0)
                refuse(z, &msg, -rc, why);
            else
                answer(z, &msg);
            wire_msg_close(&msg);
        }
    }
    return NULL;
}

szmq *szmq_start(const char *bind, int port, size_t max_keys, snapstore *st, secure *sec,
                 char *why, size_t whylen)
{
    szmq *z = calloc(1, sizeof *z);
    if (!z) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    z->st = st;
    z->max_keys = max_keys;
    z->ctx = zmq_ctx_new();
    z->sec = sec;
    z->sock = z->ctx ? net_socket(z->ctx, ZMQ_ROUTER, 64 << 20, 0) : NULL;
    /* any role the authorized file lists may look rows up: a reading client */
    unsigned roles = ((1u << KEY_ROLE_COUNT) - 1) & ~1u;
    if (!z->sock)
        snprintf(why, whylen, "cannot make a ZeroMQ socket");
    z->port = !z->sock ? -PSKV_ENET : secure_listen(sec, z->ctx, z->sock, roles, why, whylen);
    if (z->port == 0)
        z->port = net_bind(z->sock, bind, port, why, whylen);
    z->answered = metrics_series("pskv_serve_zmq_lookups_total", MET_COUNTER,
                                 "LOOKUP requests answered on --zmq-port", NULL, NULL);
    z->refused = metrics_series("pskv_serve_zmq_refused_total", MET_COUNTER,
                                "LOOKUP requests refused (bad input)", NULL, NULL);
    if (z->port < 0 || pthread_create(&z->th, NULL, run, z) != 0) {
        if (z->port >= 0)
            snprintf(why, whylen, "cannot start the ZeroMQ thread");
        if (z->sock)
            zmq_close(z->sock);
        secure_close(sec);
        if (z->ctx)
            zmq_ctx_term(z->ctx);
        free(z);
        return NULL;
    }
    return z;
}

int szmq_port(const szmq *z) { return z->port; }

void szmq_stop(szmq **self_p)
{
    if (!self_p || !*self_p)
        return;
    szmq *z = *self_p;
    z->stop = 1;
    pthread_join(z->th, NULL);
    zmq_close(z->sock);
    secure_close(z->sec); /* its ZAP socket is in ctx: before the context ends */
    zmq_ctx_term(z->ctx);
    free(z);
    *self_p = NULL;
}
