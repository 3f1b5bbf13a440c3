#define _POSIX_C_SOURCE 200809L
#include "wire.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "fquant.h"
#include "half.h"
#include "metacodec.h"
#include "pskv_errors.h"
#include "zap.h"

#if defined(__SANITIZE_THREAD__)
#define WIRE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WIRE_TSAN 1
#endif
#endif
#ifdef WIRE_TSAN
#include <sanitizer/tsan_interface.h>
#endif

void wire_meta_init(Pskv__Meta *meta, Pskv__MsgType type)
{
    pskv__meta__init(meta);
    meta->version = PSKV_PROTO_VERSION;
    meta->type = type;
}

const char *wire_type_name(int type)
{
    const ProtobufCEnumValue *v =
        protobuf_c_enum_descriptor_get_value(&pskv__msg_type__descriptor, type);
    return v ? v->name : "unknown";
}

#define FAIL(code, ...)                                                                      \
    do {                                                                                     \
        snprintf(why, whylen, __VA_ARGS__);                                                  \
        rc = -(code);                                                                        \
        goto fail;                                                                           \
    } while (0)

/* Frames that each type carries after Meta. */
static void payload_shape(const Pskv__Meta *m, int *want_keys, int *want_vals)
{
    int dense_run = m->has_first_key;
    *want_keys = 0;
    *want_vals = 0;
    switch (m->type) {
    case PSKV__MSG_TYPE__FILL: /* the closing FILL of a partition carries no rows */
        if (!m->has_num_keys)
            break;
        /* fall through */
    case PSKV__MSG_TYPE__REPLICATE: /* a bsp close with no rows carries none */
        if (m->has_close && m->close && !m->has_num_keys)
            break;
        /* fall through */
    case PSKV__MSG_TYPE__PUSH:
        *want_keys = !dense_run && !m->keys_cached; /* keycache: a signature instead */
        *want_vals = m->type != PSKV__MSG_TYPE__PUSH || !m->has_shm_len; /* or in shm */
        break;
    case PSKV__MSG_TYPE__PULL:
        *want_keys = !dense_run && !(m->has_all && m->all) && !m->keys_cached;
        break;
    case PSKV__MSG_TYPE__LOOKUP:
        *want_keys = 1;
        break;
    case PSKV__MSG_TYPE__LOOKUP_REPLY:
        *want_vals = m->has_num_keys && m->num_keys > 0;
        break;
    case PSKV__MSG_TYPE__FOLLOW_DATA: /* rows with their keys; none: no frames */
        *want_keys = *want_vals = m->has_num_keys && m->num_keys > 0;
        *want_vals = *want_vals && !m->follow_removed; /* removed rows: keys only */
        break;
    case PSKV__MSG_TYPE__PULL_REPLY:
        if (m->has_all && m->all) { /* rows with their keys; none when the server has none */
            *want_keys = *want_vals = m->has_num_keys && m->num_keys > 0;
            break;
        }
        *want_vals = !m->has_shm_len; /* shared memory: the values are in the segment */
        break;
    case PSKV__MSG_TYPE__PIPE:
    case PSKV__MSG_TYPE__ALLREDUCE: /* an empty piece (n < N) or an abort carries none */
        *want_vals = dense_run && m->has_num_keys && m->num_keys > 0;
        break;
    default:
        break;
    }
}

/* p rebased from inside src to the same offset in dst, or p when outside src. */
static const void *rebase(const void *p, const wire_msg *src, wire_msg *dst)
{
    const char *c = p, *lo = (const char *)src;
    if (p && c >= lo && c < lo + sizeof *src)
        return (const char *)dst + (c - lo);
    return p;
}

void wire_msg_move(wire_msg *dst, wire_msg *src)
{
    if (dst == src)
        return;
    const void *keys = src->keys, *vals = src->vals;
    memcpy(dst, src, sizeof *dst);
    dst->keys = rebase(keys, src, dst);
    dst->vals = rebase(vals, src, dst);
}

