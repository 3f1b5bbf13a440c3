/* Tests of the server's table set (server/store/table.c): the first open fixes the
 * options, an identical reopen succeeds, any difference is refused with the
 * option named, and invalid options are refused before anything is created. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pskv_errors.h"
#include "ring.h"
#include "suites.h"
#include "store/table.h"
#include "wire.h"

/* Dense "emb": 1000 keys x 4, sgd lr 0.5, uniform init, seed 7. */
static Pskv__TableOptions base(void)
{
    Pskv__TableOptions o;
    pskv__table_options__init(&o);
    o.name = "emb";
    o.has_kind = 1;
    o.kind = PSKV__TABLE_KIND__DENSE;
    o.has_size = 1;
    o.size = 1000;
    o.has_width = 1;
    o.width = 4;
    o.updater = "sgd";
    o.has_lr = 1;
    o.lr = 0.5f;
    o.init = "uniform";
    o.has_init_scale = 1;
    o.init_scale = 0.1f;
    o.has_seed = 1;
    o.seed = 7;
    o.consistency = "async";
    return o;
}

static int open_full(table_set *ts, const Pskv__TableOptions *o, char *why, size_t len)
{
    why[0] = '\0';
    return tables_open(ts, wire_table_id(o->name), o, 0, UINT64_MAX, why, len);
}

START_TEST(open_creates)
{
    table_set *ts = tables_new();
    ck_assert_ptr_nonnull(ts);
    ck_assert_uint_eq(tables_count(ts), 0);
    Pskv__TableOptions o = base();
    char why[256];
    ck_assert_int_eq(open_full(ts, &o, why, sizeof why), 0);
    ck_assert_uint_eq(tables_count(ts), 1);
    table *t = tables_find(ts, wire_table_id("emb"));
    ck_assert_ptr_nonnull(t);
    ck_assert_str_eq(t->name, "emb");
    ck_assert_int_eq(t->dense, 1);
    ck_assert_uint_eq(t->size, 1000);
    ck_assert_uint_eq(t->width, 4);
    ck_assert_int_eq(t->upd.kind, UPD_SGD);
    ck_assert_float_eq(t->upd.lr, 0.5f);
    ck_assert_ptr_nonnull(t->sh);
    ck_assert_uint_eq(shard_size(t->sh), 1000); /* the whole ring */
    ck_assert_ptr_null(tables_find(ts, wire_table_id("other")));
    tables_destroy(&ts);
    ck_assert_ptr_null(ts);
    tables_destroy(&ts);
    tables_destroy(NULL);
}
END_TEST

START_TEST(open_defaults)
{
    table_set *ts = tables_new();
    Pskv__TableOptions o;
    pskv__table_options__init(&o);
    o.name = "plain";
    o.has_kind = 1;
    o.kind = PSKV__TABLE_KIND__SPARSE;
    o.has_width = 1;
    o.width = 8;
    char why[256];
    ck_assert_int_eq(open_full(ts, &o, why, sizeof why), 0);
    table *t = tables_find(ts, wire_table_id("plain"));
    ck_assert_ptr_nonnull(t);
    ck_assert_str_eq(t->updater, "sgd");
    ck_assert_float_eq(t->upd.lr, 0.01f);
    ck_assert_str_eq(t->init, "zero");
    ck_assert_str_eq(t->consistency, "async");
    ck_assert_int_eq(t->dense, 0);
    ck_assert_uint_eq(shard_size(t->sh), 0);

    /* Spelling the defaults out is the same table. */
    Pskv__TableOptions e = o;
    e.updater = "sgd";
    e.has_lr = 1;
    e.lr = 0.01f;
    e.init = "zero";
    e.consistency = "async";
    e.has_eps = 1;
    e.eps = 1e-8f;
    ck_assert_msg(open_full(ts, &e, why, sizeof why) == 0, "explicit defaults refused: %s", why);
    /* A sparse table has no size: whatever is sent is ignored. */
    e.has_size = 1;
    e.size = 123;
    ck_assert_msg(open_full(ts, &e, why, sizeof why) == 0, "sparse size compared: %s", why);
    ck_assert_uint_eq(tables_count(ts), 1);
    tables_destroy(&ts);
}
END_TEST

