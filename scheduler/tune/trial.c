/* The trial launcher (trial.h): a worker group per trial on the study's service. */
#define _GNU_SOURCE
#include "trial.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "pskv_errors.h"
#include "timeutil.h"

#define MAX_ARGS 256
#define STOP_ANSWER_MS 2000
#define REMOTE_KILL_MS 15000 /* ssh or scancel, and the wait for the workers to go */

/* The group's W workers, run by /bin/sh in the child: rank I's output to
 * logs/worker-I.log, and the first non-zero status (else 0) to `exit` (renamed
 * into place, so a reader sees all of it). */
static const char script[] =
    "d=$1; w=$2; shift 2; i=0; p=; "
    "while [ $i -lt $w ]; do \"$@\" --rank $i >\"$d/logs/worker-$i.log\" 2>&1 & "
    "p=\"$p $!\"; "
    "i=$((i + 1)); done; s=0; for x in $p; do wait $x; r=$?; [ $s = 0 ] && s=$r; done; "
    "echo $s >\"$d/exit.tmp\" && mv \"$d/exit.tmp\" \"$d/exit\"";

/* The trials' launcher: the study's, or this host's when it gave none. */
static const tplace *place_of(const trial_opts *o)
{
    static const tplace here = {.kind = TPLACE_LOCAL};
    return o->place ? o->place : &here;
}

void trial_group(const trial_opts *o, long id, char *buf, size_t len)
{
    const char *sid = o->study_id ? o->study_id : "";
    snprintf(buf, len, "%s%strial-%ld", sid, *sid ? "-" : "", id);
}

/* dir/place, written (renamed into place) before the fork: where the workers run */
static int place_put(const char *dir, const char *where)
{
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/place", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%s\n", where) < 0 || fclose(f) != 0 || rename(tmp, path) < 0)
        return -PSKV_EIO;
    return 0;
}

void trial_where(const char *dir, char *buf, size_t len)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/place", dir);
    snprintf(buf, len, "local");
    FILE *f = fopen(path, "r");
    if (f) {
        if (!fgets(buf, (int)len, f))
            snprintf(buf, len, "local");
        buf[strcspn(buf, "\n")] = '\0';
        fclose(f);
    }
}

