#include "table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fquant.h"
#include "half.h"
#include "nspace.h"
#include "pskv_errors.h"
#include "ring.h"
#include "update/upd_plugin.h"
#include "wire.h"
#include "consist/model.h"

struct table_set {
    table **t;
    size_t n, cap;
};

table_set *tables_new(void) { return calloc(1, sizeof(table_set)); }

static void table_free(table *t)
{
    shard_destroy(&t->sh);
    upd_plugin_destroy(&t->plug);
    keycache_destroy(&t->kc);
    free(t->opts);
    free(t->closed);
    free(t);
}

void tables_destroy(table_set **ts_p)
{
    if (!ts_p || !*ts_p)
        return;
    table_set *ts = *ts_p;
    for (size_t i = 0; i < ts->n; i++)
        table_free(ts->t[i]);
    free(ts->t);
    free(ts);
    *ts_p = NULL;
}

table *tables_find(table_set *ts, uint64_t id)
{
    for (size_t i = 0; i < ts->n; i++)
        if (ts->t[i]->id == id)
            return ts->t[i];
    return NULL;
}

size_t tables_count(const table_set *ts) { return ts->n; }

void tables_remove(table_set *ts, table *t)
{
    for (size_t i = 0; i < ts->n; i++)
        if (ts->t[i] == t) {
            memmove(&ts->t[i], &ts->t[i + 1], (ts->n - i - 1) * sizeof *ts->t);
            ts->n--;
            table_free(t);
            return;
        }
}

table *tables_at(table_set *ts, size_t i) { return i < ts->n ? ts->t[i] : NULL; }

static const char *str_or(const char *s, const char *def) { return s && *s ? s : def; }

/* admit_after and evict_after: sparse tables only, and not bsp: a close applies
 * combined rows (of possibly several clocks) down the chain, which no head
 * filters and whose rows' last clocks it does not carry. */
static int parse_admission(table *t, const Pskv__TableOptions *o, char *why, size_t whylen)
{
    t->admit_after = o->admit_after;
    t->evict_after = o->evict_after;
    if (t->dense && (t->admit_after || t->evict_after)) {
        snprintf(why, whylen, "option '%s' applies to sparse tables only (table '%s' is dense)",
                 t->admit_after ? "admit_after" : "evict_after", t->name);
        return -PSKV_EINVAL;
    }
    if (t->admit_after > 255) {
        snprintf(why, whylen, "option 'admit_after' must be 0..255 (got %u)", t->admit_after);
        return -PSKV_EINVAL;
    }
    if ((t->admit_after > 1 || t->evict_after) && cons_of(t)->closes) {
        snprintf(why, whylen, "option '%s' needs consistency async or ssp:TAU (table '%s' is "
                 "bsp)", t->admit_after > 1 ? "admit_after" : "evict_after", t->name);
        return -PSKV_EINVAL;
    }
    return 0;
}

/* Option 'wire': fp32 (absent), fp16 or bf16; a 16-bit wire does not go with a lossy
 * filter (int8, sign, significant), which already decides what a value is sent as. */
static int parse_wire(table *t, const Pskv__TableOptions *o, char *why, size_t whylen)
{
    const char *name = str_or(o->wire, "fp32");
    t->wire = half_parse(name);
    if (t->wire < 0) {
        snprintf(why, whylen, "option 'wire': '%s' is not supported by this server (fp32, fp16, "
                 "bf16)", name);
        return -PSKV_EINVAL;
    }
    if (t->wire != HALF_FP32 && (t->filters.quant || t->filters.significant)) {
        snprintf(why, whylen, "option 'wire' %s does not go with the lossy filter '%s' (it "
                 "sends its own encoding of the values): use fp32, or a lossless filter",
                 name, t->filters.quant ? fquant_name(t->filters.quant)
                                        : "significant");
        return -PSKV_EINVAL;
    }
    return 0;
}

