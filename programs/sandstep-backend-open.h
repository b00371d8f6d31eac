/* sandstep-backend-open.h: which backend serves a helper run: the local one, or the remote module. */
#pragma once

#include "sandstep-backend.h"

G_BEGIN_DECLS

/* The backend for one helper run: remote when @backend (from --backend, else
 * $SANDSTEP_BACKEND) is a sandstepd URL or @handle names a server, else
 * local.  The remote backend lives in the module sandstep-remote.so
 * (libsoup), loaded on first use, so that a local step never loads libsoup;
 * it is found beside the running program, at ../hooks/remote/ from it in a
 * build tree, or in libexecdir; in a build tree, the test hook
 * $SANDSTEP_TEST_REMOTE_MODULE overrides all three (sandstep-test-hooks.h). */
SandstepBackend *sandstep_backend_open (const char *backend, const char *handle, GError **error);

G_END_DECLS
