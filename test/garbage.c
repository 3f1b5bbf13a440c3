/* pskv-garbage: sends malformed messages to a pskv daemon (a server's or the
 * scheduler's ROUTER) and reports how it answered.
 *
 * Each ZeroMQ kind goes out on its own fresh DEALER, so a late reply to one kind
 * can never be taken for the answer to the next; the tool then waits up to
 * --timeout-ms for an ERROR reply. Raw TCP garbage (not ZeroMQ at all, and a
 * ZMTP greeting followed by junk) and an oversized frame expect no answer: the
 * daemon should drop that connection and keep serving, which the final `alive`
 * probe checks. Every socket has linger 0 (the oversized one a bounded linger)
 * and every wait a time-out, so the tool never hangs.
 *
 * Without --job-id the daemon's job id is unknown, so a server refuses most
 * kinds with a job id error before looking further; pass the job id (and, for
 * out-of-range, an existing dense --table and its --width) to reach the deeper
 * checks. Exit status: 0 when every kind that expects a reply got an ERROR,
 * 1 otherwise, 2 on a usage error. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "net.h"
#include "pskv_errors.h"
#include "wire.h"

#define MAX_PARTS 5
#define RAW_BYTES 4096
#define NO_SUCH_TABLE "pskv-garbage/no-such-table"
#define WRONG_JOB 12345u

typedef struct opts {
    const char *endpoint; /* tcp://HOST:PORT */
    const char *kind;     /* "all" or one kind name */
    int64_t max_message;  /* receiver's limit; 0 = skip the oversized kind */
    uint64_t job_id;      /* 0 = leave job_id unset */
    const char *table;    /* out-of-range: an existing dense table, else NO_SUCH_TABLE */
    uint32_t width;       /* out-of-range: that table's width */
    int timeout_ms;       /* wait for each reply */
    uint64_t seed;
} opts;

/* One multipart message being built; parts are owned (malloc). */
typedef struct parts {
    int n;
    void *data[MAX_PARTS];
    size_t len[MAX_PARTS];
} parts;

static uint64_t rng;
static uint64_t next_request = 1;

static uint64_t rnd(void)
{
    /* xorshift64*: reproducible from --seed, good enough for junk. */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1DULL;
}

static void fill_random(void *p, size_t n)
{
    uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(rnd() >> 56);
}

static void add(parts *p, const void *data, size_t len)
{
    if (p->n >= MAX_PARTS)
        abort(); /* a bug in a builder below */
    void *copy = malloc(len ? len : 1);
    if (!copy) {
        fprintf(stderr, "pskv-garbage: out of memory\n");
        exit(1);
    }
    if (len)
        memcpy(copy, data, len);
    p->data[p->n] = copy;
    p->len[p->n] = len;
    p->n++;
}

static void add_meta(parts *p, const Pskv__Meta *m)
{
    uint8_t buf[512];
    size_t len = pskv__meta__get_packed_size(m);
    if (len > sizeof buf)
        abort();
    pskv__meta__pack(m, buf);
    add(p, buf, len);
}

static void add_keys(parts *p, uint64_t first, uint64_t n)
{
    uint64_t keys[8];
    if (n > 8)
        abort();
    for (uint64_t i = 0; i < n; i++)
        keys[i] = first + i; /* little-endian hosts only, like pskv itself */
    add(p, keys, n * sizeof keys[0]);
}

static void add_vals(parts *p, uint64_t n)
{
    float *vals = malloc((n ? n : 1) * sizeof *vals);
    if (!vals)
        abort();
    for (uint64_t i = 0; i < n; i++)
        vals[i] = 0.25f * (float)i;
    add(p, vals, n * sizeof vals[0]);
    free(vals);
}

static void parts_free(parts *p)
{
    for (int i = 0; i < p->n; i++)
        free(p->data[i]);
    p->n = 0;
}

/* A well-formed request of `type` for the table named `table`; the builders
 * then break one thing in it. */
static void base(const opts *o, Pskv__Meta *m, Pskv__MsgType type, const char *table,
                 uint64_t nkeys, uint32_t width)
{
    wire_meta_init(m, type);
    if (o->job_id) {
        m->has_job_id = 1;
        m->job_id = o->job_id;
    }
    m->has_request_id = 1;
    m->request_id = next_request++;
    m->has_table_id = 1;
    m->table_id = wire_table_id(table);
    m->has_num_keys = 1;
    m->num_keys = nkeys;
    m->has_width = 1;
    m->width = width;
}

