/* shttp: pskv-serve's HTTP answers (design in shttp.h). */
#define _GNU_SOURCE
#include "shttp.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "metrics.h"
#include "predict.h"
#include "pskv_errors.h"
#include "sjson.h"
#include "timeutil.h"

struct shttp {
    shttp_cfg cfg;
    snapstore *st;
    struct MHD_Daemon *d;
    atomic_int inflight;
    met_series *rejected, *seconds;
};

/* One request's life: the body as it arrives, then one answer. */
typedef struct req {
    char *body;
    size_t len, cap;
    int too_big;  /* the body passed max_body: the rest is read and dropped */
    int counted;  /* holds one of the in-flight places */
    double t0;    /* monotonic start, seconds */
} req;

/* An answer being written: status, body stream, and the version it reflects. */
typedef struct answer {
    unsigned code;
    char *text;
    size_t len;
    FILE *f;
    const snap *ver;
} answer;

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* versions are Unix times; timers use monotonic */
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double staleness(const snap *s)
{
    double d = wall_now() - s->wall;
    return d > 0 ? d : 0;
}

/* s as a JSON string literal, into f. */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void version(FILE *f, const snap *s)
{
    fprintf(f, "\"version\":{\"clock\":%lld,\"wall\":%.3f,\"staleness_seconds\":%.3f}",
            (long long)s->clock, s->wall, staleness(s));
}

static const char *kind_name(snap_kind k)
{
    return k == SNAP_SOFTMAX ? "softmax" : k == SNAP_MLP ? "mlp" : k == SNAP_SPARSE_LR ? "sparse-lr" : "plain";
}

/* A 400 (or code) whose JSON names the field: why reads "FIELD: what was wrong". */
static void error(answer *a, unsigned code, const char *why)
{
    const char *colon = strstr(why, ": ");
    a->code = code;
    fputs("{\"error\":", a->f);
    json_str(a->f, why);
    if (colon) {
        char field[128];
        snprintf(field, sizeof field, "%.*s", (int)(colon - why), why);
        fputs(",\"field\":", a->f);
        json_str(a->f, field);
    }
    fputs("}\n", a->f);
}

/* The table a request names (its "table" member; absent: the first), as a reference
 * the caller releases; NULL after writing the error. */
static snap *table_of(shttp *h, const sjson *root, answer *a, int need)
{
    const sjson *t = sjson_get(root, "table");
    char why[256];
    if (t && t->type != SJ_STR) {
        error(a, 400, "table: not a string");
        return NULL;
    }
    if (!t && need) {
        error(a, 400, "table: missing");
        return NULL;
    }
    snap *s = snap_acquire(h->st, t ? t->text : NULL);
    if (!s) {
        snprintf(why, sizeof why, "table: no table %.100s is served", t ? t->text : "at all");
        error(a, t ? 400 : 503, why);
    }
    return s;
}

static void do_predict(shttp *h, const sjson *root, answer *a)
{
    char why[256];
    snap *s = table_of(h, root, a, 0);
    if (!s)
        return;
    if (s->kind == SNAP_PLAIN) {
        snprintf(why, sizeof why, "table: %.96s is no model pskv-serve predicts with "
                 "(softmax-*, mlp-*, sparse-lr.w); read its rows with /v1/lookup", s->table);
        error(a, 400, why);
        snap_release(h->st, &s);
        return;
    }
    fputs("{\"table\":", a->f);
    json_str(a->f, s->table);
    fputs(",\"scores\":", a->f);
    int rc = predict_rows(s, sjson_get(root, "rows"), h->cfg.max_rows, a->f, why, sizeof why);
    if (rc < 0) {
        fflush(a->f);
        rewind(a->f); /* drop the partial answer; the error replaces it */
        a->len = 0;
        error(a, rc == -PSKV_ENOMEM ? 503 : 400, rc == -PSKV_ENOMEM ? "body: out of memory" : why);
    } else {
        fputc(',', a->f);
        version(a->f, s);
        fputs("}\n", a->f);
        a->ver = s;
    }
    snap_release(h->st, &s);
}

