/* pskv-scheduler: registration, node ids and ranks, key ranges, the published
 * cluster view, barriers, heartbeats, checkpoints and the orderly end of a job.
 *
 * One thread, one ROUTER socket, one poll loop with a periodic tick. Every node
 * talks to the scheduler over a DEALER; the scheduler answers on the routing id a
 * node registered with (heartbeats may come from another socket of the same node
 * and are matched by the sender id in Meta). Job life (membership.h):
 *   WAITING  nodes register; status works; the view is not yet published
 *   RUNNING  every server and worker joined; view epoch 1 published
 *   STOPPING every worker finished (or died); STOP sent to the servers
 *   FINISHED every server acknowledged STOP (or a grace time ran out)
 * and the process exits 0 once finished for --linger seconds (0 = at once);
 * meanwhile a late REGISTER is refused with "job J finished".
 *
 * This file holds the flags, the socket, the loop and the dispatch; sched_net.c
 * the sends; membership.c the node table, leases and the job's life, published as
 * node events (events.h) that checkpoint.c, drain.c and earlystop.c subscribe to;
 * view.c the placement and the View, whose parts the policies fill; checkpoint.c
 * checkpoints and resume. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <zmq.h>

#include "checkpoint.h"
#include "config.h"
#include "detect.h"
#include "earlystop.h"
#include "drain.h"
#include "events.h"
#include "group.h"
#include "grpresume.h"
#include "nsdrop.h"
#include "log.h"
#include "membership.h"
#include "metrics.h"
#include "net.h"
#include "pskv_errors.h"
#include "refuse.h"
#include "sched_metrics.h"
#include "sched_net.h"
#include "timeutil.h"
#include "view.h"

static void *ctx, *sock;

/* Set by the signal handlers, read by the loop. Lock-free atomics, not
 * sig_atomic_t: a process-directed signal may run its handler on any thread that
 * does not block it (OpenBLAS's, the ZAP handler's), and only an atomic is safe
 * to share between threads as well as with a handler. */
static atomic_int stop_signal, reload_signal;
static void on_signal(int sig) { stop_signal = sig; }
static void on_hup(int sig) { reload_signal = sig; }

