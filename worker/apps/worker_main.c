/* pskv-worker: joins a job through libpskv and runs one application. Built with
 * -DPSKV_EVALUATOR it is pskv-evaluator instead: the same flags (so the evaluator
 * takes every app flag the workers take), the evaluator role, app_eval.c. */
#define _GNU_SOURCE
#include <assert.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps.h"
#include "apptab.h"
#include "filter.h"
#include "updflags.h"
#include "config.h"
#include "half.h"
#include "log.h"
#include "train/lrsched.h"
#include "member.h"
#include "metrics.h"
#include "net.h"
#include "pskv.h"
#include "train/lscale.h"
#include "train/train_ar.h"
#include "timeutil.h"

#ifdef PSKV_EVALUATOR
#define PROG "pskv-evaluator"
#else
#define PROG "pskv-worker"
#endif

extern void openblas_set_num_threads(int);

static void on_stop(int sig) { app_stop_signal = sig; }

/* With the endpoint on and the application done, before the worker leaves the
 * job: says the bytes pushed, then serves the final values for `seconds` (the
 * job, and so every daemon's endpoint, stays up meanwhile). SIGINT or SIGTERM
 * ends the linger; the worker then leaves as after the linger (exit status of
 * the application). */
static void linger_metrics(double seconds)
{
    if (!metrics_listening())
        return;
    LOG_I("pushed %.0f value bytes in all (pskv_push_bytes_total); serving metrics %.1f s more",
          metrics_sum("pskv_push_bytes_total"), seconds);
    for (int64_t until = tu_now_ms() + (int64_t)(seconds * 1000);
         !app_stop_signal && tu_now_ms() < until;)
        usleep(20000);
    app_stop_signal = 0;
}

/* --start-file: waits (2 ms looks) until the file exists. Returns 0, or 1 after
 * saying why (the time-out, a signal). */
static int wait_start_file(const char *path, double timeout_s)
{
    int64_t until = tu_now_ms() + (int64_t)(timeout_s * 1000);
    while (access(path, F_OK) != 0) {
        if (app_stop_signal)
            return 1;
        if (tu_now_ms() > until) {
            fprintf(stderr, PROG ": --start-file %s did not appear within %.0f s\n", path,
                    timeout_s);
            return 1;
        }
        usleep(2000);
    }
    return 0;
}

