/* Dropping a namespace: the scheduler's side (nsdrop.h). */
#define _GNU_SOURCE
#include "nsdrop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drain.h"
#include "events.h"
#include "group.h"
#include "log.h"
#include "pskv_errors.h"
#include "sched_net.h"
#include "timeutil.h"
#include "view.h"

typedef struct ns_drop {
    char ns[GROUP_NAME_MAX + 1];
    char by[200];            /* who asked: "pskvctl drop from ADDR", "group G's end" */
    int ctl;                 /* pskvctl waits for the answer: asker */
    sched_asker asker;
    int sent;                /* NS_DROP is out; the servers below answer */
    int waited;              /* logged that it waits for copies under way */
    uint32_t *wait;          /* servers sent to that have not answered */
    int nwait, servers, answered; /* servers: sent NS_DROP */
    uint32_t tables;
    uint64_t rows, bytes;
    int64_t deadline_ms;
} ns_drop;

static ns_drop drops[NSDROP_MAX];
static int ndrops;

static const char *shown(const char *ns) { return *ns ? ns : "(unnamed)"; }

static ns_drop *find(const char *ns)
{
    for (int i = 0; i < ndrops; i++)
        if (!strcmp(drops[i].ns, ns))
            return &drops[i];
    return NULL;
}

/* Answers d's requester (code 0: NS_DROP_ACK with the sums) and forgets d. */
static void finish(ns_drop *d, int code, const char *why)
{
    if (code)
        LOG_W("drop of namespace '%s' (%s): %s", shown(d->ns), d->by, why);
    else
        LOG_I("namespace '%s' dropped (%s): %u tables, %llu rows, %llu bytes freed on %d "
              "servers%s", shown(d->ns), d->by, d->tables, (unsigned long long)d->rows,
              (unsigned long long)d->bytes, d->answered,
              d->answered < d->servers ? " (the others died or left before answering)" : "");
    if (d->ctl) {
        Pskv__Meta m;
        sched_meta(&m, code ? PSKV__MSG_TYPE__ERROR : PSKV__MSG_TYPE__NS_DROP_ACK);
        m.table_ns = d->ns;
        if (code) {
            m.has_error_code = 1;
            m.error_code = code;
            m.error = (char *)why;
        } else {
            m.has_ns_tables = m.has_rows = m.has_bytes = 1;
            m.ns_tables = d->tables;
            m.rows = d->rows;
            m.bytes = d->bytes;
        }
        sched_answer(&d->asker, &m);
    }
    free(d->wait);
    *d = drops[--ndrops];
}

/* 1 when server n still has to answer: live, in the job. */
static int answers(const memb_node *n)
{
    return n && n->role == PSKV__ROLE__SERVER && !n->dead && n->state != NODE_FINISHED &&
           n->drain != DRAIN_LEFT;
}

/* NS_DROP to every live server; d then waits for their answers. Returns 0, or -1
 * when out of memory (nothing sent). */
static int send_drop(ns_drop *d)
{
    d->wait = calloc((size_t)memb.nnodes + 1, sizeof *d->wait);
    if (!d->wait)
        return -1;
    Pskv__Meta m;
    sched_meta(&m, PSKV__MSG_TYPE__NS_DROP);
    m.table_ns = d->ns;
    for (int i = 0; i < memb.nnodes; i++)
        if (answers(&memb.nodes[i]) && sched_send(&memb.nodes[i], &m) == 0)
            d->wait[d->nwait++] = memb.nodes[i].id;
    d->servers = d->nwait;
    d->sent = 1;
    LOG_I("dropping namespace '%s' (%s): NS_DROP sent to %d servers", shown(d->ns), d->by,
          d->nwait);
    return 0;
}

