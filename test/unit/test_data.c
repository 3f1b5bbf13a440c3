/* Tests of the training-data readers (worker/idx.c, worker/libsvm.c) against the
 * small fixtures in test/fixtures (see its README): values and scaling, shards that
 * partition the rows exactly, every kind of corrupt input refused with the file
 * (and for LIBSVM the line:column) named. The real Fashion-MNIST test set and
 * LIBSVM's heart_scale are loaded when the machine has them. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auc.h"
#include "idx.h"
#include "libsvm.h"
#include "pskv_errors.h"
#include "suites.h"

#define IDX_DIR "test/fixtures/idx"
#define SVM_DIR "test/fixtures/libsvm"
#define FASHION_DIR "/usr/share/datasets/fashion-mnist"
#define HEART_SCALE "/usr/share/doc/liblinear-tools/examples/heart_scale"

/* The tiny idx fixture: 5 images of 2x3; pixel j of image i is (50i + 10j) % 255,
 * except the last pixel of the last image, which is 255. */
enum { TINY_N = 5, TINY_DIM = 6 };
static const uint8_t tiny_labels[TINY_N] = {3, 0, 9, 1, 7};

static unsigned tiny_pixel(unsigned i, unsigned j)
{
    return i == 4 && j == 5 ? 255 : (i * 50 + j * 10) % 255;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* ---- idx ------------------------------------------------------------------ */

START_TEST(idx_tiny_all)
{
    idx_set s;
    char why[256];
    ck_assert_int_eq(idx_load(IDX_DIR, "tiny", 0, 1, 0, &s, why, sizeof why), 0);
    ck_assert_uint_eq(s.n, TINY_N);
    ck_assert_uint_eq(s.dim, TINY_DIM);
    for (unsigned i = 0; i < TINY_N; i++) {
        ck_assert_uint_eq(s.y[i], tiny_labels[i]);
        for (unsigned j = 0; j < TINY_DIM; j++)
            ck_assert_float_eq(s.x[i * TINY_DIM + j], (float)tiny_pixel(i, j) / 255.0f);
    }
    ck_assert_float_eq(s.x[0], 0.0f);
    ck_assert_float_eq(s.x[TINY_N * TINY_DIM - 1], 1.0f);
    idx_free(&s);
    ck_assert_ptr_null(s.x);
    ck_assert_uint_eq(s.n, 0);
    idx_free(&s);   /* twice is harmless */
}
END_TEST

/* Shards 0..k-1 of k hold every row exactly once, row i in shard i % k. */
START_TEST(idx_tiny_shards_partition)
{
    for (uint32_t k = 1; k <= 7; k++) {
        unsigned seen[TINY_N] = {0};
        for (uint32_t sh = 0; sh < k; sh++) {
            idx_set s;
            char why[256];
            ck_assert_int_eq(idx_load(IDX_DIR, "tiny", sh, k, 0, &s, why, sizeof why), 0);
            ck_assert_uint_eq(s.dim, TINY_DIM);
            uint32_t r = 0;
            for (unsigned i = sh; i < TINY_N; i += k, r++) {
                seen[i]++;
                ck_assert_uint_lt(r, s.n);
                ck_assert_uint_eq(s.y[r], tiny_labels[i]);
                for (unsigned j = 0; j < TINY_DIM; j++)
                    ck_assert_float_eq(s.x[r * TINY_DIM + j], (float)tiny_pixel(i, j) / 255.0f);
            }
            ck_assert_uint_eq(s.n, r);
            idx_free(&s);
        }
        for (unsigned i = 0; i < TINY_N; i++)
            ck_assert_uint_eq(seen[i], 1);
    }
}
END_TEST

START_TEST(idx_tiny_limit)
{
    idx_set s;
    char why[256];
    ck_assert_int_eq(idx_load(IDX_DIR, "tiny", 0, 1, 3, &s, why, sizeof why), 0);
    ck_assert_uint_eq(s.n, 3);
    ck_assert_uint_eq(s.y[2], tiny_labels[2]);
    idx_free(&s);
    ck_assert_int_eq(idx_load(IDX_DIR, "tiny", 1, 2, 3, &s, why, sizeof why), 0);
    ck_assert_uint_eq(s.n, 1);
    ck_assert_uint_eq(s.y[0], tiny_labels[1]);
    idx_free(&s);
    ck_assert_int_eq(idx_load(IDX_DIR, "tiny", 0, 1, 1000, &s, why, sizeof why), 0);
    ck_assert_uint_eq(s.n, TINY_N);
    idx_free(&s);
    /* A limit stops before the end, so the data after it is not looked at. */
    ck_assert_int_eq(idx_load(IDX_DIR, "extra", 0, 1, 4, &s, why, sizeof why), 0);
    ck_assert_uint_eq(s.n, 4);
    idx_free(&s);
    /* More shards than rows: an empty shard is not an error. */
    ck_assert_int_eq(idx_load(IDX_DIR, "tiny", 6, 8, 0, &s, why, sizeof why), 0);
    ck_assert_uint_eq(s.n, 0);
    idx_free(&s);
}
END_TEST

/* A validation split: the last rows set apart, the rows before them sharded and
 * limited as without one; every row in exactly one of the two; a split that leaves
 * no row before it refused. */
START_TEST(idx_tiny_split)
{
    idx_set s, v;
    char why[256];
    ck_assert_int_eq(idx_load_split(IDX_DIR, "tiny", 0, 1, 0, 2, 1, &v, why, sizeof why), 0);
    ck_assert_uint_eq(v.n, 2);
    ck_assert_uint_eq(v.file_rows, TINY_N);
    ck_assert_uint_eq(v.y[0], tiny_labels[3]);
    ck_assert_uint_eq(v.y[1], tiny_labels[4]);
    ck_assert_float_eq(v.x[2 * TINY_DIM - 1], 1.0f);
    idx_free(&v);
    unsigned seen = 0;
    for (uint32_t sh = 0; sh < 2; sh++) {
        ck_assert_int_eq(idx_load_split(IDX_DIR, "tiny", sh, 2, 0, 2, 0, &s, why, sizeof why), 0);
        for (uint32_t r = 0; r < s.n; r++)
            ck_assert_uint_eq(s.y[r], tiny_labels[sh + 2 * r]);
        seen += s.n;
        idx_free(&s);
    }
    ck_assert_uint_eq(seen, TINY_N - 2);
    /* --train-limit applies to the rows before the split */
    ck_assert_int_eq(idx_load_split(IDX_DIR, "tiny", 0, 1, 2, 2, 0, &s, why, sizeof why), 0);
    ck_assert_uint_eq(s.n, 2);
    idx_free(&s);
    ck_assert_int_eq(idx_load_split(IDX_DIR, "tiny", 0, 1, 0, TINY_N, 0, &s, why, sizeof why),
                     -PSKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "leaves none"));
    ck_assert_ptr_null(s.x);
}
END_TEST

