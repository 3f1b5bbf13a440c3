/* A server's side of dropping a namespace (nsdrop.h). */
#define _GNU_SOURCE
#include "nsdrop.h"

#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "persist/checkpoint.h"
#include "pskv_errors.h"
#include "repl/chain_fwd.h"
#include "serve.h"
#include "smetrics.h"
#include "store/nspace.h"
#include "store/sweep.h"

uint32_t nsdrop_tables(serve_state *s, const char *ns, const char *why, uint64_t *rows,
                       uint64_t *bytes)
{
    uint32_t n = 0;
    *rows = *bytes = 0;
    follow_forget_ns(s->follow, ns); /* before the set changes: it follows its order */
    for (size_t i = tables_count(s->tables); i-- > 0;) {
        table *t = tables_at(s->tables, i);
        if (strcmp(t->ns, ns))
            continue;
        shard_mem mem = {0};
        shard_mem_add(t->sh, &mem);
        *rows += mem.rows;
        *bytes += mem.bytes;
        n++;
        consist_forget_table(s->cons, t, why);
        chain_forget_table(s->chain, t, why);
        smet_table_dropped(t);
        tables_remove(s->tables, t);
    }
    if (n) {
        checkpoint_note_drop(ns);
        malloc_trim(0);
        sweep_report(s->tables);
    }
    return n;
}

void nsdrop_serve(serve_state *s, const Pskv__Meta *req)
{
    const char *ns = req->table_ns;
    Pskv__Meta m;
    if (!ns || strlen(ns) > NSPACE_MAX || strchr(ns, '/')) {
        LOG_W("NS_DROP from the scheduler without a namespace of 0..%d bytes without '/': "
              "nothing dropped", NSPACE_MAX);
        member_meta(&s->mb, &m, PSKV__MSG_TYPE__ERROR);
        m.has_error_code = 1;
        m.error_code = PSKV_EPROTO;
        m.error = "NS_DROP without a valid table_ns";
        member_send(&s->mb, &m);
        return;
    }
    const char *shown = *ns ? ns : "(unnamed)";
    char why[160];
    snprintf(why, sizeof why, "the table's namespace '%s' was dropped (pskvctl drop)", shown);
    uint64_t rows = 0, bytes = 0;
    uint32_t n = nsdrop_tables(s, ns, why, &rows, &bytes);
    if (n) {
        LOG_I("namespace '%s' dropped: %u tables, %llu rows, %llu bytes freed", shown, n,
              (unsigned long long)rows, (unsigned long long)bytes);
    } else {
        LOG_I("namespace '%s' dropped: this server held no table of it", shown);
    }
    member_meta(&s->mb, &m, PSKV__MSG_TYPE__NS_DROP_ACK);
    m.table_ns = (char *)ns;
    m.has_ns_tables = m.has_rows = m.has_bytes = 1;
    m.ns_tables = n;
    m.rows = rows;
    m.bytes = bytes;
    member_send(&s->mb, &m);
}
