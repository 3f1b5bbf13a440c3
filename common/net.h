/* Addresses and sockets: endpoints, the advertised address, listening sockets.
 * Nothing here assumes 127.0.0.1: a node advertises --advertise, else the address
 * of --interface, else the local address its route to the scheduler uses.
 *
 * OWNS   nothing: a socket it creates is the caller's to close (zmq_close).
 * THREAD any; a ZeroMQ socket only from the thread that owns it.
 * NEVER  sends or receives messages (wire.h does); blocks only in name resolution
 *        (net_pick_advertise, net_is_loopback, net_check_advertise) and in the
 *        kernel calls of net_interface_addr and net_bind. */
#ifndef PSKV_NET_H
#define PSKV_NET_H

#include <stddef.h>
#include <stdint.h>

/* Splits "HOST:PORT" (HOST may be [v6]). Returns 0 or -PSKV_EINVAL. */
int net_split_hostport(const char *s, char *host, size_t hostlen, int *port);

/* IPv4 address of interface `ifname` into out. Returns 0 or -PSKV_ENOTFOUND. */
int net_interface_addr(const char *ifname, char *out, size_t outlen);

/* Chooses the address to advertise: `advertise` if non-empty, else the address
 * of `ifname` if non-empty, else the local address used to reach `peer_host`
 * (when given), else the host name's address. Returns 0 or a negated error with
 * the reason in `why`. */
int net_pick_advertise(const char *advertise, const char *ifname, const char *peer_host,
                       char *out, size_t outlen, char *why, size_t whylen);

/* 1 when `host` (a name or a numeric address) is or resolves to a loopback
 * address (127.0.0.0/8, ::1); 0 otherwise or when it does not resolve. */
int net_is_loopback(const char *host);

/* Refuses to advertise a loopback address to nodes on other hosts: when
 * `advertised` is loopback but `scheduler_host` is not, writes why and returns
 * -PSKV_EINVAL; else 0. */
int net_check_advertise(const char *advertised, const char *scheduler_host, char *why,
                        size_t whylen);

/* Creates a socket of `type` with pskv's options: linger `linger_ms`, maximum
 * message size `max_message` bytes (0 = unlimited), ROUTER_MANDATORY on ROUTERs,
 * a 5 s send time-out (a full peer queue stalls a send at most that long) and
 * high-water marks of 10000 messages. Returns the socket or NULL. */
void *net_socket(void *ctx, int type, int64_t max_message, int linger_ms);

/* Starts a monitor of `events` (ZMQ_EVENT_*) on sock at inproc endpoint `ep`,
 * read on the PAIR returned (linger 0; the caller's, to end with net_monitor_stop
 * while sock is still open). NULL when it cannot. */
void *net_monitor(void *ctx, void *sock, const char *ep, int events);

/* Stops sock's monitor, then closes its PAIR *mon_p and sets it to NULL; nothing
 * when *mon_p is NULL. In that order only: ZeroMQ's I/O thread sends each event
 * with a blocking send, so an event of a socket whose monitor outlives its reader
 * (the reader closed first, then a connection of sock closes) stops that thread
 * for good, and every socket of the context with it: no heartbeat, reply or
 * forward goes out or comes in, while the loop runs on. */
void net_monitor_stop(void *sock, void **mon_p);

/* Takes one event from a monitor's PAIR without waiting: its ZMQ_EVENT_* in *event and
 * its value (the fd for DISCONNECTED) in *value (0 and -1 when the frame is short),
 * the endpoint frame read and dropped. Returns 1, or 0 when none is waiting. */
int net_monitor_event(void *mon, uint16_t *event, int32_t *value);

struct keyset;

/* CURVE on a listening socket: `sock` becomes a CURVE server with ks's secret
 * key (ZAP decides which clients it accepts: zap.h). Before bind. Returns 0 or
 * -PSKV_ENET. */
int net_curve_server(void *sock, const struct keyset *ks);

/* CURVE on a dialing socket: ks's keypair, and the public key (Z85) of the
 * server it dials. Before connect. Returns 0 or -PSKV_ENET. */
int net_curve_client(void *sock, const struct keyset *ks, const char *server_pub);

/* Binds `sock` on tcp://BIND:PORT (BIND "*" or empty = all, PORT 0 = any free)
 * and returns the port actually bound, or a negated error. */
int net_bind(void *sock, const char *bind, int port, char *why, size_t whylen);

/* Connects `sock` to tcp://HOST:PORT. Returns 0 or -PSKV_ENET. */
int net_connect(void *sock, const char *host, int port);

#endif
