/* Learning-rate schedules (see lrsched.h). */
#define _GNU_SOURCE /* M_PI */
#include "lrsched.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int lrsched_parse(const char *text, lr_sched *s)
{
    s->gamma = 1;
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

double lrsched_factor(const lr_sched *s, double done, int epochs)
{
    switch (s->kind) {
    case LR_LINEAR: return 1.0 - done;
    case LR_COSINE: return 0.5 * (1.0 + cos(M_PI * done));
    case LR_EXP: return pow(s->gamma, done * epochs);
    default: return 1.0;
    }
}
