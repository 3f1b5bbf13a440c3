/* Tests of the wire filters: parsing a table's list (common/filter.c), lz4 and zstd
 * round trips through wire_parse and corrupt frames refused, the key-list caches
 * (common/keycache.c) with hits, misses and eviction, and the server's side of
 * keycache (server/sfilter.c) and of TABLE_OPEN (server/store/table.c). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "filter.h"
#include "fquant.h"
#include "keycache.h"
#include "pskv_errors.h"
#include "sfilter.h"
#include "suites.h"
#include "store/table.h"
#include "wire.h"

START_TEST(parse_lists)
{
    filter_set fs;
    char why[256], out[300];
    ck_assert_int_eq(filter_parse_list(&fs, "keycache,lz4", why, sizeof why), 0);
    ck_assert_uint_eq(fs.keycache_mb, 64);
    ck_assert_int_eq(fs.codec, FCODEC_LZ4);
    filter_format(&fs, out, sizeof out);
    ck_assert_str_eq(out, "keycache:64,lz4");
    ck_assert_int_eq(filter_parse_list(&fs, "zstd:7,keycache:2", why, sizeof why), 0);
    ck_assert_int_eq(fs.codec, FCODEC_ZSTD);
    ck_assert_int_eq(fs.level, 7);
    ck_assert_uint_eq(fs.keycache_mb, 2);
    ck_assert_int_eq(filter_parse_list(&fs, "", why, sizeof why), 0);
    filter_format(&fs, out, sizeof out);
    ck_assert_str_eq(out, "none");
    static const char *const bad[] = {"bogus",   "lz4,zstd", "zstd:0",  "zstd:99", "lz4:3",
                                      "keycache:0", "keycache:x", "lz4,lz4", ":", "significant:x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        why[0] = 0;
        ck_assert_msg(filter_parse_list(&fs, bad[i], why, sizeof why) == -PSKV_EINVAL, "%s",
                      bad[i]);
        ck_assert_msg(strstr(why, "filter") != NULL, "%s: %s", bad[i], why);
    }
}
END_TEST

/* A PUSH of n sparse rows of width 1 with its frames packed by `fs`: parsed back
 * by wire_parse, keys and values must come out bit for bit. */
static void round_trip(const char *list, int compressible)
{
    filter_set fs;
    char why[256];
    ck_assert_int_eq(filter_parse_list(&fs, list, why, sizeof why), 0);
    enum { N = 4096 };
    uint64_t *keys = malloc(N * sizeof *keys);
    float *vals = malloc(N * sizeof *vals);
    uint64_t x = 88172645463325252ULL;
    for (int i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        keys[i] = compressible ? (uint64_t)i * 3 : x;
        vals[i] = compressible ? (float)(i % 7) * 0.25f : (float)(x >> 11) * 1e-9f;
    }
    Pskv__Meta m;
    wire_meta_init(&m, PSKV__MSG_TYPE__PUSH);
    m.has_num_keys = m.has_width = m.has_table_id = 1;
    m.num_keys = N;
    m.width = 1;
    m.table_id = 42;
    zmq_msg_t kf, vf;
    int pk = filter_pack(&fs, FILTER_ZKEYS, keys, N * 8, &m, &kf);
    int pv = filter_pack(&fs, FILTER_ZVALS, vals, N * 4, &m, &vf);
    ck_assert_int_ge(pk, 0);
    ck_assert_int_ge(pv, 0);
    if (compressible) { /* both frames must have shrunk */
        ck_assert_int_eq(pk, 1);
        ck_assert_int_eq(pv, 1);
        ck_assert_uint_lt(zmq_msg_size(&kf), N * 8 * 3 / 4);
        ck_assert_uint_eq(m.zframes, FILTER_ZKEYS | FILTER_ZVALS);
    }
    uint8_t meta[256];
    size_t mlen = pskv__meta__pack(&m, meta);
    const void *data[3] = {meta, pk ? zmq_msg_data(&kf) : (void *)keys,
                           pv ? zmq_msg_data(&vf) : (void *)vals};
    size_t sizes[3] = {mlen, pk ? zmq_msg_size(&kf) : N * 8, pv ? zmq_msg_size(&vf) : N * 4};
    wire_msg w;
    memset(&w, 0, sizeof w);
    ck_assert_msg(wire_parse(&w, data, sizes, 3, why, sizeof why) == 0, "%s", why);
    ck_assert_mem_eq(w.keys, keys, N * 8);
    ck_assert_mem_eq(w.vals, vals, N * 4);
    wire_msg_close(&w);

    if (pv) { /* a corrupt values frame is refused, naming table and filter */
        uint8_t *bad = malloc(sizes[2]);
        memcpy(bad, data[2], sizes[2]);
        for (size_t i = 0; i < sizes[2]; i += 7)
            bad[i] ^= 0x5a;
        data[2] = bad;
        memset(&w, 0, sizeof w);
        ck_assert_int_eq(wire_parse(&w, data, sizes, 3, why, sizeof why), -PSKV_EPROTO);
        ck_assert_msg(strstr(why, "table id 42") && strstr(why, "filter") &&
                          strstr(why, filter_codec_name(fs.codec)), "%s", why);
        ck_assert_ptr_null(w.meta);
        sizes[2] /= 2; /* and a truncated one */
        ck_assert_int_eq(wire_parse(&w, data, sizes, 3, why, sizeof why), -PSKV_EPROTO);
        free(bad);
    }
    if (pk)
        zmq_msg_close(&kf);
    if (pv)
        zmq_msg_close(&vf);
    free(keys);
    free(vals);
}

