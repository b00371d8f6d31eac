/* fuzz-mcp.c: MCP's JSON-RPC messages (operators/sandstep-mcp*.c), as a client sends them.
 *
 * Each input is one message to one server that lives across inputs (so an
 * initialize may precede a call), through sandstep_mcp_server_handle(): the
 * JSON, the JSON-RPC envelope, both protocol eras, and the tools' arguments.
 * The tools' sandbox is a backend of this file that runs nothing and refuses
 * every operation, so a fuzzed tools/call reaches the tools' argument rules
 * and never a command.  Each message gets exactly one reply (or none, for a
 * notification), soon.
 */
#include "fuzz.h"

#include "sandstep-backend.h"
#include "sandstep-error.h"
#include "sandstep-mcp.h"
#include "sandstep-spec.h"
#include "sandstep-tools.h"

static SandstepMcpServer *server;

static gboolean
refuse (GError **error)
{
  return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND,
                         "The fuzz target's sandbox runs nothing and holds no file");
}

static gboolean
refuse_run (SandstepAttachment *attachment, const SandstepRunRequest *request, SandstepRunResult *result,
            GError **error)
{
  return refuse (error);
}

static GBytes *
refuse_read (SandstepAttachment *attachment, const char *path, gsize max_bytes, GError **error)
{
  refuse (error);
  return NULL;
}

static gboolean
refuse_write (SandstepAttachment *attachment, const char *path, const void *data, gsize len, GError **error)
{
  return refuse (error);
}

static gboolean
refuse_put (SandstepAttachment *attachment, const char *host_src, const char *dest, GError **error)
{
  return refuse (error);
}

static GPtrArray *
refuse_list (SandstepAttachment *attachment, const char *path, GError **error)
{
  refuse (error);
  return NULL;
}

static gint64
refuse_export (SandstepAttachment *attachment, const char *path, int dest_fd, guint64 max_bytes, GError **error)
{
  refuse (error);
  return -1;
}

static double
remaining_lifetime (SandstepAttachment *attachment)
{
  return 3600;
}

static const SandstepSpec *
spec (SandstepAttachment *attachment)
{
  static SandstepSpec *spec;

  if (spec == NULL)
    {
      spec = sandstep_spec_new ();
      g_hash_table_insert (spec->secrets, g_strdup ("TOKEN"), g_strdup ("sekrit-value-42"));
    }
  return spec;
}

static const SandstepBackendClass refusing_class = {
  .name = "fuzz",
  .run_command = refuse_run,
  .read_file = refuse_read,
  .write_file = refuse_write,
  .put = refuse_put,
  .list_directory = refuse_list,
  .export_file = refuse_export,
  .remaining_lifetime = remaining_lifetime,
  .spec = spec,
};

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  static SandstepBackend backend = { &refusing_class };
  static SandstepAttachment attachment = { &backend, (char *) "sandstep-0123456789abcdef" };

  fuzz_init_glib ();
  server = sandstep_mcp_server_new (sandstep_toolbox_new (&attachment, NULL), attachment.handle);
  return 0;
}

static void
on_reply (const char *reply, gpointer user_data)
{
  int *replies = user_data;

  (*replies)++;
  if (reply != NULL)
    g_assert_true (g_utf8_validate (reply, -1, NULL));
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  int replies = 0;

  sandstep_mcp_server_handle (server, (const char *) data, size, on_reply, &replies);
  while (replies == 0 && g_get_monotonic_time () < deadline)
    g_main_context_iteration (NULL, TRUE);
  while (g_main_context_iteration (NULL, FALSE))
    ;
  g_assert_cmpint (replies, ==, 1);
  return 0;
}