static const cfg_entry worker_head[] = {
    {"scheduler", CFG_STR, "127.0.0.1:7700", "PSKV_SCHEDULER", 1, 0, NULL,
     "scheduler address HOST:PORT", 0, 0, NULL, NULL},
    {"app", CFG_STR, "check", "PSKV_WORKER_APP", 1, 0, NULL,
     NULL /* "application: " and the app table's names: usage_texts */, 0, 0, NULL, NULL},
    {"rank", CFG_INT, "-1", "PSKV_WORKER_RANK", -1, 65535, NULL,
     "rank to take (-1 = the scheduler assigns one)", 0, 0, NULL, NULL},
    {"request-timeout", CFG_DOUBLE, "30", "PSKV_WORKER_REQUEST_TIMEOUT", 0.01, 86400, "s",
     "a push, pull or table open not answered by then fails", 0, 0, NULL, NULL},
    {"window", CFG_INT, "64", "PSKV_WORKER_WINDOW", 1, 4096, NULL,
     "requests in flight before push/pull block", 0, 0, NULL, NULL},
    {"retry-ms", CFG_INT, "1000", "PSKV_WORKER_RETRY_MS", 0, 3600000, "ms",
     "re-send a push or pull on an async table unanswered this long, to the owner of the "
     "latest view (0 = never)", 0, 0, NULL, NULL},
    {"spin-us", CFG_INT, "100", "PSKV_WORKER_SPIN_US", 0, 100000, "us",
     "wait for a reply to a small request (<= 64 KiB) without sleeping for up to this long",
     0, 0, NULL, NULL},
    {"slice-us", CFG_INT, "100", "PSKV_WORKER_SLICE_US", 0, 100000, "us",
     "scheduling slice libpskv's ZeroMQ I/O thread asks the kernel for (Linux 6.12 or "
     "later): replies taken in as they arrive while compute runs (0 = the kernel's default)",
     0, 0, NULL, NULL},
    {"shm", CFG_BOOL, "false", "PSKV_WORKER_SHM", 1, 0, NULL,
     "push and pull values of 64 KiB or more through shared memory (/dev/shm) with servers "
     "on this host run by the same user; headers, other servers and the rest over TCP", 0, 0,
     NULL, NULL},
    {"chunk-bytes", CFG_INT, "1048576", "PSKV_WORKER_CHUNK_BYTES", 4, 1073741824, "bytes",
     "dense runs travel in messages of at most this many value bytes", 0, 0, NULL, NULL},
    {"join-timeout", CFG_DOUBLE, "600", "PSKV_WORKER_JOIN_TIMEOUT", 1, 86400, "s",
     "how long to wait for the cluster to be complete", 0, 0, NULL, NULL},
    {"job-id", CFG_INT, "0", "PSKV_JOB_ID", 0, 9.2e18, NULL, "job to join (0 = the scheduler's)",
     0, 0, NULL, NULL},
    {"start-file", CFG_STR, "", "PSKV_WORKER_START_FILE", 1, 0, NULL,
     "start (register and join) only once this file exists, at most --join-timeout "
     "seconds: a worker started ahead of its turn (pskv-tune starts a trial's worker "
     "while the trial before it ends, so that the process start overlaps it)", 0, 0, NULL,
     NULL},
    {"namespace", CFG_STR, "", "PSKV_NAMESPACE", 1, 0, NULL,
     "open the app's tables as NAMESPACE/NAME: processes naming the same namespace share "
     "them (1..64 bytes, no '/'; empty = the unnamed namespace, as before)", 0, 0, NULL, NULL},
    {"group", CFG_STR, "", "PSKV_GROUP", 1, 0, NULL,
     "join this worker group of a service (pskv-scheduler --service): ranks, barriers, "
     "clocks and life of its own; its tables live in the namespace of its name unless "
     "--namespace names another (1..64 bytes, no '/'; empty = the unnamed group, a job's "
     "workers); pskv-evaluator: the group it evaluates, at most one evaluator per group, "
     "reading its namespace, clocks and epochs, its early stopping the group's", 0, 0, NULL,
     NULL},
    {"group-size", CFG_INT, "0", "PSKV_GROUP_SIZE", 0, 65536, NULL,
     "the group's workers W, the same for each of them: the group starts when W registered "
     "(0 = the scheduler's --workers; a named group needs it)", 0, 0, NULL, NULL},
    {"drop-namespace", CFG_BOOL, "false", "PSKV_DROP_NAMESPACE", 1, 0, NULL,
     "when this worker's group ends, the servers drop its namespace's tables at once (if no "
     "other live group uses it; a service's groups only): as pskvctl drop NAMESPACE", 0, 0,
     NULL, NULL},
    {"resume", CFG_BOOL, "false", "PSKV_GROUP_RESUME", 1, 0, NULL,
     "a service's group: start from the newest complete checkpoint that holds the group's "
     "namespace (its tables loaded back, each rank its recorded progress); every worker of "
     "the group gives it", 0, 0, NULL, NULL},
    {"quota-bytes", CFG_INT, "0", "PSKV_QUOTA_BYTES", 0, 9.2e18, "bytes",
     "ask the servers to hold --namespace's tables to this much memory, every replica "
     "counted: a push creating rows past it fails (PSKV_EQUOTA); 0 = none asked", 0, 0, NULL,
     NULL},
    CFG_METRICS_ENTRY("PSKV_WORKER_METRICS_PORT"),
    {"metrics-linger", CFG_DOUBLE, "0", "PSKV_WORKER_METRICS_LINGER", 0, 86400, "s",
     "with --metrics-port: when the application is done, keep serving its final metrics this "
     "long before leaving the job (so that a scraper sees the last values; the job waits); "
     "SIGINT or SIGTERM ends it", 0, 0, NULL, NULL},
    /* consistency */
    {"consistency", CFG_STR, "async", "PSKV_WORKER_CONSISTENCY", 1, 0, NULL,
     "table consistency model: async, bsp or ssp:TAU (bounded delay)", 0, 0, NULL, NULL},
    {"filter", CFG_STR, "", "PSKV_WORKER_FILTER", 1, 0, NULL,
     "wire filters of the app's tables, comma-separated NAME[:ARGS] (repeatable: the lists "
     "join): keycache[:MB], lz4, "
     "zstd[:LEVEL]; lossy, for dense non-sum tables: int8, sign, significant:THRESH; "
     "sparse-lr with --updater sgd --momentum 0 --l1 L: kkt[:MARGIN] (rows at zero weight "
     "inside the L1 band not pushed) (docs/protocol.md, \"Filters\")", 0, 0, NULL, NULL},
    {"backup", CFG_INT, "0", "PSKV_WORKER_BACKUP", 0, 65535, NULL,
     "bsp: close each clock with the first W - backup workers", 0, 0, NULL, NULL},
    {"slowdown", CFG_DOUBLE, "1", "PSKV_WORKER_SLOWDOWN", 1, 1000, NULL,
     "make this worker's compute this many times slower (a straggler)", 0, 0, NULL, NULL},
    {"jitter", CFG_STR, "", "PSKV_WORKER_JITTER", 1, 0, NULL,
     "P:F: each iteration F times slower with probability P (transient delays); alt:F: "
     "every other iteration F times slower, even and odd ranks in turn (softmax, mlp, "
     "pipeline)", 0, 0, NULL,
     NULL},
    {"accumulate", CFG_INT, "1", "PSKV_WORKER_ACCUMULATE", 1, 65536, NULL,
     "average this many micro-batch gradients locally before one push", 0, 0, NULL, NULL},
    CFG_END};