/* Why namespace ns may not be dropped now (its PSKV_E* code), or 0. */
static int refusal(const char *ns, char *why, size_t len)
{
    char users[300];
    if (strlen(ns) > GROUP_NAME_MAX || strchr(ns, '/')) {
        snprintf(why, len, "namespace '%.80s' is not a namespace name (1..%d bytes without '/')",
                 ns, GROUP_NAME_MAX);
        return PSKV_EINVAL;
    }
    if (!*ns && !memb.service) {
        snprintf(why, len, "the unnamed namespace is job %llu's own: its tables end with the "
                 "job (pskvctl drop is for a service's namespaces)",
                 (unsigned long long)memb.job_id);
        return PSKV_EREFUSED;
    }
    if (memb.state != JOB_RUNNING) {
        snprintf(why, len, "namespace '%s': the %s is not running (its servers are not all in, "
                 "or it is stopping)", shown(ns), memb.service ? "service" : "job");
        return PSKV_EREFUSED;
    }
    const ns_drop *d = find(ns);
    if (d) {
        snprintf(why, len, "namespace '%s' is being dropped already (%s)", shown(ns), d->by);
        return PSKV_EREFUSED;
    }
    int n = group_users(ns, users, sizeof users);
    if (n) {
        snprintf(why, len, "namespace '%s' is in use by live group%s %s: stop %s (pskvctl stop "
                 "GROUP) or let %s end first", shown(ns), n > 1 ? "s" : "", users,
                 n > 1 ? "them" : "it", n > 1 ? "them" : "it");
        return PSKV_EREFUSED;
    }
    if (ndrops == NSDROP_MAX) {
        snprintf(why, len, "namespace '%s': %d drops are in progress already; try again",
                 shown(ns), NSDROP_MAX);
        return PSKV_EREFUSED;
    }
    return 0;
}

/* A new drop of ns (refusal checked), sent now unless copies are under way. */
static ns_drop *begin(const char *ns, const char *by)
{
    ns_drop *d = &drops[ndrops++];
    memset(d, 0, sizeof *d);
    snprintf(d->ns, sizeof d->ns, "%s", ns);
    snprintf(d->by, sizeof d->by, "%s", by);
    d->deadline_ms = tu_now_ms() + NSDROP_TIMEOUT_MS;
    return d;
}

void nsdrop_request(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    char why[500], by[200];
    if (!r->table_ns) {
        sched_refuse(msg, PSKV_EPROTO, "NS_DROP without table_ns (the namespace to drop)");
        return;
    }
    int code = refusal(r->table_ns, why, sizeof why);
    if (code) {
        sched_refuse(msg, code, why);
        return;
    }
    snprintf(by, sizeof by, "pskvctl drop from %s%s%.12s", msg->peer, *msg->key ? " key " : "",
             msg->key);
    ns_drop *d = begin(r->table_ns, by);
    d->ctl = 1;
    sched_asker_of(&d->asker, msg);
    nsdrop_tick();
}

/* Server n no longer lists namespace ns (its next heartbeat would say so too). */
static void forget_status(memb_node *n, const char *ns)
{
    memb_ns *m = n->ns;
    for (size_t i = 0; m && i < m->n; i++)
        if (!strcmp(m->names[i], ns)) {
            m->n--;
            memmove(m->names[i], m->names[i + 1], (m->n - i) * sizeof m->names[0]);
            memmove(&m->bytes[i], &m->bytes[i + 1], (m->n - i) * sizeof m->bytes[0]);
            memmove(&m->quota[i], &m->quota[i + 1], (m->n - i) * sizeof m->quota[0]);
            for (size_t k = 0; k < m->n; k++)
                m->ptr[k] = m->names[k];
            return;
        }
}

void nsdrop_on_ack(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    memb_node *n = memb_sender(msg);
    ns_drop *d = r->table_ns ? find(r->table_ns) : NULL;
    if (!n || n->role != PSKV__ROLE__SERVER) {
        LOG_W("NS_DROP_ACK from %s, not a server of the job: ignored", msg->peer);
        return;
    }
    if (!d || !d->sent) { /* a server that answered after it was declared dead */
        LOG_I("NS_DROP_ACK from server node %u for namespace '%s', whose drop is over: "
              "ignored", n->id, r->table_ns ? r->table_ns : "?");
        return;
    }
    int k = 0;
    while (k < d->nwait && d->wait[k] != n->id)
        k++;
    if (k == d->nwait)
        return; /* answered already */
    d->wait[k] = d->wait[--d->nwait];
    d->answered++;
    d->tables += r->ns_tables;
    d->rows += r->rows;
    d->bytes += r->bytes;
    forget_status(n, d->ns);
    nsdrop_tick();
}

