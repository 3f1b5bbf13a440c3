/* model: the consistency models as one ops table, a row per model (async, ssp,
 * bsp), indexed by a table's cons_model (store/table.h). What differs between
 * models is asked of the row (when a pull may go, the clock values reflect,
 * whether clocks close, whether replicas wait on forwarded clocks, whether
 * re-sent pushes go through the dedupe, how its name is spelt in a table's
 * options), not tested by name in the server's files. A new model is a file with
 * its row, a cons_model value and a line in model.c's table.
 *
 * async and ssp keep no state beyond the vector clock: their rows live in
 * model.c. bsp's row is in bsp.c beside its engine.
 *
 * OWNS nothing: the rows are constant.
 * THREAD: any (the server's loop thread in practice).
 * NEVER allocates, blocks or logs. */
#ifndef PSKV_CONS_MODEL_H
#define PSKV_CONS_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "store/table.h"

struct bsp;    /* bsp.h */
struct vclock; /* vclock.h */

typedef struct cons_ops {
    const char *name; /* "async", "ssp", "bsp" */
    /* whether the option string spec names this model: 1 (its bound, if any, in
     * *tau), 0 when it does not, or -PSKV_EINVAL with the reason in why when it
     * does but is malformed */
    int (*parse)(const char *spec, int64_t *tau, char *why, size_t whylen);
    /* 1 when a pull of table t at `clock` may be answered now (vc: the clock set) */
    int (*pull_ready)(const struct vclock *vc, struct bsp *b, table *t, int64_t clock);
    /* the clock t's values reflect here: a pull reply's clock, eviction's "now" */
    int64_t (*values_clock)(const struct vclock *vc, struct bsp *b, table *t);
    /* pushes are held per clock and applied when it closes; the closed clocks
     * travel in checkpoints, fills and closes down the chains (bsp) */
    int closes;
    /* replicas' pulls wait on the clocks heads forward down the chains (ssp) */
    int chain_clocks;
    /* a re-sent push, or one with an id, is recorded and applied once through the
     * chain's dedupe even without replicas (async; ssp: a combined call's part whose
     * pull was parked across a placement change comes again, its push applied) */
    int dedupes;
} cons_ops;

/* The rows: model.c's async and ssp, bsp.c's bsp. */
extern const cons_ops cons_async_ops, cons_ssp_ops, cons_bsp_ops;

/* The row of model m (asserts on a bug: m comes from store/table.c's parser). */
const cons_ops *cons_ops_of(cons_model m);

/* The model a table's `consistency` option names (async, bsp, ssp:TAU; ssp:inf is
 * async), asked of each row in turn: 0 with *m and *tau set, or -PSKV_EINVAL with
 * the reason, naming the option, in why. */
int cons_parse(const char *spec, cons_model *m, int64_t *tau, char *why, size_t whylen);

/* The row of table t's model. */
const cons_ops *cons_of(const table *t);

#endif
