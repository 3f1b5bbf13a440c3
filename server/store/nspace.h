/* Namespaces of the server's tables: a table's full name is NAMESPACE/NAME, or NAME
 * alone in the unnamed namespace "" (every table of a job without --namespace).
 * This module says which namespace a name is in, checks the names, whether a
 * sender's key binding lets it read or write a namespace (PSKV_EACCES), and whether
 * a push would take a namespace past its quota (PSKV_EQUOTA).
 *
 * A namespace's quota is the quota_bytes option of its tables (the first open that
 * gives one sets it; another value is refused). The quota counts every replica, so
 * each server holds the namespace to quota / servers of its own memory (the ring
 * spreads partitions and their replicas evenly); only rows a push would create are
 * refused, a push to rows that exist always passes.
 *
 * THREAD: the server's loop thread only (it reads the table set). NEVER logs,
 * blocks, allocates or changes a table. */
#ifndef PSKV_NSPACE_H
#define PSKV_NSPACE_H

#include <stddef.h>
#include <stdint.h>

#include "shard.h"
#include "table.h"

#define NSPACE_MAX 64 /* bytes of a namespace's (and a group's) name */

/* Copies the namespace of a full table name into ns (NSPACE_MAX + 1 bytes): the
 * part before the '/', or "" when there is none. */
void nspace_of(const char *full, char *ns);

/* Checks a full table name: at most one '/', a namespace of 1..NSPACE_MAX bytes
 * before it and a non-empty name after it. Returns 0 or -PSKV_EINVAL (why says). */
int nspace_name_check(const char *full, char *why, size_t whylen);

/* Whether a sender whose key carries `bind` may use namespace ns. bind: "" (no
 * binding: every namespace, read and write, as without keys), "rw:A,B" (a worker
 * bound to A and B), "ro:A,B" or "ro:" (a reader: pull only; "ro:" = every one).
 * Returns 0 or -PSKV_EACCES with the namespace, the binding and what was asked. */
int nspace_access(const char *bind, const char *ns, int write, char *why, size_t whylen);

/* The quota of namespace ns among the tables of ts (0 = none). */
uint64_t nspace_quota(table_set *ts, const char *ns);

/* Bytes the tables of namespace ns take on this server (every table's storage). */
uint64_t nspace_bytes(table_set *ts, const char *ns);

/* Checks that an open of table options o agrees with its namespace's quota: 0, or
 * -PSKV_EMISMATCH naming the namespace, the quota it has and the one asked. */
int nspace_open_check(table_set *ts, const Pskv__TableOptions *o, char *why, size_t whylen);

/* Whether a push of the rows rs to table t fits t's namespace's quota on this
 * server, with `servers` servers in the view sharing it. Returns 0, or
 * -PSKV_EQUOTA naming the namespace, its use and limit and the rows refused. */
int nspace_push_check(table_set *ts, const table *t, const rowset *rs, uint32_t servers,
                      char *why, size_t whylen);

#endif
