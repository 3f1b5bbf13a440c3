/* Tests of shared-memory references (common/shmseg.c, the shm checks of
 * common/wire.c, server/sshm.c): real segments in /dev/shm, Meta packed with
 * protobuf-c and parsed by wire_parse, as a server receives them. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pskv_errors.h"
#include "shmseg.h"
#include "sshm.h"
#include "suites.h"
#include "wire.h"

#define SEG_BYTES 65536

typedef struct shm_msg {
    uint8_t buf[1024];
    size_t len;
    wire_msg m;
} shm_msg;

/* A PUSH (or PULL) of a dense run of n rows of width 1 from node 7, naming
 * [off, off + len) of segment `name` generation gen from host `host`; parsed. */
static int shm_parse(shm_msg *s, Pskv__MsgType type, const char *name, const char *host,
                     uint64_t gen, uint64_t off, uint64_t len, uint64_t n, char *why, size_t wl)
{
    Pskv__Meta meta;
    wire_meta_init(&meta, type);
    meta.has_sender = meta.has_num_keys = meta.has_width = meta.has_first_key = 1;
    meta.sender = 7;
    meta.num_keys = n;
    meta.width = 1;
    meta.first_key = 0;
    meta.shm_name = (char *)name;
    meta.shm_host = (char *)host;
    meta.has_shm_gen = meta.has_shm_off = meta.has_shm_len = 1;
    meta.shm_gen = gen;
    meta.shm_off = off;
    meta.shm_len = len;
    s->len = pskv__meta__pack(&meta, s->buf);
    const void *data[1] = {s->buf};
    size_t sizes[1] = {s->len};
    memset(&s->m, 0, sizeof s->m);
    return wire_parse(&s->m, data, sizes, 1, why, wl);
}

START_TEST(wire_refuses_malformed_references)
{
    shm_msg s;
    char why[300];
    const char *h = shmseg_host_id();
    /* a well-formed one parses: no values frame, the values counted */
    ck_assert_int_eq(shm_parse(&s, PSKV__MSG_TYPE__PUSH, "/pskv-0-1-ab-1", h, 1, 64, 40, 10, why,
                               sizeof why), 0);
    ck_assert_ptr_null(s.m.vals);
    ck_assert_uint_eq(s.m.nvals, 10);
    wire_msg_close(&s.m);
    /* length not the values' bytes, an unaligned offset, no name on a push */
    ck_assert_int_eq(shm_parse(&s, PSKV__MSG_TYPE__PUSH, "/pskv-0-1-ab-1", h, 1, 64, 36, 10, why,
                               sizeof why), -PSKV_ESHMREF);
    ck_assert_ptr_nonnull(strstr(why, "shared-memory reference"));
    ck_assert_int_eq(shm_parse(&s, PSKV__MSG_TYPE__PUSH, "/pskv-0-1-ab-1", h, 1, 66, 40, 10, why,
                               sizeof why), -PSKV_ESHMREF);
    ck_assert_int_eq(shm_parse(&s, PSKV__MSG_TYPE__PUSH, NULL, h, 1, 64, 40, 10, why, sizeof why),
                     -PSKV_ESHMREF);
    /* the host may be left out (the server knows it from an earlier reference) */
    ck_assert_int_eq(shm_parse(&s, PSKV__MSG_TYPE__PUSH, "/pskv-0-1-ab-1", NULL, 1, 64, 40, 10,
                               why, sizeof why), 0);
    wire_msg_close(&s.m);
    /* a reference on a type that carries none */
    ck_assert_int_eq(shm_parse(&s, PSKV__MSG_TYPE__REPLICATE, "/pskv-0-1-ab-1", h, 1, 64, 40, 10,
                               why, sizeof why), -PSKV_EPROTO); /* no values frame */
    ck_assert_int_lt(shm_parse(&s, PSKV__MSG_TYPE__CLOCK, "/pskv-0-1-ab-1", h, 1, 64, 40, 10, why,
                               sizeof why), 0);
}
END_TEST

START_TEST(names_and_hosts)
{
    ck_assert(shmseg_name_ok("/pskv-0-12-0af-3"));
    ck_assert(!shmseg_name_ok("/etc-passwd"));
    ck_assert(!shmseg_name_ok("/pskv-../x"));
    ck_assert(!shmseg_name_ok("/pskv-"));
    ck_assert(!shmseg_name_ok(NULL));
    ck_assert(shmseg_same_host(shmseg_host_id()));
    ck_assert(!shmseg_same_host("00000000-0000-0000-0000-000000000000/1"));
    ck_assert(!shmseg_same_host(NULL));
}
END_TEST

