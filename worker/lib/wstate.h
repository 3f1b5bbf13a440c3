/* wstate: the private state of a libpskv worker handle, shared by the library's
 * modules. INTERNAL to libpskv: not installed, never included by apps (they see
 * only pskv.h and the opaque pskv_worker).
 *
 * Design: the calling thread owns every data socket (one DEALER per server, one
 * to the scheduler); ZeroMQ's own I/O thread moves the bytes, so requests sent by
 * push/pull travel while the caller computes, and replies are applied when the
 * caller next enters the library (wait, push, pull, barrier). A second thread
 * sends heartbeats on a socket of its own and touches nothing else.
 *
 * A request (push, pull or table open) is split into parts, one per owning
 * server, all sent at once. A push copies the caller's values once into a
 * reference-counted buffer whose slices ZeroMQ sends zero-copy (pskv_push_nocopy
 * lends ZeroMQ the caller's own array instead, and its request stays in the window
 * until ZeroMQ has let go of every slice: see wreq_retire); a pull reply is
 * copied once from the received frame into the caller's array (a view's stays in
 * its shared-memory region when it can: pskv_pull_view). The request id on
 * the wire is (timestamp << 16 | part). At most `window` requests are in flight;
 * a new one waits for a slot (back-pressure, never a drop).
 *
 * Modules (each a .h/.c pair in worker/lib/, internal calls prefixed by module):
 *   wstate  these types, the settings' defaults and the error message (wst_error)
 *   open    the handle's life (pskv_worker_open/close): the top, calling every module
 *   wview   the cluster view, membership answers, the clock hold, the heartbeat thread
 *   wreq    the request window: slots, retirement, the failures pskv_wait reports
 *   wplan   keys to partitions to servers: a request's parts
 *   wsend   parts onto the wire, and planned again and re-sent
 *   wfilter a table's filters on a part's frames; wkkt the kkt filter's rows
 *   vbuf    buffers shared with ZeroMQ; draining pskv_push_nocopy's lent arrays
 *   wshm    values through shared memory with servers on the same host (--shm)
 *   wpump   the calling thread's event loop: replies applied, timers
 *   wmetrics the worker's Prometheus metrics (common/metrics.h)
 *   wpeer   the listening socket other workers send to; a connection to one of them
 *   allreduce pskv_allreduce: the ring among workers
 *   wpipe   pskv_pipe: messages between pipeline stages
 *   pskv.c  the exported calls on an open handle (push, pull, wait, tables, clock ...)
 *   wlr     pskv_table_set_lr: a table's lr changed on every server
 *   abi1    the 1.0 entry points of pskv_config_init and pskv_worker_open (@PSKV_1,
 *           libpskv.map): the calls whose struct grew, on the 1.0 layout
 *
 * OWNS: the handle itself (open.c): pskv_worker_open allocates it with its
 *   window, ZeroMQ context and settings; pskv_worker_close releases everything
 *   hanging off it, whichever module filled it in; last_error (wst_error).
 * THREADS: every field belongs to the thread using the handle (one at a time, as
 *   pskv.h says), except the atomics `clock`, `progress[]` and `wait_ns`, which the heartbeat
 *   thread reads, traffic[] and ntraffic, which both threads use under traffic_mu, and vbuf.refs, which ZeroMQ's I/O threads drop (vbuf_unref). The
 *   heartbeat thread also reads ctx, sec, sched and hb_job, hb_node, hb_period_ms,
 *   all written before it starts and never after.
 * NEVER: no module exports a symbol from libpskv.so: every internal prototype is
 *   marked WINTERNAL (hidden), so the .so exports pskv_* alone from worker/. */
#ifndef PSKV_WSTATE_H
#define PSKV_WSTATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "filter.h"
#include "keycache.h"
#include "member.h"
#include "metrics.h"
#include "pskv.h"
#include "resend.h"
#include "secure.h"
#include "timeutil.h"
#include "wire.h"
#include "wtest.h"

/* Internal to libpskv: linked across its modules, never exported by the .so. */
#define WINTERNAL __attribute__((visibility("hidden")))

