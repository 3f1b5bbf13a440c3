/* libpskv: the worker library of the pskv parameter server.
 *
 * A worker registers with the scheduler, receives the cluster view, opens tables
 * and pushes gradients / pulls weights by key. Push and pull are non-blocking:
 * each returns a timestamp at once and the request's groups (one per owning
 * server) are all in flight together; pskv_wait() completes them.
 *
 * Threads: a pskv_worker handle is used by one thread at a time (like a ZeroMQ
 * socket). The library runs one background thread of its own that only sends
 * heartbeats, so a worker that computes for a long time stays alive.
 *
 * Errors: calls return 0 (or a non-negative result) on success and a negated
 * PSKV_E* code on failure; pskv_strerror() names the code, pskv_last_error()
 * gives the detailed message of the latest failure. Nothing aborts the process
 * on bad input from the network. */
#ifndef PSKV_H
#define PSKV_H

#include <stddef.h>
#include <stdint.h>

#include "pskv_errors.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pskv_worker pskv_worker;

typedef struct pskv_config {
    const char *scheduler;     /* "HOST:PORT"; NULL = $PSKV_SCHEDULER, else 127.0.0.1:7700 */
    int rank;                  /* wanted rank, -1 = let the scheduler choose */
    const char *advertise;     /* address reported to the scheduler; NULL = automatic */
    const char *interface;     /* take the advertised address from this interface */
    double connect_timeout_s;  /* wait for the scheduler's answer (default 30) */
    double join_timeout_s;     /* wait for the cluster view (default 600) */
    int request_timeout_ms;    /* a request not answered by then fails (default 30000) */
    int window;                /* requests in flight before push/pull block (default 64) */
    uint64_t job_id;           /* 0 = the scheduler's */
    int64_t max_message;       /* largest frame accepted (default 1 GiB) */
    size_t chunk_bytes;        /* dense runs travel in messages of at most this many value
                                  bytes, so sending, applying and copying overlap
                                  (default 1 MiB) */
    int spin_us;               /* pskv_wait on a request of <= 64 KiB looks for the reply
                                  without sleeping for up to this long first (default 100;
                                  0 = never spin) */
    int retry_ms;              /* a part of a push or pull on an async table unanswered this
                                  long is planned again on the latest view and re-sent
                                  (servers drop a push they already applied); default
                                  1000, 0 = never */
    const char *keys;          /* key directory (node.key, node.pub, scheduler.pub; made
                                  by `pskvctl keys init`): CURVE on every connection.
                                  NULL = $PSKV_KEYS, "" = none */
    int insecure;              /* without keys, talk to a scheduler that is not on loopback
                                  anyway (no authentication, no encryption); default
                                  $PSKV_INSECURE, else 0: such a scheduler is refused */
    int metrics_port;          /* > 0: serve this process's Prometheus metrics at
                                  http://BIND:PORT/metrics from the open on, until the
                                  process exits (default 0 = off) */
    const char *metrics_bind;  /* BIND: NULL or "" = loopback, or every address with keys
                                  or insecure; else this IPv4 address or "*" */
    int evaluator;             /* 1: join as the job's evaluator (pskv-evaluator), not a
                                  worker: no rank, no clocks; it opens tables and pulls
                                  (default 0) */
    int listen_port;           /* the port this worker's all-reduce socket listens on,
                                  advertised to the other workers (default 0 = any free) */
    const char *listen_bind;   /* its address: NULL or "" = loopback, or every address
                                  with keys or insecure; else this IPv4 address or "*" */
    int allreduce_wire;        /* pskv_allreduce's values travel as this pskv_wire
                                  (default PSKV_WIRE_FP32); every worker of the job must
                                  give the same one */
    int shm;                   /* 1: push and pull values of 64 KiB or more through shared
                                  memory with servers on this host that accept it (same
                                  host, same user), the rest over TCP (default 0) */
    int slice_us;              /* the scheduling slice libpskv's ZeroMQ I/O thread asks the
                                  kernel for (Linux 6.12 or later grants 100 to 100000), so
                                  that replies are taken in as they arrive while this
                                  process's and others' threads compute; the calling
                                  thread keeps its own (default 100; 0 = the kernel's) */
    const char *table_namespace; /* the namespace this process's tables live in: a table
                                  opened as NAME is NAMESPACE/NAME on the servers, shared
                                  with every process that names the same namespace.
                                  NULL or "" = the unnamed namespace (a job's tables, as
                                  before; there a name "NS/NAME" addresses NS directly).
                                  1..64 bytes, no '/' (docs/protocol.md "Namespaces") */
    uint64_t quota_bytes;      /* > 0: ask the servers to hold the namespace's tables to
                                  this many bytes of memory, every replica counted: a
                                  push that would create rows past it fails PSKV_EQUOTA
                                  (default 0: none asked; the namespace's first quota stays) */
    const char *group;         /* the worker group this worker joins (a service's:
                                  pskv-scheduler --service): ranks 0..group_size-1,
                                  barriers, clocks and life of its own; its tables live
                                  in the namespace of its name unless table_namespace
                                  names another. NULL or "" = the unnamed group (a job's
                                  workers). 1..64 bytes, no '/' (docs/protocol.md "Groups") */
    int group_size;            /* W, the same for every worker of the group (0 = the
                                  scheduler's --workers; a named group needs it) */
} pskv_config;

