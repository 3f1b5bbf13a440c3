/* The study in SQLite (study.h). */
#define _GNU_SOURCE
#include "study.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "log.h"
#include "pskv_errors.h"

struct tune_study {
    sqlite3 *db;
    int writer;
};

static const char *state_names[] = {"pending", "launching", "running", "stopping",
                                    "complete", "stopped", "failed", "paused"};

const char *study_state_name(trial_state s)
{
    return (unsigned)s < sizeof state_names / sizeof state_names[0] ? state_names[s] : "?";
}

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS setting(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS trial(id INTEGER PRIMARY KEY, params TEXT NOT NULL,"
    " u TEXT NOT NULL, state INTEGER NOT NULL, attempt INTEGER NOT NULL DEFAULT 0,"
    " pgid INTEGER NOT NULL DEFAULT 0, reason TEXT NOT NULL DEFAULT '', best REAL,"
    " epochs INTEGER NOT NULL DEFAULT 0, started REAL NOT NULL DEFAULT 0,"
    " ended REAL NOT NULL DEFAULT 0);"
    "CREATE TABLE IF NOT EXISTS metric(trial INTEGER NOT NULL, epoch INTEGER NOT NULL,"
    " value REAL NOT NULL, t REAL NOT NULL, PRIMARY KEY(trial, epoch));"
    "CREATE TABLE IF NOT EXISTS decision(seq INTEGER PRIMARY KEY, trial INTEGER NOT NULL,"
    " epoch INTEGER NOT NULL, stop INTEGER NOT NULL, why TEXT NOT NULL,"
    " UNIQUE(trial, epoch));";

int study_open(const char *path, int writer, tune_study **out, char *err, size_t len)
{
    *out = NULL;
    tune_study *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, len, "out of memory");
        return -PSKV_ENOMEM;
    }
    st->writer = writer;
    int flags = writer ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY;
    if (!writer && access(path, R_OK) != 0) {
        snprintf(err, len, "%s: %s", path, strerror(errno));
        free(st);
        return -PSKV_EIO;
    }
    int rc = sqlite3_open_v2(path, &st->db, flags, NULL);
    char *msg = NULL;
    if (rc == SQLITE_OK)
        rc = sqlite3_busy_timeout(st->db, 5000);
    if (rc == SQLITE_OK && writer)
        rc = sqlite3_exec(st->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", NULL,
                          NULL, &msg);
    if (rc == SQLITE_OK && writer)
        rc = sqlite3_exec(st->db, schema, NULL, NULL, &msg);
    if (rc == SQLITE_OK && !writer) /* a file that is not a study fails here */
        rc = sqlite3_exec(st->db, "SELECT count(*) FROM trial", NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        snprintf(err, len, "%s: %s", path, msg ? msg : sqlite3_errmsg(st->db));
        sqlite3_free(msg);
        sqlite3_close(st->db);
        free(st);
        return -PSKV_EIO;
    }
    *out = st;
    return 0;
}

void study_close(tune_study **self_p)
{
    if (!self_p || !*self_p)
        return;
    sqlite3_close((*self_p)->db);
    free(*self_p);
    *self_p = NULL;
}

/* Binds a statement's parameters given as a format: 't' text, 'd' double (NAN
 * binds NULL), 'i' long long. */
static int vbind(sqlite3_stmt *s, const char *fmt, va_list ap)
{
    for (int i = 0; fmt && fmt[i]; i++) {
        int rc;
        if (fmt[i] == 't')
            rc = sqlite3_bind_text(s, i + 1, va_arg(ap, const char *), -1, SQLITE_TRANSIENT);
        else if (fmt[i] == 'd') {
            double v = va_arg(ap, double);
            rc = isnan(v) ? sqlite3_bind_null(s, i + 1) : sqlite3_bind_double(s, i + 1, v);
        } else
            rc = sqlite3_bind_int64(s, i + 1, va_arg(ap, long long));
        if (rc != SQLITE_OK)
            return rc;
    }
    return SQLITE_OK;
}

