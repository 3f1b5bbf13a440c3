/* Refusal counters and the once-a-minute log per (peer, reason). */
#include "refuse.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "timeutil.h"

#define SEEN_SLOTS 256       /* peers remembered for rate limiting (oldest replaced) */
#define LOG_EVERY_MS 60000

static const char *const names[REFUSE_COUNT] = {
    "plaintext", "handshake", "unknown-key", "role", "message", "namespace",
};

static atomic_uint_fast64_t counts[REFUSE_COUNT];

typedef struct seen {
    char peer[64];
    char key[41];
    int reason;
    int64_t logged_ms;
    uint64_t since; /* refusals not logged since then */
} seen;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static seen table[SEEN_SLOTS];

const char *refuse_name(refuse_reason r)
{
    return (r >= 0 && r < REFUSE_COUNT) ? names[r] : "?";
}

uint64_t refuse_count(refuse_reason r)
{
    return (r >= 0 && r < REFUSE_COUNT) ? atomic_load(&counts[r]) : 0;
}

/* The slot of (peer, key, reason), or the oldest one to reuse; *fresh = 1 then. */
static seen *slot_of(const char *peer, const char *key, int reason, int *fresh)
{
    seen *oldest = &table[0];
    for (int i = 0; i < SEEN_SLOTS; i++) {
        seen *s = &table[i];
        if (s->logged_ms && s->reason == reason && !strcmp(s->peer, peer) && !strcmp(s->key, key)) {
            *fresh = 0;
            return s;
        }
        if (s->logged_ms < oldest->logged_ms)
            oldest = s;
    }
    *fresh = 1;
    return oldest;
}

void refuse_note(refuse_reason r, const char *peer, const char *key, const char *what)
{
    if (r < 0 || r >= REFUSE_COUNT)
        return;
    atomic_fetch_add(&counts[r], 1);
    const char *p = peer && *peer ? peer : "?";
    /* rate-limited per host: a rogue reconnects from a new port each time */
    char host[64];
    snprintf(host, sizeof host, "%s", p);
    char *colon = strrchr(host, ':');
    if (colon && strchr(host, '.') && colon == strchr(host, ':'))
        *colon = '\0';
    const char *k = key && *key ? key : "";
    int64_t now = tu_now_ms();
    uint64_t missed = 0;
    int fresh, log_it;
    pthread_mutex_lock(&lock);
    seen *s = slot_of(host, k, (int)r, &fresh);
    log_it = fresh || now - s->logged_ms >= LOG_EVERY_MS;
    if (log_it) {
        missed = fresh ? 0 : s->since;
        snprintf(s->peer, sizeof s->peer, "%s", host);
        snprintf(s->key, sizeof s->key, "%s", k);
        s->reason = (int)r;
        s->logged_ms = now > 0 ? now : 1;
        s->since = 0;
    } else {
        s->since++;
    }
    pthread_mutex_unlock(&lock);
    if (!log_it)
        return;
    char more[64] = "";
    if (missed)
        snprintf(more, sizeof more, " (%llu more since the last line)", (unsigned long long)missed);
    LOG_W("refused %s from %s%s%s: %s%s", names[r], p, *k ? " key " : "", k,
          what ? what : "", more);
}
