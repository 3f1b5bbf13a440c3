/* The scheduler's sends on its ROUTER socket. See sched_net.h. */
#include "sched_net.h"

#include <errno.h>
#include <string.h>

#include "log.h"
#include "pskv_errors.h"
#include "view.h"

static void *sock;
secure sched_sec;

void sched_net_use(void *router) { sock = router; }

void sched_meta(Pskv__Meta *m, Pskv__MsgType type)
{
    wire_meta_init(m, type);
    m->has_job_id = 1;
    m->job_id = memb.job_id;
    m->has_epoch = 1;
    m->epoch = view_epoch();
    m->has_sender = 1;
    m->sender = 0;
}

int sched_send(memb_node *n, const Pskv__Meta *m)
{
    zmq_msg_t rid;
    zmq_msg_init_size(&rid, n->ridlen);
    memcpy(zmq_msg_data(&rid), n->rid, n->ridlen);
    int rc = wire_send(sock, &rid, m, NULL, NULL);
    zmq_msg_close(&rid);
    if (rc < 0)
        LOG_W("cannot send %s to node %u (%s:%d): %s", wire_type_name((int)m->type), n->id,
              n->host, n->port, zmq_strerror(errno));
    return rc;
}

int sched_reply(zmq_msg_t *rid, const Pskv__Meta *m)
{
    return wire_send(sock, rid, m, NULL, NULL);
}

void sched_asker_of(sched_asker *a, const wire_msg *msg)
{
    size_t n = zmq_msg_size((zmq_msg_t *)&msg->rid);
    a->ridlen = n < sizeof a->rid ? n : sizeof a->rid;
    memcpy(a->rid, zmq_msg_data((zmq_msg_t *)&msg->rid), a->ridlen);
    a->request_id = msg->meta->request_id;
}

int sched_answer(const sched_asker *a, Pskv__Meta *m)
{
    zmq_msg_t rid;
    if (zmq_msg_init_size(&rid, a->ridlen) != 0)
        return -PSKV_ENET;
    memcpy(zmq_msg_data(&rid), a->rid, a->ridlen);
    m->has_request_id = 1;
    m->request_id = a->request_id;
    int rc = sched_reply(&rid, m);
    zmq_msg_close(&rid);
    return rc;
}

void sched_refuse(wire_msg *msg, int code, const char *reason)
{
    LOG_W("refused %s from %s: %s", wire_type_name((int)msg->meta->type), msg->peer, reason);
    wire_send_error(sock, &msg->rid, msg->meta, memb.job_id, 0, code, reason, 0);
}
