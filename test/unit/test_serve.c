/* Tests of pskv-serve's pieces without a daemon (worker/serve/): the JSON reader on
 * good and malformed bodies (depth, escapes, 64-bit keys), snapshots that stay whole
 * for a reader while a newer version is published, lookups in dense and sparse
 * snapshots, and sparse features parsed. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "predict.h"
#include "pskv_errors.h"
#include "sjson.h"
#include "smerge.h"
#include "snap.h"
#include "suites.h"

static sjson_doc *parse(const char *text, const sjson **root, char *why)
{
    return sjson_parse(text, strlen(text), root, why, 200);
}

START_TEST(json_good)
{
    const sjson *r;
    char why[200];
    sjson_doc *d = parse(" {\"table\":\"a\\\"b\\u00e9\",\"keys\":[1, \"18446744073709551615\", "
                         "18446744073709551614],\"x\":[true,false,null,-1.5e2,{}]} ", &r, why);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(r->type, SJ_OBJ);
    ck_assert_str_eq(sjson_get(r, "table")->text, "a\"b\xc3\xa9");
    const sjson *k = sjson_get(r, "keys");
    uint64_t v;
    ck_assert_int_eq(k->n, 3);
    ck_assert_int_eq(sjson_u64(k->kids[1], &v), 0);
    ck_assert(v == UINT64_MAX);
    ck_assert_int_eq(sjson_u64(k->kids[2], &v), 0);
    ck_assert(v == UINT64_MAX - 1); /* exact: a double would round it */
    const sjson *x = sjson_get(r, "x");
    ck_assert_int_eq(x->kids[3]->type, SJ_NUM);
    ck_assert(x->kids[3]->num == -150);
    ck_assert_int_eq(sjson_u64(x->kids[3], &v), -1);
    ck_assert_int_eq(x->kids[4]->n, 0);
    ck_assert_ptr_null(sjson_get(r, "absent"));
    sjson_free(&d);
    ck_assert_ptr_null(d);
    sjson_free(&d); /* NULL-safe */
}
END_TEST

START_TEST(json_bad)
{
    static const char *const bad[] = {"", "{", "[1,]", "{\"a\" 1}", "{\"a\":1,}", "[1] 2",
                                      "\"abc", "[01x]", "tru", "[+1]", "[.5]", "\"\\x\"",
                                      "{a:1}", "[\"\x01\"]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const sjson *r = NULL;
        char why[200] = "";
        sjson_doc *d = parse(bad[i], &r, why);
        ck_assert_msg(d == NULL, "accepted '%s'", bad[i]);
        ck_assert_msg(strstr(why, "at byte") != NULL, "'%s': no reason: %s", bad[i], why);
    }
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    const sjson *r;
    char why[200];
    ck_assert_ptr_null(sjson_parse(deep, sizeof deep, &r, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "nested too deeply"));
}
END_TEST

static snap *make(const char *table, float base, size_t n, int sparse)
{
    snap *s = calloc(1, sizeof *s);
    ck_assert_ptr_nonnull(s);
    snprintf(s->table, sizeof s->table, "%s", table);
    s->kind = sparse ? SNAP_SPARSE_LR : SNAP_SOFTMAX;
    s->n = n;
    s->vals = malloc(n * sizeof *s->vals);
    if (sparse)
        s->keys = malloc(n * sizeof *s->keys);
    for (size_t i = 0; i < n; i++) {
        s->vals[i] = base + (float)i;
        if (sparse)
            s->keys[i] = 10 * i + 5;
    }
    return s;
}

