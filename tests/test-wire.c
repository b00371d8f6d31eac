/* test-wire.c: the codecs of sandstepd's wire (sandstep-wire.h).
 *
 * Each request and reply is encoded, sent through JSON text as the server
 * and the client would, and read back: what comes out must be what went in.
 * The rows of `refused` are bodies a server must refuse, with the member the
 * message names.  A new call on the wire gets a round trip here.
 */
#include <glib.h>
#include <json-glib/json-glib.h>
#include <string.h>

#include "sandstep-error.h"
#include "sandstep-json.h"
#include "sandstep-store.h"
#include "sandstep-wire.h"

/* @object as the other side reads it: through its text. */
static JsonObject *
through_text (JsonObject *object)
{
  g_autoptr(JsonObject) owned = object;
  gsize len;
  g_autofree char *text = sandstep_wire_to_text (owned, &len);
  g_autoptr(GError) error = NULL;
  JsonObject *back = sandstep_wire_parse_object (text, len, &error);

  g_assert_no_error (error);
  g_assert_cmpuint (len, ==, strlen (text));
  return back;
}

static void
test_identity_requests (void)
{
  SandstepIdentity who = { "dag/run", "dag/run/box.sbx" };
  g_autoptr(JsonObject) plain = through_text (sandstep_wire_identity_request (&who));
  g_autoptr(JsonObject) attach = through_text (sandstep_wire_attach_request ("sandstep-0123456789abcdef", &who));
  g_autoptr(JsonObject) release = through_text (sandstep_wire_release_request (&who, 90));
  SandstepIdentity back = { NULL, NULL };
  double keep = -1;

  g_assert_true (sandstep_wire_read_identity (plain, &back, NULL));
  g_assert_cmpstr (back.owner, ==, who.owner);
  g_assert_cmpstr (back.holder, ==, who.holder);
  g_assert_true (sandstep_wire_read_identity (attach, &back, NULL));
  g_assert_cmpstr (json_object_get_string_member (attach, "handle"), ==, "sandstep-0123456789abcdef");
  g_assert_true (sandstep_wire_read_identity (release, &back, NULL));
  g_assert_true (sandstep_wire_get_number (release, "keep_s", 0, &keep, NULL));
  g_assert_cmpfloat (keep, ==, 90);
}

static void
test_provision (void)
{
  SandstepIdentity who = { "o", "h" };
  g_autoptr(SandstepSpec) spec = sandstep_spec_new ();
  g_autoptr(JsonObject) request = NULL;
  g_autoptr(JsonObject) reply = through_text (sandstep_wire_provision_reply ("sandstep-00000000000000aa", TRUE));
  g_autoptr(JsonObject) bad = through_text (sandstep_wire_provision_reply ("not-a-handle", FALSE));
  g_autoptr(SandstepSpec) back = NULL;
  gboolean existing = FALSE;

  spec->network = SANDSTEP_NETWORK_OPEN;
  spec->lifetime_s = 1234;
  g_hash_table_insert (spec->secrets, g_strdup ("TOKEN"), g_strdup ("s3cret"));
  request = through_text (sandstep_wire_provision_request (&who, spec));
  back = sandstep_spec_from_json (json_object_get_member (request, "spec"), NULL);
  g_assert_nonnull (back);
  g_assert_cmpint (back->network, ==, SANDSTEP_NETWORK_OPEN);
  g_assert_cmpint (back->lifetime_s, ==, 1234);
  /* The server must mask the secret: its value travels. */
  g_assert_cmpstr (g_hash_table_lookup (back->secrets, "TOKEN"), ==, "s3cret");
  g_assert_cmpstr (sandstep_wire_read_provision_reply (reply, &existing), ==, "sandstep-00000000000000aa");
  g_assert_true (existing);
  g_assert_null (sandstep_wire_read_provision_reply (bad, &existing));
}

