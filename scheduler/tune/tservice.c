/* The service the trials run on (tservice.h). */
#define _GNU_SOURCE
#include "tservice.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "log.h"
#include "net.h"
#include "pskv_errors.h"
#include "timeutil.h"
#include "wire.h"

#define WATCH_TICK_MS 20    /* how soon the watchdog sees the scheduler and servers end */
#define WATCH_IDLE_MS 1000  /* how often it looks for a tuner or a running trial */

struct tservice {
    void *ctx, *sock;
    char addr[280];
    uint64_t next_id;
};

static int open_sock(tservice *s, const char *addr, char *why, size_t len)
{
    char host[256];
    int port;
    if (net_split_hostport(addr, host, sizeof host, &port) < 0) {
        snprintf(why, len, "--scheduler '%s' is not HOST:PORT", addr);
        return -PSKV_EINVAL;
    }
    snprintf(s->addr, sizeof s->addr, "%s", addr);
    s->ctx = zmq_ctx_new();
    s->sock = s->ctx ? net_socket(s->ctx, ZMQ_DEALER, 64 << 20, 0) : NULL;
    if (!s->sock || net_connect(s->sock, host, port) < 0) {
        snprintf(why, len, "cannot open a socket to %s", addr);
        return -PSKV_EIO;
    }
    s->next_id = 1000;
    return 0;
}

/* One request, its answer (matched by request id: a late answer to an earlier
 * request is dropped) within timeout_ms into *out. Returns 0, or -PSKV_ETIMEDOUT. */
static int ask(tservice *s, Pskv__Meta *req, int timeout_ms, wire_msg *out)
{
    char why[300];
    req->has_request_id = 1;
    req->request_id = ++s->next_id;
    if (wire_send(s->sock, NULL, req, NULL, NULL) < 0)
        return -PSKV_EIO;
    for (int64_t until = tu_now_ms() + timeout_ms;;) {
        int64_t left = until - tu_now_ms();
        zmq_pollitem_t it = {s->sock, 0, ZMQ_POLLIN, 0};
        if (left <= 0 || zmq_poll(&it, 1, (long)left) <= 0)
            return -PSKV_ETIMEDOUT;
        if (wire_recv(s->sock, 0, out, why, sizeof why) < 0) {
            LOG_W("service %s: a bad answer: %s", s->addr, why);
            wire_msg_close(out);
            continue;
        }
        if (out->meta->has_request_id && out->meta->request_id == req->request_id)
            return 0;
        wire_msg_close(out);
    }
}

/* STATUS: 1 when a service with at least `servers` live servers answers, 0 when it
 * has fewer, or a negated code (-PSKV_EINVAL: not a service). */
static int status(tservice *s, int servers, int timeout_ms, int *running)
{
    Pskv__Meta req;
    wire_msg got;
    wire_meta_init(&req, PSKV__MSG_TYPE__STATUS);
    int rc = ask(s, &req, timeout_ms, &got);
    if (rc < 0)
        return rc;
    const Pskv__View *v = got.meta->view;
    if (got.meta->type != PSKV__MSG_TYPE__STATUS_REPLY || !v || !v->service) {
        wire_msg_close(&got);
        return -PSKV_EINVAL;
    }
    int live = 0, run = 0;
    for (size_t i = 0; i < v->n_nodes; i++)
        live += v->nodes[i]->role == PSKV__ROLE__SERVER && v->nodes[i]->alive;
    for (size_t i = 0; i < v->n_groups; i++)
        run += v->groups[i]->state && !strcmp(v->groups[i]->state, "running");
    if (running)
        *running = run;
    wire_msg_close(&got);
    return live >= servers;
}

int tservice_attach(const char *addr, int timeout_ms, tservice **out, char *why, size_t len)
{
    *out = NULL;
    tservice *s = calloc(1, sizeof *s);
    if (!s)
        return -PSKV_ENOMEM;
    int rc = open_sock(s, addr, why, len);
    if (rc == 0) {
        rc = status(s, 0, timeout_ms, NULL);
        if (rc == -PSKV_ETIMEDOUT)
            snprintf(why, len, "no answer from %s within %.1f s", addr, timeout_ms / 1000.0);
        else if (rc < 0)
            snprintf(why, len, "%s is not a service (pskv-scheduler --service)", addr);
    }
    if (rc < 0) {
        tservice_close(&s);
        return rc;
    }
    *out = s;
    return 0;
}

