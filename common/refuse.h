/* Refusals of peers: a count per reason for the whole process, and a log line
 * per (peer, reason) at most once a minute, so a rogue that keeps trying cannot
 * flood the log. `pskvctl status` shows the counts (servers send theirs with
 * their heartbeats).
 *
 * Owns: the process's counters and its rate-limit table. Any thread may call it
 * (a mutex guards the table; the counters are atomic). Never touches a socket
 * and never changes job state: a refused peer is only counted and logged. */
#ifndef PSKV_REFUSE_H
#define PSKV_REFUSE_H

#include <stdint.h>

typedef enum refuse_reason {
    REFUSE_PLAINTEXT = 0, /* a peer without CURVE dialed a CURVE socket */
    REFUSE_HANDSHAKE,     /* CURVE handshake failed (wrong server key, bad crypto) */
    REFUSE_UNKNOWN_KEY,   /* a client key not in the allowlist */
    REFUSE_ROLE,          /* a listed key whose role may not use this socket */
    REFUSE_MESSAGE,       /* a message its sender's role may not send (REGISTER as another
                             role, checkpoint without a control key, a node id of another key) */
    REFUSE_NAMESPACE,     /* a worker key's request outside its namespaces, or a reader's push
                             (the authorized file's binding: PSKV_EACCES) */
    REFUSE_COUNT
} refuse_reason;

/* Short name of a reason ("plaintext", "handshake", "unknown-key", "role",
 * "message", "namespace"), as `pskvctl status` prints it. */
const char *refuse_name(refuse_reason r);

/* Counts one refusal and logs it (warn) unless this peer was logged for this
 * reason in the last 60 s. peer: address or NULL; key: the peer's public key
 * or NULL; what: one phrase saying what was refused. */
void refuse_note(refuse_reason r, const char *peer, const char *key, const char *what);

/* Refusals counted so far, per reason. */
uint64_t refuse_count(refuse_reason r);

#endif
