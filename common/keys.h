/* Node keys for CURVE: a node's keypair, the scheduler's public key, and the
 * role-tagged allowlist (`authorized`) that the scheduler and the servers check.
 *
 * Files of a key directory (what one node needs as --keys DIR):
 *   node.key        the node's secret key, Z85 (40 characters); mode 0600: a file
 *                   that group or others may read is refused, as ssh does
 *   node.pub        "ROLE PUBLIC-KEY", one line: appended as is to `authorized`
 *   scheduler.pub   the scheduler's node.pub
 *   authorized      scheduler and servers: one "ROLE PUBLIC-KEY" line per allowed
 *                   node (a line starting with '#' is a comment); re-read on SIGHUP.
 *                   A worker's line may bind it to namespaces, "worker NS1,NS2 KEY",
 *                   and "reader [NS1,NS2] KEY" lists a worker key that may pull but
 *                   not push (no list: every namespace); the servers enforce it
 * Roles: scheduler, server, worker, evaluator, control (pskvctl); "reader" is a worker.
 *
 * Owns: the key material it loaded (a keyset) and allowlists. Any thread may call
 * these functions on its own objects; an allowlist is read-only once loaded, so
 * threads may share one (a reload builds a new one). Never touches a socket, never
 * does cryptography of its own: keys are made by libzmq's zmq_curve_keypair (libsodium). */
#ifndef PSKV_KEYS_H
#define PSKV_KEYS_H

#include <stddef.h>

#define KEY_Z85 40 /* characters of a Z85-encoded 32-byte key */
#define KEY_BIND 160 /* bytes of a binding, "rw:NS1,NS2" or "ro:..." (nul included) */

typedef enum key_role {
    KEY_ROLE_NONE = 0,
    KEY_ROLE_SCHEDULER,
    KEY_ROLE_SERVER,
    KEY_ROLE_WORKER,
    KEY_ROLE_EVALUATOR,
    KEY_ROLE_CONTROL,
    KEY_ROLE_COUNT
} key_role;

typedef struct key_entry {
    key_role role;
    char pub[KEY_Z85 + 1];
    char bind[KEY_BIND]; /* "" (every namespace, read and write), "rw:NS1,NS2" (a worker
                            bound to those), "ro:NS1,..." or "ro:" (a reader) */
} key_entry;

/* A role-tagged allowlist, sorted by key for lookup. */
typedef struct key_allow {
    key_entry *e;
    size_t n, cap;
} key_allow;

/* What one node loaded from --keys DIR. */
typedef struct keyset {
    char dir[256];
    key_role role;              /* from node.pub */
    char pub[KEY_Z85 + 1];      /* node.pub */
    char sec[KEY_Z85 + 1];      /* node.key */
    char sched_pub[KEY_Z85 + 1]; /* scheduler.pub */
    key_allow allow;            /* authorized, when need_allow (else empty) */
} keyset;

/* "scheduler" ... "control"; "none" for KEY_ROLE_NONE. */
const char *key_role_name(key_role r);

/* Parses a role name; KEY_ROLE_NONE when unknown. */
key_role key_role_parse(const char *name);

/* 1 when s is 40 characters of the Z85 alphabet. */
int key_z85_valid(const char *s);

/* Loads DIR: node.key (refused unless mode 0600 or stricter), node.pub,
 * scheduler.pub and, when need_allow, authorized. Returns 0 or a negated
 * PSKV_E* with the file and the reason in why. On failure ks holds nothing. */
int keys_load(keyset *ks, const char *dir, int need_allow, char *why, size_t whylen);

/* Reads DIR/NAME, a one-line "ROLE PUBLIC-KEY" file (another node's node.pub copied
 * in, e.g. serve.pub), into pub (KEY_Z85 + 1 bytes). Returns 0 or a negated PSKV_E*
 * naming the file (why). */
__attribute__((visibility("hidden"))) int keys_read_pub(const char *dir, const char *name,
                                                        char *pub, char *why, size_t whylen);

/* Wipes the secret key and frees the allowlist; NULL-safe. */
void keys_clear(keyset *ks);

/* Reads an allowlist file into out (replacing nothing: out must be empty).
 * Returns 0 or a negated PSKV_E* naming the file and line. */
int key_allow_load(key_allow *out, const char *path, char *why, size_t whylen);

/* Adds (role, pub) to an allowlist (kept sorted). Returns 0 or -PSKV_ENOMEM. */
int key_allow_add(key_allow *a, key_role role, const char *pub);

/* key_allow_add with the key's namespace binding (key_entry.bind; NULL = ""). */
__attribute__((visibility("hidden"))) int key_allow_add_bound(key_allow *a, key_role role, const char *pub, const char *bind);

/* The entry of `pub` in a, or NULL when it is not listed. */
__attribute__((visibility("hidden"))) const key_entry *key_allow_find(const key_allow *a, const char *pub);

/* The role of `pub` in a, or KEY_ROLE_NONE when it is not listed. */
key_role key_allow_role(const key_allow *a, const char *pub);

/* Frees an allowlist's entries; NULL-safe. */
void key_allow_free(key_allow *a);

/* Makes one node's keypair in dir (created 0700 when missing): node.key 0600
 * and node.pub. Refuses to overwrite an existing node.key. Returns 0 or a
 * negated PSKV_E* with the reason in why. */
int keys_keygen(const char *dir, key_role role, char *why, size_t whylen);

/* Makes a whole cluster's keyset under dir: scheduler/, server-0 .. server-S-1,
 * worker-0 .. worker-W-1, evaluator-0 and control/, each with its keypair and
 * scheduler.pub; the scheduler's and each server's directory also get
 * `authorized` listing every node. Returns 0 or a negated PSKV_E* (why). */
int keys_init_cluster(const char *dir, int servers, int workers, char *why, size_t whylen);

#endif
