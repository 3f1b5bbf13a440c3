#include "metacodec.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* One Meta field as the codec reads it. */
typedef struct mfield {
    uint32_t off, qoff;  /* the value's offset; the has_ flag's or count's */
    uint8_t tag[3], ntag; /* the field's key, varint-encoded (field numbers < 2^18) */
    uint8_t type;         /* ProtobufCType */
    uint8_t wtype;        /* its wire type: 0 varint, 1 64-bit, 5 32-bit */
    uint8_t scalar;       /* 1: packed and unpacked here; 0: protobuf-c's */
    uint8_t required;
    uint8_t label;        /* ProtobufCLabel */
    uint8_t oneof;
    const void *dflt;     /* a string or message field's default pointer */
} mfield;

static mfield fields[512];
static unsigned nfields;
static uint16_t by_id[1024]; /* field number -> index + 1 (0: not a field the codec knows) */
static unsigned max_id;
static uint64_t required_mask; /* bit i: field i is required (the first 64 fields) */
static int usable;             /* 0: the descriptor has more than the tables hold */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void build(void)
{
    const ProtobufCMessageDescriptor *d = &pskv__meta__descriptor;
    if (d->n_fields > sizeof fields / sizeof *fields)
        return;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        mfield *m = &fields[i];
        if (f->id >= sizeof by_id / sizeof *by_id || f->id >= (1u << 18) ||
            (f->label == PROTOBUF_C_LABEL_REQUIRED && i >= 64))
            return;
        m->off = f->offset;
        m->qoff = f->quantifier_offset;
        m->type = (uint8_t)f->type;
        m->dflt = f->default_value;
        m->required = f->label == PROTOBUF_C_LABEL_REQUIRED;
        m->label = (uint8_t)f->label;
        m->oneof = (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0;
        switch (f->type) {
        case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_BOOL: case PROTOBUF_C_TYPE_ENUM:
            m->wtype = 0;
            m->scalar = 1;
            break;
        case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_SFIXED64: case PROTOBUF_C_TYPE_DOUBLE:
            m->wtype = 1;
            m->scalar = 1;
            break;
        case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_SFIXED32: case PROTOBUF_C_TYPE_FLOAT:
            m->wtype = 5;
            m->scalar = 1;
            break;
        default: /* strings, bytes, messages */
            m->scalar = 0;
        }
        if (f->label == PROTOBUF_C_LABEL_REPEATED || (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) ||
            (f->label != PROTOBUF_C_LABEL_OPTIONAL && f->label != PROTOBUF_C_LABEL_REQUIRED))
            m->scalar = 0;
        uint32_t key = f->id << 3 | m->wtype;
        m->ntag = 0;
        do {
            m->tag[m->ntag++] = (uint8_t)((key & 0x7f) | (key > 0x7f ? 0x80 : 0));
            key >>= 7;
        } while (key);
        if (m->scalar)
            by_id[f->id] = (uint16_t)(i + 1);
        if (m->required)
            required_mask |= 1ull << i;
        if (f->id > max_id)
            max_id = f->id;
    }
    nfields = d->n_fields;
    usable = 1;
}

static inline size_t put_varint(uint8_t *o, uint64_t v)
{
    size_t n = 0;
    while (v > 0x7f) {
        o[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    o[n++] = (uint8_t)v;
    return n;
}

/* 1 when field f (not one packed here) is present: protobuf-c would pack it. */
static int present(const mfield *f, const char *m)
{
    if (f->oneof || f->required)
        return 1;
    if (f->label == PROTOBUF_C_LABEL_REPEATED)
        return *(const size_t *)(const void *)(m + f->qoff) != 0;
    if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE) {
        const void *p = *(const void *const *)(const void *)(m + f->off);
        return p && p != f->dflt;
    }
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL) /* bytes: its has_ flag */
        return *(const protobuf_c_boolean *)(const void *)(m + f->qoff) != 0;
    return 1;
}

