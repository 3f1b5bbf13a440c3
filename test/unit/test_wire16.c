/* 16-bit table values on the wire (Meta `wire`, `loss_scale`; docs/protocol.md,
 * "Wire precision"): wire_parse converts a PUSH, PULL_REPLY or REPLICATE's fp16 or
 * bf16 values to float and divides by the loss scale, exactly, so that a server
 * re-packing them (times the scale) for its successor sends the same bits; and it
 * refuses the field where it does not belong. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "half.h"
#include "pskv_errors.h"
#include "suites.h"
#include "wire.h"

/* Parses Meta plus up to two frames (keys when given, then values). */
static int parse16(const Pskv__Meta *meta, const void *keys, size_t klen, const void *vals,
                   size_t vlen, wire_msg *m)
{
    uint8_t head[256];
    size_t len = pskv__meta__get_packed_size(meta);
    ck_assert_uint_le(len, sizeof head);
    pskv__meta__pack(meta, head);
    const void *data[3] = {head};
    size_t size[3] = {len};
    int n = 1;
    if (keys) {
        data[n] = keys;
        size[n++] = klen;
    }
    if (vals) {
        data[n] = vals;
        size[n++] = vlen;
    }
    char why[256];
    memset(m, 0, sizeof *m);
    int rc = wire_parse(m, data, size, n, why, sizeof why);
    if (rc < 0)
        ck_assert_msg(why[0] && m->meta == NULL && m->own == NULL, "refusal without reason");
    return rc;
}

static void run_meta(Pskv__Meta *m, Pskv__MsgType type, uint64_t n, uint32_t wire)
{
    wire_meta_init(m, type);
    m->has_first_key = m->has_num_keys = m->has_width = 1;
    m->num_keys = n;
    m->width = 1;
    m->has_wire = wire != 0;
    m->wire = wire;
}

START_TEST(push_fp16_scaled_exact)
{
    const float x[6] = {1e-6f, -3.0f, 0.5f, 0x1p-20f, 100.0f, -7e-8f};
    const float S = 1024.0f;
    uint16_t h[6], again[6];
    half_pack_scaled(HALF_FP16, h, x, 6, S);
    ck_assert_uint_ne(h[0], 0); /* 1e-6 flushes to 0 unscaled (fp16's least is 6e-8) */
    Pskv__Meta meta;
    run_meta(&meta, PSKV__MSG_TYPE__PUSH, 6, HALF_FP16);
    meta.has_loss_scale = 1;
    meta.loss_scale = S;
    wire_msg m;
    ck_assert_int_eq(parse16(&meta, NULL, 0, h, sizeof h, &m), 0);
    ck_assert_uint_eq(m.nvals, 6);
    for (int i = 0; i < 6; i++)
        ck_assert(m.vals[i] == half_fp16_to(h[i]) / S);
    ck_assert(fabsf(m.vals[0] - 1e-6f) < 1e-9f);
    half_pack_scaled(HALF_FP16, again, m.vals, 6, S); /* what a forward sends */
    ck_assert_mem_eq(again, h, sizeof h);
    wire_msg_close(&m);
}
END_TEST

START_TEST(keyed_bf16_and_pull_reply)
{
    uint64_t keys[2] = {3, 1u << 30};
    const float x[4] = {1.5f, -2.0f, 3e30f, 1e-30f};
    uint16_t h[4];
    half_pack(HALF_BF16, h, x, 4);
    Pskv__Meta meta;
    wire_meta_init(&meta, PSKV__MSG_TYPE__REPLICATE);
    meta.has_num_keys = meta.has_width = meta.has_wire = 1;
    meta.num_keys = 2;
    meta.width = 2;
    meta.wire = HALF_BF16;
    wire_msg m;
    ck_assert_int_eq(parse16(&meta, keys, sizeof keys, h, sizeof h, &m), 0);
    for (int i = 0; i < 4; i++)
        ck_assert(m.vals[i] == half_bf16_to(h[i]));
    ck_assert_uint_eq(m.keys[1], keys[1]);
    wire_msg_close(&m);
    run_meta(&meta, PSKV__MSG_TYPE__PULL_REPLY, 4, HALF_FP16);
    meta.has_first_key = 0;
    half_pack(HALF_FP16, h, x, 4);
    ck_assert_int_eq(parse16(&meta, NULL, 0, h, sizeof h, &m), 0);
    ck_assert(m.vals[0] == 1.5f && isinf(m.vals[2]));
    wire_msg_close(&m);
    /* 4 bytes a value where 2 are due */
    ck_assert_int_eq(parse16(&meta, NULL, 0, x, sizeof x, &m), -PSKV_EPROTO);
}
END_TEST

/* Loop test: a 16-bit field where it does not belong. */
START_TEST(refused_shapes)
{
    uint16_t h[4] = {0x3c00, 0x3c00, 0x3c00, 0x3c00};
    Pskv__Meta meta;
    run_meta(&meta, PSKV__MSG_TYPE__PUSH, 4, HALF_FP16);
    const void *vals = h;
    switch (_i) {
    case 0: meta.wire = 3; break;                                   /* no such precision */
    case 1: meta.has_loss_scale = 1; meta.loss_scale = 1000; break; /* not a power of two */
    case 2: meta.has_loss_scale = 1; meta.loss_scale = 0x1p25f; break; /* too large */
    case 3: meta.has_loss_scale = 1; meta.loss_scale = NAN; break;
    case 4: meta.has_wire = 0; meta.wire = 0; meta.has_loss_scale = 1; meta.loss_scale = 2;
        vals = NULL; break;                                         /* a scale on fp32 */
    case 5: meta.type = PSKV__MSG_TYPE__PULL_REPLY; meta.has_loss_scale = 1;
        meta.loss_scale = 2; break;                                 /* a scale on a reply */
    case 6: meta.has_quant = 1; meta.quant = 1; break;              /* int8 and fp16 */
    case 7: meta.type = PSKV__MSG_TYPE__PULL; vals = NULL; break;   /* a pull has no values */
    case 8: meta.type = PSKV__MSG_TYPE__REPLICATE; meta.has_close = meta.close = 1; break;
    case 9: meta.type = PSKV__MSG_TYPE__ALLREDUCE; break;           /* ar_wire's place */
    default: ck_abort_msg("no case %d", _i);
    }
    float f[4] = {1, 1, 1, 1};
    wire_msg m;
    int rc = parse16(&meta, NULL, 0, vals ? vals : f, vals ? sizeof h : sizeof f, &m);
    if (_i == 7) /* a PULL with a values frame: refused one way or the other */
        rc = parse16(&meta, NULL, 0, NULL, 0, &m);
    ck_assert_msg(rc == -PSKV_EPROTO, "case %d: rc %d", _i, rc);
}
END_TEST

Suite *wire16_suite(void)
{
    Suite *s = suite_create("wire16");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, push_fp16_scaled_exact);
    tcase_add_test(tc, keyed_bf16_and_pull_reply);
    tcase_add_loop_test(tc, refused_shapes, 0, 10);
    suite_add_tcase(s, tc);
    return s;
}