/* A port no one listens on, below the ephemeral range, in the running test's
 * share of it under the test harness's -j N (PSKV_PORT_SLOT of PSKV_PORT_SLOTS):
 * scripts/free-port.sh's rule. */
static int free_port(const char *host)
{
    int lo = 32768, hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2)
            lo = 32768;
        fclose(f);
    }
    int span = lo > 21000 ? lo - 20000 : 1000, base = 20000;
    const char *slots = getenv("PSKV_PORT_SLOTS"), *slot = getenv("PSKV_PORT_SLOT");
    if (slots && atoi(slots) > 1 && atoi(slots) < span) {
        span /= atoi(slots);
        base += (slot ? atoi(slot) : 0) * span;
    }
    srand((unsigned)(tu_now_ns() ^ getpid()));
    for (int k = 0; k < 200; k++) {
        int p = base + rand() % span;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
        if (fd >= 0)
            close(fd);
        if (ok)
            return p;
    }
    return -1;
}

/* In the watchdog: a daemon with its output appended to logs/NAME.log and its pid
 * in logs/NAME.pid. Returns its pid or -1. */
static pid_t spawn(const char *logs, const char *name, char *const *argv)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.log", logs, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    pid_t pid = fork();
    if (pid == 0) {
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0)
            dup2(nul, 0);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    if (fd >= 0)
        close(fd);
    if (pid > 0) {
        snprintf(path, sizeof path, "%s/%s.pid", logs, name);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "%ld\n", (long)pid);
            fclose(f);
        }
    }
    return pid;
}

/* 1 while someone holds the flock of path. */
static int held(const char *path)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int h = flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
    close(fd);
    return h;
}

static int anyone(const tservice_opts *o)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/tuner.lock", o->dir);
    if (held(path))
        return 1;
    glob_t g;
    snprintf(path, sizeof path, "%s/trial-*/lock", o->trials);
    int busy = 0;
    if (glob(path, 0, NULL, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc && !busy; i++)
            busy = held(g.gl_pathv[i]);
    globfree(&g);
    return busy;
}