START_TEST(lz4_round_trip) { round_trip("lz4", 1); }
END_TEST
START_TEST(zstd_round_trip) { round_trip("zstd:3", 1); }
END_TEST
START_TEST(incompressible_goes_raw) { round_trip("lz4", 0); round_trip("zstd", 0); }
END_TEST

START_TEST(small_frames_raw)
{
    filter_set fs;
    char why[128];
    ck_assert_int_eq(filter_parse_list(&fs, "zstd", why, sizeof why), 0);
    float v[FILTER_MIN_BYTES / 4 - 1] = {0};
    Pskv__Meta m;
    wire_meta_init(&m, PSKV__MSG_TYPE__PUSH);
    zmq_msg_t out;
    ck_assert_int_eq(filter_pack(&fs, FILTER_ZVALS, v, sizeof v, &m, &out), 0);
    ck_assert_uint_eq(m.zframes, 0);
}
END_TEST

START_TEST(keycache_hit_miss_evict)
{
    keycache *kc = keycache_new(3 * (100 * 8 + 64)); /* room for three lists of 100 */
    uint64_t a[100], b[100];
    for (int i = 0; i < 100; i++)
        a[i] = (uint64_t)i, b[i] = (uint64_t)(99 - i);
    uint64_t sa = keycache_sig(a, 100), sb = keycache_sig(b, 100);
    ck_assert_uint_ne(sa, sb); /* order matters */
    ck_assert_uint_ne(keycache_sig(a, 99), sa);
    ck_assert_ptr_null(keycache_get(kc, 0, sa, 100)); /* miss */
    ck_assert_int_eq(keycache_put(kc, 0, sa, a, 100), 0);
    const uint64_t *got = keycache_get(kc, 0, sa, 100); /* hit */
    ck_assert_ptr_nonnull(got);
    ck_assert_mem_eq(got, a, sizeof a);
    ck_assert_ptr_null(keycache_get(kc, 0, sa, 99)); /* another length: a miss */
    /* fill past the bound: the least recently used goes, a is kept by touching it */
    uint64_t c[100];
    for (uint64_t s = 1; s <= 3; s++) {
        for (int i = 0; i < 100; i++)
            c[i] = s * 1000 + (uint64_t)i;
        ck_assert_int_eq(keycache_put(kc, 0, keycache_sig(c, 100), c, 100), 0);
        ck_assert_ptr_nonnull(keycache_get(kc, 0, sa, 100));
        ck_assert_uint_le(keycache_bytes(kc), 3 * (100 * 8 + 64));
    }
    ck_assert_uint_eq(keycache_entries(kc), 3);
    ck_assert_uint_eq(keycache_evictions(kc), 1);
    for (int i = 0; i < 100; i++)
        c[i] = 1000 + (uint64_t)i; /* the first of the three was the coldest */
    ck_assert_ptr_null(keycache_get(kc, 0, keycache_sig(c, 100), 100));
    /* a list larger than the whole bound is never kept */
    uint64_t big[400] = {0};
    ck_assert_int_eq(keycache_put(kc, 0, 7, big, 400), 0);
    ck_assert_ptr_null(keycache_get(kc, 0, 7, 400));
    /* marks: per peer, forgotten on a miss */
    ck_assert_int_eq(keycache_mark(kc, 5, sb, 100), 0);
    ck_assert_int_eq(keycache_has(kc, 5, sb, 100), 1);
    ck_assert_int_eq(keycache_has(kc, 6, sb, 100), 0);
    keycache_forget(kc, 5, sb);
    ck_assert_int_eq(keycache_has(kc, 5, sb, 100), 0);
    keycache_destroy(&kc);
    ck_assert_ptr_null(kc);
    keycache_destroy(&kc);
}
END_TEST

