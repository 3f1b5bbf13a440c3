/* The metrics registry and its endpoint (design in metrics.h). */
#define _GNU_SOURCE
#include "metrics.h"

#include <arpa/inet.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grow.h"
#include "log.h"
#include "pskv_errors.h"
#include "refuse.h"

/* Histogram bucket bounds (seconds): 10 us to 10 s, as request and apply
 * times on loopback and across hosts spread. */
static const double bounds[] = {1e-5,  2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
                                0.01,  0.025,  0.05, 0.1,  0.25,   0.5,  1,    2.5,    5,
                                10};
#define NB (sizeof bounds / sizeof bounds[0])

struct met_series {
    int fam;           /* index of its family */
    char *labels;      /* the extra label, rendered (`table="w"`), or "" */
    double v;          /* counter or gauge value; histogram: sum */
    unsigned long long count, bucket[NB]; /* histogram: bucket[i] counts bounds[i-1] < v <=
                                             bounds[i]; the text cumulates them */
};

typedef struct family {
    char *name, *help;
    met_type type;
} family;

static struct {
    pthread_mutex_t mu;
    family *fams;
    size_t nfams, capfams;
    met_series **series;
    size_t nseries, capseries;
    char role[16];
    char group[72]; /* metrics_group, escaped; "" = no group label */
    int node, rank;
    struct MHD_Daemon *d;
} R = {.mu = PTHREAD_MUTEX_INITIALIZER, .role = "?", .node = -1, .rank = -1};

void metrics_identity(const char *role, int node, int rank)
{
    pthread_mutex_lock(&R.mu);
    snprintf(R.role, sizeof R.role, "%s", role);
    R.node = node;
    R.rank = rank;
    pthread_mutex_unlock(&R.mu);
}

static void escape(char *out, size_t len, const char *s);

void metrics_group(const char *group)
{
    pthread_mutex_lock(&R.mu);
    escape(R.group, sizeof R.group, group ? group : "");
    pthread_mutex_unlock(&R.mu);
}

/* `s` with \, " and newline escaped as a label value needs, into out (cut to fit). */
static void escape(char *out, size_t len, const char *s)
{
    size_t o = 0;
    for (; *s && o + 3 < len; s++) {
        if (*s == '\\' || *s == '"' || *s == '\n')
            out[o++] = '\\';
        out[o++] = *s == '\n' ? 'n' : *s;
    }
    out[o] = 0;
}

static int find_family(const char *name, met_type type, const char *help)
{
    for (size_t i = 0; i < R.nfams; i++)
        if (!strcmp(R.fams[i].name, name)) {
            if (R.fams[i].type != type) {
                LOG_E("metric %s registered again with another type", name);
                return -1;
            }
            return (int)i;
        }
    if (grow_array((void **)&R.fams, &R.capfams, R.nfams + 1, sizeof *R.fams) < 0)
        return -1;
    family *f = &R.fams[R.nfams];
    f->name = strdup(name);
    f->help = strdup(help);
    f->type = type;
    if (!f->name || !f->help) {
        free(f->name);
        free(f->help);
        return -1;
    }
    return (int)R.nfams++;
}

/* The series of family name with the rendered labels lab (metrics_series). */
static met_series *series_of(const char *name, met_type type, const char *help, const char *lab)
{
    met_series *s = NULL;
    pthread_mutex_lock(&R.mu);
    int fam = find_family(name, type, help);
    for (size_t i = 0; fam >= 0 && i < R.nseries && !s; i++)
        if (R.series[i]->fam == fam && !strcmp(R.series[i]->labels, lab))
            s = R.series[i];
    if (!s && fam >= 0 &&
        grow_array((void **)&R.series, &R.capseries, R.nseries + 1, sizeof *R.series) == 0 &&
        (s = calloc(1, sizeof *s))) {
        s->fam = fam;
        s->labels = strdup(lab);
        if (s->labels)
            R.series[R.nseries++] = s;
        else {
            free(s);
            s = NULL;
        }
    }
    pthread_mutex_unlock(&R.mu);
    return s;
}

met_series *metrics_series(const char *name, met_type type, const char *help,
                           const char *lkey, const char *lval)
{
    return metrics_series2(name, type, help, lkey, lval, NULL, NULL);
}

