/* pskv-chain-floor --replicas R [--size BYTES] [--steps N] [--apply 1]: the transport floor of
 * scripts/bench-faults.sh's replication figure (R = 2 over R = 1, 1 MiB pipelined).
 *
 * Raw ZeroMQ in the bench's topology and message pattern, without pskv: one worker
 * and three server processes (each its own ZeroMQ context and I/O thread), loopback
 * TCP, default socket options. Each pipelined step the worker sends every server a
 * "push" of SIZE/3 bytes and a "pull", and waits for six answers. A server answers
 * the pull with SIZE/3 bytes (lent, no copy) and acknowledges the push at once
 * (R = 1), or forwards the push's bytes (the received frame itself, no copy) to the
 * next server, which acknowledges, and acknowledges the worker only then (R = 2:
 * chain replication's messages, REPLICATE and REPLICATE_ACK). No protobuf, no
 * apply, no checks: what moving the bytes costs this machine. On a machine whose
 * cores the processes keep busy, R = 2 moves 3 MiB a step where R = 1 moves 2, so
 * its step over R = 1's is this program's ratio at best, whatever the server does.
 * With --apply 1 every server that takes a push's bytes (R = 1: the server; R = 2:
 * the head, then the next server) also applies them to its own weights (w -= lr g
 * over SIZE/3 bytes of floats, in a plain loop the compiler vectorises) before it
 * forwards or acknowledges, as a parameter server's replica must: the floor of a
 * server that keeps every replica's values up to date.
 *
 * Prints one line: chain_floor replicas=R size=BYTES steps=N apply=0|1 step_us=US cpu_us=US
 * (cpu_us: all four processes' CPU, every thread, per timed step). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "timeutil.h"

#define NSERVERS 3
#define FIFO 1024 /* pushes a server forwards and waits on; the worker has 1 a step */

static char *payload; /* the worker's push and every pull answer: sent, never written */
static size_t part;
static float *weights; /* --apply: a server's own values (SIZE/3 bytes) */

/* --apply: w -= lr g over the push's floats, the update every holder of it does. */
static void apply(const zmq_msg_t *pay)
{
    const float *g = zmq_msg_data((zmq_msg_t *)pay);
    size_t n = zmq_msg_size((zmq_msg_t *)pay) / sizeof(float);
    for (size_t i = 0; weights && i < n && i < part / sizeof(float); i++)
        weights[i] -= 1e-4f * g[i];
}

static double now_us(void) { return (double)tu_now_ns() / 1e3; }

static double cpu_us(void) { return (double)tu_process_cpu_ns() / 1e3; } /* every thread */

static void keep(void *data, void *hint)
{
    (void)data;
    (void)hint;
}

static int send_byte(void *s, char t, int more)
{
    return zmq_send(s, &t, 1, more ? ZMQ_SNDMORE : 0) == 1 ? 0 : -1;
}

static int send_payload(void *s)
{
    zmq_msg_t m;
    zmq_msg_init_data(&m, payload, part, keep, NULL);
    if (zmq_msg_send(&m, s, 0) < 0) {
        zmq_msg_close(&m);
        return -1;
    }
    return 0;
}

/* Server i: binds, reports its port on `up`, reads its successor's on `down`, then
 * serves until 'Q'; reports its CPU since 'S' on `up` and exits. */
