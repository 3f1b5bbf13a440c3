/* pskv-server: owns a range of the key ring for every table and serves pushes and pulls from
 * workers.
 *
 * One thread, one poll loop over two sockets: a ROUTER that workers dial and a DEALER to the
 * scheduler (membership: register, view, heartbeats, STOP). Every request is validated (job,
 * table, width, ranges, finite values, the key's namespaces: nsguard.h) before use; a bad one is
 * logged with its sender, answered with ERROR and dropped. Pulls send large dense runs straight
 * from the table (lent: an update while they are on the wire moves the table to a fresh buffer)
 * and copy anything else into a fresh buffer, so what is on the wire never changes (consist.c,
 * shard.c). Checkpoints the scheduler asks for are written in the background, and a resumed
 * job's file loaded, by checkpoint.c. */
#define _GNU_SOURCE
#include <cblas.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "repl/chain.h"
#include "repl/chain_apply.h"
#include "repl/chain_fill.h"
#include "repl/chain_fwd.h"
#include "persist/checkpoint.h"
#include "config.h"
#include "consist/consist.h"
#include "half.h"
#include "lease.h"
#include "log.h"
#include "member.h"
#include "metrics.h"
#include "net.h"
#include "nsguard.h"
#include "persist/persist.h"
#include "pskv_errors.h"
#include "refuse.h"
#include "sfilter.h"
#include "slice.h"
#include "sshm.h"
#include "sconfig.h"
#include "secure.h"
#include "smetrics.h"
#include "store/table.h"
#include "store/sweep.h"
#include "store/tabstats.h"
#include "timeutil.h"
#include "update/upd_plugin.h"
#include "wire.h"

static cfg_entry *const config = server_config; /* sconfig.c */

static struct {
    member mb;
    void *ctx, *router;
    table_set *tables;
    uint64_t errors;
    consist *cons;
    chain *chain;
    wire_msg *parked; /* valid messages from a view not applied here yet, in order */
    int nparked;
    int lease_lapsed;       /* logged once per lapse */
    secure sec;             /* keys, CURVE, ZAP (secure.h) */
    uint64_t whole;         /* the latest view epoch whose placement is whole here */
} S;

#define MAX_PARKED 1024

/* Set by the signal handlers, read by the loop. Lock-free atomics, not sig_atomic_t: a
 * process-directed signal may run its handler on any thread that does not block it (OpenBLAS's,
 * the ZAP handler's), and only an atomic is safe to share between threads and a handler. */
static atomic_int stop_signal, reload_signal;
static void on_signal(int sig) { stop_signal = sig; }
static void on_hup(int sig) { reload_signal = sig; }

static void meta_reply(Pskv__Meta *m, const Pskv__Meta *req, Pskv__MsgType type)
{
    member_meta(&S.mb, m, type);
    m->has_request_id = req->has_request_id;
    m->request_id = req->request_id; /* 0 when absent, like the table id */
    m->has_table_id = req->has_table_id;
    m->table_id = req->table_id;
}

/* "worker rank R (node N)" when the view knows the sender, else "node N". */
static void sender_name(const wire_msg *msg, char *out, size_t len)
{
    uint32_t id = msg->meta && msg->meta->has_sender ? msg->meta->sender : 0;
    for (size_t i = 0; S.mb.view && i < S.mb.view->n_nodes; i++) {
        const Pskv__Node *n = S.mb.view->nodes[i];
        if (n->id == id && n->role == PSKV__ROLE__WORKER) {
            snprintf(out, len, "worker rank %d (node %u)", n->rank, id);
            return;
        }
    }
    snprintf(out, len, "node %u", id);
}

static uint64_t note_refusal(uint32_t node, int code)
{
    return S.cons ? consist_refusal(S.cons, node, code) : 0;
}

/* A bsp close this head sent down its chains reached every tail. */
static void on_close_done(uint64_t token, int code)
{
    if (S.cons)
        consist_close_done(S.cons, token, code);
}

