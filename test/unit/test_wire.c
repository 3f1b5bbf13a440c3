/* Tests of the message codec (common/wire.c). Frames are built by hand: Meta
 * packed with protobuf-c, keys as uint64 and values as float32 arrays, so each
 * test controls every byte wire_parse sees. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <zmq.h>

#include "net.h"
#include "pskv_errors.h"
#include "suites.h"
#include "timeutil.h"
#include "wire.h"

/* A message under construction: up to 4 frames (one more than allowed). */
typedef struct frames {
    uint8_t meta[512];
    const void *data[4];
    size_t size[4];
    int n;
} frames;

static void put_meta(frames *f, const Pskv__Meta *m)
{
    size_t len = pskv__meta__get_packed_size(m);
    ck_assert_uint_le(len, sizeof f->meta);
    pskv__meta__pack(m, f->meta);
    f->data[0] = f->meta;
    f->size[0] = len;
    f->n = 1;
}

static void put_frame(frames *f, const void *p, size_t len)
{
    ck_assert_int_lt(f->n, 4);
    f->data[f->n] = p;
    f->size[f->n] = len;
    f->n++;
}

static int parse(wire_msg *m, const frames *f, char *why, size_t whylen)
{
    memset(m, 0, sizeof *m);
    why[0] = '\0';
    return wire_parse(m, f->data, f->size, f->n, why, whylen);
}

/* Parses f expecting failure `code`; checks a reason was given and nothing is held. */
static void expect_fail(const frames *f, int code)
{
    wire_msg m;
    char why[256];
    int rc = parse(&m, f, why, sizeof why);
    ck_assert_int_eq(rc, -code);
    ck_assert_msg(why[0] != '\0', "failure without a reason");
    ck_assert_ptr_null(m.meta);
    ck_assert_ptr_null(m.own);
    wire_msg_close(&m);
}

static void meta_counts(Pskv__Meta *m, Pskv__MsgType type, uint64_t nkeys, uint32_t width)
{
    wire_meta_init(m, type);
    m->has_num_keys = 1;
    m->num_keys = nkeys;
    m->has_width = 1;
    m->width = width;
}

START_TEST(meta_init_sets_version_and_type)
{
    Pskv__Meta m;
    wire_meta_init(&m, PSKV__MSG_TYPE__PULL);
    ck_assert_uint_eq(m.version, PSKV_PROTO_VERSION);
    ck_assert_int_eq(m.type, PSKV__MSG_TYPE__PULL);
    ck_assert_int_eq(m.has_first_key, 0);
}
END_TEST

START_TEST(push_with_keys)
{
    uint64_t keys[3] = {5, 9, (uint64_t)1 << 40};
    float vals[6] = {1.5f, -2.0f, 3.25f, 0.0f, 1e30f, -1e-30f};
    Pskv__Meta meta;
    meta_counts(&meta, PSKV__MSG_TYPE__PUSH, 3, 2);
    meta.has_table_id = 1;
    meta.table_id = 77;
    frames f;
    put_meta(&f, &meta);
    put_frame(&f, keys, sizeof keys);
    put_frame(&f, vals, sizeof vals);
    wire_msg m;
    char why[256];
    ck_assert_int_eq(parse(&m, &f, why, sizeof why), 0);
    ck_assert_ptr_nonnull(m.meta);
    ck_assert_int_eq(m.meta->type, PSKV__MSG_TYPE__PUSH);
    ck_assert_uint_eq(m.meta->table_id, 77);
    ck_assert_uint_eq(m.nkeys, 3);
    ck_assert_uint_eq(m.nvals, 6);
    ck_assert_ptr_nonnull(m.keys);
    ck_assert_ptr_nonnull(m.vals);
    for (int i = 0; i < 3; i++)
        ck_assert_uint_eq(m.keys[i], keys[i]);
    ck_assert_mem_eq(m.vals, vals, sizeof vals);
    wire_msg_close(&m);
    ck_assert_ptr_null(m.meta);
}
END_TEST

START_TEST(push_dense_run)
{
    float vals[12];
    for (int i = 0; i < 12; i++)
        vals[i] = (float)i * 0.5f;
    Pskv__Meta meta;
    meta_counts(&meta, PSKV__MSG_TYPE__PUSH, 4, 3);
    meta.has_first_key = 1;
    meta.first_key = 100;
    frames f;
    put_meta(&f, &meta);
    put_frame(&f, vals, sizeof vals);
    wire_msg m;
    char why[256];
    ck_assert_int_eq(parse(&m, &f, why, sizeof why), 0);
    ck_assert_ptr_null(m.keys);
    ck_assert_ptr_nonnull(m.vals);
    ck_assert_uint_eq(m.meta->first_key, 100);
    ck_assert_uint_eq(m.nkeys, 4);
    ck_assert_uint_eq(m.nvals, 12);
    ck_assert_mem_eq(m.vals, vals, sizeof vals);
    wire_msg_close(&m);

    /* A dense run carries no keys frame: three frames is one too many. */
    uint64_t keys[4] = {100, 101, 102, 103};
    put_meta(&f, &meta);
    put_frame(&f, keys, sizeof keys);
    put_frame(&f, vals, sizeof vals);
    expect_fail(&f, PSKV_EPROTO);
}
END_TEST

