/* abi1: libpskv.so's 1.0 entry points for the calls that take a pskv_config, whose
 * struct grew after 1.0 (table_namespace, quota_bytes, group, group_size). A program
 * linked against the unversioned 1.0 library passes the 1.0 struct, smaller than
 * today's: the dynamic linker binds its unversioned references to the first version
 * node, PSKV_1 (worker/lib/libpskv.map), so they land here, where only the 1.0
 * prefix is read or written. A program built now binds to the PSKV_2 defaults
 * (wstate.c, open.c), as do dlsym and the Python package.
 *
 * Only the shared library has these: libpskv.a leaves this file out (a static link
 * always uses the header it was compiled against). The rule for a struct that grows
 * again, and the test that holds it (t_abi_1_0), are in docs/extending.md "The ABI". */
#define _GNU_SOURCE
#include "wstate.h"

#include <string.h>

/* The 1.0 struct is today's up to slice_us: its size is table_namespace's offset
 * (that field is a pointer, the struct's widest alignment, so no 1.0 tail padding
 * is lost or gained). Never change: it is what 1.0 programs allocate. */
#define CONFIG_1_0_SIZE offsetof(pskv_config, table_namespace)
_Static_assert(offsetof(pskv_config, slice_us) + sizeof(int) <= CONFIG_1_0_SIZE,
               "the 1.0 pskv_config ends with slice_us");

void abi1_config_init(pskv_config *cfg);
int abi1_worker_open(const pskv_config *cfg_in, pskv_worker **out);

__asm__(".symver abi1_config_init, pskv_config_init@PSKV_1");
__asm__(".symver abi1_worker_open, pskv_worker_open@PSKV_1");

/* pskv_config_init@PSKV_1: today's defaults for the 1.0 fields, nothing past them */
void abi1_config_init(pskv_config *cfg)
{
    pskv_config full;
    pskv_config_init(&full);
    memcpy(cfg, &full, CONFIG_1_0_SIZE);
}

/* pskv_worker_open@PSKV_1: the 1.0 fields as given, the later ones at their
 * defaults (the unnamed namespace and group, no quota) */
int abi1_worker_open(const pskv_config *cfg_in, pskv_worker **out)
{
    if (!cfg_in)
        return pskv_worker_open(NULL, out);
    pskv_config full;
    pskv_config_init(&full);
    memcpy(&full, cfg_in, CONFIG_1_0_SIZE);
    return pskv_worker_open(&full, out);
}
