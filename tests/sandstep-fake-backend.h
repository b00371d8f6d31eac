/* sandstep-fake-backend.h: a backend in this process, for tests that need no jail.
 *
 * It serves the whole backend interface (sandstep-backend.h) with the
 * rules a caller can see: get-or-create by holder, one holder at a time
 * (BUSY names the holder), another owner refused, a lifetime, paths only
 * under /workspace and /tmp, a read limit that refuses with the size.  Its
 * sandboxes are plain directories under @dir and its commands run with
 * /bin/sh -c in their workspace, on the host, without namespaces: a test of
 * the tools, the MCP server or the agent loop runs anywhere with it.  It is
 * no jail; nothing about isolation can be tested through it.
 */
#pragma once

#include "sandstep-backend.h"

G_BEGIN_DECLS

/* A backend whose sandboxes live under @dir (which it creates). */
SandstepBackend *sandstep_fake_backend_new (const char *dir);

/* The host directory that is @handle's /workspace, or NULL. */
char *sandstep_fake_backend_workspace (SandstepBackend *backend, const char *handle);

G_END_DECLS
