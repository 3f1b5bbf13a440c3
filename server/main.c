/* pskv-server: owns a range of the key ring for every table and serves pushes and
 * pulls from workers. This file is the process's life: flags, the data socket,
 * joining the cluster, the loop and the exit; serve.c holds the message rules.
 *
 * One thread, one poll loop over two sockets: a ROUTER that workers dial and a
 * DEALER to the scheduler (membership: register, view, heartbeats, STOP). Every
 * request is validated before use (serve.c). Checkpoints the scheduler asks for
 * are written in the background, and a resumed job's file loaded, by
 * checkpoint.c. */
#define _GNU_SOURCE

#include <cblas.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <zmq.h>

#include "repl/chain.h"
#include "repl/chain_fwd.h"
#include "persist/checkpoint.h"
#include "config.h"
#include "consist/consist.h"
#include "lease.h"
#include "log.h"
#include "member.h"
#include "metrics.h"
#include "net.h"
#include "persist/persist.h"
#include "pskv_errors.h"
#include "sconfig.h"
#include "secure.h"
#include "serve.h"
#include "slice.h"
#include "smetrics.h"
#include "store/table.h"
#include "store/sweep.h"
#include "store/tabstats.h"
#include "timeutil.h"
#include "update/upd_plugin.h"

static cfg_entry *const config = server_config; /* sconfig.c */

/* Set by the signal handlers, read by the loop. Lock-free atomics, not
 * sig_atomic_t: a process-directed signal may run its handler on any thread that
 * does not block it (OpenBLAS's, the ZAP handler's), and only an atomic is safe
 * to share between threads as well as with a handler. */
static atomic_int stop_signal, reload_signal;
static void on_signal(int sig) { stop_signal = sig; }
static void on_hup(int sig) { reload_signal = sig; }

/* Opens the data socket (a ROUTER on --bind and --port) and creates the tables,
 * the consistency engine and the chain around it. Returns the bound port, or -1
 * (logged). */
