/* pskvctl top (ctl_top.h). Rates are differences between two STATUS answers
 * (clocks, pushes and pulls served, time waited, all cumulative in the
 * heartbeats) over the time between them; the first refresh has none yet. */
#define _GNU_SOURCE
#include "ctl_top.h"

#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <zmq.h>

#include "timeutil.h"
#include "wire.h"

#define MAX_NODES 4096 /* nodes followed for rates; more are shown without */

typedef struct sample {
    uint32_t id;
    int64_t clock;
    uint64_t pushes, pulls, wait_ns;
} sample;

static struct {
    sample prev[MAX_NODES], next[MAX_NODES];
    int nprev, nnext;
    int64_t prev_ns;
} S;

static atomic_int interrupted;
static void on_int(int sig) { interrupted = sig; }

static const sample *previous(uint32_t id)
{
    for (int i = 0; i < S.nprev; i++)
        if (S.prev[i].id == id)
            return &S.prev[i];
    return NULL;
}

int ctl_status(void *sock, const char *sched, const char *cmd, int timeout_ms, wire_msg *out)
{
    Pskv__Meta req;
    wire_meta_init(&req, PSKV__MSG_TYPE__STATUS);
    req.has_request_id = 1;
    req.request_id = 1;
    wire_send(sock, NULL, &req, NULL, NULL);
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    char why[300];
    if (zmq_poll(&it, 1, timeout_ms) <= 0) {
        fprintf(stderr, "pskvctl %s: no answer from scheduler %s within %.1f s\n", cmd, sched,
                timeout_ms / 1000.0);
        return -1;
    }
    if (wire_recv(sock, 0, out, why, sizeof why) < 0 || !out->meta ||
        out->meta->type != PSKV__MSG_TYPE__STATUS_REPLY || !out->meta->view) {
        fprintf(stderr, "pskvctl %s: bad answer from %s: %s\n", cmd, sched,
                out->meta && out->meta->error ? out->meta->error : why);
        wire_msg_close(out);
        return -1;
    }
    return 0;
}

const Pskv__Node *ctl_slowest_worker(const Pskv__View *v)
{
    const Pskv__Node *slow = NULL;
    for (size_t i = 0; i < v->n_nodes; i++) {
        const Pskv__Node *n = v->nodes[i];
        if (n->role == PSKV__ROLE__WORKER && n->alive && n->state &&
            strcmp(n->state, "finished") && (!slow || n->clock < slow->clock))
            slow = n;
    }
    return slow;
}

/* One node's line; rates from its previous sample over dt seconds (0: none). */
static void node_line(const Pskv__Node *n, double dt, int mark, int tty)
{
    const sample *p = previous(n->id);
    char rss[24] = "-";
    if (n->has_rss_bytes)
        snprintf(rss, sizeof rss, "%.1f", (double)n->rss_bytes / 1048576.0);
    const char *st = n->state ? n->state : n->alive ? "?" : "dead"; /* left, not dead */
    if (tty && mark)
        printf("\033[7m");
    if (n->role == PSKV__ROLE__WORKER) {
        char rate[24] = "-", wait[24] = "-";
        if (p && dt > 0) {
            snprintf(rate, sizeof rate, "%.1f", (double)(n->clock - p->clock) / dt);
            /* heartbeats come every ~100 ms: the fraction is clamped to what it can be */
            double f = (double)(n->wait_ns - p->wait_ns) / (dt * 1e9);
            snprintf(wait, sizeof wait, "%.2f", f < 0 ? 0 : f > 1 ? 1 : f);
        }
        printf("worker node=%u rank=%d state=%s clock=%" PRId64 " steps_per_s=%s waiting=%s "
               "rss_mib=%s%s", n->id, n->rank, st, n->clock, rate, wait, rss,
               mark ? " slowest=1" : "");
        if (n->group)
            printf(" group=%s", *n->group ? n->group : "-");
        if (n->has_balance_batch) /* --balance batch */
            printf(" batch=%u us_per_example=%.1f", n->balance_batch,
                   n->has_balance_us ? n->balance_us : 0.0);
        if (n->has_stage_layers) /* --balance stages */
            printf(" layers=%u..%u ms_per_micro=%.3f", n->stage_layers >> 16,
                   (n->stage_layers & 0xffff) - 1, n->has_stage_ms ? n->stage_ms : 0.0);
    } else if (n->role == PSKV__ROLE__SERVER) {
        char push[24] = "-", pull[24] = "-";
        if (p && dt > 0) {
            snprintf(push, sizeof push, "%.0f", (double)(n->pushes - p->pushes) / dt);
            snprintf(pull, sizeof pull, "%.0f", (double)(n->pulls - p->pulls) / dt);
        }
        printf("server node=%u rank=%d state=%s partitions=%u chains=%u pushes_per_s=%s "
               "pulls_per_s=%s rss_mib=%s", n->id, n->rank, st, n->heads, n->holds, push, pull,
               rss);
    } else if (n->role == PSKV__ROLE__EVALUATOR) {
        printf("evaluator node=%u state=%s evals=%" PRIu64 " clock=%" PRId64 " val_loss=%.4f "
               "val_accuracy=%.4f", n->id, st, n->evals, n->eval_clock, n->val_loss,
               n->val_accuracy);
        if (n->has_val_auc)
            printf(" val_auc=%.4f", n->val_auc);
        printf(" rss_mib=%s", rss);
    } else {
        printf("node node=%u rank=%d state=%s rss_mib=%s", n->id, n->rank, st, rss);
    }
    printf("%s\n", tty && mark ? "\033[0m" : "");
    if (S.nnext < MAX_NODES)
        S.next[S.nnext++] = (sample){n->id, n->clock, n->pushes, n->pulls, n->wait_ns};
}

