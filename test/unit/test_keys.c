/* Tests of node keys (common/keys.c), the ZAP handler (common/zap.c) and the
 * refusal counters (common/refuse.c): key files, modes, allowlists, a whole
 * cluster's keyset, and CURVE over real TCP on loopback with an allowed key, an
 * unknown key, a key of a refused role, a plaintext client and a wrong server key. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "keys.h"
#include "net.h"
#include "pskv_errors.h"
#include "refuse.h"
#include "suites.h"
#include "zap.h"

static char tmp[128];

static void make_tmp(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/pskv-unit-keys-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmp));
}

static void rm_tmp(void)
{
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_keygen_load)
{
    make_tmp();
    char dir[256], why[512];
    snprintf(dir, sizeof dir, "%s/w", tmp);
    ck_assert_int_eq(keys_keygen(dir, KEY_ROLE_WORKER, why, sizeof why), 0);
    /* never overwritten */
    ck_assert_int_eq(keys_keygen(dir, KEY_ROLE_WORKER, why, sizeof why), -PSKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "exists"));
    char path[300];
    snprintf(path, sizeof path, "%s/node.key", dir);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    keyset ks;
    /* no scheduler.pub yet: a clear error naming the file */
    ck_assert_int_lt(keys_load(&ks, dir, 0, why, sizeof why), 0);
    ck_assert_ptr_nonnull(strstr(why, "scheduler.pub"));
    char cmd[700];
    snprintf(cmd, sizeof cmd, "cp '%s/node.pub' '%s/scheduler.pub'", dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(keys_load(&ks, dir, 0, why, sizeof why), 0);
    ck_assert_int_eq(ks.role, KEY_ROLE_WORKER);
    ck_assert(key_z85_valid(ks.pub));
    ck_assert(key_z85_valid(ks.sec));
    keys_clear(&ks);
    ck_assert_str_eq(ks.sec, "");
    /* a secret readable by others is refused, naming the mode */
    ck_assert_int_eq(chmod(path, 0644), 0);
    ck_assert_int_eq(keys_load(&ks, dir, 0, why, sizeof why), -PSKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "0644"));
    ck_assert_int_eq(chmod(path, 0640), 0);
    ck_assert_int_eq(keys_load(&ks, dir, 0, why, sizeof why), -PSKV_EINVAL);
    rm_tmp();
}
END_TEST

START_TEST(test_allowlist)
{
    make_tmp();
    char path[256], why[512];
    snprintf(path, sizeof path, "%s/authorized", tmp);
    char pa[41], sa[41], pb[41], sb[41];
    ck_assert_int_eq(zmq_curve_keypair(pa, sa), 0);
    ck_assert_int_eq(zmq_curve_keypair(pb, sb), 0);
    FILE *f = fopen(path, "w");
    fprintf(f, "# comment\n\n  # indented comment\nworker %s\nserver   %s  \n", pa, pb);
    fclose(f);
    key_allow a = {0};
    ck_assert_int_eq(key_allow_load(&a, path, why, sizeof why), 0);
    ck_assert_int_eq(a.n, 2);
    ck_assert_int_eq(key_allow_role(&a, pa), KEY_ROLE_WORKER);
    ck_assert_int_eq(key_allow_role(&a, pb), KEY_ROLE_SERVER);
    ck_assert_int_eq(key_allow_role(&a, sa), KEY_ROLE_NONE);
    key_allow_free(&a);
    /* a bad role or a short key names the line */
    f = fopen(path, "w");
    fprintf(f, "worker %s\nadmin %s\n", pa, pb);
    fclose(f);
    ck_assert_int_eq(key_allow_load(&a, path, why, sizeof why), -PSKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "line 2"));
    ck_assert_int_eq(a.n, 0);
    f = fopen(path, "w");
    fprintf(f, "worker abc\n");
    fclose(f);
    ck_assert_int_eq(key_allow_load(&a, path, why, sizeof why), -PSKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "line 1"));
    rm_tmp();
}
END_TEST