/* A process in another network namespace (a netns test host) has another host id,
 * the same boot id: the server refuses it shared memory. Needs root (unshare);
 * without it the test checks nothing. */
START_TEST(other_network_namespace_is_another_host)
{
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    pid_t pid = fork(); /* before this process reads its own id (read once, cached) */
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fd[0]);
        const char *id = unshare(CLONE_NEWNET) == 0 ? shmseg_host_id() : "";
        ssize_t n = write(fd[1], id, strlen(id) + 1);
        _exit(n > 0 ? 0 : 1);
    }
    close(fd[1]);
    char other[128] = "";
    ssize_t n = read(fd[0], other, sizeof other - 1);
    close(fd[0]);
    waitpid(pid, NULL, 0);
    ck_assert_int_gt(n, 0);
    if (!other[0])
        return; /* not root: no namespace of our own */
    const char *me = shmseg_host_id();
    ck_assert_str_ne(other, me);
    ck_assert(!shmseg_same_host(other));
    ck_assert_int_eq(strchr(me, '/') - me, strchr(other, '/') - other);
    ck_assert(strncmp(me, other, (size_t)(strchr(me, '/') - me)) == 0); /* same boot */
}
END_TEST

/* A worker's segment mapped by the server: a push's values read from it, every
 * bad reference refused before anything could be read. */
START_TEST(server_maps_and_checks)
{
    char name[SHMSEG_NAME_MAX], name2[SHMSEG_NAME_MAX], why[300];
    void *base, *base2;
    ck_assert_int_eq(shmseg_create(5, SEG_BYTES, name, &base, why, sizeof why), 0);
    ck_assert(shmseg_name_ok(name));
    float *v = (float *)base;
    for (int i = 0; i < 100; i++)
        v[16 + i] = (float)i;
    sshm *ss = sshm_new();
    ck_assert_ptr_nonnull(ss);
    shm_msg s;
    const char *h = shmseg_host_id();
    ck_assert_int_eq(shm_parse(&s, PSKV__MSG_TYPE__PUSH, name, h, 5, 64, 400, 100, why, sizeof why), 0);
    ck_assert_int_eq(sshm_resolve(ss, &s.m, why, sizeof why), 0);
    ck_assert_ptr_nonnull(s.m.vals);
    ck_assert(s.m.vals != v + 16); /* the server's own mapping */
    ck_assert(s.m.vals[99] == 99.0f);
    wire_msg_close(&s.m);
    ck_assert_int_eq(sshm_count(ss), 1);
    /* past the end, and an offset that wraps */
    ck_assert_int_eq(shm_parse(&s, PSKV__MSG_TYPE__PUSH, name, h, 5, SEG_BYTES - 396, 400, 100,
                               why, sizeof why), 0);
    ck_assert_int_eq(sshm_resolve(ss, &s.m, why, sizeof why), -PSKV_ESHMREF);
    ck_assert_ptr_nonnull(strstr(why, "outside segment"));
    ck_assert_ptr_null(s.m.vals);
    wire_msg_close(&s.m);
    ck_assert_int_eq(shm_parse(&s, PSKV__MSG_TYPE__PULL, name, h, 5, UINT64_MAX - 3, 400, 100,
                               why, sizeof why), 0);
    ck_assert_int_eq(sshm_resolve(ss, &s.m, why, sizeof why), -PSKV_ESHMREF);
    wire_msg_close(&s.m);
    /* another segment under the same generation; a name no worker makes */
    ck_assert_int_eq(shm_parse(&s, PSKV__MSG_TYPE__PUSH, "/pskv-0-1-ab-5", h, 5, 0, 400, 100, why,
                               sizeof why), 0);
    ck_assert_int_eq(sshm_resolve(ss, &s.m, why, sizeof why), -PSKV_ESHMREF);
    wire_msg_close(&s.m);
    ck_assert_int_eq(shm_parse(&s, PSKV__MSG_TYPE__PUSH, "/dev-shm-x", h, 9, 0, 400, 100, why,
                               sizeof why), 0);
    ck_assert_int_eq(sshm_resolve(ss, &s.m, why, sizeof why), -PSKV_ESHMREF);
    wire_msg_close(&s.m);
    /* another host: refused for TCP, whatever the name */
    ck_assert_int_eq(shm_parse(&s, PSKV__MSG_TYPE__PUSH, name, "other-boot/1", 9, 0, 400, 100,
                               why, sizeof why), 0);
    ck_assert_int_eq(sshm_resolve(ss, &s.m, why, sizeof why), -PSKV_ENOSHM);
    ck_assert_ptr_nonnull(strstr(why, "not this server's"));
    wire_msg_close(&s.m);
    /* a newer generation replaces the mapping; the older is then stale */
    ck_assert_int_eq(shmseg_create(6, SEG_BYTES, name2, &base2, why, sizeof why), 0);
    ck_assert_int_eq(shm_parse(&s, PSKV__MSG_TYPE__PULL, name2, h, 6, 0, 400, 100, why,
                               sizeof why), 0);
    ck_assert_int_eq(sshm_resolve(ss, &s.m, why, sizeof why), 0);
    wire_msg_close(&s.m);
    ck_assert_ptr_nonnull(sshm_region(ss, 7, 6, 0, 400));
    ck_assert_ptr_null(sshm_region(ss, 7, 5, 0, 400));
    ck_assert_ptr_null(sshm_region(ss, 7, 6, SEG_BYTES - 4, 400));
    ck_assert_ptr_null(sshm_region(ss, 8, 6, 0, 400));
    ck_assert_int_eq(shm_parse(&s, PSKV__MSG_TYPE__PUSH, name, h, 5, 64, 400, 100, why,
                               sizeof why), 0);
    ck_assert_int_eq(sshm_resolve(ss, &s.m, why, sizeof why), -PSKV_ESTALE);
    wire_msg_close(&s.m);
    /* a reply written through the server's mapping is what the worker reads */
    float *r = sshm_region(ss, 7, 6, 0, 400);
    r[3] = 42.0f;
    ck_assert(((float *)base2)[3] == 42.0f);
    /* unlinked: a server that has not mapped it cannot */
    shm_unlink(name);
    sshm *ss2 = sshm_new();
    ck_assert_int_eq(shm_parse(&s, PSKV__MSG_TYPE__PUSH, name, h, 5, 64, 400, 100, why,
                               sizeof why), 0);
    ck_assert_int_eq(sshm_resolve(ss2, &s.m, why, sizeof why), -PSKV_ENOSHM);
    wire_msg_close(&s.m);
    sshm_destroy(&ss2);
    sshm_destroy(&ss);
    ck_assert_ptr_null(ss);
    shm_unlink(name2);
    munmap(base, SEG_BYTES);
    munmap(base2, SEG_BYTES);
}
END_TEST