/* A shared-memory reference (shm_*: docs/protocol.md "Shared memory") only on a
 * PUSH, a PULL or a PULL_REPLY (not `all`), float32 values unpacked, its length
 * the values' bytes and its offset 4-aligned; a PUSH's and a PULL's name the
 * segment (the worker's host only until the server knows it). Whether it lies
 * inside the segment the receiver checks (sshm.h, wshm.h). */
static int has_shm(const Pskv__Meta *meta)
{
    return meta->has_shm_len || meta->has_shm_off || meta->shm_name || meta->shm_host;
}

static int check_shm(const Pskv__Meta *meta, uint64_t nvals, char *why, size_t whylen)
{
    int t = (int)meta->type;
    if (!has_shm(meta))
        return 0;
    int ok = (t == PSKV__MSG_TYPE__PUSH || t == PSKV__MSG_TYPE__PULL ||
              t == PSKV__MSG_TYPE__PULL_REPLY) && !(meta->has_all && meta->all) &&
             meta->has_shm_len && meta->has_shm_off && meta->has_shm_gen && !meta->wire &&
             !meta->quant && !(meta->zframes & FILTER_ZVALS) && nvals <= UINT64_MAX / 4 &&
             meta->shm_len == nvals * 4 && meta->shm_off % 4 == 0 &&
             (t == PSKV__MSG_TYPE__PULL_REPLY || meta->shm_name);
    if (ok)
        return 0;
    snprintf(why, whylen, "table id %llu: %s with a malformed shared-memory reference (gen %llu, "
             "offset %llu, length %llu for %llu values)", (unsigned long long)meta->table_id,
             wire_type_name(t), (unsigned long long)meta->shm_gen,
             (unsigned long long)meta->shm_off, (unsigned long long)meta->shm_len,
             (unsigned long long)nvals);
    return -PSKV_ESHMREF;
}

/* `wire` (the values' precision) only on a PUSH, a PULL_REPLY (not `all`) or a
 * REPLICATE of a push, at most 2; `loss_scale` only with it, on a PUSH or a
 * REPLICATE, and a power of two that dividing by is exact (half_scale_ok). */
static int check_value_wire(const Pskv__Meta *meta, char *why, size_t whylen)
{
    int t = (int)meta->type;
    int carries = t == PSKV__MSG_TYPE__PUSH || t == PSKV__MSG_TYPE__REPLICATE ||
                  (t == PSKV__MSG_TYPE__PULL_REPLY && !(meta->has_all && meta->all));
    if (meta->has_wire && (meta->wire > HALF_BF16 || !carries || (meta->has_close && meta->close))) {
        snprintf(why, whylen, "table id %llu: %s with wire precision %u",
                 (unsigned long long)meta->table_id, wire_type_name(t), meta->wire);
        return -PSKV_EPROTO;
    }
    if (meta->has_loss_scale &&
        (!meta->wire || t == PSKV__MSG_TYPE__PULL_REPLY || !half_scale_ok(meta->loss_scale))) {
        snprintf(why, whylen, "table id %llu: %s with loss scale %g (a power of two 2^-24..2^24, "
                 "on a 16-bit push only)", (unsigned long long)meta->table_id,
                 wire_type_name(t), (double)meta->loss_scale);
        return -PSKV_EPROTO;
    }
    return 0;
}

