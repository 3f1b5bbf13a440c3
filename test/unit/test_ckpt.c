/* Tests of checkpoint files (server/ckpt.c): round trips of small, empty, large
 * and two-part records across the write buffer's edges, the temp-file and
 * rename protocol, and refusal without a single callback of every truncation
 * and every single-bit flip of a file, of other files, and of missing paths.
 * Files go to a mkdtemp directory under /tmp, removed after the test case. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "pskv_errors.h"
#include "suites.h"

static char dir[64]; /* made by setup in the parent process, inherited by each test */

static void setup(void)
{
    strcpy(dir, "/tmp/pskv-ckpt-XXXXXX");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        abort();
    }
}

static void teardown(void)
{
    DIR *d = opendir(dir);
    if (d != NULL) {
        struct dirent *e;
        char p[512];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

static char *path_of(const char *name)
{
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static unsigned char byte_at(uint32_t tag, uint64_t i)
{
    return (unsigned char)((i * 131 + tag * 7 + (i >> 9)) & 0xff);
}

static unsigned char *pattern(uint32_t tag, uint64_t len)
{
    unsigned char *p = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(p);
    for (uint64_t i = 0; i < len; i++)
        p[i] = byte_at(tag, i);
    return p;
}

/* What the reader saw, checked against byte_at (tags are unique per file). */
typedef struct seen {
    int calls;
    int stop_at; /* return -77 on this call (1-based); 0 never */
    uint32_t tag[64];
    uint64_t len[64];
    int bad; /* a record's bytes or alignment were wrong */
} seen;

static int collect(void *ctx, uint32_t tag, const void *data, uint64_t len)
{
    seen *s = ctx;
    if (s->calls < 64) {
        s->tag[s->calls] = tag;
        s->len[s->calls] = len;
    }
    s->calls++;
    if ((uintptr_t)data % 8 != 0)
        s->bad = 1;
    const unsigned char *p = data;
    for (uint64_t i = 0; i < len; i++)
        if (p[i] != byte_at(tag, i)) {
            s->bad = 1;
            break;
        }
    return s->calls == s->stop_at ? -77 : 0;
}

static void put_pattern(ckpt_writer *w, uint32_t tag, uint64_t len)
{
    char why[256] = "";
    unsigned char *p = pattern(tag, len);
    ck_assert_msg(ckpt_put(w, tag, len ? p : NULL, len, why, sizeof why) == 0, "%s", why);
    free(p);
}

static size_t padded(uint64_t len)
{
    return (size_t)((len + 7) / 8 * 8);
}

/* A small file of a few records: the case for exhaustive truncation and bit flips. */
static void write_small(const char *name, size_t *size)
{
    char why[256] = "";
    ckpt_writer *w;
    ck_assert_msg(ckpt_begin(&w, dir, name, why, sizeof why) == 0, "%s", why);
    put_pattern(w, 1, 5);
    put_pattern(w, 2, 0);
    put_pattern(w, 3, 16);
    put_pattern(w, 4, 61);
    ck_assert_msg(ckpt_commit(&w, why, sizeof why) == 0, "%s", why);
    *size = 8 + 4 * 16 + padded(5) + padded(16) + padded(61) + 32;
}

static unsigned char *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    rewind(f);
    unsigned char *b = malloc(*size);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(fread(b, 1, *size, f), *size);
    fclose(f);
    return b;
}

static void spill(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

typedef struct commit_job {
    ckpt_writer *w;
    int rc;
    char why[256];
} commit_job;

static void *commit_main(void *arg)
{
    commit_job *j = arg;
    j->rc = ckpt_commit(&j->w, j->why, sizeof j->why);
    return NULL;
}

/* _i = 0: a streaming writer; 1: a held one, committed on another thread (as a
 * server writes checkpoints in the background): the same file either way. */
START_TEST(round_trip)
{
    char why[256] = "";
    ckpt_writer *w = NULL;
    int held = _i;
    ck_assert_msg((held ? ckpt_begin_held(&w, dir, "rt", 4096, why, sizeof why)
                        : ckpt_begin(&w, dir, "rt", why, sizeof why)) == 0,
                  "%s", why);
    ck_assert_ptr_nonnull(w);
    ck_assert(exists(path_of("rt.tmp")));
    put_pattern(w, 10, 5);
    put_pattern(w, 11, 0);
    put_pattern(w, 12, 3u << 20); /* bigger than the buffer: written directly */
    /* two parts that make one pattern: a header and a body held apart */
    unsigned char *ab = pattern(13, 1000);
    ck_assert_int_eq(ckpt_put2(w, 13, ab, 7, ab + 7, 993, why, sizeof why), 0);
    ck_assert_int_eq(ckpt_put2(w, 14, NULL, 0, NULL, 0, why, sizeof why), 0);
    free(ab);
    ab = pattern(15, 24);
    ck_assert_int_eq(ckpt_put2(w, 15, NULL, 0, ab, 24, why, sizeof why), 0);
    free(ab);
    put_pattern(w, 0, 8);
    put_pattern(w, 0xfffffffeu, 1);
    if (held) {
        commit_job j = {w, -1, ""};
        pthread_t th;
        ck_assert_int_eq(pthread_create(&th, NULL, commit_main, &j), 0);
        ck_assert_int_eq(pthread_join(th, NULL), 0);
        ck_assert_msg(j.rc == 0, "%s", j.why);
        w = j.w;
    } else {
        ck_assert_msg(ckpt_commit(&w, why, sizeof why) == 0, "%s", why);
    }
    ck_assert_ptr_null(w);
    ck_assert(!exists(path_of("rt.tmp")));

    struct stat st;
    ck_assert_int_eq(stat(path_of("rt"), &st), 0);
    size_t expect = 8 + 8 * 16 + padded(5) + padded(3u << 20) + padded(1000) + padded(24) +
                    8 + 8 + 32;
    ck_assert_uint_eq((size_t)st.st_size, expect);

    seen s = {0};
    ck_assert_msg(ckpt_read(path_of("rt"), collect, &s, why, sizeof why) == 0, "%s", why);
    ck_assert_int_eq(s.calls, 8);
    ck_assert_int_eq(s.bad, 0);
    const uint32_t tags[] = {10, 11, 12, 13, 14, 15, 0, 0xfffffffeu};
    const uint64_t lens[] = {5, 0, 3u << 20, 1000, 0, 24, 8, 1};
    for (int i = 0; i < 8; i++) {
        ck_assert_uint_eq(s.tag[i], tags[i]);
        ck_assert_uint_eq(s.len[i], lens[i]);
    }
    /* verify only */
    ck_assert_int_eq(ckpt_read(path_of("rt"), NULL, NULL, why, sizeof why), 0);
}
END_TEST

START_TEST(buffer_edges)
{
    /* record sizes around the 1 MiB buffer and many small records that fill it
     * at every offset */
    char why[256] = "";
    ckpt_writer *w;
    ck_assert_int_eq(ckpt_begin(&w, dir, "edges", why, sizeof why), 0);
    const uint64_t big[] = {(1u << 20) - 24, (1u << 20) - 1, 1u << 20, (1u << 20) + 1};
    for (int i = 0; i < 4; i++)
        put_pattern(w, (uint32_t)i, big[i]);
    uint32_t n = 40000;
    for (uint32_t i = 0; i < n; i++) {
        unsigned char rec[97];
        uint32_t len = i % 97;
        for (uint32_t j = 0; j < len; j++)
            rec[j] = byte_at(100 + i, j);
        LOOP_ASSERT(ckpt_put(w, 100 + i, rec, len, why, sizeof why) == 0, "%s", why);
    }
    ck_assert_msg(ckpt_commit(&w, why, sizeof why) == 0, "%s", why);
    seen s = {0};
    ck_assert_msg(ckpt_read(path_of("edges"), collect, &s, why, sizeof why) == 0, "%s", why);
    ck_assert_int_eq(s.calls, 4 + (int)n);
    ck_assert_int_eq(s.bad, 0);
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(s.len[i], big[i]);
}
END_TEST

START_TEST(empty_checkpoint)
{
    char why[256] = "";
    ckpt_writer *w;
    ck_assert_int_eq(ckpt_begin(&w, dir, "empty", why, sizeof why), 0);
    ck_assert_msg(ckpt_commit(&w, why, sizeof why) == 0, "%s", why);
    seen s = {0};
    ck_assert_msg(ckpt_read(path_of("empty"), collect, &s, why, sizeof why) == 0, "%s", why);
    ck_assert_int_eq(s.calls, 0);
}
END_TEST

START_TEST(commit_replaces_old)
{
    char why[256] = "";
    ckpt_writer *w;
    ck_assert_int_eq(ckpt_begin(&w, dir, "gen", why, sizeof why), 0);
    put_pattern(w, 1, 10);
    ck_assert_int_eq(ckpt_commit(&w, why, sizeof why), 0);
    /* while the next one is being written, the old one is whole */
    ck_assert_int_eq(ckpt_begin(&w, dir, "gen", why, sizeof why), 0);
    put_pattern(w, 2, 20);
    put_pattern(w, 3, 30);
    seen s = {0};
    ck_assert_int_eq(ckpt_read(path_of("gen"), collect, &s, why, sizeof why), 0);
    ck_assert_int_eq(s.calls, 1);
    ck_assert_uint_eq(s.tag[0], 1);
    ck_assert_int_eq(ckpt_commit(&w, why, sizeof why), 0);
    memset(&s, 0, sizeof s);
    ck_assert_int_eq(ckpt_read(path_of("gen"), collect, &s, why, sizeof why), 0);
    ck_assert_int_eq(s.calls, 2);
    ck_assert_uint_eq(s.tag[0], 2);
    ck_assert_uint_eq(s.tag[1], 3);
    ck_assert_int_eq(s.bad, 0);
    ck_assert(!exists(path_of("gen.tmp")));
}
END_TEST

START_TEST(abort_leaves_nothing)
{
    char why[256] = "";
    ckpt_writer *w;
    ck_assert_int_eq(ckpt_begin(&w, dir, "gone", why, sizeof why), 0);
    put_pattern(w, 1, 100);
    put_pattern(w, 2, 2u << 20);
    ckpt_abort(&w);
    ck_assert_ptr_null(w);
    ck_assert(!exists(path_of("gone")));
    ck_assert(!exists(path_of("gone.tmp")));
    ckpt_abort(&w); /* NULL-safe */
    ckpt_abort(NULL);
}
END_TEST

START_TEST(bad_arguments)
{
    char why[256] = "";
    ckpt_writer *w = (ckpt_writer *)&why; /* must be cleared */
    ck_assert_int_eq(ckpt_begin(&w, dir, "a/b", why, sizeof why), -PSKV_EINVAL);
    ck_assert_ptr_null(w);
    ck_assert_int_eq(ckpt_begin(&w, dir, "", why, sizeof why), -PSKV_EINVAL);
    ck_assert_int_eq(ckpt_begin(&w, dir, "tags", why, sizeof why), 0);
    ck_assert_int_eq(ckpt_put(w, CKPT_TAG_TRAILER, "x", 1, why, sizeof why), -PSKV_EINVAL);
    ck_assert_int_eq(ckpt_put(w, 1, NULL, 3, why, sizeof why), -PSKV_EINVAL);
    /* refused records leave the writer usable */
    put_pattern(w, 7, 9);
    ck_assert_int_eq(ckpt_commit(&w, why, sizeof why), 0);
    seen s = {0};
    ck_assert_int_eq(ckpt_read(path_of("tags"), collect, &s, why, sizeof why), 0);
    ck_assert_int_eq(s.calls, 1);
    /* why may be NULL */
    ck_assert_int_eq(ckpt_read(path_of("nope"), NULL, NULL, NULL, 0), -PSKV_EIO);
}
END_TEST

START_TEST(fn_stops_the_walk)
{
    size_t size;
    char why[256] = "";
    write_small("stop", &size);
    seen s = {.stop_at = 2};
    ck_assert_int_eq(ckpt_read(path_of("stop"), collect, &s, why, sizeof why), -77);
    ck_assert_int_eq(s.calls, 2);
}
END_TEST

static void expect_truncated(const char *path, size_t cut)
{
    char why[256] = "";
    seen s = {0};
    int rc = ckpt_read(path, collect, &s, why, sizeof why);
    LOOP_ASSERT(rc == -PSKV_EPROTO, "cut at %zu: rc %d (%s)", cut, rc, why);
    LOOP_ASSERT(s.calls == 0, "cut at %zu: fn called", cut);
    LOOP_ASSERT(strstr(why, "truncated") != NULL || strstr(why, "partial") != NULL,
                "cut at %zu: %s", cut, why);
    LOOP_ASSERT(strstr(why, path) != NULL, "cut at %zu: no path in %s", cut, why);
}

START_TEST(truncated_refused)
{
    size_t size, got;
    write_small("trunc", &size);
    unsigned char *b = slurp(path_of("trunc"), &got);
    ck_assert_uint_eq(got, size);
    char cutp[512];
    snprintf(cutp, sizeof cutp, "%s", path_of("trunc.cut"));
    for (size_t cut = 0; cut < size; cut++) { /* every length */
        spill(cutp, b, cut);
        expect_truncated(cutp, cut);
    }
    free(b);

    /* a large file cut inside its big record, on record edges and in the trailer */
    char why[256] = "";
    ckpt_writer *w;
    ck_assert_int_eq(ckpt_begin(&w, dir, "big", why, sizeof why), 0);
    put_pattern(w, 1, 3);
    put_pattern(w, 2, 3u << 20);
    put_pattern(w, 3, 40);
    ck_assert_int_eq(ckpt_commit(&w, why, sizeof why), 0);
    b = slurp(path_of("big"), &size);
    const size_t r2 = 8 + 16 + 8, r3 = r2 + 16 + (3u << 20), tr = r3 + 16 + 40;
    ck_assert_uint_eq(size, tr + 32);
    const size_t cuts[] = {r2, r2 + 16, r2 + 17, r2 + 4096, r3 - 1, r3, r3 + 8, tr - 1, tr,
                           tr + 16, size - 8, size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        spill(cutp, b, cuts[i]);
        expect_truncated(cutp, cuts[i]);
    }
    free(b);
}
END_TEST

static int flip_bit(const char *path, size_t byte, int bit)
{
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    unsigned char c;
    ck_assert_int_eq(pread(fd, &c, 1, (off_t)byte), 1);
    c ^= (unsigned char)(1u << bit);
    ck_assert_int_eq(pwrite(fd, &c, 1, (off_t)byte), 1);
    return close(fd);
}

START_TEST(every_bit_flip_refused)
{
    size_t size;
    write_small("flip", &size);
    const char *p = path_of("flip");
    char why[256] = "";
    for (size_t byte = 0; byte < size; byte++)
        for (int bit = 0; bit < 8; bit++) {
            flip_bit(p, byte, bit);
            seen s = {0};
            int rc = ckpt_read(p, collect, &s, why, sizeof why);
            LOOP_ASSERT(rc == -PSKV_EPROTO, "byte %zu bit %d: rc %d (%s)", byte, bit, rc, why);
            LOOP_ASSERT(s.calls == 0, "byte %zu bit %d: fn called", byte, bit);
            /* the CRC covers the magic and records, the trailer stores it; the
             * rest of the trailer is checked field by field */
            const char *want = byte < 8                                  ? "not a pskv checkpoint"
                               : byte < size - 32                        ? "checksum mismatch"
                               : byte < size - 16                        ? "corrupt trailer"
                               : byte < size - 8                         ? "record count mismatch"
                               : byte < size - 4                         ? "checksum mismatch"
                                                                         : "corrupt trailer";
            LOOP_ASSERT(strstr(why, want) != NULL, "byte %zu bit %d: want \"%s\", got %s",
                        byte, bit, want, why);
            flip_bit(p, byte, bit);
        }
    seen s = {0};
    ck_assert_msg(ckpt_read(p, collect, &s, why, sizeof why) == 0, "%s", why); /* restored */
    ck_assert_int_eq(s.calls, 4);
}
END_TEST

START_TEST(bit_flips_in_large_file)
{
    char why[256] = "";
    ckpt_writer *w;
    ck_assert_int_eq(ckpt_begin(&w, dir, "bigflip", why, sizeof why), 0);
    put_pattern(w, 1, 3u << 20);
    put_pattern(w, 2, 11);
    ck_assert_int_eq(ckpt_commit(&w, why, sizeof why), 0);
    const char *p = path_of("bigflip");
    size_t size = 8 + 16 + (3u << 20) + 16 + 16 + 32;
    srand(7);
    for (int i = 0; i < 200; i++) {
        size_t byte = 8 + (size_t)rand() % (size - 8 - 32);
        int bit = rand() % 8;
        flip_bit(p, byte, bit);
        seen s = {0};
        int rc = ckpt_read(p, collect, &s, why, sizeof why);
        LOOP_ASSERT(rc == -PSKV_EPROTO && s.calls == 0 && strstr(why, "checksum mismatch"),
                    "byte %zu bit %d: rc %d calls %d (%s)", byte, bit, rc, s.calls, why);
        flip_bit(p, byte, bit);
    }
}
END_TEST

START_TEST(not_a_checkpoint)
{
    char why[256] = "";
    const char *text = "just some text, long enough to hold a trailer if it were one.\n";
    spill(path_of("text"), text, strlen(text));
    seen s = {0};
    ck_assert_int_eq(ckpt_read(path_of("text"), collect, &s, why, sizeof why), -PSKV_EPROTO);
    ck_assert_msg(strstr(why, "not a pskv checkpoint") != NULL, "%s", why);
    ck_assert_msg(strstr(why, path_of("text")) != NULL, "%s", why);
    spill(path_of("short"), "abc", 3);
    ck_assert_int_eq(ckpt_read(path_of("short"), collect, &s, why, sizeof why), -PSKV_EPROTO);
    ck_assert_msg(strstr(why, "not a pskv checkpoint") != NULL, "%s", why);
    /* the magic, then garbage */
    spill(path_of("garbage"), "PSKVCKP1\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c", 20);
    ck_assert_int_eq(ckpt_read(path_of("garbage"), collect, &s, why, sizeof why), -PSKV_EPROTO);
    /* a directory */
    ck_assert_int_eq(ckpt_read(dir, collect, &s, why, sizeof why), -PSKV_EIO);
    ck_assert_int_eq(s.calls, 0);
}
END_TEST

START_TEST(missing_paths)
{
    char why[256] = "";
    seen s = {0};
    ck_assert_int_eq(ckpt_read(path_of("absent"), collect, &s, why, sizeof why), -PSKV_EIO);
    ck_assert_msg(strstr(why, path_of("absent")) != NULL, "%s", why);
    ck_assert_int_eq(s.calls, 0);

    char missing[512];
    snprintf(missing, sizeof missing, "%s/no/such/dir", dir);
    ckpt_writer *w = (ckpt_writer *)&s;
    ck_assert_int_eq(ckpt_begin(&w, missing, "x", why, sizeof why), -PSKV_EIO);
    ck_assert_ptr_null(w);
    ck_assert_msg(strstr(why, missing) != NULL, "%s", why);
    ck_assert_msg(strstr(why, "No such file") != NULL, "%s", why);
}
END_TEST

Suite *ckpt_suite(void)
{
    Suite *s = suite_create("ckpt");
    TCase *tc = tcase_create("write");
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, round_trip, 0, 2);
    tcase_add_test(tc, buffer_edges);
    tcase_add_test(tc, empty_checkpoint);
    tcase_add_test(tc, commit_replaces_old);
    tcase_add_test(tc, abort_leaves_nothing);
    tcase_add_test(tc, bad_arguments);
    suite_add_tcase(s, tc);
    TCase *tr = tcase_create("read");
    tcase_add_unchecked_fixture(tr, setup, teardown);
    tcase_add_test(tr, fn_stops_the_walk);
    tcase_add_test(tr, truncated_refused);
    tcase_add_test(tr, every_bit_flip_refused);
    tcase_add_test(tr, bit_flips_in_large_file);
    tcase_add_test(tr, not_a_checkpoint);
    tcase_add_test(tr, missing_paths);
    suite_add_tcase(s, tr);
    return s;
}
