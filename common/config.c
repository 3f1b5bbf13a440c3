#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "manpage.h"
#include "pskv_errors.h"

cfg_entry *cfg_find(cfg_entry *tab, const char *name)
{
    for (cfg_entry *e = tab; e->name; e++)
        if (strcmp(e->name, name) == 0)
            return e;
    return NULL;
}

static int parse_bool(const char *t, int *out)
{
    if (!strcmp(t, "1") || !strcmp(t, "true") || !strcmp(t, "yes") || !strcmp(t, "on"))
        *out = 1;
    else if (!strcmp(t, "0") || !strcmp(t, "false") || !strcmp(t, "no") || !strcmp(t, "off"))
        *out = 0;
    else
        return -1;
    return 0;
}

int cfg_set(cfg_entry *e, const char *text, char *err, size_t errlen)
{
    char *end = NULL;
    int bounded = e->min <= e->max;
    switch (e->type) {
    case CFG_STR:
        e->s = text;
        return 0;
    case CFG_BOOL: {
        int b;
        if (parse_bool(text, &b) < 0) {
            snprintf(err, errlen, "--%s: '%s' is not a boolean (true/false)", e->name, text);
            return -PSKV_EINVAL;
        }
        e->i = b;
        e->d = b;
        return 0;
    }
    case CFG_INT: {
        errno = 0;
        long long v = strtoll(text, &end, 10);
        if (errno || end == text || *end) {
            snprintf(err, errlen, "--%s: '%s' is not an integer", e->name, text);
            return -PSKV_EINVAL;
        }
        if (bounded && ((double)v < e->min || (double)v > e->max)) {
            snprintf(err, errlen, "--%s: %lld is outside [%.0f, %.0f]", e->name, v, e->min,
                     e->max);
            return -PSKV_EINVAL;
        }
        e->i = v;
        e->d = (double)v;
        return 0;
    }
    case CFG_DOUBLE: {
        errno = 0;
        double v = strtod(text, &end);
        if (errno || end == text || *end || !isfinite(v)) {
            snprintf(err, errlen, "--%s: '%s' is not a number", e->name, text);
            return -PSKV_EINVAL;
        }
        if (bounded && (v < e->min || v > e->max)) {
            snprintf(err, errlen, "--%s: %g is outside [%g, %g]", e->name, v, e->min, e->max);
            return -PSKV_EINVAL;
        }
        e->d = v;
        e->i = v >= 9.2e18 ? LLONG_MAX : v <= -9.2e18 ? LLONG_MIN : (long long)v;
        return 0;
    }
    }
    return -PSKV_EINVAL;
}

static int usage_error(const char *prog, const char *msg)
{
    fprintf(stderr, "%s: %s\nTry '%s --help' for the list of flags.\n", prog, msg, prog);
    return -PSKV_EINVAL;
}

int cfg_parse(cfg_entry *tab, const char *usage, int argc, char **argv, cfg_args *args)
{
    const char *prog = argc > 0 ? argv[0] : "pskv";
    const char *slash = strrchr(prog, '/');
    if (slash)
        prog = slash + 1;
    char err[512];

    for (cfg_entry *e = tab; e->name; e++) {
        e->from = "default";
        e->s = "";
        if (e->def && cfg_set(e, e->def, err, sizeof err) < 0)
            assert(!"bad default in config table");
        const char *v = e->env ? getenv(e->env) : NULL;
        if (v && *v) {
            if (cfg_set(e, v, err, sizeof err) < 0) {
                char msg[700];
                snprintf(msg, sizeof msg, "environment %s: %s", e->env, err);
                return usage_error(prog, msg);
            }
            e->from = "env";
        }
    }
    if (args) {
        args->npos = 0;
        args->pos = NULL;
    }
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            for (int j = i + 1; j < argc; j++) {
                if (!args)
                    return usage_error(prog, "unexpected argument after --");
                argv[npos++] = argv[j];
            }
            break;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            cfg_help(tab, usage, stdout);
            return 1;
        }
        if (strcmp(a, "--man") == 0) {
            man_write(tab, prog, usage, stdout);
            return 1;
        }
        if (strcmp(a, "--markdown") == 0) {
            man_write_markdown(tab, prog, usage, stdout);
            return 1;
        }
        if (strncmp(a, "--", 2) != 0) {
            if (!args) {
                snprintf(err, sizeof err, "unexpected argument '%s'", a);
                return usage_error(prog, err);
            }
            argv[npos++] = a; /* positionals compact to the front of argv[] */
            continue;
        }
        char name[128];
        const char *eq = strchr(a + 2, '=');
        size_t len = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
        if (len >= sizeof name) {
            snprintf(err, sizeof err, "unknown flag '%.60s...'", a);
            return usage_error(prog, err);
        }
        memcpy(name, a + 2, len);
        name[len] = '\0';
        cfg_entry *e = cfg_find(tab, name);
        if (!e) {
            snprintf(err, sizeof err, "unknown flag '--%s'", name);
            return usage_error(prog, err);
        }
        const char *val;
        if (eq)
            val = eq + 1;
        else if (e->type == CFG_BOOL)
            val = "true";
        else if (i + 1 < argc)
            val = argv[++i];
        else {
            snprintf(err, sizeof err, "flag '--%s' needs a value", name);
            return usage_error(prog, err);
        }
        if (cfg_set(e, val, err, sizeof err) < 0)
            return usage_error(prog, err);
        e->from = "flag";
    }
    if (args) {
        args->npos = npos;
        args->pos = argv;
    }
    return 0;
}

