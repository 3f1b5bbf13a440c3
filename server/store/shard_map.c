/* The sparse shard's map (shard_impl.h): open addressing with linear probing
 * from a key to its row, the slots holding row numbers + 1 (0 = free, so a map
 * fresh from the kernel is empty and costs no page until written).
 *
 * The map and the records are mappings of their own (shard_big_alloc): zero
 * pages on demand, given back to the system when freed, the records grown by
 * mremap (page tables move, bytes do not), none of it left in malloc's heap.
 *
 * Growing does not stop serving for a rehash: past 0.6 load the doubled map
 * is mapped and faulted in by the fault-ahead helper (prefault.h), as are the
 * records and dirty bits ahead of the rows in use (shard_map_prepare); at 0.7
 * load, once the helper has it all in (up to 0.8 while it has not:
 * shard_map_full), it takes over, and the rows that were there move into it a
 * few at a time (shard_map_migrate: a bounded number per push and per row
 * written) while lookups that miss in the new map look in the old one; the old
 * map goes to the helper to be given back. A small map (below MIGRATE_MIN slots)
 * moves at once. */
#define _GNU_SOURCE /* madvise, MADV_HUGEPAGE, mremap */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "prefault.h"
#include "pskv_errors.h"
#include "ring.h"
#include "shard_impl.h"

#define MIGRATE_MIN 65536 /* slots: a smaller map moves at once */
#define PAGE 4096
#define SLICE (2u << 20)   /* a huge page: asked ahead for no less at a time */
/* Records and dirty bits are faulted in this far ahead of the rows in use (by
 * the helper, prefault.h): 8 MiB of sgd records is 700,000 rows, 85 pushes of
 * 8,192 new keys, time enough for the helper to stay ahead on a loaded machine. */
#define AHEAD_BYTES (8u << 20)
/* A push that took this much CPU time already leaves faulting in the doubled
 * map to the helper (next_meet): a huge page is 4-7 ms more. */
#define SPENT_MAX 3000000

size_t shard_home_in(uint64_t key, size_t cap) { return (size_t)shard_hash(key) & (cap - 1); }

size_t shard_home(const shard *s, uint64_t key) { return shard_home_in(key, s->cap); }

size_t shard_probe(const shard *s, uint64_t key)
{
    return shard_find_in(s, s->slots, s->cap, key, shard_hash(key));
}

/* Asks the kernel to back a large array with huge pages: a random key's slot and
 * record then cost no page-table walk, and faulting one in (ahead, or as rows
 * arrive) or giving it back is one fault per 2 MiB instead of 512. Hint only. */
static void hint_huge(void *p, size_t bytes)
{
    const uintptr_t page = 4096;
    if (bytes < (4u << 20))
        return;
    /* p is a mapping's start; its last page is whole too. Rounding the end down
     * would split the mapping in two, and mremap cannot grow across the split
     * (the dirty bits, a word more than 4 MiB at 2^25 rows, failed so). */
    size_t len = (bytes + page - 1) & ~(page - 1);
    madvise(p, len, MADV_HUGEPAGE); /* a hint: refused is as good as taken */
}

void *shard_big_alloc(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    hint_huge(p, bytes);
    return p;
}

void *shard_big_resize(void *p, size_t old_bytes, size_t bytes)
{
    if (!p)
        return shard_big_alloc(bytes);
    prefault_moved(); /* the helper may be faulting in part of it */
    void *q = mremap(p, old_bytes, bytes, MREMAP_MAYMOVE);
    if (q == MAP_FAILED)
        return NULL;
    hint_huge(q, bytes);
    return q;
}

void shard_big_free(void *p, size_t bytes)
{
    if (!p)
        return;
    prefault_moved(); /* the helper may be faulting in part of it */
    munmap(p, bytes);
}

/* Puts row r (not in the map yet) into the map; keys are unique, so the first
 * free slot from its home is its place. */
static void place(shard *s, size_t r)
{
    size_t mask = s->cap - 1, j = shard_home_in(shard_rec_key(shard_rec(s, (uint32_t)r)), s->cap);
    while (s->slots[j] != EMPTY)
        j = (j + 1) & mask;
    s->slots[j] = (uint32_t)r + 1;
}

/* The old map goes to the helper, which gives it back a slice at a time:
 * unmapping 2^27 slots at once (131,072 small pages when the kernel gives no
 * huge ones) on the push path was a 58 ms push at 10^8 rows. */
static void drop_old(shard *s)
{
    prefault_release(s->old_slots, s->old_cap * sizeof *s->old_slots);
    s->old_slots = NULL;
    s->old_cap = 0;
}

/* Rows moved ahead of the one placed have their home slot asked for: the
 * moves' misses on the new map overlap (as a push's do, prefetch_ahead). */
#define MIGRATE_AHEAD 16

void shard_map_migrate(shard *s, size_t budget)
{
    if (!s->old_slots)
        return;
    for (; budget && s->moved < s->to_move; budget--) {
        if (s->moved + MIGRATE_AHEAD < s->to_move) {
            uint64_t k = shard_rec_key(shard_rec(s, (uint32_t)(s->moved + MIGRATE_AHEAD)));
            shard_prefetch(&s->slots[shard_home_in(k, s->cap)]);
        }
        place(s, s->moved++);
    }
    if (s->moved == s->to_move)
        drop_old(s);
}

static void drop_next(shard *s)
{
    shard_big_free(s->next_slots, s->next_cap * sizeof *s->next_slots);
    s->next_slots = NULL;
    s->next_cap = s->next_epoch = s->next_back = 0;
    s->next_ready = 0;
}

/* Asks the helper for [*asked, want) of the mapping at base (mapped bytes long),
 * in whole huge pages, when a huge page or more of it is not asked yet. */
