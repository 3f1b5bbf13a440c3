/* pskv-abi-1.0, pskv-abi-client: a user's program for the ABI test (t_abi_1_0). Built
 * twice from this file: with -DPSKV_ABI_1_0 against the frozen 1.0 header
 * (test/abi/pskv-1.0.h) and linked against libpskv without symbol versions, as a
 * program built for 1.0 was; and against today's header and libpskv.so.
 *
 *   pskv-abi-1.0 | pskv-abi-client  SCHEDULER TABLE
 *
 * Its pskv_config lives on the stack inside a larger struct, followed by a guard
 * zone of pointers to a string that is no valid namespace or group name. After
 * pskv_config_init the guard must be intact (an init of a larger struct writes
 * over it); pskv_worker_open must neither write it nor read it (read as the later
 * fields, the names would fail the open with -PSKV_EINVAL). Then it opens the dense
 * table TABLE (updater sum), pushes twice, pulls and checks every value exactly.
 * Prints "abi: sizeof(pskv_config) N" and "abi: NAME bound to VERSION" for both calls
 * (what the dynamic linker chose, found by comparing addresses with dlvsym) first; last "abi ok: ..." and exit 0, or
 * "abi FAILED: ..." lines and exit 1 (after a broken guard it restores the guard
 * and goes on, so that one run names every fault). Exit 2: usage. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#ifdef PSKV_ABI_1_0
#include "pskv-1.0.h"
#else
#include "pskv.h"
#endif

#define GUARD_PTRS 8
#define KEYS 64

static const char guard_name[] = "abi-guard/not-a-name";

typedef struct guarded {
    pskv_config cfg;
    const char *guard[GUARD_PTRS];
} guarded;

_Static_assert(offsetof(guarded, guard) == sizeof(pskv_config), "the guard follows the struct");

static void guard_set(guarded *g)
{
    for (int i = 0; i < GUARD_PTRS; i++)
        g->guard[i] = guard_name;
}

/* The guard's bytes changed since guard_set: 0 when none. */
static size_t guard_changed(const guarded *g)
{
    const char *want[GUARD_PTRS];
    for (int i = 0; i < GUARD_PTRS; i++)
        want[i] = guard_name;
    const unsigned char *a = (const unsigned char *)g->guard, *b = (const unsigned char *)want;
    size_t n = 0;
    for (size_t i = 0; i < sizeof want; i++)
        n += a[i] != b[i];
    return n;
}

/* Which version of libpskv.so.1's `name` the dynamic linker bound this program's
 * reference (its address `fn`, taken through the GOT: -fPIC) to: "PSKV_1",
 * "PSKV_2", "no version" (a library without versions) or "unknown". */
static const char *bound_version(const char *name, void *fn)
{
    void *h = dlopen("libpskv.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return "unknown";
    void *v1 = dlvsym(h, name, "PSKV_1"), *v2 = dlvsym(h, name, "PSKV_2");
    dlclose(h);
    return v1 == fn ? "PSKV_1" : v2 == fn ? "PSKV_2" : !v1 && !v2 ? "no version" : "unknown";
}

/* Pushes 1..KEYS + 0.25 twice to `table`, pulls, and checks the sums exactly. */
static int push_pull(pskv_worker *w, const char *table)
{
    pskv_table_opts o;
    pskv_table_opts_init(&o);
    o.kind = PSKV_DENSE;
    o.size = KEYS;
    o.updater = "sum";
    int t = pskv_table_open(w, table, &o);
    if (t < 0) {
        printf("abi FAILED: pskv_table_open %s: %s\n", table, pskv_last_error(w));
        return -1;
    }
    float vals[KEYS], out[KEYS];
    for (int k = 0; k < KEYS; k++)
        vals[k] = (float)k + 1.25f;
    for (int i = 0; i < 2; i++) {
        int64_t ts = pskv_push(w, t, NULL, KEYS, vals);
        int rc = ts < 0 ? (int)ts : pskv_wait(w, ts, 60000);
        if (rc < 0) {
            printf("abi FAILED: push: %s\n", pskv_last_error(w));
            return -1;
        }
    }
    int64_t ts = pskv_pull(w, t, NULL, KEYS, out);
    int rc = ts < 0 ? (int)ts : pskv_wait(w, ts, 60000);
    if (rc < 0) {
        printf("abi FAILED: pull: %s\n", pskv_last_error(w));
        return -1;
    }
    for (int k = 0; k < KEYS; k++)
        if (out[k] != 2 * vals[k]) {
            printf("abi FAILED: key %d holds %.9g, want %.9g\n", k, out[k], 2 * vals[k]);
            return -1;
        }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s SCHEDULER TABLE\n", argv[0]);
        return 2;
    }
    printf("abi: sizeof(pskv_config) %zu\n", sizeof(pskv_config));
    printf("abi: pskv_config_init bound to %s\n", bound_version("pskv_config_init", (void *)pskv_config_init));
    printf("abi: pskv_worker_open bound to %s\n", bound_version("pskv_worker_open", (void *)pskv_worker_open));
    int bad = 0;
    guarded g;
    memset(&g.cfg, 0xA5, sizeof g.cfg);
    guard_set(&g);
    pskv_config_init(&g.cfg);
    size_t n = guard_changed(&g);
    if (n) {
        printf("abi FAILED: pskv_config_init wrote past this program's pskv_config (%zu bytes): "
               "%zu guard bytes changed\n", sizeof g.cfg, n);
        bad = 1;
        guard_set(&g);
    }
    g.cfg.scheduler = argv[1];
    g.cfg.connect_timeout_s = 60;
    g.cfg.join_timeout_s = 120;
    pskv_worker *w = NULL;
    int rc = pskv_worker_open(&g.cfg, &w);
    if ((n = guard_changed(&g)) != 0) {
        printf("abi FAILED: pskv_worker_open changed %zu guard bytes\n", n);
        bad = 1;
    }
    if (rc < 0) {
        printf("abi FAILED: pskv_worker_open: %s\n", pskv_strerror(rc));
        return 1;
    }
    if (push_pull(w, argv[2]) < 0)
        bad = 1;
    rc = pskv_worker_close(&w);
    if (rc < 0) {
        printf("abi FAILED: pskv_worker_close: %s\n", pskv_strerror(rc));
        bad = 1;
    }
    if (bad)
        return 1;
    printf("abi ok: guard intact after pskv_config_init and pskv_worker_open; table %s: %d "
           "values pushed twice, pulled exactly\n", argv[2], KEYS);
    return 0;
}
