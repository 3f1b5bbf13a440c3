/* libFuzzer target for wire_parse, the one place where bytes from the network
 * become a Meta, a key array and a value array.
 *
 * Input format (any byte string is a valid input):
 *   byte 0        bits 0-1: number of frames - 1 (1..4 frames);
 *                 bit 2: place every frame at an odd address (exercises the
 *                 aligned-copy path of wire_parse)
 *   then, for each frame but the last, a 2-byte little-endian length (clamped
 *   to what is left), then that many bytes; the last frame gets the rest.
 * Each frame is copied into its own exactly sized heap block so that
 * AddressSanitizer sees any read past a frame's end.
 *
 * With PSKV_FUZZ_TYPE set (a message type's name, PUSH, or number, 22), frame 0
 * gets "version 1, type T" appended: protobuf keeps the last value of a field,
 * so every input that decodes at all decodes as a T of this protocol version,
 * and the campaign spends its executions on that type's rules (`make fuzz` runs
 * one campaign per type this way).
 *
 * On success every key and value is read and the Meta is packed again, which
 * proves the pointers and counts wire_parse returned are usable; then the
 * message is released by wire_msg_close (nothing else is owned: nframes and
 * has_rid stay 0). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

#define FUZZ_MAX_FRAMES 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

static void check(int ok)
{
    if (!ok)
        abort();
}

static void touch(const wire_msg *m)
{
    uint64_t acc = 0;
    const Pskv__Meta *meta = m->meta;
    check(meta != NULL);
    check(meta->version == PSKV_PROTO_VERSION);
    if (m->keys) {
        check((uintptr_t)m->keys % 8 == 0);
        for (uint64_t i = 0; i < m->nkeys; i++)
            acc += m->keys[i];
    }
    if (m->vals) {
        check((uintptr_t)m->vals % 4 == 0);
        check(m->nvals == m->nkeys * meta->width);
        for (uint64_t i = 0; i < m->nvals; i++) {
            uint32_t bits;
            memcpy(&bits, &m->vals[i], sizeof bits);
            acc += bits;
        }
    }
    /* Packing walks every decoded field, strings and nested messages included. */
    size_t len = pskv__meta__get_packed_size(meta);
    uint8_t *buf = malloc(len ? len : 1);
    if (buf) {
        check(pskv__meta__pack(meta, buf) == len);
        for (size_t i = 0; i < len; i++)
            acc += buf[i];
        free(buf);
    }
    sink = acc;
}

/* The bytes appended to frame 0 under PSKV_FUZZ_TYPE: field 1 (version) = 1,
 * field 2 (type) = T as a varint; `forced` of them (0: no type forced). */
static uint8_t force[8];
static size_t forced;

static void choose_type(void)
{
    static int chosen;
    if (chosen)
        return;
    chosen = 1;
    const char *t = getenv("PSKV_FUZZ_TYPE");
    if (!t || !*t)
        return;
    const ProtobufCEnumValue *v =
        protobuf_c_enum_descriptor_get_value_by_name(&pskv__msg_type__descriptor, t);
    char *end;
    long n = v ? v->value : strtol(t, &end, 10);
    if ((!v && *end) || n <= 0 ||
        !protobuf_c_enum_descriptor_get_value(&pskv__msg_type__descriptor, (int)n)) {
        fprintf(stderr, "fuzz-wire: PSKV_FUZZ_TYPE=%s is no message type\n", t);
        exit(2);
    }
    force[forced++] = 0x08; /* version */
    force[forced++] = PSKV_PROTO_VERSION;
    force[forced++] = 0x10; /* type */
    for (unsigned long u = (unsigned long)n; u; u >>= 7)
        force[forced++] = (uint8_t)((u & 0x7f) | (u > 0x7f ? 0x80 : 0));
}

/* libFuzzer calls this once, before any input: a bad PSKV_FUZZ_TYPE ends the
 * campaign here, not as a "crash" of its first input (pskv-fuzz-replay does not
 * call it; the first input chooses there). */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    choose_type();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    choose_type();
    int n = (data[0] & 3) + 1;
    int odd = (data[0] >> 2) & 1;
    size_t pos = 1;

    uint8_t *blocks[FUZZ_MAX_FRAMES] = {0};
    const void *frames[FUZZ_MAX_FRAMES];
    size_t sizes[FUZZ_MAX_FRAMES];
    wire_msg m;
    char why[256];
    for (int i = 0; i < n; i++) {
        size_t len;
        if (i < n - 1) {
            size_t lo = pos < size ? data[pos] : 0;
            size_t hi = pos + 1 < size ? data[pos + 1] : 0;
            pos = pos + 2 < size ? pos + 2 : size;
            len = lo | hi << 8;
            if (len > size - pos)
                len = size - pos;
        } else {
            len = size - pos;
        }
        /* Exactly sized so a read past the end is caught; an odd frame gets one
         * spare byte in front. malloc(0) may return NULL, hence the 1. */
        size_t extra = i == 0 ? forced : 0;
        size_t alloc = len + extra + (size_t)odd;
        blocks[i] = malloc(alloc ? alloc : 1);
        if (!blocks[i])
            goto out;
        uint8_t *p = blocks[i] + odd;
        if (len)
            memcpy(p, data + pos, len);
        if (extra)
            memcpy(p + len, force, extra);
        frames[i] = p;
        sizes[i] = len + extra;
        pos += len;
    }

    memset(&m, 0, sizeof m); /* nframes = has_rid = 0: wire_msg_close frees meta and own only */
    why[0] = '\0';
    int rc = wire_parse(&m, frames, sizes, n, why, sizeof why);
    if (rc == 0) {
        touch(&m);
    } else {
        /* The contract: a negated code, a reason, and nothing left allocated. */
        check(rc < 0);
        check(m.meta == NULL && m.own == NULL);
        check(why[0] != '\0' && memchr(why, '\0', sizeof why) != NULL);
    }
    wire_msg_close(&m);
out:
    for (int i = 0; i < n; i++)
        free(blocks[i]);
    return 0;
}
