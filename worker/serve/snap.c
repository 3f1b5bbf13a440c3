/* snap: immutable per-table snapshots behind a pointer swap (design in snap.h). */
#include "snap.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "pskv_errors.h"

struct snapstore {
    pthread_mutex_t mu;
    snap **tabs;
    size_t n, cap;
};

snapstore *snapstore_new(void)
{
    snapstore *st = calloc(1, sizeof *st);
    if (st)
        pthread_mutex_init(&st->mu, NULL);
    return st;
}

void snap_free(snap **s_p)
{
    if (!s_p || !*s_p)
        return;
    free((*s_p)->keys);
    free((*s_p)->vals);
    free(*s_p);
    *s_p = NULL;
}

/* Drops one reference with the mutex held; returns the snapshot to free outside it. */
static snap *unref(snap *s) { return --s->refs == 0 ? s : NULL; }

void snapstore_destroy(snapstore **self_p)
{
    if (!self_p || !*self_p)
        return;
    snapstore *st = *self_p;
    for (size_t i = 0; i < st->n; i++) {
        snap *dead = unref(st->tabs[i]);
        snap_free(&dead);
    }
    free(st->tabs);
    pthread_mutex_destroy(&st->mu);
    free(st);
    *self_p = NULL;
}

int snap_publish(snapstore *st, snap **s_p)
{
    snap *s = *s_p, *old = NULL;
    *s_p = NULL;
    s->refs = 1; /* the store's */
    pthread_mutex_lock(&st->mu);
    size_t i = 0;
    while (i < st->n && strcmp(st->tabs[i]->table, s->table) != 0)
        i++;
    int rc = 0;
    if (i < st->n) {
        old = unref(st->tabs[i]);
        st->tabs[i] = s;
    } else if (grow_array((void **)&st->tabs, &st->cap, st->n + 1, sizeof *st->tabs) == 0) {
        st->tabs[st->n++] = s;
    } else {
        old = s;
        rc = -PSKV_ENOMEM;
    }
    pthread_mutex_unlock(&st->mu);
    snap_free(&old);
    return rc;
}

snap *snap_acquire(snapstore *st, const char *table)
{
    snap *s = NULL;
    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; i < st->n && !s; i++)
        if (!table || !strcmp(st->tabs[i]->table, table))
            s = st->tabs[i];
    if (s)
        s->refs++;
    pthread_mutex_unlock(&st->mu);
    return s;
}

snap *snap_acquire_at(snapstore *st, size_t i)
{
    snap *s = NULL;
    pthread_mutex_lock(&st->mu);
    if (i < st->n) {
        s = st->tabs[i];
        s->refs++;
    }
    pthread_mutex_unlock(&st->mu);
    return s;
}

size_t snap_count(snapstore *st)
{
    pthread_mutex_lock(&st->mu);
    size_t n = st->n;
    pthread_mutex_unlock(&st->mu);
    return n;
}

void snap_release(snapstore *st, snap **s_p)
{
    if (!s_p || !*s_p)
        return;
    pthread_mutex_lock(&st->mu);
    snap *dead = unref(*s_p);
    pthread_mutex_unlock(&st->mu);
    snap_free(&dead);
    *s_p = NULL;
}

int snap_find(const snap *s, uint64_t key, float *v)
{
    const float *row = snap_row(s, key);
    if (!row)
        return -1;
    *v = row[0];
    return 0;
}

const float *snap_row(const snap *s, uint64_t key)
{
    size_t w = snap_width(s);
    if (!s->keys)
        return key < s->n ? s->vals + key * w : NULL;
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->keys[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == s->n || s->keys[lo] != key)
        return NULL;
    return s->vals + lo * w;
}
