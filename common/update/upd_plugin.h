/* Updater plug-ins: loads a shared object named by `plugin:PATH[:ARGS]` with
 * dlopen, checks its ABI (pskv_updater.h) and holds it for one table; and
 * upd_plugin_selftest, which runs a plug-in on canned inputs
 * (pskv-server --updater-check).
 *
 * OWNS one dlopen handle and the plug-in's context per loaded table (dlclose and
 * the plug-in's fini on upd_plugin_destroy); the --plugin-dir, set once at start.
 * A TABLE_OPEN comes from the network: without --plugin-dir no plug-in loads, so a
 * worker cannot make a server run the constructors of any library on its host.
 * THREAD: the server's loop thread (the plug-in's calls run there).
 * NEVER logs; a plug-in that blocks or crashes blocks or crashes the server. */
#ifndef PSKV_UPD_PLUGIN_H
#define PSKV_UPD_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

typedef struct upd_plugin upd_plugin;

/* The server's start: with `check` (--updater-check) runs upd_plugin_selftest and
 * returns the exit status (0, 1, or 2 when it cannot load); else makes `dir`
 * (--plugin-dir; "" = no plug-in loads) the only place plug-ins load from and
 * returns -1 to go on, or 2 after printing why dir is not a directory. */
int upd_plugin_setup(const char *dir, const char *check, void *out);

/* 1 when `updater` names a plug-in ("plugin:..."). */
int upd_plugin_is_spec(const char *updater);

/* Loads spec "plugin:PATH[:ARGS]" for table `table` of `width` values: PATH inside
 * the --plugin-dir (symbolic links resolved), dlopen, the entry symbol, the ABI
 * version, apply present, state within bounds, then the plug-in's init. Returns
 * 0 with *out owned by the caller, or -PSKV_EINVAL with the reason, naming the
 * plug-in, in why. */
int upd_plugin_load(const char *spec, const char *table, uint32_t width, upd_plugin **out,
                    char *why, size_t whylen);

/* Calls the plug-in's fini, dlcloses and nulls *p_p; NULL-safe. */
void upd_plugin_destroy(upd_plugin **p_p);

/* State floats per value the plug-in keeps (0 for NULL). */
int upd_plugin_state(const upd_plugin *p);

/* The plug-in's apply over nrows rows (see pskv_updater.h for the layout). */
void upd_plugin_apply(const upd_plugin *p, float *w, float *state, size_t stride,
                      const float *g, size_t nrows, uint32_t width);

/* The plug-in's finish for clock `clock`, when it has one. */
void upd_plugin_finish(const upd_plugin *p, int64_t clock);

/* Loads spec and runs it on canned inputs (widths 1, 3 and 64; zero, small, large
 * and mixed-sign gradients; a run of rows against the same rows one by one; its
 * finish): prints what it checked to `out` (a FILE *). Returns 0 when every check
 * passed, -PSKV_EINVAL when it cannot be loaded, 1 when a check failed. */
int upd_plugin_selftest(const char *spec, void *out);

#endif
