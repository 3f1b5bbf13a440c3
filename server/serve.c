/* serve: pskv-server's message rules (serve.h): refusals, the checks of a
 * request, on_push, on_pull, on_clock, the worker's and the scheduler's
 * messages. Every request is validated (job, table, width, ranges, finite
 * values, the key's namespaces and their quotas: nsguard.h) before use; a bad one is logged with its sender, answered with ERROR
 * and dropped. Pulls send large dense runs straight from the table (lent: an
 * update of those rows while they are on the wire moves the table to a fresh
 * buffer; other rows are updated in place) and copy
 * anything else into a fresh buffer, so what is on the wire never changes
 * (consist.c, shard.c). */
#define _GNU_SOURCE
#include "serve.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "repl/chain.h"
#include "repl/chain_apply.h"
#include "repl/chain_fill.h"
#include "repl/chain_fwd.h"
#include "persist/checkpoint.h"
#include "consist/consist.h"
#include "consist/model.h"
#include "half.h"
#include "lease.h"
#include "log.h"
#include "member.h"
#include "net.h"
#include "nsdrop.h"
#include "nsrestore.h"
#include "nsguard.h"
#include "persist/persist.h"
#include "pskv_errors.h"
#include "refuse.h"
#include "sfilter.h"
#include "smetrics.h"
#include "sshm.h"
#include "secure.h"
#include "store/table.h"
#include "timeutil.h"
#include "wire.h"

serve_state srv;

static void meta_reply(Pskv__Meta *m, const Pskv__Meta *req, Pskv__MsgType type)
{
    member_meta(&srv.mb, m, type);
    m->has_request_id = req->has_request_id;
    m->request_id = req->request_id; /* 0 when absent, like the table id */
    m->has_table_id = req->has_table_id;
    m->table_id = req->table_id;
}

/* "worker rank R (node N)" when the view knows the sender, else "node N". */
static void sender_name(const wire_msg *msg, char *out, size_t len)
{
    uint32_t id = msg->meta && msg->meta->has_sender ? msg->meta->sender : 0;
    for (size_t i = 0; srv.mb.view && i < srv.mb.view->n_nodes; i++) {
        const Pskv__Node *n = srv.mb.view->nodes[i];
        if (n->id == id && n->role == PSKV__ROLE__WORKER) {
            snprintf(out, len, "worker rank %d (node %u)", n->rank, id);
            return;
        }
    }
    snprintf(out, len, "node %u", id);
}

uint64_t serve_note_refusal(uint32_t node, int code)
{
    return srv.cons ? consist_refusal(srv.cons, node, code) : 0;
}

void serve_close_done(uint64_t token, int code)
{
    if (srv.cons)
        consist_close_done(srv.cons, token, code);
}

static void fail(wire_msg *msg, int code, const char *why)
{
    char who[64];
    sender_name(msg, who, sizeof who);
    srv.errors++;
    if (code == PSKV_EKEYMISS) /* keycache: routine, the worker sends the keys */
        LOG_D("asked %s for the keys: %s", who, why);
    else
        LOG_W("refused %s from %s at %s: %s",
              msg->meta ? wire_type_name((int)msg->meta->type) : "message", who, msg->peer, why);
    /* a push the worker will send again: its clocks are ignored until it has heard
     * of this refusal (the count rides on the reply) */
    uint64_t refused = msg->meta && msg->meta->type == PSKV__MSG_TYPE__PUSH &&
                               msg->meta->has_sender
                           ? serve_note_refusal(msg->meta->sender, code)
                           : 0;
    if (msg->has_rid && wire_send_error(srv.router, &msg->rid, msg->meta, srv.mb.job_id,
                                        srv.mb.node_id, code, why, refused) < 0)
        LOG_W("cannot answer %s: %s", msg->peer, zmq_strerror(errno));
}

/* TABLE_OPEN: creates the table or checks the options against its first open's. A
 * refusal starts with the group asking (the request's `group`, which the library
 * sends) and, for options that differ, ends with the group that opened the table
 * first on this server: "group B: table 'S/w' exists with option 'width' = 4, open
 * asked 8 (first opened by group A)". */