static cfg_entry config[] = {
    {"servers", CFG_INT, "1", "PSKV_SCHEDULER_SERVERS", 1, 4096, NULL,
     "number of servers in the job", 0, 0, NULL, NULL},
    {"workers", CFG_INT, "1", "PSKV_SCHEDULER_WORKERS", 1, 65536, NULL,
     "number of workers in the job (with --service: of each unnamed group)", 0, 0, NULL, NULL},
    {"service", CFG_BOOL, "false", "PSKV_SCHEDULER_SERVICE", 0, 0, NULL,
     "run a server group that outlives its workers: it starts once its servers registered, "
     "worker groups (pskv-worker --group NAME --group-size W) come and go, and it runs until "
     "pskvctl shutdown or SIGTERM", 0, 0, NULL, NULL},
    {"heartbeat-ms", CFG_INT, "100", "PSKV_SCHEDULER_HEARTBEAT_MS", 10, 60000, "ms",
     "heartbeat period handed to every node", 0, 0, NULL, NULL},
    {"dead-after-ms", CFG_INT, "5000", "PSKV_SCHEDULER_DEAD_AFTER_MS", 50, 3600000, "ms",
     "upper bound of a silent node's time-out: a node silent this long is declared dead "
     "whatever its phi (a crashed node is declared dead sooner, from its closed "
     "connection)", 0, 0, NULL, NULL},
    {"min-dead-after-ms", CFG_INT, "800", "PSKV_SCHEDULER_MIN_DEAD_AFTER_MS", 20, 3600000,
     "ms", "lower bound of a silent node's time-out: never declared dead by silence sooner "
     "(at most --dead-after-ms, at least 2 x --heartbeat-ms); a server's first lease is this "
     "minus one heartbeat", 0, 0, NULL, NULL},
    {"phi-threshold", CFG_DOUBLE, "8", "PSKV_SCHEDULER_PHI_THRESHOLD", 0, 1000, NULL,
     "a silent node is declared dead once its phi (phi-accrual over its recent heartbeat "
     "gaps: -log10 of the chance that it is merely late) reaches this (> 0)", 0, 0, NULL,
     NULL},
    {"replicas", CFG_INT, "1", "PSKV_SCHEDULER_REPLICAS", 1, 8, NULL,
     "servers in each partition's chain (1 = no replication)", 0, 0, NULL, NULL},
    {"partitions", CFG_INT, "64", "PSKV_SCHEDULER_PARTITIONS", 1, 65536, NULL,
     "fixed partitions of the key ring (the unit of placement and replication)", 0, 0, NULL,
     NULL},
    {"vnodes", CFG_INT, "16", "PSKV_SCHEDULER_VNODES", 1, 256, NULL,
     "tokens per server on the consistent-hash ring", 0, 0, NULL, NULL},
    {"data-dir", CFG_STR, "", "PSKV_SCHEDULER_DATA_DIR", 0, 0, NULL,
     "directory of the checkpoint manifest (empty = no checkpoints)", 0, 0, NULL, NULL},
    {"checkpoint-every", CFG_DOUBLE, "0", "PSKV_SCHEDULER_CHECKPOINT_EVERY", 0, 1e7, "s",
     "take a checkpoint this often while the job runs (0 = only on request)", 0, 0, NULL,
     NULL},
    {"keep-checkpoints", CFG_INT, "0", "PSKV_SCHEDULER_KEEP_CHECKPOINTS", 0, 1000000, NULL,
     "keep only this many newest complete checkpoints: older ones leave the manifest and "
     "the servers delete their files (0 = keep every one)", 0, 0, NULL, NULL},
    {"full-every", CFG_INT, "1", "PSKV_SCHEDULER_FULL_EVERY", 1, 10000, NULL,
     "of every K checkpoints the first is full, the others deltas holding only the rows "
     "changed since the one before (1 = every one full)", 0, 0, NULL, NULL},
    {"resume", CFG_BOOL, "false", "PSKV_SCHEDULER_RESUME", 0, 0, NULL,
     "continue the job of the newest complete checkpoint in --data-dir", 0, 0, NULL, NULL},
    {"resume-best", CFG_BOOL, "false", "PSKV_SCHEDULER_RESUME_BEST", 0, 0, NULL,
     "continue the job from the checkpoint that --data-dir's manifest marks best (the "
     "nearest to the evaluator's best evaluation) instead of the newest", 0, 0, NULL, NULL},
    {"join-timeout", CFG_DOUBLE, "600", "PSKV_SCHEDULER_JOIN_TIMEOUT", 1, 86400, "s",
     "give up when the cluster is not complete after this long", 0, 0, NULL, NULL},
    {"linger", CFG_DOUBLE, "0", "PSKV_SCHEDULER_LINGER", 0, 86400, "s",
     "once the job finished, stay up this long: a node registering late is refused at "
     "once (\"job J finished\") and status still answers", 0, 0, NULL, NULL},
    {"job-id", CFG_INT, "0", "PSKV_JOB_ID", 0, 9.2e18, NULL,
     "job id (0 = pick a random one)", 0, 0, NULL, NULL},
    {"worker-checkpoints", CFG_BOOL, "false", "PSKV_SCHEDULER_WORKER_CHECKPOINTS", 0, 0, NULL,
     "with --keys, worker keys may ask for checkpoints too (pskv_checkpoint); by default "
     "only control keys may", 0, 0, NULL, NULL},
    {"evaluators", CFG_INT, "0", "PSKV_SCHEDULER_EVALUATORS", 0, 1, NULL,
     "evaluators the job runs (0 or 1): with 1, one pskv-evaluator may register (at any "
     "time) and report validation metrics; in a service, one per worker group "
     "(pskv-evaluator --group)", 0, 0, NULL, NULL},
    {"early-stop-metric", CFG_STR, "", "PSKV_SCHEDULER_EARLY_STOP_METRIC", 0, 0, NULL,
     "stop the job (in a service: the evaluator's group) early when this evaluator "
     "metric stops improving: val_loss, "
     "val_accuracy or val_auc (sparse-lr) (empty = never; needs --evaluators 1)", 0, 0, NULL,
     NULL},
    {"patience", CFG_INT, "3", "PSKV_SCHEDULER_PATIENCE", -1e9, 1e9, "evaluations",
     "early stopping: stop after this many evaluations in a row without improvement (>= 1)",
     0, 0, NULL, NULL},
    {"min-delta", CFG_DOUBLE, "0", "PSKV_SCHEDULER_MIN_DELTA", 0, 1e9, NULL,
     "early stopping: an evaluation improves only when better than the best by more than this",
     0, 0, NULL, NULL},
    {"eval-silence", CFG_DOUBLE, "0", "PSKV_SCHEDULER_EVAL_SILENCE", 0, 86400, "s",
     "an evaluator that sends no report for this long (0 = 5 times the longest gap between "
     "its reports so far, at least 10 s) is taken as hung: logged, shown by status, early "
     "stopping suspended until it reports again", 0, 0, NULL, NULL},
    CFG_METRICS_ENTRY("PSKV_SCHEDULER_METRICS_PORT"),
    CFG_COMMON_ENTRIES("PSKV_SCHEDULER_PORT", "7700"),
    CFG_END};