/* Precision of pskv_allreduce's values on the wire. FP16 (IEEE binary16) and BF16
 * halve the bytes sent: each rank adds in float what it receives (converted on
 * arrival) and converts its partial sums for sending, and a chunk's final value
 * is rounded to the wire precision by its owner before the all-gather hands it
 * out, so the result stays bit for bit the same on every rank. FP16 keeps 11
 * significant bits and overflows to infinity above 65504 (scale gradients so
 * that they fit); BF16 keeps float's range with 8 significant bits. */
typedef enum { PSKV_WIRE_FP32 = 0, PSKV_WIRE_FP16 = 1, PSKV_WIRE_BF16 = 2 } pskv_wire;

/* Fills cfg with the defaults above. */
void pskv_config_init(pskv_config *cfg);

typedef enum { PSKV_DENSE = 1, PSKV_SPARSE = 2 } pskv_kind;

typedef struct pskv_table_opts {
    pskv_kind kind;         /* dense: keys 0..size-1; sparse: any uint64 key */
    uint64_t size;          /* dense only */
    uint32_t width;         /* floats per key (default 1) */
    const char *updater;    /* "sum", "sgd" (default), "adagrad", "adam", "adamw", "ftrl"
                               or "plugin:PATH[:ARGS]" (docs/operations.md) */
    float lr;               /* learning rate (default 0.01); ftrl: alpha */
    float momentum, l2;     /* sgd momentum, L2 penalty (default 0); ftrl: l2 is lambda2 */
    float eps;              /* adagrad and adam epsilon (default 1e-8) */
    float l1;               /* sgd: proximal L1 step; ftrl: lambda1 (default 0) */
    float beta1, beta2;     /* adam, adamw (default 0.9, 0.999) */
    float weight_decay;     /* adamw: decoupled weight decay (default 0) */
    float beta;             /* ftrl: beta (default 1) */
    const char *init;       /* "zero" (default), "const", "uniform", "normal" */
    float init_scale;       /* const value / uniform half-width / normal stddev */
    uint64_t seed;          /* init seed */
    const char *consistency; /* "async" (default), "bsp" or "ssp:TAU" (bounded delay) */
    uint32_t backup;        /* bsp: a clock closes with the first W - backup workers */
    int bsp_mean_pushed;    /* bsp: a clock's update is the mean of the pushes of the workers
                               that pushed to this table at the clock (default 0: of every
                               worker that finished it; a table only some workers push to,
                               a pipeline stage's, sets 1) */
    uint32_t admit_after;   /* sparse: a key gets a row on its Nth push, 0..255 (0, 1 = first) */
    uint32_t evict_after;   /* sparse: rows not pushed for this many clocks are removed (0 =
                               never); docs/operations.md, "Admission and eviction" */
    const char *filters;    /* wire filters, comma-separated NAME[:ARGS] ("keycache,lz4"; NULL
                               or "" = none); docs/protocol.md, "Filters" */
    const char *wire;       /* values' precision on the wire: "fp32" (NULL, default), "fp16" or
                               "bf16": pushes and pull replies carry 2 bytes a value, servers
                               apply in fp32 (weights stay fp32); assigns, whole-table pulls
                               and copies to new servers stay fp32. Every open of a table
                               must give the same (else PSKV_EMISMATCH naming 'wire');
                               docs/protocol.md, "Wire precision" */
} pskv_table_opts;

/* Fills o with the defaults above (dense, width 1, sgd, lr 0.01, zero init). */
void pskv_table_opts_init(pskv_table_opts *o);

/* Registers with the scheduler and waits for the cluster view. On success *out
 * owns a handle to release with pskv_worker_close. Errors: -PSKV_ETIMEDOUT
 * (scheduler unreachable or cluster incomplete), -PSKV_EREFUSED (e.g. rank taken),
 * -PSKV_EINVAL, -PSKV_ENET. */
int pskv_worker_open(const pskv_config *cfg, pskv_worker **out);

