/* sconfig: pskv-server's flag table (contract in sconfig.h). */
#include "sconfig.h"

cfg_entry server_config[] = {
    {"scheduler", CFG_STR, "127.0.0.1:7700", "PSKV_SCHEDULER", 1, 0, NULL,
     "scheduler address HOST:PORT", 0, 0, NULL, NULL},
    {"advertise-port", CFG_INT, "0", "PSKV_SERVER_ADVERTISE_PORT", 0, 65535, NULL,
     "port other nodes dial, when a proxy or NAT forwards to --port (0 = the bound port)", 0,
     0, NULL, NULL},
    {"blas-threads", CFG_INT, "1", "PSKV_SERVER_BLAS_THREADS", 1, 256, NULL,
     "OpenBLAS threads for updates", 0, 0, NULL, NULL},
    {"slice-us", CFG_INT, "100", "PSKV_SERVER_SLICE_US", 0, 100000, "us",
     "scheduling slice this server's threads ask the kernel for (Linux 6.12 or later, which "
     "grants 100 to 100000): a short one lets a woken server run at once on cores busy with "
     "workers' compute instead of waiting out their slice; 0 = the kernel's default", 0, 0,
     NULL, NULL},
    {"join-timeout", CFG_DOUBLE, "600", "PSKV_SERVER_JOIN_TIMEOUT", 1, 86400, "s",
     "how long to wait for the cluster to be complete", 0, 0, NULL, NULL},
    {"job-id", CFG_INT, "0", "PSKV_JOB_ID", 0, 9.2e18, NULL,
     "job to join (0 = the scheduler's)", 0, 0, NULL, NULL},
    {"data-dir", CFG_STR, "", "PSKV_SERVER_DATA_DIR", 0, 0, NULL,
     "directory for this server's checkpoint files (empty = no checkpoints)", 0, 0, NULL,
     NULL},
    {"socket-buffer", CFG_INT, "0", "PSKV_SERVER_SOCKET_BUFFER", 0, 1073741824, "bytes",
     "kernel send and receive buffer of each connection to the data socket (0 = the "
     "kernel's default, auto-tuned)", 0, 0, NULL, NULL},
    {"plugin-dir", CFG_STR, "", "PSKV_SERVER_PLUGIN_DIR", 0, 0, NULL, "updater plug-ins load "
     "only from this directory (empty = none load)", 0, 0, NULL, NULL},
    {"updater-check", CFG_STR, "", NULL, 0, 0, NULL, "run plug-in plugin:PATH[:ARGS] on canned "
     "inputs and exit (0 passed, 1 failed, 2 cannot load); joins no job", 0, 0, NULL, NULL},
    CFG_METRICS_ENTRY("PSKV_SERVER_METRICS_PORT"),
    CFG_COMMON_ENTRIES("PSKV_SERVER_PORT", "0"),
    CFG_END};
