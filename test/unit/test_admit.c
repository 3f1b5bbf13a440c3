/* Tests of feature admission and eviction: the count-min sketch
 * (server/store/cmsketch.c), admission in a sparse shard, the eviction sweep and its
 * giving memory back (server/store/shard_sweep.c), and the refusals at table open. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/cmsketch.h"
#include "pskv_errors.h"
#include "ring.h"
#include "store/shard.h"
#include "suites.h"
#include "store/table.h"
#include "wire.h"

static const upd_opts SUM = {.kind = UPD_SUM};
static const shard_init CONST1 = {INIT_CONST, 0.5f, 1};

static shard *sparse(uint32_t admit_after, uint32_t evict_after)
{
    shard *s = shard_new(0, 0, 0, 0, UINT64_MAX, 1, &SUM, &CONST1);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(shard_admission(s, admit_after, evict_after), 0);
    return s;
}

static shard_mem mem(const shard *s)
{
    shard_mem m = {0};
    shard_mem_add(s, &m);
    return m;
}

START_TEST(cms_counts)
{
    cms *c = cms_new();
    ck_assert_ptr_nonnull(c);
    ck_assert_uint_eq(cms_count(c, 42), 0);
    for (uint32_t i = 1; i <= 300; i++)
        LOOP_ASSERT(cms_add(c, 42) == (i < 255 ? i : 255), "count %u", i);
    ck_assert_uint_eq(cms_count(c, 42), 255); /* saturates */
    ck_assert_uint_eq(cms_count(c, 43), 0);
    cms_destroy(&c);
    ck_assert_ptr_null(c);
    cms_destroy(&c); /* NULL-safe */
}
END_TEST

/* 100,000 distinct keys pushed once each: a count is never under the truth, and
 * over it (a false admission at N = 2) for under 2% of them, as documented. */
START_TEST(cms_error_bound)
{
    cms *c = cms_new();
    ck_assert_ptr_nonnull(c);
    const uint32_t n = 100000; /* under CMS_HALVE_EVERY: no halving meanwhile */
    uint32_t over = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t got = cms_add(c, ring_mix64(i + 1));
        LOOP_ASSERT(got >= 1, "key %u counted %u", i, got);
        over += got > 1;
    }
    ck_assert_uint_eq(cms_halvings(c), 0);
    ck_assert_msg(over < n / 50, "%u of %u single pushes counted twice", over, n);
    cms_destroy(&c);
}
END_TEST

/* After CMS_HALVE_EVERY counted pushes every counter is halved: old counts fade. */
START_TEST(cms_halves)
{
    cms *c = cms_new();
    ck_assert_ptr_nonnull(c);
    for (int i = 0; i < 10; i++)
        cms_add(c, 7);
    for (uint32_t i = 10; i < CMS_HALVE_EVERY; i++)
        cms_add(c, 1000000 + i);
    ck_assert_uint_eq(cms_halvings(c), 1);
    ck_assert_uint_eq(cms_count(c, 7), 5);
    cms_destroy(&c);
}
END_TEST

/* admit_after 3: the first two pushes of a key are dropped (its pull reads the
 * init value), the third creates its row and applies. A replica (shard_tag
 * replica 1) applies at once: its head decided. */
START_TEST(admission_drops_until_n)
{
    shard *s = sparse(3, 0);
    uint64_t k = 99;
    float g = 1.0f, v;
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(shard_push(s, &k, 0, 1, &g), 0);
        ck_assert_int_eq(shard_has_row(s, k), 0);
        shard_pull(s, &k, 0, 1, &v);
        ck_assert_float_eq(v, 0.5f);
    }
    ck_assert_int_eq(shard_push(s, &k, 0, 1, &g), 0);
    ck_assert_int_eq(shard_has_row(s, k), 1);
    shard_pull(s, &k, 0, 1, &v);
    ck_assert_float_eq(v, 1.5f); /* init + the third push only */
    ck_assert_int_eq(shard_push(s, &k, 0, 1, &g), 0);
    shard_pull(s, &k, 0, 1, &v);
    ck_assert_float_eq(v, 2.5f);
    shard_mem m = mem(s);
    ck_assert_uint_eq(m.rows, 1);
    ck_assert_uint_eq(m.admitted, 1);
    ck_assert_uint_eq(m.not_admitted, 2);
    ck_assert_uint_ge(m.bytes, cms_bytes());
    uint64_t k2 = 100;
    shard_tag(s, 0, 1);
    ck_assert_int_eq(shard_push(s, &k2, 0, 1, &g), 0);
    ck_assert_int_eq(shard_has_row(s, k2), 1);
    ck_assert_uint_eq(shard_size(s), 2);
    shard_destroy(&s);
    /* dense shards take no admission */
    shard *d = shard_new(1, 0, 10, 0, UINT64_MAX, 1, &SUM, &CONST1);
    ck_assert_int_eq(shard_admission(d, 2, 0), -PSKV_EINVAL);
    shard_destroy(&d);
}
END_TEST