/* A prepared statement with its parameters bound (vbind), or NULL after logging. */
static sqlite3_stmt *vquery(tune_study *st, const char *sql, const char *fmt, va_list ap)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL);
    if (rc == SQLITE_OK)
        rc = vbind(s, fmt, ap);
    if (rc != SQLITE_OK) {
        LOG_E("study: %s: %s", sql, sqlite3_errmsg(st->db));
        sqlite3_finalize(s);
        return NULL;
    }
    return s;
}

static sqlite3_stmt *query(tune_study *st, const char *sql, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sqlite3_stmt *s = vquery(st, sql, fmt, ap);
    va_end(ap);
    return s;
}

/* Runs one statement to its end (or first row): 0 or -PSKV_EIO after logging. */
static int run(tune_study *st, const char *sql, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sqlite3_stmt *s = vquery(st, sql, fmt, ap);
    va_end(ap);
    int rc = s ? sqlite3_step(s) : SQLITE_ERROR;
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        if (s)
            LOG_E("study: %s: %s", sql, sqlite3_errmsg(st->db));
        return -PSKV_EIO;
    }
    return 0;
}

int study_batch(tune_study *st)
{
    return sqlite3_get_autocommit(st->db) ? run(st, "BEGIN IMMEDIATE", NULL) : 0;
}

int study_sync(tune_study *st)
{
    return sqlite3_get_autocommit(st->db) ? 0 : run(st, "COMMIT", NULL);
}

int study_set(tune_study *st, const char *key, const char *value)
{
    return run(st, "INSERT OR REPLACE INTO setting(key, value) VALUES(?, ?)", "tt", key, value);
}

int study_id_new(char *buf, size_t len)
{
    unsigned char r[4];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        return -PSKV_EIO;
    snprintf(buf, len, "%02x%02x%02x%02x", r[0], r[1], r[2], r[3]);
    return 0;
}

int study_get(tune_study *st, const char *key, char *buf, size_t len)
{
    sqlite3_stmt *s = query(st, "SELECT value FROM setting WHERE key = ?", "t", key);
    if (!s)
        return -PSKV_EIO;
    int rc = sqlite3_step(s) == SQLITE_ROW ? 0 : -PSKV_ENOTFOUND;
    if (rc == 0)
        snprintf(buf, len, "%s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    return rc;
}

int study_lock(tune_study *st, char *err, size_t len)
{
    char host[256] = "", held[512];
    gethostname(host, sizeof host - 1);
    if (run(st, "BEGIN IMMEDIATE", NULL) < 0) {
        snprintf(err, len, "cannot lock the study: %s", sqlite3_errmsg(st->db));
        return -PSKV_ELOCKED;
    }
    if (study_get(st, "lock", held, sizeof held) == 0 && *held) {
        long pid = 0;
        char hhost[256] = "";
        if (sscanf(held, "%ld %255s", &pid, hhost) == 2 && pid > 0 && pid != (long)getpid() &&
            (strcmp(hhost, host) != 0 || kill((pid_t)pid, 0) == 0 || errno == EPERM)) {
            run(st, "ROLLBACK", NULL);
            snprintf(err, len, "the study is being run by pskv-tune pid %ld on host %s", pid,
                     hhost);
            return -PSKV_ELOCKED;
        }
    }
    char mine[512];
    snprintf(mine, sizeof mine, "%ld %s", (long)getpid(), host);
    if (study_set(st, "lock", mine) < 0 || run(st, "COMMIT", NULL) < 0) {
        run(st, "ROLLBACK", NULL);
        snprintf(err, len, "cannot write the lock");
        return -PSKV_EIO;
    }
    return 0;
}

void study_unlock(tune_study *st)
{
    study_set(st, "lock", "");
}

int study_trial_add(tune_study *st, const char *params, const char *u, long *id)
{
    int rc = run(st, "INSERT INTO trial(params, u, state) VALUES(?, ?, ?)", "tti", params, u,
                 (long long)TRIAL_PENDING);
    if (rc == 0)
        *id = (long)sqlite3_last_insert_rowid(st->db);
    return rc;
}

int study_trial_put(tune_study *st, const study_trial *t)
{
    return run(st,
               "UPDATE trial SET params = ?, u = ?, state = ?, attempt = ?, pgid = ?, reason = ?,"
               " best = ?, epochs = ?, started = ?, ended = ? WHERE id = ?",
               "ttiiitdiddi", t->params, t->u, (long long)t->state, (long long)t->attempt,
               (long long)t->pgid, t->reason, t->best, (long long)t->epochs, t->started,
               t->ended, (long long)t->id);
}

int study_trials(tune_study *st, study_trial **out, int *n)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = query(st, "SELECT id, params, u, state, attempt, pgid, reason, best, epochs,"
                                " started, ended FROM trial ORDER BY id", NULL);
    if (!s)
        return -PSKV_EIO;
    int cap = 0, rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            study_trial *g = realloc(*out, sizeof **out * cap);
            if (!g) {
                sqlite3_finalize(s);
                return -PSKV_ENOMEM;
            }
            *out = g;
        }
        study_trial *t = &(*out)[(*n)++];
        memset(t, 0, sizeof *t);
        t->id = (long)sqlite3_column_int64(s, 0);
        snprintf(t->params, sizeof t->params, "%s", (const char *)sqlite3_column_text(s, 1));
        snprintf(t->u, sizeof t->u, "%s", (const char *)sqlite3_column_text(s, 2));
        t->state = (trial_state)sqlite3_column_int(s, 3);
        t->attempt = sqlite3_column_int(s, 4);
        t->pgid = (long)sqlite3_column_int64(s, 5);
        snprintf(t->reason, sizeof t->reason, "%s", (const char *)sqlite3_column_text(s, 6));
        t->best = sqlite3_column_type(s, 7) == SQLITE_NULL ? NAN : sqlite3_column_double(s, 7);
        t->epochs = sqlite3_column_int(s, 8);
        t->started = sqlite3_column_double(s, 9);
        t->ended = sqlite3_column_double(s, 10);
    }
    sqlite3_finalize(s);
    return rc == SQLITE_DONE ? 0 : -PSKV_EIO;
}