/* Opens (creating on first open) table `name` on every server. Returns a table
 * handle >= 0, or -PSKV_EMISMATCH when the table exists with other options
 * (pskv_last_error names the option), -PSKV_EINVAL, -PSKV_ETIMEDOUT. */
int pskv_table_open(pskv_worker *w, const char *name, const pskv_table_opts *o);

/* Changes the learning rate of `table`'s updater (pskv_table_opts.lr: sgd, adagrad,
 * adam, adamw, ftrl's alpha, a plug-in's) on every server, for learning-rate
 * schedules: the servers apply this worker's pushes sent before the call with the
 * old lr and those sent after it with lr (another worker's pushes in flight meanwhile
 * with either; a push re-sent after a view change with the lr of the moment). Replicas
 * apply every push with the lr its head applied it with, so copies stay identical.
 * Blocks until every live server acknowledged, at most the request time-out plus
 * 1 s. The table's options as opened do not change: a later pskv_table_open compares
 * the first open's lr. A server that joins later learns the lr with its copy of the
 * table; a checkpoint keeps the first open's (a resumed job sets it again).
 * Returns 0, -PSKV_EINVAL (lr not a finite number > 0, updater sum, the updater's own
 * rules, an evaluator; pskv_last_error names the table and the value), -PSKV_EACCES
 * (the worker's key may not write the table's namespace: a reader), -PSKV_ETIMEDOUT
 * or another negated PSKV_E* code; after an error some servers may have taken it. */
int pskv_table_set_lr(pskv_worker *w, int table, float lr);

/* Pushes nkeys rows of `width` floats (vals: nkeys * width, in key order).
 * keys == NULL on a dense table pushes every key (nkeys must equal size).
 * Returns a timestamp > 0 at once; vals may be reused immediately (the library
 * keeps one copy until the servers acknowledge). Blocks only while the window of
 * requests in flight is full, up to the request time-out. */
int64_t pskv_push(pskv_worker *w, int table, const uint64_t *keys, size_t nkeys,
                  const float *vals);

/* Like pskv_push, but without the copy: ZeroMQ sends a dense run straight from
 * vals, so vals must stay allocated and unchanged until the push is over, that
 * is until pskv_wait on the returned timestamp (or pskv_wait_all) returns
 * anything but -PSKV_ETIMEDOUT, or pskv_worker_close returns. Over means ZeroMQ
 * holds no reference to vals any more: a push whose server died or went silent
 * gets the connections still holding vals reset. If it returns an error at once,
 * nothing holds vals. To a table with a 16-bit wire the values are converted from
 * vals into frames of their own (at each send, a re-send too). Pushes with explicit
 * keys that are not one run (keys[i] = keys[0] + i) on a dense table, and pushes to
 * a quantising table (int8, sign, significant), are copied as by pskv_push. So is a
 * run that the partitions' owners cut into pieces averaging under 256 KiB (several
 * servers, each holding scattered partitions): each piece would be a message of its
 * own, and a copy that makes one message a server costs less than their wake-ups
 * and system calls. For large values this saves a copy of every pushed byte
 * (docs/benchmarks.md). */
int64_t pskv_push_nocopy(pskv_worker *w, int table, const uint64_t *keys, size_t nkeys,
                         const float *vals);

/* A buffer of nkeys * width floats, in the library's memory, for the values of one
 * push of (table, keys, nkeys) (keys == NULL as in pskv_push): with --shm and a
 * dense run of at most chunk_bytes that one server holds, a region of shared
 * memory that server reads the push from, so that pskv_push_buffer_send copies
 * nothing; otherwise memory of its own, sent as pskv_push_nocopy sends. Fill it,
 * then hand it to pskv_push_buffer_send, which takes it back whatever it returns
 * (it is freed when the push is over), or to pskv_push_buffer_drop unsent. NULL
 * when none can be had (last_error says why); at most PSKV_MAX_PUSH_BUFFERS are
 * held unsent at once. */
#define PSKV_MAX_PUSH_BUFFERS 16
float *pskv_push_buffer(pskv_worker *w, int table, const uint64_t *keys, size_t nkeys);

/* Pushes the values in buf, a buffer of pskv_push_buffer for the same table, keys and
 * nkeys. Returns a timestamp > 0, or a negated error; either way buf is the
 * library's again and must not be touched. */
int64_t pskv_push_buffer_send(pskv_worker *w, int table, const uint64_t *keys, size_t nkeys,
                              float *buf);

/* pskv_push_buffer_send, then the worker's clock ended as pskv_clock ends it, but in
 * the same messages: the end rides on the push's last part to each server, as
 * pskv_pushpull's PSKV_PP_CLOCK (only the live servers that got no part are sent a
 * CLOCK), so a step's push and clock are one message per server. Returns the push's
 * timestamp, or a negated error (the push's, or the clock's: the push then goes on). */