/* Sweeps until a whole pass is done (a call that removes nothing and wraps). */
static uint64_t sweep_all(shard *s, int64_t now)
{
    uint64_t removed = 0;
    for (int i = 0; i < 1000; i++)
        removed += shard_sweep(s, now, 1 << 20);
    return removed;
}

/* 20,000 keys pushed at clock 0, every fourth again at clock 2; evict_after 3.
 * At now 4 the rows of clock 0 go (0 < 4 - 3), those of clock 2 stay with their values;
 * every survivor is still found (removal in linear probing moves entries back)
 * and the storage's bytes drop once the pass moves it to smaller arrays. */
START_TEST(sweep_removes_old_rows)
{
    shard *s = sparse(0, 3);
    const uint64_t n = 20000;
    uint64_t *keys = malloc(n * sizeof *keys);
    float *g = malloc(n * sizeof *g), *out = malloc(n * sizeof *out);
    ck_assert_ptr_nonnull(keys);
    ck_assert_ptr_nonnull(g);
    ck_assert_ptr_nonnull(out);
    for (uint64_t i = 0; i < n; i++) {
        keys[i] = ring_mix64(i * 7 + 3);
        g[i] = (float)(i % 100);
    }
    shard_tag(s, 0, 0);
    ck_assert_int_eq(shard_push(s, keys, 0, n, g), 0);
    shard_tag(s, 2, 0);
    for (uint64_t i = 0; i < n; i += 4)
        ck_assert_int_eq(shard_push(s, &keys[i], 0, 1, &g[i]), 0);
    shard_mem full = mem(s);
    ck_assert_uint_eq(full.rows, n);
    ck_assert_uint_eq(sweep_all(s, 3), 0); /* clock 0's rows: clock 3 is not finished */
    ck_assert_uint_eq(mem(s).evicted, 0);
    /* bounded: one call looks at no more slots than its budget */
    ck_assert_uint_le(shard_sweep(s, 4, 100), 100);
    uint64_t removed = sweep_all(s, 4);
    shard_mem after = mem(s);
    ck_assert_uint_eq(after.rows, n / 4);
    ck_assert_uint_eq(after.evicted, n - n / 4);
    ck_assert_uint_le(removed, n - n / 4);
    ck_assert_msg(after.bytes * 2 <= full.bytes, "bytes %llu -> %llu",
                  (unsigned long long)full.bytes, (unsigned long long)after.bytes);
    shard_pull(s, keys, 0, n, out);
    for (uint64_t i = 0; i < n; i++) {
        float want = i % 4 ? 0.5f : 0.5f + 2 * g[i];
        LOOP_ASSERT(out[i] == want, "key %llu: %g, want %g", (unsigned long long)i,
                    (double)out[i], (double)want);
        LOOP_ASSERT(shard_has_row(s, keys[i]) == !(i % 4), "row of key %llu",
                    (unsigned long long)i);
    }
    /* the rest go later; the shard then holds nothing */
    sweep_all(s, 8);
    ck_assert_uint_eq(shard_size(s), 0);
    free(keys);
    free(g);
    free(out);
    shard_destroy(&s);
}
END_TEST

/* A push at a clock more than evict_after after a row's last push starts it
 * afresh, as if the sweep had removed it first: a replica whose sweep is late
 * computes what its head did. */
START_TEST(stale_row_reset_on_push)
{
    shard *s = sparse(0, 2);
    uint64_t k = 5;
    float g = 1.0f, v;
    shard_tag(s, 0, 0);
    ck_assert_int_eq(shard_push(s, &k, 0, 1, &g), 0);
    shard_tag(s, 1, 0);
    ck_assert_int_eq(shard_push(s, &k, 0, 1, &g), 0);
    shard_pull(s, &k, 0, 1, &v);
    ck_assert_float_eq(v, 2.5f);
    shard_tag(s, 3, 1); /* 3 = 1 + 2: not after it, so the row stays */
    ck_assert_int_eq(shard_push(s, &k, 0, 1, &g), 0);
    shard_pull(s, &k, 0, 1, &v);
    ck_assert_float_eq(v, 3.5f);
    shard_tag(s, 6, 1); /* 6 > 3 + 2: clocks 4 and 5 without a push */
    ck_assert_int_eq(shard_push(s, &k, 0, 1, &g), 0);
    shard_pull(s, &k, 0, 1, &v);
    ck_assert_float_eq(v, 1.5f);
    ck_assert_uint_eq(mem(s).evicted, 1);
    shard_destroy(&s);
}
END_TEST

