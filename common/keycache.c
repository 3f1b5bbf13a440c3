/* keycache: a chained hash of (peer, signature) entries threaded on one LRU list
 * (contract in keycache.h). The table doubles when it holds more entries than
 * buckets; eviction takes from the list's cold end. */
#define _POSIX_C_SOURCE 200809L
#include "keycache.h"

#include <stdlib.h>
#include <string.h>

#include "pskv_errors.h"

typedef struct kentry {
    uint64_t sig, n;
    uint32_t peer;
    uint64_t *keys;                 /* NULL for a mark */
    struct kentry *next;            /* bucket chain */
    struct kentry *older, *newer;   /* LRU list */
} kentry;

struct keycache {
    kentry **b;
    size_t nb, count, bytes, max;
    kentry *oldest, *newest;
    uint64_t evictions;
};

#define ENTRY_OVERHEAD 64 /* bytes an entry counts beyond its keys */

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t keycache_sig(const uint64_t *keys, uint64_t n)
{
    uint64_t h = mix(n);
    for (uint64_t i = 0; i < n; i++)
        h = mix(h ^ keys[i]) + i;
    return h ? h : 1;
}

keycache *keycache_new(size_t max_bytes)
{
    keycache *kc = calloc(1, sizeof *kc);
    if (!kc)
        return NULL;
    kc->nb = 64;
    kc->b = calloc(kc->nb, sizeof *kc->b);
    if (!kc->b) {
        free(kc);
        return NULL;
    }
    kc->max = max_bytes;
    return kc;
}

void keycache_destroy(keycache **kc_p)
{
    if (!kc_p || !*kc_p)
        return;
    keycache *kc = *kc_p;
    for (kentry *e = kc->oldest, *nx; e; e = nx) {
        nx = e->newer;
        free(e->keys);
        free(e);
    }
    free(kc->b);
    free(kc);
    *kc_p = NULL;
}

static size_t slot(const keycache *kc, uint32_t peer, uint64_t sig)
{
    return (size_t)(mix(sig ^ ((uint64_t)peer << 32)) & (kc->nb - 1));
}

static size_t cost(uint64_t n) { return (size_t)n * sizeof(uint64_t) + ENTRY_OVERHEAD; }

static kentry **find(keycache *kc, uint32_t peer, uint64_t sig)
{
    kentry **pp = &kc->b[slot(kc, peer, sig)];
    while (*pp && ((*pp)->sig != sig || (*pp)->peer != peer))
        pp = &(*pp)->next;
    return pp;
}

static void unlink_lru(keycache *kc, kentry *e)
{
    if (e->older)
        e->older->newer = e->newer;
    else
        kc->oldest = e->newer;
    if (e->newer)
        e->newer->older = e->older;
    else
        kc->newest = e->older;
    e->older = e->newer = NULL;
}

static void push_newest(keycache *kc, kentry *e)
{
    e->older = kc->newest;
    e->newer = NULL;
    if (kc->newest)
        kc->newest->newer = e;
    else
        kc->oldest = e;
    kc->newest = e;
}

static void drop(keycache *kc, kentry **pp)
{
    kentry *e = *pp;
    *pp = e->next;
    unlink_lru(kc, e);
    kc->count--;
    kc->bytes -= cost(e->n);
    free(e->keys);
    free(e);
}

/* Doubles the buckets (kept as they are when out of memory: chains grow longer). */
static void grow(keycache *kc)
{
    size_t nb = kc->nb * 2;
    kentry **b = calloc(nb, sizeof *b);
    if (!b)
        return;
    kentry **old = kc->b;
    size_t onb = kc->nb;
    kc->b = b;
    kc->nb = nb;
    for (size_t i = 0; i < onb; i++)
        for (kentry *e = old[i], *nx; e; e = nx) {
            nx = e->next;
            size_t s = slot(kc, e->peer, e->sig);
            e->next = b[s];
            b[s] = e;
        }
    free(old);
}

static int insert(keycache *kc, uint32_t peer, uint64_t sig, const uint64_t *keys, uint64_t n)
{
    if (cost(n) > kc->max)
        return 0; /* never kept: sent in full every time */
    kentry **pp = find(kc, peer, sig);
    if (*pp)
        drop(kc, pp);
    while (kc->bytes + cost(n) > kc->max && kc->oldest) {
        kentry *e = kc->oldest;
        drop(kc, find(kc, e->peer, e->sig));
        kc->evictions++;
    }
    kentry *e = calloc(1, sizeof *e);
    if (!e)
        return -PSKV_ENOMEM;
    if (keys) {
        e->keys = malloc(n * sizeof *keys);
        if (!e->keys) {
            free(e);
            return -PSKV_ENOMEM;
        }
        memcpy(e->keys, keys, n * sizeof *keys);
    }
    e->sig = sig;
    e->n = n;
    e->peer = peer;
    if (kc->count >= kc->nb)
        grow(kc);
    size_t s = slot(kc, peer, sig);
    e->next = kc->b[s];
    kc->b[s] = e;
    push_newest(kc, e);
    kc->count++;
    kc->bytes += cost(n);
    return 0;
}

int keycache_put(keycache *kc, uint32_t peer, uint64_t sig, const uint64_t *keys, uint64_t n)
{
    return insert(kc, peer, sig, keys, n);
}

int keycache_mark(keycache *kc, uint32_t peer, uint64_t sig, uint64_t n)
{
    return insert(kc, peer, sig, NULL, n);
}

/* The entry of (peer, sig) holding n keys, made the most recently used; or NULL. */
static kentry *touch(keycache *kc, uint32_t peer, uint64_t sig, uint64_t n)
{
    kentry *e = *find(kc, peer, sig);
    if (!e || e->n != n)
        return NULL;
    unlink_lru(kc, e);
    push_newest(kc, e);
    return e;
}

const uint64_t *keycache_get(keycache *kc, uint32_t peer, uint64_t sig, uint64_t n)
{
    kentry *e = touch(kc, peer, sig, n);
    return e ? e->keys : NULL;
}

int keycache_has(keycache *kc, uint32_t peer, uint64_t sig, uint64_t n)
{
    return touch(kc, peer, sig, n) != NULL;
}

void keycache_forget(keycache *kc, uint32_t peer, uint64_t sig)
{
    kentry **pp = find(kc, peer, sig);
    if (*pp)
        drop(kc, pp);
}

size_t keycache_entries(const keycache *kc) { return kc->count; }
size_t keycache_bytes(const keycache *kc) { return kc->bytes; }
uint64_t keycache_evictions(const keycache *kc) { return kc->evictions; }