static void
test_gc (void)
{
  g_autoptr(JsonObject) all = through_text (sandstep_wire_gc_request (NULL, TRUE, FALSE));
  g_autoptr(JsonObject) one = through_text (sandstep_wire_gc_request ("20261130T000000-abcdef", FALSE, TRUE));
  g_autoptr(JsonObject) old = through_text (json_object_new ());
  g_autoptr(GPtrArray) destroyed = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) read = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GError) failure = g_error_new_literal (SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, "disk");
  g_autoptr(JsonObject) reply = NULL;
  g_autoptr(GError) back = NULL;
  const char *run = "x";
  gboolean expired_only = FALSE;
  gboolean broken = TRUE;

  g_assert_true (sandstep_wire_read_gc_request (all, &run, &expired_only, &broken, NULL));
  g_assert_null (run);
  g_assert_true (expired_only);
  g_assert_false (broken);
  g_assert_true (sandstep_wire_read_gc_request (one, &run, &expired_only, &broken, NULL));
  g_assert_cmpstr (run, ==, "20261130T000000-abcdef");
  g_assert_false (expired_only);
  g_assert_true (broken);
  /* An older client sends neither flag: only what has expired, nothing damaged. */
  g_assert_true (sandstep_wire_read_gc_request (old, &run, &expired_only, &broken, NULL));
  g_assert_null (run);
  g_assert_true (expired_only);
  g_assert_false (broken);

  g_ptr_array_add (destroyed, g_strdup ("sandstep-0000000000000001"));
  g_ptr_array_add (destroyed, g_strdup ("sandstep-0000000000000002"));
  reply = through_text (sandstep_wire_gc_reply (destroyed, failure));
  back = sandstep_wire_read_gc_reply (reply, "http://h:1", read);
  g_assert_error (back, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE);
  g_assert_cmpuint (read->len, ==, 2);
  g_assert_cmpstr (read->pdata[1], ==, "http://h:1/sandstep-0000000000000002");
}

static void
test_claim (void)
{
  g_autoptr(SandstepSpec) spec = sandstep_spec_new ();
  g_autoptr(JsonObject) attach_reply = NULL;
  g_autoptr(JsonObject) line = NULL;
  g_autoptr(JsonObject) unclaimed = NULL;
  g_autoptr(SandstepSpec) back = NULL;
  const char *claim = NULL;
  double remaining = 0;

  spec->lifetime_s = 60;
  attach_reply = through_text (sandstep_wire_claim (NULL, 42.5, spec));
  unclaimed = json_object_ref (attach_reply);
  g_assert_false (sandstep_wire_read_claim (unclaimed, &claim, &remaining, &back));
  line = through_text (sandstep_wire_claim_line (attach_reply, "c-0011"));
  g_assert_true (sandstep_wire_read_claim (line, &claim, &remaining, &back));
  g_assert_cmpstr (claim, ==, "c-0011");
  g_assert_cmpfloat (remaining, ==, 42.5);
  g_assert_cmpint (back->lifetime_s, ==, 60);
}

static void
test_run (void)
{
  static const SandstepRunResult results[] = {
    { 0, FALSE, 60, FALSE, FALSE, FALSE },
    { 137, FALSE, 12.5, TRUE, TRUE, FALSE },
    { 0, TRUE, 2, FALSE, FALSE, TRUE },
  };
  g_autoptr(JsonObject) request = through_text (sandstep_wire_run_request ("c-1", "echo 'a \"b\"'", 2.5));
  g_autoptr(JsonObject) no_command = json_object_new ();
  g_autoptr(GError) error = NULL;
  const char *command = NULL;
  double timeout = 0;

  g_assert_true (sandstep_wire_read_run_request (request, &command, &timeout, NULL));
  g_assert_cmpstr (command, ==, "echo 'a \"b\"'");
  g_assert_cmpfloat (timeout, ==, 2.5);
  g_assert_false (sandstep_wire_read_run_request (no_command, &command, &timeout, &error));
  g_assert_error (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING);

  for (gsize i = 0; i < G_N_ELEMENTS (results); i++)
    {
      g_autoptr(JsonObject) line = through_text (sandstep_wire_run_result (&results[i]));
      SandstepRunResult back = { -1 };

      g_assert_true (sandstep_wire_read_run_result (line, &back));
      g_assert_cmpint (back.exit_status, ==, results[i].exit_status);
      g_assert_cmpint (back.timed_out, ==, results[i].timed_out);
      g_assert_cmpfloat (back.applied_timeout_s, ==, results[i].applied_timeout_s);
      g_assert_cmpint (back.clamped, ==, results[i].clamped);
      g_assert_cmpint (back.memory_limit_hit, ==, results[i].memory_limit_hit);
      g_assert_cmpint (back.pids_limit_hit, ==, results[i].pids_limit_hit);
    }
}

