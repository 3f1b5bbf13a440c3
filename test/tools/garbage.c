/* pskv-garbage: sends malformed messages to a pskv daemon (a server's or the
 * scheduler's ROUTER) and reports how it answered; or (--listen) plays a fake
 * scheduler and server for a worker to dial.
 *
 * Each hand-made ZeroMQ kind goes out on its own fresh DEALER, so a late reply
 * to one kind can never be taken for the answer to the next; the tool then waits
 * up to --timeout-ms for an ERROR reply. Raw TCP garbage (not ZeroMQ at all, and
 * a ZMTP greeting followed by junk) and an oversized frame expect no answer: the
 * daemon should drop that connection and keep serving, which the final `alive`
 * probe checks. The mutate kind (garbage_live.c) sends valid messages of every
 * type, mutated, and counts what comes back. Every socket has linger 0 (the
 * oversized one a bounded linger) and every wait a time-out, so the tool never
 * hangs. With --keys every socket talks CURVE from the directory's keypair (an
 * allowed key reaches past the ZAP handler); with --seconds the kinds repeat.
 *
 * Without --job-id the daemon's job id is unknown, so a server refuses most
 * kinds with a job id error before looking further; pass the job id (and, for
 * out-of-range, an existing dense --table and its --width) to reach the deeper
 * checks. Exit status: 0 when every kind that expects a reply got an ERROR and
 * no send stalled, 1 otherwise, 2 on a usage error. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
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
#include "garbage.h"
#include "garbage_msg.h"
#include "wire.h"

#define RAW_BYTES 4096
#define NO_SUCH_TABLE "pskv-garbage/no-such-table"
#define WRONG_JOB 12345u


static uint64_t next_request = 1;

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

/* ---- the malformed messages ---------------------------------------------- */

static void k_random(const opts *o, gmsg *p)
{
    (void)o;
    uint8_t buf[256];
    size_t len = 0;
    for (int tries = 0; tries < 100; tries++) {
        len = 1 + (size_t)(gmsg_rnd() % sizeof buf);
        gmsg_fill_random(buf, len);
        if (!gmsg_meta_parses(buf, len))
            break;
    }
    if (gmsg_meta_parses(buf, len)) { /* astronomically unlikely: fall back to known junk */
        memset(buf, 0xff, 16);
        len = 16;
    }
    gmsg_add(p, buf, len);
}

static void k_truncated(const opts *o, gmsg *p)
{
    Pskv__Meta m;
    base(o, &m, PSKV__MSG_TYPE__PUSH, NO_SUCH_TABLE, 4, 1);
    uint8_t buf[512];
    size_t len = pskv__meta__pack(&m, buf);
    /* Cut inside a field: a cut at a field boundary could still decode. */
    size_t cut = len / 2;
    while (cut > 1 && gmsg_meta_parses(buf, cut))
        cut--;
    gmsg_add(p, buf, cut);
    gmsg_add_keys(p, 0, 4);
    gmsg_add_vals(p, 4);
}

static void k_badproto(const opts *o, gmsg *p)
{
    (void)o;
    /* version=1, type=PULL, then a tag with wire type 7, which does not exist. */
    static const uint8_t bad[] = {0x08, 0x01, 0x10, 0x18, 0x0f, 0x01, 0x02, 0x03};
    gmsg_add(p, bad, sizeof bad);
}

static void k_keys_count(const opts *o, gmsg *p)
{
    Pskv__Meta m;
    base(o, &m, PSKV__MSG_TYPE__PUSH, NO_SUCH_TABLE, 4, 1);
    gmsg_add_meta(p, &m);
    gmsg_add_keys(p, 0, 3); /* num_keys says 4 */
    gmsg_add_vals(p, 4);
}