START_TEST(pull_with_keys_and_dense)
{
    uint64_t keys[2] = {UINT64_MAX, 0};
    Pskv__Meta meta;
    meta_counts(&meta, PSKV__MSG_TYPE__PULL, 2, 8);
    frames f;
    put_meta(&f, &meta);
    put_frame(&f, keys, sizeof keys);
    wire_msg m;
    char why[256];
    ck_assert_int_eq(parse(&m, &f, why, sizeof why), 0);
    ck_assert_uint_eq(m.nkeys, 2);
    ck_assert_uint_eq(m.nvals, 16);
    ck_assert_ptr_null(m.vals);
    ck_assert_uint_eq(m.keys[0], UINT64_MAX);
    ck_assert_uint_eq(m.keys[1], 0);
    wire_msg_close(&m);

    /* Dense run: Meta alone. */
    meta.has_first_key = 1;
    meta.first_key = 7;
    put_meta(&f, &meta);
    ck_assert_int_eq(parse(&m, &f, why, sizeof why), 0);
    ck_assert_ptr_null(m.keys);
    ck_assert_ptr_null(m.vals);
    ck_assert_uint_eq(m.nkeys, 2);
    ck_assert_uint_eq(m.meta->first_key, 7);
    wire_msg_close(&m);

    /* A PULL without first_key needs its keys frame. */
    meta.has_first_key = 0;
    put_meta(&f, &meta);
    expect_fail(&f, PSKV_EPROTO);
    /* And a PULL carries no values. */
    float vals[16] = {0};
    put_meta(&f, &meta);
    put_frame(&f, keys, sizeof keys);
    put_frame(&f, vals, sizeof vals);
    expect_fail(&f, PSKV_EPROTO);
}
END_TEST

START_TEST(pull_reply)
{
    float vals[4] = {1, 2, 3, 4};
    Pskv__Meta meta;
    meta_counts(&meta, PSKV__MSG_TYPE__PULL_REPLY, 2, 2);
    meta.has_request_id = 1;
    meta.request_id = 12345;
    frames f;
    put_meta(&f, &meta);
    put_frame(&f, vals, sizeof vals);
    wire_msg m;
    char why[256];
    ck_assert_int_eq(parse(&m, &f, why, sizeof why), 0);
    ck_assert_ptr_null(m.keys);
    ck_assert_uint_eq(m.nvals, 4);
    ck_assert_uint_eq(m.meta->request_id, 12345);
    ck_assert_mem_eq(m.vals, vals, sizeof vals);
    wire_msg_close(&m);
}
END_TEST

/* FOLLOW_DATA: rows carry keys and values; removed rows (follow_removed) keys only,
 * and a values frame beside them is refused. */
START_TEST(follow_data_shapes)
{
    uint64_t keys[2] = {7, 9};
    float vals[2] = {1, 2};
    Pskv__Meta meta;
    meta_counts(&meta, PSKV__MSG_TYPE__FOLLOW_DATA, 2, 1);
    frames f;
    put_meta(&f, &meta);
    put_frame(&f, keys, sizeof keys);
    put_frame(&f, vals, sizeof vals);
    wire_msg m;
    char why[256];
    ck_assert_int_eq(parse(&m, &f, why, sizeof why), 0);
    ck_assert_ptr_nonnull(m.vals);
    wire_msg_close(&m);
    meta.has_follow_removed = meta.follow_removed = 1;
    put_meta(&f, &meta);
    put_frame(&f, keys, sizeof keys);
    ck_assert_int_eq(parse(&m, &f, why, sizeof why), 0);
    ck_assert_uint_eq(m.nkeys, 2);
    ck_assert_uint_eq(m.keys[1], 9);
    ck_assert_ptr_null(m.vals);
    wire_msg_close(&m);
    put_frame(&f, vals, sizeof vals);
    expect_fail(&f, PSKV_EPROTO);
}
END_TEST

START_TEST(control_message_without_payload)
{
    Pskv__Meta meta;
    wire_meta_init(&meta, PSKV__MSG_TYPE__HEARTBEAT);
    frames f;
    put_meta(&f, &meta);
    wire_msg m;
    char why[256];
    ck_assert_int_eq(parse(&m, &f, why, sizeof why), 0);
    ck_assert_int_eq(m.meta->type, PSKV__MSG_TYPE__HEARTBEAT);
    ck_assert_ptr_null(m.keys);
    ck_assert_ptr_null(m.vals);
    wire_msg_close(&m);

    uint64_t extra = 1;
    put_frame(&f, &extra, sizeof extra);
    expect_fail(&f, PSKV_EPROTO);
}
END_TEST

