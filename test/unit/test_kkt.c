/* Tests of the kkt filter: its argument, the worker's decision per row (worker/lib/wkkt.c)
 * from readings and pushes, a push's rows compacted, the decision checked against
 * the server's own sgd with l1 (common/update/updater.c: a skipped row's update leaves the
 * weight at zero, a row just outside the band moves it), and its refusals at
 * TABLE_OPEN (common/filter.c, server/store/table.c). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "pskv_errors.h"
#include "suites.h"
#include "store/table.h"
#include "update/updater.h"
#include "wire.h"
#include "wkkt.h"

START_TEST(kkt_parse)
{
    filter_set fs;
    char why[256], out[300];
    ck_assert_int_eq(filter_parse_list(&fs, "kkt", why, sizeof why), 0);
    ck_assert_int_eq(fs.kkt, 1);
    ck_assert(fs.kkt_margin == 0.0f);
    ck_assert_int_eq(filter_parse_list(&fs, "keycache,lz4,kkt:0.25", why, sizeof why), 0);
    ck_assert(fs.kkt_margin == 0.25f);
    filter_format(&fs, out, sizeof out);
    ck_assert_str_eq(out, "keycache:64,lz4,kkt:0.25");
    static const char *const bad[] = {"kkt:1", "kkt:-0.1", "kkt:x", "kkt:", "kkt,kkt:0.5"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        why[0] = 0;
        ck_assert_msg(filter_parse_list(&fs, bad[i], why, sizeof why) == -PSKV_EINVAL, "%s",
                      bad[i]);
        ck_assert_msg(strstr(why, "kkt") != NULL, "%s: %s", bad[i], why);
    }
}
END_TEST

/* Readings and pushes: only a zero reading newer than the key's last push counts. */
START_TEST(kkt_decisions)
{
    wkkt *k = wkkt_new(0.1f, 0.0f);
    ck_assert_ptr_nonnull(k);
    const uint64_t keys[] = {1, 2, 3, 4};
    const float vals[] = {0, 0.5f, 0, 0};
    float g = 0.05f;
    ck_assert_int_eq(wkkt_skip(k, 1, &g, 1), 0); /* nothing read yet */
    wkkt_pushed(k, &keys[3], 1, 6);               /* key 4 pushed at 6, still unanswered */
    wkkt_pulled(k, keys, vals, 4, 1, 6);          /* a pull sent with floor 6 */
    ck_assert_int_eq(wkkt_skip(k, 1, &g, 1), 1);
    g = 0.1f; /* the band's edge: prox(0 - lr*g, lr*l1) is still 0 */
    ck_assert_int_eq(wkkt_skip(k, 1, &g, 1), 1);
    g = -0.1f;
    ck_assert_int_eq(wkkt_skip(k, 3, &g, 1), 1);
    g = nextafterf(0.1f, 1.0f);
    ck_assert_int_eq(wkkt_skip(k, 1, &g, 1), 0);
    g = NAN;
    ck_assert_int_eq(wkkt_skip(k, 1, &g, 1), 0);
    g = 0.01f;
    ck_assert_int_eq(wkkt_skip(k, 2, &g, 1), 0); /* the weight is not zero */
    ck_assert_int_eq(wkkt_skip(k, 4, &g, 1), 0); /* the reading may predate push 6 */
    ck_assert_int_eq(wkkt_skip(k, 5, &g, 1), 0); /* never read */
    wkkt_pushed(k, keys, 1, 8);                  /* key 1 pushed: its reading is stale */
    ck_assert_int_eq(wkkt_skip(k, 1, &g, 1), 0);
    const float zeros[] = {0, 0, 0, 0};
    wkkt_pulled(k, keys, zeros, 4, 1, 5); /* an older pull answered late: ignored */
    ck_assert_int_eq(wkkt_skip(k, 2, &g, 1), 0);
    wkkt_pulled(k, keys, zeros, 4, 1, 9); /* after every push: all zero */
    for (uint64_t key = 1; key <= 4; key++)
        ck_assert_int_eq(wkkt_skip(k, key, &g, 1), 1);
    wkkt_destroy(&k);
    ck_assert_ptr_null(k);
    wkkt_destroy(&k);

    /* a margin narrows the band; a row of width 2 needs every value inside it */
    k = wkkt_new(0.1f, 0.5f);
    const float row0[] = {0, 0};
    wkkt_pulled(k, keys, row0, 1, 2, 1);
    const float in[] = {0.04f, -0.05f}, out[] = {0.04f, 0.06f};
    ck_assert_int_eq(wkkt_skip(k, 1, in, 2), 1);
    ck_assert_int_eq(wkkt_skip(k, 1, out, 2), 0);
    wkkt_destroy(&k);
}
END_TEST