static void k_vals_count(const opts *o, gmsg *p)
{
    Pskv__Meta m;
    base(o, &m, PSKV__MSG_TYPE__PUSH, NO_SUCH_TABLE, 4, 2);
    gmsg_add_meta(p, &m);
    gmsg_add_keys(p, 0, 4);
    gmsg_add_vals(p, 3); /* 4 keys x width 2 need 8 */
}

static void k_unknown_table_push(const opts *o, gmsg *p)
{
    Pskv__Meta m;
    base(o, &m, PSKV__MSG_TYPE__PUSH, NO_SUCH_TABLE, 2, 1);
    gmsg_add_meta(p, &m);
    gmsg_add_keys(p, 10, 2);
    gmsg_add_vals(p, 2);
}

static void k_unknown_table_pull(const opts *o, gmsg *p)
{
    Pskv__Meta m;
    base(o, &m, PSKV__MSG_TYPE__PULL, NO_SUCH_TABLE, 2, 1);
    gmsg_add_meta(p, &m);
    gmsg_add_keys(p, 10, 2);
}

static void k_out_of_range(const opts *o, gmsg *p)
{
    /* A dense run just below UINT64_MAX: past the end of any dense table (and a
     * dense run is refused outright on a sparse table), but no overflow, so it
     * passes wire_parse and reaches the receiver's range check. */
    Pskv__Meta m;
    base(o, &m, PSKV__MSG_TYPE__PUSH, o->table ? o->table : NO_SUCH_TABLE, 1, o->width);
    m.has_first_key = 1;
    m.first_key = UINT64_MAX - 1;
    gmsg_add_meta(p, &m);
    gmsg_add_vals(p, o->width);
}

static void k_frames(const opts *o, gmsg *p)
{
    Pskv__Meta m;
    base(o, &m, PSKV__MSG_TYPE__PUSH, NO_SUCH_TABLE, 2, 1);
    gmsg_add_meta(p, &m);
    gmsg_add_keys(p, 0, 2);
    gmsg_add_vals(p, 2);
    gmsg_add_vals(p, 2);
    gmsg_add_vals(p, 2);
}

static void k_version(const opts *o, gmsg *p)
{
    Pskv__Meta m;
    base(o, &m, PSKV__MSG_TYPE__PULL, NO_SUCH_TABLE, 1, 1);
    m.version = 99;
    gmsg_add_meta(p, &m);
    gmsg_add_keys(p, 0, 1);
}

static void k_job(const opts *o, gmsg *p)
{
    Pskv__Meta m;
    base(o, &m, PSKV__MSG_TYPE__PULL, NO_SUCH_TABLE, 1, 1);
    m.has_job_id = 1;
    m.job_id = o->job_id == WRONG_JOB ? WRONG_JOB + 1 : WRONG_JOB;
    gmsg_add_meta(p, &m);
    gmsg_add_keys(p, 0, 1);
}

/* TABLE_LR with an lr no updater takes (NaN): refused PSKV_EINVAL naming it, the
 * table's lr unchanged (with --table, a table of the running job). */
static void k_lr_nan(const opts *o, gmsg *p)
{
    Pskv__Meta m;
    base(o, &m, PSKV__MSG_TYPE__TABLE_LR, o->table ? o->table : NO_SUCH_TABLE, 0, 1);
    m.has_num_keys = m.has_width = 0;
    m.has_table_lr = 1;
    m.table_lr = NAN;
    gmsg_add_meta(p, &m);
}

/* TABLE_LR without table_lr: PSKV_EPROTO. */
static void k_lr_missing(const opts *o, gmsg *p)
{
    Pskv__Meta m;
    base(o, &m, PSKV__MSG_TYPE__TABLE_LR, o->table ? o->table : NO_SUCH_TABLE, 0, 1);
    m.has_num_keys = m.has_width = 0;
    gmsg_add_meta(p, &m);
}

typedef struct kind {
    const char *name;
    void (*build)(const opts *, gmsg *);
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
    {"lr-nan", k_lr_nan, "TABLE_LR with lr NaN"},
    {"lr-missing", k_lr_missing, "TABLE_LR without table_lr"},
};
#define NKINDS ((int)(sizeof kinds / sizeof kinds[0]))

