/* pskvctl: asks a running scheduler about its job, and makes keys.
 *   pskvctl [--scheduler HOST:PORT] [--keys DIR] status [--json] | checkpoint [--group G]
 *   pskvctl status --study STUDY.db   (a pskv-tune study: ctl_study.h)
 *   pskvctl [--scheduler HOST:PORT] [--keys DIR] top [--interval S] [--count N] [--plain]
 *   pskvctl [--scheduler HOST:PORT] [--keys DIR] drain NODE [--drain-timeout S]
 *   pskvctl [--scheduler HOST:PORT] [--keys DIR] shutdown | stop GROUP | drop NAMESPACE
 *   pskvctl keygen --role ROLE --out DIR
 *   pskvctl keys init DIR --servers S --workers W
 *   pskvctl export --checkpoint N --from DIR[,DIR...] [--namespace NS] --out PATH
 * Exit status: 0 answered (or keys made, or model exported, or server drained, or
 * service shutting down, or group told to stop, or namespace dropped), 1 no
 * answer within --timeout, refused, not drained, or keys or model not made, 2 usage. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "config.h"
#include "ctl_detect.h"
#include "ctl_drain.h"
#include "ctl_group.h"
#include "ctl_study.h"
#include "ctl_top.h"
#include "export.h"
#include "keys.h"
#include "log.h"
#include "net.h"
#include "pskv_errors.h"
#include "refuse.h"
#include "wire.h"

static cfg_entry config[] = {
    {"scheduler", CFG_STR, "127.0.0.1:7700", "PSKV_SCHEDULER", 1, 0, NULL,
     "scheduler address HOST:PORT", 0, 0, NULL, NULL},
    {"study", CFG_STR, "", NULL, 1, 0, NULL,
     "status: show this pskv-tune study (STUDY.db: its trials by state, the best) instead of "
     "asking a scheduler", 0, 0, NULL, NULL},
    {"json", CFG_BOOL, "false", NULL, 1, 0, NULL, "print JSON for tools instead of a table", 0, 0,
     NULL, NULL},
    {"timeout", CFG_DOUBLE, "5", "PSKV_CTL_TIMEOUT", 0.1, 3600, "s",
     "how long to wait for the scheduler's answer (drop: 20 s more, the drop's own bound)", 0,
     0, NULL, NULL},
    {"log-level", CFG_STR, "warn", "PSKV_LOG_LEVEL", 1, 0, NULL, "error, warn, info or debug", 0,
     0, NULL, NULL},
    {"keys", CFG_STR, "", "PSKV_KEYS", 1, 0, NULL,
     "key directory (node.key, node.pub, scheduler.pub): talk CURVE to the scheduler; "
     "checkpoint, drain, shutdown, stop and drop need a control key", 0, 0, NULL, NULL},
    {"drain-timeout", CFG_DOUBLE, "120", "PSKV_CTL_DRAIN_TIMEOUT", 0.1, 86400, "s",
     "drain: give up waiting for the server to leave after this long (it stays draining)", 0,
     0, NULL, NULL},
    {"interval", CFG_DOUBLE, "1", NULL, 0.05, 3600, "s", "top: refresh this often", 0, 0, NULL,
     NULL},
    {"count", CFG_INT, "0", NULL, 0, 1e9, NULL, "top: stop after this many refreshes (0 = on q "
     "or Ctrl-C)", 0, 0, NULL, NULL},
    {"plain", CFG_BOOL, "false", NULL, 1, 0, NULL,
     "top: plain lines, one per node and refresh (the default when not on a terminal)", 0, 0,
     NULL, NULL},
    {"role", CFG_STR, "", NULL, 1, 0, NULL,
     "keygen: the key's role (scheduler, server, worker, evaluator, control)", 0, 0, NULL, NULL},
    {"out", CFG_STR, "", NULL, 1, 0, NULL,
     "keygen: directory to write node.key and node.pub into; export: the model file to write",
     0, 0, NULL, NULL},
    {"delta", CFG_BOOL, "false", NULL, 1, 0, NULL,
     "checkpoint: full or delta as the scheduler's --full-every cycle says, instead of a full "
     "one", 0, 0, NULL, NULL},
    {"group", CFG_STR, "", NULL, 1, 0, NULL,
     "checkpoint: of this running group of the service only (its namespace's tables and its "
     "workers' progress)", 0, 0, NULL, NULL},
    {"checkpoint", CFG_INT, "0", NULL, 0, 9.2e18, NULL,
     "export: the checkpoint number (the manifest's seq)", 0, 0, NULL, NULL},
    {"namespace", CFG_STR, "", NULL, 1, 0, NULL,
     "export: the namespace whose model to export (empty = the unnamed one)", 0, 0, NULL, NULL},
    {"from", CFG_STR, "", NULL, 1, 0, NULL,
     "export: the servers' --data-dir directories (comma-separated) holding its files", 0, 0,
     NULL, NULL},
    {"servers", CFG_INT, "1", NULL, 1, 4096, NULL, "keys init: servers in the keyset", 0, 0, NULL,
     NULL},
    {"workers", CFG_INT, "1", NULL, 0, 65536, NULL, "keys init: workers in the keyset", 0, 0,
     NULL, NULL},
    CFG_END};

/* pskvctl keygen / keys init: exit status 0, 1 (not made) or 2 (usage). */
static int key_command(cfg_args *args, const char *usage)
{
    char why[512];
    if (!strcmp(args->pos[0], "keygen")) {
        key_role role = key_role_parse(cfg_str(config, "role"));
        if (args->npos != 1 || role == KEY_ROLE_NONE || !*cfg_str(config, "out")) {
            fprintf(stderr, "pskvctl keygen: needs --role scheduler|server|worker|evaluator|control "
                    "and --out DIR\nusage: %s\n", usage);
            return 2;
        }
        if (keys_keygen(cfg_str(config, "out"), role, why, sizeof why) < 0) {
            fprintf(stderr, "pskvctl keygen: %s\n", why);
            return 1;
        }
        printf("%s key written to %s (node.key, node.pub); append node.pub to the scheduler's "
               "and servers' authorized files, copy scheduler.pub beside it\n",
               key_role_name(role), cfg_str(config, "out"));
        return 0;
    }
    if (args->npos != 3 || strcmp(args->pos[1], "init")) {
        fprintf(stderr, "pskvctl keys: expected 'keys init DIR'\nusage: %s\n", usage);
        return 2;
    }
    int servers = (int)cfg_int(config, "servers"), workers = (int)cfg_int(config, "workers");
    if (keys_init_cluster(args->pos[2], servers, workers, why, sizeof why) < 0) {
        fprintf(stderr, "pskvctl keys init: %s\n", why);
        return 1;
    }
    printf("keyset for 1 scheduler, %d servers, %d workers, 1 evaluator and 1 control written "
           "to %s\n", servers, workers, args->pos[2]);
    return 0;
}