int wire_parse(wire_msg *m, const void *const *frames, const size_t *sizes, int n, char *why,
               size_t whylen)
{
    int rc = 0;
    m->meta = NULL;
    m->keys = NULL;
    m->vals = NULL; /* a shared-memory reference: the receiver points it (sshm.h, wshm.h) */
    m->nkeys = m->nvals = 0;
    m->own = m->own_keys = NULL;
    if (n < 1)
        FAIL(PSKV_EPROTO, "empty message");
    Pskv__Meta *meta = metacodec_unpack(frames[0], sizes[0], &m->meta_plain);
    if (!meta)
        FAIL(PSKV_EPROTO, "frame 0 (%zu bytes) is not a valid Meta", sizes[0]);
    m->meta = meta;
    if (meta->version != PSKV_PROTO_VERSION)
        FAIL(PSKV_EVERSION, "protocol version %u, expected %u", meta->version,
             PSKV_PROTO_VERSION);
    if (!protobuf_c_enum_descriptor_get_value(&pskv__msg_type__descriptor, (int)meta->type) ||
        meta->type == PSKV__MSG_TYPE__MSG_NONE)
        FAIL(PSKV_EPROTO, "unknown message type %d", (int)meta->type);
    int want_keys, want_vals;
    payload_shape(meta, &want_keys, &want_vals);
    int want = 1 + want_keys + want_vals;
    if (n != want)
        FAIL(PSKV_EPROTO, "%s with %d frames, expected %d", wire_type_name((int)meta->type), n,
             want);
    if (want_keys + want_vals == 0 && !has_shm(meta) &&
        (meta->type != PSKV__MSG_TYPE__PULL || (meta->has_all && meta->all)))
        return 0;

    uint64_t nkeys = meta->num_keys;
    if (!meta->has_num_keys || nkeys == 0)
        FAIL(PSKV_EPROTO, "%s without num_keys", wire_type_name((int)meta->type));
    if (!meta->has_width || meta->width == 0)
        FAIL(PSKV_EPROTO, "%s without width", wire_type_name((int)meta->type));
    if (meta->dtype != 0 || (meta->zframes & ~3u) ||
        (meta->codec != FCODEC_NONE && meta->codec != FCODEC_LZ4 && meta->codec != FCODEC_ZSTD) ||
        (meta->zframes && meta->codec == FCODEC_NONE))
        FAIL(PSKV_EPROTO, "unsupported dtype %u / codec %u / zframes %u", meta->dtype,
             meta->codec, meta->zframes);
    if (meta->keys_cached && (meta->has_first_key || !meta->has_key_sig ||
                              (meta->type != PSKV__MSG_TYPE__PUSH &&
                               meta->type != PSKV__MSG_TYPE__PULL)))
        FAIL(PSKV_EPROTO, "keys_cached on a %s without key_sig or with a dense run",
             wire_type_name((int)meta->type));
    if (meta->has_first_key && nkeys > UINT64_MAX - meta->first_key)
        FAIL(PSKV_ERANGE, "dense run first_key %llu + num_keys %llu overflows",
             (unsigned long long)meta->first_key, (unsigned long long)nkeys);
    if (meta->has_span && (!meta->has_first_key || meta->span < nkeys ||
                           meta->span > UINT64_MAX - meta->first_key))
        FAIL(PSKV_ERANGE, "dense span %llu from %llu does not hold num_keys %llu",
             (unsigned long long)meta->span, (unsigned long long)meta->first_key,
             (unsigned long long)nkeys);
    if (nkeys > (UINT64_MAX / 8) / meta->width)
        FAIL(PSKV_EPROTO, "num_keys %llu x width %u overflows", (unsigned long long)nkeys,
             meta->width);
    uint64_t nvals = nkeys * meta->width;
    const void *data[WIRE_MAX_FRAMES] = {NULL};
    size_t raw[WIRE_MAX_FRAMES] = {0}, need_own = 0;
    int packed[WIRE_MAX_FRAMES] = {0};
    int f = 1;
    if (want_keys) {
        raw[f] = nkeys * 8;
        packed[f] = (meta->zframes & FILTER_ZKEYS) != 0;
        f++;
    }
    if (meta->ar_wire > HALF_BF16 || (meta->has_ar_wire && meta->type != PSKV__MSG_TYPE__ALLREDUCE))
        FAIL(PSKV_EPROTO, "%s with wire precision %u", wire_type_name((int)meta->type),
             meta->ar_wire);
    if ((rc = check_value_wire(meta, why, whylen)) < 0 ||
        (rc = check_shm(meta, nvals, why, whylen)) < 0)
        goto fail;
    size_t vsize = half_size((int)(meta->ar_wire ? meta->ar_wire : meta->wire)); /* 2: 16-bit */
    if (want_vals) { /* quantised values (fquant.h): the frame holds the blocks */
        raw[f] = meta->quant ? fquant_bytes(meta->quant, nvals) : nvals * vsize;
        packed[f] = (meta->zframes & FILTER_ZVALS) != 0;
        if (meta->quant && (!raw[f] || meta->type != PSKV__MSG_TYPE__PUSH || meta->wire))
            FAIL(PSKV_EPROTO, "quant %u on a %s%s", meta->quant, wire_type_name((int)meta->type),
                 meta->wire ? " with a 16-bit wire" : "");
        if (meta->quant || meta->wire) /* decoded to float32 below */
            need_own += nvals * 4;
    }
    for (f = 1; f < n; f++) {
        const char *what = want_keys && f == 1 ? "keys" : "values";
        if (packed[f] && (raw[f] > WIRE_MAX_UNPACKED || sizes[f] >= raw[f]))
            FAIL(PSKV_EPROTO, "table id %llu, filter %s: %s frame of %zu bytes for %zu "
                 "(compressed frames are smaller, at most %llu unpacked)",
                 (unsigned long long)meta->table_id, filter_codec_name(meta->codec), what,
                 sizes[f], raw[f], (unsigned long long)WIRE_MAX_UNPACKED);
        if (!packed[f] && sizes[f] != raw[f])
            FAIL(PSKV_EPROTO, "%s frame has %zu bytes for num_keys %llu x width %u "
                 "(expected %zu)", what, sizes[f], (unsigned long long)nkeys,
                 want_keys && f == 1 ? 1u : meta->width, raw[f]);
        /* ZeroMQ may hand small frames at any byte offset; copy those (never the
         * big ones, which it allocates whole) so that loads are aligned */
        if (packed[f] || (uintptr_t)frames[f] % 8)
            need_own += (raw[f] + 7) / 8 * 8;
    }
    char *own = NULL;
    if (need_own) {
        own = malloc(need_own);
        if (!own)
            FAIL(PSKV_ENOMEM, "out of memory");
        m->own = own;
    }
    for (f = 1; f < n; f++) {
        if (packed[f]) {
            char fwhy[200];
            if (filter_unpack(meta->codec, frames[f], sizes[f], own, raw[f], fwhy,
                              sizeof fwhy) < 0)
                FAIL(PSKV_EPROTO, "table id %llu, filter %s: %s frame refused: %s",
                     (unsigned long long)meta->table_id, filter_codec_name(meta->codec),
                     want_keys && f == 1 ? "keys" : "values", fwhy);
        } else if ((uintptr_t)frames[f] % 8) {
            memcpy(own, frames[f], sizes[f]);
        } else {
            data[f] = frames[f];
            continue;
        }
        data[f] = own;
        own += (raw[f] + 7) / 8 * 8;
    }
    if (want_keys)
        m->keys = data[1];
    if (want_vals && meta->quant) {
        char qwhy[160];
        if (fquant_decode(meta->quant, data[want_keys ? 2 : 1], nvals, (float *)(void *)own,
                          qwhy, sizeof qwhy) < 0)
            FAIL(PSKV_EPROTO, "table id %llu, filter %s: values refused: %s",
                 (unsigned long long)meta->table_id, fquant_name(meta->quant), qwhy);
        data[want_keys ? 2 : 1] = own;
    }
    if (want_vals && meta->wire) { /* fp16, bf16: to float32, divided by the loss scale */
        half_unpack_scaled((int)meta->wire, (float *)(void *)own,
                           (const uint16_t *)data[want_keys ? 2 : 1], nvals,
                           meta->has_loss_scale ? meta->loss_scale : 1.0f);
        data[want_keys ? 2 : 1] = own;
    }
    if (want_vals)
        m->vals = data[want_keys ? 2 : 1];
    m->nkeys = nkeys;
    m->nvals = nvals;
    return 0;
fail:
    metacodec_free(m->meta, m->meta_plain);
    m->meta = NULL;
    free(m->own);
    m->own = NULL;
    return rc;
}

