/* The relay of pskv-faultproxy (faultproxy_relay.h): a TCP proxy core that
 * injects network faults for pskv's tests.
 *
 * It relays byte streams and knows nothing of ZeroMQ. Each accepted connection
 * gets its own non-blocking connection to the target; one thread runs one
 * ppoll() loop over every socket, with CLOCK_MONOTONIC deadlines as its timer.
 *
 * Each direction of a connection is a delay line: every chunk read is stamped
 * "due at now + delay" and queued; the loop writes a chunk once it is due, in
 * order, handling partial writes, so a delay never stalls the other direction or
 * another connection. A queue holding more than QUEUE_MAX bytes stops reading
 * from its source until it drains (the sender then feels TCP back-pressure). A
 * FIN is forwarded once the bytes queued before it are written (half-close); a
 * reset or a failed write resets both sides. Every byte written goes through
 * forwarded().
 *
 * Faults, set by flags and changed at run time on the control port (one command
 * per line, answered `ok ...` or `error: reason`):
 *   delay MS          hold every chunk MS ms (applies to bytes read from now on)
 *   drop P            close each new connection at once (RST) with probability P
 *   reset             reset every current connection (RST to both sides)
 *   blackhole on|off  a cut cable without RST: bytes read are discarded, nothing
 *                     is sent (bytes already queued, and a FIN, wait until off),
 *                     connections stay open
 *   status            counters and settings on one line
 *   quit              exit */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "faultproxy_relay.h"
#include "log.h"
#include "timeutil.h"

#define CHUNK_MAX 65536          /* bytes per recv */
#define QUEUE_MAX (64u << 20)    /* bytes a direction may hold before reading stops */
#define MAX_CTL 8                /* control clients at once */
#define CTL_LINE 256             /* longest control command */

/* Bytes read from one side, to be written to the other once `due`. */
typedef struct chunk {
    struct chunk *next;
    int64_t due;     /* CLOCK_MONOTONIC ms */
    size_t len, off; /* off: bytes already written */
    char data[];
} chunk;

/* One direction of a connection (one byte stream). */
typedef enum {
    D_OPEN, /* reading the source, forwarding to the destination */
    D_EOF,  /* the source sent FIN; draining the queue before forwarding it */
    D_SHUT, /* queue drained and FIN forwarded: nothing left to do */
} dir_state;

typedef struct dir {
    dir_state state;
    chunk *head, *tail;
    size_t held; /* queued bytes plus chunk headers: what QUEUE_MAX bounds */
} dir;

typedef enum {
    C_CONNECTING, /* client accepted, connect to the target under way; client bytes queue */
    C_OPEN,       /* both sides connected: relaying */
    C_DEAD,       /* sockets closed, queues freed; the struct goes at the next sweep */
} conn_state;

/* Side 0 is the accepted client, side 1 the target; d[s] carries what side s sent. */
typedef struct conn {
    conn_state state;
    unsigned long long id;
    int fd[2];
    dir d[2];
    const struct addrinfo *ai; /* target address being tried */
    char peer[80];             /* client address, for logs */
} conn;

typedef struct ctl_client {
    int fd; /* -1 = free slot */
    size_t len;
    char buf[CTL_LINE + 1];
} ctl_client;

/* The relay (faultproxy_relay.h). */
struct relay {
    int listen_fd, ctl_fd; /* ctl_fd -1 without a control port */
    const struct addrinfo *target;
    const char *target_name;
    conn **conns;
    size_t nconns, cap;
    ctl_client ctl[MAX_CTL];
    int delay_ms;
    double drop;
    int blackhole;
    int quit;
    uint64_t rng;
    int64_t accept_pause_until; /* after EMFILE: stop accepting until then */
    unsigned long long next_id, accepted, refused, failed;
    unsigned long long bytes[2], discarded; /* bytes[s]: forwarded from side s */
    int record_fd; /* -1 without --record */
};

static const char *const side_name[2] = {"client", "target"};

