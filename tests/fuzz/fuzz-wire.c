/* fuzz-wire.c: a sandstepd peer's JSON (hooks/sandstep-wire.c), read by every reader of the wire.
 *
 * sandstepd reads requests and worker messages with these; its clients read
 * replies and streamed lines with them.  Each reader gets the same object:
 * none may crash or raise a critical, whatever members it holds.
 */
#include "fuzz.h"

#include "sandstep-spec.h"
#include "sandstep-wire.h"

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fuzz_init_glib ();
  return 0;
}

static void
count_notice (const char *notice, gpointer data)
{
  (*(guint *) data)++;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr(JsonObject) object = sandstep_wire_parse_object ((const char *) data, size, NULL);
  SandstepIdentity who;
  SandstepRunResult result;
  SandstepWirePutEntry entry;
  const char *text, *run, *owner, *claim;
  gboolean flag, broken;
  double number;
  guint64 max_bytes;
  guint notices = 0;
  int stream;

  if (object == NULL)
    return 0;
  sandstep_wire_read_identity (object, &who, NULL);
  sandstep_wire_read_gc_request (object, &run, &flag, &broken, NULL);
  sandstep_wire_read_list_request (object, &run, &owner, NULL);
  sandstep_wire_read_run_request (object, &text, &number, NULL);
  sandstep_wire_read_path_request (object, 1024, &text, &max_bytes, NULL);
  sandstep_wire_get_string (object, "claim", &text, NULL);
  sandstep_wire_get_number (object, "keep_s", 0, &number, NULL);
  sandstep_wire_read_provision_reply (object, &flag);
  sandstep_wire_read_release_reply (object);
  g_ptr_array_unref (sandstep_wire_read_list_reply (object, NULL));
  g_ptr_array_unref (sandstep_wire_read_list_reply (object, "http://127.0.0.1:1"));
  {
    g_autoptr(GPtrArray) destroyed = g_ptr_array_new_with_free_func (g_free);
    g_autoptr(GError) error = sandstep_wire_read_gc_reply (object, "http://127.0.0.1:1", destroyed);
  }
  {
    g_autoptr(SandstepSpec) spec = NULL;
    if (sandstep_wire_read_claim (object, &claim, &number, &spec))
      g_assert_nonnull (spec);
  }
  {
    JsonNode *spec = json_object_get_member (object, "spec");
    g_autoptr(SandstepSpec) parsed = spec != NULL ? sandstep_spec_from_json (spec, NULL) : NULL;
  }
  sandstep_wire_read_run_result (object, &result);
  sandstep_wire_read_notices (object, count_notice, &notices);
  g_ptr_array_unref (sandstep_wire_read_entries (object));
  sandstep_wire_read_put_entry (object, &entry);
  {
    g_autoptr(GBytes) bytes = sandstep_wire_read_data_line (object, &stream);
  }
  {
    g_autoptr(GError) error = sandstep_wire_read_error_line (object);
  }
  {
    g_autoptr(GError) error = sandstep_wire_error_from_json (json_object_get_member (object, "error"), 500);
    g_assert_nonnull (error);
  }
  sandstep_wire_is_done_line (object);
  return 0;
}
