/* The namespace checks of a worker's request (nsguard.h). */
#include "nsguard.h"

#include <stdio.h>
#include <string.h>

#include "pskv_errors.h"
#include "refuse.h"
#include "store/nspace.h"

/* Servers alive in the view: the namespace's quota is shared among them. */
static uint32_t servers_of(const Pskv__View *view)
{
    uint32_t n = 0;
    for (size_t i = 0; view && i < view->n_nodes; i++)
        n += view->nodes[i]->role == PSKV__ROLE__SERVER && view->nodes[i]->alive;
    return n ? n : 1;
}

int nsguard_request(table_set *ts, const wire_msg *msg, const Pskv__View *view, char *why,
                    size_t whylen)
{
    const Pskv__Meta *r = msg->meta;
    int open = r->type == PSKV__MSG_TYPE__TABLE_OPEN, push = r->type == PSKV__MSG_TYPE__PUSH;
    int lr = r->type == PSKV__MSG_TYPE__TABLE_LR; /* changes the table: a write */
    if (!open && !push && !lr && r->type != PSKV__MSG_TYPE__PULL)
        return 0;
    const table *t = r->has_table_id ? tables_find(ts, r->table_id) : NULL;
    char buf[NSPACE_MAX + 1];
    const char *ns = buf; /* a table's own: read in place (no copy per request) */
    if (open && r->table && r->table->name)
        nspace_of(r->table->name, buf);
    else if (t)
        ns = t->ns;
    else
        return 0;
    int rc = nspace_access(msg->bind, ns, push || lr, why, whylen);
    if (rc < 0 && lr) {
        size_t len = strlen(why);
        snprintf(why + len, whylen - len, " (nor change table '%s''s lr)", t ? t->name : "?");
    }
    if (rc < 0) {
        refuse_note(REFUSE_NAMESPACE, msg->peer, msg->key, why);
        return rc;
    }
    if (!push || !t || !msg->keys || (r->has_assign && r->assign))
        return 0;
    rowset rs = {.keys = msg->keys, .n = msg->nkeys};
    return nspace_push_check(ts, t, &rs, servers_of(view), why, whylen);
}
