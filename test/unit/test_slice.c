/* Tests of the scheduling slice a daemon asks for (common/slice.c): granted and
 * read back, inherited by threads created afterwards, clamped by the kernel, and
 * 0 leaving the kernel's default. Check forks each test, so a slice set here
 * never outlives its test. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "slice.h"
#include "suites.h"

/* The calling thread's slice in microseconds as the kernel reports it (0: this
 * kernel has no custom slices). */
static long my_slice(void)
{
    struct {
        uint32_t size, policy;
        uint64_t flags;
        int32_t nice;
        uint32_t priority;
        uint64_t runtime, deadline, period;
    } a;
    memset(&a, 0, sizeof a);
    ck_assert_int_eq(syscall(SYS_sched_getattr, 0, &a, sizeof a, 0), 0);
    return (long)(a.runtime / 1000);
}

static void *thread_slice(void *out)
{
    *(long *)out = my_slice();
    return NULL;
}

START_TEST(slice_granted_and_inherited)
{
    if (my_slice() == 0) { /* a kernel before 6.12: nothing granted, said so */
        ck_assert_int_eq(slice_apply(300), 0);
        return;
    }
    ck_assert_int_eq(slice_apply(300), 300);
    ck_assert_int_eq(my_slice(), 300);
    long in_thread = -1;
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, thread_slice, &in_thread), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(in_thread, 300); /* ZeroMQ's I/O threads start after: they have it */
}
END_TEST

START_TEST(slice_clamped_and_zero)
{
    long before = my_slice();
    ck_assert_int_eq(slice_apply(0), 0); /* 0: the kernel's default left alone */
    ck_assert_int_eq(my_slice(), before);
    if (before == 0)
        return;
    ck_assert_int_eq(slice_apply(20), 100); /* the kernel's shortest */
    ck_assert_int_eq(my_slice(), 100);
}
END_TEST

Suite *slice_suite(void)
{
    Suite *s = suite_create("slice");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, slice_granted_and_inherited);
    tcase_add_test(tc, slice_clamped_and_zero);
    suite_add_tcase(s, tc);
    return s;
}
