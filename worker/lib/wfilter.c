/* wfilter: a table's filters on the frames a worker sends (contract in wfilter.h). */
#define _GNU_SOURCE
#include "wfilter.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fquant.h"
#include "fquantvec.h"
#include "grow.h"
#include "half.h"
#include "log.h"
#include "pskv_errors.h"
#include "timeutil.h"
#include "wire.h"
#include "wkkt.h"
#include "wshm.h"

int wfilter_open(pskv_worker *w, tbl *t, const char *list, float l1)
{
    char why[300];
    if (filter_parse_list(&t->fs, list, why, sizeof why) < 0)
        return wst_error(w, PSKV_EINVAL, "table '%s': %s", t->name, why);
    t->kc = NULL;
    t->kkt = NULL;
    if (t->fs.keycache_mb && !(t->kc = keycache_new((size_t)t->fs.keycache_mb << 20)))
        return wst_error(w, PSKV_ENOMEM, "table '%s': out of memory for the keycache", t->name);
    /* the servers refuse kkt where it is not exact (filter_check_table) */
    if (t->fs.kkt && !(t->kkt = wkkt_new(l1, t->fs.kkt_margin)))
        return wst_error(w, PSKV_ENOMEM, "table '%s': out of memory for the kkt filter", t->name);
    return 0;
}

void wfilter_close(tbl *t)
{
    keycache_destroy(&t->kc);
    wkkt_destroy(&t->kkt);
    free(t->resid);
    t->resid = NULL;
    free(t->qbuf);
    t->qbuf = NULL;
    t->qcap = 0;
}

/* The table offset of row k of part p (a run part's rows follow its runs). */
static uint64_t row_key(const req *r, const part *p, const uint64_t *keys, uint64_t k,
                        uint64_t *g, uint64_t *base)
{
    if (!p->nseg)
        return keys[k];
    while (k - *base >= r->segs[2 * *g + 1]) {
        *base += r->segs[2 * *g + 1];
        (*g)++;
    }
    return r->segs[2 * *g] + (k - *base);
}

/* The table offset of row k of part p and, in *len, how many rows from k on have
 * consecutive offsets (the rest of a run, or of a stretch of consecutive keys). */
static uint64_t run_at(const req *r, const part *p, const uint64_t *keys, uint64_t k,
                       uint64_t *g, uint64_t *base, uint64_t *len)
{
    uint64_t key = row_key(r, p, keys, k, g, base), j = 1;
    if (p->nseg) {
        *len = r->segs[2 * *g + 1] - (k - *base);
        return key;
    }
    while (k + j < p->n && keys[k + j] == key + j)
        j++;
    *len = j;
    return key;
}

/* x = v + res (res NULL: v + 0, as a re-send always did) */
static void add_into(float *x, const float *v, const float *res, uint64_t n)
{
    for (uint64_t i = fquantvec_add(x, v, res, n, 0); i < n; i++)
        x[i] = v[i] + (res ? res[i] : 0.0f);
}

/* res = x - q */
static void sub_into(float *res, const float *x, const float *q, uint64_t n)
{
    for (uint64_t i = fquantvec_add(res, x, q, n, 1); i < n; i++)
        res[i] = x[i] - q[i];
}

/* t's residual, allocated (zeroes) on first use; NULL (w's error set) when out of
 * memory. */
static float *resid_of(pskv_worker *w, tbl *t)
{
    if (!t->resid && !(t->resid = calloc(t->size * t->width, sizeof *t->resid)))
        wst_error(w, PSKV_ENOMEM, "table '%s': out of memory for the residual", t->name);
    return t->resid;
}