START_TEST(snap_versions)
{
    snapstore *st = snapstore_new();
    snap *s = make("t", 0, 4, 0);
    ck_assert_int_eq(snap_publish(st, &s), 0);
    ck_assert_ptr_null(s);
    snap *old = snap_acquire(st, "t");
    s = make("t", 100, 4, 0);
    ck_assert_int_eq(snap_publish(st, &s), 0); /* replaces t while `old` is read */
    float v;
    ck_assert_int_eq(snap_find(old, 3, &v), 0);
    ck_assert(v == 3.0f); /* the old version, whole */
    snap *cur = snap_acquire(st, NULL);
    ck_assert_int_eq(snap_find(cur, 3, &v), 0);
    ck_assert(v == 103.0f);
    ck_assert_int_eq(snap_find(cur, 4, &v), -1);
    snap_release(st, &old); /* frees it (ASan would see a leak otherwise) */
    ck_assert_ptr_null(old);
    snap_release(st, &cur);
    s = make("sparse", 0, 5, 1);
    ck_assert_int_eq(snap_publish(st, &s), 0);
    ck_assert_int_eq(snap_count(st), 2);
    snap *sp = snap_acquire_at(st, 1);
    ck_assert_int_eq(snap_find(sp, 25, &v), 0);
    ck_assert(v == 2.0f);
    ck_assert_int_eq(snap_find(sp, 26, &v), -1);
    ck_assert_int_eq(snap_find(sp, 0, &v), -1);
    ck_assert_int_eq(snap_find(sp, 45, &v), 0);
    snap_release(st, &sp);
    ck_assert_ptr_null(snap_acquire(st, "none"));
    ck_assert_ptr_null(snap_acquire_at(st, 2));
    snapstore_destroy(&st);
    ck_assert_ptr_null(st);
}
END_TEST