#define MAX_PARTS 65535
#define RETRY_DELAY_MS 5 /* a refused part (stale placement, copy on its way) goes again */
#define CLOCK_AGAIN_MS 1000 /* an ssp pull waiting this long since the last clock: it goes again */
#define WST_MAX_WCLOCKS 1024 /* worker ranks an evaluator's vector clock holds */
#define WST_MAX_TRAFFIC 32 /* tables whose traffic heartbeats carry (the first opened) */
#define WST_TRAFFIC_MS 100 /* the caller's thread copies the tables' traffic this often */
#define CLOSE_STOP_MS 1000 /* pskv_worker_close of a process stopping on a signal: each wait */
#define FAILED_KEEP 4096 /* failed requests whose outcome pskv_wait can still tell */
#define LENT_RESET_MS 100 /* a lent array ZeroMQ still holds this long after its push
                             ended: the connections holding it are reset */

enum req_type { REQ_FREE = 0, REQ_OPEN, REQ_PUSH, REQ_PULL, REQ_ASSIGN, REQ_SCAN,
                REQ_LR /* pskv_table_set_lr (wlr.c) */ };

typedef struct scan_out { /* rows gathered by pskv_pull_all */
    uint64_t *keys;
    float *vals;
    size_t n, cap;
} scan_out;

typedef struct wshm_seg wshm_seg; /* a shared-memory segment (wshm.c) */

typedef struct part {
    int server;        /* index into w->srv */
    uint64_t n;        /* rows in this part */
    uint64_t seg0, nseg; /* run part: its runs r->segs[seg0 .. seg0+nseg) (first, count) */
    uint64_t off;      /* row offset of this part's values (and keys) in its buffer */
    uint32_t *idx;     /* gathered part: caller row of each key */
    vbuf *own;         /* re-sent part: its own keys (then values); idx owned too */
    int answered;      /* its server replied (so ZeroMQ sent all of it) */
    uint64_t dedupe_id; /* wire request id of the first send of these rows */
    int64_t retry_at;  /* > 0: re-plan and send again at this time */
    int64_t sent_ms;   /* when it was sent */
    int silences;      /* times its rows went again for want of an answer (wsend_resend_due):
                          each waits twice as long as the one before, up to 8 x --retry-ms */
    uint64_t epoch;    /* the view it was planned on */
    uint64_t key_sig;  /* keycache: the signature its keys went with (0 = none) */
    int done;
    int clock_end;     /* pskv_pushpull with PSKV_PP_CLOCK: its first send ends the
                          worker's clock (ends_clock), the request's last part to its server */
    int pp_reply, pp_acked; /* pskv_pushpull: its PULL_REPLY, its PUSH_ACK came (the part
                               ends with the reply, or with both when the reply says an
                               ack follows: pull_after) */
    wshm_seg *shm;     /* its values' region in shared memory (wshm.h), or NULL */
    uint64_t shm_off, shm_len;
    int shm_heard;     /* the server answered the send that named the region */
    int shm_dirty;     /* an earlier send went unanswered: the server may still touch it */
    int shm_borrowed;  /* its region is its request's push buffer's (wshm_borrow) */
} part;

