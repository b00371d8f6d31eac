/* sandstep-spank-exec.h: running the sandstep helper from slurmstepd and the
 * SPANK epilog as the job's user, with its output captured.
 *
 * slurmstepd is root (or, in user_init, root with the user's effective ids);
 * the helper must run with the job user's real and effective ids and groups,
 * so that the sandboxes it makes are the user's, in the user's state
 * directory.  The child becomes that user fully before it execs.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>
#include <sys/types.h>

G_BEGIN_DECLS

/* The SPANK front-end's errors: what failed in the plugin itself. */
#define SANDSTEP_SPANK_ERROR (sandstep_spank_error_quark ())
GQuark sandstep_spank_error_quark (void);

typedef enum {
  SANDSTEP_SPANK_ERROR_FAILED,     /* a system call of the plugin's own failed */
  SANDSTEP_SPANK_ERROR_BAD_VALUE,  /* an option's value was refused */
  SANDSTEP_SPANK_ERROR_HELPER,     /* the helper failed (its message is in the error) */
} SandstepSpankError;

typedef struct {
  uid_t uid;
  gid_t gid;
  const gid_t *groups;  /* supplementary groups; NULL: none */
  int n_groups;
} SandstepSpankUser;

/* Runs @argv (argv[0] an absolute path) with @envp as @user and waits for it.
 * Its stdout goes to @out (NULL: discarded), its stderr to @err (NULL:
 * discarded); stdin is /dev/null.  Returns FALSE with @error set when it
 * could not be started or waited for; else TRUE with @out_status its wait
 * status. */
gboolean sandstep_spank_run_as (const SandstepSpankUser *user, const char *const *argv, const char *const *envp,
                                GString *out, GString *err, int *out_status, GError **error);

/* The last non-empty line of @text (what a helper said), for a one-line message. */
char *sandstep_spank_last_line (const GString *text);

/* "exited with status N" or "was killed by signal N", for messages. */
char *sandstep_spank_describe_status (int status);

G_END_DECLS
