/* detect: the scheduler's failure detector. Two questions, two detectors:
 *
 *  - Is the process gone? A node's connection to the scheduler closes
 *    (ZeroMQ's socket monitor, ZMQ_EVENT_DISCONNECTED on the ROUTER's fd of one of
 *    its connections, learnt from ZMQ_SRCFD of its messages). A close alone is not
 *    proof (a flapping link closes too), so a probe confirms: the node's port
 *    refusing a TCP connection (its kernel says nothing listens), or for a node
 *    on this host its process gone from /proc. A dying process closes its
 *    connections before its listening socket, so a probe that finds the port open
 *    is made again 10, 30, 100 and 300 ms later. Confirmed: declared dead at
 *    once, "dead (connection closed)". Not confirmed: left to the lease.
 *  - Is a silent process dead or slow? A phi-accrual detector (common/phi.h) per
 *    node over its heartbeat gaps: dead once phi reaches --phi-threshold, never
 *    before --min-dead-after-ms of silence, always after --dead-after-ms;
 *    "dead (silent N ms, phi P)".
 *
 * Leases stay safe (docs/protocol.md "Leases"): each HEARTBEAT_ACK grants a
 * server the silence it is owed now minus one heartbeat, counted from the
 * heartbeat's send time, and the scheduler promises (not_before_ms) not to
 * declare it dead by silence before that silence has passed since the receipt.
 * A connection-closed death needs no promise: the probe found nothing listening
 * on the server's port, so nobody can be served by it.
 *
 * OWNS   the monitor's PAIR socket, the counters of nodes declared dead and heard
 *        from later; per node its detect_node (inside memb_node).
 * THREAD the scheduler's loop thread. NEVER sends to nodes (membership does). */
#ifndef PSKV_SCHED_DETECT_H
#define PSKV_SCHED_DETECT_H

#include <stdint.h>

#include "phi.h"
#include "wire.h"

#define DETECT_FDS 4 /* connections remembered per node (member and heartbeat sockets) */

struct memb_node;
struct met_series;

/* A node's detector state, inside its memb_node (moves with the table). */
typedef struct detect_node {
    phi_window gaps;          /* its heartbeat inter-arrival times */
    int64_t not_before_ms;    /* no death by silence before this (the leases granted) */
    int fds[DETECT_FDS];      /* the scheduler's fds its messages came on, -1 = none */
    int local;                /* its connections come from loopback: this host */
    int heard_dead;           /* declared dead, then heard from (counted once) */
    int64_t recheck_ms;       /* probe again at this time (0 = none): a closed connection
                                 whose probe was accepted, its process perhaps exiting */
    int rechecks;             /* probes since its connection closed */
    int64_t closed_ms;        /* when it was last seen closing (logged with the death) */
    char why[64];             /* why it was declared dead; "" while alive */
    struct met_series *phi_s, *mean_s, *sd_s; /* its gauges (sched_metrics), or NULL */
} detect_node;

/* The detector's settings; memb.heartbeat_ms and memb.dead_after_ms must be set.
 * A min_dead_after_ms that is the default (is_default) follows the others: at
 * least 2 heartbeats, at most --dead-after-ms. Returns 0, or 2 after printing
 * which flag is out of range to stderr. */
int detect_init(double phi_threshold, int min_dead_after_ms, int is_default);

/* --min-dead-after-ms: the earliest a silent node may be declared dead. */
int detect_min_dead_ms(void);

/* A fresh node's detector (the prior: gaps of one heartbeat period). */
void detect_node_init(detect_node *d);

/* A heartbeat from n arrived at `now`, before n->last_hb_ms is renewed: the gap
 * enters n's window (one huge gap, a resume or a stall, counted once, clamped to
 * --dead-after-ms). Returns the lease (ms) to grant a server in its ack. */
int detect_heard(struct memb_node *n, int64_t now);

/* 1 when silent node n is to be declared dead at `now` (n->det.why says why). */
int detect_silent(struct memb_node *n, int64_t now);

/* n was declared dead (by either detector): forget its connections. */
void detect_dead(struct memb_node *n);

/* n was declared dead and a heartbeat of it came later: counted once per death,
 * per role, and logged. */
void detect_dead_heard(struct memb_node *n);

/* Declared dead, then heard from, so far, nodes of role `role` (Pskv__Role). */
uint64_t detect_dead_heard_count(int role);

/* Starts the connection monitor on the ROUTER `sock`. Returns 0, or -1 (logged:
 * crashes are then caught by the lease only). */
int detect_start(void *ctx, void *sock);

/* Instead of detect_start, when the socket's one monitor is another's (ZAP's, with
 * --keys): `events` is a PAIR on which that monitor's ZMQ_EVENT_DISCONNECTED events
 * arrive as ZeroMQ sends them (secure_forward_closes). Taken over: detect_stop
 * closes it. */
void detect_take(void *events);

/* The monitor's socket, to poll for input (NULL when it is off). */
void *detect_socket(void);

/* msg was received (and dispatched): the fd it came on is its sender's. */
void detect_note(wire_msg *msg);

/* Takes the monitor's waiting events: a closed connection of a live node is
 * probed and, confirmed, the node declared dead (memb_declare_dead). */
void detect_events(void);

/* PEER_CLOSED from a server: its connection to another server closed. That server
 * is probed as if the scheduler's own connection to it had closed; bad input
 * (not from a server, no or an unknown closed_node) is logged and dropped. */
void detect_on_peer_closed(wire_msg *msg);

/* Probes again the nodes whose recheck is due at `now`; returns the ms until the
 * next one is due (for the loop's poll), or -1 when none waits. */
long detect_recheck(int64_t now);

/* Stops the monitor and closes its socket; safe when it never started. */
void detect_stop(void *sock);

/* Status: n's phi now, its gaps, why it died (STATUS_REPLY's Node); the
 * settings and counters (its View). */
void detect_fill_node(Pskv__Node *p, const struct memb_node *n, int64_t now);
void detect_fill_view(Pskv__View *v);

/* The per-node gauges (phi, gap mean and sd) and the counters, for schedm_tick. */
void detect_metrics(int64_t now);

#endif
