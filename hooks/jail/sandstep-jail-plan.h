/* sandstep-jail-plan.h: compiling a sandbox's spec into its jail, in the helper.
 *
 * Paths are checked, the host's /etc read, limits and environment worked
 * out here, where the record and its spec are at hand; the jail is then
 * built from what sandstep_jail_to_image() and sandstep_jail_to_variant()
 * make of it (sandstep-jail.h).
 */
#pragma once

#include <glib.h>

#include "sandstep-jail.h"
#include "sandstep-spec.h"

G_BEGIN_DECLS

typedef struct {
  const char *workspace;     /* host directory seen as /workspace (cwd, HOME) */
  const char *tmp;           /* host directory seen as /tmp */
  const SandstepSpec *spec;  /* network, env, secrets, mounts, limits */
  gboolean memory_by_rlimit; /* no cgroup limits the sandbox's memory: bound each process */
  guint32 outer_uid;         /* the host uid and gid of the sandbox's uid 0 */
  guint32 outer_gid;
  gboolean idmap;            /* show the trees through idmapped mounts (needs root) */
  GVariantBuilder *inputs;   /* if not NULL, gets each host file read (sandstep-plan-inputs.h) */
  /* The root from an image instead of the host's /usr and a generated /etc: */
  const char *const *image_layers;  /* its unpacked layers' host directories, lowest first; NULL: none */
  const char *const *image_env;     /* its config's Env, NAME=VALUE: the base the spec's env overrides */
  const char *image_rw;             /* host directory with upper/ and work/: the sandbox's own writable
                                     * layer; NULL: a read-only root */
  /* A layered sandbox (forked, or with checkpoints: sandstep-store.h), whose files are overlayfs instead: */
  const char *const *tree_layers;   /* its frozen layers' host directories, top first, each with tree/ (workspace/,
                                     * tmp/) and root/ (an image root's changes); NULL: not layered */
  const char *rw;                   /* with tree_layers: the writable layers' host directory: tree/, tree-work/,
                                     * root/, root-work/ (workspace, tmp and image_rw are not used) */
} SandstepJailConfig;

/* Compiles a jail: paths checked, host files read.  The helper side. */
SandstepJail *sandstep_jail_new (const SandstepJailConfig *config, GError **error);

G_END_DECLS
