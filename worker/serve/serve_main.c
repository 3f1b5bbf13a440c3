/* pskv-serve: a read-only serving copy of a model, answering predictions and
 * lookups over HTTP (shttp.h) from immutable snapshots (snap.h).
 *
 * It serves either a model file (--model, common/modelfile.h; SIGHUP reloads it
 * and publishes the new version while answers go on from the old), or a running
 * job's namespace (--scheduler HOST:PORT --namespace NS, sfollow.h): the servers
 * send the rows that changed every --sync-ms.
 *
 * With --keys (a worker key: the servers bind it as a reader of the namespace)
 * every ZeroMQ socket speaks CURVE: following, and the --zmq-port side, which
 * admits the keys of the key directory's authorized file (secure.h).
 *
 * The main thread follows the job (or waits for signals); MHD's threads answer. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "config.h"
#include "keys.h"
#include "log.h"
#include "metrics.h"
#include "mload.h"
#include "pskv_errors.h"
#include "secure.h"
#include "sfollow.h"
#include "szmq.h"
#include "shttp.h"
#include "snap.h"
#include "timeutil.h"

extern void openblas_set_num_threads(int);

static cfg_entry config[] = {
    {"model", CFG_STR, "", "PSKV_SERVE_MODEL", 0, 0, NULL,
     "model file to serve (pskv-worker --save-model, pskv-evaluator --save-best); SIGHUP "
     "reloads it", 0, 0, NULL, NULL},
    {"scheduler", CFG_STR, "", "PSKV_SCHEDULER", 0, 0, NULL,
     "HOST:PORT of a running job's scheduler: follow --namespace's tables as they train "
     "(instead of --model)", 0, 0, NULL, NULL},
    {"namespace", CFG_STR, "", "PSKV_NAMESPACE", 0, 0, NULL,
     "the namespace to follow with --scheduler (pskv-worker --namespace; empty = the "
     "unnamed one)", 0, 0, NULL, NULL},
    {"sync-ms", CFG_INT, "200", "PSKV_SERVE_SYNC_MS", 10, 60000, "ms",
     "with --scheduler: how often the servers send the rows that changed (dense tables: "
     "at a clock boundary)", 0, 0, NULL, NULL},
    {"follow-wait", CFG_INT, "30", "PSKV_SERVE_FOLLOW_WAIT", 1, 86400, "s",
     "with --scheduler: exit 1 when no rows of the namespace arrived within this long "
     "(no scheduler, a namespace no server has)", 0, 0, NULL, NULL},
    {"http-port", CFG_INT, "8780", "PSKV_SERVE_HTTP_PORT", 0, 65535, NULL,
     "HTTP port for /v1/predict, /v1/lookup, /v1/model and /metrics (0 = any free port, "
     "logged)", 0, 0, NULL, NULL},
    {"http-bind", CFG_STR, "127.0.0.1", "PSKV_SERVE_HTTP_BIND", 1, 0, NULL,
     "IPv4 address the HTTP side listens on (* = all): loopback by default; put a TLS proxy "
     "in front to serve other hosts", 0, 0, NULL, NULL},
    {"zmq-port", CFG_INT, "0", "PSKV_SERVE_ZMQ_PORT", 0, 65535, NULL,
     "ZeroMQ port for LOOKUP (libpskv's pskv_serve_lookup), on --http-bind's address; 0 = "
     "none", 0, 0, NULL, NULL},
    {"keys", CFG_STR, "", "PSKV_KEYS", 1, 0, NULL,
     "key directory of a worker key (node.key, node.pub, scheduler.pub; with --zmq-port also "
     "authorized): CURVE to the scheduler and servers, which must list the key (a `reader "
     "NS` line); --zmq-port admits only keys listed in authorized", 0, 0, NULL, NULL},
    {"threads", CFG_INT, "2", "PSKV_SERVE_THREADS", 1, 256, NULL,
     "threads answering HTTP requests", 0, 0, NULL, NULL},
    {"queue", CFG_INT, "256", "PSKV_SERVE_QUEUE", 1, 65536, NULL,
     "requests in flight beyond which an answer is 503 (counted in "
     "pskv_serve_rejected_total)", 0, 0, NULL, NULL},
    {"max-body", CFG_INT, "4194304", "PSKV_SERVE_MAX_BODY", 64, 1073741824, "bytes",
     "largest request body (413 beyond)", 0, 0, NULL, NULL},
    {"max-rows", CFG_INT, "1024", "PSKV_SERVE_MAX_ROWS", 1, 1048576, NULL,
     "most rows in one /v1/predict (400 beyond)", 0, 0, NULL, NULL},
    {"max-keys", CFG_INT, "10000", "PSKV_SERVE_MAX_KEYS", 1, 10000000, NULL,
     "most keys in one /v1/lookup (400 beyond)", 0, 0, NULL, NULL},
    {"log-level", CFG_STR, "info", "PSKV_LOG_LEVEL", 1, 0, NULL, "error, warn, info or debug",
     0, 0, NULL, NULL},
    CFG_END};

/* Set by the signal handlers, read by the main loop. */
static atomic_int stop_signal, reload_signal;
static void on_signal(int sig) { stop_signal = sig; }
static void on_hup(int sig) { reload_signal = sig; }