int trial_launch(const trial_opts *o, const char *dir, long id, int host, int held,
                 char *const *argv, int argc, long *pgid, char *err, size_t len)
{
    char path[8300], logs[4096], worker[4200], group[64], join[32], size[16], go[4200];
    char where[300], remote[20000];
    if (argc + 24 > MAX_ARGS) {
        snprintf(err, len, "too many worker flags (%d)", argc);
        return -PSKV_EINVAL;
    }
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        snprintf(err, len, "%s: %s", dir, strerror(errno));
        return -PSKV_EIO;
    }
    /* a relaunch starts clean: no exit file or log from an earlier attempt */
    snprintf(path, sizeof path, "%s/exit", dir);
    unlink(path);
    snprintf(go, sizeof go, "%s/go", dir);
    unlink(go);
    snprintf(logs, sizeof logs, "%s/logs", dir);
    for (int r = 0; r < 64; r++) {
        snprintf(path, sizeof path, "%s/worker-%d.log", logs, r);
        unlink(path);
    }
    if (mkdir(logs, 0755) < 0 && errno != EEXIST) {
        snprintf(err, len, "%s: %s", logs, strerror(errno));
        return -PSKV_EIO;
    }
    tplace_kind kind = o->place ? o->place->kind : TPLACE_LOCAL;
    if (kind == TPLACE_SSH)
        snprintf(where, sizeof where, "ssh %s", o->place->hosts[host].dest);
    else
        snprintf(where, sizeof where, "%s", tplace_kind_name(kind));
    if (place_put(dir, where) < 0) {
        snprintf(err, len, "%s/place: %s", dir, strerror(errno));
        return -PSKV_EIO;
    }
    snprintf(path, sizeof path, "%s/lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0) {
        snprintf(err, len, "%s: %s", path, fd < 0 ? strerror(errno) : "held by a running worker");
        if (fd >= 0)
            close(fd);
        return -PSKV_EIO;
    }
    snprintf(worker, sizeof worker, "%s/pskv-worker", o->bin_dir);
    trial_group(o, id, group, sizeof group);
    snprintf(join, sizeof join, "%.0f", o->join_timeout);
    snprintf(size, sizeof size, "%d", o->workers > 0 ? o->workers : 1);
    char *wargs[MAX_ARGS];
    int w = 0;
    wargs[w++] = worker;
    wargs[w++] = "--scheduler";
    wargs[w++] = (char *)tservice_addr(o->svc);
    wargs[w++] = "--group";
    wargs[w++] = group;
    wargs[w++] = "--group-size";
    wargs[w++] = size;
    wargs[w++] = "--drop-namespace";
    wargs[w++] = "--join-timeout";
    wargs[w++] = join;
    if (o->insecure)
        wargs[w++] = "--insecure";
    if (held) {
        wargs[w++] = "--start-file";
        wargs[w++] = go;
    }
    for (int i = 0; i < argc; i++)
        wargs[w++] = argv[i];
    char *args[MAX_ARGS + TPLACE_MAX_WORDS + 8];
    int n = 0;
    args[n++] = "sh";
    args[n++] = "-c";
    args[n++] = (char *)script;
    args[n++] = "pskv-trial";
    args[n++] = (char *)dir;
    args[n++] = size;
    int c = tplace_argv(place_of(o), host, group, wargs, w, remote,
                        sizeof remote, args + n, MAX_ARGS + TPLACE_MAX_WORDS + 8 - n);
    if (c < 0) {
        snprintf(err, len, "the worker's command line is too long for the %s launcher", where);
        close(fd);
        return -PSKV_EINVAL;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, len, "fork: %s", strerror(errno));
        close(fd);
        return -PSKV_EIO;
    }
    if (pid == 0) {
        /* the lock's descriptor stays open across exec (no CLOEXEC in the child)
         * so the worker holds it until it exits */
        int keep = fcntl(fd, F_GETFD);
        fcntl(fd, F_SETFD, keep & ~FD_CLOEXEC);
        setsid();
        snprintf(path, sizeof path, "%s/pid", dir);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "%ld\n", (long)getpid());
            fclose(f);
        }
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) {
            dup2(nul, 0);
            dup2(nul, 1);
            dup2(nul, 2);
        }
        execv("/bin/sh", args);
        _exit(127);
    }
    close(fd);
    *pgid = pid;
    return 0;
}

int trial_release(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/go", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -PSKV_EIO;
    close(fd);
    return 0;
}

int trial_alive(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/lock", dir);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int held = flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
    close(fd); /* releases it when we took it */
    return held;
}

long trial_pgid(const char *dir)
{
    char path[4096];
    long pid = 0;
    snprintf(path, sizeof path, "%s/pid", dir);
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%ld", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    return pid;
}

int trial_exit_status(const char *dir)
{
    char path[4096];
    int s = -1;
    snprintf(path, sizeof path, "%s/exit", dir);
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%d", &s) != 1)
            s = -1;
        fclose(f);
    }
    return s;
}

int trial_stop(const trial_opts *o, const char *dir, long id, long pgid, int hard)
{
    char group[64], why[300], where[300];
    trial_group(o, id, group, sizeof group);
    if (!hard && o->svc &&
        tservice_stop_group(o->svc, group, STOP_ANSWER_MS, NULL, why, sizeof why) == 0)
        return 0;
    trial_where(dir, where, sizeof where);
    int remote = strcmp(where, "local") != 0, rc = 0;
    if (!hard)
        LOG_I("trial %ld: group stop refused (%s): SIGTERM to its worker%s%s", id, why,
              remote ? "s on " : "", remote ? where : "");
    /* a remote worker is signalled on its host: its client here ends with it (a
     * client killed first would free the trial's lock while the worker runs on) */
    if (remote)
        rc = tplace_kill(place_of(o), where, group, hard, REMOTE_KILL_MS);
    if (pgid > 1 && (!remote || hard))
        kill(-(pid_t)pgid, hard ? SIGKILL : SIGTERM);
    return rc;
}