/* A bsp close with no rows is a REPLICATE without num_keys and without frames; one
 * with rows, or any other REPLICATE, carries keys and values. */
START_TEST(replicate_close_shapes)
{
    uint64_t keys[2] = {4, 5};
    float vals[2] = {0.5f, -0.5f};
    uint32_t parts[2] = {3, 7};
    Pskv__Meta meta;
    wire_meta_init(&meta, PSKV__MSG_TYPE__REPLICATE);
    meta.has_close = meta.has_clock = meta.has_upto = 1;
    meta.close = 1;
    meta.clock = 4;
    meta.upto = 9;
    meta.n_parts = 2;
    meta.parts = parts;
    frames f;
    put_meta(&f, &meta);
    wire_msg m;
    char why[256];
    ck_assert_int_eq(parse(&m, &f, why, sizeof why), 0);
    ck_assert_ptr_null(m.keys);
    ck_assert_uint_eq(m.meta->n_parts, 2);
    ck_assert_uint_eq(m.meta->parts[1], 7);
    ck_assert_int_eq(m.meta->upto, 9);
    wire_msg_close(&m);
    put_frame(&f, keys, sizeof keys); /* rows without num_keys */
    expect_fail(&f, PSKV_EPROTO);

    meta.has_num_keys = meta.has_width = 1; /* a close with rows */
    meta.num_keys = 2;
    meta.width = 1;
    put_meta(&f, &meta);
    put_frame(&f, keys, sizeof keys);
    put_frame(&f, vals, sizeof vals);
    ck_assert_int_eq(parse(&m, &f, why, sizeof why), 0);
    ck_assert_uint_eq(m.nkeys, 2);
    ck_assert_uint_eq(m.keys[1], 5);
    wire_msg_close(&m);

    meta.has_first_key = 1; /* a dense close: its partitions' spans, no keys frame */
    meta.first_key = 0;
    put_meta(&f, &meta);
    put_frame(&f, vals, sizeof vals);
    ck_assert_int_eq(parse(&m, &f, why, sizeof why), 0);
    ck_assert_ptr_null(m.keys);
    ck_assert_uint_eq(m.nkeys, 2);
    wire_msg_close(&m);
    meta.has_first_key = 0;

    meta.close = 0; /* a push's forward: never without rows */
    meta.has_num_keys = meta.has_width = 0;
    put_meta(&f, &meta);
    expect_fail(&f, PSKV_EPROTO);
}
END_TEST

START_TEST(version_mismatch)
{
    float vals[2] = {1, 2};
    Pskv__Meta meta;
    meta_counts(&meta, PSKV__MSG_TYPE__PULL_REPLY, 1, 2);
    frames f;
    meta.version = PSKV_PROTO_VERSION + 1;
    put_meta(&f, &meta);
    put_frame(&f, vals, sizeof vals);
    expect_fail(&f, PSKV_EVERSION);
    meta.version = 0;
    put_meta(&f, &meta);
    put_frame(&f, vals, sizeof vals);
    expect_fail(&f, PSKV_EVERSION);
}
END_TEST

START_TEST(garbage_meta)
{
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x02};
    frames f = {.n = 1};
    f.data[0] = junk;
    f.size[0] = sizeof junk;
    expect_fail(&f, PSKV_EPROTO);
    /* Empty frame: required version and type are missing. */
    f.size[0] = 0;
    expect_fail(&f, PSKV_EPROTO);
    /* A truncated valid Meta. */
    Pskv__Meta meta;
    meta_counts(&meta, PSKV__MSG_TYPE__PULL, 1, 1);
    meta.has_first_key = 1;
    meta.first_key = 1000000;
    put_meta(&f, &meta);
    f.size[0] -= 1;
    expect_fail(&f, PSKV_EPROTO);
    /* No frames at all. */
    f.n = 0;
    expect_fail(&f, PSKV_EPROTO);
}
END_TEST

START_TEST(unknown_type)
{
    Pskv__Meta meta;
    meta_counts(&meta, (Pskv__MsgType)99, 1, 1);
    frames f;
    put_meta(&f, &meta);
    expect_fail(&f, PSKV_EPROTO);
    meta.type = PSKV__MSG_TYPE__MSG_NONE;
    put_meta(&f, &meta);
    expect_fail(&f, PSKV_EPROTO);
}
END_TEST