/* Many lists through a small cache: the table grows, every entry stays reachable. */
START_TEST(keycache_many)
{
    keycache *kc = keycache_new(100000);
    for (uint64_t i = 0; i < 5000; i++)
        ck_assert_int_eq(keycache_mark(kc, (uint32_t)(i % 3), i + 1, 10), 0);
    size_t n = keycache_entries(kc);
    ck_assert_uint_lt(n, 5000);
    ck_assert_uint_le(keycache_bytes(kc), 100000);
    for (uint64_t i = 5000 - n; i < 5000; i++)
        LOOP_ASSERT(keycache_has(kc, (uint32_t)(i % 3), i + 1, 10), "entry %llu lost",
                    (unsigned long long)i);
    keycache_destroy(&kc);
}
END_TEST

static Pskv__TableOptions sparse_opts(char **filters, size_t n)
{
    Pskv__TableOptions o;
    pskv__table_options__init(&o);
    o.name = "lr";
    o.has_kind = o.has_width = 1;
    o.kind = PSKV__TABLE_KIND__SPARSE;
    o.width = 1;
    o.updater = "sum";
    o.filters = filters;
    o.n_filters = n;
    return o;
}

START_TEST(table_open_filters)
{
    table_set *ts = tables_new();
    char why[300];
    char *good[] = {"keycache:1", "lz4"}, *other[] = {"zstd"}, *unknown[] = {"gzip"};
    Pskv__TableOptions o = sparse_opts(unknown, 1);
    ck_assert_int_eq(tables_open(ts, wire_table_id("lr"), &o, 0, UINT64_MAX, why, sizeof why),
                     -PSKV_EINVAL);
    ck_assert_msg(strstr(why, "gzip") != NULL, "%s", why);
    ck_assert_uint_eq(tables_count(ts), 0);
    o = sparse_opts(good, 2);
    ck_assert_msg(tables_open(ts, wire_table_id("lr"), &o, 0, UINT64_MAX, why, sizeof why) == 0,
                  "%s", why);
    ck_assert_int_eq(tables_open(ts, wire_table_id("lr"), &o, 0, UINT64_MAX, why, sizeof why), 0);
    o = sparse_opts(other, 1);
    ck_assert_int_eq(tables_open(ts, wire_table_id("lr"), &o, 0, UINT64_MAX, why, sizeof why),
                     -PSKV_EMISMATCH);
    ck_assert_msg(strstr(why, "'filters'") && strstr(why, "keycache:1,lz4"), "%s", why);
    tables_destroy(&ts);
}
END_TEST

/* The server's side of keycache: a list is kept, a signature resolves to it, an
 * unknown one is a miss naming table and filter, a wrong one is refused. */