static void do_lookup(shttp *h, const sjson *root, answer *a)
{
    char why[256];
    const sjson *keys = sjson_get(root, "keys");
    if (!keys || keys->type != SJ_ARR || keys->n == 0 || keys->n > h->cfg.max_keys) {
        snprintf(why, sizeof why, "keys: %s (an array of 1 to %zu keys)",
                 !keys || keys->type != SJ_ARR ? "missing or not an array" : "wrong count",
                 h->cfg.max_keys);
        error(a, 400, why);
        return;
    }
    for (size_t i = 0; i < keys->n; i++) {
        uint64_t k;
        if (sjson_u64(keys->kids[i], &k) < 0) {
            snprintf(why, sizeof why, "keys[%zu]: not an unsigned 64-bit integer", i);
            error(a, 400, why);
            return;
        }
    }
    snap *s = table_of(h, root, a, 1);
    if (!s)
        return;
    fputs("{\"table\":", a->f);
    json_str(a->f, s->table);
    fputs(",\"values\":[", a->f);
    for (size_t i = 0; i < keys->n; i++) {
        uint64_t k = 0;
        sjson_u64(keys->kids[i], &k);
        const float *row = snap_row(s, k);
        uint32_t w = snap_width(s);
        if (row && w == 1) {
            fprintf(a->f, "%s%.9g", i ? "," : "", row[0]);
        } else if (row) { /* a wider row: its floats as an array */
            fputs(i ? ",[" : "[", a->f);
            for (uint32_t j = 0; j < w; j++)
                fprintf(a->f, "%s%.9g", j ? "," : "", row[j]);
            fputc(']', a->f);
        } else
            fputs(i ? ",null" : "null", a->f); /* a key the table does not hold */
    }
    fputs("],", a->f);
    version(a->f, s);
    fputs("}\n", a->f);
    a->ver = s;
    snap_release(h->st, &s);
}

static void do_model(shttp *h, answer *a)
{
    fputs("{\"source\":", a->f);
    json_str(a->f, h->cfg.source);
    fputs(",\"tables\":[", a->f);
    snap *s;
    for (size_t i = 0; (s = snap_acquire_at(h->st, i)); i++) {
        fprintf(a->f, "%s{\"table\":", i ? "," : "");
        json_str(a->f, s->table);
        fprintf(a->f, ",\"kind\":\"%s\",\"rows\":%zu,\"in\":%u,\"hidden\":%u,\"out\":%u,",
                kind_name(s->kind), s->n, s->in, s->hidden, s->out);
        version(a->f, s);
        fputc('}', a->f);
        snap_release(h->st, &s);
    }
    fputs("]}\n", a->f);
}

static void do_metrics(shttp *h, answer *a)
{
    snap *s;
    for (size_t i = 0; (s = snap_acquire_at(h->st, i)); i++) {
        metrics_set(metrics_series("pskv_serve_staleness_seconds", MET_GAUGE,
                                   "age of the served version of a table (now minus the wall "
                                   "time training held it)", "table", s->table),
                    staleness(s));
        snap_release(h->st, &s);
    }
    size_t len;
    char *text = metrics_render(&len);
    if (text)
        fwrite(text, 1, len, a->f);
    else
        a->code = 503;
    free(text);
}

/* Routes a complete request into a. */
static void route(shttp *h, const char *url, const char *method, req *r, answer *a)
{
    int post = !strcmp(method, "POST"), get = !strcmp(method, "GET");
    int predict = !strcmp(url, "/v1/predict"), lookup = !strcmp(url, "/v1/lookup");
    if (!predict && !lookup && strcmp(url, "/v1/model") && strcmp(url, "/metrics")) {
        error(a, 404, "url: not found (POST /v1/predict, POST /v1/lookup, GET /v1/model, "
                      "GET /metrics)");
        return;
    }
    if ((predict || lookup) != post || (!post && !get)) {
        error(a, 405, predict || lookup ? "method: only POST" : "method: only GET");
        return;
    }
    if (get) {
        if (!strcmp(url, "/metrics"))
            do_metrics(h, a);
        else
            do_model(h, a);
        return;
    }
    char why[256];
    if (r->too_big) {
        snprintf(why, sizeof why, "body: over %zu bytes", h->cfg.max_body);
        error(a, 413, why);
        return;
    }
    const sjson *root;
    sjson_doc *doc = sjson_parse(r->body ? r->body : "", r->len, &root, why + 6, sizeof why - 6);
    if (!doc) {
        memcpy(why, "body: ", 6);
        error(a, 400, why);
        return;
    }
    if (root->type != SJ_OBJ)
        error(a, 400, "body: not a JSON object");
    else if (predict)
        do_predict(h, root, a);
    else
        do_lookup(h, root, a);
    sjson_free(&doc);
}

