/* Tests of the applied-push record (server/repl/dedupe.c): lookups per worker, id and
 * partition, FIFO eviction past DEDUPE_KEEP, clear, the export format and its
 * round trip, refusal of malformed imports, and long runs of ids that share a
 * home slot in the hash index (probing and backward-shift deletion). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "repl/dedupe.h"
#include "pskv_errors.h"
#include "suites.h"

/* Test hook defined in dedupe.c (not part of dedupe.h): a pair's home slot. */
uint32_t dedupe_home_slot(uint32_t worker, uint64_t id);

#define ENTRY 12u
/* These tests check the hard cap's first-in first-out forgetting with the cap
 * lowered to DEDUPE_KEEP (floors are tested on their own below). */
#define DEDUPE_KEEP 2048u

static dedupe *new_capped(uint32_t nparts)
{
    dedupe *d = dedupe_new(nparts);
    if (d)
        dedupe_set_max(d, DEDUPE_KEEP);
    return d;
}

static size_t export_all(const dedupe *d, uint32_t part, unsigned char **out)
{
    size_t need = dedupe_export(d, part, NULL, 0);
    *out = malloc(need);
    ck_assert_ptr_nonnull(*out);
    ck_assert_uint_eq(dedupe_export(d, part, *out, need), need);
    return need;
}

START_TEST(seen_after_record)
{
    dedupe *d = new_capped(4);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(dedupe_seen(d, 1, 3, 42), 0);
    ck_assert_int_eq(dedupe_record(d, 1, 3, 42), 0);
    ck_assert_int_eq(dedupe_seen(d, 1, 3, 42), 1);
    /* other worker, id, partition */
    ck_assert_int_eq(dedupe_seen(d, 1, 4, 42), 0);
    ck_assert_int_eq(dedupe_seen(d, 1, 3, 43), 0);
    ck_assert_int_eq(dedupe_seen(d, 0, 3, 42), 0);
    ck_assert_int_eq(dedupe_seen(d, 2, 3, 42), 0);
    /* recording twice keeps one entry */
    ck_assert_int_eq(dedupe_record(d, 1, 3, 42), 0);
    ck_assert_uint_eq(dedupe_export(d, 1, NULL, 0), 4 + ENTRY);
    /* extreme values */
    ck_assert_int_eq(dedupe_record(d, 3, UINT32_MAX, UINT64_MAX), 0);
    ck_assert_int_eq(dedupe_record(d, 3, 0, 0), 0);
    ck_assert_int_eq(dedupe_seen(d, 3, UINT32_MAX, UINT64_MAX), 1);
    ck_assert_int_eq(dedupe_seen(d, 3, 0, 0), 1);
    ck_assert_int_eq(dedupe_seen(d, 3, 0, UINT64_MAX), 0);
    /* out of range */
    ck_assert_int_eq(dedupe_record(d, 4, 3, 42), -PSKV_EINVAL);
    ck_assert_int_eq(dedupe_seen(d, 4, 3, 42), 0);
    ck_assert_int_eq(dedupe_seen(d, UINT32_MAX, 3, 42), 0);
    dedupe_clear(d, 4); /* ignored */
    dedupe_destroy(&d);
    ck_assert_ptr_null(d);
    dedupe_destroy(&d);
    dedupe_destroy(NULL);

    dedupe *none = new_capped(0);
    ck_assert_ptr_nonnull(none);
    ck_assert_int_eq(dedupe_record(none, 0, 1, 1), -PSKV_EINVAL);
    ck_assert_int_eq(dedupe_seen(none, 0, 1, 1), 0);
    dedupe_destroy(&none);
}
END_TEST