/* ---- ZeroMQ side ----------------------------------------------------------- */

/* Prints one kind's outcome: every outcome of a single pass, only failures in a
 * --seconds loop (the tallies follow at the end). */
#define SAY(o, bad, ...)                                                                      \
    do {                                                                                      \
        if ((bad) || (o)->seconds <= 0)                                                       \
            printf(__VA_ARGS__);                                                              \
    } while (0)

void *garbage_dealer(void *ctx, const opts *o, int linger_ms)
{
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    if (!s)
        return NULL;
    zmq_setsockopt(s, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &o->timeout_ms, sizeof o->timeout_ms);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &o->timeout_ms, sizeof o->timeout_ms);
    const char *server = o->server_key ? o->server_key : o->ks.sched_pub;
    if (o->keyed && net_curve_client(s, &o->ks, server) < 0) {
        fprintf(stderr, "pskv-garbage: cannot turn CURVE on toward %s: %s\n", server,
                zmq_strerror(errno));
        zmq_close(s);
        return NULL;
    }
    if (zmq_connect(s, o->endpoint) != 0) {
        fprintf(stderr, "pskv-garbage: cannot connect to %s: %s\n", o->endpoint,
                zmq_strerror(errno));
        zmq_close(s);
        return NULL;
    }
    return s;
}

int64_t garbage_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sends one kind and reports the reply. Returns 1 when an ERROR came back. */
static int run_kind(void *ctx, const opts *o, const char *label, const kind *k, tally *t)
{
    gmsg p = {0};
    k->build(o, &p);
    void *s = garbage_dealer(ctx, o, 0);
    if (!s) {
        gmsg_free(&p);
        printf("garbage: %s -> no socket\n", label);
        return 0;
    }
    int ok = 0;
    t->sent++;
    for (int i = 0; i < p.n; i++) {
        if (zmq_send(s, p.data[i], p.len[i], i + 1 < p.n ? ZMQ_SNDMORE : 0) < 0) {
            printf("garbage: %s -> send failed: %s\n", label, zmq_strerror(errno));
            t->stalled++;
            goto out;
        }
    }
    int64_t deadline = garbage_now_ms() + o->timeout_ms;
    zmq_pollitem_t item = {s, 0, ZMQ_POLLIN, 0};
    for (;;) {
        int64_t left = deadline - garbage_now_ms();
        if (left <= 0) {
            printf("garbage: %s -> no reply\n", label);
            t->silent++;
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
        t->others++;
    } else if (m.meta->type != PSKV__MSG_TYPE__ERROR) {
        printf("garbage: %s -> reply %s, not ERROR\n", label, wire_type_name((int)m.meta->type));
        t->others++;
    } else {
        SAY(o, 0, "garbage: %s -> reply ERROR code=%d: %s\n", label, m.meta->error_code,
            m.meta->error ? m.meta->error : "");
        t->errors++;
        ok = 1;
    }
    wire_msg_close(&m);
out:
    zmq_close(s);
    gmsg_free(&p);
    return ok;
}

static void free_buf(void *data, void *hint)
{
    (void)hint;
    free(data);
}

/* One frame one byte over the receiver's limit; ZeroMQ there drops the
 * connection on reading the frame header, so little of it is ever written. */
static int run_oversized(void *ctx, const opts *o, tally *t)
{
    size_t len = (size_t)o->max_message + 1;
    void *buf = calloc(1, len);
    if (!buf) {
        printf("garbage: oversized -> cannot allocate %zu bytes\n", len);
        return 0;
    }
    void *s = garbage_dealer(ctx, o, o->timeout_ms); /* give it time to leave, bounded */
    if (!s) {
        free(buf);
        printf("garbage: oversized -> no socket\n");
        return 0;
    }
    zmq_msg_t msg;
    zmq_msg_init_data(&msg, buf, len, free_buf, NULL);
    int ok = zmq_msg_send(&msg, s, 0) >= 0;
    t->sent++;
    if (ok) {
        SAY(o, 0, "garbage: oversized -> sent\n");
    } else {
        printf("garbage: oversized -> send failed: %s\n", zmq_strerror(errno));
        zmq_msg_close(&msg);
        t->stalled++;
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
    int64_t deadline = garbage_now_ms() + timeout_ms;
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
        int64_t left = deadline - garbage_now_ms();
        struct pollfd pfd = {fd, POLLOUT, 0};
        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
            break;
    }
    return done;
}

/* Plain TCP junk, or (zmtp) a valid ZMTP 3.0 NULL greeting followed by junk.
 * Returns 1 when the connection was made. */
static int run_raw(const opts *o, const char *label, int zmtp, tally *t)
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
    gmsg_fill_random(buf, sizeof buf);
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
    t->sent++;
    SAY(o, 0, "garbage: %s -> sent %zu of %d bytes%s\n", label, n, RAW_BYTES,
        n < sizeof buf ? " (peer closed)" : "");
    return 1;
}