static int meta_parses(const void *data, size_t len)
{
    Pskv__Meta *m = pskv__meta__unpack(NULL, len, data);
    if (!m)
        return 0;
    pskv__meta__free_unpacked(m, NULL);
    return 1;
}

/* ---- the malformed messages ---------------------------------------------- */

static void k_random(const opts *o, parts *p)
{
    (void)o;
    uint8_t buf[256];
    size_t len = 0;
    for (int tries = 0; tries < 100; tries++) {
        len = 1 + (size_t)(rnd() % sizeof buf);
        fill_random(buf, len);
        if (!meta_parses(buf, len))
            break;
    }
    if (meta_parses(buf, len)) { /* astronomically unlikely: fall back to known junk */
        memset(buf, 0xff, 16);
        len = 16;
    }
    add(p, buf, len);
}

static void k_truncated(const opts *o, parts *p)
{
    Pskv__Meta m;
    base(o, &m, PSKV__MSG_TYPE__PUSH, NO_SUCH_TABLE, 4, 1);
    uint8_t buf[512];
    size_t len = pskv__meta__pack(&m, buf);
    /* Cut inside a field: a cut at a field boundary could still decode. */
    size_t cut = len / 2;
    while (cut > 1 && meta_parses(buf, cut))
        cut--;
    add(p, buf, cut);
    add_keys(p, 0, 4);
    add_vals(p, 4);
}

static void k_badproto(const opts *o, parts *p)
{
    (void)o;
    /* version=1, type=PULL, then a tag with wire type 7, which does not exist. */
    static const uint8_t bad[] = {0x08, 0x01, 0x10, 0x18, 0x0f, 0x01, 0x02, 0x03};
    add(p, bad, sizeof bad);
}

static void k_keys_count(const opts *o, parts *p)
{
    Pskv__Meta m;
    base(o, &m, PSKV__MSG_TYPE__PUSH, NO_SUCH_TABLE, 4, 1);
    add_meta(p, &m);
    add_keys(p, 0, 3); /* num_keys says 4 */
    add_vals(p, 4);
}

static void k_vals_count(const opts *o, parts *p)
{
    Pskv__Meta m;
    base(o, &m, PSKV__MSG_TYPE__PUSH, NO_SUCH_TABLE, 4, 2);
    add_meta(p, &m);
    add_keys(p, 0, 4);
    add_vals(p, 3); /* 4 keys x width 2 need 8 */
}

static void k_unknown_table_push(const opts *o, parts *p)
{
    Pskv__Meta m;
    base(o, &m, PSKV__MSG_TYPE__PUSH, NO_SUCH_TABLE, 2, 1);
    add_meta(p, &m);
    add_keys(p, 10, 2);
    add_vals(p, 2);
}

static void k_unknown_table_pull(const opts *o, parts *p)
{
    Pskv__Meta m;
    base(o, &m, PSKV__MSG_TYPE__PULL, NO_SUCH_TABLE, 2, 1);
    add_meta(p, &m);
    add_keys(p, 10, 2);
}

static void k_out_of_range(const opts *o, parts *p)
{
    /* A dense run just below UINT64_MAX: past the end of any dense table (and a
     * dense run is refused outright on a sparse table), but no overflow, so it
     * passes wire_parse and reaches the receiver's range check. */
    Pskv__Meta m;
    base(o, &m, PSKV__MSG_TYPE__PUSH, o->table ? o->table : NO_SUCH_TABLE, 1, o->width);
    m.has_first_key = 1;
    m.first_key = UINT64_MAX - 1;
    add_meta(p, &m);
    add_vals(p, o->width);
}

static void k_frames(const opts *o, parts *p)
{
    Pskv__Meta m;
    base(o, &m, PSKV__MSG_TYPE__PUSH, NO_SUCH_TABLE, 2, 1);
    add_meta(p, &m);
    add_keys(p, 0, 2);
    add_vals(p, 2);
    add_vals(p, 2);
    add_vals(p, 2);
}

static void k_version(const opts *o, parts *p)
{
    Pskv__Meta m;
    base(o, &m, PSKV__MSG_TYPE__PULL, NO_SUCH_TABLE, 1, 1);
    m.version = 99;
    add_meta(p, &m);
    add_keys(p, 0, 1);
}

