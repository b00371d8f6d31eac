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

/* Where a client finds the token: never on the command line. */
#define SANDSTEP_TOKEN_ENV "SANDSTEP_TOKEN"
#define SANDSTEP_TOKEN_FILE_ENV "SANDSTEP_TOKEN_FILE"
/* The backend to use when --backend is not given: "local", or a sandstepd URL. */
#define SANDSTEP_BACKEND_ENV "SANDSTEP_BACKEND"
/* A PEM file of CA certificates to trust for https:// servers (default: the system's). */
#define SANDSTEP_CA_FILE_ENV "SANDSTEP_CA_FILE"

/* A backend talking to the sandstepd at @url (http:// or https://, with an
 * optional path prefix; NULL when every handle names its server).  @token
 * NULL: $SANDSTEP_TOKEN, else the contents of $SANDSTEP_TOKEN_FILE, else
 * none.  Cheap: nothing is contacted until the first call. */
SandstepBackend *sandstep_remote_backend_new (const char *url, const char *token, GError **error);

/* TRUE if @handle is an http:// or https:// handle (it may still be invalid). */
gboolean sandstep_handle_is_remote (const char *handle);

/* @url without a trailing '/' if it is a usable server URL (http or https,
 * a host, an optional port and path prefix, and nothing else), else NULL. */
char *sandstep_remote_server_normalize (const char *url);

/* Splits a valid remote handle into its server URL and the handle the server
 * knows ("sandstep-..."); FALSE for anything else. */
gboolean sandstep_remote_handle_split (const char *handle, char **out_server, char **out_local);

/* The backend for one helper run: remote when @backend (from --backend, else
 * $SANDSTEP_BACKEND) is a URL or @handle names a server, else local.  The
 * remote backend lives in the module sandstep-remote.so (libsoup), loaded
 * here on first use (sandstep-remote-open.c); sandstep_remote_backend_new()
 * is defined in that module only. */
SandstepBackend *sandstep_backend_open (const char *backend, const char *handle, GError **error);

G_END_DECLS