static const cfg_entry worker_tail[] = {
    {"blas-threads", CFG_INT, "1", "PSKV_WORKER_BLAS_THREADS", 1, 256, NULL,
     "OpenBLAS threads for compute", 0, 0, NULL, NULL},
    CFG_COMMON_ENTRIES("PSKV_WORKER_PORT", "0"),
    CFG_END};

/* pskv-worker's flag table, in --help's order: worker_head, the check and bench
 * apps' flags, the training apps' and the evaluator's, worker_tail (apptab.h);
 * filled by compose_flags before parsing. The rest stays zero: the end. */
#define FLAGS_MAX 128
static cfg_entry config[FLAGS_MAX];

static void compose_flags(void)
{
    const cfg_entry *const parts[] = {worker_head, apptab_check_flags, apptab_train_flags,
                                      worker_tail};
    size_t n = 0;
    for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++)
        for (const cfg_entry *e = parts[p]; e->name; e++) {
            assert(n + 1 < FLAGS_MAX && "more flags than FLAGS_MAX");
            assert(!cfg_find(config, e->name) && "a flag in two sections");
            config[n++] = *e;
        }
}

/* `--keys N` (digits, and no such directory) was the check app's key count
 * before --keys named a key directory: still taken so, with a warning, so that
 * old command lines keep working. Returns 0, or -1 after a usage error. */
static int legacy_keys(void)
{
    cfg_entry *k = cfg_find(config, "keys");
    const char *v = k->s;
    if (!*v || v[strspn(v, "0123456789")] || access(v, F_OK) == 0)
        return 0;
    char err[200];
    if (cfg_set(cfg_find(config, "check-keys"), v, err, sizeof err) < 0) {
        fprintf(stderr, PROG ": --keys %s: %s\n", v, err);
        return -1;
    }
    fprintf(stderr, PROG ": warning: --keys %s taken as --check-keys %s (--keys now names "
            "a key directory)\n", v, v);
    k->s = "";
    return 0;
}

