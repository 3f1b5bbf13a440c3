/* Shared-memory segments (shmseg.h). */
#define _GNU_SOURCE
#include "shmseg.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pskv_errors.h"

static char host_id[128];
static pthread_once_t host_once = PTHREAD_ONCE_INIT;

static void read_host_id(void)
{
    char boot[64] = "?";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof boot, f))
            snprintf(boot, sizeof boot, "?");
        fclose(f);
    }
    boot[strcspn(boot, "\n")] = 0;
    struct stat st;
    unsigned long long ns = stat("/proc/self/ns/net", &st) == 0 ? (unsigned long long)st.st_ino : 0;
    snprintf(host_id, sizeof host_id, "%s/%llu", boot, ns);
}

const char *shmseg_host_id(void)
{
    pthread_once(&host_once, read_host_id);
    return host_id;
}

int shmseg_same_host(const char *other)
{
    const char *me = shmseg_host_id();
    return other && me[0] != '?' && strcmp(other, me) == 0;
}

int shmseg_name_ok(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n < 7 || n >= SHMSEG_NAME_MAX || strncmp(name, "/pskv-", 6) != 0)
        return 0;
    return strspn(name + 6, "0123456789abcdef-") == n - 6;
}

int shmseg_create(uint64_t gen, size_t size, char *name, void **base, char *why, size_t whylen)
{
    unsigned char rnd[16];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        snprintf(why, whylen, "no random bytes for a segment name: %s", strerror(errno));
        return -PSKV_EIO;
    }
    int k = snprintf(name, SHMSEG_NAME_MAX, "/pskv-%u-%d-", (unsigned)geteuid(), (int)getpid());
    for (size_t i = 0; i < sizeof rnd; i++)
        k += snprintf(name + k, SHMSEG_NAME_MAX - (size_t)k, "%02x", rnd[i]);
    snprintf(name + k, SHMSEG_NAME_MAX - (size_t)k, "-%llx", (unsigned long long)gen);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(why, whylen, "shm_open %s: %s", name, strerror(errno));
        return -PSKV_EIO;
    }
    void *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)size) == 0)
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        shm_unlink(name);
        snprintf(why, whylen, "sizing or mapping %s (%zu bytes): %s", name, size, strerror(e));
        return -PSKV_EIO;
    }
    *base = p;
    return 0;
}

int shmseg_open(const char *name, void **base, size_t *size, char *why, size_t whylen)
{
    if (!shmseg_name_ok(name)) {
        snprintf(why, whylen, "segment name '%.80s' is not one a pskv worker makes",
                 name ? name : "");
        return -PSKV_ESHMREF;
    }
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, whylen, "cannot open segment %s: %s", name, strerror(errno));
        return -PSKV_ENOSHM;
    }
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) < 0) {
        snprintf(why, whylen, "cannot stat segment %s: %s", name, strerror(errno));
        rc = -PSKV_ENOSHM;
    } else if (st.st_uid != geteuid() || (st.st_mode & 077)) {
        snprintf(why, whylen, "segment %s belongs to uid %u mode %03o, not to this process's "
                 "uid %u mode 600", name, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777),
                 (unsigned)geteuid());
        rc = -PSKV_ENOSHM;
    } else if (st.st_size <= 0) {
        snprintf(why, whylen, "segment %s is empty", name);
        rc = -PSKV_ENOSHM;
    }
    void *p = MAP_FAILED;
    if (!rc && (p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) ==
                   MAP_FAILED) {
        snprintf(why, whylen, "cannot map segment %s: %s", name, strerror(errno));
        rc = -PSKV_ENOSHM;
    }
    close(fd);
    if (rc)
        return rc;
    *base = p;
    *size = (size_t)st.st_size;
    return 0;
}

int shmseg_sweep(void)
{
    DIR *d = opendir("/dev/shm");
    if (!d)
        return 0;
    char mine[32];
    snprintf(mine, sizeof mine, "pskv-%u-", (unsigned)geteuid());
    int removed = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char name[SHMSEG_NAME_MAX + 2];
        if (strncmp(e->d_name, mine, strlen(mine)) != 0 || strlen(e->d_name) >= SHMSEG_NAME_MAX)
            continue;
        long pid = strtol(e->d_name + strlen(mine), NULL, 10);
        if (pid <= 0 || pid == getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        snprintf(name, sizeof name, "/%s", e->d_name);
        if (shmseg_name_ok(name) && shm_unlink(name) == 0)
            removed++;
    }
    closedir(d);
    return removed;
}
