/* The range vector clock (the paper's section 3): for every worker rank, the
 * iterations it has finished, as this server may rely on them.
 *
 * A worker sends its CLOCK to every server, so each server knows every worker's
 * clock even on keys the worker did not touch. The clock set is the workers of
 * the latest view that have not finished or died. With replication, a replica's
 * pulls rely instead on the clocks each head forwarded down its chains behind the
 * pushes (a worker's own CLOCK may overtake pushes still on their way). A push
 * this server refused to be sent again is counted per worker: that worker's
 * CLOCKs count only once they carry the count (sent after it heard of the
 * refusal), so no clock runs ahead of a push still to come.
 *
 * This is the bookkeeping all three models share: ssp's bounded delay reads the
 * smallest clock of the set (vclock_min), bsp closes a clock when enough of the
 * set finished it (vclock_closable, vclock_finished); async reads none of it.
 *
 * OWNS the per-rank clocks and the node holding each rank, the clock set, the
 * node -> rank map, the refusal counts per node and the clocks forwarded per head.
 * THREAD: the server's loop thread only.
 * NEVER answers or parks a request, never touches a socket or a table: the
 * consistency engine (consist.c, bsp.c) acts on what it says. Allocates on a view
 * (the ranks, the node -> rank map), for a head first heard of and a node first
 * refused; never on a CLOCK. */
#ifndef PSKV_VCLOCK_H
#define PSKV_VCLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "pskv.pb-c.h"
#include "wire.h"

typedef struct vclock vclock;

/* An empty clock (no ranks until the first view). NULL when out of memory. */
vclock *vclock_new(void);

/* Frees v and nulls *v_p; NULL-safe. */
void vclock_destroy(vclock **v_p);

/* Re-reads the workers of `view`: ranks (they only grow; clocks already known are
 * kept, but those of a rank another node took over start again from 0: the new
 * worker's first CLOCK says where it starts), the node -> rank map and the clock set. Returns the number of ranks
 * before the call (per-rank state of the caller grows from there to
 * vclock_nranks), or -PSKV_ENOMEM (logged; the set is not updated then). */
int vclock_view(vclock *v, const Pskv__View *view);

/* Worker ranks known (the highest rank of any view + 1) and workers in the set. */
int vclock_nranks(const vclock *v);
int vclock_nset(const vclock *v);

/* The rank of worker node `node` in the latest view, or -1. */
int vclock_rank(const vclock *v, uint32_t node);

/* A CLOCK message from a worker: it finished iteration meta->clock. Returns the
 * worker's rank (its clock recorded), -1 (dropped, logged: not a worker of the
 * view, or no valid clock) or -2 (ignored: sent before the worker heard of a push
 * refused here, which it will send again). */
int vclock_clock(vclock *v, const wire_msg *msg);

/* This server refuses a push of worker node `node` with `code`: when the worker
 * will send it again (PSKV_ESTALE, PSKV_ENOTREADY) the refusal is counted and the
 * count returned, for the reply; else 0 (and for a node beyond memory: logged). */
uint64_t vclock_refusal(vclock *v, uint32_t node, int code);

/* Worker `rank` finished `clock` as forwarded by `head` (behind every push of it
 * the head forwarded). Returns 1 when recorded, 0 when the rank is unknown or
 * memory ran out. */
int vclock_from(vclock *v, uint32_t head, int rank, int64_t clock);

/* The heads whose partitions this server holds as a replica: while there are any,
 * vclock_min reads the clocks they forwarded instead of the workers' own.
 * placement_changed: forget every clock the heads forwarded before (a head that
 * took partitions over vouches only for what it forwards on the new placement). */
void vclock_set_sources(vclock *v, const uint32_t *heads, size_t n, int placement_changed);

/* Until called again with 0, the clocks read (vclock_min, vclock_min_in) are those
 * `head` counted itself since the placement last changed (vclock_from with its own
 * node id: each came behind the worker's pushes to it), not the forwarded ones
 * pulls at a replica wait on: for a pull served at the head of its rows
 * (pskv_pushpull's). Unreplicated (no stream of its own), the clocks as heard. */
void vclock_read_at(vclock *v, uint32_t head);

/* The smallest clock over the clock set (0 when the set is empty): what an ssp
 * pull waits on and what a reply reports. _in: over the set's workers of `group`
 * (vclock_group's; -1 = all). */
int64_t vclock_min(const vclock *v);
int64_t vclock_min_in(const vclock *v, int group);

/* 1 when rank r is in the set and has finished clock t (_in: and is of worker
 * group `group`, vclock_group's; -1 = any). */
int vclock_finished(const vclock *v, int r, int64_t t);
int vclock_finished_in(const vclock *v, int r, int64_t t, int group);

/* Clocks below the returned one may close under bsp: at least W - backup workers
 * of the set (at least one) have finished them; `none` when the set is empty.
 * _in: of the set's workers of `group` only (-1 = all). */
int64_t vclock_closable(vclock *v, uint32_t backup, int64_t none);
int64_t vclock_closable_in(vclock *v, uint32_t backup, int64_t none, int group);

#define VCLOCK_MAX_GROUPS 64 /* worker groups told apart; more share one set */

/* The worker group (a service's, by the view's Node.group) named `ns`: a bsp
 * table of namespace ns closes its clocks on that group's workers alone, so that
 * one group never waits for another's. -1 (every worker of the set) when no
 * group has that name, or the view holds one group only (a job). */
int vclock_group(const vclock *v, const char *ns);

/* Every rank's clock drops to `floor` if above it (to be earned again after a
 * placement change). */
void vclock_cap(vclock *v, int64_t floor);

/* For checkpoints: the clocks finished per rank (*vc valid until the next view;
 * returns the rank count), and raising them to saved ones after the first view
 * of a resumed job. */
int vclock_get(const vclock *v, const int64_t **vc);
void vclock_restore(vclock *v, const int64_t *vc, int nranks);

#endif
