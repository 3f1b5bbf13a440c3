/* pskv-tcp-floor --size BYTES [--reps N] [--warmup N] [--sockbuf BYTES]: the
 * kernel's own cost of a training step's bytes over loopback TCP, with no
 * messaging library at all: the floor under pskv-zmq-rtt's ZeroMQ echo.
 *
 * Two processes (forked), one TCP connection on 127.0.0.1 (TCP_NODELAY), plain
 * blocking send and recv: the parent sends SIZE bytes (the gradient), the child
 * reads all of them and sends SIZE bytes back (the weights), the parent reads
 * them all; then the next round trip. Nothing else runs in either process, no
 * thread hands anything on, and the buffers are filled once: what is left is the
 * kernel's copies into and out of the socket buffers, its TCP segments over the
 * loopback device, and the two wake-ups a round trip needs.
 *
 * Prints one line:
 *   tcp_floor size=BYTES reps=N rtt_us=MEDIAN p90_us=P90 cpu_us=CPU
 * cpu_us is both processes' CPU time (user and system) per timed round trip:
 * a lower bound on what any trainer that sends each step's SIZE-byte gradient
 * and receives SIZE bytes of weights over loopback TCP spends on moving them.
 * docs/benchmarks.md, "The transport's CPU over TCP". A side that waits
 * WAIT_S for its peer gives up and exits 1. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "timeutil.h"

enum { WAIT_S = 30 }; /* the longest wait for the peer, either way */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sets the options both ends share: no Nagle, a time-out on every wait, the
 * buffers when asked. */
static void tune(int fd, long sockbuf)
{
    int one = 1;
    struct timeval tv = {.tv_sec = WAIT_S};
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (sockbuf > 0) {
        int b = (int)sockbuf;
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &b, sizeof b);
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof b);
    }
}

/* Sends or receives exactly n bytes. Returns 0, or -1 (time-out, peer gone). */
static int move_all(int fd, char *buf, size_t n, int out)
{
    while (n > 0) {
        ssize_t k = out ? send(fd, buf, n, MSG_NOSIGNAL) : recv(fd, buf, n, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        buf += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The child: accepts one connection and echoes `count` messages of `size`. */
static int echo(int lfd, size_t size, long count, long sockbuf)
{
    struct timeval tv = {.tv_sec = WAIT_S};
    setsockopt(lfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0)
        return 1;
    tune(fd, sockbuf);
    char *in = malloc(size ? size : 1), *back = malloc(size ? size : 1);
    if (!in || !back)
        return 1;
    memset(back, 7, size);
    for (long i = 0; i < count; i++)
        if (move_all(fd, in, size, 0) || move_all(fd, back, size, 1))
            return 1;
    double cpu = (double)tu_process_cpu_ns() / 1e3;
    /* the echo's CPU goes back to the parent as the last 8 bytes */
    if (move_all(fd, (char *)&cpu, sizeof cpu, 1))
        return 1;
    close(fd);
    return 0;
}

static cfg_entry flags[] = {
    {"size", CFG_INT, "0", NULL, 0, 1 << 30, "bytes", "bytes each way a round trip (required)",
     0, 0, NULL, NULL},
    {"reps", CFG_INT, "0", NULL, 0, 100000000, NULL,
     "timed round trips (0: 2000 above 100 KB, else 20000)", 0, 0, NULL, NULL},
    {"warmup", CFG_INT, "50", NULL, 0, 100000000, NULL, "untimed round trips first", 0, 0,
     NULL, NULL},
    {"sockbuf", CFG_INT, "0", NULL, 0, 1 << 30, "bytes",
     "SO_SNDBUF and SO_RCVBUF of both ends (0: the kernel's, auto-tuned)", 0, 0, NULL, NULL},
    CFG_END};

int main(int argc, char **argv)
{
    const char *use = "pskv-tcp-floor --size BYTES [--reps N] [--warmup N] [--sockbuf BYTES]";
    int prc = cfg_parse(flags, use, argc, argv, NULL);
    if (prc)
        return prc > 0 ? 0 : 2;
    long size = (long)flags[0].i, reps = (long)flags[1].i, warmup = (long)flags[2].i,
         sockbuf = (long)flags[3].i;
    if (size == 0) {
        fprintf(stderr, "pskv-tcp-floor: --size is required\nusage: %s\n", use);
        return 2;
    }
    if (reps == 0)
        reps = size > 100000 ? 2000 : 20000;

    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) || listen(lfd, 1) ||
        getsockname(lfd, (struct sockaddr *)&sa, &len)) {
        perror("pskv-tcp-floor: listen on 127.0.0.1");
        return 1;
    }
    pid_t child = fork();
    if (child < 0) {
        perror("pskv-tcp-floor: fork");
        return 1;
    }
    if (child == 0)
        _exit(echo(lfd, (size_t)size, warmup + reps, sockbuf));
    close(lfd);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
        perror("pskv-tcp-floor: connect");
        return 1;
    }
    tune(fd, sockbuf);
    char *out = malloc((size_t)size), *in = malloc((size_t)size);
    double *rtt = malloc((size_t)reps * sizeof *rtt), cpu0 = 0, child_cpu = 0;
    if (!out || !in || !rtt)
        return 1;
    memset(out, 3, (size_t)size);
    int bad = 0;
    for (long i = 0; i < warmup + reps && !bad; i++) {
        if (i == warmup)
            cpu0 = (double)tu_process_cpu_ns() / 1e3;
        double t0 = (double)tu_now_ns() / 1e3;
        bad = move_all(fd, out, (size_t)size, 1) || move_all(fd, in, (size_t)size, 0);
        if (i >= warmup)
            rtt[i - warmup] = (double)tu_now_ns() / 1e3 - t0;
    }
    double own = (double)tu_process_cpu_ns() / 1e3 - cpu0;
    /* the child's CPU over the warm-up too: scale it to the timed reps */
    bad = bad || move_all(fd, (char *)&child_cpu, sizeof child_cpu, 0);
    int status = 0;
    waitpid(child, &status, 0);
    if (bad || !WIFEXITED(status) || WEXITSTATUS(status)) {
        fprintf(stderr, "pskv-tcp-floor: the echo process failed or timed out\n");
        return 1;
    }
    qsort(rtt, (size_t)reps, sizeof *rtt, cmp_double);
    double cpu = (own + child_cpu * (double)reps / (double)(warmup + reps)) / (double)reps;
    printf("tcp_floor size=%ld reps=%ld rtt_us=%.1f p90_us=%.1f cpu_us=%.1f\n", size, reps,
           rtt[reps / 2], rtt[reps * 9 / 10], cpu);
    free(out);
    free(in);
    free(rtt);
    return 0;
}