int wfilter_significant(pskv_worker *w, tbl *t, req *r, int pi, int resend,
                        const uint64_t *keys, const float *vals, Pskv__Meta *m, zmq_msg_t *kmsg,
                        zmq_msg_t *vmsg)
{
    if (!t->fs.significant || r->assign || r->raw || !t->dense)
        return 0;
    int64_t t0 = tu_now_ns();
    part *p = &r->parts[pi];
    size_t wd = t->width;
    float *x = (float *)(uintptr_t)vals; /* the library's copy (no lending here) */
    if (!resid_of(w, t))
        return -PSKV_ENOMEM;
    uint64_t *sk = malloc(p->n * sizeof *sk);
    float *sv = malloc(p->n * wd * sizeof *sv);
    if (!sk || !sv) {
        free(sk);
        free(sv);
        return wst_error(w, PSKV_ENOMEM, "out of memory filtering a push");
    }
    uint64_t g = p->seg0, base = 0, best = 0, bestkey = 0, nsel = 0;
    float bestmag = -1;
    for (uint64_t k = 0; k < p->n; k++) {
        uint64_t key = row_key(r, p, keys, k, &g, &base);
        float *res = t->resid + key * wd, *row = x + k * wd, mag = 0;
        for (size_t j = 0; j < wd; j++) { /* a re-send: the values are what went */
            row[j] += resend ? 0.0f : res[j];
            mag = fmaxf(mag, fabsf(row[j]));
        }
        if (mag > bestmag) {
            bestmag = mag;
            best = k;
            bestkey = key;
        }
        int keep = mag > t->fs.sig_thresh;
        if (!resend && keep) {
            memset(res, 0, wd * sizeof *res);
        } else if (!resend) { /* kept back: the residual has it, the part sends none */
            memcpy(res, row, wd * sizeof *res);
            memset(row, 0, wd * sizeof *row);
        }
        if (keep) {
            sk[nsel] = key;
            memcpy(sv + nsel * wd, row, wd * sizeof *sv);
            nsel++;
        }
    }
    if (!nsel) { /* no empty push: the largest row goes (its residual with it) */
        float *res = t->resid + bestkey * wd;
        sk[0] = bestkey;
        for (size_t j = 0; j < wd; j++) {
            sv[j] = x[best * wd + j] + (resend ? 0.0f : res[j]);
            x[best * wd + j] = sv[j];
            res[j] = 0;
        }
        nsel = 1;
    }
    m->has_first_key = m->has_span = 0;
    m->num_keys = nsel;
    int rc = wire_frame_lend(kmsg, sk, nsel * sizeof *sk, wire_frame_free, NULL);
    if (rc < 0) {
        free(sv);
    } else if ((rc = wire_frame_lend(vmsg, sv, nsel * wd * sizeof *sv, wire_frame_free, NULL)) < 0) {
        zmq_msg_close(kmsg);
    }
    t->fst.ns += tu_now_ns() - t0;
    return rc < 0 ? wst_error(w, PSKV_ENOMEM, "out of memory filtering a push") : 1;
}

/* Quantises part p's n values (vals, the library's copy) into enc, run by run of
 * consecutive rows through the table's scratch (x, then q); 0 or <0 (w's error set). */
static int quant_runs(pskv_worker *w, tbl *t, const req *r, const part *p, int resend,
                      const uint64_t *keys, float *vals, uint64_t n, uint8_t *enc)
{
    size_t wd = t->width;
    if (grow_array((void **)&t->qbuf, &t->qcap, 2 * n, sizeof *t->qbuf) < 0)
        return wst_error(w, PSKV_ENOMEM, "out of memory quantising a push");
    float *x = t->qbuf, *q = x + n;
    uint64_t g = p->seg0, base = 0, len;
    for (uint64_t k = 0; k < p->n; k += len) { /* error feedback: what the last push lost */
        const float *res = t->resid + run_at(r, p, keys, k, &g, &base, &len) * wd;
        add_into(x + k * wd, vals + k * wd, resend ? NULL : res, len * wd);
    }
    fquant_encode(t->fs.quant, x, n, enc, q);
    if (resend)
        return 0;
    g = p->seg0, base = 0;
    for (uint64_t k = 0; k < p->n; k += len) {
        float *res = t->resid + run_at(r, p, keys, k, &g, &base, &len) * wd;
        sub_into(res, x + k * wd, q + k * wd, len * wd);
    }
    /* the values become what was sent, so that a re-send sends it again */
    memcpy(vals, q, n * sizeof *q);
    return 0;
}