static void
test_paths_and_entries (void)
{
  g_autoptr(JsonObject) read = through_text (sandstep_wire_path_request ("c-1", "/workspace/a", 1024));
  g_autoptr(JsonObject) list = through_text (sandstep_wire_path_request (NULL, "src", -1));
  g_autoptr(GPtrArray) entries = g_ptr_array_new ();
  SandstepDirEntry dir = { (char *) "src", TRUE }, file = { (char *) "a b.txt", FALSE };
  g_autoptr(JsonObject) reply = NULL;
  g_autoptr(GPtrArray) back = NULL;
  const char *path = NULL;
  guint64 max_bytes = 0;

  g_assert_true (sandstep_wire_read_path_request (read, 5, &path, &max_bytes, NULL));
  g_assert_cmpstr (path, ==, "/workspace/a");
  g_assert_cmpuint (max_bytes, ==, 1024);
  g_assert_false (json_object_has_member (list, "claim"));
  g_assert_true (sandstep_wire_read_path_request (list, 5, &path, &max_bytes, NULL));
  g_assert_cmpuint (max_bytes, ==, 5);

  g_ptr_array_add (entries, &dir);
  g_ptr_array_add (entries, &file);
  reply = through_text (sandstep_wire_entries (entries));
  back = sandstep_wire_read_entries (reply);
  g_assert_cmpuint (back->len, ==, 2);
  g_assert_cmpstr (((SandstepDirEntry *) back->pdata[0])->name, ==, "src");
  g_assert_true (((SandstepDirEntry *) back->pdata[0])->is_dir);
  g_assert_cmpstr (((SandstepDirEntry *) back->pdata[1])->name, ==, "a b.txt");
  g_assert_false (((SandstepDirEntry *) back->pdata[1])->is_dir);
}

static void
test_lines (void)
{
  static const guint8 bytes[] = { 0, 1, 2, 255, '\n', 'x' };
  g_autoptr(GError) busy = NULL;

  for (int stream = 0; stream <= 2; stream++)
    {
      gsize len;
      g_autofree char *line = sandstep_wire_data_line (stream, bytes, sizeof bytes, &len);
      g_autoptr(JsonObject) object = NULL;
      g_autoptr(GBytes) back = NULL;
      int back_stream = 0;

      g_assert_cmpuint (len, ==, strlen (line));
      g_assert_true (g_str_has_suffix (line, "\n"));
      g_assert_null (memchr (line, '\n', len - 1));
      object = sandstep_wire_parse_object (line, len - 1, NULL);
      back = sandstep_wire_read_data_line (object, &back_stream);
      g_assert_nonnull (back);
      g_assert_cmpmem (g_bytes_get_data (back, NULL), g_bytes_get_size (back), bytes, sizeof bytes);
      g_assert_cmpint (back_stream, ==, stream == 2 ? 2 : 1);
      g_assert_null (sandstep_wire_read_error_line (object));
    }

  sandstep_throw_busy (&busy, "other/holder", "held");
  {
    g_autoptr(JsonObject) line = through_text (sandstep_wire_error_line (busy));
    g_autoptr(GError) back = sandstep_wire_read_error_line (line);
    g_autoptr(JsonObject) done = through_text (sandstep_wire_done_line ());
    g_autoptr(JsonObject) ended = through_text (sandstep_wire_ended_line ("released"));

    g_assert_error (back, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BUSY);
    g_assert_cmpstr (sandstep_error_get_holder (back), ==, "other/holder");
    g_assert_null (sandstep_wire_read_data_line (line, NULL));
    g_assert_true (sandstep_wire_is_done_line (done));
    g_assert_false (sandstep_wire_is_done_line (ended));
    g_assert_cmpstr (json_object_get_string_member (ended, "ended"), ==, "released");
  }
}

