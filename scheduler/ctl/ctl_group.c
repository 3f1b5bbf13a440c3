/* pskvctl shutdown, stop GROUP, drop NAMESPACE and the status group lines (ctl_group.h). */
#define _GNU_SOURCE
#include "ctl_group.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "wire.h"

/* Sends req and waits answer_ms for the reply of type `want`. Returns 0 with the
 * reply in *out (the caller closes it), or 1 after saying why on stderr. */
static int ask(void *sock, const char *sched, const char *verb, Pskv__Meta *req, int want,
               int answer_ms, wire_msg *out)
{
    char why[300];
    req->has_request_id = 1;
    req->request_id = 3;
    if (wire_send(sock, NULL, req, NULL, NULL) < 0) {
        fprintf(stderr, "pskvctl %s: cannot send to scheduler %s\n", verb, sched);
        return 1;
    }
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, answer_ms) <= 0) {
        fprintf(stderr, "pskvctl %s: no answer from scheduler %s within %.1f s\n", verb, sched,
                answer_ms / 1000.0);
        return 1;
    }
    if (wire_recv(sock, 0, out, why, sizeof why) < 0) {
        fprintf(stderr, "pskvctl %s: bad answer from %s: %s\n", verb, sched, why);
        wire_msg_close(out);
        return 1;
    }
    if ((int)out->meta->type == want)
        return 0;
    if (out->meta->type == PSKV__MSG_TYPE__ERROR)
        fprintf(stderr, "pskvctl %s: refused: %s\n", verb,
                out->meta->error ? out->meta->error : "?");
    else
        fprintf(stderr, "pskvctl %s: unexpected %s from %s\n", verb,
                wire_type_name((int)out->meta->type), sched);
    wire_msg_close(out);
    return 1;
}

int ctl_shutdown(void *sock, const char *sched, int answer_ms)
{
    Pskv__Meta req;
    wire_msg got;
    wire_meta_init(&req, PSKV__MSG_TYPE__SHUTDOWN);
    if (ask(sock, sched, "shutdown", &req, PSKV__MSG_TYPE__SHUTDOWN_ACK, answer_ms, &got))
        return 1;
    printf("shutdown: the servers of service %" PRIu64 " are stopping\n", got.meta->job_id);
    wire_msg_close(&got);
    return 0;
}

int ctl_stop_group(void *sock, const char *sched, const char *group, int answer_ms)
{
    Pskv__Meta req;
    wire_msg got;
    wire_meta_init(&req, PSKV__MSG_TYPE__GROUP_STOP);
    req.group = (char *)group;
    if (ask(sock, sched, "stop", &req, PSKV__MSG_TYPE__GROUP_STOP_ACK, answer_ms, &got))
        return 1;
    printf("stopping group %s: %u workers told\n", *group ? group : "(unnamed)",
           got.meta->group_size);
    wire_msg_close(&got);
    return 0;
}

int ctl_drop_ns(void *sock, const char *sched, const char *ns, int answer_ms)
{
    Pskv__Meta req;
    wire_msg got;
    wire_meta_init(&req, PSKV__MSG_TYPE__NS_DROP);
    req.table_ns = (char *)ns;
    if (ask(sock, sched, "drop", &req, PSKV__MSG_TYPE__NS_DROP_ACK, answer_ms, &got))
        return 1;
    printf("dropped namespace %s: %u tables, %" PRIu64 " rows, %" PRIu64 " bytes freed (every "
           "replica)\n", *ns ? ns : "(unnamed)", got.meta->ns_tables, got.meta->rows,
           got.meta->bytes);
    wire_msg_close(&got);
    return 0;
}

void ctl_group_print(const Pskv__View *v)
{
    if (v->service)
        printf("service: the servers outlive the worker groups (pskvctl shutdown ends it)\n");
    for (size_t i = 0; i < v->n_groups; i++) {
        const Pskv__GroupStatus *g = v->groups[i];
        if (!v->service && !*g->name)
            continue; /* a job's workers: the table above says it all */
        char clock[32] = "-";
        if (g->has_clock)
            snprintf(clock, sizeof clock, "%" PRId64, g->clock);
        printf("group %-16s %-8s %u/%u workers  barrier %" PRIu64 "  slowest clock %s%s%s%s%s\n",
               *g->name ? g->name : "(unnamed)", g->state ? g->state : "?", g->registered,
               g->size, g->barrier, clock, g->stopped_by ? "  " : "",
               g->stopped_by ? g->stopped_by : "", g->early_stop ? "  early stopping " : "",
               g->early_stop ? g->early_stop : "");
    }
}

