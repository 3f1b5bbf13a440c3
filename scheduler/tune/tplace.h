/* Where a trial's workers run: pskv-tune run's --launcher. `local` (this host,
 * as before), `ssh` (the hosts of a host file in launch-hosts.sh's format, each
 * rank's worker started by its own ssh client, as launch-hosts.sh starts a
 * daemon) or `slurm` (each rank one `srun --ntasks=1 --job-name=GROUP`, as a job
 * of its own, or a step inside an allocation). Either way the clients (ssh, srun)
 * run on the tuner's host in the trial's session: they hold the trial's lock and
 * bring the worker's output back into its log, so the tuner watches a remote
 * trial as a local one; what only the remote side can do (signal the worker,
 * make sure it is gone before a trial runs again) is tplace_kill.
 *
 * OWNS its host table. THREAD: the tuner's. NEVER blocks but in tplace_kill (at
 * most its time-out). */
#ifndef PSKV_TUNE_TPLACE_H
#define PSKV_TUNE_TPLACE_H

#include <stddef.h>

typedef enum { TPLACE_LOCAL, TPLACE_SSH, TPLACE_SLURM } tplace_kind;

typedef struct tplace_host {
    char dest[256]; /* the ssh destination (host or user@host) */
    char adv[128];  /* advertise=ADDR: the workers' --advertise there ("" = their own pick) */
    int slots;      /* workers=N: workers it runs at once */
    int line;       /* its line in the host file */
} tplace_host;

#define TPLACE_MAX_HOSTS 256
#define TPLACE_MAX_WORDS 32

typedef struct tplace {
    tplace_kind kind;
    tplace_host *hosts; /* ssh: the host file's lines that run workers */
    int nhosts;
    char cmdbuf[1024];  /* the ssh or srun command line ... */
    char *cmd[TPLACE_MAX_WORDS]; /* ... split on white space (NULL-ended) */
    int ncmd;
} tplace;

/* The launcher `name` (local, ssh, slurm). ssh reads hostfile (DEST [workers=N]
 * [advertise=ADDR], launch-hosts.sh's words `scheduler`, `servers=N`, `port=P`
 * accepted and unused; `#` comments) and runs `ssh_cmd` (split on white space, `-o
 * BatchMode=yes` added unless it sets BatchMode); slurm runs `srun_cmd`. Returns 0,
 * or -PSKV_EINVAL with why naming the flag or FILE:LINE. Free with tplace_fini. */
int tplace_init(tplace *p, const char *name, const char *hostfile, const char *ssh_cmd,
                const char *srun_cmd, char *why, size_t len);
void tplace_fini(tplace *p);

const char *tplace_kind_name(tplace_kind k);

/* How many trials of `workers` workers fit at once (ssh: each trial on one host;
 * local and slurm: no limit of their own, INT32_MAX). */
int tplace_capacity(const tplace *p, int workers);

/* The host for a trial of `workers` workers, given the workers each host runs now
 * (used[h]): the one with the most free slots (ties: the host file's order), or -1
 * when none has room. Local and slurm: 0. */
int tplace_pick(const tplace *p, const int *used, int workers);

/* The index of host dest, or -1. */
int tplace_find(const tplace *p, const char *dest);

/* argv (NULL-ended, pointers into p and the buffers given) of the client that starts
 * one rank of group `group` on host h with the worker command line wargv[0..wargc-1];
 * the trial launcher appends `--rank I` (ssh passes it on to the remote sh). buf
 * holds the ssh remote command. Returns the number of words, or -PSKV_EINVAL when
 * it does not fit. */
int tplace_argv(const tplace *p, int h, const char *group, char *const *wargv, int wargc,
                char *buf, size_t blen, char **argv, int max);

/* Signals the workers of group `group` placed on `where` (the trial's `place` file:
 * "ssh DEST", "slurm", "local") from their host: SIGTERM, or with hard SIGKILL and a
 * wait until they are gone. Returns 0 (done; hard: none is left), or -PSKV_EIO
 * (the host did not answer within timeout_ms: they may still run). Local: 0, the
 * caller signals the process group. */
int tplace_kill(const tplace *p, const char *where, const char *group, int hard,
                int timeout_ms);

#endif
