/* Tests of the metrics registry and endpoint (common/metrics.c): series found
 * again by name and label, label values escaped, histograms cumulative, the text
 * in the exposition format, and the endpoint serving it over real TCP (404
 * elsewhere). Check forks each test, so each starts with an empty registry. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "metrics.h"
#include "suites.h"

/* Fails naming `want` when the text lacks it. */
static void has(const char *text, const char *want)
{
    ck_assert_msg(strstr(text, want) != NULL, "missing from the text: %s", want);
}

static char *render(void)
{
    size_t len = 0;
    char *t = metrics_render(&len);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(strlen(t), len);
    return t;
}

START_TEST(series_and_text)
{
    metrics_identity("worker", 7, 2);
    met_series *a = metrics_series("pskv_x_total", MET_COUNTER, "X.", "table", "w");
    ck_assert_ptr_eq(a, metrics_series("pskv_x_total", MET_COUNTER, "X.", "table", "w"));
    ck_assert_ptr_nonnull(metrics_series("pskv_x_total", MET_COUNTER, "X.", "table", "b\"\\\n"));
    ck_assert_ptr_null(metrics_series("pskv_x_total", MET_GAUGE, "X.", "table", "w"));
    metrics_add(a, 3);
    metrics_add(a, 4);
    metrics_add(NULL, 1); /* a series that could not be made: nothing happens */
    met_series *g = metrics_series("pskv_g", MET_GAUGE, "G.", NULL, NULL);
    metrics_set(g, 2.5);
    ck_assert(metrics_value(a) == 7);
    ck_assert(metrics_sum("pskv_x_total") == 7);
    char *t = render();
    has(t, "# HELP pskv_x_total X.\n# TYPE pskv_x_total counter\n");
    has(t, "pskv_x_total{node=\"7\",role=\"worker\",rank=\"2\",table=\"w\"} 7\n");
    has(t, "table=\"b\\\"\\\\\\n\"} 0\n");
    has(t, "pskv_g{node=\"7\",role=\"worker\",rank=\"2\"} 2.5\n");
    has(t, "# TYPE pskv_resident_memory_bytes gauge\n");
    has(t, "pskv_refusals_total{node=\"7\",role=\"worker\",rank=\"2\",reason=\"plaintext\"} 0\n");
    /* one HELP per family, even with two series */
    ck_assert_ptr_null(strstr(strstr(t, "# HELP pskv_x_total") + 1, "# HELP pskv_x_total"));
    free(t);
    /* a worker of a group: every series carries it, escaped; none again without */
    metrics_group("G\"1");
    t = render();
    has(t, "pskv_g{node=\"7\",role=\"worker\",rank=\"2\",group=\"G\\\"1\"} 2.5\n");
    has(t, "rank=\"2\",group=\"G\\\"1\",table=\"w\"} 7\n");
    free(t);
    metrics_group(NULL);
    t = render();
    has(t, "pskv_g{node=\"7\",role=\"worker\",rank=\"2\"} 2.5\n");
    free(t);
    metrics_stop();
}
END_TEST

START_TEST(histogram_cumulative)
{
    met_series *h = metrics_series("pskv_t_seconds", MET_HISTOGRAM, "T.", NULL, NULL);
    metrics_observe(h, 0.001);
    metrics_observe(h, 3);
    metrics_observe(h, 100);
    char *t = render();
    has(t, "pskv_t_seconds_bucket{node=\"-1\",role=\"?\",rank=\"-1\",le=\"1e-05\"} 0\n");
    has(t, "pskv_t_seconds_bucket{node=\"-1\",role=\"?\",rank=\"-1\",le=\"0.001\"} 1\n");
    has(t, "pskv_t_seconds_bucket{node=\"-1\",role=\"?\",rank=\"-1\",le=\"5\"} 2\n");
    has(t, "pskv_t_seconds_bucket{node=\"-1\",role=\"?\",rank=\"-1\",le=\"+Inf\"} 3\n");
    has(t, "pskv_t_seconds_count{node=\"-1\",role=\"?\",rank=\"-1\"} 3\n");
    has(t, "pskv_t_seconds_sum{node=\"-1\",role=\"?\",rank=\"-1\"} 103.001");
    free(t);
    metrics_stop();
}
END_TEST

/* A port nobody listens on right now (bound to 0, read back, closed). */
static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &al), 0);
    close(s);
    return ntohs(a.sin_port);
}

/* GET path from 127.0.0.1:port; the whole answer (headers and body), malloc'ed. */
static char *http_get(int port, const char *path)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {5, 0};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ck_assert_int_eq(connect(s, (struct sockaddr *)&a, sizeof a), 0);
    char req[200];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: x\r\n\r\n", path);
    ck_assert_int_eq(write(s, req, (size_t)n), n);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    ssize_t k;
    while ((k = read(s, buf + len, cap - 1 - len)) > 0)
        len += (size_t)k;
    buf[len] = 0;
    close(s);
    return buf;
}

START_TEST(endpoint_serves)
{
    metrics_add(metrics_series("pskv_e_total", MET_COUNTER, "E.", NULL, NULL), 42);
    char why[200];
    ck_assert_int_lt(metrics_listen("not-an-address", 1, why, sizeof why), 0);
    ck_assert_ptr_nonnull(strstr(why, "not-an-address"));
    int port = free_port();
    ck_assert_int_eq(metrics_listen("127.0.0.1", port, why, sizeof why), 0);
    ck_assert(metrics_listening());
    char *r = http_get(port, "/metrics");
    has(r, " 200 ");
    has(r, "text/plain; version=0.0.4");
    has(r, "pskv_e_total{node=\"-1\",role=\"?\",rank=\"-1\"} 42\n");
    free(r);
    r = http_get(port, "/other");
    has(r, " 404 ");
    free(r);
    metrics_stop();
    ck_assert(!metrics_listening());
}
END_TEST

Suite *metrics_suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("registry");
    tcase_add_test(tc, series_and_text);
    tcase_add_test(tc, histogram_cumulative);
    tcase_add_test(tc, endpoint_serves);
    suite_add_tcase(s, tc);
    return s;
}