/* The worker's host is checked at its first reference and kept with its entry:
 * later references may leave it out, a first one may not (the worker falls back
 * to TCP), and a view without the worker forgets it. */
START_TEST(server_keeps_the_host_per_worker)
{
    char name[SHMSEG_NAME_MAX], name2[SHMSEG_NAME_MAX], why[300];
    void *base, *base2;
    ck_assert_int_eq(shmseg_create(1, SEG_BYTES, name, &base, why, sizeof why), 0);
    ck_assert_int_eq(shmseg_create(2, SEG_BYTES, name2, &base2, why, sizeof why), 0);
    sshm *ss = sshm_new();
    shm_msg s;
    const char *h = shmseg_host_id();
    ck_assert_int_eq(shm_parse(&s, PSKV__MSG_TYPE__PUSH, name, NULL, 1, 0, 400, 100, why,
                               sizeof why), 0);
    ck_assert_int_eq(sshm_resolve(ss, &s.m, why, sizeof why), -PSKV_ENOSHM);
    ck_assert_ptr_nonnull(strstr(why, "worker node 7 named no host"));
    wire_msg_close(&s.m);
    ck_assert_int_eq(shm_parse(&s, PSKV__MSG_TYPE__PUSH, name, h, 1, 0, 400, 100, why,
                               sizeof why), 0);
    ck_assert_int_eq(sshm_resolve(ss, &s.m, why, sizeof why), 0);
    wire_msg_close(&s.m);
    /* known now: the same segment and a newer one without it */
    ck_assert_int_eq(shm_parse(&s, PSKV__MSG_TYPE__PULL, name, NULL, 1, 64, 400, 100, why,
                               sizeof why), 0);
    ck_assert_int_eq(sshm_resolve(ss, &s.m, why, sizeof why), 0);
    wire_msg_close(&s.m);
    ck_assert_int_eq(shm_parse(&s, PSKV__MSG_TYPE__PUSH, name2, NULL, 2, 0, 400, 100, why,
                               sizeof why), 0);
    ck_assert_int_eq(sshm_resolve(ss, &s.m, why, sizeof why), 0);
    ck_assert_ptr_nonnull(s.m.vals);
    wire_msg_close(&s.m);
    /* a host given with a segment to map is still checked */
    ck_assert_int_eq(shm_parse(&s, PSKV__MSG_TYPE__PUSH, "/pskv-0-1-ab-3", "other-boot/1", 3, 0,
                               400, 100, why, sizeof why), 0);
    ck_assert_int_eq(sshm_resolve(ss, &s.m, why, sizeof why), -PSKV_ENOSHM);
    ck_assert_ptr_nonnull(strstr(why, "not this server's"));
    wire_msg_close(&s.m);
    /* a view that lists the worker keeps it; one without it forgets it */
    Pskv__Node n7 = PSKV__NODE__INIT, n8 = PSKV__NODE__INIT, *nodes[2] = {&n7, &n8};
    n7.id = 7;
    n8.id = 8;
    Pskv__View v = PSKV__VIEW__INIT;
    v.nodes = nodes;
    v.n_nodes = 2;
    sshm_view(ss, &v);
    ck_assert_int_eq(sshm_count(ss), 1);
    nodes[0] = &n8;
    v.n_nodes = 1;
    sshm_view(ss, &v);
    ck_assert_int_eq(sshm_count(ss), 0);
    ck_assert_ptr_null(sshm_region(ss, 7, 2, 0, 400));
    ck_assert_int_eq(shm_parse(&s, PSKV__MSG_TYPE__PUSH, name2, NULL, 2, 0, 400, 100, why,
                               sizeof why), 0);
    ck_assert_int_eq(sshm_resolve(ss, &s.m, why, sizeof why), -PSKV_ENOSHM);
    wire_msg_close(&s.m);
    sshm_destroy(&ss);
    shm_unlink(name);
    shm_unlink(name2);
    munmap(base, SEG_BYTES);
    munmap(base2, SEG_BYTES);
}
END_TEST