/* The sender's address, and under CURVE its key, role and namespace binding (the
 * ZAP handler's User-Id, "ROLE KEY[ BINDING]": zap.h). Without CURVE there is no
 * User-Id: role, key and binding stay empty (m was zeroed). Per message, so no
 * snprintf (a few thousand instructions a message in the small-message profile). */
static void peer_of(zmq_msg_t *msg, wire_msg *m)
{
    const char *addr = zmq_msg_gets(msg, "Peer-Address");
    if (!addr)
        addr = "?";
    size_t n = strnlen(addr, sizeof m->peer - 1);
    memcpy(m->peer, addr, n);
    m->peer[n] = '\0';
    const char *uid = zmq_msg_gets(msg, "User-Id");
    if (!uid || !*uid)
        return;
    m->role = (int)zap_peer(msg, m->key, sizeof m->key);
    zap_peer_bind(msg, m->bind, sizeof m->bind);
}

int wire_recv(void *sock, int router, wire_msg *m, char *why, size_t whylen)
{
    memset(m, 0, sizeof *m);
    m->peer[0] = '?';
    int more = 1, count = 0, overflow = 0;
    const void *data[WIRE_MAX_FRAMES];
    size_t sizes[WIRE_MAX_FRAMES];
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        int flags = count == 0 ? ZMQ_DONTWAIT : 0;
        if (zmq_msg_recv(&part, sock, flags) < 0) {
            int e = errno;
            zmq_msg_close(&part);
            if (count == 0 && e == EAGAIN)
                return -PSKV_ETIMEDOUT;
            snprintf(why, whylen, "receive failed: %s", zmq_strerror(e));
            return -PSKV_ENET;
        }
        more = zmq_msg_more(&part);
        /* A ROUTER's routing-id frame carries no metadata: take the address
         * from the first payload frame. */
        if (count == (router ? 1 : 0))
            peer_of(&part, m);
        if (router && count == 0) {
            m->rid = part;
            m->has_rid = 1;
        } else if (m->nframes < WIRE_MAX_FRAMES) {
            m->frames[m->nframes++] = part;
        } else {
            overflow++;
            zmq_msg_close(&part);
        }
        count++;
    }
    if (overflow) {
        snprintf(why, whylen, "message with %d frames, at most %d allowed",
                 m->nframes + overflow, WIRE_MAX_FRAMES);
        return -PSKV_EPROTO;
    }
    for (int i = 0; i < m->nframes; i++) {
        data[i] = zmq_msg_data(&m->frames[i]);
        sizes[i] = zmq_msg_size(&m->frames[i]);
    }
    return wire_parse(m, data, sizes, m->nframes, why, whylen);
}