/* ---- main ------------------------------------------------------------------ */

/* Tally slots: the hand-made kinds, then these. */
enum { K_RAW_TCP = NKINDS, K_RAW_ZMTP, K_OVERSIZED, K_MUTATE, K_ALIVE, K_COUNT };
static const char *const extra_names[] = {"raw-tcp", "raw-zmtp", "oversized", "mutate", "alive"};
#define MUTATE_BATCH 64 /* mutated messages per pass */
#define TYPE_SLOTS 64   /* above every message type number */

typedef struct run {
    tally t[K_COUNT];
    uint64_t per_type[TYPE_SLOTS];
    void *msock; /* the mutate kind's DEALER */
    int mused;
    uint64_t total;
    int64_t start_ms;
} run;

static const char *kind_name(int i) { return i < NKINDS ? kinds[i].name : extra_names[i - NKINDS]; }

static void usage(FILE *f)
{
    fprintf(f,
            "usage: pskv-garbage --endpoint tcp://HOST:PORT [--kind LIST] [--max-message BYTES]\n"
            "                    [--job-id N] [--table NAME --width W] [--timeout-ms MS] [--seed N]\n"
            "                    [--keys DIR [--server-key KEY]] [--seconds S [--rate N]]\n"
            "       pskv-garbage --listen PORT [--keys DIR] [--job-id N] [--seconds S] [--seed N]\n"
            "LIST: kinds separated by commas; all = every kind below but mutate (the default)\n"
            "kinds (each expects an ERROR reply):\n");
    for (int i = 0; i < NKINDS; i++)
        fprintf(f, "  %-20s %s\n", kinds[i].name, kinds[i].help);
    fprintf(f, "  %-20s %s\n", "alive", "the job kind again, last: the daemon still answers");
    fprintf(f,
            "kinds without a reply:\n"
            "  %-20s %d random bytes on a plain TCP connection\n"
            "  %-20s a ZMTP 3.0 greeting, then junk\n"
            "  %-20s one frame of --max-message + 1 bytes (skipped when 0)\n"
            "  %-20s %d valid messages of random types, each mutated 1-4 times (replies\n"
            "  %-20s counted, not required; a worker's REGISTER is never sent)\n"
            "--keys DIR         talk CURVE with DIR's keypair to --server-key (default: DIR's\n"
            "                   scheduler.pub); --listen: be a CURVE server with DIR's key\n"
            "--seconds S        repeat the kinds until S seconds have passed, then print a tally\n"
            "                   per kind (and per message type for mutate); --rate N: at most N\n"
            "                   messages a second\n"
            "--listen PORT      a fake scheduler on 127.0.0.1:PORT, and a fake server the views\n"
            "                   it sends list, for a worker to dial (workers listen on nothing):\n"
            "                   every message is answered with semi-valid and mutated ones\n"
            "exit: 0 every kind that expects an ERROR got one (and no send stalled past\n"
            "--timeout-ms), 1 otherwise, 2 usage\n",
            "raw-tcp", RAW_BYTES, "raw-zmtp", "oversized", "mutate", MUTATE_BATCH, "");
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

static int parse_args(int argc, char **argv, opts *o, const char **keys)
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
        } else if (IS("--keys")) {
            *keys = v;
        } else if (IS("--server-key") && key_z85_valid(v)) {
            o->server_key = v;
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
        } else if (IS("--seconds") && !parse_u64(v, 86400, &u) && u > 0) {
            o->seconds = (double)u;
        } else if (IS("--rate") && !parse_u64(v, 1000000, &u)) {
            o->rate = (int)u;
        } else if (IS("--listen") && !parse_u64(v, 65535, &u) && u > 0) {
            o->listen = (int)u;
        } else {
            fprintf(stderr, "pskv-garbage: bad option or value: %s %s\n", a, v);
            return -1;
        }
