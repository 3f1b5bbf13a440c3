/* The message codec: one logical message is a ZeroMQ multipart message
 *   [routing id (ROUTER side only)] Meta [keys] [values]
 * Meta is protobuf-c; keys are a little-endian uint64 array, values raw float32.
 * wire_parse checks everything that can be checked without the receiver's state
 * (version, type, frame count, sizes against counts, overflow); the receiver then
 * checks job id, epoch, table and ranges. Frames from the network are never trusted.
 *
 * OWNS   nothing between calls: a wire_msg owns its frames, its decoded Meta and
 *        any aligned copy until wire_msg_close.
 * THREAD any; a socket only from the thread that owns it (ZeroMQ's rule).
 * NEVER  copies a key or value frame that arrived 8-byte aligned (only small
 *        unaligned ones are copied, so that loads are aligned); never waits in
 *        wire_recv; a send may wait up to the socket's send time-out (net.h). */
#ifndef PSKV_WIRE_H
#define PSKV_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "pskv.pb-c.h"

#define PSKV_PROTO_VERSION 1
#define WIRE_MAX_FRAMES 3
#define WIRE_MAX_UNPACKED (1ull << 30) /* bytes a compressed frame may unpack to */

typedef struct wire_msg {
    zmq_msg_t rid;               /* routing id, when received on a ROUTER */
    int has_rid;
    zmq_msg_t frames[WIRE_MAX_FRAMES];
    int nframes;                 /* frames initialised in frames[] */
    Pskv__Meta *meta;            /* decoded frame 0, owned */
    int meta_plain;              /* meta holds no allocation but itself (metacodec.h) */
    const uint64_t *keys;        /* NULL for a dense run (meta->first_key) */
    const float *vals;           /* NULL when the type carries no values; an fp16 or bf16
                                    ALLREDUCE piece (meta->ar_wire): nvals uint16_t */
    uint64_t nkeys;              /* meta->num_keys */
    uint64_t nvals;              /* values in vals: nkeys * width */
    void *own;                   /* aligned copies of unaligned frames and unpacked
                                    (filter.h) ones, owned */
    void *own_keys;              /* keys a keycache resolved (server), owned */
    char peer[64];               /* sender address for logs */
    int role;                    /* the sender key's role (key_role) under CURVE, else 0 */
    char key[41];                /* the sender's public key (Z85) under CURVE, else "" */
    char bind[160];              /* its key's namespace binding (KEY_BIND, keys.h): "" =
                                    every namespace, read and write */
} wire_msg;

/* Moves a received message to another place (dst must not overlap src unless it
 * is src): keys and vals may point into a small frame's bytes held inside its
 * zmq_msg_t, so they are rebased onto dst's copy. src must not be used or closed
 * afterwards. */
void wire_msg_move(wire_msg *dst, wire_msg *src);

/* Sets version and type on a fresh Meta (callers fill the rest). */
void wire_meta_init(Pskv__Meta *meta, Pskv__MsgType type);

/* Validates and decodes frames[0..n-1] (Meta first) into m->meta, keys, vals.
 * The frames must outlive m. Returns 0 or a negated PSKV_E* with the reason in
 * `why`. On failure m holds no allocation. */
int wire_parse(wire_msg *m, const void *const *frames, const size_t *sizes, int n, char *why,
               size_t whylen);

/* Receives one whole multipart message from `sock` (a ROUTER when `router`),
 * non-blocking, and parses it. Returns 0, -PSKV_ETIMEDOUT when nothing is
 * waiting, -PSKV_ENET on a socket error, or the wire_parse error (m->peer and the
 * reason in `why` are set; m must still be released with wire_msg_close, which
 * keeps the routing id usable for an error reply until then). */
int wire_recv(void *sock, int router, wire_msg *m, char *why, size_t whylen);

/* Releases everything m holds. Safe on a zeroed or already closed m. */
void wire_msg_close(wire_msg *m);

