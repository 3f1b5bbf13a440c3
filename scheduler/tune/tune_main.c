/* pskv-tune: hyperparameter search over pskv training runs.
 *   pskv-tune create STUDY.db --space FILE [--algo A] [--sched S] [--metric M:max|min]
 *             [--budget-epochs B] [--max-trials N] [--parallel N] [--seed S]
 *             [--trial-epochs E] [--workers W] -- WORKER_FLAGS...
 *   pskv-tune run STUDY.db [--scheduler HOST:PORT] [--launcher local|ssh|slurm]
 *             (also resumes after a kill; the trials are worker groups of that
 *             service, or of one of its own, their workers on this host, the hosts of
 *             --hostfile over ssh, or Slurm's)
 *   pskv-tune status STUDY.db | export STUDY.db --csv | plot STUDY.db --out PNG
 *   pskv-tune replay RECORDED.db [--algo A] [--sched S] [--budget-epochs B] [--seeds N]
 *             [--seed S]
 * Exit status: 0 done, 1 failed (study, service, trial launch, gnuplot) or stopped
 * by a signal, 2 usage (a bad --launcher, host file or service address) or a
 * --scheduler that is not a running service, 3 the study
 * is being run by another pskv-tune. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apptab.h"
#include "config.h"
#include "log.h"
#include "metrics.h"
#include "net.h"
#include "pskv_errors.h"
#include "replay.h"
#include "space.h"
#include "study.h"
#include "suggest.h"
#include "tplace.h"
#include "tsched.h"
#include "tservice.h"
#include "tune_out.h"
#include "tune_run.h"

static cfg_entry config[] = {
    {"space", CFG_STR, "", NULL, 1, 0, NULL,
     "create: the search space file (one line per worker flag: --lr log 1e-4 0.3, "
     "--momentum uniform 0 0.99, --hidden int 64 512, --batch choice 16 32 64)", 0, 0, NULL,
     NULL},
    {"algo", CFG_STR, "random", NULL, 1, 0, NULL,
     "create: grid (shuffled by --seed), random, or gp (Gaussian-process Bayesian search: "
     "d+1 random trials, then expected improvement)", 0, 0, NULL, NULL},
    {"sched", CFG_STR, "fifo", NULL, 1, 0, NULL,
     "create: fifo (never stops a trial), median[:min=M,trials=K] (Vizier's median "
     "stopping rule) or asha[:eta=3,min=1,max=27] (stops at rungs min*eta^k; max is the "
     "trial's epochs; with promote=1 a trial pauses at each rung with a checkpoint and the "
     "best 1/eta are resumed with more epochs)", 0, 0, NULL, NULL},
    {"metric", CFG_STR, "val_accuracy:max", NULL, 1, 0, NULL,
     "create: the metric the trials print per epoch (`epoch E NAME V`) and its direction",
     0, 0, NULL, NULL},
    {"budget-epochs", CFG_INT, "0", NULL, 0, 1e9, "epochs",
     "create: start no trial once the trials have spent this many epochs (0 = no budget)", 0,
     0, NULL, NULL},
    {"max-trials", CFG_INT, "20", NULL, 1, 4096, NULL, "create: trials at most", 0, 0, NULL,
     NULL},
    {"parallel", CFG_INT, "1", NULL, 1, 256, NULL, "create: trials running at once", 0, 0,
     NULL, NULL},
    {"seed", CFG_INT, "1", NULL, 0, 9.2e18, NULL,
     "create: the search's seed (the trials' own --seed is a worker flag); replay: the first "
     "of the --seeds seeds", 0, 0, NULL, NULL},
    {"trial-epochs", CFG_INT, "9", NULL, 1, 100000, "epochs",
     "create: each trial's --epochs (with --sched asha: its max)", 0, 0, NULL, NULL},
    {"workers", CFG_INT, "1", NULL, 1, 64, NULL,
     "create: the workers of each trial (its group's --group-size; rank 0 reports the "
     "metric)", 0, 0, NULL, NULL},
    {"grid-levels", CFG_INT, "3", NULL, 2, 1000, NULL,
     "create: points per real dimension of the grid", 0, 0, NULL, NULL},
    {"trial-timeout", CFG_DOUBLE, "600", "PSKV_TUNE_TRIAL_TIMEOUT", 1, 1e6, "s",
     "run: a trial that reports no metric for this long is killed and recorded failed "
     "(hung)", 0, 0, NULL, NULL},
    {"poll", CFG_DOUBLE, "0.02", "PSKV_TUNE_POLL", 0.001, 10, "s",
     "run: the longest wait between two reads of the trials' metric lines (a line written "
     "wakes the tuner at once: inotify)", 0, 0, NULL, NULL},
    {"servers", CFG_INT, "1", NULL, 1, 64, NULL,
     "run: servers of the tuner's own service (without --scheduler)", 0, 0, NULL, NULL},
    {"scheduler", CFG_STR, "", NULL, 1, 0, NULL,
     "run: run the trials as worker groups of the running service (pskv-scheduler "
     "--service) at HOST:PORT; without it pskv-tune starts a local service of its own and "
     "stops it at the end", 0, 0, NULL, NULL},
    {"launcher", CFG_STR, "local", "PSKV_TUNE_LAUNCHER", 1, 0, NULL,
     "run: where the trials' workers run: local (this host), ssh (the hosts of --hostfile, "
     "each worker under an ssh client of this host) or slurm (each worker one srun "
     "--ntasks=1 --job-name=GROUP); the ssh and srun clients run here and bring the "
     "workers' output back, so a killed tuner re-attaches them as local ones", 0, 0, NULL,
     NULL},
    {"hostfile", CFG_STR, "", NULL, 1, 0, NULL,
     "run: --launcher ssh's hosts, launch-hosts.sh's format: `DEST workers=N "
     "[advertise=ADDR]` per line, N the workers it runs at once (a trial's workers all on "
     "one host, the one with the most room)", 0, 0, NULL, NULL},
    {"ssh", CFG_STR, "ssh", "PSKV_SSH", 1, 0, NULL,
     "run: the ssh command of --launcher ssh, split on white space (e.g. `ssh -F "
     "CONFIG`; -o BatchMode=yes is added unless it sets BatchMode)", 0, 0, NULL, NULL},
    {"srun", CFG_STR, "srun", "PSKV_SRUN", 1, 0, NULL,
     "run: the srun command of --launcher slurm, split on white space (e.g. `srun "
     "--partition p --time 30`)", 0, 0, NULL, NULL},
    {"advertise", CFG_STR, "127.0.0.1", NULL, 1, 0, NULL,
     "run: the address of this host that the tuner's own service listens on and gives "
     "the trials' workers (another than loopback, for trials on other hosts, needs "
     "--insecure; with keys, run a service of your own and give --scheduler)", 0, 0, NULL,
     NULL},
    {"insecure", CFG_BOOL, "false", NULL, 1, 0, NULL,
     "run: the tuner's own service and the trials' workers run with --insecure (no "
     "authentication, no encryption: a network you trust)", 0, 0, NULL, NULL},
    {"prestart", CFG_BOOL, "true", "PSKV_TUNE_PRESTART", 1, 0, NULL,
     "run: while every slot is taken, start the next trial's workers ahead (they join "
     "only when a slot frees: --start-file), so that a worker's process start overlaps the "
     "trial before it (not with asha promote=1; off by default with --launcher ssh or "
     "slurm)", 0, 0, NULL, NULL},
    {"service-linger", CFG_DOUBLE, "60", "PSKV_TUNE_SERVICE_LINGER", 0, 1e6, "s",
     "run: the tuner's own service stops by itself once neither a tuner nor a trial has "
     "run for this long (a killed tuner's service is never left for good)", 0, 0, NULL,
     NULL},
    {"bin-dir", CFG_STR, "", "PSKV_BIN_DIR", 1, 0, NULL,
     "run: the daemons' directory (default: pskv-tune's own)", 0, 0, NULL, NULL},
    {"metrics-port", CFG_INT, "0", "PSKV_TUNE_METRICS_PORT", 0, 65535, NULL,
     "run: serve the study as Prometheus gauges at http://127.0.0.1:PORT/metrics "
     "(pskv_tune_trials{state}, pskv_tune_best{metric}, pskv_tune_epochs_spent; 0 = off)", 0,
     0, NULL, NULL},
    {"seeds", CFG_INT, "20", NULL, 1, 10000, NULL,
     "replay: replay the search with N seeds (--seed S: seeds S..S+N-1) on the recorded "
     "study's curves", 0, 0, NULL,
     NULL},
    {"csv", CFG_BOOL, "false", NULL, 1, 0, NULL, "export: CSV on stdout (the only format)", 0,
     0, NULL, NULL},
    {"out", CFG_STR, "", NULL, 1, 0, NULL, "plot: the PNG to write (default STUDY.db.png)", 0,
     0, NULL, NULL},
    {"log-level", CFG_STR, "info", "PSKV_LOG_LEVEL", 1, 0, NULL, "error, warn, info or debug", 0,
     0, NULL, NULL},
    CFG_END};

static const char usage[] =
    "pskv-tune create STUDY.db --space FILE [--algo grid|random|gp] "
    "[--sched fifo|median|asha[:eta=3,min=1,max=27[,promote=1]]] [--metric NAME:max|min] "
    "[--budget-epochs B] [--max-trials N] [--parallel N] [--seed S] [--trial-epochs E] "
    "[--workers W] -- WORKER_FLAGS...\n"
    "       pskv-tune run STUDY.db [--scheduler HOST:PORT] [--servers S] "
    "[--launcher local|ssh|slurm] [--hostfile FILE] [--advertise ADDR --insecure]\n"
    "       pskv-tune status STUDY.db | export STUDY.db --csv | plot STUDY.db [--out PNG]\n"
    "       pskv-tune replay RECORDED.db [--algo A] [--sched S] [--budget-epochs B] "
    "[--max-trials N] [--seeds N] [--seed S]";

/* Whether pskv-worker's training or check apps take --flag, and the value fits. */
static int known(const char *flag, const char *value, char *why, size_t len)
{
    const cfg_entry *tabs[] = {apptab_train_flags, apptab_check_flags};
    for (int k = 0; k < 2; k++)
        for (const cfg_entry *e = tabs[k]; e->name; e++)
            if (!strcmp(e->name, flag)) {
                cfg_entry copy = *e;
                return cfg_set(&copy, value, why, len) < 0 ? -1 : 0;
            }
    snprintf(why, len, "pskv-worker has no flag --%s", flag);
    return -1;
}