/* A segment readable by others is not mapped. */
START_TEST(open_refuses_loose_mode)
{
    char name[SHMSEG_NAME_MAX], why[300];
    void *base, *b2;
    size_t size;
    ck_assert_int_eq(shmseg_create(1, SEG_BYTES, name, &base, why, sizeof why), 0);
    char path[128];
    snprintf(path, sizeof path, "/dev/shm%s", name);
    ck_assert_int_eq(chmod(path, 0644), 0);
    ck_assert_int_eq(shmseg_open(name, &b2, &size, why, sizeof why), -PSKV_ENOSHM);
    ck_assert_ptr_nonnull(strstr(why, "mode 644"));
    shm_unlink(name);
    munmap(base, SEG_BYTES);
}
END_TEST

/* A segment left by a process that died is swept; this process's is not. */
START_TEST(sweep_removes_dead_processes_segments)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    ck_assert_int_gt(pid, 0);
    waitpid(pid, NULL, 0);
    char dead[SHMSEG_NAME_MAX], mine[SHMSEG_NAME_MAX], why[300];
    snprintf(dead, sizeof dead, "/pskv-%u-%d-00ff-1", (unsigned)geteuid(), (int)pid);
    int fd = shm_open(dead, O_RDWR | O_CREAT | O_EXCL, 0600);
    ck_assert_int_ge(fd, 0);
    close(fd);
    void *base;
    ck_assert_int_eq(shmseg_create(2, SEG_BYTES, mine, &base, why, sizeof why), 0);
    ck_assert_int_ge(shmseg_sweep(), 1);
    char path[128];
    snprintf(path, sizeof path, "/dev/shm%s", dead);
    ck_assert_int_ne(access(path, F_OK), 0);
    snprintf(path, sizeof path, "/dev/shm%s", mine);
    ck_assert_int_eq(access(path, F_OK), 0);
    shm_unlink(mine);
    munmap(base, SEG_BYTES);
}
END_TEST

Suite *shm_suite(void)
{
    Suite *s = suite_create("shm");
    TCase *tc = tcase_create("shm");
    tcase_add_test(tc, wire_refuses_malformed_references);
    tcase_add_test(tc, names_and_hosts);
    tcase_add_test(tc, other_network_namespace_is_another_host);
    tcase_add_test(tc, server_maps_and_checks);
    tcase_add_test(tc, server_keeps_the_host_per_worker);
    tcase_add_test(tc, open_refuses_loose_mode);
    tcase_add_test(tc, sweep_removes_dead_processes_segments);
    suite_add_tcase(s, tc);
    return s;
}
