/* sandstepd-e2b-tokens.h: a sandbox's own tokens (the code interpreter's traffic token, envd's access token),
 * and the signed /files URLs of uploadUrl() and downloadUrl(), made with the envd one (sandstepd-e2b-tokens.c,
 * below the platform API and envd, which both use them). */
#pragma once

#include "sandstepd-private.h"

G_BEGIN_DECLS

/* What a token is for. */
#define SANDSTEPD_E2B_TRAFFIC_TOKEN "traffic"
#define SANDSTEPD_E2B_ENVD_TOKEN "envd"

/* Sandbox @handle's token for @purpose, and whether @token is it (in constant time). */
char *sandstepd_e2b_token (const char *purpose, const char *handle);
gboolean sandstepd_e2b_token_matches (const char *purpose, const char *handle, const char *token);

/* What a sandbox's own token authorizes: the one sandbox its E2b-Sandbox-Id names and the token was made for. */
const SandstepTokenEntry *sandstepd_e2b_sandbox_scope (void);
/* A signed /files URL's, until sandstepd_e2b_signed_sandbox() has found its sandbox: it covers no owner. */
const SandstepTokenEntry *sandstepd_e2b_signed_scope (void);
/* TRUE when @scope is sandstepd_e2b_signed_scope(). */
gboolean sandstepd_e2b_is_signed (const SandstepTokenEntry *scope);

/* The sandbox whose envd access token made @signature of @path, @operation ("read", "write") and @user, with
 * @expiration (NULL: none; else seconds since 1970, not past), among the live sandboxes; NULL with @error
 * otherwise.  Reads the state directory: not on the main loop. */
char *sandstepd_e2b_signed_sandbox (Daemon *d, const char *path, const char *operation, const char *user,
                                    const char *signature, const char *expiration, GError **error);
/* @req (signed) names sandbox @handle and may use it alone, as with its envd access token. */
void sandstepd_e2b_grant_sandbox (Request *req, const char *handle);

G_END_DECLS
