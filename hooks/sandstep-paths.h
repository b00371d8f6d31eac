/* sandstep-paths.h: where sandstep's programs find each other once installed.
 *
 * meson installs the helper in bindir, sandstepd in sbindir, the internal
 * programs in libexecdir and the make plugin in libdir/sandstep, all under
 * one prefix (SANDSTEP_*_REL: each directory relative to the prefix, or
 * absolute when it is not under it).  A program finds another from where it
 * runs: the same layout below whatever prefix it was installed to, so that
 * a tree staged with DESTDIR, or moved, runs as a whole, and never picks up
 * another install's programs.  The compiled-in absolute paths are the last
 * resort.
 *
 * Plain C: the static front includes it.
 */
#pragma once

#include <stdio.h>
#include <string.h>

/* @self_dir is a program's directory, installed as @self_rel under some
 * prefix; writes that prefix's @target_rel/@name to @out.  Returns 0 when
 * @self_dir does not end in @self_rel (a build tree, or another layout). */
static inline int
sandstep_relocate (const char *self_dir, const char *self_rel, const char *target_rel, const char *name, char *out,
                   size_t size)
{
  size_t dir_len = strlen (self_dir), rel_len = strlen (self_rel);
  int n;

  if (self_rel[0] == '/' || rel_len == 0 || dir_len <= rel_len || self_dir[dir_len - rel_len - 1] != '/' ||
      strcmp (self_dir + dir_len - rel_len, self_rel) != 0)
    return 0;
  if (target_rel[0] == '/')
    n = snprintf (out, size, "%s/%s", target_rel, name);
  else
    n = snprintf (out, size, "%.*s/%s/%s", (int) (dir_len - rel_len - 1), self_dir, target_rel, name);
  return n > 0 && (size_t) n < size;
}