/* Corrupt pairs: prefix, the file the message must name, and what it must say. */
static const struct {
    const char *prefix;
    const char *file;
    const char *says;
} idx_bad[] = {
    {"badmagic", "badmagic-images-idx3-ubyte.gz", "bad magic"},
    {"trunc", "trunc-images-idx3-ubyte.gz", "truncated"},
    {"cutgz", "cutgz-images-idx3-ubyte.gz", "gzip error"},
    {"mismatch", "mismatch-labels-idx1-ubyte.gz", "labels"},
    {"badlabel", "badlabel-labels-idx1-ubyte.gz", "label 12"},
    {"notgz", "notgz-images-idx3-ubyte.gz", "not a gzip file"},
    {"zerodim", "zerodim-images-idx3-ubyte.gz", "image size"},
    {"extra", "extra-images-idx3-ubyte.gz", "data after"},
    {"badcrc", "badcrc-images-idx3-ubyte.gz", "incorrect data check"},
    {"shorthdr", "shorthdr-images-idx3-ubyte.gz", "inside the header"},
};
enum { NIDX_BAD = sizeof idx_bad / sizeof idx_bad[0] };

/* idx_gather copies the rows and labels an order names, in its order (a batch);
 * idx_prefetch only asks for them (the rows stay as they were). */
