/* The server's tables: options fixed by the first open, and the shard holding
 * this server's range. A later open with any different option is refused with an
 * error naming the option.
 *
 * OWNS the set of tables: each table's parsed options, its shard, its packed
 * TableOptions (checkpoints and copies to new servers carry them) and its bsp
 * closed clocks per ring partition. A table lives until tables_destroy, or until
 * tables_remove (its namespace dropped: nsdrop.h, which first has every module
 * that keeps a table pointer let go of it).
 * THREAD: the server's loop thread only.
 * NEVER blocks, logs or touches a socket; never changes a table's options once
 * created (a different open is refused; the one exception is the lr its updater
 * applies pushes with, table_set_lr, which reopens do not compare); never decides placement (the caller
 * passes the ring range: the server opens every table on the whole ring and
 * chain.h says which partitions of it are served). Allocates on an open and
 * when table_closed first sees more partitions. */
#ifndef PSKV_TABLE_H
#define PSKV_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "filter.h"
#include "keycache.h"
#include "pskv.pb-c.h"
#include "shard.h"

typedef enum {
    CONS_ASYNC = 0, /* eventual: apply on arrival, answer pulls at once */
    CONS_SSP = 1,   /* bounded delay tau: a pull at clock c waits for clocks < c - tau */
    CONS_BSP = 2,   /* sequential: pushes of clock t combined and applied when t closes */
} cons_model;

typedef struct table {
    uint64_t id;
    char name[128];  /* full name: NAMESPACE/NAME, or NAME in the unnamed namespace */
    char ns[65];     /* its namespace (nspace.h), "" when unnamed */
    uint64_t quota;  /* the quota_bytes its open gave its namespace (0 = none) */
    int dense;
    uint64_t size;
    uint32_t width;
    char updater[512], init[16], consistency[24]; /* updater: a name or plugin:PATH[:ARGS] */
    upd_opts upd;    /* as opened (reopens compare it); the lr applied now is shard_lr(sh) */
    struct upd_plugin *plug; /* a plug-in updater, loaded for this table (upd_plugin.h) */
    shard_init init_rule;
    cons_model model;
    int64_t tau;     /* ssp */
    uint32_t backup; /* bsp: a clock closes with the first W - backup workers */
    int mean_pushed; /* bsp: a clock's mean is over the workers that pushed to the table */
    uint32_t admit_after, evict_after; /* sparse: admission and eviction (shard_admission) */
    filter_set filters; /* its wire filters (filter.h); pull replies are packed with them */
    keycache *kc;       /* keycache: the key lists workers sent (NULL without the filter) */
    int wire;           /* its values' precision on the wire (HALF_FP32, _FP16, _BF16): of
                           pushes, pull replies and forwarded pushes (half.h) */
    shard *sh;
    void *opts;      /* the TableOptions of the first open, packed (checkpoints keep them) */
    size_t opts_len;
    int64_t *closed; /* bsp: per ring partition, clocks 0..closed[p]-1 applied to its rows
                        (table_closed; a copy of a partition brings its own) */
    uint32_t nclosed;
    char opened_by[72]; /* who opened it first on this server ("group A", "the unnamed
                           group": serve.c sets it), named when a reopen is refused; ""
                           when it came by a copy or a checkpoint */
} table;

typedef struct table_set table_set;

/* Empty set; NULL when out of memory. */
table_set *tables_new(void);
/* Frees every table and nulls *ts_p; NULL-safe. */
void tables_destroy(table_set **ts_p);

/* Creates table `o` with its shard for ring range [begin, end], or checks `o`
 * against the existing table of that name. `id` must equal wire_table_id(name).
 * Returns 0, or -PSKV_EINVAL / -PSKV_EMISMATCH / -PSKV_ENOMEM with the reason in why. */
int tables_open(table_set *ts, uint64_t id, const Pskv__TableOptions *o, uint64_t begin,
                uint64_t end, char *why, size_t whylen);

/* The table with this id, or NULL. */
table *tables_find(table_set *ts, uint64_t id);

/* The i-th table (i < tables_count), in creation order. */
table *tables_at(table_set *ts, size_t i);

/* Number of tables. */
size_t tables_count(const table_set *ts);

/* Removes table t from the set and frees it (its shard, options, plug-in); the
 * others keep their order. The caller makes sure nothing still points at t. */
void tables_remove(table_set *ts, table *t);

/* Changes the lr t's updater applies pushes with from now on (pskv_table_set_lr);
 * t->upd keeps the open's, which reopens compare. Returns 0, or -PSKV_EINVAL naming
 * the table and the value (not finite, <= 0, an updater without an lr, or one
 * whose rules refuse it). */
int table_set_lr(table *t, double lr, char *why, size_t whylen);

/* t->closed with room for nparts partitions (zeroes when new); NULL when out of
 * memory. */
int64_t *table_closed(table *t, uint32_t nparts);

#endif
