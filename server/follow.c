/* follow: readers following a namespace (design in follow.h). */
#define _GNU_SOURCE
#include "follow.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "grow.h"
#include "log.h"
#include "pskv_errors.h"
#include "store/nspace.h"
#include "timeutil.h"

#define RID_MAX 256
#define FOLLOW_FULL_ROWS 65536 /* rows of a full copy sent per sync and reader */

/* One reader's subscription. */
typedef struct sub {
    unsigned char rid[RID_MAX]; /* its routing id on the data socket */
    size_t rid_len;
    char ns[NSPACE_MAX + 1];
    uint32_t sync_ms;
    int64_t renewed_ms; /* its last FOLLOW */
    int owed_full;      /* a full copy of every table is owed (not begun) */
    int in_full;        /* a full copy is being sent, FOLLOW_FULL_ROWS rows a sync */
    size_t full_tab;    /* ... at table full_tab (tables_at order), row position full_cur */
    uint64_t full_cur;
    int64_t target;     /* dense parts wanted at the first boundary >= this (-1: none) */
    int64_t asked_ms;   /* when target was set */
    uint64_t seq;       /* FOLLOW_DATA sent so far */
    int64_t dense_sync; /* its namespace's dense parts last went whole after this
                         * many syncs (follow's syncs; -1: not since its full copy
                         * began, or a send was dropped) */
    int64_t dense_tags; /* ... and the sum of their clock tags then */
    int dropping;       /* its last FOLLOW_DATA was dropped (logged once a stretch) */
    int gone;           /* its connection is closed (a reconnect is a new reader) */
} sub;

/* The changed rows of one sparse table, gathered once per sync for every reader. */
typedef struct gather {
    follow *f;
    const table *t;
    uint64_t *keys;
    float *vals;
    size_t n, kcap, vcap;
} gather;

/* When a table's writes were last seen by a sync. */
typedef struct written {
    int64_t ms;    /* its time */
    uint64_t sync; /* its number (follow's syncs): orders it against a send in the same ms */
    int mid_round; /* a dense table written since the last worker CLOCK (follow_clock):
                    * its values hold part of a round its clock tag does not cover */
} written;

struct follow {
    void *router;
    member *mb;
    table_set *tables;
    chain *ch;
    consist *cons;
    sub subs[FOLLOW_MAX_SUBS];
    int nsubs;
    int64_t synced_ms; /* the last sync of changed rows */
    written *written;  /* per table (tables_at order): when a write was last seen */
    size_t nquiet;
    uint64_t syncs;    /* syncs of changed rows begun */
    gather g;
    /* after a placement change, dense parts wait until every worker of the clock
     * set has sent two CLOCKs on the new placement (settled, follow_worker_clock) */
    int settling;
    unsigned char *confirmed; /* per rank: such CLOCKs counted (up to 2) */
    int nconfirmed;           /* ranks confirmed has room for */
};

follow *follow_new(void *router, member *mb, table_set *tables, chain *ch, consist *cons)
{
    follow *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->router = router;
    f->mb = mb;
    f->tables = tables;
    f->ch = ch;
    f->cons = cons;
    return f;
}

void follow_destroy(follow **self_p)
{
    if (!self_p || !*self_p)
        return;
    follow *f = *self_p;
    free(f->g.keys);
    free(f->g.vals);
    free(f->written);
    free(f->confirmed);
    free(f);
    *self_p = NULL;
}

static int headed(const follow *f, const table *t, uint64_t key)
{
    return chain_heads(f->ch, chain_partition_of(f->ch, t, key));
}

/* Sends one FOLLOW_DATA to s: n rows, their keys in frame km and their values in
 * frame vm (vm NULL: the keys are rows eviction removed, follow_removed); the
 * frames are taken (closed, sent or not; NULL when n is 0). Returns 0, or -1
 * when the send was dropped: a gap the reader notices. */