/* Under keys, who may send what. REGISTER only with a key of the role it asks
 * for; a message naming a registered node only from the key that node
 * registered with; CHECKPOINT only from a control key (or a worker key with
 * --worker-checkpoints); DRAIN only from a control key. A refused message is counted, logged once a minute per
 * peer, answered PSKV_EPERM when it asks for an answer, and changes nothing. */
static int authorized(wire_msg *msg)
{
    if (!sched_sec.keyed)
        return 1;
    Pskv__Meta *r = msg->meta;
    char why[200] = "";
    int answer = 1;
    switch (r->type) {
    case PSKV__MSG_TYPE__REGISTER: {
        int want = r->role == PSKV__ROLE__SERVER   ? KEY_ROLE_SERVER
                   : r->role == PSKV__ROLE__WORKER ? KEY_ROLE_WORKER
                   : r->role == PSKV__ROLE__EVALUATOR ? KEY_ROLE_EVALUATOR
                                                      : -1;
        if (msg->role != want)
            snprintf(why, sizeof why, "a %s key cannot register as a %s",
                     key_role_name((key_role)msg->role), memb_role_name((int)r->role));
        break;
    }
    case PSKV__MSG_TYPE__STATUS:
        break;
    case PSKV__MSG_TYPE__CHECKPOINT:
        if (msg->role != KEY_ROLE_CONTROL &&
            !(msg->role == KEY_ROLE_WORKER && cfg_int(config, "worker-checkpoints")))
            snprintf(why, sizeof why,
                     "checkpoints need a control key (pskvctl --keys DIR/control checkpoint)%s",
                     msg->role == KEY_ROLE_WORKER ? ", or --worker-checkpoints on the scheduler"
                                                  : "");
        break;
    case PSKV__MSG_TYPE__DRAIN:
        if (msg->role != KEY_ROLE_CONTROL)
            snprintf(why, sizeof why, "drains need a control key (pskvctl --keys DIR/control "
                     "drain NODE)");
        break;
    case PSKV__MSG_TYPE__SHUTDOWN:
    case PSKV__MSG_TYPE__GROUP_STOP:
    case PSKV__MSG_TYPE__NS_DROP:
        if (msg->role != KEY_ROLE_CONTROL)
            snprintf(why, sizeof why, "%s needs a control key (pskvctl --keys DIR/control)",
                     r->type == PSKV__MSG_TYPE__SHUTDOWN     ? "shutdown"
                     : r->type == PSKV__MSG_TYPE__GROUP_STOP ? "stop GROUP"
                                                             : "drop NAMESPACE");
        break;
    default: {
        memb_node *n = r->has_sender ? memb_find(r->sender) : NULL;
        answer = r->type == PSKV__MSG_TYPE__BARRIER || r->type == PSKV__MSG_TYPE__FINISH;
        if (n && strcmp(n->key, msg->key))
            snprintf(why, sizeof why, "%s names node %u, which registered with another key",
                     wire_type_name((int)r->type), n->id);
    }
    }
    if (!*why)
        return 1;
    refuse_note(REFUSE_MESSAGE, msg->peer, msg->key, why);
    if (answer)
        wire_send_error(sock, &msg->rid, r, memb.job_id, 0, PSKV_EPERM, why, 0);
    return 0;
}

/* Hands msg to the module that serves its type, once its job id is this job's
 * and its key may send it. */
