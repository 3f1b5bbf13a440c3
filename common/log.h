/* Logging: one line per event, "TIME PID ROLE NODE LEVEL message", on stderr.
 * The macro checks the level before formatting anything.
 *
 * OWNS   the process's log settings: the level threshold (log_threshold), and the
 *        role name and node id printed on every line.
 * THREAD any thread may log: a line is formatted on the stack and written with one
 *        fwrite, so lines of concurrent threads do not mix. The level and role are
 *        plain globals: set them from the main thread before other threads start;
 *        the node id is atomic, as it is known only after registration, when a
 *        daemon's ZAP handler thread may already be logging.
 * NEVER  allocates; never blocks but in the write to stderr; the time it prints is
 *        the wall clock (UTC), for the reader only: no timer uses it (timeutil.h). */
#ifndef PSKV_LOG_H
#define PSKV_LOG_H

#include <stddef.h>

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

extern int log_threshold;

/* Sets the role name printed on every line ("server", "worker", ...). */
void log_set_role(const char *role);
/* Sets the node id printed on every line (-1 = not yet known, printed as "-"). */
void log_set_node(int node_id);
/* Parses "error|warn|info|debug"; returns the level or -1. */
int log_parse_level(const char *name);
void log_write(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Formats a failure's reason into why (whylen bytes; nothing when why is NULL or
 * whylen 0): the "why" out-parameter of functions that can fail. */
void log_why(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define LOG(level, ...)                          \
    do {                                         \
        if ((level) <= log_threshold)            \
            log_write((level), __VA_ARGS__);     \
    } while (0)
#define LOG_E(...) LOG(LOG_ERROR, __VA_ARGS__)
#define LOG_W(...) LOG(LOG_WARN, __VA_ARGS__)
#define LOG_I(...) LOG(LOG_INFO, __VA_ARGS__)
#define LOG_D(...) LOG(LOG_DEBUG, __VA_ARGS__)

#endif