int64_t pskv_push_buffer_send_clock(pskv_worker *w, int table, const uint64_t *keys,
                                    size_t nkeys, float *buf);

/* Gives an unsent buffer of pskv_push_buffer back. Returns 0, or -PSKV_ENOTFOUND. */
int pskv_push_buffer_drop(pskv_worker *w, float *buf);

/* Like pskv_push, but overwrites the stored values with vals and clears their
 * optimizer state (for loading saved weights) instead of applying the updater. */
int64_t pskv_assign(pskv_worker *w, int table, const uint64_t *keys, size_t nkeys,
                    const float *vals);

/* Pushes what a quantising filter (int8, sign) of `table` kept back, unquantised,
 * and starts its residual afresh: after it completes the servers hold every value
 * pushed. Returns the push's timestamp, 0 when nothing is kept back, or a negated
 * error. */
int64_t pskv_filter_flush(pskv_worker *w, int table);

/* Loss scaling for a table with a 16-bit wire: later pushes carry their values
 * times scale, a power of two in 2^-24 .. 2^24 (1 = none), and the servers divide
 * by it after converting to fp32, so small gradients stay representable on the
 * wire. A push whose value x scale is not finite in the wire precision (inf, NaN,
 * or past fp16's 65504) sends nothing and returns -PSKV_EBADVALUE at once: the
 * caller skips the step and lowers the scale (docs/operations.md, "Wire
 * precision"). Returns 0, or -PSKV_EINVAL (an fp32 table, a bad scale). */
int pskv_set_loss_scale(pskv_worker *w, int table, float scale);

/* Bytes this handle's data frames took (keys and values, not Meta), before and
 * after the tables' filters, and the time spent in filters. */
typedef struct pskv_traffic {
    uint64_t sent, sent_raw;         /* pushes and pull requests: on the wire, before filters */
    uint64_t received, received_raw; /* pull replies */
    double filter_s;                 /* seconds in filters */
    const char *name;                /* the table's name (table -1: NULL), valid while the
                                        handle is open */
} pskv_traffic;

/* Fills *out with table's traffic so far (table -1: every table's). Returns 0 or
 * -PSKV_EINVAL. */
int pskv_traffic_get(const pskv_worker *w, int table, pskv_traffic *out);

/* Pulls nkeys rows into out (nkeys * width floats), filled when the returned
 * timestamp completes; out must stay valid until then. keys == NULL as in push. */
int64_t pskv_pull(pskv_worker *w, int table, const uint64_t *keys, size_t nkeys, float *out);

/* One step's exchange in one round trip per part: pushes grad as pskv_push does and
 * writes into out (nkeys * width floats, in pskv_pull's order) the rows' values
 * after that push, read by the server that applied it (its rows' head). With
 * PSKV_PP_CLOCK the worker's clock ends right after the push, as pskv_clock ends it,
 * but in the same messages: the end rides on the last part to each server, and
 * only the servers that got no part are sent a CLOCK (docs/protocol.md, "Push and
 * pull in one round trip"); the pull is of the next clock: under bsp the
 * values once the push's clock closed (every worker's push of it applied), under ssp
 * within the bound; without it, the clock's pull (async: at once). Returns the
 * timestamp to wait for (pskv_wait), or a negated error; out is written only
 * while the request runs, and only when it succeeds: a refused push (a NaN, a late
 * bsp push, a lost partition) fails the request as a whole, its server sends no
 * values, and out is left untouched (with several parts, servers, or with
 * replicas, the values wait in a buffer of the library's until every part has
 * answered: one copy more). grad and out are the caller's; grad is copied before the call
 * returns (out may be grad). With --shm (pskv_config.shm) a part of 64 KiB or more to a server on this
 * host goes through shared memory both ways: grad is copied into a region, and the
 * server writes the values after the push over it (out: copied once from there).
 * Not yet with wire filters or a 16-bit wire (-PSKV_EINVAL: push, then pull).
 * With PSKV_PP_NOCOPY grad is sent as pskv_push_nocopy sends it,
 * without the copy: grad must then stay unchanged until the request is over
 * (pskv_wait returns anything but -PSKV_ETIMEDOUT) and out must not overlap it
 * (-PSKV_EINVAL). With PSKV_PP_VIEW out must be NULL and the values go to memory
 * of the library's, as pskv_pull_view's do: once pskv_wait(ts) has returned 0,
 * pskv_view(w, ts) points at them until pskv_view_release(w, ts) (one server
 * answering the whole run: read in place, in the received frame or with --shm the
 * shared-memory region, no copy); the
 * call counts among the PSKV_MAX_VIEWS views, and a refused push holds no view. */