static void dispatch(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    if (!authorized(msg))
        return;
    if (r->has_job_id && r->job_id != 0 && r->job_id != memb.job_id) {
        char why[160];
        snprintf(why, sizeof why, "job id %llu is not this job's (%llu)",
                 (unsigned long long)r->job_id, (unsigned long long)memb.job_id);
        sched_refuse(msg, PSKV_EJOB, why);
        return;
    }
    switch (r->type) {
    case PSKV__MSG_TYPE__REGISTER: memb_on_register(msg); break;
    case PSKV__MSG_TYPE__HEARTBEAT: memb_on_heartbeat(msg); break;
    case PSKV__MSG_TYPE__BARRIER: memb_on_barrier(msg); break;
    case PSKV__MSG_TYPE__FINISH: memb_on_finish(msg); break;
    case PSKV__MSG_TYPE__STOP_ACK: memb_on_stop_ack(msg); break;
    case PSKV__MSG_TYPE__STATUS: view_status(msg); break;
    case PSKV__MSG_TYPE__CHECKPOINT: ckpt_start(msg); break;
    case PSKV__MSG_TYPE__DRAIN: drain_request(msg); break;
    case PSKV__MSG_TYPE__SHUTDOWN: memb_on_shutdown(msg); break;
    case PSKV__MSG_TYPE__GROUP_STOP: group_on_stop(msg); break;
    case PSKV__MSG_TYPE__NS_DROP: nsdrop_request(msg); break;
    case PSKV__MSG_TYPE__NS_DROP_ACK: nsdrop_on_ack(msg); break;
    case PSKV__MSG_TYPE__NS_RESTORE_ACK: grpresume_on_ack(msg); break;
    case PSKV__MSG_TYPE__CHECKPOINT_ACK: ckpt_on_ack(msg); break;
    case PSKV__MSG_TYPE__PEER_CLOSED: detect_on_peer_closed(msg); break;
    case PSKV__MSG_TYPE__EVAL_REPORT: {
        memb_node *n = memb_sender(msg);
        if (n)
            estop_on_report(n, msg);
        break;
    }
    case PSKV__MSG_TYPE__ERROR:
        if (!ckpt_on_error(r) && !grpresume_on_error(r))
            LOG_W("error from %s: %s", msg->peer, r->error ? r->error : "?");
        break;
    default:
        sched_refuse(msg, PSKV_EPROTO, "message type not served by the scheduler");
    }
}

/* Timers: the checkpoint timer and time-out, then leases. */
static void tick(void)
{
    int64_t now = tu_now_ms();
    secure_tick(&sched_sec);
    ckpt_tick(now);
    estop_tick(now);
    memb_expire(now);
    drain_tick();
    nsdrop_tick();
    grpresume_tick(now);
    schedm_tick();
}

/* Reads the flags into the modules. Returns -1 to go on, or the exit status
 * (0 after --help, 1 unreadable manifest, 2 bad flags). */