static void fail(wire_msg *msg, int code, const char *why)
{
    char who[64];
    sender_name(msg, who, sizeof who);
    S.errors++;
    if (code == PSKV_EKEYMISS) /* keycache: routine, the worker sends the keys */
        LOG_D("asked %s for the keys: %s", who, why);
    else
        LOG_W("refused %s from %s at %s: %s",
              msg->meta ? wire_type_name((int)msg->meta->type) : "message", who, msg->peer, why);
    /* a push the worker will send again: its clocks are ignored until it has heard
     * of this refusal (the count rides on the reply) */
    uint64_t refused = msg->meta && msg->meta->type == PSKV__MSG_TYPE__PUSH &&
                               msg->meta->has_sender
                           ? note_refusal(msg->meta->sender, code)
                           : 0;
    if (msg->has_rid && wire_send_error(S.router, &msg->rid, msg->meta, S.mb.job_id, S.mb.node_id,
                                        code, why, refused) < 0)
        LOG_W("cannot answer %s: %s", msg->peer, zmq_strerror(errno));
}

static void on_table_open(wire_msg *msg)
{
    char why[400];
    Pskv__Meta *r = msg->meta;
    if (!r->table || !r->has_table_id) {
        fail(msg, PSKV_EPROTO, "TABLE_OPEN without table options");
        return;
    }
    int rc = tables_open(S.tables, r->table_id, r->table, 0, UINT64_MAX, why, sizeof why);
    if (rc < 0) {
        fail(msg, -rc, why);
        return;
    }
    Pskv__Meta m;
    meta_reply(&m, r, PSKV__MSG_TYPE__TABLE_OPEN_ACK);
    wire_send(S.router, &msg->rid, &m, NULL, NULL);
}

/* The table a request names, or NULL after answering: PSKV_ENOTREADY while a
 * joining server still waits for the copies that bring it its tables, else
 * PSKV_ENOTABLE. */
static table *request_table(wire_msg *msg)
{
    char why[200];
    Pskv__Meta *r = msg->meta;
    table *t = r->has_table_id ? tables_find(S.tables, r->table_id) : NULL;
    if (t)
        return t;
    int waiting = chain_waiting(S.chain);
    snprintf(why, sizeof why, waiting ? "table id %llu is still being copied to this server"
                                      : "unknown table id %llu (open the table first)",
             (unsigned long long)r->table_id);
    fail(msg, waiting ? PSKV_ENOTREADY : PSKV_ENOTABLE, why);
    return NULL;
}

/* Checks table, width and ownership of a push or pull and fills rs; returns the
 * table or NULL (after answering with an error). */
static table *check_request(wire_msg *msg, rowset *rs)
{
    char why[300];
    Pskv__Meta *r = msg->meta;
    table *t = request_table(msg);
    if (!t)
        return NULL;
    if (r->width != t->width) {
        snprintf(why, sizeof why, "width %u does not match table '%s' (width %u)", r->width,
                 t->name, t->width);
        fail(msg, PSKV_EPROTO, why);
        return NULL;
    }
    /* a push's values in the table's precision; an assign (weights) always fp32 */
    uint32_t want = r->type == PSKV__MSG_TYPE__PUSH && !(r->has_assign && r->assign)
                        ? (uint32_t)t->wire : 0;
    if (r->type == PSKV__MSG_TYPE__PUSH && r->wire != want) {
        snprintf(why, sizeof why, "push in %s to table '%s', whose option 'wire' is %s%s",
                 half_name((int)r->wire), t->name, half_name((int)want),
                 want != (uint32_t)t->wire ? " (assigns travel as fp32)" : "");
        fail(msg, PSKV_EMISMATCH, why);
        return NULL;
    }
    int rc = chain_rows(S.chain, t, msg, r->type == PSKV__MSG_TYPE__PULL, rs, why, sizeof why);
    if (rc < 0) {
        fail(msg, -rc, why);
        return NULL;
    }
    smet_request(t, r->type == PSKV__MSG_TYPE__PULL, rs->n);
    return t;
}

static void on_push(wire_msg *msg)
{
    rowset rs;
    table *t = check_request(msg, &rs);
    if (!t)
        return;
    if (!upd_all_finite(msg->vals, msg->nvals)) {
        uint64_t bad = 0;
        for (uint64_t i = 0; i < msg->nvals; i++)
            if (!upd_all_finite(msg->vals + i, 1)) {
                bad = i;
                break;
            }
        char why[300];
        uint64_t row = bad / t->width;
        snprintf(why, sizeof why, "non-finite value %g for key %llu of table '%s'; push not applied",
                 (double)msg->vals[bad],
                 (unsigned long long)(msg->keys ? msg->keys[row] : msg->meta->first_key + row),
                 t->name);
        fail(msg, PSKV_EBADVALUE, why);
        return;
    }
    Pskv__Meta *r = msg->meta;
    int held = t->model == CONS_BSP && !(r->has_assign && r->assign);
    if ((chain_replicas(S.chain) > 1 && !held) ||
        (r->has_resend && r->resend && t->model == CONS_ASYNC)) {
        /* replicated, or re-sent by a worker that heard nothing back: applied where
         * its id is not recorded yet. A bsp push is held for its clock instead; the
         * close goes down the chains (chain_close) */
        chain_push(S.chain, t, msg, &rs);
        return;
    }
    if (t->model == CONS_ASYNC && r->has_origin_id &&
        chain_record(S.chain, t, &rs, r->sender, r->origin_id, r->has_floor ? r->floor : 0) < 0)
        LOG_W("out of memory recording a push id: a re-send of it could apply twice");
    consist_push(S.cons, t, msg, &rs);
}

