/* Held requests and their answers (held.h). */
#define _GNU_SOURCE
#include "held.h"

#include <errno.h>
#include <string.h>

#include "log.h"

void held_take(held *h, wire_msg *msg, table *t, int rank)
{
    memset(h, 0, sizeof *h);
    h->ridlen = msg->has_rid ? zmq_msg_size(&msg->rid) : 0;
    if (h->ridlen > sizeof h->rid)
        h->ridlen = sizeof h->rid;
    if (h->ridlen)
        memcpy(h->rid, zmq_msg_data(&msg->rid), h->ridlen);
    h->request_id = msg->meta->request_id;
    h->origin_id = msg->meta->has_origin_id ? msg->meta->origin_id : msg->meta->request_id;
    h->floor = msg->meta->has_floor ? msg->meta->floor : 0;
    h->table_id = msg->meta->table_id;
    h->sender = msg->meta->sender;
    h->clock = msg->meta->has_clock ? msg->meta->clock : 0;
    h->epoch = msg->meta->has_epoch ? msg->meta->epoch : 0;
    h->rank = rank;
    h->t = t;
    h->first = msg->meta->first_key;
    h->n = msg->nkeys;
    h->at_head = msg->meta->type == PSKV__MSG_TYPE__PUSH;
    h->ack_follows = h->at_head && msg->meta->has_pull_after && msg->meta->pull_after;
    /* a pull's region, or a combined call's: its gradient's, which the values
     * after the push overwrite (read whole before: applied, copied down chains or
     * into a bsp accumulator) */
    if ((msg->meta->type == PSKV__MSG_TYPE__PULL || (h->at_head && msg->meta->has_pull_after)) &&
        msg->meta->has_shm_len) {
        h->shm_gen = msg->meta->shm_gen;
        h->shm_off = msg->meta->shm_off;
        h->shm_len = msg->meta->shm_len;
    }
}

void held_meta(const held_out *o, Pskv__Meta *m, Pskv__MsgType type, const held *h,
               int64_t clock)
{
    member_meta(o->mb, m, type);
    m->has_request_id = m->has_table_id = m->has_clock = 1;
    m->request_id = h->request_id;
    m->table_id = h->table_id;
    m->clock = clock;
    if (h->ack_follows && type == PSKV__MSG_TYPE__PULL_REPLY)
        m->has_pull_after = m->pull_after = 1;
}

void held_send(const held_out *o, const held *h, Pskv__Meta *m, zmq_msg_t *vals)
{
    zmq_msg_t rid;
    zmq_msg_init_size(&rid, h->ridlen);
    memcpy(zmq_msg_data(&rid), h->rid, h->ridlen);
    if (wire_send(o->router, &rid, m, NULL, vals) < 0)
        LOG_W("cannot answer node %u: %s", h->sender, zmq_strerror(errno));
    zmq_msg_close(&rid);
}

void held_answer(const held_out *o, const held *h, int code, const char *why, int64_t clock,
                 uint64_t refused)
{
    Pskv__Meta m;
    held_meta(o, &m, code ? PSKV__MSG_TYPE__ERROR : PSKV__MSG_TYPE__PUSH_ACK, h, clock);
    if (code) {
        m.has_error_code = 1;
        m.error_code = code;
        m.error = (char *)why;
        m.has_refused = refused > 0;
        m.refused = refused;
    }
    held_send(o, h, &m, NULL);
}

void held_answer_push(const held_out *o, const held *h, int code, const char *why,
                      int64_t clock)
{
    held_answer(o, h, code, why, clock, code ? vclock_refusal(o->clocks, h->sender, code) : 0);
}

void held_refuse(const held_out *o, wire_msg *msg, int code, const char *why, int64_t clock)
{
    held h;
    held_take(&h, msg, NULL, -1);
    LOG_W("refused %s from node %u at %s: %s", wire_type_name((int)msg->meta->type),
          msg->meta->sender, msg->peer, why);
    held_answer_push(o, &h, code, why, clock);
}
