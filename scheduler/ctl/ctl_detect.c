/* pskvctl status's failure-detection section (ctl_detect.h). */
#include "ctl_detect.h"

#include <inttypes.h>
#include <stdio.h>

static uint64_t heard(const Pskv__View *v, int role)
{
    return (size_t)role < v->n_dead_heard ? v->dead_heard[role] : 0;
}

void ctl_detect_print(const Pskv__View *v)
{
    if (!v->has_phi_threshold)
        return;
    printf("failure detection: connection close + probe; phi-threshold %g, silent time-out "
           "%u..%u ms; declared dead then heard from: servers %" PRIu64 ", workers %" PRIu64
           ", evaluators %" PRIu64 "\n", v->phi_threshold, v->min_dead_after_ms,
           v->dead_after_ms, heard(v, PSKV__ROLE__SERVER), heard(v, PSKV__ROLE__WORKER),
           heard(v, PSKV__ROLE__EVALUATOR));
    printf("%-4s %-7s %-7s %-16s %-8s %-10s %s\n", "ID", "ROLE", "PHI", "GAP MEAN/SD MS",
           "GAPS", "TIME-OUT", "DETECTOR");
    for (size_t i = 0; i < v->n_nodes; i++) {
        const Pskv__Node *n = v->nodes[i];
        if (!n->has_phi)
            continue;
        char gap[40], phi[16] = "-";
        snprintf(gap, sizeof gap, "%.1f/%.1f", n->gap_mean_ms, n->gap_sd_ms);
        if (n->alive)
            snprintf(phi, sizeof phi, "%.2f", n->phi);
        const char *role = n->role == PSKV__ROLE__SERVER ? "server"
                           : n->role == PSKV__ROLE__WORKER ? "worker"
                           : n->role == PSKV__ROLE__EVALUATOR ? "evaluator" : "?";
        char why[96] = "";
        if (n->dead_reason)
            snprintf(why, sizeof why, "dead (%s)", n->dead_reason);
        printf("%-4u %-7s %-7s %-16s %-8" PRIu64 " %-10u %s\n", n->id, role, phi, gap, n->gaps,
               n->dead_after_ms, why);
    }
}

void ctl_detect_json_node(const Pskv__Node *n)
{
    if (!n->has_phi)
        return;
    printf(",\"phi\":%.4f,\"gap_mean_ms\":%.3f,\"gap_sd_ms\":%.3f,\"gaps\":%" PRIu64
           ",\"dead_after_ms\":%u", n->phi, n->gap_mean_ms, n->gap_sd_ms, n->gaps,
           n->dead_after_ms);
    if (n->dead_reason) {
        printf(",\"dead_reason\":\"");
        for (const char *s = n->dead_reason; *s; s++)
            if (*s != '"' && *s != '\\' && (unsigned char)*s >= 0x20)
                putchar(*s);
        putchar('"');
    }
}

void ctl_detect_json_view(const Pskv__View *v)
{
    if (!v->has_phi_threshold)
        return;
    printf(",\"phi_threshold\":%g,\"min_dead_after_ms\":%u,\"dead_after_ms\":%u,"
           "\"declared_dead_then_heard\":{\"server\":%" PRIu64 ",\"worker\":%" PRIu64
           ",\"evaluator\":%" PRIu64 "}", v->phi_threshold, v->min_dead_after_ms,
           v->dead_after_ms, heard(v, PSKV__ROLE__SERVER), heard(v, PSKV__ROLE__WORKER),
           heard(v, PSKV__ROLE__EVALUATOR));
}
