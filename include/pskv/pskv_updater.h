/* The updater plug-in ABI: a shared object that pskv-server loads with dlopen
 * when a table is opened with `--updater plugin:PATH[:ARGS]`, on every server
 * of the table (and again on a resume or a copy to a new server).
 *
 * A plug-in exports one function, PSKV_UPDATER_SYMBOL, returning a pointer to a
 * static pskv_updater whose abi_version is PSKV_UPDATER_ABI. A missing symbol,
 * another version, missing apply, state_per_value above PSKV_UPDATER_MAX_STATE,
 * or an init that fails refuses the TABLE_OPEN with an error naming the plug-in.
 *
 * The calls run on the server's loop thread, one at a time, in the middle of
 * serving: a call must not block (no I/O, locks, sleeps), must not keep any
 * pointer it is given past its return, must not touch memory outside the rows
 * it is given, and must not call exit or raise signals. A plug-in that crashes
 * takes the server (and the replicas it heads) down: run
 * `pskv-server --updater-check plugin:PATH[:ARGS]` before a job.
 *
 * Rows: `nrows` rows of `width` values, contiguous in w and g. Optimizer state:
 * state_per_value planes, plane k of the run at state + k * stride (stride >=
 * nrows * width); state starts at zero for a new row and travels with the row
 * in checkpoints, chain replication and copies. apply must be deterministic (the
 * replicas of a chain apply the same pushes and must agree). Rows whose values or
 * state come out NaN or infinite are restored by the server and the push is
 * answered with an error naming the table. */
#ifndef PSKV_UPDATER_ABI_H
#define PSKV_UPDATER_ABI_H

#include <stddef.h>
#include <stdint.h>

#define PSKV_UPDATER_ABI 1
#define PSKV_UPDATER_MAX_STATE 8
#define PSKV_UPDATER_SYMBOL "pskv_updater_v1"

typedef struct pskv_updater {
    uint32_t abi_version;     /* PSKV_UPDATER_ABI */
    uint32_t state_per_value; /* optimizer state floats per value, 0..PSKV_UPDATER_MAX_STATE */
    /* Called once per table on each server with ARGS ("" when none) and the table's
     * name and width. Returns the plug-in's context (may be NULL), or sets err
     * (and *ok = 0) to refuse the table. Optional. */
    void *(*init)(const char *args, const char *table, uint32_t width, int *ok, char *err,
                  size_t errlen);
    /* Applies gradients g to nrows rows (see above). Required. */
    void (*apply)(void *ctx, float *w, float *state, size_t stride, const float *g,
                  size_t nrows, uint32_t width);
    /* Called on the loop thread each time the smallest clock of the job's workers
     * rises (every worker has sent CLOCK for clocks 0..clock-1), once per table
     * of this plug-in. Optional. */
    void (*finish)(void *ctx, int64_t clock);
    /* Frees the context when the table goes away. Optional. */
    void (*fini)(void *ctx);
} pskv_updater;

/* What the plug-in exports (with C linkage and default visibility). */
typedef const pskv_updater *(*pskv_updater_entry_fn)(void);

#endif