START_TEST(reopen_identical)
{
    table_set *ts = tables_new();
    Pskv__TableOptions o = base();
    char why[256];
    ck_assert_int_eq(open_full(ts, &o, why, sizeof why), 0);
    table *t = tables_find(ts, wire_table_id("emb"));
    /* Values pushed before a reopen survive it: the reopen is a check, not a reset. */
    uint64_t k = 3;
    float g[4] = {1, 1, 1, 1}, before[4], after[4];
    ck_assert_int_eq(shard_push(t->sh, &k, 0, 1, g), 0);
    shard_pull(t->sh, &k, 0, 1, before);
    for (int i = 0; i < 3; i++) {
        Pskv__TableOptions again = base(); /* a separate copy, as a second worker sends it */
        ck_assert_msg(open_full(ts, &again, why, sizeof why) == 0, "identical reopen: %s", why);
    }
    ck_assert_uint_eq(tables_count(ts), 1);
    ck_assert_ptr_eq(tables_find(ts, wire_table_id("emb")), t);
    shard_pull(t->sh, &k, 0, 1, after);
    ck_assert_mem_eq(before, after, sizeof before);
    tables_destroy(&ts);
}
END_TEST

/* Loop test: each case changes one option of base() and must be refused by name. */
static void change(int which, Pskv__TableOptions *o, const char **name)
{
    switch (which) {
    case 0: o->width = 8; *name = "'width'"; break;
    case 1: o->updater = "adagrad"; *name = "'updater'"; break;
    case 2: o->lr = 0.25f; *name = "'lr'"; break;
    case 3: o->kind = PSKV__TABLE_KIND__SPARSE; *name = "'kind'"; break;
    case 4: o->size = 1001; *name = "'size'"; break;
    case 5: o->init = "normal"; *name = "'init'"; break;
    case 6: o->seed = 8; *name = "'seed'"; break;
    case 7: o->has_seed = 0; o->seed = 0; *name = "'seed'"; break;
    case 8: o->has_momentum = 1; o->momentum = 0.9f; *name = "'momentum'"; break;
    case 9: o->has_l2 = 1; o->l2 = 1e-4f; *name = "'l2'"; break;
    case 10: o->init_scale = 0.2f; *name = "'init_scale'"; break;
    case 11: o->has_lr = 0; *name = "'lr'"; break; /* the default 0.01 is not 0.5 */
    case 12: o->has_l1 = 1; o->l1 = 1e-3f; *name = "'l1'"; break;
    case 13: o->wire = "fp16"; *name = "'wire'"; break; /* base() is fp32 (absent) */
    case 14: o->has_bsp_mean_pushed = o->bsp_mean_pushed = 1; *name = "'bsp_mean_pushed'"; break;
    case 15: o->consistency = "bsp"; *name = "'consistency' = async, open asked bsp"; break;
    default: ck_abort_msg("no case %d", which);
    }
}
enum { NCHANGES = 16 };

START_TEST(reopen_mismatch)
{
    table_set *ts = tables_new();
    Pskv__TableOptions o = base();
    char why[256];
    ck_assert_int_eq(open_full(ts, &o, why, sizeof why), 0);
    if (_i % 2) { /* who opened it first, when the server knows (serve.c sets it) */
        table *first = tables_find(ts, wire_table_id("emb"));
        snprintf(first->opened_by, sizeof first->opened_by, "group A");
    }
    Pskv__TableOptions c = base();
    const char *name = NULL;
    change(_i, &c, &name);
    int rc = open_full(ts, &c, why, sizeof why);
    ck_assert_msg(rc == -PSKV_EMISMATCH, "change %s: rc %d (%s)", name, rc, why);
    ck_assert_msg(strstr(why, name) != NULL, "'%s' does not name %s", why, name);
    ck_assert_msg(strstr(why, "emb") != NULL, "'%s' does not name the table", why);
    ck_assert_msg(!(_i % 2) == !strstr(why, " (first opened by group A)"),
                  "'%s': the first opener named or not as known", why);
    /* The existing table is untouched. */
    ck_assert_uint_eq(tables_count(ts), 1);
    table *t = tables_find(ts, wire_table_id("emb"));
    ck_assert_uint_eq(t->width, 4);
    ck_assert_float_eq(t->upd.lr, 0.5f);
    ck_assert_int_eq(t->dense, 1);
    tables_destroy(&ts);
}
END_TEST