#define PSKV_PP_CLOCK 1
#define PSKV_PP_NOCOPY 2
#define PSKV_PP_VIEW 4
int64_t pskv_pushpull(pskv_worker *w, int table, const uint64_t *keys, size_t nkeys,
                      const float *grad, float *out, int flags);

/* Pulls like pskv_pull, into memory of the library's instead of an array of the
 * caller's: once pskv_wait(ts) has returned 0, pskv_view(w, ts) points at the
 * nkeys * width values, in the order pskv_pull would write them, and they stay
 * there unchanged until pskv_view_release(w, ts). A dense run of at most
 * chunk_bytes that one server holds all of is answered in one reply, and that
 * memory is where the reply arrived: with --shm (pskv_config.shm) the region of
 * shared memory the server wrote it into, over TCP the received frame (kept with
 * the view until its release); the values are never copied. Otherwise (several
 * parts, gathered keys, a 16-bit wire or a filter) the replies are copied into a
 * buffer of the view's. At most PSKV_MAX_VIEWS views are held or in flight at
 * once (-PSKV_EINVAL beyond). */
#define PSKV_MAX_VIEWS 16
int64_t pskv_pull_view(pskv_worker *w, int table, const uint64_t *keys, size_t nkeys);

/* The values of the completed view pull ts, or NULL (last_error says why: not a
 * view, not yet waited for, failed, or already released). */
const float *pskv_view(pskv_worker *w, int64_t ts);

/* Gives the memory of view ts back (its shared-memory region to the next pulls).
 * Returns 0, or -PSKV_ENOTFOUND when no view ts is held. pskv_worker_close
 * releases any still held. */
int pskv_view_release(pskv_worker *w, int64_t ts);

/* Pulls every row the servers hold of `table` (the keys a sparse table ever
 * pushed, or all of a dense one), for saving a model: blocks until every server
 * answered, at most timeout_ms. On success *keys (n) and *vals (n * width floats)
 * are malloc'ed, the caller's to free, and *n is the number of rows, in no
 * particular order, each once (only the tail of each partition answers). The
 * values are as each server holds them when it answers, without any consistency
 * wait: call it after a barrier. Returns 0, -PSKV_ELOST (a partition has no live
 * copy), -PSKV_ETIMEDOUT, -PSKV_ENOMEM or another negated PSKV_E* code. */
int pskv_pull_all(pskv_worker *w, int table, uint64_t **keys, float **vals, size_t *n,
                  int timeout_ms);

/* Waits for request `ts`. Returns 0, the request's error, or -PSKV_ETIMEDOUT when
 * it is still in flight after timeout_ms (it stays in flight). In pskv's own
 * daemons (pskv-worker, pskv-evaluator) a SIGTERM or SIGINT ends the wait at once
 * with -PSKV_ECLOSED, so that a stopped job (scancel, Ctrl-C) does not sit out the
 * request time-out of a server already gone. */
int pskv_wait(pskv_worker *w, int64_t ts, int timeout_ms);

/* Waits for every request in flight; returns 0 or the first error seen (pushes
 * dropped as late are counted, not errors). */
int pskv_wait_all(pskv_worker *w, int timeout_ms);

/* Ends this worker's iteration (its clock): tells every server, behind this
 * iteration's pushes, so bsp and ssp tables can close the clock. Pushes and pulls
 * carry the current clock. Under bsp a push is acknowledged only when its clock
 * closes: call pskv_clock before waiting for this iteration's pushes.
 * Returns 0 or -PSKV_ENET. */
int pskv_clock(pskv_worker *w);

/* Iterations finished so far (moves up by itself when a bsp clock closed
 * without this worker: its late pushes are answered -PSKV_ELATE). */
int64_t pskv_current_clock(const pskv_worker *w);

/* The clock that the values of the latest pull reply reflect (bsp: clocks
 * applied; ssp and async: the slowest worker's clock). */
int64_t pskv_values_clock(const pskv_worker *w);

/* Pushes dropped as late so far (bsp with backup workers). */
uint64_t pskv_late_drops(const pskv_worker *w);

/* Waits for the caller's own requests, then until every worker reached the same
 * barrier. Returns 0, -PSKV_ETIMEDOUT or another error. */
int pskv_barrier(pskv_worker *w, int timeout_ms);

/* Asks the scheduler for a checkpoint of every server's partitions (values,
 * optimizer state, clocks) and waits until it is complete (recorded in the
 * scheduler's manifest). Returns the checkpoint number (> 0), -PSKV_EINVAL (no
 * --data-dir), -PSKV_EIO (a server could not write; pskv_last_error names it) or
 * -PSKV_ETIMEDOUT. A worker of a service's group checkpoints its group's namespace
 * only (and its group's progress); a job's, every table. */
