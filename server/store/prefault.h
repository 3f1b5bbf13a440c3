/* Page faults off the push path: one thread per process, started on first use,
 * that faults in (MADV_POPULATE_WRITE) the pages a sparse shard will write next
 * (its doubled map, its records and dirty bits ahead of the rows in use) and
 * gives back the maps a shard is done with. On the virtual machine of
 * docs/benchmarks.md a fresh 2 MiB page costs 4-7 ms to fault in, so a push that
 * faults one in itself cannot stay under 10 ms at 10^8 rows.
 *
 * OWNS   a mapping handed to prefault_release, from the call on.
 * THREAD any thread may call; the requests are served in order by the helper.
 * NEVER  writes a byte: populating leaves the contents as they were, so a range
 *        unmapped or moved meanwhile (prefault_moved) costs at most a 2 MiB slice
 *        of whatever was mapped there after, never a wrong value. */
#ifndef PSKV_PREFAULT_H
#define PSKV_PREFAULT_H

#include <stddef.h>
#include <stdint.h>

/* Asks for [p, p + len) (of a private anonymous mapping) to be faulted in
 * writable by the helper, 2 MiB at a time, dropped when prefault_moved is called
 * meanwhile. Returns 0, or -1 when the request was not queued (the queue full,
 * no helper thread, or a kernel without MADV_POPULATE_WRITE): the writer then
 * faults the pages in itself, as without. */
int prefault_ask(void *p, size_t len);

/* The mapping [p, p + len) (from mmap) is the helper's: it gives its pages back
 * a slice at a time and unmaps it. Unmapped at once when the helper is not
 * there. NULL: nothing. */
void prefault_release(void *p, size_t len);

/* To call before unmapping or moving (mremap) a mapping asked for: drops every
 * request still queued or under way (they are asked again). */
void prefault_moved(void);

/* Changes with each prefault_moved: a request asked when it was e is dropped
 * unless it is still e (for asking again). */
uint64_t prefault_epoch(void);

/* 1 when nothing is queued or under way (tests). */
int prefault_idle(void);

#endif
