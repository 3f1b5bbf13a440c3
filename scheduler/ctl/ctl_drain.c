/* pskvctl drain (ctl_drain.h). */
#define _GNU_SOURCE
#include "ctl_drain.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "ctl_top.h"
#include "pskv_errors.h"
#include "timeutil.h"
#include "wire.h"

/* The server NODE names in view v: by id, or by HOST:PORT; NULL when none. */
static const Pskv__Node *find_server(const Pskv__View *v, uint32_t id, const char *addr)
{
    for (size_t i = 0; i < v->n_nodes; i++) {
        const Pskv__Node *n = v->nodes[i];
        char a[160];
        snprintf(a, sizeof a, "%s:%u", n->host ? n->host : "", n->port);
        if (n->role == PSKV__ROLE__SERVER && (addr ? !strcmp(a, addr) : n->id == id))
            return n;
    }
    return NULL;
}

/* NODE as a node id: a decimal id, or the id of the server at HOST:PORT (asked
 * of the scheduler). Returns the id, -2 (told: not found, or no answer), or -1
 * when NODE is neither. */
static int64_t resolve(void *sock, const char *sched, const char *node, int answer_ms)
{
    char *end;
    unsigned long long id = strtoull(node, &end, 10);
    if (*node >= '0' && *node <= '9' && !*end)
        return id <= UINT32_MAX ? (int64_t)id : -1;
    const char *colon = strrchr(node, ':');
    if (!colon || colon == node || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1))
        return -1;
    wire_msg st;
    if (ctl_status(sock, sched, "drain", answer_ms, &st) < 0)
        return -2;
    const Pskv__Node *n = find_server(st.meta->view, 0, node);
    int64_t found = n ? (int64_t)n->id : -2;
    if (!n)
        fprintf(stderr, "pskvctl drain: no server at %s in the job (pskvctl status lists them)\n",
                node);
    wire_msg_close(&st);
    return found;
}

/* Sends DRAIN for node id, again every 500 ms while the scheduler answers
 * PSKV_ENOTREADY (copies of an earlier change under way) until deadline_ms;
 * returns the partitions to hand over, or -1 (refused or no answer: told on
 * stderr). */
static int64_t ask_drain(void *sock, const char *sched, uint32_t id, int answer_ms,
                         int64_t deadline_ms)
{
    for (;;) {
        Pskv__Meta req;
        wire_meta_init(&req, PSKV__MSG_TYPE__DRAIN);
        req.has_request_id = req.has_drain_node = 1;
        req.request_id = 2;
        req.drain_node = id;
        wire_send(sock, NULL, &req, NULL, NULL);
        zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
        char why[300];
        if (zmq_poll(&it, 1, answer_ms) <= 0) {
            fprintf(stderr, "pskvctl drain: no answer from scheduler %s within %.1f s\n", sched,
                    answer_ms / 1000.0);
            return -1;
        }
        wire_msg msg;
        int64_t parts = -1;
        int again = 0;
        if (wire_recv(sock, 0, &msg, why, sizeof why) < 0)
            fprintf(stderr, "pskvctl drain: bad answer from %s: %s\n", sched, why);
        else if (msg.meta->type == PSKV__MSG_TYPE__ERROR &&
                 msg.meta->error_code == PSKV_ENOTREADY && tu_now_ms() < deadline_ms)
            again = 1;
        else if (msg.meta->type == PSKV__MSG_TYPE__ERROR)
            fprintf(stderr, "pskvctl drain: refused: %s\n", msg.meta->error ? msg.meta->error : "?");
        else if (msg.meta->type != PSKV__MSG_TYPE__DRAIN_ACK)
            fprintf(stderr, "pskvctl drain: unexpected %s from %s\n",
                    wire_type_name((int)msg.meta->type), sched);
        else
            parts = msg.meta->drain_parts;
        wire_msg_close(&msg);
        if (!again)
            return parts;
        struct timespec nap = {0, 500 * 1000000L};
        nanosleep(&nap, NULL);
    }
}

int ctl_drain(void *sock, const char *sched, const char *node, int answer_ms, int wait_ms)
{
    int64_t id = resolve(sock, sched, node, answer_ms);
    if (id == -1) {
        fprintf(stderr, "pskvctl drain: NODE '%s' is neither a node id nor HOST:PORT (pskvctl "
                "status shows both)\n", node);
        return 2;
    }
    int64_t t0 = tu_now_ms(), deadline = t0 + wait_ms;
    int64_t parts = id >= 0 ? ask_drain(sock, sched, (uint32_t)id, answer_ms, deadline) : -1;
    if (parts < 0)
        return 1;
    printf("draining node %" PRId64 ": %" PRId64 " partitions to hand over\n", id, parts);
    fflush(stdout);
    for (;;) {
        wire_msg st;
        int64_t left = deadline - tu_now_ms();
        if (left <= 0)
            break;
        if (ctl_status(sock, sched, "drain", answer_ms, &st) < 0)
            return 1;
        const Pskv__View *v = st.meta->view;
        const Pskv__Node *n = find_server(v, (uint32_t)id, NULL);
        const char *state = n ? (n->state ? n->state : "?") : "left"; /* forgotten: it left */
        const char *job = v->state ? v->state : "?";
        int rc = !strcmp(state, "left") ? 0 : !strcmp(state, "draining") ? -1 : 1;
        if (rc == -1 && strcmp(job, "running"))
            rc = 1;
        if (rc == 0)
            printf("drained node %" PRId64 ": %" PRId64 " partitions handed over in %.1f s\n", id,
                   parts, (double)(tu_now_ms() - t0) / 1e3);
        else if (rc == 1)
            fprintf(stderr, "pskvctl drain: node %" PRId64 " is %s, not drained (the job is %s)%s\n",
                    id, state, job, !strcmp(state, "dead")
                                        ? ": it died during the drain and was failed over"
                                        : "");
        wire_msg_close(&st);
        if (rc >= 0)
            return rc;
        struct timespec nap = {0, 200 * 1000000L};
        nanosleep(&nap, NULL);
    }
    fprintf(stderr, "pskvctl drain: node %" PRId64 " still draining after %.1f s (the other "
            "servers do not yet hold its partitions whole; see the scheduler's log); it stays "
            "draining\n", id, wait_ms / 1000.0);
    return 1;
}
