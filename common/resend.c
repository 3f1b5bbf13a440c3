/* When an unanswered request goes again (resend.h). */
#include "resend.h"

void resend_heard(resend_peer *p, int64_t sent_ms, int64_t now)
{
    p->heard_ms = now;
    if (sent_ms > p->heard_sent_ms)
        p->heard_sent_ms = sent_ms;
}

int resend_due(const resend_peer *p, int64_t sent_ms, int tries, int64_t base_ms, int64_t now)
{
    int64_t wait = base_ms << (tries < 3 ? tries : 3);
    if (now - sent_ms < wait)
        return 0;
    return !(p->heard_ms && now - p->heard_ms < wait && p->heard_sent_ms <= sent_ms);
}