int wfilter_quant(pskv_worker *w, tbl *t, req *r, int pi, int resend, const uint64_t *keys,
                  const float *vals, Pskv__Meta *m, zmq_msg_t *out)
{
    if (!t->fs.quant || r->assign || r->raw || !t->dense)
        return 0;
    int64_t t0 = tu_now_ns();
    part *p = &r->parts[pi];
    uint64_t n = p->n * t->width, bytes = fquant_bytes(t->fs.quant, n);
    uint8_t *enc = resid_of(w, t) ? malloc(bytes ? bytes : 1) : NULL; /* becomes the frame */
    if (!enc)
        return t->resid ? wst_error(w, PSKV_ENOMEM, "out of memory quantising a push")
                        : -PSKV_ENOMEM;
    /* the part's values are the library's copy (quantising tables lend none) */
    float *v = (float *)(uintptr_t)vals;
    uint64_t g = p->seg0, base = 0, len = 0, first = p->n ? run_at(r, p, keys, 0, &g, &base, &len) : 0;
    int rc = 0;
    if (!resend && len == p->n) /* one run of rows: encoded in one pass over the memory */
        fquant_encode_feedback(t->fs.quant, v, t->resid + first * t->width, n, enc);
    else
        rc = quant_runs(w, t, r, p, resend, keys, v, n, enc);
    if (rc == 0 && wire_frame_lend(out, enc, bytes, wire_frame_free, NULL) < 0)
        rc = wst_error(w, PSKV_ENOMEM, "out of memory quantising a push");
    else if (rc < 0)
        free(enc);
    t->fst.ns += tu_now_ns() - t0;
    if (rc < 0)
        return rc;
    m->has_quant = 1;
    m->quant = t->fs.quant;
    return 1;
}

int wfilter_keys(pskv_worker *w, tbl *t, uint32_t node, Pskv__Meta *m, const uint64_t *keys,
                 uint64_t n, zmq_msg_t *out)
{
    if (!t->fs.n)
        return 0;
    int64_t t0 = tu_now_ns();
    int rc = 0;
    if (t->kc) {
        m->has_key_sig = 1;
        m->key_sig = keycache_sig(keys, n);
        if (keycache_has(t->kc, node, m->key_sig, n)) {
            m->has_keys_cached = m->keys_cached = 1;
            t->fst.sig_hits++;
            rc = 2;
        } else if (keycache_mark(t->kc, node, m->key_sig, n) < 0) {
            rc = wst_error(w, PSKV_ENOMEM, "table '%s': out of memory in the keycache", t->name);
        }
    }
    if (!rc && (rc = filter_pack(&t->fs, FILTER_ZKEYS, keys, n * sizeof *keys, m, out)) < 0)
        rc = wst_error(w, PSKV_ENOMEM, "out of memory packing keys");
    t->fst.ns += tu_now_ns() - t0;
    return rc;
}

int wfilter_vals(pskv_worker *w, tbl *t, Pskv__Meta *m, const float *vals, size_t len,
                 zmq_msg_t *out)
{
    if (!t->fs.codec)
        return 0;
    int64_t t0 = tu_now_ns();
    int rc = filter_pack(&t->fs, FILTER_ZVALS, vals, len, m, out);
    t->fst.ns += tu_now_ns() - t0;
    return rc < 0 ? wst_error(w, PSKV_ENOMEM, "out of memory packing values") : rc;
}

int wfilter_narrow(pskv_worker *w, tbl *t, const req *r, const float *vals, size_t len,
                   Pskv__Meta *m, zmq_msg_t *out)
{
    if (!t->wire || r->assign) /* an assign carries weights: fp32 */
        return 0;
    int64_t t0 = tu_now_ns();
    if (zmq_msg_init_size(out, len * sizeof(uint16_t)) < 0)
        return wst_error(w, PSKV_ENOMEM, "out of memory converting values to %s",
                         half_name(t->wire));
    half_pack_scaled(t->wire, zmq_msg_data(out), vals, len, r->scale);
    m->has_wire = 1;
    m->wire = (uint32_t)t->wire;
    m->has_loss_scale = r->scale != 1.0f;
    m->loss_scale = r->scale;
    t->fst.ns += tu_now_ns() - t0;
    return wfilter_repack(w, t, m, out);
}

int wfilter_repack(pskv_worker *w, tbl *t, Pskv__Meta *m, zmq_msg_t *frame)
{
    if (!t->fs.codec)
        return 1;
    zmq_msg_t packed;
    int rc = filter_pack(&t->fs, FILTER_ZVALS, zmq_msg_data(frame), zmq_msg_size(frame), m,
                         &packed);
    if (rc < 0) {
        zmq_msg_close(frame);
        return wst_error(w, PSKV_ENOMEM, "out of memory packing values");
    }
    if (rc) {
        zmq_msg_close(frame);
        *frame = packed;
    }
    return 1;
}