/* Fills t from o with defaults; returns 0 or -PSKV_EINVAL naming the option. */
static int parse_options(table *t, const Pskv__TableOptions *o, char *why, size_t whylen)
{
    const char *name = str_or(o->name, "");
    if (!*name || strlen(name) >= sizeof t->name) {
        snprintf(why, whylen, "option 'name' must be 1..%zu characters", sizeof t->name - 1);
        return -PSKV_EINVAL;
    }
    snprintf(t->name, sizeof t->name, "%s", name);
    int rc = nspace_name_check(name, why, whylen);
    if (rc < 0)
        return rc;
    nspace_of(name, t->ns);
    t->quota = o->has_quota_bytes ? o->quota_bytes : 0;
    if (o->kind != PSKV__TABLE_KIND__DENSE && o->kind != PSKV__TABLE_KIND__SPARSE) {
        snprintf(why, whylen, "option 'kind' must be dense or sparse");
        return -PSKV_EINVAL;
    }
    t->dense = o->kind == PSKV__TABLE_KIND__DENSE;
    t->size = o->size;
    if (t->dense && (t->size == 0 || t->size > (1ULL << 40))) {
        snprintf(why, whylen, "option 'size' of a dense table must be 1..2^40 (got %llu)",
                 (unsigned long long)t->size);
        return -PSKV_EINVAL;
    }
    if (!t->dense)
        t->size = 0;
    t->width = o->width;
    if (t->width == 0 || t->width > 1u << 20) {
        snprintf(why, whylen, "option 'width' must be 1..2^20 (got %u)", o->width);
        return -PSKV_EINVAL;
    }
    const char *upd = str_or(o->updater, "sgd");
    int k = upd_plugin_is_spec(upd) ? (int)UPD_PLUGIN : upd_parse(upd);
    if (k < 0) {
        snprintf(why, whylen, "option 'updater': unknown '%s' (sum, sgd, adagrad, adam, adamw, "
                 "ftrl, plugin:PATH[:ARGS])", upd);
        return -PSKV_EINVAL;
    }
    if (strlen(upd) >= sizeof t->updater) {
        snprintf(why, whylen, "option 'updater': longer than %zu characters",
                 sizeof t->updater - 1);
        return -PSKV_EINVAL;
    }
    snprintf(t->updater, sizeof t->updater, "%s", upd);
    upd_opts *u = &t->upd;
    u->kind = (upd_kind)k;
    u->lr = o->has_lr ? o->lr : 0.01f;
    u->momentum = o->momentum;
    u->l2 = o->l2;
    u->eps = o->has_eps ? o->eps : 1e-8f;
    u->l1 = o->l1;
    const upd_ops *row = upd_ops_of(u->kind);
    int betas = row->rules.takes & UPD_TAKES_BETAS, beta = row->rules.takes & UPD_TAKES_BETA;
    /* parameters an updater does not use are kept at 0, so that reopens compare alike */
    u->beta1 = betas ? (o->has_beta1 ? o->beta1 : 0.9f) : 0.0f;
    u->beta2 = betas ? (o->has_beta2 ? o->beta2 : 0.999f) : 0.0f;
    u->weight_decay = o->weight_decay;
    u->beta = beta ? (o->has_beta ? o->beta : 1.0f) : 0.0f;
    rc = upd_check(u, why, whylen);
    if (rc < 0)
        return rc;
    const char *init = str_or(o->init, "zero");
    int ik = shard_init_parse(init);
    if (ik < 0) {
        snprintf(why, whylen, "option 'init': unknown '%s' (zero, const, uniform, normal)", init);
        return -PSKV_EINVAL;
    }
    snprintf(t->init, sizeof t->init, "%s", init);
    t->init_rule.kind = (init_kind)ik;
    t->init_rule.scale = o->init_scale;
    if (!isfinite(o->init_scale)) {
        snprintf(why, whylen, "option 'init_scale' must be finite");
        return -PSKV_EINVAL;
    }
    t->init_rule.seed = ring_mix64(o->seed ^ wire_table_id(name));
    if (row->closed_form && (t->init_rule.kind != INIT_ZERO)) {
        snprintf(why, whylen, "option 'init': %s computes its weights from its state, so init "
                 "must be zero (got '%s')", row->name, init);
        return -PSKV_EINVAL;
    }
    const char *cons = str_or(o->consistency, "async");
    if ((rc = cons_parse(cons, &t->model, &t->tau, why, whylen)) < 0)
        return rc;
    t->backup = o->backup;
    t->mean_pushed = o->has_bsp_mean_pushed && o->bsp_mean_pushed;
    if (t->backup && !cons_of(t)->closes) {
        snprintf(why, whylen, "option 'backup' applies to bsp tables only");
        return -PSKV_EINVAL;
    }
    if (t->model == CONS_ASYNC)
        cons = "async"; /* ssp:inf is async: one name, so reopens compare alike */
    if (strlen(cons) >= sizeof t->consistency) {
        snprintf(why, whylen, "option 'consistency': '%s' is too long", cons);
        return -PSKV_EINVAL;
    }
    snprintf(t->consistency, sizeof t->consistency, "%s", cons);
    if ((rc = filter_parse(&t->filters, o->filters, o->n_filters, why, whylen)) < 0 ||
        (rc = parse_admission(t, o, why, whylen)) < 0 ||
        (rc = parse_wire(t, o, why, whylen)) < 0)
        return rc;
    filter_table ft = {.name = t->name, .dense = t->dense, .updater = t->updater,
                       .l1 = t->upd.l1, .momentum = t->upd.momentum,
                       .bsp = cons_of(t)->closes, .admit_after = t->admit_after,
                       .evict_after = t->evict_after};
    return filter_check_table(&t->filters, &ft, why, whylen);
}