/* The flags only one of pskv-worker and pskv-evaluator takes (they share the
 * table, so that the evaluator takes every app flag the workers take). Returns
 * -1 to go on, or 2 after saying which flag is wrong. */
static int role_checks(const app_row *row)
{
    const char *best = cfg_str(config, "save-best");
#ifdef PSKV_EVALUATOR
    int sparse = (row->needs & APP_AUC) != 0;
    if (!(row->needs & APP_EVALUATED)) {
        char names[256];
        fprintf(stderr, PROG ": --app %s: the evaluator evaluates %s\n", row->name,
                apptab_names(names, sizeof names, APP_EVALUATED, ", ", " and "));
        return 2;
    }
    if (cfg_int(config, "validation-split") == 0) {
        fprintf(stderr, PROG ": --validation-split N is needed: the last N training images "
                "(e.g. 10000), which the workers, given the same flag, leave out\n");
        return 2;
    }
    const char *bm = cfg_str(config, "best-metric");
    if (strcmp(bm, "val_loss") && strcmp(bm, "val_accuracy") &&
        (!sparse || strcmp(bm, "val_auc"))) {
        fprintf(stderr, PROG ": --best-metric must be val_loss or val_accuracy%s (got '%s')\n",
                sparse ? " or val_auc" : "", bm);
        return 2;
    }
    if (*best) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", best);
        char *slash = strrchr(dir, '/');
        if (!slash)
            snprintf(dir, sizeof dir, ".");
        else if (slash == dir)
            dir[1] = 0;
        else
            *slash = 0;
        if (access(dir, W_OK | X_OK) != 0) {
            fprintf(stderr, PROG ": --save-best %s: directory %s %s\n", best, dir,
                    access(dir, F_OK) ? "does not exist" : "is not writable");
            return 2;
        }
    }
#else
    (void)row;
    if (*best || *cfg_str(config, "evaluate") || cfg_int(config, "stall-after")) {
        fprintf(stderr, PROG ": %s is pskv-evaluator's flag\n", *best ? "--save-best"
                : *cfg_str(config, "evaluate") ? "--evaluate" : "--stall-after");
        return 2;
    }
#endif
    return -1;
}

/* The library's settings from the flags (the evaluator's role included). */
static void library_config(pskv_config *pc)
{
    pskv_config_init(pc);
    pc->scheduler = cfg_str(config, "scheduler");
    pc->rank = (int)cfg_int(config, "rank");
    pc->keys = cfg_str(config, "keys");
    pc->insecure = (int)cfg_int(config, "insecure");
    pc->advertise = cfg_str(config, "advertise");
    pc->interface = cfg_str(config, "interface");
    pc->connect_timeout_s = cfg_double(config, "connect-timeout");
    pc->join_timeout_s = cfg_double(config, "join-timeout");
    pc->request_timeout_ms = (int)(cfg_double(config, "request-timeout") * 1000);
    pc->window = (int)cfg_int(config, "window");
    pc->job_id = (uint64_t)cfg_int(config, "job-id");
    pc->max_message = cfg_int(config, "max-message");
    pc->chunk_bytes = (size_t)cfg_int(config, "chunk-bytes");
    pc->spin_us = (int)cfg_int(config, "spin-us");
    pc->slice_us = (int)cfg_int(config, "slice-us");
    pc->retry_ms = (int)cfg_int(config, "retry-ms");
    pc->shm = (int)cfg_int(config, "shm");
    pc->table_namespace = cfg_str(config, "namespace");
    pc->quota_bytes = (uint64_t)cfg_int(config, "quota-bytes");
    pc->group = cfg_str(config, "group");
    pc->group_size = (int)cfg_int(config, "group-size");
    if (cfg_int(config, "drop-namespace")) /* libpskv reads it: no pskv_config field */
        setenv("PSKV_DROP_NAMESPACE", "1", 1);
    if (cfg_int(config, "resume")) /* libpskv reads it too: no pskv_config field */
        setenv("PSKV_GROUP_RESUME", "1", 1);
    pc->metrics_port = (int)cfg_int(config, "metrics-port");
    pc->metrics_bind = cfg_str(config, "bind");
    pc->listen_bind = cfg_str(config, "bind");
    pc->listen_port = (int)cfg_int(config, "port");
    int wire = half_parse(cfg_str(config, "wire")); /* checked by allreduce_flags */
    pc->allreduce_wire = wire > 0 ? wire : PSKV_WIRE_FP32;
#ifdef PSKV_EVALUATOR
    pc->evaluator = 1;
#endif
}