static void
test_put_entries (void)
{
  static const SandstepWirePutEntry rows[] = {
    /* path        type    mode   size  target */
    { "",          "dir",  0755,  -1,   NULL },
    { "a/b.txt",   "file", 0640,  12,   NULL },
    { "a/link",    "link", 0777,  -1,   "../b.txt" },
    { "empty",     "file", 0600,  0,    NULL },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (rows); i++)
    {
      gsize len;
      g_autofree char *line = sandstep_wire_put_entry_line (&rows[i], &len);
      g_autoptr(JsonObject) object = sandstep_wire_parse_object (line, len - 1, NULL);
      SandstepWirePutEntry back = { NULL };

      g_assert_true (sandstep_wire_read_put_entry (object, &back));
      g_assert_cmpstr (back.path, ==, rows[i].path);
      g_assert_cmpstr (back.type, ==, rows[i].type);
      g_assert_cmpuint (back.mode, ==, rows[i].mode);
      /* A size that was not sent reads as 0. */
      g_assert_cmpint (back.size, ==, MAX (rows[i].size, 0));
      g_assert_cmpstr (back.target, ==, rows[i].target);
    }
  {
    gsize len;
    g_autofree char *end = sandstep_wire_put_end_line (&len);
    g_autoptr(JsonObject) object = sandstep_wire_parse_object (end, len - 1, NULL);
    SandstepWirePutEntry back = { NULL };

    g_assert_false (sandstep_wire_read_put_entry (object, &back));
  }
}

typedef struct {
  const char *body;
  const char *member;     /* the member the message names, NULL: not JSON or not an object */
} Refused;

static const Refused refused[] = {
  { "not json",                                    NULL },
  { "[1, 2]",                                      NULL },
  { "{\"holder\": \"h\"}",                         "owner" },
  { "{\"owner\": \"\", \"holder\": \"h\"}",        "owner" },
  { "{\"owner\": 3, \"holder\": \"h\"}",           "owner" },
  { "{\"owner\": \"o\"}",                          "holder" },
  { "{\"owner\": \"o\", \"holder\": \"h\", \"keep_s\": -1}", "keep_s" },
  { "{\"owner\": \"o\", \"holder\": \"h\", \"keep_s\": \"1h\"}", "keep_s" },
};

static void
test_refused (void)
{
  for (gsize i = 0; i < G_N_ELEMENTS (refused); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(JsonObject) object = sandstep_wire_parse_object (refused[i].body, strlen (refused[i].body), &error);
      SandstepIdentity who;
      double keep = 0;

      g_test_message ("body %s", refused[i].body);
      if (refused[i].member == NULL)
        {
          g_assert_null (object);
          g_assert_error (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE);
          continue;
        }
      g_assert_nonnull (object);
      g_assert_false (sandstep_wire_read_identity (object, &who, &error) &&
                      sandstep_wire_get_number (object, "keep_s", 0, &keep, &error));
      g_assert_nonnull (error);
      g_assert_true (error->domain == SANDSTEP_USAGE_ERROR);
      g_assert_nonnull (strstr (error->message, refused[i].member));
    }
}

/* @n times @open, then @close as many times. */
static char *
nested (guint n, char open, char close)
{
  GString *out = g_string_new (NULL);

  for (guint i = 0; i < n; i++)
    g_string_append_c (out, open);
  for (guint i = 0; i < n; i++)
    g_string_append_c (out, close);
  return g_string_free (out, FALSE);
}