/* Names the first option in which a and b differ (and who opened a first, when known),
 * or returns 0. */
static int differs(const table *a, const table *b, const Pskv__TableOptions *o, char *why,
                   size_t whylen)
{
#define DIFF(field, fmt, va, vb)                                                             \
    do {                                                                                     \
        snprintf(why, whylen, "table '%s' exists with option '" field "' = " fmt             \
                 ", open asked " fmt "%s%s%s", a->name, va, vb,                              \
                 *a->opened_by ? " (first opened by " : "", a->opened_by,                    \
                 *a->opened_by ? ")" : "");                                                  \
        return 1;                                                                            \
    } while (0)
    if (a->dense != b->dense)
        DIFF("kind", "%s", a->dense ? "dense" : "sparse", b->dense ? "dense" : "sparse");
    if (a->size != b->size)
        DIFF("size", "%llu", (unsigned long long)a->size, (unsigned long long)b->size);
    if (a->width != b->width)
        DIFF("width", "%u", a->width, b->width);
    if (strcmp(a->updater, b->updater))
        DIFF("updater", "%s", a->updater, b->updater);
    if (a->upd.lr != b->upd.lr)
        DIFF("lr", "%g", (double)a->upd.lr, (double)b->upd.lr);
    if (a->upd.momentum != b->upd.momentum)
        DIFF("momentum", "%g", (double)a->upd.momentum, (double)b->upd.momentum);
    if (a->upd.l2 != b->upd.l2)
        DIFF("l2", "%g", (double)a->upd.l2, (double)b->upd.l2);
    if (a->upd.eps != b->upd.eps)
        DIFF("eps", "%g", (double)a->upd.eps, (double)b->upd.eps);
    if (a->upd.l1 != b->upd.l1)
        DIFF("l1", "%g", (double)a->upd.l1, (double)b->upd.l1);
    if (a->upd.beta1 != b->upd.beta1)
        DIFF("beta1", "%g", (double)a->upd.beta1, (double)b->upd.beta1);
    if (a->upd.beta2 != b->upd.beta2)
        DIFF("beta2", "%g", (double)a->upd.beta2, (double)b->upd.beta2);
    if (a->upd.weight_decay != b->upd.weight_decay)
        DIFF("weight_decay", "%g", (double)a->upd.weight_decay, (double)b->upd.weight_decay);
    if (a->upd.beta != b->upd.beta)
        DIFF("beta", "%g", (double)a->upd.beta, (double)b->upd.beta);
    if (strcmp(a->init, b->init))
        DIFF("init", "%s", a->init, b->init);
    if (a->init_rule.scale != b->init_rule.scale)
        DIFF("init_scale", "%g", (double)a->init_rule.scale, (double)b->init_rule.scale);
    if (a->init_rule.seed != b->init_rule.seed)
        DIFF("seed", "%s", "(first open's)", o->has_seed ? "another" : "the default");
    if (strcmp(a->consistency, b->consistency))
        DIFF("consistency", "%s", a->consistency, b->consistency);
    if (a->backup != b->backup)
        DIFF("backup", "%u", a->backup, b->backup);
    if (a->mean_pushed != b->mean_pushed)
        DIFF("bsp_mean_pushed", "%d", a->mean_pushed, b->mean_pushed);
    if (a->admit_after != b->admit_after)
        DIFF("admit_after", "%u", a->admit_after, b->admit_after);
    if (a->evict_after != b->evict_after)
        DIFF("evict_after", "%u", a->evict_after, b->evict_after);
    char fa[300], fb[300];
    filter_format(&a->filters, fa, sizeof fa);
    filter_format(&b->filters, fb, sizeof fb);
    if (strcmp(fa, fb))
        DIFF("filters", "%s", fa, fb);
    if (a->wire != b->wire)
        DIFF("wire", "%s", half_name(a->wire), half_name(b->wire));
#undef DIFF
    return 0;
}