/* Loop test: each case makes base() invalid; refused with the option named, nothing created. */
static void invalidate(int which, Pskv__TableOptions *o, const char **name)
{
    static char longname[200];
    switch (which) {
    case 0: o->kind = PSKV__TABLE_KIND__KIND_NONE; *name = "'kind'"; break;
    case 1: o->has_kind = 0; o->kind = 0; *name = "'kind'"; break;
    case 2: o->width = 0; *name = "'width'"; break;
    case 3: o->width = (1u << 20) + 1; *name = "'width'"; break;
    case 4: o->size = 0; *name = "'size'"; break;
    case 5: o->size = ((uint64_t)1 << 40) + 1; *name = "'size'"; break;
    case 6: o->updater = "nadam"; *name = "'updater'"; break;
    case 7: o->init = "xavier"; *name = "'init'"; break;
    case 8: o->consistency = "ssp:x"; *name = "'consistency'"; break;
    case 9: o->consistency = "eventually"; *name = "'consistency'"; break;
    case 10: o->name = ""; *name = "'name'"; break;
    case 11:
        memset(longname, 'n', sizeof longname - 1);
        longname[sizeof longname - 1] = '\0';
        o->name = longname;
        *name = "'name'";
        break;
    case 12: o->lr = -0.1f; *name = "lr"; break;
    case 13: o->has_momentum = 1; o->momentum = 1.0f; *name = "momentum"; break;
    case 14: o->init_scale = NAN; *name = "'init_scale'"; break;
    case 15: o->updater = "adagrad"; o->has_eps = 1; o->eps = 0; *name = "eps"; break;
    case 16: o->name = NULL; *name = "'name'"; break;
    case 17: o->updater = "ftrl"; *name = "'init'"; break; /* base() has a uniform init */
    case 18: o->updater = "adam"; o->has_beta1 = 1; o->beta1 = 1; *name = "beta1"; break;
    case 19: o->updater = "adagrad"; o->has_l1 = 1; o->l1 = 0.1f; *name = "l1"; break;
    case 20: o->updater = "plugin:/nonexistent/p.so"; *name = "/nonexistent/p.so"; break;
    case 21: o->updater = "plugin:"; *name = "plug-in path"; break;
    case 22: o->updater = "sgd"; o->has_weight_decay = 1; o->weight_decay = 0.1f;
        *name = "weight_decay"; break;
    case 23: o->wire = "fp8"; *name = "'wire'"; break; /* a precision this server lacks */
    case 24: {
        static char *lossy[] = {"int8"};
        o->wire = "bf16";
        o->n_filters = 1;
        o->filters = lossy;
        *name = "'wire'";
        break;
    }
    default: ck_abort_msg("no case %d", which);
    }
}
enum { NINVALID = 25 };

START_TEST(invalid_options)
{
    table_set *ts = tables_new();
    Pskv__TableOptions o = base();
    const char *name = NULL;
    invalidate(_i, &o, &name);
    char why[256] = "";
    uint64_t id = wire_table_id(o.name ? o.name : "");
    int rc = tables_open(ts, id, &o, 0, UINT64_MAX, why, sizeof why);
    ck_assert_msg(rc == -PSKV_EINVAL, "invalid %s: rc %d", name, rc);
    ck_assert_msg(strstr(why, name) != NULL, "'%s' does not name %s", why, name);
    ck_assert_uint_eq(tables_count(ts), 0);
    tables_destroy(&ts);
}
END_TEST