START_TEST(wrong_frame_count)
{
    uint64_t keys[2] = {1, 2};
    float vals[2] = {1, 2};
    Pskv__Meta meta;
    meta_counts(&meta, PSKV__MSG_TYPE__PUSH, 2, 1);
    frames f;
    put_meta(&f, &meta); /* meta alone */
    expect_fail(&f, PSKV_EPROTO);
    put_meta(&f, &meta); /* keys but no values */
    put_frame(&f, keys, sizeof keys);
    expect_fail(&f, PSKV_EPROTO);
    put_meta(&f, &meta); /* one frame too many */
    put_frame(&f, keys, sizeof keys);
    put_frame(&f, vals, sizeof vals);
    put_frame(&f, vals, sizeof vals);
    expect_fail(&f, PSKV_EPROTO);

    meta_counts(&meta, PSKV__MSG_TYPE__PULL_REPLY, 2, 1);
    put_meta(&f, &meta);
    expect_fail(&f, PSKV_EPROTO);
    put_meta(&f, &meta);
    put_frame(&f, keys, sizeof keys);
    put_frame(&f, vals, sizeof vals);
    expect_fail(&f, PSKV_EPROTO);
}
END_TEST

START_TEST(keys_size_mismatch)
{
    uint64_t keys[4] = {1, 2, 3, 4};
    float vals[3] = {1, 2, 3};
    Pskv__Meta meta;
    meta_counts(&meta, PSKV__MSG_TYPE__PUSH, 3, 1);
    frames f;
    size_t bad[] = {0, 8, 16, 23, 25, 32};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        put_meta(&f, &meta);
        put_frame(&f, keys, bad[i]);
        put_frame(&f, vals, sizeof vals);
        expect_fail(&f, PSKV_EPROTO);
    }
    meta_counts(&meta, PSKV__MSG_TYPE__PULL, 3, 1);
    put_meta(&f, &meta);
    put_frame(&f, keys, 32);
    expect_fail(&f, PSKV_EPROTO);
}
END_TEST

START_TEST(values_size_mismatch)
{
    uint64_t keys[3] = {1, 2, 3};
    float vals[8] = {0};
    Pskv__Meta meta;
    meta_counts(&meta, PSKV__MSG_TYPE__PUSH, 3, 2); /* wants 6 floats */
    frames f;
    size_t bad[] = {0, 5 * 4, 6 * 4 - 1, 6 * 4 + 1, 7 * 4, 3 * 4};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        put_meta(&f, &meta);
        put_frame(&f, keys, sizeof keys);
        put_frame(&f, vals, bad[i]);
        expect_fail(&f, PSKV_EPROTO);
    }
    meta_counts(&meta, PSKV__MSG_TYPE__PULL_REPLY, 3, 2);
    put_meta(&f, &meta);
    put_frame(&f, vals, 8 * 4);
    expect_fail(&f, PSKV_EPROTO);
}
END_TEST

START_TEST(missing_counts)
{
    uint64_t keys[2] = {1, 2};
    float vals[2] = {1, 2};
    Pskv__Meta meta;
    frames f;

    meta_counts(&meta, PSKV__MSG_TYPE__PUSH, 2, 1);
    meta.has_width = 0;
    put_meta(&f, &meta);
    put_frame(&f, keys, sizeof keys);
    put_frame(&f, vals, sizeof vals);
    expect_fail(&f, PSKV_EPROTO);

    meta_counts(&meta, PSKV__MSG_TYPE__PUSH, 2, 0);
    put_meta(&f, &meta);
    put_frame(&f, keys, sizeof keys);
    put_frame(&f, vals, 0);
    expect_fail(&f, PSKV_EPROTO);

    meta_counts(&meta, PSKV__MSG_TYPE__PUSH, 2, 1);
    meta.has_num_keys = 0;
    put_meta(&f, &meta);
    put_frame(&f, keys, sizeof keys);
    put_frame(&f, vals, sizeof vals);
    expect_fail(&f, PSKV_EPROTO);

    meta_counts(&meta, PSKV__MSG_TYPE__PUSH, 0, 1);
    put_meta(&f, &meta);
    put_frame(&f, keys, 0);
    put_frame(&f, vals, 0);
    expect_fail(&f, PSKV_EPROTO);

    /* A dense PULL needs its counts as much as a keyed one. */
    meta_counts(&meta, PSKV__MSG_TYPE__PULL, 0, 1);
    meta.has_first_key = 1;
    put_meta(&f, &meta);
    expect_fail(&f, PSKV_EPROTO);
    meta_counts(&meta, PSKV__MSG_TYPE__PULL, 4, 1);
    meta.has_width = 0;
    meta.has_first_key = 1;
    put_meta(&f, &meta);
    expect_fail(&f, PSKV_EPROTO);
}
END_TEST

