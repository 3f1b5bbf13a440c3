/* Saved model weights (--save-model / --init-from), a documented binary format:
 *   offset 0   8 bytes  magic "PSKVMODL"
 *          8   u32      format version (1)
 *         12   u32      model kind: 1 softmax, 2 mlp, 3 sparse logistic regression
 *         16   u32 x 3  in, hidden, out (sparse-lr: 0, 0, 1)
 *         28   u64      n, the number of rows that follow
 *         36   u32      flags: bit 0 = rows carry a u64 key before their value,
 *                       bit 1 = an evaluation record follows the header,
 *                       bit 2 = (with bit 1) the record ends with val_auc
 *        (40   32 bytes the evaluation record, with bit 1 (pskv-evaluator --save-best):
 *                       i64 snapshot clock, f64 epoch, f64 val_loss, f64 val_accuracy,
 *                       and with bit 2 8 bytes more: f64 val_auc, sparse-lr's)
 *  40(+32/40)  rows     n x (u64 key if keyed, then f32 value), little-endian
 *        end   u32      CRC-32 (zlib) of every byte before it
 * Dense models store their flat parameter vector (model.h layout) without keys;
 * sparse-lr stores (feature id, weight) pairs: --save-model every weight the
 * servers hold, --save-best the evaluated snapshot (the weights of the features
 * the validation examples use, and the bias).
 *
 * OWNS: nothing between calls; a loaded modelfile's arrays are the caller's.
 * THREADS: any thread; no global state.
 * NEVER: logs or prints (failures come back in `why`), checks that the model fits
 * the run (the caller compares kind and sizes), or leaves a half-written file
 * under `path` (a save writes PATH.tmp.PID and renames it). */
#ifndef PSKV_MODELFILE_H
#define PSKV_MODELFILE_H

#include <stddef.h>
#include <stdint.h>

typedef struct modelfile {
    uint32_t kind, in, hidden, out;
    uint64_t n;
    uint64_t *keys; /* NULL for dense */
    float *vals;
    int has_eval;   /* the evaluation record below is in the file (flags bit 1) */
    int64_t clock;  /* the snapshot's clock */
    double epoch, val_loss, val_accuracy;
    int has_auc;    /* with has_eval: val_auc is in the record too (flags bit 2) */
    double val_auc;
} modelfile;

/* Writes m to path (temp file, fsync, rename). Returns 0 or -PSKV_EIO with why. */
int modelfile_save(const char *path, const modelfile *m, char *why, size_t whylen);

/* Reads path into m (arrays owned by m; free with modelfile_free). Returns 0,
 * -PSKV_ENOTFOUND, -PSKV_EIO (bad magic, version, size or checksum: why says
 * which), or -PSKV_ENOMEM. */
int modelfile_load(const char *path, modelfile *m, char *why, size_t whylen);

/* Frees the arrays of m; safe on a zeroed one. */
void modelfile_free(modelfile *m);

#endif