/* Many keys (the table grows): a push's rows compacted, counted, never empty. */
START_TEST(kkt_filter_rows)
{
    enum { N = 5000 };
    wkkt *k = wkkt_new(1.0f, 0.0f);
    uint64_t *keys = malloc(N * sizeof *keys);
    float *w = malloc(N * sizeof *w), *g = malloc(N * sizeof *g);
    for (int i = 0; i < N; i++) {
        keys[i] = (uint64_t)i * 7919u + 3;
        w[i] = i % 3 == 0 ? 0.5f : 0.0f; /* a third not at zero */
        g[i] = i % 2 ? 0.5f : 2.0f;      /* half inside the band */
    }
    wkkt_pulled(k, keys, w, N, 1, 1);
    filter_stats st;
    memset(&st, 0, sizeof st);
    filter_set fs; /* no keycache: skipped rows are left out */
    memset(&fs, 0, sizeof fs);
    const uint64_t *ok;
    const float *ov;
    size_t on;
    ck_assert_int_eq(wkkt_filter(k, &fs, keys, g, N, 1, &ok, &ov, &on, &st), 0);
    size_t want = 0;
    for (int i = 0; i < N; i++) {
        if (i % 3 == 0 || i % 2 == 0) { /* sent, in order, with its gradient */
            ck_assert_uint_eq(ok[want], keys[i]);
            ck_assert(ov[want] == g[i]);
            want++;
        }
    }
    ck_assert_uint_eq(on, want);
    ck_assert_uint_eq(st.kkt_rows, N);
    ck_assert_uint_eq(st.kkt_skipped, N - want);
    /* the push goes as timestamp 5: the rows sent at zero weight are pushed now, the
     * skipped ones still at zero */
    wkkt_sent(k, 5);
    const float tiny = 0.01f;
    ck_assert_int_eq(wkkt_skip(k, keys[2], &tiny, 1), 0); /* sent with its gradient */
    ck_assert_int_eq(wkkt_skip(k, keys[1], &tiny, 1), 1); /* skipped */
    wkkt_pulled(k, keys, w, N, 1, 6);                     /* read again after push 5 */
    ck_assert_int_eq(wkkt_skip(k, keys[2], &tiny, 1), 1);
    /* every row skippable: the last one goes all the same */
    const float small[] = {0.1f, 0.2f};
    const uint64_t two[] = {keys[1], keys[5]};
    ck_assert_int_eq(wkkt_filter(k, &fs, two, small, 2, 1, &ok, &ov, &on, &st), 0);
    ck_assert_uint_eq(on, 1);
    ck_assert_uint_eq(ok[0], keys[5]);
    ck_assert(ov[0] == 0.2f);
    /* keycache (and lz4), two thirds of the rows going: the whole list, the skipped
     * rows' values zero */
    char why[200];
    ck_assert_int_eq(filter_parse_list(&fs, "keycache,lz4,kkt", why, sizeof why), 0);
    memset(&st, 0, sizeof st);
    ck_assert_int_eq(wkkt_filter(k, &fs, keys, g, N, 1, &ok, &ov, &on, &st), 0);
    ck_assert_uint_eq(on, N);
    for (int i = 0; i < N; i++) {
        ck_assert_uint_eq(ok[i], keys[i]);
        ck_assert(ov[i] == (i % 3 == 0 || i % 2 == 0 ? g[i] : 0.0f));
    }
    ck_assert_uint_eq(st.kkt_skipped, N - want);
    ck_assert_uint_eq(st.kkt_zeroed, N - want);
    /* fewer than a third going: left out, a new list costing less than the whole */
    for (int i = 0; i < N; i++) { /* newer readings: a tenth not at zero */
        w[i] = i % 10 == 0 ? 0.5f : 0.0f;
        g[i] = i % 8 ? 0.5f : 2.0f; /* an eighth outside the band */
    }
    wkkt_pulled(k, keys, w, N, 1, 7);
    size_t go = 0;
    for (int i = 0; i < N; i++)
        go += i % 10 == 0 || i % 8 == 0;
    ck_assert_uint_lt(3 * go, N);
    ck_assert_int_eq(wkkt_filter(k, &fs, keys, g, N, 1, &ok, &ov, &on, &st), 0);
    ck_assert_uint_eq(on, go);
    free(keys);
    free(w);
    free(g);
    wkkt_destroy(&k);
}
END_TEST

/* The decision against the server's update: for random lr, l1, l2 and gradients,
 * a row the filter skips is one sgd with l1 leaves at zero, and a row at zero a
 * little outside the band (|g| = 1.001 l1) is one it moves. */