START_TEST(eviction_is_fifo)
{
    dedupe *d = new_capped(2);
    ck_assert_ptr_nonnull(d);
    for (uint64_t id = 1; id <= DEDUPE_KEEP; id++)
        LOOP_ASSERT(dedupe_record(d, 0, 9, id) == 0, "record %llu", (unsigned long long)id);
    for (uint64_t id = 1; id <= DEDUPE_KEEP; id++)
        LOOP_ASSERT(dedupe_seen(d, 0, 9, id), "id %llu kept", (unsigned long long)id);
    ck_assert_int_eq(dedupe_record(d, 0, 9, DEDUPE_KEEP + 1), 0);
    ck_assert_int_eq(dedupe_seen(d, 0, 9, 1), 0);
    for (uint64_t id = 2; id <= DEDUPE_KEEP + 1; id++)
        LOOP_ASSERT(dedupe_seen(d, 0, 9, id), "id %llu kept", (unsigned long long)id);
    ck_assert_uint_eq(dedupe_export(d, 0, NULL, 0), 4 + (size_t)DEDUPE_KEEP * ENTRY);

    /* many laps of the ring: exactly the last DEDUPE_KEEP stay */
    const uint64_t last = 5 * DEDUPE_KEEP + 17;
    for (uint64_t id = DEDUPE_KEEP + 2; id <= last; id++)
        LOOP_ASSERT(dedupe_record(d, 0, 9, id) == 0, "record %llu", (unsigned long long)id);
    for (uint64_t id = 1; id <= last; id++)
        LOOP_ASSERT(dedupe_seen(d, 0, 9, id) == (id > last - DEDUPE_KEEP), "id %llu",
                    (unsigned long long)id);
    /* the other partition was never touched */
    ck_assert_int_eq(dedupe_seen(d, 1, 9, last), 0);
    ck_assert_uint_eq(dedupe_export(d, 1, NULL, 0), 4);
    dedupe_destroy(&d);
}
END_TEST

START_TEST(clear_forgets_one_partition)
{
    dedupe *d = new_capped(3);
    ck_assert_ptr_nonnull(d);
    for (uint64_t id = 0; id < 100; id++) {
        ck_assert_int_eq(dedupe_record(d, 0, 1, id), 0);
        ck_assert_int_eq(dedupe_record(d, 2, 1, id), 0);
    }
    dedupe_clear(d, 0);
    dedupe_clear(d, 1); /* never used */
    for (uint64_t id = 0; id < 100; id++) {
        LOOP_ASSERT(!dedupe_seen(d, 0, 1, id), "cleared %llu", (unsigned long long)id);
        LOOP_ASSERT(dedupe_seen(d, 2, 1, id), "kept %llu", (unsigned long long)id);
    }
    ck_assert_uint_eq(dedupe_export(d, 0, NULL, 0), 4);
    /* usable again after clear */
    ck_assert_int_eq(dedupe_record(d, 0, 1, 5), 0);
    ck_assert_int_eq(dedupe_seen(d, 0, 1, 5), 1);
    ck_assert_int_eq(dedupe_seen(d, 0, 1, 6), 0);
    dedupe_destroy(&d);
}
END_TEST

START_TEST(export_format)
{
    dedupe *d = new_capped(1);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(dedupe_record(d, 0, 0x01020304u, 0x1112131415161718ULL), 0);
    ck_assert_int_eq(dedupe_record(d, 0, 7, 8), 0);
    unsigned char buf[4 + 2 * ENTRY + 1];
    memset(buf, 0xee, sizeof buf);
    /* too small: size only, nothing written */
    ck_assert_uint_eq(dedupe_export(d, 0, buf, 4 + 2 * ENTRY - 1), 4 + 2 * ENTRY);
    ck_assert_uint_eq(buf[0], 0xee);
    ck_assert_uint_eq(dedupe_export(d, 0, buf, sizeof buf), 4 + 2 * ENTRY);
    static const unsigned char want[4 + 2 * ENTRY] = {
        2,    0,    0,    0,                                /* count */
        0x04, 0x03, 0x02, 0x01,                             /* worker, oldest first */
        0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11,     /* id */
        7,    0,    0,    0,    8, 0, 0, 0, 0, 0, 0, 0, /* second entry */
    };
    ck_assert_mem_eq(buf, want, sizeof want);
    ck_assert_uint_eq(buf[sizeof want], 0xee);
    /* out of range and empty parts export as count 0 */
    ck_assert_uint_eq(dedupe_export(d, 1, buf, sizeof buf), 4);
    ck_assert_uint_eq(buf[0], 0);
    dedupe_destroy(&d);
}
END_TEST

