/* sandstepd-envd.c: E2B's envd (the service inside an E2B sandbox) on sandstepd's sandboxes.
 *
 * The SDK calls envd over the Connect protocol with its JSON codec (the SDK never asks for protobuf
 * binary), naming the sandbox in the E2b-Sandbox-Id header, and plain HTTP for /files.  Not served yet:
 * every envd call answers Connect's "unimplemented" naming the call (docs/e2b.md).
 */
#include "sandstepd-private.h"

#include <string.h>

gboolean
sandstepd_envd_is_path (const char *path)
{
  return g_str_has_prefix (path, "/process.Process/") || g_str_has_prefix (path, "/filesystem.Filesystem/") ||
         strcmp (path, "/files") == 0;
}

void
sandstepd_handle_envd (Request *req)
{
  g_autoptr(JsonObject) object = json_object_new ();
  g_autofree char *message = g_strdup_printf ("%s is not served by sandstepd's E2B envd yet (docs/e2b.md)",
                                              req->path);

  json_object_set_string_member (object, "code", "unimplemented");
  json_object_set_string_member (object, "message", message);
  sandstepd_answer_json (req, SOUP_STATUS_NOT_FOUND, object);
}
