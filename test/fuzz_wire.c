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
 * On success every key and value is read and the Meta is packed again, which
 * proves the pointers and counts wire_parse returned are usable; then the
 * message is released by wire_msg_close (nothing else is owned: nframes and
 * has_rid stay 0). */
#include <stdint.h>
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
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
        size_t alloc = len + (size_t)odd;
        blocks[i] = malloc(alloc ? alloc : 1);
        if (!blocks[i])
            goto out;
        uint8_t *p = blocks[i] + odd;
        if (len)
            memcpy(p, data + pos, len);
        frames[i] = p;
        sizes[i] = len;
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