static void
test_json_depth_and_size (void)
{
  g_autofree char *ok = nested (SANDSTEP_JSON_MAX_DEPTH, '[', ']');
  g_autofree char *deep = nested (SANDSTEP_JSON_MAX_DEPTH + 1, '[', ']');
  g_autofree char *bomb = g_strnfill (200 * 1024, '[');
  g_autofree char *objects = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) node = NULL;
  GString *o = g_string_new (NULL);

  g_test_summary ("JSON nesting deeper than 64 levels or longer than its limit is refused before json-glib "
                  "parses it (200 KB of '[' used to overflow the stack); brackets inside strings do not count");
  node = sandstep_json_parse (ok, strlen (ok), G_MAXSIZE, &error);
  g_assert_no_error (error);
  g_assert_nonnull (node);
  g_assert_false (sandstep_json_check (deep, strlen (deep), G_MAXSIZE, &error));
  g_assert_error (error, JSON_PARSER_ERROR, JSON_PARSER_ERROR_INVALID_DATA);
  g_assert_nonnull (strstr (error->message, "deeper than 64"));
  g_clear_error (&error);
  g_assert_null (sandstep_json_parse (bomb, strlen (bomb), G_MAXSIZE, &error));
  g_assert_nonnull (strstr (error->message, "deeper than 64"));
  g_clear_error (&error);
  for (guint i = 0; i < 100; i++)
    g_string_append (o, "{\"a\":");
  g_string_append (o, "1");
  for (guint i = 0; i < 100; i++)
    g_string_append_c (o, '}');
  objects = g_string_free (o, FALSE);
  g_assert_false (sandstep_json_check (objects, strlen (objects), G_MAXSIZE, &error));
  g_clear_error (&error);
  /* In a string, with escaped quotes, brackets are text. */
  {
    g_autofree char *inside = g_strdup_printf ("{\"s\": \"\\\"%s\\\"\"}", bomb);
    g_clear_pointer (&node, json_node_unref);
    node = sandstep_json_parse (inside, strlen (inside), G_MAXSIZE, &error);
    g_assert_no_error (error);
  }
  g_assert_false (sandstep_json_check ("{}", 2, 1, &error));
  g_assert_nonnull (strstr (error->message, "over the limit"));
  g_clear_error (&error);
  /* Through the wire's reader, as sandstepd reads a body. */
  g_assert_null (sandstep_wire_parse_object (bomb, strlen (bomb), &error));
  g_assert_error (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE);
  g_assert_nonnull (strstr (error->message, "deeper than 64"));
}

static void
test_json_deep_record (void)
{
  g_autofree char *dir = g_dir_make_tmp ("sandstep-test-wire-XXXXXX", NULL);
  g_autoptr(SandstepStore) store = sandstep_store_open (dir, NULL);
  const char *handle = "sandstep-0123456789abcdef";
  g_autofree char *record = sandstep_store_sandbox_path (store, handle, "record.json");
  g_autofree char *sandbox = g_path_get_dirname (record);
  g_autofree char *bomb = g_strnfill (200 * 1024, '[');
  g_autoptr(GError) error = NULL;
  g_autoptr(SandstepRecord) loaded = NULL;
  g_autofree char *command = NULL;

  g_test_summary ("a record on disk nesting 200 KB deep is refused as damaged, never parsed");
  g_assert_nonnull (store);
  g_assert_cmpint (g_mkdir_with_parents (sandbox, 0700), ==, 0);
  g_assert_true (g_file_set_contents (record, bomb, -1, NULL));
  {
    g_autofree char *claim = sandstep_store_sandbox_path (store, handle, "claim");
    g_assert_true (g_file_set_contents (claim, "", 0, NULL));
  }
  loaded = sandstep_store_load (store, handle, &error);
  g_assert_null (loaded);
  g_assert_error (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BROKEN);
  g_assert_nonnull (strstr (error->message, "deeper than 64"));
  command = g_strdup_printf ("rm -rf '%s'", dir);
  g_assert_true (g_spawn_command_line_sync (command, NULL, NULL, NULL, NULL));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/wire/identity", test_identity_requests);
  g_test_add_func ("/wire/provision", test_provision);
  g_test_add_func ("/wire/gc", test_gc);
  g_test_add_func ("/wire/claim", test_claim);
  g_test_add_func ("/wire/run", test_run);
  g_test_add_func ("/wire/paths-and-entries", test_paths_and_entries);
  g_test_add_func ("/wire/lines", test_lines);
  g_test_add_func ("/wire/put-entries", test_put_entries);
  g_test_add_func ("/wire/refused", test_refused);
  g_test_add_func ("/wire/json-depth-and-size", test_json_depth_and_size);
  g_test_add_func ("/wire/json-deep-record", test_json_deep_record);
  return g_test_run ();
}
