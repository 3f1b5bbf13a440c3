/* pskv_serve_lookup (pskv.h): a client of pskv-serve's ZeroMQ side (its --zmq-port,
 * worker/serve/szmq.h). One DEALER per call on a context shared by the process
 * (made once); no pskv_worker handle: a serving client is no member of a job.
 * With PSKV_KEYS=DIR (the keys other libpskv calls take without a pskv_config) the
 * socket is a CURVE client with DIR's key, toward the key in DIR/serve.pub
 * (pskv-serve's node.pub, copied there as scheduler.pub is). */
#define _GNU_SOURCE
#include "pskv.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "keys.h"
#include "net.h"
#include "pskv_errors.h"
#include "wire.h"

static void *lookup_ctx;
static pthread_once_t ctx_once = PTHREAD_ONCE_INIT;
static void make_ctx(void) { lookup_ctx = zmq_ctx_new(); }

#define WHY(...) (why && why_len ? (void)snprintf(why, why_len, __VA_ARGS__) : (void)0)

/* With PSKV_KEYS set: CURVE on sock (module comment). Returns 0 or a negated
 * PSKV_E* with why naming the file or the failure. */
static int curve_of(void *sock, char *why, size_t why_len)
{
    const char *dir = getenv("PSKV_KEYS");
    if (!dir || !*dir)
        return 0;
    keyset ks;
    char pub[KEY_Z85 + 1], bad[400];
    int rc = keys_load(&ks, dir, 0, bad, sizeof bad);
    if (rc == 0) {
        rc = keys_read_pub(dir, "serve.pub", pub, bad, sizeof bad);
        if (rc < 0) /* say what the file is for */
            snprintf(bad + strlen(bad), sizeof bad - strlen(bad),
                     " (PSKV_KEYS: serve.pub holds pskv-serve's node.pub)");
    }
    if (rc == 0 && net_curve_client(sock, &ks, pub) < 0) {
        snprintf(bad, sizeof bad, "cannot turn CURVE on: %s", zmq_strerror(zmq_errno()));
        rc = -PSKV_ENET;
    }
    keys_clear(&ks);
    if (rc < 0)
        WHY("%s", bad);
    return rc;
}

/* Checks the reply and copies its rows. Returns 0 or a negated PSKV_E*. */
static int take_reply(const wire_msg *m, size_t n, float *out, size_t out_cap, uint32_t *width,
                      int64_t *clock, char *why, size_t why_len)
{
    const Pskv__Meta *r = m->meta;
    if (r->type == PSKV__MSG_TYPE__ERROR) {
        WHY("%s", r->error ? r->error : "error");
        int code = r->has_error_code && r->error_code > 0 ? r->error_code : PSKV_EPROTO;
        return -code;
    }
    if (r->type != PSKV__MSG_TYPE__LOOKUP_REPLY || r->num_keys != n || (n && !m->vals)) {
        WHY("a malformed answer (%s of %llu rows for %zu keys)", wire_type_name((int)r->type),
            (unsigned long long)r->num_keys, n);
        return -PSKV_EPROTO;
    }
    if (n * r->width > out_cap) {
        WHY("the rows take %llu floats (width %u), out holds %zu",
            (unsigned long long)(n * r->width), r->width, out_cap);
        return -PSKV_EINVAL;
    }
    if (n)
        memcpy(out, m->vals, n * r->width * sizeof *out);
    if (width)
        *width = r->width;
    if (clock)
        *clock = r->has_clock ? r->clock : -1;
    return 0;
}

int pskv_serve_lookup(const char *endpoint, const char *table, const uint64_t *keys, size_t n,
                      float *out, size_t out_cap, uint32_t *width, int64_t *clock,
                      int timeout_ms, char *why, size_t why_len)
{
    char host[256];
    int port = 0;
    if (!endpoint || net_split_hostport(endpoint, host, sizeof host, &port) < 0) {
        WHY("endpoint '%s' is not HOST:PORT", endpoint ? endpoint : "(null)");
        return -PSKV_EINVAL;
    }
    if (!table || !*table || (n && (!keys || !out)) || timeout_ms < 0) {
        WHY("a table, keys and out are needed, and a time-out >= 0");
        return -PSKV_EINVAL;
    }
    pthread_once(&ctx_once, make_ctx);
    void *sock = lookup_ctx ? net_socket(lookup_ctx, ZMQ_DEALER, 0, 0) : NULL;
    int krc = sock ? curve_of(sock, why, why_len) : 0;
    if (krc < 0) {
        zmq_close(sock);
        return krc;
    }
    if (!sock || net_connect(sock, host, port) < 0) {
        if (sock)
            zmq_close(sock);
        WHY("cannot dial %s", endpoint);
        return -PSKV_ENET;
    }
    Pskv__Meta q;
    wire_meta_init(&q, PSKV__MSG_TYPE__LOOKUP);
    q.has_request_id = q.has_num_keys = q.has_width = 1;
    q.request_id = 1;
    q.num_keys = n;
    q.width = 1;
    q.follow_table = (char *)table;
    zmq_msg_t km;
    int rc = zmq_msg_init_size(&km, n * sizeof *keys) == 0 ? 0 : -PSKV_ENOMEM;
    if (rc == 0) {
        if (n)
            memcpy(zmq_msg_data(&km), keys, n * sizeof *keys);
        rc = wire_send(sock, NULL, &q, &km, NULL);
    }
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    if (rc == 0 && zmq_poll(&it, 1, timeout_ms) <= 0) {
        WHY("no answer from %s within %d ms", endpoint, timeout_ms);
        rc = -PSKV_ETIMEDOUT;
    } else if (rc == 0) {
        wire_msg m;
        char bad[256];
        rc = wire_recv(sock, 0, &m, bad, sizeof bad);
        if (rc < 0)
            WHY("%s", bad);
        else
            rc = take_reply(&m, n, out, out_cap, width, clock, why, why_len);
        wire_msg_close(&m);
    } else {
        WHY("cannot send to %s", endpoint);
    }
    zmq_close(sock);
    return rc;
}