static int send_frames(follow *f, sub *s, const table *t, zmq_msg_t *km, zmq_msg_t *vm,
                       size_t n, int full, int dense, int64_t clock)
{
    Pskv__Meta m;
    member_meta(f->mb, &m, PSKV__MSG_TYPE__FOLLOW_DATA);
    m.has_table_id = m.has_width = m.has_num_keys = m.has_clock = m.has_follow_seq = 1;
    m.table_id = t->id;
    m.width = t->width;
    m.num_keys = n;
    m.clock = clock;
    m.follow_seq = ++s->seq;
    m.follow_table = (char *)t->name;
    m.has_follow_full = m.follow_full = full;
    m.has_follow_dense = m.follow_dense = dense;
    m.has_follow_size = dense;
    m.follow_size = t->size;
    m.has_follow_removed = m.follow_removed = n && !vm;
    if (!n) { /* no frames: the message says only "nothing (more) here" */
        if (km)
            zmq_msg_close(km);
        if (vm)
            zmq_msg_close(vm);
        km = vm = NULL;
    }
    zmq_msg_t rid;
    zmq_msg_init_size(&rid, s->rid_len);
    memcpy(zmq_msg_data(&rid), s->rid, s->rid_len);
    /* never waited for: a reader that stopped taking its rows (its queue at the
     * socket's SNDHWM) must not hold up the loop that applies the pushes */
    int rc = wire_send_nowait(f->router, &rid, &m, km, vm);
    zmq_msg_close(&rid);
    if (rc < 0 && errno == EHOSTUNREACH) /* its connection closed: it dials anew */
        s->gone = 1;
    else if (rc < 0 && !s->dropping)
        LOG_I("a reader of namespace '%s' does not take its rows (its queue is full): "
              "FOLLOW_DATA dropped until it does; it will ask for a full copy", s->ns);
    s->dropping = rc < 0;
    return rc < 0 ? -1 : 0;
}

/* Sends one FOLLOW_DATA of n rows (keys, width values each) to s; vals NULL: the
 * n keys are rows eviction removed. The rows are copied into the frames. */
static void send_rows(follow *f, sub *s, const table *t, const uint64_t *keys, const float *vals,
                      size_t n, int full, int dense, int64_t clock)
{
    zmq_msg_t km, vm;
    if (n) {
        size_t vb = vals ? n * t->width * sizeof(float) : 0;
        if (zmq_msg_init_size(&km, n * sizeof *keys)) {
            LOG_W("out of memory sending %s to a reader", t->name);
            return;
        }
        if (vals && zmq_msg_init_size(&vm, vb)) {
            zmq_msg_close(&km);
            LOG_W("out of memory sending %s to a reader", t->name);
            return;
        }
        memcpy(zmq_msg_data(&km), keys, n * sizeof *keys);
        if (vals)
            memcpy(zmq_msg_data(&vm), vals, vb);
    }
    send_frames(f, s, t, n ? &km : NULL, n && vals ? &vm : NULL, n, full, dense, clock);
}

/* Appends one row (values only) to the gather. */
static int gather_row(void *ctx, uint64_t key, const float *row)
{
    gather *g = ctx;
    if (!headed(g->f, g->t, key))
        return 0;
    size_t w = g->t->width;
    if ((g->n + 1 > g->kcap && /* a call only when the buffers double */
         grow_array((void **)&g->keys, &g->kcap, g->n + 1, sizeof *g->keys) < 0) ||
        ((g->n + 1) * w > g->vcap &&
         grow_array((void **)&g->vals, &g->vcap, (g->n + 1) * w, sizeof *g->vals) < 0))
        return -1;
    g->keys[g->n] = key;
    memcpy(g->vals + g->n * w, row, w * sizeof *row);
    g->n++;
    return 0;
}

/* Appends the key of a removed row this server heads to the gather (keys only). */
static int gather_gone(void *ctx, uint64_t key)
{
    gather *g = ctx;
    if (!headed(g->f, g->t, key))
        return 0;
    if (grow_array((void **)&g->keys, &g->kcap, g->n + 1, sizeof *g->keys) < 0)
        return -1;
    g->keys[g->n++] = key;
    return 0;
}

