/* sandstep-handle.h: what a sandbox handle looks like.
 *
 * A local handle is "sandstep-" and 16 lowercase hex digits (the grammar is
 * sandstep-handle-libc.h's, shared with the static front).  A remote one
 * names its server: http(s)://HOST[:PORT][/PREFIX]/sandstep-<16 hex>, so a
 * later step needs only the handle and the token.
 */
#pragma once

#include <glib.h>

#include "sandstep-handle-libc.h"

G_BEGIN_DECLS

/* TRUE for a local handle: "sandstep-" and 16 lowercase hex digits. */
gboolean sandstep_handle_is_local (const char *handle);

/* A new local handle: SANDSTEP_HANDLE_PREFIX and 16 random hex digits. */
char *sandstep_handle_new (void);

/* TRUE if @handle is an http:// or https:// handle (it may still be invalid). */
gboolean sandstep_handle_is_remote (const char *handle);

/* TRUE for a local handle or a well-formed remote one. */
gboolean sandstep_handle_is_valid (const char *handle);

/* @url without a trailing '/' if it is a usable server URL (http or https,
 * a host, an optional port and path prefix, and nothing else), else NULL. */
char *sandstep_server_url_normalize (const char *url);

/* Splits a valid remote handle into its server URL and the handle the server
 * knows ("sandstep-..."); FALSE for anything else. */
gboolean sandstep_handle_split (const char *handle, char **out_server, char **out_local);

/* The text of the handle file @path, as it is (at most
 * SANDSTEP_HANDLE_FILE_MAX bytes, no NUL): never blocks, never reads more
 * than that.  A missing or unreadable file, a FIFO, a device, a directory, a
 * file too large or one with a NUL is SANDSTEP_SANDBOX_ERROR_BAD_HANDLE
 * naming @path; no error quotes more than a short, escaped prefix of what
 * the file holds. */
char *sandstep_handle_read_file (const char *path, GError **error);

G_END_DECLS
