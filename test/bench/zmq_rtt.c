/* pskv-zmq-rtt --size BYTES [--reps N] [--warmup N] [--curve]: the raw ZeroMQ
 * baseline that pskv's push/pull latency is compared with.
 *
 * --curve: the crypto floor. Both sockets speak CURVE (fresh keypairs, no ZAP),
 * and the echo side gets a ZeroMQ context of its own, so each side encrypts in
 * its own I/O thread as a worker and a server in two processes do.
 *
 * One process, two threads, loopback TCP, default socket options: an echo
 * thread owns a ROUTER bound on tcp://127.0.0.1:* and sends every message back
 * as it came (routing id, then each payload frame, forwarding the received
 * zmq_msg_t itself, no copy); the main thread owns a DEALER that sends SIZE
 * bytes zero-copy from one buffer, filled once and never written again, and
 * waits for the echo before the next send, then times each round trip on
 * CLOCK_MONOTONIC. The ROUTER is created and bound by the main thread before
 * the echo thread starts (thread creation is the memory barrier ZeroMQ asks
 * for when a socket changes threads); zmq_ctx_shutdown stops the echo thread.
 *
 * --own-io: the echo side gets a ZeroMQ context of its own (without CURVE), as
 * a worker and a server in two processes have: by default one I/O thread moves
 * both sides' bytes in turn.
 *
 * --apply: the echo side does what a server's combined push-and-pull must do
 * before its reply can go, and nothing else: it reads the payload as fp32
 * gradients, checks that all are finite (a pass over them: a refused push
 * changes no weight), applies w -= 0.01 g to a table of its own and writes the
 * new weights into a fresh reply of the same size (one pass), and sends that.
 * The floor of pskv_pushpull into a view at that size: the echo plus the
 * update that no combined call can skip or overlap with its own reply.
 *
 * Prints, last on its line, cpu_us: the process's CPU time (every thread: both
 * sockets' user code, ZeroMQ's I/O threads, the kernel's loopback copies) per
 * timed round trip: what moving SIZE bytes each way costs ZeroMQ over loopback
 * TCP on this machine, as measured here. It depends on the threads' layout
 * (--own-io) and the buffers (--sockbuf), so it bounds nothing by itself:
 * docs/benchmarks.md, "The transport's CPU over TCP". */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <zmq.h>

/* --apply's table: the weights the echo side updates, one float a 4 bytes */
static float *table;
static size_t table_n;

typedef uint32_t v4u __attribute__((vector_size(16)));
typedef float v4f __attribute__((vector_size(16)));

/* 1 when every value is finite: the exponent bits not all ones (no NaN, no
 * infinity); four lanes at a time (SSE2, every x86-64 has it). */
static int all_finite(const float *g, size_t n)
{
    const v4u exp = {0x7f800000u, 0x7f800000u, 0x7f800000u, 0x7f800000u};
    v4u bad = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        v4u x;
        memcpy(&x, g + i, sizeof x);
        bad |= (v4u)((x & exp) == exp);
    }
    uint32_t tail = bad[0] | bad[1] | bad[2] | bad[3];
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, g + i, sizeof u);
        tail |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return !tail;
}

/* --apply: the reply to `part`: the table after part's gradients (w -= 0.01 g,
 * written to the table and the reply in one pass, four lanes at a time), or part
 * itself (sent back as it came) when a value is not finite. */
static void apply(zmq_msg_t *part)
{
    size_t n = zmq_msg_size(part) / sizeof(float), i = 0;
    const float *g = zmq_msg_data(part);
    zmq_msg_t out;
    if (n != table_n || !all_finite(g, n) || zmq_msg_init_size(&out, n * sizeof(float)))
        return;
    float *o = zmq_msg_data(&out);
    const v4f lr = {0.01f, 0.01f, 0.01f, 0.01f};
    for (; i + 4 <= n; i += 4) {
        v4f w, x;
        memcpy(&w, table + i, sizeof w);
        memcpy(&x, g + i, sizeof x);
        w -= lr * x;
        memcpy(table + i, &w, sizeof w);
        memcpy(o + i, &w, sizeof w);
    }
    for (; i < n; i++) {
        table[i] -= 0.01f * g[i];
        o[i] = table[i];
    }
    zmq_msg_move(part, &out); /* closes the received part first */
}

/* --apply: the table for SIZE bytes. Returns 0, or -1 (said why) when SIZE is not
 * a multiple of 4, with --curve, or out of memory. */
static int apply_setup(long size, int curve)
{
    if (size % 4 || curve) {
        fprintf(stderr, "pskv-zmq-rtt: --apply takes a SIZE that is a multiple of 4, "
                        "and no --curve\n");
        return -1;
    }
    table_n = (size_t)size / sizeof(float);
    table = calloc(table_n ? table_n : 1, sizeof(float));
    if (!table)
        fprintf(stderr, "pskv-zmq-rtt: out of memory\n");
    return table ? 0 : -1;
}