int study_metric_add(tune_study *st, long trial, int epoch, double value, double t)
{
    return run(st, "INSERT OR IGNORE INTO metric(trial, epoch, value, t) VALUES(?, ?, ?, ?)",
               "iidd", (long long)trial, (long long)epoch, value, t);
}

int study_metrics(tune_study *st, long trial, double *v, int max)
{
    for (int i = 0; i < max; i++)
        v[i] = NAN;
    sqlite3_stmt *s = query(st, "SELECT epoch, value FROM metric WHERE trial = ?", "i",
                            (long long)trial);
    if (!s)
        return -PSKV_EIO;
    int top = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
        int e = sqlite3_column_int(s, 0);
        if (e >= 1 && e <= max) {
            v[e - 1] = sqlite3_column_double(s, 1);
            top = e > top ? e : top;
        }
    }
    sqlite3_finalize(s);
    return top;
}

int study_decision_get(tune_study *st, long trial, int epoch)
{
    sqlite3_stmt *s = query(st, "SELECT stop FROM decision WHERE trial = ? AND epoch = ?", "ii",
                            (long long)trial, (long long)epoch);
    if (!s)
        return -PSKV_EIO;
    int rc = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int(s, 0) : -PSKV_ENOTFOUND;
    sqlite3_finalize(s);
    return rc;
}

int study_decision_add(tune_study *st, long trial, int epoch, int stop, const char *why)
{
    return run(st, "INSERT OR IGNORE INTO decision(trial, epoch, stop, why) VALUES(?, ?, ?, ?)",
               "iiit", (long long)trial, (long long)epoch, (long long)stop, why);
}

int study_decisions(tune_study *st, char *buf, size_t len)
{
    sqlite3_stmt *s = query(st, "SELECT trial, epoch, stop FROM decision ORDER BY trial, epoch",
                            NULL);
    if (!s)
        return -PSKV_EIO;
    size_t used = 0;
    buf[0] = '\0';
    while (sqlite3_step(s) == SQLITE_ROW && used + 64 < len)
        used += (size_t)snprintf(buf + used, len - used, "%lld %d %d\n",
                                 (long long)sqlite3_column_int64(s, 0), sqlite3_column_int(s, 1),
                                 sqlite3_column_int(s, 2));
    sqlite3_finalize(s);
    return 0;
}