static void k_job(const opts *o, parts *p)
{
    Pskv__Meta m;
    base(o, &m, PSKV__MSG_TYPE__PULL, NO_SUCH_TABLE, 1, 1);
    m.has_job_id = 1;
    m.job_id = o->job_id == WRONG_JOB ? WRONG_JOB + 1 : WRONG_JOB;
    add_meta(p, &m);
    add_keys(p, 0, 1);
}

typedef struct kind {
    const char *name;
    void (*build)(const opts *, parts *);
    const char *help;
} kind;

static const kind kinds[] = {
    {"random", k_random, "random bytes as frame 0"},
    {"truncated", k_truncated, "a valid PUSH Meta cut short"},
    {"badproto", k_badproto, "frame 0 is not protobuf (wire type 7)"},
    {"keys-count", k_keys_count, "PUSH whose keys frame does not match num_keys"},
    {"vals-count", k_vals_count, "PUSH whose values frame does not match num_keys x width"},
    {"unknown-table-push", k_unknown_table_push, "PUSH to a table that does not exist"},
    {"unknown-table-pull", k_unknown_table_pull, "PULL from a table that does not exist"},
    {"out-of-range", k_out_of_range, "dense PUSH at first_key UINT64_MAX-1"},
    {"frames", k_frames, "PUSH in 5 frames"},
    {"version", k_version, "PULL with protocol version 99"},
    {"job", k_job, "PULL with job id 12345"},
};
#define NKINDS ((int)(sizeof kinds / sizeof kinds[0]))

/* ---- ZeroMQ side ----------------------------------------------------------- */

static void *dealer(void *ctx, const opts *o, int linger_ms)
{
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    if (!s)
        return NULL;
    zmq_setsockopt(s, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &o->timeout_ms, sizeof o->timeout_ms);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &o->timeout_ms, sizeof o->timeout_ms);
    if (zmq_connect(s, o->endpoint) != 0) {
        fprintf(stderr, "pskv-garbage: cannot connect to %s: %s\n", o->endpoint,
                zmq_strerror(errno));
        zmq_close(s);
        return NULL;
    }
    return s;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sends one kind and reports the reply. Returns 1 when an ERROR came back. */
static int run_kind(void *ctx, const opts *o, const char *label, const kind *k)
{
    parts p = {0};
    k->build(o, &p);
    void *s = dealer(ctx, o, 0);
    if (!s) {
        parts_free(&p);
        printf("garbage: %s -> no socket\n", label);
        return 0;
    }
    int ok = 0;
    for (int i = 0; i < p.n; i++) {
        if (zmq_send(s, p.data[i], p.len[i], i + 1 < p.n ? ZMQ_SNDMORE : 0) < 0) {
            printf("garbage: %s -> send failed: %s\n", label, zmq_strerror(errno));
            goto out;
        }
    }
    int64_t deadline = now_ms() + o->timeout_ms;
    zmq_pollitem_t item = {s, 0, ZMQ_POLLIN, 0};
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0) {
            printf("garbage: %s -> no reply\n", label);
            goto out;
        }
        int n = zmq_poll(&item, 1, (long)left);
        if (n < 0 && errno != EINTR) {
            printf("garbage: %s -> poll failed: %s\n", label, zmq_strerror(errno));
            goto out;
        }
        if (n > 0)
            break;
    }
    wire_msg m;
    char why[256] = "";
    int rc = wire_recv(s, 0, &m, why, sizeof why);
    if (rc < 0) {
        printf("garbage: %s -> unreadable reply: %s\n", label, why);
    } else if (m.meta->type != PSKV__MSG_TYPE__ERROR) {
        printf("garbage: %s -> reply %s, not ERROR\n", label, wire_type_name((int)m.meta->type));
    } else {
        printf("garbage: %s -> reply ERROR code=%d: %s\n", label, m.meta->error_code,
               m.meta->error ? m.meta->error : "");
        ok = 1;
    }
    wire_msg_close(&m);
out:
    zmq_close(s);
    parts_free(&p);
    return ok;
}

static void free_buf(void *data, void *hint)
{
    (void)hint;
    free(data);
}

/* One frame one byte over the receiver's limit; ZeroMQ there drops the
 * connection on reading the frame header, so little of it is ever written. */
