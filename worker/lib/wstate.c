/* wstate: the ground floor of the worker handle (types and contract in
 * wstate.h): the settings' defaults (pskv_config_init, pskv_table_opts_init) and
 * the handle's error message (wst_error). The handle's life is open.c's. */
#define _GNU_SOURCE
#include "wstate.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int wst_error(pskv_worker *w, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->last_error, sizeof w->last_error, fmt, ap);
    va_end(ap);
    return code < 0 ? code : -code;
}

void pskv_config_init(pskv_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->rank = -1;
    cfg->connect_timeout_s = 30;
    cfg->join_timeout_s = 600;
    cfg->request_timeout_ms = 30000;
    cfg->window = 64;
    cfg->max_message = 1LL << 30;
    cfg->chunk_bytes = 1024 * 1024;
    cfg->spin_us = 100;
    cfg->retry_ms = 1000;
    cfg->slice_us = 100;
    cfg->keys = NULL;
    const char *insecure = getenv("PSKV_INSECURE");
    cfg->insecure = insecure && *insecure && strcmp(insecure, "0") && strcmp(insecure, "false");
}

void pskv_table_opts_init(pskv_table_opts *o)
{
    memset(o, 0, sizeof *o);
    o->kind = PSKV_DENSE;
    o->width = 1;
    o->updater = "sgd";
    o->lr = 0.01f;
    o->eps = 1e-8f;
    o->beta1 = 0.9f;
    o->beta2 = 0.999f;
    o->beta = 1.0f;
    o->init = "zero";
    o->consistency = "async";
}