static void on_table_open(wire_msg *msg)
{
    char why[400], out[480], group[72];
    Pskv__Meta *r = msg->meta;
    if (!r->table || !r->has_table_id) {
        fail(msg, PSKV_EPROTO, "TABLE_OPEN without table options");
        return;
    }
    if (r->group && *r->group)
        snprintf(group, sizeof group, "group %.64s", r->group); /* the scheduler's bound */
    else
        snprintf(group, sizeof group, "the unnamed group");
    int existed = tables_find(srv.tables, r->table_id) != NULL;
    int rc = tables_open(srv.tables, r->table_id, r->table, 0, UINT64_MAX, why, sizeof why);
    if (rc < 0) {
        snprintf(out, sizeof out, "%s: %s", group, why);
        fail(msg, -rc, out);
        return;
    }
    table *t = existed ? NULL : tables_find(srv.tables, r->table_id);
    if (t)
        snprintf(t->opened_by, sizeof t->opened_by, "%s", group);
    Pskv__Meta m;
    meta_reply(&m, r, PSKV__MSG_TYPE__TABLE_OPEN_ACK);
    wire_send(srv.router, &msg->rid, &m, NULL, NULL);
}

/* The table a request names, or NULL after answering: PSKV_ENOTREADY while a
 * joining server still waits for the copies that bring it its tables, else
 * PSKV_ENOTABLE. */
static table *request_table(wire_msg *msg)
{
    char why[200];
    Pskv__Meta *r = msg->meta;
    table *t = r->has_table_id ? tables_find(srv.tables, r->table_id) : NULL;
    if (t)
        return t;
    int waiting = chain_waiting(srv.chain);
    snprintf(why, sizeof why, waiting ? "table id %llu is still being copied to this server"
                                      : "unknown table id %llu (open the table first)",
             (unsigned long long)r->table_id);
    fail(msg, waiting ? PSKV_ENOTREADY : PSKV_ENOTABLE, why);
    return NULL;
}

/* TABLE_LR (pskv_table_set_lr): the table's updater takes the new lr for the pushes
 * that come after it. Pushes this server forwards down chains carry the lr they
 * were applied with, so replicas stay identical whatever order the change and the
 * forwards reach them in (chain_apply.c). */
static void on_table_lr(wire_msg *msg)
{
    char why[300], who[64];
    Pskv__Meta *r = msg->meta;
    table *t = request_table(msg);
    if (!t)
        return;
    if (!r->has_table_lr) {
        fail(msg, PSKV_EPROTO, "TABLE_LR without table_lr");
        return;
    }
    float was = shard_lr(t->sh);
    int rc = table_set_lr(t, (double)r->table_lr, why, sizeof why);
    if (rc < 0) {
        fail(msg, -rc, why);
        return;
    }
    sender_name(msg, who, sizeof who);
    LOG_I("table '%s': lr %g -> %g (set by %s)", t->name, (double)was, (double)r->table_lr,
          who);
    Pskv__Meta m;
    meta_reply(&m, r, PSKV__MSG_TYPE__TABLE_LR_ACK);
    wire_send(srv.router, &msg->rid, &m, NULL, NULL);
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
    int rc = chain_rows(srv.chain, t, msg, r->type == PSKV__MSG_TYPE__PULL, rs, why, sizeof why);
    if (rc < 0) {
        fail(msg, -rc, why);
        return NULL;
    }
    smet_request(t, r->type == PSKV__MSG_TYPE__PULL, rs->n);
    return t;
}

/* pskv_pushpull: a push with pull_after, applied (or held, under bsp), is followed
 * by a pull of its rows tagged pull_clock, answered or parked by the table's model
 * (served here, by the head: its rows hold the push). A push refused before this
 * point was answered with an error and gets no pull. */
static void pull_after(wire_msg *msg, table *t, const rowset *rs, int acked)
{
    Pskv__Meta *r = msg->meta;
    if (!(r->has_pull_after && r->pull_after) || (r->has_assign && r->assign))
        return;
    r->clock = r->has_pull_clock ? r->pull_clock : r->clock;
    r->pull_after = acked; /* the reply says whether a PUSH_ACK comes too (held.h) */
    consist_pull(srv.cons, t, msg, rs);
}

/* Records push `origin` of worker node `sender` as applied to the rows of rs. */
static void record_push(table *t, const rowset *rs, uint32_t sender, uint64_t origin,
                        uint64_t floor)
{
    if (chain_record(srv.chain, t, rs, sender, origin, floor) < 0)
        LOG_W("out of memory recording a push id: a re-send of it could apply twice");
}

/* The record of the last push applied on arrival whose rows are one run, not yet
 * made: it waits past the PULLs already queued behind that push (pipelined push then
 * pull: the pull's reply need not wait for it), and is made before any other message
 * (a PUSH or a REPLICATE may read it) and when the router has nothing more to read
 * (serve_router), so no reader outside this loop's turn ever misses it. */