static int configure(int argc, char **argv)
{
    int rc = cfg_start(config, "scheduler",
                       "pskv-scheduler [--port P] --servers S --workers W [flags]", argc, argv,
                       NULL);
    if (rc >= 0)
        return rc;
    log_set_node(0);
    memb.nservers = (int)cfg_int(config, "servers");
    memb.nworkers = (int)cfg_int(config, "workers");
    memb.service = (int)cfg_int(config, "service");
    memb.heartbeat_ms = (int)cfg_int(config, "heartbeat-ms");
    memb.dead_after_ms = (int)cfg_int(config, "dead-after-ms");
    memb.join_timeout_s = cfg_double(config, "join-timeout");
    memb.linger_s = cfg_double(config, "linger");
    uint32_t replicas = (uint32_t)cfg_int(config, "replicas");
    view_init((uint32_t)cfg_int(config, "partitions"), replicas,
              (uint32_t)cfg_int(config, "vnodes"));
    rc = detect_init(cfg_double(config, "phi-threshold"),
                     (int)cfg_int(config, "min-dead-after-ms"),
                     !strcmp(cfg_find(config, "min-dead-after-ms")->from, "default"));
    if (rc)
        return rc;
    cfg_find(config, "min-dead-after-ms")->i = detect_min_dead_ms(); /* the dump says it */
    /* a lease counts from the send time of an acknowledged heartbeat and must end
     * before the scheduler could declare the server dead: the first one (the view's)
     * before the earliest, later ones as each ack grants (detect.h) */
    memb.lease_ms = detect_min_dead_ms() - memb.heartbeat_ms;
    if ((int)replicas > memb.nservers) {
        fprintf(stderr, "pskv-scheduler: --replicas %u needs at least as many --servers (%d)\n",
                replicas, memb.nservers);
        return 2;
    }
    if (cfg_int(config, "keep-checkpoints") && !*cfg_str(config, "data-dir")) {
        fprintf(stderr, "pskv-scheduler: --keep-checkpoints needs --data-dir (there are no "
                "checkpoints without it)\n");
        return 2;
    }
    rc = estop_init((int)cfg_int(config, "evaluators"), cfg_str(config, "early-stop-metric"),
                    cfg_int(config, "patience"), cfg_double(config, "min-delta"),
                    cfg_double(config, "eval-silence"));
    if (rc >= 0)
        return rc;
    rc = ckpt_init(cfg_str(config, "data-dir"),
                   cfg_int(config, "resume-best") ? RESUME_BEST
                   : cfg_int(config, "resume")    ? RESUME_NEWEST
                                                  : RESUME_NONE,
                   cfg_double(config, "checkpoint-every"),
                   (int)cfg_int(config, "keep-checkpoints"), (int)cfg_int(config, "full-every"));
    if (rc)
        return rc;
    /* the policies subscribe to node events and fill their parts of VIEW and
     * STATUS_REPLY, checkpoint.c first, then the metrics: in the order the calls
     * by name went (events.h) */
    ckpt_hooks();
    group_hooks(); /* before estop_hooks: earlystop.c's filler adds to its group lines */
    estop_hooks();
    drain_hooks();
    schedm_hooks();
    nsdrop_hooks();
    grpresume_hooks();
    if (!ckpt_resume_job(&memb.job_id))
        memb.job_id = (uint64_t)cfg_int(config, "job-id");
    while (memb.job_id == 0 &&
           getrandom(&memb.job_id, sizeof memb.job_id, 0) != sizeof memb.job_id)
        ;
    memb.job_id &= 0x7fffffffffffffffULL; /* printable as a signed flag value too */
    if (memb.job_id == 0)
        memb.job_id = 1;
    memb.started_ms = tu_now_ms();
    char why[600];
    if (secure_init(&sched_sec, "pskv-scheduler", cfg_str(config, "keys"),
                    (int)cfg_int(config, "insecure"), KEY_ROLE_SCHEDULER, 1, why,
                    sizeof why) < 0 ||
        secure_check_exposure(&sched_sec, secure_bind_addr(&sched_sec, cfg_str(config, "bind")),
                              cfg_str(config, "advertise"), why, sizeof why) < 0) {
        fprintf(stderr, "pskv-scheduler: %s\n", why);
        return 2;
    }
    return -1;
}

/* Receives and dispatches what is waiting (at most 1000 messages, so that the
 * tick is never starved). */
static void drain(void)
{
    char why[512];
    for (int budget = 0; budget < 1000; budget++) {
        wire_msg msg;
        int rc = wire_recv(sock, 1, &msg, why, sizeof why);
        if (rc == -PSKV_ETIMEDOUT) {
            wire_msg_close(&msg);
            break;
        }
        if (rc < 0) {
            LOG_W("dropped message from %s: %s", msg.peer, why);
            if (msg.has_rid)
                wire_send_error(sock, &msg.rid, msg.meta, memb.job_id, 0, rc, why, 0);
        } else {
            dispatch(&msg);
            detect_note(&msg); /* the connection it came on is its sender's */
        }
        wire_msg_close(&msg);
    }
}

/* The event loop: until a signal, or the end of a stopping job. A service takes
 * SIGTERM (or SIGINT) as pskvctl shutdown: it stops its servers first; a second
 * signal ends it at once. */
