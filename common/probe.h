/* probe: is a peer's process still there? The confirming probe of the failure
 * detector (a closed connection alone is not proof: a flapping link closes too)
 * and the dialing side's "nothing listens there" check.
 *
 * A TCP connection attempt to the port a daemon listens on tells the three cases
 * apart: the peer's kernel accepts it (the process is there, perhaps stopped or
 * slow), refuses it (nothing listens: the process is gone), or nothing answers
 * within the time-out (a cut host, a dropped route: unknown). The attempt is
 * closed at once; it sends no byte.
 *
 * OWNS   nothing between calls. THREAD any.
 * NEVER  waits longer than its time-out (name resolution aside: numeric hosts
 *        resolve without a look-up). */
#ifndef PSKV_PROBE_H
#define PSKV_PROBE_H

#include <stdint.h>

typedef enum probe_result {
    PROBE_OPEN,    /* a connection was accepted: something listens there */
    PROBE_REFUSED, /* the host's kernel refused (RST): nothing listens on the port */
    PROBE_UNKNOWN, /* no answer within the time-out, or host not resolvable */
} probe_result;

/* Tries a TCP connection to host:port for at most timeout_ms (clamped to
 * 1..10000). */
__attribute__((visibility("hidden"))) probe_result probe_tcp(const char *host, int port, int timeout_ms);

/* 1 when process `pid` of this host is gone (no /proc entry, or a zombie or dead
 * task awaiting its parent), 0 when it runs (or stopped), -1 when this cannot be
 * told (pid 0). Only meaningful for a peer in this host's pid namespace. */
__attribute__((visibility("hidden"))) int probe_pid_gone(uint32_t pid);

/* "connection refused", "connection accepted" or "no answer", for logs. */
__attribute__((visibility("hidden"))) const char *probe_name(probe_result r);

#endif