static int run_oversized(void *ctx, const opts *o)
{
    size_t len = (size_t)o->max_message + 1;
    void *buf = calloc(1, len);
    if (!buf) {
        printf("garbage: oversized -> cannot allocate %zu bytes\n", len);
        return 0;
    }
    void *s = dealer(ctx, o, o->timeout_ms); /* give it time to leave, bounded */
    if (!s) {
        free(buf);
        printf("garbage: oversized -> no socket\n");
        return 0;
    }
    zmq_msg_t msg;
    zmq_msg_init_data(&msg, buf, len, free_buf, NULL);
    int ok = zmq_msg_send(&msg, s, 0) >= 0;
    if (ok) {
        printf("garbage: oversized -> sent\n");
    } else {
        printf("garbage: oversized -> send failed: %s\n", zmq_strerror(errno));
        zmq_msg_close(&msg);
    }
    /* Let the I/O thread start on it before the socket goes. */
    zmq_pollitem_t item = {s, 0, ZMQ_POLLIN, 0};
    zmq_poll(&item, 1, 200);
    zmq_close(s);
    return ok;
}

/* ---- raw TCP side ---------------------------------------------------------- */

static int tcp_connect(const char *host, int port, int timeout_ms, char *why, size_t whylen)
{
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = {0}, *res, *ai;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int e = getaddrinfo(host, service, &hints, &res);
    if (e) {
        snprintf(why, whylen, "%.100s: %s", host, gai_strerror(e));
        return -1;
    }
    int fd = -1;
    snprintf(why, whylen, "no address");
    for (ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    ai->ai_protocol);
        if (fd < 0)
            continue;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
            snprintf(why, whylen, "connect: %s", strerror(errno));
            close(fd);
            fd = -1;
            continue;
        }
        struct pollfd pfd = {fd, POLLOUT, 0};
        int err = 0;
        socklen_t el = sizeof err;
        if (poll(&pfd, 1, timeout_ms) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) ||
            err) {
            snprintf(why, whylen, "connect: %s", err ? strerror(err) : "timed out");
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    return fd;
}

/* Writes `len` bytes within timeout_ms; returns bytes written before the peer
 * closed or the time ran out. */