static void *echo_main(void *arg)
{
    void *router = arg;
    for (;;) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, router, 0) < 0) {
            zmq_msg_close(&part);
            if (errno == EINTR)
                continue;
            break; /* ETERM: the context is shutting down */
        }
        /* zmq_msg_send takes the part (and its buffer) on success. */
        int flags = zmq_msg_more(&part) ? ZMQ_SNDMORE : 0;
        if (table && !flags)
            apply(&part);
        if (zmq_msg_send(&part, router, flags) < 0) {
            zmq_msg_close(&part);
            if (errno == ETERM)
                break;
        }
    }
    zmq_close(router);
    return NULL;
}

/* The payload buffer is sent again each rep and freed by main after
 * zmq_ctx_term, so ZeroMQ must not free it. */
static void keep_buffer(void *data, void *hint)
{
    (void)data;
    (void)hint;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The process's CPU time so far, every thread, user and system (us). */
static double cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v[0..n-1]. */
static double pct(const double *v, long n, double p)
{
    long i = (long)(p * (double)n + 0.999999) - 1;
    if (i < 0)
        i = 0;
    if (i >= n)
        i = n - 1;
    return v[i];
}

static int parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return -1;
    *out = (long)v;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: pskv-zmq-rtt --size BYTES [--reps N] [--warmup N] [--curve] "
               "[--own-io] [--apply] [--sockbuf BYTES]\n"
               "  --curve: CURVE on both sockets, each side in its own I/O thread\n"
               "  --own-io: each side in its own I/O thread (as a worker and a server in\n"
               "    two processes are), without CURVE\n"
               "  --apply: the echo side checks the payload's fp32 values, applies them to a\n"
               "    table and sends the table back (own I/O threads; SIZE a multiple of 4)\n"
               "  --sockbuf: the kernel's send and receive buffers of both sockets "
               "(default: the kernel's)\n"
               "  --reps defaults to max(20, 200000000 / (BYTES + 10000)), at most 20000;\n"
               "  --warmup defaults to 50\n");
}

