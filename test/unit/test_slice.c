/* Tests of the scheduling slice a daemon asks for (common/slice.c): granted and
 * read back, inherited by threads created afterwards, clamped by the kernel, 0
 * leaving the kernel's default, and given to a ZeroMQ context's threads only. Check forks each test, so a slice set here
 * never outlives its test. */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "slice.h"
#include "suites.h"

/* The calling thread's slice in microseconds as the kernel reports it (0: this
 * kernel has no custom slices); the kernel must answer. */
static long my_slice(void)
{
    long us = slice_of(0);
    ck_assert_int_ge(us, 0);
    return us;
}

/* The thread of this process named `name` (its comm), or 0. */
static pid_t thread_named(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    pid_t found = 0;
    while (!found && (e = readdir(d))) {
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(comm, sizeof comm, f) && !strncmp(comm, name, strlen(name)))
            found = (pid_t)atoi(e->d_name);
        fclose(f);
    }
    closedir(d);
    return found;
}

static void *thread_slice(void *out)
{
    *(long *)out = my_slice();
    return NULL;
}

START_TEST(slice_granted_and_inherited)
{
    if (my_slice() == 0) { /* a kernel before 6.12: nothing granted, said so */
        ck_assert_int_eq(slice_apply(300, "test"), 0);
        return;
    }
    ck_assert_int_eq(slice_apply(300, "test"), 300);
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
    ck_assert_int_eq(slice_apply(0, "test"), 0); /* 0: the kernel's default left alone */
    ck_assert_int_eq(my_slice(), before);
    if (before == 0)
        return;
    ck_assert_int_eq(slice_apply(20, "test"), 100); /* the kernel's shortest */
    ck_assert_int_eq(my_slice(), 100);
}
END_TEST

START_TEST(slice_zmq_threads_only)
{
    long before = my_slice();
    void *ctx = zmq_ctx_new();
    ck_assert_ptr_nonnull(ctx);
    long got = slice_start_zmq(ctx, 200, "test");
    ck_assert_int_eq(my_slice(), before); /* the caller (a user's compute) keeps its own */
    if (before == 0) {
        ck_assert_int_eq(got, 0);
    } else {
        ck_assert_int_eq(got, 200);
        pid_t io = 0; /* ZeroMQ names the thread itself once running: wait for it */
        for (int i = 0; i < 200 && !io; i++, usleep(5000))
            io = thread_named("ZMQbg/IO");
        ck_assert_msg(io > 0, "no ZMQbg/IO thread");
        ck_assert_int_eq(slice_of((int)io), 200);
    }
    void *s = zmq_socket(ctx, ZMQ_PAIR); /* the context works as before */
    ck_assert_ptr_nonnull(s);
    zmq_close(s);
    zmq_ctx_term(ctx);
    ck_assert_int_eq(slice_start_zmq(NULL, 0, "test"), 0); /* 0: nothing done */
}
END_TEST

Suite *slice_suite(void)
{
    Suite *s = suite_create("slice");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, slice_granted_and_inherited);
    tcase_add_test(tc, slice_clamped_and_zero);
    tcase_add_test(tc, slice_zmq_threads_only);
    suite_add_tcase(s, tc);
    return s;
}
