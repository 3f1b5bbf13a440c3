/* One node's security: keys, CURVE options, ZAP, protected mode, --insecure. */
#include "secure.h"

#include <string.h>
#include <zmq.h>

#include "log.h"
#include "net.h"
#include "pskv_errors.h"
#include "timeutil.h"
#include "zap.h"

#define INSECURE_WARN_MS 60000

int secure_init(secure *s, const char *who, const char *keys, int insecure, key_role role,
                int need_allow, char *why, size_t whylen)
{
    memset(s, 0, sizeof *s);
    s->who = who;
    int keyed = keys && *keys;
    if (keyed && insecure) {
        log_why(why, whylen, "--keys and --insecure exclude each other");
        return -PSKV_EINVAL;
    }
    s->insecure = insecure;
    if (!keyed) {
        if (insecure) {
            LOG_W("running with --insecure: no authentication, no encryption; anyone who can "
                  "reach this node's addresses can join the job, push into its tables and "
                  "read its weights");
            s->next_warn_ms = tu_now_ms() + INSECURE_WARN_MS;
        }
        return 0;
    }
    int rc = keys_load(&s->ks, keys, 0, why, whylen);
    if (rc < 0)
        return rc;
    if (s->ks.role != role) {
        log_why(why, whylen, "--keys %s holds a %s key; %s needs a %s key", keys,
                key_role_name(s->ks.role), who, key_role_name(role));
        keys_clear(&s->ks);
        return -PSKV_EINVAL;
    }
    if (need_allow) {
        char path[512];
        snprintf(path, sizeof path, "%s/authorized", keys);
        rc = key_allow_load(&s->ks.allow, path, why, whylen);
        if (rc < 0) {
            keys_clear(&s->ks);
            return rc;
        }
    }
    s->keyed = 1;
    return 0;
}

int secure_check_exposure(const secure *s, const char *bind, const char *advertised, char *why,
                          size_t whylen)
{
    if (s->keyed || s->insecure)
        return 0;
    const char *what = NULL, *addr = NULL;
    if (bind && *bind && (!strcmp(bind, "*") || !net_is_loopback(bind)))
        what = "listen on", addr = !strcmp(bind, "*") ? "every interface" : bind;
    else if (advertised && *advertised && !net_is_loopback(advertised))
        what = "advertise", addr = advertised;
    if (!what)
        return 0;
    log_why(why, whylen,
            "%s: refusing to %s %s without keys: anyone who can reach it could join the job, "
            "push into its tables and read its weights. Give it --keys DIR (make a set with "
            "`pskvctl keys init DIR --servers S --workers W`), or pass --insecure to run "
            "without authentication on a network you trust",
            s->who, what, addr);
    return -PSKV_EINVAL;
}

const char *secure_bind_addr(const secure *s, const char *bind)
{
    if (bind && *bind)
        return bind;
    return s->keyed || s->insecure ? "*" : "127.0.0.1";
}

int secure_listen(secure *s, void *ctx, void *sock, unsigned roles, char *why, size_t whylen)
{
    if (!s->keyed)
        return 0;
    if (!s->z) {
        key_allow allow = {0};
        for (size_t i = 0; i < s->ks.allow.n; i++)
            if (key_allow_add_bound(&allow, s->ks.allow.e[i].role, s->ks.allow.e[i].pub,
                                    s->ks.allow.e[i].bind) < 0) {
                key_allow_free(&allow);
                log_why(why, whylen, "out of memory");
                return -PSKV_ENOMEM;
            }
        s->z = zap_start(ctx, &allow, roles, why, whylen);
        key_allow_free(&allow);
        if (!s->z)
            return -PSKV_ENET;
    }
    if (net_curve_server(sock, &s->ks) < 0) {
        log_why(why, whylen, "cannot turn CURVE on: %s", zmq_strerror(zmq_errno()));
        return -PSKV_ENET;
    }
    if (zap_watch(s->z, sock) < 0)
        LOG_W("cannot watch the listening socket's handshakes: failed ones go uncounted");
    return 0;
}

void *secure_forward_closes(secure *s, void *sock)
{
    return s && s->keyed ? zap_forward_closes(s->z, sock) : NULL;
}

int secure_dial(const secure *s, void *sock, const char *server_pub)
{
    if (!s || !s->keyed)
        return 0;
    const char *pub = server_pub ? server_pub : s->ks.sched_pub;
    if (!key_z85_valid(pub))
        return -PSKV_EINVAL;
    return net_curve_client(sock, &s->ks, pub) < 0 ? -PSKV_ENET : 0;
}

void secure_allow_view(secure *s, const Pskv__View *v)
{
    if (!s->keyed || !s->z || !v)
        return;
    key_allow view = {0};
    for (size_t i = 0; i < v->n_nodes; i++) {
        const Pskv__Node *n = v->nodes[i];
        key_role r = n->role == PSKV__ROLE__SERVER   ? KEY_ROLE_SERVER
                     : n->role == PSKV__ROLE__WORKER ? KEY_ROLE_WORKER
                     : n->role == PSKV__ROLE__EVALUATOR ? KEY_ROLE_EVALUATOR
                                                        : KEY_ROLE_NONE;
        if (r != KEY_ROLE_NONE && n->pubkey && key_z85_valid(n->pubkey) &&
            key_allow_add(&view, r, n->pubkey) < 0)
            break;
    }
    zap_allow_view(s->z, &view);
    key_allow_free(&view);
}

const char *secure_pub(const secure *s)
{
    return s && s->keyed ? s->ks.pub : NULL;
}

void secure_tick(secure *s)
{
    if (!s->insecure || s->keyed)
        return;
    int64_t now = tu_now_ms();
    if (now < s->next_warn_ms)
        return;
    s->next_warn_ms = now + INSECURE_WARN_MS;
    LOG_W("still running with --insecure: no authentication, no encryption");
}

void secure_reload(secure *s)
{
    if (!s->keyed || !s->z)
        return;
    char path[512], why[512];
    snprintf(path, sizeof path, "%s/authorized", s->ks.dir);
    key_allow fresh = {0};
    if (key_allow_load(&fresh, path, why, sizeof why) < 0) {
        LOG_E("SIGHUP: keeping the old allowlist: %s", why);
        return;
    }
    size_t n = fresh.n;
    zap_reload(s->z, &fresh);
    LOG_I("SIGHUP: allowlist %s re-read: %zu keys", path, n);
}

void secure_close(secure *s)
{
    if (!s)
        return;
    zap_stop(&s->z);
    keys_clear(&s->ks);
}