/* --op, --reduce and --sync: their values, and --sync allreduce only where an
 * app trains densely. Returns 0, or -1 after a usage error. */
static int allreduce_flags(const app_row *row)
{
    const char *app = row->name;
    const char *op = cfg_str(config, "op"), *red = cfg_str(config, "reduce"),
               *sync = cfg_str(config, "sync");
    const char *bad = strcmp(op, "push-pull") && strcmp(op, "allreduce") ? "--op must be "
                      "push-pull or allreduce"
                      : strcmp(red, "sum") && strcmp(red, "mean") ? "--reduce must be sum or mean"
                      : strcmp(sync, "ps") && strcmp(sync, "allreduce") && strcmp(sync, "local")
                          ? "--sync must be ps, allreduce or local"
                          : NULL;
    char why[300];
    int train = (row->needs & APP_DENSE) != 0;
    if (!bad && strcmp(sync, "ps") && !train) {
        snprintf(why, sizeof why, "--sync %s applies to --app %s",
                 strcmp(sync, "local") ? "allreduce" : "local", apptab_phrase(APP_DENSE));
        bad = why;
    }
    const char *wire = cfg_str(config, "wire");
    int ar = !strcmp(sync, "allreduce") || (row->needs & APP_ALLREDUCE) ||
             ((row->needs & APP_OP) && !strcmp(op, "allreduce"));
    /* parameter-server apps whose tables take --wire (pskv_table_opts.wire) */
    int ps = !ar && (row->needs & APP_PS_WIRE);
    lscale ls;
    if (!bad && lscale_parse(&ls, cfg_str(config, "loss-scale"), 1) < 0)
        bad = "--loss-scale must be dynamic or a number > 0";
    if (!bad && cfg_int(config, "zero") && strcmp(sync, "allreduce"))
        bad = "--zero 1 applies to --sync allreduce";
    if (!bad && half_parse(wire) < 0)
        bad = "--wire must be fp32, fp16 or bf16";
    if (!bad && half_parse(wire) != HALF_FP32 && !ar && !ps) {
        snprintf(why, sizeof why, "--wire applies to --sync allreduce, --app %s and the tables "
                 "of --app %s", apptab_phrase(APP_ALLREDUCE), apptab_phrase(APP_PS_WIRE));
        bad = why;
    }
    if (!bad && ls.scale > 0 && strcmp(sync, "allreduce") &&
        (!train || half_parse(wire) == HALF_FP32)) {
        snprintf(why, sizeof why, "--loss-scale applies to --sync allreduce, or to --app %s "
                 "with --wire fp16 or bf16", apptab_phrase(APP_DENSE));
        bad = why;
    }
    if (!bad && ls.scale > 0 && !ls.dynamic && strcmp(sync, "allreduce") &&
        !half_scale_ok((float)ls.scale))
        bad = "--loss-scale N with --sync ps must be a power of two in 2^-24 .. 2^24 (the "
              "servers divide by it exactly)";
    if (bad)
        fprintf(stderr, PROG ": %s (got --op %s, --reduce %s, --sync %s, --wire %s, --app %s)\n",
                bad, op, red, sync, wire, app);
    return bad ? -1 : 0;
}

/* --prefetch: only for the training apps, and only where the consistency model
 * lets a step use weights one step older (async, ssp:TAU with TAU >= 1) under
 * --sync ps. Left unset it is on exactly there (the weights a step uses miss at
 * most this worker's previous push, which async allows anyway), off elsewhere; set
 * to true elsewhere it is a usage error. Returns 0, or -1 after a usage error. */