static void ask_ahead(void *base, size_t mapped, size_t want, size_t *asked)
{
    want = (want < mapped ? want : mapped) & ~(size_t)(SLICE - 1);
    if (want < *asked + SLICE)
        return;
    if (prefault_ask((char *)base + *asked, want - *asked) == 0)
        *asked = want;
}

/* The records and dirty bits of the next AHEAD_BYTES of records, before the
 * push loop writes them: grown ahead (mremap moves page tables, not bytes, and
 * the new part is then asked for too), then asked for. */
static void prepare_rows(shard *s)
{
    size_t rec = shard_rec_floats(s) * sizeof(float), ahead = AHEAD_BYTES / rec;
    if (s->rows_cap * rec < 2 * SLICE)
        return; /* small: its faults are few and cheap */
    /* more than half full: the sweep's shrink (a quarter full) never undoes it */
    if (s->used + ahead > s->rows_cap && s->used * 2 > s->rows_cap &&
        shard_rows_resize(s, s->rows_cap * 2) < 0)
        return; /* out of memory: the push grows them when it must, or fails */
    if (s->ahead_epoch != prefault_epoch()) { /* requests were dropped: from here on */
        s->ahead_epoch = prefault_epoch();
        s->rows_asked = s->used * rec & ~(size_t)(SLICE - 1);
        s->dirty_asked = s->used / 8 & ~(size_t)(SLICE - 1);
    }
    ask_ahead(s->rows, s->rows_cap * rec, (s->used + ahead) * rec, &s->rows_asked);
    ask_ahead(s->dirty, shard_dirty_bytes(s), (s->used + ahead) / 8 + 2 * SLICE, &s->dirty_asked);
}

/* The doubled map is ready when the helper, going up from its start, has
 * reached next_back, where the pushes' own part begins: it was asked whole and
 * in order, and nothing else writes it yet, so the page below next_back is in
 * only once all below it are. Past 0.7 load a push that finds it not ready (the
 * helper starved on a loaded machine) faults in a huge page of it itself, going
 * down from the end, when it has taken less than SPENT_MAX so far (past 0.75
 * load, whatever it took): the growth waits (shard_map_full) for at most a huge
 * page's fault a push, not for the helper alone. */
static void next_meet(shard *s, int64_t spent_ns)
{
    unsigned char in = 0;
    char *map = (char *)s->next_slots;
    if (!s->next_back || (mincore(map + s->next_back - PAGE, PAGE, &in) == 0 && (in & 1))) {
        s->next_ready = 1;
        return;
    }
    size_t rows = s->used + 1;
    if (rows * 10 <= s->cap * 7 || (rows * 20 <= s->cap * 15 && spent_ns > SPENT_MAX))
        return;
    size_t n = s->next_back < SLICE ? s->next_back : SLICE;
    if (madvise(map + s->next_back - n, n, MADV_POPULATE_WRITE) == 0)
        s->next_back -= n;
    s->next_ready = !s->next_back;
}

void shard_map_prepare(shard *s, int64_t spent_ns)
{
    prepare_rows(s);
    if (s->old_slots || s->cap < MIGRATE_MIN || s->used * 10 < s->cap * 6)
        return;
    size_t bytes = s->cap * 2 * sizeof *s->slots;
    if (!s->next_slots) {
        if (!(s->next_slots = shard_big_alloc(bytes)))
            return; /* the growth allocates, or fails, as without */
        s->next_cap = s->cap * 2;
    }
    /* the whole map at once: at 0.6 load the helper has 0.1 * cap new rows' time
     * (1,600 pushes of 8,192 keys before 2^27 slots double) for 1 GiB */
    uint64_t e = prefault_epoch() + 1; /* + 1: 0 is never asked */
    if (s->next_epoch != e && !s->next_ready && prefault_ask(s->next_slots, bytes) == 0) {
        s->next_epoch = e;
        s->next_back = s->next_back ? s->next_back : bytes;
    }
    if (s->next_epoch && !s->next_ready)
        next_meet(s, spent_ns);
}

void shard_map_rebuild(shard *s)
{
    drop_old(s); /* every row is placed below */
    if (s->cap)
        memset(s->slots, 0, s->cap * sizeof *s->slots);
    for (size_t r = 0; r < s->used; r++)
        place(s, r);
}

int shard_rehash(shard *s, size_t ncap)
{
    uint32_t *nslots = shard_big_alloc(ncap * sizeof *nslots);
    if (!nslots)
        return -PSKV_ENOMEM;
    drop_old(s); /* every row is placed below, moved or not */
    drop_next(s);
    shard_big_free(s->slots, s->cap * sizeof *nslots);
    s->slots = nslots;
    s->cap = ncap;
    for (size_t r = 0; r < s->used; r++)
        place(s, r);
    return 0;
}

int shard_map_grow(shard *s)
{
    size_t ncap = s->cap ? s->cap * 2 : 1024;
    if (ncap < MIGRATE_MIN)
        return shard_rehash(s, ncap);
    shard_map_migrate(s, SIZE_MAX); /* a move still under way ends first */
    uint32_t *nslots = s->next_cap == ncap ? s->next_slots : shard_big_alloc(ncap * sizeof *nslots);
    if (!nslots)
        return -PSKV_ENOMEM;
    if (nslots == s->next_slots) { /* prepared: taken over */
        s->next_slots = NULL;
        s->next_cap = s->next_epoch = s->next_back = 0;
        s->next_ready = 0;
    } else {
        drop_next(s);
    }
    s->old_slots = s->slots;
    s->old_cap = s->cap;
    s->slots = nslots;
    s->cap = ncap;
    s->moved = 0;
    s->to_move = s->used;
    return 0;
}
