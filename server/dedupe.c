/* Per partition: a ring of the last DEDUPE_KEEP (worker, id) pairs, oldest at
 * `head`, and an index of SLOTS (twice DEDUPE_KEEP, so at most half full) holding
 * ring position + 1, or 0 for an empty slot, found by linear probing from the
 * pair's home slot. Evicting the oldest pair deletes its slot by backward shift
 * (Knuth's algorithm R): later entries of the probe run move up into the hole
 * when their home allows it, so there are no tombstones and lookups never
 * degrade however many pairs have come and gone. Slots are found by ring
 * position, not by key, so a duplicate pair (possible only through import) is
 * harmless. */
#include "dedupe.h"

#include <stdlib.h>
#include <string.h>

#include "pskv_errors.h"

#define SLOT_BITS 12
#define SLOTS (1u << SLOT_BITS)
#define SLOT_MASK (SLOTS - 1)
#define ENTRY_BYTES 12u

_Static_assert(SLOTS >= 2 * DEDUPE_KEEP, "the index must stay at most half full");
_Static_assert(DEDUPE_KEEP < 65535, "ring position + 1 must fit a uint16_t slot");

typedef struct dpart {
    uint32_t head;  /* ring position of the oldest pair */
    uint32_t count; /* pairs held, at most DEDUPE_KEEP */
    uint32_t worker[DEDUPE_KEEP];
    uint64_t id[DEDUPE_KEEP];
    uint16_t slot[SLOTS]; /* ring position + 1; 0 = empty */
} dpart;

struct dedupe {
    uint32_t nparts;
    dpart **part; /* nparts pointers, NULL until first use */
};

/* For test_dedupe.c only (declared there too, not part of the API): the home
 * slot of a pair, so the tests can build runs of colliding ids. */
uint32_t dedupe_home_slot(uint32_t worker, uint64_t id);

uint32_t dedupe_home_slot(uint32_t worker, uint64_t id)
{
    /* splitmix64's finaliser over the id offset by the worker: every bit of
     * both reaches the top bits, which pick the slot. */
    uint64_t x = id + 0x9e3779b97f4a7c15ULL * ((uint64_t)worker + 1);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return (uint32_t)(x >> (64 - SLOT_BITS));
}

static uint32_t home_of(const dpart *p, uint32_t pos)
{
    return dedupe_home_slot(p->worker[pos], p->id[pos]);
}

static int lookup(const dpart *p, uint32_t worker, uint64_t id)
{
    for (uint32_t i = dedupe_home_slot(worker, id);; i = (i + 1) & SLOT_MASK) {
        uint32_t v = p->slot[i];
        if (v == 0)
            return 0;
        if (p->id[v - 1] == id && p->worker[v - 1] == worker)
            return 1;
    }
}

/* Removes ring position pos from the index by backward shift. */
static void unindex(dpart *p, uint32_t pos)
{
    uint32_t i = home_of(p, pos);
    while (p->slot[i] != pos + 1)
        i = (i + 1) & SLOT_MASK;
    for (uint32_t j = i;;) {
        j = (j + 1) & SLOT_MASK;
        uint32_t v = p->slot[j];
        if (v == 0)
            break;
        /* The entry at j may fill the hole at i unless its home lies cyclically
         * in (i, j]: then moving it before its home would hide it. */
        uint32_t k = home_of(p, v - 1);
        int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            p->slot[i] = (uint16_t)v;
            i = j;
        }
    }
    p->slot[i] = 0;
}

/* Appends a pair, forgetting the oldest when the ring is full. */
static void put(dpart *p, uint32_t worker, uint64_t id)
{
    uint32_t pos;
    if (p->count == DEDUPE_KEEP) {
        pos = p->head;
        unindex(p, pos);
        p->head = (p->head + 1) % DEDUPE_KEEP;
    } else {
        pos = (p->head + p->count) % DEDUPE_KEEP;
        p->count++;
    }
    p->worker[pos] = worker;
    p->id[pos] = id;
    uint32_t i = dedupe_home_slot(worker, id);
    while (p->slot[i] != 0)
        i = (i + 1) & SLOT_MASK;
    p->slot[i] = (uint16_t)(pos + 1);
}

static void reset(dpart *p)
{
    p->head = 0;
    p->count = 0;
    memset(p->slot, 0, sizeof p->slot);
}

dedupe *dedupe_new(uint32_t nparts)
{
    dedupe *d = malloc(sizeof *d);
    if (!d)
        return NULL;
    d->nparts = nparts;
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
        free(d->part[i]);
    free(d->part);
    free(d);
    *d_p = NULL;
}

/* The partition's memory, allocated (empty) on first use; NULL when out of memory. */
static dpart *part_get(dedupe *d, uint32_t part)
{
    if (!d->part[part]) {
        dpart *p = malloc(sizeof *p);
        if (!p)
            return NULL;
        reset(p);
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
    if (!lookup(p, worker, id))
        put(p, worker, id);
    return 0;
}

int dedupe_seen(const dedupe *d, uint32_t part, uint32_t worker, uint64_t id)
{
    if (part >= d->nparts || !d->part[part])
        return 0;
    return lookup(d->part[part], worker, id);
}

void dedupe_clear(dedupe *d, uint32_t part)
{
    if (part >= d->nparts)
        return;
    free(d->part[part]);
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
        uint32_t pos = (p->head + n) % DEDUPE_KEEP;
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
    if (count > DEDUPE_KEEP || len != 4 + count * ENTRY_BYTES)
        return -PSKV_EPROTO;
    dpart *p = part_get(d, part);
    if (!p)
        return -PSKV_ENOMEM;
    reset(p);
    b += 4;
    for (uint64_t n = 0; n < count; n++, b += ENTRY_BYTES)
        put(p, (uint32_t)get_le(b, 4), get_le(b + 4, 8));
    return 0;
}
