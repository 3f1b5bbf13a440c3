/* Filling new chain members and handing partitions over: the copies (FILL) that
 * bring a new replica, or a joining head, a whole partition.
 *
 * OWNS which partitions this server holds whole (`ready`: decided on each view,
 * set when a copy is whole; chain.c reads it to answer for a partition) and the
 * copy rounds: per partition, the FILL messages received so far and whether the
 * next member of its chain is still owed a copy (struct chain's `fills` and
 * `fresh_next`, chain_impl.h). Lets go of a partition that left this server
 * (its dedupe record is forgotten).
 * THREAD: the server's loop thread only.
 * NEVER blocks: a copy is queued on the peer's DEALER without waiting (the
 * receiver answers PSKV_ENOTREADY for the partition until its copy is whole);
 * never forwards pushes (chain_fwd.c does, after the copies). Allocates a copy's
 * frames per FILL, off the push path. */
#ifndef PSKV_CHAIN_FILL_H
#define PSKV_CHAIN_FILL_H

#include "chain.h"
#include "wire.h"

/* 1 while some partition placed here waits for its copy (a joining server). */
int chain_waiting(const chain *c);

/* A FILL from another server (epoch already checked): creates the table named in
 * it when this server has none, imports the rows, the bsp clock and the dedupe
 * record; the partition is ready when its last message is in, and a further new
 * member after this server is filled in turn. A malformed one is logged and
 * dropped; msg stays the caller's. */
void chain_fill(chain *c, wire_msg *msg);

#endif