int trial_read_metrics(const char *dir, long *offset, const char *metric,
                       int (*cb)(void *arg, int epoch, double value), void *arg)
{
    char path[4096], *line = NULL;
    size_t cap = 0;
    ssize_t l;
    snprintf(path, sizeof path, "%s/logs/worker-0.log", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int n = 0;
    if (fseek(f, *offset, SEEK_SET) == 0)
        while ((l = getline(&line, &cap, f)) > 0) {
            if (line[l - 1] != '\n')
                break; /* a line still being written: read it next time */
            *offset += (long)l;
            /* the metric, then the last "epoch " before it (progress lines ended
             * by \r may come first on the same line) */
            char *m = strstr(line, metric), *e = NULL;
            size_t ml = strlen(metric);
            if (!m || m[ml] != ' ' || (m > line && m[-1] != ' '))
                continue;
            for (char *p = strstr(line, "epoch "); p && p < m; p = strstr(p + 1, "epoch "))
                e = p;
            if (!e)
                continue;
            char *end1, *end2;
            long epoch = strtol(e + 6, &end1, 10);
            double v = strtod(m + ml + 1, &end2);
            if (end1 == e + 6 || end2 == m + ml + 1 || epoch < 1 || epoch > 100000)
                continue;
            int rc = cb(arg, (int)epoch, v);
            if (rc < 0) {
                n = rc;
                break;
            }
            n++;
        }
    free(line);
    fclose(f);
    return n;
}

void trial_last_words(const char *dir, char *buf, size_t len)
{
    char path[4096], *line = NULL;
    size_t cap = 0;
    ssize_t l;
    buf[0] = '\0';
    for (int i = 0; i < 64 && !buf[0]; i++) { /* rank 0's words first */
        snprintf(path, sizeof path, "%s/logs/worker-%d.log", dir, i);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        /* the app's own words, not the log lines (they open with a time) */
        while ((l = getline(&line, &cap, f)) > 0)
            if (line[0] != '\n' && !(strstr(line, " epoch ") && strstr(line, " val_")) &&
                !(l > 11 && line[4] == '-' && line[10] == 'T')) {
                line[strcspn(line, "\n")] = '\0';
                snprintf(buf, len, "%s", line);
            }
        fclose(f);
    }
    free(line);
}

void trial_reap(void)
{
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

struct trial_watch {
    int fd; /* inotify, non-blocking */
};

trial_watch *trial_watch_new(void)
{
    trial_watch *w = malloc(sizeof *w);
    if (!w)
        return NULL;
    w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->fd < 0) {
        LOG_W("inotify: %s: the trials' logs are read every --poll only", strerror(errno));
        free(w);
        return NULL;
    }
    return w;
}

void trial_watch_destroy(trial_watch **self_p)
{
    if (!self_p || !*self_p)
        return;
    close((*self_p)->fd);
    free(*self_p);
    *self_p = NULL;
}

int trial_watch_add(trial_watch *w, const char *dir)
{
    char path[4200];
    if (!w)
        return -1;
    snprintf(path, sizeof path, "%s/logs", dir);
    return inotify_add_watch(w->fd, path, IN_MODIFY | IN_CLOSE_WRITE);
}

void trial_watch_remove(trial_watch *w, int handle)
{
    if (w && handle >= 0)
        inotify_rm_watch(w->fd, handle);
}

void trial_watch_wait(trial_watch *w, int64_t since_ms, int min_ms, int max_ms)
{
    if (!w) {
        tu_sleep_ms(max_ms);
        return;
    }
    struct pollfd p = {.fd = w->fd, .events = POLLIN};
    if (poll(&p, 1, max_ms) > 0) {
        char buf[4096]; /* the events say only that something was written: read it all */
        while (read(w->fd, buf, sizeof buf) > 0) {
        }
    }
    int64_t left = since_ms + min_ms - tu_now_ms();
    if (left > 0)
        tu_sleep_ms(left);
}
