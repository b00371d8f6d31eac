/* sandstep-programs-libc.h: where one of sandstep's programs is, seen from another.
 *
 * Every program and module that starts or loads another (the front, the
 * helper, the supervisor, sandstepd, the make and Slurm plugins) asks this
 * one rule, so that they all look in the same places in the same order:
 *
 *   0  beside the caller (@from_dir: the directory of the running program,
 *      or of the loaded module);
 *   1  in this build tree, where the build puts the program, when the caller
 *      runs from inside the build tree;
 *   2  in the directory the program is installed to under the prefix the
 *      caller was installed to (the caller's directory ends in bindir,
 *      sbindir, libexecdir or the plugin directory: sandstep-paths.h), so
 *      that a tree staged with DESTDIR, or moved, runs as a whole;
 *   3  in the directory compiled in for it.
 *
 * The programs and where each lives are the table in sandstep-programs-libc.c.
 *
 * Plain C: the static front links it.
 */
#pragma once

#include <stddef.h>

#define SANDSTEP_PROGRAM_CANDIDATES 4

/* Writes the @i-th place (0 .. SANDSTEP_PROGRAM_CANDIDATES - 1) where @name may be, seen from @from_dir (NULL:
 * unknown), to @out.  Returns 1 when written, 0 when that place does not apply (or does not fit), -1 past the
 * last. */
int sandstep_program_candidate (int i, const char *from_dir, const char *name, char *out, size_t size);

/* The compiled-in place of @name (candidate 3), for messages: "reinstall, or put it in ...". */
const char *sandstep_program_installed_dir (const char *name);

/* The first candidate that is an executable file (or, for a module, a file), else the compiled-in place; in
 * malloc()ed memory (NULL when out of memory).  @from_dir NULL: this program's own directory. */
char *sandstep_program_path (const char *from_dir, const char *name);