static cfg_entry *must_find(cfg_entry *tab, const char *name)
{
    cfg_entry *e = cfg_find(tab, name);
    assert(e && "config entry missing");
    return e;
}

int cfg_set_default(cfg_entry *tab, const char *name, const char *text, char *err,
                    size_t errlen)
{
    cfg_entry *e = must_find(tab, name);
    if (strcmp(e->from, "default") != 0)
        return 0;
    int rc = cfg_set(e, text, err, errlen);
    return rc < 0 ? rc : 1;
}

long long cfg_int(cfg_entry *tab, const char *name) { return must_find(tab, name)->i; }
double cfg_double(cfg_entry *tab, const char *name) { return must_find(tab, name)->d; }
const char *cfg_str(cfg_entry *tab, const char *name) { return must_find(tab, name)->s; }

void cfg_help(const cfg_entry *tab, const char *usage, void *stream)
{
    FILE *f = stream;
    static const char *const types[] = {"INT", "NUM", "STR", ""};
    fprintf(f, "usage: %s\n\nflags (--flag value or --flag=value; environment in brackets):\n",
            usage);
    for (const cfg_entry *e = tab; e->name; e++) {
        char left[64];
        snprintf(left, sizeof left, "--%s %s", e->name, types[e->type]);
        fprintf(f, "  %-26s %s", left, e->help);
        if (e->unit)
            fprintf(f, " (%s)", e->unit);
        fprintf(f, "\n  %-26s default: %s", "", e->def && *e->def ? e->def : "(none)");
        if (e->env)
            fprintf(f, "  [%s]", e->env);
        fputc('\n', f);
    }
}

void cfg_log(const cfg_entry *tab)
{
    char line[1800];
    size_t n = 0;
    for (const cfg_entry *e = tab; e->name && n < sizeof line - 1; e++) {
        int w;
        if (e->type == CFG_STR)
            w = snprintf(line + n, sizeof line - n, "%s=%s ", e->name, e->s);
        else if (e->type == CFG_DOUBLE)
            w = snprintf(line + n, sizeof line - n, "%s=%g ", e->name, e->d);
        else
            w = snprintf(line + n, sizeof line - n, "%s=%lld ", e->name, e->i);
        if (w < 0)
            break;
        n += (size_t)w;
    }
    if (n >= sizeof line)
        n = sizeof line - 1;
    line[n] = '\0';
    LOG_I("settings: %s", line);
}

int cfg_start(cfg_entry *tab, const char *role, const char *usage, int argc, char **argv,
              cfg_args *args)
{
    log_set_role(role);
    /* the name first: cfg_parse moves positional arguments to the front of argv */
    const char *prog = argc > 0 ? argv[0] : role;
    if (strrchr(prog, '/'))
        prog = strrchr(prog, '/') + 1;
    int rc = cfg_parse(tab, usage, argc, argv, args);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    int lvl = log_parse_level(cfg_str(tab, "log-level"));
    if (lvl < 0) {
        fprintf(stderr, "%s: --log-level must be error, warn, info or debug\n", prog);
        return 2;
    }
    log_threshold = lvl;
    return -1;
}