/* PULL with `all`: every row of the table this server answers pulls for, with its
 * keys, as the values are now (no consistency wait: for saving a model). */
static void on_pull_all(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    table *t = request_table(msg);
    if (!t)
        return;
    if (chain_waiting(S.chain)) {
        fail(msg, PSKV_ENOTREADY, "partitions are still being copied to this server");
        return;
    }
    uint64_t n = chain_export_served(S.chain, t, NULL, NULL);
    size_t rf = shard_row_floats(t->sh), wd = t->width;
    uint64_t *keys = malloc((n ? n : 1) * sizeof *keys);
    float *rows = malloc((n ? n : 1) * rf * sizeof *rows);
    if (!keys || !rows) {
        free(keys);
        free(rows);
        fail(msg, PSKV_ENOMEM, "out of memory copying the table");
        return;
    }
    n = chain_export_served(S.chain, t, keys, rows);
    for (uint64_t i = 0; i < n && rf != wd; i++) /* values only, in place */
        memmove(rows + i * wd, rows + i * rf, wd * sizeof *rows);
    Pskv__Meta m;
    meta_reply(&m, r, PSKV__MSG_TYPE__PULL_REPLY);
    m.has_table_id = m.has_num_keys = m.has_width = m.has_all = m.all = 1;
    m.table_id = t->id;
    m.num_keys = n;
    m.width = t->width;
    int rc;
    if (n) {
        zmq_msg_t km, vm; /* ZeroMQ sends the buffers and frees them */
        if (wire_frame_lend(&km, keys, n * sizeof *keys, wire_frame_free, NULL) < 0) {
            free(rows);
            fail(msg, PSKV_ENOMEM, "out of memory sending the table");
            return;
        }
        if (wire_frame_lend(&vm, rows, n * wd * sizeof *rows, wire_frame_free, NULL) < 0) {
            zmq_msg_close(&km);
            fail(msg, PSKV_ENOMEM, "out of memory sending the table");
            return;
        }
        rc = wire_send(S.router, &msg->rid, &m, &km, &vm);
    } else { /* no row here: no frames */
        free(keys);
        free(rows);
        rc = wire_send(S.router, &msg->rid, &m, NULL, NULL);
    }
    if (rc < 0)
        LOG_W("cannot answer a whole-table pull: %s", zmq_strerror(errno));
}

static void on_pull(wire_msg *msg)
{
    if (msg->meta->has_all && msg->meta->all) {
        on_pull_all(msg);
        return;
    }
    rowset rs;
    table *t = check_request(msg, &rs);
    if (t)
        consist_pull(S.cons, t, msg, &rs);
}

/* Refuses (and returns 1 for) a request from another job. */
static int refuse_foreign(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    if (r->has_job_id && r->job_id == S.mb.job_id)
        return 0;
    char why[200];
    snprintf(why, sizeof why, "job id %llu is not this job's (%llu)",
             (unsigned long long)r->job_id, (unsigned long long)S.mb.job_id);
    fail(msg, PSKV_EJOB, why);
    return 1;
}

/* 1 when msg comes from a view this server has not applied yet: it waits. */
static int from_future(const wire_msg *msg)
{
    return !S.mb.view || (msg->meta->has_epoch && msg->meta->epoch > S.mb.epoch);
}

/* Refuses (and returns 1 for) any data message while this server's lease has
 * lapsed (but a copy, FILL: sent once, it answers nobody, and a view that takes
 * the partition away drops it again), and drops a forward or copy planned on an
 * older placement. A push or pull planned on an older view is served when this
 * server still heads (or tails) its rows: chain_rows checks that row by row. */