int64_t pskv_checkpoint(pskv_worker *w, int timeout_ms);

/* Tells the scheduler where this worker is (sent with heartbeats; a checkpoint
 * records it): epoch, step and position in its data. */
void pskv_set_progress(pskv_worker *w, int64_t epoch, int64_t step, int64_t position);

/* In a job resumed from a checkpoint (pskv-scheduler --resume), returns 1 and
 * where this rank was when it was taken; else 0. */
int pskv_resume_progress(const pskv_worker *w, int64_t *epoch, int64_t *step,
                         int64_t *position);

/* Gradient clipping by global norm (as torch.nn.utils.clip_grad_norm_): the L2
 * norm of nparts arrays taken together, parts[i] holding lens[i] floats. When it
 * exceeds max_norm, every value is scaled by max_norm / norm, so that the norm
 * becomes max_norm (to float rounding). *norm (when not NULL) gets the norm
 * before clipping. Returns 1 when it scaled, 0 when the norm was at most max_norm
 * or not finite (a NaN or infinity: nothing is scaled, and the push is refused
 * as any non-finite push is), -PSKV_EINVAL when max_norm is not a finite number
 * > 0.
 * Needs no handle: call it on a step's gradients before pushing them. */
int pskv_clip_norm(float *const *parts, const size_t *lens, size_t nparts, double max_norm,
                   double *norm);

/* Early stopping: 1 when the scheduler asked every worker to stop at its next
 * clock boundary (its view says so), with the reason copied into why (NUL-ended,
 * when why_len > 0); else 0. Views are read when the caller enters the library. */
int pskv_stop_requested(const pskv_worker *w, char *why, size_t why_len);

/* Workers of the latest view that neither finished nor died (this one included),
 * after applying what the scheduler sent meanwhile (it never waits). */
int pskv_workers_active(pskv_worker *w);

/* A worker rank no live worker holds (its worker died, or finished or failed
 * and left, and none took the rank over): the lowest whose worker died, else the
 * lowest that left; -1 when every rank of the job has one. After applying what
 * the scheduler sent meanwhile (never waits). For jobs that cannot go on
 * without every rank (a pipeline's stages), to name the one that stopped them. */
int pskv_rank_gone(pskv_worker *w);

/* For the evaluator (pskv_config.evaluator): 1 once the job is ending (the
 * scheduler sent STOP, or every worker of the view finished or died); else 0. */
int pskv_job_ending(const pskv_worker *w);

/* For the evaluator: the latest completed pull's reply clocks: *lo and *hi the
 * oldest and newest over its servers (bsp: the closed clocks; equal when every
 * server answered at the same closed clock, a consistent snapshot), and in vc (up
 * to max ranks) per worker rank the clocks its values reflect at least (ssp and
 * async; an evaluator of a service's group: its group's workers only). Returns
 * the number of ranks written. */
int pskv_values_clocks(const pskv_worker *w, int64_t *lo, int64_t *hi, int64_t *vc, int max);

/* Reading a served model: the rows of n keys of `table` from the pskv-serve at
 * endpoint ("HOST:PORT", its --zmq-port), as its POST /v1/lookup answers them:
 * out gets n x *width floats (NaN for a key the table does not hold; out_cap
 * floats at most), *clock the version's clock (width, clock may be NULL). Needs
 * no worker handle; one request on a socket of its own, within timeout_ms.
 * With PSKV_KEYS=DIR (a pskv-serve run with --keys) it speaks CURVE with DIR's key
 * toward the key in DIR/serve.pub (pskv-serve's node.pub); a key pskv-serve's
 * authorized file does not list gets no answer (-PSKV_ETIMEDOUT).
 * Returns 0, -PSKV_EINVAL (bad arguments, out too small, a bad key file), -PSKV_ENOTABLE (no
 * such table served), -PSKV_ETIMEDOUT, -PSKV_ENET, -PSKV_EIO (a key file unreadable) or
 * -PSKV_EPROTO; why (when why_len > 0) says what went wrong. Thread-safe. */
int pskv_serve_lookup(const char *endpoint, const char *table, const uint64_t *keys, size_t n,
                      float *out, size_t out_cap, uint32_t *width, int64_t *clock,
                      int timeout_ms, char *why, size_t why_len);

/* The scheduler's --early-stop-metric as the latest view says ("" when off);
 * the string belongs to the view (valid until the next libpskv call). */
const char *pskv_early_stop_metric(const pskv_worker *w);

