/* nsdrop: a server's side of dropping a namespace (pskvctl drop NS, or a group's
 * --drop-namespace at its end; docs/protocol.md "Namespaces"). The scheduler sends
 * NS_DROP only when no live group uses the namespace and no copy (FILL) is under
 * way, and ahead of any later view on the same connection, so a server that joins
 * or takes partitions over afterwards is never copied a dropped table.
 *
 * On NS_DROP every table of the namespace leaves this server: the modules that
 * keep a table pointer let go of it first (parked pulls and held bsp pushes,
 * forwards waiting down the chains: their senders answered PSKV_ENOTABLE; the
 * readers following it: unsubscribed), its metrics read 0, the next checkpoint is
 * a full one, the memory goes back to the system (malloc_trim) and the next
 * heartbeat no longer lists it. Then NS_DROP_ACK says what was freed.
 *
 * THREAD: the server's loop thread (serve_scheduler). NEVER blocks but for the
 * answer's send (member_send). */
#ifndef PSKV_NSDROP_H
#define PSKV_NSDROP_H

#include "pskv.pb-c.h"
#include "serve.h"

/* NS_DROP `req` from the scheduler: removes every table of req->table_ns from the
 * server's state s and
 * answers NS_DROP_ACK (ns_tables, rows, bytes freed here; 0 tables when it held
 * none). A request without a valid namespace is logged and answered ERROR. */
void nsdrop_serve(serve_state *s, const Pskv__Meta *req);

/* Removes every table of namespace ns from s as NS_DROP does (why: what their
 * parked requests are answered); the rows and bytes freed in *rows, *bytes.
 * Returns the tables removed. Also a group's resume (nsrestore.h), before it
 * loads the namespace's tables back. */
uint32_t nsdrop_tables(serve_state *s, const char *ns, const char *why, uint64_t *rows,
                       uint64_t *bytes);

#endif