static struct {
    int on;
    table *t;
    uint64_t first, n, origin, floor;
    uint32_t sender;
} pending;

static void record_pending(void)
{
    if (!pending.on)
        return;
    pending.on = 0;
    rowset rs = {NULL, pending.first, pending.n, NULL, 0};
    record_push(pending.t, &rs, pending.sender, pending.origin, pending.floor);
}

/* What waits past the PULLs queued behind a push: its PUSH_ACK (consist.h), then
 * its record. */
static void flush_waiting(void)
{
    consist_flush_ack(srv.cons);
    record_pending();
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
    int held = cons_of(t)->closes && !(r->has_assign && r->assign);
    if ((chain_replicas(srv.chain) > 1 && !held) ||
        (r->has_resend && r->resend && cons_of(t)->dedupes)) {
        /* replicated, or re-sent by a worker that heard nothing back: applied where
         * its id is not recorded yet. A bsp push is held for its clock instead; the
         * close goes down the chains (chain_close) */
        chain_push(srv.chain, t, msg, &rs);
        pull_after(msg, t, &rs, 1);
        return;
    }
    /* the push's id recorded for its re-sends: before a held push (bsp: its close
     * reads the record), after an applied one's answer went to ZeroMQ (async, ssp:
     * the record, a dedupe_record per partition, overlaps the reply's transfer; a
     * run's waits past the PULLs queued behind it, `pending`, and every other
     * message finds it made). rs and the frames it points into are this message's
     * until it returns */
    int record = cons_of(t)->dedupes && r->has_origin_id;
    uint32_t sender = r->sender;
    uint64_t origin = r->origin_id, floor = r->has_floor ? r->floor : 0;
    if (record && held)
        record_push(t, &rs, sender, origin, floor);
    consist_push(srv.cons, t, msg, &rs);
    pull_after(msg, t, &rs, cons_of(t)->closes); /* held: acknowledged at the close */
    if (record && !held && !rs.keys && !rs.segs) { /* a run: made later (pending) */
        record_pending();
        pending.on = 1;
        pending.t = t;
        pending.first = rs.first;
        pending.n = rs.n;
        pending.sender = sender;
        pending.origin = origin;
        pending.floor = floor;
    } else if (record && !held) {
        record_push(t, &rs, sender, origin, floor);
    }
}

/* PULL with `all`: every row of the table this server answers pulls for, with its
 * keys, as the values are now (no consistency wait: for saving a model). */
static void on_pull_all(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    table *t = request_table(msg);
    if (!t)
        return;
    if (chain_waiting(srv.chain)) {
        fail(msg, PSKV_ENOTREADY, "partitions are still being copied to this server");
        return;
    }
    uint64_t n = chain_export_served(srv.chain, t, NULL, NULL);
    size_t rf = shard_row_floats(t->sh), wd = t->width;
    uint64_t *keys = malloc((n ? n : 1) * sizeof *keys);
    float *rows = malloc((n ? n : 1) * rf * sizeof *rows);
    if (!keys || !rows) {
        free(keys);
        free(rows);
        fail(msg, PSKV_ENOMEM, "out of memory copying the table");
        return;
    }
    n = chain_export_served(srv.chain, t, keys, rows);
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
        rc = wire_send(srv.router, &msg->rid, &m, &km, &vm);
    } else { /* no row here: no frames */
        free(keys);
        free(rows);
        rc = wire_send(srv.router, &msg->rid, &m, NULL, NULL);
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
        consist_pull(srv.cons, t, msg, &rs);
}

/* Refuses (and returns 1 for) a request from another job. */
static int refuse_foreign(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    if (r->has_job_id && r->job_id == srv.mb.job_id)
        return 0;
    char why[200];
    snprintf(why, sizeof why, "job id %llu is not this job's (%llu)",
             (unsigned long long)r->job_id, (unsigned long long)srv.mb.job_id);
    fail(msg, PSKV_EJOB, why);
    return 1;
}

/* 1 when msg comes from a view this server has not applied yet: it waits. */
static int from_future(const wire_msg *msg)
{
    return !srv.mb.view || (msg->meta->has_epoch && msg->meta->epoch > srv.mb.epoch);
}

/* Refuses (and returns 1 for) any data message while this server's lease has
 * lapsed (but a copy, FILL: sent once, it answers nobody, and a view that takes
 * the partition away drops it again), and drops a forward or copy planned on an
 * older placement. A keyed push or pull planned on an older view is served when
 * this server still heads (or tails) its rows: chain_rows checks that key by key
 * (a dense run, which names no rows, it refuses). */
