/* Where a trial's workers run (tplace.h). */
#define _GNU_SOURCE
#include "tplace.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "pskv_errors.h"
#include "timeutil.h"

const char *tplace_kind_name(tplace_kind k)
{
    return k == TPLACE_SSH ? "ssh" : k == TPLACE_SLURM ? "slurm" : "local";
}

static int split(tplace *p, const char *cmd, const char *flag, char *why, size_t len)
{
    snprintf(p->cmdbuf, sizeof p->cmdbuf, "%s", cmd);
    p->ncmd = 0;
    char *save = NULL;
    for (char *w = strtok_r(p->cmdbuf, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        if (p->ncmd >= TPLACE_MAX_WORDS - 4) {
            snprintf(why, len, "--%s: more than %d words", flag, TPLACE_MAX_WORDS - 4);
            return -PSKV_EINVAL;
        }
        p->cmd[p->ncmd++] = w;
    }
    if (p->ncmd == 0) {
        snprintf(why, len, "--%s is empty", flag);
        return -PSKV_EINVAL;
    }
    p->cmd[p->ncmd] = NULL;
    return 0;
}

/* One line of the host file (launch-hosts.sh's format) into h; 1 when the line is
 * blank, 0 with a host, -1 with why. */
static int host_line(char *line, tplace_host *h, char *why, size_t len)
{
    char *hash = strchr(line, '#'), *save = NULL;
    if (hash)
        *hash = '\0';
    char *w = strtok_r(line, " \t\r\n", &save);
    if (!w)
        return 1;
    if (strchr(w, '=') || w[0] == '-') {
        snprintf(why, len, "a line must start with the host (ssh destination), got '%s'", w);
        return -1;
    }
    memset(h, 0, sizeof *h);
    snprintf(h->dest, sizeof h->dest, "%s", w);
    int have_w = 0;
    while ((w = strtok_r(NULL, " \t\r\n", &save))) {
        char *end;
        if (!strncmp(w, "workers=", 8)) {
            long n = strtol(w + 8, &end, 10);
            if (end == w + 8 || *end || n < 0 || n > 100000 || have_w++) {
                snprintf(why, len, "bad or repeated '%s' (want workers=N, N >= 0, once)", w);
                return -1;
            }
            h->slots = (int)n;
        } else if (!strncmp(w, "advertise=", 10)) {
            if (!w[10] || strlen(w + 10) >= sizeof h->adv) {
                snprintf(why, len, "'advertise=' needs an address");
                return -1;
            }
            snprintf(h->adv, sizeof h->adv, "%s", w + 10);
        } else if (strcmp(w, "scheduler") && strncmp(w, "servers=", 8) && strncmp(w, "port=", 5)) {
            snprintf(why, len, "unknown word '%s' (expected workers=N, advertise=ADDR; "
                     "scheduler, servers=N and port=P are launch-hosts.sh's, unused here)", w);
            return -1;
        }
    }
    return 0;
}

static int read_hosts(tplace *p, const char *path, char *why, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(why, len, "--hostfile %s: %s", path, strerror(errno));
        return -PSKV_EINVAL;
    }
    p->hosts = calloc(TPLACE_MAX_HOSTS, sizeof *p->hosts);
    if (!p->hosts) {
        fclose(f);
        return -PSKV_ENOMEM;
    }
    char line[1024], err[300];
    int no = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        no++;
        tplace_host h;
        int got = host_line(line, &h, err, sizeof err);
        if (got < 0) {
            snprintf(why, len, "%s:%d: %s", path, no, err);
            rc = -PSKV_EINVAL;
        } else if (got == 0 && h.slots > 0) {
            if (p->nhosts >= TPLACE_MAX_HOSTS) {
                snprintf(why, len, "%s:%d: more than %d hosts", path, no, TPLACE_MAX_HOSTS);
                rc = -PSKV_EINVAL;
                break;
            }
            for (int k = 0; k < p->nhosts; k++)
                if (!strcmp(p->hosts[k].dest, h.dest)) {
                    snprintf(why, len, "%s:%d: host %s is also on line %d", path, no, h.dest,
                             p->hosts[k].line);
                    rc = -PSKV_EINVAL;
                }
            h.line = no;
            p->hosts[p->nhosts++] = h;
        }
    }
    fclose(f);
    if (rc == 0 && p->nhosts == 0) {
        snprintf(why, len, "%s:%d: no host runs workers (workers=N on a line)", path,
                 no > 0 ? no : 1);
        rc = -PSKV_EINVAL;
    }
    return rc;
}

