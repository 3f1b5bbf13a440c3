#define _GNU_SOURCE
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include "keys.h"
#include "pskv_errors.h"

int net_split_hostport(const char *s, char *host, size_t hostlen, int *port)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s)
        return -PSKV_EINVAL;
    const char *h = s;
    size_t hl = (size_t)(colon - s);
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl == 0 || hl >= hostlen)
        return -PSKV_EINVAL;
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end || end == colon + 1 || p <= 0 || p > 65535)
        return -PSKV_EINVAL;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (int)p;
    return 0;
}

int net_interface_addr(const char *ifname, char *out, size_t outlen)
{
    struct ifaddrs *ifs, *it;
    int rc = -PSKV_ENOTFOUND;
    if (getifaddrs(&ifs) != 0)
        return -PSKV_ENOTFOUND;
    for (it = ifs; it; it = it->ifa_next) {
        if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET || strcmp(it->ifa_name, ifname))
            continue;
        struct sockaddr_in *sin = (struct sockaddr_in *)(void *)it->ifa_addr;
        if (inet_ntop(AF_INET, &sin->sin_addr, out, (socklen_t)outlen))
            rc = 0;
        break;
    }
    freeifaddrs(ifs);
    return rc;
}

/* The source address the kernel would use toward host: a connected UDP socket
 * sends nothing but has its local address chosen by the routing table. */
static int route_source(const char *host, char *out, size_t outlen)
{
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_DGRAM;
    if (getaddrinfo(host, "9", &hints, &res) != 0 || !res)
        return -PSKV_ENOTFOUND;
    int rc = -PSKV_ENOTFOUND;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
        struct sockaddr_in local;
        socklen_t len = sizeof local;
        if (getsockname(fd, (struct sockaddr *)&local, &len) == 0 &&
            inet_ntop(AF_INET, &local.sin_addr, out, (socklen_t)outlen))
            rc = 0;
    }
    if (fd >= 0)
        close(fd);
    freeaddrinfo(res);
    return rc;
}

int net_pick_advertise(const char *advertise, const char *ifname, const char *peer_host,
                       char *out, size_t outlen, char *why, size_t whylen)
{
    if (advertise && *advertise) {
        snprintf(out, outlen, "%s", advertise);
        return 0;
    }
    if (ifname && *ifname) {
        if (net_interface_addr(ifname, out, outlen) < 0) {
            snprintf(why, whylen, "interface '%s' not found or has no IPv4 address", ifname);
            return -PSKV_ENOTFOUND;
        }
        return 0;
    }
    if (peer_host && *peer_host && route_source(peer_host, out, outlen) == 0)
        return 0;
    char name[256];
    if (gethostname(name, sizeof name) == 0 && route_source(name, out, outlen) == 0) {
        struct addrinfo hints = {0}, *res = NULL;
        hints.ai_family = AF_INET;
        if (getaddrinfo(name, NULL, &hints, &res) == 0 && res) {
            struct sockaddr_in *sin = (struct sockaddr_in *)(void *)res->ai_addr;
            inet_ntop(AF_INET, &sin->sin_addr, out, (socklen_t)outlen);
            freeaddrinfo(res);
            return 0;
        }
    }
    snprintf(out, outlen, "127.0.0.1");
    return 0;
}

int net_is_loopback(const char *host)
{
    if (!host || !*host)
        return 0;
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res)
        return 0;
    int loop = 0;
    for (struct addrinfo *a = res; a && !loop; a = a->ai_next) {
        if (a->ai_family == AF_INET) {
            uint32_t ip = ntohl(((struct sockaddr_in *)(void *)a->ai_addr)->sin_addr.s_addr);
            loop = (ip >> 24) == 127;
        } else if (a->ai_family == AF_INET6) {
            loop = IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)(void *)a->ai_addr)->sin6_addr);
        }
    }
    freeaddrinfo(res);
    return loop;
}

int net_check_advertise(const char *advertised, const char *scheduler_host, char *why,
                        size_t whylen)
{
    if (!net_is_loopback(advertised) || net_is_loopback(scheduler_host))
        return 0;
    snprintf(why, whylen,
             "this node would advertise the loopback address %s, but the scheduler is at %s: "
             "nodes on other hosts could not reach it; pass --advertise ADDR or --interface NAME",
             advertised, scheduler_host);
    return -PSKV_EINVAL;
}