static int refuse_stale(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    int data = r->type == PSKV__MSG_TYPE__PUSH || r->type == PSKV__MSG_TYPE__PULL;
    int repl = r->type == PSKV__MSG_TYPE__REPLICATE || r->type == PSKV__MSG_TYPE__FILL;
    if (!data && !repl)
        return 0;
    char why[200];
    int valid = lease_valid();
    if (!valid && r->type != PSKV__MSG_TYPE__FILL) {
        if (!srv.lease_lapsed++) {
            LOG_W("lease lapsed (no acknowledged heartbeat): serving nothing until renewed");
            smet_lease_lapse();
        }
        if (data)
            fail(msg, PSKV_ESTALE, "this server's lease has lapsed; it may have been replaced");
        return 1;
    }
    if (srv.lease_lapsed && valid) { /* a copy taken while lapsed renews nothing */
        LOG_I("lease renewed");
        srv.lease_lapsed = 0;
    }
    uint64_t ep = r->epoch;
    if (data || !r->has_epoch || ep >= chain_place_epoch(srv.chain))
        return 0;
    snprintf(why, sizeof why, "view epoch %llu is older than this server's placement (epoch "
             "%llu)", (unsigned long long)ep, (unsigned long long)chain_place_epoch(srv.chain));
    LOG_D("dropped %s from node %u: %s", wire_type_name((int)r->type), r->sender, why);
    return 1;
}

/* 1 when some table is ssp or evicts rows (evict_after): only then do replicas
 * need the clocks forwarded (ssp pulls wait on them; eviction's sweep reads them). */
static int clocks_down_chains(void)
{
    for (size_t i = 0; i < tables_count(srv.tables); i++) {
        const table *t = tables_at(srv.tables, i);
        if (cons_of(t)->chain_clocks || t->evict_after)
            return 1;
    }
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
        if (r->has_epoch && r->epoch < chain_place_epoch(srv.chain))
            return; /* forwarded on an older placement: it vouches for the old chains */
        consist_clock_from(srv.cons, (uint32_t)r->origin_id, r->rank, r->clock);
        chain_forward_clock(srv.chain, (uint32_t)r->origin_id, r->sender, r->rank, r->clock);
        return;
    }
    int rank = consist_clock(srv.cons, msg); /* < 0: not counted (consist.h) */
    /* down the chains too. A server still waiting for copies may not know the ssp
     * tables yet (a joiner learns them from the copies): it forwards too, else the
     * replicas after it would lack this clock until the worker's next, which a
     * worker parked in an ssp pull never sends */
    if (rank >= 0 && chain_replicas(srv.chain) > 1 &&
        (clocks_down_chains() || chain_filling(srv.chain))) {
        consist_clock_from(srv.cons, srv.mb.node_id, rank, r->clock);
        chain_forward_clock(srv.chain, srv.mb.node_id, 0, rank, r->clock);
    }
    follow_worker_clock(srv.follow, rank);
    follow_clock(srv.follow); /* a clock boundary: the dense parts readers wait for */
}

/* FOLLOW: a reader (pskv-serve) subscribes to a namespace's rows (follow.h). */
static void on_follow(wire_msg *msg)
{
    char why[300];
    int rc = srv.follow ? follow_request(srv.follow, msg, why, sizeof why) : -PSKV_ENOMEM;
    if (rc == -PSKV_EACCES) /* a key not bound to the namespace: counted as nsguard's are */
        refuse_note(REFUSE_NAMESPACE, msg->peer, msg->key, why);
    if (rc < 0)
        fail(msg, -rc, srv.follow ? why : "no memory for readers");
}

/* After a view: which heads' clock streams pulls here wait on. A new head's
 * stream starts with the clocks workers send on the new placement (each sends
 * its clock again once every push it sent before the change is acknowledged):
 * clocks it had before could cover pushes still being re-sent. */
static void clocks_after_view(uint64_t place_before)
{
    if (chain_replicas(srv.chain) <= 1)
        return;
    uint32_t heads[1024];
    size_t n = chain_sources(srv.chain, heads, 1024);
    consist_set_sources(srv.cons, heads, n, chain_place_epoch(srv.chain) != place_before);
}

