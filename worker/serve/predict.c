/* predict: scores of the built-in models (contract in predict.h). */
#define _GNU_SOURCE
#include "predict.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pskv_errors.h"
#include "train/model.h"
#include "train/sparse_eval.h"

int predict_feature(const char *text, uint64_t *id, double *value)
{
    char *end;
    if (!text[0] || text[0] == '-' || text[0] == '+')
        return -1;
    errno = 0;
    unsigned long long k = strtoull(text, &end, 10);
    if (errno || end == text || *end != ':')
        return -1;
    const char *v = end + 1;
    double x = strtod(v, &end);
    if (end == v || *end || !isfinite(x))
        return -1;
    *id = k;
    *value = x;
    return 0;
}

static int check_rows(const sjson *rows, size_t max_rows, char *why, size_t whylen)
{
    if (!rows || rows->type != SJ_ARR) {
        snprintf(why, whylen, "rows: missing or not an array");
        return -PSKV_EINVAL;
    }
    if (rows->n == 0 || rows->n > max_rows) {
        snprintf(why, whylen, "rows: %zu rows (1 to %zu accepted)", rows->n, max_rows);
        return -PSKV_EINVAL;
    }
    return 0;
}

static int sparse(const snap *s, const sjson *rows, FILE *out, char *why, size_t whylen)
{
    float bias = 0;
    snap_find(s, SPARSE_BIAS_KEY, &bias);
    for (size_t r = 0; r < rows->n; r++) {
        const sjson *row = rows->kids[r];
        if (row->type != SJ_ARR) {
            snprintf(why, whylen, "rows[%zu]: not an array of \"id:value\" features", r);
            return -PSKV_EINVAL;
        }
        double z = bias;
        for (size_t j = 0; j < row->n; j++) {
            uint64_t id;
            double x;
            float w;
            if (row->kids[j]->type != SJ_STR || predict_feature(row->kids[j]->text, &id, &x) < 0) {
                snprintf(why, whylen, "rows[%zu][%zu]: not an \"id:value\" feature", r, j);
                return -PSKV_EINVAL;
            }
            if (snap_find(s, id, &w) == 0) /* a feature training never saw weighs 0 */
                z += w * x;
        }
        fprintf(out, "%s%.9g", r ? "," : "", sparse_sigmoid(z));
    }
    return 0;
}

/* Softmax of each of b rows of z (b x k), in place. */
static void softmax(float *z, size_t b, size_t k)
{
    for (size_t r = 0; r < b; r++) {
        float *row = z + r * k, m = row[0];
        double sum = 0;
        for (size_t j = 1; j < k; j++)
            m = row[j] > m ? row[j] : m;
        for (size_t j = 0; j < k; j++)
            sum += (row[j] = expf(row[j] - m));
        for (size_t j = 0; j < k; j++)
            row[j] = (float)(row[j] / sum);
    }
}

static int dense(const snap *s, const sjson *rows, FILE *out, char *why, size_t whylen)
{
    size_t b = rows->n, in = s->in, h = s->hidden, k = s->out;
    float *x = malloc(b * in * sizeof *x), *y = malloc(b * (h + k) * sizeof *y);
    int rc = x && y ? 0 : -PSKV_ENOMEM;
    for (size_t r = 0; r < b && rc == 0; r++) {
        const sjson *row = rows->kids[r];
        if (row->type != SJ_ARR || row->n != in) {
            snprintf(why, whylen, "rows[%zu]: %zu features, the model takes %zu", r,
                     row->type == SJ_ARR ? row->n : 0, in);
            rc = -PSKV_EINVAL;
        }
        for (size_t j = 0; j < in && rc == 0; j++) {
            const sjson *v = row->kids[j];
            if (v->type != SJ_NUM || !isfinite(v->num)) {
                snprintf(why, whylen, "rows[%zu][%zu]: not a finite number", r, j);
                rc = -PSKV_EINVAL;
            } else {
                x[r * in + j] = (float)v->num;
            }
        }
    }
    if (rc == 0) {
        float *logits = y + b * h;
        if (s->kind == SNAP_MLP) {
            model_dense_fwd(s->vals, (int)in, (int)h, x, (int)b, 1, y);
            model_dense_fwd(s->vals + in * h + h, (int)h, (int)k, y, (int)b, 0, logits);
        } else {
            model_dense_fwd(s->vals, (int)in, (int)k, x, (int)b, 0, logits);
        }
        softmax(logits, b, k);
        for (size_t r = 0; r < b; r++) {
            fputs(r ? ",[" : "[", out);
            for (size_t j = 0; j < k; j++)
                fprintf(out, "%s%.9g", j ? "," : "", logits[r * k + j]);
            fputc(']', out);
        }
    }
    free(x);
    free(y);
    return rc;
}

int predict_rows(const snap *s, const sjson *rows, size_t max_rows, FILE *out, char *why,
                 size_t whylen)
{
    int rc = check_rows(rows, max_rows, why, whylen);
    if (rc < 0)
        return rc;
    fputc('[', out);
    rc = s->kind == SNAP_SPARSE_LR ? sparse(s, rows, out, why, whylen)
                                   : dense(s, rows, out, why, whylen);
    fputc(']', out);
    return rc;
}
