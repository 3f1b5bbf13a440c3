/* allreduce: the ring all-reduce (design and contract in allreduce.h). */
#define _GNU_SOURCE
#include "allreduce.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <zmq.h>

#include "half.h"
#include "log.h"
#include "member.h"
#include "net.h"
#include "ring.h"
#include "secure.h"
#include "timeutil.h"
#include "wire.h"
#include "wmetrics.h"
#include "wpeer.h"
#include "wpump.h"

#define MAX_PIECES 1024    /* pieces per chunk at most (larger pieces for a larger chunk) */

/* PSKV_AR_TRACE=N (operations.md): every N good calls one log line of their
 * means: wall time, the part spent waiting for the previous rank's pieces, and
 * CPU time of the process (ZeroMQ's I/O threads included) and of the caller. */
typedef struct artrace {
    int every;
    long calls;
    int64_t wall_ns, wait_ns;
    double cpu_us, thr_us; /* at the last line */
} artrace;

struct war {
    wpeer out;          /* PUSH to the next rank's listening socket (w->peer_in there),
                           dialled when that rank's node changes */
    uint64_t epoch;     /* the barrier the calls are counted from (w->barrier_seq then) */
    uint64_t seq;       /* calls made since that barrier: the current call's number */
    uint64_t good;      /* ring_id of the last call that succeeded: its members, 0 = none */
    int reform;         /* pskv_allreduce_rejoin passed: the next calls may have new members */
    uint64_t aborted;   /* the latest call this rank failed or passed an abort on for */
    int last_ok;        /* the latest call succeeded (close lets its last pieces leave) */
    atomic_int lent;    /* pieces of the caller's array ZeroMQ still holds (its I/O
                           thread drops them: lent_free) */
    artrace tr;
};

