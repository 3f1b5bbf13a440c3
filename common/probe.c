/* The confirming probe (probe.h). */
#define _GNU_SOURCE
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "timeutil.h"

/* One attempt toward one address: the result, or PROBE_UNKNOWN. */
static probe_result attempt(const struct addrinfo *a, int64_t deadline)
{
    int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return PROBE_UNKNOWN;
    probe_result r = PROBE_UNKNOWN;
    int rc = connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc == 0) {
        r = PROBE_OPEN;
    } else if (errno == ECONNREFUSED) {
        r = PROBE_REFUSED;
    } else if (errno == EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int64_t left;
        while ((left = deadline - tu_now_ms()) > 0) {
            rc = poll(&p, 1, (int)left);
            if (rc < 0 && errno == EINTR)
                continue;
            if (rc > 0) {
                int err = 0;
                socklen_t len = sizeof err;
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
                r = err == 0 ? PROBE_OPEN : err == ECONNREFUSED ? PROBE_REFUSED : PROBE_UNKNOWN;
            }
            break;
        }
    }
    close(fd);
    return r;
}

probe_result probe_tcp(const char *host, int port, int timeout_ms)
{
    if (!host || !*host || port <= 0 || port > 65535)
        return PROBE_UNKNOWN;
    if (timeout_ms < 1)
        timeout_ms = 1;
    if (timeout_ms > 10000)
        timeout_ms = 10000;
    int64_t deadline = tu_now_ms() + timeout_ms;
    char svc[16];
    snprintf(svc, sizeof svc, "%d", port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST}, *res;
    if (getaddrinfo(host, svc, &hints, &res) != 0) {
        hints.ai_flags = 0;
        if (getaddrinfo(host, svc, &hints, &res) != 0)
            return PROBE_UNKNOWN;
    }
    probe_result r = PROBE_UNKNOWN;
    /* every address must refuse before nothing listens: one accepting is enough */
    int refused = 0, tried = 0;
    for (struct addrinfo *a = res; a && r != PROBE_OPEN; a = a->ai_next) {
        probe_result one = attempt(a, deadline);
        tried++;
        refused += one == PROBE_REFUSED;
        if (one == PROBE_OPEN)
            r = PROBE_OPEN;
    }
    freeaddrinfo(res);
    if (r != PROBE_OPEN && tried && refused == tried)
        r = PROBE_REFUSED;
    return r;
}

int probe_pid_gone(uint32_t pid)
{
    if (!pid)
        return -1;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%u/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 1 : -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 1;
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* "pid (comm) S ...": comm may hold spaces */
    if (!p || p[1] != ' ')
        return -1;
    return p[2] == 'Z' || p[2] == 'X' || p[2] == 'x';
}

const char *probe_name(probe_result r)
{
    switch (r) {
    case PROBE_OPEN: return "connection accepted";
    case PROBE_REFUSED: return "connection refused";
    default: return "no answer";
    }
}
