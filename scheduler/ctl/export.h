/* pskvctl export: one model file (common/modelfile.h, what --init-from reads)
 * from the checkpoint files the servers of a job wrote, read offline from their
 * directories: no scheduler or server needs to run.
 *
 * The model comes from the table the training application named for it: a dense
 * `softmax-IN-0-OUT` or `mlp-IN-HIDDEN-OUT` table (one float per key: the flat
 * parameter vector, model.h's layout) or the sparse `sparse-lr.w` table (one
 * float per feature id). The values of each row are taken, not its optimizer
 * state. With replicas a partition is in several files: any copy serves (they
 * are equal at a checkpoint).
 *
 * OWNS nothing between calls; THREADS: any; NEVER logs (why says what failed). */
#ifndef PSKV_EXPORT_H
#define PSKV_EXPORT_H

#include <stddef.h>
#include <stdint.h>

/* Writes checkpoint `seq`'s model of namespace `ns` (NULL or "" = the unnamed one:
 * tables NAME; else tables NS/NAME) into `out`, reading the files
 * ckpt-<job>-<seq>-<node>.pskv in `dirs` (comma-separated directories). Prints
 * nothing; *summary (when not NULL, summary_len > 0) says what was written.
 * Returns 0, -PSKV_ENOTFOUND (no file of that checkpoint, or no model table in
 * them), -PSKV_EINVAL (files of two jobs, two model tables, or dense rows that no
 * file holds), -PSKV_EPROTO (a file refused: corrupt, partial), -PSKV_EIO or
 * -PSKV_ENOMEM; why names the file or the rows. */
int export_checkpoint(const char *dirs, uint64_t seq, const char *ns, const char *out,
                      char *summary, size_t summary_len, char *why, size_t whylen);

#endif