/* A row's stamp travels with it (FILL and checkpoints export and import rows):
 * a copy stamped with its own clock instead would outlive its head's row. */
START_TEST(stamp_travels_with_row)
{
    shard *a = sparse(0, 3), *b = sparse(0, 3);
    uint64_t k = 11, ek;
    float g = 1.0f, row[4];
    shard_tag(a, 2, 0);
    ck_assert_int_eq(shard_push(a, &k, 0, 1, &g), 0);
    ck_assert_uint_eq(shard_row_floats(a), 2); /* the value, then the stamp */
    ck_assert_uint_eq(shard_export(a, NULL, NULL, &ek, row), 1);
    shard_tag(b, 9, 0);
    ck_assert_int_eq(shard_import(b, &ek, 0, 1, row), 0);
    ck_assert_uint_eq(sweep_all(b, 5), 0); /* 2 = 5 - 3: clock 5 not finished */
    ck_assert_uint_eq(sweep_all(b, 6), 1);
    ck_assert_uint_eq(shard_size(b), 0);
    shard_destroy(&a);
    shard_destroy(&b);
}
END_TEST

static Pskv__TableOptions opts(const char *name, int dense, uint32_t admit, uint32_t evict)
{
    Pskv__TableOptions o;
    pskv__table_options__init(&o);
    o.name = (char *)name;
    o.has_kind = o.has_size = o.has_width = 1;
    o.kind = dense ? PSKV__TABLE_KIND__DENSE : PSKV__TABLE_KIND__SPARSE;
    o.size = 100;
    o.width = 1;
    o.has_admit_after = admit != 0;
    o.admit_after = admit;
    o.has_evict_after = evict != 0;
    o.evict_after = evict;
    return o;
}

static int open1(table_set *ts, const Pskv__TableOptions *o, char *why, size_t len)
{
    why[0] = '\0';
    return tables_open(ts, wire_table_id(o->name), o, 0, UINT64_MAX, why, len);
}

START_TEST(table_refusals)
{
    table_set *ts = tables_new();
    char why[256];
    Pskv__TableOptions o = opts("d", 1, 2, 0);
    ck_assert_int_eq(open1(ts, &o, why, sizeof why), -PSKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "'admit_after' applies to sparse tables only"));
    o = opts("d", 1, 0, 10);
    ck_assert_int_eq(open1(ts, &o, why, sizeof why), -PSKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "'evict_after' applies to sparse tables only"));
    o = opts("s", 0, 256, 0);
    ck_assert_int_eq(open1(ts, &o, why, sizeof why), -PSKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "0..255"));
    o = opts("s", 0, 2, 0);
    o.consistency = "bsp";
    ck_assert_int_eq(open1(ts, &o, why, sizeof why), -PSKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "'admit_after' needs consistency async"));
    o = opts("s", 0, 0, 5);
    o.consistency = "bsp";
    ck_assert_int_eq(open1(ts, &o, why, sizeof why), -PSKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "'evict_after' needs consistency async"));
    ck_assert_uint_eq(tables_count(ts), 0);
    o = opts("s", 0, 2, 10);
    ck_assert_int_eq(open1(ts, &o, why, sizeof why), 0);
    ck_assert_int_eq(open1(ts, &o, why, sizeof why), 0);
    o = opts("s", 0, 3, 10);
    ck_assert_int_eq(open1(ts, &o, why, sizeof why), -PSKV_EMISMATCH);
    ck_assert_ptr_nonnull(strstr(why, "admit_after"));
    o = opts("s", 0, 2, 0);
    ck_assert_int_eq(open1(ts, &o, why, sizeof why), -PSKV_EMISMATCH);
    ck_assert_ptr_nonnull(strstr(why, "evict_after"));
    tables_destroy(&ts);
}
END_TEST

Suite *admit_suite(void)
{
    Suite *s = suite_create("admit");
    TCase *sk = tcase_create("sketch");
    tcase_set_timeout(sk, 30);
    tcase_add_test(sk, cms_counts);
    tcase_add_test(sk, cms_error_bound);
    tcase_add_test(sk, cms_halves);
    suite_add_tcase(s, sk);
    TCase *sh = tcase_create("shard");
    tcase_set_timeout(sh, 30);
    tcase_add_test(sh, admission_drops_until_n);
    tcase_add_test(sh, sweep_removes_old_rows);
    tcase_add_test(sh, stale_row_reset_on_push);
    tcase_add_test(sh, stamp_travels_with_row);
    tcase_add_test(sh, table_refusals);
    suite_add_tcase(s, sh);
    return s;
}