typedef struct req {
    enum req_type type;
    int64_t ts;
    int64_t t0_ns;     /* when it was made (the latency metric) */
    int64_t clock;     /* the worker's clock when it was made: every send carries it */
    int table;
    int nparts, pending;
    part *parts;
    uint64_t first;    /* dense run request: its first key */
    uint64_t *segs;    /* run parts' runs, pairs (first, count) */
    uint32_t *idx;     /* gathered rows, all parts */
    float *out;        /* pull destination */
    float *pp_dst;     /* pskv_pushpull into the caller's array over several parts: out is
                          then a buffer of the library's (view_floats values), copied here
                          once every part has answered and none refused (wreq_finish) */
    vbuf *buf;         /* push values (and gathered keys) */
    size_t kbytes;     /* bytes of gathered keys at the front of buf */
    int assign;        /* a push that overwrites (pskv_assign) */
    int pp;            /* pskv_pushpull: a push each of whose parts is answered by a
                          PULL_REPLY of its rows after it (into out; a PUSH_ACK is skipped) */
    int64_t pp_clock;  /* ... the clock its pulls are tagged with */
    int raw;           /* a push sent unquantised (pskv_filter_flush) */
    float scale;       /* a 16-bit push: the table's loss scale when it was made (re-sends
                          carry the same) */
    int err;
    int64_t deadline_ms;
    int64_t vclock;    /* pull: the oldest clock its parts' values reflect */
    int64_t vclock_hi; /* pull: the newest (bsp: equal to vclock on a consistent snapshot) */
    int64_t kkt_floor; /* pull of a kkt table: its oldest push unanswered when sent (wkkt.h) */
    size_t bytes;      /* values moved: small requests are waited for by spinning */
    scan_out *scan;    /* pskv_pull_all: where the rows go */
    const float *lent; /* pskv_push_nocopy: the caller's values, sent without a copy */
    vbuf *lend;        /* ... and the count of ZeroMQ's references to them (no data) */
    int64_t draining_ms; /* > 0: answered or failed since then, ZeroMQ still holds lent */
    int lent_reset;    /* drain stages done (vbuf_drain): 1 dead servers', 2 unanswered,
                          3 all */
    int view;          /* pskv_pull_view: out is the library's (malloc'd on the first
                          reply to copy), or the values stay in a part's region */
    size_t view_floats; /* ... how many values it holds */
    const float *view_vals; /* ... in place: the region's values (view_part.shm) */
    part view_part;    /* ... the region taken over from the part it answered */
    zmq_msg_t view_frame; /* ... or over TCP the reply's values frame, kept (no copy) */
    int has_view_frame;
    part pbuf;         /* pskv_push_buffer_send: the buffer's region (pbuf.shm), held
                          until the request ends; a part may borrow it */
    float *pbuf_own;   /* ... or its memory of its own, freed then */
} req;

typedef struct wpbuf { /* a buffer of pskv_push_buffer, until sent or dropped */
    float *vals;       /* NULL = a free entry */
    size_t floats;
    int table;
    part res;          /* its region (res.shm), or none: vals is malloc'd */
} wpbuf;

typedef struct wview_held { /* a completed pskv_pull_view, until pskv_view_release */
    int64_t ts;        /* 0 = a free entry */
    const float *vals;
    float *own;        /* its copy buffer (the spare or freed on release), or NULL */
    size_t floats;     /* its values */
    part shm;          /* its shared-memory region (shm.shm NULL: none) */
    zmq_msg_t frame;   /* over TCP: the received reply frame vals points into */
    int has_frame;
} wview_held;

typedef struct srv {
    uint32_t id;
    char host[128];
    int port;
    int alive;
    int catchup; /* placement changed: owed this worker's clock (wview_catch_up) */
    uint64_t refused; /* pushes this server refused for a retry, as it counts them */
    int clock_rode; /* the latest pskv_pushpull's clock end went to it on a push part */
    int64_t reset_ms; /* when sock last replaced a connection (vbuf's srv_reset), or 0 */
    resend_peer heard; /* its answers, for parts unanswered (common/resend.h) */
    char key[41];     /* its CURVE public key from the view ("" without keys) */
    void *sock;
    wshm_seg *shm;    /* --shm: the current segment for it (wshm.h), or NULL */
    int shm_refused;  /* it refused shared memory, or none could be made: frames */
    int shm_host_ok;  /* it answered a reference: it holds this worker's host (shm_host) */
} srv;

typedef struct war war; /* pskv_allreduce's state (allreduce.c) */
typedef struct wkkt wkkt; /* the kkt filter's readings (wkkt.h) */

/* One table's traffic as the heartbeat thread sends it (wfilter_publish). */
typedef struct wst_traffic {
    char name[128];
    filter_stats fst;
} wst_traffic;
typedef struct wpipe wpipe; /* pskv_pipe's sockets to neighbour stages (wpipe.c) */

