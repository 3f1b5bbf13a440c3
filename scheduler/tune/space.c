/* The search space (space.h). */
#define _GNU_SOURCE
#include "space.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pskv_errors.h"

static int number(const char *t, double *v)
{
    char *end;
    *v = strtod(t, &end);
    return end != t && *end == '\0' && isfinite(*v) ? 0 : -1;
}

static int bad(char *err, size_t len, int line, const char *fmt, const char *what)
{
    char msg[256];
    snprintf(msg, sizeof msg, fmt, what);
    snprintf(err, len, "line %d: %s", line, msg);
    return -PSKV_EINVAL;
}

/* One line's words: flag, kind and the rest; 0, or -PSKV_EINVAL with err set. */
static int parse_line(tune_space *s, char *line, int ln,
                      int (*known)(const char *, const char *, char *, size_t), char *err,
                      size_t errlen)
{
    char *save = NULL, *w[2 + SPACE_MAX_CHOICES + 1];
    int n = 0;
    for (char *t = strtok_r(line, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
        if (n == (int)(sizeof w / sizeof w[0]))
            return bad(err, errlen, ln, "more than %s choices", "32");
        w[n++] = t;
    }
    if (n == 0)
        return 0;
    if (n < 3)
        return bad(err, errlen, ln, "`%s`: expected --FLAG KIND VALUES...", w[0]);
    if (strncmp(w[0], "--", 2) || !w[0][2] || strlen(w[0]) >= sizeof s->p[0].flag + 2)
        return bad(err, errlen, ln, "`%s` is not a --flag", w[0]);
    if (s->dims == SPACE_MAX_DIMS)
        return bad(err, errlen, ln, "more than %s dimensions", "16");
    space_param *p = &s->p[s->dims];
    memset(p, 0, sizeof *p);
    snprintf(p->flag, sizeof p->flag, "%s", w[0] + 2);
    for (int i = 0; i < s->dims; i++)
        if (!strcmp(s->p[i].flag, p->flag))
            return bad(err, errlen, ln, "--%s is listed twice", p->flag);
    char why[200];
    if (!strcmp(w[1], "choice")) {
        p->kind = SPACE_CHOICE;
        for (int i = 2; i < n; i++) {
            if (known(p->flag, w[i], why, sizeof why) < 0) {
                snprintf(err, errlen, "line %d: --%s %s: %s", ln, p->flag, w[i], why);
                space_free(&(tune_space){.dims = 1, .p[0] = *p});
                return -PSKV_EINVAL;
            }
            p->choices[p->nchoices++] = strdup(w[i]);
        }
        s->dims++;
        return 0;
    }
    if (!strcmp(w[1], "log"))
        p->kind = SPACE_LOG;
    else if (!strcmp(w[1], "uniform"))
        p->kind = SPACE_UNIFORM;
    else if (!strcmp(w[1], "int"))
        p->kind = SPACE_INT;
    else
        return bad(err, errlen, ln, "unknown kind `%s` (log, uniform, int or choice)", w[1]);
    if (n != 4 || number(w[2], &p->lo) < 0 || number(w[3], &p->hi) < 0)
        return bad(err, errlen, ln, "%s takes two numbers LO HI", w[1]);
    if (!(p->lo < p->hi))
        return bad(err, errlen, ln, "empty range (LO must be below HI) for --%s", p->flag);
    if (p->kind == SPACE_LOG && p->lo <= 0)
        return bad(err, errlen, ln, "log range of --%s must be above 0", p->flag);
    if (p->kind == SPACE_INT && (p->lo != floor(p->lo) || p->hi != floor(p->hi)))
        return bad(err, errlen, ln, "int range of --%s takes integers", p->flag);
    for (int i = 2; i < 4; i++)
        if (known(p->flag, w[i], why, sizeof why) < 0) {
            snprintf(err, errlen, "line %d: --%s %s: %s", ln, p->flag, w[i], why);
            return -PSKV_EINVAL;
        }
    s->dims++;
    return 0;
}

int space_parse(tune_space *s, const char *text,
                int (*known)(const char *, const char *, char *, size_t), char *err,
                size_t errlen)
{
    memset(s, 0, sizeof *s);
    char *copy = strdup(text ? text : "");
    if (!copy) {
        snprintf(err, errlen, "out of memory");
        return -PSKV_ENOMEM;
    }
    int ln = 0, rc = 0;
    char *save = NULL;
    for (char *line = copy; line && rc == 0; line = save) {
        save = strchr(line, '\n');
        if (save)
            *save++ = '\0';
        ln++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        rc = parse_line(s, line, ln, known, err, errlen);
    }
    free(copy);
    if (rc == 0 && s->dims == 0) {
        snprintf(err, errlen, "no parameters (one line per flag: --lr log 1e-4 0.3)");
        rc = -PSKV_EINVAL;
    }
    if (rc < 0)
        space_free(s);
    return rc;
}

void space_free(tune_space *s)
{
    for (int i = 0; i < s->dims; i++)
        for (int j = 0; j < s->p[i].nchoices; j++) {
            free(s->p[i].choices[j]);
            s->p[i].choices[j] = NULL;
        }
    s->dims = 0;
}

static int pick(int n, double u)
{
    int k = (int)floor(u * n);
    return k < 0 ? 0 : k >= n ? n - 1 : k;
}

char *space_value(const tune_space *s, int i, double u, char *buf, size_t len)
{
    const space_param *p = &s->p[i];
    u = u < 0 ? 0 : u > 1 ? 1 : u;
    switch (p->kind) {
    case SPACE_LOG:
        snprintf(buf, len, "%.6g", exp(log(p->lo) + u * (log(p->hi) - log(p->lo))));
        break;
    case SPACE_UNIFORM:
        snprintf(buf, len, "%.6g", p->lo + u * (p->hi - p->lo));
        break;
    case SPACE_INT:
        snprintf(buf, len, "%lld", (long long)p->lo + pick((int)(p->hi - p->lo) + 1, u));
        break;
    case SPACE_CHOICE:
        snprintf(buf, len, "%s", p->choices[pick(p->nchoices, u)]);
        break;
    }
    return buf;
}

void space_snap(const tune_space *s, double *u)
{
    for (int i = 0; i < s->dims; i++) {
        const space_param *p = &s->p[i];
        int n = p->kind == SPACE_CHOICE ? p->nchoices
                : p->kind == SPACE_INT  ? (int)(p->hi - p->lo) + 1
                                        : 0;
        if (n > 0)
            u[i] = n == 1 ? 0.5 : (pick(n, u[i]) + 0.5) / n;
    }
}

int space_levels(const tune_space *s, int i, int levels)
{
    const space_param *p = &s->p[i];
    if (p->kind == SPACE_CHOICE)
        return p->nchoices;
    if (p->kind == SPACE_INT && p->hi - p->lo + 1 < levels)
        return (int)(p->hi - p->lo) + 1;
    return levels;
}
