/* Key files: load, check, make. The file formats are in keys.h. */
#define _GNU_SOURCE
#include "keys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "grow.h"
#include "log.h"
#include "pskv_errors.h"

static const char *const role_names[KEY_ROLE_COUNT] = {
    "none", "scheduler", "server", "worker", "evaluator", "control",
};

const char *key_role_name(key_role r)
{
    return (r >= 0 && r < KEY_ROLE_COUNT) ? role_names[r] : "none";
}

key_role key_role_parse(const char *name)
{
    for (int r = KEY_ROLE_SCHEDULER; r < KEY_ROLE_COUNT; r++)
        if (name && !strcmp(name, role_names[r]))
            return (key_role)r;
    return KEY_ROLE_NONE;
}

int key_z85_valid(const char *s)
{
    static const char alphabet[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                   ".-:+=^!/*?&<>()[]{}@%$#";
    if (!s || strlen(s) != KEY_Z85)
        return 0;
    for (const char *p = s; *p; p++)
        if (!strchr(alphabet, *p))
            return 0;
    return 1;
}

/* Reads a small text file into buf (NUL-terminated). */
static int read_small(const char *path, char *buf, size_t len, char *why, size_t whylen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        log_why(why, whylen, "cannot read %s: %s", path, strerror(errno));
        return -PSKV_EIO;
    }
    size_t n = fread(buf, 1, len - 1, f);
    int err = ferror(f);
    fclose(f);
    if (err) {
        log_why(why, whylen, "cannot read %s", path);
        return -PSKV_EIO;
    }
    buf[n] = '\0';
    return 0;
}

/* Checks a namespace list "NS1,NS2": names of 1..64 bytes without '/'. */
static int ns_list_valid(const char *list)
{
    for (const char *p = list;;) {
        size_t n = strcspn(p, ",");
        if (n == 0 || n > 64 || memchr(p, '/', n))
            return 0;
        if (!p[n])
            return 1;
        p += n + 1;
    }
}

/* Parses "ROLE KEY", "KEY", "worker NS1,NS2 KEY" or "reader [NS1,NS2] KEY" (a reader
 * is a worker with a read-only binding; bind gets key_entry.bind, and may be NULL
 * where no binding is allowed). A comment or blank line: returns 1. A comment is
 * a line whose first non-blank character is '#' ('#' is a Z85 digit). */
static int parse_line(char *line, key_role *role, char *pub, char *bind)
{
    line += strspn(line, " \t");
    if (*line == '#')
        return 1;
    char *tok[4];
    int n = 0;
    for (char *save = NULL, *t = strtok_r(line, " \t\r\n", &save); t && n < 4;
         t = strtok_r(NULL, " \t\r\n", &save))
        tok[n++] = t;
    if (n == 0)
        return 1;
    const char *k = tok[n - 1];
    if (n > 3 || !key_z85_valid(k))
        return -1;
    int reader = n >= 2 && !strcmp(tok[0], "reader");
    *role = n == 1 ? KEY_ROLE_NONE : reader ? KEY_ROLE_WORKER : key_role_parse(tok[0]);
    if (n >= 2 && *role == KEY_ROLE_NONE)
        return -1;
    const char *list = n == 3 ? tok[1] : "";
    if (n == 3 && (*role != KEY_ROLE_WORKER || !bind || !ns_list_valid(list) ||
                   strlen(list) + 4 > KEY_BIND))
        return -1;
    if (bind)
        snprintf(bind, KEY_BIND, "%s%s", reader ? "ro:" : *list ? "rw:" : "", list);
    memcpy(pub, k, KEY_Z85 + 1);
    return 0;
}