/* The watchdog (the session leader): starts the daemons and stays with them. */
static void watchdog(const tservice_opts *o, int port)
{
    char logs[4200], sched[300], portbuf[16], nserv[16], bin[2][4200], name[32];
    const char *host = o->host && *o->host ? o->host : "127.0.0.1";
    snprintf(logs, sizeof logs, "%s/logs", o->dir);
    snprintf(portbuf, sizeof portbuf, "%d", port);
    snprintf(nserv, sizeof nserv, "%d", o->servers);
    snprintf(sched, sizeof sched, "%s:%d", host, port);
    snprintf(bin[0], sizeof bin[0], "%s/pskv-scheduler", o->bin_dir);
    snprintf(bin[1], sizeof bin[1], "%s/pskv-server", o->bin_dir);
    /* held for the watchdog's life: what tells a later tuner that the process group
     * the study records is still this service's (tservice_kill_stale) */
    char lock[4200];
    snprintf(lock, sizeof lock, "%s/watchdog.lock", o->dir);
    int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lfd < 0 || flock(lfd, LOCK_EX | LOCK_NB) < 0)
        _exit(1); /* another watchdog of this study runs */
    /* on another address than loopback (trials on other hosts) they listen there and
     * say so: --bind and --advertise; and --insecure when pskv-tune run has it */
    char *extra[6] = {NULL}, **x = extra;
    if (strcmp(host, "127.0.0.1")) {
        *x++ = "--bind", *x++ = (char *)host;
        *x++ = "--advertise", *x++ = (char *)host;
    }
    if (o->insecure)
        *x++ = "--insecure";
    char *sargv[] = {bin[0], "--service", "--port", portbuf, "--servers", nserv,
                     extra[0], extra[1], extra[2], extra[3], extra[4], NULL};
    pid_t sp = spawn(logs, "scheduler", sargv), srv[64];
    int n = o->servers < 64 ? o->servers : 64;
    for (int i = 0; i < n; i++) {
        char *vargv[] = {bin[1], "--scheduler", sched, extra[0], extra[1], extra[2], extra[3],
                         extra[4], NULL};
        snprintf(name, sizeof name, "server-%d", i);
        srv[i] = spawn(logs, name, vargv);
    }
    int64_t idle_since = tu_now_ms(), stop_sent = 0, looked = 0;
    while (sp > 0) {
        tu_sleep_ms(WATCH_TICK_MS);
        int st;
        if (waitpid(sp, &st, WNOHANG) == sp)
            break; /* the scheduler ended (shutdown): the servers follow */
        if (tu_now_ms() - looked < WATCH_IDLE_MS)
            continue;
        looked = tu_now_ms();
        if (anyone(o))
            idle_since = tu_now_ms();
        else if (!stop_sent && tu_now_ms() - idle_since > (int64_t)(o->linger * 1000)) {
            kill(sp, SIGTERM); /* pskvctl shutdown's orderly stop */
            stop_sent = tu_now_ms();
        } else if (stop_sent && tu_now_ms() - stop_sent > 30000)
            kill(sp, SIGKILL);
    }
    /* the servers exit by themselves after a shutdown; at most 20 s */
    for (int64_t until = tu_now_ms() + 20000; tu_now_ms() < until;) {
        int left = 0;
        for (int i = 0; i < n; i++)
            if (srv[i] > 0 && waitpid(srv[i], NULL, WNOHANG) == 0)
                left++;
            else
                srv[i] = 0;
        if (!left)
            _exit(0);
        if (tu_now_ms() + 15000 > until) /* after 5 s: an orderly stop of our own */
            for (int i = 0; i < n; i++)
                if (srv[i] > 0)
                    kill(srv[i], SIGTERM);
        tu_sleep_ms(WATCH_TICK_MS);
    }
    kill(0, SIGKILL);
    _exit(1);
}

int tservice_start(const tservice_opts *o, char *addr, size_t alen, long *pgid, char *why,
                   size_t len)
{
    char logs[4200];
    snprintf(logs, sizeof logs, "%s/logs", o->dir);
    if ((mkdir(o->dir, 0755) < 0 && errno != EEXIST) || (mkdir(logs, 0755) < 0 && errno != EEXIST)) {
        snprintf(why, len, "%s: %s", logs, strerror(errno));
        return -PSKV_EIO;
    }
    const char *host = o->host && *o->host ? o->host : "127.0.0.1";
    int port = free_port(host);
    if (port < 0) {
        snprintf(why, len, "no free port for the service's scheduler");
        return -PSKV_EIO;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, len, "fork: %s", strerror(errno));
        return -PSKV_EIO;
    }
    if (pid == 0) {
        setsid();
        /* nothing of the tuner's (the study's database, its locks) in the service */
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) {
            dup2(nul, 0);
            dup2(nul, 1);
            dup2(nul, 2);
        }
        signal(SIGINT, SIG_IGN); /* a Ctrl-C of the tuner's terminal: the tuner decides */
        signal(SIGTERM, SIG_DFL);
        watchdog(o, port);
        _exit(0);
    }
    *pgid = pid;
    snprintf(addr, alen, "%s:%d", host, port);
    return 0;
}

int tservice_ready(const char *addr, long pgid, int servers, int timeout_ms, tservice **out,
                   char *why, size_t len)
{
    *out = NULL;
    tservice *s = calloc(1, sizeof *s);
    int rc = s ? open_sock(s, addr, why, len) : -PSKV_ENOMEM;
    int64_t until = tu_now_ms() + timeout_ms;
    while (rc == 0) {
        int st = status(s, servers, 500, NULL);
        if (st == 1)
            break;
        if (pgid > 1 && waitpid((pid_t)pgid, NULL, WNOHANG) == pgid) {
            snprintf(why, len, "the service's scheduler at %s ended at once (see its log)", addr);
            rc = -PSKV_EIO;
        } else if (tu_now_ms() > until) {
            snprintf(why, len, "the service at %s did not start within %.0f s (see its log)",
                     addr, timeout_ms / 1000.0);
            rc = -PSKV_ETIMEDOUT;
        } else if (st != -PSKV_ETIMEDOUT)
            tu_sleep_ms(10); /* the study waits for it: look often */
    }
    if (rc < 0) {
        if (pgid > 1) {
            kill(-(pid_t)pgid, SIGKILL);
            waitpid((pid_t)pgid, NULL, 0);
        }
        tservice_close(&s);
        return rc;
    }
    *out = s;
    return 0;
}