static size_t tcp_write(int fd, const uint8_t *buf, size_t len, int timeout_ms)
{
    size_t done = 0;
    int64_t deadline = now_ms() + timeout_ms;
    while (done < len) {
        ssize_t w = send(fd, buf + done, len - done, MSG_NOSIGNAL);
        if (w > 0) {
            done += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            break;
        int64_t left = deadline - now_ms();
        struct pollfd pfd = {fd, POLLOUT, 0};
        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
            break;
    }
    return done;
}

/* Plain TCP junk, or (zmtp) a valid ZMTP 3.0 NULL greeting followed by junk.
 * Returns 1 when the connection was made. */
static int run_raw(const opts *o, const char *label, int zmtp)
{
    const char *hp = o->endpoint + strlen("tcp://");
    char host[256], why[256];
    int port;
    if (net_split_hostport(hp, host, sizeof host, &port) < 0) {
        printf("garbage: %s -> cannot parse %s\n", label, o->endpoint);
        return 0;
    }
    int fd = tcp_connect(host, port, o->timeout_ms, why, sizeof why);
    if (fd < 0) {
        printf("garbage: %s -> %s\n", label, why);
        return 0;
    }
    uint8_t buf[RAW_BYTES];
    fill_random(buf, sizeof buf);
    if (zmtp) {
        /* signature, version 3.0, mechanism "NULL", as-server 0, filler */
        memset(buf, 0, 64);
        buf[0] = 0xff;
        buf[9] = 0x7f;
        buf[10] = 3;
        memcpy(buf + 12, "NULL", 4);
    }
    size_t n = tcp_write(fd, buf, sizeof buf, o->timeout_ms);
    close(fd);
    printf("garbage: %s -> sent %zu of %d bytes%s\n", label, n, RAW_BYTES,
           n < sizeof buf ? " (peer closed)" : "");
    return 1;
}

/* ---- main ------------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: pskv-garbage --endpoint tcp://HOST:PORT [--kind all|KIND] [--max-message BYTES]\n"
            "                    [--job-id N] [--table NAME --width W] [--timeout-ms MS] [--seed N]\n"
            "kinds (each expects an ERROR reply):\n");
    for (int i = 0; i < NKINDS; i++)
        fprintf(f, "  %-20s %s\n", kinds[i].name, kinds[i].help);
    fprintf(f, "  %-20s %s\n", "alive", "the job kind again, last: the daemon still answers");
    fprintf(f,
            "kinds without a reply:\n"
            "  %-20s %d random bytes on a plain TCP connection\n"
            "  %-20s a ZMTP 3.0 greeting, then junk\n"
            "  %-20s one frame of --max-message + 1 bytes (skipped when 0)\n",
            "raw-tcp", RAW_BYTES, "raw-zmtp", "oversized");
}

static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end || s[0] == '-' || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        const char *eq = strchr(a, '=');
        size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[i + 1] : NULL);
        if (!eq && v)
            i++;
        if (!v) {
            fprintf(stderr, "pskv-garbage: %s needs a value\n", a);
            return -1;
        }
        uint64_t u;
#define IS(name) (nl == strlen(name) && !strncmp(a, name, nl))
        if (IS("--endpoint")) {
            o->endpoint = v;
        } else if (IS("--kind")) {
            o->kind = v;
        } else if (IS("--table")) {
            o->table = v;
        } else if (IS("--max-message") && !parse_u64(v, (uint64_t)1 << 40, &u)) {
            o->max_message = (int64_t)u;
        } else if (IS("--job-id") && !parse_u64(v, UINT64_MAX, &u)) {
            o->job_id = u;
        } else if (IS("--width") && !parse_u64(v, 1048576, &u) && u > 0) {
            o->width = (uint32_t)u;
        } else if (IS("--timeout-ms") && !parse_u64(v, 600000, &u) && u > 0) {
            o->timeout_ms = (int)u;
        } else if (IS("--seed") && !parse_u64(v, UINT64_MAX, &u)) {
            o->seed = u;
        } else {
            fprintf(stderr, "pskv-garbage: bad option or value: %s %s\n", a, v);
            return -1;
        }
#undef IS
    }
    if (!o->endpoint || strncmp(o->endpoint, "tcp://", 6) != 0) {
        fprintf(stderr, "pskv-garbage: --endpoint tcp://HOST:PORT is required\n");
        return -1;
    }
    return 0;
}

static int wanted(const opts *o, const char *name)
{
    return !strcmp(o->kind, "all") || !strcmp(o->kind, name);
}

int main(int argc, char **argv)
{
    opts o = {.kind = "all", .width = 1, .timeout_ms = 2000};
    if (parse_args(argc, argv, &o) < 0) {
        usage(stderr);
        return 2;
    }
    int known = !strcmp(o.kind, "all") || !strcmp(o.kind, "alive") ||
                !strcmp(o.kind, "raw-tcp") || !strcmp(o.kind, "raw-zmtp") ||
                !strcmp(o.kind, "oversized");
    for (int i = 0; i < NKINDS; i++)
        known |= !strcmp(o.kind, kinds[i].name);
    if (!known) {
        fprintf(stderr, "pskv-garbage: unknown kind %s\n", o.kind);
        usage(stderr);
        return 2;
    }
    if (!o.seed)
        o.seed = ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid();
    rng = o.seed | 1;

    void *ctx = zmq_ctx_new();
    if (!ctx) {
        fprintf(stderr, "pskv-garbage: zmq_ctx_new: %s\n", zmq_strerror(errno));
        return 1;
    }
    char failed[1024] = "";
    int nfailed = 0;
#define FAILED(name)                                                                          \
    do {                                                                                      \
        size_t used = strlen(failed);                                                         \
        snprintf(failed + used, sizeof failed - used, " %s", name);                           \
        nfailed++;                                                                            \
    } while (0)

    for (int i = 0; i < NKINDS; i++)
        if (wanted(&o, kinds[i].name) && !run_kind(ctx, &o, kinds[i].name, &kinds[i]))
            FAILED(kinds[i].name);
    if (wanted(&o, "raw-tcp") && !run_raw(&o, "raw-tcp", 0))
        FAILED("raw-tcp");
    if (wanted(&o, "raw-zmtp") && !run_raw(&o, "raw-zmtp", 1))
        FAILED("raw-zmtp");
    if (o.max_message > 0 && wanted(&o, "oversized") && !run_oversized(ctx, &o))
        FAILED("oversized");
    if (wanted(&o, "alive")) {
        const kind *job = NULL;
        for (int i = 0; i < NKINDS; i++)
            if (!strcmp(kinds[i].name, "job"))
                job = &kinds[i];
        if (!run_kind(ctx, &o, "alive", job))
            FAILED("alive");
    }
#undef FAILED
    zmq_ctx_term(ctx);
    if (nfailed) {
        printf("garbage: %d failed:%s (seed %llu)\n", nfailed, failed,
               (unsigned long long)o.seed);
        return 1;
    }
    return 0;
}