static void server(int R, int up, int down)
{
    void *ctx = zmq_ctx_new(), *r = zmq_socket(ctx, ZMQ_ROUTER), *d = NULL;
    char ep[128];
    size_t len = sizeof ep;
    if (zmq_bind(r, "tcp://127.0.0.1:*") || zmq_getsockopt(r, ZMQ_LAST_ENDPOINT, ep, &len))
        _exit(1);
    int port = atoi(strrchr(ep, ':') + 1), next = 0;
    if (write(up, &port, sizeof port) != sizeof port || read(down, &next, sizeof next) != sizeof next)
        _exit(1);
    if (R == 2) {
        d = zmq_socket(ctx, ZMQ_DEALER);
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", next);
        if (zmq_connect(d, ep))
            _exit(1);
    }
    zmq_msg_t waiting[FIFO]; /* routing ids of the pushes forwarded, oldest first */
    unsigned long first = 0, last = 0;
    double c0 = 0;
    for (;;) {
        zmq_pollitem_t it[2] = {{r, 0, ZMQ_POLLIN, 0}, {d, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(it, d ? 2 : 1, -1) < 0 && errno != EINTR)
            _exit(1);
        char t;
        while (d && zmq_recv(d, &t, 1, ZMQ_DONTWAIT) == 1 && first < last) {
            zmq_msg_send(&waiting[first++ % FIFO], r, ZMQ_SNDMORE); /* the next has it */
            send_byte(r, 'A', 0);
        }
        for (;;) {
            zmq_msg_t rid, ty, pay;
            zmq_msg_init(&rid);
            if (zmq_msg_recv(&rid, r, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&rid);
                break;
            }
            zmq_msg_init(&ty);
            zmq_msg_init(&pay);
            zmq_msg_recv(&ty, r, 0);
            t = zmq_msg_size(&ty) ? *(char *)zmq_msg_data(&ty) : 0;
            if (zmq_msg_more(&ty))
                zmq_msg_recv(&pay, r, 0);
            zmq_msg_close(&ty);
            if (t == 'P' || t == 'F')
                apply(&pay);
            if (t == 'P' && R == 2 && last - first < FIFO) { /* on, the same frame */
                zmq_msg_init(&waiting[last % FIFO]);
                zmq_msg_move(&waiting[last++ % FIFO], &rid);
                send_byte(d, 'F', 1);
                zmq_msg_send(&pay, d, 0);
            } else if (t == 'P' || t == 'F') { /* acknowledged */
                zmq_msg_send(&rid, r, ZMQ_SNDMORE);
                send_byte(r, t == 'P' ? 'A' : 'K', 0);
            } else if (t == 'L') { /* a pull: SIZE/3 bytes */
                zmq_msg_send(&rid, r, ZMQ_SNDMORE);
                send_byte(r, 'R', 1);
                send_payload(r);
            } else if (t == 'S') {
                c0 = cpu_us();
            } else if (t == 'Q') {
                double c = cpu_us() - c0;
                _exit(write(up, &c, sizeof c) == sizeof c ? 0 : 1);
            }
            zmq_msg_close(&rid);
            zmq_msg_close(&pay);
        }
    }
}

/* Waits for n answers on the worker's sockets. Returns 0 or -1. */
static int answers(void **w, int n)
{
    while (n > 0) {
        zmq_pollitem_t it[NSERVERS];
        for (int i = 0; i < NSERVERS; i++)
            it[i] = (zmq_pollitem_t){w[i], 0, ZMQ_POLLIN, 0};
        if (zmq_poll(it, NSERVERS, 10000) <= 0)
            return -1;
        for (int i = 0; i < NSERVERS; i++) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            while (zmq_msg_recv(&m, w[i], ZMQ_DONTWAIT) >= 0) {
                if (!zmq_msg_more(&m))
                    n--;
                zmq_msg_close(&m);
                zmq_msg_init(&m);
            }
            zmq_msg_close(&m);
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    long R = 0, size = 1 << 20, steps = 2000, upd = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--replicas"))
            R = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--size"))
            size = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps"))
            steps = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--apply"))
            upd = atol(argv[i + 1]);
    }
    if ((R != 1 && R != 2) || size < NSERVERS || steps < 1 || argc % 2 == 0) {
        fprintf(stderr, "usage: pskv-chain-floor --replicas 1|2 [--size BYTES] [--steps N] "
                        "[--apply 0|1]\n");
        return 2;
    }
    part = (size_t)size / NSERVERS;
    payload = malloc(part);
    weights = upd ? calloc(part / sizeof(float) + 1, sizeof(float)) : NULL;
    if (!payload || (upd && !weights))
        return 1;
    for (size_t i = 0; i < part / sizeof(float); i++) /* the bench's gradient (no denormals) */
        ((float *)payload)[i] = 1e-3f * (float)(i % 17);
    int up[NSERVERS][2], down[NSERVERS][2], port[NSERVERS];
    pid_t kid[NSERVERS];
    for (int i = 0; i < NSERVERS; i++) {
        if (pipe(up[i]) || pipe(down[i]) || (kid[i] = fork()) < 0)
            return 1;
        if (kid[i] == 0)
            server((int)R, up[i][1], down[i][0]);
        if (read(up[i][0], &port[i], sizeof port[i]) != sizeof port[i])
            return 1;
    }
    for (int i = 0; i < NSERVERS; i++) /* each its successor on the ring */
        if (write(down[i][1], &port[(i + 1) % NSERVERS], sizeof(int)) != sizeof(int))
            return 1;
    void *ctx = zmq_ctx_new(), *w[NSERVERS];
    for (int i = 0; i < NSERVERS; i++) {
        char ep[64];
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port[i]);
        w[i] = zmq_socket(ctx, ZMQ_DEALER);
        if (zmq_connect(w[i], ep))
            return 1;
    }
    long warm = steps / 5 + 10;
    double t0 = 0, c0 = 0;
    int rc = 0;
    for (long s = 0; s < warm + steps && rc == 0; s++) {
        if (s == warm) {
            for (int i = 0; i < NSERVERS; i++)
                send_byte(w[i], 'S', 0);
            t0 = now_us();
            c0 = cpu_us();
        }
        for (int i = 0; i < NSERVERS && rc == 0; i++)
            rc = send_byte(w[i], 'P', 1) || send_payload(w[i]) || send_byte(w[i], 'L', 0);
        if (rc == 0)
            rc = answers(w, 2 * NSERVERS);
    }
    double us = (now_us() - t0) / (double)steps, cpu = cpu_us() - c0;
    for (int i = 0; i < NSERVERS; i++) {
        double c = 0;
        send_byte(w[i], 'Q', 0);
        if (rc == 0 && read(up[i][0], &c, sizeof c) != sizeof c)
            rc = -1;
        cpu += c;
        if (rc)
            kill(kid[i], SIGKILL);
        waitpid(kid[i], NULL, 0);
    }
    for (int i = 0; i < NSERVERS; i++)
        zmq_close(w[i]);
    zmq_ctx_term(ctx);
    free(payload);
    free(weights);
    if (rc) {
        fprintf(stderr, "pskv-chain-floor: a step failed (no answer within 10 s)\n");
        return 1;
    }
    printf("chain_floor replicas=%ld size=%ld steps=%ld apply=%ld step_us=%.1f cpu_us=%.0f\n", R,
           size, steps, (long)(upd != 0), us, cpu / (double)steps);
    return 0;
}
