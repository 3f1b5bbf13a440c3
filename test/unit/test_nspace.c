/* Tests of namespaces (server/store/nspace.c): full names NAMESPACE/NAME checked at
 * open, key bindings, a namespace's quota agreed at open and held on pushes. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pskv_errors.h"
#include "store/nspace.h"
#include "store/table.h"
#include "suites.h"
#include "wire.h"

static Pskv__TableOptions sparse(const char *name, uint64_t quota)
{
    Pskv__TableOptions o;
    pskv__table_options__init(&o);
    o.name = (char *)name;
    o.has_kind = 1;
    o.kind = PSKV__TABLE_KIND__SPARSE;
    o.has_width = 1;
    o.width = 4;
    o.updater = "sum";
    o.consistency = "async";
    o.has_quota_bytes = quota != 0;
    o.quota_bytes = quota;
    return o;
}

static int open_t(table_set *ts, const char *name, uint64_t quota, char *why, size_t len)
{
    Pskv__TableOptions o = sparse(name, quota);
    return tables_open(ts, wire_table_id(name), &o, 0, UINT64_MAX, why, len);
}

START_TEST(names)
{
    char ns[NSPACE_MAX + 1], why[256], big[200];
    nspace_of("a/w", ns);
    ck_assert_str_eq(ns, "a");
    nspace_of("w", ns);
    ck_assert_str_eq(ns, "");
    ck_assert_int_eq(nspace_name_check("w", why, sizeof why), 0);
    ck_assert_int_eq(nspace_name_check("ns/w", why, sizeof why), 0);
    ck_assert_int_eq(nspace_name_check("/w", why, sizeof why), -PSKV_EINVAL);
    ck_assert_int_eq(nspace_name_check("a/", why, sizeof why), -PSKV_EINVAL);
    ck_assert_int_eq(nspace_name_check("a/b/c", why, sizeof why), -PSKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "'a/b/c'"));
    memset(big, 'n', 65);
    snprintf(big + 65, sizeof big - 65, "/w");
    ck_assert_int_eq(nspace_name_check(big, why, sizeof why), -PSKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "1..64"));
    snprintf(big + 64, sizeof big - 64, "/w"); /* 64 bytes: the longest */
    ck_assert_int_eq(nspace_name_check(big, why, sizeof why), 0);
    /* the table set refuses a bad name at open, before creating anything */
    table_set *ts = tables_new();
    ck_assert_int_eq(open_t(ts, "a/b/c", 0, why, sizeof why), -PSKV_EINVAL);
    ck_assert_int_eq(open_t(ts, "a/w", 0, why, sizeof why), 0);
    ck_assert_uint_eq(tables_count(ts), 1);
    ck_assert_str_eq(tables_at(ts, 0)->ns, "a");
    tables_destroy(&ts);
}
END_TEST

START_TEST(access)
{
    char why[256];
    ck_assert_int_eq(nspace_access("", "b", 1, why, sizeof why), 0);
    ck_assert_int_eq(nspace_access("rw:a,b", "b", 1, why, sizeof why), 0);
    ck_assert_int_eq(nspace_access("rw:a,bc", "b", 0, why, sizeof why), -PSKV_EACCES);
    ck_assert_ptr_nonnull(strstr(why, "namespace 'b': this worker key is bound to namespaces a,bc"));
    ck_assert_int_eq(nspace_access("rw:a", "", 0, why, sizeof why), -PSKV_EACCES);
    ck_assert_ptr_nonnull(strstr(why, "(unnamed)"));
    ck_assert_int_eq(nspace_access("ro:", "x", 0, why, sizeof why), 0);
    ck_assert_int_eq(nspace_access("ro:", "x", 1, why, sizeof why), -PSKV_EACCES);
    ck_assert_ptr_nonnull(strstr(why, "a reader key may pull, not push"));
    ck_assert_int_eq(nspace_access("ro:a", "a", 0, why, sizeof why), 0);
    ck_assert_int_eq(nspace_access("ro:a", "b", 0, why, sizeof why), -PSKV_EACCES);
}
END_TEST

START_TEST(quota)
{
    char why[400];
    table_set *ts = tables_new();
    ck_assert_int_eq(open_t(ts, "q/w", 100000, why, sizeof why), 0);
    ck_assert_int_eq(open_t(ts, "q/v", 0, why, sizeof why), 0); /* none asked: the first stays */
    ck_assert_int_eq(open_t(ts, "q/u", 100000, why, sizeof why), 0);
    ck_assert_int_eq(open_t(ts, "q/x", 5, why, sizeof why), -PSKV_EMISMATCH);
    ck_assert_ptr_nonnull(strstr(why, "namespace 'q' has option 'quota_bytes' = 100000"));
    ck_assert_int_eq(open_t(ts, "r/w", 0, why, sizeof why), 0);
    ck_assert_uint_eq(nspace_quota(ts, "q"), 100000);
    ck_assert_uint_eq(nspace_quota(ts, "r"), 0);
    table *t = tables_find(ts, wire_table_id("q/w"));
    /* push keys until refused: what is stored stays and rows that exist still pass */
    uint64_t keys[256];
    float vals[256 * 4];
    for (int i = 0; i < 256 * 4; i++)
        vals[i] = 1.0f;
    uint64_t next = 0;
    int rc = 0, pushes = 0;
    while (rc == 0 && pushes < 1000) {
        for (int i = 0; i < 256; i++)
            keys[i] = next++ * 2654435761u;
        rowset rs = {.keys = keys, .n = 256};
        rc = nspace_push_check(ts, t, &rs, 2, why, sizeof why);
        if (rc == 0)
            ck_assert_int_eq(shard_push_rows(t->sh, &rs, vals), 0);
        pushes++;
    }
    ck_assert_int_eq(rc, -PSKV_EQUOTA);
    ck_assert_ptr_nonnull(strstr(why, "namespace 'q' is at its quota"));
    ck_assert_ptr_nonnull(strstr(why, "of 50000 bytes on this server (quota_bytes 100000 over 2"));
    ck_assert_uint_ge(pushes, 2);
    uint64_t held = shard_size(t->sh);
    ck_assert_uint_eq(held, (uint64_t)(pushes - 1) * 256);
    rowset old = {.keys = keys, .n = 0};
    uint64_t k0 = 0;
    old.keys = &k0;
    old.n = 1; /* key 0 exists */
    ck_assert_int_eq(nspace_push_check(ts, t, &old, 2, why, sizeof why), 0);
    float out[4];
    shard_pull_rows(t->sh, &old, out);
    ck_assert(out[0] == 1.0f);
    /* another namespace is not held to q's quota */
    table *r = tables_find(ts, wire_table_id("r/w"));
    rowset rs = {.keys = keys, .n = 256};
    ck_assert_int_eq(nspace_push_check(ts, r, &rs, 2, why, sizeof why), 0);
    tables_destroy(&ts);
}
END_TEST

Suite *nspace_suite(void)
{
    Suite *s = suite_create("nspace");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, names);
    tcase_add_test(tc, access);
    tcase_add_test(tc, quota);
    suite_add_tcase(s, tc);
    return s;
}