START_TEST(name_length)
{
    table_set *ts = tables_new();
    char name[128];
    memset(name, 'a', sizeof name - 1);
    name[sizeof name - 1] = '\0'; /* 127 characters: the longest allowed */
    Pskv__TableOptions o = base();
    o.name = name;
    char why[256];
    ck_assert_msg(open_full(ts, &o, why, sizeof why) == 0, "127-character name: %s", why);
    table *t = tables_find(ts, wire_table_id(name));
    ck_assert_ptr_nonnull(t);
    ck_assert_str_eq(t->name, name);
    tables_destroy(&ts);
}
END_TEST

START_TEST(id_must_match_name)
{
    table_set *ts = tables_new();
    Pskv__TableOptions o = base();
    char why[256] = "";
    int rc = tables_open(ts, wire_table_id("emb2"), &o, 0, UINT64_MAX, why, sizeof why);
    ck_assert_int_eq(rc, -PSKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "emb"));
    ck_assert_uint_eq(tables_count(ts), 0);
    ck_assert_ptr_null(tables_find(ts, wire_table_id("emb2")));
    ck_assert_ptr_null(tables_find(ts, wire_table_id("emb")));
    tables_destroy(&ts);
}
END_TEST

START_TEST(find_among_many)
{
    table_set *ts = tables_new();
    char names[20][16];
    char why[256];
    for (int i = 0; i < 20; i++) { /* past the initial capacity */
        snprintf(names[i], sizeof names[i], "t%d", i);
        Pskv__TableOptions o = base();
        o.name = names[i];
        o.width = (uint32_t)(i + 1);
        ck_assert_int_eq(open_full(ts, &o, why, sizeof why), 0);
    }
    ck_assert_uint_eq(tables_count(ts), 20);
    for (int i = 0; i < 20; i++) {
        table *t = tables_find(ts, wire_table_id(names[i]));
        ck_assert_ptr_nonnull(t);
        ck_assert_str_eq(t->name, names[i]);
        ck_assert_uint_eq(t->width, (uint32_t)(i + 1));
    }
    ck_assert_ptr_null(tables_find(ts, wire_table_id("t20")));
    tables_destroy(&ts);
}
END_TEST

/* Two servers that each open the table for their half of the ring hold, between
 * them, exactly the initial values of one server holding it all. */
START_TEST(split_servers_agree)
{
    enum { SIZE = 1000, W = 4 };
    struct { uint64_t begin, end; } r[2] = {{ring_partition_begin(0, 2), ring_partition_end(0, 2)},
                                            {ring_partition_begin(1, 2), ring_partition_end(1, 2)}};
    table_set *one = tables_new(), *a = tables_new(), *b = tables_new();
    Pskv__TableOptions o = base();
    uint64_t id = wire_table_id("emb");
    char why[256];
    ck_assert_int_eq(tables_open(one, id, &o, 0, UINT64_MAX, why, sizeof why), 0);
    ck_assert_int_eq(tables_open(a, id, &o, r[0].begin, r[0].end, why, sizeof why), 0);
    ck_assert_int_eq(tables_open(b, id, &o, r[1].begin, r[1].end, why, sizeof why), 0);
    shard *sa = tables_find(a, id)->sh, *sb = tables_find(b, id)->sh;
    ck_assert_uint_eq(shard_size(sa) + shard_size(sb), SIZE);
    ck_assert_uint_eq(shard_size(sa), 500);
    float whole[W], part[W];
    int nonzero = 0;
    for (uint64_t k = 0; k < SIZE; k++) {
        shard *s = shard_owns_key(sa, k) ? sa : sb;
        ck_assert_int_eq(shard_owns_key(sa, k) + shard_owns_key(sb, k), 1);
        shard_pull(tables_find(one, id)->sh, &k, 0, 1, whole);
        shard_pull(s, &k, 0, 1, part);
        ck_assert_mem_eq(whole, part, sizeof whole);
        nonzero += whole[0] != 0.0f;
    }
    ck_assert_int_gt(nonzero, SIZE / 2); /* uniform init really ran */
    tables_destroy(&one);
    tables_destroy(&a);
    tables_destroy(&b);
}
END_TEST

/* The seed is mixed with the table name: two tables with the same seed differ,
 * and the same table with another seed differs. */