static double cpu_us(int who)
{
    struct rusage u;
    getrusage(who, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

/* A good call of wall_ns ended: counts it, and logs every tr->every calls. */
static void trace_call(artrace *tr, int64_t wall_ns)
{
    tr->wall_ns += wall_ns;
    if (++tr->calls % tr->every)
        return;
    double cpu = cpu_us(RUSAGE_SELF), thr = cpu_us(RUSAGE_THREAD), k = tr->every;
    LOG_I("pskv_allreduce trace: %d calls: %.3f ms a call, %.3f waiting for pieces; CPU %.3f "
          "ms a call, %.3f of it the caller's", tr->every, (double)tr->wall_ns / 1e6 / k,
          (double)tr->wait_ns / 1e6 / k, (cpu - tr->cpu_us) / 1e3 / k,
          (thr - tr->thr_us) / 1e3 / k);
    tr->wall_ns = tr->wait_ns = 0;
    tr->cpu_us = cpu;
    tr->thr_us = thr;
}

/* One call's fixed facts, the same on every rank. */
typedef struct ring {
    pskv_worker *w;
    float *vals;
    uint64_t n, seq, table_id, epoch;
    uint64_t members;      /* ring_id at the start */
    int N, r, op;
    int wire;              /* pskv_wire: values on the wire as fp32, fp16 or bf16 */
    size_t piece;          /* values per piece */
    uint32_t nodes[2];     /* node ids of the previous and next rank at the start */
} ring;

int war_open(pskv_worker *w)
{
    w->ar = calloc(1, sizeof *w->ar);
    if (!w->ar)
        return wst_error(w, PSKV_ENOMEM, "out of memory");
    const char *tr = getenv("PSKV_AR_TRACE");
    char *end = NULL;
    long every = tr ? strtol(tr, &end, 10) : 0;
    if (tr && (end == tr || *end || every < 0 || every > 1000000))
        return wst_error(w, PSKV_EINVAL, "PSKV_AR_TRACE=%s: not a count of calls 0 ... 1000000",
                         tr);
    w->ar->tr.every = (int)every;
    return 0;
}

void war_close(pskv_worker *w)
{
    if (!w->ar)
        return;
    /* after a failure, the abort (and a piece queued before it) still gets to go:
     * a next rank that started late would otherwise never hear why */
    wpeer_close(&w->ar->out, w->ar->last_ok || w->ar->aborted ? WPEER_LINGER_MS : 0);
    free(w->ar);
    w->ar = NULL;
}

/* The ring's members in the latest view: a hash of the node ids of ranks 0..N-1
 * (never 0), or 0 while a rank has no live node. *missing gets the first such rank. */
static uint64_t ring_id(const pskv_worker *w, int *missing)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    *missing = -1;
    for (int k = 0; k < w->nworkers; k++) {
        const Pskv__Node *n = wpeer_rank_node(w, k);
        if (!n) {
            *missing = k;
            return 0;
        }
        h = ring_mix64(h ^ n->id);
    }
    return h ? h : 1;
}

static void ring_meta(const ring *g, Pskv__Meta *m)
{
    wire_meta_init(m, PSKV__MSG_TYPE__ALLREDUCE);
    m->has_job_id = m->has_sender = m->has_request_id = m->has_rank = 1;
    m->job_id = g->w->mb.job_id;
    m->sender = g->w->mb.node_id;
    m->request_id = g->seq;
    m->rank = g->r;
    m->has_ar_n = m->has_ar_op = m->has_table_id = m->has_ar_epoch = 1;
    m->ar_epoch = g->epoch;
    m->ar_n = g->n;
    m->ar_op = (uint32_t)g->op;
    m->table_id = g->table_id;
    if (g->wire != PSKV_WIRE_FP32) {
        m->has_ar_wire = 1;
        m->ar_wire = (uint32_t)g->wire;
    }
}

/* ZeroMQ let go of a piece sent from the caller's array. */
static void lent_free(void *data, void *hint)
{
    (void)data;
    wire_frame_returned(hint);
    atomic_fetch_sub((atomic_int *)hint, 1);
}

/* The piece's values frame (none when cnt is 0): fwd moved in, 16-bit values
 * packed, or fp32 lent from the caller's array. */
static int piece_frame(const ring *g, uint64_t off, uint64_t cnt, zmq_msg_t *fwd, zmq_msg_t *v)
{
    atomic_int *lent = &g->w->ar->lent;
    if (fwd) {
        zmq_msg_init(v);
        zmq_msg_move(v, fwd);
        zmq_msg_close(fwd); /* empty now */
    } else if (cnt && g->wire != PSKV_WIRE_FP32) { /* 16-bit values: converted into the frame */
        if (zmq_msg_init_size(v, cnt * 2) < 0)
            return wst_error(g->w, PSKV_ENOMEM, "pskv_allreduce: out of memory");
        half_pack(g->wire, zmq_msg_data(v), g->vals + off, cnt);
    } else if (cnt) {
        atomic_fetch_add(lent, 1);
        if (wire_frame_lend(v, g->vals + off, cnt * sizeof(float), lent_free, lent) < 0)
            return wst_error(g->w, PSKV_ENOMEM, "pskv_allreduce: out of memory");
    }
    return 0;
}

/* Sends floats [off, off+cnt) of vals as step `step`'s piece, without a copy.
 * The ring writes over a range it sent only when the range comes back around
 * (all-gather), which needs the next rank to have received this piece first, so
 * ZeroMQ has read it by then; the call returns once ZeroMQ let go of every piece
 * (lent_wait). fwd (NULL: none): a received 16-bit frame of exactly these values,
 * sent on as it is (taken over, closed on failure) instead of packing them again.
 * The first piece on a connection waits for its handshake, dialling again after a
 * refused one, within the request time-out (wpeer_send). */
static int send_piece(const ring *g, int step, uint64_t off, uint64_t cnt, zmq_msg_t *fwd)
{
    Pskv__Meta m;
    ring_meta(g, &m);
    m.has_ar_step = m.has_first_key = m.has_num_keys = m.has_width = 1;
    m.ar_step = (uint32_t)step;
    m.first_key = off;
    m.num_keys = cnt;
    m.width = 1;
    zmq_msg_t v;
    int rc = piece_frame(g, off, cnt, fwd, &v);
    if (rc == 0)
        rc = wpeer_send(g->w, &g->w->ar->out, (g->r + 1) % g->N, &m, cnt ? &v : NULL,
                        tu_now_ms() + g->w->request_timeout_ms, "pskv_allreduce");
    if (rc < 0)
        return rc;
    wmet_allreduce_sent(cnt * half_size(g->wire));
    return 0;
}

/* Floats of chunk c: [*b, *e). Chunks differ by at most one float. */
static void chunk_bounds(const ring *g, int c, uint64_t *b, uint64_t *e)
{
    *b = (uint64_t)((unsigned __int128)g->n * (unsigned)c / (unsigned)g->N);
    *e = (uint64_t)((unsigned __int128)g->n * (unsigned)(c + 1) / (unsigned)g->N);
}

static int mod(int a, int N) { return ((a % N) + N) % N; }

/* Tells the next rank this call failed, so the failure goes round the ring. */
static void send_abort(const ring *g, int code, const char *msg)
{
    war *a = g->w->ar;
    if (a->aborted == g->seq || !a->out.sock)
        return;
    a->aborted = g->seq;
    Pskv__Meta m;
    ring_meta(g, &m);
    m.has_error_code = 1;
    m.error_code = code < 0 ? -code : code;
    m.error = (char *)msg;
    int zero = 0; /* an abort never waits for a peer that may be gone */
    zmq_setsockopt(a->out.sock, ZMQ_SNDTIMEO, &zero, sizeof zero);
    wire_send(a->out.sock, NULL, &m, NULL, NULL);
    int five = 5000;
    zmq_setsockopt(a->out.sock, ZMQ_SNDTIMEO, &five, sizeof five);
}

/* 1 when the previous rank's node has said FINISH (left the job) and nothing came
 * from it for longer than its last pieces may take to leave (WPEER_LINGER_MS). */
static int prev_left(const ring *g, int64_t silent_ms)
{
    const Pskv__Node *n = wpeer_rank_node(g->w, mod(g->r - 1, g->N));
    return n && n->state && !strcmp(n->state, "finished") && silent_ms > WPEER_LINGER_MS + 1000;
}

/* A rank of the ring the scheduler declared dead (or replaced) since the call
 * began, or -1. */
static int dead_rank(const ring *g)
{
    for (int k = 0; k < g->N; k++) {
        const Pskv__Node *n = wpeer_rank_node(g->w, k);
        if (!n || (k == mod(g->r - 1, g->N) && n->id != g->nodes[0]) ||
            (k == (g->r + 1) % g->N && n->id != g->nodes[1]))
            return k;
    }
    return -1;
}

/* Waits for the next message of this call from the previous rank, at most the
 * request time-out. Returns 0 with *m filled, or a negated error (last_error set). */
static int next_msg(const ring *g, wire_msg *m, int step)
{
    pskv_worker *w = g->w;
    int prev = mod(g->r - 1, g->N);
    int64_t since = tu_now_ms(), deadline = since + w->request_timeout_ms;
    for (;;) {
        char why[300];
        memset(m, 0, sizeof *m);
        int rc = wire_recv(w->peer_in, 0, m, why, sizeof why);
        if (rc == 0) {
            const Pskv__Meta *h = m->meta;
            int ours = h->type == PSKV__MSG_TYPE__ALLREDUCE && h->job_id == w->mb.job_id &&
                       h->ar_epoch == g->epoch;
            if (ours && h->request_id == g->seq)
                return 0;
            LOG_D("pskv_allreduce: dropped a %s of call %llu from %s (this call: %llu)",
                  wire_type_name((int)h->type), (unsigned long long)h->request_id, m->peer,
                  (unsigned long long)g->seq);
            if (ours && h->request_id > g->seq) {
                wire_msg_close(m);
                return wst_error(w, PSKV_EPROTO, "pskv_allreduce: rank %d is at call %llu, "
                                 "this rank at %llu (a call failed on some ranks only)",
                                 prev, (unsigned long long)h->request_id,
                                 (unsigned long long)g->seq);
            }
        } else if (rc != -PSKV_ETIMEDOUT) {
            LOG_W("pskv_allreduce: dropped a malformed message from %s: %s", m->peer, why);
        }
        wire_msg_close(m);
        if (rc == 0 && tu_now_ms() < deadline)
            continue; /* dropped: the next one (a stream of them still times out) */
        wpump(w, 0); /* views: a peer declared dead */
        int dead = dead_rank(g);
        if (dead >= 0)
            return wst_error(w, PSKV_EPEERDEAD, "pskv_allreduce: rank %d died (the scheduler "
                             "declared it dead or replaced it) during step %d of %d", dead,
                             step, 2 * g->N - 2);
        if (prev_left(g, tu_now_ms() - since))
            return wst_error(w, PSKV_EPEERDEAD, "pskv_allreduce: rank %d left the job (said "
                             "FINISH) without sending step %d of %d", prev, step, 2 * g->N - 2);
        if (member_stop_requested())
            return wst_error(w, PSKV_ECLOSED, "pskv_allreduce: stopped by a signal at step %d "
                             "of %d", step, 2 * g->N - 2);
        int64_t left = deadline - tu_now_ms();
        if (left <= 0)
            return wst_error(w, PSKV_ETIMEDOUT, "pskv_allreduce: nothing from rank %d for %d "
                             "ms at step %d of %d", prev, w->request_timeout_ms, step,
                             2 * g->N - 2);
        zmq_pollitem_t it = {w->peer_in, 0, ZMQ_POLLIN, 0};
        zmq_poll(&it, 1, left < WPEER_PUMP_MS ? left : WPEER_PUMP_MS);
    }
}

/* Checks a piece against what step `step` must bring next: floats from off on, at
 * most `left` of them, at least one unless left is 0 (an empty chunk's one piece).
 * The piece size is the chunk's first sender's: ranks may differ in chunk_bytes. */
static int check_piece(const ring *g, const Pskv__Meta *h, int step, uint64_t off,
                       uint64_t left)
{
    pskv_worker *w = g->w;
    int prev = mod(g->r - 1, g->N);
    if (h->has_error_code)
        return wst_error(w, h->error_code > 0 && h->error_code < PSKV_ERROR_MAX ? h->error_code
                                                                               : PSKV_EPROTO,
                         "%s", h->error ? h->error : "pskv_allreduce: aborted by a peer");
    if (!h->has_rank || h->rank != prev)
        return wst_error(w, PSKV_EPROTO, "pskv_allreduce: a piece from rank %d, expected %d",
                         h->has_rank ? h->rank : -1, prev);
    if (h->ar_n != g->n)
        return wst_error(w, PSKV_EINVAL, "pskv_allreduce: rank %d called with n = %llu, rank "
                         "%d with n = %llu: every rank must give the same n", prev,
                         (unsigned long long)h->ar_n, g->r, (unsigned long long)g->n);
    if ((int)h->ar_wire != g->wire)
        return wst_error(w, PSKV_EINVAL, "pskv_allreduce: rank %d sends %s values, rank %d %s: "
                         "every worker must use the same wire precision (--wire)", prev,
                         half_name((int)h->ar_wire), g->r, half_name(g->wire));
    if ((int)h->ar_op != g->op || h->table_id != g->table_id)
        return wst_error(w, PSKV_EINVAL, "pskv_allreduce: rank %d called with another %s "
                         "than rank %d", prev, (int)h->ar_op != g->op ? "op" : "table", g->r);
    if (!h->has_ar_step || (int)h->ar_step != step || h->first_key != off ||
        h->num_keys > left || (left && !h->num_keys))
        return wst_error(w, PSKV_EPROTO, "pskv_allreduce: rank %d sent step %u [%llu, +%llu), "
                         "expected step %d [%llu, +1..%llu)", prev, h->ar_step,
                         (unsigned long long)h->first_key, (unsigned long long)h->num_keys,
                         step, (unsigned long long)off, (unsigned long long)left);
    return 0;
}

/* Sends chunk c as step `step`, piece by piece (one empty piece when c is). */
static int send_chunk(const ring *g, int step, int c)
{
    uint64_t b, e;
    chunk_bounds(g, c, &b, &e);
    /* at most MAX_PIECES pieces a chunk, well inside the sockets' high-water marks */
    uint64_t piece = (e - b + MAX_PIECES - 1) / MAX_PIECES;
    piece = piece > g->piece ? piece : g->piece;
    for (uint64_t off = b;;) {
        uint64_t cnt = e - off < piece ? e - off : piece;
        int rc = send_piece(g, step, off, cnt, NULL);
        if (rc < 0)
            return rc;
        off += cnt;
        if (off >= e)
            return 0;
    }
}

/* Reduce-scatter step t, 16-bit values: dst += the piece received (h16), divided
 * by N at the last step of a mean and rounded to what the wire carries there (the
 * owner keeps what it hands out), packed into *out (a new frame, the caller's) in
 * the same pass. */
static int reduce16(const ring *g, int t, float *dst, const uint16_t *h16, uint64_t cnt,
                    zmq_msg_t *out)
{
    int last = t == g->N - 2;
    if (zmq_msg_init_size(out, cnt * 2) < 0)
        return wst_error(g->w, PSKV_ENOMEM, "pskv_allreduce: out of memory");
    half_reduce(g->wire, dst, h16, cnt, last && g->op == PSKV_OP_MEAN ? (float)g->N : 1.0f,
                last, zmq_msg_data(out));
    return 0;
}

/* Receives every piece of steps [from, to), reducing (reduce-scatter) or copying
 * (all-gather) it, and sends each on as the next step's piece at once. */
static int run_ring(const ring *g, int from, int to)
{
    for (int t = from; t < to; t++) {
        uint64_t b, e;
        chunk_bounds(g, mod(g->r - t - 1, g->N), &b, &e);
        for (uint64_t off = b;;) {
            wire_msg m;
            int64_t t0 = g->w->ar->tr.every ? tu_now_ns() : 0;
            int rc = next_msg(g, &m, t);
            if (t0)
                g->w->ar->tr.wait_ns += tu_now_ns() - t0;
            if (rc == 0)
                rc = check_piece(g, m.meta, t, off, e - off);
            if (rc < 0) {
                wire_msg_close(&m);
                return rc;
            }
            uint64_t cnt = m.meta->num_keys;
            float *dst = g->vals + off;
            const uint16_t *h16 = (const uint16_t *)(const void *)m.vals;
            zmq_msg_t fwd, *fp = NULL;
            if (t < g->N - 1 && g->wire != PSKV_WIRE_FP32) {
                if (cnt && (rc = reduce16(g, t, dst, h16, cnt, &fwd)) < 0) {
                    wire_msg_close(&m);
                    return rc;
                }
                if (cnt && t + 1 < to)
                    fp = &fwd; /* the next step's piece, packed already */
                else if (cnt)
                    zmq_msg_close(&fwd);
            } else if (t < g->N - 1) {
                for (uint64_t i = 0; i < cnt; i++)
                    dst[i] += m.vals[i];
                if (t == g->N - 2 && g->op == PSKV_OP_MEAN)
                    for (uint64_t i = 0; i < cnt; i++)
                        dst[i] /= (float)g->N;
            } else if (cnt && g->wire != PSKV_WIRE_FP32) {
                half_unpack(g->wire, dst, h16, cnt);
            } else if (cnt) {
                memcpy(dst, m.vals, cnt * sizeof(float));
            }
            /* all-gather, 16-bit: the frame received is what packing dst would make
             * (its values are exact in float), so it goes on as it came */
            if (t >= g->N - 1 && t + 1 < to && cnt && g->wire != PSKV_WIRE_FP32 &&
                m.nframes == 2) {
                zmq_msg_init(&fwd);
                zmq_msg_move(&fwd, &m.frames[1]);
                fp = &fwd;
            }
            wire_msg_close(&m);
            if (t + 1 < to && (rc = send_piece(g, t + 1, off, cnt, fp)) < 0)
                return rc;
            off += cnt;
            if (off >= e)
                break;
        }
    }
    return 0;
}

/* Fills g's nodes and dials the next rank (so that an abort reaches it when the
 * call fails here). The members must be every rank's live node, and those of the
 * last call that succeeded: a rank taken over since fails the call (and, by the
 * abort, every rank's) until every rank meets again (pskv_allreduce_rejoin). */
static int ring_start(ring *g)
{
    pskv_worker *w = g->w;
    war *a = w->ar;
    wpump(w, 0); /* the latest view */
    const Pskv__Node *prev = wpeer_rank_node(w, mod(g->r - 1, g->N));
    const Pskv__Node *next = wpeer_rank_node(w, (g->r + 1) % g->N);
    int rc = next ? wpeer_dial(w, &a->out, next, "pskv_allreduce") : 0;
    if (rc < 0)
        return rc;
    int missing;
    uint64_t id = ring_id(w, &missing);
    if (!id)
        return wst_error(w, PSKV_EPEERDEAD, "pskv_allreduce: rank %d is not in the job "
                         "(dead or not joined)", missing);
    if (a->good && !a->reform && id != a->good)
        return wst_error(w, PSKV_EPEERDEAD, "pskv_allreduce: a rank was taken over by a new "
                         "worker since the ring's last call: every rank must meet again "
                         "(pskv_allreduce_rejoin)");
    g->members = id;
    g->nodes[0] = prev->id;
    g->nodes[1] = next->id;
    return 0;
}

/* Waits until ZeroMQ let go of every piece of the caller's array: at most the
 * request time-out after a good call; after a failure, or once the view shows
 * the next rank dead (a good call's last pieces to a rank that died), pieces
 * queued to a next rank that may be gone are dropped (its connection closed)
 * after 100 ms. */
static void lent_wait(pskv_worker *w, int failed)
{
    war *a = w->ar;
    int64_t t0 = tu_now_ms(), pumped = t0;
    int64_t limit = failed ? 100 : w->request_timeout_ms;
    while (atomic_load(&a->lent) > 0) {
        if (limit > 100 && a->out.sock && tu_now_ms() - pumped >= WPEER_PUMP_MS) {
            wpump(w, 0);
            pumped = tu_now_ms();
            const Pskv__Node *nx = wpeer_rank_node(w, (w->mb.rank + 1) % w->nworkers);
            if (!nx || nx->id != a->out.node)
                limit = 100;
        }
        if (tu_now_ms() - t0 > limit && a->out.sock) {
            LOG_W("pskv_allreduce: %d pieces still queued to rank %d's node %u after %lld ms: "
                  "dropping its connection", atomic_load(&a->lent),
                  (w->mb.rank + 1) % w->nworkers, a->out.node, (long long)limit);
            wpeer_close(&a->out, 0);
            t0 = tu_now_ms();
            limit = 5000;
        } else if (tu_now_ms() - t0 > limit) {
            LOG_E("pskv_allreduce: ZeroMQ still holds %d pieces of the caller's array",
                  atomic_load(&a->lent));
            return;
        }
        nanosleep(&(struct timespec){0, 50000}, NULL);
    }
}

int pskv_allreduce_rejoin(pskv_worker *w, int timeout_ms)
{
    if (!w || !w->ar)
        return w ? wst_error(w, PSKV_EINVAL, "pskv_allreduce_rejoin: no all-reduce socket")
                 : -PSKV_EINVAL;
    int64_t deadline = tu_now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
    for (;;) {
        wpump(w, 0);
        int missing;
        uint64_t id = ring_id(w, &missing);
        if (id && id != w->ar->good) /* the new worker's view: any */
            break;
        if (missing >= 0) /* pskvctl status shows it (heartbeats) */
            atomic_store(&w->ar_waiting, missing + 1);
        int64_t left = deadline - tu_now_ms();
        if (left <= 0 || member_stop_requested())
            atomic_store(&w->ar_waiting, 0);
        if (member_stop_requested())
            return wst_error(w, PSKV_ECLOSED, "pskv_allreduce_rejoin: stopped by a signal");
        if (left <= 0)
            return missing >= 0
                       ? wst_error(w, PSKV_ETIMEDOUT, "rank %d has no live worker after %d ms: "
                                   "nobody took it over (start a worker with --rank %d)",
                                   missing, timeout_ms, missing)
                       : wst_error(w, PSKV_ETIMEDOUT, "no rank was taken over by a new worker "
                                   "in %d ms", timeout_ms);
        wpump(w, left < WPEER_PUMP_MS ? left : WPEER_PUMP_MS);
    }
    /* the barrier starts a new epoch: calls are counted afresh on every rank */
    int64_t left = deadline - tu_now_ms();
    int rc = pskv_barrier(w, left > 0 ? (int)left : 0);
    atomic_store(&w->ar_waiting, 0);
    w->ar->reform = rc == 0;
    return rc;
}

int pskv_took_over(const pskv_worker *w)
{
    return w ? w->took_over : 0;
}

/* Steps [from, to) of the ring over vals: both halves (pskv_allreduce), the
 * reduce-scatter (0 .. N-2) or the all-gather (N-1 .. 2N-3, fp32 whatever the
 * wire: it hands out weights). */
static int ring_call(pskv_worker *w, int table, float *vals, size_t n, pskv_op op, int from,
                     int to, int fp32)
{
    if (!w || !w->ar || (!vals && n) || (op != PSKV_OP_SUM && op != PSKV_OP_MEAN))
        return w ? wst_error(w, PSKV_EINVAL, "pskv_allreduce: bad arguments (vals NULL or op "
                             "not PSKV_OP_SUM or PSKV_OP_MEAN)") : -PSKV_EINVAL;
    if (table < -1 || table >= w->ntables)
        return wst_error(w, PSKV_EINVAL, "pskv_allreduce: no open table %d", table);
    ring g = {.w = w, .vals = vals, .n = n, .op = op, .N = w->nworkers, .r = w->mb.rank,
              .wire = fp32 ? PSKV_WIRE_FP32 : w->ar_wire};
    war *a = w->ar;
    if (a->epoch != w->barrier_seq) { /* every rank passed the same barriers */
        a->epoch = w->barrier_seq;
        a->seq = 0;
        a->aborted = 0;
    }
    g.epoch = a->epoch;
    g.seq = ++a->seq;
    g.table_id = table >= 0 ? w->tables[table].id : 0;
    size_t vsize = half_size(g.wire);
    g.piece = w->chunk_bytes / vsize ? w->chunk_bytes / vsize : 1;
    w->ar->last_ok = 0;
    if (g.N <= 1) {
        if (g.wire != PSKV_WIRE_FP32)
            half_round(g.wire, vals, n);
        w->ar->last_ok = 1;
        return 0; /* the sum and the mean of one are the values */
    }
    if (to < 0)
        to = 2 * g.N - 2;
    int64_t t0 = tu_now_ns(), waited = a->tr.wait_ns; /* a failed call's wait is not traced */
    int rc = ring_start(&g);
    if (rc == 0) /* step `from` sends chunk r - from */
        rc = send_chunk(&g, from, mod(g.r - from, g.N));
    if (rc == 0)
        rc = run_ring(&g, from, to);
    if (rc < 0) {
        char msg[600];
        /* an abort received says which rank saw what; one made here says it */
        if (strncmp(w->last_error, "rank ", 5))
            snprintf(msg, sizeof msg, "rank %d: %.500s", g.r, w->last_error);
        else
            snprintf(msg, sizeof msg, "%s", w->last_error);
        wst_error(w, rc, "%.500s", msg);
        send_abort(&g, rc, msg);
        lent_wait(w, 1);
        a->tr.wait_ns = waited;
        return rc;
    }
    lent_wait(w, 0);
    if (a->tr.every)
        trace_call(&a->tr, tu_now_ns() - t0);
    w->ar->last_ok = 1;
    w->ar->good = g.members;
    w->ar->reform = 0;
    return 0;
}

int pskv_allreduce(pskv_worker *w, int table, float *vals, size_t n, pskv_op op)
{
    return ring_call(w, table, vals, n, op, 0, -1, 0);
}

void pskv_allreduce_slice(const pskv_worker *w, size_t n, size_t *first, size_t *count)
{
    int N = w && w->nworkers > 0 && w->mb.rank >= 0 ? w->nworkers : 1;
    ring g = {.n = n, .N = N};
    uint64_t b, e;
    chunk_bounds(&g, N > 1 ? (w->mb.rank + 1) % N : 0, &b, &e);
    *first = (size_t)b;
    *count = (size_t)(e - b);
}

int pskv_reduce_scatter(pskv_worker *w, int table, float *vals, size_t n, pskv_op op)
{
    return ring_call(w, table, vals, n, op, 0, w ? w->nworkers - 1 : 0, 0);
}

int pskv_allgather(pskv_worker *w, int table, float *vals, size_t n)
{
    return ring_call(w, table, vals, n, PSKV_OP_SUM, w ? w->nworkers - 1 : 0, -1, 1);
}