/* The part of dense table t this server heads, as the frames of a FOLLOW_DATA:
 * the spans of the partitions it heads, their keys into km and their values
 * (no optimizer state) into vm, copied once from the shard. Returns the rows,
 * or -PSKV_ENOMEM (no frame is left open). */
static int64_t dense_frames(follow *f, const table *t, zmq_msg_t *km, zmq_msg_t *vm)
{
    uint32_t np = chain_nparts(f->ch);
    uint64_t lo = shard_dense_first(t->sh), hi = lo + shard_dense_count(t->sh), n = 0;
    uint64_t first, count;
    for (int pass = 0; pass < 2; pass++) { /* count, then copy */
        uint64_t *keys = pass ? zmq_msg_data(km) : NULL;
        float *vals = pass ? zmq_msg_data(vm) : NULL;
        uint64_t k = 0;
        for (uint32_t p = 0; p < np; p++) {
            if (!chain_heads(f->ch, p))
                continue;
            chain_dense_span(f->ch, t, p, &first, &count);
            uint64_t a = first > lo ? first : lo, b = first + count < hi ? first + count : hi;
            if (a >= b)
                continue;
            if (pass) {
                for (uint64_t i = a; i < b; i++)
                    keys[k + i - a] = i;
                shard_pull(t->sh, NULL, a, b - a, vals + k * t->width);
            }
            k += b - a;
        }
        if (pass)
            break;
        n = k;
        if (zmq_msg_init_size(km, n * sizeof(uint64_t)))
            return -PSKV_ENOMEM;
        if (zmq_msg_init_size(vm, n * t->width * sizeof(float))) {
            zmq_msg_close(km);
            return -PSKV_ENOMEM;
        }
    }
    return (int64_t)n;
}

/* The clock table t's values here reflect, as a reader tags them: bsp's closed
 * clocks; else the smallest clock the workers' own CLOCK messages to this server
 * finished (with replicas the consistency engine counts only the clocks heads
 * forward, which async tables do not; a head's own count is what its rows hold). */
static int64_t tag_clock(follow *f, table *t)
{
    if (t->model == CONS_BSP)
        return consist_values_clock(f->cons, t); /* its closed clocks */
    const int64_t *vc;
    int n = consist_clocks(f->cons, &vc);
    int64_t lo = -1;
    for (int r = 0; r < n; r++)
        lo = lo < 0 || vc[r] < lo ? vc[r] : lo;
    return lo < 0 ? 0 : lo;
}

/* 1 when dense parts may go: no placement change is settling, or every worker of
 * the clock set has sent two CLOCKs on the new placement since. Until the first
 * the values of partitions this server took over may lack pushes their worker
 * still has to re-send here, while the clock it counted before the change says
 * they are in: a part tagged so would mix two clocks at the reader. The first is
 * no boundary either: a worker sends it once its re-sends are acknowledged
 * (wview_catch_up), when the pushes of the round it is in may be here already;
 * the second comes right after a round's pushes, as every CLOCK does. */
static int settled(follow *f)
{
    if (!f->settling)
        return 1;
    const int64_t *vc;
    int n = consist_clocks(f->cons, &vc);
    for (int r = 0; r < n; r++)
        if (consist_in_set(f->cons, r) && (r >= f->nconfirmed || f->confirmed[r] < 2))
            return 0;
    f->settling = 0;
    LOG_I("every worker clocked on the new placement: dense parts go to readers again");
    return 1;
}

void follow_worker_clock(follow *f, int rank)
{
    if (!f || !f->settling || rank < 0)
        return;
    if (rank >= f->nconfirmed) {
        int n = rank + 1 > 2 * f->nconfirmed ? rank + 1 : 2 * f->nconfirmed;
        unsigned char *c = realloc(f->confirmed, (size_t)n);
        if (!c) {
            LOG_W("out of memory following clocks: dense parts wait for the job's end");
            return;
        }
        memset(c + f->nconfirmed, 0, (size_t)(n - f->nconfirmed));
        f->confirmed = c;
        f->nconfirmed = n;
    }
    f->confirmed[rank] += f->confirmed[rank] < 2;
}