static int prefetch_flag(const app_row *row)
{
    const char *app = row->name;
    const char *cons = cfg_str(config, "consistency"), *sync = cfg_str(config, "sync");
    char *end = NULL;
    long long tau = !strncmp(cons, "ssp:", 4) ? strtoll(cons + 4, &end, 10) : -1;
    int later = !strcmp(cons, "async") || !strcmp(cons, "ssp:inf") ||
                (end && end != cons + 4 && !*end && tau >= 1);
    char why[200];
    snprintf(why, sizeof why, "applies to --app %s", apptab_phrase(APP_PREFETCH));
    const char *bad = !(row->needs & APP_PREFETCH) ? why
                      : strcmp(sync, "ps") ? "applies to --sync ps (an all-reduce step needs "
                                             "every worker's gradient of this step)"
                      : !later ? "needs --consistency async or ssp:TAU with TAU >= 1 (a step "
                                 "under bsp or ssp:0 must see every push of the clock before)"
                               : NULL;
    char err[100]; /* cannot be: a boolean entry takes "true" */
    if (!bad && cfg_set_default(config, "prefetch", "true", err, sizeof err) < 0)
        assert(!"--prefetch takes true");
    if (!cfg_int(config, "prefetch") || !bad)
        return 0;
    fprintf(stderr, PROG ": --prefetch %s (got --app %s, --consistency %s, --sync %s)\n", bad,
            app, cons, sync);
    return -1;
}

#ifndef PSKV_EVALUATOR
/* The end-of-run report's traffic: per table, bytes on the wire and before the
 * filters, each way, and the time spent in filters. */
static void print_traffic(pskv_worker *w)
{
    pskv_traffic t;
    for (int i = 0; pskv_traffic_get(w, i, &t) == 0; i++)
        printf("rank %d table %s: sent %llu bytes (%llu before filters), received %llu "
               "(%llu before), %.1f ms in filters\n", pskv_rank(w), t.name,
               (unsigned long long)t.sent, (unsigned long long)t.sent_raw,
               (unsigned long long)t.received, (unsigned long long)t.received_raw,
               t.filter_s * 1e3);
}
#endif

/* --filter may be given more than once: the lists join ("--filter keycache --filter
 * lz4" is "keycache,lz4"); the config table keeps only the last. Returns 0, or -1
 * after saying why (exit 2). */
static int join_filters(int argc, char **argv)
{
    static char joined[512];
    size_t used = 0;
    int n = 0;
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
        const char *v = NULL;
        if (!strcmp(argv[i], "--filter") && i + 1 < argc)
            v = argv[++i];
        else if (!strncmp(argv[i], "--filter=", 9))
            v = argv[i] + 9;
        if (!v || !*v)
            continue;
        int w = snprintf(joined + used, sizeof joined - used, "%s%s", n++ ? "," : "", v);
        if (w < 0 || (size_t)w >= sizeof joined - used) {
            fprintf(stderr, PROG ": --filter: longer than %zu characters in all\n",
                    sizeof joined - 1);
            return -1;
        }
        used += (size_t)w;
    }
    char err[200];
    if (n > 1 && cfg_set(cfg_find(config, "filter"), joined, err, sizeof err) < 0) {
        fprintf(stderr, PROG ": %s\n", err);
        return -1;
    }
    return 0;
}

/* The bench and check apps' --push and --pull. Returns 0, or -1 after saying
 * what is wrong. */
