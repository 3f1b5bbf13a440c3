/* pskvctl status --study (ctl_study.h). */
#define _GNU_SOURCE
#include "ctl_study.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int ctl_study_status(const char *study)
{
    char exe[PATH_MAX - 16], tune[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    snprintf(tune, sizeof tune, "%s/pskv-tune", exe);
    fflush(stdout);
    if (slash && access(tune, X_OK) == 0)
        execl(tune, "pskv-tune", "status", study, (char *)NULL);
    else
        execlp("pskv-tune", "pskv-tune", "status", study, (char *)NULL);
    fprintf(stderr, "pskvctl status --study: cannot run pskv-tune (beside %s or on PATH): %s\n",
            exe, strerror(errno));
    return 1;
}
