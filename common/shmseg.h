/* shmseg: POSIX shared-memory segments for the values a worker and a server on the
 * same host exchange without TCP (a worker's --shm; docs/protocol.md "Shared
 * memory"). The worker creates and names a segment (shmseg_create), the server
 * maps it by that name (shmseg_open); both compare host identities first
 * (shmseg_host_id), since a name means nothing on another host or in another
 * network namespace.
 *
 * Names are "/pskv-UID-PID-RANDOM-GEN": the creator's uid and pid (so that a stale
 * segment of a dead process can be found and removed: shmseg_sweep), 128 random
 * bits (nobody maps a segment whose name they were not sent) and a generation.
 *
 * OWNS   nothing: a mapping it returns is the caller's to munmap, a name the
 *        caller's to shm_unlink.
 * THREAD any.
 * NEVER  trusts a name or a segment it did not create: shmseg_open checks the
 *        name's form, the owner (this process's effective uid) and the mode (0600). */
#ifndef PSKV_SHMSEG_H
#define PSKV_SHMSEG_H

#include <stddef.h>
#include <stdint.h>

#define SHMSEG_NAME_MAX 80

/* This host's identity as "BOOT_ID/NETNS_INODE" (the kernel's boot id and the
 * network namespace): two processes may share memory only when theirs are equal.
 * Computed once. Never fails (an unreadable boot id gives "?", which matches
 * nothing, see shmseg_same_host). */
const char *shmseg_host_id(void);

/* Whether `other` names this host (equal to shmseg_host_id and known). */
int shmseg_same_host(const char *other);

/* Whether `name` has the form shmseg_create gives. */
int shmseg_name_ok(const char *name);

/* Creates a segment of `size` bytes, generation `gen`, mode 0600, and maps it
 * read-write: its name into name[SHMSEG_NAME_MAX], the mapping into *base.
 * Returns 0 or -PSKV_EIO (errno's reason in why), nothing left behind. */
int shmseg_create(uint64_t gen, size_t size, char *name, void **base, char *why, size_t whylen);

/* Maps an existing segment read-write: *base and *size. Refuses (-PSKV_ENOSHM,
 * why set) a segment it cannot open, one of another owner than this process's
 * effective uid or readable by others, and a malformed name (-PSKV_ESHMREF). */
int shmseg_open(const char *name, void **base, size_t *size, char *why, size_t whylen);

/* Removes the segments in /dev/shm that this uid's processes created and that
 * outlived them (their pid is gone). Returns how many it removed. */
int shmseg_sweep(void);

#endif
