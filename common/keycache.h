/* keycache: the `keycache` filter's bounded caches of key lists (filter.h). A
 * sparse push or pull whose key list its receiver holds goes as the list's 64-bit
 * signature and length instead of the list.
 *
 * One type serves both sides: a server stores the lists it received (keycache_put,
 * keycache_get), a worker remembers which lists each server was sent
 * (keycache_mark, keycache_has: no keys kept). Both evict the least recently used
 * entries past their byte bound (a list counts its keys' bytes either way), so
 * they drift apart: a worker may send a signature its server forgot. The server
 * then answers PSKV_EKEYMISS, the worker forgets the entry and sends the list:
 * a miss costs a round trip, never a wrong result.
 *
 * OWNS its entries (and on a server their copies of the keys). THREAD one at a
 * time. NEVER grows past its bound (one list larger than the bound is not kept). */
#ifndef PSKV_KEYCACHE_H
#define PSKV_KEYCACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct keycache keycache;

/* An empty cache of at most max_bytes; NULL when out of memory. */
keycache *keycache_new(size_t max_bytes);

/* Frees the cache and nulls *kc_p; NULL-safe. */
void keycache_destroy(keycache **kc_p);

/* The signature of n keys (never 0), the same on every host. */
uint64_t keycache_sig(const uint64_t *keys, uint64_t n);

/* Stores a copy of keys[0..n-1] under (peer, sig), evicting the least recently used
 * past the bound. Returns 0 (also when the list is too large to keep) or
 * -PSKV_ENOMEM. */
int keycache_put(keycache *kc, uint32_t peer, uint64_t sig, const uint64_t *keys, uint64_t n);

/* The n keys stored under (peer, sig), or NULL. Valid until the next put, mark or
 * destroy. */
const uint64_t *keycache_get(keycache *kc, uint32_t peer, uint64_t sig, uint64_t n);

/* Remembers (no keys) that peer was sent the n keys signed sig. 0 or -PSKV_ENOMEM. */
int keycache_mark(keycache *kc, uint32_t peer, uint64_t sig, uint64_t n);

/* 1 when (peer, sig) of n keys is remembered (and so recently used), else 0. */
int keycache_has(keycache *kc, uint32_t peer, uint64_t sig, uint64_t n);

/* Forgets (peer, sig): the peer said it does not hold it. */
void keycache_forget(keycache *kc, uint32_t peer, uint64_t sig);

/* Entries held, bytes they count, and evictions so far (tests and reports). */
size_t keycache_entries(const keycache *kc);
size_t keycache_bytes(const keycache *kc);
uint64_t keycache_evictions(const keycache *kc);

#endif