typedef struct tbl {
    char name[128];
    uint64_t id;
    int dense;
    uint64_t size;
    uint32_t width;
    int async;         /* its pushes may be re-sent after a silence (servers drop duplicates) */
    int bsp;           /* its pushes are acknowledged only when their clock closes */
    met_series *m_push, *m_pull, *m_push_rows, *m_pull_rows, *m_push_bytes, *m_pull_bytes,
        *m_latency;    /* its metrics (wmetrics.h) */
    filter_set fs;     /* its wire filters (wfilter.h) */
    keycache *kc;      /* keycache: the lists each server was sent (NULL without the filter) */
    filter_stats fst;  /* its traffic before and after the filters */
    float *resid;      /* int8, sign: per value of the table, what quantising lost (added
                          to the next push of the value; wfilter_quant) */
    float *qbuf;       /* int8, sign: wfilter_quant's scratch (a part's values twice) */
    size_t qcap;       /* ... its capacity in floats */
    wkkt *kkt;         /* kkt: what pulls read and pushes sent per key (NULL without) */
    int wire;          /* its pushes' and pull replies' precision (half.h; option 'wire') */
    float scale;       /* pskv_set_loss_scale: pushes carry values x scale (1 = none) */
} tbl;

struct pskv_worker {
    void *ctx;
    member mb;
    secure sec;           /* keys and CURVE (secure.h); the heartbeat thread reads it */
    int nworkers, nservers;
    srv *srv;
    uint32_t nparts, R;   /* placement of the latest view */
    int *head, *tail;     /* per partition: index into srv of the head and tail, -1 = lost */
    uint32_t *chains;     /* the latest view's chains (nparts x R node ids, 0 = none) */
    int nretry;           /* parts waiting to be sent again */
    uint32_t failover_node; /* a server replaced while pushes to it were in flight */
    int64_t failover_ms;    /* when the view that replaced it arrived */
    /* scratch sized once for the view, so a request allocates only what it keeps */
    zmq_pollitem_t *items; /* scheduler socket, then one per server */
    uint64_t *count;       /* keys per server while grouping */
    int *pindex;           /* part of each server while grouping */
    uint32_t *owner;       /* server of each key while grouping; grows */
    size_t owner_cap;
    tbl *tables;
    int ntables;
    req *reqs;
    int window, inflight;
    wview_held views[PSKV_MAX_VIEWS]; /* pskv_pull_view's, held (wreq.h) */
    int nviews;             /* held, and view pulls in flight */
    uint64_t views_in_place, views_copied; /* completed view pulls: for the log at close */
    uint64_t views_in_frame; /* ... of views_in_place, read in a received TCP frame */
    uint64_t clock_msgs, clock_rides; /* CLOCK messages sent; clock ends that rode on a
                                         push part instead (pskv_pushpull) */
    float *view_spare;      /* a released view's copy buffer, for the next (wreq.h) */
    wpbuf pbufs[PSKV_MAX_PUSH_BUFFERS]; /* pskv_push_buffer's, unsent (pskv.c) */
    wpbuf *pbuf_next;       /* the one pskv_push_buffer_send hands to its request */
    uint64_t pbufs_sent, pbufs_in_place; /* push buffers sent; sends that named their
                                            region (no copy): for the log at close */
    size_t view_spare_floats;
    int ndraining;          /* requests ended but waiting for ZeroMQ to let go of lent */
    uint64_t lent_pushes, lent_drained, lent_resets; /* for the log at close */
    int64_t next_ts;
    int64_t catchup_ts; /* since a placement change: pushes below it go before the clock */
    uint64_t catchup_epoch; /* bsp: parts planned on an older view must be answered first */
    int request_timeout_ms;
    int shm;                /* values through shared memory with servers on this host */
    size_t chunk_bytes;
    int ar_wire;            /* pskv_allreduce's wire precision (pskv_wire) */
    int spin_us;
    int retry_ms;
    int64_t next_silence_check;
    int64_t clock_sent_ms;  /* when wsend_clock last ran (wsend_clock_again) */
    wtest test;             /* test-only hooks (wtest.h): unset in a real job */
    struct { int64_t ts; int err; } failed[FAILED_KEEP];
    int nfailed;
    int64_t forgotten_ts;   /* newest failed timestamp pushed out of failed[] */
    uint64_t barrier_seq, barrier_done;
    int finish_acked;
    char last_error[512];
    pthread_t hb_thread;
    atomic_int hb_stop;
    int hb_started;
    /* what the heartbeat thread sends as: copied from mb before it starts, since
     * the calling thread rewrites mb (epoch, heartbeat_ms) with every view */
    uint64_t hb_job;
    uint32_t hb_node;
    int hb_period_ms;
    int hb_slice_us; /* the heartbeat thread's scheduling slice (0: the kernel's) */
    char sched[300];
    _Atomic int64_t clock;  /* iterations finished; pushes and pulls carry it */
    uint64_t late_drops;    /* bsp pushes answered "dropped: late" */
    int64_t values_clock;   /* clock the last completed pull's values reflect */
    int64_t values_clock_hi; /* ... the newest of its parts' clocks */
    /* the evaluator (pskv_config.evaluator): per worker rank, the smallest over the
     * servers of the clocks the latest pull's replies carried (worker_clocks) */
    int64_t wclocks[WST_MAX_WCLOCKS];
    int nwclocks;
    int64_t wclocks_ts;     /* the pull they are of */
    int evaluator;          /* registered as the evaluator role */
    char ns[65];            /* pskv_config.table_namespace: tables open as ns/NAME ("" = as is) */
    char group[65];         /* pskv_config.group ("" = unnamed): sent with each TABLE_OPEN,
                               whose refusal names it */
    uint64_t quota_bytes;   /* pskv_config.quota_bytes: sent with each TABLE_OPEN */
    int took_over;          /* registered to take over the rank of a dead worker
                               (its first view lists an older node of this rank) */
    int stop_early;         /* the view asked every worker to stop (early stopping) */
    char stop_reason[256];
    int job_stopping;       /* the scheduler sent STOP: the job is over */
    int64_t max_message;
    _Atomic int64_t progress[3]; /* epoch, step, position: sent with heartbeats */
    _Atomic int64_t wait_ns;     /* the caller's time waiting in the pump: heartbeats */
    _Atomic int ar_waiting;      /* pskv_allreduce_rejoin: 1 + the rank it waits for, 0 = none */
    _Atomic int64_t pipe_place;  /* pskv_set_stage: d << 32 | k, + 1; 0 = none: heartbeats */
    _Atomic uint64_t balance;    /* pskv_set_balance: batch << 32 | the float bits of its us
                                    per example; 0 = none: heartbeats */
    _Atomic uint64_t stage_bal;  /* pskv_set_stage_layers: (first << 16 | last + 1) << 32 |
                                    the float bits of its ms per micro-batch; 0 = none */
    uint64_t ckpt_done;          /* checkpoint answer: its number */
    int ckpt_err;                /* or its error */
    uint64_t ckpt_req;           /* request id of the checkpoint asked for */
    void *peer_in;               /* the listening PULL (wpeer_listen): the ring's pieces and
                                    pskv_pipe's messages arrive on it; NULL: an evaluator */
    war *ar;                     /* all-reduce: the ring's state (allreduce.h) */
    wpipe *pipe;                 /* pskv_pipe: sockets to neighbour stages (wpipe.h) */
    /* the tables' traffic for heartbeats: the caller's thread copies it in
     * (wfilter_publish), the heartbeat thread reads it (wfilter_traffic) */
    pthread_mutex_t traffic_mu;
    int traffic_mu_ok;           /* traffic_mu initialised */
    wst_traffic traffic[WST_MAX_TRAFFIC];
    int ntraffic;
    int64_t traffic_ms;          /* when the caller's thread last copied it */
};

/* Formats w->last_error (what pskv_last_error returns) and returns -code, whichever
 * sign code was given in. Never fails; a long message is cut at 511 bytes. */
WINTERNAL int wst_error(pskv_worker *w, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Milliseconds from now to `deadline` (tu_now_ms time), clamped to 0..100: how
 * long one pump may sleep while a caller waits for an answer. */
static inline long wst_remaining(int64_t deadline)
{
    int64_t left = deadline - tu_now_ms();
    return left < 0 ? 0 : left > 100 ? 100 : (long)left;
}

#endif