static int push_pull_flags(const app_row *row)
{
    const char *push = cfg_str(config, "push");
    int pbuf = !strcmp(push, "buffer") || !strcmp(push, "buffer-clock");
    if ((strcmp(push, "nocopy") && strcmp(push, "copy") && !pbuf) ||
        (pbuf && !(row->needs & APP_PUSH_BUFFER))) {
        fprintf(stderr, PROG ": --push must be nocopy or copy (or buffer or buffer-clock, with "
                "--app %s), not '%s'\n", apptab_phrase(APP_PUSH_BUFFER), push);
        return -1;
    }
    const char *pull = cfg_str(config, "pull");
    if (!strcmp(push, "buffer-clock") && !strncmp(pull, "pushpull", 8)) {
        fprintf(stderr, PROG ": --push buffer-clock ends the clock on the dense run's push; "
                "--pull %s ends it on the pushpull: not both\n", pull);
        return -1;
    }
    if (strcmp(pull, "view") && strcmp(pull, "copy") && strcmp(pull, "pushpull") &&
        strcmp(pull, "pushpull-view")) {
        fprintf(stderr, PROG ": --pull must be copy, view, pushpull or pushpull-view, not "
                "'%s'\n", pull);
        return -1;
    }
    return 0;
}

/* The usage line and --app's help, from the app table (the evaluator's usage
 * names the apps it evaluates). Returns the usage line (static). */
static const char *usage_texts(void)
{
    static char usage[512], help[512];
    char names[400];
#ifdef PSKV_EVALUATOR
    snprintf(usage, sizeof usage, PROG " --scheduler HOST:PORT --app %s --validation-split N "
             "[flags]", apptab_names(names, sizeof names, APP_EVALUATED, "|", "|"));
#else
    snprintf(usage, sizeof usage, PROG " --scheduler HOST:PORT --app %s [flags]",
             apptab_names(names, sizeof names, 0, "|", "|"));
#endif
    snprintf(help, sizeof help, "application: %s",
             apptab_names(names, sizeof names, 0, ", ", " or "));
    cfg_find(config, "app")->help = help;
    return usage;
}