static int refuse_stale(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    int data = r->type == PSKV__MSG_TYPE__PUSH || r->type == PSKV__MSG_TYPE__PULL;
    int repl = r->type == PSKV__MSG_TYPE__REPLICATE || r->type == PSKV__MSG_TYPE__FILL;
    if (!data && !repl)
        return 0;
    char why[200];
    if (!lease_valid() && r->type != PSKV__MSG_TYPE__FILL) {
        if (!S.lease_lapsed++) {
            LOG_W("lease lapsed (no acknowledged heartbeat): serving nothing until renewed");
            smet_lease_lapse();
        }
        if (data)
            fail(msg, PSKV_ESTALE, "this server's lease has lapsed; it may have been replaced");
        return 1;
    }
    if (S.lease_lapsed) {
        LOG_I("lease renewed");
        S.lease_lapsed = 0;
    }
    uint64_t ep = r->epoch;
    if (data || !r->has_epoch || ep >= chain_place_epoch(S.chain))
        return 0;
    snprintf(why, sizeof why, "view epoch %llu is older than this server's placement (epoch "
             "%llu)", (unsigned long long)ep, (unsigned long long)chain_place_epoch(S.chain));
    LOG_D("dropped %s from node %u: %s", wire_type_name((int)r->type), r->sender, why);
    return 1;
}

/* 1 when some table is ssp or evicts rows (evict_after): only then do replicas
 * need the clocks forwarded (ssp pulls wait on them; eviction's sweep reads them). */
static int clocks_down_chains(void)
{
    for (size_t i = 0; i < tables_count(S.tables); i++)
        if (tables_at(S.tables, i)->model == CONS_SSP || tables_at(S.tables, i)->evict_after)
            return 1;
    return 0;
}

/* A worker's CLOCK, or one forwarded down a chain by another server (it carries
 * the rank and, in origin_id, the head whose stream it belongs to). */
static void on_clock(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    if (r->has_origin_id) {
        if (!r->has_rank || !r->has_clock || r->clock < 0 || r->clock > ((int64_t)1 << 62) ||
            r->origin_id > UINT32_MAX) {
            LOG_W("dropped a forwarded CLOCK from node %u: no rank or clock", r->sender);
            return;
        }
        if (r->has_epoch && r->epoch < chain_place_epoch(S.chain))
            return; /* forwarded on an older placement: it vouches for the old chains */
        consist_clock_from(S.cons, (uint32_t)r->origin_id, r->rank, r->clock);
        chain_forward_clock(S.chain, (uint32_t)r->origin_id, r->sender, r->rank, r->clock);
        return;
    }
    int rank = consist_clock(S.cons, msg); /* < 0: not counted (consist.h) */
    /* down the chains too. A server still waiting for copies may not know the ssp
     * tables yet (a joiner learns them from the copies): it forwards too, else the
     * replicas after it would lack this clock until the worker's next, which a
     * worker parked in an ssp pull never sends */
    if (rank >= 0 && chain_replicas(S.chain) > 1 &&
        (clocks_down_chains() || chain_filling(S.chain))) {
        consist_clock_from(S.cons, S.mb.node_id, rank, r->clock);
        chain_forward_clock(S.chain, S.mb.node_id, 0, rank, r->clock);
    }
}

/* After a view: which heads' clock streams pulls here wait on. A new head's
 * stream starts with the clocks workers send on the new placement (each sends
 * its clock again once every push it sent before the change is acknowledged):
 * clocks it had before could cover pushes still being re-sent. */
static void clocks_after_view(uint64_t place_before)
{
    if (chain_replicas(S.chain) <= 1)
        return;
    uint32_t heads[1024];
    size_t n = chain_sources(S.chain, heads, 1024);
    consist_set_sources(S.cons, heads, n, chain_place_epoch(S.chain) != place_before);
}

/* Under keys: a worker's messages (TABLE_OPEN, PUSH, PULL, CLOCK) only from a
 * worker key (an evaluator's may open and pull), a server's (REPLICATE, FILL, a
 * forwarded CLOCK) only from a server key, and each from the key the view gives
 * the node it names. Returns 1 after refusing (counted, logged once a minute per
 * peer, answered PSKV_EPERM unless a CLOCK); nothing of it is applied. */