START_TEST(export_import_round_trip)
{
    dedupe *a = new_capped(2), *b = new_capped(3);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    /* wrap the ring so export must unroll it oldest first */
    const uint64_t n = DEDUPE_KEEP + 700;
    for (uint64_t i = 0; i < n; i++)
        LOOP_ASSERT(dedupe_record(a, 1, (uint32_t)(i % 5), 1000 + i) == 0, "record");
    unsigned char *ex;
    size_t len = export_all(a, 1, &ex);
    ck_assert_uint_eq(len, 4 + (size_t)DEDUPE_KEEP * ENTRY);
    /* importing replaces what was there */
    ck_assert_int_eq(dedupe_record(b, 2, 77, 77), 0);
    ck_assert_int_eq(dedupe_import(b, 2, ex, len), 0);
    ck_assert_int_eq(dedupe_seen(b, 2, 77, 77), 0);
    for (uint64_t i = 0; i < n; i++)
        LOOP_ASSERT(dedupe_seen(b, 2, (uint32_t)(i % 5), 1000 + i) == (i >= n - DEDUPE_KEEP),
                    "pair %llu", (unsigned long long)i);
    unsigned char *again;
    ck_assert_uint_eq(export_all(b, 2, &again), len);
    ck_assert_mem_eq(again, ex, len);
    /* eviction continues from the imported order: the oldest import goes first */
    ck_assert_int_eq(dedupe_record(b, 2, 1, 1), 0);
    ck_assert_int_eq(dedupe_seen(b, 2, (uint32_t)((n - DEDUPE_KEEP) % 5), 1000 + n - DEDUPE_KEEP),
                     0);
    ck_assert_int_eq(
        dedupe_seen(b, 2, (uint32_t)((n - DEDUPE_KEEP + 1) % 5), 1000 + n - DEDUPE_KEEP + 1), 1);
    /* an empty export clears */
    unsigned char empty[4] = {0, 0, 0, 0};
    ck_assert_int_eq(dedupe_import(b, 2, empty, sizeof empty), 0);
    ck_assert_int_eq(dedupe_seen(b, 2, 1, 1), 0);
    ck_assert_uint_eq(dedupe_export(b, 2, NULL, 0), 4);
    /* into an unused partition, and out of range */
    ck_assert_int_eq(dedupe_import(b, 0, ex, len), 0);
    ck_assert_int_eq(dedupe_seen(b, 0, (uint32_t)((n - 1) % 5), 1000 + n - 1), 1);
    ck_assert_int_eq(dedupe_import(b, 3, ex, len), -PSKV_EINVAL);
    free(ex);
    free(again);
    dedupe_destroy(&a);
    dedupe_destroy(&b);
}
END_TEST