/* For the evaluator: reports one evaluation of the snapshot at `clock` (epoch of
 * the slowest worker) to the scheduler, which may stop the job early on it;
 * val_auc NAN for none (sparse-lr's evaluator has one). Returns 0 or -PSKV_ENET. */
int pskv_report_eval(pskv_worker *w, int64_t clock, double epoch, double val_loss,
                     double val_accuracy, double val_auc);


typedef enum { PSKV_OP_SUM = 1, PSKV_OP_MEAN = 2 } pskv_op;

/* All-reduce among the job's workers: every worker calls it with the same n, op
 * and table, in the same order, and on return vals (n floats) holds, on every
 * worker bit for bit the same, the element-wise sum of all workers' vals
 * (PSKV_OP_MEAN: the sum divided by the number of workers). A ring: each worker
 * sends and receives 2(N-1)/N of n floats, straight to and from its neighbours
 * (no server in the path). table: -1, or an open table handle that every rank
 * gives alike. Blocks until done. Errors, on every rank alike as far as the
 * ring still reaches it: -PSKV_EINVAL (n, op or table differ between ranks:
 * pskv_last_error names the ranks and their n), -PSKV_EPEERDEAD (a worker died:
 * the message names its rank), -PSKV_ETIMEDOUT (nothing from the previous rank
 * for the request time-out), -PSKV_ENET. After a failure vals holds partial
 * sums. A job of one worker returns at once. With an FP16 or BF16 wire
 * (pskv_config.allreduce_wire) the result is rounded to that precision (a job of
 * one worker included); ranks that differ in it fail the call with -PSKV_EINVAL,
 * every rank alike. */
int pskv_allreduce(pskv_worker *w, int table, float *vals, size_t n, pskv_op op);

/* The two halves of pskv_allreduce's ring, for sharded updates (ZeRO stage 1):
 * pskv_reduce_scatter leaves in vals[first, first+count) (pskv_allreduce_slice)
 * the same bits pskv_allreduce would (the sum or mean, rounded to a 16-bit
 * wire), the rest of vals holding partial sums; pskv_allgather hands every
 * rank's slice [first, first+count) of vals to every other rank, as fp32
 * whatever allreduce_wire says (it carries weights), so that all of vals is the
 * same on every rank. The same rules and errors as pskv_allreduce: every rank
 * calls with the same n and table, in the same order. */
void pskv_allreduce_slice(const pskv_worker *w, size_t n, size_t *first, size_t *count);
int pskv_reduce_scatter(pskv_worker *w, int table, float *vals, size_t n, pskv_op op);
int pskv_allgather(pskv_worker *w, int table, float *vals, size_t n);

/* After an all-reduce call failed with -PSKV_EPEERDEAD: waits, at most timeout_ms,
 * until every rank has a live worker again and the ring's members differ from
 * those of its last call that succeeded (a worker started with --rank R took the
 * dead rank over; a worker that took a rank over and made no call: any),
 * then meets every rank at a barrier (pskv_barrier; the new worker's is its
 * first). Calls are counted afresh after every barrier, so pieces still on their
 * way from before it are dropped; until then every call fails with
 * -PSKV_EPEERDEAD. Where the ranks go on from (the same data, the same values) is
 * the caller's to agree on after it: a worker that took a rank over calls
 * pskv_barrier instead. Returns 0, -PSKV_ETIMEDOUT (pskv_last_error names a rank
 * nobody took over, or the barrier), -PSKV_ECLOSED (a signal). */
int pskv_allreduce_rejoin(pskv_worker *w, int timeout_ms);

/* 1 when this worker registered to take over the rank of a dead worker of a
 * running job (started with --rank R after the scheduler declared the old one
 * dead), else 0. */
int pskv_took_over(const pskv_worker *w);

/* Point-to-point messages between pipeline stages (--app pipeline): the header
 * of one, what pskv_pipe_send carries and pskv_pipe_recv fills. */
typedef struct pskv_pipe_msg {
    int from_rank;   /* the sender's rank (filled by the receiver) */
    int pipeline;    /* the data-parallel pipeline */
    uint64_t micro;  /* micro-batch id */
    int dir;         /* PSKV_PIPE_FWD (activations) or PSKV_PIPE_BWD (their gradient) */
    int rows;        /* examples in the micro-batch */
    size_t n;        /* floats */
} pskv_pipe_msg;
#define PSKV_PIPE_FWD 1
#define PSKV_PIPE_BWD 2

/* Sends h and n floats (copied: vals is the caller's again on return) to worker
 * `rank`, whose address the scheduler's view gives. Does not wait for the
 * receiver. Errors: -PSKV_EPEERDEAD (no live node holds that rank),
 * -PSKV_ENET, -PSKV_EPROTO (no key for it under CURVE). */