static int refuse_role(wire_msg *msg)
{
    if (!S.sec.keyed)
        return 0;
    Pskv__Meta *r = msg->meta;
    int server = r->type == PSKV__MSG_TYPE__REPLICATE || r->type == PSKV__MSG_TYPE__FILL ||
                 (r->type == PSKV__MSG_TYPE__CLOCK && r->has_origin_id);
    int reader = r->type == PSKV__MSG_TYPE__PULL || r->type == PSKV__MSG_TYPE__TABLE_OPEN;
    char why[200] = "";
    if (server ? msg->role != KEY_ROLE_SERVER
               : msg->role != KEY_ROLE_WORKER && !(reader && msg->role == KEY_ROLE_EVALUATOR))
        snprintf(why, sizeof why, "a %s key may not send %s",
                 key_role_name((key_role)msg->role), wire_type_name((int)r->type));
    for (size_t i = 0; !*why && S.mb.view && r->has_sender && i < S.mb.view->n_nodes; i++) {
        const Pskv__Node *n = S.mb.view->nodes[i];
        if (n->id == r->sender && n->pubkey && strcmp(n->pubkey, msg->key))
            snprintf(why, sizeof why, "%s names node %u, whose key is another",
                     wire_type_name((int)r->type), n->id);
    }
    if (!*why)
        return 0;
    refuse_note(REFUSE_MESSAGE, msg->peer, msg->key, why);
    if (r->type != PSKV__MSG_TYPE__CLOCK && msg->has_rid)
        wire_send_error(S.router, &msg->rid, r, S.mb.job_id, S.mb.node_id, PSKV_EPERM, why, 0);
    return 1;
}

static void handle_worker(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    char why[200];
    if (refuse_foreign(msg) || refuse_role(msg) || refuse_stale(msg))
        return;
    int rc = sfilter_keys(S.tables, msg, why, sizeof why); /* keycache: nothing applied */
    if (rc >= 0) /* values in the worker's shared memory (sshm.h) */
        rc = sshm_resolve(consist_shm(S.cons), msg, why, sizeof why);
    if (rc >= 0) /* the key's namespaces and their quotas (nsguard.h) */
        rc = nsguard_request(S.tables, msg, S.mb.view, why, sizeof why);
    if (rc < 0) {
        fail(msg, -rc, why);
        return;
    }
    switch (r->type) {
    case PSKV__MSG_TYPE__TABLE_OPEN: on_table_open(msg); break;
    case PSKV__MSG_TYPE__PUSH: on_push(msg); break;
    case PSKV__MSG_TYPE__PULL: on_pull(msg); break;
    case PSKV__MSG_TYPE__CLOCK: on_clock(msg); break;
    case PSKV__MSG_TYPE__REPLICATE:
        chain_replicate(S.chain, msg);
        consist_advance(S.cons); /* a bsp close may free parked pulls */
        break;
    case PSKV__MSG_TYPE__FILL: chain_fill(S.chain, msg); break;
    default:
        snprintf(why, sizeof why, "message type %s is not served by a server",
                 wire_type_name((int)r->type));
        fail(msg, PSKV_EPROTO, why);
    }
}

/* Serves the parked messages whose view has arrived, in order. */
static void replay_parked(void)
{
    int keep = 0;
    for (int i = 0; i < S.nparked; i++) {
        if (from_future(&S.parked[i])) {
            wire_msg_move(&S.parked[keep++], &S.parked[i]);
            continue;
        }
        handle_worker(&S.parked[i]);
        wire_msg_close(&S.parked[i]);
    }
    S.nparked = keep;
}

/* Returns 1 when the scheduler said STOP. */
static int handle_scheduler(void)
{
    for (int budget = 0; budget < 100; budget++) {
        wire_msg msg;
        int rc = member_recv(&S.mb, &msg);
        if (rc == -PSKV_ETIMEDOUT)
            return 0;
        if (rc < 0)
            continue;
        if (!msg.meta) { /* a new view */
            persist_clocks clocks = {NULL, 0};
            checkpoint_load_resumed(&clocks);
            uint64_t place_before = chain_place_epoch(S.chain);
            if (chain_view(S.chain)) {
                LOG_E("the scheduler declared this server dead in view epoch %llu and gave "
                      "its partitions to others: exiting without serving anything stale",
                      (unsigned long long)S.mb.epoch);
                exit(3);
            }
            if (chain_place_epoch(S.chain) != place_before)
                consist_placement_changed(S.cons, chain_place_epoch(S.chain));
            consist_view(S.cons);
            clocks_after_view(place_before);
            if (clocks.vc) {
                consist_restore_clocks(S.cons, clocks.vc, clocks.nranks);
                free(clocks.vc);
            }
            lease_view((int)S.mb.view->lease_ms);
            secure_allow_view(&S.sec, S.mb.view);
            replay_parked();
        } else if (msg.meta->type == PSKV__MSG_TYPE__CHECKPOINT) {
            checkpoint_write(msg.meta->seq, msg.meta->has_delta && msg.meta->delta);
        } else if (msg.meta->type == PSKV__MSG_TYPE__CHECKPOINT_PRUNE && msg.meta->has_seq) {
            checkpoint_prune(msg.meta->seq, msg.meta->prune_keep_from, msg.meta->prune_keep_to);
        } else if (msg.meta->type == PSKV__MSG_TYPE__STOP) {
            if (msg.meta->drained)
                LOG_I("drained (pskvctl drain): the other servers hold whole copies of every "
                      "partition this server held; leaving the job (exit 0)");
            Pskv__Meta m;
            member_meta(&S.mb, &m, PSKV__MSG_TYPE__STOP_ACK);
            member_send(&S.mb, &m);
            wire_msg_close(&msg);
            return 1;
        } else if (msg.meta->type == PSKV__MSG_TYPE__ERROR) {
            LOG_W("scheduler: %s", msg.meta->error ? msg.meta->error : "error");
        }
        wire_msg_close(&msg);
    }
    return 0;
}