/* pskvctl export: exit status 0, 1 (not exported) or 2 (usage). */
static int export_command(cfg_args *args, const char *usage)
{
    char why[1024], summary[600];
    uint64_t seq = (uint64_t)cfg_int(config, "checkpoint");
    const char *missing = args->npos != 1          ? "one command"
                          : !seq                   ? "--checkpoint N"
                          : !*cfg_str(config, "from") ? "--from DIR[,DIR...]"
                          : !*cfg_str(config, "out")  ? "--out PATH"
                                                      : NULL;
    if (missing) {
        fprintf(stderr, "pskvctl export: needs %s\nusage: %s\n", missing, usage);
        return 2;
    }
    if (export_checkpoint(cfg_str(config, "from"), seq, cfg_str(config, "namespace"),
                          cfg_str(config, "out"), summary, sizeof summary, why, sizeof why) < 0) {
        fprintf(stderr, "pskvctl export: %s\n", why);
        return 1;
    }
    printf("%s\n", summary);
    return 0;
}

static const char *role_name(int r)
{
    return r == PSKV__ROLE__SERVER      ? "server"
           : r == PSKV__ROLE__WORKER    ? "worker"
           : r == PSKV__ROLE__EVALUATOR ? "evaluator"
                                        : "other";
}

/* Refusal counts as `reason=N` pairs (only the non-zero ones); "" when none. */
static void refusals_text(const uint64_t *r, size_t n, char *out, size_t len)
{
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && i < REFUSE_COUNT && at < len; i++)
        if (r[i])
            at += (size_t)snprintf(out + at, len - at, "%s%s=%llu", at ? " " : "",
                                   refuse_name((refuse_reason)i), (unsigned long long)r[i]);
}