static int ns_follows(const follow *f, const char *ns)
{
    for (int i = 0; i < f->nsubs; i++)
        if (!strcmp(f->subs[i].ns, ns))
            return 1;
    return 0;
}

/* The sum of the clock tags of ns's dense tables: what changes when any does. */
static int64_t dense_tags(follow *f, const char *ns)
{
    int64_t sum = 0;
    for (size_t i = 0; i < tables_count(f->tables); i++) {
        table *t = tables_at(f->tables, i);
        sum += t->dense && !strcmp(t->ns, ns) ? tag_clock(f, t) : 0;
    }
    return sum;
}

/* Sends s every dense table of its namespace, each tagged with its values clock. */
static void send_dense(follow *f, sub *s)
{
    int ok = 1;
    for (size_t i = 0; i < tables_count(f->tables); i++) {
        table *t = tables_at(f->tables, i);
        if (!t->dense || strcmp(t->ns, s->ns))
            continue;
        zmq_msg_t km, vm;
        int64_t n = dense_frames(f, t, &km, &vm);
        if (n < 0) {
            LOG_W("out of memory sending %s to a reader", t->name);
            ok = 0;
            continue;
        }
        ok &= send_frames(f, s, t, &km, &vm, (size_t)n, 1, 1, tag_clock(f, t)) == 0;
    }
    s->target = -1;
    s->dense_sync = ok ? (int64_t)f->syncs : -1;
    s->dense_tags = dense_tags(f, s->ns);
}

/* Sends s up to budget more rows of the full copy it is owed or being sent: the
 * sparse tables of its namespace in slices (each at least one message); the dense
 * ones are then owed at the next clock boundary (target 0). Deltas flow to s
 * meanwhile (sync_changes): a row changed after its slice went comes again. */
static void step_full(follow *f, sub *s, uint64_t budget)
{
    if (s->owed_full) {
        s->owed_full = 0;
        s->in_full = 1;
        s->full_tab = 0;
        s->full_cur = 0;
        s->dense_sync = -1; /* its dense parts go whole after the sparse tables */
    }
    while (s->in_full && budget > 0) {
        table *t = NULL;
        for (; s->full_tab < tables_count(f->tables) && !t; s->full_tab += !t) {
            table *c = tables_at(f->tables, s->full_tab);
            t = !c->dense && !strcmp(c->ns, s->ns) ? c : NULL;
        }
        if (!t) { /* the sparse tables are all sent: the dense ones, whole, at the next
                   * clock boundary (follow_clock; settled): sent now, in the middle of a
                   * round, a part would hold some of the round's pushes and not others,
                   * under the clock before it */
            s->in_full = 0;
            s->target = 0;
            s->asked_ms = tu_now_ms();
            return;
        }
        f->g = (gather){f, t, f->g.keys, f->g.vals, 0, f->g.kcap, f->g.vcap};
        uint64_t from = s->full_cur;
        int rc = shard_scan(t->sh, &s->full_cur, budget, gather_row, &f->g);
        if (rc < 0) {
            LOG_W("out of memory copying %s for a reader: the copy goes on next sync", t->name);
            s->full_cur = from;
            return;
        }
        send_rows(f, s, t, f->g.keys, f->g.vals, f->g.n, 1, 0, tag_clock(f, t));
        budget -= s->full_cur - from < budget ? s->full_cur - from : budget;
        if (rc == 1) {
            s->full_tab++;
            s->full_cur = 0;
        }
    }
}

/* Every reader is owed full copies. */
static void owe_full(follow *f)
{
    for (int i = 0; i < f->nsubs; i++)
        f->subs[i].owed_full = 1;
}

