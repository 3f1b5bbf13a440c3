/* ZAP handler thread and handshake-failure monitors.
 *
 * Design: one thread polls the ZAP REP socket and every monitor PAIR. A ZAP
 * request is answered at once from the allowlists (a mutex guards their swap).
 * A monitor reports ACCEPTED (with the connection's fd: its peer address is read
 * then), HANDSHAKE_FAILED_* and DISCONNECTED (fd again): a failure is logged
 * with the address of the next connection that closes, which on a socket
 * refusing a rogue is the rogue's. A socket has one monitor: a daemon that also
 * wants the closes (the scheduler's failure detector) gets them forwarded over
 * an inproc PAIR (zap_forward_closes), as the monitor sent them. */
#define _GNU_SOURCE
#include "zap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <zmq.h>

#include "log.h"
#include "net.h"
#include "pskv_errors.h"
#include "refuse.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define MAX_WATCH 8
#define FD_SLOTS 64

typedef struct conn { /* accepted connections of a watched socket */
    int fd;
    char addr[64];
} conn;

typedef struct watch {
    void *pair;
    void *sock;             /* the watched socket (only compared, never used here) */
    void *fwd;              /* the ZAP thread's end of zap_forward_closes' PAIR, or NULL */
    conn conns[FD_SLOTS];
    int pending;            /* a handshake failed: refuse_reason + 1, logged at the close */
} watch;

struct zap {
    void *ctx;
    void *rep;
    pthread_t thread;
    atomic_int stop;
    pthread_mutex_t lock;   /* guards allow, view, watches being added */
    key_allow allow, view;
    unsigned roles;
    watch watches[MAX_WATCH];
    int nwatch;
    int next_monitor;
};

key_role zap_peer(void *frame, char *pub, size_t publen)
{
    const char *uid = zmq_msg_gets((zmq_msg_t *)frame, "User-Id");
    if (pub && publen)
        pub[0] = '\0';
    if (!uid || !*uid)
        return KEY_ROLE_NONE;
    char role[16];
    const char *sp = strchr(uid, ' ');
    size_t rl = sp ? (size_t)(sp - uid) : strlen(uid);
    if (rl >= sizeof role)
        return KEY_ROLE_NONE;
    memcpy(role, uid, rl);
    role[rl] = '\0';
    if (pub && publen && sp)
        snprintf(pub, publen, "%.*s", (int)strcspn(sp + 1, " "), sp + 1);
    return key_role_parse(role);
}

void zap_peer_bind(void *frame, char *bind, size_t len)
{
    const char *uid = zmq_msg_gets((zmq_msg_t *)frame, "User-Id");
    const char *sp = uid ? strchr(uid, ' ') : NULL;
    sp = sp ? strchr(sp + 1, ' ') : NULL;
    snprintf(bind, len, "%s", sp ? sp + 1 : "");
}

/* Receives the frames of one message into f (at most n; extra frames dropped). */
static int recv_frames(void *s, zmq_msg_t *f, int n)
{
    int got = 0, more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s, got ? 0 : ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            for (int i = 0; i < got && i < n; i++)
                zmq_msg_close(&f[i]);
            return -1;
        }
        more = zmq_msg_more(&m);
        if (got < n)
            f[got] = m;
        else
            zmq_msg_close(&m);
        got++;
    }
    return got < n ? got : n;
}

static void send_str(void *s, const void *data, size_t len, int more)
{
    zmq_send(s, data, len, more ? ZMQ_SNDMORE : 0);
}

