/* The scheduler's node events: fixed subscriber lists. See events.h. */
#include "events.h"

#include <stddef.h>

#include "pskv_errors.h"

static struct {
    sched_ev_fn fn;
    void *ctx;
} subs[SCHED_EV_COUNT][EVENTS_MAX_SUBS];
static int nsubs[SCHED_EV_COUNT];

int events_subscribe(sched_event kind, sched_ev_fn fn, void *ctx)
{
    if ((int)kind < 0 || kind >= SCHED_EV_COUNT || !fn)
        return -PSKV_EINVAL;
    if (nsubs[kind] == EVENTS_MAX_SUBS)
        return -PSKV_ENOMEM;
    subs[kind][nsubs[kind]].fn = fn;
    subs[kind][nsubs[kind]].ctx = ctx;
    nsubs[kind]++;
    return 0;
}

int events_publish(const sched_ev *ev)
{
    for (int i = 0; i < nsubs[ev->kind]; i++) {
        int rc = subs[ev->kind][i].fn(subs[ev->kind][i].ctx, ev);
        if (rc)
            return rc;
    }
    return 0;
}

int events_node(sched_event kind, struct memb_node *n)
{
    sched_ev ev = {.kind = kind, .node = n};
    return events_publish(&ev);
}

void events_reset(void)
{
    for (int k = 0; k < SCHED_EV_COUNT; k++)
        nsubs[k] = 0;
}