void nsdrop_tick(void)
{
    int64_t now = tu_now_ms();
    char why[400];
    for (int i = 0; i < ndrops; i++) {
        ns_drop *d = &drops[i];
        const memb_node *behind = d->sent ? NULL : drain_first_behind(view_place_epoch());
        if (behind && !d->waited++)
            LOG_I("dropping namespace '%s' (%s) waits for the copies to server node %u (view "
                  "epoch %llu) to be whole", shown(d->ns), d->by, behind->id,
                  (unsigned long long)view_place_epoch());
        if (!d->sent && !behind && send_drop(d) < 0) {
            finish(d, PSKV_ENOMEM, "out of memory");
            i--;
            continue;
        }
        for (int k = 0; d->sent && k < d->nwait; k++)
            if (!answers(memb_find(d->wait[k])))
                d->wait[k--] = d->wait[--d->nwait]; /* dead or gone: holds nothing now */
        if (d->sent && d->nwait == 0) {
            if (d->tables || !d->ctl) {
                finish(d, 0, NULL);
            } else {
                snprintf(why, sizeof why, "namespace '%s' does not exist: none of the %d live "
                         "servers holds a table of it (pskvctl status lists the namespaces)",
                         shown(d->ns), d->servers);
                finish(d, PSKV_ENOTFOUND, why);
            }
            i--;
        } else if (now >= d->deadline_ms) {
            if (d->sent)
                snprintf(why, sizeof why, "namespace '%s': server node %u did not answer the "
                         "drop within %d s (it drops the namespace when the message reaches "
                         "it)", shown(d->ns), d->wait[0], NSDROP_TIMEOUT_MS / 1000);
            else
                snprintf(why, sizeof why, "namespace '%s': copies to server node %u were still "
                         "under way after %d s; nothing dropped, try again", shown(d->ns),
                         behind->id, NSDROP_TIMEOUT_MS / 1000);
            finish(d, d->sent ? PSKV_ETIMEDOUT : PSKV_ENOTREADY, why);
            i--;
        }
    }
}

/* A group with --drop-namespace ended (SCHED_EV_GROUP_ENDED with ns): its namespace
 * goes, unless another live group still uses it. */
static int on_group_end(void *ctx, const sched_ev *ev)
{
    (void)ctx;
    const char *ns = ev->ns, *group = ev->group;
    if (!ns)
        return 0;
    char why[500], by[200];
    int code = refusal(ns, why, sizeof why);
    if (code) {
        LOG_I("group %s ended with --drop-namespace: namespace '%s' kept: %s", shown(group),
              shown(ns), why);
        return 0;
    }
    snprintf(by, sizeof by, "group %s ended with --drop-namespace", shown(group));
    begin(ns, by);
    nsdrop_tick();
    return 0;
}

/* A worker registering in a namespace being dropped is refused: its tables would
 * be opened on servers that have not dropped it yet and then go. */
static int on_registering(void *ctx, const sched_ev *ev)
{
    (void)ctx;
    Pskv__Meta *r = ev->msg->meta;
    if (r->role != PSKV__ROLE__WORKER)
        return 0;
    const char *ns = r->table_ns ? r->table_ns : r->group ? r->group : "";
    const ns_drop *d = find(ns);
    if (!d)
        return 0;
    char why[300];
    snprintf(why, sizeof why, "namespace '%s' is being dropped (%s): register again once it "
             "is gone", shown(ns), d->by);
    sched_refuse(ev->msg, PSKV_EREFUSED, why);
    return 1;
}

void nsdrop_hooks(void)
{
    events_subscribe(SCHED_EV_REGISTERING, on_registering, NULL);
    events_subscribe(SCHED_EV_GROUP_ENDED, on_group_end, NULL);
}

void nsdrop_reset(void)
{
    for (int i = 0; i < ndrops; i++)
        free(drops[i].wait);
    ndrops = 0;
}