int tplace_init(tplace *p, const char *name, const char *hostfile, const char *ssh_cmd,
                const char *srun_cmd, char *why, size_t len)
{
    memset(p, 0, sizeof *p);
    if (!strcmp(name, "local")) {
        p->kind = TPLACE_LOCAL;
        if (*hostfile) {
            snprintf(why, len, "--hostfile is for --launcher ssh");
            return -PSKV_EINVAL;
        }
        return 0;
    }
    if (!strcmp(name, "slurm")) {
        p->kind = TPLACE_SLURM;
        if (*hostfile) {
            snprintf(why, len, "--hostfile is for --launcher ssh (Slurm places the trials)");
            return -PSKV_EINVAL;
        }
        return split(p, srun_cmd, "srun", why, len);
    }
    if (strcmp(name, "ssh")) {
        snprintf(why, len, "--launcher %s: expected local, ssh or slurm", name);
        return -PSKV_EINVAL;
    }
    p->kind = TPLACE_SSH;
    if (!*hostfile) {
        snprintf(why, len, "--launcher ssh needs --hostfile FILE (DEST workers=N per line)");
        return -PSKV_EINVAL;
    }
    int rc = split(p, ssh_cmd, "ssh", why, len);
    if (rc == 0 && !strcasestr(ssh_cmd, "batchmode")) { /* never a password prompt */
        p->cmd[p->ncmd++] = "-o";
        p->cmd[p->ncmd++] = "BatchMode=yes";
        p->cmd[p->ncmd] = NULL;
    }
    return rc < 0 ? rc : read_hosts(p, hostfile, why, len);
}

void tplace_fini(tplace *p)
{
    free(p->hosts);
    p->hosts = NULL;
    p->nhosts = 0;
}

int tplace_capacity(const tplace *p, int workers)
{
    if (p->kind != TPLACE_SSH)
        return INT32_MAX;
    int n = 0;
    for (int h = 0; h < p->nhosts; h++)
        n += p->hosts[h].slots / (workers > 0 ? workers : 1);
    return n;
}

int tplace_pick(const tplace *p, const int *used, int workers)
{
    if (p->kind != TPLACE_SSH)
        return 0;
    int best = -1, room = 0;
    for (int h = 0; h < p->nhosts; h++) {
        int free_slots = p->hosts[h].slots - used[h];
        if (free_slots >= workers && free_slots > room)
            best = h, room = free_slots;
    }
    return best;
}

int tplace_find(const tplace *p, const char *dest)
{
    for (int h = 0; p->kind == TPLACE_SSH && h < p->nhosts; h++)
        if (!strcmp(p->hosts[h].dest, dest))
            return h;
    return -1;
}

/* Appends word quoted for any POSIX shell to buf at *at. Returns 0 or -1 (full). */
static int shq(char *buf, size_t len, size_t *at, const char *word)
{
    int plain = *word != '\0';
    for (const char *c = word; *c && plain; c++)
        plain = strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+=:,./-",
                       *c) != NULL;
    size_t need = strlen(word) * 4 + 3;
    if (*at + need + 2 > len)
        return -1;
    if (*at)
        buf[(*at)++] = ' ';
    if (plain) {
        *at += (size_t)sprintf(buf + *at, "%s", word);
        return 0;
    }
    buf[(*at)++] = '\'';
    for (const char *c = word; *c; c++)
        if (*c == '\'')
            *at += (size_t)sprintf(buf + *at, "'\\''");
        else
            buf[(*at)++] = *c;
    buf[(*at)++] = '\'';
    buf[*at] = '\0';
    return 0;
}

/* A remote worker's pid file: what tplace_kill reads on its host. */
#define PIDF "/tmp/pskv-tune-%s.$2.pid"

int tplace_argv(const tplace *p, int h, const char *group, char *const *wargv, int wargc,
                char *buf, size_t blen, char **argv, int max)
{
    int n = 0;
    if (p->kind == TPLACE_LOCAL) {
        for (int i = 0; i < wargc && n < max - 1; i++)
            argv[n++] = wargv[i];
    } else if (p->kind == TPLACE_SLURM) {
        /* one job (or step) per rank, named for the group: scancel --name finds it */
        snprintf(buf, blen, "--job-name=%s", group);
        for (int i = 0; i < p->ncmd && n < max; i++)
            argv[n++] = p->cmd[i];
        char *fixed[] = {"--ntasks=1", buf, "--quiet"};
        for (int i = 0; i < 3 && n < max; i++)
            argv[n++] = fixed[i];
        for (int i = 0; i < wargc && n < max; i++)
            argv[n++] = wargv[i];
    } else {
        /* the remote sh runs the worker with the rank's words ("$@": --rank I, which
         * ssh appends to the command line), keeps its pid in a file for tplace_kill
         * while it runs, and exits with its status */
        char script[16384];
        size_t at = 0;
        script[0] = '\0';
        for (int i = 0; i < wargc; i++)
            if (shq(script, sizeof script, &at, wargv[i]) < 0)
                return -PSKV_EINVAL;
        if (h >= 0 && p->hosts[h].adv[0] &&
            (shq(script, sizeof script, &at, "--advertise") < 0 ||
             shq(script, sizeof script, &at, p->hosts[h].adv) < 0))
            return -PSKV_EINVAL;
        char full[17000];
        int l = snprintf(full, sizeof full,
                         "f=" PIDF "; %s \"$@\" & echo $! >\"$f\"; wait $!; s=$?; rm -f \"$f\"; "
                         "exit $s",
                         group, script);
        if (l < 0 || (size_t)l >= sizeof full)
            return -PSKV_EINVAL;
        size_t b = 0;
        buf[0] = '\0';
        if (blen < 16)
            return -PSKV_EINVAL;
        b = (size_t)snprintf(buf, blen, "sh -c");
        if (shq(buf, blen, &b, full) < 0 || shq(buf, blen, &b, "pskv-trial") < 0)
            return -PSKV_EINVAL;
        for (int i = 0; i < p->ncmd && n < max; i++)
            argv[n++] = p->cmd[i];
        if (h < 0 || n + 3 >= max)
            return -PSKV_EINVAL;
        argv[n++] = p->hosts[h].dest;
        argv[n++] = "--";
        argv[n++] = buf;
    }
    if (n >= max)
        return -PSKV_EINVAL;
    argv[n] = NULL;
    return n;
}