int main(int argc, char **argv)
{
    apptab_verify();
    compose_flags();
    int rc = cfg_start(config, PROG + 5, usage_texts(), argc, argv, NULL);
    if (rc >= 0)
        return rc;
    if (join_filters(argc, argv) < 0 || legacy_keys() < 0)
        return 2;
    const char *app = cfg_str(config, "app");
    const app_row *row = apptab_find(app);
    if (!row) {
        char names[400];
        fprintf(stderr, PROG ": unknown --app '%s' (%s)\n", app,
                apptab_names(names, sizeof names, 0, ", ", ", "));
        return 2;
    }
    if (allreduce_flags(row) < 0 || prefetch_flag(row) < 0)
        return 2;
    if (cfg_int(config, "estimate") && !(row->needs & APP_DENSE)) {
        fprintf(stderr, PROG ": --estimate applies to --app %s (got --app %s)\n",
                apptab_phrase(APP_DENSE), app);
        return 2;
    }
    /* the other apps would ignore it: check's sum tables, bench, sparse-lr's async */
    if (strcmp(cfg_str(config, "balance"), "none") && !(row->needs & APP_BALANCE)) {
        fprintf(stderr, PROG ": --balance applies to --app %s (got --app %s)\n",
                apptab_phrase(APP_BALANCE), app);
        return 2;
    }
    const char *adm = cfg_int(config, "admit-after") ? "--admit-after"
                      : cfg_int(config, "evict-after") ? "--evict-after" : NULL;
    if (adm && !(row->needs & APP_ADMIT) &&
        (!(row->needs & APP_EVICT) || cfg_int(config, "admit-after"))) {
        fprintf(stderr, PROG ": %s applies to sparse tables: --app %s (--evict-after: %s "
                "too; got --app %s)\n", adm, apptab_phrase(APP_ADMIT), apptab_phrase(APP_EVICT),
                app);
        return 2;
    }
    apptab_apply_defaults(row, config);
    if (updflags_check(config) < 0)
        return 2;
    filter_set fs;
    char fwhy[300];
    if (filter_parse_list(&fs, cfg_str(config, "filter"), fwhy, sizeof fwhy) < 0) {
        fprintf(stderr, PROG ": --filter: %s\n", fwhy);
        return 2;
    }
    const cfg_entry *clip = cfg_find(config, "clip-norm");
    if (strcmp(clip->from, "default") && !(clip->d > 0)) {
        fprintf(stderr, PROG ": --clip-norm must be a number > 0 (got %g)\n", clip->d);
        return 2;
    }
    const char *sched = cfg_str(config, "lr-schedule");
    lr_sched lrs;
    if (lrsched_parse(sched, &lrs) < 0) {
        fprintf(stderr, PROG ": --lr-schedule must be const, linear, cosine or exp:G with 0 < G "
                "<= 1 (got '%s')\n", sched);
        return 2;
    }
    if (lrsched_check_warmup(cfg_double(config, "lr-warmup"), (int)cfg_int(config, "epochs")) < 0) {
        fprintf(stderr, PROG ": --lr-warmup must be at least 0 and below --epochs %lld (got %g)\n",
                cfg_int(config, "epochs"), cfg_double(config, "lr-warmup"));
        return 2;
    }
    if (row->check && row->check(config, PROG) < 0)
        return 2;
    char shost[256];
    int sport;
    if (net_split_hostport(cfg_str(config, "scheduler"), shost, sizeof shost, &sport) < 0) {
        fprintf(stderr, PROG ": --scheduler '%s' is not HOST:PORT\n",
                cfg_str(config, "scheduler"));
        return 2;
    }
    if (push_pull_flags(row) < 0)
        return 2;
    if ((rc = role_checks(row)) >= 0)
        return rc;
    if ((row->needs & APP_DENSE) && app_train_check_data(config) < 0)
        return 1;
    openblas_set_num_threads((int)cfg_int(config, "blas-threads"));
#ifdef PSKV_EVALUATOR
    if (*cfg_str(config, "evaluate")) /* a saved model's metrics, no job */
        return app_evaluate_file(config);
#endif
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop; /* no SA_RESTART: a wait returns early and the loop checks */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* Keep freed message buffers in the heap: without this glibc maps and unmaps
     * every large buffer, and the page faults cost as much as a copy. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20); /* progress lines reach logs and pipes as they come */
    pskv_config pc;
    library_config(&pc);
    cfg_log(config);
    member_set_stop_flag(&app_stop_signal); /* a signal also ends the wait to join */
    if (*cfg_str(config, "start-file") &&
        wait_start_file(cfg_str(config, "start-file"), cfg_double(config, "join-timeout")))
        return app_stop_signal ? 128 + (int)app_stop_signal : 1;
    pskv_worker *w = NULL;
    rc = pskv_worker_open(&pc, &w);
    if (rc < 0) {
        fprintf(stderr, PROG ": cannot join the job: %s\n", pskv_strerror(rc));
        /* invalid settings (bad --keys, a non-loopback address without keys) are
         * usage errors, as in the daemons */
        return rc == -PSKV_EINVAL ? 2 : 1;
    }
#ifdef PSKV_EVALUATOR
    int status = app_evaluate(w, config);
#else
    int status = row->run(w, config);
    if (status == 0 && (row->needs & APP_TRAFFIC))
        print_traffic(w);
#endif
    if (!app_stop_signal)
        linger_metrics(cfg_double(config, "metrics-linger"));
    if (app_stop_signal) {
        /* stopped on request: tell the scheduler (FINISH) and leave at once; the
         * application's buffers go with the process */
        pskv_worker_close(&w);
        fflush(stdout);
        _exit(128 + (int)app_stop_signal);
    }
    rc = pskv_worker_close(&w);
#ifdef PSKV_EVALUATOR
    if (rc == -PSKV_ETIMEDOUT) /* a snapshot's pull the job's end left unanswered */
        rc = 0;
#endif
    app_free_closed(); /* nothing is in flight into them now */
    if (rc < 0 && status == 0) {
        fprintf(stderr, PROG ": close: %s\n", pskv_strerror(rc));
        status = 1;
    }
    metrics_stop();
    return status;
}