/* The smallest values clock of ns's dense tables (INT64_MAX: none). */
static int64_t dense_clock(follow *f, const char *ns)
{
    int64_t lo = INT64_MAX;
    for (size_t i = 0; i < tables_count(f->tables); i++) {
        table *t = tables_at(f->tables, i);
        int64_t c = t->dense && !strcmp(t->ns, ns) ? tag_clock(f, t) : lo;
        lo = c < lo ? c : lo;
    }
    return lo;
}

/* At a worker's CLOCK: the writes to followed dense tables so far belong to the
 * rounds the clock tags cover; taken (counted) now, so a write a sync sees later is
 * one of the next round (mid_round). */
static void dense_boundary(follow *f)
{
    int64_t now = tu_now_ms();
    for (size_t i = 0; i < tables_count(f->tables) && i < f->nquiet; i++) {
        table *t = tables_at(f->tables, i);
        if (!t->dense || !ns_follows(f, t->ns))
            continue;
        int n = shard_follow_taken(t->sh, NULL, NULL);
        if (n != 0)
            f->written[i] = (written){now, f->syncs, 0};
        f->written[i].mid_round = 0;
        if (n < 0) { /* bits or memory lost: everyone gets everything again */
            shard_follow_on(t->sh);
            owe_full(f);
        }
    }
}

void follow_clock(follow *f)
{
    if (!f || !f->nsubs)
        return;
    dense_boundary(f);
    for (int i = 0; i < f->nsubs; i++) {
        sub *s = &f->subs[i];
        if (s->target >= 0 && !s->owed_full && !s->in_full && settled(f) &&
            dense_clock(f, s->ns) >= s->target)
            send_dense(f, s);
    }
}

void follow_placement(follow *f)
{
    if (!f)
        return;
    owe_full(f);
    f->settling = 1;
    if (f->confirmed)
        memset(f->confirmed, 0, (size_t)f->nconfirmed);
}

int follow_request(follow *f, wire_msg *msg, char *why, size_t whylen)
{
    Pskv__Meta *r = msg->meta;
    const char *ns = r->follow_ns ? r->follow_ns : "";
    if (strlen(ns) > NSPACE_MAX || strchr(ns, '/')) {
        snprintf(why, whylen, "FOLLOW: namespace '%.80s' is not a namespace name", ns);
        return -PSKV_EPROTO;
    }
    if (!r->has_follow_sync_ms || r->follow_sync_ms < 10 || r->follow_sync_ms > 60000) {
        snprintf(why, whylen, "FOLLOW: follow_sync_ms must be 10..60000 (got %u)",
                 r->follow_sync_ms);
        return -PSKV_EPROTO;
    }
    int rc = nspace_access(msg->bind, ns, 0, why, whylen);
    if (rc < 0)
        return rc;
    int known = 0;
    for (size_t i = 0; i < tables_count(f->tables) && !known; i++)
        known = !strcmp(tables_at(f->tables, i)->ns, ns);
    if (!known) {
        snprintf(why, whylen, "namespace '%s' has no tables on this server (open one first, "
                 "or check the name)", ns);
        return -PSKV_ENOTABLE;
    }
    size_t len = zmq_msg_size(&msg->rid);
    if (!msg->has_rid || len == 0 || len > RID_MAX) {
        snprintf(why, whylen, "FOLLOW without a routing id");
        return -PSKV_EPROTO;
    }
    sub *s = NULL;
    for (int i = 0; i < f->nsubs && !s; i++)
        if (f->subs[i].rid_len == len && !memcmp(f->subs[i].rid, zmq_msg_data(&msg->rid), len))
            s = &f->subs[i];
    if (!s) {
        if (f->nsubs == FOLLOW_MAX_SUBS) {
            snprintf(why, whylen, "this server already has %d readers following", f->nsubs);
            return -PSKV_EREFUSED;
        }
        s = &f->subs[f->nsubs++];
        memset(s, 0, sizeof *s);
        memcpy(s->rid, zmq_msg_data(&msg->rid), len);
        s->rid_len = len;
        s->owed_full = 1;
        s->target = -1;
        s->dense_sync = -1;
        LOG_I("a reader at %s follows namespace '%s' every %u ms", msg->peer, ns,
              r->follow_sync_ms);
    }
    for (size_t i = 0; i < tables_count(f->tables); i++) { /* keep their changes from now */
        table *t = tables_at(f->tables, i);
        if (!strcmp(t->ns, ns) && shard_follow_on(t->sh) < 0) {
            snprintf(why, whylen, "out of memory following table %s", t->name);
            return -PSKV_ENOMEM;
        }
    }
    snprintf(s->ns, sizeof s->ns, "%s", ns);
    s->sync_ms = r->follow_sync_ms;
    s->renewed_ms = tu_now_ms();
    s->gone = 0; /* it speaks: its connection is there */
    if (r->has_follow_full && r->follow_full) {
        s->owed_full = 1;
        s->seq = 0;
    }
    if (r->has_follow_target && r->follow_target >= 0 && s->target < 0) {
        s->target = r->follow_target;
        s->asked_ms = s->renewed_ms;
    }
    return 0;
}

