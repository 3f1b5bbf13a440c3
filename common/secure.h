/* The security of one node: its keys (--keys DIR), CURVE on the sockets it
 * listens on and dials, the ZAP handler that admits listed keys, protected mode
 * (without keys only loopback is exposed) and the --insecure opt-out with its
 * warning. Every daemon, pskvctl and libpskv go through here, so the rules live
 * in one place.
 *
 * Owns: the node's keyset and its ZAP handler. Called by the node's main
 * thread (secure_dial also by a heartbeat thread setting up its own socket,
 * which only reads the keyset). Never touches a socket beyond setting its
 * CURVE options, never sends or receives, never changes job state. */
#ifndef PSKV_SECURE_H
#define PSKV_SECURE_H

#include <stddef.h>
#include <stdint.h>

#include "keys.h"
#include "pskv.pb-c.h"

typedef struct zap zap;

typedef struct secure {
    const char *who;       /* "pskv-server", ... for messages */
    int keyed;             /* --keys given: CURVE everywhere */
    int insecure;          /* --insecure given (and no keys) */
    keyset ks;
    zap *z;                /* the ZAP handler, once secure_listen ran */
    int64_t next_warn_ms;  /* --insecure: the next repeat of the warning */
} secure;

/* Loads `keys` (a directory; NULL or "" = none; need_allow: its `authorized`
 * file too) and checks that its role is `role`. keys and insecure exclude each
 * other. Returns 0 or -PSKV_EINVAL with why. */
int secure_init(secure *s, const char *who, const char *keys, int insecure, key_role role,
                int need_allow, char *why, size_t whylen);

/* Protected mode: without keys and without --insecure, a listening address
 * (bind; NULL = none) or an advertised address that is not loopback is refused:
 * -PSKV_EINVAL, why naming --keys and --insecure. */
int secure_check_exposure(const secure *s, const char *bind, const char *advertised, char *why,
                          size_t whylen);

/* Where to listen: `bind` when given, else every interface with keys or
 * --insecure, and 127.0.0.1 without either. */
const char *secure_bind_addr(const secure *s, const char *bind);

/* Before `sock` binds: with keys, starts the ZAP handler (admitting the
 * authorized keys whose role is in the mask `roles`, 1 << key_role) and makes
 * sock a CURVE server. Without keys: nothing. Returns 0 or a negated error. */
int secure_listen(secure *s, void *ctx, void *sock, unsigned roles, char *why, size_t whylen);

/* With keys, a PAIR receiving the closed connections of `sock` (a socket given to
 * secure_listen) as ZAP's monitor reports them (zap_forward_closes): the caller
 * closes it before secure_close. NULL without keys or on failure. */
void *secure_forward_closes(secure *s, void *sock);

/* Before `sock` connects: with keys, CURVE toward server_pub (NULL: the
 * scheduler's key from scheduler.pub). Without keys: nothing. Returns 0, or
 * -PSKV_EINVAL when keys are on and the peer's key is unknown. */
int secure_dial(const secure *s, void *sock, const char *server_pub);

/* A server: the keys of the nodes in view v become admissible beside the
 * authorized file (so a node added to the scheduler's list needs no copy here). */
void secure_allow_view(secure *s, const Pskv__View *v);

/* The node's public key, or NULL without keys. */
const char *secure_pub(const secure *s);

/* Call from the node's periodic tick: repeats the --insecure warning every 60 s. */
void secure_tick(secure *s);

/* SIGHUP: re-reads the authorized file; keeps the old list when the new one is
 * bad (logged). */
void secure_reload(secure *s);

/* Stops the ZAP handler (before the ZeroMQ context ends) and wipes the keys. */
void secure_close(secure *s);

#endif
