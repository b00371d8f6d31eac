/* sandstepd-e2b-code-worker.h: the worker's end of E2B's runCode (sandstepd-e2b-code.c is the daemon's): one
 * run_python session (operators/sandstep-python.h) on the claim the worker holds, kept between calls. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "sandstep-backend.h"

G_BEGIN_DECLS

/* The worker's "python" operation: @m's "code" in @attachment's session (started on the first call), its output
 * written to @fds[0] (stdout) and @fds[1] (stderr) as it comes; the reply says how it ended ("value", "traceback",
 * "restarted", "timedOut", "died", "exitStatus", "memoryLimitHit", "pidsLimitHit", "failure", "stderr"). */
JsonObject *sandstepd_e2b_code_worker_run (SandstepAttachment *attachment, JsonObject *m, const int *fds,
                                           guint n_fds);
/* Ends the session, with everything it started, before the worker detaches from its claim. */
void sandstepd_e2b_code_worker_end (void);

G_END_DECLS
