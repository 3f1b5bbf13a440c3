/* The sparse shard's map (shard_impl.h): open addressing with linear probing
 * from a key to its row, the slots holding row numbers + 1 (0 = free, so a map
 * fresh from the kernel is empty and costs no page until written).
 *
 * The map and the records are mappings of their own (shard_big_alloc): zero
 * pages on demand, given back to the system when freed, the records grown by
 * mremap (page tables move, bytes do not), none of it left in malloc's heap.
 *
 * Growing does not stop serving for a rehash: past 0.6 load the doubled map
 * is mapped and its pages faulted in a slice per push (shard_map_prepare); at
 * 0.7 it takes over, and the rows that were there move into it a few at a time
 * (shard_map_migrate: a bounded number per push and per row written) while
 * lookups that miss in the new map look in the old one. A small map (below
 * MIGRATE_MIN slots) moves at once. */
#define _GNU_SOURCE /* madvise, MADV_HUGEPAGE, mremap */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "pskv_errors.h"
#include "ring.h"
#include "shard_impl.h"

#define MIGRATE_MIN 65536 /* slots: a smaller map moves at once */
#define PAGE 4096
#define RELEASE_BYTES (4u << 20) /* of a freed map given back per push */
/* Faulting in fresh pages cost 4-6 ms a MiB on the loaded virtual machine of
 * docs/benchmarks.md (about 10 us a 4 KiB page; a 2 MiB huge page about 5 ms),
 * so the doubled map is faulted in on a schedule in proportion to the rows
 * past 0.6 load: PREFAULT_PER_ROW bytes each (the doubled map, 8 bytes per
 * slot, over the 0.1 * slots rows between 0.6 and 0.7 load is 80; the margin
 * ends it by about 0.68). Pushes that are not busy run ahead of it by up to
 * PREFAULT_LEAD, PREFAULT_MAX at a time. */
#define PREFAULT_PER_ROW 96
#define PREFAULT_MAX (2u << 20)
#define PREFAULT_LEAD (4u << 20)

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
    void *q = mremap(p, old_bytes, bytes, MREMAP_MAYMOVE);
    if (q == MAP_FAILED)
        return NULL;
    hint_huge(q, bytes);
    return q;
}

void shard_big_free(void *p, size_t bytes)
{
    if (p)
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

void shard_map_free_dead(shard *s)
{
    shard_big_free(s->dead_slots, s->dead_bytes);
    s->dead_slots = NULL;
    s->dead_bytes = s->dead_freed = 0;
}

/* The old map is given back a slice per push (shard_map_prepare): unmapping
 * 2^27 slots at once (131,072 small pages when the kernel gives no huge ones)
 * is the likely cause of the 58 ms push measured at 10^8 rows. */
static void drop_old(shard *s)
{
    shard_map_free_dead(s); /* a previous one still going back: at once */
    s->dead_slots = s->old_slots;
    s->dead_bytes = s->old_cap * sizeof *s->old_slots;
    s->old_slots = NULL;
    s->old_cap = 0;
}

static void release_dead(shard *s)
{
    if (!s->dead_slots)
        return;
    size_t n = s->dead_bytes - s->dead_freed < RELEASE_BYTES ? s->dead_bytes - s->dead_freed
                                                             : RELEASE_BYTES;
    if (s->dead_freed + n == s->dead_bytes) {
        shard_map_free_dead(s); /* the pages left are few, or none */
        return;
    }
    madvise((char *)s->dead_slots + s->dead_freed, n, MADV_DONTNEED);
    s->dead_freed += n;
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
    s->next_cap = s->next_touched = 0;
}

void shard_map_prepare(shard *s, size_t added, int busy)
{
    if (!busy)
        release_dead(s);
    if (s->old_slots || s->cap < MIGRATE_MIN || s->used * 10 < s->cap * 6)
        return;
    size_t bytes = s->cap * 2 * sizeof *s->slots;
    if (!s->next_slots) {
        if (!(s->next_slots = shard_big_alloc(bytes)))
            return; /* the growth allocates, or fails, as without */
        s->next_cap = s->cap * 2;
        s->next_touched = 0;
    }
    /* on schedule: PREFAULT_PER_ROW bytes for each row past 0.6 load */
    size_t due = (s->used - s->cap * 6 / 10) * PREFAULT_PER_ROW, want;
    if (busy) /* its own share only when behind: a push at 10^8 rows is always busy */
        want = s->next_touched < due ? added * PREFAULT_PER_ROW : 0;
    else /* ahead of schedule by up to PREFAULT_LEAD, a huge page at a time */
        want = due + PREFAULT_LEAD > s->next_touched ? due + PREFAULT_LEAD - s->next_touched : 0;
    want = want > PREFAULT_MAX && !busy ? PREFAULT_MAX : want;
    want = (want + PAGE - 1) & ~(size_t)(PAGE - 1);
    size_t n = bytes - s->next_touched < want ? bytes - s->next_touched : want;
    if (!n)
        return;
    /* one call faults the slice in: a page fault at a time cost 10 us a page */
    if (madvise((char *)s->next_slots + s->next_touched, n, MADV_POPULATE_WRITE) < 0) {
        volatile char *p = (volatile char *)s->next_slots; /* zero pages: a write faults one in */
        for (size_t o = 0; o < n; o += PAGE)
            p[s->next_touched + o] = 0;
    }
    s->next_touched += n;
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
        s->next_cap = s->next_touched = 0;
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