/* One ZAP request: answer 200 with User-Id "ROLE KEY[ BINDING]", or 400. */
static void answer(zap *z)
{
    zmq_msg_t f[8];
    int n = recv_frames(z->rep, f, 8);
    if (n < 0)
        return;
    char addr[64] = "?", pub[KEY_Z85 + 1] = "";
    const char *mech = n >= 6 ? (const char *)zmq_msg_data(&f[5]) : "";
    size_t mlen = n >= 6 ? zmq_msg_size(&f[5]) : 0;
    if (n >= 4 && zmq_msg_size(&f[3]) < sizeof addr) {
        memcpy(addr, zmq_msg_data(&f[3]), zmq_msg_size(&f[3]));
        addr[zmq_msg_size(&f[3])] = '\0';
    }
    int curve = mlen == 5 && !memcmp(mech, "CURVE", 5) && n >= 7 && zmq_msg_size(&f[6]) == 32;
    if (curve)
        zmq_z85_encode(pub, (const uint8_t *)zmq_msg_data(&f[6]), 32);
    key_role role = KEY_ROLE_NONE;
    char bind[KEY_BIND] = ""; /* the file's binding; a key known from the view has none */
    pthread_mutex_lock(&z->lock);
    if (curve) {
        const key_entry *e = key_allow_find(&z->allow, pub);
        if (e) {
            role = e->role;
            snprintf(bind, sizeof bind, "%s", e->bind);
        } else {
            role = key_allow_role(&z->view, pub);
        }
    }
    unsigned roles = z->roles;
    pthread_mutex_unlock(&z->lock);
    int ok = curve && role != KEY_ROLE_NONE && (roles & (1u << role));
    if (!curve)
        refuse_note(REFUSE_PLAINTEXT, addr, NULL, "a connection without CURVE");
    else if (role == KEY_ROLE_NONE)
        refuse_note(REFUSE_UNKNOWN_KEY, addr, pub, "a key not in the allowlist");
    else if (!ok)
        refuse_note(REFUSE_ROLE, addr, pub, key_role_name(role));
    char uid[64 + KEY_BIND];
    snprintf(uid, sizeof uid, "%s %s%s%s", key_role_name(role), pub, *bind ? " " : "", bind);
    send_str(z->rep, "1.0", 3, 1);
    if (n >= 2)
        send_str(z->rep, zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), 1);
    else
        send_str(z->rep, "", 0, 1);
    send_str(z->rep, ok ? "200" : "400", 3, 1);
    send_str(z->rep, ok ? "OK" : "not allowed", ok ? 2 : 11, 1);
    send_str(z->rep, ok ? uid : "", ok ? strlen(uid) : 0, 1);
    send_str(z->rep, "", 0, 0);
    for (int i = 0; i < n; i++)
        zmq_msg_close(&f[i]);
}

static conn *conn_of(watch *w, int fd, int take)
{
    for (int i = 0; i < FD_SLOTS; i++)
        if (w->conns[i].fd == fd + 1)
            return &w->conns[i];
    if (!take)
        return NULL;
    for (int i = 0; i < FD_SLOTS; i++)
        if (!w->conns[i].fd)
            return &w->conns[i];
    return &w->conns[fd % FD_SLOTS]; /* full: overwrite one (logging only) */
}

static void peer_addr(int fd, char *out, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    snprintf(out, len, "?");
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
        return;
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        port = ntohs(a->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        port = ntohs(a->sin6_port);
    }
    snprintf(out, len, "%s:%d", host, port);
}

