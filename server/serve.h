/* serve: pskv-server's message rules. A worker's message (TABLE_OPEN, PUSH, PULL,
 * CLOCK, and REPLICATE and FILL from other servers) is refused or served here:
 * another job's, a role's not allowed under keys, one sent while the lease has
 * lapsed, one from a view not applied yet (parked, in order); then the table,
 * width, ownership and finite values are checked before the chain or the
 * consistency engine takes it. The scheduler's messages (views, CHECKPOINT,
 * STOP) are applied here too. main.c owns the process's life around them.
 *
 * OWNS nothing of its own: the process's state (srv) is built and torn down by
 * main.c; the rules read and change it.
 * THREAD: the loop thread (main.c's run), one message at a time.
 * NEVER blocks: a message is answered, parked or dropped before the next. */
#ifndef PSKV_SERVE_H
#define PSKV_SERVE_H

#include <stdint.h>

#include "consist/consist.h"
#include "follow.h"
#include "member.h"
#include "repl/chain.h"
#include "secure.h"
#include "store/table.h"
#include "wire.h"

#define SERVE_MAX_PARKED 1024

/* The server process's state: main.c fills it (open_data, join_cluster) and
 * frees it at exit. */
typedef struct serve_state {
    member mb;
    void *ctx, *router;
    table_set *tables;
    uint64_t errors;
    consist *cons;
    chain *chain;
    wire_msg *parked; /* valid messages from a view not applied here yet, in order */
    int nparked;
    int lease_lapsed;       /* logged once per lapse */
    secure sec;             /* keys, CURVE, ZAP (secure.h) */
    uint64_t whole;         /* the latest view epoch whose placement is whole here */
    follow *follow;         /* readers following a namespace (follow.h) */
} serve_state;

extern serve_state srv;

/* Serves what waits on the data socket: at most 256 messages or 10 ms (a few
 * large pushes), then back to the poll: heartbeats and their acknowledgements
 * (the lease) must not wait on a backlog of work. */
void serve_router(void);

/* Applies what the scheduler sent (at most 100 messages); returns 1 when it
 * said STOP, else 0. Exits the process (3) when a view gave this server's
 * partitions to others. */
int serve_scheduler(void);

/* The chain's refusal hook: notes a refused push of worker `node` with the
 * consistency engine; returns the count the reply carries. */
uint64_t serve_note_refusal(uint32_t node, int code);

/* The chain's hook when a bsp close this head sent down its chains reached every
 * tail. */
void serve_close_done(uint64_t token, int code);

#endif