START_TEST(server_resolves_keys)
{
    table_set *ts = tables_new();
    char why[300];
    char *good[] = {"keycache:1"};
    Pskv__TableOptions o = sparse_opts(good, 1);
    ck_assert_int_eq(tables_open(ts, wire_table_id("lr"), &o, 0, UINT64_MAX, why, sizeof why), 0);
    uint64_t keys[64];
    for (int i = 0; i < 64; i++)
        keys[i] = (uint64_t)i * 977;
    Pskv__Meta m;
    wire_meta_init(&m, PSKV__MSG_TYPE__PULL);
    m.has_table_id = m.has_num_keys = m.has_key_sig = 1;
    m.table_id = wire_table_id("lr");
    m.num_keys = 64;
    m.key_sig = keycache_sig(keys, 64);
    wire_msg w;
    memset(&w, 0, sizeof w);
    w.meta = &m;
    w.nkeys = 64;
    m.has_keys_cached = m.keys_cached = 1; /* before the list: a miss */
    ck_assert_int_eq(sfilter_keys(ts, &w, why, sizeof why), -PSKV_EKEYMISS);
    ck_assert_msg(strstr(why, "'lr'") && strstr(why, "keycache"), "%s", why);
    m.keys_cached = 0;
    w.keys = keys;
    ck_assert_int_eq(sfilter_keys(ts, &w, why, sizeof why), 0); /* kept */
    w.keys = NULL;
    m.keys_cached = 1;
    ck_assert_msg(sfilter_keys(ts, &w, why, sizeof why) == 0, "%s", why);
    ck_assert_ptr_nonnull(w.keys);
    ck_assert_mem_eq(w.keys, keys, sizeof keys);
    free(w.own_keys);
    w.own_keys = NULL;
    m.keys_cached = 0; /* a list that does not match its signature */
    keys[3]++;
    w.keys = keys;
    ck_assert_int_eq(sfilter_keys(ts, &w, why, sizeof why), -PSKV_EPROTO);
    tables_destroy(&ts);
}
END_TEST

/* int8: every value within half a step of its block's scale; sign: every value the
 * block's mean magnitude with its sign; both through wire_parse bit for bit. */
static void quant_bounds(uint32_t quant)
{
    enum { N = 1000 }; /* three full blocks and a short one */
    float x[N], q[N];
    for (int i = 0; i < N; i++)
        x[i] = sinf((float)i * 0.37f) * (float)(1 + i / 256);
    uint64_t bytes = fquant_bytes(quant, N);
    ck_assert_uint_eq(bytes, quant == FQUANT_INT8 ? 4 * 4 + N : 4 * 4 + 3 * 32 + (232 + 7) / 8);
    uint8_t *enc = malloc(bytes);
    fquant_encode(quant, x, N, enc, q);
    for (int b = 0; b < N; b += FQUANT_BLOCK) {
        int len = N - b < FQUANT_BLOCK ? N - b : FQUANT_BLOCK;
        float mx = 0, mean = 0;
        for (int i = 0; i < len; i++) {
            mx = fmaxf(mx, fabsf(x[b + i]));
            mean += fabsf(x[b + i]) / (float)len;
        }
        for (int i = 0; i < len; i++) {
            if (quant == FQUANT_INT8)
                LOOP_ASSERT(fabsf(x[b + i] - q[b + i]) <= mx / 127 / 2 * 1.0001f, "value %d", b + i);
            else
                LOOP_ASSERT(fabsf(fabsf(q[b + i]) - mean) <= 1e-5f * mean &&
                                (q[b + i] < 0) == (x[b + i] < 0), "value %d", b + i);
        }
    }
    /* through the decoder as a PUSH's values */
    Pskv__Meta m;
    wire_meta_init(&m, PSKV__MSG_TYPE__PUSH);
    m.has_num_keys = m.has_width = m.has_first_key = m.has_quant = m.has_table_id = 1;
    m.num_keys = N / 4;
    m.width = 4;
    m.first_key = 0;
    m.quant = quant;
    m.table_id = 9;
    uint8_t meta[128];
    const void *data[2] = {meta, enc};
    size_t sizes[2] = {pskv__meta__pack(&m, meta), bytes};
    wire_msg w;
    char why[256];
    memset(&w, 0, sizeof w);
    ck_assert_msg(wire_parse(&w, data, sizes, 2, why, sizeof why) == 0, "%s", why);
    for (int i = 0; i < N; i++) /* equal values (a -0 code decodes as +0) */
        LOOP_ASSERT(w.vals[i] == q[i], "value %d: %g, encoded %g", i, (double)w.vals[i],
                    (double)q[i]);
    wire_msg_close(&w);
    /* a block with a non-finite scale is refused, naming table and filter */
    float nan = NAN;
    memcpy(enc + (quant == FQUANT_INT8 ? 4 + 256 : 4 + 32), &nan, 4);
    ck_assert_int_eq(wire_parse(&w, data, sizes, 2, why, sizeof why), -PSKV_EPROTO);
    ck_assert_msg(strstr(why, "table id 9") && strstr(why, fquant_name(quant)) &&
                      strstr(why, "block 1"), "%s", why);
    sizes[1]--; /* and a frame of the wrong size */
    ck_assert_int_eq(wire_parse(&w, data, sizes, 2, why, sizeof why), -PSKV_EPROTO);
    free(enc);
}

