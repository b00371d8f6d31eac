/* sandstep-plan-inputs.h: what a sandbox's plan was compiled from, and whether it still is.
 *
 * The helper compiles a sandbox's plan once and keeps it beside the record
 * (sandstep-supervision.h), so that a first command's front can start the
 * supervisor without the helper.  A kept plan names the host files it was
 * compiled from (the record, the /etc entries it copied, the data mounts,
 * pasta) with each one's identity: device, inode, size and change time.
 * The supervisor refuses a plan whose inputs changed since, and the front
 * then lets the helper compile a fresh one.  GLib's core only: the static
 * supervisor links it.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The type of a list of inputs: path, followed (stat, not lstat), device, inode, size, change time in ns. */
#define SANDSTEP_PLAN_INPUTS_TYPE "a(aybtttx)"

/* Adds @path as it is now; @follow: through a symbolic link.  One that does not exist is recorded as
 * absent, so that its appearing counts as a change. */
void sandstep_plan_inputs_add (GVariantBuilder *inputs, const char *path, gboolean follow);

/* NULL when every input of @inputs is as it was; else the first path that changed (owned by @inputs). */
const char *sandstep_plan_inputs_changed (GVariant *inputs);

G_END_DECLS