static void run(void)
{
    int64_t next_tick = tu_now_ms();
    int signals = 0;
    while (!stop_signal || (memb.service && signals == 0)) {
        if (stop_signal && memb.service) {
            signals = 1;
            stop_signal = 0;
            memb_on_shutdown(NULL);
        }
        if (reload_signal) {
            reload_signal = 0;
            secure_reload(&sched_sec);
        }
        zmq_pollitem_t items[2] = {{sock, 0, ZMQ_POLLIN, 0}, {detect_socket(), 0, ZMQ_POLLIN, 0}};
        long wait = (long)(next_tick - tu_now_ms());
        long probe = detect_recheck(tu_now_ms()); /* a closed connection probed again */
        if (probe >= 0 && probe < wait)
            wait = probe;
        if (wait < 0)
            wait = 0;
        if (zmq_poll(items, items[1].socket ? 2 : 1, wait) < 0 && errno != EINTR) {
            LOG_E("poll failed: %s", zmq_strerror(errno));
            break;
        }
        drain();
        detect_events(); /* after the messages: a node's last words (FINISH) come first */
        if (tu_now_ms() >= next_tick) {
            tick();
            next_tick = tu_now_ms() + (memb.heartbeat_ms < 100 ? memb.heartbeat_ms : 100);
        }
        if (memb_stopped())
            break;
    }
}

int main(int argc, char **argv)
{
    int rc = configure(argc, argv);
    if (rc >= 0)
        return rc;
    /* Buffers of 4 KiB and more (ZeroMQ's per-connection buffers, views) are
     * mapped and unmapped on their own, not carved from the heap: with every node
     * replacement a connection comes and goes, and on the heap its buffers left holes
     * between long-lived small objects, so that the scheduler's resident memory grew
     * by 10-25 KB per replacement for ever (docs/benchmarks.md, chaos soak). The
     * scheduler moves little data: the extra system calls cost nothing that shows. */
    mallopt(M_MMAP_THRESHOLD, 4096);

    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, on_hup);

    ctx = zmq_ctx_new();
    sock = net_socket(ctx, ZMQ_ROUTER, cfg_int(config, "max-message"), 0);
    sched_net_use(sock);
    char why[512];
    unsigned every_role = (1u << KEY_ROLE_SERVER) | (1u << KEY_ROLE_WORKER) |
                          (1u << KEY_ROLE_EVALUATOR) | (1u << KEY_ROLE_CONTROL);
    if (secure_listen(&sched_sec, ctx, sock, every_role, why, sizeof why) < 0) {
        LOG_E("%s", why);
        return 1;
    }
    int port = net_bind(sock, secure_bind_addr(&sched_sec, cfg_str(config, "bind")),
                        (int)cfg_int(config, "port"), why, sizeof why);
    if (port < 0) {
        LOG_E("%s", why);
        return 1;
    }
    /* A socket has one monitor: with keys it is the ZAP handler's (it counts the
     * refused handshakes, secure_listen), which forwards the closes to the detector. */
    void *closes = secure_forward_closes(&sched_sec, sock);
    if (getenv("PSKV_TEST_NO_MONITOR")) { /* as if no monitor could start: servers' reports */
        LOG_W("test hook PSKV_TEST_NO_MONITOR: the scheduler watches none of its connections; "
              "closes reach it from the servers' reports (PEER_CLOSED) only");
        if (closes)
            zmq_close(closes);
    } else if (closes)
        detect_take(closes);
    else if (sched_sec.keyed)
        LOG_W("cannot have the closed connections forwarded from the ZAP handler's monitor: "
              "a crashed node is noticed by its lease only");
    else
        detect_start(ctx, sock);
    if (schedm_start(secure_bind_addr(&sched_sec, cfg_str(config, "bind")),
                     (int)cfg_int(config, "metrics-port")) < 0)
        return 1;
    cfg_log(config);
    if (memb.service)
        LOG_I("listening on port %d; service %llu; waiting for %d servers (worker groups come "
              "and go)", port, (unsigned long long)memb.job_id, memb.nservers);
    else
        LOG_I("listening on port %d; job %llu; waiting for %d servers and %d workers", port,
              (unsigned long long)memb.job_id, memb.nservers, memb.nworkers);
    printf("pskv-scheduler listening on port %d\n", port);
    fflush(stdout);

    run();

    if (stop_signal)
        LOG_I("terminated by signal %d", (int)stop_signal);
    else
        LOG_I("job %llu done", (unsigned long long)memb.job_id);
    detect_stop(sock);
    zmq_close(sock);
    secure_close(&sched_sec);
    zmq_ctx_term(ctx);
    memb_free();
    group_reset();
    nsdrop_reset();
    grpresume_reset();
    view_free();
    ckpt_free();
    events_reset();
    metrics_stop();
    return 0;
}