static int read_file(const char *path, char *buf, size_t len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    size_t n = fread(buf, 1, len - 1, f);
    int big = n == len - 1 && fgetc(f) != EOF;
    fclose(f);
    buf[n] = '\0';
    if (big) {
        snprintf(err, errlen, "%s: larger than %zu bytes", path, len - 1);
        return -1;
    }
    return 0;
}

static int create(const char *path, cfg_args *a)
{
    char text[8192], err[512], buf[64];
    if (!*cfg_str(config, "space")) {
        fprintf(stderr, "pskv-tune create: needs --space FILE\nusage: %s\n", usage);
        return 2;
    }
    if (read_file(cfg_str(config, "space"), text, sizeof text, err, sizeof err) < 0) {
        fprintf(stderr, "pskv-tune create: --space %s\n", err);
        return 2;
    }
    tune_space sp;
    if (space_parse(&sp, text, known, err, sizeof err) < 0) {
        fprintf(stderr, "pskv-tune create: %s: %s\n", cfg_str(config, "space"), err);
        return 2;
    }
    space_free(&sp);
    suggest_algo algo;
    if (suggest_algo_parse(cfg_str(config, "algo"), &algo) < 0) {
        fprintf(stderr, "pskv-tune create: --algo %s: expected grid, random or gp\n",
                cfg_str(config, "algo"));
        return 2;
    }
    tsched ts;
    if (tsched_parse(&ts, cfg_str(config, "sched"), err, sizeof err) < 0) {
        fprintf(stderr, "pskv-tune create: %s\n", err);
        return 2;
    }
    long epochs = (long)cfg_int(config, "trial-epochs");
    if (ts.kind == TSCHED_ASHA && strstr(cfg_str(config, "sched"), "max="))
        epochs = ts.max;
    else if (ts.kind == TSCHED_ASHA)
        ts.max = (int)epochs;
    const char *metric = cfg_str(config, "metric"), *colon = strchr(metric, ':');
    if (!colon || colon == metric || (strcmp(colon, ":max") && strcmp(colon, ":min")) ||
        colon - metric > 60) {
        fprintf(stderr, "pskv-tune create: --metric %s: expected NAME:max or NAME:min\n", metric);
        return 2;
    }
    char wargs[4096] = "";
    size_t used = 0;
    for (int i = 2; i < a->npos; i++) {
        if (strchr(a->pos[i], '\n') || used + strlen(a->pos[i]) + 2 > sizeof wargs) {
            fprintf(stderr, "pskv-tune create: worker flag `%s` too long or has a newline\n",
                    a->pos[i]);
            return 2;
        }
        used += (size_t)snprintf(wargs + used, sizeof wargs - used, "%s%s", i > 2 ? "\n" : "",
                                 a->pos[i]);
    }
    if (access(path, F_OK) == 0) {
        fprintf(stderr, "pskv-tune create: %s exists (run resumes it; remove it to start over)\n",
                path);
        return 2;
    }
    tune_study *st;
    if (study_open(path, 1, &st, err, sizeof err) < 0) {
        fprintf(stderr, "pskv-tune create: %s\n", err);
        return 1;
    }
    char sched[128];
    int rc = study_set(st, "space", text);
    rc = rc ? rc : study_set(st, "algo", suggest_algo_name(algo));
    rc = rc ? rc : study_set(st, "sched", tsched_format(&ts, sched, sizeof sched));
    rc = rc ? rc : study_set(st, "metric", metric);
    rc = rc ? rc : study_set(st, "worker_args", wargs);
    const char *nums[][2] = {{"budget_epochs", "budget-epochs"}, {"max_trials", "max-trials"},
                             {"parallel", "parallel"},           {"seed", "seed"},
                             {"grid_levels", "grid-levels"}, {"workers", "workers"}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0] && rc == 0; i++) {
        snprintf(buf, sizeof buf, "%lld", cfg_int(config, nums[i][1]));
        rc = study_set(st, nums[i][0], buf);
    }
    snprintf(buf, sizeof buf, "%ld", epochs);
    rc = rc ? rc : study_set(st, "trial_epochs", buf);
    char sid[16];
    rc = rc ? rc : study_id_new(sid, sizeof sid) < 0 ? -1 : study_set(st, "study_id", sid);
    study_close(&st);
    if (rc < 0) {
        fprintf(stderr, "pskv-tune create: cannot write %s\n", path);
        return 1;
    }
    printf("created %s (study %s): %s search, %s, %s, %ld epochs per trial\n", path, sid,
           suggest_algo_name(algo), sched, metric, epochs);
    return 0;
}

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig)
{
    stop_flag = sig;
}

