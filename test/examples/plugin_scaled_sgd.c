/* An example updater plug-in (include/pskv/pskv_updater.h), built by the Makefile as
 * build/lib/pskv-plugin-scaled-sgd.so and used by the integration tests:
 *   w -= scale * g, and one state float per value that sums the gradients seen.
 * ARGS is the scale (a number; default 1). Built with -DPLUGIN_ABI=N it declares
 * ABI version N instead: the Makefile builds such a copy for the refusal test.
 * It follows the rules: no blocking, no allocation per call, no pointer kept. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pskv_updater.h"

#ifndef PLUGIN_ABI
#define PLUGIN_ABI PSKV_UPDATER_ABI
#endif

typedef struct ctx {
    float scale;
    int64_t finished; /* the last clock finish saw */
} ctx;

static void *scaled_init(const char *args, const char *table, uint32_t width, int *ok,
                         char *err, size_t errlen)
{
    (void)table;
    (void)width;
    char *end;
    float scale = *args ? strtof(args, &end) : 1.0f;
    if (*args && (*end || !(scale == scale))) {
        *ok = 0;
        snprintf(err, errlen, "ARGS must be a number (the scale), got '%s'", args);
        return NULL;
    }
    ctx *c = calloc(1, sizeof *c);
    if (!c) {
        *ok = 0;
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->scale = scale;
    return c;
}

static void scaled_apply(void *p, float *w, float *state, size_t stride, const float *g,
                         size_t nrows, uint32_t width)
{
    const ctx *c = p;
    size_t n = nrows * width;
    (void)stride; /* one state plane: it starts at state */
    for (size_t i = 0; i < n; i++) {
        w[i] -= c->scale * g[i];
        state[i] += g[i];
    }
}

static void scaled_finish(void *p, int64_t clock) { ((ctx *)p)->finished = clock; }

static void scaled_fini(void *p) { free(p); }

static const pskv_updater scaled = {
    .abi_version = PLUGIN_ABI,
    .state_per_value = 1,
    .init = scaled_init,
    .apply = scaled_apply,
    .finish = scaled_finish,
    .fini = scaled_fini,
};

const pskv_updater *pskv_updater_v1(void);
const pskv_updater *pskv_updater_v1(void) { return &scaled; }