START_TEST(unsupported_dtype_codec)
{
    float vals[2] = {1, 2};
    Pskv__Meta meta;
    meta_counts(&meta, PSKV__MSG_TYPE__PULL_REPLY, 1, 2);
    meta.has_dtype = 1;
    meta.dtype = 1;
    frames f;
    put_meta(&f, &meta);
    put_frame(&f, vals, sizeof vals);
    expect_fail(&f, PSKV_EPROTO);
    meta.has_dtype = 0;
    meta.dtype = 0;
    meta.has_codec = 1;
    meta.codec = 3;
    put_meta(&f, &meta);
    put_frame(&f, vals, sizeof vals);
    expect_fail(&f, PSKV_EPROTO);
}
END_TEST

START_TEST(count_times_width_overflow)
{
    Pskv__Meta meta;
    frames f;
    uint64_t key = 1;
    float val = 1;
    /* (2^61 + 1) keys x 8 bytes wraps to 8 bytes: one key's worth must not pass. */
    meta_counts(&meta, PSKV__MSG_TYPE__PULL, ((uint64_t)1 << 61) + 1, 1);
    put_meta(&f, &meta);
    put_frame(&f, &key, sizeof key);
    expect_fail(&f, PSKV_EPROTO);
    /* 2^31 keys x width 2^31 x 4 bytes wraps to 0 bytes. */
    meta_counts(&meta, PSKV__MSG_TYPE__PULL_REPLY, (uint64_t)1 << 31, (uint32_t)1 << 31);
    put_meta(&f, &meta);
    put_frame(&f, &val, 0);
    expect_fail(&f, PSKV_EPROTO);
    /* 2^62 + 1 keys x width 4 x 4 bytes wraps to 16 bytes. */
    float four[4] = {0};
    meta_counts(&meta, PSKV__MSG_TYPE__PUSH, ((uint64_t)1 << 62) + 1, 4);
    meta.has_first_key = 1;
    meta.first_key = 0;
    put_meta(&f, &meta);
    put_frame(&f, four, sizeof four);
    expect_fail(&f, PSKV_EPROTO);
}
END_TEST

START_TEST(first_key_overflow)
{
    float vals[2] = {1, 2};
    Pskv__Meta meta;
    frames f;
    meta_counts(&meta, PSKV__MSG_TYPE__PUSH, 2, 1);
    meta.has_first_key = 1;
    meta.first_key = UINT64_MAX;
    put_meta(&f, &meta);
    put_frame(&f, vals, sizeof vals);
    expect_fail(&f, PSKV_ERANGE);

    meta.first_key = UINT64_MAX - 1; /* first_key + num_keys = 2^64 */
    put_meta(&f, &meta);
    put_frame(&f, vals, sizeof vals);
    expect_fail(&f, PSKV_ERANGE);

    meta_counts(&meta, PSKV__MSG_TYPE__PULL, 3, 1);
    meta.has_first_key = 1;
    meta.first_key = UINT64_MAX - 1;
    put_meta(&f, &meta);
    expect_fail(&f, PSKV_ERANGE);

    /* The largest run that does not overflow is accepted. */
    meta_counts(&meta, PSKV__MSG_TYPE__PUSH, 2, 1);
    meta.has_first_key = 1;
    meta.first_key = UINT64_MAX - 2;
    put_meta(&f, &meta);
    put_frame(&f, vals, sizeof vals);
    wire_msg m;
    char why[256];
    ck_assert_int_eq(parse(&m, &f, why, sizeof why), 0);
    wire_msg_close(&m);
}
END_TEST

/* Keys and values at every misalignment 1..7 must parse to the same numbers,
 * through aligned pointers (UBSan flags a misaligned load otherwise). */
START_TEST(unaligned_frames)
{
    enum { N = 5, W = 3 };
    uint64_t keys[N];
    float vals[N * W];
    for (int i = 0; i < N; i++)
        keys[i] = 0x0102030405060708ULL * (uint64_t)(i + 1);
    for (int i = 0; i < N * W; i++)
        vals[i] = (float)i - 7.25f;
    uint64_t kbuf[N + 2], vals16[(N * W) / 2 + 2];
    Pskv__Meta meta;
    meta_counts(&meta, PSKV__MSG_TYPE__PUSH, N, W);
    for (int off = 0; off < 8; off++) {
        int koff = _i == 0 ? off : 0, voff = off; /* loop 0: both, loop 1: values only */
        char *kp = (char *)kbuf + koff, *vp = (char *)vals16 + voff;
        memcpy(kp, keys, sizeof keys);
        memcpy(vp, vals, sizeof vals);
        frames f;
        put_meta(&f, &meta);
        put_frame(&f, kp, sizeof keys);
        put_frame(&f, vp, sizeof vals);
        wire_msg m;
        char why[256];
        ck_assert_int_eq(parse(&m, &f, why, sizeof why), 0);
        ck_assert_uint_eq((uintptr_t)m.keys % 8, 0);
        ck_assert_uint_eq((uintptr_t)m.vals % 4, 0);
        for (int i = 0; i < N; i++)
            ck_assert_uint_eq(m.keys[i], keys[i]);
        for (int i = 0; i < N * W; i++)
            ck_assert_float_eq(m.vals[i], vals[i]);
        wire_msg_close(&m);
        ck_assert_ptr_null(m.own);
    }

    /* Unaligned PULL_REPLY values, and a failing unaligned message holds nothing. */
    meta_counts(&meta, PSKV__MSG_TYPE__PULL_REPLY, N, W);
    char *vp = (char *)vals16 + 1;
    memcpy(vp, vals, sizeof vals);
    frames f;
    put_meta(&f, &meta);
    put_frame(&f, vp, sizeof vals);
    wire_msg m;
    char why[256];
    ck_assert_int_eq(parse(&m, &f, why, sizeof why), 0);
    for (int i = 0; i < N * W; i++)
        ck_assert_float_eq(m.vals[i], vals[i]);
    wire_msg_close(&m);
    put_meta(&f, &meta);
    put_frame(&f, vp, sizeof vals - 4);
    expect_fail(&f, PSKV_EPROTO);
}
END_TEST

