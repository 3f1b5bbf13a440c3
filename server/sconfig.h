/* sconfig: pskv-server's configuration table: its flags, environment variables,
 * defaults and bounds, which drive parsing, --help, --man and the settings log
 * (common/config). main.c parses it once at start.
 *
 * OWNS   the table's entries (common/config writes the effective values into them).
 * THREAD the main thread parses it before any other thread runs; read-only after.
 * NEVER  holds logic: what a setting does is the server's. */
#ifndef PSKV_SCONFIG_H
#define PSKV_SCONFIG_H

#include "config.h"

extern cfg_entry server_config[];

#endif