int tservice_hold(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/tuner.lock", dir);
    mkdir(dir, 0755);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || flock(fd, LOCK_EX) < 0) { /* the watchdog holds it only for a moment */
        if (fd >= 0)
            close(fd);
        return -PSKV_EIO;
    }
    return 0; /* fd stays open: the lock lives as long as this process */
}

const char *tservice_addr(const tservice *s)
{
    return s->addr;
}

int tservice_stop_group(tservice *s, const char *name, int timeout_ms, unsigned *told,
                        char *why, size_t len)
{
    Pskv__Meta req;
    wire_msg got;
    wire_meta_init(&req, PSKV__MSG_TYPE__GROUP_STOP);
    req.group = (char *)name;
    int rc = ask(s, &req, timeout_ms, &got);
    if (rc < 0) {
        snprintf(why, len, "no answer from %s within %d ms", s->addr, timeout_ms);
        return rc;
    }
    if (got.meta->type != PSKV__MSG_TYPE__GROUP_STOP_ACK) {
        snprintf(why, len, "%s", got.meta->error ? got.meta->error : "refused");
        rc = -PSKV_EINVAL;
    } else if (told)
        *told = got.meta->group_size;
    wire_msg_close(&got);
    return rc;
}

int tservice_groups_running(tservice *s, int timeout_ms)
{
    int running = 0;
    int rc = status(s, 0, timeout_ms, &running);
    return rc < 0 ? rc : running;
}

int tservice_shutdown(tservice *s, long pgid, int timeout_ms)
{
    Pskv__Meta req;
    wire_msg got;
    wire_meta_init(&req, PSKV__MSG_TYPE__SHUTDOWN);
    if (ask(s, &req, timeout_ms < 5000 ? timeout_ms : 5000, &got) == 0) {
        if (got.meta->type != PSKV__MSG_TYPE__SHUTDOWN_ACK)
            LOG_W("service %s: shutdown refused: %s", s->addr,
                  got.meta->error ? got.meta->error : "?");
        wire_msg_close(&got);
    } else
        LOG_W("service %s: no answer to shutdown", s->addr);
    if (pgid <= 1)
        return 0;
    /* the watchdog is our child when this tuner started it, else another's */
    for (int64_t until = tu_now_ms() + timeout_ms; tu_now_ms() < until;) {
        if (waitpid((pid_t)pgid, NULL, WNOHANG) == pgid || kill(-(pid_t)pgid, 0) < 0)
            return 0;
        tu_sleep_ms(10);
    }
    LOG_W("service %s: still running %d ms after shutdown: killed", s->addr, timeout_ms);
    kill(-(pid_t)pgid, SIGKILL);
    waitpid((pid_t)pgid, NULL, WNOHANG);
    return -PSKV_ETIMEDOUT;
}

void tservice_kill_stale(const char *dir, long pgid)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/watchdog.lock", dir);
    if (pgid > 1 && held(path) && getpgid((pid_t)pgid) == (pid_t)pgid) {
        LOG_W("ending the study's earlier service (process group %ld)", pgid);
        kill(-(pid_t)pgid, SIGKILL);
        for (int k = 0; k < 100 && held(path); k++) /* gone within a second */
            tu_sleep_ms(10);
    }
}

void tservice_close(tservice **self_p)
{
    tservice *s = self_p ? *self_p : NULL;
    if (!s)
        return;
    if (s->sock)
        zmq_close(s->sock);
    if (s->ctx)
        zmq_ctx_term(s->ctx);
    free(s);
    *self_p = NULL;
}
