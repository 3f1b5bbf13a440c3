/* Per partition: a ring of (worker, id) pairs, oldest at `head`, of a power-of-two
 * capacity that doubles when full (up to the cap), and an index of twice as many
 * slots holding ring position + 1 (0 = empty), found by linear probing from the
 * pair's home slot. Forgetting the oldest pair deletes its slot by backward shift
 * (Knuth's algorithm R), so there are no tombstones. Pairs are forgotten from the
 * front while the front pair is below its worker's floor, and all at once, wherever
 * they are, when the ring is full; below the floor every id counts as seen,
 * forgotten or not. */
#include "dedupe.h"

#include <stdlib.h>
#include <string.h>

#include "pskv_errors.h"

#define ENTRY_BYTES 12u
#define FIRST_CAP 256u

typedef struct dpart {
    uint32_t head, count, cap; /* cap: a power of two */
    uint32_t *worker;
    uint64_t *id;
    uint32_t *slot;            /* 2 * cap slots */
} dpart;

typedef struct wfloor {
    uint32_t worker;
    uint64_t floor;
} wfloor;

struct dedupe {
    uint32_t nparts, max;
    dpart **part;   /* nparts pointers, NULL until first use */
    wfloor *floors;
    size_t nfloors, capfloors;
    uint64_t forced;
};

/* For test_dedupe.c only (declared there too, not part of the API): a pair's
 * hash, of which the low bits pick the home slot. */
uint32_t dedupe_home_slot(uint32_t worker, uint64_t id);

uint32_t dedupe_home_slot(uint32_t worker, uint64_t id)
{
    uint64_t x = id + 0x9e3779b97f4a7c15ULL * ((uint64_t)worker + 1);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return (uint32_t)(x >> 32);
}

static uint32_t nslots(const dpart *p) { return 2 * p->cap; }

static uint32_t home(const dpart *p, uint32_t worker, uint64_t id)
{
    return dedupe_home_slot(worker, id) & (nslots(p) - 1);
}

static int lookup(const dpart *p, uint32_t worker, uint64_t id)
{
    uint32_t mask = nslots(p) - 1;
    for (uint32_t i = home(p, worker, id);; i = (i + 1) & mask) {
        uint32_t v = p->slot[i];
        if (v == 0)
            return 0;
        if (p->id[v - 1] == id && p->worker[v - 1] == worker)
            return 1;
    }
}

static void index_pos(dpart *p, uint32_t pos)
{
    uint32_t mask = nslots(p) - 1;
    uint32_t i = home(p, p->worker[pos], p->id[pos]);
    while (p->slot[i] != 0)
        i = (i + 1) & mask;
    p->slot[i] = pos + 1;
}

/* Removes ring position pos from the index by backward shift. */
static void unindex(dpart *p, uint32_t pos)
{
    uint32_t mask = nslots(p) - 1;
    uint32_t i = home(p, p->worker[pos], p->id[pos]);
    while (p->slot[i] != pos + 1)
        i = (i + 1) & mask;
    for (uint32_t j = i;;) {
        j = (j + 1) & mask;
        uint32_t v = p->slot[j];
        if (v == 0)
            break;
        /* the entry at j may fill the hole at i unless its home lies cyclically
         * in (i, j]: moving it before its home would hide it */
        uint32_t k = home(p, p->worker[v - 1], p->id[v - 1]);
        int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            p->slot[i] = v;
            i = j;
        }
    }
    p->slot[i] = 0;
}

static void pop_front(dpart *p)
{
    unindex(p, p->head);
    p->head = (p->head + 1) & (p->cap - 1);
    p->count--;
}

static uint64_t floor_of(const dedupe *d, uint32_t worker)
{
    for (size_t i = 0; i < d->nfloors; i++)
        if (d->floors[i].worker == worker)
            return d->floors[i].floor;
    return 0;
}