/* One monitor event. */
static void monitor_event(watch *w)
{
    zmq_msg_t f[2];
    int n = recv_frames(w->pair, f, 2);
    if (n < 0)
        return;
    if (n >= 1 && zmq_msg_size(&f[0]) >= 6) {
        const uint8_t *d = zmq_msg_data(&f[0]);
        uint16_t ev;
        uint32_t val;
        memcpy(&ev, d, 2);
        memcpy(&val, d + 2, 4);
        if (ev == ZMQ_EVENT_ACCEPTED) {
            conn *c = conn_of(w, (int)val, 1);
            c->fd = (int)val + 1;
            peer_addr((int)val, c->addr, sizeof c->addr);
        } else if (ev == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
                   ev == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
            int plain = ev == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
                        val == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH;
            w->pending = (plain ? REFUSE_PLAINTEXT : REFUSE_HANDSHAKE) + 1;
        } else if (ev == ZMQ_EVENT_DISCONNECTED) {
            conn *c = conn_of(w, (int)val, 0);
            if (w->pending) {
                refuse_reason r = (refuse_reason)(w->pending - 1);
                refuse_note(r, c ? c->addr : NULL, NULL,
                            r == REFUSE_PLAINTEXT
                                ? "a connection without CURVE (no --keys?)"
                                : "a CURVE handshake that failed (wrong server key?)");
                w->pending = 0;
            }
            if (c)
                c->fd = 0;
            if (w->fwd && n == 2) { /* as the monitor sent it; never blocks this thread */
                if (zmq_msg_send(&f[0], w->fwd, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0)
                    zmq_msg_send(&f[1], w->fwd, 0);
            }
        }
    }
    for (int i = 0; i < n; i++)
        zmq_msg_close(&f[i]);
}

static void *zap_main(void *arg)
{
    zap *z = arg;
    while (!atomic_load(&z->stop)) {
        zmq_pollitem_t items[1 + MAX_WATCH];
        pthread_mutex_lock(&z->lock);
        int nw = z->nwatch;
        pthread_mutex_unlock(&z->lock);
        items[0] = (zmq_pollitem_t){z->rep, 0, ZMQ_POLLIN, 0};
        for (int i = 0; i < nw; i++)
            items[1 + i] = (zmq_pollitem_t){z->watches[i].pair, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(items, 1 + nw, 100) < 0) {
            if (errno == ETERM)
                break;
            continue;
        }
        if (items[0].revents & ZMQ_POLLIN)
            answer(z);
        for (int i = 0; i < nw; i++)
            if (items[1 + i].revents & ZMQ_POLLIN)
                monitor_event(&z->watches[i]);
    }
    return NULL;
}

zap *zap_start(void *ctx, key_allow *allow, unsigned roles, char *why, size_t whylen)
{
    zap *z = calloc(1, sizeof *z);
    if (!z) {
        log_why(why, whylen, "out of memory");
        return NULL;
    }
    z->ctx = ctx;
    z->roles = roles;
    pthread_mutex_init(&z->lock, NULL);
    if (allow) {
        z->allow = *allow;
        memset(allow, 0, sizeof *allow);
    }
    int linger = 0;
    z->rep = zmq_socket(ctx, ZMQ_REP);
    if (z->rep)
        zmq_setsockopt(z->rep, ZMQ_LINGER, &linger, sizeof linger);
    if (!z->rep || zmq_bind(z->rep, ZAP_ENDPOINT) != 0) {
        log_why(why, whylen, "cannot start the ZAP handler on %s: %s", ZAP_ENDPOINT,
                zmq_strerror(errno));
        if (z->rep)
            zmq_close(z->rep);
        key_allow_free(&z->allow);
        pthread_mutex_destroy(&z->lock);
        free(z);
        return NULL;
    }
    if (pthread_create(&z->thread, NULL, zap_main, z) != 0) {
        log_why(why, whylen, "cannot start the ZAP thread");
        zmq_close(z->rep);
        key_allow_free(&z->allow);
        pthread_mutex_destroy(&z->lock);
        free(z);
        return NULL;
    }
    return z;
}

/* Puts `fresh` in *slot under the lock (the ZAP thread reads it) and frees what
 * was there; fresh is taken over. */
static void swap_list(zap *z, key_allow *slot, key_allow *fresh)
{
    key_allow old;
    pthread_mutex_lock(&z->lock);
    old = *slot;
    *slot = *fresh;
    pthread_mutex_unlock(&z->lock);
    memset(fresh, 0, sizeof *fresh);
    key_allow_free(&old);
}

void zap_reload(zap *z, key_allow *allow) { swap_list(z, &z->allow, allow); }

void zap_allow_view(zap *z, key_allow *view) { swap_list(z, &z->view, view); }

int zap_watch(zap *z, void *sock)
{
    if (z->nwatch >= MAX_WATCH)
        return -PSKV_EINVAL;
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://pskv-zap-monitor-%p-%d", (void *)z, z->next_monitor++);
    int events = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                 ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_DISCONNECTED;
    void *pair = net_monitor(z->ctx, sock, ep, events);
    if (!pair)
        return -PSKV_ENET;
    /* handed to the ZAP thread: the mutex is the memory barrier ZeroMQ asks for */
    pthread_mutex_lock(&z->lock);
    memset(&z->watches[z->nwatch], 0, sizeof z->watches[z->nwatch]);
    z->watches[z->nwatch].pair = pair;
    z->watches[z->nwatch].sock = sock;
    z->nwatch++;
    pthread_mutex_unlock(&z->lock);
    return 0;
}

void *zap_forward_closes(zap *z, void *sock)
{
    if (!z)
        return NULL;
    watch *w = NULL;
    pthread_mutex_lock(&z->lock);
    for (int i = 0; i < z->nwatch; i++)
        if (z->watches[i].sock == sock && !z->watches[i].fwd)
            w = &z->watches[i];
    pthread_mutex_unlock(&z->lock);
    if (!w)
        return NULL;
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://pskv-zap-closes-%p-%d", (void *)z, z->next_monitor++);
    void *out = zmq_socket(z->ctx, ZMQ_PAIR), *in = zmq_socket(z->ctx, ZMQ_PAIR);
    int linger = 0;
    if (out && in) {
        zmq_setsockopt(out, ZMQ_LINGER, &linger, sizeof linger);
        zmq_setsockopt(in, ZMQ_LINGER, &linger, sizeof linger);
    }
    if (!out || !in || zmq_bind(out, ep) != 0 || zmq_connect(in, ep) != 0) {
        if (out)
            zmq_close(out);
        if (in)
            zmq_close(in);
        return NULL;
    }
    /* handed to the ZAP thread: the mutex is the memory barrier ZeroMQ asks for */
    pthread_mutex_lock(&z->lock);
    w->fwd = out;
    pthread_mutex_unlock(&z->lock);
    return in;
}

void zap_stop(zap **zp)
{
    zap *z = zp ? *zp : NULL;
    if (!z)
        return;
    atomic_store(&z->stop, 1);
    pthread_join(z->thread, NULL);
    for (int i = 0; i < z->nwatch; i++) {
        zmq_close(z->watches[i].pair);
        if (z->watches[i].fwd)
            zmq_close(z->watches[i].fwd);
    }
    zmq_close(z->rep);
    key_allow_free(&z->allow);
    key_allow_free(&z->view);
    pthread_mutex_destroy(&z->lock);
    free(z);
    *zp = NULL;
}
