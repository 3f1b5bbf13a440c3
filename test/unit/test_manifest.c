/* Tests of the checkpoint manifest (scheduler/manifest.c): a line with clock= and
 * best= reads back as written, retention keeps the entry marked best beside the N
 * newest (in memory and in the rewritten file), an older line without the new keys
 * still reads (clock -1, not best), and a malformed best= is refused. A group's
 * checkpoint (of=ns:) and one of every table (namespaces=) read back with their
 * workers' groups, names with bytes the line's syntax uses intact, and say which
 * namespaces they hold. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "manifest.h"
#include "pskv_errors.h"
#include "suites.h"

/* Appends checkpoint seq (one partition, one replica, one worker) at clock. */
static void append(const char *dir, manifest *m, uint64_t seq, int64_t clock)
{
    uint32_t chains[1] = {7};
    manifest_progress w = {.rank = 0, .epoch = (int64_t)seq, .step = 10 * (int64_t)seq};
    manifest_entry e = {.seq = seq, .job = 42, .time = 1000, .partitions = 1, .replicas = 1,
                        .vnodes = 16, .chains = chains, .workers = &w, .nworkers = 1,
                        .clock = clock};
    char why[256];
    ck_assert_int_eq(manifest_append(dir, m, &e, why, sizeof why), 0);
}

/* Replaces dir/manifest (path: its name) with the one line `line`. */
static void write_line(const char *path, const char *line)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%s\n", line);
    fclose(f);
}

START_TEST(best_survives_retention)
{
    char dir[] = "/tmp/pskv-manifest-XXXXXX", why[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    manifest m = {0};
    for (uint64_t s = 1; s <= 4; s++)
        append(dir, &m, s, 100 * (int64_t)s);
    m.e[1].best = 1; /* checkpoint 2 */
    strcpy(m.e[1].best_metric, "val_accuracy");
    m.e[1].best_value = 0.8765432109876543;
    m.e[1].best_clock = 212;
    ck_assert_int_eq(manifest_write(dir, &m, why, sizeof why), 0);
    ck_assert_int_eq(manifest_retain(dir, &m, 1, why, sizeof why), 2); /* 1 and 3 go */
    ck_assert_uint_eq(m.n, 2);
    ck_assert(m.e[0].seq == 2 && m.e[0].best && m.e[1].seq == 4 && !m.e[1].best);
    manifest r;
    ck_assert_int_eq(manifest_read(dir, &r, why, sizeof why), 0);
    ck_assert_uint_eq(r.n, 2);
    const manifest_entry *b = manifest_best(&r);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->seq, 2);
    ck_assert_int_eq(b->clock, 200);
    ck_assert_str_eq(b->best_metric, "val_accuracy");
    ck_assert(b->best_value == 0.8765432109876543 && b->best_clock == 212);
    ck_assert_int_eq(r.e[1].clock, 400);
    /* nothing more to drop: the best one does not count against keep */
    ck_assert_int_eq(manifest_retain(dir, &m, 1, why, sizeof why), 0);
    manifest_free(&r);
    manifest_free(&m);
    /* a line of before (no clock, no best) reads; a bad best= does not */
    char path[128];
    snprintf(path, sizeof path, "%s/manifest", dir);
    write_line(path, "ckpt seq=1 job=42 time=5 partitions=1 replicas=1 vnodes=16 chains=7 "
                     "workers=0:1:10:0");
    ck_assert_int_eq(manifest_read(dir, &r, why, sizeof why), 0);
    ck_assert(r.n == 1 && r.e[0].clock == -1 && !r.e[0].best && !manifest_best(&r));
    manifest_free(&r);
    write_line(path, "ckpt seq=1 job=42 time=5 partitions=1 replicas=1 vnodes=16 chains=7 "
                     "best=val_loss");
    ck_assert_int_eq(manifest_read(dir, &r, why, sizeof why), -PSKV_EPROTO);
    unlink(path);
    rmdir(dir);
}
END_TEST

START_TEST(group_scopes)
{
    char dir[] = "/tmp/pskv-manifest-XXXXXX", why[256], path[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    manifest m = {0};
    uint32_t chains[1] = {7};
    manifest_progress w[2] = {{.rank = 0, .step = 4, .pos = 400, .group = "a b,c:d%"},
                              {.rank = 1, .step = 6, .group = ""}};
    manifest_entry e = {.seq = 1, .job = 42, .partitions = 1, .replicas = 1, .vnodes = 16,
                        .chains = chains, .workers = w, .nworkers = 1, .clock = 3,
                        .ns_only = 1, .ns = "a b,c:d%"};
    ck_assert_int_eq(manifest_append(dir, &m, &e, why, sizeof why), 0);
    char nss[3][MANIFEST_NAME_MAX + 1] = {"", "A", "x=y"};
    manifest_entry all = {.seq = 2, .job = 42, .partitions = 1, .replicas = 1, .vnodes = 16,
                          .chains = chains, .workers = w, .nworkers = 2, .clock = 5,
                          .nns = 3, .nss = nss};
    ck_assert_int_eq(manifest_append(dir, &m, &all, why, sizeof why), 0);
    manifest_free(&m);
    manifest r;
    ck_assert_int_eq(manifest_read(dir, &r, why, sizeof why), 0);
    ck_assert_uint_eq(r.n, 2);
    ck_assert(r.e[0].ns_only && !strcmp(r.e[0].ns, "a b,c:d%") && r.e[0].nworkers == 1);
    ck_assert_str_eq(r.e[0].workers[0].group, "a b,c:d%");
    ck_assert(r.e[0].workers[0].step == 4 && r.e[0].workers[0].pos == 400);
    ck_assert(manifest_holds_ns(&r.e[0], "a b,c:d%") && !manifest_holds_ns(&r.e[0], "A"));
    ck_assert(!r.e[1].ns_only && r.e[1].nns == 3 && r.e[1].nworkers == 2);
    ck_assert_str_eq(r.e[1].workers[1].group, "");
    ck_assert(manifest_holds_ns(&r.e[1], "") && manifest_holds_ns(&r.e[1], "A") &&
              manifest_holds_ns(&r.e[1], "x=y") && !manifest_holds_ns(&r.e[1], "B"));
    manifest_free(&r);
    /* a line of before: its namespaces are not known, read as every one */
    snprintf(path, sizeof path, "%s/manifest", dir);
    write_line(path, "ckpt seq=1 job=42 time=5 partitions=1 replicas=1 vnodes=16 chains=7 "
                     "workers=0:1:10:0");
    ck_assert_int_eq(manifest_read(dir, &r, why, sizeof why), 0);
    ck_assert(manifest_holds_ns(&r.e[0], "B") && !*r.e[0].workers[0].group);
    manifest_free(&r);
    /* of= must say ns: */
    write_line(path, "ckpt seq=1 job=42 time=5 partitions=1 replicas=1 vnodes=16 chains=7 of=A");
    ck_assert_int_eq(manifest_read(dir, &r, why, sizeof why), -PSKV_EPROTO);
    unlink(path);
    rmdir(dir);
}
END_TEST

Suite *manifest_suite(void)
{
    Suite *s = suite_create("manifest");
    TCase *tc = tcase_create("best");
    tcase_add_test(tc, best_survives_retention);
    tcase_add_test(tc, group_scopes);
    suite_add_tcase(s, tc);
    return s;
}