/* A one-line public key file: node.pub or scheduler.pub. */
static int read_pub(const char *dir, const char *name, key_role *role, char *pub, char *why,
                    size_t whylen)
{
    char path[512], buf[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int rc = read_small(path, buf, sizeof buf, why, whylen);
    if (rc < 0)
        return rc;
    if (parse_line(buf, role, pub, NULL) != 0) {
        log_why(why, whylen, "%s: expected one line \"ROLE PUBLIC-KEY\" (40 Z85 characters)",
                path);
        return -PSKV_EINVAL;
    }
    return 0;
}

int keys_read_pub(const char *dir, const char *name, char *pub, char *why, size_t whylen)
{
    key_role ignored;
    return read_pub(dir, name, &ignored, pub, why, whylen);
}

static int read_secret(const char *dir, char *sec, char *why, size_t whylen)
{
    char path[512], buf[256];
    snprintf(path, sizeof path, "%s/node.key", dir);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        log_why(why, whylen, "cannot read %s: %s", path, strerror(errno));
        return -PSKV_EIO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        log_why(why, whylen, "%s is not a regular file", path);
        return -PSKV_EINVAL;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        close(fd);
        log_why(why, whylen,
                "secret key %s has mode %04o: it must not be readable by group or others "
                "(chmod 600 %s)",
                path, (unsigned)(st.st_mode & 07777), path);
        return -PSKV_EINVAL;
    }
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0) {
        log_why(why, whylen, "cannot read %s: %s", path, strerror(errno));
        return -PSKV_EIO;
    }
    buf[n] = '\0';
    key_role ignored;
    int rc = parse_line(buf, &ignored, sec, NULL) == 0 ? 0 : -PSKV_EINVAL;
    memset(buf, 0, sizeof buf);
    if (rc < 0)
        log_why(why, whylen, "%s: expected one secret key (40 Z85 characters)", path);
    return rc;
}

int keys_load(keyset *ks, const char *dir, int need_allow, char *why, size_t whylen)
{
    memset(ks, 0, sizeof *ks);
    if (!dir || !*dir || strlen(dir) >= sizeof ks->dir) {
        log_why(why, whylen, "--keys: no key directory given");
        return -PSKV_EINVAL;
    }
    snprintf(ks->dir, sizeof ks->dir, "%s", dir);
    key_role srole;
    int rc = read_secret(dir, ks->sec, why, whylen);
    if (rc == 0)
        rc = read_pub(dir, "node.pub", &ks->role, ks->pub, why, whylen);
    if (rc == 0 && ks->role == KEY_ROLE_NONE) {
        log_why(why, whylen, "%s/node.pub names no role (\"ROLE PUBLIC-KEY\")", dir);
        rc = -PSKV_EINVAL;
    }
    if (rc == 0)
        rc = read_pub(dir, "scheduler.pub", &srole, ks->sched_pub, why, whylen);
    if (rc == 0) {
        /* the secret key must be the one node.pub names */
        char derived[KEY_Z85 + 1];
        if (zmq_curve_public(derived, ks->sec) != 0 || strcmp(derived, ks->pub)) {
            log_why(why, whylen, "%s/node.key does not match %s/node.pub", dir, dir);
            rc = -PSKV_EINVAL;
        }
    }
    if (rc == 0 && need_allow) {
        char path[512];
        snprintf(path, sizeof path, "%s/authorized", dir);
        rc = key_allow_load(&ks->allow, path, why, whylen);
    }
    if (rc < 0)
        keys_clear(ks);
    return rc;
}

void keys_clear(keyset *ks)
{
    if (!ks)
        return;
    key_allow_free(&ks->allow);
    /* volatile stores: the wipe of the secret must not be optimised away */
    volatile char *p = ks->sec;
    for (size_t i = 0; i < sizeof ks->sec; i++)
        p[i] = 0;
}

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const key_entry *)a)->pub, ((const key_entry *)b)->pub);
}

int key_allow_add(key_allow *a, key_role role, const char *pub)
{
    return key_allow_add_bound(a, role, pub, NULL);
}

