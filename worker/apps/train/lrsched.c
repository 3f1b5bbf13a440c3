/* Learning-rate schedules (see lrsched.h). */
#define _GNU_SOURCE /* M_PI */
#include "lrsched.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int lrsched_parse(const char *text, lr_sched *s)
{
    s->gamma = 1;
    s->warmup = 0;
    if (!strcmp(text, "const"))
        s->kind = LR_CONST;
    else if (!strcmp(text, "linear"))
        s->kind = LR_LINEAR;
    else if (!strcmp(text, "cosine"))
        s->kind = LR_COSINE;
    else if (!strncmp(text, "exp:", 4)) {
        char *end;
        s->kind = LR_EXP;
        s->gamma = strtod(text + 4, &end);
        if (end == text + 4 || *end || !(s->gamma > 0 && s->gamma <= 1))
            return -1;
    } else
        return -1;
    return 0;
}

int lrsched_check_warmup(double warmup, int epochs)
{
    return warmup >= 0 && warmup < (double)epochs ? 0 : -1;
}

double lrsched_factor(const lr_sched *s, int64_t step, int64_t steps_per_epoch, int epochs)
{
    const int64_t total = steps_per_epoch * epochs;
    const double done = total > 0 ? (double)step / (double)total : 0;
    double f;
    switch (s->kind) {
    case LR_LINEAR: f = 1.0 - done; break;
    case LR_COSINE: f = 0.5 * (1.0 + cos(M_PI * done)); break;
    case LR_EXP: f = pow(s->gamma, done * epochs); break;
    default: f = 1.0;
    }
    if (s->warmup > 0) {
        double warm = ceil(s->warmup * (double)steps_per_epoch);
        if ((double)step + 1 < warm)
            f *= ((double)step + 1) / warm;
    }
    return f;
}