START_TEST(idx_gather_rows)
{
    enum { N = 5, DIM = 3 };
    float xs[N * DIM];
    uint8_t ys[N];
    for (int i = 0; i < N; i++) {
        ys[i] = (uint8_t)(i + 1);
        for (int j = 0; j < DIM; j++)
            xs[i * DIM + j] = (float)(10 * i + j);
    }
    idx_set s = {.n = N, .dim = DIM, .x = xs, .y = ys, .file_rows = N};
    const uint32_t order[3] = {4, 0, 2};
    float x[3 * DIM];
    uint8_t y[3];
    idx_prefetch(&s, order, 3);
    idx_gather(&s, order, 3, x, y);
    for (int b = 0; b < 3; b++) {
        ck_assert_uint_eq(y[b], ys[order[b]]);
        for (int j = 0; j < DIM; j++)
            ck_assert_float_eq(x[b * DIM + j], (float)(10 * (int)order[b] + j));
    }
}
END_TEST

START_TEST(idx_corrupt)
{
    idx_set s;
    memset(&s, 0xab, sizeof s);
    char why[512];
    int rc = idx_load(IDX_DIR, idx_bad[_i].prefix, 0, 1, 0, &s, why, sizeof why);
    ck_assert_msg(rc == -PSKV_EIO, "%s: rc %d (%s)", idx_bad[_i].prefix, rc, why);
    ck_assert_msg(strstr(why, idx_bad[_i].file) != NULL, "'%s' does not name %s", why,
                  idx_bad[_i].file);
    ck_assert_msg(strstr(why, idx_bad[_i].says) != NULL, "'%s' does not say %s", why,
                  idx_bad[_i].says);
    ck_assert_ptr_null(s.x);
    ck_assert_ptr_null(s.y);
    ck_assert_uint_eq(s.n, 0);
    idx_free(&s);
}
END_TEST

START_TEST(idx_missing_and_bad_args)
{
    idx_set s;
    char why[512];
    ck_assert_int_eq(idx_load(IDX_DIR, "nosuch", 0, 1, 0, &s, why, sizeof why),
                     -PSKV_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(why, IDX_DIR "/nosuch-images-idx3-ubyte.gz"));
    ck_assert_int_eq(idx_load("test/fixtures/nodir", "tiny", 0, 1, 0, &s, why, sizeof why),
                     -PSKV_ENOTFOUND);
    ck_assert_int_eq(idx_load(IDX_DIR, "tiny", 2, 2, 0, &s, why, sizeof why), -PSKV_EINVAL);
    ck_assert_int_eq(idx_load(IDX_DIR, "tiny", 0, 0, 0, &s, why, sizeof why), -PSKV_EINVAL);
    /* A NULL or empty buffer for the reason is allowed. */
    ck_assert_int_eq(idx_load(IDX_DIR, "badmagic", 0, 1, 0, &s, NULL, 0), -PSKV_EIO);
    ck_assert_int_eq(idx_load(IDX_DIR, "tiny", 0, 1, 0, &s, NULL, 0), 0);
    idx_free(&s);
}
END_TEST