/* pskv-tune's own directory: where the daemons are unless --bin-dir. */
static void default_bin(char *bin, size_t blen)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    snprintf(bin, blen, "%s", exe);
}

/* The service the trials run on: --scheduler's, or the tuner's own: the one the
 * study records (a killed tuner's, still answering) or a new one, recorded before
 * the first trial starts. *pgid: its watchdog's group (0: not ours to stop). */
static int service(tune_study *st, const char *path, const char *bin, const char *dir,
                   tservice **svc, long *pgid, int *replaced)
{
    char why[512], rec[400], addr[300];
    const char *ext = cfg_str(config, "scheduler");
    *pgid = 0;
    if (*ext) {
        if (tservice_attach(ext, 5000, svc, why, sizeof why) < 0) {
            fprintf(stderr, "pskv-tune run: --scheduler %s: %s\n", ext, why);
            return 2;
        }
        return 0;
    }
    char sdir[PATH_MAX + 16];
    snprintf(sdir, sizeof sdir, "%s/service", dir);
    if (tservice_hold(sdir) < 0) {
        fprintf(stderr, "pskv-tune run: %s/tuner.lock: %s\n", sdir, strerror(errno));
        return 1;
    }
    long old = 0;
    if (study_get(st, "service", rec, sizeof rec) == 0 &&
        sscanf(rec, "%299s %ld", addr, &old) == 2) {
        if (tservice_attach(addr, 3000, svc, why, sizeof why) == 0) {
            *pgid = old;
            LOG_I("re-attached to the study's service at %s (pgid %ld)", addr, old);
            return 0;
        }
        LOG_W("the study's service at %s is gone (%s): starting another", addr, why);
        tservice_kill_stale(sdir, old);
        *replaced = 1;
    }
    tservice_opts so = {bin, sdir, dir, (int)cfg_int(config, "servers"),
                        cfg_double(config, "service-linger"), cfg_str(config, "advertise"),
                        (int)cfg_int(config, "insecure")};
    int rc = -PSKV_EIO;
    for (int k = 0; k < 3 && rc < 0; k++) { /* another may take the port before it binds */
        rc = tservice_start(&so, addr, sizeof addr, pgid, why, sizeof why);
        if (rc < 0)
            break;
        snprintf(rec, sizeof rec, "%s %ld", addr, *pgid); /* the intent: a kill finds it */
        if (study_set(st, "service", rec) < 0) {
            tservice_kill_stale(sdir, *pgid);
            fprintf(stderr, "pskv-tune run: cannot write the service into %s\n", path);
            return 1;
        }
        rc = tservice_ready(addr, *pgid, so.servers, 60000, svc, why, sizeof why);
    }
    if (rc < 0) {
        study_set(st, "service", "");
        fprintf(stderr, "pskv-tune run: cannot start a service for %s: %s\n", path, why);
        return 1;
    }
    LOG_I("service started at %s with %lld servers (pgid %ld; logs %s/logs)", addr,
          cfg_int(config, "servers"), *pgid, sdir);
    return 0;
}

