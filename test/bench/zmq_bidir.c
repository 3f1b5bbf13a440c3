/* pskv-zmq-bidir [--size BYTES] [--count N]: the raw ZeroMQ floor of a 2-rank
 * ring all-reduce step, that pskv_allreduce's bandwidth is compared with.
 *
 * Two processes (forked), each with a PULL bound on tcp://127.0.0.1:* and a PUSH
 * connected to the other's, each sending N messages of BYTES (zmq_send, a copy,
 * as the ring copies each piece) from a thread of its own while its main thread
 * receives N: both directions at once, as a ring step sends and receives. Each
 * process prints its receive rate:
 *   zmq_bidir size=BYTES count=N MBps=RATE
 * (10^6 bytes/s, from the first message received to the last). A side that
 * waits WAIT_MS for a message, or to hand one on, gives up and exits 1. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "timeutil.h"

enum { WAIT_MS = 30000 }; /* the longest wait for one message, either way */

typedef struct sender {
    void *sock;
    size_t size;
    long count;
} sender;

static void *send_main(void *arg)
{
    sender *s = arg;
    char *buf = malloc(s->size);
    if (!buf)
        return NULL;
    memset(buf, 1, s->size);
    for (long i = 0; i < s->count; i++)
        if (zmq_send(s->sock, buf, s->size, 0) < 0)
            break;
    free(buf);
    return NULL;
}

/* One side: receives on `in`, sends to port `peer` from a thread. Returns 0 or 1. */
static int side(void *ctx, void *in, int peer, size_t size, long count)
{
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", peer);
    sender s = {zmq_socket(ctx, ZMQ_PUSH), size, count};
    int wait = WAIT_MS;
    zmq_setsockopt(s.sock, ZMQ_LINGER, &wait, sizeof wait);
    zmq_setsockopt(s.sock, ZMQ_SNDTIMEO, &wait, sizeof wait);
    zmq_setsockopt(in, ZMQ_RCVTIMEO, &wait, sizeof wait);
    pthread_t t;
    if (zmq_connect(s.sock, ep) != 0 || pthread_create(&t, NULL, send_main, &s) != 0) {
        zmq_close(s.sock);
        return 1;
    }
    zmq_msg_t m;
    zmq_msg_init(&m);
    int64_t t0 = 0;
    long got = 0;
    int err = 0;
    for (; got < count; got++) {
        if (zmq_msg_recv(&m, in, 0) < 0) {
            err = zmq_errno();
            break;
        }
        if (got == 0)
            t0 = tu_now_ns();
    }
    double secs = (double)(tu_now_ns() - t0) * 1e-9;
    zmq_msg_close(&m);
    pthread_join(t, NULL);
    zmq_close(s.sock);
    if (got < count) {
        fprintf(stderr, "pskv-zmq-bidir: message %ld of %ld: %s\n", got + 1, count,
                err == EAGAIN ? "none within 30 s" : zmq_strerror(err));
        return 1;
    }
    printf("zmq_bidir size=%zu count=%ld MBps=%.1f\n", size, count,
           secs > 0 ? (double)(count - 1) * (double)size / secs / 1e6 : 0);
    fflush(stdout);
    return 0;
}

static int bound_port(void *sock)
{
    char ep[256];
    size_t len = sizeof ep;
    if (zmq_bind(sock, "tcp://127.0.0.1:*") != 0 ||
        zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, ep, &len) != 0)
        return -1;
    const char *colon = strrchr(ep, ':');
    return colon ? atoi(colon + 1) : -1;
}

int main(int argc, char **argv)
{
    size_t size = 8u << 20;
    long count = 100;
    int bad = argc % 2 == 0;
    for (int i = 1; i + 1 < argc && !bad; i += 2) {
        char *end = NULL;
        if (!strcmp(argv[i], "--size"))
            size = (size_t)strtoull(argv[i + 1], &end, 10);
        else if (!strcmp(argv[i], "--count"))
            count = strtol(argv[i + 1], &end, 10);
        bad = !end || end == argv[i + 1] || *end;
    }
    if (bad || size == 0 || count < 2) {
        fprintf(stderr, "usage: pskv-zmq-bidir [--size BYTES] [--count N >= 2]\n");
        return 2;
    }
    /* both PULLs bound before the fork, so each side knows the other's port */
    void *ctx0 = zmq_ctx_new();
    void *in[2] = {zmq_socket(ctx0, ZMQ_PULL), zmq_socket(ctx0, ZMQ_PULL)};
    int port[2] = {bound_port(in[0]), bound_port(in[1])};
    if (port[0] < 0 || port[1] < 0) {
        fprintf(stderr, "pskv-zmq-bidir: cannot bind: %s\n", zmq_strerror(zmq_errno()));
        return 1;
    }
    zmq_close(in[0]);
    zmq_close(in[1]);
    zmq_ctx_term(ctx0);
    pid_t child = fork();
    if (child < 0)
        return 1;
    int me = child == 0;
    void *ctx = zmq_ctx_new(), *sock = zmq_socket(ctx, ZMQ_PULL);
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port[me]);
    int rc = zmq_bind(sock, ep) != 0 || side(ctx, sock, port[!me], size, count);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    if (child == 0)
        _exit(rc);
    int st = 0;
    waitpid(child, &st, 0);
    return rc || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
}