static double rnd01(relay *p)
{
    /* xorshift64*: reproducible from --seed. */
    p->rng ^= p->rng >> 12;
    p->rng ^= p->rng << 25;
    p->rng ^= p->rng >> 27;
    return (double)((p->rng * 0x2545F4914F6CDD1DULL) >> 11) * 0x1.0p-53;
}

static void set_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Closes fd; with rst, with linger 0 so the peer gets a RST, not a FIN. */
static void close_fd(int fd, int rst)
{
    if (fd < 0)
        return;
    if (rst) {
        struct linger lg = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    close(fd);
}

/* ---- connections ----------------------------------------------------------- */

/* The one place relayed bytes leave the proxy: `n` bytes at `data` that side s
 * sent have just been written to side 1 - s, in stream order per direction.
 * Counts them; a recorder of the relayed streams (--record) writes them here. */
static inline void forwarded(relay *p, const conn *c, int s, const char *data, size_t n)
{
    (void)c;
    p->bytes[s] += (unsigned long long)n;
    /* --record: the bytes exactly as they crossed (interleaved chunks of both
     * directions: enough to look for a plaintext pattern) */
    for (size_t off = 0; p->record_fd >= 0 && off < n;) {
        ssize_t w = write(p->record_fd, data + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            LOG_E("--record: write failed (%s): recording stops", strerror(errno));
            close(p->record_fd);
            p->record_fd = -1;
            break;
        }
        off += (size_t)w;
    }
}

/* Closes both sides (RST when rst), frees the queues and logs why at `level`. */
__attribute__((format(printf, 4, 5))) static void conn_end(conn *c, int rst, int level,
                                                          const char *fmt, ...)
{
    if (c->state == C_DEAD)
        return;
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    LOG(level, "conn %llu from %s: %s", c->id, c->peer, why);
    for (int s = 0; s < 2; s++) {
        close_fd(c->fd[s], rst);
        c->fd[s] = -1;
        for (chunk *k = c->d[s].head, *next; k; k = next) {
            next = k->next;
            free(k);
        }
        c->d[s].head = c->d[s].tail = NULL;
        c->d[s].held = 0;
    }
    c->state = C_DEAD;
}

/* Writes the due bytes of direction s to side 1-s; once the queue is empty after
 * the source's FIN, forwards the FIN. Stops at EAGAIN (the loop then polls for
 * POLLOUT); a failed write resets the connection. */
static void pump(relay *p, conn *c, int s, int64_t now)
{
    dir *d = &c->d[s];
    if (c->state != C_OPEN || p->blackhole)
        return;
    int fd = c->fd[1 - s];
    while (d->head && d->head->due <= now) {
        chunk *k = d->head;
        ssize_t n = send(fd, k->data + k->off, k->len - k->off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            conn_end(c, 1, LOG_INFO, "reset: send to %s: %s", side_name[1 - s],
                     strerror(errno));
            return;
        }
        k->off += (size_t)n;
        forwarded(p, c, s, k->data + k->off - (size_t)n, (size_t)n);
        if (k->off == k->len) {
            d->head = k->next;
            if (!d->head)
                d->tail = NULL;
            d->held -= sizeof *k + k->len;
            free(k);
        }
    }
    if (!d->head && d->state == D_EOF) {
        if (shutdown(fd, SHUT_WR) < 0 && errno != ENOTCONN) {
            conn_end(c, 1, LOG_INFO, "reset: shutdown to %s: %s", side_name[1 - s],
                     strerror(errno));
            return;
        }
        d->state = D_SHUT;
        if (c->d[1 - s].state == D_SHUT)
            conn_end(c, 0, LOG_INFO, "closed by both sides");
    }
}

/* Reads what side s sent into its queue (or discards it in blackhole mode). */
static void on_readable(relay *p, conn *c, int s, int64_t now)
{
    static char buf[CHUNK_MAX];
    dir *d = &c->d[s];
    /* A few reads per turn: enough for throughput, fair to other connections. */
    for (int i = 0; i < 16 && d->state == D_OPEN && d->held < QUEUE_MAX; i++) {
        ssize_t n = recv(c->fd[s], buf, sizeof buf, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            conn_end(c, 1, LOG_INFO, "reset: recv from %s: %s", side_name[s],
                     strerror(errno));
            return;
        }
        if (n == 0) {
            d->state = D_EOF;
            break;
        }
        if (p->blackhole) {
            p->discarded += (unsigned long long)n;
            continue;
        }
        chunk *k = malloc(sizeof *k + (size_t)n);
        if (!k) {
            conn_end(c, 1, LOG_ERROR, "reset: out of memory");
            return;
        }
        memcpy(k->data, buf, (size_t)n);
        k->len = (size_t)n;
        k->off = 0;
        k->due = now + p->delay_ms;
        k->next = NULL;
        if (d->tail)
            d->tail->next = k;
        else
            d->head = k;
        d->tail = k;
        d->held += sizeof *k + k->len;
    }
    pump(p, c, s, now); /* with no delay, forward at once */
}

/* Starts a non-blocking connect to c->ai, falling through to the next address
 * on an immediate failure; when none is left, logs and resets the client. */
static void connect_next(relay *p, conn *c, int64_t now, int err)
{
    for (; c->ai; c->ai = c->ai->ai_next) {
        int fd = socket(c->ai->ai_family, c->ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                        c->ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        set_nodelay(fd);
        c->fd[1] = fd;
        if (connect(fd, c->ai->ai_addr, c->ai->ai_addrlen) == 0) {
            c->state = C_OPEN;
            pump(p, c, 0, now);
            return;
        }
        if (errno == EINPROGRESS || errno == EINTR) {
            c->state = C_CONNECTING;
            return;
        }
        err = errno;
        close(fd);
        c->fd[1] = -1;
    }
    p->failed++;
    conn_end(c, 1, LOG_WARN, "cannot connect to target %s: %s", p->target_name,
             strerror(err ? err : ECONNREFUSED));
}

/* The target socket of a connecting conn became writable or failed. */
static void finish_connect(relay *p, conn *c, int64_t now)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(c->fd[1], SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno;
    if (!err) {
        c->state = C_OPEN;
        pump(p, c, 0, now);
        return;
    }
    close(c->fd[1]);
    c->fd[1] = -1;
    c->ai = c->ai->ai_next;
    connect_next(p, c, now, err);
}

static void on_accept(relay *p, int64_t now)
{
    for (int i = 0; i < 64; i++) {
        struct sockaddr_storage sa;
        socklen_t salen = sizeof sa;
        int fd = accept4(p->listen_fd, (struct sockaddr *)&sa, &salen,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                LOG_W("accept: %s; pausing accepts for 100 ms", strerror(errno));
                p->accept_pause_until = now + 100;
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                       errno != ECONNABORTED) {
                LOG_W("accept: %s", strerror(errno));
            }
            return;
        }
        char host[64] = "?", serv[16] = "?";
        getnameinfo((struct sockaddr *)&sa, salen, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV);
        p->accepted++;
        if (p->drop > 0 && rnd01(p) < p->drop) {
            p->refused++;
            LOG_I("refused connection from %s:%s (drop %g)", host, serv, p->drop);
            close_fd(fd, 1);
            continue;
        }
        if (p->nconns == p->cap) {
            size_t cap = p->cap ? p->cap * 2 : 16;
            conn **grown = realloc(p->conns, cap * sizeof *grown);
            if (grown) {
                p->conns = grown;
                p->cap = cap;
            }
        }
        conn *c = p->nconns < p->cap ? calloc(1, sizeof *c) : NULL;
        if (!c) {
            LOG_E("out of memory: refusing connection from %s:%s", host, serv);
            close_fd(fd, 1);
            continue;
        }
        set_nodelay(fd);
        c->id = ++p->next_id;
        c->fd[0] = fd;
        c->fd[1] = -1;
        c->ai = p->target;
        snprintf(c->peer, sizeof c->peer, "%s:%s", host, serv);
        p->conns[p->nconns++] = c;
        LOG_I("conn %llu from %s: accepted", c->id, c->peer);
        connect_next(p, c, now, 0);
    }
}

/* Frees dead connections and compacts the array. */
static void sweep(relay *p)
{
    size_t j = 0;
    for (size_t i = 0; i < p->nconns; i++) {
        if (p->conns[i]->state == C_DEAD)
            free(p->conns[i]);
        else
            p->conns[j++] = p->conns[i];
    }
    p->nconns = j;
}

/* ---- control port ---------------------------------------------------------- */

static void ctl_close(ctl_client *cc)
{
    close(cc->fd);
    cc->fd = -1;
    cc->len = 0;
}

/* Runs one command line; writes the answer (without newline) into out. */
static void ctl_command(relay *p, char *line, char *out, size_t outlen)
{
    char *save = NULL, *end = NULL;
    char *cmd = strtok_r(line, " \t\r", &save);
    char *arg = strtok_r(NULL, " \t\r", &save);
    const char *err = NULL;
    if (strtok_r(NULL, " \t\r", &save)) {
        err = "too many arguments";
    } else if (!strcmp(cmd, "delay") && arg) {
        errno = 0;
        long ms = strtol(arg, &end, 10);
        if (errno || *end || end == arg || ms < 0 || ms > RELAY_DELAY_MAX)
            err = "delay wants 0..3600000 ms";
        else
            p->delay_ms = (int)ms;
    } else if (!strcmp(cmd, "drop") && arg) {
        double v = strtod(arg, &end);
        if (*end || end == arg || !(v >= 0 && v <= 1))
            err = "drop wants a probability 0..1";
        else
            p->drop = v;
    } else if (!strcmp(cmd, "blackhole") && arg && (!strcmp(arg, "on") || !strcmp(arg, "off"))) {
        p->blackhole = !strcmp(arg, "on");
    } else if (!strcmp(cmd, "reset") && !arg) {
        for (size_t i = 0; i < p->nconns; i++)
            conn_end(p->conns[i], 1, LOG_INFO, "reset by control");
    } else if (!strcmp(cmd, "status") && !arg) {
        size_t active = 0, held = 0;
        for (size_t i = 0; i < p->nconns; i++) {
            conn *c = p->conns[i];
            active += c->state != C_DEAD;
            held += c->d[0].held + c->d[1].held; /* 0 once dead */
        }
        snprintf(out, outlen,
                 "ok accepted=%llu active=%zu refused=%llu failed=%llu bytes_up=%llu "
                 "bytes_down=%llu discarded=%llu held=%zu delay_ms=%d drop=%g blackhole=%s",
                 p->accepted, active, p->refused, p->failed, p->bytes[0], p->bytes[1],
                 p->discarded, held, p->delay_ms, p->drop, p->blackhole ? "on" : "off");
        return;
    } else if (!strcmp(cmd, "quit") && !arg) {
        p->quit = 1;
    } else {
        err = "unknown command or bad argument (commands: delay MS, drop P, "
              "blackhole on|off, reset, status, quit)";
    }
    if (err) {
        snprintf(out, outlen, "error: %s", err);
    } else {
        LOG_I("control: %s%s%s", cmd, arg ? " " : "", arg ? arg : "");
        snprintf(out, outlen, "ok");
    }
}

/* Answers one line; a client that does not read its answers is closed. */
static void ctl_line(relay *p, ctl_client *cc, char *line)
{
    char out[512];
    if (!line[strspn(line, " \t\r")])
        return; /* blank line */
    ctl_command(p, line, out, sizeof out - 1);
    size_t n = strlen(out);
    out[n++] = '\n';
    ssize_t w;
    do
        w = send(cc->fd, out, n, MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    if (w != (ssize_t)n) {
        LOG_W("control: cannot answer a client (%s); closing it",
              w < 0 ? strerror(errno) : "short write");
        ctl_close(cc);
    }
}

static void ctl_read(relay *p, ctl_client *cc)
{
    ssize_t n = recv(cc->fd, cc->buf + cc->len, CTL_LINE - cc->len, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (n <= 0) {
        if (n == 0 && cc->len) { /* a last line without newline */
            cc->buf[cc->len] = '\0';
            ctl_line(p, cc, cc->buf);
        }
        if (cc->fd >= 0)
            ctl_close(cc);
        return;
    }
    cc->len += (size_t)n;
    char *nl;
    while (cc->fd >= 0 && (nl = memchr(cc->buf, '\n', cc->len))) {
        *nl = '\0';
        ctl_line(p, cc, cc->buf);
        size_t used = (size_t)(nl + 1 - cc->buf);
        cc->len -= used;
        memmove(cc->buf, nl + 1, cc->len);
    }
    if (cc->fd >= 0 && cc->len == CTL_LINE) {
        static const char msg[] = "error: line too long\n";
        (void)!send(cc->fd, msg, sizeof msg - 1, MSG_NOSIGNAL);
        ctl_close(cc);
    }
}

static void ctl_accept(relay *p)
{
    int fd = accept4(p->ctl_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return;
    for (int i = 0; i < MAX_CTL; i++) {
        if (p->ctl[i].fd < 0) {
            p->ctl[i].fd = fd;
            p->ctl[i].len = 0;
            return;
        }
    }
    static const char msg[] = "error: too many control clients\n";
    (void)!send(fd, msg, sizeof msg - 1, MSG_NOSIGNAL);
    close(fd);
}

/* ---- event loop ------------------------------------------------------------ */

/* What one pollfd stands for. */
typedef struct slot {
    conn *c;         /* NULL: a listener or a control client */
    int side;        /* conn side, or control client index; -1 listen, -2 control listen */
} slot;

/* Fills the poll set; returns its size and the wait in ms until the next due
 * chunk or the end of an accept pause (-1 = none). Connections and control
 * clients come first, listeners last, so that a socket accepted while this
 * turn's events are handled can never take the fd of a slot not yet handled. */
static size_t poll_set(relay *p, struct pollfd *pfd, slot *sl, int64_t now, int64_t *timeout)
{
    size_t n = 0;
    *timeout = -1;
    for (size_t i = 0; i < p->nconns; i++) {
        conn *c = p->conns[i];
        for (int s = 0; s < 2; s++) {
            dir *in = &c->d[s], *out = &c->d[1 - s];
            short ev = in->state == D_OPEN && in->held < QUEUE_MAX ? POLLIN : 0;
            if (c->state == C_CONNECTING) {
                ev = s == 0 ? ev : POLLOUT;
            } else if (out->head && !p->blackhole) {
                if (out->head->due <= now)
                    ev |= POLLOUT; /* pump() met EAGAIN */
                else if (*timeout < 0 || out->head->due - now < *timeout)
                    *timeout = out->head->due - now;
            }
            /* With nothing to wait for, still watch a socket we may write to,
             * to see a reset; one we have shut down may be left alone. */
            if (!ev && (out->state == D_SHUT || c->state == C_CONNECTING))
                continue;
            pfd[n] = (struct pollfd){.fd = c->fd[s], .events = ev};
            sl[n++] = (slot){c, s};
        }
    }
    for (int i = 0; i < MAX_CTL; i++) {
        if (p->ctl[i].fd >= 0) {
            pfd[n] = (struct pollfd){.fd = p->ctl[i].fd, .events = POLLIN};
            sl[n++] = (slot){NULL, i};
        }
    }
    if (p->ctl_fd >= 0) {
        pfd[n] = (struct pollfd){.fd = p->ctl_fd, .events = POLLIN};
        sl[n++] = (slot){NULL, -2};
    }
    if (p->accept_pause_until > now) {
        int64_t wait = p->accept_pause_until - now;
        if (*timeout < 0 || wait < *timeout)
            *timeout = wait;
    } else {
        pfd[n] = (struct pollfd){.fd = p->listen_fd, .events = POLLIN};
        sl[n++] = (slot){NULL, -1};
    }
    return n;
}

/* Handles what poll reported for one slot. */
static void dispatch(relay *p, const struct pollfd *pf, const slot *sl, int64_t now)
{
    conn *c = sl->c;
    int s = sl->side;
    if (!c) {
        if (s == -1)
            on_accept(p, now);
        else if (s == -2)
            ctl_accept(p);
        else if (p->ctl[s].fd == pf->fd)
            ctl_read(p, &p->ctl[s]);
    } else if (c->state == C_CONNECTING) {
        if (s == 1)
            finish_connect(p, c, now);
        else
            on_readable(p, c, 0, now);
    } else if (c->state == C_OPEN) {
        if (pf->revents & POLLIN)
            on_readable(p, c, s, now);
        if (c->state == C_OPEN && (pf->revents & POLLOUT))
            pump(p, c, 1 - s, now);
        if (c->state == C_OPEN && (pf->revents & (POLLERR | POLLHUP)) &&
            !(pf->revents & POLLIN)) {
            int err = 0;
            socklen_t len = sizeof err;
            getsockopt(c->fd[s], SOL_SOCKET, SO_ERROR, &err, &len);
            conn_end(c, 1, LOG_INFO, "reset: %s %s", side_name[s],
                     err ? strerror(err) : "hung up");
        }
    }
}

/* ---- the relay --------------------------------------------------------------- */

relay *relay_new(const relay_opts *o)
{
    relay *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->listen_fd = o->listen_fd;
    p->ctl_fd = o->ctl_fd;
    p->target = o->target;
    p->target_name = o->target_name;
    p->delay_ms = o->delay_ms;
    p->drop = o->drop;
    p->rng = o->seed;
    p->record_fd = o->record_fd;
    for (int i = 0; i < MAX_CTL; i++)
        p->ctl[i].fd = -1;
    return p;
}

int relay_run(relay *p, const volatile sig_atomic_t *stop, const sigset_t *unblocked)
{
    struct pollfd *pfd = NULL;
    slot *sl = NULL;
    size_t cap = 0;
    int rc = 0;
    while (!p->quit && !*stop) {
        int64_t now = tu_now_ms(), timeout;
        for (size_t i = 0; i < p->nconns; i++)
            for (int s = 0; s < 2; s++)
                pump(p, p->conns[i], s, now);
        sweep(p);
        size_t need = 2 + MAX_CTL + 2 * p->nconns;
        if (need > cap) {
            struct pollfd *np = realloc(pfd, need * 2 * sizeof *np);
            pfd = np ? np : pfd;
            slot *ns = np ? realloc(sl, need * 2 * sizeof *ns) : NULL;
            if (!ns) {
                LOG_E("out of memory for the poll set");
                rc = 1;
                break;
            }
            sl = ns;
            cap = need * 2;
        }
        size_t n = poll_set(p, pfd, sl, now, &timeout);
        struct timespec ts = {timeout / 1000, (long)(timeout % 1000) * 1000000L};
        if (ppoll(pfd, n, timeout < 0 ? NULL : &ts, unblocked) < 0) {
            if (errno == EINTR)
                continue;
            LOG_E("poll: %s", strerror(errno));
            rc = 1;
            break;
        }
        now = tu_now_ms();
        for (size_t k = 0; k < n && !p->quit; k++)
            if (pfd[k].revents)
                dispatch(p, &pfd[k], &sl[k], now);
    }
    free(pfd);
    free(sl);
    return rc;
}

void relay_destroy(relay **r_p)
{
    relay *p = r_p ? *r_p : NULL;
    if (!p)
        return;
    for (size_t i = 0; i < p->nconns; i++) {
        conn_end(p->conns[i], 0, LOG_DEBUG, "proxy exiting");
        free(p->conns[i]);
    }
    free(p->conns);
    for (int i = 0; i < MAX_CTL; i++)
        if (p->ctl[i].fd >= 0)
            ctl_close(&p->ctl[i]);
    close_fd(p->ctl_fd, 0);
    close_fd(p->listen_fd, 0);
    if (p->record_fd >= 0)
        close(p->record_fd);
    free(p);
    *r_p = NULL;
}