START_TEST(sparse_features)
{
    uint64_t id;
    double x;
    ck_assert_int_eq(predict_feature("18446744073709551615:0.5", &id, &x), 0);
    ck_assert(id == UINT64_MAX && x == 0.5);
    ck_assert_int_eq(predict_feature("7:-2e1", &id, &x), 0);
    ck_assert(id == 7 && x == -20);
    static const char *const bad[] = {"", "7", ":1", "-7:1", "7:", "7:1x", "7:nan", "7:inf",
                                      "18446744073709551616:1", "a:1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(predict_feature(bad[i], &id, &x) == -1, "accepted '%s'", bad[i]);
}
END_TEST

/* smerge: sparse rows merged into a new version (later rows win, keys sorted, the
 * old version untouched for its reader), removed rows dropped from a new one; a dense table published only when every
 * server's part carries one clock. */
START_TEST(merge_sparse_and_dense)
{
    snapstore *st = snapstore_new();
    smerge *m = smerge_new(st);
    char why[200];
    uint64_t k1[] = {30, 10, 20};
    float v1[] = {3, 1, 2};
    smerge_rows r = {1, "ns/emb", 0, 0, 1, k1, v1, 3, 4, 0};
    ck_assert_int_eq(smerge_apply(m, &r, why, sizeof why), 0);
    snap *a = snap_acquire(st, "emb");
    ck_assert_ptr_nonnull(a);
    ck_assert_uint_eq(a->n, 3);
    ck_assert_uint_eq(a->keys[0], 10);
    ck_assert_int_eq(a->kind, SNAP_PLAIN);
    uint64_t k2[] = {20, 5, 20};
    float v2[] = {7, 8, 9};
    smerge_rows r2 = {2, "ns/emb", 0, 0, 1, k2, v2, 3, 6, 0};
    ck_assert_int_eq(smerge_apply(m, &r2, why, sizeof why), 0);
    snap *b = snap_acquire(st, "emb");
    float v;
    ck_assert_uint_eq(b->n, 4);
    ck_assert_int_eq(snap_find(b, 20, &v), 0);
    ck_assert(v == 9.0f); /* the later row of a key twice */
    ck_assert_int_eq(snap_find(b, 5, &v), 0);
    ck_assert_int_eq(snap_find(a, 5, &v), -1); /* the old version as it was */
    ck_assert_int_eq(b->clock, 6);
    /* rows eviction removed at a server: a new version without them */
    uint64_t k3[] = {30, 5, 99}; /* 99: not served, nothing to drop */
    smerge_rows r3 = {2, "ns/emb", 0, 0, 1, k3, NULL, 3, 7, 1};
    ck_assert_int_eq(smerge_apply(m, &r3, why, sizeof why), 0);
    snap *c = snap_acquire(st, "emb");
    ck_assert_uint_eq(c->n, 2);
    ck_assert_int_eq(snap_find(c, 30, &v), -1);
    ck_assert_int_eq(snap_find(c, 5, &v), -1);
    ck_assert_int_eq(snap_find(c, 10, &v), 0);
    ck_assert(v == 1.0f);
    ck_assert_int_eq(snap_find(c, 20, &v), 0);
    ck_assert(v == 9.0f);
    ck_assert_int_eq(snap_find(b, 30, &v), 0); /* the old version as it was */
    ck_assert_int_eq(c->clock, 7);
    snap_release(st, &c);
    snap_release(st, &a);
    snap_release(st, &b);
    /* dense: two servers' halves of a 4-row table of width 2 */
    uint64_t d1[] = {0, 1}, d2[] = {2, 3};
    float w1[] = {1, 1, 1, 1}, w2[] = {2, 2, 2, 2};
    uint32_t nodes[] = {1, 2};
    int64_t hi;
    smerge_rows p1 = {1, "ns/sum", 1, 4, 2, d1, w1, 2, 7, 0};
    smerge_rows p2 = {2, "ns/sum", 1, 4, 2, d2, w2, 2, 8, 0};
    ck_assert_int_eq(smerge_apply(m, &p1, why, sizeof why), 0);
    ck_assert_int_eq(smerge_apply(m, &p2, why, sizeof why), 0);
    ck_assert_int_eq(smerge_dense_publish(m, nodes, 2, &hi), 1); /* clocks 7 and 8 */
    ck_assert_int_eq(hi, 8);
    ck_assert_ptr_null(snap_acquire(st, "sum"));
    p1.clock = 8;
    ck_assert_int_eq(smerge_apply(m, &p1, why, sizeof why), 0);
    ck_assert_int_eq(smerge_dense_publish(m, nodes, 2, &hi), 0);
    snap *d = snap_acquire(st, "sum");
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(d->clock, 8);
    const float *row3 = snap_row(d, 3);
    ck_assert(row3 && row3[0] == 2.0f && row3[1] == 2.0f);
    snap_release(st, &d);
    uint64_t bad[] = {4};
    smerge_rows p3 = {1, "ns/sum", 1, 4, 2, bad, w1, 1, 9, 0};
    ck_assert_int_eq(smerge_apply(m, &p3, why, sizeof why), -PSKV_EPROTO); /* outside */
    smerge_destroy(&m);
    snapstore_destroy(&st);
}
END_TEST

/* smerge across a failover: parts of one clock that leave a dead server's rows
 * out are not served (those rows would come from an older version); the new
 * heads' parts, covering the table, are. */
START_TEST(merge_dense_failover)
{
    snapstore *st = snapstore_new();
    smerge *m = smerge_new(st);
    char why[200];
    uint32_t nodes[] = {1, 2, 3};
    int64_t hi;
    uint64_t k1[] = {0, 1}, k2[] = {2, 3}, k3[] = {4, 5}, k1new[] = {0, 1, 2}, k3new[] = {3, 4, 5};
    float v5[] = {5, 5, 5}, v6[] = {6, 6, 6}, v7[] = {7, 7, 7};
    smerge_rows p1 = {1, "ns/d", 1, 6, 1, k1, v5, 2, 5, 0};
    smerge_rows p2 = {2, "ns/d", 1, 6, 1, k2, v5, 2, 5, 0};
    smerge_rows p3 = {3, "ns/d", 1, 6, 1, k3, v5, 2, 5, 0};
    ck_assert_int_eq(smerge_apply(m, &p1, why, sizeof why), 0);
    ck_assert_int_eq(smerge_apply(m, &p2, why, sizeof why), 0);
    ck_assert_int_eq(smerge_apply(m, &p3, why, sizeof why), 0);
    ck_assert_int_eq(smerge_dense_publish(m, nodes, 3, &hi), 0);
    snap *d = snap_acquire(st, "d");
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(d->clock, 5);
    snap_release(st, &d);
    /* server 2 dies; 1 and 3 send their old parts at clock 6: rows 2, 3 missing */
    smerge_drop_node(m, 2);
    uint32_t alive[] = {1, 3};
    p1.vals = p3.vals = v6;
    p1.clock = p3.clock = 6;
    ck_assert_int_eq(smerge_apply(m, &p1, why, sizeof why), 0);
    ck_assert_int_eq(smerge_apply(m, &p3, why, sizeof why), 0);
    smerge_dense_publish(m, alive, 2, &hi);
    d = snap_acquire(st, "d");
    ck_assert_int_eq(d->clock, 5); /* not half of 5 and 6 */
    snap_release(st, &d);
    /* the new heads' parts at clock 7 cover the table */
    smerge_rows n1 = {1, "ns/d", 1, 6, 1, k1new, v7, 3, 7, 0};
    smerge_rows n3 = {3, "ns/d", 1, 6, 1, k3new, v7, 3, 7, 0};
    ck_assert_int_eq(smerge_apply(m, &n1, why, sizeof why), 0);
    ck_assert_int_eq(smerge_apply(m, &n3, why, sizeof why), 0);
    ck_assert_int_eq(smerge_dense_publish(m, alive, 2, &hi), 0);
    d = snap_acquire(st, "d");
    ck_assert_int_eq(d->clock, 7);
    for (uint64_t k = 0; k < 6; k++)
        ck_assert(snap_row(d, k)[0] == 7.0f);
    snap_release(st, &d);
    smerge_destroy(&m);
    snapstore_destroy(&st);
}
END_TEST

/* smerge's sort of a sync's rows: 64-bit keys of every size, keys sent twice in
 * one message (the later row wins) and keys already served, merged over two
 * messages; the version holds each key once, ascending, with its last value (a
 * reference kept by a linear search). */
START_TEST(merge_sparse_many)
{
    snapstore *st = snapstore_new();
    smerge *m = smerge_new(st);
    char why[200];
    enum { N = 1500, REF = 2 * N };
    uint64_t *keys = malloc(N * sizeof *keys), rk[REF];
    float *vals = malloc(N * sizeof *vals), rv[REF];
    size_t nref = 0;
    uint64_t x = 88172645463325252ULL;
    for (int msg = 0; msg < 2; msg++) {
        for (int i = 0; i < N; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
            /* small ids, 64-bit ones, and repeats of earlier keys of this test */
            uint64_t k = i % 3 == 0 ? x % 5000 : i % 3 == 1 ? x : (nref ? rk[x % nref] : x);
            keys[i] = k;
            vals[i] = (float)(msg * N + i);
            size_t j = 0;
            while (j < nref && rk[j] != k)
                j++;
            if (j == nref)
                rk[nref++] = k;
            rv[j] = vals[i];
        }
        smerge_rows r = {1, "ns/emb", 0, 0, 1, keys, vals, N, msg, 0};
        ck_assert_int_eq(smerge_apply(m, &r, why, sizeof why), 0);
    }
    snap *s = snap_acquire(st, "emb");
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(s->n, nref);
    for (size_t i = 1; i < s->n; i++)
        LOOP_ASSERT(s->keys[i - 1] < s->keys[i], "keys %zu, %zu not ascending", i - 1, i);
    for (size_t j = 0; j < nref; j++) {
        float v = -1;
        LOOP_ASSERT(snap_find(s, rk[j], &v) == 0 && v == rv[j], "key %llu: %g, want %g",
                    (unsigned long long)rk[j], (double)v, (double)rv[j]);
    }
    snap_release(st, &s);
    free(keys);
    free(vals);
    smerge_destroy(&m);
    snapstore_destroy(&st);
}
END_TEST

Suite *serve_suite(void)
{
    Suite *s = suite_create("serve");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, json_good);
    tcase_add_test(tc, json_bad);
    tcase_add_test(tc, snap_versions);
    tcase_add_test(tc, sparse_features);
    tcase_add_test(tc, merge_sparse_and_dense);
    tcase_add_test(tc, merge_dense_failover);
    tcase_add_test(tc, merge_sparse_many);
    suite_add_tcase(s, tc);
    return s;
}
