/* The app table: one row per --app of pskv-worker (name, entry, its flag checks,
 * its defaults, what it needs). worker_main generates its usage line, the --app
 * help, the list of apps and its flag checks from the rows, and calls the row's
 * entry. A new app is one file (its entry, declared in apps.h) and one row in
 * apptab.c; docs/extending.md says what else to touch (tests, operations.md).
 *
 * The flags: pskv-worker's table (worker_main.c) is composed, in --help's order,
 * of its own head (job, library, tables), the check and bench apps' section
 * (check/check_flags.c), the training apps' and pskv-evaluator's section
 * (train/train_flags.c) and its own tail (compute, the daemons' common flags). A
 * new app's flags go into its room's section; every app reads the whole table.
 *
 * OWNS the rows (static, read-only); the texts it builds go into the caller's
 * buffers. THREAD: the main thread, at start-up. NEVER allocates or blocks. */
#ifndef PSKV_APPTAB_H
#define PSKV_APPTAB_H

#include <stddef.h>

#include "config.h"
#include "pskv.h"

/* What an app needs of the flags and of worker_main: a row's `needs` bits. */
enum {
    APP_DENSE = 1 << 0,       /* trains the dense Fashion-MNIST model: --sync allreduce
                               * and local, --loss-scale with a half --wire, the data
                               * files checked before joining */
    APP_PS_WIRE = 1 << 1,     /* its parameter-server tables take --wire fp16|bf16 */
    APP_ALLREDUCE = 1 << 2,   /* all-reduces among the workers: --wire applies */
    APP_OP = 1 << 3,          /* takes --op allreduce (all-reduce instead of tables) */
    APP_PREFETCH = 1 << 4,    /* takes --prefetch */
    APP_ADMIT = 1 << 5,       /* takes --admit-after and --evict-after */
    APP_EVICT = 1 << 6,       /* takes --evict-after (not --admit-after) */
    APP_PUSH_BUFFER = 1 << 7, /* takes --push buffer */
    APP_TRAFFIC = 1 << 8,     /* prints the tables' traffic at the end of the run */
    APP_EVALUATED = 1 << 9,   /* pskv-evaluator evaluates it */
    APP_AUC = 1 << 10,        /* its evaluation has val_auc (--best-metric) */
    APP_BALANCE = 1 << 11,    /* takes --balance (batch and fixed:FILE for mlp and softmax,
                               * stages for pipeline; the app checks which) */
};

/* A default that depends on --app: taken in place of the flag table's default
 * only where neither the environment nor a flag set the entry. */
typedef struct app_default {
    const char *flag, *value;
    int sgd; /* measured with sgd: taken only with --updater sgd or adagrad */
} app_default;

#define APP_DEFAULTS_MAX 4

typedef struct app_row {
    const char *name; /* the --app value */
    /* the app itself (apps.h): returns the exit status */
    int (*run)(pskv_worker *w, cfg_entry *cfg);
    /* its own flags' checks before joining, or NULL: 0, or -1 after saying on
     * stderr, prefixed by prog, what is wrong (exit 2) */
    int (*check)(cfg_entry *cfg, const char *prog);
    unsigned needs;                           /* APP_* bits */
    app_default defaults[APP_DEFAULTS_MAX];   /* ends at flag NULL */
} app_row;

/* The flag sections of the apps' rooms (see above), each ending at CFG_END: copied
 * into pskv-worker's table, which parsing then fills. */
extern const cfg_entry apptab_check_flags[];
extern const cfg_entry apptab_train_flags[];

/* The row of --app name, or NULL when there is none. */
const app_row *apptab_find(const char *name);

/* Writes the names of the rows having every bit of `needs` (0: all rows), in
 * table order, separated by sep, the last two by last ("|", "|" for a synopsis;
 * ", ", " or " for prose). Returns buf; asserts that it fits (a bug here). */
char *apptab_names(char *buf, size_t len, unsigned needs, const char *sep, const char *last);

/* How the usage errors name the apps with one need, in the words tests grep: a
 * constant phrase ("mlp and softmax"), asserted at start-up by apptab_verify to
 * name exactly the rows with that need, so that a new row cannot leave it stale. */
const char *apptab_phrase(unsigned need);

/* Asserts that every phrase names exactly its need's rows and that names are
 * unique: a bug in apptab.c otherwise. */
void apptab_verify(void);

/* Applies row's defaults to the flag table (see app_default). */
void apptab_apply_defaults(const app_row *row, cfg_entry *cfg);

#endif
