/* The shapes of worker-to-worker messages that wire_parse accepts and refuses
 * (PIPE at the end). ALLREDUCE: a piece
 * with values (a dense run: first_key, no keys frame), an empty piece (n < N: no
 * values frame), an abort (no counts, no frame). */
#include <check.h>
#include <string.h>

#include "pskv_errors.h"
#include "suites.h"
#include "wire.h"

static int parse_ar(const Pskv__Meta *meta, const void *vals, size_t vlen, int nframes,
                    wire_msg *m)
{
    uint8_t head[256];
    size_t len = pskv__meta__get_packed_size(meta);
    ck_assert_uint_le(len, sizeof head);
    pskv__meta__pack(meta, head);
    const void *data[2] = {head, vals};
    size_t size[2] = {len, vlen};
    char why[256];
    memset(m, 0, sizeof *m);
    return wire_parse(m, data, size, nframes, why, sizeof why);
}

static void piece(Pskv__Meta *meta, uint64_t first, uint64_t n)
{
    wire_meta_init(meta, PSKV__MSG_TYPE__ALLREDUCE);
    meta->has_first_key = meta->has_num_keys = meta->has_width = 1;
    meta->first_key = first;
    meta->num_keys = n;
    meta->width = 1;
    meta->has_ar_n = meta->has_ar_step = 1;
    meta->ar_n = 1001;
    meta->ar_step = 2;
}

START_TEST(allreduce_piece_shapes)
{
    float vals[3] = {1, 2, 3};
    Pskv__Meta meta;
    wire_msg m;
    piece(&meta, 500, 3);
    ck_assert_int_eq(parse_ar(&meta, vals, sizeof vals, 2, &m), 0);
    ck_assert_uint_eq(m.nvals, 3);
    ck_assert_ptr_null(m.keys);
    ck_assert_uint_eq(m.meta->ar_n, 1001);
    wire_msg_close(&m);
    /* the values frame must hold num_keys floats, and be there */
    ck_assert_int_eq(parse_ar(&meta, vals, 8, 2, &m), -PSKV_EPROTO);
    ck_assert_int_eq(parse_ar(&meta, NULL, 0, 1, &m), -PSKV_EPROTO);
    /* an empty chunk's piece: no values frame, and none accepted */
    piece(&meta, 500, 0);
    ck_assert_int_eq(parse_ar(&meta, NULL, 0, 1, &m), 0);
    wire_msg_close(&m);
    ck_assert_int_eq(parse_ar(&meta, vals, sizeof vals, 2, &m), -PSKV_EPROTO);
    /* an abort: error fields, no counts, no frame */
    wire_meta_init(&meta, PSKV__MSG_TYPE__ALLREDUCE);
    meta.has_error_code = 1;
    meta.error_code = PSKV_EINVAL;
    meta.error = "rank 1: n differs";
    ck_assert_int_eq(parse_ar(&meta, NULL, 0, 1, &m), 0);
    ck_assert_str_eq(m.meta->error, "rank 1: n differs");
    wire_msg_close(&m);
}
END_TEST

/* A 16-bit piece (ar_wire 1 fp16, 2 bf16) holds 2 bytes a value; another
 * precision, or ar_wire on another type, is refused. */
START_TEST(allreduce_wire_shapes)
{
    uint16_t h[3] = {0x3c00, 0x4000, 0x4200};
    Pskv__Meta meta;
    wire_msg m;
    for (uint32_t wire = 1; wire <= 2; wire++) {
        piece(&meta, 500, 3);
        meta.has_ar_wire = 1;
        meta.ar_wire = wire;
        ck_assert_int_eq(parse_ar(&meta, h, sizeof h, 2, &m), 0);
        ck_assert_uint_eq(m.nvals, 3);
        ck_assert_uint_eq(m.meta->ar_wire, wire);
        ck_assert_int_eq(memcmp(m.vals, h, sizeof h), 0);
        wire_msg_close(&m);
        float f[3] = {1, 2, 3};
        ck_assert_int_eq(parse_ar(&meta, f, sizeof f, 2, &m), -PSKV_EPROTO);
    }
    piece(&meta, 500, 3);
    meta.has_ar_wire = 1;
    meta.ar_wire = 3;
    ck_assert_int_eq(parse_ar(&meta, h, sizeof h, 2, &m), -PSKV_EPROTO);
    meta.ar_wire = 0; /* fp32 given explicitly: 4 bytes a value */
    ck_assert_int_eq(parse_ar(&meta, h, sizeof h, 2, &m), -PSKV_EPROTO);
    /* on a PUSH: refused */
    piece(&meta, 500, 3);
    meta.type = PSKV__MSG_TYPE__PUSH;
    meta.has_ar_wire = 1;
    meta.ar_wire = 1;
    ck_assert_int_eq(parse_ar(&meta, h, sizeof h, 2, &m), -PSKV_EPROTO);
}
END_TEST

/* PIPE (--app pipeline): a micro-batch's floats in a dense run from 0, the
 * values frame required and of num_keys floats. */
START_TEST(pipe_shapes)
{
    float vals[4] = {1, 2, 3, 4};
    Pskv__Meta meta;
    wire_msg m;
    wire_meta_init(&meta, PSKV__MSG_TYPE__PIPE);
    meta.has_first_key = meta.has_num_keys = meta.has_width = 1;
    meta.num_keys = 4;
    meta.width = 1;
    meta.has_pipe_pipeline = meta.has_pipe_micro = meta.has_pipe_dir = meta.has_pipe_rows = 1;
    meta.pipe_micro = 17;
    meta.pipe_dir = 1;
    meta.pipe_rows = 2;
    ck_assert_int_eq(parse_ar(&meta, vals, sizeof vals, 2, &m), 0);
    ck_assert_uint_eq(m.nvals, 4);
    ck_assert_uint_eq(m.meta->pipe_micro, 17);
    ck_assert_float_eq(m.vals[3], 4.0f);
    wire_msg_close(&m);
    ck_assert_int_eq(parse_ar(&meta, vals, 12, 2, &m), -PSKV_EPROTO);
    ck_assert_int_eq(parse_ar(&meta, NULL, 0, 1, &m), -PSKV_EPROTO);
}
END_TEST

Suite *wire_ar_suite(void)
{
    Suite *s = suite_create("wire_allreduce");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, allreduce_piece_shapes);
    tcase_add_test(tc, allreduce_wire_shapes);
    tcase_add_test(tc, pipe_shapes);
    suite_add_tcase(s, tc);
    return s;
}