size_t metacodec_pack(const Pskv__Meta *meta, uint8_t *out, size_t cap)
{
    pthread_once(&once, build);
    if (!usable || cap < METACODEC_MAX_FAST || meta->base.n_unknown_fields ||
        meta->base.descriptor != &pskv__meta__descriptor)
        return 0;
    const char *m = (const char *)meta;
    size_t n = 0;
    for (unsigned i = 0; i < nfields; i++) {
        const mfield *f = &fields[i];
        if (!f->scalar) {
            if (present(f, m))
                return 0;
            continue;
        }
        if (!f->required && !*(const protobuf_c_boolean *)(const void *)(m + f->qoff))
            continue;
        memcpy(out + n, f->tag, 3);
        n += f->ntag;
        const void *v = m + f->off;
        switch (f->type) {
        case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_ENUM: { /* negative: 10 bytes */
            int32_t x;
            memcpy(&x, v, 4);
            n += put_varint(out + n, (uint64_t)(int64_t)x);
            break;
        }
        case PROTOBUF_C_TYPE_SINT32: {
            int32_t x;
            memcpy(&x, v, 4);
            n += put_varint(out + n, (uint32_t)(((uint32_t)x << 1) ^ (uint32_t)(x >> 31)));
            break;
        }
        case PROTOBUF_C_TYPE_UINT32: {
            uint32_t x;
            memcpy(&x, v, 4);
            n += put_varint(out + n, x);
            break;
        }
        case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_UINT64: {
            uint64_t x;
            memcpy(&x, v, 8);
            n += put_varint(out + n, x);
            break;
        }
        case PROTOBUF_C_TYPE_SINT64: {
            int64_t x;
            memcpy(&x, v, 8);
            n += put_varint(out + n, ((uint64_t)x << 1) ^ (uint64_t)(x >> 63));
            break;
        }
        case PROTOBUF_C_TYPE_BOOL: {
            protobuf_c_boolean x;
            memcpy(&x, v, sizeof x);
            out[n++] = x ? 1 : 0;
            break;
        }
        case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_SFIXED64: case PROTOBUF_C_TYPE_DOUBLE:
            memcpy(out + n, v, 8); /* little-endian hosts only (as protobuf-c's fast path) */
            n += 8;
            break;
        default: /* 32-bit fixed, float */
            memcpy(out + n, v, 4);
            n += 4;
            break;
        }
    }
    return n;
}

/* A varint at *p (< end): its value, *p moved past it; 0 with *ok = 0 when it does
 * not end within 10 bytes or the data. */
static inline uint64_t get_varint(const uint8_t **p, const uint8_t *end, int *ok)
{
    uint64_t v = 0;
    const uint8_t *q = *p;
    for (unsigned s = 0; s < 70 && q < end; s += 7) {
        uint8_t b = *q++;
        v |= s < 64 ? (uint64_t)(b & 0x7f) << s : 0;
        if (!(b & 0x80)) {
            *p = q;
            return v;
        }
    }
    *ok = 0;
    return 0;
}

/* The fast decode: 0 when the bytes hold anything but known scalar fields, well
 * formed, with every required one (protobuf-c decides those). */
static int unpack_scalars(Pskv__Meta *meta, const uint8_t *p, size_t len)
{
    char *m = (char *)meta;
    const uint8_t *end = p + len;
    uint64_t seen = 0;
    int ok = 1;
    while (p < end) {
        uint64_t key = get_varint(&p, end, &ok);
        if (!ok || (key >> 3) > max_id || !by_id[key >> 3])
            return 0;
        unsigned i = by_id[key >> 3] - 1u;
        const mfield *f = &fields[i];
        if ((key & 7) != f->wtype)
            return 0;
        void *v = m + f->off;
        if (f->wtype == 0) {
            uint64_t x = get_varint(&p, end, &ok);
            if (!ok)
                return 0;
            switch (f->type) {
            case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_UINT64:
                memcpy(v, &x, 8);
                break;
            case PROTOBUF_C_TYPE_SINT64: {
                int64_t y = (int64_t)(x >> 1) ^ -(int64_t)(x & 1);
                memcpy(v, &y, 8);
                break;
            }
            case PROTOBUF_C_TYPE_SINT32: {
                uint32_t u = (uint32_t)x;
                int32_t y = (int32_t)(u >> 1) ^ -(int32_t)(u & 1);
                memcpy(v, &y, 4);
                break;
            }
            case PROTOBUF_C_TYPE_BOOL: {
                protobuf_c_boolean y = x != 0;
                memcpy(v, &y, sizeof y);
                break;
            }
            default: { /* int32, uint32, enum: the low 32 bits */
                uint32_t y = (uint32_t)x;
                memcpy(v, &y, 4);
            }
            }
        } else {
            size_t w = f->wtype == 1 ? 8 : 4;
            if ((size_t)(end - p) < w)
                return 0;
            memcpy(v, p, w);
            p += w;
        }
        if (f->required)
            seen |= 1ull << i;
        else
            *(protobuf_c_boolean *)(void *)(m + f->qoff) = 1;
    }
    return seen == required_mask;
}

Pskv__Meta *metacodec_unpack(const uint8_t *data, size_t len, int *plain)
{
    pthread_once(&once, build);
    *plain = 0;
    if (usable) {
        Pskv__Meta *m = malloc(sizeof *m);
        if (!m)
            return NULL;
        pskv__meta__init(m);
        if (unpack_scalars(m, data, len)) {
            *plain = 1;
            return m;
        }
        free(m);
    }
    return pskv__meta__unpack(NULL, len, data);
}

void metacodec_free(Pskv__Meta *m, int plain)
{
    if (plain)
        free(m);
    else if (m)
        pskv__meta__free_unpacked(m, NULL);
}
