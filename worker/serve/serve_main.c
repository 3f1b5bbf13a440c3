/* pskv-serve: a read-only serving copy of a model, answering predictions and
 * lookups over HTTP (shttp.h) from immutable snapshots (snap.h).
 *
 * This first step serves a model file (--model, common/modelfile.h); SIGHUP
 * reloads it and publishes the new version while answers go on from the old.
 * Following a running job's servers (deltas every --sync-ms) is issue 39's next
 * step (docs/architecture.md, worker/serve/).
 *
 * The main thread only waits for signals; MHD's threads answer. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "metrics.h"
#include "mload.h"
#include "pskv_errors.h"
#include "shttp.h"
#include "snap.h"
#include "timeutil.h"

extern void openblas_set_num_threads(int);

static cfg_entry config[] = {
    {"model", CFG_STR, "", "PSKV_SERVE_MODEL", 0, 0, NULL,
     "model file to serve (pskv-worker --save-model, pskv-evaluator --save-best); SIGHUP "
     "reloads it", 0, 0, NULL, NULL},
    {"http-port", CFG_INT, "8780", "PSKV_SERVE_HTTP_PORT", 0, 65535, NULL,
     "HTTP port for /v1/predict, /v1/lookup, /v1/model and /metrics (0 = any free port, "
     "logged)", 0, 0, NULL, NULL},
    {"http-bind", CFG_STR, "127.0.0.1", "PSKV_SERVE_HTTP_BIND", 1, 0, NULL,
     "IPv4 address the HTTP side listens on (* = all): loopback by default; put a TLS proxy "
     "in front to serve other hosts", 0, 0, NULL, NULL},
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
    int rc = cfg_start(config, "serve", "pskv-serve --model PATH [flags]", argc, argv, NULL);
    if (rc >= 0)
        return rc;
    const char *path = cfg_str(config, "model");
    if (!path[0]) {
        fprintf(stderr, "pskv-serve: --model PATH is required (following a running job is not "
                        "built yet)\n");
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
    if (!st || load(st, path) < 0) {
        snapstore_destroy(&st);
        return 1;
    }
    char source[600], why[256];
    snprintf(source, sizeof source, "file %s", path);
    shttp_cfg hc = {cfg_str(config, "http-bind"), (int)cfg_int(config, "http-port"),
                    (int)cfg_int(config, "threads"), (int)cfg_int(config, "queue"),
                    (size_t)cfg_int(config, "max-body"), (size_t)cfg_int(config, "max-rows"),
                    (size_t)cfg_int(config, "max-keys"), source};
    shttp *h = shttp_start(&hc, st, why, sizeof why);
    if (!h) {
        LOG_E("%s", why);
        snapstore_destroy(&st);
        return 1;
    }
    LOG_I("answering on http://%s:%d (/v1/predict, /v1/lookup, /v1/model, /metrics)",
          hc.bind, shttp_port(h));
    while (!stop_signal) {
        if (reload_signal) {
            reload_signal = 0;
            load(st, path);
        }
        tu_sleep_ms(100);
    }
    LOG_I("terminated by signal %d", (int)stop_signal);
    shttp_stop(&h);
    snapstore_destroy(&st);
    metrics_stop();
    return 0;
}
