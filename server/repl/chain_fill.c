/* Filling new chain members and handing partitions over (docs/architecture.md,
 * "Replication and failover"; docs/protocol.md, "Chains").
 *
 * A server that becomes the predecessor of a new member of a partition's chain
 * copies it the partition (FILL: one message per table with its options, bsp
 * clock, values and optimizer state, then one with the dedupe record; the count
 * rides on each so the receiver knows when the copy is whole), before anything
 * else is forwarded to it. A head whose chain gets a joining server as its new
 * head hands the partition over the same way before letting it go (elastic
 * join). The receiver answers for the partition only once the copy is whole. */
#define _GNU_SOURCE
#include "chain_fill.h"

#include <stdlib.h>
#include <string.h>

#include "chain_impl.h"
#include "log.h"
#include "pskv_errors.h"
#include "timeutil.h"
#include "consist/model.h"

static int in_partition(void *ctx, uint64_t key)
{
    chain_filter *f = ctx;
    return chain_part(f->c, f->t, key) == f->p;
}

/* Test hook PSKV_TEST_FILL_DELAY_MS=MS (docs/operations.md): this server's first
 * copy waits MS ms (0 to 600000) before it goes, blocking the loop, so that a test
 * can let the receiver's lease lapse meanwhile. */
static void test_fill_delay(uint32_t p, uint32_t to)
{
    static int done;
    const char *e = getenv("PSKV_TEST_FILL_DELAY_MS");
    if (done || !e || !*e)
        return;
    done = 1;
    char *end;
    long ms = strtol(e, &end, 10);
    if (*end || ms < 0 || ms > 600000) {
        LOG_E("PSKV_TEST_FILL_DELAY_MS '%s': not a count of ms (0 to 600000): ignored", e);
        return;
    }
    LOG_W("test hook PSKV_TEST_FILL_DELAY_MS: the copy of partition %u to node %u waits %ld ms",
          p, to, ms);
    tu_sleep_ms(ms);
}

/* Sends the whole partition p (every table, then the dedupe record) to `to`. */
static void send_fill(chain *c, uint32_t p, uint32_t to)
{
    void *s = chain_peer_sock(c, to);
    if (!s)
        return;
    test_fill_delay(p, to);
    size_t ntab = tables_count(c->tables);
    size_t bloblen = c->dd ? dedupe_export(c->dd, p, NULL, 0) : 0;
    void *blob = bloblen ? malloc(bloblen) : NULL;
    if (blob)
        dedupe_export(c->dd, p, blob, bloblen);
    uint64_t rows_sent = 0;
    for (size_t ti = 0; ti <= ntab; ti++) {
        Pskv__Meta m;
        member_meta(c->mb, &m, PSKV__MSG_TYPE__FILL);
        m.has_partition = m.has_seq = 1;
        m.partition = p;
        m.seq = ntab + 1; /* messages in this fill: one per table and the record */
        zmq_msg_t km, vm;
        if (ti == ntab) { /* the dedupe record closes the fill */
            if (blob) {
                m.has_blob = 1;
                m.blob.data = blob;
                m.blob.len = bloblen;
            }
            wire_send(s, NULL, &m, NULL, NULL);
            break;
        }
        table *t = tables_at(c->tables, ti);
        /* dense: the partition's run of indices; sparse: its keys, found in the map */
        chain_filter f = {c, t, p};
        uint64_t n, first = 0;
        if (t->dense)
            chain_dense_span(c, t, p, &first, &n);
        else
            n = shard_export(t->sh, in_partition, &f, NULL, NULL);
        size_t rf = shard_row_floats(t->sh);
        m.has_table_id = 1;
        m.table_id = t->id;
        if (cons_of(t)->closes) { /* the clocks applied to this partition's rows */
            m.has_clock = 1;
            m.clock = p < t->nclosed ? t->closed[p] : 0;
        }
        /* the table's options: a server that joined the job learns its tables here */
        Pskv__TableOptions *opts =
            t->opts ? pskv__table_options__unpack(NULL, t->opts_len, t->opts) : NULL;
        m.table = opts;
        /* its lr when pskv_table_set_lr changed it: a joining server applies with it */
        m.has_table_lr = shard_lr(t->sh) != t->upd.lr;
        m.table_lr = shard_lr(t->sh);
        if (n == 0) { /* an empty partition: say so without frames */
            wire_send(s, NULL, &m, NULL, NULL);
            if (opts)
                pskv__table_options__free_unpacked(opts, NULL);
            continue;
        }
        m.has_num_keys = m.has_width = 1;
        m.num_keys = n;
        m.width = (uint32_t)rf;
        zmq_msg_init_size(&vm, n * rf * sizeof(float));
        if (t->dense) {
            m.has_first_key = 1;
            m.first_key = first;
            shard_export_run(t->sh, first, n, zmq_msg_data(&vm));
            wire_send(s, NULL, &m, NULL, &vm);
        } else {
            zmq_msg_init_size(&km, n * sizeof(uint64_t));
            shard_export(t->sh, in_partition, &f, zmq_msg_data(&km), zmq_msg_data(&vm));
            wire_send(s, NULL, &m, &km, &vm);
        }
        if (opts)
            pskv__table_options__free_unpacked(opts, NULL);
        rows_sent += n;
    }
    free(blob);
    LOG_I("partition %u copied to server node %u (%llu rows in %zu tables)", p, to,
          (unsigned long long)rows_sent, ntab);
}

