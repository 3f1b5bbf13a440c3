/* nsrestore: a server's side of a group's resume (pskv-worker --group G --resume
 * in a service; docs/operations.md "Checkpoints of a group"). When the group's W
 * workers registered, the scheduler sends NS_RESTORE to every live server: the
 * namespace's tables here are dropped as NS_DROP drops them (no live group uses
 * it: the scheduler checked), and loaded back from the checkpoint it names, the
 * rows of the partitions this server holds now, each from a file of that
 * checkpoint written by a node of the partition's chain then. Other namespaces'
 * tables are not touched. NS_RESTORE_ACK says what was loaded; ERROR (with the
 * checkpoint's seq) why not.
 *
 * THREAD: the server's loop thread (serve_scheduler). NEVER blocks but for the
 * files' reads and the answer's send. */
#ifndef PSKV_NSRESTORE_H
#define PSKV_NSRESTORE_H

#include "pskv.pb-c.h"
#include "serve.h"

/* NS_RESTORE `req` from the scheduler: drops namespace req->ckpt_ns's tables here,
 * loads them from checkpoint req->seq and answers NS_RESTORE_ACK (ns_tables, rows)
 * or ERROR naming the file, partition or field that was wrong. */
void nsrestore_serve(serve_state *s, const Pskv__Meta *req);

/* The namespace a CHECKPOINT asks for (ckpt_ns: a group's), or NULL (every table);
 * NULL too for a name that is not a namespace (logged: then every table). */
const char *nsrestore_ckpt_ns(const Pskv__Meta *req);

#endif
