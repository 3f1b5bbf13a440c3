/* Worker groups (the paper's worker groups, issue 35): a group is W workers with
 * ranks 0..W-1, its own barriers and its own life. It starts when its W workers
 * registered and the servers are in; it ends when every one of its workers
 * finished or died (or was stopped: pskvctl stop GROUP). Each worker is sent the
 * view as its group sees it: the servers, the evaluator and its group's workers
 * only, so that everything a worker reads from the view (its number of workers,
 * who is active, the all-reduce ring) is its group's.
 *
 * A job is the one unnamed group ("") of --workers workers, whose end ends the
 * server group (membership.c's stop). A service (pskv-scheduler --service) starts
 * with no group; groups come and go and its servers stay up: an ended group's
 * workers are forgotten MEMB_FORGET_MS later and its name may be taken again
 * (each instance has its own generation number).
 *
 * OWNS   the group table: name, size, state, barriers released, who stopped it.
 * THREAD the scheduler's one thread (its event loop).
 * NEVER  touches the socket (sched_net.h), never places partitions, never decides
 *        a death (membership.c tells it of one: group_changed). */
#ifndef PSKV_SCHED_GROUP_H
#define PSKV_SCHED_GROUP_H

#include <stddef.h>
#include <stdint.h>

#include "membership.h"
#include "wire.h"

#define GROUP_MAX 256     /* groups a service holds at once */
#define GROUP_NAME_MAX 64 /* bytes of a group's name (no '/') */

enum group_state {
    GROUP_WAITING,  /* fewer than W workers registered, or the servers are not yet in */
    GROUP_RUNNING,  /* its workers have the view: training */
    GROUP_STOPPING, /* pskvctl stop: its workers are told to stop (as early stopping) */
};

typedef struct sched_group {
    char name[GROUP_NAME_MAX + 1]; /* "" = the unnamed group (a job's workers) */
    uint32_t gen;                  /* this instance; a worker's group_gen names it */
    int size;                      /* W: ranks 0..W-1 (a worker joining it running adds one) */
    int declared;                  /* W as its workers give it (group_size) */
    enum group_state state;
    uint64_t barrier_done;         /* highest barrier released */
    int64_t started_ms;            /* when it started running (0: waiting) */
    char stopped_by[160];          /* pskvctl stop: who asked, for its workers' line */
    struct met_series *met;        /* pskv_group_workers{group="NAME"} (a service's) */
    struct met_series *met_clock;  /* pskv_group_clock{group="NAME"} */
    int resume;                    /* --resume: starts once its namespace is loaded
                                      (grpresume.h) */
} sched_group;

/* The group instance worker n belongs to, or NULL (not a worker, or its group ended). */
sched_group *group_of(const memb_node *n);

/* The live group named `name`, or NULL. */
sched_group *group_find(const char *name);

/* 1 when worker n still counts for its group: not finished, not dead. */
int group_counts(const memb_node *n);

/* The slowest clock among the live workers of worker n's group (n's own when none
 * is live or n has no group): the clock lag metric's base. */
int64_t group_slowest(const memb_node *n);

/* A worker's REGISTER, after the checks every role passes: validates its group
 * (name: no '/', at most 64 bytes; size: the same for every worker of the group;
 * a named group only in a service), gives it a rank of its group (the one it
 * wishes when free, a dead worker's it takes over, the next one of a running
 * group), acknowledges it and starts the group when it is complete (a group
 * whose workers give resume: once its namespace is loaded, grpresume.h; the
 * first worker's registration chooses the checkpoint). Refuses, naming the group
 * and the field, otherwise. */
void group_on_register(wire_msg *msg);

/* Every waiting group whose W workers registered starts: its workers are marked
 * active (the caller publishes the view, or it is published here: publish 1). */
void group_start_ready(int publish);

/* Worker n's barrier, finish or death changed what its group waits for: releases
 * the barriers every counting worker of the group reached and, when none counts
 * any more, ends the group (a job: the servers are stopped; a service: the group
 * is dropped and its workers forgotten later). */
void group_changed(memb_node *n);

/* Group g, still waiting, cannot start (its resume failed: why): each of its
 * workers is sent ERROR with resume set (it exits naming why), and the group and
 * its workers are forgotten. */
void group_fail(sched_group *g, const char *why);

/* The barriers group g released (0 for a worker without a group). */
uint64_t group_barriers(const memb_node *n);

/* GROUP_STOP from pskvctl (a control key, when keys are on): tells the named
 * group's workers to stop as early stopping does. Answers GROUP_STOP_ACK, or
 * refuses naming the group (unknown, not running). */
void group_on_stop(wire_msg *msg);

/* Early stopping fired for group g (earlystop.c): its workers are told to stop
 * as by pskvctl stop, with `why` on their line; the other groups go on. NULL-safe;
 * no-op unless g runs. */
void group_stop_early(sched_group *g, const char *why);

/* 1 when node n is in the views sent to nodes: every node but the workers of a
 * group not yet running (they have no view yet) and, in a service, those of a
 * group that ended (they are out; status still lists them until forgotten), and
 * a service's evaluators likewise by the group they evaluate (pskv-evaluator
 * --group; none: the unnamed group). */
int group_in_view(const memb_node *n);

/* For the view worker n (or a service's evaluator n) is sent: keeps in
 * ptrs[0..n_nodes) the nodes its group sees (every node but the other groups'
 * workers and evaluators), and sets the group's size and, once stopped,
 * stop_early with who stopped it. Returns the nodes kept. */
size_t group_view_for(const memb_node *n, Pskv__View *v, Pskv__Node **ptrs, size_t n_nodes);

/* The live groups (waiting, running or stopping) that use namespace ns: named
 * after it, or with a counting worker registered in it or that opened a table
 * of it. Returns how many, their names ("A, B") in names (len bytes). */
int group_users(const char *ns, char *names, size_t len);

/* Subscribes the view's `service` and the STATUS_REPLY's group lines to the view
 * fillers (view.h). */
void group_hooks(void);

/* A service's per-group metrics, on the scheduler's tick: pskv_group_workers
 * (live workers) and pskv_group_clock (the slowest live worker's clock), labelled
 * group="NAME"; an ended group's go to 0. A job has none (its metrics as before). */
void group_metrics(void);

/* Drops every group (at exit, and between unit tests). */
void group_reset(void);

#endif