/* Fills the next member of p's chain once, when it is new to the chain and this
 * server holds a whole copy. */
static void fill_next(chain *c, uint32_t p)
{
    uint32_t nx = chain_next_of(c, p);
    if (!nx || !c->ready[p] || !c->fresh_next[p])
        return;
    c->fresh_next[p] = 0;
    send_fill(c, p, nx);
}

int chain_waiting(const chain *c)
{
    for (uint32_t p = 0; p < c->nparts; p++)
        if (c->index[p] >= 0 && !c->ready[p])
            return 1;
    return 0;
}

void chain_fill(chain *c, wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    if (!r->has_partition || r->partition >= c->nparts || !r->has_seq) {
        LOG_W("dropped a FILL from node %u without a valid partition", r->sender);
        return;
    }
    uint32_t p = r->partition;
    char why[300];
    if (r->has_table_id && r->table && !tables_find(c->tables, r->table_id)) {
        if (tables_open(c->tables, r->table_id, r->table, 0, UINT64_MAX, why, sizeof why) < 0)
            LOG_W("FILL of partition %u from node %u: cannot create its table: %s", p,
                  r->sender, why);
        else if (r->has_table_lr && /* learnt here: the lr the job set since (TABLE_LR) */
                 table_set_lr(tables_find(c->tables, r->table_id), r->table_lr, why,
                              sizeof why) < 0)
            LOG_W("FILL of partition %u from node %u: %s", p, r->sender, why);
    }
    table *bt = r->has_table_id && r->has_clock ? tables_find(c->tables, r->table_id) : NULL;
    if (bt && cons_of(bt)->closes && r->clock >= 0) {
        int64_t *pc = table_closed(bt, c->nparts);
        if (pc)
            pc[p] = r->clock;
        else
            LOG_E("out of memory keeping the bsp clock of partition %u", p);
    }
    if (r->has_table_id && msg->nkeys) {
        table *t = tables_find(c->tables, r->table_id);
        if (!t || r->width != shard_row_floats(t->sh) || (!msg->keys && !t->dense) ||
            (!msg->keys && (r->first_key > t->size || msg->nkeys > t->size - r->first_key))) {
            LOG_W("dropped a FILL of partition %u from node %u: unknown table, row width or rows",
                  p, r->sender);
            return;
        }
        if (shard_import(t->sh, msg->keys, r->first_key, msg->nkeys, msg->vals) < 0)
            LOG_E("out of memory importing partition %u of table '%s'", p, t->name);
    }
    if (r->has_blob && (c->dd || (c->dd = dedupe_new(c->nparts))))
        if (dedupe_import(c->dd, p, r->blob.data, r->blob.len) < 0)
            LOG_W("FILL of partition %u from node %u: malformed dedupe record", p, r->sender);
    if (++c->fills[p] < (int)r->seq)
        return;
    c->fills[p] = 0;
    c->ready[p] = 1;
    LOG_I("partition %u: copy from server node %u complete", p, r->sender);
    fill_next(c, p); /* a further new member after this one */
}

