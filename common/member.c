#define _GNU_SOURCE
#include "member.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <zmq.h>

#include "log.h"
#include "net.h"
#include "secure.h"
#include "probe.h"
#include "pskv_errors.h"
#include "timeutil.h"

static const atomic_int *stop_flag;
static char **reg_ckpts; /* listed in REGISTER (servers: valid checkpoint files) */
static size_t reg_nckpts;

static const char *reg_group; /* listed in REGISTER (workers: their group and its size;
                                 an evaluator: the group it evaluates) */
static uint32_t reg_group_size;

static char reg_ns[65];   /* ... the namespace their tables live in (set: has_ns) */
static int reg_has_ns, reg_drop_ns;

void member_set_group(const char *group, uint32_t size)
{
    reg_group = group && *group ? group : NULL;
    reg_group_size = size;
}

void member_set_namespace(const char *ns)
{
    reg_has_ns = ns != NULL;
    snprintf(reg_ns, sizeof reg_ns, "%s", ns ? ns : "");
}

void member_set_drop_namespace(int on) { reg_drop_ns = on != 0; }
static int reg_resume;
void member_set_resume(int on) { reg_resume = on != 0; }

void member_set_checkpoints(char **list, size_t n)
{
    reg_ckpts = list;
    reg_nckpts = n;
}

void member_set_stop_flag(const atomic_int *flag) { stop_flag = flag; }

int member_stop_requested(void) { return stop_flag && *stop_flag; }

static int stopping(char *why, size_t whylen)
{
    if (!stop_flag || !*stop_flag)
        return 0;
    snprintf(why, whylen, "interrupted by signal %d", (int)*stop_flag);
    return 1;
}

void member_meta(const member *m, Pskv__Meta *meta, Pskv__MsgType type)
{
    wire_meta_init(meta, type);
    meta->has_job_id = meta->has_epoch = meta->has_sender = 1;
    meta->job_id = m->job_id;
    meta->epoch = m->epoch;
    meta->sender = m->node_id;
}

int member_send(member *m, Pskv__Meta *meta) { return wire_send(m->sock, NULL, meta, NULL, NULL); }

static int poll_in(void *sock, long ms)
{
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    int rc = zmq_poll(&it, 1, ms);
    return rc > 0 && (it.revents & ZMQ_POLLIN);
}

static void apply_view(member *m, wire_msg *msg)
{
    if (m->view_meta)
        pskv__meta__free_unpacked(m->view_meta, NULL);
    m->view_meta = msg->meta; /* keep the decoded message; the view points into it */
    m->view = msg->meta->view;
    msg->meta = NULL;
    m->epoch = m->view->epoch;
    if (m->view->has_heartbeat_ms && m->view->heartbeat_ms)
        m->heartbeat_ms = (int)m->view->heartbeat_ms;
    for (size_t i = 0; !m->resumed && i < m->view->n_nodes; i++) {
        const Pskv__Node *n = m->view->nodes[i];
        if (n->id == m->node_id && n->has_resume_step) { /* a resumed job */
            m->resumed = 1;
            m->progress[0] = n->resume_epoch;
            m->progress[1] = n->resume_step;
            m->progress[2] = n->resume_pos;
        }
    }
    /* the first view is news; later ones (a worker finished or died) are routine */
    LOG(m->epoch <= 1 ? LOG_INFO : LOG_DEBUG, "view epoch %llu: %zu nodes",
        (unsigned long long)m->epoch, m->view->n_nodes);
}

int member_recv(member *m, wire_msg *msg)
{
    char why[256];
    int rc = wire_recv(m->sock, 0, msg, why, sizeof why);
    if (rc == -PSKV_ETIMEDOUT) {
        wire_msg_close(msg);
        return rc;
    }
    if (rc < 0) {
        LOG_W("dropped message from the scheduler: %s", why);
        wire_msg_close(msg);
        return rc;
    }
    Pskv__Meta *r = msg->meta;
    if (r->has_job_id && m->job_id && r->job_id != m->job_id) {
        LOG_W("dropped %s from job %llu (this node is in job %llu)", wire_type_name((int)r->type),
              (unsigned long long)r->job_id, (unsigned long long)m->job_id);
        wire_msg_close(msg);
        return -PSKV_EJOB;
    }
    if (r->type == PSKV__MSG_TYPE__VIEW) {
        if (!r->view || !r->view->has_epoch || r->view->epoch < m->epoch) {
            LOG_W("dropped a VIEW without a newer epoch");
            wire_msg_close(msg);
            return -PSKV_EPROTO;
        }
        apply_view(m, msg); /* takes msg->meta, leaves msg->meta NULL */
    }
    return 0;
}