/* Loads --model and publishes it. Returns 0, or -1 after logging why (the version
 * served before, if any, stays). */
static int load(snapstore *st, const char *path)
{
    char why[512];
    snap *s = NULL;
    int rc = mload_file(path, &s, why, sizeof why);
    if (rc < 0) {
        LOG_E("cannot serve %s: %s (%s)", path, why, pskv_strerror(rc));
        return -1;
    }
    char table[sizeof s->table];
    snprintf(table, sizeof table, "%s", s->table);
    size_t n = s->n;
    long long clock = (long long)s->clock;
    if (snap_publish(st, &s) < 0) {
        LOG_E("out of memory publishing %s", path);
        return -1;
    }
    LOG_I("serving table %s (%zu rows, clock %lld) from %s", table, n, clock, path);
    return 0;
}

int main(int argc, char **argv)
{
    int rc = cfg_start(config, "serve",
                       "pskv-serve --model PATH | --scheduler HOST:PORT --namespace NS [flags]",
                       argc, argv, NULL);
    if (rc >= 0)
        return rc;
    const char *path = cfg_str(config, "model"), *sched = cfg_str(config, "scheduler");
    if (!path[0] == !sched[0]) {
        fprintf(stderr, "pskv-serve: give either --model PATH (a model file) or --scheduler "
                        "HOST:PORT (a running job's namespace), not %s\n",
                path[0] ? "both" : "neither");
        return 2;
    }
    if (path[0] && cfg_str(config, "namespace")[0]) {
        fprintf(stderr, "pskv-serve: --namespace goes with --scheduler, not --model\n");
        return 2;
    }
    secure sec;
    char why[512];
    const char *keys = cfg_str(config, "keys");
    if (secure_init(&sec, "pskv-serve", keys, 0, KEY_ROLE_WORKER,
                    keys[0] && cfg_int(config, "zmq-port") != 0, why, sizeof why) < 0) {
        fprintf(stderr, "pskv-serve: %s\n", why);
        return 2;
    }
    if (keys[0] && path[0] && !cfg_int(config, "zmq-port")) {
        fprintf(stderr, "pskv-serve: --keys goes with --scheduler or --zmq-port, not a --model "
                        "file alone (the HTTP side takes no keys)\n");
        secure_close(&sec);
        return 2;
    }
    cfg_log(config);
    openblas_set_num_threads(1); /* the answering threads are the parallelism */
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, on_hup);
    metrics_identity("serve", -1, -1);
    snapstore *st = snapstore_new();
    if (!st || (path[0] && load(st, path) < 0)) {
        secure_close(&sec);
        snapstore_destroy(&st);
        return 1;
    }
    char source[600];
    if (path[0])
        snprintf(source, sizeof source, "file %s", path);
    else
        snprintf(source, sizeof source, "namespace '%s' of scheduler %s",
                 cfg_str(config, "namespace"), sched);
    shttp_cfg hc = {cfg_str(config, "http-bind"), (int)cfg_int(config, "http-port"),
                    (int)cfg_int(config, "threads"), (int)cfg_int(config, "queue"),
                    (size_t)cfg_int(config, "max-body"), (size_t)cfg_int(config, "max-rows"),
                    (size_t)cfg_int(config, "max-keys"), source};
    shttp *h = shttp_start(&hc, st, why, sizeof why);
    if (!h) {
        LOG_E("%s", why);
        secure_close(&sec);
        snapstore_destroy(&st);
        return 1;
    }
    LOG_I("answering on http://%s:%d (/v1/predict, /v1/lookup, /v1/model, /metrics)",
          hc.bind, shttp_port(h));
    szmq *z = NULL;
    if (cfg_int(config, "zmq-port")) {
        z = szmq_start(hc.bind, (int)cfg_int(config, "zmq-port"), hc.max_keys, st, &sec, why,
                       sizeof why);
        if (!z) {
            LOG_E("--zmq-port: %s", why);
            secure_close(&sec);
            shttp_stop(&h);
            snapstore_destroy(&st);
            return 1;
        }
        LOG_I("answering LOOKUP on tcp://%s:%d%s", hc.bind, szmq_port(z),
              sec.keyed ? " (CURVE: keys listed in authorized)" : "");
    }
    sfollow_cfg fc = {sched, cfg_str(config, "namespace"), (int)cfg_int(config, "sync-ms"),
                      (int)cfg_int(config, "follow-wait"), &sec};
    if (sched[0])
        rc = sfollow_run(&fc, st, &stop_signal);
    while (!sched[0] && !stop_signal) {
        if (reload_signal) {
            reload_signal = 0;
            load(st, path);
        }
        tu_sleep_ms(100);
    }
    if (stop_signal)
        LOG_I("terminated by signal %d", (int)stop_signal);
    szmq_stop(&z); /* with keys, it stops the ZAP handler in its context first */
    secure_close(&sec);
    shttp_stop(&h);
    snapstore_destroy(&st);
    metrics_stop();
    return sched[0] ? rc : 0;
}
