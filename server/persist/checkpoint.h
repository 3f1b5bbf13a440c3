/* Checkpoints and resume, this server's side: when and how, where ckpt.h is the
 * file format and persist.h what goes in it. On CHECKPOINT seq from the scheduler
 * the server snapshots its state in the loop (serving pauses only for the copy),
 * a thread of this module writes the file (fsync, rename) while serving goes on,
 * and the loop answers the scheduler (CHECKPOINT_ACK, or ERROR naming the file)
 * once the thread is done (CHECKPOINT_ACK says which checkpoint its file's chain
 * starts at, and its bytes). A snapshot waits up to 2 s for every bsp table's
 * partitions here to agree on their closed clock. On the first view of a resumed
 * job, the file this server's old self wrote is loaded.
 *
 * OWNS   the checkpoint being written (the snapshot's writer, its commit thread,
 *        seq, result, timings, the partitions held at its snapshot), the last
 *        file written (what a delta builds on), a deferred request, and whether a resumed job's
 *        file is loaded. Borrows the member, tables, chain and consistency engine
 *        given to checkpoint_init (the caller's; they must outlive the module).
 * THREAD every call from the server's loop thread. The commit thread only writes
 *        the writer it was handed and raises a flag; it never touches the tables,
 *        the sockets or the member.
 * NEVER  serves or refuses requests, never touches the ROUTER; never blocks the
 *        loop but for the snapshot copy, the answer to the scheduler (member_send,
 *        at most the socket's send time-out), checkpoint_poll's wait at exit, and
 *        a write in the loop when no thread can be started. */
#ifndef PSKV_SERVER_CHECKPOINT_H
#define PSKV_SERVER_CHECKPOINT_H

#include <stdint.h>

#include "repl/chain.h"
#include "consist/consist.h"
#include "member.h"
#include "persist.h"
#include "store/table.h"

/* Hands the module what it snapshots, loads and answers with; data_dir may be
 * empty (a checkpoint is then refused). All stay the caller's. */
void checkpoint_init(member *mb, const char *data_dir, table_set *tables, chain *c,
                     consist *cons);

/* On a new view: when it is the first view of a resumed job, loads the files the
 * view's resume pairs name for this server (one, or several when the job resumed
 * on another number of servers), from each only the partitions resume_sources
 * gives it there, into the tables, the chain's dedupe records and *clocks (the
 * highest clock per rank over the files; the caller frees clocks->vc). No file to
 * load here is logged; a missing or corrupt one exits the process (1): the
 * scheduler chose the checkpoint because the file was reported valid. */
void checkpoint_load_resumed(persist_clocks *clocks);

/* NS_RESTORE req (a group started with --resume; the caller dropped the
 * namespace's tables first): for each partition held here, finds in --data-dir a
 * file of checkpoint req->seq of job req->ckpt_job written by a node of that
 * partition's chain then (req->ckpt_chains), and loads from it the rows of
 * namespace req->ckpt_ns in the partitions held (tables created with their saved
 * options; no clocks, no dedupe records). Returns the files loaded (0: no
 * partition held), *rows the rows now stored, or a negated error with why:
 * another number of partitions, a partition no file here holds, a file refused. */
int checkpoint_load_ns(const Pskv__Meta *req, uint64_t *rows, char *why, size_t whylen);

/* CHECKPOINT seq: snapshots now and starts the background write, or defers while
 * bsp partitions here differ (up to 2 s, then taken anyway). want_delta: a delta
 * over this server's last file when it can (its write succeeded, the same
 * partitions are held, every evicted key was kept track of), else a full file
 * (logged, saying why). ns non-NULL (CHECKPOINT with ckpt_ns: a group's): only
 * that namespace's tables, always full, waiting only for their bsp partitions,
 * and not what the next delta builds on. Refused to the scheduler (ERROR) without --data-dir,
 * while another is being written, or when the snapshot fails. */
void checkpoint_write(uint64_t seq, int want_delta, const char *ns);

/* Namespace ns was dropped (its tables removed): the next checkpoint is a full
 * one, since a delta over a file holding its tables would bring them back on
 * resume. */
void checkpoint_note_drop(const char *ns);

/* CHECKPOINT_PRUNE below (--keep-checkpoints on the scheduler): deletes this
 * server's checkpoint files numbered below `below`, which the manifest no longer
 * lists (never the one being written: it is newer), but those numbered keep_from
 * to keep_to (the checkpoint marked best and those it builds on; keep_to 0: none).
 * Logs what it deleted. */
void checkpoint_prune(uint64_t below, uint64_t keep_from, uint64_t keep_to);

/* After each pass of the loop: answers for a background write that finished, and
 * tries a deferred checkpoint again. */
void checkpoint_pass(void);

/* 1 while a background write is in progress (the loop then polls more often). */
int checkpoint_busy(void);

/* Answers for the background write once its thread is done; wait_ms > 0 (at exit)
 * waits that long for it, and a file still being written then (a hung disk) is
 * left unfinished, its checkpoint never acknowledged (logged). */
void checkpoint_poll(int wait_ms);

#endif