int member_open(member *m, void *ctx, const secure *sec, const char *scheduler,
                Pskv__Role role, int rank_wish, const char *host, int port, uint64_t job_id,
                double connect_timeout_s, int64_t max_message, char *why, size_t whylen)
{
    memset(m, 0, sizeof *m);
    m->sec = sec;
    char shost[256];
    int sport;
    if (!scheduler || net_split_hostport(scheduler, shost, sizeof shost, &sport) < 0) {
        snprintf(why, whylen, "scheduler address '%s' is not HOST:PORT",
                 scheduler ? scheduler : "");
        return -PSKV_EINVAL;
    }
    snprintf(m->sched, sizeof m->sched, "%s", scheduler);
    m->sock = net_socket(ctx, ZMQ_DEALER, max_message, 0);
    if (!m->sock) {
        snprintf(why, whylen, "cannot create socket: %s", zmq_strerror(errno));
        return -PSKV_ENET;
    }
    int ivl_max = 2000;
    zmq_setsockopt(m->sock, ZMQ_RECONNECT_IVL_MAX, &ivl_max, sizeof ivl_max);
    if (secure_dial(sec, m->sock, NULL) < 0) {
        snprintf(why, whylen, "cannot turn CURVE on toward scheduler %s", scheduler);
        member_close(m);
        return -PSKV_ENET;
    }
    if (net_connect(m->sock, shost, sport) < 0) {
        snprintf(why, whylen, "cannot connect to scheduler %s: %s", scheduler, zmq_strerror(errno));
        member_close(m);
        return -PSKV_ENET;
    }
    uint64_t nonce = 0;
    while (nonce == 0 && getrandom(&nonce, sizeof nonce, 0) != sizeof nonce)
        ;
    Pskv__Meta reg;
    wire_meta_init(&reg, PSKV__MSG_TYPE__REGISTER);
    reg.has_job_id = 1;
    reg.job_id = job_id;
    reg.has_role = reg.has_rank = reg.has_port = reg.has_pid = reg.has_nonce = 1;
    reg.role = role;
    reg.rank = rank_wish;
    reg.host = (char *)host;
    reg.port = (uint32_t)port;
    reg.pid = (uint32_t)getpid();
    reg.nonce = nonce;
    reg.has_insecure = sec && sec->insecure;
    reg.insecure = reg.has_insecure;
    reg.n_ckpts = reg_nckpts;
    reg.ckpts = reg_ckpts;
    if (role == PSKV__ROLE__EVALUATOR)
        reg.group = (char *)reg_group; /* the group it evaluates (one per group) */
    if (role == PSKV__ROLE__WORKER) {
        reg.group = (char *)reg_group;
        reg.has_group_size = reg_group_size > 0;
        reg.group_size = reg_group_size;
        reg.table_ns = reg_has_ns ? reg_ns : NULL;
        reg.has_drop_namespace = reg.drop_namespace = reg_has_ns && reg_drop_ns;
        reg.has_resume = reg.resume = reg_resume;
    }

    int64_t deadline = tu_now_ms() + (int64_t)(connect_timeout_s * 1000);
    /* while registering a send never waits: with no connection up (a scheduler not
     * there yet, or refusing this node's key) the next re-send tries again, and
     * --connect-timeout holds */
    int nowait = 0, sndtimeo = 5000;
    zmq_setsockopt(m->sock, ZMQ_SNDTIMEO, &nowait, sizeof nowait);
    long backoff = 100;
    int refused = 0; /* the latest probe of the scheduler's port was refused */
    for (;;) {
        /* a refusing port is said at once (a finished job, a wrong port), and tried
         * again: under Slurm a node may start before its scheduler listens */
        int was = refused;
        refused = probe_tcp(shost, sport, 200) == PROBE_REFUSED;
        if (refused && !was)
            LOG_W("nothing listens at %s (connection refused); retrying until "
                  "--connect-timeout (%.0f s)", scheduler, connect_timeout_s);
        else if (was && !refused)
            LOG_I("scheduler %s listens now", scheduler);
        member_send(m, &reg); /* queued until connected; re-sends are idempotent (nonce) */
        int64_t until = tu_now_ms() + backoff;
        if (until > deadline)
            until = deadline;
        while (tu_now_ms() < until && !stopping(why, whylen)) {
            if (!poll_in(m->sock, (long)(until - tu_now_ms())))
                continue;
            wire_msg msg;
            int rc = member_recv(m, &msg);
            if (rc < 0)
                continue;
            Pskv__Meta *r = msg.meta;
            if (r && r->type == PSKV__MSG_TYPE__REGISTER_ACK && r->nonce == nonce) {
                m->node_id = (uint32_t)r->request_id;
                m->rank = r->rank;
                m->job_id = r->job_id;
                m->barriers_done = r->has_seq ? r->seq : 0;
                m->heartbeat_ms = r->view && r->view->heartbeat_ms ? (int)r->view->heartbeat_ms
                                                                   : 100;
                wire_msg_close(&msg);
                m->next_hb_ms = tu_now_ms();
                zmq_setsockopt(m->sock, ZMQ_SNDTIMEO, &sndtimeo, sizeof sndtimeo);
                return 0;
            }
            if (r && r->type == PSKV__MSG_TYPE__ERROR) {
                snprintf(why, whylen, "scheduler %s refused registration: %s", scheduler,
                         r->error ? r->error : pskv_strerror(r->error_code));
                rc = r->error_code == PSKV_EJOB || r->error_code == PSKV_EVERSION
                         ? -r->error_code
                         : -PSKV_EREFUSED;
                wire_msg_close(&msg);
                member_close(m);
                return rc;
            }
            wire_msg_close(&msg);
        }
        if (stopping(why, whylen)) {
            member_close(m);
            return -PSKV_ECLOSED;
        }
        if (tu_now_ms() >= deadline) {
            snprintf(why, whylen,
                     refused ? "scheduler %s unreachable: nothing listens there (connection "
                               "refused) within %.1f s (--connect-timeout)"
                             : "scheduler %s unreachable: no answer within %.1f s "
                               "(--connect-timeout)",
                     scheduler, connect_timeout_s);
            member_close(m);
            return -PSKV_ETIMEDOUT;
        }
        LOG_D("no answer from scheduler %s yet; retrying in %ld ms", scheduler, backoff * 2);
        if (backoff < 2000)
            backoff *= 2;
    }
}

