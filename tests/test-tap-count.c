/* test-tap-count.c: scripts/tap-count, which makes scripts/test's closing
 * line "N passed, N failed, N skipped" from meson's testlog.json.
 *
 * Each case writes a crafted testlog.json (one JSON object per test program:
 * its meson result and its TAP stdout), runs the counter on it and compares
 * the line.  The counter's path comes from SANDSTEP_TEST_TAP_COUNT
 * (tests/meson.build).
 */
#include <string.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

typedef struct {
  const char *result;  /* meson's: OK, FAIL, SKIP, TIMEOUT, UNEXPECTEDPASS */
  const char *stdout_text;
} Program;

/* Runs scripts/tap-count on a testlog.json holding @programs; returns its one line. */
static char *
count (const Program *programs, gsize n)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("sandstep-tap-count-XXXXXX", &error);
  g_assert_no_error (error);
  g_autofree char *log = g_build_filename (dir, "testlog.json", NULL);
  g_autoptr(GString) lines = g_string_new (NULL);

  for (gsize i = 0; i < n; i++)
    {
      g_autoptr(JsonBuilder) b = json_builder_new ();
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "name");
      json_builder_add_string_value (b, "test-crafted");
      json_builder_set_member_name (b, "result");
      json_builder_add_string_value (b, programs[i].result);
      json_builder_set_member_name (b, "stdout");
      json_builder_add_string_value (b, programs[i].stdout_text);
      json_builder_end_object (b);
      g_autoptr(JsonNode) root = json_builder_get_root (b);
      g_autofree char *text = json_to_string (root, FALSE);
      g_string_append_printf (lines, "%s\n", text);
    }
  g_file_set_contents (log, lines->str, -1, &error);
  g_assert_no_error (error);

  const char *counter = g_getenv ("SANDSTEP_TEST_TAP_COUNT");
  if (counter == NULL || counter[0] == '\0')
    g_error ("SANDSTEP_TEST_TAP_COUNT is not set; run this test through meson test");
  const char *argv[] = { counter, log, NULL };
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  int status = 0;
  g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &status, &error);
  g_assert_no_error (error);
  g_unlink (log);
  g_rmdir (dir);
  if (!g_spawn_check_wait_status (status, &error))
    g_error ("'%s' failed (%s): %s", counter, error->message, err);
  return g_strdup (g_strchomp (out));
}

static void
test_ok (void)
{
  g_test_summary ("ok cases are passed, whatever their description says");
  const Program p[] = {
    { "OK", "TAP version 14\n# random seed: R02S\n1..3\n# Start of a tests\nok 1 /a/one\n"
            "ok 2 /a/skip-when-unset\nok 3 /a/TODO-list\n# End of a tests\n" },
  };
  g_autofree char *line = count (p, G_N_ELEMENTS (p));
  g_assert_cmpstr (line, ==, "3 passed, 0 failed, 0 skipped");
}

static void
test_not_ok (void)
{
  g_test_summary ("not ok cases are failed; the failing program adds nothing more");
  const Program p[] = {
    { "FAIL", "1..3\nok 1 /a/one\nnot ok 2 /a/two\nnot ok 3 /a/three\n" },
  };
  g_autofree char *line = count (p, G_N_ELEMENTS (p));
  g_assert_cmpstr (line, ==, "1 passed, 2 failed, 0 skipped");
}

static void
test_skip (void)
{
  g_test_summary ("ok # SKIP is a skip, never a pass: GTest's g_test_skip, in any case and spacing");
  const Program p[] = {
    { "OK", "1..5\nok 1 /s3/put # SKIP no S3 server: moto_server is not installed\n"
            "ok 2 /s3/get # skip lower case\nok 3 /s3/head #SKIP\nok 4 /s3/list\t#\tSkip tabs\n"
            "ok 5 /s3/ran\n" },
  };
  g_autofree char *line = count (p, G_N_ELEMENTS (p));
  g_assert_cmpstr (line, ==, "1 passed, 0 failed, 4 skipped");
}

