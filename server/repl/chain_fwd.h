/* Forwards in flight down the chains and the acknowledgements coming back up:
 * the sending half of chain replication (chain_apply.c decides what is sent).
 *
 * OWNS the table of pending forwards (MAX_PEND entries, each with one hop per
 * next server: the rows copied for it) and reads REPLICATE_ACKs from the peers'
 * DEALERs; holds the two callbacks into the consistency engine.
 * THREAD: the server's loop thread only; the callbacks run on it, from
 * chain_drain or chain_view.
 * NEVER blocks on a peer (sends do not wait: a hop that cannot be queued, or
 * that its server dropped, is sent again after CHAIN_RESEND_MS without an answer,
 * and after a new view); never applies an update. Copies the rows of each hop
 * once (a forward outlives the received frames), and no more: each REPLICATE
 * lends ZeroMQ the hop's own keys and values (fp32), the hop and every send
 * holding a reference (the free function runs on an I/O thread); a dense table's
 * rows go as runs in the Meta, without keys. */
#ifndef PSKV_CHAIN_FWD_H
#define PSKV_CHAIN_FWD_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "chain.h"

#define CHAIN_RESEND_MS 1000 /* a forward unanswered this long is sent again */

/* fn(worker node, error code) counts a worker's push refused to be sent again and
 * returns the count to stamp on the refusal, or 0 (consist_refusal). */
void chain_on_refusal(chain *c, uint64_t (*fn)(uint32_t node, int code));

/* fn(token, code) is called when a bsp close this head sent down its chains
 * (chain_close) is on every tail (code 0), or cannot be sent (code > 0). */
void chain_on_close(chain *c, void (*fn)(uint64_t token, int code));

/* Poll items for the sockets to other servers (acknowledgements come back on
 * them) and their monitors: fills up to max items, returns how many. */
int chain_poll_items(chain *c, zmq_pollitem_t *items, int max);

/* Reads every acknowledgement waiting on the sockets that items (chain_poll_items'
 * n items, after zmq_poll) show readable, up to 1024 per peer per call; a forward
 * whose last hop is answered answers upstream. Anything else a peer sends is
 * logged and dropped. A live peer's closed connection is reported to the
 * scheduler (PEER_CLOSED), which probes that server. A socket dialled since the
 * poll is read after the next. */
void chain_drain(chain *c, const zmq_pollitem_t *items, int n);

/* Forwards "worker rank finished clock" of the stream that `head` started down
 * every chain this server passes that head's partitions along (behind the pushes
 * it forwarded before): from = 0 at the head (a worker's own CLOCK), else the
 * server it came from, and then only down the chains where that server is just
 * before this one. */
void chain_forward_clock(chain *c, uint32_t head, uint32_t from, int rank, int64_t clock);

/* Table t is being removed (its namespace dropped): the forwards of its pushes
 * still waiting for the next servers are let go, their senders answered
 * PSKV_ENOTABLE with why (a bsp close's pushes are bsp_forget's). */
void chain_forget_table(chain *c, const table *t, const char *why);

/* Pending forwards, for logs. */
size_t chain_pending(const chain *c);

/* The timer of the forwards, from the loop after every poll: sends again each hop
 * unanswered for a second (a successor whose lease lapsed dropped it, and no new
 * view will come to send it again); logs how many when any. Cheap when nothing
 * waits (it looks at most every 250 ms). */
void chain_fwd_retry(chain *c);

/* Hops sent again by chain_fwd_retry, for logs. */
uint64_t chain_resent(const chain *c);

/* Forwards let go unanswered instead of being sent again: their worker had its
 * answer already (the push's id is below its floor), for logs. */
uint64_t chain_obsolete(const chain *c);

#endif