START_TEST(import_refuses_malformed)
{
    dedupe *d = new_capped(1);
    ck_assert_ptr_nonnull(d);
    for (uint64_t id = 0; id < 10; id++)
        ck_assert_int_eq(dedupe_record(d, 0, 2, id), 0);
    unsigned char *before;
    size_t blen = export_all(d, 0, &before);

    /* a valid export of three other pairs, then damaged copies of it */
    dedupe *src = new_capped(1);
    ck_assert_ptr_nonnull(src);
    for (uint64_t id = 100; id < 103; id++)
        ck_assert_int_eq(dedupe_record(src, 0, 5, id), 0);
    unsigned char *good;
    size_t glen = export_all(src, 0, &good);
    ck_assert_uint_eq(glen, 4 + 3 * ENTRY);

    size_t big = 4 + (size_t)(DEDUPE_KEEP + 1) * ENTRY;
    unsigned char *buf = calloc(1, big + 8);
    ck_assert_ptr_nonnull(buf);

    ck_assert_int_eq(dedupe_import(d, 0, good, 0), -PSKV_EPROTO);
    ck_assert_int_eq(dedupe_import(d, 0, good, 3), -PSKV_EPROTO);
    ck_assert_int_eq(dedupe_import(d, 0, NULL, 4), -PSKV_EPROTO);
    for (size_t cut = 4; cut < glen; cut++) /* truncated */
        LOOP_ASSERT(dedupe_import(d, 0, good, cut) == -PSKV_EPROTO, "cut at %zu", cut);
    memcpy(buf, good, glen); /* trailing garbage */
    ck_assert_int_eq(dedupe_import(d, 0, buf, glen + 1), -PSKV_EPROTO);
    buf[0] = 2; /* count smaller than the entries */
    ck_assert_int_eq(dedupe_import(d, 0, buf, glen), -PSKV_EPROTO);
    buf[0] = 4; /* count larger than the entries */
    ck_assert_int_eq(dedupe_import(d, 0, buf, glen), -PSKV_EPROTO);
    /* count past DEDUPE_KEEP, even with a matching size */
    uint32_t over = DEDUPE_KEEP + 1;
    for (int i = 0; i < 4; i++)
        buf[i] = (unsigned char)(over >> (8 * i));
    ck_assert_int_eq(dedupe_import(d, 0, buf, big), -PSKV_EPROTO);
    /* a huge count must not overflow the size check */
    memset(buf, 0xff, 4);
    ck_assert_int_eq(dedupe_import(d, 0, buf, 4), -PSKV_EPROTO);
    ck_assert_int_eq(dedupe_import(d, 0, buf, glen), -PSKV_EPROTO);
    /* random garbage of random lengths */
    srand(7);
    for (int rep = 0; rep < 2000; rep++) {
        size_t l = (size_t)rand() % 64;
        for (size_t i = 0; i < l; i++)
            buf[i] = (unsigned char)rand();
        int rc = dedupe_import(d, 0, buf, l);
        LOOP_ASSERT(rc == -PSKV_EPROTO, "garbage of %zu bytes accepted", l);
    }

    unsigned char *after;
    ck_assert_uint_eq(export_all(d, 0, &after), blen);
    ck_assert_mem_eq(after, before, blen);
    for (uint64_t id = 0; id < 10; id++)
        ck_assert_int_eq(dedupe_seen(d, 0, 2, id), 1);
    ck_assert_int_eq(dedupe_seen(d, 0, 5, 100), 0);
    free(before);
    free(after);
    free(good);
    free(buf);
    dedupe_destroy(&src);
    dedupe_destroy(&d);
}
END_TEST

/* ids of worker w whose home slot is within `spread` slots from `first`
 * (wrapping past the end of the index). */
static void colliding_ids(uint32_t w, uint32_t first, uint32_t spread, uint64_t *out, size_t n)
{
    size_t got = 0;
    for (uint64_t id = 0; got < n; id++) {
        uint32_t s = dedupe_home_slot(w, id);
        if (((s - first) & 0xfffu) < spread)
            out[got++] = id;
    }
}

START_TEST(colliding_ids_probe_and_evict)
{
    enum { C = DEDUPE_KEEP + 900 };
    uint64_t *ids = malloc(C * sizeof *ids);
    ck_assert_ptr_nonnull(ids);
    /* home slots in {4094, 4095, 0, 1}: one long run that wraps the index */
    colliding_ids(3, 4094, 4, ids, C);
    dedupe *d = new_capped(1);
    ck_assert_ptr_nonnull(d);
    for (size_t i = 0; i < C; i++) {
        LOOP_ASSERT(dedupe_record(d, 0, 3, ids[i]) == 0, "record %zu", i);
        LOOP_ASSERT(dedupe_seen(d, 0, 3, ids[i]), "newest %zu", i);
        if (i >= DEDUPE_KEEP) {
            LOOP_ASSERT(!dedupe_seen(d, 0, 3, ids[i - DEDUPE_KEEP]), "evicted %zu", i);
            LOOP_ASSERT(dedupe_seen(d, 0, 3, ids[i - DEDUPE_KEEP + 1]), "oldest %zu", i);
        }
    }
    for (size_t i = 0; i < C; i++) {
        LOOP_ASSERT(dedupe_seen(d, 0, 3, ids[i]) == (i >= C - DEDUPE_KEEP), "id %zu", i);
        LOOP_ASSERT(!dedupe_seen(d, 0, 4, ids[i]), "other worker %zu", i);
    }
    dedupe_destroy(&d);
    free(ids);
}
END_TEST

