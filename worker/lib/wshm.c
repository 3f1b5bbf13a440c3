/* Shared-memory regions for parts (contract in wshm.h). A segment is a first-fit
 * arena: its regions in use kept sorted by offset (a few per request in the
 * window), each 64-byte aligned; it is freed when retired and its last
 * reference (the server's slot, each region) goes. */
#define _GNU_SOURCE
#include "wshm.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "log.h"
#include "shmseg.h"

#define ALIGN 64

struct wshm_seg {
    char name[SHMSEG_NAME_MAX];
    uint64_t gen;
    unsigned char *base;
    size_t size;
    int refs;          /* the server's slot (until retired) and each region */
    int linked;        /* the name is still in /dev/shm */
    int retired;       /* no new regions */
    struct { uint64_t off, len; } *used; /* regions in use, by offset */
    int nused, capused;
};

static uint64_t next_gen = 1; /* generations, all servers alike: each segment its own */

static void seg_unlink(wshm_seg *g)
{
    if (g->linked && shm_unlink(g->name) < 0)
        LOG_D("shm_unlink %s: %m", g->name);
    g->linked = 0;
}

static void seg_unref(wshm_seg *g)
{
    if (--g->refs > 0)
        return;
    seg_unlink(g);
    munmap(g->base, g->size);
    free(g->used);
    free(g);
}

/* Unlinks g and takes no more regions from it: the server gets a new one. */
static void seg_retire(wshm_seg *g)
{
    g->retired = 1;
    seg_unlink(g);
}

static wshm_seg *seg_new(pskv_worker *w, int si)
{
    wshm_seg *g = calloc(1, sizeof *g);
    char why[200];
    void *base;
    if (!g)
        return NULL;
    g->gen = next_gen++;
    if (shmseg_create(g->gen, WSHM_SEG_BYTES, g->name, &base, why, sizeof why) < 0) {
        free(g);
        wshm_refused(w, si, why);
        return NULL;
    }
    g->base = base;
    g->size = WSHM_SEG_BYTES;
    g->refs = g->linked = 1;
    LOG_D("shared-memory segment %s for server node %u", g->name, w->srv[si].id);
    return g;
}

int wshm_usable(const pskv_worker *w, const tbl *t, int si, size_t bytes)
{
    return w->shm && !w->srv[si].shm_refused && bytes >= WSHM_MIN_BYTES && !t->wire &&
           !t->fs.n && !t->kkt && t->scale == 1.0f;
}

/* First fit; -1 when nothing is free. */
static int64_t seg_alloc(wshm_seg *g, uint64_t len)
{
    uint64_t at = 0, need = (len + ALIGN - 1) / ALIGN * ALIGN;
    int i = 0;
    for (; i < g->nused; i++) {
        if (g->used[i].off - at >= need)
            break;
        at = (g->used[i].off + g->used[i].len + ALIGN - 1) / ALIGN * ALIGN;
    }
    if (at + need > g->size)
        return -1;
    if (g->nused == g->capused) {
        int cap = g->capused ? 2 * g->capused : 16;
        void *u = realloc(g->used, (size_t)cap * sizeof *g->used);
        if (!u)
            return -1;
        g->used = u;
        g->capused = cap;
    }
    memmove(g->used + i + 1, g->used + i, (size_t)(g->nused - i) * sizeof *g->used);
    g->used[i].off = at;
    g->used[i].len = len;
    g->nused++;
    g->refs++;
    return (int64_t)at;
}