int wire_frame_lend(zmq_msg_t *msg, void *data, size_t len, zmq_free_fn *ffn, void *hint)
{
#ifdef WIRE_TSAN
    __tsan_release(hint ? hint : data);
#endif
    if (zmq_msg_init_data(msg, data, len, ffn, hint) == 0)
        return 0;
    ffn(data, hint); /* let go as ZeroMQ would have: the caller's undo is done */
    return -PSKV_ENOMEM;
}

void wire_frame_free(void *data, void *hint)
{
    (void)hint;
    wire_frame_returned(data);
    free(data);
}

vbuf *vbuf_new(size_t bytes)
{
    vbuf *b = malloc(sizeof *b + (bytes ? bytes : 1));
    if (!b)
        return NULL;
    atomic_init(&b->refs, 1);
    b->bytes = bytes;
    return b;
}

void vbuf_unref(void *data, void *hint)
{
    (void)data;
    vbuf *b = hint;
    if (b)
        wire_frame_returned(b);
    if (b && atomic_fetch_sub(&b->refs, 1) == 1)
        free(b);
}

int vbuf_lend(zmq_msg_t *msg, vbuf *b, const void *data, size_t len)
{
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return wire_frame_lend(msg, (void *)data, len, vbuf_unref, b);
}

void wire_frame_returned(const void *hint_or_data)
{
#ifdef WIRE_TSAN
    __tsan_acquire((void *)hint_or_data);
#else
    (void)hint_or_data;
#endif
}

void wire_msg_close(wire_msg *m)
{
    metacodec_free(m->meta, m->meta_plain);
    m->meta = NULL;
    free(m->own);
    m->own = NULL;
    free(m->own_keys);
    m->own_keys = NULL;
    for (int i = 0; i < m->nframes; i++)
        zmq_msg_close(&m->frames[i]);
    m->nframes = 0;
    if (m->has_rid)
        zmq_msg_close(&m->rid);
    m->has_rid = 0;
}