/* The launcher's checks before anything starts: its flags, the host file, a
 * service the hosts can reach. Returns 0 or 2 (printed why). */
static int launcher(tplace *place, char *bin, size_t blen)
{
    char why[600];
    const char *name = cfg_str(config, "launcher"), *adv = cfg_str(config, "advertise");
    if (tplace_init(place, name, cfg_str(config, "hostfile"), cfg_str(config, "ssh"),
                    cfg_str(config, "srun"), why, sizeof why) < 0) {
        fprintf(stderr, "pskv-tune run: %s\n", why);
        return 2;
    }
    int own = !*cfg_str(config, "scheduler");
    if (own && !net_is_loopback(adv) && !cfg_int(config, "insecure")) {
        fprintf(stderr, "pskv-tune run: --advertise %s: the tuner's own service on another "
                "address than loopback needs --insecure (with keys, start a service of your "
                "own and give --scheduler HOST:PORT)\n", adv);
        return 2;
    }
    if (place->kind == TPLACE_LOCAL)
        return 0;
    if (own && net_is_loopback(adv) && place->kind == TPLACE_SSH) {
        fprintf(stderr, "pskv-tune run: --launcher ssh: the workers on the hosts of %s cannot "
                "reach a service on %s: give --advertise ADDR (this host's address they dial) "
                "with --insecure, or --scheduler HOST:PORT of a service they reach\n",
                cfg_str(config, "hostfile"), adv);
        return 2;
    }
    if (own && net_is_loopback(adv))
        LOG_W("--launcher slurm with the service on %s: trials run only on this host's node "
              "(--advertise ADDR --insecure for other nodes)", adv);
    /* the workers start elsewhere: the paths they are given must be whole */
    if (bin[0] != '/') {
        char abs[PATH_MAX];
        if (!realpath(bin, abs)) {
            fprintf(stderr, "pskv-tune run: --bin-dir %s: %s\n", bin, strerror(errno));
            return 2;
        }
        snprintf(bin, blen, "%s", abs);
    }
    /* a held trial's `go` file is created here and looked for there: not started
     * ahead unless asked (a shared study directory) */
    cfg_set_default(config, "prestart", "false", why, sizeof why);
    return 0;
}

