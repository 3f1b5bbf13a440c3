/* Checkpoint files: a sequence of tagged records written crash-safely and read
 * back only after the whole file has been verified.
 *
 * Format (all integers little-endian, every record starts 8-byte aligned):
 *
 *   magic    8 bytes "PSKVCKP1"
 *   record   uint32 tag (any value but CKPT_TAG_TRAILER), uint32 reserved 0,
 *            uint64 len, len bytes of data, zero padding to a multiple of 8
 *   ...
 *   trailer  uint32 tag CKPT_TAG_TRAILER, uint32 0, uint64 len 16, then
 *            uint64 number of records before it, uint32 CRC-32 (zlib's crc32)
 *            of every byte from the start of the file up to (not including)
 *            the trailer's tag, uint32 0
 *
 * The trailer is always the last 32 bytes, so a reader finds it and checks the
 * CRC before trusting any length field. A writer builds <dir>/<name>.tmp,
 * fsyncs it, renames it over <dir>/<name> and fsyncs the directory: after a
 * crash <dir>/<name> is either the previous complete checkpoint or the new one,
 * never a mix. Two writers of the same name in the same directory at once
 * would share the temp file: callers must not do that.
 *
 * All calls that fail write a one-line reason naming the path into why (when
 * why is not NULL and whylen > 0).
 *
 * OWNS a writer's temp file, its buffer (a held writer: the whole file) and its
 * running CRC, from ckpt_begin to ckpt_commit or ckpt_abort; a reader's mapping
 * of the file for the length of ckpt_read.
 * THREAD: a writer belongs to one thread at a time: the server's loop begins and
 * fills a held writer, then a thread of its own commits it. ckpt_read may run
 * on any thread (the server reads at start-up and on the first view).
 * BLOCKS on the disk (writes, fsync, rename): the server never commits on its
 * loop unless it cannot start the thread. NEVER logs (reasons go to why), never
 * touches <dir>/<name> before the rename, and never hands a record to fn before
 * the whole file has passed its checks. */
#ifndef PSKV_CKPT_H
#define PSKV_CKPT_H

#include <stddef.h>
#include <stdint.h>

#define CKPT_TAG_TRAILER 0xffffffffu /* reserved: callers may not use it */

typedef struct ckpt_writer ckpt_writer;

/* Starts writing <dir>/<name> as <dir>/<name>.tmp (created or truncated).
 * Sets *out on success, NULL on failure. Returns 0, -PSKV_EIO (the reason with
 * the path and strerror in why), -PSKV_EINVAL (empty dir or name, or a name with
 * a '/') or -PSKV_ENOMEM. The writer is the caller's until ckpt_commit or
 * ckpt_abort. */
int ckpt_begin(ckpt_writer **out, const char *dir, const char *name, char *why, size_t whylen);

/* As ckpt_begin, but the writer holds the whole file in memory: each put copies
 * its data (which the caller may change right after), and nothing is written,
 * checksummed or synced until ckpt_commit, which may run on another thread (the
 * writer is then that thread's alone). Puts fail with -PSKV_ENOMEM when memory
 * runs out. size_hint: the bytes expected (room is reserved for them up front;
 * the buffer still grows past them). */
int ckpt_begin_held(ckpt_writer **out, const char *dir, const char *name, size_t size_hint,
                    char *why, size_t whylen);

/* Appends one record of len bytes (data may be NULL when len is 0) with any tag
 * except CKPT_TAG_TRAILER (-PSKV_EINVAL). Writes are buffered; a record larger
 * than the buffer is written straight from data. Returns 0 or -PSKV_EIO (why);
 * after an I/O error every later put and the commit fail, and the caller should
 * ckpt_abort. data is only read. */
int ckpt_put(ckpt_writer *w, uint32_t tag, const void *data, uint64_t len, char *why,
             size_t whylen);

/* As ckpt_put for one record of alen + blen bytes: a's bytes then b's, so a
 * header and a body held apart need no copy. Either may be NULL when its length
 * is 0. */
int ckpt_put2(ckpt_writer *w, uint32_t tag, const void *a, uint64_t alen, const void *b,
              uint64_t blen, char *why, size_t whylen);

/* Writes the trailer, fsyncs the file, renames it to <dir>/<name> (replacing an
 * older checkpoint) and fsyncs the directory. Always frees the writer and nulls
 * *w_p. Returns 0 or -PSKV_EIO (why): on a failure before the rename the temp
 * file is removed and <dir>/<name> is untouched; when only the directory fsync
 * fails the new file is in place but may not survive a crash. */
int ckpt_commit(ckpt_writer **w_p, char *why, size_t whylen);

/* Bytes appended to w so far (the file's size once committed); 0 for NULL. */
uint64_t ckpt_size(const ckpt_writer *w);

/* Abandons a checkpoint: closes and removes the temp file, frees the writer and
 * nulls *w_p. NULL-safe (w_p or *w_p). */
void ckpt_abort(ckpt_writer **w_p);

/* Verifies the whole file at path (magic, record sizes, trailer, CRC, record
 * count) and only then calls fn once per record, in file order (fn NULL only
 * verifies). data is valid during the call only, 8-byte aligned, and must not
 * be written. fn returning < 0 stops the walk and that value is returned.
 * Returns 0, -PSKV_EIO (cannot open, stat or map the file) or -PSKV_EPROTO (not
 * a checkpoint, truncated, checksum mismatch or other corruption; fn was not
 * called); why names the path and what is wrong. The file is mapped, not
 * copied: it must not shrink while being read (a writer never changes a
 * committed file; it renames a new one over it). */
int ckpt_read(const char *path,
              int (*fn)(void *ctx, uint32_t tag, const void *data, uint64_t len), void *ctx,
              char *why, size_t whylen);

#endif