/* Random records from a pool where half the pairs crowd a few home slots,
 * checked step by step against a plain FIFO model. */
START_TEST(random_against_model)
{
    enum { HOT = 3000, POOL = 2 * HOT, STEPS = 60000 };
    uint32_t *worker = malloc(POOL * sizeof *worker);
    uint64_t *id = malloc(POOL * sizeof *id);
    uint32_t *held = calloc(POOL, sizeof *held); /* copies in the model ring */
    uint32_t *ring = malloc(DEDUPE_KEEP * sizeof *ring);
    ck_assert(worker && id && held && ring);
    colliding_ids(1, 100, 8, id, HOT);
    for (size_t i = 0; i < HOT; i++)
        worker[i] = 1;
    for (size_t i = HOT; i < POOL; i++) {
        worker[i] = 2 + (uint32_t)(i % 7);
        id[i] = (uint64_t)i * 0x10000 + 3;
    }
    dedupe *d = new_capped(1);
    ck_assert_ptr_nonnull(d);
    uint32_t head = 0, count = 0;
    srand(12345);
    for (int step = 0; step < STEPS; step++) {
        uint32_t k = (uint32_t)(((unsigned)rand() << 8 ^ (unsigned)rand()) % POOL);
        int want = held[k] > 0;
        LOOP_ASSERT(dedupe_seen(d, 0, worker[k], id[k]) == want, "step %d pair %u", step, k);
        LOOP_ASSERT(dedupe_record(d, 0, worker[k], id[k]) == 0, "record");
        if (!want) {
            if (count == DEDUPE_KEEP) {
                held[ring[head]]--;
                ring[head] = k;
                head = (head + 1) % DEDUPE_KEEP;
            } else {
                ring[(head + count++) % DEDUPE_KEEP] = k;
            }
            held[k]++;
        }
    }
    for (uint32_t k = 0; k < POOL; k++)
        LOOP_ASSERT(dedupe_seen(d, 0, worker[k], id[k]) == (held[k] > 0), "final pair %u", k);
    dedupe_destroy(&d);
    free(worker);
    free(id);
    free(held);
    free(ring);
}
END_TEST

/* Pairs below their worker's floor are forgotten, others stay however many;
 * a worker that left (floor UINT64_MAX) is forgotten entirely. An id below the
 * floor still counts as seen, forgotten or never recorded: the worker has had its
 * answer, and a copy arriving then is an old forward a server sends again. */
