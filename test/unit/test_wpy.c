/* Tests of the calls for bindings (worker/lib/wpy.c): pskv_struct_layout gives
 * every public struct's size and each field's offset as this compiler lays them
 * out (what python/pskv/_lib.py checks its mirrors against), refuses names it
 * does not know, and pskv_held_get reads zero and pskv_request_pending refuses
 * for no handle (the Python tests use both on real handles). */
#include <stddef.h>

#include "pskv.h"
#include "suites.h"

START_TEST(sizes_and_offsets)
{
    ck_assert_int_eq(pskv_struct_layout("pskv_config", NULL), (int64_t)sizeof(pskv_config));
    ck_assert_int_eq(pskv_struct_layout("pskv_config", ""), (int64_t)sizeof(pskv_config));
    ck_assert_int_eq(pskv_struct_layout("pskv_config", "scheduler"), 0);
    ck_assert_int_eq(pskv_struct_layout("pskv_config", "slice_us"),
                     (int64_t)offsetof(pskv_config, slice_us));
    ck_assert_int_eq(pskv_struct_layout("pskv_config", "job_id"),
                     (int64_t)offsetof(pskv_config, job_id));
    ck_assert_int_eq(pskv_struct_layout("pskv_table_opts", NULL),
                     (int64_t)sizeof(pskv_table_opts));
    ck_assert_int_eq(pskv_struct_layout("pskv_table_opts", "wire"),
                     (int64_t)offsetof(pskv_table_opts, wire));
    ck_assert_int_eq(pskv_struct_layout("pskv_table_opts", "seed"),
                     (int64_t)offsetof(pskv_table_opts, seed));
    ck_assert_int_eq(pskv_struct_layout("pskv_traffic", "name"),
                     (int64_t)offsetof(pskv_traffic, name));
    ck_assert_int_eq(pskv_struct_layout("pskv_held", NULL), (int64_t)sizeof(pskv_held));
    ck_assert_int_eq(pskv_struct_layout("pskv_held", "draining"),
                     (int64_t)offsetof(pskv_held, draining));
    ck_assert_int_eq(pskv_struct_layout("pskv_held", "lent"), (int64_t)offsetof(pskv_held, lent));
    ck_assert_int_eq(pskv_struct_layout("pskv_pipe_msg", "n"),
                     (int64_t)offsetof(pskv_pipe_msg, n));
}
END_TEST

START_TEST(unknown_names_refused)
{
    ck_assert_int_eq(pskv_struct_layout(NULL, NULL), -PSKV_ENOTFOUND);
    ck_assert_int_eq(pskv_struct_layout("pskv_worker", NULL), -PSKV_ENOTFOUND);
    ck_assert_int_eq(pskv_struct_layout("pskv_config", "no_such_field"), -PSKV_ENOTFOUND);
    /* a field of another struct is not this one's */
    ck_assert_int_eq(pskv_struct_layout("pskv_config", "updater"), -PSKV_ENOTFOUND);
}
END_TEST

START_TEST(held_without_handle)
{
    pskv_held h = {1, 2, 3, 4, 5};
    pskv_held_get(NULL, &h);
    ck_assert_int_eq(h.requests + h.views + h.push_buffers + h.draining, 0);
    ck_assert_uint_eq(h.lent, 0);
    ck_assert_int_eq(pskv_request_pending(NULL, 1), -PSKV_EINVAL);
}
END_TEST

Suite *wpy_suite(void)
{
    Suite *s = suite_create("wpy");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, sizes_and_offsets);
    tcase_add_test(tc, unknown_names_refused);
    tcase_add_test(tc, held_without_handle);
    suite_add_tcase(s, tc);
    return s;
}