void wshm_release(part *p)
{
    wshm_seg *g = p->shm;
    if (!g)
        return;
    p->shm = NULL;
    int late = !p->shm_heard || p->shm_dirty; /* the server may still touch the region */
    if (late && !g->retired)
        LOG_I("shared-memory segment %s retired: a server may still touch a region of it",
              g->name);
    if (p->shm_borrowed) { /* its request's push buffer keeps the region taken */
        p->shm_borrowed = 0;
        if (late)
            seg_retire(g);
        seg_unref(g);
        return;
    }
    if (late) {
        seg_retire(g); /* the region stays taken: nothing else lands on it */
    } else {
        for (int i = 0; i < g->nused; i++)
            if (g->used[i].off == p->shm_off) {
                memmove(g->used + i, g->used + i + 1, (size_t)(g->nused - i - 1) * sizeof *g->used);
                g->nused--;
                break;
            }
    }
    seg_unref(g);
}

float *wshm_take(pskv_worker *w, part *p, size_t bytes)
{
    int dirty = p->shm && !p->shm_heard;
    dirty |= p->shm && p->shm_dirty;
    wshm_release(p);
    srv *s = &w->srv[p->server];
    if (s->shm && s->shm->retired) {
        seg_unref(s->shm);
        s->shm = NULL;
    }
    if (!s->shm && !(s->shm = seg_new(w, p->server)))
        return NULL;
    int64_t off = seg_alloc(s->shm, bytes);
    if (off < 0)
        return NULL; /* full: this part over TCP */
    p->shm = s->shm;
    p->shm_off = (uint64_t)off;
    p->shm_len = bytes;
    p->shm_heard = 0;
    p->shm_dirty = dirty;
    return (float *)(void *)(s->shm->base + off);
}

float *wshm_reserve(pskv_worker *w, int si, part *res, size_t bytes)
{
    memset(res, 0, sizeof *res);
    res->server = si;
    float *v = wshm_take(w, res, bytes);
    res->shm_heard = 1; /* no send names it: released, it is free again */
    return v;
}

int wshm_borrow(pskv_worker *w, part *p, const part *res, const float *vals, size_t bytes)
{
    wshm_seg *g = res->shm;
    if (!g || p->shm || g->retired || w->srv[p->server].shm != g || p->server != res->server ||
        res->shm_len != bytes || vals != (const float *)(void *)(g->base + res->shm_off))
        return 0;
    g->refs++;
    p->shm = g;
    p->shm_off = res->shm_off;
    p->shm_len = bytes;
    p->shm_heard = p->shm_dirty = 0;
    p->shm_borrowed = 1;
    return 1;
}

void wshm_meta(const pskv_worker *w, const part *p, Pskv__Meta *m)
{
    m->shm_name = (char *)p->shm->name;
    if (!w->srv[p->server].shm_host_ok)
        m->shm_host = (char *)shmseg_host_id();
    m->has_shm_gen = m->has_shm_off = m->has_shm_len = 1;
    m->shm_gen = p->shm->gen;
    m->shm_off = p->shm_off;
    m->shm_len = p->shm_len;
}

void wshm_heard(pskv_worker *w, part *p, const Pskv__Meta *m)
{
    if (!p->shm)
        return;
    p->shm_heard = 1;
    if (m->type != PSKV__MSG_TYPE__ERROR) {
        seg_unlink(p->shm); /* mapped there: the name is no longer needed */
        w->srv[p->server].shm_host_ok = 1;
    }
}

const float *wshm_reply(const part *p, const Pskv__Meta *m)
{
    if (!p->shm || !m->has_shm_len || m->shm_gen != p->shm->gen || m->shm_off != p->shm_off ||
        m->shm_len != p->shm_len)
        return NULL;
    return (const float *)(const void *)(p->shm->base + p->shm_off);
}

void wshm_refused(pskv_worker *w, int si, const char *why)
{
    srv *s = &w->srv[si];
    if (!s->shm_refused)
        LOG_W("server node %u (%s:%d): no shared memory (%s); its values go over TCP", s->id,
              s->host, s->port, why);
    s->shm_refused = 1;
    wshm_drop(w, si);
}

void wshm_drop(pskv_worker *w, int si)
{
    srv *s = &w->srv[si];
    if (!s->shm)
        return;
    seg_retire(s->shm);
    seg_unref(s->shm);
    s->shm = NULL;
}