START_TEST(table_id)
{
    /* 64-bit FNV-1a reference values: workers in other languages must agree. */
    ck_assert_uint_eq(wire_table_id(""), 0xcbf29ce484222325ULL);
    ck_assert_uint_eq(wire_table_id("a"), 0xaf63dc4c8601ec8cULL);
    ck_assert_uint_eq(wire_table_id("foobar"), 0x85944171f73967e8ULL);
    ck_assert_uint_eq(wire_table_id("embedding"), wire_table_id("embedding"));
    const char *names[] = {"emb", "emb2", "Emb", "w", "W", "bias", "emb ", "2bme"};
    size_t n = sizeof names / sizeof names[0];
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            ck_assert_msg(wire_table_id(names[i]) != wire_table_id(names[j]),
                          "'%s' and '%s' share a table id", names[i], names[j]);
}
END_TEST

START_TEST(type_name)
{
    ck_assert_str_eq(wire_type_name(PSKV__MSG_TYPE__PUSH), "PUSH");
    ck_assert_str_eq(wire_type_name(PSKV__MSG_TYPE__PULL_REPLY), "PULL_REPLY");
    ck_assert_str_eq(wire_type_name(PSKV__MSG_TYPE__ERROR), "ERROR");
    ck_assert_str_eq(wire_type_name(99), "unknown");
    ck_assert_str_eq(wire_type_name(-1), "unknown");
}
END_TEST

/* Numbers not given out on this branch (reserved for others). */
static int code_given(int c) { return c != 23 && c != 24 && (c < 27 || c > 30) && c != 33; }

/* Error codes travel in Meta.error_code; every one has its own message. */
START_TEST(error_strings)
{
    for (int c = 0; c < PSKV_ERROR_MAX; c++) {
        const char *msg = pskv_strerror(c);
        ck_assert_ptr_nonnull(msg);
        if (!code_given(c))
            continue;
        ck_assert_str_ne(msg, "unknown error");
        ck_assert_str_eq(pskv_strerror(-c), msg);
        for (int d = 0; d < c; d++)
            if (code_given(d))
                ck_assert_str_ne(pskv_strerror(d), msg);
    }
    ck_assert_str_eq(pskv_strerror(PSKV_EPROTO), "protocol error");
    ck_assert_str_eq(pskv_strerror(PSKV_ERROR_MAX), "unknown error");
    ck_assert_str_eq(pskv_strerror(-PSKV_ERROR_MAX), "unknown error");
    ck_assert_str_eq(pskv_strerror(INT_MAX), "unknown error");
    ck_assert_str_eq(pskv_strerror(-INT_MAX), "unknown error");
}
END_TEST

/* A peer can send error_code = INT32_MIN; worker/lib/wpump.c and common/member.c pass
 * it to pskv_strerror, whose `code = -code` overflows (UB) and then indexes
 * messages[INT_MIN]: a crash. Fixed; kept as a regression test. */
START_TEST(error_string_int_min)
{
    ck_assert_str_eq(pskv_strerror(INT_MIN), "unknown error");
}
END_TEST