met_series *metrics_series2(const char *name, met_type type, const char *help,
                            const char *k1, const char *v1, const char *k2, const char *v2)
{
    char a[256], b[256], lab[600] = "";
    if (k1) {
        escape(a, sizeof a, v1 ? v1 : "");
        snprintf(lab, sizeof lab, "%s=\"%s\"", k1, a);
    }
    if (k1 && k2) {
        escape(b, sizeof b, v2 ? v2 : "");
        snprintf(lab + strlen(lab), sizeof lab - strlen(lab), ",%s=\"%s\"", k2, b);
    }
    return series_of(name, type, help, lab);
}

void metrics_add(met_series *s, double v)
{
    if (!s)
        return;
    pthread_mutex_lock(&R.mu);
    s->v += v;
    pthread_mutex_unlock(&R.mu);
}

void metrics_set(met_series *s, double v)
{
    if (!s)
        return;
    pthread_mutex_lock(&R.mu);
    s->v = v;
    pthread_mutex_unlock(&R.mu);
}

void metrics_observe(met_series *s, double v)
{
    if (!s)
        return;
    size_t i = 0;
    while (i < NB && v > bounds[i]) /* outside the lock: bounds never change */
        i++;
    pthread_mutex_lock(&R.mu);
    s->v += v;
    s->count++;
    if (i < NB)
        s->bucket[i]++;
    pthread_mutex_unlock(&R.mu);
}

double metrics_sum(const char *name)
{
    double v = 0;
    pthread_mutex_lock(&R.mu);
    for (size_t i = 0; i < R.nseries; i++)
        if (!strcmp(R.fams[R.series[i]->fam].name, name))
            v += R.series[i]->v;
    pthread_mutex_unlock(&R.mu);
    return v;
}

double metrics_value(const met_series *s)
{
    if (!s)
        return 0;
    pthread_mutex_lock(&R.mu);
    double v = s->v;
    pthread_mutex_unlock(&R.mu);
    return v;
}

/* ---- rendering ------------------------------------------------------------------ */

typedef struct text {
    char *p;
    size_t n, cap;
    int oom;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...)
{
    for (int tries = 0; tries < 2 && !t->oom; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(t->p + t->n, t->cap - t->n, fmt, ap);
        va_end(ap);
        if (k < 0) {
            t->oom = 1;
            return;
        }
        if ((size_t)k < t->cap - t->n) {
            t->n += (size_t)k;
            return;
        }
        size_t nc = (t->cap + (size_t)k + 1) * 2;
        char *np = realloc(t->p, nc);
        if (!np) {
            t->oom = 1;
            return;
        }
        t->p = np;
        t->cap = nc;
    }
}

/* A sample line: name{base labels[,extra][,le]} value. */
static void sample(text *t, const char *name, const char *suffix, const char *base,
                   const char *extra, const char *le, double v)
{
    put(t, "%s%s{%s%s%s", name, suffix, base, *extra ? "," : "", extra);
    if (le)
        put(t, ",le=\"%s\"", le);
    /* counts as integers (exact below 2^53), anything else with every digit */
    if (fabs(v) < 9e15 && v == floor(v))
        put(t, "} %.0f\n", v);
    else
        put(t, "} %.17g\n", v);
}

static void render_family(text *t, size_t f, const char *base)
{
    const family *fam = &R.fams[f];
    static const char *const tn[] = {"counter", "gauge", "histogram"};
    put(t, "# HELP %s %s\n# TYPE %s %s\n", fam->name, fam->help, fam->name, tn[fam->type]);
    for (size_t i = 0; i < R.nseries; i++) {
        const met_series *s = R.series[i];
        if (s->fam != (int)f)
            continue;
        if (fam->type != MET_HISTOGRAM) {
            sample(t, fam->name, "", base, s->labels, NULL, s->v);
            continue;
        }
        char le[32];
        unsigned long long below = 0;
        for (size_t b = 0; b < NB; b++) {
            below += s->bucket[b];
            snprintf(le, sizeof le, "%g", bounds[b]);
            sample(t, fam->name, "_bucket", base, s->labels, le, (double)below);
        }
        sample(t, fam->name, "_bucket", base, s->labels, "+Inf", (double)s->count);
        sample(t, fam->name, "_sum", base, s->labels, NULL, s->v);
        sample(t, fam->name, "_count", base, s->labels, NULL, (double)s->count);
    }
}

double metrics_resident_bytes(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return (double)rss * (double)sysconf(_SC_PAGESIZE);
}

