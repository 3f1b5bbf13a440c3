/* wfilter: a table's filters on the frames a worker sends (contract in wfilter.h). */
#define _GNU_SOURCE
#include "wfilter.h"

#include <string.h>

#include "log.h"
#include "pskv_errors.h"
#include "timeutil.h"
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
    if (!t->fs.n)
        return 0;
    int64_t t0 = tu_now_ns();
    int rc = 0;
    if (t->kc) {
        m->has_key_sig = 1;
        m->key_sig = keycache_sig(keys, n);
        if (keycache_has(t->kc, node, m->key_sig, n)) {
            m->has_keys_cached = m->keys_cached = 1;
            t->fst.sig_hits++;
            rc = 2;
        } else if (keycache_mark(t->kc, node, m->key_sig, n) < 0) {
            rc = wst_error(w, PSKV_ENOMEM, "table '%s': out of memory in the keycache", t->name);
        }
    }
    if (!rc && (rc = filter_pack(&t->fs, FILTER_ZKEYS, keys, n * sizeof *keys, m, out)) < 0)
        rc = wst_error(w, PSKV_ENOMEM, "out of memory packing keys");
    t->fst.ns += tu_now_ns() - t0;
    return rc;
}

int wfilter_vals(pskv_worker *w, tbl *t, Pskv__Meta *m, const float *vals, size_t len,
                 zmq_msg_t *out)
{
    if (!t->fs.codec)
        return 0;
    int64_t t0 = tu_now_ns();
    int rc = filter_pack(&t->fs, FILTER_ZVALS, vals, len, m, out);
    t->fst.ns += tu_now_ns() - t0;
    return rc < 0 ? wst_error(w, PSKV_ENOMEM, "out of memory packing values") : rc;
}

void wfilter_miss(tbl *t, uint32_t node, uint64_t sig)
{
    if (!t->kc)
        return;
    keycache_forget(t->kc, node, sig);
    t->fst.sig_misses++;
}

void wfilter_sent(tbl *t, uint64_t raw, const zmq_msg_t *keys, const zmq_msg_t *vals)
{
    t->fst.raw_out += raw;
    t->fst.wire_out += (keys ? zmq_msg_size((zmq_msg_t *)keys) : 0) +
                       (vals ? zmq_msg_size((zmq_msg_t *)vals) : 0);
}

void wfilter_received(tbl *t, const wire_msg *msg)
{
    if (!msg->nframes)
        return;
    t->fst.raw_in += msg->nvals * sizeof(float) + (msg->nframes > 2 ? msg->nkeys * 8 : 0);
    for (int i = 1; i < msg->nframes; i++)
        t->fst.wire_in += zmq_msg_size((zmq_msg_t *)&msg->frames[i]);
}

void wfilter_report(const tbl *t)
{
    const filter_stats *f = &t->fst;
    if (!t->fs.n || (!f->raw_out && !f->raw_in))
        return;
    char names[300];
    filter_format(&t->fs, names, sizeof names);
    LOG_I("table '%s' filters %s: sent %llu bytes (%llu before filters), received %llu (%llu "
          "before), %llu key lists as signatures, %llu misses, %.1f ms in filters", t->name,
          names, (unsigned long long)f->wire_out, (unsigned long long)f->raw_out,
          (unsigned long long)f->wire_in, (unsigned long long)f->raw_in,
          (unsigned long long)f->sig_hits, (unsigned long long)f->sig_misses, (double)f->ns / 1e6);
}
