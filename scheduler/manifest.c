#define _GNU_SOURCE
#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pskv_errors.h"

static void entry_free(manifest_entry *e)
{
    free(e->chains);
    free(e->workers);
    free(e->base_nodes);
    free(e->bases);
    free(e->nss);
    memset(e, 0, sizeof *e);
}

/* Writes name with every byte but [A-Za-z0-9._-] as %XX. */
static void put_name(FILE *f, const char *name)
{
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
        if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
            *c == '.' || *c == '_' || *c == '-')
            fputc(*c, f);
        else
            fprintf(f, "%%%02X", *c);
    }
}

/* Reads a name put_name wrote (up to the end of s) into out; 0 or -1. */
static int get_name(const char *s, char *out)
{
    size_t n = 0;
    for (; *s; s++) {
        unsigned v;
        if (n == MANIFEST_NAME_MAX)
            return -1;
        if (*s == '%') {
            if (sscanf(s + 1, "%2X", &v) != 1 || !v)
                return -1;
            out[n++] = (char)v;
            s += 2;
        } else {
            out[n++] = *s;
        }
    }
    out[n] = '\0';
    return 0;
}

/* namespaces=NS,... into e; 0 or -1. */
static int parse_nss(char *list, manifest_entry *e)
{
    e->nns = 0;
    e->nss = calloc(MANIFEST_MAX_NS, sizeof *e->nss);
    if (!e->nss)
        return -1;
    char *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (e->nns == MANIFEST_MAX_NS || get_name(strcmp(t, "%") ? t : "", e->nss[e->nns]) < 0)
            return -1;
        e->nns++;
    }
    return 0;
}

void manifest_free(manifest *m)
{
    for (size_t i = 0; i < m->n; i++)
        entry_free(&m->e[i]);
    free(m->e);
    m->e = NULL;
    m->n = 0;
}

/* bases=ID:SEQ,... into e; returns 0 or -1. */
static int parse_bases(char *list, manifest_entry *e)
{
    size_t n = 1;
    for (const char *q = list; *q; q++)
        n += *q == ',';
    e->base_nodes = calloc(n, sizeof *e->base_nodes);
    e->bases = calloc(n, sizeof *e->bases);
    if (!e->base_nodes || !e->bases)
        return -1;
    char *bs = NULL;
    for (char *b = strtok_r(list, ",", &bs); b; b = strtok_r(NULL, ",", &bs)) {
        if (sscanf(b, "%" SCNu32 ":%" SCNu64, &e->base_nodes[e->nbases], &e->bases[e->nbases]) != 2 ||
            e->bases[e->nbases] > e->seq)
            return -1;
        e->nbases++;
    }
    return 0;
}

