/* sandstep-data-files.h: read_file and list_directory on the read-only data under /data.
 *
 * The host-side file tools reach only a sandbox's own tree (/workspace,
 * /tmp); the data mounts (--mount=HOSTPATH:/data/NAME) are host paths bound
 * into the jail.  So the file tools read them from inside, through one
 * command each, as Airflow's default recipes do over run_command: the jail's
 * view and its read-only binds apply, and no host path is ever opened on a
 * name the model gave.  Refusals are SANDSTEP_PATH_ERRORs, as from the tree.
 */
#pragma once

#include <glib.h>

#include "sandstep-backend.h"

G_BEGIN_DECLS

/* How long one read or listing may take. */
#define SANDSTEP_DATA_TIMEOUT_S 120.0

/* Runs one recipe's command in the sandbox, as run_command would run it
 * (sandstep_attachment_run_command(), or through a live interpreter). */
typedef gboolean (*SandstepDataRunner) (gpointer run_data, const SandstepRunRequest *request,
                                        SandstepRunResult *result, GError **error);

/* TRUE when @path (absolute, or relative to /workspace) names /data or lies
 * under it and the sandbox has data mounts; *out_absolute gets it resolved
 * lexically ("." and ".." removed). */
gboolean sandstep_data_path (const SandstepSpec *spec, const char *path, char **out_absolute);

/* The bytes of the file at @absolute, refused over @max_bytes
 * (SANDSTEP_PATH_ERROR_TOO_LARGE with the size). */
GBytes *sandstep_data_read_file (SandstepDataRunner run, gpointer run_data, const char *absolute, gsize max_bytes,
                                 GError **error);

/* The entries (SandstepDirEntry) of the directory @absolute; a link to a
 * directory is no directory, as in Airflow's listing. */
GPtrArray *sandstep_data_list_directory (SandstepDataRunner run, gpointer run_data, const char *absolute,
                                        GError **error);

G_END_DECLS