static void
test_skip_not_ok (void)
{
  g_test_summary ("not ok # SKIP is a skip too (the case did not run)");
  const Program p[] = {
    { "OK", "1..1\nnot ok 1 /a/one # SKIP reason\n" },
  };
  g_autofree char *line = count (p, G_N_ELEMENTS (p));
  g_assert_cmpstr (line, ==, "0 passed, 0 failed, 1 skipped");
}

static void
test_escaped_hash (void)
{
  g_test_summary ("An escaped \\# in a description is no directive");
  const Program p[] = {
    { "OK", "1..1\nok 1 /a/hash \\# SKIP is part of the name\n" },
  };
  g_autofree char *line = count (p, G_N_ELEMENTS (p));
  g_assert_cmpstr (line, ==, "1 passed, 0 failed, 0 skipped");
}

static void
test_todo (void)
{
  g_test_summary ("not ok # TODO (g_test_incomplete) is neither passed nor failed: a skip; "
                  "ok # TODO passed, and meson's UNEXPECTEDPASS counts one failure");
  const Program p[] = {
    { "EXPECTEDFAIL", "1..1\nnot ok 1 /a/incomplete # TODO not written yet\n" },
    { "UNEXPECTEDPASS", "1..1\nok 1 /b/fixed # TODO\n" },
  };
  g_autofree char *line = count (p, G_N_ELEMENTS (p));
  g_assert_cmpstr (line, ==, "1 passed, 1 failed, 1 skipped");
}

static void
test_no_cases (void)
{
  g_test_summary ("A program with no case: a whole-program skip is one skip; one that died or ran "
                  "nothing is one failure");
  const Program skipped[] = {
    { "SKIP", "1..0 # SKIP Slurm is not installed\n" },
  };
  g_autofree char *line = count (skipped, G_N_ELEMENTS (skipped));
  g_assert_cmpstr (line, ==, "0 passed, 0 failed, 1 skipped");

  const Program died[] = {
    { "FAIL", "" },
    { "TIMEOUT", "TAP version 14\n" },
    { "OK", "1..0\n" },
  };
  g_autofree char *line2 = count (died, G_N_ELEMENTS (died));
  g_assert_cmpstr (line2, ==, "0 passed, 3 failed, 0 skipped");
}

static void
test_crash_after_cases (void)
{
  g_test_summary ("A program that failed with no failed case (a crash after its last case, a timeout) "
                  "counts one failure beside its passed cases");
  const Program p[] = {
    { "FAIL", "1..3\nok 1 /a/one\nok 2 /a/two # SKIP why\n" },
    { "TIMEOUT", "1..2\nok 1 /b/one\n" },
  };
  g_autofree char *line = count (p, G_N_ELEMENTS (p));
  g_assert_cmpstr (line, ==, "2 passed, 2 failed, 1 skipped");
}

static void
test_sums (void)
{
  g_test_summary ("The line sums every program of the log");
  const Program p[] = {
    { "OK", "1..2\nok 1 /a\nok 2 /b # SKIP x\n" },
    { "FAIL", "1..2\nnot ok 1 /c\nok 2 /d\n" },
    { "SKIP", "1..0 # SKIP nothing here\n" },
    { "OK", "1..1\nok 1 /e\n" },
  };
  g_autofree char *line = count (p, G_N_ELEMENTS (p));
  g_assert_cmpstr (line, ==, "3 passed, 1 failed, 2 skipped");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/tap-count/ok", test_ok);
  g_test_add_func ("/tap-count/not-ok", test_not_ok);
  g_test_add_func ("/tap-count/skip", test_skip);
  g_test_add_func ("/tap-count/skip-not-ok", test_skip_not_ok);
  g_test_add_func ("/tap-count/escaped-hash", test_escaped_hash);
  g_test_add_func ("/tap-count/todo", test_todo);
  g_test_add_func ("/tap-count/no-cases", test_no_cases);
  g_test_add_func ("/tap-count/crash-after-cases", test_crash_after_cases);
  g_test_add_func ("/tap-count/sums", test_sums);
  return g_test_run ();
}
