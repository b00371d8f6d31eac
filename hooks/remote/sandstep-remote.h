/* sandstep-remote.h: the backend interface served by a `sandstepd` over HTTP.
 *
 * The remote backend is the client half of sandstepd's API: every vtable
 * entry of SandstepBackendClass is one request (JSON bodies; a command's
 * output, exports and puts stream), and every error comes back with the
 * domain, code and message the local backend gave on the server, so a step
 * reads the same texts and exits with the same status either way.
 *
 * A claim is a lease: attaching opens a streaming request that the server
 * holds for as long as this process keeps the connection; every other call
 * names the claim.  When the process ends (or is killed) the connection
 * drops, the server kills what the claim still runs and ends the claim.
 *
 * A handle from a remote backend names its server:
 *   http://10.0.0.5:7700/sandstep-0123456789abcdef
 * so a later step needs only the handle and the token.
 */
#pragma once

#include <glib.h>

#include "sandstep-backend.h"

G_BEGIN_DECLS

/* A backend talking to the sandstepd at @url (http:// or https://, with an
 * optional path prefix; NULL when every handle names its server).  @token
 * NULL: $SANDSTEP_TOKEN, else the contents of $SANDSTEP_TOKEN_FILE, else
 * none.  Cheap: nothing is contacted until the first call. */
SandstepBackend *sandstep_remote_backend_new (const char *url, const char *token, GError **error);

G_END_DECLS
