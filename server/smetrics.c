/* The server's metrics (smetrics.h). */
#include "smetrics.h"

#include <string.h>

#include "metrics.h"
#include "store/nspace.h"
#include "timeutil.h"

#define MAX_TABLES 64 /* tables with their own series; more count in the totals only */

/* per table, in this order */
enum { M_PUSH, M_PULL, M_PUSH_ROWS, M_PULL_ROWS, M_IN, M_OUT, M_APPLY, M_ROWS, M_COUNT };
static const struct {
    const char *name, *help;
    met_type type;
} defs[M_COUNT] = {
    {"pskv_server_pushes_total", "Push requests (parts) received from workers.", MET_COUNTER},
    {"pskv_server_pulls_total", "Pull requests (parts) received from workers.", MET_COUNTER},
    {"pskv_server_push_rows_total", "Rows received in pushes.", MET_COUNTER},
    {"pskv_server_pull_rows_total", "Rows asked for in pulls.", MET_COUNTER},
    {"pskv_server_received_bytes_total", "Value bytes received in pushes.", MET_COUNTER},
    {"pskv_server_sent_bytes_total", "Value bytes asked for in pulls.", MET_COUNTER},
    {"pskv_update_apply_seconds", "Time to apply one push to the table and answer it.",
     MET_HISTOGRAM},
    {"pskv_table_rows", "Rows (keys) of the table held by this server.", MET_GAUGE},
};

static struct {
    uint64_t id;
    met_series *m[M_COUNT];
} T[MAX_TABLES];
static int ntables;
/* per namespace: its tables' bytes here and its quota (nspace.h) */
static struct {
    char ns[NSPACE_MAX + 1];
    met_series *bytes, *quota;
} NS[MAX_TABLES];
static int nns;
static met_series *late, *lapses, *ckpt_ok, *ckpt_failed, *ckpt_secs, *ckpt_bytes;

static int slot(const table *t)
{
    for (int i = 0; i < ntables; i++)
        if (T[i].id == t->id)
            return i;
    if (ntables == MAX_TABLES)
        return -1;
    int i = ntables++;
    T[i].id = t->id;
    for (int k = 0; k < M_COUNT; k++)
        T[i].m[k] = metrics_series(defs[k].name, defs[k].type, defs[k].help, "table", t->name);
    return i;
}

int smet_start(const char *bind_addr, int port, int node, int rank)
{
    metrics_identity("server", node, rank);
    late = metrics_series("pskv_late_drops_total", MET_COUNTER,
                          "bsp pushes dropped as late (their clock had closed).", NULL, NULL);
    lapses = metrics_series("pskv_lease_lapses_total", MET_COUNTER,
                            "Times this server's lease lapsed (it stopped serving).", NULL, NULL);
    ckpt_ok = metrics_series("pskv_checkpoints_total", MET_COUNTER,
                             "Checkpoints this server wrote or failed, by result.", "result",
                             "ok");
    ckpt_failed = metrics_series("pskv_checkpoints_total", MET_COUNTER,
                                 "Checkpoints this server wrote or failed, by result.", "result",
                                 "failed");
    ckpt_secs = metrics_series("pskv_checkpoint_duration_seconds", MET_HISTOGRAM,
                               "Time to write this server's checkpoint file.", NULL, NULL);
    ckpt_bytes = metrics_series("pskv_checkpoint_bytes_total", MET_COUNTER,
                                "Bytes of checkpoint files written.", NULL, NULL);
    return metrics_start(bind_addr, port);
}

void smet_request(const table *t, int pull, uint64_t rows)
{
    int i = slot(t);
    if (i < 0)
        return;
    double bytes = (double)rows * t->width * sizeof(float);
    metrics_add(T[i].m[pull ? M_PULL : M_PUSH], 1);
    metrics_add(T[i].m[pull ? M_PULL_ROWS : M_PUSH_ROWS], (double)rows);
    metrics_add(T[i].m[pull ? M_OUT : M_IN], bytes);
}

void smet_apply(const table *t, double seconds)
{
    int i = slot(t);
    if (i >= 0)
        metrics_observe(T[i].m[M_APPLY], seconds);
}

static void tick_namespace(table_set *ts, const table *t)
{
    int i = 0;
    while (i < nns && strcmp(NS[i].ns, t->ns))
        i++;
    if (i == nns) {
        if (nns == MAX_TABLES)
            return;
        memcpy(NS[i].ns, t->ns, sizeof NS[i].ns);
        NS[i].bytes = metrics_series("pskv_namespace_bytes", MET_GAUGE,
                                     "Bytes the namespace's tables take on this server.",
                                     "namespace", t->ns);
        NS[i].quota = metrics_series("pskv_namespace_quota_bytes", MET_GAUGE,
                                     "The namespace's quota, every server and replica (0 = none).",
                                     "namespace", t->ns);
        nns++;
    }
    metrics_set(NS[i].bytes, (double)nspace_bytes(ts, t->ns));
    metrics_set(NS[i].quota, (double)nspace_quota(ts, t->ns));
}

void smet_table_dropped(const table *t)
{
    for (int i = 0; i < ntables; i++)
        if (T[i].id == t->id)
            metrics_set(T[i].m[M_ROWS], 0);
    for (int i = 0; i < nns; i++)
        if (!strcmp(NS[i].ns, t->ns)) {
            metrics_set(NS[i].bytes, 0);
            metrics_set(NS[i].quota, 0);
        }
}

void smet_tick(table_set *ts, const consist_stats *st)
{
    static int64_t next;
    int64_t now = tu_now_ms();
    if (now < next)
        return;
    next = now + 500;
    for (size_t k = 0; k < tables_count(ts); k++) {
        table *t = tables_at(ts, k);
        int i = slot(t);
        if (i >= 0)
            metrics_set(T[i].m[M_ROWS], (double)shard_size(t->sh));
        tick_namespace(ts, t);
    }
    metrics_set(late, (double)st->dropped_late);
}

void smet_lease_lapse(void) { metrics_add(lapses, 1); }

void smet_checkpoint(int ok, double seconds, uint64_t bytes)
{
    metrics_add(ok ? ckpt_ok : ckpt_failed, 1);
    if (ok)
        metrics_observe(ckpt_secs, seconds);
    metrics_add(ckpt_bytes, (double)bytes);
}