int key_allow_add_bound(key_allow *a, key_role role, const char *pub, const char *bind)
{
    key_entry key = {.role = role};
    memcpy(key.pub, pub, KEY_Z85 + 1);
    snprintf(key.bind, sizeof key.bind, "%s", bind ? bind : "");
    key_entry *hit = a->n ? bsearch(&key, a->e, a->n, sizeof *a->e, entry_cmp) : NULL;
    if (hit) { /* listed twice: the later line wins */
        *hit = key;
        return 0;
    }
    if (grow_array((void **)&a->e, &a->cap, a->n + 1, sizeof *a->e) < 0)
        return -PSKV_ENOMEM;
    a->e[a->n++] = key;
    qsort(a->e, a->n, sizeof *a->e, entry_cmp);
    return 0;
}

int key_allow_load(key_allow *out, const char *path, char *why, size_t whylen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        log_why(why, whylen, "cannot read allowlist %s: %s", path, strerror(errno));
        return -PSKV_EIO;
    }
    char line[512];
    int rc = 0, lineno = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        key_role role;
        char pub[KEY_Z85 + 1], bind[KEY_BIND];
        int p = parse_line(line, &role, pub, bind);
        if (p == 1)
            continue;
        if (p < 0 || role == KEY_ROLE_NONE) {
            log_why(why, whylen, "%s line %d: expected \"ROLE PUBLIC-KEY\" (roles: scheduler, "
                    "server, worker, evaluator, control), \"worker NS1,NS2 PUBLIC-KEY\" or "
                    "\"reader [NS1,NS2] PUBLIC-KEY\" (namespaces of 1..64 bytes, no '/')",
                    path, lineno);
            rc = -PSKV_EINVAL;
        } else if (key_allow_add_bound(out, role, pub, bind) < 0) {
            log_why(why, whylen, "%s: out of memory", path);
            rc = -PSKV_ENOMEM;
        }
    }
    fclose(f);
    if (rc < 0)
        key_allow_free(out);
    return rc;
}

const key_entry *key_allow_find(const key_allow *a, const char *pub)
{
    if (!a || !a->n || !pub)
        return NULL;
    key_entry key;
    snprintf(key.pub, sizeof key.pub, "%s", pub);
    return bsearch(&key, a->e, a->n, sizeof *a->e, entry_cmp);
}

key_role key_allow_role(const key_allow *a, const char *pub)
{
    const key_entry *hit = key_allow_find(a, pub);
    return hit ? hit->role : KEY_ROLE_NONE;
}

void key_allow_free(key_allow *a)
{
    if (!a)
        return;
    free(a->e);
    a->e = NULL;
    a->n = a->cap = 0;
}

/* Writes text to dir/name with mode, atomically (temp file + rename). */
static int write_file(const char *dir, const char *name, const char *text, mode_t mode,
                      char *why, size_t whylen)
{
    char path[512], tmp[520];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    size_t len = strlen(text);
    if (fd < 0 || fchmod(fd, mode) != 0 || write(fd, text, len) != (ssize_t)len ||
        fsync(fd) != 0) {
        log_why(why, whylen, "cannot write %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        unlink(tmp);
        return -PSKV_EIO;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        log_why(why, whylen, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -PSKV_EIO;
    }
    return 0;
}

static int make_dir(const char *dir, char *why, size_t whylen)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        log_why(why, whylen, "cannot create %s: %s", dir, strerror(errno));
        return -PSKV_EIO;
    }
    return 0;
}

/* A fresh keypair into dir; pub gets the public key. */
static int gen_pair(const char *dir, key_role role, char *pub, char *why, size_t whylen)
{
    char path[512];
    snprintf(path, sizeof path, "%s/node.key", dir);
    if (access(path, F_OK) == 0) {
        log_why(why, whylen, "%s exists: keys are never overwritten (remove it first)", path);
        return -PSKV_EINVAL;
    }
    int rc = make_dir(dir, why, whylen);
    if (rc < 0)
        return rc;
    char sec[KEY_Z85 + 1], text[128];
    if (zmq_curve_keypair(pub, sec) != 0) {
        log_why(why, whylen, "zmq_curve_keypair failed: %s (libzmq without CURVE?)",
                zmq_strerror(errno));
        return -PSKV_ENET;
    }
    snprintf(text, sizeof text, "%s\n", sec);
    rc = write_file(dir, "node.key", text, 0600, why, whylen);
    memset(sec, 0, sizeof sec);
    memset(text, 0, sizeof text);
    if (rc == 0) {
        snprintf(text, sizeof text, "%s %s\n", key_role_name(role), pub);
        rc = write_file(dir, "node.pub", text, 0644, why, whylen);
    }
    return rc;
}