START_TEST(init_depends_on_name_and_seed)
{
    table_set *ts = tables_new(), *other = tables_new();
    Pskv__TableOptions o = base(), p = base(), q = base();
    p.name = "emb2";
    q.seed = 8;
    char why[256];
    ck_assert_int_eq(open_full(ts, &o, why, sizeof why), 0);
    ck_assert_int_eq(open_full(ts, &p, why, sizeof why), 0);
    ck_assert_int_eq(open_full(other, &q, why, sizeof why), 0);
    float x[4 * 10], y[4 * 10], z[4 * 10];
    shard_pull(tables_find(ts, wire_table_id("emb"))->sh, NULL, 0, 10, x);
    shard_pull(tables_find(ts, wire_table_id("emb2"))->sh, NULL, 0, 10, y);
    shard_pull(tables_find(other, wire_table_id("emb"))->sh, NULL, 0, 10, z);
    ck_assert(memcmp(x, y, sizeof x) != 0);
    ck_assert(memcmp(x, z, sizeof x) != 0);
    tables_destroy(&ts);
    tables_destroy(&other);
}
END_TEST

/* tables_open accepts a non-finite eps for sgd (upd_check only checks eps for
 * adagrad), and then refuses an identical reopen because NaN != NaN in differs().
 * Fixed; kept as a regression test. */
START_TEST(nan_eps_reopen)
{
    table_set *ts = tables_new();
    Pskv__TableOptions o = base();
    o.has_eps = 1;
    o.eps = NAN;
    char why[256];
    int first = open_full(ts, &o, why, sizeof why);
    if (first == 0) /* accepted: then the same options must be accepted again */
        ck_assert_msg(open_full(ts, &o, why, sizeof why) == 0, "identical reopen: %s", why);
    else
        ck_assert_int_eq(first, -PSKV_EINVAL);
    tables_destroy(&ts);
}
END_TEST

/* adam's and ftrl's own parameters are compared on a reopen, and parameters an
 * updater does not use are not (a worker may send them anyway). */
START_TEST(reopen_new_updaters)
{
    table_set *ts = tables_new();
    char why[256];
    Pskv__TableOptions o = base();
    o.updater = "adam";
    o.has_beta2 = 1;
    o.beta2 = 0.99f;
    o.has_beta = 1;
    o.beta = 5; /* ftrl's: ignored for adam */
    ck_assert_int_eq(open_full(ts, &o, why, sizeof why), 0);
    o.beta = 7;
    ck_assert_msg(open_full(ts, &o, why, sizeof why) == 0, "%s", why);
    o.beta2 = 0.999f;
    ck_assert_int_eq(open_full(ts, &o, why, sizeof why), -PSKV_EMISMATCH);
    ck_assert_msg(strstr(why, "'beta2'") != NULL, "%s", why);
    Pskv__TableOptions f = base();
    f.name = "ftrl-w";
    f.kind = PSKV__TABLE_KIND__SPARSE;
    f.updater = "ftrl";
    f.init = "zero";
    f.has_l1 = 1;
    f.l1 = 1;
    ck_assert_msg(open_full(ts, &f, why, sizeof why) == 0, "%s", why);
    f.has_beta = 1;
    f.beta = 2; /* the default is 1 */
    ck_assert_int_eq(open_full(ts, &f, why, sizeof why), -PSKV_EMISMATCH);
    ck_assert_msg(strstr(why, "'beta'") != NULL, "%s", why);
    tables_destroy(&ts);
}
END_TEST

/* table_set_lr (pskv_table_set_lr): the lr pushes are applied with changes, the
 * open's options (which reopens compare) do not; bad values and a sum table are
 * refused naming the value, and change nothing. */
