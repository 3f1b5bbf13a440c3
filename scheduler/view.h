/* The cluster view and partition placement: which live servers hold each
 * partition's chain (ring.h decides how), the view epoch, and the View message
 * every node is sent (pskvctl's status reply is the same View with heartbeat ages
 * and the job's state).
 *
 * OWNS   the view epoch and the placement: partitions, replicas, vnodes, the
 *        chains (partitions x replicas server node ids, head first, 0 = none), who
 *        holds each partition whole (holders.h), the count of lost partitions (no
 *        live server holds them whole: every replica dead, or the last whole one
 *        while the others still awaited their copies), and the heads/holds of each
 *        server in the node table.
 * THREAD the scheduler's thread only.
 * NEVER  decides who is alive or joins (membership.c does, then calls view_place or
 *        view_join_server and view_send), never reads the manifest (checkpoint.c
 *        fills a view's resume fields through its filler and hands a resumed job's
 *        chains over through view_adopt), never names a policy (each adds its
 *        fillers: view_add_filler), never waits but in its sends (sched_net.h). Out of memory
 *        while placing or publishing exits the process. */
#ifndef PSKV_SCHED_VIEW_H
#define PSKV_SCHED_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "membership.h"
#include "wire.h"

/* Sets the job's ring shape from the flags, before any view. */
void view_init(uint32_t nparts, uint32_t replicas, uint32_t vnodes);

/* The epoch of the last view published (0 before the first); stamped on every
 * message the scheduler sends. */
uint64_t view_epoch(void);

/* The epoch of the last view that changed the chains (a placement, a join). */
uint64_t view_place_epoch(void);

/* Partitions lost in the current placement: no live server held them whole
 * (their chains are all 0). */
uint32_t view_lost(void);

/* Server `id`'s HEARTBEAT says it holds the placement of view `epoch` whole but
 * for the n partitions of awaited[] (whole_epoch: none): it counts as a whole
 * holder of the others it was given up to then (holders.h). A malformed list is
 * logged and ignored. */
void view_heard_whole(uint32_t id, uint64_t epoch, const uint32_t *awaited, size_t n);

/* The current placement: returns the chains (NULL before the first placement;
 * view.c's, valid until the next placement) and sets the ring shape. */
const uint32_t *view_chains(uint32_t *nparts, uint32_t *replicas, uint32_t *vnodes);

/* A resumed job takes the ring shape and chains of its checkpoint (chains copied,
 * nparts x replicas ids) before the first placement. Returns 0 or -PSKV_ENOMEM. */
int view_adopt(uint32_t nparts, uint32_t replicas, uint32_t vnodes, const uint32_t *chains);

#define VIEW_MAX_SERVERS 4096 /* servers a job may have (membership.c refuses more) */

/* The ids of the servers partitions may be placed on into out (room for
 * VIEW_MAX_SERVERS): live, not drained (draining or left). Returns how many. */
size_t view_live_servers(uint32_t *out);

/* (Re)places the partitions on the live servers: from scratch the first time
 * (or from a resumed job's chains), later keeping each chain's survivors in front
 * so that only the chains of a dead or drained server change (a server being
 * drained takes no partition; one it held alone is placed afresh, not lost).
 * A partition whose last whole holder died is lost even when members that were
 * still receiving their copies live (logged per partition). Recounts lost,
 * heads, holds. */
void view_place(void);

/* Server `id` (registered, alive) joins the running job: the partitions its ring
 * tokens win move to it and a new view goes out, carrying the chains before the
 * join so that the servers can hand the data over. Returns the chains changed. */
int view_join_server(uint32_t id);

/* Publishes the view with a new epoch to every node that still takes part. */
void view_send(void);

/* Sends the current view (same epoch) to n alone. */
void view_send_to(memb_node *n);

/* A policy's part of VIEW and STATUS_REPLY (status 1): fills fields of the View;
 * what it points the View at stays the policy's and lasts until the next fill. */
typedef void (*view_fill_fn)(void *ctx, Pskv__View *v, int status);

/* The same for each node's entry, n the node it shows. */
typedef void (*view_node_fill_fn)(void *ctx, Pskv__Node *p, const memb_node *n, int status);

#define VIEW_MAX_FILLERS 8

/* Adds a policy's fillers (either may be NULL), called after those added before:
 * the view part after the chains and before a joining server's previous chains
 * (which take the place of a resumed job's), the node part after the node's
 * state. Returns 0 or -PSKV_ENOMEM when VIEW_MAX_FILLERS are in. */
int view_add_filler(view_fill_fn view, view_node_fill_fn node, void *ctx);

/* STATUS (pskvctl): replies STATUS_REPLY with the view, the job's state and each
 * node's heartbeat age; refuses with PSKV_ENOMEM when out of memory. */
void view_status(wire_msg *msg);

/* Frees the placement and forgets the fillers. */
void view_free(void);

#endif