int tables_open(table_set *ts, uint64_t id, const Pskv__TableOptions *o, uint64_t begin,
                uint64_t end, char *why, size_t whylen)
{
    table want;
    memset(&want, 0, sizeof want);
    int rc = parse_options(&want, o, why, whylen);
    if (rc < 0)
        return rc;
    if (wire_table_id(want.name) != id) {
        snprintf(why, whylen, "table id does not match name '%s'", want.name);
        return -PSKV_EINVAL;
    }
    if ((rc = nspace_open_check(ts, o, why, whylen)) < 0)
        return rc;
    table *have = tables_find(ts, id);
    if (have) {
        if (strcmp(have->name, want.name)) {
            snprintf(why, whylen, "table name '%s' collides with '%s'", want.name, have->name);
            return -PSKV_EMISMATCH;
        }
        return differs(have, &want, o, why, whylen) ? -PSKV_EMISMATCH : 0;
    }
    if (ts->n == ts->cap) {
        size_t cap = ts->cap ? ts->cap * 2 : 8;
        table **grown = realloc(ts->t, cap * sizeof *grown);
        if (!grown)
            goto oom;
        ts->t = grown;
        ts->cap = cap;
    }
    table *t = malloc(sizeof *t);
    if (!t)
        goto oom;
    *t = want;
    t->id = id;
    if (t->upd.kind == UPD_PLUGIN) {
        rc = upd_plugin_load(t->updater, t->name, t->width, &t->plug, why, whylen);
        if (rc < 0) {
            free(t);
            return rc;
        }
        t->upd.plug = t->plug;
    }
    uint64_t first = 0, count = 0;
    if (t->dense)
        ring_dense_span(begin, end, t->size, &first, &count);
    t->sh = shard_new(t->dense, first, count, begin, end, t->width, &t->upd, &t->init_rule);
    if (t->sh && !t->dense && shard_admission(t->sh, t->admit_after, t->evict_after) < 0)
        shard_destroy(&t->sh);
    if (!t->sh) {
        upd_plugin_destroy(&t->plug);
        free(t);
        goto oom;
    }
    t->opts_len = pskv__table_options__get_packed_size(o);
    t->opts = malloc(t->opts_len ? t->opts_len : 1);
    if (!t->opts) {
        shard_destroy(&t->sh);
        upd_plugin_destroy(&t->plug);
        free(t);
        goto oom;
    }
    pskv__table_options__pack(o, t->opts);
    /* keycache: created lazily (sfilter.c), so that a failure here frees nothing */
    t->kc = NULL;
    ts->t[ts->n++] = t;
    return 0;
oom:
    snprintf(why, whylen, "out of memory creating table '%s'", want.name);
    return -PSKV_ENOMEM;
}

int table_set_lr(table *t, double lr, char *why, size_t whylen)
{
    if (!isfinite(lr) || lr <= 0 || lr > 1e30) {
        snprintf(why, whylen, "table '%s': lr %g refused: it must be a finite number > 0",
                 t->name, lr);
        return -PSKV_EINVAL;
    }
    if (t->upd.kind == UPD_SUM) {
        snprintf(why, whylen, "table '%s': updater sum takes no lr (lr %g refused)", t->name, lr);
        return -PSKV_EINVAL;
    }
    upd_opts u = t->upd; /* its rules (ftrl's alpha > 0, ...) on the new lr */
    u.lr = (float)lr;
    int rc = upd_check(&u, why, whylen);
    if (rc < 0)
        return rc;
    shard_set_lr(t->sh, (float)lr);
    return 0;
}

int64_t *table_closed(table *t, uint32_t nparts)
{
    if (nparts > t->nclosed) {
        int64_t *g = realloc(t->closed, (size_t)nparts * sizeof *g);
        if (!g)
            return NULL;
        memset(g + t->nclosed, 0, (size_t)(nparts - t->nclosed) * sizeof *g);
        t->closed = g;
        t->nclosed = nparts;
    }
    return t->closed;
}