/* ---- a new view ------------------------------------------------------------- */

static int in_old_chain(const uint32_t *old, uint32_t R, uint32_t p, uint32_t id)
{
    for (uint32_t j = 0; old && j < R; j++)
        if (old[(size_t)p * R + j] == id)
            return 1;
    return 0;
}
/* This server still waited for p's copy from its predecessor in the old chain
 * `was`, and takes the partition on as it stands: when that predecessor left the
 * chain, nobody sends the copy now, and what only it held is gone. The scheduler
 * marks such a partition lost (its last whole holder died: scheduler/holders.h),
 * so this view should never come; said loudly if it does. */
static void lost_copy(chain *c, const uint32_t *was, uint32_t p, uint32_t me)
{
    uint32_t from = 0;
    for (uint32_t j = 1; j < c->R; j++)
        if (was[j] == me)
            from = was[j - 1];
    const uint32_t *now = chain_members(c, p);
    for (uint32_t j = 0; from && j < c->R; j++)
        if (now[j] == from)
            return; /* still in the chain: its copy may come yet */
    if (from)
        LOG_E("partition %u: server node %u left its chain before its copy to this server "
              "was whole; taken on without it: what only node %u held is lost", p, from,
              from);
}

int chain_fill_transfer(chain *c, const uint32_t *old, uint32_t p)
{
    uint32_t me = c->mb->node_id;
    const uint32_t *was = old ? &old[(size_t)p * c->R] : NULL;
    uint32_t head = chain_members(c, p)[0];
    if (was && was[0] == me && head && head != me && c->ready[p] &&
        !in_old_chain(old, c->R, p, head))
        send_fill(c, p, head); /* hand-off to a joining head, before letting go */
    if (c->index[p] < 0) {
        c->gone[p] |= c->ready[p] || in_old_chain(old, c->R, p, me);
        c->ready[p] = 0;
        c->fresh_next[p] = 0;
        if (c->dd)
            dedupe_clear(c->dd, p);
        return 0;
    }
    /* a next member new to the chain, or one still owed a copy from before */
    uint32_t nx = chain_next_of(c, p), prev_nx = 0;
    for (uint32_t j = 0; was && j + 1 < c->R; j++)
        if (was[j] == me)
            prev_nx = was[j + 1];
    c->fresh_next[p] = old && nx && (!in_old_chain(old, c->R, p, nx) ||
                                     (c->fresh_next[p] && nx == prev_nx));
    if (!old || in_old_chain(old, c->R, p, me)) {
        if (old && !c->ready[p])
            lost_copy(c, was, p, me);
        c->ready[p] = 1; /* held all along (or since the job began) */
        return 0;
    }
    return !c->ready[p]; /* 1: a FILL from the predecessor is on its way */
}

static int not_gone(void *ctx, uint64_t key)
{
    chain_filter *f = ctx;
    return !f->c->gone[chain_part(f->c, f->t, key)];
}

void chain_fill_drop(chain *c)
{
    uint32_t n = 0;
    for (uint32_t p = 0; p < c->nparts; p++)
        n += c->gone[p];
    if (!n)
        return;
    uint64_t rows = 0;
    for (size_t i = 0; i < tables_count(c->tables); i++) {
        table *t = tables_at(c->tables, i);
        chain_filter f = {c, t, 0};
        rows += shard_retain(t->sh, not_gone, &f);
    }
    memset(c->gone, 0, c->nparts);
    LOG_I("%u partitions let go: %llu rows of them dropped", n, (unsigned long long)rows);
}

void chain_fill_owed(chain *c)
{
    for (uint32_t p = 0; p < c->nparts; p++)
        if (c->index[p] >= 0)
            fill_next(c, p);
}