START_TEST(idx_fashion_mnist_t10k)
{
    if (!exists(FASHION_DIR "/t10k-images-idx3-ubyte.gz"))
        return;
    idx_set s;
    char why[512];
    ck_assert_msg(idx_load(FASHION_DIR, "t10k", 0, 1, 0, &s, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(s.n, 10000);
    ck_assert_uint_eq(s.dim, 784);
    unsigned count[10] = {0};
    for (uint32_t i = 0; i < s.n; i++) {
        LOOP_ASSERT(s.y[i] <= 9, "label %u of row %u", s.y[i], i);
        count[s.y[i]]++;
    }
    for (int c = 0; c < 10; c++)
        ck_assert_uint_eq(count[c], 1000);
    float lo = 1, hi = 0;
    for (size_t k = 0; k < (size_t)s.n * s.dim; k++) {
        lo = s.x[k] < lo ? s.x[k] : lo;
        hi = s.x[k] > hi ? s.x[k] : hi;
    }
    ck_assert_float_eq(lo, 0.0f);
    ck_assert_float_eq(hi, 1.0f);
    /* Shard 2 of 3 is every third row of the full set, starting at row 2. */
    idx_set part;
    ck_assert_int_eq(idx_load(FASHION_DIR, "t10k", 2, 3, 0, &part, why, sizeof why), 0);
    ck_assert_uint_eq(part.n, 3333);
    for (uint32_t r = 0; r < part.n; r++) {
        uint32_t i = 2 + 3 * r;
        LOOP_ASSERT(part.y[r] == s.y[i], "row %u", i);
        LOOP_ASSERT(memcmp(part.x + (size_t)r * 784, s.x + (size_t)i * 784, 784 * 4) == 0,
                    "row %u", i);
    }
    idx_free(&part);
    idx_free(&s);
}
END_TEST

/* ---- libsvm --------------------------------------------------------------- */

/* good.svm, example by example (lines 2, 4, 6, 8, 9, 10 of the file). */
static const struct {
    float y;
    int nnz;
    uint64_t idx[3];
    float val[3];
} good[] = {
    {1, 3, {1, 3, 7}, {0.5f, 1, -2.25f}},
    {0, 2, {2, 4}, {1e-3f, 1}},
    {0, 1, {5}, {1}},
    {1, 2, {1, 10}, {1, 0.125f}},
    {0, 0, {0}, {0}},
    {1, 3, {6, 8, 9}, {350, -0.0f, 4}},
};
enum { NGOOD = sizeof good / sizeof good[0] };

/* Checks that s holds examples sh, sh + k, ... of good.svm. */
static void check_good_shard(const libsvm_set *s, uint32_t sh, uint32_t k)
{
    size_t r = 0, nnz = 0;
    uint64_t top = 0;
    for (size_t e = sh; e < NGOOD; e += k, r++) {
        ck_assert_uint_lt(r, s->n);
        ck_assert_float_eq(s->y[r], good[e].y);
        ck_assert_uint_eq(s->off[r], nnz);
        ck_assert_uint_eq(s->off[r + 1] - s->off[r], (size_t)good[e].nnz);
        for (int j = 0; j < good[e].nnz; j++, nnz++) {
            ck_assert_uint_eq(s->idx[nnz], good[e].idx[j]);
            ck_assert_float_eq(s->val[nnz], good[e].val[j]);
            top = good[e].idx[j] > top ? good[e].idx[j] : top;
        }
    }
    ck_assert_uint_eq(s->n, r);
    ck_assert_uint_eq(s->nnz, nnz);
    ck_assert_uint_eq(s->max_idx, top);
    ck_assert_uint_eq(s->lines, 10);
}

START_TEST(libsvm_good)
{
    libsvm_set s;
    char why[512];
    int rc = libsvm_load(SVM_DIR "/good.svm", 0, 1, 0, &s, why, sizeof why);
    ck_assert_msg(rc == 0, "%s", why);
    ck_assert_uint_eq(s.n, NGOOD);
    ck_assert_uint_eq(s.nnz, 11);
    ck_assert_uint_eq(s.max_idx, 10);
    ck_assert(signbit(s.val[9]));   /* "8:-0" keeps its sign */
    check_good_shard(&s, 0, 1);
    libsvm_free(&s);
    ck_assert_ptr_null(s.off);
    libsvm_free(&s);
    /* The largest id present is allowed as the maximum. */
    ck_assert_int_eq(libsvm_load(SVM_DIR "/good.svm", 0, 1, 10, &s, why, sizeof why), 0);
    libsvm_free(&s);
}
END_TEST

/* A held-out tail (a validation set): the last 1 of four.svm's 4 examples is
 * held out; the others are sharded as before; a holdout of all is refused. */
START_TEST(libsvm_holdout)
{
    libsvm_set a, b, v;
    char why[512];
    uint64_t n;
    ck_assert_int_eq(libsvm_count(SVM_DIR "/four.svm", &n, why, sizeof why), 0);
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(libsvm_load_split(SVM_DIR "/four.svm", 0, 2, 0, 1, 0, &a, why, sizeof why), 0);
    ck_assert_int_eq(libsvm_load_split(SVM_DIR "/four.svm", 1, 2, 0, 1, 0, &b, why, sizeof why), 0);
    ck_assert_int_eq(libsvm_load_split(SVM_DIR "/four.svm", 0, 2, 0, 1, 1, &v, why, sizeof why), 0);
    ck_assert_uint_eq(a.n, 2); /* examples 0 and 2 */
    ck_assert_uint_eq(b.n, 1); /* example 1; 3 is held out */
    ck_assert_uint_eq(v.n, 1);
    ck_assert_uint_eq(v.nnz, 2);
    ck_assert_uint_eq(v.idx[0], 4);
    ck_assert_uint_eq(v.idx[1], 5);
    ck_assert_float_eq(v.y[0], 1);
    ck_assert_uint_eq(a.examples, 4); /* the whole file's, whatever was kept */
    ck_assert_uint_eq(b.examples, 4);
    ck_assert_uint_eq(v.examples, 4);
    libsvm_free(&a);
    libsvm_free(&b);
    libsvm_free(&v);
    ck_assert_int_eq(libsvm_load_split(SVM_DIR "/four.svm", 0, 1, 0, 4, 1, &v, why, sizeof why),
                     -PSKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "cannot hold out the last 4"));
    ck_assert_ptr_null(v.off);
}
END_TEST

START_TEST(libsvm_shards_partition)
{
    for (uint32_t k = 1; k <= 7; k++)
        for (uint32_t sh = 0; sh < k; sh++) {
            libsvm_set s;
            char why[512];
            ck_assert_int_eq(libsvm_load(SVM_DIR "/good.svm", sh, k, 0, &s, why, sizeof why),
                             0);
            check_good_shard(&s, sh, k);
            libsvm_free(&s);
        }
    /* Two shards of four.svm: examples 0, 2 and 1, 3, features split accordingly. */
    libsvm_set a, b;
    char why[512];
    ck_assert_int_eq(libsvm_load(SVM_DIR "/four.svm", 0, 2, 0, &a, why, sizeof why), 0);
    ck_assert_int_eq(libsvm_load(SVM_DIR "/four.svm", 1, 2, 0, &b, why, sizeof why), 0);
    ck_assert_uint_eq(a.n + b.n, 4);
    ck_assert_uint_eq(a.nnz + b.nnz, 5);
    ck_assert_uint_eq(a.idx[0], 1);
    ck_assert_uint_eq(a.idx[1], 3);
    ck_assert_uint_eq(b.idx[0], 2);
    ck_assert_uint_eq(b.idx[2], 5);
    ck_assert_float_eq(a.y[1], 0);
    ck_assert_float_eq(b.y[1], 1);
    libsvm_free(&a);
    libsvm_free(&b);
}
END_TEST

/* Malformed files: name, max_idx, "LINE:COLUMN: " expected and the reason. */
static const struct {
    const char *file;
    uint64_t max_idx;
    const char *at;
    const char *says;
} svm_bad[] = {
    {"bad_label.svm", 0, ":2:1: ", "bad label"},
    {"missing_colon.svm", 0, ":2:8: ", "missing ':'"},
    {"index0.svm", 0, ":2:8: ", "index 0"},
    {"bigindex.svm", 50, ":2:8: ", "above the maximum 50"},
    {"good.svm", 9, ":8:7: ", "index 10 above the maximum 9"},
    {"hugeindex.svm", 0, ":2:8: ", "too large"},
    {"badindex.svm", 0, ":2:8: ", "bad feature index"},
    {"nonnum.svm", 0, ":2:10: ", "bad feature value"},
    {"nan.svm", 0, ":2:10: ", "non-finite"},
    {"inf.svm", 0, ":2:10: ", "non-finite"},
    {"floatrange.svm", 0, ":2:10: ", "float range"},
    {"novalue.svm", 0, ":2:10: ", "missing value"},
};
enum { NSVM_BAD = sizeof svm_bad / sizeof svm_bad[0] };

START_TEST(libsvm_malformed)
{
    char path[256], want[300], why[512];
    snprintf(path, sizeof path, "%s/%s", SVM_DIR, svm_bad[_i].file);
    snprintf(want, sizeof want, "%s%s", path, svm_bad[_i].at);
    libsvm_set s;
    memset(&s, 0xab, sizeof s);
    int rc = libsvm_load(path, 0, 1, svm_bad[_i].max_idx, &s, why, sizeof why);
    ck_assert_msg(rc == -PSKV_EIO, "%s: rc %d", path, rc);
    ck_assert_msg(strncmp(why, want, strlen(want)) == 0, "'%s' does not start with '%s'", why,
                  want);
    ck_assert_msg(strstr(why, svm_bad[_i].says) != NULL, "'%s' does not say '%s'", why,
                  svm_bad[_i].says);
    ck_assert_ptr_null(s.off);
    ck_assert_ptr_null(s.idx);
    ck_assert_uint_eq(s.n, 0);
    libsvm_free(&s);
}
END_TEST

START_TEST(libsvm_other_shard_not_parsed)
{
    /* The bad line is example 1: shard 0 of 2 never parses it, shard 1 reports it. */
    libsvm_set s;
    char why[512];
    ck_assert_int_eq(libsvm_load(SVM_DIR "/nonnum.svm", 0, 2, 0, &s, why, sizeof why), 0);
    ck_assert_uint_eq(s.n, 1);
    ck_assert_uint_eq(s.lines, 2);
    libsvm_free(&s);
    ck_assert_int_eq(libsvm_load(SVM_DIR "/nonnum.svm", 1, 2, 0, &s, why, sizeof why),
                     -PSKV_EIO);
}
END_TEST

START_TEST(libsvm_missing_and_bad_args)
{
    libsvm_set s;
    char why[512];
    ck_assert_int_eq(libsvm_load(SVM_DIR "/nosuch.svm", 0, 1, 0, &s, why, sizeof why),
                     -PSKV_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(why, SVM_DIR "/nosuch.svm"));
    ck_assert_int_eq(libsvm_load(SVM_DIR "/good.svm", 1, 1, 0, &s, why, sizeof why),
                     -PSKV_EINVAL);
    ck_assert_int_eq(libsvm_load(SVM_DIR "/good.svm", 0, 0, 0, &s, why, sizeof why),
                     -PSKV_EINVAL);
    ck_assert_int_eq(libsvm_load(SVM_DIR "/bad_label.svm", 0, 1, 0, &s, NULL, 0), -PSKV_EIO);
    /* A directory opens but does not read. */
    ck_assert_int_eq(libsvm_load(SVM_DIR, 0, 1, 0, &s, why, sizeof why), -PSKV_EIO);
    ck_assert_ptr_nonnull(strstr(why, SVM_DIR));
}
END_TEST

/* A value for the generated file: magnitudes from 1e-30 to 1e30, printed with %f,
 * %e or %g at 0..19 digits, so both the fast path and strtod are exercised. */
static void format_value(char *text, size_t len, uint64_t r)
{
    double v = (double)(r >> 11) / 9007199254740992.0 * pow(10.0, (double)(r % 61) - 30.0);
    if (r & 1)
        v = -v;
    int digits = (int)(r >> 59) % 20;
    switch ((r >> 8) % 3) {
    case 0:
        snprintf(text, len, "%.*f", digits, v);
        break;
    case 1:
        snprintf(text, len, "%.*e", digits, v);
        break;
    default:
        snprintf(text, len, "%.*g", digits, v);
    }
}

/* Many examples (past every initial capacity), one very long line, and values
 * printed at many precisions: each must read back as (float)strtod of its text. */
START_TEST(libsvm_generated)
{
    char path[] = "/tmp/pskv-test-libsvm-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *fp = fdopen(fd, "w");
    ck_assert_ptr_nonnull(fp);
    enum { LINES = 5000, LONG_LINE = 1234, LONG_NNZ = 200000 };
    uint64_t rng = 42;
    size_t total_nnz = 0;
    char text[128];
    for (int e = 0; e < LINES; e++) {
        fprintf(fp, "%d", e % 3 - 1);
        int nnz = e == LONG_LINE ? LONG_NNZ : e % 7;
        for (int j = 0; j < nnz; j++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            format_value(text, sizeof text, rng);
            fprintf(fp, " %llu:%s", (unsigned long long)(e + 2) * 1000 + (unsigned)j, text);
        }
        total_nnz += (size_t)nnz;
        fputc('\n', fp);
    }
    ck_assert_int_eq(fclose(fp), 0);

    libsvm_set s;
    char why[512];
    int rc = libsvm_load(path, 0, 1, 0, &s, why, sizeof why);
    ck_assert_msg(rc == 0, "%s", why);
    ck_assert_uint_eq(s.n, LINES);
    ck_assert_uint_eq(s.nnz, total_nnz);
    ck_assert_uint_eq(s.lines, LINES);
    ck_assert_uint_eq(s.off[LONG_LINE + 1] - s.off[LONG_LINE], LONG_NNZ);
    /* Regenerate the same values and compare. */
    rng = 42;
    size_t k = 0;
    for (int e = 0; e < LINES; e++) {
        LOOP_ASSERT(s.y[e] == (e % 3 - 1 > 0 ? 1.0f : 0.0f), "label of %d", e);
        int nnz = e == LONG_LINE ? LONG_NNZ : e % 7;
        for (int j = 0; j < nnz; j++, k++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            format_value(text, sizeof text, rng);
            float want = (float)strtod(text, NULL);
            LOOP_ASSERT(s.val[k] == want, "value %s read as %.9g", text, (double)s.val[k]);
            LOOP_ASSERT(s.idx[k] == (uint64_t)(e + 2) * 1000 + (unsigned)j, "index %zu", k);
        }
    }
    libsvm_free(&s);

    /* Three shards hold every example once. */
    size_t n = 0, nnz = 0;
    for (uint32_t sh = 0; sh < 3; sh++) {
        ck_assert_int_eq(libsvm_load(path, sh, 3, 0, &s, why, sizeof why), 0);
        n += s.n;
        nnz += s.nnz;
        libsvm_free(&s);
    }
    ck_assert_uint_eq(n, LINES);
    ck_assert_uint_eq(nnz, total_nnz);
    unlink(path);
}
END_TEST

START_TEST(libsvm_heart_scale)
{
    if (!exists(HEART_SCALE))
        return;
    libsvm_set s;
    char why[512];
    ck_assert_msg(libsvm_load(HEART_SCALE, 0, 1, 0, &s, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(s.n, 270);
    ck_assert_uint_eq(s.max_idx, 13);
    size_t pos = 0;
    for (size_t i = 0; i < s.n; i++) {
        LOOP_ASSERT(s.y[i] == 0.0f || s.y[i] == 1.0f, "label %zu", i);
        pos += s.y[i] == 1.0f;
    }
    ck_assert_uint_eq(pos, 120);
    for (size_t k = 0; k < s.nnz; k++)
        LOOP_ASSERT(s.val[k] >= -1.0f && s.val[k] <= 1.0f, "value %zu", k);
    libsvm_free(&s);
}
END_TEST

/* Values counted by hand over the positive-negative pairs (a tie counts 1/2). */
START_TEST(auc_by_hand)
{
    auc_item sep[] = {{0.1, 0}, {0.4, 1}, {0.35, 0}, {0.8, 1}};
    ck_assert_double_eq_tol(auc_rank_sum(sep, 4), 1.0, 1e-12);
    /* pairs: 0.1+ loses to both, 0.5+ ties 0.5- and loses to 0.9-, 0.7+ beats 0.5-:
     * 1.5 of 6 */
    auc_item mixed[] = {{0.9, 0}, {0.5, 1}, {0.1, 1}, {0.5, 0}, {0.7, 1}};
    ck_assert_double_eq_tol(auc_rank_sum(mixed, 5), 0.25, 1e-12);
    auc_item one_class[] = {{0.3, 1}, {0.2, 1}};
    ck_assert(isnan(auc_rank_sum(one_class, 2)));
    ck_assert(isnan(auc_rank_sum(NULL, 0)));
}
END_TEST

Suite *data_suite(void)
{
    Suite *s = suite_create("data");
    TCase *ti = tcase_create("idx");
    tcase_add_test(ti, idx_tiny_all);
    tcase_add_test(ti, idx_tiny_shards_partition);
    tcase_add_test(ti, idx_tiny_limit);
    tcase_add_test(ti, idx_gather_rows);
    tcase_add_test(ti, idx_tiny_split);
    tcase_add_loop_test(ti, idx_corrupt, 0, NIDX_BAD);
    tcase_add_test(ti, idx_missing_and_bad_args);
    tcase_add_test(ti, idx_fashion_mnist_t10k);
    suite_add_tcase(s, ti);
    TCase *tl = tcase_create("libsvm");
    tcase_add_test(tl, libsvm_good);
    tcase_add_test(tl, libsvm_shards_partition);
    tcase_add_test(tl, libsvm_holdout);
    tcase_add_loop_test(tl, libsvm_malformed, 0, NSVM_BAD);
    tcase_add_test(tl, libsvm_other_shard_not_parsed);
    tcase_add_test(tl, libsvm_missing_and_bad_args);
    tcase_add_test(tl, libsvm_generated);
    tcase_add_test(tl, libsvm_heart_scale);
    tcase_add_test(tl, auc_by_hand);
    suite_add_tcase(s, tl);
    return s;
}
