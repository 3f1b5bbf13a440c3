/* sjson: a small JSON reader (contract in sjson.h). Recursive descent over the
 * original text; strings are unescaped into a copy of it at the same offsets (an
 * unescaped string is never longer), so nodes point into that copy; nodes and
 * child arrays come from a bump arena of chunks, freed at once. */
#define _GNU_SOURCE
#include "sjson.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 65536

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    max_align_t data[];
} chunk;

struct sjson_doc {
    chunk *chunks;
    char *buf; /* the copy of the text */
};

typedef struct parser {
    const char *t;
    size_t len, i;
    sjson_doc *doc;
    char *why;
    size_t whylen;
    int failed;
} parser;

static void *arena(parser *p, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    chunk *c = p->doc->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > CHUNK ? n : CHUNK;
        c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->cap = cap;
        c->used = 0;
        c->next = p->doc->chunks;
        p->doc->chunks = c;
    }
    void *r = (char *)c->data + c->used;
    c->used += n;
    return r;
}

static sjson *bad(parser *p, const char *what)
{
    if (!p->failed)
        snprintf(p->why, p->whylen, "%s at byte %zu", what, p->i);
    p->failed = 1;
    return NULL;
}

static void skip_ws(parser *p)
{
    while (p->i < p->len && strchr(" \t\r\n", p->t[p->i]) && p->t[p->i])
        p->i++;
}

