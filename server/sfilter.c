/* sfilter: key lists and packed pull replies (contract in sfilter.h). */
#define _POSIX_C_SOURCE 200809L
#include "sfilter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pskv_errors.h"

int sfilter_keys(table_set *ts, wire_msg *msg, char *why, size_t whylen)
{
    const Pskv__Meta *r = msg->meta;
    if ((r->type != PSKV__MSG_TYPE__PUSH && r->type != PSKV__MSG_TYPE__PULL) || !r->has_key_sig)
        return 0;
    table *t = r->has_table_id ? tables_find(ts, r->table_id) : NULL;
    if (!t)
        return 0; /* refused as an unknown table where it is served */
    if (!t->filters.keycache_mb) {
        snprintf(why, whylen, "table '%s': a key signature, but the table has no keycache "
                 "filter", t->name);
        return -PSKV_EPROTO;
    }
    if (!t->kc && !(t->kc = keycache_new((size_t)t->filters.keycache_mb << 20))) {
        snprintf(why, whylen, "table '%s', filter keycache: out of memory", t->name);
        return -PSKV_ENOMEM;
    }
    if (!r->keys_cached) { /* the list itself: kept for the next time */
        if (!msg->keys)
            return 0;
        if (keycache_sig(msg->keys, msg->nkeys) != r->key_sig) {
            snprintf(why, whylen, "table '%s', filter keycache: key_sig %016llx does not sign "
                     "the %llu keys sent", t->name, (unsigned long long)r->key_sig,
                     (unsigned long long)msg->nkeys);
            return -PSKV_EPROTO;
        }
        if (keycache_put(t->kc, 0, r->key_sig, msg->keys, msg->nkeys) < 0)
            LOG_W("table '%s', filter keycache: out of memory keeping a key list", t->name);
        return 0;
    }
    const uint64_t *keys = keycache_get(t->kc, 0, r->key_sig, msg->nkeys);
    if (!keys) {
        snprintf(why, whylen, "table '%s', filter keycache: key list %016llx of %llu keys not "
                 "held here; send the keys", t->name, (unsigned long long)r->key_sig,
                 (unsigned long long)msg->nkeys);
        return -PSKV_EKEYMISS;
    }
    /* a copy: the message may wait (parked, held) while the cache evicts */
    uint64_t *copy = malloc(msg->nkeys * sizeof *copy);
    if (!copy) {
        snprintf(why, whylen, "table '%s', filter keycache: out of memory", t->name);
        return -PSKV_ENOMEM;
    }
    memcpy(copy, keys, msg->nkeys * sizeof *copy);
    free(msg->own_keys);
    msg->own_keys = copy;
    msg->keys = copy;
    return 0;
}