/* Under keys: a worker's messages (TABLE_OPEN, PUSH, PULL, CLOCK) only from a
 * worker key (an evaluator's may open and pull), a server's (REPLICATE, FILL, a
 * forwarded CLOCK) only from a server key, and each from the key the view gives
 * the node it names. Returns 1 after refusing (counted, logged once a minute per
 * peer, answered PSKV_EPERM unless a CLOCK); nothing of it is applied. */
static int refuse_role(wire_msg *msg)
{
    if (!srv.sec.keyed)
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
    for (size_t i = 0; !*why && srv.mb.view && r->has_sender && i < srv.mb.view->n_nodes; i++) {
        const Pskv__Node *n = srv.mb.view->nodes[i];
        if (n->id == r->sender && n->pubkey && strcmp(n->pubkey, msg->key))
            snprintf(why, sizeof why, "%s names node %u, whose key is another",
                     wire_type_name((int)r->type), n->id);
    }
    if (!*why)
        return 0;
    refuse_note(REFUSE_MESSAGE, msg->peer, msg->key, why);
    if (r->type != PSKV__MSG_TYPE__CLOCK && msg->has_rid)
        wire_send_error(srv.router, &msg->rid, r, srv.mb.job_id, srv.mb.node_id, PSKV_EPERM, why,
                        0);
    return 1;
}

/* A push that ends its worker's clock (ends_clock, pskv_pushpull): the CLOCK a
 * worker would have sent right behind it, made before the push is served (a held
 * push keeps its message), counted after it by on_clock. NULL meta: none. */
static void clock_of_push(const wire_msg *msg, wire_msg *out, Pskv__Meta *m)
{
    const Pskv__Meta *r = msg->meta;
    out->meta = NULL;
    if (r->type != PSKV__MSG_TYPE__PUSH || !r->has_ends_clock || !r->ends_clock ||
        (r->has_resend && r->resend)) /* a re-send's clock goes as CLOCK (wview_catch_up) */
        return;
    pskv__meta__init(m);
    m->type = PSKV__MSG_TYPE__CLOCK;
    m->has_sender = r->has_sender;
    m->sender = r->sender;
    m->has_epoch = r->has_epoch;
    m->epoch = r->epoch;
    m->has_clock = r->has_clock;
    m->clock = r->clock;
    m->has_refused = r->has_refused;
    m->refused = r->refused;
    out->meta = m;
    memcpy(out->peer, msg->peer, sizeof out->peer);
}

static void handle_worker(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    char why[400];
    if (r->type != PSKV__MSG_TYPE__PULL) /* a PULL reads no record: it may wait */
        flush_waiting();
    if (refuse_foreign(msg) || refuse_role(msg))
        return;
    wire_msg cm; /* the clock a push ends: after the push, whatever became of it */
    Pskv__Meta cmeta;
    clock_of_push(msg, &cm, &cmeta);
    if (refuse_stale(msg)) {
        if (cm.meta) /* refused as ESTALE, counted: the clock is ignored as a CLOCK would be */
            on_clock(&cm);
        return;
    }
    int rc = sfilter_keys(srv.tables, msg, why, sizeof why); /* keycache: nothing applied */
    if (rc >= 0) /* values in the worker's shared memory (sshm.h) */
        rc = sshm_resolve(consist_shm(srv.cons), msg, why, sizeof why);
    if (rc >= 0) /* the key's namespaces and their quotas (nsguard.h) */
        rc = nsguard_request(srv.tables, msg, srv.mb.view, why, sizeof why);
    if (rc < 0) {
        fail(msg, -rc, why);
        if (cm.meta)
            on_clock(&cm);
        return;
    }
    switch (r->type) {
    case PSKV__MSG_TYPE__TABLE_OPEN: on_table_open(msg); break;
    case PSKV__MSG_TYPE__PUSH: on_push(msg); break;
    case PSKV__MSG_TYPE__PULL: on_pull(msg); break;
    case PSKV__MSG_TYPE__CLOCK: on_clock(msg); break;
    case PSKV__MSG_TYPE__TABLE_LR: on_table_lr(msg); break;
    case PSKV__MSG_TYPE__FOLLOW: on_follow(msg); break;
    case PSKV__MSG_TYPE__REPLICATE:
        chain_replicate(srv.chain, msg);
        consist_advance(srv.cons); /* a bsp close may free parked pulls */
        break;
    case PSKV__MSG_TYPE__FILL: chain_fill(srv.chain, msg); break;
    default:
        snprintf(why, sizeof why, "message type %s is not served by a server",
                 wire_type_name((int)r->type));
        fail(msg, PSKV_EPROTO, why);
    }
    if (cm.meta)
        on_clock(&cm);
}