/* wire_send and wire_send_nowait: flags (0 or ZMQ_DONTWAIT) go on every frame. A
 * ROUTER checks its peer's queue on the routing id, a DEALER on the first frame:
 * the frames after it are never refused, so a message goes whole or not at all. */
static int send_message(void *sock, zmq_msg_t *rid, const Pskv__Meta *meta, zmq_msg_t *keys,
                        zmq_msg_t *vals, int flags)
{
    int rc = 0;
    if (!sock) { /* a peer whose connection was closed (it died): nothing to send on */
        errno = ENOTCONN;
        rc = -PSKV_ENET;
        goto out;
    }
    uint8_t fast[METACODEC_MAX_FAST]; /* the scalars a data message carries (metacodec.h) */
    size_t len = metacodec_pack(meta, fast, sizeof fast);
    zmq_msg_t head;
    if (zmq_msg_init_size(&head, len ? len : pskv__meta__get_packed_size(meta)) != 0) {
        rc = -PSKV_ENOMEM;
        goto out;
    }
    if (len)
        memcpy(zmq_msg_data(&head), fast, len);
    else
        pskv__meta__pack(meta, zmq_msg_data(&head));
    if (rid) {
        zmq_msg_t r;
        zmq_msg_init(&r);
        zmq_msg_copy(&r, rid);
        if (zmq_msg_send(&r, sock, ZMQ_SNDMORE | flags) < 0) {
            zmq_msg_close(&r);
            zmq_msg_close(&head);
            rc = -PSKV_ENET;
            goto out;
        }
    }
    if (zmq_msg_send(&head, sock, ((keys || vals) ? ZMQ_SNDMORE : 0) | flags) < 0) {
        zmq_msg_close(&head);
        rc = -PSKV_ENET;
        goto out;
    }
    if (keys) {
        if (zmq_msg_send(keys, sock, (vals ? ZMQ_SNDMORE : 0) | flags) < 0) {
            rc = -PSKV_ENET;
            goto out;
        }
        keys = NULL;
    }
    if (vals) {
        if (zmq_msg_send(vals, sock, flags) < 0) {
            rc = -PSKV_ENET;
            goto out;
        }
        vals = NULL;
    }
out:
    if (keys)
        zmq_msg_close(keys);
    if (vals)
        zmq_msg_close(vals);
    return rc;
}

int wire_send(void *sock, zmq_msg_t *rid, const Pskv__Meta *meta, zmq_msg_t *keys,
              zmq_msg_t *vals)
{
    return send_message(sock, rid, meta, keys, vals, 0);
}

int wire_send_nowait(void *sock, zmq_msg_t *rid, const Pskv__Meta *meta, zmq_msg_t *keys,
                     zmq_msg_t *vals)
{
    return send_message(sock, rid, meta, keys, vals, ZMQ_DONTWAIT);
}

int wire_send_error(void *sock, zmq_msg_t *rid, const Pskv__Meta *req, uint64_t job_id,
                    uint32_t sender, int code, const char *reason, uint64_t refused)
{
    Pskv__Meta m;
    wire_meta_init(&m, PSKV__MSG_TYPE__ERROR);
    m.has_job_id = 1;
    m.job_id = job_id;
    m.has_sender = 1;
    m.sender = sender;
    if (req && req->has_request_id) {
        m.has_request_id = 1;
        m.request_id = req->request_id;
    }
    if (req && req->has_table_id) {
        m.has_table_id = 1;
        m.table_id = req->table_id;
    }
    m.has_error_code = 1;
    m.error_code = code < 0 ? -code : code;
    m.error = (char *)reason;
    if (refused) {
        m.has_refused = 1;
        m.refused = refused;
    }
    return wire_send(sock, rid, &m, NULL, NULL);
}

uint64_t wire_table_id(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h ^= *p;
        h *= 0x100000001b3ULL;
    }
    return h;
}