/* The key frame of part p into f: a run goes as first_key and span in m (no
 * frame); else the keys through wfilter_keys, lent from b as they are when no
 * filter took them. Returns 0 or <0 (nothing left open). */
static int encode_keys(pskv_worker *w, tbl *t, const req *r, part *p, Pskv__Meta *m,
                       const uint64_t *keys, vbuf *b, wframes *f)
{
    if (p->nseg) {
        uint64_t last = p->seg0 + p->nseg - 1;
        m->has_first_key = m->has_span = 1;
        m->first_key = r->segs[2 * p->seg0];
        m->span = r->segs[2 * last] + r->segs[2 * last + 1] - m->first_key;
        return 0;
    }
    /* the keys as a signature, packed, or as they are */
    int rc = wfilter_keys(w, t, w->srv[p->server].id, m, keys, p->n, &f->k);
    if (rc < 0)
        return rc;
    p->key_sig = m->key_sig;
    if (!rc) {
        if (vbuf_lend(&f->k, b, keys, p->n * sizeof(uint64_t)) < 0) /* b's reference dropped also on a failure */
            return wst_error(w, PSKV_ENOMEM, "out of memory sending to a server");
    }
    f->kp = rc == 2 ? NULL : &f->k;
    return 0;
}

/* The values of push part pi into f: into shared memory when its server can read
 * them there (wshm.h: no frame, m stamped), else through the value filters, lent
 * from b as they are when none took them. Returns 0 or <0 (nothing left open). */
static int encode_vals(pskv_worker *w, tbl *t, req *r, int pi, int resend, Pskv__Meta *m,
                       const uint64_t *keys, const float *vals, vbuf *b, wframes *f)
{
    part *p = &r->parts[pi];
    size_t row = t->width * sizeof(float);
    float *region = NULL;
    int borrowed = 0; /* the values already in a push buffer's region: no copy at all */
    if (wshm_usable(w, t, p->server, p->n * row) &&
        !(borrowed = wshm_borrow(w, p, &r->pbuf, vals, p->n * row)))
        region = wshm_take(w, p, p->n * row);
    if (borrowed || region) {
        if (borrowed)
            w->pbufs_in_place++;
        else
            memcpy(region, vals, p->n * row);
        wshm_meta(w, p, m);
        return 0;
    }
    /* fp16, bf16: converted, then packed (wfilter_narrow); int8, sign: quantised
     * (error feedback), then packed like any frame */
    int rc = wfilter_narrow(w, t, r, vals, p->n * t->width, m, &f->v);
    if (!rc && (rc = wfilter_quant(w, t, r, pi, resend, keys, vals, m, &f->v)) > 0)
        rc = wfilter_repack(w, t, m, &f->v);
    else if (!rc)
        rc = wfilter_vals(w, t, m, vals, p->n * row, &f->v);
    if (!rc) {
        rc = vbuf_lend(&f->v, b, vals, p->n * row) < 0
                 ? wst_error(w, PSKV_ENOMEM, "out of memory sending to a server")
                 : 1;
    }
    if (rc < 0)
        return rc;
    f->vp = &f->v;
    return 0;
}

int wfilter_encode(pskv_worker *w, req *r, int pi, int resend, Pskv__Meta *m,
                   const uint64_t *keys, const float *vals, vbuf *b, wframes *f)
{
    part *p = &r->parts[pi];
    tbl *t = &w->tables[r->table];
    int push = r->type == REQ_PUSH;
    f->kp = f->vp = NULL;
    /* significant: the rows that changed enough, as a keyed part; else the key
     * frame, then a push's values */
    int rc = push ? wfilter_significant(w, t, r, pi, resend, keys, vals, m, &f->k, &f->v) : 0;
    if (rc > 0) {
        f->kp = &f->k;
        f->vp = &f->v;
    } else if (rc == 0 && (rc = encode_keys(w, t, r, p, m, keys, b, f)) == 0 && push &&
               (rc = encode_vals(w, t, r, pi, resend, m, keys, vals, b, f)) < 0 && f->kp) {
        zmq_msg_close(f->kp);
    }
    if (rc < 0)
        return rc;
    uint64_t raw = (p->nseg ? 0 : p->n * sizeof(uint64_t)) +
                   (push ? p->n * t->width * sizeof(float) : 0);
    wfilter_sent(t, raw, f->kp, f->vp);
    return 0;
}

