/* Runs every unit suite; exits non-zero when any test fails. */
#include <stdlib.h>

#include "suites.h"

int main(void)
{
    SRunner *sr = srunner_create(wire_suite());
    srunner_add_suite(sr, wire_ar_suite());
    srunner_add_suite(sr, metacodec_suite());
    srunner_add_suite(sr, serve_suite());
    srunner_add_suite(sr, nspace_suite());
    srunner_add_suite(sr, wire16_suite());
    srunner_add_suite(sr, shm_suite());
    srunner_add_suite(sr, config_suite());
    srunner_add_suite(sr, ring_suite());
    srunner_add_suite(sr, reshard_suite());
    srunner_add_suite(sr, membership_suite());
    srunner_add_suite(sr, holders_suite());
    srunner_add_suite(sr, updater_suite());
    srunner_add_suite(sr, shard_suite());
    srunner_add_suite(sr, prefault_suite());
    srunner_add_suite(sr, table_suite());
    srunner_add_suite(sr, admit_suite());
    srunner_add_suite(sr, dirty_suite());
    srunner_add_suite(sr, data_suite());
    srunner_add_suite(sr, model_suite());
    srunner_add_suite(sr, pipesched_suite());
    srunner_add_suite(sr, balsplit_suite());
    srunner_add_suite(sr, lrsched_suite());
    srunner_add_suite(sr, eta_suite());
    srunner_add_suite(sr, pipemove_suite());
    srunner_add_suite(sr, dedupe_suite());
    srunner_add_suite(sr, consist_suite());
    srunner_add_suite(sr, chain_suite());
    srunner_add_suite(sr, follow_suite());
    srunner_add_suite(sr, ckpt_suite());
    srunner_add_suite(sr, keys_suite());
    srunner_add_suite(sr, clip_suite());
    srunner_add_suite(sr, metrics_suite());
    srunner_add_suite(sr, filter_suite());
    srunner_add_suite(sr, kkt_suite());
    srunner_add_suite(sr, half_suite());
    srunner_add_suite(sr, halfvec_suite());
    srunner_add_suite(sr, manifest_suite());
    srunner_add_suite(sr, slice_suite());
    srunner_add_suite(sr, net_suite());
    srunner_add_suite(sr, tune_suite());
    srunner_add_suite(sr, phi_suite());
    srunner_add_suite(sr, resend_suite());
    srunner_add_suite(sr, wplan_suite());
    srunner_add_suite(sr, wpy_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
