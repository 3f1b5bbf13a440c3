/* Tests of a socket monitor's end (common/net.c, net_monitor_stop): a monitor
 * ended while its socket stays open must leave the context's I/O thread free when
 * a connection of that socket closes later (a server's chain peer whose server
 * was killed: the view that says so can come before ZeroMQ has seen the close).
 * Closing the monitor's PAIR first, as chain_peer_close did, blocks that thread
 * in the event's send for good: this test then fails on the second socket's
 * silence. Real sockets on loopback, ports chosen by the kernel. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "net.h"
#include "suites.h"

/* Binds sock to a free loopback port and returns "tcp://127.0.0.1:PORT" in ep. */
static void bind_any(void *sock, char *ep, size_t len)
{
    ck_assert_int_eq(zmq_bind(sock, "tcp://127.0.0.1:*"), 0);
    size_t n = len;
    ck_assert_int_eq(zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, ep, &n), 0);
}

START_TEST(monitor_stop_leaves_io_thread_free)
{
    void *ctx = zmq_ctx_new(), *peer_ctx = zmq_ctx_new();
    int zero = 0, wait_ms = 10000;
    char ep[64], ep2[64], buf[16];
    /* a peer in a context of its own (another process's part), and a DEALER of
     * ctx connected to it and watched for DISCONNECTED */
    void *peer = zmq_socket(peer_ctx, ZMQ_ROUTER);
    zmq_setsockopt(peer, ZMQ_LINGER, &zero, sizeof zero);
    bind_any(peer, ep, sizeof ep);
    void *d = net_socket(ctx, ZMQ_DEALER, 0, 0);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(zmq_connect(d, ep), 0);
    void *mon = net_monitor(ctx, d, "inproc://test-net-monitor", ZMQ_EVENT_DISCONNECTED);
    ck_assert_ptr_nonnull(mon);
    zmq_setsockopt(peer, ZMQ_RCVTIMEO, &wait_ms, sizeof wait_ms);
    ck_assert_int_eq(zmq_send(d, "x", 1, 0), 1);
    ck_assert_int_ge(zmq_recv(peer, buf, sizeof buf, 0), 0); /* routing id */
    ck_assert_int_eq(zmq_recv(peer, buf, sizeof buf, 0), 1); /* connected */

    net_monitor_stop(d, &mon);
    ck_assert_ptr_null(mon);
    net_monitor_stop(d, &mon); /* a second stop does nothing */
    zmq_close(peer); /* the peer goes: d's connection closes, d still open */
    usleep(200 * 1000);

    /* a second socket of ctx still hears its peer */
    void *r = net_socket(ctx, ZMQ_ROUTER, 0, 0);
    bind_any(r, ep2, sizeof ep2);
    void *d2 = zmq_socket(peer_ctx, ZMQ_DEALER);
    zmq_setsockopt(d2, ZMQ_LINGER, &zero, sizeof zero);
    ck_assert_int_eq(zmq_connect(d2, ep2), 0);
    ck_assert_int_eq(zmq_send(d2, "y", 1, 0), 1);
    zmq_setsockopt(r, ZMQ_RCVTIMEO, &wait_ms, sizeof wait_ms);
    ck_assert_msg(zmq_recv(r, buf, sizeof buf, 0) >= 0,
                  "a socket of the context heard nothing for 10 s after a monitored "
                  "connection closed: the I/O thread is stuck in the monitor's send");
    zmq_close(d2);
    zmq_close(r);
    zmq_close(d);
    zmq_ctx_term(peer_ctx);
    zmq_ctx_term(ctx);
}
END_TEST

Suite *net_suite(void)
{
    Suite *s = suite_create("net");
    TCase *tc = tcase_create("monitor");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, monitor_stop_leaves_io_thread_free);
    suite_add_tcase(s, tc);
    return s;
}