static int run_study(const char *path, tplace *place, const char *bin)
{
    char err[512], dir[PATH_MAX];
    tune_run_opts o = {
        .trial = {.bin_dir = bin,
                  .join_timeout = cfg_double(config, "trial-timeout"),
                  .place = place,
                  .insecure = (int)cfg_int(config, "insecure")},
        .dir = dir,
        .trial_timeout = cfg_double(config, "trial-timeout"),
        .poll = cfg_double(config, "poll"),
        .stop = &stop_flag,
        .prestart = (int)cfg_int(config, "prestart"),
    };
    if (access(path, F_OK) != 0) {
        fprintf(stderr, "pskv-tune run: %s: no such study (pskv-tune create makes one)\n", path);
        return 2;
    }
    snprintf(dir, sizeof dir, "%s.d", path);
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "pskv-tune run: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    char abs[PATH_MAX];
    if (place->kind != TPLACE_LOCAL && realpath(dir, abs)) /* the paths a worker elsewhere gets */
        snprintf(dir, sizeof dir, "%s", abs);
    tune_study *st;
    if (study_open(path, 1, &st, err, sizeof err) < 0) {
        fprintf(stderr, "pskv-tune run: %s\n", err);
        return 1;
    }
    if (study_lock(st, err, sizeof err) < 0) {
        fprintf(stderr, "pskv-tune run: %s: %s\n", path, err);
        study_close(&st);
        return 3;
    }
    char wk[32], sid[32] = "";
    o.trial.workers = study_get(st, "workers", wk, sizeof wk) == 0 ? atoi(wk) : 1;
    study_get(st, "study_id", sid, sizeof sid); /* none: a study from before ids */
    o.trial.study_id = sid;
    if (tplace_capacity(place, o.trial.workers) < 1) {
        fprintf(stderr, "pskv-tune run: --hostfile %s: no host has room for a trial's %d "
                "workers (workers=N on its line)\n", cfg_str(config, "hostfile"), o.trial.workers);
        study_unlock(st);
        study_close(&st);
        return 2;
    }
    long pgid = 0;
    int rc = service(st, path, o.trial.bin_dir, dir, &o.trial.svc, &pgid, &o.service_replaced);
    if (rc != 0) {
        study_unlock(st);
        study_close(&st);
        return rc;
    }
    o.end_trials_on_stop = pgid > 0;
    metrics_identity("tune", -1, -1);
    if (metrics_start("127.0.0.1", (int)cfg_int(config, "metrics-port")) < 0) {
        rc = -PSKV_EIO;
    } else {
        struct sigaction sa = {.sa_handler = on_signal};
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        rc = tune_run(st, &o);
        metrics_stop();
    }
    /* the tuner's own service ends with the study, and with a signal (its trials
     * were stopped and run again next time); a failed run leaves it to the next run
     * or to its linger */
    if (pgid > 0 && rc >= 0) {
        tservice_shutdown(o.trial.svc, pgid, 30000);
        study_set(st, "service", "");
        LOG_I("service %s shut down", tservice_addr(o.trial.svc));
    }
    tservice_close(&o.trial.svc);
    study_unlock(st);
    study_close(&st);
    if (rc == 1 && pgid > 0)
        fprintf(stderr, "pskv-tune run: stopped by signal %d; its running trials were stopped "
                "and its service shut down: run again to resume (they run again)\n",
                (int)stop_flag);
    else if (rc == 1)
        fprintf(stderr, "pskv-tune run: stopped by signal %d; its trials go on in the service: "
                "run again to re-attach\n", (int)stop_flag);
    else if (rc < 0)
        fprintf(stderr, "pskv-tune run: %s\n", pskv_strerror(rc));
    return rc == 0 ? 0 : 1;
}