START_TEST(kkt_exact_against_sgd)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    int skipped = 0, moved = 0;
    for (int i = 0; i < 4000; i++) {
        float u[4];
        for (int j = 0; j < 4; j++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            u[j] = (float)(x >> 40) / (float)(1u << 24);
        }
        upd_opts o = {.kind = UPD_SGD, .lr = 0.01f + 2 * u[0], .l1 = 1e-4f + 0.01f * u[1],
                      .l2 = i % 2 ? 0.1f * u[2] : 0};
        float g[2] = {(2 * u[3] - 1) * 1.5f * o.l1, 0};
        g[1] = copysignf(o.l1 * 1.001f, g[0]);
        wkkt *k = wkkt_new(o.l1, 0.0f);
        const uint64_t key = 42;
        const float zero = 0;
        wkkt_pulled(k, &key, &zero, 1, 1, 1);
        for (int j = 0; j < 2; j++) {
            float w = 0;
            upd_apply(&o, &w, NULL, &g[j], 1);
            if (wkkt_skip(k, key, &g[j], 1)) {
                ck_assert_msg(w == 0.0f, "lr %g l1 %g l2 %g g %g: w %g", (double)o.lr,
                              (double)o.l1, (double)o.l2, (double)g[j], (double)w);
                skipped++;
            } else if (j == 1) {
                ck_assert_msg(w != 0.0f, "g %g outside l1 %g left w at 0", (double)g[j],
                              (double)o.l1);
                moved++;
            }
        }
        wkkt_destroy(&k);
    }
    ck_assert_int_gt(skipped, 1000);
    ck_assert_int_eq(moved, 4000);
}
END_TEST

static Pskv__TableOptions kkt_opts(const char *updater, float l1)
{
    static char *f[] = {"kkt"};
    Pskv__TableOptions o;
    pskv__table_options__init(&o);
    o.name = "lr";
    o.has_kind = o.has_width = o.has_l1 = o.has_lr = 1;
    o.kind = PSKV__TABLE_KIND__SPARSE;
    o.width = 1;
    o.lr = 0.1f;
    o.updater = (char *)updater;
    o.l1 = l1;
    o.filters = f;
    o.n_filters = 1;
    return o;
}

/* Where skipping is not provably a no-op, TABLE_OPEN is refused naming the table,
 * the filter and why. */
START_TEST(kkt_refused)
{
    table_set *ts = tables_new();
    char why[400];
    Pskv__TableOptions ok = kkt_opts("sgd", 0.01f);
    ck_assert_msg(tables_open(ts, wire_table_id("lr"), &ok, 0, UINT64_MAX, why, sizeof why) == 0,
                  "%s", why);
    tables_destroy(&ts);
    struct {
        Pskv__TableOptions o;
        const char *says;
    } bad[] = {
        {kkt_opts("ftrl", 0.01f), "ftrl"},     {kkt_opts("sgd", 0), "l1"},
        {kkt_opts("sum", 0), "updater is 'sum'"}, {kkt_opts("adagrad", 0), "'adagrad'"},
        {kkt_opts("adam", 0), "'adam'"},       {kkt_opts("sgd", 0.01f), "dense"},
        {kkt_opts("sgd", 0.01f), "momentum"},  {kkt_opts("sgd", 0.01f), "bsp"},
        {kkt_opts("sgd", 0.01f), "admit_after"}, {kkt_opts("sgd", 0.01f), "evict_after"},
    };
    bad[5].o.kind = PSKV__TABLE_KIND__DENSE;
    bad[5].o.has_size = 1;
    bad[5].o.size = 10;
    bad[6].o.has_momentum = 1;
    bad[6].o.momentum = 0.9f;
    bad[7].o.consistency = "bsp";
    bad[8].o.has_admit_after = 1;
    bad[8].o.admit_after = 3;
    bad[9].o.has_evict_after = 1;
    bad[9].o.evict_after = 10;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ts = tables_new();
        why[0] = 0;
        int rc = tables_open(ts, wire_table_id("lr"), &bad[i].o, 0, UINT64_MAX, why, sizeof why);
        ck_assert_msg(rc == -PSKV_EINVAL, "case %zu (%s): %d", i, bad[i].says, rc);
        ck_assert_msg(strstr(why, "table 'lr', filter 'kkt'") && strstr(why, bad[i].says),
                      "case %zu: %s", i, why);
        ck_assert_uint_eq(tables_count(ts), 0);
        tables_destroy(&ts);
    }
}
END_TEST

Suite *kkt_suite(void)
{
    Suite *s = suite_create("kkt");
    TCase *tc = tcase_create("kkt");
    tcase_add_test(tc, kkt_parse);
    tcase_add_test(tc, kkt_decisions);
    tcase_add_test(tc, kkt_filter_rows);
    tcase_add_test(tc, kkt_exact_against_sgd);
    tcase_add_test(tc, kkt_refused);
    suite_add_tcase(s, tc);
    return s;
}
