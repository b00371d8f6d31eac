/* sandstep-spank-record.h: what the SPANK front-end keeps of a job's
 * sandbox, so that the end of the job (its last step's exit, or the epilog,
 * a process of its own with no other state) can end it.
 *
 *   RUNDIR/job-JOBID/sandbox-SHA256(HANDLE)
 *     handle=H  owner=O  keep=DURATION  env NAME=VALUE ...
 *
 * Root's alone (a 0700 directory, 0600 files): it may hold the job's token.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "sandstep-spank-exec.h"

G_BEGIN_DECLS

/* Records @handle of job @job_id; @env (NAME=VALUE, NULL-terminated) is the
 * helper's environment at the end; @keep NULL: destroy then. */
gboolean sandstep_spank_record_write (const char *rundir, uint32_t job_id, const char *handle, const char *owner,
                                      const char *keep, const char *const *env, GError **error);

/* Ends every sandbox recorded for @job_id, running @helper as @user
 * (`destroy`, or `release --keep`), and removes the records of those it
 * ended.  Returns the messages of those it could not end (their records
 * stay, for the next sweep or for a person). */
GPtrArray *sandstep_spank_records_end (const char *rundir, uint32_t job_id, const SandstepSpankUser *user,
                                       const char *helper);

G_END_DECLS