#undef IS
    }
    if (!o->listen && (!o->endpoint || strncmp(o->endpoint, "tcp://", 6) != 0)) {
        fprintf(stderr, "pskv-garbage: --endpoint tcp://HOST:PORT (or --listen PORT) is required\n");
        return -1;
    }
    return 0;
}

/* 1 when `name` is in the comma-separated --kind list (all: every kind but mutate). */
static int wanted(const opts *o, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = o->kind; *p;) {
        size_t l = strcspn(p, ",");
        if ((l == n && !strncmp(p, name, n)) || (l == 3 && !strncmp(p, "all", 3) &&
                                                 strcmp(name, "mutate")))
            return 1;
        p += l + (p[l] == ',');
    }
    return 0;
}

/* Every name in the --kind list is a kind. */
static int known_kinds(const opts *o)
{
    for (const char *p = o->kind; *p;) {
        size_t l = strcspn(p, ",");
        int ok = l == 3 && !strncmp(p, "all", 3);
        for (int i = 0; i < K_COUNT && !ok; i++)
            ok = strlen(kind_name(i)) == l && !strncmp(p, kind_name(i), l);
        if (!ok) {
            fprintf(stderr, "pskv-garbage: unknown kind %.*s\n", (int)l, p);
            return 0;
        }
        p += l + (p[l] == ',');
    }
    return 1;
}

/* --rate: waits until the next message is due. */
static void pace(const opts *o, run *r)
{
    r->total++;
    if (o->rate <= 0)
        return;
    int64_t due = r->start_ms + (int64_t)(r->total * 1000 / (uint64_t)o->rate);
    int64_t wait = due - garbage_now_ms();
    if (wait > 0) {
        struct timespec ts = {wait / 1000, (wait % 1000) * 1000000};
        nanosleep(&ts, NULL);
    }
}

/* Every wanted kind once (mutate: MUTATE_BATCH messages). */
static void one_pass(void *ctx, const opts *o, run *r)
{
    for (int i = 0; i < NKINDS; i++) {
        if (wanted(o, kinds[i].name)) {
            run_kind(ctx, o, kinds[i].name, &kinds[i], &r->t[i]);
            pace(o, r);
        }
    }
    for (int zmtp = 0; zmtp < 2; zmtp++) {
        int k = zmtp ? K_RAW_ZMTP : K_RAW_TCP;
        if (wanted(o, kind_name(k))) {
            if (!run_raw(o, kind_name(k), zmtp, &r->t[k]))
                r->t[k].stalled++;
            pace(o, r);
        }
    }
    if (o->max_message > 0 && wanted(o, "oversized")) {
        run_oversized(ctx, o, &r->t[K_OVERSIZED]);
        pace(o, r);
    }
    for (int i = 0; wanted(o, "mutate") && i < MUTATE_BATCH; i++) {
        garbage_mutate_one(ctx, o, &r->msock, &r->mused, &r->t[K_MUTATE], r->per_type);
        pace(o, r);
    }
}

