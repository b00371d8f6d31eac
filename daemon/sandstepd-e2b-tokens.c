/* sandstepd-e2b-tokens.c: a sandbox's own tokens, and the signed URLs made with one; see the header.
 *
 * @e2b/code-interpreter sends its contexts calls no API key, only the trafficAccessToken of the create or
 * connect answer (E2B-Traffic-Access-Token); every SDK sends envd's calls the envdAccessToken of that answer
 * (X-Access-Token) and signs uploadUrl()'s and downloadUrl()'s URLs with it.  Each is an HMAC of the sandbox's
 * handle and its purpose under a key this process draws at its start: it names one sandbox, is no token of the
 * token file, and opens that sandbox's routes only (traffic: its code-interpreter routes,
 * sandstepd_e2b_code_is_path(); envd: those and envd's); a restarted sandstepd's are new (connect again).
 * It calls no other E2B file.
 */
#include "sandstepd-e2b-tokens.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "sandstep-error.h"
#include "sandstep-handle.h"
#include "sandstep-token.h"

/* A signed URL's signature: "v1_" and the SHA-256, in base64 without its padding, of
 * PATH:OPERATION:USER:TOKEN[:EXPIRATION] (the SDK's getSignature()). */
#define E2B_SIGNATURE_PREFIX "v1_"

static guint8 token_key[32];

static void
token_key_init (void)
{
  static gsize ready;

  if (g_once_init_enter (&ready))
    {
      if (getrandom (token_key, sizeof token_key, 0) != sizeof token_key)
        g_error ("getrandom() failed: %s", g_strerror (errno));
      g_once_init_leave (&ready, 1);
    }
}

/* The token of sandbox @handle for @purpose (SANDSTEPD_E2B_TRAFFIC_TOKEN, SANDSTEPD_E2B_ENVD_TOKEN). */
char *
sandstepd_e2b_token (const char *purpose, const char *handle)
{
  g_autofree char *message = g_strconcat ("e2b-", purpose, "-access-token\n", handle, NULL);
  g_autofree char *mac = NULL;

  token_key_init ();
  mac = g_compute_hmac_for_string (G_CHECKSUM_SHA256, token_key, sizeof token_key, message, -1);
  return g_strconcat ("sandstep-", purpose, "-", mac, NULL);
}

/* TRUE when @a and @b are the same text; in constant time (of their digests). */
static gboolean
same_secret (const char *a, const char *b)
{
  guint8 da[32], db[32];

  sandstep_token_digest (a, da);
  sandstep_token_digest (b, db);
  return sandstep_token_digest_equal (da, db);
}

/* TRUE when @token is sandbox @handle's token for @purpose. */
gboolean
sandstepd_e2b_token_matches (const char *purpose, const char *handle, const char *token)
{
  g_autofree char *expected = sandstepd_e2b_token (purpose, handle);

  return same_secret (expected, token);
}

/* Any owner's sandbox, but only the one its E2b-Sandbox-Id names and the token was made for: the key of the
 * create or connect that handed it out covered it. */
static const SandstepTokenEntry sandbox_scope = { { 0 }, NULL };
/* A signed /files URL's, until sandstepd_e2b_signed_sandbox() has found its sandbox: no owner starts with a
 * control character, so it covers none. */
static const SandstepTokenEntry signed_scope = { { 0 }, (char *) "\001/" };

const SandstepTokenEntry *
sandstepd_e2b_sandbox_scope (void)
{
  return &sandbox_scope;
}

const SandstepTokenEntry *
sandstepd_e2b_signed_scope (void)
{
  return &signed_scope;
}

gboolean
sandstepd_e2b_is_signed (const SandstepTokenEntry *scope)
{
  return scope == &signed_scope;
}

/* The signature of @path, @operation and @user under sandbox @handle's envd token, with @expiration (NULL:
 * none), as the SDK's getSignature() makes it. */
static char *
signature_of (const char *handle, const char *path, const char *operation, const char *user, const char *expiration)
{
  g_autofree char *token = sandstepd_e2b_token (SANDSTEPD_E2B_ENVD_TOKEN, handle);
  g_autofree char *raw = g_strjoin (":", path, operation, user, token, expiration, NULL);
  g_autoptr(GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  guint8 digest[32];
  gsize len = sizeof digest;
  g_autofree char *b64 = NULL;
  char *end;

  g_checksum_update (sum, (const guchar *) raw, -1);
  g_checksum_get_digest (sum, digest, &len);
  b64 = g_base64_encode (digest, len);
  for (end = b64 + strlen (b64); end > b64 && end[-1] == '='; end--)
    end[-1] = '\0';
  return g_strconcat (E2B_SIGNATURE_PREFIX, b64, NULL);
}

void
sandstepd_e2b_grant_sandbox (Request *req, const char *handle)
{
  g_free (req->handle);
  req->handle = g_strdup (handle);
  req->scope = &sandbox_scope;
}

char *
sandstepd_e2b_signed_sandbox (Daemon *d, const char *path, const char *operation, const char *user,
                              const char *signature, const char *expiration, GError **error)
{
  g_autoptr(GPtrArray) entries = NULL;
  gint64 now = g_get_real_time () / G_USEC_PER_SEC;

  if (expiration != NULL)
    {
      char *end = NULL;
      gint64 when = g_ascii_strtoll (expiration, &end, 10);

      if (expiration[0] == '\0' || end == NULL || *end != '\0' || when <= 0)
        {
          g_autofree char *shown = sandstep_escape (expiration, -1, 40, SANDSTEP_ESCAPE_VALUE);
          g_set_error (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                       "The URL's signature_expiration '%s' is not a time in seconds since 1970; make the URL again",
                       shown);
          return NULL;
        }
      if (now > when)
        {
          g_set_error (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_EXPIRED,
                       "The URL's signature expired %" G_GINT64_FORMAT " s ago (signature_expiration '%s'); make "
                       "the URL again (uploadUrl()/downloadUrl(), useSignatureExpiration)", now - when, expiration);
          return NULL;
        }
    }
  /* Every live sandbox of the state directory is a candidate: one HMAC and one SHA-256 each. */
  entries = sandstep_backend_list (d->backend, NULL, NULL, error);
  if (entries == NULL)
    return NULL;
  for (guint i = 0; i < entries->len; i++)
    {
      const SandstepListEntry *entry = entries->pdata[i];
      g_autofree char *expected = NULL;

      if (entry->owner == NULL || entry->condition == SANDSTEP_CONDITION_EXPIRED ||
          !sandstep_handle_is_local (entry->handle))
        continue;
      expected = signature_of (entry->handle, path, operation, user, expiration);
      if (same_secret (expected, signature))
        return g_strdup (entry->handle);
    }
  g_set_error (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_OWNER,
               "The URL's signature is no sandbox's for %s of '%s': it was changed, its sandbox is gone, or "
               "sandstepd restarted since it was made; make the URL again (uploadUrl()/downloadUrl())",
               operation, path);
  return NULL;
}

