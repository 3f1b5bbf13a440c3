/* Updater plug-ins: dlopen, ABI checks, and the canned-input self test. */
#define _GNU_SOURCE
#include "upd_plugin.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pskv_errors.h"
#include "pskv_updater.h"
#include "updater.h"

struct upd_plugin {
    void *dl;
    const pskv_updater *abi;
    void *ctx;
};

static const char PREFIX[] = "plugin:";

/* --plugin-dir, resolved: plug-ins load only from inside it; empty: none load */
static char allowed_dir[4096];

int upd_plugin_setup(const char *dir, const char *check, void *out)
{
    int rc;
    if (*check) /* 0 passed, 1 failed, -PSKV_EINVAL (cannot load): 2 */
        return (rc = upd_plugin_selftest(check, out)) < 0 ? 2 : rc;
    allowed_dir[0] = '\0';
    if (!*dir)
        return -1;
    char real[PATH_MAX];
    struct stat st;
    if (!realpath(dir, real) || stat(real, &st) < 0 || !S_ISDIR(st.st_mode) ||
        strlen(real) + 2 > sizeof allowed_dir) {
        fprintf(stderr, "pskv-server: --plugin-dir '%s' is not a directory\n", dir);
        return 2;
    }
    snprintf(allowed_dir, sizeof allowed_dir, "%s/", real);
    return -1;
}

/* 1 when file resolves to a path inside allowed_dir; else the reason in why. */
static int inside_allowed(const char *file, char *why, size_t whylen)
{
    char real[PATH_MAX];
    if (!allowed_dir[0]) {
        snprintf(why, whylen, "updater plug-in %s: plug-ins are off on this server (start "
                 "pskv-server with --plugin-dir DIR holding them)", file);
        return 0;
    }
    if (!realpath(file, real)) {
        snprintf(why, whylen, "updater plug-in %s: cannot load: %s", file, strerror(errno));
        return 0;
    }
    if (strncmp(real, allowed_dir, strlen(allowed_dir)) != 0) {
        snprintf(why, whylen, "updater plug-in %s: not inside --plugin-dir %s", file,
                 allowed_dir);
        return 0;
    }
    return 1;
}

int upd_plugin_is_spec(const char *updater)
{
    return updater && !strncmp(updater, PREFIX, sizeof PREFIX - 1);
}

static int load(const char *spec, const char *table, uint32_t width, int anywhere,
                upd_plugin **out, char *why, size_t whylen);

int upd_plugin_load(const char *spec, const char *table, uint32_t width, upd_plugin **out,
                    char *why, size_t whylen)
{
    return load(spec, table, width, 0, out, why, whylen);
}

static int load(const char *spec, const char *table, uint32_t width, int anywhere,
                upd_plugin **out, char *why, size_t whylen)
{
    *out = NULL;
    if (!upd_plugin_is_spec(spec)) {
        snprintf(why, whylen, "option 'updater': '%s' is not plugin:PATH[:ARGS]", spec);
        return -PSKV_EINVAL;
    }
    const char *path = spec + sizeof PREFIX - 1, *colon = strchr(path, ':');
    const char *args = colon ? colon + 1 : "";
    char file[4096];
    size_t plen = colon ? (size_t)(colon - path) : strlen(path);
    if (plen == 0 || plen >= sizeof file) {
        snprintf(why, whylen, "option 'updater': plug-in path missing or too long in '%s'", spec);
        return -PSKV_EINVAL;
    }
    memcpy(file, path, plen);
    file[plen] = 0;
    if (!anywhere && !inside_allowed(file, why, whylen))
        return -PSKV_EINVAL;
    upd_plugin *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(why, whylen, "out of memory loading plug-in %s", file);
        return -PSKV_ENOMEM;
    }
    p->dl = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!p->dl) {
        snprintf(why, whylen, "updater plug-in %s: cannot load: %s", file, dlerror());
        goto fail;
    }
    pskv_updater_entry_fn entry;
    *(void **)&entry = dlsym(p->dl, PSKV_UPDATER_SYMBOL);
    if (!entry) {
        snprintf(why, whylen, "updater plug-in %s: missing symbol %s (not a pskv plug-in?)",
                 file, PSKV_UPDATER_SYMBOL);
        goto fail;
    }
    p->abi = entry();
    if (!p->abi || p->abi->abi_version != PSKV_UPDATER_ABI) {
        snprintf(why, whylen, "updater plug-in %s: ABI version %u, this server needs %u",
                 file, p->abi ? p->abi->abi_version : 0, PSKV_UPDATER_ABI);
        goto fail;
    }
    if (!p->abi->apply || p->abi->state_per_value > PSKV_UPDATER_MAX_STATE) {
        snprintf(why, whylen, "updater plug-in %s: %s", file,
                 !p->abi->apply ? "no apply function" : "state_per_value above 8");
        goto fail;
    }
    if (p->abi->init) {
        int ok = 1;
        char err[256] = "";
        p->ctx = p->abi->init(args, table, width, &ok, err, sizeof err);
        if (!ok) {
            snprintf(why, whylen, "updater plug-in %s refused table '%s' (args '%s'): %s", file,
                     table, args, err[0] ? err : "no reason given");
            goto fail;
        }
    }
    *out = p;
    return 0;