START_TEST(set_lr_changes_applied_lr_only)
{
    table_set *ts = tables_new();
    Pskv__TableOptions o = base();
    char why[256];
    ck_assert_int_eq(open_full(ts, &o, why, sizeof why), 0);
    table *t = tables_find(ts, wire_table_id("emb"));
    const double bad[] = {NAN, 0.0, -1.0, INFINITY};
    const char *named[] = {"lr nan refused", "lr 0 refused", "lr -1 refused", "lr inf refused"};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(table_set_lr(t, bad[i], why, sizeof why), -PSKV_EINVAL);
        ck_assert_msg(strstr(why, named[i]) && strstr(why, "'emb'"), "%s", why);
        ck_assert_float_eq(shard_lr(t->sh), 0.5f);
    }
    ck_assert_int_eq(table_set_lr(t, 0.125, why, sizeof why), 0);
    ck_assert_float_eq(shard_lr(t->sh), 0.125f);
    ck_assert_float_eq(t->upd.lr, 0.5f);
    ck_assert_int_eq(open_full(ts, &o, why, sizeof why), 0); /* the first open's lr */
    float g[4] = {1, 1, 1, 1}, before[4], after[4];
    shard_pull(t->sh, NULL, 3, 1, before);
    ck_assert_int_eq(shard_push(t->sh, NULL, 3, 1, g), 0);
    shard_pull(t->sh, NULL, 3, 1, after);
    for (int j = 0; j < 4; j++)
        ck_assert_float_eq_tol(after[j], before[j] - 0.125f, 1e-6f);
    Pskv__TableOptions so = base();
    so.name = "counts";
    so.updater = "sum";
    ck_assert_int_eq(open_full(ts, &so, why, sizeof why), 0);
    table *st = tables_find(ts, wire_table_id("counts"));
    ck_assert_int_eq(table_set_lr(st, 0.1, why, sizeof why), -PSKV_EINVAL);
    ck_assert_msg(strstr(why, "updater sum takes no lr"), "%s", why);
    tables_destroy(&ts);
}
END_TEST

/* tables_remove (a namespace dropped): the others keep their order and stay
 * findable, and the removed name opens afresh with other options. */
START_TEST(remove_then_reopen)
{
    table_set *ts = tables_new();
    char why[300];
    const char *names[] = {"a/x", "b/y", "a/z", "b/w"};
    for (int i = 0; i < 4; i++) {
        Pskv__TableOptions o = base();
        o.name = (char *)names[i];
        ck_assert_int_eq(open_full(ts, &o, why, sizeof why), 0);
    }
    for (size_t i = tables_count(ts); i-- > 0;)
        if (!strcmp(tables_at(ts, i)->ns, "a"))
            tables_remove(ts, tables_at(ts, i));
    ck_assert_uint_eq(tables_count(ts), 2);
    ck_assert_str_eq(tables_at(ts, 0)->name, "b/y");
    ck_assert_str_eq(tables_at(ts, 1)->name, "b/w");
    ck_assert_ptr_null(tables_find(ts, wire_table_id("a/x")));
    ck_assert_ptr_nonnull(tables_find(ts, wire_table_id("b/w")));
    Pskv__TableOptions o = base();
    o.name = "a/x";
    o.width = 7; /* refused while the first a/x stood */
    ck_assert_int_eq(open_full(ts, &o, why, sizeof why), 0);
    ck_assert_uint_eq(tables_find(ts, wire_table_id("a/x"))->width, 7);
    tables_destroy(&ts);
}
END_TEST

Suite *table_suite(void)
{
    Suite *s = suite_create("table");
    TCase *tc = tcase_create("open");
    tcase_add_test(tc, open_creates);
    tcase_add_test(tc, open_defaults);
    tcase_add_test(tc, reopen_identical);
    tcase_add_loop_test(tc, reopen_mismatch, 0, NCHANGES);
    tcase_add_loop_test(tc, invalid_options, 0, NINVALID);
    tcase_add_test(tc, name_length);
    tcase_add_test(tc, id_must_match_name);
    tcase_add_test(tc, find_among_many);
    tcase_add_test(tc, nan_eps_reopen);
    tcase_add_test(tc, reopen_new_updaters);
    tcase_add_test(tc, set_lr_changes_applied_lr_only);
    tcase_add_test(tc, remove_then_reopen);
    suite_add_tcase(s, tc);
    TCase *sh = tcase_create("shards");
    tcase_add_test(sh, split_servers_agree);
    tcase_add_test(sh, init_depends_on_name_and_seed);
    suite_add_tcase(s, sh);
    return s;
}