char *metrics_render(size_t *len)
{
    text t = {0};
    double rss = metrics_resident_bytes();
    pthread_mutex_lock(&R.mu);
    char base[256];
    int bn = snprintf(base, sizeof base, "node=\"%d\",role=\"%s\",rank=\"%d\"", R.node, R.role,
                      R.rank);
    if (R.group[0] && bn > 0 && (size_t)bn < sizeof base)
        snprintf(base + bn, sizeof base - (size_t)bn, ",group=\"%s\"", R.group);
    put(&t, "# HELP pskv_resident_memory_bytes Resident memory of this process.\n"
            "# TYPE pskv_resident_memory_bytes gauge\n");
    sample(&t, "pskv_resident_memory_bytes", "", base, "", NULL, rss);
    put(&t, "# HELP pskv_refusals_total Peers and messages refused, by reason.\n"
            "# TYPE pskv_refusals_total counter\n");
    for (int i = 0; i < REFUSE_COUNT; i++) {
        char lab[64];
        snprintf(lab, sizeof lab, "reason=\"%s\"", refuse_name((refuse_reason)i));
        sample(&t, "pskv_refusals_total", "", base, lab, NULL,
               (double)refuse_count((refuse_reason)i));
    }
    for (size_t f = 0; f < R.nfams; f++)
        render_family(&t, f, base);
    pthread_mutex_unlock(&R.mu);
    if (t.oom) {
        free(t.p);
        return NULL;
    }
    *len = t.n;
    return t.p;
}

/* ---- the endpoint --------------------------------------------------------------- */

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
    (void)cls, (void)version, (void)upload, (void)upload_size, (void)con_cls;
    struct MHD_Response *r;
    unsigned code = MHD_HTTP_OK;
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
        static char no[] = "only GET\n";
        r = MHD_create_response_from_buffer(sizeof no - 1, no, MHD_RESPMEM_PERSISTENT);
        code = MHD_HTTP_METHOD_NOT_ALLOWED;
    } else if (strcmp(url, "/metrics")) {
        static char nf[] = "not found: the metrics are at /metrics\n";
        r = MHD_create_response_from_buffer(sizeof nf - 1, nf, MHD_RESPMEM_PERSISTENT);
        code = MHD_HTTP_NOT_FOUND;
    } else {
        size_t len = 0;
        char *body = metrics_render(&len);
        if (!body)
            return MHD_NO; /* out of memory: MHD closes the connection */
        r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
        if (r)
            MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4");
        else
            free(body);
    }
    if (!r)
        return MHD_NO;
    enum MHD_Result rc = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return rc;
}

int metrics_listen(const char *bind_addr, int port, char *why, size_t whylen)
{
    if (R.d) {
        snprintf(why, whylen, "the metrics endpoint already runs");
        return -PSKV_EINVAL;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (!strcmp(bind_addr, "*") || !strcmp(bind_addr, "0.0.0.0"))
        sa.sin_addr.s_addr = htonl(INADDR_ANY);
    else if (!strcmp(bind_addr, "localhost"))
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    else if (inet_pton(AF_INET, bind_addr, &sa.sin_addr) != 1) {
        snprintf(why, whylen, "metrics: bind address '%s' is not an IPv4 address or *",
                 bind_addr);
        return -PSKV_EINVAL;
    }
    R.d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, (uint16_t)port, NULL, NULL, answer,
                           NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                           MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_CONNECTION_LIMIT,
                           64u, MHD_OPTION_END);
    if (!R.d) {
        snprintf(why, whylen, "cannot serve metrics on %s:%d (port in use?)", bind_addr, port);
        return -PSKV_ENET;
    }
    LOG_I("metrics at http://%s:%d/metrics", bind_addr, port);
    return 0;
}

int metrics_start(const char *bind_addr, int port)
{
    char why[300];
    if (port == 0)
        return 0;
    if (metrics_listen(bind_addr, port, why, sizeof why) < 0) {
        LOG_E("%s", why);
        return -1;
    }
    return 0;
}

int metrics_listening(void) { return R.d != NULL; }

void metrics_stop(void)
{
    if (R.d)
        MHD_stop_daemon(R.d);
    R.d = NULL;
    pthread_mutex_lock(&R.mu);
    for (size_t i = 0; i < R.nseries; i++) {
        free(R.series[i]->labels);
        free(R.series[i]);
    }
    for (size_t i = 0; i < R.nfams; i++) {
        free(R.fams[i].name);
        free(R.fams[i].help);
    }
    free(R.series);
    free(R.fams);
    R.series = NULL;
    R.fams = NULL;
    R.nseries = R.capseries = R.nfams = R.capfams = 0;
    pthread_mutex_unlock(&R.mu);
}