/* Parses one line into e; returns 0 or -1. */
static int parse_line(char *line, manifest_entry *e)
{
    memset(e, 0, sizeof *e);
    e->clock = -1;
    if (strncmp(line, "ckpt ", 5))
        return -1;
    char *save = NULL, *chains = NULL, *workers = NULL, *bases = NULL, *nss = NULL;
    e->nns = -1;
    int have = 0;
    for (char *tok = strtok_r(line + 5, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return -1;
        *eq = 0;
        const char *k = tok, *v = eq + 1;
        if (!strcmp(k, "seq"))
            have += sscanf(v, "%" SCNu64, &e->seq) == 1;
        else if (!strcmp(k, "job"))
            have += sscanf(v, "%" SCNu64, &e->job) == 1;
        else if (!strcmp(k, "time"))
            have += sscanf(v, "%" SCNd64, &e->time) == 1;
        else if (!strcmp(k, "partitions"))
            have += sscanf(v, "%u", &e->partitions) == 1;
        else if (!strcmp(k, "replicas"))
            have += sscanf(v, "%u", &e->replicas) == 1;
        else if (!strcmp(k, "vnodes"))
            have += sscanf(v, "%u", &e->vnodes) == 1;
        else if (!strcmp(k, "chains"))
            chains = eq + 1;
        else if (!strcmp(k, "workers"))
            workers = eq + 1;
        else if (!strcmp(k, "bases"))
            bases = eq + 1; /* kind= says what bases do: not needed */
        else if (!strcmp(k, "clock")) {
            if (sscanf(v, "%" SCNd64, &e->clock) != 1)
                return -1;
        } else if (!strcmp(k, "of")) {
            if (strncmp(v, "ns:", 3) || get_name(v + 3, e->ns) < 0)
                return -1;
            e->ns_only = 1;
        } else if (!strcmp(k, "namespaces")) {
            nss = eq + 1;
        } else if (!strcmp(k, "best")) {
            e->best = 1;
            if (sscanf(v, "%15[a-z_]:%lf:%" SCNd64, e->best_metric, &e->best_value,
                       &e->best_clock) != 3)
                return -1;
        }
    }
    if (have != 6 || !chains || !e->partitions || !e->replicas || e->partitions > 65536 ||
        e->replicas > 8)
        return -1;
    size_t cells = (size_t)e->partitions * e->replicas;
    e->chains = calloc(cells, sizeof *e->chains);
    if (!e->chains)
        return -1;
    char *p = chains;
    for (size_t i = 0; i < cells; i++) {
        char *end;
        unsigned long id = strtoul(p, &end, 10);
        if (end == p || id > UINT32_MAX || (i + 1 < cells && *end != ','))
            return -1;
        e->chains[i] = (uint32_t)id;
        p = end + 1;
    }
    if (workers && *workers) {
        size_t n = 1;
        for (const char *q = workers; *q; q++)
            n += *q == ',';
        e->workers = calloc(n, sizeof *e->workers);
        if (!e->workers)
            return -1;
        char *ws = NULL;
        for (char *w = strtok_r(workers, ",", &ws); w; w = strtok_r(NULL, ",", &ws)) {
            manifest_progress *g = &e->workers[e->nworkers];
            int used = 0;
            if (sscanf(w, "%d:%" SCNd64 ":%" SCNd64 ":%" SCNd64 "%n", &g->rank, &g->epoch,
                       &g->step, &g->pos, &used) != 4)
                return -1;
            if (w[used] == ':' && get_name(w + used + 1, g->group) < 0)
                return -1; /* a named group's worker */
            e->nworkers++;
        }
    }
    if (nss && parse_nss(nss, e) < 0)
        return -1;
    return bases && *bases ? parse_bases(bases, e) : 0;
}

int manifest_read(const char *dir, manifest *m, char *why, size_t whylen)
{
    memset(m, 0, sizeof *m);
    char path[4200];
    snprintf(path, sizeof path, "%s/manifest", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT)
            return 0;
        snprintf(why, whylen, "cannot read %s: %s", path, strerror(errno));
        return -PSKV_EIO;
    }
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0, rc = 0;
    while (getline(&line, &cap, f) > 0) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        manifest_entry e;
        if (parse_line(line, &e) < 0) {
            entry_free(&e);
            snprintf(why, whylen, "%s line %d is not a checkpoint record", path, lineno);
            rc = -PSKV_EPROTO;
            break;
        }
        manifest_entry *g = realloc(m->e, (m->n + 1) * sizeof *g);
        if (!g) {
            entry_free(&e);
            rc = -PSKV_ENOMEM;
            break;
        }
        m->e = g;
        m->e[m->n++] = e;
    }
    free(line);
    fclose(f);
    if (rc < 0)
        manifest_free(m);
    return rc;
}

static int write_entry(FILE *f, const manifest_entry *e)
{
    fprintf(f, "ckpt seq=%" PRIu64 " job=%" PRIu64 " time=%" PRId64 " partitions=%u replicas=%u "
               "vnodes=%u chains=", e->seq, e->job, e->time, e->partitions, e->replicas,
            e->vnodes);
    size_t cells = (size_t)e->partitions * e->replicas;
    for (size_t i = 0; i < cells; i++)
        fprintf(f, "%s%u", i ? "," : "", e->chains[i]);
    fprintf(f, " workers=");
    for (size_t i = 0; i < e->nworkers; i++) {
        fprintf(f, "%s%d:%" PRId64 ":%" PRId64 ":%" PRId64, i ? "," : "", e->workers[i].rank,
                e->workers[i].epoch, e->workers[i].step, e->workers[i].pos);
        if (*e->workers[i].group) {
            fputc(':', f);
            put_name(f, e->workers[i].group);
        }
    }
    if (e->nbases) {
        fprintf(f, " kind=%s bases=", manifest_is_delta(e) ? "delta" : "full");
        for (size_t i = 0; i < e->nbases; i++)
            fprintf(f, "%s%" PRIu32 ":%" PRIu64, i ? "," : "", e->base_nodes[i], e->bases[i]);
    }
    if (e->clock >= 0)
        fprintf(f, " clock=%" PRId64, e->clock);
    if (e->ns_only) {
        fprintf(f, " of=ns:");
        put_name(f, e->ns);
    }
    for (int i = 0; i < e->nns; i++) { /* "%" alone: the unnamed namespace */
        fprintf(f, "%s", i ? "," : " namespaces=");
        if (*e->nss[i])
            put_name(f, e->nss[i]);
        else
            fputc('%', f);
    }
    if (e->best)
        fprintf(f, " best=%s:%.17g:%" PRId64, e->best_metric, e->best_value, e->best_clock);
    return fprintf(f, "\n") < 0 ? -1 : 0;
}

