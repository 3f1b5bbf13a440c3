/* wfilter: a table's filters on the frames a worker sends (contract in wfilter.h). */
#define _GNU_SOURCE
#include "wfilter.h"

#include <string.h>

#include "pskv_errors.h"
#include "wire.h"

int wfilter_open(pskv_worker *w, tbl *t, const char *list)
{
    char why[300];
    if (filter_parse_list(&t->fs, list, why, sizeof why) < 0)
        return wst_error(w, PSKV_EINVAL, "table '%s': %s", t->name, why);
    t->kc = NULL;
    if (t->fs.keycache_mb && !(t->kc = keycache_new((size_t)t->fs.keycache_mb << 20)))
        return wst_error(w, PSKV_ENOMEM, "table '%s': out of memory for the keycache", t->name);
    return 0;
}

void wfilter_close(tbl *t) { keycache_destroy(&t->kc); }

int wfilter_keys(pskv_worker *w, tbl *t, uint32_t node, Pskv__Meta *m, const uint64_t *keys,
                 uint64_t n, zmq_msg_t *out)
{
    if (t->kc) {
        m->has_key_sig = 1;
        m->key_sig = keycache_sig(keys, n);
        if (keycache_has(t->kc, node, m->key_sig, n)) {
            m->has_keys_cached = m->keys_cached = 1;
            return 2;
        }
        if (keycache_mark(t->kc, node, m->key_sig, n) < 0)
            return wst_error(w, PSKV_ENOMEM, "table '%s': out of memory in the keycache",
                             t->name);
    }
    int rc = filter_pack(&t->fs, FILTER_ZKEYS, keys, n * sizeof *keys, m, out);
    return rc < 0 ? wst_error(w, PSKV_ENOMEM, "out of memory packing keys") : rc;
}

int wfilter_vals(pskv_worker *w, tbl *t, Pskv__Meta *m, const float *vals, size_t len,
                 zmq_msg_t *out)
{
    int rc = filter_pack(&t->fs, FILTER_ZVALS, vals, len, m, out);
    return rc < 0 ? wst_error(w, PSKV_ENOMEM, "out of memory packing values") : rc;
}

void wfilter_miss(tbl *t, uint32_t node, uint64_t sig)
{
    if (t->kc)
        keycache_forget(t->kc, node, sig);
}