void wfilter_miss(tbl *t, uint32_t node, uint64_t sig)
{
    if (!t->kc)
        return;
    keycache_forget(t->kc, node, sig);
    t->fst.sig_misses++;
}

void wfilter_sent(tbl *t, uint64_t raw, const zmq_msg_t *keys, const zmq_msg_t *vals)
{
    t->fst.raw_out += raw;
    t->fst.wire_out += (keys ? zmq_msg_size((zmq_msg_t *)keys) : 0) +
                       (vals ? zmq_msg_size((zmq_msg_t *)vals) : 0);
}

void wfilter_received(tbl *t, const wire_msg *msg)
{
    if (!msg->nframes)
        return;
    t->fst.raw_in += msg->nvals * sizeof(float) + (msg->nframes > 2 ? msg->nkeys * 8 : 0);
    for (int i = 1; i < msg->nframes; i++)
        t->fst.wire_in += zmq_msg_size((zmq_msg_t *)&msg->frames[i]);
}

void wfilter_report(const tbl *t)
{
    const filter_stats *f = &t->fst;
    if ((!t->fs.n && !t->wire) || (!f->raw_out && !f->raw_in))
        return;
    char names[300], kkt[120] = "";
    filter_format(&t->fs, names, sizeof names);
    if (t->fs.kkt)
        snprintf(kkt, sizeof kkt, ", kkt skipped %llu of %llu rows pushed (%llu sent as zeros)",
                 (unsigned long long)f->kkt_skipped, (unsigned long long)f->kkt_rows,
                 (unsigned long long)f->kkt_zeroed);
    if (t->wire) /* "none wire fp16": the values' precision is a stage of its own */
        snprintf(names + strlen(names), sizeof names - strlen(names), " wire %s",
                 half_name(t->wire));
    LOG_I("table '%s' filters %s: sent %llu bytes (%llu before filters), received %llu (%llu "
          "before), %llu key lists as signatures, %llu misses%s, %.1f ms in filters", t->name,
          names, (unsigned long long)f->wire_out, (unsigned long long)f->raw_out,
          (unsigned long long)f->wire_in, (unsigned long long)f->raw_in,
          (unsigned long long)f->sig_hits, (unsigned long long)f->sig_misses, kkt,
          (double)f->ns / 1e6);
}

void wfilter_publish(pskv_worker *w, int now)
{
    int64_t t = tu_now_ms();
    if (!w->traffic_mu_ok || (!now && t - w->traffic_ms < WST_TRAFFIC_MS))
        return;
    w->traffic_ms = t;
    int n = w->ntables < WST_MAX_TRAFFIC ? w->ntables : WST_MAX_TRAFFIC;
    pthread_mutex_lock(&w->traffic_mu);
    for (int i = 0; i < n; i++) {
        memcpy(w->traffic[i].name, w->tables[i].name, sizeof w->traffic[i].name);
        w->traffic[i].fst = w->tables[i].fst;
    }
    w->ntraffic = n;
    pthread_mutex_unlock(&w->traffic_mu);
}

size_t wfilter_traffic(pskv_worker *w, Pskv__TableTraffic *tt, Pskv__TableTraffic **ptr,
                       char (*names)[128], size_t max)
{
    size_t n = 0;
    if (!w->traffic_mu_ok)
        return 0;
    pthread_mutex_lock(&w->traffic_mu);
    for (; n < (size_t)w->ntraffic && n < max; n++) {
        const filter_stats *f = &w->traffic[n].fst;
        memcpy(names[n], w->traffic[n].name, sizeof names[n]);
        pskv__table_traffic__init(&tt[n]);
        tt[n].name = names[n];
        tt[n].has_sent = tt[n].has_sent_raw = tt[n].has_received = tt[n].has_received_raw =
            tt[n].has_filter_ns = 1;
        tt[n].sent = f->wire_out;
        tt[n].sent_raw = f->raw_out;
        tt[n].received = f->wire_in;
        tt[n].received_raw = f->raw_in;
        tt[n].filter_ns = f->ns > 0 ? (uint64_t)f->ns : 0;
        ptr[n] = &tt[n];
    }
    pthread_mutex_unlock(&w->traffic_mu);
    return n;
}
