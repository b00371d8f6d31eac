/* sandstep-state-dir.h: where the state directory is, for the programs that link GLib.
 *
 * The rule is sandstep_state_dir_default() (sandstep-trust-libc.h), which the static front shares; GLib adds a
 * home for a caller without HOME (the password file's).  The local store and the image store both live there.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The state directory, as written (not resolved); never NULL. */
char *sandstep_state_dir (void);

G_END_DECLS
