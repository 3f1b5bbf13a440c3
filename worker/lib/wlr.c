/* wlr: pskv_table_set_lr (contract in pskv.h), a learning-rate change of a table
 * whose updater runs on the servers (adam, adamw, adagrad, ftrl, sgd), so that a
 * learning-rate schedule works for every updater.
 *
 * One TABLE_LR to every live server (each holds a shard of every table), on the
 * same socket as this worker's pushes, so each server applies the pushes this
 * worker sent before the call with the old lr and those after it with the new one.
 * Replicas do not take the change from this message for what they replicate: a
 * forwarded push carries the lr its head applied it with (docs/protocol.md
 * "Learning-rate changes"), so the copies stay identical. */
#include <math.h>

#include "member.h"
#include "pskv.h"
#include "wreq.h"
#include "wsend.h"
#include "wstate.h"

int pskv_table_set_lr(pskv_worker *w, int table, float lr)
{
    if (!w)
        return -PSKV_EINVAL;
    if (table < 0 || table >= w->ntables)
        return wst_error(w, PSKV_EINVAL, "pskv_table_set_lr: no table handle %d", table);
    tbl *t = &w->tables[table];
    if (!isfinite(lr) || lr <= 0)
        return wst_error(w, PSKV_EINVAL, "table '%s': lr %g refused: it must be a finite "
                         "number > 0", t->name, (double)lr);
    if (w->evaluator)
        return wst_error(w, PSKV_EINVAL, "table '%s': an evaluator does not change a table's "
                         "lr", t->name);
    int rc;
    req *r = wreq_new_live(w, REQ_LR, table, &rc);
    if (!r)
        return rc;
    for (int pi = 0; pi < r->nparts; pi++) {
        Pskv__Meta m;
        member_meta(&w->mb, &m, PSKV__MSG_TYPE__TABLE_LR);
        m.has_table_id = m.has_table_lr = 1;
        m.table_id = t->id;
        m.table_lr = lr;
        rc = wsend_part(w, r, pi, &m, NULL, NULL);
        if (rc < 0) {
            wreq_fail(w, r, rc);
            return rc;
        }
    }
    return pskv_wait(w, r->ts, w->request_timeout_ms + 1000);
}