/* Opens the data socket (a ROUTER on --bind and --port) and creates the tables,
 * the consistency engine and the chain around it. Returns the bound port, or -1
 * (logged). */
static int open_data(void)
{
    char why[512];
    S.ctx = zmq_ctx_new();
    S.router = net_socket(S.ctx, ZMQ_ROUTER, cfg_int(config, "max-message"), 0);
    int sockbuf = (int)cfg_int(config, "socket-buffer");
    if (S.router && sockbuf > 0) { /* before bind: it applies to the connections accepted */
        zmq_setsockopt(S.router, ZMQ_RCVBUF, &sockbuf, sizeof sockbuf);
        zmq_setsockopt(S.router, ZMQ_SNDBUF, &sockbuf, sizeof sockbuf);
    }
    unsigned peers = (1u << KEY_ROLE_WORKER) | (1u << KEY_ROLE_EVALUATOR) |
                     (1u << KEY_ROLE_SERVER);
    int port = secure_listen(&S.sec, S.ctx, S.router, peers, why, sizeof why);
    if (port == 0)
        port = net_bind(S.router, secure_bind_addr(&S.sec, cfg_str(config, "bind")),
                        (int)cfg_int(config, "port"), why, sizeof why);
    if (port < 0) {
        LOG_E("%s", why);
        return -1;
    }
    S.tables = tables_new();
    S.cons = consist_new(S.router, &S.mb, S.tables);
    S.chain = chain_new(S.ctx, S.router, &S.mb, S.tables, cfg_int(config, "max-message"));
    if (S.chain) {
        chain_on_refusal(S.chain, note_refusal);
        chain_on_close(S.chain, on_close_done);
    }
    if (S.cons)
        consist_set_chain(S.cons, S.chain);
    if (!S.tables || !S.cons || !S.chain) {
        LOG_E("out of memory");
        return -1;
    }
    return port;
}

/* Registers with the scheduler `sched` as a server reachable at host and the
 * advertised port (--advertise-port, else `port`), listing the valid checkpoint
 * files of --data-dir. Returns -1 when registered, else the exit status (0 when
 * a signal ended the wait, 1 on a failure, logged). */
static int join_cluster(const char *sched, const char *host, int port)
{
    char why[512];
    const char *data_dir = cfg_str(config, "data-dir");
    checkpoint_init(&S.mb, data_dir, S.tables, S.chain, S.cons);
    char **ckpts = NULL;
    size_t nckpts = *data_dir ? persist_scan(data_dir, &ckpts) : 0;
    if (nckpts)
        LOG_I("%zu valid checkpoint files in %s", nckpts, data_dir);
    member_set_checkpoints(ckpts, nckpts);
    int adv_port = cfg_int(config, "advertise-port") ? (int)cfg_int(config, "advertise-port") : port;
    int rc = member_open(&S.mb, S.ctx, &S.sec, sched, PSKV__ROLE__SERVER, -1, host, adv_port,
                         (uint64_t)cfg_int(config, "job-id"), cfg_double(config, "connect-timeout"),
                         cfg_int(config, "max-message"), why, sizeof why);
    for (size_t i = 0; i < nckpts; i++)
        free(ckpts[i]);
    free(ckpts);
    member_set_checkpoints(NULL, 0);
    if (rc < 0) {
        LOG_E("%s", why);
        return rc == -PSKV_ECLOSED ? 0 : 1;
    }
    log_set_node((int)S.mb.node_id);
    LOG_I("registered as node %u; listening on port %d, advertised as %s:%d; job %llu",
          S.mb.node_id, port, host, adv_port, (unsigned long long)S.mb.job_id);
    return -1;
}