fail:
    if (p->dl)
        dlclose(p->dl);
    free(p);
    return -PSKV_EINVAL;
}

void upd_plugin_destroy(upd_plugin **p_p)
{
    if (!p_p || !*p_p)
        return;
    upd_plugin *p = *p_p;
    if (p->abi && p->abi->fini)
        p->abi->fini(p->ctx);
    if (p->dl)
        dlclose(p->dl);
    free(p);
    *p_p = NULL;
}

int upd_plugin_state(const upd_plugin *p) { return p ? (int)p->abi->state_per_value : 0; }

void upd_plugin_apply(const upd_plugin *p, float *w, float *state, size_t stride,
                      const float *g, size_t nrows, uint32_t width)
{
    p->abi->apply(p->ctx, w, state, stride, g, nrows, width);
}

void upd_plugin_finish(const upd_plugin *p, int64_t clock)
{
    if (p && p->abi->finish)
        p->abi->finish(p->ctx, clock);
}

/* ---- --updater-check --------------------------------------------------------- */

enum { ROWS = 8, GUARD = 16 };
static const float CANARY = -1234.5f;

/* Deterministic canned numbers: a mix of zero, small, large and both signs. */
static float canned(unsigned i, int kind)
{
    static const float pick[] = {0.0f, 1e-3f, -0.5f, 2.0f, -37.0f, 1e4f, -1e-6f, 0.25f};
    return kind == 0 ? 0.0f : pick[(i * 5u + (unsigned)kind) % 8u] * (kind == 2 ? 10.0f : 1.0f);
}

static int guards_ok(const float *a, size_t n)
{
    for (size_t i = 0; i < GUARD; i++)
        if (a[i] != CANARY || a[GUARD + n + i] != CANARY)
            return 0;
    return 1;
}

/* One width: a run of ROWS rows against the same rows one at a time, three
 * pushes of each gradient kind. Returns the failed checks. */