/* Sends a heartbeat when one is due (while waiting for the first view; then the
 * node's own heartbeat thread takes over). */
static void member_tick(member *m)
{
    int64_t now = tu_now_ms();
    if (now < m->next_hb_ms)
        return;
    Pskv__Meta hb;
    member_meta(m, &hb, PSKV__MSG_TYPE__HEARTBEAT);
    hb.has_clock = hb.has_request_id = 1;
    hb.request_id = (uint64_t)now; /* echoed by HEARTBEAT_ACK: a server's lease runs from it */
    hb.clock = m->hb_clock;
    member_send(m, &hb);
    m->next_hb_ms = now + m->heartbeat_ms;
}

int member_wait_view(member *m, double timeout_s, char *why, size_t whylen)
{
    int64_t deadline = tu_now_ms() + (int64_t)(timeout_s * 1000);
    while (!m->view) {
        if (stopping(why, whylen))
            return -PSKV_ECLOSED;
        int64_t now = tu_now_ms();
        if (now >= deadline) {
            snprintf(why, whylen, "no cluster view from scheduler %s within %.0f s", m->sched,
                     timeout_s);
            return -PSKV_ETIMEDOUT;
        }
        member_tick(m);
        long wait = (long)(m->next_hb_ms - tu_now_ms());
        if (wait > deadline - now)
            wait = (long)(deadline - now);
        if (!poll_in(m->sock, wait < 0 ? 0 : wait))
            continue;
        wire_msg msg;
        if (member_recv(m, &msg) < 0)
            continue;
        if (msg.meta && msg.meta->type == PSKV__MSG_TYPE__ERROR && msg.meta->resume) {
            /* the group's resume failed: it will not start */
            snprintf(why, whylen, "scheduler %s: %s", m->sched,
                     msg.meta->error ? msg.meta->error : "the group's resume failed");
            wire_msg_close(&msg);
            return -PSKV_EREFUSED;
        }
        if (msg.meta && msg.meta->type == PSKV__MSG_TYPE__ERROR)
            LOG_W("scheduler: %s", msg.meta->error ? msg.meta->error : "error");
        wire_msg_close(&msg);
    }
    return 0;
}

void *member_hb_socket(void *ctx, const secure *sec, const char *scheduler)
{
    char host[256];
    int port;
    void *s = net_socket(ctx, ZMQ_DEALER, 0, 0);
    if (!s || net_split_hostport(scheduler, host, sizeof host, &port) < 0 ||
        secure_dial(sec, s, NULL) < 0 || net_connect(s, host, port) < 0) {
        LOG_E("heartbeat socket to %s failed: %s", scheduler, zmq_strerror(errno));
        if (s)
            zmq_close(s);
        return NULL;
    }
    return s;
}

void member_hb_meta(Pskv__Meta *hb, uint64_t job, uint32_t node)
{
    wire_meta_init(hb, PSKV__MSG_TYPE__HEARTBEAT);
    hb->has_job_id = hb->has_sender = 1;
    hb->job_id = job;
    hb->sender = node;
}

void member_close(member *m)
{
    if (!m)
        return;
    if (m->sock)
        zmq_close(m->sock);
    m->sock = NULL;
    if (m->view_meta)
        pskv__meta__free_unpacked(m->view_meta, NULL);
    m->view_meta = NULL;
    m->view = NULL;
}

const Pskv__Node *member_view_node(const Pskv__View *v, uint32_t id)
{
    for (size_t i = 0; i < v->n_nodes; i++)
        if (v->nodes[i]->id == id)
            return v->nodes[i];
    return NULL;
}

int member_node_gone(const Pskv__Node *n)
{
    return n->state && (!strcmp(n->state, "dead") || !strcmp(n->state, "left"));
}