/* Serves what waits on the data socket: at most 256 messages or 10 ms (a few
 * large pushes), then back to the poll: heartbeats and their acknowledgements
 * (the lease) must not wait on a backlog of work. */
static void serve_router(void)
{
    char why[512];
    int64_t busy_until = tu_now_ms() + 10;
    for (int budget = 0; budget < 256 && (budget == 0 || tu_now_ms() < busy_until); budget++) {
        /* A message from a view not applied here yet (before the first view,
         * or sent right after a new one) waits (bounded, in order) in S.parked
         * and is served once the view arrives. Messages are received in place:
         * a frame's data may live inside its zmq_msg_t. */
        wire_msg local;
        int park = S.nparked < MAX_PARKED;
        wire_msg *msg = park ? &S.parked[S.nparked] : &local;
        int rc = wire_recv(S.router, 1, msg, why, sizeof why);
        if (rc == -PSKV_ETIMEDOUT) {
            wire_msg_close(msg);
            break;
        }
        if (rc < 0) {
            fail(msg, -rc, why);
        } else if (!from_future(msg)) {
            handle_worker(msg);
        } else if (!refuse_foreign(msg)) {
            if (park) {
                S.nparked++;
                continue;
            }
            fail(msg, PSKV_EREFUSED, S.mb.view ? "server busy: too many messages from a "
                 "newer view wait for it" : "server not ready: the cluster is not complete yet");
        }
        wire_msg_close(msg);
    }
}

/* The loop, until a signal or STOP: the scheduler's messages, the chains' sockets,
 * the data socket, then the background checkpoint. Returns 1 when the scheduler
 * said STOP, 0 on a signal or a failed poll, -1 when no view came within
 * --join-timeout (logged). */
static int run(const char *sched)
{
    int64_t join_deadline = tu_now_ms() + (int64_t)(cfg_double(config, "join-timeout") * 1000);
    int stopped = 0;
    while (!stop_signal && !stopped) {
        if (!S.mb.view && tu_now_ms() > join_deadline) {
            LOG_E("no cluster view from scheduler %s within %.0f s", sched,
                  cfg_double(config, "join-timeout"));
            return -1;
        }
        zmq_pollitem_t items[2 + 256] = {{S.router, 0, ZMQ_POLLIN, 0},
                                         {S.mb.sock, 0, ZMQ_POLLIN, 0}};
        int nitems = 2 + chain_poll_items(S.chain, items + 2, 256);
        lease_pass();
        if (reload_signal) {
            reload_signal = 0;
            secure_reload(&S.sec);
        }
        secure_tick(&S.sec);
        /* soon after a background checkpoint's file; a doubling map moves rows when idle */
        int growing = sweep_grow(S.tables, 0);
        long wait = growing ? 0 : checkpoint_busy() ? 5 : 50;
        int ready = zmq_poll(items, nitems, wait);
        if (ready < 0 && errno != EINTR) {
            LOG_E("poll failed: %s", zmq_strerror(errno));
            break;
        }
        if (growing && ready == 0)
            sweep_grow(S.tables, GROW_IDLE_BUDGET);
        if (items[1].revents & ZMQ_POLLIN)
            stopped = handle_scheduler();
        if (nitems > 2)
            chain_drain(S.chain);
        chain_fwd_retry(S.chain);
        if (items[0].revents & ZMQ_POLLIN)
            serve_router();
        checkpoint_pass();
        consist_stats st = consist_get_stats(S.cons);
        lease_set_stats(st.dropped_late, st.pushes, st.pulls);
        if (S.mb.view && S.whole != S.mb.epoch && !chain_filling(S.chain))
            lease_set_whole(S.whole = S.mb.epoch); /* a drain waits for it (lease.h) */
        smet_tick(S.tables, &st);
        sweep_pass(S.tables, S.cons);
    }
    return stopped;
}

/* The exit report: what was served and refused, what was left waiting, the
 * tables and the memory they take. */