static int check_width(const upd_plugin *p, uint32_t wd, FILE *out)
{
    size_t n = (size_t)ROWS * wd, ns = (size_t)upd_plugin_state(p), sn = ns * n;
    size_t total = 2 * (GUARD * 2 + n) + 2 * (GUARD * 2 + sn) + n;
    float *buf = malloc(total * sizeof(float));
    if (!buf) {
        fprintf(out, "  width %u: out of memory\n", wd);
        return 1;
    }
    for (size_t i = 0; i < total; i++)
        buf[i] = CANARY;
    float *wa = buf, *wb = wa + GUARD * 2 + n, *sa = wb + GUARD * 2 + n;
    float *sb = sa + GUARD * 2 + sn, *g = sb + GUARD * 2 + sn;
    for (size_t i = 0; i < n; i++)
        wa[GUARD + i] = wb[GUARD + i] = canned((unsigned)i, 1) * 0.01f;
    memset(sa + GUARD, 0, sn * sizeof(float));
    memset(sb + GUARD, 0, sn * sizeof(float));
    int bad = 0;
    for (int step = 0; step < 9; step++) {
        for (size_t i = 0; i < n; i++)
            g[i] = canned((unsigned)(i + (size_t)step), step % 3);
        upd_plugin_apply(p, wa + GUARD, ns ? sa + GUARD : NULL, n, g, ROWS, wd);
        /* row by row, as a sparse table applies it: state planes of one row */
        for (size_t r = 0; r < ROWS; r++) {
            float row[64 * (1 + PSKV_UPDATER_MAX_STATE)];
            for (size_t k = 0; k < ns; k++)
                memcpy(row + wd + k * wd, sb + GUARD + k * n + r * wd, wd * sizeof(float));
            memcpy(row, wb + GUARD + r * wd, wd * sizeof(float));
            upd_plugin_apply(p, row, ns ? row + wd : NULL, wd, g + r * wd, 1, wd);
            memcpy(wb + GUARD + r * wd, row, wd * sizeof(float));
            for (size_t k = 0; k < ns; k++)
                memcpy(sb + GUARD + k * n + r * wd, row + wd + k * wd, wd * sizeof(float));
        }
    }
    int finite = 1;
    for (size_t i = 0; i < n; i++)
        finite &= isfinite(wa[GUARD + i]) != 0;
    for (size_t i = 0; i < sn; i++)
        finite &= isfinite(sa[GUARD + i]) != 0;
    int same = !memcmp(wa + GUARD, wb + GUARD, n * sizeof(float)) &&
               !memcmp(sa + GUARD, sb + GUARD, sn * sizeof(float));
    int inside = guards_ok(wa, n) && guards_ok(wb, n) && guards_ok(sa, sn) && guards_ok(sb, sn);
    fprintf(out, "  width %2u: finite values and state: %s; a run equals its rows one by one: %s; "
            "writes stay inside the rows: %s\n", wd, finite ? "yes" : "NO", same ? "yes" : "NO",
            inside ? "yes" : "NO");
    bad += !finite + !same + !inside;
    free(buf);
    return bad;
}

int upd_plugin_selftest(const char *spec, void *stream)
{
    FILE *out = stream;
    static const uint32_t widths[] = {1, 3, 64};
    int bad = 0;
    for (size_t k = 0; k < sizeof widths / sizeof *widths; k++) {
        upd_plugin *p;
        char why[512];
        int rc = load(spec, "updater-check", widths[k], 1, &p, why, sizeof why);
        if (rc < 0) {
            fprintf(out, "updater-check: %s\n", why);
            return rc;
        }
        if (k == 0)
            fprintf(out, "updater-check: %s: ABI %u, %d state floats per value, finish: %s\n",
                    spec, PSKV_UPDATER_ABI, upd_plugin_state(p), p->abi->finish ? "yes" : "no");
        bad += check_width(p, widths[k], out);
        upd_plugin_finish(p, 0);
        upd_plugin_destroy(&p);
    }
    fprintf(out, "updater-check: %s\n", bad ? "FAILED" : "passed");
    return bad ? 1 : 0;
}

/* The plug-ins' row of the updater table (updater.h): the table's loaded plug-in
 * (upd_opts.plug) says its state and does the applying. */
static int row_planes(const upd_opts *o) { return upd_plugin_state(o->plug); }

static void row_apply(const upd_opts *o, float *w, float *state, size_t stride, const float *g,
                      size_t n, size_t width)
{
    upd_plugin_apply(o->plug, w, state, stride, g, n / width, (uint32_t)width);
}

const upd_ops upd_plugin_ops = {
    .name = "plugin",
    .state_planes = row_planes,
    .check = upd_check_own,
    .may_fail = 1,
    .apply = row_apply,
    .rules = {0},
};