int keys_keygen(const char *dir, key_role role, char *why, size_t whylen)
{
    if (role == KEY_ROLE_NONE) {
        log_why(why, whylen, "keygen: unknown role (scheduler, server, worker, evaluator, control)");
        return -PSKV_EINVAL;
    }
    char pub[KEY_Z85 + 1];
    return gen_pair(dir, role, pub, why, whylen);
}

int keys_init_cluster(const char *dir, int servers, int workers, char *why, size_t whylen)
{
    if (servers < 1 || workers < 0 || servers > 4096 || workers > 65536) {
        log_why(why, whylen, "keys init: --servers must be 1..4096 and --workers 0..65536");
        return -PSKV_EINVAL;
    }
    int rc = make_dir(dir, why, whylen);
    size_t total = (size_t)servers + (size_t)workers + 3, n = 0;
    char (*sub)[300] = calloc(total, sizeof *sub);
    key_role *roles = calloc(total, sizeof *roles);
    char *allow = calloc(total, 64);
    if (rc == 0 && (!sub || !roles || !allow)) {
        log_why(why, whylen, "keys init: out of memory");
        rc = -PSKV_ENOMEM;
    }
    if (rc == 0) {
        snprintf(sub[n], sizeof sub[n], "%s/scheduler", dir), roles[n++] = KEY_ROLE_SCHEDULER;
        for (int i = 0; i < servers; i++)
            snprintf(sub[n], sizeof sub[n], "%s/server-%d", dir, i), roles[n++] = KEY_ROLE_SERVER;
        for (int i = 0; i < workers; i++)
            snprintf(sub[n], sizeof sub[n], "%s/worker-%d", dir, i), roles[n++] = KEY_ROLE_WORKER;
        snprintf(sub[n], sizeof sub[n], "%s/evaluator-0", dir), roles[n++] = KEY_ROLE_EVALUATOR;
        snprintf(sub[n], sizeof sub[n], "%s/control", dir), roles[n++] = KEY_ROLE_CONTROL;
    }
    char sched_line[64] = "";
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char pub[KEY_Z85 + 1];
        rc = gen_pair(sub[i], roles[i], pub, why, whylen);
        if (rc == 0) {
            snprintf(allow + i * 64, 64, "%s %s\n", key_role_name(roles[i]), pub);
            if (i == 0)
                snprintf(sched_line, sizeof sched_line, "%s", allow);
        }
    }
    /* the allowlist, once: every node of the set */
    size_t alen = 0;
    char *list = rc == 0 ? malloc(total * 64 + 128) : NULL;
    if (rc == 0 && !list) {
        log_why(why, whylen, "keys init: out of memory");
        rc = -PSKV_ENOMEM;
    }
    if (list) {
        alen = (size_t)snprintf(list, 128, "# pskv allowlist: ROLE PUBLIC-KEY per line\n");
        for (size_t i = 0; i < n; i++)
            alen += (size_t)snprintf(list + alen, 64, "%s", allow + i * 64);
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = write_file(sub[i], "scheduler.pub", sched_line, 0644, why, whylen);
        if (rc == 0 && (roles[i] == KEY_ROLE_SCHEDULER || roles[i] == KEY_ROLE_SERVER))
            rc = write_file(sub[i], "authorized", list, 0644, why, whylen);
    }
    free(list);
    free(allow);
    free(roles);
    free(sub);
    return rc;
}