/* Serves the parked messages whose view has arrived, in order. */
static void replay_parked(void)
{
    int keep = 0;
    for (int i = 0; i < srv.nparked; i++) {
        if (from_future(&srv.parked[i])) {
            wire_msg_move(&srv.parked[keep++], &srv.parked[i]);
            continue;
        }
        handle_worker(&srv.parked[i]);
        wire_msg_close(&srv.parked[i]);
    }
    srv.nparked = keep;
    flush_waiting();
}

int serve_scheduler(void)
{
    for (int budget = 0; budget < 100; budget++) {
        wire_msg msg;
        int rc = member_recv(&srv.mb, &msg);
        if (rc == -PSKV_ETIMEDOUT)
            return 0;
        if (rc < 0)
            continue;
        if (!msg.meta) { /* a new view */
            persist_clocks clocks = {NULL, 0};
            checkpoint_load_resumed(&clocks);
            uint64_t place_before = chain_place_epoch(srv.chain);
            if (chain_view(srv.chain)) {
                LOG_E("the scheduler declared this server dead in view epoch %llu and gave "
                      "its partitions to others: exiting without serving anything stale",
                      (unsigned long long)srv.mb.epoch);
                exit(3);
            }
            if (chain_place_epoch(srv.chain) != place_before) {
                consist_placement_changed(srv.cons, chain_place_epoch(srv.chain));
                follow_placement(srv.follow); /* new heads: readers get full copies */
            }
            consist_view(srv.cons);
            clocks_after_view(place_before);
            if (clocks.vc) {
                consist_restore_clocks(srv.cons, clocks.vc, clocks.nranks);
                free(clocks.vc);
            }
            lease_view((int)srv.mb.view->lease_ms);
            secure_allow_view(&srv.sec, srv.mb.view);
            replay_parked();
        } else if (msg.meta->type == PSKV__MSG_TYPE__CHECKPOINT) {
            checkpoint_write(msg.meta->seq, msg.meta->has_delta && msg.meta->delta,
                             nsrestore_ckpt_ns(msg.meta));
        } else if (msg.meta->type == PSKV__MSG_TYPE__CHECKPOINT_PRUNE && msg.meta->has_seq) {
            checkpoint_prune(msg.meta->seq, msg.meta->prune_keep_from, msg.meta->prune_keep_to);
        } else if (msg.meta->type == PSKV__MSG_TYPE__NS_DROP) {
            nsdrop_serve(&srv, msg.meta);
        } else if (msg.meta->type == PSKV__MSG_TYPE__NS_RESTORE) {
            nsrestore_serve(&srv, msg.meta);
        } else if (msg.meta->type == PSKV__MSG_TYPE__STOP) {
            follow_final(srv.follow); /* readers keep the model as it ends */
            if (msg.meta->drained)
                LOG_I("drained (pskvctl drain): the other servers hold whole copies of every "
                      "partition this server held; leaving the job (exit 0)");
            Pskv__Meta m;
            member_meta(&srv.mb, &m, PSKV__MSG_TYPE__STOP_ACK);
            member_send(&srv.mb, &m);
            wire_msg_close(&msg);
            return 1;
        } else if (msg.meta->type == PSKV__MSG_TYPE__ERROR) {
            LOG_W("scheduler: %s", msg.meta->error ? msg.meta->error : "error");
        }
        wire_msg_close(&msg);
    }
    return 0;
}

void serve_router(void)
{
    char why[512];
    int64_t busy_until = tu_now_ms() + 10;
    for (int budget = 0; budget < 256 && (budget == 0 || tu_now_ms() < busy_until); budget++) {
        /* A message from a view not applied here yet (before the first view,
         * or sent right after a new one) waits (bounded, in order) in srv.parked
         * and is served once the view arrives. Messages are received in place:
         * a frame's data may live inside its zmq_msg_t. */
        wire_msg local;
        int park = srv.nparked < SERVE_MAX_PARKED;
        wire_msg *msg = park ? &srv.parked[srv.nparked] : &local;
        int rc = wire_recv(srv.router, 1, msg, why, sizeof why);
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
                srv.nparked++;
                continue;
            }
            fail(msg, PSKV_EREFUSED, srv.mb.view ? "server busy: too many messages from a "
                 "newer view wait for it" : "server not ready: the cluster is not complete yet");
        }
        wire_msg_close(msg);
    }
    flush_waiting(); /* nothing more to read now (or the batch is over) */
}