int pskv_pipe_send(pskv_worker *w, int rank, const pskv_pipe_msg *h, const float *vals,
                   size_t n);

/* Says in this worker's heartbeats that it is stage `stage` of pipeline
 * `pipeline` (pskvctl status shows it). Any thread. */
void pskv_set_stage(pskv_worker *w, int pipeline, int stage);

/* Says in this worker's heartbeats its batch this clock (>= 1; else ignored) and
 * its measured time per example in microseconds (0: not measured), for --balance
 * batch (pskvctl status and top show them). Any thread. */
void pskv_set_balance(pskv_worker *w, int batch, float us_per_example);

/* Says in this pipeline stage's heartbeats its layers first..last (0 <= first <=
 * last < 65535; else ignored) and its measured time per micro-batch in ms (0:
 * not measured), for --balance stages (pskvctl status and top show them). Any
 * thread. */
void pskv_set_stage_layers(pskv_worker *w, int first, int last, float ms_per_micro);

/* Where the floats of a message go: called with the header (from_rank, pipeline,
 * micro, dir, rows, n); returns a buffer of at least h->n floats, or NULL to
 * refuse the message (then pskv_pipe_recv fails with -PSKV_EPROTO). */
typedef float *(*pskv_pipe_slot)(void *arg, const pskv_pipe_msg *h);

/* Waits for the next message from one of the ranks from[0..nfrom-1] and copies
 * its floats where slot says; *h gets its header. Errors: -PSKV_EPEERDEAD (one
 * of those ranks died or left the view: the message names it), -PSKV_ETIMEDOUT
 * (nothing within the request time-out), -PSKV_EPROTO (a message that was not
 * expected), -PSKV_ENET. */
int pskv_pipe_recv(pskv_worker *w, const int *from, int nfrom, pskv_pipe_slot slot, void *arg,
                   pskv_pipe_msg *h);

/* This worker's rank (0..W-1; -1 for the evaluator), the number of workers and of servers. */
int pskv_rank(const pskv_worker *w);
int pskv_num_workers(const pskv_worker *w);
int pskv_num_servers(const pskv_worker *w);

/* The servers that hold each partition (the scheduler's --replicas, R); 0 before
 * the first view. */
int pskv_num_replicas(const pskv_worker *w);

/* Partitions of the key ring (the unit of placement: the keys of one partition are
 * always on the same servers). Dense key i of a table of n keys is in partition
 * ring_partition_of(ring_dense_pos(i, n), P) (common/ring.h); 0 before the first view. */
int pskv_num_partitions(const pskv_worker *w);

/* ---- for bindings (worker/lib/wpy.c): what a language without C's headers
 * needs to use this API safely, e.g. the Python package (docs/python.md). */

/* The layout of a public struct, for a binding that mirrors it: type is one of
 * "pskv_config", "pskv_table_opts", "pskv_traffic", "pskv_held", "pskv_pipe_msg";
 * field NULL or "" gives sizeof(type), else the field's offset (offsetof).
 * Returns it (>= 0), or -PSKV_ENOTFOUND for a type or field of another name. */
int64_t pskv_struct_layout(const char *type, const char *field);

/* What a handle holds right now, by the library's own counters: for a binding's
 * leak checks (a handle released must drop them). */
typedef struct pskv_held {
    int requests;      /* requests in the window (pushes, pulls, view pulls) */
    int views;         /* pskv_pull_view's views held or in flight */
    int push_buffers;  /* pskv_push_buffer's buffers held unsent */
    int draining;      /* ended pushes whose lent arrays ZeroMQ still references */
    uint64_t lent;     /* pushes sent from the caller's memory so far (pskv_push_nocopy
                          without a copy; a counter, not something held) */
} pskv_held;

/* Fills *out from w's counters (w NULL: all zero). Never fails, never waits. */
void pskv_held_get(const pskv_worker *w, pskv_held *out);

/* 1 while request ts is in flight, 0 once it is over (or unknown): tells a
 * pskv_wait that returned -PSKV_ETIMEDOUT because its own timeout_ms passed (the
 * request goes on) from a request that ended with PSKV_ETIMEDOUT (no answer within
 * the request time-out). -PSKV_EINVAL for no handle. Never waits. */
int pskv_request_pending(pskv_worker *w, int64_t ts);

/* Detailed message of the latest failure ("" when none). Valid until the next call. */
const char *pskv_last_error(const pskv_worker *w);

/* Waits (bounded) for requests in flight, tells the scheduler this worker is done,
 * and frees the handle. NULL-safe; nulls *w_p. Returns 0 or the first error seen. */
int pskv_worker_close(pskv_worker **w_p);

#ifdef __cplusplus
}
#endif
#endif