START_TEST(int8_bounded) { quant_bounds(FQUANT_INT8); }
END_TEST
START_TEST(sign_bounded) { quant_bounds(FQUANT_SIGN); }
END_TEST

/* Lossy filters only where they make sense: not on sum tables, not on sparse ones. */
START_TEST(lossy_refused)
{
    const filter_table dense_adam = {.dense = 1, .updater = "adam"},
                       dense_sum = {.dense = 1, .updater = "sum"},
                       sparse_sgd = {.updater = "sgd"}, sparse_sum = {.updater = "sum"};
    filter_set fs;
    char why[256];
    ck_assert_int_eq(filter_parse_list(&fs, "int8,lz4", why, sizeof why), 0);
    ck_assert_int_eq(filter_check_table(&fs, &dense_adam, why, sizeof why), 0);
    ck_assert_int_eq(filter_check_table(&fs, &dense_sum, why, sizeof why), -PSKV_EINVAL);
    ck_assert_msg(strstr(why, "'int8'") && strstr(why, "'sum'"), "%s", why);
    ck_assert_int_eq(filter_check_table(&fs, &sparse_sgd, why, sizeof why), -PSKV_EINVAL);
    ck_assert_int_eq(filter_parse_list(&fs, "int8,sign", why, sizeof why), -PSKV_EINVAL);
    ck_assert_int_eq(filter_parse_list(&fs, "int8,significant:0.1", why, sizeof why),
                     -PSKV_EINVAL);
    ck_assert_int_eq(filter_parse_list(&fs, "significant", why, sizeof why), -PSKV_EINVAL);
    ck_assert_int_eq(filter_parse_list(&fs, "significant:-1", why, sizeof why), -PSKV_EINVAL);
    ck_assert_int_eq(filter_parse_list(&fs, "significant:0.25,lz4", why, sizeof why), 0);
    ck_assert_int_eq(fs.significant, 1);
    ck_assert(fs.sig_thresh == 0.25f);
    ck_assert_int_eq(filter_check_table(&fs, &dense_sum, why, sizeof why), -PSKV_EINVAL);
    ck_assert_msg(strstr(why, "'significant'") != NULL, "%s", why);
    ck_assert_int_eq(filter_parse_list(&fs, "keycache", why, sizeof why), 0);
    ck_assert_int_eq(filter_check_table(&fs, &sparse_sum, why, sizeof why), 0);
    table_set *ts = tables_new();
    char *f[] = {"sign"};
    Pskv__TableOptions o = sparse_opts(f, 1);
    o.kind = PSKV__TABLE_KIND__DENSE;
    o.has_size = 1;
    o.size = 10;
    ck_assert_int_eq(tables_open(ts, wire_table_id("lr"), &o, 0, UINT64_MAX, why, sizeof why),
                     -PSKV_EINVAL);
    ck_assert_msg(strstr(why, "lossy") != NULL, "%s", why);
    tables_destroy(&ts);
}
END_TEST

Suite *filter_suite(void)
{
    Suite *s = suite_create("filter");
    TCase *tc = tcase_create("filters");
    tcase_add_test(tc, parse_lists);
    tcase_add_test(tc, lz4_round_trip);
    tcase_add_test(tc, zstd_round_trip);
    tcase_add_test(tc, incompressible_goes_raw);
    tcase_add_test(tc, small_frames_raw);
    tcase_add_test(tc, keycache_hit_miss_evict);
    tcase_add_test(tc, keycache_many);
    tcase_add_test(tc, table_open_filters);
    tcase_add_test(tc, server_resolves_keys);
    tcase_add_test(tc, int8_bounded);
    tcase_add_test(tc, sign_bounded);
    tcase_add_test(tc, lossy_refused);
    suite_add_tcase(s, tc);
    return s;
}