/* Sends Meta plus optional key and value frames (ownership of the zmq_msg_t
 * frames passes to ZeroMQ; they are closed on failure too). `rid` is the routing
 * id to send to (ROUTER) or NULL. A NULL sock (a dead peer's closed connection)
 * sends nothing (errno ENOTCONN). Returns 0 or -PSKV_ENET. */
int wire_send(void *sock, zmq_msg_t *rid, const Pskv__Meta *meta, zmq_msg_t *keys,
              zmq_msg_t *vals);

/* wire_send that never waits: when the peer's queue is full (a ROUTER's
 * ROUTER_MANDATORY, the socket's SNDHWM) nothing is sent and it returns
 * -PSKV_ENET with errno EAGAIN at once, where wire_send waits up to the socket's
 * SNDTIMEO. For messages whose loss the peer notices itself (a follow_seq gap). */
int wire_send_nowait(void *sock, zmq_msg_t *rid, const Pskv__Meta *meta, zmq_msg_t *keys,
                     zmq_msg_t *vals);

/* Makes msg a frame of len bytes at data that ZeroMQ sends without a copy and
 * lets go of by calling ffn(data, hint) from one of its I/O threads (what
 * zmq_msg_init_data does; msg is then the caller's to send or close). libzmq
 * orders everything written before this call ahead of ffn, but through atomics
 * that ThreadSanitizer cannot see (libzmq is not instrumented), so under TSan
 * the hand-over is announced here on `hint` (on data when hint is NULL) and ffn
 * must begin with wire_frame_returned on the same pointer. Returns 0, or
 * -PSKV_ENOMEM after calling ffn(data, hint) itself (msg untouched): either way
 * the data is ZeroMQ's or let go, never the caller's again. */
int wire_frame_lend(zmq_msg_t *msg, void *data, size_t len, zmq_free_fn *ffn, void *hint);

/* The first call of a free function given to wire_frame_lend, on its hint (or
 * data): takes over what the lending thread wrote. Nothing at all unless built
 * with -fsanitize=thread. */
void wire_frame_returned(const void *hint_or_data);

/* The free function for a malloc'd frame lent with a NULL hint: frees data. */
void wire_frame_free(void *data, void *hint);

/* A buffer shared with ZeroMQ's zero-copy sends (libpskv's values and keys, a
 * server's chain forwards): its owner holds one reference and each frame lent
 * from it one more, dropped by ZeroMQ through vbuf_unref once sent; freed by the
 * last. Never written once first lent. */
typedef struct vbuf {
    _Atomic int refs;
    size_t bytes;
    _Alignas(16) unsigned char data[];
} vbuf;

/* A buffer of `bytes` data bytes (16-byte aligned) holding one reference, or NULL
 * when out of memory. Released with vbuf_unref(NULL, b). */
vbuf *vbuf_new(size_t bytes);

/* Drops one reference to the vbuf `hint` (NULL: nothing), freeing it at zero.
 * ZeroMQ's free function for frames lent from a vbuf (vbuf_lend); `data` is
 * unused. May run on a ZeroMQ I/O thread. */
void vbuf_unref(void *data, void *hint);

/* msg: len bytes at data (inside b) lent to ZeroMQ under a new reference to b.
 * Returns 0, or -PSKV_ENOMEM (that reference dropped again, msg untouched). */
int vbuf_lend(zmq_msg_t *msg, vbuf *b, const void *data, size_t len);

/* Sends an ERROR reply naming `code` and `reason` to rid (may be NULL); refused > 0
 * is stamped in the reply (a server's count of retryable push refusals). */
int wire_send_error(void *sock, zmq_msg_t *rid, const Pskv__Meta *req, uint64_t job_id,
                    uint32_t sender, int code, const char *reason, uint64_t refused);

/* Human name of a message type, for logs. */
const char *wire_type_name(int type);



/* Table id of a table name (64-bit FNV-1a); worker and server derive it alike. */
uint64_t wire_table_id(const char *name);

#endif