static void prune(const dedupe *d, dpart *p)
{
    while (p->count && p->id[p->head] < floor_of(d, p->worker[p->head]))
        pop_front(p);
}

/* The ring again with capacity ncap (oldest first at 0) and its index; with d,
 * without the pairs below their worker's floor, wherever they are. */
static int rebuild(const dedupe *d, dpart *p, uint32_t ncap)
{
    uint32_t *w = malloc(ncap * sizeof *w);
    uint64_t *id = malloc(ncap * sizeof *id);
    uint32_t *slot = calloc(2 * (size_t)ncap, sizeof *slot);
    if (!w || !id || !slot) {
        free(w);
        free(id);
        free(slot);
        return -PSKV_ENOMEM;
    }
    uint32_t kept = 0;
    for (uint32_t n = 0; n < p->count; n++) {
        uint32_t pos = (p->head + n) & (p->cap - 1);
        if (d && p->id[pos] < floor_of(d, p->worker[pos]))
            continue;
        w[kept] = p->worker[pos];
        id[kept++] = p->id[pos];
    }
    p->count = kept;
    free(p->worker);
    free(p->id);
    free(p->slot);
    p->worker = w;
    p->id = id;
    p->slot = slot;
    p->cap = ncap;
    p->head = 0;
    for (uint32_t n = 0; n < p->count; n++)
        index_pos(p, n);
    return 0;
}

/* A new partition's first ring (empty, FIRST_CAP pairs). */
static int first_ring(dpart *p) { return rebuild(NULL, p, FIRST_CAP); }

/* The pairs of p at or above their worker's floor. */
static uint32_t above_floor(const dedupe *d, const dpart *p)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < p->count; k++) {
        uint32_t pos = (p->head + k) & (p->cap - 1);
        n += p->id[pos] >= floor_of(d, p->worker[pos]);
    }
    return n;
}

static int put(dedupe *d, dpart *p, uint32_t worker, uint64_t id)
{
    prune(d, p);
    while (p->count && p->count >= d->max) {
        pop_front(p); /* at the cap: a re-send of this one could now apply twice */
        d->forced++;
    }
    /* full: rebuilt once, without every pair below its floor, also behind a front
     * pair that stays (a worker that died with a push in flight never raises its
     * floor, and pruning from the front alone would then keep every later pair);
     * twice as large when what stays fills more than half */
    if (p->count == p->cap) {
        uint32_t ncap = above_floor(d, p) > p->cap / 2 ? 2 * p->cap : p->cap;
        if (rebuild(d, p, ncap) < 0)
            return -PSKV_ENOMEM;
    }
    uint32_t pos = (p->head + p->count) & (p->cap - 1);
    p->worker[pos] = worker;
    p->id[pos] = id;
    p->count++;
    index_pos(p, pos);
    return 0;
}

static void part_free(dpart *p)
{
    if (!p)
        return;
    free(p->worker);
    free(p->id);
    free(p->slot);
    free(p);
}

dedupe *dedupe_new(uint32_t nparts)
{
    dedupe *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->nparts = nparts;
    d->max = DEDUPE_MAX;
    d->part = calloc(nparts ? nparts : 1, sizeof *d->part);
    if (!d->part) {
        free(d);
        return NULL;
    }
    return d;
}

void dedupe_destroy(dedupe **d_p)
{
    if (!d_p || !*d_p)
        return;
    dedupe *d = *d_p;
    for (uint32_t i = 0; i < d->nparts; i++)
        part_free(d->part[i]);
    free(d->part);
    free(d->floors);
    free(d);
    *d_p = NULL;
}

void dedupe_set_max(dedupe *d, uint32_t max) { d->max = max ? max : 1; }
uint64_t dedupe_forced(const dedupe *d) { return d->forced; }

uint32_t dedupe_count(const dedupe *d, uint32_t part)
{
    return part < d->nparts && d->part[part] ? d->part[part]->count : 0;
}