/* wire_send then wire_recv over an inproc pair gives back the same message. */
START_TEST(send_recv_roundtrip)
{
    void *ctx = zmq_ctx_new();
    void *a = zmq_socket(ctx, ZMQ_PAIR), *b = zmq_socket(ctx, ZMQ_PAIR);
    ck_assert_int_eq(zmq_bind(a, "inproc://wire-test"), 0);
    ck_assert_int_eq(zmq_connect(b, "inproc://wire-test"), 0);

    wire_msg m;
    char why[256];
    ck_assert_int_eq(wire_recv(a, 0, &m, why, sizeof why), -PSKV_ETIMEDOUT);
    wire_msg_close(&m);

    uint64_t keys[3] = {3, 1, 4};
    float vals[3] = {2.5f, -1, 0.125f};
    zmq_msg_t km, vm;
    zmq_msg_init_size(&km, sizeof keys);
    memcpy(zmq_msg_data(&km), keys, sizeof keys);
    zmq_msg_init_size(&vm, sizeof vals);
    memcpy(zmq_msg_data(&vm), vals, sizeof vals);
    Pskv__Meta meta;
    meta_counts(&meta, PSKV__MSG_TYPE__PUSH, 3, 1);
    meta.has_request_id = 1;
    meta.request_id = 42;
    ck_assert_int_eq(wire_send(b, NULL, &meta, &km, &vm), 0);

    zmq_pollitem_t it = {a, 0, ZMQ_POLLIN, 0};
    ck_assert_int_eq(zmq_poll(&it, 1, 2000), 1);
    ck_assert_int_eq(wire_recv(a, 0, &m, why, sizeof why), 0);
    ck_assert_uint_eq(m.meta->request_id, 42);
    ck_assert_uint_eq(m.nkeys, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(m.keys[i], keys[i]);
        ck_assert_float_eq(m.vals[i], vals[i]);
    }
    wire_msg_close(&m);

    /* An error reply carries the code, the reason and the request id. */
    ck_assert_int_eq(wire_send_error(b, NULL, &meta, 9, 3, -PSKV_ERANGE, "key 7 not here", 0), 0);
    ck_assert_int_eq(zmq_poll(&it, 1, 2000), 1);
    ck_assert_int_eq(wire_recv(a, 0, &m, why, sizeof why), 0);
    ck_assert_int_eq(m.meta->type, PSKV__MSG_TYPE__ERROR);
    ck_assert_int_eq(m.meta->error_code, PSKV_ERANGE);
    ck_assert_str_eq(m.meta->error, "key 7 not here");
    ck_assert_uint_eq(m.meta->request_id, 42);
    ck_assert_uint_eq(m.meta->job_id, 9);
    wire_msg_close(&m);

    /* Four frames: refused, and the rest of the message is drained. */
    for (int i = 0; i < 4; i++)
        ck_assert_int_ge(zmq_send(b, "x", 1, i < 3 ? ZMQ_SNDMORE : 0), 0);
    ck_assert_int_eq(zmq_poll(&it, 1, 2000), 1);
    ck_assert_int_eq(wire_recv(a, 0, &m, why, sizeof why), -PSKV_EPROTO);
    wire_msg_close(&m);
    ck_assert_int_eq(wire_recv(a, 0, &m, why, sizeof why), -PSKV_ETIMEDOUT);
    wire_msg_close(&m);

    zmq_close(a);
    zmq_close(b);
    zmq_ctx_term(ctx);
}
END_TEST

/* A small push (one key, one float) received into an array slot and moved to
 * another, as a server does with the messages it parks: keys and vals still read
 * the message's bytes after the old slot is overwritten (ZeroMQ keeps frames of up
 * to 33 bytes inside the zmq_msg_t itself). */
START_TEST(moved_message_keeps_its_frames)
{
    void *ctx = zmq_ctx_new();
    void *a = zmq_socket(ctx, ZMQ_PAIR), *b = zmq_socket(ctx, ZMQ_PAIR);
    ck_assert_int_eq(zmq_bind(a, "inproc://wire-move"), 0);
    ck_assert_int_eq(zmq_connect(b, "inproc://wire-move"), 0);
    uint64_t key = 77;
    float val = 3.5f;
    zmq_msg_t km, vm;
    zmq_msg_init_size(&km, sizeof key);
    memcpy(zmq_msg_data(&km), &key, sizeof key);
    zmq_msg_init_size(&vm, sizeof val);
    memcpy(zmq_msg_data(&vm), &val, sizeof val);
    Pskv__Meta meta;
    meta_counts(&meta, PSKV__MSG_TYPE__PUSH, 1, 1);
    ck_assert_int_eq(wire_send(b, NULL, &meta, &km, &vm), 0);
    zmq_pollitem_t it = {a, 0, ZMQ_POLLIN, 0};
    ck_assert_int_eq(zmq_poll(&it, 1, 2000), 1);
    wire_msg slot[2];
    char why[256];
    ck_assert_int_eq(wire_recv(a, 0, &slot[1], why, sizeof why), 0);
    wire_msg_move(&slot[0], &slot[1]);
    memset(&slot[1], 0xff, sizeof slot[1]); /* the old place is reused */
    ck_assert_uint_eq(slot[0].nkeys, 1);
    ck_assert_uint_eq(slot[0].keys[0], 77);
    ck_assert_float_eq(slot[0].vals[0], 3.5f);
    wire_msg_close(&slot[0]);
    zmq_close(a);
    zmq_close(b);
    zmq_ctx_term(ctx);
}
END_TEST

