/* common/metacodec.c against protobuf-c: the same bytes packed, the same Meta
 * unpacked, the same inputs refused (random scalar messages, then each mutated). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "metacodec.h"
#include "suites.h"

static uint64_t rnd_state = 88172645463325252ull;
static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

/* A value of the kind a field holds: small, large, negative, zero. */
static uint64_t value(void)
{
    switch (rnd() % 4) {
    case 0: return rnd() % 200;
    case 1: return rnd();
    case 2: return (uint64_t)-(int64_t)(rnd() % 1000);
    default: return 0;
    }
}

/* A Meta with a random subset of its scalar fields set (and version, type). */
static void random_meta(Pskv__Meta *m)
{
    const ProtobufCMessageDescriptor *d = &pskv__meta__descriptor;
    pskv__meta__init(m);
    char *b = (char *)m;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->label == PROTOBUF_C_LABEL_REPEATED || f->type == PROTOBUF_C_TYPE_STRING ||
            f->type == PROTOBUF_C_TYPE_BYTES || f->type == PROTOBUF_C_TYPE_MESSAGE)
            continue;
        if (f->label != PROTOBUF_C_LABEL_REQUIRED && rnd() % 4)
            continue;
        uint64_t v = value();
        switch (f->type) {
        case PROTOBUF_C_TYPE_BOOL: { protobuf_c_boolean x = (int)(v & 1); memcpy(b + f->offset, &x, sizeof x); break; }
        case PROTOBUF_C_TYPE_FLOAT: { float x = (float)(int64_t)v / 7.0f; memcpy(b + f->offset, &x, 4); break; }
        case PROTOBUF_C_TYPE_DOUBLE: { double x = (double)(int64_t)v / 3.0; memcpy(b + f->offset, &x, 8); break; }
        case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_SINT64:
        case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_SFIXED64:
            memcpy(b + f->offset, &v, 8);
            break;
        default: { uint32_t x = (uint32_t)v; memcpy(b + f->offset, &x, 4); }
        }
        if (f->label == PROTOBUF_C_LABEL_OPTIONAL)
            *(protobuf_c_boolean *)(void *)(b + f->quantifier_offset) = 1;
    }
}

/* protobuf-c's bytes of m into out; their length. */
static size_t slow_pack(const Pskv__Meta *m, uint8_t *out, size_t cap)
{
    size_t n = pskv__meta__get_packed_size(m);
    ck_assert_uint_le(n, cap);
    return pskv__meta__pack(m, out);
}

/* Unpacks data both ways: both refuse it, or both give the same Meta (compared by
 * protobuf-c's bytes of each). */
static void same_unpack(const uint8_t *data, size_t len)
{
    int plain = -1;
    Pskv__Meta *fast = metacodec_unpack(data, len, &plain);
    Pskv__Meta *slow = pskv__meta__unpack(NULL, len, data);
    LOOP_ASSERT((fast == NULL) == (slow == NULL), "fast %p, protobuf-c %p for %zu bytes",
                (void *)fast, (void *)slow, len);
    if (fast) {
        static uint8_t a[8192], b[8192];
        size_t na = slow_pack(fast, a, sizeof a), nb = slow_pack(slow, b, sizeof b);
        LOOP_ASSERT(na == nb && !memcmp(a, b, na), "decoded differently (%zu / %zu bytes)", na,
                    nb);
    }
    metacodec_free(fast, plain);
    if (slow)
        pskv__meta__free_unpacked(slow, NULL);
}

START_TEST(metacodec_matches_protobuf_c)
{
    for (int it = 0; it < 3000; it++) {
        Pskv__Meta m;
        random_meta(&m);
        uint8_t fast[METACODEC_MAX_FAST], slow[8192];
        size_t nf = metacodec_pack(&m, fast, sizeof fast), ns = slow_pack(&m, slow, sizeof slow);
        LOOP_ASSERT(nf == ns && !memcmp(fast, slow, ns), "packed %zu bytes, protobuf-c %zu", nf,
                    ns);
        int plain = 0;
        Pskv__Meta *u = metacodec_unpack(slow, ns, &plain);
        LOOP_ASSERT(u && plain == 1, "a scalar Meta not decoded by the fast path");
        metacodec_free(u, plain);
        same_unpack(slow, ns);
        /* mutated: truncated, a byte changed, a byte appended */
        same_unpack(slow, rnd() % (ns + 1));
        uint8_t mut[8192];
        memcpy(mut, slow, ns);
        mut[rnd() % ns] = (uint8_t)rnd();
        same_unpack(mut, ns);
        mut[ns] = (uint8_t)rnd();
        same_unpack(mut, ns + 1);
    }
}
END_TEST

START_TEST(metacodec_leaves_the_rest_to_protobuf_c)
{
    Pskv__Meta m;
    pskv__meta__init(&m);
    m.version = 1;
    m.type = PSKV__MSG_TYPE__ERROR;
    m.error = (char *)"refused";
    uint8_t fast[METACODEC_MAX_FAST], slow[512];
    ck_assert_uint_eq(metacodec_pack(&m, fast, sizeof fast), 0); /* a string */
    size_t ns = slow_pack(&m, slow, sizeof slow);
    int plain = 1;
    Pskv__Meta *u = metacodec_unpack(slow, ns, &plain);
    ck_assert_ptr_nonnull(u);
    ck_assert_int_eq(plain, 0);
    ck_assert_str_eq(u->error, "refused");
    metacodec_free(u, plain);
    uint64_t ids[2] = {5, 7};
    m.error = NULL;
    m.n_folded_ids = 2; /* a repeated field */
    m.folded_ids = ids;
    ck_assert_uint_eq(metacodec_pack(&m, fast, sizeof fast), 0);
    same_unpack(slow, slow_pack(&m, slow, sizeof slow));
    m.n_folded_ids = 0;
    ck_assert_uint_gt(metacodec_pack(&m, fast, sizeof fast), 0);
    ck_assert_uint_eq(metacodec_pack(&m, fast, 100), 0); /* a short buffer */
    /* no type (required): refused by both */
    uint8_t only_version[2] = {0x08, 0x01};
    u = metacodec_unpack(only_version, 2, &plain);
    ck_assert_ptr_null(u);
    same_unpack(only_version, 2);
}
END_TEST

Suite *metacodec_suite(void)
{
    Suite *s = suite_create("metacodec");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, metacodec_matches_protobuf_c);
    tcase_add_test(tc, metacodec_leaves_the_rest_to_protobuf_c);
    suite_add_tcase(s, tc);
    return s;
}
