/* The service the study's trials run on: one pskv-scheduler --service and its
 * servers (a worker group per trial, trial.h), and the tuner's requests to it
 * (GROUP_STOP as `pskvctl stop` sends it, SHUTDOWN as `pskvctl shutdown`, STATUS
 * to see it answer).
 *
 * A service of the tuner's own (`pskv-tune run` without --scheduler) is started in
 * a session of its own under DIR (`logs/`: scheduler.log, server-I.log and their
 * .pid files, appended across starts), led by a small watchdog, a fork of the
 * tuner that starts the daemons and waits for them: the service outlives a killed
 * tuner, so the trials running on it go on and a resumed `run` re-attaches to both
 * (the study records the address and the watchdog's process group). The tuner
 * holds DIR/tuner.lock (flock) while it runs; the watchdog stops the service
 * (SIGTERM to the scheduler: the orderly stop `pskvctl shutdown` starts) once
 * neither a tuner nor a trial (a trial-N/lock of the study's directory) has held
 * a lock for `linger` seconds, so a killed tuner never leaks it for good; and it
 * ends the servers when the scheduler is gone.
 *
 * OWNS its ZeroMQ context and DEALER socket. THREAD: the tuner's. NEVER blocks
 * longer than the time-outs given. */
#ifndef PSKV_TUNE_TSERVICE_H
#define PSKV_TUNE_TSERVICE_H

#include <stddef.h>

typedef struct tservice tservice;

typedef struct tservice_opts {
    const char *bin_dir;   /* pskv-scheduler and pskv-server */
    const char *dir;       /* the service's directory: STUDY.db.d/service */
    const char *trials;    /* the study's directory, whose trial-N/lock the watchdog reads */
    int servers;
    double linger;         /* s: stop the service after this long with no tuner nor trial */
    const char *host;      /* the address its scheduler and servers listen on and
                            * advertise ("" or NULL: 127.0.0.1) */
    int insecure;          /* they run with --insecure (needed on any other address) */
} tservice_opts;

/* A service already running at addr (HOST:PORT, --scheduler or the one a killed
 * tuner left), if it answers STATUS as a service within timeout_ms. Returns 0
 * with *out (tservice_close frees it), -PSKV_ETIMEDOUT (no answer) or
 * -PSKV_EINVAL (it answers, but is not a service) with why. */
int tservice_attach(const char *addr, int timeout_ms, tservice **out, char *why, size_t len);

/* Starts a service of the tuner's own on a free port of o->host (forks its
 * watchdog and returns). Returns 0 with its address in addr and the watchdog's
 * process group in *pgid (the caller records both before waiting for it, so a
 * tuner killed meanwhile leaves nothing unknown), or -PSKV_EIO with why. */
int tservice_start(const tservice_opts *o, char *addr, size_t alen, long *pgid, char *why,
                   size_t len);

/* Waits up to timeout_ms until the service tservice_start started (pgid) at addr
 * has its `servers` servers registered. Returns 0 with *out, or -PSKV_EIO (it
 * ended: the port was taken) / -PSKV_ETIMEDOUT with why; then its process group
 * is killed. */
int tservice_ready(const char *addr, long pgid, int servers, int timeout_ms, tservice **out,
                   char *why, size_t len);

/* Holds dir/tuner.lock for the tuner's life (the watchdog's sign that a tuner
 * runs). Returns 0 or -PSKV_EIO. Released when the process exits. */
int tservice_hold(const char *dir);

/* The service's address (HOST:PORT). */
const char *tservice_addr(const tservice *s);

/* Asks the service to stop group `name` (GROUP_STOP). Returns 0 told (with the
 * workers told in *told when given), -PSKV_EINVAL refused (no such group, not
 * running: why says the scheduler's reason) or -PSKV_ETIMEDOUT. */
int tservice_stop_group(tservice *s, const char *name, int timeout_ms, unsigned *told,
                        char *why, size_t len);

/* The number of groups the service reports running (STATUS), or a negated code. */
int tservice_groups_running(tservice *s, int timeout_ms);

/* SHUTDOWN, then waits up to timeout_ms for the process group pgid (the watchdog,
 * when the service is the tuner's own; 0: do not wait) to be gone, and ends what
 * is left of it (SIGKILL). Returns 0, or -PSKV_ETIMEDOUT when it had to kill. */
int tservice_shutdown(tservice *s, long pgid, int timeout_ms);

/* Ends the process group pgid the study recorded for its service in dir, when
 * that service no longer answers but its watchdog still holds dir/watchdog.lock
 * (so the group is surely its, not a stranger's that took the number). */
void tservice_kill_stale(const char *dir, long pgid);

void tservice_close(tservice **self_p);

#endif