static int open_data(void)
{
    char why[512];
    srv.ctx = zmq_ctx_new();
    srv.router = net_socket(srv.ctx, ZMQ_ROUTER, cfg_int(config, "max-message"), 0);
    int sockbuf = (int)cfg_int(config, "socket-buffer");
    if (srv.router && sockbuf > 0) { /* before bind: it applies to the connections accepted */
        zmq_setsockopt(srv.router, ZMQ_RCVBUF, &sockbuf, sizeof sockbuf);
        zmq_setsockopt(srv.router, ZMQ_SNDBUF, &sockbuf, sizeof sockbuf);
    }
    unsigned peers = (1u << KEY_ROLE_WORKER) | (1u << KEY_ROLE_EVALUATOR) |
                     (1u << KEY_ROLE_SERVER);
    int port = secure_listen(&srv.sec, srv.ctx, srv.router, peers, why, sizeof why);
    if (port == 0)
        port = net_bind(srv.router, secure_bind_addr(&srv.sec, cfg_str(config, "bind")),
                        (int)cfg_int(config, "port"), why, sizeof why);
    if (port < 0) {
        LOG_E("%s", why);
        return -1;
    }
    srv.tables = tables_new();
    srv.cons = consist_new(srv.router, &srv.mb, srv.tables);
    srv.chain = chain_new(srv.ctx, srv.router, &srv.mb, srv.tables, cfg_int(config, "max-message"));
    srv.follow = follow_new(srv.router, &srv.mb, srv.tables, srv.chain, srv.cons);
    if (srv.chain) {
        chain_on_refusal(srv.chain, serve_note_refusal);
        chain_on_close(srv.chain, serve_close_done);
    }
    if (srv.cons)
        consist_set_chain(srv.cons, srv.chain);
    if (!srv.tables || !srv.cons || !srv.chain) {
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
    checkpoint_init(&srv.mb, data_dir, srv.tables, srv.chain, srv.cons);
    char **ckpts = NULL;
    size_t nckpts = *data_dir ? persist_scan(data_dir, &ckpts) : 0;
    if (nckpts)
        LOG_I("%zu valid checkpoint files in %s", nckpts, data_dir);
    member_set_checkpoints(ckpts, nckpts);
    int adv_port = cfg_int(config, "advertise-port") ? (int)cfg_int(config, "advertise-port") : port;
    int rc = member_open(&srv.mb, srv.ctx, &srv.sec, sched, PSKV__ROLE__SERVER, -1, host, adv_port,
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
    log_set_node((int)srv.mb.node_id);
    LOG_I("registered as node %u; listening on port %d, advertised as %s:%d; job %llu",
          srv.mb.node_id, port, host, adv_port, (unsigned long long)srv.mb.job_id);
    return -1;
}

/* What this server holds whole, for its heartbeats (lease.h): the latest view whose
 * placement it holds whole (a drain waits for it), and while copies are under way
 * which partitions still wait, so that the scheduler knows the others are whole
 * here (a partition whose last whole replica dies is lost: scheduler/holders.h).
 * The list is refreshed at most every 50 ms (a scan of every partition). */
static void note_whole(void)
{
    static uint32_t parts[LEASE_MAX_AWAITED];
    static int64_t next;
    static uint64_t listed; /* the view of the list the heartbeats carry, 0 = none */
    if (!srv.mb.view || srv.whole == srv.mb.epoch)
        return;
    if (!chain_filling(srv.chain)) {
        uint64_t before = srv.whole;
        lease_set_whole(srv.whole = srv.mb.epoch);
        if (before) /* a placement changed: its copies are all here */
            LOG_I("view epoch %llu: every partition held here is whole",
                  (unsigned long long)srv.whole);
        if (listed)
            lease_set_awaited(listed = 0, NULL, 0);
        return;
    }
    int64_t now = tu_now_ms();
    if (now < next && listed == srv.mb.epoch)
        return;
    next = now + 50;
    size_t n = chain_awaited(srv.chain, parts, LEASE_MAX_AWAITED);
    lease_set_awaited(listed = srv.mb.epoch, parts, n);
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
        if (!srv.mb.view && tu_now_ms() > join_deadline) {
            LOG_E("no cluster view from scheduler %s within %.0f s", sched,
                  cfg_double(config, "join-timeout"));
            return -1;
        }
        zmq_pollitem_t items[2 + 256] = {{srv.router, 0, ZMQ_POLLIN, 0},
                                         {srv.mb.sock, 0, ZMQ_POLLIN, 0}};
        int nitems = 2 + chain_poll_items(srv.chain, items + 2, 256);
        lease_pass();
        if (reload_signal) {
            reload_signal = 0;
            secure_reload(&srv.sec);
        }
        secure_tick(&srv.sec);
        /* soon after a background checkpoint's file; a doubling map moves rows when idle */
        int growing = sweep_grow(srv.tables, 0);
        long wait = growing ? 0 : checkpoint_busy() ? 5 : 50;
        int ready = zmq_poll(items, nitems, wait);
        if (ready < 0 && errno != EINTR) {
            LOG_E("poll failed: %s", zmq_strerror(errno));
            break;
        }
        if (growing && ready == 0)
            sweep_grow(srv.tables, GROW_IDLE_BUDGET);
        if (items[1].revents & ZMQ_POLLIN)
            stopped = serve_scheduler();
        if (nitems > 2)
            chain_drain(srv.chain, items + 2, nitems - 2);
        chain_fwd_retry(srv.chain);
        if (items[0].revents & ZMQ_POLLIN)
            serve_router();
        checkpoint_pass();
        consist_stats st = consist_get_stats(srv.cons);
        lease_set_stats(st.dropped_late, st.pushes, st.pulls);
        note_whole();
        smet_tick(srv.tables, &st);
        sweep_pass(srv.tables, srv.cons);
        follow_tick(srv.follow);
    }
    return stopped;
}

/* The exit report: what was served and refused, what was left waiting, the
 * tables and the memory they take. */
static void log_exit(int stopped)
{
    consist_stats st = consist_get_stats(srv.cons);
    LOG_I("%s: %llu pushes (%.1f us each to check and apply), %llu pulls (%.1f us each to "
          "copy), %llu dropped as late, %llu refused requests, %zu tables",
          stopped ? "stopped by the scheduler" : "terminated by signal",
          (unsigned long long)st.pushes, st.pushes ? st.push_ns / 1e3 / (double)st.pushes : 0.0,
          (unsigned long long)st.pulls, st.pulls ? st.pull_ns / 1e3 / (double)st.pulls : 0.0,
          (unsigned long long)st.dropped_late, (unsigned long long)(srv.errors + st.refused),
          tables_count(srv.tables));
    if (st.acks_ridden)
        LOG_I("%llu PUSH_ACKs rode on their worker's next pull reply (acked_push)",
              (unsigned long long)st.acks_ridden);
    if (st.bsp_closes)
        LOG_I("%llu bsp clocks closed (%.1f us each to combine, apply and acknowledge)",
              (unsigned long long)st.bsp_closes, st.bsp_close_ns / 1e3 / (double)st.bsp_closes);
    if (chain_pending(srv.chain) || st.parked_now)
        LOG_W("left waiting: %zu pushes for their replicas, %llu parked pulls",
              chain_pending(srv.chain), (unsigned long long)st.parked_now);
    if (chain_resent(srv.chain) || chain_obsolete(srv.chain))
        LOG_I("%llu forwards sent again after %d ms or more without an answer, %llu let go "
              "(their worker had its answer)", (unsigned long long)chain_resent(srv.chain),
              CHAIN_RESEND_MS, (unsigned long long)chain_obsolete(srv.chain));
    if (chain_dedupe_forced(srv.chain))
        LOG_W("%llu push ids were forgotten at the dedupe cap while their worker could still "
              "re-send them", (unsigned long long)chain_dedupe_forced(srv.chain));
    tabstats_log(srv.tables);
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
    if (secure_init(&srv.sec, "pskv-server", cfg_str(config, "keys"),
                    (int)cfg_int(config, "insecure"), KEY_ROLE_SERVER, 1, why, sizeof why) < 0 ||
        secure_check_exposure(&srv.sec, secure_bind_addr(&srv.sec, cfg_str(config, "bind")), host,
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
    if (smet_start(secure_bind_addr(&srv.sec, cfg_str(config, "bind")),
                   (int)cfg_int(config, "metrics-port"), (int)srv.mb.node_id, srv.mb.rank) < 0)
        return 1;
    lease_start(srv.ctx, &srv.mb);
    srv.parked = calloc(SERVE_MAX_PARKED, sizeof *srv.parked);
    if (!srv.parked) {
        LOG_E("out of memory");
        return 1;
    }
    int stopped = run(sched);
    if (stopped < 0)
        return 1;
    checkpoint_poll(30000); /* a checkpoint being written is finished first */
    log_exit(stopped);
    lease_stop();
    member_close(&srv.mb);
    follow_destroy(&srv.follow);
    chain_destroy(&srv.chain);
    zmq_close(srv.router);
    secure_close(&srv.sec);
    zmq_ctx_term(srv.ctx);
    for (int i = 0; i < srv.nparked; i++)
        wire_msg_close(&srv.parked[i]);
    free(srv.parked);
    consist_destroy(&srv.cons);
    tables_destroy(&srv.tables);
    metrics_stop();
    return 0;
}
