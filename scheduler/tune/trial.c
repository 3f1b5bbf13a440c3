/* The trial launcher (trial.h): local jobs through scripts/launch-local.sh. */
#define _GNU_SOURCE
#include "trial.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pskv_errors.h"

#define MAX_ARGS 256

/* The job, run by /bin/sh in the child: the launcher's output to launch.out and
 * its status to `exit` (renamed into place, so a reader sees all of it). */
static const char script[] =
    "d=$1; shift; \"$@\" >\"$d/launch.out\" 2>&1; s=$?; "
    "echo $s >\"$d/exit.tmp\" && mv \"$d/exit.tmp\" \"$d/exit\"";

int trial_launch(const trial_opts *o, const char *dir, char *const *argv, int argc, long *pgid,
                 char *err, size_t len)
{
    char path[8300], logs[4096], servers[16], timeout[32];
    if (argc + 20 > MAX_ARGS) {
        snprintf(err, len, "too many worker flags (%d)", argc);
        return -PSKV_EINVAL;
    }
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        snprintf(err, len, "%s: %s", dir, strerror(errno));
        return -PSKV_EIO;
    }
    /* a relaunch starts clean: no exit file or logs from an earlier attempt */
    snprintf(path, sizeof path, "%s/exit", dir);
    unlink(path);
    snprintf(logs, sizeof logs, "%s/logs", dir);
    snprintf(path, sizeof path, "rm -rf '%s'", logs);
    if (strchr(logs, '\'') == NULL && system(path) != 0) {
        snprintf(err, len, "cannot clear %s", logs);
        return -PSKV_EIO;
    }
    snprintf(path, sizeof path, "%s/lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0) {
        snprintf(err, len, "%s: %s", path, fd < 0 ? strerror(errno) : "held by a running job");
        if (fd >= 0)
            close(fd);
        return -PSKV_EIO;
    }
    snprintf(servers, sizeof servers, "%d", o->servers);
    snprintf(timeout, sizeof timeout, "%.0f", o->timeout);
    char *args[MAX_ARGS];
    int n = 0;
    args[n++] = "sh";
    args[n++] = "-c";
    args[n++] = (char *)script;
    args[n++] = "pskv-trial";
    args[n++] = (char *)dir;
    args[n++] = (char *)o->launcher;
    args[n++] = "--servers";
    args[n++] = servers;
    args[n++] = "--workers";
    args[n++] = "1";
    args[n++] = "--timeout";
    args[n++] = timeout;
    args[n++] = "--log-dir";
    args[n++] = logs;
    args[n++] = "--bin-dir";
    args[n++] = (char *)o->bin_dir;
    args[n++] = "--";
    for (int i = 0; i < argc; i++)
        args[n++] = argv[i];
    args[n] = NULL;
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, len, "fork: %s", strerror(errno));
        close(fd);
        return -PSKV_EIO;
    }
    if (pid == 0) {
        /* the lock's descriptor stays open across exec (no CLOEXEC in the child)
         * so the job holds it until its last process exits */
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

void trial_stop(long pgid, int hard)
{
    if (pgid > 1)
        kill(-(pid_t)pgid, hard ? SIGKILL : SIGTERM);
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
    const char *names[] = {"logs/worker-0.log", "launch.out"};
    buf[0] = '\0';
    for (int i = 0; i < 2 && !buf[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
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