/* One round trip: send `size` bytes from buf, wait for the echo. Returns 0 or -1. */
static int round_trip(void *dealer, void *buf, size_t size)
{
    zmq_msg_t msg;
    if (zmq_msg_init_data(&msg, buf, size, keep_buffer, NULL) != 0)
        return -1;
    if (zmq_msg_send(&msg, dealer, 0) < 0) {
        zmq_msg_close(&msg);
        return -1;
    }
    zmq_msg_t back;
    zmq_msg_init(&back);
    int n = zmq_msg_recv(&back, dealer, 0);
    int ok = n >= 0 && (size_t)n == size && !zmq_msg_more(&back);
    zmq_msg_close(&back);
    return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    long size = -1, reps = 0, warmup = 50, sockbuf = 0;
    int curve = 0, own_io = 0, apply_on = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--curve")) {
            curve = 1;
            continue;
        }
        if (!strcmp(a, "--own-io")) {
            own_io = 1;
            continue;
        }
        if (!strcmp(a, "--apply")) {
            apply_on = own_io = 1;
            continue;
        }
        const char *v = i + 1 < argc ? argv[++i] : NULL;
        int bad = !v;
        if (!bad && !strcmp(a, "--size"))
            bad = parse_long(v, 0, 1L << 31, &size);
        else if (!bad && !strcmp(a, "--reps"))
            bad = parse_long(v, 1, 100000000, &reps);
        else if (!bad && !strcmp(a, "--warmup"))
            bad = parse_long(v, 0, 100000000, &warmup);
        else if (!bad && !strcmp(a, "--sockbuf"))
            bad = parse_long(v, 1, 1L << 30, &sockbuf);
        else
            bad = 1;
        if (bad) {
            fprintf(stderr, "pskv-zmq-rtt: bad option or value: %s %s\n", a, v ? v : "");
            usage(stderr);
            return 2;
        }
    }
    if (size < 0 || (apply_on && apply_setup(size, curve))) {
        usage(stderr);
        return 2;
    }
    if (reps == 0) {
        reps = 200000000L / (size + 10000);
        if (reps < 20)
            reps = 20;
        if (reps > 20000)
            reps = 20000;
    }

    void *ctx = zmq_ctx_new();
    /* the echo side's I/O thread: the dealer's own with --curve or --own-io */
    void *ectx = curve || own_io ? zmq_ctx_new() : ctx;
    void *router = ectx ? zmq_socket(ectx, ZMQ_ROUTER) : NULL;
    int zero = 0; /* linger only matters at exit: never wait there */
    char spub[41], ssec[41], cpub[41], csec[41];
    if (curve && (zmq_curve_keypair(spub, ssec) || zmq_curve_keypair(cpub, csec))) {
        fprintf(stderr, "pskv-zmq-rtt: --curve: this libzmq has no CURVE\n");
        return 1;
    }
    int sb = (int)sockbuf;
    if (router) {
        zmq_setsockopt(router, ZMQ_LINGER, &zero, sizeof zero);
        if (sb) { /* before bind: it applies to the connection accepted */
            zmq_setsockopt(router, ZMQ_SNDBUF, &sb, sizeof sb);
            zmq_setsockopt(router, ZMQ_RCVBUF, &sb, sizeof sb);
        }
        int one = 1;
        if (curve) {
            zmq_setsockopt(router, ZMQ_CURVE_SERVER, &one, sizeof one);
            zmq_setsockopt(router, ZMQ_CURVE_SECRETKEY, ssec, 40);
        }
    }
    if (!router || zmq_bind(router, "tcp://127.0.0.1:*") != 0) {
        fprintf(stderr, "pskv-zmq-rtt: cannot bind: %s\n", zmq_strerror(errno));
        return 1;
    }
    char endpoint[256];
    size_t eplen = sizeof endpoint;
    zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, endpoint, &eplen);
    pthread_t echo;
    if (pthread_create(&echo, NULL, echo_main, router) != 0) {
        fprintf(stderr, "pskv-zmq-rtt: cannot start the echo thread\n");
        return 1;
    }
    void *dealer = zmq_socket(ctx, ZMQ_DEALER);
    int wait_ms = 30000; /* an echo that stopped answering fails the round trip */
    if (dealer)
        zmq_setsockopt(dealer, ZMQ_RCVTIMEO, &wait_ms, sizeof wait_ms);
    if (dealer && sb) {
        zmq_setsockopt(dealer, ZMQ_SNDBUF, &sb, sizeof sb);
        zmq_setsockopt(dealer, ZMQ_RCVBUF, &sb, sizeof sb);
    }
    if (dealer && curve) {
        zmq_setsockopt(dealer, ZMQ_CURVE_SERVERKEY, spub, 40);
        zmq_setsockopt(dealer, ZMQ_CURVE_PUBLICKEY, cpub, 40);
        zmq_setsockopt(dealer, ZMQ_CURVE_SECRETKEY, csec, 40);
    }
    if (!dealer || zmq_connect(dealer, endpoint) != 0) {
        fprintf(stderr, "pskv-zmq-rtt: cannot connect to %s: %s\n", endpoint,
                zmq_strerror(errno));
        return 1;
    }

    void *buf = malloc(size ? (size_t)size : 1);
    double *rtt = malloc((size_t)reps * sizeof *rtt);
    if (!buf || !rtt) {
        fprintf(stderr, "pskv-zmq-rtt: out of memory\n");
        return 1;
    }
    for (long i = 0; i < size; i++)
        ((uint8_t *)buf)[i] = (uint8_t)(i * 131 + 7);
    for (long i = 0; apply_on && i < size / 4; i++) /* finite gradients */
        ((float *)buf)[i] = 1e-3f * (float)(i % 97) - 0.05f;

    int rc = 0;
    double cpu0 = 0;
    for (long i = 0; i < warmup + reps && rc == 0; i++) {
        if (i == warmup)
            cpu0 = cpu_us();
        double t0 = now_us();
        if (round_trip(dealer, buf, (size_t)size) < 0) {
            fprintf(stderr, "pskv-zmq-rtt: round trip %ld failed: %s\n", i,
                    zmq_strerror(errno));
            rc = 1;
            break;
        }
        if (i >= warmup)
            rtt[i - warmup] = now_us() - t0;
    }
    if (rc == 0) {
        double cpu = (cpu_us() - cpu0) / (double)reps;
        qsort(rtt, (size_t)reps, sizeof *rtt, cmp_double);
        printf("zmq_rtt size=%ld reps=%ld median_us=%.1f p10_us=%.1f p90_us=%.1f%s cpu_us=%.1f\n",
               size, reps, pct(rtt, reps, 0.5), pct(rtt, reps, 0.1), pct(rtt, reps, 0.9),
               curve ? " curve=1" : apply_on ? " own_io=1 apply=1" : own_io ? " own_io=1" : "",
               cpu);
    }

    zmq_setsockopt(dealer, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(dealer);
    zmq_ctx_shutdown(ectx); /* wakes the echo thread with ETERM */
    pthread_join(echo, NULL);
    if (ectx != ctx)
        zmq_ctx_term(ectx);
    zmq_ctx_term(ctx);
    free(rtt);
    free(buf);
    free(table);
    return rc;
}
