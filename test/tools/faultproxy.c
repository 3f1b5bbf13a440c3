/* pskv-faultproxy: a TCP proxy that injects network faults for pskv's tests.
 *
 *   pskv-faultproxy --listen [ADDR:]PORT --target HOST:PORT [--control PORT]
 *                   [--delay-ms N] [--drop P] [--seed S] [--record FILE]
 *
 * This file is the tool's start-up: flags, the target's address, the listening
 * sockets, signals. The relaying and the faults (delay lines, drop, reset,
 * blackhole, the control port's commands) are faultproxy_relay.c's.
 * --record FILE appends every byte relayed, both directions, to FILE (the
 * encryption test looks for a plaintext pattern in it).
 * The control port listens on 127.0.0.1, or on ADDR when --listen names one.
 * SIGINT and SIGTERM exit cleanly too. Exit status: 0, 1 on a start-up error,
 * 2 on a usage error. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "faultproxy_relay.h"
#include "log.h"

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig) { stop_signal = sig; }

/* Parses a decimal port 0..65535. Returns 0 or -1. */
static int parse_port(const char *s, int *port)
{
    if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 5 || atoi(s) > 65535)
        return -1;
    *port = atoi(s);
    return 0;
}

/* Splits "HOST:PORT", "[V6]:PORT" or (with host_optional) "PORT"; host may be
 * empty. Returns 0 or -1. */
static int split_hostport(const char *s, int host_optional, char *host, size_t hostlen,
                          int *port)
{
    const char *colon = strrchr(s, ':');
    if (!colon && !host_optional)
        return -1;
    const char *h = s, *ps = colon ? colon + 1 : s;
    size_t hl = colon ? (size_t)(colon - s) : 0;
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl >= hostlen || parse_port(ps, port) < 0)
        return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    return 0;
}

/* Binds a non-blocking listening socket; returns it and the bound port, or -1. */
static int open_listener(const char *what, const char *host, int port, int *bound)
{
    char ps[8];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res;
    int e = getaddrinfo(host, ps, &hints, &res);
    if (e) {
        LOG_E("cannot resolve %s address %s: %s", what, host, gai_strerror(e));
        return -1;
    }
    int fd = -1, err = 0;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        int one = 1;
        if (fd >= 0 && (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
                        bind(fd, a->ai_addr, a->ai_addrlen) < 0 || listen(fd, 128) < 0)) {
            err = errno;
            close(fd);
            fd = -1;
        } else if (fd < 0) {
            err = errno;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        LOG_E("cannot listen for %s on %s:%d: %s", what, host, port, strerror(err));
        return -1;
    }
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &len);
    *bound = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                            : ((struct sockaddr_in *)&sa)->sin_port);
    return fd;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: pskv-faultproxy --listen [ADDR:]PORT --target HOST:PORT [--control PORT]\n"
               "                       [--delay-ms N] [--drop P] [--seed S] [--record FILE]\n"
               "  --listen    address to accept on (ADDR default 0.0.0.0; PORT 0 = any free)\n"
               "  --target    where each connection is relayed to\n"
               "  --control   control port on 127.0.0.1 (or ADDR); 0 = any free\n"
               "  --delay-ms  hold every chunk N ms in each direction (0..%d)\n"
               "  --drop      close each new connection with probability P (0..1)\n"
               "  --seed      seed of the drop decisions (default 1)\n"
               "  --record    append every byte relayed (both directions) to FILE\n"
               "control commands: delay MS | drop P | blackhole on|off | reset | status | quit\n",
               RELAY_DELAY_MAX);
}

/* What the command line asked for. */
typedef struct flags {
    const char *listen_arg, *target_arg;
    char lhost[256], thost[256];
    int lport, tport;
    int cport; /* -1 = no control port */
    int delay_ms;
    double drop;
    uint64_t seed;
    const char *record; /* --record FILE, or NULL */
} flags;

/* Reads the command line into f. Returns -1 to go on, or the exit status: 0
 * after --help, 2 after saying what is wrong. */