static void draw(const Pskv__Meta *m, int tty)
{
    const Pskv__View *v = m->view;
    int64_t now = tu_now_ns();
    double dt = S.prev_ns ? (double)(now - S.prev_ns) / 1e9 : 0;
    if (tty)
        printf("\033[H\033[2J");
    printf("job %" PRIu64 " state=%s epoch=%" PRIu64 " servers=%u workers=%u%s\n", m->job_id,
           v->state ? v->state : "?", v->epoch, v->servers, v->workers,
           tty ? "   (q quits)" : "");
    const Pskv__Node *slow = ctl_slowest_worker(v);
    S.nnext = 0;
    for (size_t i = 0; i < v->n_nodes; i++)
        node_line(v->nodes[i], dt, v->nodes[i] == slow, tty);
    for (size_t i = 0; v->service && i < v->n_groups; i++) { /* a service's groups */
        const Pskv__GroupStatus *g = v->groups[i];
        printf("group name=%s state=%s workers=%u/%u barrier=%" PRIu64 " clock=%" PRId64,
               *g->name ? g->name : "-", g->state ? g->state : "?", g->registered, g->size,
               g->barrier, g->has_clock ? g->clock : -1);
        if (g->early_stop) /* its first word: watching, suspended or fired */
            printf(" early_stop=%.*s", (int)strcspn(g->early_stop, " :"), g->early_stop);
        putchar('\n');
    }
    memcpy(S.prev, S.next, (size_t)S.nnext * sizeof *S.prev);
    S.nprev = S.nnext;
    S.prev_ns = now;
    fflush(stdout);
}

/* Waits up to ms for the next refresh; 1 when the user asked to quit. */
static int wait_key(int ms, int tty)
{
    struct pollfd pf = {STDIN_FILENO, POLLIN, 0};
    if (!tty) {
        poll(NULL, 0, ms);
        return 0;
    }
    if (poll(&pf, 1, ms) > 0) {
        char c = 0;
        if (read(STDIN_FILENO, &c, 1) == 1 && (c == 'q' || c == 'Q'))
            return 1;
    }
    return 0;
}

int ctl_top(void *sock, const char *sched, double interval_s, long count, int plain,
            int timeout_ms)
{
    int tty = !plain && isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
    struct termios saved, raw;
    if (tty && tcgetattr(STDIN_FILENO, &saved) == 0) {
        raw = saved;
        raw.c_lflag &= (tcflag_t) ~(ICANON | ECHO);
        tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    } else {
        tty = 0;
    }
    struct sigaction sa = {.sa_handler = on_int};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int status = 0;
    for (long i = 0; !interrupted && (count == 0 || i < count); i++) {
        if (i > 0 && wait_key((int)(interval_s * 1000), tty))
            break;
        if (interrupted)
            break;
        wire_msg msg;
        if (ctl_status(sock, sched, "top", timeout_ms, &msg) < 0) {
            status = 1;
            break;
        }
        draw(msg.meta, tty);
        wire_msg_close(&msg);
    }
    if (tty)
        tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    return status;
}
