/* sandstepd-e2b-answer.c: what E2B's platform API (sandstepd-e2b.c) and envd (sandstepd-envd*.c) both answer
 * with: an answer, an error in E2B's shape, a sandbox that is not found, and the owner of a sandbox a key
 * covers.  It calls no other E2B file, so the files above it call down only (docs/architecture.md).
 */
#include "sandstepd-private.h"
#include "sandstepd-e2b-answer.h"

#include <string.h>

#include "sandstep-error.h"

void
sandstepd_e2b_answer (Request *req, guint status, const char *content_type, char *data, gsize len)
{
  if (req->finished || req->completed)
    {
      g_free (data);
      return;
    }
  soup_server_message_set_status (req->msg, status, NULL);
  if (data != NULL)
    soup_server_message_set_response (req->msg, content_type, SOUP_MEMORY_TAKE, data, len);
  req->completed = TRUE;
  sandstepd_request_resume (req);
}

void
sandstepd_e2b_error (Request *req, guint status, const char *format, ...)
{
  g_autoptr(JsonObject) object = json_object_new ();
  va_list args;
  char *message;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  json_object_set_int_member (object, "code", status);
  json_object_set_string_member (object, "message", message);
  g_free (message);
  sandstepd_answer_json (req, status, object);
}

/* E2B's status for a backend's error. */
static guint
status_of (const GError *error)
{
  if (error->domain == SANDSTEP_SANDBOX_ERROR &&
      (error->code == SANDSTEP_SANDBOX_ERROR_NOT_FOUND || error->code == SANDSTEP_SANDBOX_ERROR_NOT_OWNER))
    return SOUP_STATUS_NOT_FOUND;
  if (error->domain == SANDSTEP_SANDBOX_ERROR && error->code == SANDSTEP_SANDBOX_ERROR_BUSY)
    return SOUP_STATUS_CONFLICT;
  if (error->domain == SANDSTEP_USAGE_ERROR)
    return SOUP_STATUS_BAD_REQUEST;
  /* A template's image: one that is not there is not found; a reference that is refused is the caller's. */
  if (error->domain == SANDSTEP_IMAGE_ERROR && error->code == SANDSTEP_IMAGE_ERROR_NOT_FOUND)
    return SOUP_STATUS_NOT_FOUND;
  if (error->domain == SANDSTEP_IMAGE_ERROR &&
      (error->code == SANDSTEP_IMAGE_ERROR_BAD_REFERENCE || error->code == SANDSTEP_IMAGE_ERROR_UNSUPPORTED ||
       error->code == SANDSTEP_IMAGE_ERROR_INSECURE || error->code == SANDSTEP_IMAGE_ERROR_PLATFORM))
    return SOUP_STATUS_BAD_REQUEST;
  if (error->domain == SANDSTEP_IMAGE_ERROR && error->code == SANDSTEP_IMAGE_ERROR_NETWORK)
    return SOUP_STATUS_BAD_GATEWAY;
  return SOUP_STATUS_INTERNAL_SERVER_ERROR;
}

void
sandstepd_e2b_backend_error (Request *req, const GError *error)
{
  sandstepd_e2b_error (req, status_of (error), "%s", error->message);
}

/* The sandboxes @scope covers; with @handle, that one only. */
GPtrArray *
sandstepd_e2b_covered (Request *req, const char *handle, GError **error)
{
  g_autoptr(GPtrArray) entries = sandstep_backend_list (req->d->backend, NULL, NULL, error);

  if (entries == NULL)
    return NULL;
  for (guint i = 0; i < entries->len;)
    {
      const SandstepListEntry *entry = entries->pdata[i];
      if (entry->owner != NULL && entry->condition != SANDSTEP_CONDITION_EXPIRED &&
          sandstep_token_entry_covers (req->scope, entry->owner) &&
          (handle == NULL || strcmp (entry->handle, handle) == 0))
        i++;
      else
        g_ptr_array_remove_index (entries, i);
    }
  return g_steal_pointer (&entries);
}

char *
sandstepd_e2b_not_found (const char *id, gboolean malformed)
{
  g_autofree char *shown = sandstep_escape (id != NULL ? id : "(none)", -1, 200, SANDSTEP_ESCAPE_VALUE);

  if (malformed)
    return g_strdup_printf ("Sandbox '%s' not found: sandstep's sandbox IDs look like sandstep-0123456789abcdef "
                            "(envd's calls name theirs in E2b-Sandbox-Id)", shown);
  return g_strdup_printf ("Sandbox '%s' not found: it is gone, or another owner's", shown);
}

char *
sandstepd_e2b_owner_of (Request *req, const char *handle, GError **error)
{
  g_autoptr(GPtrArray) entries = sandstepd_e2b_covered (req, handle, error);

  if (entries == NULL)
    return NULL;
  if (entries->len == 0)
    {
      g_autofree char *message = sandstepd_e2b_not_found (handle, FALSE);
      g_set_error_literal (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_FOUND, message);
      return NULL;
    }
  return g_strdup (((const SandstepListEntry *) entries->pdata[0])->owner);
}

char *
sandstepd_e2b_holder (const char *owner)
{
  return g_strconcat (owner, "/e2b", NULL);
}