/* Namespace bindings: "worker NS1,NS2 KEY", "reader [NS..] KEY"; a bad list names the line. */
START_TEST(test_allow_bindings)
{
    make_tmp();
    char path[256], why[512], p[4][41], sk[41];
    snprintf(path, sizeof path, "%s/authorized", tmp);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(zmq_curve_keypair(p[i], sk), 0);
    FILE *f = fopen(path, "w");
    fprintf(f, "worker %s\nworker a,b %s\nreader %s\nreader a %s\n", p[0], p[1], p[2], p[3]);
    fclose(f);
    key_allow a = {0};
    ck_assert_int_eq(key_allow_load(&a, path, why, sizeof why), 0);
    const char *want[4] = {"", "rw:a,b", "ro:", "ro:a"};
    for (int i = 0; i < 4; i++) {
        const key_entry *e = key_allow_find(&a, p[i]);
        ck_assert_ptr_nonnull(e);
        ck_assert_int_eq(e->role, KEY_ROLE_WORKER);
        ck_assert_str_eq(e->bind, want[i]);
    }
    key_allow_free(&a);
    const char *bad[] = {"server a %s\n", "worker a/b %s\n", "worker a,,b %s\n", "worker , %s\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        f = fopen(path, "w");
        fprintf(f, "worker %s\n", p[0]);
        fprintf(f, bad[i], p[1]);
        fclose(f);
        ck_assert_int_eq(key_allow_load(&a, path, why, sizeof why), -PSKV_EINVAL);
        ck_assert_ptr_nonnull(strstr(why, "line 2"));
        ck_assert_int_eq(a.n, 0);
    }
    rm_tmp();
}
END_TEST

START_TEST(test_cluster_keyset)
{
    make_tmp();
    char why[512], dir[300];
    ck_assert_int_eq(keys_init_cluster(tmp, 2, 3, why, sizeof why), 0);
    const char *subs[] = {"scheduler", "server-0", "server-1", "worker-0", "worker-1",
                          "worker-2", "evaluator-0", "control"};
    const key_role roles[] = {KEY_ROLE_SCHEDULER, KEY_ROLE_SERVER, KEY_ROLE_SERVER,
                              KEY_ROLE_WORKER, KEY_ROLE_WORKER, KEY_ROLE_WORKER,
                              KEY_ROLE_EVALUATOR, KEY_ROLE_CONTROL};
    keyset sched;
    snprintf(dir, sizeof dir, "%s/scheduler", tmp);
    ck_assert_int_eq(keys_load(&sched, dir, 1, why, sizeof why), 0);
    ck_assert_int_eq(sched.allow.n, 8);
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        keyset ks;
        snprintf(dir, sizeof dir, "%s/%s", tmp, subs[i]);
        int need = roles[i] == KEY_ROLE_SCHEDULER || roles[i] == KEY_ROLE_SERVER;
        ck_assert_msg(keys_load(&ks, dir, need, why, sizeof why) == 0, "%s: %s", subs[i], why);
        ck_assert_int_eq(ks.role, roles[i]);
        ck_assert_str_eq(ks.sched_pub, sched.pub);
        ck_assert_int_eq(key_allow_role(&sched.allow, ks.pub), roles[i]);
        keys_clear(&ks);
    }
    /* workers hold no allowlist */
    char path[400];
    snprintf(path, sizeof path, "%s/worker-0/authorized", tmp);
    ck_assert_int_ne(access(path, F_OK), 0);
    keys_clear(&sched);
    ck_assert_int_lt(keys_init_cluster(tmp, 0, 1, why, sizeof why), 0);
    rm_tmp();
}
END_TEST

/* A CURVE ROUTER with a ZAP handler allowing worker keys; clients dial it. */
typedef struct rig {
    void *ctx, *router;
    zap *z;
    int port;
    char spub[41], ssec[41];
} rig;

static void rig_up(rig *r, const char *worker_pub, const char *server_pub)
{
    memset(r, 0, sizeof *r);
    r->ctx = zmq_ctx_new();
    ck_assert_int_eq(zmq_curve_keypair(r->spub, r->ssec), 0);
    key_allow a = {0};
    ck_assert_int_eq(key_allow_add(&a, KEY_ROLE_WORKER, worker_pub), 0);
    ck_assert_int_eq(key_allow_add(&a, KEY_ROLE_SERVER, server_pub), 0);
    char why[256];
    r->z = zap_start(r->ctx, &a, 1u << KEY_ROLE_WORKER, why, sizeof why);
    ck_assert_msg(r->z != NULL, "%s", why);
    r->router = net_socket(r->ctx, ZMQ_ROUTER, 0, 0);
    keyset ks = {0};
    snprintf(ks.sec, sizeof ks.sec, "%s", r->ssec);
    ck_assert_int_eq(net_curve_server(r->router, &ks), 0);
    ck_assert_int_eq(zap_watch(r->z, r->router), 0);
    r->port = net_bind(r->router, "127.0.0.1", 0, why, sizeof why);
    ck_assert_int_gt(r->port, 0);
}

static void rig_down(rig *r)
{
    zmq_close(r->router);
    zap_stop(&r->z);
    ck_assert_ptr_null(r->z);
    zmq_ctx_term(r->ctx);
}

/* Sends "ping" from a client with the given keys (pub NULL: plaintext) and
 * returns 1 when the router got it (with its User-Id checked), 0 after 600 ms. */
