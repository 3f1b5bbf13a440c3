/* The relay of pskv-faultproxy: a TCP proxy core that forwards byte streams
 * through per-direction delay lines and injects faults (delay, drop, reset,
 * blackhole), changed at run time on its control port.
 *
 * OWNS: every relayed connection (both sockets and the queued chunks of both
 * directions), the control clients, and the two listening sockets handed to
 * relay_new; it only borrows the resolved target address.
 * THREADS: one thread. relay_run is one ppoll() loop over every socket with
 * CLOCK_MONOTONIC deadlines as its timer; every call comes from the thread that
 * made the relay.
 * NEVER: parses command-line flags, writes to stdout, installs signal handlers,
 * or looks inside the bytes it relays (it knows nothing of ZeroMQ); a failing
 * connection is reset, never the process.
 *
 * Where bytes are forwarded: every byte written to a side goes through one
 * function, forwarded() in faultproxy_relay.c (called from pump() after each
 * successful send). A recorder of the relayed streams hooks in there. */
#ifndef PSKV_FAULTPROXY_RELAY_H
#define PSKV_FAULTPROXY_RELAY_H

#include <netdb.h>
#include <signal.h>
#include <stdint.h>

#define RELAY_DELAY_MAX 3600000 /* ms: the largest --delay-ms and `delay` */

typedef struct relay relay;

typedef struct relay_opts {
    int listen_fd;                 /* non-blocking listener for connections */
    int ctl_fd;                    /* non-blocking control listener; -1 = none */
    const struct addrinfo *target; /* where connections go: the caller's, outlives the relay */
    const char *target_name;       /* the target as given, for logs */
    int delay_ms;                  /* 0..RELAY_DELAY_MAX */
    double drop;                   /* 0..1 */
    uint64_t seed;                 /* of the drop decisions; must not be 0 */
    int record_fd;                 /* --record: every byte relayed, both directions, appended
                                      here as it is written on (-1 = none; owned by the relay) */
} relay_opts;

/* A relay over o's sockets, which it owns from now on (relay_destroy closes them).
 * NULL when out of memory; the sockets then stay the caller's. */
relay *relay_new(const relay_opts *o);

/* Runs the event loop until a `quit` command or *stop turns non-zero. Signals in
 * `unblocked` are let through only inside ppoll. Returns 0, or 1 on a fatal
 * error (poll failed, out of memory for the poll set), logged. */
int relay_run(relay *r, const volatile sig_atomic_t *stop, const sigset_t *unblocked);

/* Closes every connection (FIN, not RST), the control clients and both
 * listeners, frees the relay and nulls *r_p; NULL-safe. */
void relay_destroy(relay **r_p);

#endif
