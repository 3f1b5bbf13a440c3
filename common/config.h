/* Configuration: one table per program drives flags, environment variables,
 * validation, --help and the dump of effective settings.
 *
 * Precedence: default < environment variable < command-line flag.
 * Flags take `--name value` or `--name=value`; boolean flags take no value
 * (`--json`) or an explicit one (`--json=false`). `--` ends the flags.
 *
 * OWNS   nothing: the table is the caller's (a static array in the program's main
 *        file); parsing writes the effective values into its entries, and string
 *        values point into argv, the environment or the defaults (never copied).
 * THREAD the main thread, at start-up, before other threads run (cfg_start also
 *        sets the process's log level); once parsing is over the table no longer
 *        changes, and the getters may be called from any thread.
 * NEVER  allocates, never exits the process (it returns the exit status to use),
 *        never reads a configuration file. */
#ifndef PSKV_CONFIG_H
#define PSKV_CONFIG_H

#include <stddef.h>

typedef enum { CFG_INT, CFG_DOUBLE, CFG_STR, CFG_BOOL } cfg_type;

typedef struct cfg_entry {
    const char *name;  /* flag name without "--"; NULL ends the table */
    cfg_type type;
    const char *def;   /* default as text; NULL = no default (empty string) */
    const char *env;   /* environment variable, or NULL */
    double min, max;   /* bounds for CFG_INT and CFG_DOUBLE (min > max: unbounded) */
    const char *unit;  /* shown in --help: "ms", "s", "bytes", ... or NULL */
    const char *help;
    /* effective value, filled by cfg_parse */
    long long i;
    double d;
    const char *s;     /* CFG_STR: never NULL after cfg_parse; points into argv/env/def */
    const char *from;  /* "default", "env" or "flag" */
} cfg_entry;

#define CFG_END {NULL, CFG_INT, NULL, NULL, 0, 0, NULL, NULL, 0, 0, NULL, NULL}

typedef struct cfg_args {
    int npos;     /* positional arguments (and everything after "--") */
    char **pos;   /* points into argv */
} cfg_args;

/* Parses argv (argv[0] is the program) against `tab`. Returns 0 on success,
 * 1 when --help (or --man or --markdown: the manual page, manpage.h) was printed
 * to stdout (exit 0), or -PSKV_EINVAL after printing the reason and a usage hint to stderr
 * (exit 2). `usage` is the one-line synopsis printed by --help. Positionals go
 * to `args` when it is non-NULL; otherwise a positional argument is an error. */
int cfg_parse(cfg_entry *tab, const char *usage, int argc, char **argv, cfg_args *args);

/* The start of every pskv program: names its role in the log, parses argv against
 * `tab` (see cfg_parse) and applies --log-level (the table must have it).
 * Returns -1 to go on, or the exit status to return: 0 after --help, 2 after a
 * usage error (already printed). */
int cfg_start(cfg_entry *tab, const char *role, const char *usage, int argc, char **argv,
              cfg_args *args);

/* Parses one text value into `e` with type and bound checks. Returns 0 or
 * -PSKV_EINVAL and writes the reason into err. */
int cfg_set(cfg_entry *e, const char *text, char *err, size_t errlen);

/* Replaces the default of entry `name` with `text` (e.g. a default that depends on
 * another flag) when neither the environment nor a flag set it. Returns 1 when it
 * did, 0 when the entry was set otherwise, -PSKV_EINVAL (err says why) when text
 * does not fit the entry; the name must exist (assert). */
int cfg_set_default(cfg_entry *tab, const char *name, const char *text, char *err,
                    size_t errlen);

/* Looks up an entry by name; NULL when absent. */
cfg_entry *cfg_find(cfg_entry *tab, const char *name);

/* Typed getters; the name must exist in the table (assert). */
long long cfg_int(cfg_entry *tab, const char *name);
double cfg_double(cfg_entry *tab, const char *name);
const char *cfg_str(cfg_entry *tab, const char *name);

/* Prints --help text (every entry with default, unit and variable). */
void cfg_help(const cfg_entry *tab, const char *usage, void *stream);

/* Logs the effective settings at info level, one line. */
void cfg_log(const cfg_entry *tab);

/* --metrics-port of a daemon (its environment variable ENV): the Prometheus
 * endpoint (common/metrics.h), bound to the daemon's --bind address. */
#define CFG_METRICS_ENTRY(ENV)                                                              \
    {"metrics-port", CFG_INT, "0", ENV, 0, 65535, NULL,                                     \
     "serve Prometheus metrics at http://BIND:PORT/metrics (0 = off; BIND as --bind: "      \
     "loopback unless --keys, --insecure or --bind say otherwise)", 0, 0, NULL, NULL}

/* Entries every daemon shares. PORT_ENV and PORT_DEF differ per role. */
#define CFG_COMMON_ENTRIES(PORT_ENV, PORT_DEF)                                              \
    {"log-level", CFG_STR, "info", "PSKV_LOG_LEVEL", 1, 0, NULL,                            \
     "error, warn, info or debug", 0, 0, NULL, NULL},                                       \
    {"bind", CFG_STR, "", "PSKV_BIND", 1, 0, NULL,                                          \
     "address to listen on (* = all; default: all with --keys or --insecure, else 127.0.0.1)", \
     0, 0, NULL, NULL},                                                                     \
    {"keys", CFG_STR, "", "PSKV_KEYS", 1, 0, NULL,                                          \
     "key directory (node.key, node.pub, scheduler.pub; scheduler and servers: authorized): " \
     "CURVE on every socket, only listed keys admitted", 0, 0, NULL, NULL},                 \
    {"insecure", CFG_BOOL, "false", "PSKV_INSECURE", 1, 0, NULL,                            \
     "without --keys, listen on and advertise non-loopback addresses anyway (no "           \
     "authentication, no encryption; warned every 60 s)", 0, 0, NULL, NULL},                \
    {"advertise", CFG_STR, "", "PSKV_ADVERTISE", 1, 0, NULL,                                \
     "address other nodes dial (default: --interface's, else the one that reaches the "     \
     "scheduler)", 0, 0, NULL, NULL},                                                       \
    {"interface", CFG_STR, "", "PSKV_INTERFACE", 1, 0, NULL,                                \
     "take the advertised address from this network interface", 0, 0, NULL, NULL},         \
    {"port", CFG_INT, PORT_DEF, PORT_ENV, 0, 65535, NULL, "port to listen on (0 = any free)", \
     0, 0, NULL, NULL},                                                                     \
    {"connect-timeout", CFG_DOUBLE, "30", "PSKV_CONNECT_TIMEOUT", 0.1, 86400, "s",          \
     "how long to wait for the scheduler", 0, 0, NULL, NULL},                               \
    {"max-message", CFG_INT, "1073741824", "PSKV_MAX_MESSAGE", 4096, 4294967296.0, "bytes", \
     "largest frame accepted from the network (ZMQ_MAXMSGSIZE)", 0, 0, NULL, NULL}

#endif