/* A ROUTER as the daemons make it (net_socket: ROUTER_MANDATORY, a 5 s SNDTIMEO)
 * toward a peer that takes nothing: once the peer's queue is full wire_send_nowait
 * refuses at once (EAGAIN), where wire_send would wait out the SNDTIMEO; every
 * message it accepted arrives whole. */
START_TEST(nowait_never_waits)
{
    void *ctx = zmq_ctx_new();
    void *r = net_socket(ctx, ZMQ_ROUTER, 0, 0), *d = zmq_socket(ctx, ZMQ_DEALER);
    int one = 1;
    ck_assert_int_eq(zmq_setsockopt(r, ZMQ_SNDHWM, &one, sizeof one), 0);
    ck_assert_int_eq(zmq_setsockopt(d, ZMQ_RCVHWM, &one, sizeof one), 0);
    ck_assert_int_eq(zmq_setsockopt(d, ZMQ_ROUTING_ID, "rd", 2), 0);
    ck_assert_int_eq(zmq_bind(r, "inproc://wire-nowait"), 0);
    ck_assert_int_eq(zmq_connect(d, "inproc://wire-nowait"), 0);
    ck_assert_int_eq(zmq_send(d, "hi", 2, 0), 2); /* the ROUTER learns "rd" */
    char buf[8];
    ck_assert_int_eq(zmq_recv(r, buf, sizeof buf, 0), 2);
    ck_assert_int_eq(zmq_recv(r, buf, sizeof buf, 0), 2);
    zmq_msg_t rid;
    zmq_msg_init_size(&rid, 2);
    memcpy(zmq_msg_data(&rid), "rd", 2);
    Pskv__Meta meta;
    wire_meta_init(&meta, PSKV__MSG_TYPE__STATUS);
    int sent = 0, rc = 0;
    int64_t t0 = tu_now_ms();
    while (sent < 100 && (rc = wire_send_nowait(r, &rid, &meta, NULL, NULL)) == 0)
        sent++;
    int64_t took = tu_now_ms() - t0;
    int err = errno;
    ck_assert_int_eq(rc, -PSKV_ENET);
    ck_assert_int_eq(err, EAGAIN);
    ck_assert_int_ge(sent, 1);
    ck_assert_int_lt(took, 1000); /* wire_send: 5000 */
    wire_msg m;
    char why[256];
    zmq_pollitem_t it = {d, 0, ZMQ_POLLIN, 0};
    for (int i = 0; i < sent; i++) {
        ck_assert_int_eq(zmq_poll(&it, 1, 2000), 1);
        ck_assert_int_eq(wire_recv(d, 0, &m, why, sizeof why), 0);
        ck_assert_int_eq(m.meta->type, PSKV__MSG_TYPE__STATUS);
        wire_msg_close(&m);
    }
    zmq_msg_close(&rid);
    zmq_close(r);
    zmq_close(d);
    zmq_ctx_term(ctx);
}
END_TEST

Suite *wire_suite(void)
{
    Suite *s = suite_create("wire");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, meta_init_sets_version_and_type);
    tcase_add_test(tc, push_with_keys);
    tcase_add_test(tc, push_dense_run);
    tcase_add_test(tc, pull_with_keys_and_dense);
    tcase_add_test(tc, pull_reply);
    tcase_add_test(tc, follow_data_shapes);
    tcase_add_test(tc, control_message_without_payload);
    tcase_add_test(tc, replicate_close_shapes);
    tcase_add_test(tc, version_mismatch);
    tcase_add_test(tc, garbage_meta);
    tcase_add_test(tc, unknown_type);
    tcase_add_test(tc, wrong_frame_count);
    tcase_add_test(tc, keys_size_mismatch);
    tcase_add_test(tc, values_size_mismatch);
    tcase_add_test(tc, missing_counts);
    tcase_add_test(tc, unsupported_dtype_codec);
    tcase_add_test(tc, count_times_width_overflow);
    tcase_add_test(tc, first_key_overflow);
    tcase_add_loop_test(tc, unaligned_frames, 0, 2);
    suite_add_tcase(s, tc);
    TCase *misc = tcase_create("ids");
    tcase_add_test(misc, table_id);
    tcase_add_test(misc, type_name);
    tcase_add_test(misc, error_strings);
    tcase_add_test(misc, error_string_int_min);
    suite_add_tcase(s, misc);
    TCase *net = tcase_create("send-recv");
    tcase_add_test(net, send_recv_roundtrip);
    tcase_add_test(net, moved_message_keeps_its_frames);
    tcase_add_test(net, nowait_never_waits);
    suite_add_tcase(s, net);
    return s;
}
