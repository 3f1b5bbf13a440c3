/* libpskv's calls for bindings (declared in pskv.h): the layout of the public
 * structs, so that a binding mirroring them (the Python package's ctypes
 * Structures, python/pskv/_lib.py) can refuse to load against a library built
 * with another layout, and the handle's own counters of what it holds, for a
 * binding's leak checks, and whether a request is still in flight.
 *
 * Neither call waits or touches a socket; pskv_struct_layout needs no handle. */
#include "pskv.h"

#include <stddef.h>
#include <string.h>

#include "wreq.h"
#include "wstate.h"

typedef struct {
    const char *type, *field; /* field NULL: the row of sizeof(type) */
    size_t value;
} layout_row;

#define SIZE(T) {#T, NULL, sizeof(T)}
#define FIELD(T, F) {#T, #F, offsetof(T, F)}

static const layout_row rows[] = {
    SIZE(pskv_config),
    FIELD(pskv_config, scheduler), FIELD(pskv_config, rank), FIELD(pskv_config, advertise),
    FIELD(pskv_config, interface), FIELD(pskv_config, connect_timeout_s),
    FIELD(pskv_config, join_timeout_s), FIELD(pskv_config, request_timeout_ms),
    FIELD(pskv_config, window), FIELD(pskv_config, job_id), FIELD(pskv_config, max_message),
    FIELD(pskv_config, chunk_bytes), FIELD(pskv_config, spin_us), FIELD(pskv_config, retry_ms),
    FIELD(pskv_config, keys), FIELD(pskv_config, insecure), FIELD(pskv_config, metrics_port),
    FIELD(pskv_config, metrics_bind), FIELD(pskv_config, evaluator),
    FIELD(pskv_config, listen_port), FIELD(pskv_config, listen_bind),
    FIELD(pskv_config, allreduce_wire), FIELD(pskv_config, shm), FIELD(pskv_config, slice_us),
    FIELD(pskv_config, table_namespace), FIELD(pskv_config, quota_bytes),
    FIELD(pskv_config, group), FIELD(pskv_config, group_size),
    SIZE(pskv_table_opts),
    FIELD(pskv_table_opts, kind), FIELD(pskv_table_opts, size), FIELD(pskv_table_opts, width),
    FIELD(pskv_table_opts, updater), FIELD(pskv_table_opts, lr),
    FIELD(pskv_table_opts, momentum), FIELD(pskv_table_opts, l2), FIELD(pskv_table_opts, eps),
    FIELD(pskv_table_opts, l1), FIELD(pskv_table_opts, beta1), FIELD(pskv_table_opts, beta2),
    FIELD(pskv_table_opts, weight_decay), FIELD(pskv_table_opts, beta),
    FIELD(pskv_table_opts, init), FIELD(pskv_table_opts, init_scale),
    FIELD(pskv_table_opts, seed), FIELD(pskv_table_opts, consistency),
    FIELD(pskv_table_opts, backup), FIELD(pskv_table_opts, bsp_mean_pushed),
    FIELD(pskv_table_opts, admit_after), FIELD(pskv_table_opts, evict_after),
    FIELD(pskv_table_opts, filters), FIELD(pskv_table_opts, wire),
    SIZE(pskv_traffic),
    FIELD(pskv_traffic, sent), FIELD(pskv_traffic, sent_raw), FIELD(pskv_traffic, received),
    FIELD(pskv_traffic, received_raw), FIELD(pskv_traffic, filter_s), FIELD(pskv_traffic, name),
    SIZE(pskv_held),
    FIELD(pskv_held, requests), FIELD(pskv_held, views), FIELD(pskv_held, push_buffers),
    FIELD(pskv_held, draining), FIELD(pskv_held, lent),
    SIZE(pskv_pipe_msg),
    FIELD(pskv_pipe_msg, from_rank), FIELD(pskv_pipe_msg, pipeline), FIELD(pskv_pipe_msg, micro),
    FIELD(pskv_pipe_msg, dir), FIELD(pskv_pipe_msg, rows), FIELD(pskv_pipe_msg, n),
};

int64_t pskv_struct_layout(const char *type, const char *field)
{
    if (!type)
        return -PSKV_ENOTFOUND;
    int want_size = !field || !*field;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const layout_row *r = &rows[i];
        if (strcmp(r->type, type))
            continue;
        if (want_size ? !r->field : r->field && !strcmp(r->field, field))
            return (int64_t)r->value;
    }
    return -PSKV_ENOTFOUND;
}

void pskv_held_get(const pskv_worker *w, pskv_held *out)
{
    memset(out, 0, sizeof *out);
    if (!w)
        return;
    out->requests = w->inflight;
    out->views = w->nviews;
    for (int i = 0; i < PSKV_MAX_PUSH_BUFFERS; i++)
        out->push_buffers += w->pbufs[i].vals != NULL;
    out->draining = w->ndraining;
    out->lent = w->lent_pushes;
}

int pskv_request_pending(pskv_worker *w, int64_t ts)
{
    if (!w)
        return -PSKV_EINVAL;
    return ts > 0 && wreq_find(w, ts) != NULL;
}
