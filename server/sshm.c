/* The server's mappings of its workers' segments (sshm.h). A handful of workers
 * per server: a linear table. */
#define _GNU_SOURCE
#include "sshm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "log.h"
#include "member.h"
#include "pskv_errors.h"
#include "shmseg.h"

/* One worker's: its host was checked when this entry was made (its first
 * reference), so later references need not name it. */
typedef struct seg {
    uint32_t node;                /* the worker's node id */
    uint64_t gen;
    char name[SHMSEG_NAME_MAX];
    unsigned char *base;
    size_t size;
} seg;

struct sshm {
    seg *segs;
    int n, cap;
};

sshm *sshm_new(void) { return calloc(1, sizeof(sshm)); }

void sshm_destroy(sshm **self_p)
{
    if (!self_p || !*self_p)
        return;
    sshm *s = *self_p;
    for (int i = 0; i < s->n; i++)
        munmap(s->segs[i].base, s->segs[i].size);
    free(s->segs);
    free(s);
    *self_p = NULL;
}

int sshm_count(const sshm *s) { return s ? s->n : 0; }

static seg *find(sshm *s, uint32_t node)
{
    for (int i = 0; i < s->n; i++)
        if (s->segs[i].node == node)
            return &s->segs[i];
    return NULL;
}

/* The segment of msg's reference mapped, a newer generation replacing an older. */
static int map_for(sshm *s, const Pskv__Meta *m, seg **out, char *why, size_t whylen)
{
    seg *g = find(s, m->sender);
    if (g && g->gen == m->shm_gen) {
        if (strcmp(g->name, m->shm_name) != 0) {
            snprintf(why, whylen, "segment %.80s under generation %llu, which is %s",
                     m->shm_name, (unsigned long long)m->shm_gen, g->name);
            return -PSKV_ESHMREF;
        }
        *out = g;
        return 0;
    }
    if (g && g->gen > m->shm_gen) {
        snprintf(why, whylen, "segment generation %llu retired (%llu is mapped): send again",
                 (unsigned long long)m->shm_gen, (unsigned long long)g->gen);
        return -PSKV_ESTALE;
    }
    if (!g && !m->shm_host) {
        snprintf(why, whylen, "worker node %u named no host (shm_host) with its first "
                 "reference", m->sender);
        return -PSKV_ENOSHM;
    }
    if (m->shm_host && !shmseg_same_host(m->shm_host)) {
        snprintf(why, whylen, "worker host '%.80s' is not this server's '%s'", m->shm_host,
                 shmseg_host_id());
        return -PSKV_ENOSHM;
    }
    void *base;
    size_t size;
    int rc = shmseg_open(m->shm_name, &base, &size, why, whylen);
    if (rc < 0)
        return rc;
    if (!g) {
        if (s->n == s->cap) {
            int cap = s->cap ? 2 * s->cap : 8;
            seg *ns = realloc(s->segs, (size_t)cap * sizeof *ns);
            if (!ns) {
                munmap(base, size);
                snprintf(why, whylen, "out of memory mapping a segment");
                return -PSKV_ENOSHM;
            }
            s->segs = ns;
            s->cap = cap;
        }
        g = &s->segs[s->n++];
    } else {
        munmap(g->base, g->size); /* the worker retired it: nothing of it is read again */
    }
    g->node = m->sender;
    g->gen = m->shm_gen;
    snprintf(g->name, sizeof g->name, "%s", m->shm_name);
    g->base = base;
    g->size = size;
    LOG_I("mapped shared-memory segment %s (generation %llu, %zu bytes) of worker node %u",
          g->name, (unsigned long long)g->gen, size, g->node);
    *out = g;
    return 0;
}

int sshm_resolve(sshm *s, wire_msg *msg, char *why, size_t whylen)
{
    const Pskv__Meta *m = msg->meta;
    int t = (int)m->type;
    if (!m->has_shm_len || (t != PSKV__MSG_TYPE__PUSH && t != PSKV__MSG_TYPE__PULL))
        return 0; /* wire_parse refused a reference on any other type */
    seg *g;
    int rc = map_for(s, m, &g, why, whylen);
    if (rc < 0)
        return rc;
    if (m->shm_off > g->size || m->shm_len > g->size - m->shm_off) {
        snprintf(why, whylen, "region at %llu of %llu bytes is outside segment %s (%zu bytes); "
                 "nothing applied", (unsigned long long)m->shm_off,
                 (unsigned long long)m->shm_len, g->name, g->size);
        return -PSKV_ESHMREF;
    }
    if (t == PSKV__MSG_TYPE__PUSH)
        msg->vals = (const float *)(const void *)(g->base + m->shm_off);
    return 0;
}

void sshm_view(sshm *s, const Pskv__View *v)
{
    if (!s || !v)
        return;
    int keep = 0;
    for (int i = 0; i < s->n; i++) {
        seg *g = &s->segs[i];
        if (member_view_node(v, g->node)) {
            s->segs[keep++] = *g;
            continue;
        }
        LOG_I("unmapped shared-memory segment %s of worker node %u, which left the job", g->name,
              g->node);
        munmap(g->base, g->size);
    }
    s->n = keep;
}

float *sshm_region(sshm *s, uint32_t node, uint64_t gen, uint64_t off, uint64_t len)
{
    seg *g = s ? find(s, node) : NULL;
    if (!g || g->gen != gen || off > g->size || len > g->size - off)
        return NULL;
    return (float *)(void *)(g->base + off);
}