void *net_socket(void *ctx, int type, int64_t max_message, int linger_ms)
{
    void *s = zmq_socket(ctx, type);
    if (!s)
        return NULL;
    zmq_setsockopt(s, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
    if (max_message > 0)
        zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max_message, sizeof max_message);
    if (type == ZMQ_ROUTER) {
        int one = 1;
        zmq_setsockopt(s, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    }
    /* A full peer queue must not stall a daemon forever. */
    int sndtimeo = 5000;
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &sndtimeo, sizeof sndtimeo);
    int hwm = 10000;
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
    return s;
}

void *net_monitor(void *ctx, void *sock, const char *ep, int events)
{
    if (zmq_socket_monitor(sock, ep, events) != 0)
        return NULL;
    void *pair = zmq_socket(ctx, ZMQ_PAIR);
    int linger = 0;
    if (!pair || zmq_setsockopt(pair, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        zmq_connect(pair, ep) != 0) {
        if (pair)
            zmq_close(pair);
        zmq_socket_monitor(sock, NULL, 0);
        return NULL;
    }
    return pair;
}

void net_monitor_stop(void *sock, void **mon_p)
{
    if (!mon_p || !*mon_p)
        return;
    if (sock)
        zmq_socket_monitor(sock, NULL, 0);
    zmq_close(*mon_p);
    *mon_p = NULL;
}

int net_monitor_event(void *mon, uint16_t *event, int32_t *value)
{
    zmq_msg_t ev, ep;
    zmq_msg_init(&ev);
    if (zmq_msg_recv(&ev, mon, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&ev);
        return 0;
    }
    *event = 0;
    *value = -1;
    if (zmq_msg_size(&ev) >= 6) {
        memcpy(event, zmq_msg_data(&ev), 2);
        memcpy(value, (char *)zmq_msg_data(&ev) + 2, 4);
    }
    zmq_msg_init(&ep);
    if (zmq_msg_more(&ev))
        zmq_msg_recv(&ep, mon, 0);
    zmq_msg_close(&ev);
    zmq_msg_close(&ep);
    return 1;
}

int net_bind(void *sock, const char *bind, int port, char *why, size_t whylen)
{
    char ep[300];
    const char *b = (!bind || !*bind || !strcmp(bind, "*")) ? "0.0.0.0" : bind;
    if (port)
        snprintf(ep, sizeof ep, "tcp://%s:%d", b, port);
    else
        snprintf(ep, sizeof ep, "tcp://%s:*", b);
    if (zmq_bind(sock, ep) != 0) {
        snprintf(why, whylen, "cannot listen on %s: %s", ep, zmq_strerror(errno));
        return -PSKV_ENET;
    }
    char last[300];
    size_t len = sizeof last;
    if (zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, last, &len) != 0) {
        snprintf(why, whylen, "cannot read bound endpoint: %s", zmq_strerror(errno));
        return -PSKV_ENET;
    }
    const char *colon = strrchr(last, ':');
    return colon ? atoi(colon + 1) : port;
}

int net_connect(void *sock, const char *host, int port)
{
    char ep[300];
    if (strchr(host, ':'))
        snprintf(ep, sizeof ep, "tcp://[%s]:%d", host, port);
    else
        snprintf(ep, sizeof ep, "tcp://%s:%d", host, port);
    return zmq_connect(sock, ep) == 0 ? 0 : -PSKV_ENET;
}

int net_curve_server(void *sock, const keyset *ks)
{
    int one = 1;
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, ks->sec, KEY_Z85) != 0 ||
        zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, "pskv", 4) != 0)
        return -PSKV_ENET;
    return 0;
}

int net_curve_client(void *sock, const keyset *ks, const char *server_pub)
{
    if (!key_z85_valid(server_pub) ||
        zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, server_pub, KEY_Z85) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, ks->pub, KEY_Z85) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, ks->sec, KEY_Z85) != 0)
        return -PSKV_ENET;
    return 0;
}