START_TEST(floors_bound_the_record)
{
    dedupe *d = dedupe_new(2);
    ck_assert_ptr_nonnull(d);
    /* without floors nothing is forgotten below the cap */
    for (uint64_t id = 0; id < 10000; id++)
        ck_assert_int_eq(dedupe_record(d, 0, 1, id), 0);
    ck_assert_uint_eq(dedupe_count(d, 0), 10000);
    ck_assert_int_eq(dedupe_seen(d, 0, 1, 0), 1);
    /* worker 1 has nothing below 9990 in flight: the rest goes on the next record */
    dedupe_set_floor(d, 1, 9990);
    dedupe_set_floor(d, 1, 5); /* floors only rise */
    ck_assert_int_eq(dedupe_record(d, 0, 1, 10000), 0);
    ck_assert_uint_eq(dedupe_count(d, 0), 11);
    ck_assert_int_eq(dedupe_seen(d, 0, 1, 9989), 1); /* forgotten, still seen */
    ck_assert_int_eq(dedupe_seen(d, 1, 1, 42), 1);   /* never recorded, below the floor */
    ck_assert_int_eq(dedupe_seen(d, 1, 2, 42), 0);   /* another worker: no floor */
    ck_assert_uint_eq(dedupe_floor(d, 1), 9990);
    ck_assert_uint_eq(dedupe_floor(d, 2), 0);
    for (uint64_t id = 9990; id <= 10000; id++)
        LOOP_ASSERT(dedupe_seen(d, 0, 1, id), "id %llu", (unsigned long long)id);
    /* a slow worker's old pair at the front holds the others back until it rises */
    ck_assert_int_eq(dedupe_record(d, 1, 7, 3), 0);
    for (uint64_t id = 100; id < 200; id++)
        ck_assert_int_eq(dedupe_record(d, 1, 8, id), 0);
    dedupe_set_floor(d, 8, 150);
    ck_assert_int_eq(dedupe_record(d, 1, 8, 200), 0);
    ck_assert_uint_eq(dedupe_count(d, 1), 102);
    dedupe_set_floor(d, 7, UINT64_MAX); /* worker 7 left */
    ck_assert_int_eq(dedupe_record(d, 1, 8, 201), 0);
    ck_assert_uint_eq(dedupe_count(d, 1), 52);
    ck_assert_int_eq(dedupe_seen(d, 1, 7, 3), 1); /* forgotten, and below the floor */
    ck_assert_int_eq(dedupe_seen(d, 1, 8, 150), 1);
    ck_assert_uint_eq(dedupe_forced(d), 0);
    /* the hard cap forgets anyway, and counts it */
    dedupe_set_max(d, 10);
    ck_assert_int_eq(dedupe_record(d, 0, 1, 10001), 0);
    ck_assert_uint_eq(dedupe_count(d, 0), 10);
    ck_assert_uint_eq(dedupe_forced(d), 2);
    dedupe_destroy(&d);
}
END_TEST

/* A worker that died with a push in flight never raises its floor: its pair stays
 * at the front, but the pairs behind it are still forgotten once below their
 * floors (when the ring is full), so the record does not grow with every push. */
START_TEST(dead_worker_does_not_hold_the_record)
{
    dedupe *d = dedupe_new(1);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(dedupe_record(d, 0, 7, 3), 0); /* worker 7 dies with id 3 in flight */
    for (uint64_t id = 100; id < 100000; id++) {
        dedupe_set_floor(d, 8, id - 10); /* worker 8: ten in flight at a time */
        ck_assert_int_eq(dedupe_record(d, 0, 8, id), 0);
    }
    ck_assert_uint_le(dedupe_count(d, 0), 512);
    ck_assert_int_eq(dedupe_seen(d, 0, 7, 3), 1);       /* still remembered */
    ck_assert_int_eq(dedupe_seen(d, 0, 7, 4), 0);
    for (uint64_t id = 99990; id < 100000; id++)
        LOOP_ASSERT(dedupe_seen(d, 0, 8, id), "id %llu", (unsigned long long)id);
    ck_assert_uint_eq(dedupe_forced(d), 0);
    dedupe_destroy(&d);
}
END_TEST

Suite *dedupe_suite(void)
{
    Suite *s = suite_create("dedupe");
    TCase *tc = tcase_create("record");
    tcase_add_test(tc, seen_after_record);
    tcase_add_test(tc, eviction_is_fifo);
    tcase_add_test(tc, clear_forgets_one_partition);
    tcase_add_test(tc, colliding_ids_probe_and_evict);
    tcase_add_test(tc, random_against_model);
    tcase_add_test(tc, floors_bound_the_record);
    tcase_add_test(tc, dead_worker_does_not_hold_the_record);
    suite_add_tcase(s, tc);
    TCase *tx = tcase_create("export");
    tcase_add_test(tx, export_format);
    tcase_add_test(tx, export_import_round_trip);
    tcase_add_test(tx, import_refuses_malformed);
    suite_add_tcase(s, tx);
    return s;
}
