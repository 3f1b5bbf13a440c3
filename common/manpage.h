/* manpage: a program's manual page (man(7) roff), written from the same
 * configuration table that drives its flags, environment and --help, so the two
 * never disagree. `PROGRAM --man` prints it (cfg_parse); `make` writes
 * build/man/man1/PROGRAM.1 that way. `PROGRAM --markdown` prints the same page
 * as markdown; `make docs` writes docs/reference/PROGRAM.md that way.
 *
 * OWNS   nothing: the table and usage are the caller's.
 * THREAD any; writes only to `stream`.
 * NEVER  allocates, never exits. */
#ifndef PSKV_MANPAGE_H
#define PSKV_MANPAGE_H

#include "config.h"

/* Writes the page of program `prog` (a path; its base name is used) to `stream`
 * (a FILE *): NAME, SYNOPSIS (usage), DESCRIPTION, OPTIONS (each number's range
 * as the parser checks it) and ENVIRONMENT from `tab`, EXIT STATUS, FILES and SEE ALSO. */
void man_write(const cfg_entry *tab, const char *prog, const char *usage, void *stream);

/* As man_write, in markdown (GitHub's dialect: the options are one table).
 * Hidden, so that libpskv.so (which links common/) exports no new symbol. */
__attribute__((visibility("hidden"))) void man_write_markdown(const cfg_entry *tab,
                                                              const char *prog,
                                                              const char *usage, void *stream);

#endif