static void log_exit(int stopped)
{
    consist_stats st = consist_get_stats(S.cons);
    LOG_I("%s: %llu pushes (%.1f us each to check and apply), %llu pulls (%.1f us each to "
          "copy), %llu dropped as late, %llu refused requests, %zu tables",
          stopped ? "stopped by the scheduler" : "terminated by signal",
          (unsigned long long)st.pushes, st.pushes ? st.push_ns / 1e3 / (double)st.pushes : 0.0,
          (unsigned long long)st.pulls, st.pulls ? st.pull_ns / 1e3 / (double)st.pulls : 0.0,
          (unsigned long long)st.dropped_late, (unsigned long long)(S.errors + st.refused),
          tables_count(S.tables));
    if (chain_pending(S.chain) || st.parked_now)
        LOG_W("left waiting: %zu pushes for their replicas, %llu parked pulls",
              chain_pending(S.chain), (unsigned long long)st.parked_now);
    if (chain_resent(S.chain) || chain_obsolete(S.chain))
        LOG_I("%llu forwards sent again after %d ms or more without an answer, %llu let go "
              "(their worker had its answer)", (unsigned long long)chain_resent(S.chain),
              CHAIN_RESEND_MS, (unsigned long long)chain_obsolete(S.chain));
    if (chain_dedupe_forced(S.chain))
        LOG_W("%llu push ids were forgotten at the dedupe cap while their worker could still "
              "re-send them", (unsigned long long)chain_dedupe_forced(S.chain));
    tabstats_log(S.tables);
}

int main(int argc, char **argv)
{
    int rc = cfg_start(config, "server", "pskv-server --scheduler HOST:PORT [flags]", argc, argv,
                       NULL);
    if (rc >= 0 || (rc = upd_plugin_setup(cfg_str(config, "plugin-dir"),
                                          cfg_str(config, "updater-check"), stdout)) >= 0)
        return rc; /* --help, a usage error, or --updater-check done */
    openblas_set_num_threads((int)cfg_int(config, "blas-threads"));
    slice_apply(cfg_int(config, "slice-us"), "this server's threads"); /* they inherit it */
    /* Keep freed message buffers in the heap: without this glibc maps and unmaps every
     * large buffer, and the page faults cost as much as a copy. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, on_hup);

    char why[600], host[256], shost[256];
    int sport;
    const char *sched = cfg_str(config, "scheduler");
    if (net_split_hostport(sched, shost, sizeof shost, &sport) < 0) {
        fprintf(stderr, "pskv-server: --scheduler '%s' is not HOST:PORT\n", sched);
        return 2;
    }
    if (net_pick_advertise(cfg_str(config, "advertise"), cfg_str(config, "interface"), shost,
                           host, sizeof host, why, sizeof why) < 0 ||
        net_check_advertise(host, shost, why, sizeof why) < 0) {
        LOG_E("%s", why);
        return 1;
    }
    if (secure_init(&S.sec, "pskv-server", cfg_str(config, "keys"),
                    (int)cfg_int(config, "insecure"), KEY_ROLE_SERVER, 1, why, sizeof why) < 0 ||
        secure_check_exposure(&S.sec, secure_bind_addr(&S.sec, cfg_str(config, "bind")), host,
                              why, sizeof why) < 0) {
        fprintf(stderr, "pskv-server: %s\n", why);
        return 2;
    }
    int port = open_data();
    if (port < 0)
        return 1;
    member_set_stop_flag(&stop_signal);
    cfg_log(config);
    if ((rc = join_cluster(sched, host, port)) >= 0)
        return rc;
    if (smet_start(secure_bind_addr(&S.sec, cfg_str(config, "bind")),
                   (int)cfg_int(config, "metrics-port"), (int)S.mb.node_id, S.mb.rank) < 0)
        return 1;
    lease_start(S.ctx, &S.mb);
    S.parked = calloc(MAX_PARKED, sizeof *S.parked);
    if (!S.parked) {
        LOG_E("out of memory");
        return 1;
    }
    int stopped = run(sched);
    if (stopped < 0)
        return 1;
    checkpoint_poll(30000); /* a checkpoint being written is finished first */
    log_exit(stopped);
    lease_stop();
    member_close(&S.mb);
    chain_destroy(&S.chain);
    zmq_close(S.router);
    secure_close(&S.sec);
    zmq_ctx_term(S.ctx);
    for (int i = 0; i < S.nparked; i++)
        wire_msg_close(&S.parked[i]);
    free(S.parked);
    consist_destroy(&S.cons);
    tables_destroy(&S.tables);
    metrics_stop();
    return 0;
}