static int parse_flags(int argc, char **argv, flags *f)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        const char *v = i + 1 < argc ? argv[++i] : NULL;
        char *end = NULL;
        int bad = 0;
        if (!v) {
            bad = 1;
        } else if (!strcmp(a, "--listen")) {
            f->listen_arg = v;
            bad = split_hostport(v, 1, f->lhost, sizeof f->lhost, &f->lport) < 0;
        } else if (!strcmp(a, "--target")) {
            f->target_arg = v;
            bad = split_hostport(v, 0, f->thost, sizeof f->thost, &f->tport) < 0 || !*f->thost ||
                  !f->tport;
        } else if (!strcmp(a, "--control")) {
            bad = parse_port(v, &f->cport) < 0;
        } else if (!strcmp(a, "--delay-ms")) {
            errno = 0;
            long ms = strtol(v, &end, 10);
            bad = errno || *end || end == v || ms < 0 || ms > RELAY_DELAY_MAX;
            f->delay_ms = (int)ms;
        } else if (!strcmp(a, "--drop")) {
            f->drop = strtod(v, &end);
            bad = *end || end == v || !(f->drop >= 0 && f->drop <= 1);
        } else if (!strcmp(a, "--record")) {
            f->record = v;
            bad = !*v;
        } else if (!strcmp(a, "--seed")) {
            errno = 0;
            f->seed = strtoull(v, &end, 0);
            bad = errno || *end || end == v || v[0] == '-';
        } else {
            fprintf(stderr, "pskv-faultproxy: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "pskv-faultproxy: bad or missing value for %s%s%s\n", a,
                    v ? ": " : "", v ? v : "");
            usage(stderr);
            return 2;
        }
    }
    if (!f->listen_arg || !f->target_arg) {
        fprintf(stderr, "pskv-faultproxy: --listen and --target are required\n");
        usage(stderr);
        return 2;
    }
    f->seed = f->seed ? f->seed : 1; /* xorshift must not start at 0 */
    return -1;
}

/* Signals stay blocked except inside ppoll, so a SIGTERM cannot slip in between
 * the check of stop_signal and the wait; *unblocked gets the mask ppoll uses. */
static void catch_signals(sigset_t *unblocked)
{
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigprocmask(SIG_BLOCK, &block, unblocked);
}

int main(int argc, char **argv)
{
    flags f = {.cport = -1, .seed = 1};
    log_set_role("faultproxy");
    int rc = parse_flags(argc, argv, &f);
    if (rc >= 0)
        return rc;

    char tps[8];
    snprintf(tps, sizeof tps, "%d", f.tport);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    struct addrinfo *target = NULL;
    int e = getaddrinfo(f.thost, tps, &hints, &target);
    if (e) {
        LOG_E("cannot resolve target %s: %s", f.target_arg, gai_strerror(e));
        return 1;
    }
    relay_opts o = {.listen_fd = -1, .ctl_fd = -1, .target = target,
                    .target_name = f.target_arg, .delay_ms = f.delay_ms, .drop = f.drop,
                    .seed = f.seed, .record_fd = -1};
    relay *r = NULL;
    int bound = 0;
    rc = 1;
    if (f.record) {
        o.record_fd = open(f.record, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (o.record_fd < 0) {
            LOG_E("--record %s: %s", f.record, strerror(errno));
            goto out;
        }
    }
    o.listen_fd = open_listener("connections", f.lhost[0] ? f.lhost : "0.0.0.0", f.lport, &bound);
    if (o.listen_fd < 0)
        goto out;
    printf("faultproxy listening on %d\n", bound);
    if (f.cport >= 0) {
        o.ctl_fd = open_listener("control", f.lhost[0] ? f.lhost : "127.0.0.1", f.cport, &bound);
        if (o.ctl_fd < 0)
            goto out;
        printf("faultproxy control on %d\n", bound);
    }
    fflush(stdout);

    sigset_t unblocked;
    catch_signals(&unblocked);
    r = relay_new(&o);
    if (!r) {
        LOG_E("out of memory");
        goto out;
    }
    LOG_I("relaying to %s (delay %d ms, drop %g)", f.target_arg, f.delay_ms, f.drop);
    rc = relay_run(r, &stop_signal, &unblocked);
    if (stop_signal)
        LOG_I("exiting on signal %d", (int)stop_signal);
    relay_destroy(&r); /* and the listeners with it */
    freeaddrinfo(target);
    return rc;
out:
    if (o.record_fd >= 0)
        close(o.record_fd);
    if (o.ctl_fd >= 0)
        close(o.ctl_fd);
    if (o.listen_fd >= 0)
        close(o.listen_fd);
    freeaddrinfo(target);
    return rc;
}
