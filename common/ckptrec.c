/* What a checkpoint file is and which files a delta builds on (ckptrec.h). */
#include "ckptrec.h"

#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "grow.h"
#include "pskv_errors.h"

static int on_peek(void *ctx, uint32_t tag, const void *data, uint64_t len)
{
    ckptrec_peek *k = ctx;
    if (tag == REC_HEADER && len == sizeof k->h) {
        memcpy(&k->h, data, sizeof k->h);
        k->have_hdr = 1;
    } else if (tag == REC_DELTA && len == sizeof k->d) {
        memcpy(&k->d, data, sizeof k->d);
        k->delta = 1;
    }
    return 0;
}

int ckptrec_peek_file(const char *path, ckptrec_peek *k, char *why, size_t whylen)
{
    memset(k, 0, sizeof *k);
    int rc = ckpt_read(path, on_peek, k, why, whylen);
    if (rc == 0 && (!k->have_hdr || (k->delta && k->d.prev >= k->h.seq))) {
        snprintf(why, whylen, "%s: %s", path, !k->have_hdr ? "no header record"
                                                          : "a delta over a later checkpoint");
        rc = -PSKV_EPROTO;
    }
    return rc;
}

int ckptrec_chain(const char *dir, uint64_t job, uint64_t seq, uint32_t node, uint64_t **seqs,
                  char *why, size_t whylen)
{
    size_t n = 0, cap = 0;
    *seqs = NULL;
    for (uint64_t s = seq;;) {
        char path[4200];
        snprintf(path, sizeof path, "%s/" CKPTREC_NAME_FMT, dir, job, s, node);
        if (n == CKPTREC_CHAIN_MAX) {
            snprintf(why, whylen, "%s: more deltas than can be loaded", path);
            return -PSKV_EPROTO;
        }
        if (grow_array((void **)seqs, &cap, n + 1, sizeof **seqs) < 0) {
            snprintf(why, whylen, "out of memory");
            return -PSKV_ENOMEM;
        }
        (*seqs)[n++] = s;
        ckptrec_peek k;
        char inner[600];
        int rc = ckptrec_peek_file(path, &k, inner, sizeof inner);
        if (rc < 0) {
            if (n > 1)
                snprintf(why, whylen, "checkpoint %" PRIu64 " is a delta over checkpoint %"
                         PRIu64 ", whose file cannot be used: %s", seq, s, inner);
            else
                snprintf(why, whylen, "%s", inner);
            return rc;
        }
        if (!k.delta)
            return (int)n;
        s = k.d.prev;
    }
}
