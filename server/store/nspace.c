/* Namespaces of the server's tables: names, key bindings, quotas (nspace.h). */
#include "nspace.h"

#include <stdio.h>
#include <string.h>

#include "pskv_errors.h"

void nspace_of(const char *full, char *ns)
{
    const char *slash = strchr(full, '/');
    size_t n = slash ? (size_t)(slash - full) : 0;
    if (n > NSPACE_MAX)
        n = NSPACE_MAX;
    memcpy(ns, full, n);
    ns[n] = '\0';
}

int nspace_name_check(const char *full, char *why, size_t whylen)
{
    const char *slash = strchr(full, '/');
    if (!slash)
        return 0;
    size_t n = (size_t)(slash - full);
    if (n == 0 || n > NSPACE_MAX) {
        snprintf(why, whylen, "table '%s': the namespace before '/' must be 1..%d bytes (is %zu)",
                 full, NSPACE_MAX, n);
        return -PSKV_EINVAL;
    }
    if (!slash[1] || strchr(slash + 1, '/')) {
        snprintf(why, whylen, "table '%s': a full name is NAMESPACE/NAME, with one '/' and a "
                 "name after it", full);
        return -PSKV_EINVAL;
    }
    return 0;
}

/* 1 when the comma-separated list holds ns. */
static int listed(const char *list, const char *ns)
{
    size_t len = strlen(ns);
    for (const char *p = list; *p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n == len && !memcmp(p, ns, n))
            return 1;
        p += n + (comma != NULL);
    }
    return 0;
}

int nspace_access(const char *bind, const char *ns, int write, char *why, size_t whylen)
{
    if (!bind || !*bind)
        return 0;
    int reader = !strncmp(bind, "ro:", 3);
    const char *list = strchr(bind, ':') ? strchr(bind, ':') + 1 : bind;
    const char *shown = *ns ? ns : "(unnamed)";
    if (*list && !listed(list, ns)) {
        snprintf(why, whylen, "namespace '%s': this %s key is bound to namespaces %s only",
                 shown, reader ? "reader" : "worker", list);
        return -PSKV_EACCES;
    }
    if (reader && write) {
        snprintf(why, whylen, "namespace '%s': a reader key may pull, not push", shown);
        return -PSKV_EACCES;
    }
    return 0;
}

uint64_t nspace_quota(table_set *ts, const char *ns)
{
    for (size_t i = 0; i < tables_count(ts); i++) {
        const table *t = tables_at(ts, i);
        if (t->quota && !strcmp(t->ns, ns))
            return t->quota;
    }
    return 0;
}

uint64_t nspace_bytes(table_set *ts, const char *ns)
{
    shard_mem m = {0};
    for (size_t i = 0; i < tables_count(ts); i++) {
        const table *t = tables_at(ts, i);
        if (!strcmp(t->ns, ns))
            shard_mem_add(t->sh, &m);
    }
    return m.bytes;
}

int nspace_open_check(table_set *ts, const Pskv__TableOptions *o, char *why, size_t whylen)
{
    char ns[NSPACE_MAX + 1];
    nspace_of(o->name ? o->name : "", ns);
    uint64_t have = nspace_quota(ts, ns);
    if (!o->has_quota_bytes || !o->quota_bytes || !have || have == o->quota_bytes)
        return 0;
    snprintf(why, whylen, "table '%s': namespace '%s' has option 'quota_bytes' = %llu, open "
             "asked %llu", o->name, ns, (unsigned long long)have,
             (unsigned long long)o->quota_bytes);
    return -PSKV_EMISMATCH;
}

int nspace_push_check(table_set *ts, const table *t, const rowset *rs, uint32_t servers,
                      char *why, size_t whylen)
{
    uint64_t quota = nspace_quota(ts, t->ns);
    if (!quota || t->dense || !rs->keys) /* a dense table's rows exist from its open */
        return 0;
    uint64_t fresh = 0;
    for (uint64_t i = 0; i < rs->n; i++)
        fresh += !shard_has_row(t->sh, rs->keys[i]);
    if (!fresh)
        return 0;
    shard_mem m = {0};
    shard_mem_add(t->sh, &m);
    /* a row's share of the storage: measured once rows exist, else its floats and key */
    uint64_t row = m.rows ? m.bytes / m.rows : shard_row_floats(t->sh) * 4 + 16;
    uint64_t limit = quota / (servers ? servers : 1);
    uint64_t used = nspace_bytes(ts, t->ns);
    if (used + fresh * row <= limit)
        return 0;
    snprintf(why, whylen, "namespace '%s' is at its quota: %llu of %llu bytes on this server "
             "(quota_bytes %llu over %u servers); a push of %llu new rows to table '%s' refused",
             *t->ns ? t->ns : "(unnamed)", (unsigned long long)used, (unsigned long long)limit,
             (unsigned long long)quota, servers ? servers : 1, (unsigned long long)fresh,
             t->name);
    return -PSKV_EQUOTA;
}