void follow_forget_ns(follow *f, const char *ns)
{
    if (!f)
        return;
    for (int i = 0; i < f->nsubs; i++)
        if (!strcmp(f->subs[i].ns, ns)) {
            LOG_I("namespace '%s' dropped: a reader following it unsubscribed", ns);
            f->subs[i--] = f->subs[--f->nsubs];
        }
    /* the tables of ns leave the set, the others keep their order: indices move down */
    size_t nt = tables_count(f->tables), keep = 0, was[FOLLOW_MAX_SUBS];
    for (int k = 0; k < f->nsubs; k++)
        was[k] = f->subs[k].full_tab;
    for (size_t i = 0; i < nt; i++) {
        int gone = !strcmp(tables_at(f->tables, i)->ns, ns);
        for (int k = 0; gone && k < f->nsubs; k++)
            f->subs[k].full_tab -= was[k] > i;
        if (!gone && i < f->nquiet)
            f->written[keep++] = f->written[i];
    }
    if (f->nquiet > keep)
        f->nquiet = keep;
}

/* 1 when ns's dense tables were all written to last before `since`, and none
 * since the last worker CLOCK: training paused at a clock boundary. A pause in the
 * middle of a round (a worker slow between its pushes, a loaded machine) is none:
 * the values would hold some of the round's pushes under the clock before it. */
static int dense_quiet(const follow *f, const char *ns, int64_t since)
{
    for (size_t i = 0; i < tables_count(f->tables); i++) {
        const table *t = tables_at(f->tables, i);
        if (t->dense && !strcmp(t->ns, ns) &&
            (i >= f->nquiet || f->written[i].ms > since || f->written[i].mid_round))
            return 0;
    }
    return 1;
}

/* 1 when s was sent its namespace's dense parts whole and none has changed
 * since: no dense table of it written after (a write after the send is seen by a
 * later sync; one before it, by that sync or an earlier one: at worst sent
 * twice), and the same clock tags. */
static int dense_unchanged(follow *f, const sub *s)
{
    if (s->dense_sync < 0)
        return 0;
    for (size_t i = 0; i < tables_count(f->tables); i++) {
        table *t = tables_at(f->tables, i);
        if (t->dense && !strcmp(t->ns, s->ns) &&
            (i >= f->nquiet || f->written[i].sync > (uint64_t)s->dense_sync))
            return 0;
    }
    return dense_tags(f, s->ns) == s->dense_tags;
}

/* Sends the gathered rows of sparse table t (vals NULL: removed keys) to every
 * reader of its namespace that is not owed a full copy. */
static void send_changes(follow *f, table *t, const float *vals)
{
    if (!f->g.n)
        return;
    for (int k = 0; k < f->nsubs; k++) {
        sub *s = &f->subs[k];
        if (!s->owed_full && !strcmp(s->ns, t->ns))
            send_rows(f, s, t, f->g.keys, vals, f->g.n, 0, 0, tag_clock(f, t));
    }
}