/* The partition's memory, allocated (empty) on first use; NULL when out of memory. */
static dpart *part_get(dedupe *d, uint32_t part)
{
    if (!d->part[part]) {
        dpart *p = calloc(1, sizeof *p);
        if (!p || first_ring(p) < 0) {
            free(p);
            return NULL;
        }
        d->part[part] = p;
    }
    return d->part[part];
}

int dedupe_record(dedupe *d, uint32_t part, uint32_t worker, uint64_t id)
{
    if (part >= d->nparts)
        return -PSKV_EINVAL;
    dpart *p = part_get(d, part);
    if (!p)
        return -PSKV_ENOMEM;
    if (lookup(p, worker, id))
        return 0;
    return put(d, p, worker, id);
}

int dedupe_seen(const dedupe *d, uint32_t part, uint32_t worker, uint64_t id)
{
    if (part >= d->nparts)
        return 0;
    if (id < floor_of(d, worker)) /* answered: a copy now is an old forward sent again */
        return 1;
    return d->part[part] && lookup(d->part[part], worker, id);
}

uint64_t dedupe_floor(const dedupe *d, uint32_t worker) { return floor_of(d, worker); }

void dedupe_set_floor(dedupe *d, uint32_t worker, uint64_t floor)
{
    for (size_t i = 0; i < d->nfloors; i++)
        if (d->floors[i].worker == worker) {
            if (floor > d->floors[i].floor)
                d->floors[i].floor = floor;
            return;
        }
    if (d->nfloors == d->capfloors) {
        size_t cap = d->capfloors ? 2 * d->capfloors : 16;
        wfloor *g = realloc(d->floors, cap * sizeof *g);
        if (!g)
            return; /* no floor: its pairs stay until the cap */
        d->floors = g;
        d->capfloors = cap;
    }
    d->floors[d->nfloors].worker = worker;
    d->floors[d->nfloors].floor = floor;
    d->nfloors++;
}

void dedupe_clear(dedupe *d, uint32_t part)
{
    if (part >= d->nparts)
        return;
    part_free(d->part[part]);
    d->part[part] = NULL;
}

static void put_le(unsigned char *b, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *b, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)b[i] << (8 * i);
    return v;
}

size_t dedupe_export(const dedupe *d, uint32_t part, void *buf, size_t cap)
{
    const dpart *p = part < d->nparts ? d->part[part] : NULL;
    uint32_t count = p ? p->count : 0;
    size_t need = 4 + (size_t)count * ENTRY_BYTES;
    if (!buf || cap < need)
        return need;
    unsigned char *b = buf;
    put_le(b, count, 4);
    b += 4;
    for (uint32_t n = 0; n < count; n++, b += ENTRY_BYTES) {
        uint32_t pos = (p->head + n) & (p->cap - 1);
        put_le(b, p->worker[pos], 4);
        put_le(b + 4, p->id[pos], 8);
    }
    return need;
}

int dedupe_import(dedupe *d, uint32_t part, const void *buf, size_t len)
{
    if (part >= d->nparts)
        return -PSKV_EINVAL;
    if (!buf || len < 4)
        return -PSKV_EPROTO;
    const unsigned char *b = buf;
    uint64_t count = get_le(b, 4);
    if (count > d->max || len != 4 + count * ENTRY_BYTES)
        return -PSKV_EPROTO;
    dpart *fresh = calloc(1, sizeof *fresh);
    if (!fresh || first_ring(fresh) < 0) {
        free(fresh);
        return -PSKV_ENOMEM;
    }
    b += 4;
    for (uint64_t n = 0; n < count; n++, b += ENTRY_BYTES) {
        uint32_t worker = (uint32_t)get_le(b, 4);
        uint64_t id = get_le(b + 4, 8);
        if (!lookup(fresh, worker, id) && put(d, fresh, worker, id) < 0) {
            part_free(fresh);
            return -PSKV_ENOMEM;
        }
    }
    part_free(d->part[part]);
    d->part[part] = fresh;
    return 0;
}