/* The tallies; returns the number of kinds that failed: an expected ERROR that
 * did not come, or a send that stalled. */
static int report(const opts *o, const run *r, char *failed, size_t flen)
{
    int nfailed = 0;
    for (int i = 0; i < K_COUNT; i++) {
        const tally *t = &r->t[i];
        int replies = i < NKINDS || i == K_ALIVE;
        int bad = t->stalled || (replies && (t->silent || t->others || t->errors < t->sent));
        if (bad) {
            size_t used = strlen(failed);
            snprintf(failed + used, flen - used, " %s", kind_name(i));
            nfailed++;
        }
        if (!t->sent || (o->seconds <= 0 && i != K_MUTATE))
            continue;
        printf("garbage: %s sent %llu: %llu ERROR replies, %llu other replies, %llu silent, "
               "%llu stalled", kind_name(i), (unsigned long long)t->sent,
               (unsigned long long)t->errors, (unsigned long long)t->others,
               (unsigned long long)t->silent, (unsigned long long)t->stalled);
        if (t->skipped)
            printf(", %llu not sent (a worker's REGISTER)", (unsigned long long)t->skipped);
        printf("\n");
    }
    for (int ty = 0; ty < TYPE_SLOTS; ty++)
        if (r->per_type[ty])
            printf("garbage: mutate %s %llu\n", wire_type_name(ty),
                   (unsigned long long)r->per_type[ty]);
    return nfailed;
}

int main(int argc, char **argv)
{
    opts o = {.kind = "all", .width = 1, .timeout_ms = 2000};
    const char *keys = NULL;
    char why[512];
    if (parse_args(argc, argv, &o, &keys) < 0 || !known_kinds(&o)) {
        usage(stderr);
        return 2;
    }
    if (keys && keys_load(&o.ks, keys, 0, why, sizeof why) < 0) {
        fprintf(stderr, "pskv-garbage: %s\n", why);
        return 2;
    }
    o.keyed = keys != NULL;
    if (!o.seed)
        o.seed = ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid();
    gmsg_seed(o.seed);

    void *ctx = zmq_ctx_new();
    if (!ctx) {
        fprintf(stderr, "pskv-garbage: zmq_ctx_new: %s\n", zmq_strerror(errno));
        return 1;
    }
    if (o.listen) {
        int rc = garbage_serve(ctx, &o);
        zmq_ctx_term(ctx);
        keys_clear(&o.ks);
        return rc;
    }
    static run r; /* big tallies: not on the stack */
    r.start_ms = garbage_now_ms();
    int64_t end = r.start_ms + (int64_t)(o.seconds * 1000);
    do
        one_pass(ctx, &o, &r);
    while (o.seconds > 0 && garbage_now_ms() < end);
    if (r.msock)
        zmq_close(r.msock);
    if (wanted(&o, "alive")) {
        const kind *job = NULL;
        for (int i = 0; i < NKINDS; i++)
            if (!strcmp(kinds[i].name, "job"))
                job = &kinds[i];
        run_kind(ctx, &o, "alive", job, &r.t[K_ALIVE]);
    }
    char failed[1024] = "";
    int nfailed = report(&o, &r, failed, sizeof failed);
    if (o.seconds > 0)
        printf("garbage: %llu messages in %.1f s (seed %llu)\n", (unsigned long long)r.total,
               (double)(garbage_now_ms() - r.start_ms) / 1e3, (unsigned long long)o.seed);
    zmq_ctx_term(ctx);
    keys_clear(&o.ks);
    if (nfailed) {
        printf("garbage: %d failed:%s (seed %llu)\n", nfailed, failed,
               (unsigned long long)o.seed);
        return 1;
    }
    return 0;
}