static sjson *node(parser *p, sjson_type type)
{
    sjson *n = arena(p, sizeof *n);
    if (!n)
        return bad(p, "out of memory");
    memset(n, 0, sizeof *n);
    n->type = type;
    return n;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A string at p->i (the opening quote), unescaped into the copy; returns its start. */
static const char *string(parser *p)
{
    char *out = p->doc->buf + p->i + 1, *start = out;
    for (p->i++; p->i < p->len; p->i++) {
        unsigned char c = (unsigned char)p->t[p->i];
        if (c == '"') {
            p->i++;
            *out = 0;
            return start;
        }
        if (c < 0x20)
            return bad(p, "control character in a string"), NULL;
        if (c != '\\') {
            *out++ = (char)c;
            continue;
        }
        if (++p->i >= p->len)
            break;
        const char *esc = strchr("\"\\/bfnrt", p->t[p->i]);
        if (esc && p->t[p->i]) {
            *out++ = "\"\\/\b\f\n\r\t"[esc - "\"\\/bfnrt"];
            continue;
        }
        if (p->t[p->i] != 'u' || p->i + 4 >= p->len)
            return bad(p, "bad escape in a string"), NULL;
        unsigned v = 0;
        for (int k = 1; k <= 4; k++) {
            int h = hexval(p->t[p->i + k]);
            if (h < 0)
                return bad(p, "bad \\u escape in a string"), NULL;
            v = v * 16 + (unsigned)h;
        }
        p->i += 4;
        if (v < 0x80) /* \u0000 ends the C string early: keys and names never need it */
            *out++ = (char)v;
        else if (v < 0x800) {
            *out++ = (char)(0xc0 | v >> 6);
            *out++ = (char)(0x80 | (v & 0x3f));
        } else { /* 3 bytes fit: the escape took 6 (surrogates stay as they are) */
            *out++ = (char)(0xe0 | v >> 12);
            *out++ = (char)(0x80 | ((v >> 6) & 0x3f));
            *out++ = (char)(0x80 | (v & 0x3f));
        }
    }
    return bad(p, "unterminated string"), NULL;
}

static sjson *value(parser *p, int depth);

/* An array or object at p->i; children are gathered in a temporary list, then
 * moved to the arena. */
static sjson *container(parser *p, int depth, int obj)
{
    sjson *n = node(p, obj ? SJ_OBJ : SJ_ARR);
    sjson **tmp = NULL;
    size_t cnt = 0, cap = 0;
    char close = obj ? '}' : ']';
    p->i++;
    skip_ws(p);
    if (p->i < p->len && p->t[p->i] == close) {
        p->i++;
        return n;
    }
    while (n && !p->failed) {
        const char *key = NULL;
        skip_ws(p);
        if (obj) {
            if (p->i >= p->len || p->t[p->i] != '"') {
                bad(p, "expected a member name");
                break;
            }
            if (!(key = string(p)))
                break;
            skip_ws(p);
            if (p->i >= p->len || p->t[p->i] != ':') {
                bad(p, "expected ':'");
                break;
            }
            p->i++;
        }
        sjson *kid = value(p, depth + 1);
        if (!kid)
            break;
        kid->key = key;
        if (cnt == cap) {
            cap = cap ? cap * 2 : 8;
            sjson **g = realloc(tmp, cap * sizeof *g);
            if (!g) {
                bad(p, "out of memory");
                break;
            }
            tmp = g;
        }
        tmp[cnt++] = kid;
        skip_ws(p);
        if (p->i < p->len && p->t[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->len && p->t[p->i] == close) {
            p->i++;
            if ((n->kids = arena(p, cnt * sizeof *tmp)))
                memcpy(n->kids, tmp, cnt * sizeof *tmp);
            else
                bad(p, "out of memory");
            n->n = cnt;
            break;
        }
        bad(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    free(tmp);
    return p->failed ? NULL : n;
}

static sjson *number(parser *p)
{
    size_t s = p->i;
    const char *ok = "-+.eE0123456789";
    while (p->i < p->len && p->t[p->i] && strchr(ok, p->t[p->i]))
        p->i++;
    char *lit = p->doc->buf + s;
    p->doc->buf[p->i] = 0; /* the copy's byte after the literal: the parse reads the original */
    char *end;
    errno = 0;
    double v = strtod(lit, &end);
    if (p->i == s || end != p->doc->buf + p->i || lit[0] == '+' || lit[0] == '.')
        return bad(p, "malformed number");
    sjson *n = node(p, SJ_NUM);
    if (n) {
        n->num = v;
        n->text = lit;
    }
    return n;
}

static sjson *literal(parser *p, const char *word, sjson_type type, double v)
{
    size_t wl = strlen(word);
    if (p->len - p->i < wl || memcmp(p->t + p->i, word, wl) != 0)
        return bad(p, "unexpected character");
    p->i += wl;
    sjson *n = node(p, type);
    if (n)
        n->num = v;
    return n;
}

static sjson *value(parser *p, int depth)
{
    if (depth > SJSON_MAX_DEPTH)
        return bad(p, "nested too deeply");
    skip_ws(p);
    if (p->i >= p->len)
        return bad(p, "unexpected end of text");
    char c = p->t[p->i];
    if (c == '{' || c == '[')
        return container(p, depth, c == '{');
    if (c == '"') {
        const char *s = string(p);
        sjson *n = s ? node(p, SJ_STR) : NULL;
        if (n)
            n->text = s;
        return n;
    }
    if (c == 't')
        return literal(p, "true", SJ_BOOL, 1);
    if (c == 'f')
        return literal(p, "false", SJ_BOOL, 0);
    if (c == 'n')
        return literal(p, "null", SJ_NULL, 0);
    return number(p);
}

sjson_doc *sjson_parse(const char *text, size_t len, const sjson **root, char *why,
                       size_t whylen)
{
    sjson_doc *doc = calloc(1, sizeof *doc);
    if (doc)
        doc->buf = malloc(len + 1);
    if (!doc || !doc->buf) {
        snprintf(why, whylen, "out of memory");
        sjson_free(&doc);
        return NULL;
    }
    memcpy(doc->buf, text, len);
    doc->buf[len] = 0;
    parser p = {text, len, 0, doc, why, whylen, 0};
    sjson *r = value(&p, 0);
    skip_ws(&p);
    if (r && p.i != len)
        r = bad(&p, "text after the value");
    if (!r) {
        sjson_free(&doc);
        return NULL;
    }
    *root = r;
    return doc;
}

void sjson_free(sjson_doc **doc_p)
{
    if (!doc_p || !*doc_p)
        return;
    for (chunk *c = (*doc_p)->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free((*doc_p)->buf);
    free(*doc_p);
    *doc_p = NULL;
}

const sjson *sjson_get(const sjson *o, const char *key)
{
    if (!o || o->type != SJ_OBJ)
        return NULL;
    for (size_t i = 0; i < o->n; i++)
        if (!strcmp(o->kids[i]->key, key))
            return o->kids[i];
    return NULL;
}

int sjson_u64(const sjson *v, uint64_t *out)
{
    if (!v || (v->type != SJ_NUM && v->type != SJ_STR) || !v->text[0] || v->text[0] == '-')
        return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v->text, &end, 10);
    if (*end || errno)
        return -1;
    *out = x;
    return 0;
}
