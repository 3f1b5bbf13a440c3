/* waitstat: the CPU behind a training worker's waiting (waitstat.h). */
#define _GNU_SOURCE
#include "waitstat.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "timeutil.h"

/* The calling thread's voluntary (slept) and involuntary (preempted) switches. */
static void switches(long *slept, long *preempted)
{
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    getrusage(RUSAGE_THREAD, &ru);
    *slept = ru.ru_nvcsw;
    *preempted = ru.ru_nivcsw;
}

void waitstat_start(waitstat *ws)
{
    memset(ws, 0, sizeof *ws);
    ws->proc0_ns = tu_process_cpu_ns();
    switches(&ws->slept0, &ws->preempted0);
}

void waitstat_print(const waitstat *ws, int rank, int64_t nsteps)
{
    long slept, preempted;
    switches(&slept, &preempted);
    double n = nsteps > 0 ? (double)nsteps : 1;
    printf("rank %d cpu: compute %.3f s (its thread), the process %.3f s over the loop; a step "
           "spent %.1f us of CPU in the library's calls, its thread slept %.2f and was "
           "preempted %.2f times\n",
           rank, (double)ws->compute_ns / 1e9, (double)(tu_process_cpu_ns() - ws->proc0_ns) / 1e9,
           (double)ws->blocked_ns / 1e3 / n, (double)(slept - ws->slept0) / n,
           (double)(preempted - ws->preempted0) / n);
}
