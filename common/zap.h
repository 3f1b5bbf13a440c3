/* The ZAP handler (ZeroMQ RFC 27) of a daemon whose listening sockets speak
 * CURVE: one thread answers libzmq's authentication requests on
 * inproc://zeromq.zap.01, accepting a client key only when the allowlist lists
 * it with a role this daemon takes. An accepted connection's messages carry the
 * ZAP User-Id "ROLE PUBLIC-KEY[ BINDING]" (read with zap_peer and zap_peer_bind; the
 * binding is the allowlist's namespace binding of a worker key, keys.h); refused ones never reach
 * the daemon. The same thread watches the listening sockets' handshake failures
 * (plaintext peers, wrong server key) through socket monitors and counts them.
 *
 * Owns: its thread, its REP socket and the monitor sockets, the allowlists.
 * zap_start, zap_watch and zap_stop are called by the daemon's main thread;
 * zap_allow and zap_reload by that thread too (they swap lists under a mutex).
 * Never touches the daemon's own sockets beyond installing a monitor on them,
 * and never changes job state: refusals are only counted and logged (refuse.h). */
#ifndef PSKV_ZAP_H
#define PSKV_ZAP_H

#include <stddef.h>

#include "keys.h"

typedef struct zap zap;

/* Binds the handler in ctx and starts its thread. `allow` (the authorized file)
 * is taken over; roles is a bit mask of (1 << key_role) this daemon accepts.
 * Must run before any listening socket of ctx binds. Returns NULL with why. */
zap *zap_start(void *ctx, key_allow *allow, unsigned roles, char *why, size_t whylen);

/* Replaces the authorized list (after SIGHUP); taken over. */
void zap_reload(zap *z, key_allow *allow);

/* Keys the daemon learned from the scheduler's view (servers: every node of the
 * view), accepted beside the authorized list; taken over. */
void zap_allow_view(zap *z, key_allow *view);

/* Counts and logs handshake failures on `sock` (a listening socket of this
 * context; call from the thread that owns it, before or after its bind). */
int zap_watch(zap *z, void *sock);

/* A socket has one monitor, so zap_watch's also serves a daemon that wants to know
 * when a connection of `sock` closes: returns a PAIR (for the calling thread; the
 * caller closes it, before zap_stop) that receives each ZMQ_EVENT_DISCONNECTED of
 * sock's monitor as ZeroMQ sends it (event frame, endpoint frame). NULL when sock
 * is not watched (or already forwarded) or the PAIR cannot be made. */
void *zap_forward_closes(zap *z, void *sock);

/* Stops the thread and frees everything; NULL-safe; *zp becomes NULL. */
void zap_stop(zap **zp);

/* The sender of a received frame: its key's role (KEY_ROLE_NONE without CURVE)
 * and, when pub is non-NULL, its public key (empty without CURVE). */
key_role zap_peer(void *frame, char *pub, size_t publen);

/* The sender's namespace binding (key_entry.bind: "", "rw:NS1,NS2", "ro:..."), from
 * the same User-Id, into bind (len bytes, KEY_BIND is enough). */
__attribute__((visibility("hidden"))) void zap_peer_bind(void *frame, char *bind, size_t len);

#endif