static int run(const char *path)
{
    char bin[PATH_MAX];
    default_bin(bin, sizeof bin);
    if (*cfg_str(config, "bin-dir"))
        snprintf(bin, sizeof bin, "%s", cfg_str(config, "bin-dir"));
    tplace place;
    int rc = launcher(&place, bin, sizeof bin);
    if (rc == 0)
        rc = run_study(path, &place, bin);
    tplace_fini(&place);
    return rc;
}

int main(int argc, char **argv)
{
    cfg_args a;
    int rc = cfg_start(config, "tune", usage, argc, argv, &a);
    if (rc >= 0)
        return rc;
    const char *verb = a.npos >= 1 ? a.pos[0] : "";
    int known_verb = !strcmp(verb, "create") || !strcmp(verb, "run") ||
                     !strcmp(verb, "status") || !strcmp(verb, "export") || !strcmp(verb, "plot") ||
                     !strcmp(verb, "replay");
    if (!known_verb || a.npos < 2 || (strcmp(verb, "create") && a.npos != 2)) {
        fprintf(stderr, "pskv-tune: expected create, run, status, export, plot or replay and one "
                "STUDY.db\nusage: %s\n", usage);
        return 2;
    }
    if (!strcmp(verb, "create"))
        return create(a.pos[1], &a);
    if (!strcmp(verb, "run"))
        return run(a.pos[1]);
    if (!strcmp(verb, "export") && !cfg_int(config, "csv")) {
        fprintf(stderr, "pskv-tune export: needs --csv (the one format)\n");
        return 2;
    }
    if (!strcmp(verb, "status"))
        return tune_status(a.pos[1], stdout);
    if (!strcmp(verb, "replay")) {
        tune_replay_opts ro = {cfg_str(config, "algo"), cfg_str(config, "sched"),
                               (long)cfg_int(config, "budget-epochs"),
                               (long)cfg_int(config, "max-trials"), (int)cfg_int(config, "seeds"),
                               (int)cfg_int(config, "grid-levels"),
                               (unsigned long long)cfg_int(config, "seed")};
        return tune_replay(a.pos[1], &ro);
    }
    if (!strcmp(verb, "export"))
        return tune_export_csv(a.pos[1], stdout);
    return tune_plot(a.pos[1], cfg_str(config, "out"));
}
