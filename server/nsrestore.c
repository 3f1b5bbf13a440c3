/* A server's side of a group's resume (nsrestore.h). */
#define _GNU_SOURCE
#include "nsrestore.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "nsdrop.h"
#include "persist/checkpoint.h"
#include "pskv_errors.h"
#include "store/nspace.h"

static int ns_ok(const char *ns) { return ns && strlen(ns) <= NSPACE_MAX && !strchr(ns, '/'); }

const char *nsrestore_ckpt_ns(const Pskv__Meta *req)
{
    if (!req->ckpt_ns)
        return NULL;
    if (ns_ok(req->ckpt_ns))
        return req->ckpt_ns;
    LOG_W("CHECKPOINT %llu names no namespace of 0..%d bytes without '/': every table written",
          (unsigned long long)req->seq, NSPACE_MAX);
    return NULL;
}

void nsrestore_serve(serve_state *s, const Pskv__Meta *req)
{
    const char *ns = req->ckpt_ns;
    char why[700];
    Pskv__Meta m;
    uint64_t rows = 0;
    int rc = -PSKV_EPROTO;
    snprintf(why, sizeof why, "NS_RESTORE without a namespace of 0..%d bytes without '/' or "
             "a checkpoint", NSPACE_MAX);
    if (ns_ok(ns) && req->has_seq && req->has_ckpt_job) {
        const char *shown = *ns ? ns : "(unnamed)";
        char gone[200];
        snprintf(gone, sizeof gone, "the table's namespace '%s' is being resumed from checkpoint "
                 "%llu", shown, (unsigned long long)req->seq);
        uint64_t r0, b0;
        uint32_t dropped = nsdrop_tables(s, ns, gone, &r0, &b0);
        rc = checkpoint_load_ns(req, &rows, why, sizeof why);
        uint32_t n = 0;
        for (size_t i = 0; i < tables_count(s->tables); i++)
            n += !strcmp(tables_at(s->tables, i)->ns, ns);
        if (rc >= 0) {
            LOG_I("namespace '%s' resumed from checkpoint %llu: %u tables, %llu rows here from "
                  "%d files (%u tables, %llu rows it held before dropped)", shown,
                  (unsigned long long)req->seq, n, (unsigned long long)rows, rc, dropped,
                  (unsigned long long)r0);
            member_meta(&s->mb, &m, PSKV__MSG_TYPE__NS_RESTORE_ACK);
            m.ckpt_ns = (char *)ns;
            m.has_seq = m.has_ns_tables = m.has_rows = 1;
            m.seq = req->seq;
            m.ns_tables = n;
            m.rows = rows;
            member_send(&s->mb, &m);
            return;
        }
        /* what was loaded before the failure goes: the group does not start on it */
        nsdrop_tables(s, ns, gone, &r0, &b0);
    }
    LOG_E("namespace resume failed: %s", why);
    member_meta(&s->mb, &m, PSKV__MSG_TYPE__ERROR);
    m.has_seq = m.has_error_code = 1;
    m.seq = req->seq;
    m.error_code = -rc;
    m.error = why;
    m.ckpt_ns = (char *)(ns ? ns : "");
    member_send(&s->mb, &m);
}