static int try_client(rig *r, const char *pub, const char *sec, const char *server_pub,
                      key_role want)
{
    void *c = net_socket(r->ctx, ZMQ_DEALER, 0, 0);
    if (pub) {
        keyset ks = {0};
        snprintf(ks.pub, sizeof ks.pub, "%s", pub);
        snprintf(ks.sec, sizeof ks.sec, "%s", sec);
        ck_assert_int_eq(net_curve_client(c, &ks, server_pub), 0);
    }
    ck_assert_int_eq(net_connect(c, "127.0.0.1", r->port), 0);
    zmq_send(c, "ping", 4, ZMQ_DONTWAIT);
    zmq_pollitem_t it = {r->router, 0, ZMQ_POLLIN, 0};
    int got = 0;
    if (zmq_poll(&it, 1, 600) == 1) {
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        ck_assert_int_ge(zmq_msg_recv(&id, r->router, 0), 0);
        ck_assert_int_eq(zmq_msg_recv(&body, r->router, 0), 4);
        char kpub[48];
        ck_assert_int_eq(zap_peer(&body, kpub, sizeof kpub), want);
        ck_assert_str_eq(kpub, pub);
        zmq_msg_close(&id);
        zmq_msg_close(&body);
        got = 1;
    }
    zmq_close(c);
    return got;
}

START_TEST(test_zap_curve)
{
    char wpub[41], wsec[41], spub[41], ssec[41], xpub[41], xsec[41];
    zmq_curve_keypair(wpub, wsec);
    zmq_curve_keypair(spub, ssec);
    zmq_curve_keypair(xpub, xsec);
    rig r;
    rig_up(&r, wpub, spub);
    uint64_t unknown0 = refuse_count(REFUSE_UNKNOWN_KEY), role0 = refuse_count(REFUSE_ROLE);
    /* a listed worker key: delivered, User-Id carries role and key */
    ck_assert_int_eq(try_client(&r, wpub, wsec, r.spub, KEY_ROLE_WORKER), 1);
    /* unknown key, a server key where only workers may dial: nothing arrives */
    ck_assert_int_eq(try_client(&r, xpub, xsec, r.spub, KEY_ROLE_NONE), 0);
    ck_assert_uint_gt(refuse_count(REFUSE_UNKNOWN_KEY), unknown0);
    ck_assert_int_eq(try_client(&r, spub, ssec, r.spub, KEY_ROLE_NONE), 0);
    ck_assert_uint_gt(refuse_count(REFUSE_ROLE), role0);
    /* a plaintext client, and a listed key that encrypts to the wrong server key */
    ck_assert_int_eq(try_client(&r, NULL, NULL, NULL, KEY_ROLE_NONE), 0);
    ck_assert_int_eq(try_client(&r, wpub, wsec, xpub, KEY_ROLE_NONE), 0);
    /* the allowlist reloaded without the worker: refused from then on */
    key_allow a = {0};
    ck_assert_int_eq(key_allow_add(&a, KEY_ROLE_WORKER, xpub), 0);
    zap_reload(r.z, &a);
    ck_assert_int_eq(try_client(&r, wpub, wsec, r.spub, KEY_ROLE_NONE), 0);
    ck_assert_int_eq(try_client(&r, xpub, xsec, r.spub, KEY_ROLE_WORKER), 1);
    /* keys learned from a view are accepted too */
    key_allow v = {0};
    ck_assert_int_eq(key_allow_add(&v, KEY_ROLE_WORKER, wpub), 0);
    zap_allow_view(r.z, &v);
    ck_assert_int_eq(try_client(&r, wpub, wsec, r.spub, KEY_ROLE_WORKER), 1);
    rig_down(&r);
}
END_TEST

START_TEST(test_refuse_counts)
{
    uint64_t before = refuse_count(REFUSE_MESSAGE);
    for (int i = 0; i < 1000; i++)
        refuse_note(REFUSE_MESSAGE, "10.0.0.9:5555", NULL, "unit test flood");
    ck_assert_uint_eq(refuse_count(REFUSE_MESSAGE), before + 1000);
    ck_assert_str_eq(refuse_name(REFUSE_UNKNOWN_KEY), "unknown-key");
}
END_TEST

Suite *keys_suite(void)
{
    Suite *s = suite_create("keys");
    TCase *tc = tcase_create("keys");
    tcase_add_test(tc, test_keygen_load);
    tcase_add_test(tc, test_allowlist);
    tcase_add_test(tc, test_allow_bindings);
    tcase_add_test(tc, test_cluster_keyset);
    tcase_add_test(tc, test_zap_curve);
    tcase_add_test(tc, test_refuse_counts);
    suite_add_tcase(s, tc);
    return s;
}
