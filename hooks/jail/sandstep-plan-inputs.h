/* sandstep-plan-inputs.h: what a sandbox's plan was compiled from, and whether it still is.
 *
 * The helper compiles a sandbox's plan once and keeps it beside the record
 * (sandstep-supervision.h), so that a first command's front can start the
 * supervisor without the helper.  A kept plan names the host paths it was
 * compiled from, each as much as the plan depends on it: the record, the
 * /etc files it copied and pasta whole (their device, inode, type, size and
 * change time), what it binds live (a data mount, an /etc directory: which
 * file it is, not what it holds), what it only probed for (a /proc entry:
 * whether it is there).  The supervisor refuses a kept plan whose inputs
 * changed since, and the front then lets the helper compile a fresh one.
 * GLib's core only: the static supervisor links it.
 */
#pragma once

#include <glib.h>
#include <sys/stat.h>

G_BEGIN_DECLS

typedef enum {
  SANDSTEP_PLAN_INPUT_PRESENCE,   /* probed: there or not, and its type */
  SANDSTEP_PLAN_INPUT_IDENTITY,   /* bound live: which file it is (device, inode, type) */
  SANDSTEP_PLAN_INPUT_CONTENT,    /* copied or run: also its size and change time */
} SandstepPlanInputLevel;

/* path, level, followed (stat, not lstat), device, inode, type (S_IFMT bits), size, change time in ns */
#define SANDSTEP_PLAN_INPUTS_TYPE "a(ayybttutx)"

/* Adds @path as @seen shows it (taken before the plan read it), or as it is now when @seen is NULL; @follow:
 * through a symbolic link.  One that does not exist is recorded as absent, so that its appearing counts as a
 * change. */
void sandstep_plan_inputs_add (GVariantBuilder *inputs, const char *path, SandstepPlanInputLevel level,
                               gboolean follow, const struct stat *seen);

/* NULL when every input of @inputs is as the plan needs it; else the first path that changed (owned by
 * @inputs). */
const char *sandstep_plan_inputs_changed (GVariant *inputs);

G_END_DECLS