/* Takes every followed table's changes once; sends the sparse ones to the
 * readers in step (a reader owed a full copy gets that instead). */
static void sync_changes(follow *f, int64_t now)
{
    size_t nt = tables_count(f->tables);
    f->syncs++;
    if (f->nquiet < nt) {
        written *q = realloc(f->written, nt * sizeof *q);
        if (!q)
            return;
        /* a table first seen counts as written now, at a boundary: a round in
         * progress writes again and marks it mid_round; a namespace whose training
         * ended (no CLOCK will come) is sent once quiet */
        for (size_t i = f->nquiet; i < nt; i++)
            q[i] = (written){now, f->syncs, 0};
        f->written = q;
        f->nquiet = nt;
    }
    for (size_t i = 0; i < nt; i++) {
        table *t = tables_at(f->tables, i);
        if (!ns_follows(f, t->ns))
            continue;
        f->g = (gather){f, t, f->g.keys, f->g.vals, 0, f->g.kcap, f->g.vcap};
        /* rows eviction removed go first: a key removed and written again since
         * is in both, and the reader applies them in order */
        int64_t gone = t->dense ? 0 : shard_follow_gone(t->sh, gather_gone, &f->g);
        if (gone < 0) { /* more than the shard keeps: everyone gets everything again */
            owe_full(f);
            continue;
        }
        send_changes(f, t, NULL);
        f->g = (gather){f, t, f->g.keys, f->g.vals, 0, f->g.kcap, f->g.vcap};
        /* a dense table's rows are only counted (its parts go whole at a boundary) */
        int n = shard_follow_taken(t->sh, t->dense ? NULL : gather_row, &f->g);
        if (n != 0)
            f->written[i] = (written){now, f->syncs, t->dense};
        if (n < 0) { /* bits or memory lost: everyone gets everything again */
            shard_follow_on(t->sh);
            owe_full(f);
            continue;
        }
        if (!t->dense)
            send_changes(f, t, f->g.vals);
    }
}

void follow_tick(follow *f)
{
    if (!f || !f->nsubs)
        return;
    int64_t now = tu_now_ms();
    for (int i = 0; i < f->nsubs; i++) {
        const char *why = f->subs[i].gone ? "closed its connection"
                          : now - f->subs[i].renewed_ms > FOLLOW_LAPSE_MS ? "stopped renewing"
                                                                          : NULL;
        if (!why)
            continue;
        LOG_I("a reader of namespace '%s' %s: unsubscribed", f->subs[i].ns, why);
        f->subs[i--] = f->subs[--f->nsubs];
    }
    uint32_t every = 60000;
    for (int i = 0; i < f->nsubs; i++)
        every = f->subs[i].sync_ms < every ? f->subs[i].sync_ms : every;
    if (!f->nsubs || now - f->synced_ms < (int64_t)every)
        return;
    f->synced_ms = now;
    sync_changes(f, now);
    for (int i = 0; i < f->nsubs; i++) {
        sub *s = &f->subs[i];
        if (s->owed_full || s->in_full)
            step_full(f, s, FOLLOW_FULL_ROWS);
        else if (s->target >= 0 && now - s->asked_ms >= s->sync_ms &&
                 dense_quiet(f, s->ns, now - s->sync_ms) && settled(f)) {
            if (dense_unchanged(f, s))
                s->target = -1; /* it holds these very parts: nothing to copy */
            else
                send_dense(f, s); /* training paused or ended: this is what it holds */
        }
    }
}

void follow_final(follow *f)
{
    if (!f || !f->nsubs)
        return;
    sync_changes(f, tu_now_ms());
    for (int i = 0; i < f->nsubs; i++) {
        if (f->subs[i].owed_full || f->subs[i].in_full)
            step_full(f, &f->subs[i], UINT64_MAX);
        send_dense(f, &f->subs[i]); /* training is over: what it holds is whole */
    }
}