static enum MHD_Result send_answer(struct MHD_Connection *c, answer *a, const char *type)
{
    fclose(a->f);
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(a->len, a->text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(a->text);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", type);
    enum MHD_Result rc = MHD_queue_response(c, a->code, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *ver, const char *data,
                                  size_t *size, void **con_cls)
{
    (void)ver;
    shttp *h = cls;
    req *r = *con_cls;
    if (!r) { /* the headers: take a place in flight, or refuse at once */
        if (!(r = calloc(1, sizeof *r)))
            return MHD_NO;
        *con_cls = r;
        r->t0 = (double)tu_now_ns() / 1e9;
        r->counted = 1;
        if (atomic_fetch_add(&h->inflight, 1) >= h->cfg.queue) {
            metrics_add(h->rejected, 1);
            answer a = {503, NULL, 0, NULL, NULL};
            if (!(a.f = open_memstream(&a.text, &a.len)))
                return MHD_NO;
            error(&a, 503, "queue: too many requests in flight, retry");
            return send_answer(c, &a, "application/json");
        }
        return MHD_YES;
    }
    if (*size) { /* a piece of the body */
        if (!r->too_big && r->len + *size <= h->cfg.max_body) {
            if (r->len + *size + 1 > r->cap) {
                size_t cap = (r->len + *size + 1) * 2;
                char *g = realloc(r->body, cap < h->cfg.max_body + 1 ? cap : h->cfg.max_body + 1);
                if (!g)
                    return MHD_NO;
                r->body = g;
                r->cap = cap < h->cfg.max_body + 1 ? cap : h->cfg.max_body + 1;
            }
            memcpy(r->body + r->len, data, *size);
            r->len += *size;
        } else {
            r->too_big = 1;
        }
        *size = 0;
        return MHD_YES;
    }
    answer a = {200, NULL, 0, NULL, NULL};
    if (!(a.f = open_memstream(&a.text, &a.len)))
        return MHD_NO;
    route(h, url, method, r, &a);
    static const char *const known[] = {"/v1/predict", "/v1/lookup", "/v1/model", "/metrics"};
    const char *label = "other";
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(url, known[i]))
            label = strrchr(known[i], '/') + 1;
    metrics_add(metrics_series("pskv_serve_requests_total", MET_COUNTER,
                               "HTTP requests answered, by endpoint", "endpoint", label), 1);
    if (a.code >= 400)
        metrics_add(metrics_series("pskv_serve_bad_requests_total", MET_COUNTER,
                                   "HTTP requests refused as bad input (4xx), by endpoint",
                                   "endpoint", label), 1);
    metrics_observe(h->seconds, (double)tu_now_ns() / 1e9 - r->t0);
    return send_answer(c, &a, !strcmp(url, "/metrics") && a.code == 200
                                  ? "text/plain; version=0.0.4" : "application/json");
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls,
                    enum MHD_RequestTerminationCode why)
{
    (void)c;
    (void)why;
    shttp *h = cls;
    req *r = *con_cls;
    if (!r)
        return;
    if (r->counted)
        atomic_fetch_sub(&h->inflight, 1);
    free(r->body);
    free(r);
    *con_cls = NULL;
}

shttp *shttp_start(const shttp_cfg *cfg, snapstore *st, char *why, size_t whylen)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)cfg->port)};
    if (!strcmp(cfg->bind, "*"))
        sa.sin_addr.s_addr = htonl(INADDR_ANY);
    else if (inet_pton(AF_INET, cfg->bind, &sa.sin_addr) != 1) {
        snprintf(why, whylen, "--http-bind %s is not an IPv4 address or *", cfg->bind);
        return NULL;
    }
    shttp *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    h->cfg = *cfg;
    h->st = st;
    h->rejected = metrics_series("pskv_serve_rejected_total", MET_COUNTER,
                                 "HTTP requests refused with 503 (more than --queue in flight)",
                                 NULL, NULL);
    h->seconds = metrics_series("pskv_serve_request_seconds", MET_HISTOGRAM,
                                "time to answer an HTTP request", NULL, NULL);
    h->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL_LINUX_ONLY,
                            (uint16_t)cfg->port, NULL, NULL, on_request, h,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                            MHD_OPTION_THREAD_POOL_SIZE, (unsigned)cfg->threads,
                            MHD_OPTION_NOTIFY_COMPLETED, on_done, h,
                            MHD_OPTION_CONNECTION_TIMEOUT, 10u,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)(cfg->queue * 4 + 16),
                            MHD_OPTION_END);
    if (!h->d) {
        snprintf(why, whylen, "cannot listen on %s:%d (address in use or not ours)", cfg->bind,
                 cfg->port);
        free(h);
        return NULL;
    }
    return h;
}

int shttp_port(const shttp *h)
{
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    return i ? i->port : -1;
}

void shttp_stop(shttp **self_p)
{
    if (!self_p || !*self_p)
        return;
    MHD_stop_daemon((*self_p)->d);
    free(*self_p);
    *self_p = NULL;
}