static void json_refusals(const uint64_t *r, size_t n)
{
    printf("{");
    for (size_t i = 0; i < REFUSE_COUNT; i++)
        printf("%s\"%s\":%llu", i ? "," : "", refuse_name((refuse_reason)i),
               (unsigned long long)(i < n ? r[i] : 0));
    printf("}");
}

static void json_str(const char *s)
{
    putchar('"');
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

/* Per server: the rows its tables hold, admission and eviction, bytes. */
static void print_tables(const Pskv__View *v)
{
    int any = 0;
    for (size_t i = 0; i < v->n_nodes; i++) {
        const Pskv__Node *n = v->nodes[i];
        if (!n->has_rows)
            continue;
        if (!any++)
            printf("%-4s %-12s %-12s %-14s %-12s %-12s %s\n", "ID", "ROWS", "ADMITTED",
                   "NOT ADMITTED", "EVICTED", "BYTES", "RSS");
        printf("%-4u %-12" PRIu64 " %-12" PRIu64 " %-14" PRIu64 " %-12" PRIu64 " %-12" PRIu64
               " %" PRIu64 "\n", n->id, n->rows, n->admitted, n->not_admitted, n->evicted,
               n->bytes, n->rss_bytes);
    }
}

/* Per namespace, over the servers: the bytes its tables take (every replica) and its
 * quota (from the servers' heartbeats). */
static void print_namespaces(const Pskv__View *v)
{
    const char *seen[64];
    size_t nseen = 0;
    for (size_t i = 0; i < v->n_nodes; i++)
        for (size_t k = 0; k < v->nodes[i]->n_ns_names && nseen < 64; k++) {
            const char *name = v->nodes[i]->ns_names[k];
            size_t j = 0;
            while (j < nseen && strcmp(seen[j], name))
                j++;
            if (j == nseen)
                seen[nseen++] = name;
        }
    for (size_t j = 0; j < nseen; j++) {
        uint64_t bytes = 0, quota = 0;
        int servers = 0;
        for (size_t i = 0; i < v->n_nodes; i++) {
            const Pskv__Node *n = v->nodes[i];
            for (size_t k = 0; k < n->n_ns_names && k < n->n_ns_bytes && k < n->n_ns_quota; k++)
                if (!strcmp(n->ns_names[k], seen[j])) {
                    bytes += n->ns_bytes[k];
                    quota = n->ns_quota[k] ? n->ns_quota[k] : quota;
                    servers++;
                }
        }
        char q[48] = "no quota";
        if (quota)
            snprintf(q, sizeof q, "quota %" PRIu64 " bytes", quota);
        printf("namespace %s: %" PRIu64 " bytes on %d servers, %s\n",
               *seen[j] ? seen[j] : "(unnamed)", bytes, servers, q);
    }
}

/* Per worker and table: bytes sent and received on the wire and before the
 * filters, and the time in filters (from the workers' heartbeats). */
static void print_traffic(const Pskv__View *v)
{
    int any = 0;
    for (size_t i = 0; i < v->n_nodes; i++) {
        const Pskv__Node *n = v->nodes[i];
        for (size_t j = 0; j < n->n_traffic; j++) {
            const Pskv__TableTraffic *t = n->traffic[j];
            if (!any++)
                printf("%-4s %-5s %-24s %-13s %-13s %-13s %-13s %s\n", "ID", "RANK", "TABLE",
                       "SENT", "SENT RAW", "RECEIVED", "RECEIVED RAW", "FILTER MS");
            printf("%-4u %-5d %-24s %-13" PRIu64 " %-13" PRIu64 " %-13" PRIu64 " %-13" PRIu64
                   " %.1f\n", n->id, n->rank, t->name ? t->name : "?", t->sent, t->sent_raw,
                   t->received, t->received_raw, (double)t->filter_ns / 1e6);
        }
    }
}

static void json_traffic(const Pskv__Node *n)
{
    printf(",\"traffic\":[");
    for (size_t j = 0; j < n->n_traffic; j++) {
        const Pskv__TableTraffic *t = n->traffic[j];
        printf("%s{\"table\":", j ? "," : "");
        json_str(t->name);
        printf(",\"sent\":%" PRIu64 ",\"sent_raw\":%" PRIu64 ",\"received\":%" PRIu64
               ",\"received_raw\":%" PRIu64 ",\"filter_ms\":%.3f}", t->sent, t->sent_raw,
               t->received, t->received_raw, (double)t->filter_ns / 1e6);
    }
    putchar(']');
}

/* ,"service":B,"groups":[...]: a service's worker groups (ctl_group.h). */
static void json_groups(const Pskv__View *v)
{
    printf(",\"service\":%s,\"groups\":[", v->service ? "true" : "false");
    for (size_t i = 0; i < v->n_groups; i++) {
        const Pskv__GroupStatus *g = v->groups[i];
        printf("%s{\"name\":", i ? "," : "");
        json_str(g->name);
        printf(",\"state\":");
        json_str(g->state);
        printf(",\"size\":%u,\"registered\":%u,\"barrier\":%" PRIu64 ",\"clock\":%" PRId64
               ",\"stopped_by\":", g->size, g->registered, g->barrier,
               g->has_clock ? g->clock : -1);
        json_str(g->stopped_by ? g->stopped_by : "");
        printf(",\"early_stop\":");
        json_str(g->early_stop ? g->early_stop : "");
        putchar('}');
    }
    putchar(']');
}

static void print_json(const Pskv__Meta *m)
{
    const Pskv__View *v = m->view;
    printf("{\"job_id\":\"%" PRIu64 "\",\"epoch\":%" PRIu64 ",\"state\":", m->job_id, v->epoch);
    json_str(v->state);
    printf(",\"servers_expected\":%u,\"workers_expected\":%u,\"heartbeat_ms\":%u,\"nodes\":[",
           v->servers, v->workers, v->heartbeat_ms);
    for (size_t i = 0; i < v->n_nodes; i++) {
        const Pskv__Node *n = v->nodes[i];
        printf("%s{\"id\":%u,\"role\":\"%s\",\"rank\":%d,\"host\":", i ? "," : "", n->id,
               role_name(n->role), n->rank);
        json_str(n->host);
        printf(",\"port\":%u,\"pid\":%u,\"state\":", n->port, n->pid);
        json_str(n->state);
        printf(",\"alive\":%s,\"heartbeat_age_ms\":%" PRId64, n->alive ? "true" : "false",
               n->heartbeat_age_ms);
        if (n->has_clock)
            printf(",\"clock\":%" PRId64, n->clock);
        if (n->has_ar_waiting)
            printf(",\"waiting_for_rank\":%u", n->ar_waiting - 1);
        if (n->has_dropped)
            printf(",\"dropped_late\":%" PRIu64, n->dropped);
        if (n->has_heads)
            printf(",\"heads\":%u,\"holds\":%u", n->heads, n->holds);
        if (n->has_rows)
            printf(",\"rows\":%" PRIu64 ",\"admitted\":%" PRIu64 ",\"not_admitted\":%" PRIu64
                   ",\"evicted\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"rss\":%" PRIu64,
                   n->rows, n->admitted, n->not_admitted, n->evicted, n->bytes, n->rss_bytes);
        if (n->has_evals)
            printf(",\"evals\":%" PRIu64 ",\"eval_clock\":%" PRId64 ",\"val_loss\":%.17g,"
                   "\"val_accuracy\":%.17g", n->evals, n->eval_clock, n->val_loss,
                   n->val_accuracy);
        if (n->has_val_auc)
            printf(",\"val_auc\":%.17g", n->val_auc);
        if (n->role == PSKV__ROLE__WORKER)
            json_traffic(n);
        size_t nns = n->n_ns_names < n->n_ns_bytes ? n->n_ns_names : n->n_ns_bytes;
        nns = nns < n->n_ns_quota ? nns : n->n_ns_quota;
        for (size_t k = 0; k < nns; k++) {
            printf("%s{\"name\":", k ? "," : ",\"namespaces\":[");
            json_str(n->ns_names[k]);
            printf(",\"bytes\":%" PRIu64 ",\"quota\":%" PRIu64 "}%s", n->ns_bytes[k],
                   n->ns_quota[k], k + 1 == nns ? "]" : "");
        }
        ctl_detect_json_node(n);
        printf(",\"insecure\":%s,\"refused\":", n->insecure ? "true" : "false");
        json_refusals(n->refusals, n->n_refusals);
        putchar('}');
    }
    printf("],\"evaluators\":%u,\"stopped_early\":%s,\"early_stop\":", v->evaluators,
           v->stop_early ? "true" : "false");
    json_str(v->stop_early ? v->stop_reason : v->early_stop ? v->early_stop : "");
    printf(",\"best_checkpoint\":");
    json_str(v->best_checkpoint ? v->best_checkpoint : "");
    printf(",\"keys\":%s,\"insecure\":%s,\"refused\":", v->keys ? "true" : "false",
           v->insecure ? "true" : "false");
    json_refusals(v->refusals, v->n_refusals);
    ctl_detect_json_view(v);
    json_groups(v);
    printf(",\"forgotten\":%" PRIu64 ",\"partitions\":%u,\"replicas\":%u,\"vnodes\":%u,"
           "\"lost\":%u,\"chains\":[", v->forgotten, v->partitions, v->replicas, v->vnodes,
           v->lost);
    for (uint32_t p = 0; v->replicas && p < v->n_chains / v->replicas; p++) {
        printf("%s[", p ? "," : "");
        for (uint32_t j = 0; j < v->replicas; j++)
            printf("%s%u", j ? "," : "", v->chains[(size_t)p * v->replicas + j]);
        putchar(']');
    }
    printf("]}\n");
}

/* Keys on or off, who runs --insecure, and the refusals of peers per reason. */
static void print_security(const Pskv__View *v)
{
    char text[256];
    printf("security: %s\n", v->keys ? "CURVE keys on every socket"
                                     : "no keys (loopback only, unless --insecure)");
    if (v->insecure)
        printf("WARNING: the scheduler runs with --insecure: no authentication, no encryption\n");
    for (size_t i = 0; i < v->n_nodes; i++)
        if (v->nodes[i]->insecure)
            printf("WARNING: %s node %u runs with --insecure\n", role_name(v->nodes[i]->role),
                   v->nodes[i]->id);
    refusals_text(v->refusals, v->n_refusals, text, sizeof text);
    if (*text)
        printf("refused by the scheduler: %s\n", text);
    for (size_t i = 0; i < v->n_nodes; i++) {
        refusals_text(v->nodes[i]->refusals, v->nodes[i]->n_refusals, text, sizeof text);
        if (*text)
            printf("refused by %s node %u: %s\n", role_name(v->nodes[i]->role),
                   v->nodes[i]->id, text);
    }
}

static void print_table(const Pskv__Meta *m)
{
    const Pskv__View *v = m->view;
    int ns = 0, nw = 0;
    for (size_t i = 0; i < v->n_nodes; i++) {
        ns += v->nodes[i]->role == PSKV__ROLE__SERVER;
        nw += v->nodes[i]->role == PSKV__ROLE__WORKER;
    }
    printf("job %" PRIu64 "  state %s  epoch %" PRIu64 "  servers %d/%u  workers %d/%u  "
           "heartbeat %u ms\n",
           m->job_id, v->state ? v->state : "?", v->epoch, ns, v->servers, nw, v->workers,
           v->heartbeat_ms);
    printf("%-4s %-7s %-5s %-22s %-8s %-9s %-6s %-12s %-8s %s\n", "ID", "ROLE", "RANK", "ADDRESS",
           "PID", "STATE", "ALIVE", "HEARTBEAT", "CLOCK", "HEADS/HOLDS / LATE DROPS");
    for (size_t i = 0; i < v->n_nodes; i++) {
        const Pskv__Node *n = v->nodes[i];
        char addr[160], hb[32], range[112] = "-", clock[24] = "-";
        snprintf(addr, sizeof addr, "%s:%u", n->host ? n->host : "?", n->port);
        snprintf(hb, sizeof hb, "%" PRId64 " ms ago", n->heartbeat_age_ms);
        if (n->has_clock || n->has_evals)
            snprintf(clock, sizeof clock, "%" PRId64, n->has_clock ? n->clock : n->eval_clock);
        if (n->has_evals) {
            char auc[32] = "";
            if (n->has_val_auc)
                snprintf(auc, sizeof auc, " val_auc %.4f", n->val_auc);
            snprintf(range, sizeof range, "%" PRIu64 " evals: val_loss %.4f val_accuracy %.4f%s",
                     n->evals, n->val_loss, n->val_accuracy, auc);
        }
        if (n->has_heads)
            snprintf(range, sizeof range, "%u/%u / %" PRIu64, n->heads, n->holds, n->dropped);
        if (n->has_pipe_stage)
            snprintf(range, sizeof range, "stage %u of pipeline %u", n->pipe_stage,
                     n->pipe_pipeline);
        if (n->has_balance_batch)
            snprintf(range, sizeof range, "batch %u, %.1f us per example", n->balance_batch,
                     n->has_balance_us ? n->balance_us : 0.0);
        if (n->has_pipe_stage && n->has_stage_layers)
            snprintf(range, sizeof range, "stage %u, layers %u..%u, %.3f ms", n->pipe_stage,
                     n->stage_layers >> 16, (n->stage_layers & 0xffff) - 1,
                     n->has_stage_ms ? n->stage_ms : 0.0);
        if (n->has_ar_waiting)
            snprintf(range, sizeof range, "waiting for rank %u to be taken over",
                     n->ar_waiting - 1);
        printf("%-4u %-7s %-5d %-22s %-8u %-9s %-6s %-12s %-8s %s\n", n->id, role_name(n->role),
               n->rank, addr, n->pid, n->state ? n->state : "?", n->alive ? "yes" : "NO", hb,
               clock, range);
    }
    /* the slowest worker still in the clock set, and late drops over all servers */
    const Pskv__Node *slow = ctl_slowest_worker(v);
    uint64_t dropped = 0;
    for (size_t i = 0; i < v->n_nodes; i++)
        dropped += v->nodes[i]->dropped;
    ctl_detect_print(v);
    ctl_group_print(v);
    print_tables(v);
    print_namespaces(v);
    print_traffic(v);
    if (slow)
        printf("slowest worker: rank %d at clock %" PRId64 "; pushes dropped as late: %" PRIu64
               "\n", slow->rank, slow->clock, dropped);
    if (v->stop_early || v->early_stop)
        printf("early stopping: %s\n", v->stop_early ? v->stop_reason : v->early_stop);
    if (v->best_checkpoint)
        printf("best checkpoint: %s\n", v->best_checkpoint);
    if (v->forgotten)
        printf("forgotten: %" PRIu64 " nodes that left the job for good (not listed)\n",
               v->forgotten);
    print_security(v);
    uint32_t R = v->replicas, np = R ? (uint32_t)(v->n_chains / R) : 0;
    if (!np)
        return;
    printf("ring: %u partitions, %u tokens per server, chains of %u (head first)%s", np,
           v->vnodes, R, v->lost ? "" : "\n");
    if (v->lost)
        printf("; %u partitions LOST (no live replica holds them whole)\n", v->lost);
    for (uint32_t p = 0; p < np; p++) {
        char cell[64];
        int at = snprintf(cell, sizeof cell, "%u:", p);
        for (uint32_t j = 0; j < R && at < (int)sizeof cell; j++) {
            uint32_t id = v->chains[(size_t)p * R + j];
            at += snprintf(cell + at, sizeof cell - (size_t)at, "%s%s", j ? ">" : "",
                           id ? "" : "-");
            if (id && at < (int)sizeof cell)
                at += snprintf(cell + at, sizeof cell - (size_t)at, "%u", id);
        }
        printf("%-14s%s", cell, p % 8 == 7 || p + 1 == np ? "\n" : "");
    }
}

int main(int argc, char **argv)
{
    cfg_args args;
    const char *usage = "pskvctl [--scheduler HOST:PORT] [--keys DIR] status [--json] | checkpoint"
                        " [--group G] | top [--interval S] [--count N] [--plain]\n"
                        "       pskvctl status --study STUDY.db\n"
                        "       pskvctl [--scheduler HOST:PORT] [--keys DIR] drain NODE "
                        "[--drain-timeout S]\n"
                        "       pskvctl [--scheduler HOST:PORT] [--keys DIR] shutdown | stop GROUP"
                        " | drop NAMESPACE\n"
                        "       pskvctl keygen --role ROLE --out DIR\n"
                        "       pskvctl keys init DIR --servers S --workers W\n"
                        "       pskvctl export --checkpoint N --from DIR[,DIR...] [--namespace NS] "
                        "--out PATH";
    int rc = cfg_start(config, "ctl", usage, argc, argv, &args);
    if (rc >= 0)
        return rc;
    if (args.npos >= 1 && (!strcmp(args.pos[0], "keygen") || !strcmp(args.pos[0], "keys")))
        return key_command(&args, usage);
    if (args.npos >= 1 && !strcmp(args.pos[0], "export"))
        return export_command(&args, usage);
    int ckpt = args.npos == 1 && !strcmp(args.pos[0], "checkpoint");
    int top = args.npos == 1 && !strcmp(args.pos[0], "top");
    int drain = args.npos >= 1 && !strcmp(args.pos[0], "drain");
    int shutdown = args.npos == 1 && !strcmp(args.pos[0], "shutdown");
    int stop = args.npos >= 1 && !strcmp(args.pos[0], "stop");
    int dropns = args.npos >= 1 && !strcmp(args.pos[0], "drop");
    if ((stop || dropns) && args.npos != 2) {
        fprintf(stderr, "pskvctl %s: needs one %s (its name, as pskvctl status shows it)\n"
                "usage: %s\n", args.pos[0], stop ? "GROUP" : "NAMESPACE", usage);
        return 2;
    }
    if (drain && args.npos != 2) {
        fprintf(stderr, "pskvctl drain: needs one NODE (the server's id, or HOST:PORT, as "
                "pskvctl status shows it)\nusage: %s\n", usage);
        return 2;
    }
    if (!drain && !stop && !dropns && !shutdown &&
        (args.npos != 1 || (strcmp(args.pos[0], "status") != 0 && !ckpt && !top))) {
        fprintf(stderr, "pskvctl: expected one command: status, checkpoint, top, drain, "
                "shutdown, stop, drop, keygen, keys init or export\n"
                "usage: %s\n",
                usage);
        return 2;
    }
    if (*cfg_str(config, "study")) {
        if (args.npos != 1 || strcmp(args.pos[0], "status") != 0 || cfg_int(config, "json")) {
            fprintf(stderr, "pskvctl: --study goes with status only, without --json "
                    "(pskv-tune export --csv is the study for tools)\nusage: %s\n", usage);
            return 2;
        }
        return ctl_study_status(cfg_str(config, "study"));
    }
    const char *sched = cfg_str(config, "scheduler");
    char host[256];
    int port;
    if (net_split_hostport(sched, host, sizeof host, &port) < 0) {
        fprintf(stderr, "pskvctl: --scheduler '%s' is not HOST:PORT\n", sched);
        return 2;
    }
    keyset ks;
    int keyed = *cfg_str(config, "keys") != '\0';
    char why[512];
    if (keyed && keys_load(&ks, cfg_str(config, "keys"), 0, why, sizeof why) < 0) {
        fprintf(stderr, "pskvctl: --keys: %s\n", why);
        return 2;
    }
    void *ctx = zmq_ctx_new();
    void *s = net_socket(ctx, ZMQ_DEALER, 64 << 20, 0);
    if (keyed) {
        net_curve_client(s, &ks, ks.sched_pub);
        keys_clear(&ks);
    }
    net_connect(s, host, port);
    if (top) {
        int st = ctl_top(s, sched, cfg_double(config, "interval"), (long)cfg_int(config, "count"),
                         (int)cfg_int(config, "plain"),
                         (int)(cfg_double(config, "timeout") * 1000));
        zmq_close(s);
        zmq_ctx_term(ctx);
        return st;
    }
    if (shutdown || stop || dropns) {
        int answer_ms = (int)(cfg_double(config, "timeout") * 1000);
        /* a drop waits for copies under way and every server: the scheduler's bound too */
        int st = shutdown ? ctl_shutdown(s, sched, answer_ms)
                 : stop   ? ctl_stop_group(s, sched, args.pos[1], answer_ms)
                          : ctl_drop_ns(s, sched, args.pos[1], answer_ms + CTL_DROP_WAIT_MS);
        zmq_close(s);
        zmq_ctx_term(ctx);
        return st;
    }
    if (drain) {
        int st = ctl_drain(s, sched, args.pos[1], (int)(cfg_double(config, "timeout") * 1000),
                           (int)(cfg_double(config, "drain-timeout") * 1000));
        zmq_close(s);
        zmq_ctx_term(ctx);
        return st;
    }
    Pskv__Meta req;
    wire_meta_init(&req, ckpt ? PSKV__MSG_TYPE__CHECKPOINT : PSKV__MSG_TYPE__STATUS);
    req.has_request_id = 1;
    req.request_id = 1;
    req.has_delta = ckpt && !cfg_int(config, "delta"); /* a full one unless --delta */
    const char *group = cfg_str(config, "group");
    if (ckpt && *group)
        req.group = (char *)group; /* a checkpoint of that group's namespace */
    wire_send(s, NULL, &req, NULL, NULL);
    /* a checkpoint writes every server's data: it may take much longer */
    int timeout_ms = (int)(cfg_double(config, "timeout") * 1000) * (ckpt ? 60 : 1);
    zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
    int status = 1;
    if (zmq_poll(&it, 1, timeout_ms) <= 0) {
        fprintf(stderr, "pskvctl: no answer from scheduler %s within %.1f s%s\n", sched,
                timeout_ms / 1000.0,
                keyed ? " (is its key the one in scheduler.pub, and this key in its authorized?)"
                      : " (if it runs with --keys, pass --keys DIR)");
    } else {
        wire_msg msg;
        rc = wire_recv(s, 0, &msg, why, sizeof why);
        if (rc < 0) {
            fprintf(stderr, "pskvctl: bad answer from %s: %s\n", sched, why);
        } else if (msg.meta->type == PSKV__MSG_TYPE__ERROR) {
            fprintf(stderr, "pskvctl: %s: %s\n", ckpt ? "checkpoint failed" : "scheduler refused",
                    msg.meta->error ? msg.meta->error : "error");
        } else if (ckpt && msg.meta->type == PSKV__MSG_TYPE__CHECKPOINT_ACK) {
            if (*group)
                printf("checkpoint %llu of group %s complete\n", (unsigned long long)msg.meta->seq,
                       group);
            else
                printf("checkpoint %llu complete\n", (unsigned long long)msg.meta->seq);
            status = 0;
        } else if (msg.meta->type != PSKV__MSG_TYPE__STATUS_REPLY || !msg.meta->view) {
            fprintf(stderr, "pskvctl: unexpected %s from %s\n",
                    wire_type_name((int)msg.meta->type), sched);
        } else {
            if (cfg_int(config, "json"))
                print_json(msg.meta);
            else
                print_table(msg.meta);
            status = 0;
        }
        wire_msg_close(&msg);
    }
    zmq_close(s);
    zmq_ctx_term(ctx);
    return status;
}
