/* metrics: the process's Prometheus metrics and the HTTP endpoint that serves
 * them (GET /metrics, text exposition format 0.0.4).
 *
 * Design: one registry per process (each daemon is one process; a worker
 * process's libpskv handle counts into it). A family is a metric name with its
 * help and type; a series is one family with one extra label (e.g. table="w")
 * on top of the labels every series carries: node, role and rank (set by
 * metrics_identity once the scheduler gave them). Series live until
 * metrics_stop, so a caller keeps the pointer and updates it without a lookup.
 * The endpoint is libmicrohttpd's own polling thread (MHD_USE_INTERNAL_POLLING_
 * THREAD) bound to the metrics address only, apart from every ZeroMQ socket.
 *
 * OWNS   the registry (families, series, label texts) and the MHD daemon.
 * THREAD any: one mutex guards the registry, taken by every update and by the
 *        scrape that renders it (an update costs one uncontended lock).
 * NEVER  blocks the caller beyond that lock; never fails an update (a series
 *        that could not be made is NULL and updating NULL does nothing). */
#ifndef PSKV_METRICS_H
#define PSKV_METRICS_H

#include <stddef.h>

typedef enum { MET_COUNTER, MET_GAUGE, MET_HISTOGRAM } met_type;

typedef struct met_series met_series;

/* The labels every series carries: role ("scheduler", "server", "worker"),
 * node id and rank (-1 = none yet). Rendered from the next scrape on. */
void metrics_identity(const char *role, int node, int rank);

/* The worker group a worker or an evaluator belongs to (NULL or "": none, the
 * label is left out): every series then also carries group="NAME". */
void metrics_group(const char *group);

/* The series of family `name` (created with `type` and `help` on first use; a
 * later call must give the same type) with the extra label lkey="lval" (lkey
 * NULL: none). Returns the same pointer for the same name and label; NULL when
 * out of memory or the type differs (a bug: logged). The registry owns it. */
met_series *metrics_series(const char *name, met_type type, const char *help,
                           const char *lkey, const char *lval);
/* The same with two extra labels, k1="v1",k2="v2" (k2 NULL: only the first). */
met_series *metrics_series2(const char *name, met_type type, const char *help,
                            const char *k1, const char *v1, const char *k2, const char *v2);

/* Counter: adds v (>= 0). Gauge: adds v (any sign). NULL-safe. */
void metrics_add(met_series *s, double v);
/* Gauge: sets v. NULL-safe. */
void metrics_set(met_series *s, double v);
/* Histogram: one observation of v (seconds, bytes: base units). NULL-safe. */
void metrics_observe(met_series *s, double v);
/* The sum over the series of family `name` (histograms: of their sums); 0 when
 * there is none. */
double metrics_sum(const char *name);

/* The current value of a counter or gauge (a histogram's sum); 0 for NULL. */
double metrics_value(const met_series *s);

/* This process's resident memory in bytes (/proc/self/statm; 0 if unreadable). */
double metrics_resident_bytes(void);

/* The registry in the exposition format, plus pskv_resident_memory_bytes and
 * pskv_refusals_total{reason} (common/refuse.h) read at this moment. Returns a
 * malloc'ed NUL-terminated text (caller frees) and its length in *len, or NULL
 * when out of memory. */
char *metrics_render(size_t *len);

/* Starts the endpoint on bind_addr ("*" = every address, else an IPv4 address)
 * and `port` (1..65535). Returns 0, or a negated PSKV_E* with the reason in why.
 * A second call while it runs fails with -PSKV_EINVAL. */
int metrics_listen(const char *bind_addr, int port, char *why, size_t whylen);

/* metrics_listen for a daemon's --metrics-port: port 0 serves nothing. Returns
 * 0, or -1 after logging why. */
int metrics_start(const char *bind_addr, int port);

/* 1 while the endpoint runs. */
int metrics_listening(void);

/* Stops the endpoint (waits for a scrape in progress) and frees the registry;
 * every series pointer is invalid afterwards. NULL-safe to call twice. */
void metrics_stop(void);

#endif
