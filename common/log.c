#define _POSIX_C_SOURCE 200809L
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int log_threshold = LOG_INFO;
static char role_name[16] = "-";
/* Atomic: a server learns its node id when it registers, after its ZAP handler
 * thread (which logs refusals) has started. */
static atomic_int node = -1;

void log_set_role(const char *role)
{
    snprintf(role_name, sizeof role_name, "%s", role ? role : "-");
}

void log_set_node(int node_id) { atomic_store_explicit(&node, node_id, memory_order_relaxed); }

int log_parse_level(const char *name)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (strcasecmp(name, names[i]) == 0)
            return i;
    return -1;
}

void log_write(int level, const char *fmt, ...)
{
    static const char *const tags[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    char line[2048];
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL); /* wall clock for the reader only; no timer uses it */
    gmtime_r(&tv.tv_sec, &tm);
    char nodebuf[16];
    int node_id = atomic_load_explicit(&node, memory_order_relaxed);
    if (node_id < 0)
        snprintf(nodebuf, sizeof nodebuf, "-");
    else
        snprintf(nodebuf, sizeof nodebuf, "%d", node_id);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %d %s %s %s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, (long)(tv.tv_usec / 1000), (int)getpid(), role_name, nodebuf,
                     tags[level < 0 ? 0 : level > 3 ? 3 : level]);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof line)
        n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line - 1)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    fwrite(line, 1, (size_t)n, stderr);
}

void log_why(char *why, size_t whylen, const char *fmt, ...)
{
    if (why == NULL || whylen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
}