/* Writes every entry of m to dir/manifest: temp file, fsync, rename, fsync of the
 * directory. Returns 0 or -PSKV_EIO with why. */
int manifest_write(const char *dir, const manifest *m, char *why, size_t whylen)
{
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/manifest", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(why, whylen, "cannot write %s: %s", tmp, strerror(errno));
        return -PSKV_EIO;
    }
    int bad = fprintf(f, "# pskv checkpoint manifest: one line per complete checkpoint\n") < 0;
    for (size_t i = 0; i < m->n && !bad; i++)
        bad = write_entry(f, &m->e[i]) < 0;
    bad |= fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        snprintf(why, whylen, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -PSKV_EIO;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

int manifest_append(const char *dir, manifest *m, const manifest_entry *e, char *why,
                    size_t whylen)
{
    manifest_entry copy = *e;
    size_t cells = (size_t)e->partitions * e->replicas, nb = e->nbases ? e->nbases : 1;
    copy.chains = malloc(cells * sizeof *copy.chains);
    copy.workers = malloc((e->nworkers ? e->nworkers : 1) * sizeof *copy.workers);
    copy.base_nodes = malloc(nb * sizeof *copy.base_nodes);
    copy.bases = malloc(nb * sizeof *copy.bases);
    copy.nss = e->nns > 0 ? malloc((size_t)e->nns * sizeof *copy.nss) : NULL;
    if (copy.nss)
        memcpy(copy.nss, e->nss, (size_t)e->nns * sizeof *copy.nss);
    else if (e->nns > 0)
        copy.nns = -1; /* out of memory: not known */
    manifest_entry *g = realloc(m->e, (m->n + 1) * sizeof *g);
    if (!copy.chains || !copy.workers || !copy.base_nodes || !copy.bases || !g) {
        free(copy.chains);
        free(copy.workers);
        free(copy.base_nodes);
        free(copy.bases);
        free(copy.nss);
        if (g)
            m->e = g;
        snprintf(why, whylen, "out of memory");
        return -PSKV_ENOMEM;
    }
    memcpy(copy.chains, e->chains, cells * sizeof *copy.chains);
    if (e->nworkers) /* the arrays of an empty list may be NULL */
        memcpy(copy.workers, e->workers, e->nworkers * sizeof *copy.workers);
    if (e->nbases) {
        memcpy(copy.base_nodes, e->base_nodes, e->nbases * sizeof *copy.base_nodes);
        memcpy(copy.bases, e->bases, e->nbases * sizeof *copy.bases);
    }
    m->e = g;
    m->e[m->n++] = copy;
    return manifest_write(dir, m, why, whylen);
}

int manifest_retain(const char *dir, manifest *m, size_t keep, char *why, size_t whylen)
{
    if (keep == 0 || m->n <= keep)
        return 0;
    size_t drop = m->n - keep, kept = 0;
    int dropped = 0;
    for (size_t i = 0; i < m->n; i++) { /* the one marked best stays, in its place */
        if (i < drop && !m->e[i].best) {
            entry_free(&m->e[i]);
            dropped++;
        } else {
            m->e[kept++] = m->e[i];
        }
    }
    m->n = kept;
    if (!dropped)
        return 0;
    int rc = manifest_write(dir, m, why, whylen);
    return rc < 0 ? rc : dropped;
}

manifest_entry *manifest_best(const manifest *m)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->e[i].best)
            return &m->e[i];
    return NULL;
}

uint64_t manifest_oldest_base(const manifest_entry *e)
{
    uint64_t b = e->seq;
    for (size_t i = 0; i < e->nbases; i++)
        if (e->bases[i] < b)
            b = e->bases[i];
    return b;
}

int manifest_holds_ns(const manifest_entry *e, const char *ns)
{
    if (e->ns_only)
        return !strcmp(e->ns, ns);
    for (int i = 0; i < e->nns; i++)
        if (!strcmp(e->nss[i], ns))
            return 1;
    return e->nns < 0;
}

int manifest_is_delta(const manifest_entry *e) { return manifest_oldest_base(e) < e->seq; }