/* Runs argv with its output to the tuner's log (stderr), up to timeout_ms. Returns
 * its exit status, or -1 (could not run, or killed at the time-out). */
static int run_bounded(char *const *argv, int timeout_ms)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) {
            dup2(nul, 0);
            dup2(nul, 1);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    int st;
    for (int64_t until = tu_now_ms() + timeout_ms;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        if (w < 0 && errno != EINTR)
            return -1;
        if (tu_now_ms() > until) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            return -1;
        }
        tu_sleep_ms(10);
    }
}

/* The commands of another launcher than this run's (a study run before with
 * another --launcher): the defaults. */
static char *const default_ssh[] = {"ssh", "-o", "BatchMode=yes", NULL};

int tplace_kill(const tplace *p, const char *where, const char *group, int hard,
                int timeout_ms)
{
    char *argv[TPLACE_MAX_WORDS + 8], script[2048], name[160];
    int n = 0;
    if (!strncmp(where, "ssh ", 4)) {
        /* every rank's pid file of the group on that host: its worker (its command
         * line names the group, so a pid taken by another process is left alone) */
        snprintf(script, sizeof script,
                 "sh -c 'sig=%s; for f in /tmp/pskv-tune-%s.*.pid; do [ -e \"$f\" ] || continue; "
                 "p=$(cat \"$f\"); [ -n \"$p\" ] && tr \"\\\\000\" \" \" </proc/$p/cmdline 2>/dev/null "
                 "| grep -qF -- \" %s \" || continue; kill -$sig \"$p\" 2>/dev/null; "
                 "if [ $sig = KILL ]; then n=0; while kill -0 \"$p\" 2>/dev/null && [ $n -lt 50 ]; "
                 "do sleep 0.1; n=$((n + 1)); done; kill -0 \"$p\" 2>/dev/null && exit 1; "
                 "rm -f \"$f\"; fi; done; exit 0'",
                 hard ? "KILL" : "TERM", group, group);
        char *const *cmd = p->kind == TPLACE_SSH ? p->cmd : default_ssh;
        for (int i = 0; cmd[i] && n < TPLACE_MAX_WORDS; i++)
            argv[n++] = cmd[i];
        argv[n++] = (char *)where + 4;
        argv[n++] = "--";
        argv[n++] = script;
        argv[n] = NULL;
        int st = run_bounded(argv, timeout_ms);
        if (st != 0)
            LOG_W("group %s: could not %s its workers on %s (ssh: %s)", group,
                  hard ? "kill" : "signal", where + 4, st < 0 ? "no answer" : "status not 0");
        else
            LOG_I("group %s: %s its workers on %s%s", group, hard ? "killed" : "signalled",
                  where + 4, hard ? " (none left)" : "");
        return st == 0 ? 0 : -PSKV_EIO;
    }
    if (!strcmp(where, "slurm")) {
        snprintf(name, sizeof name, "--name=%s", group);
        char *sc[] = {"scancel", hard ? "--signal=KILL" : "--signal=TERM", name, NULL};
        int st = run_bounded(sc, timeout_ms);
        if (st != 0) {
            LOG_W("group %s: scancel %s failed", group, name);
            return -PSKV_EIO;
        }
        if (!hard)
            return 0;
        char *cancel[] = {"scancel", name, NULL};
        run_bounded(cancel, timeout_ms);
        /* gone when squeue lists no job of that name */
        for (int64_t until = tu_now_ms() + timeout_ms; tu_now_ms() < until;) {
            char cmd[256];
            snprintf(cmd, sizeof cmd, "squeue -h --name=%s 2>/dev/null", group);
            FILE *q = popen(cmd, "r");
            char line[256];
            int any = q && fgets(line, sizeof line, q) != NULL;
            int qs = q ? pclose(q) : -1;
            if (qs == 0 && !any) {
                LOG_I("group %s: killed its Slurm jobs (none left)", group);
                return 0;
            }
            tu_sleep_ms(100);
        }
        LOG_W("group %s: its Slurm jobs are still listed after scancel", group);
        return -PSKV_EIO;
    }
    return 0;
}
