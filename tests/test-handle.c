/* test-handle.c: the handle grammar (sandstep-handle.h) and its libc twin.
 *
 * The static front reads --handle itself (sandstep_handle_libc_resolve()) to
 * hand a command to a sandbox's launcher; the helper reads it with
 * sandstep_resolve_handle().  If they disagreed, the front could run a
 * handle the helper refuses.  Each row below goes through both, as text and
 * as a handle file: the front must take exactly the local handles the helper
 * takes, with the same result.  Add a row for every shape worth pinning.
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-handle.h"
#include "sandstep-operator.h"

typedef struct {
  const char *text;
  gboolean local;     /* a local handle once trimmed */
  gboolean valid;     /* a handle of either kind (sandstep_handle_is_valid) */
} Row;

static const Row rows[] = {
  /* text                                                    local  valid */
  { "sandstep-0123456789abcdef",                             TRUE,  TRUE },
  { "  sandstep-0123456789abcdef\n",                         TRUE,  TRUE },
  { "\tsandstep-0123456789abcdef\r\n",                       TRUE,  TRUE },
  { "sandstep-0123456789abcdef\f",                           TRUE,  TRUE },
  { "sandstep-0123456789abcdef\v",                           FALSE, FALSE },
  { "sandstep-0123456789ABCDEF",                             FALSE, FALSE },
  { "sandstep-0123456789abcde",                              FALSE, FALSE },
  { "sandstep-0123456789abcdef0",                            FALSE, FALSE },
  { "sandstep-0123456789abcdeg",                             FALSE, FALSE },
  { "sandstep_0123456789abcdef",                             FALSE, FALSE },
  { "sandstep-0123456789abcdef x",                           FALSE, FALSE },
  { "",                                                      FALSE, FALSE },
  { "None",                                                  FALSE, FALSE },
  { "http://10.0.0.5:7700/sandstep-0123456789abcdef",        FALSE, TRUE },
  { "https://h.example:8443/a/b/sandstep-0123456789abcdef",  FALSE, TRUE },
  { "http://10.0.0.5:7700//sandstep-0123456789abcdef",       FALSE, FALSE },
  { "http://u@h/sandstep-0123456789abcdef",                  FALSE, FALSE },
  { "http://h/a/../sandstep-0123456789abcdef",               FALSE, FALSE },
  { "ftp://h/sandstep-0123456789abcdef",                     FALSE, FALSE },
};

static void
test_grammar (void)
{
  for (gsize i = 0; i < G_N_ELEMENTS (rows); i++)
    {
      g_autofree char *trimmed = g_strstrip (g_strdup (rows[i].text));

      g_test_message ("row %zu: '%s'", i, rows[i].text);
      g_assert_cmpint (sandstep_handle_is_local (trimmed), ==, rows[i].local);
      g_assert_cmpint (sandstep_handle_libc_is_local (trimmed), ==, rows[i].local);
      g_assert_cmpint (sandstep_handle_is_valid (trimmed), ==, rows[i].valid);
    }
}

/* What the front does with @given, against what the helper does. */
static void
assert_twins_agree (const char *given, gboolean expect_local)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *helper = sandstep_resolve_handle (given, &error);
  char front[SANDSTEP_HANDLE_LOCAL_LEN + 1] = "";
  int front_ok = sandstep_handle_libc_resolve (given, front);
  gboolean helper_local = helper != NULL && sandstep_handle_is_local (helper);

  g_test_message ("given '%s': helper %s, front %s", given, helper != NULL ? helper : error->message,
                  front_ok ? front : "(refused)");
  g_assert_cmpint (front_ok, ==, helper_local);
  g_assert_cmpint (front_ok, ==, expect_local);
  if (front_ok)
    g_assert_cmpstr (front, ==, helper);
}

static void
test_twins_text (void)
{
  for (gsize i = 0; i < G_N_ELEMENTS (rows); i++)
    if (rows[i].text[0] != '\0' && rows[i].text[0] != '@')
      assert_twins_agree (rows[i].text, rows[i].local);
}

static void
test_twins_file (void)
{
  g_autofree char *dir = g_dir_make_tmp ("sandstep-test-handle-XXXXXX", NULL);
  g_autofree char *missing = g_build_filename (dir, "missing.sbx", NULL);
  g_autofree char *missing_arg = g_strconcat ("@", missing, NULL);
  g_autofree char *nul = g_build_filename (dir, "nul.sbx", NULL);
  g_autofree char *nul_arg = g_strconcat ("@", nul, NULL);
  g_autofree char *big = g_build_filename (dir, "big.sbx", NULL);
  g_autofree char *big_arg = g_strconcat ("@", big, NULL);
  g_autofree char *padded = g_strnfill (SANDSTEP_HANDLE_FILE_MAX + 1 - strlen ("sandstep-0123456789abcdef"), ' ');
  g_autofree char *big_text = g_strconcat ("sandstep-0123456789abcdef", padded, NULL);

  g_assert_nonnull (dir);
  for (gsize i = 0; i < G_N_ELEMENTS (rows); i++)
    {
      g_autofree char *path = g_strdup_printf ("%s/row-%zu.sbx", dir, i);
      g_autofree char *arg = g_strconcat ("@", path, NULL);

      g_assert_true (g_file_set_contents (path, rows[i].text, -1, NULL));
      assert_twins_agree (arg, rows[i].local);
      g_unlink (path);
    }
  /* A missing file, a NUL inside, one byte too long: refused by both. */
  assert_twins_agree (missing_arg, FALSE);
  g_assert_true (g_file_set_contents (nul, "sandstep-0123456789abcdef\0\n", 27, NULL));
  assert_twins_agree (nul_arg, FALSE);
  g_assert_cmpuint (strlen (big_text), ==, SANDSTEP_HANDLE_FILE_MAX + 1);
  g_assert_true (g_file_set_contents (big, big_text, -1, NULL));
  assert_twins_agree (big_arg, FALSE);
  big_text[SANDSTEP_HANDLE_FILE_MAX] = '\0';
  g_assert_true (g_file_set_contents (big, big_text, -1, NULL));
  assert_twins_agree (big_arg, TRUE);
  g_unlink (nul);
  g_unlink (big);
  g_rmdir (dir);
}

static void
test_never_blocks (void)
{
  g_autofree char *dir = g_dir_make_tmp ("sandstep-test-handle-XXXXXX", NULL);
  g_autofree char *fifo = g_build_filename (dir, "fifo.sbx", NULL);
  g_autofree char *huge = g_build_filename (dir, "huge.sbx", NULL);
  g_autofree char *junk = NULL;
  const char *paths[] = { fifo, "/dev/zero", "/dev/tty", dir, huge };
  const char *kinds[] = { "a FIFO", "a device", NULL, "a directory", "over 4096 bytes" };

  g_test_summary ("a handle file that is a FIFO, a device or a directory is refused at once by both readers, "
                  "and one that is too large after at most 4 KiB; the error names the path, never the content");
  g_assert_nonnull (dir);
  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  junk = g_strnfill (1024 * 1024, 'x');
  memcpy (junk, "\033[2Jnot\na handle", strlen ("\033[2Jnot\na handle"));
  g_assert_true (g_file_set_contents (huge, junk, -1, NULL));
  /* A reader that waits would be stopped here, failing the case. */
  alarm (10);
  for (gsize i = 0; i < G_N_ELEMENTS (paths); i++)
    {
      g_autofree char *arg = g_strconcat ("@", paths[i], NULL);
      g_autoptr(GError) error = NULL;
      g_autofree char *helper = NULL;
      char front[SANDSTEP_HANDLE_LOCAL_LEN + 1] = "";
      gint64 start = g_get_monotonic_time ();

      if (g_strcmp0 (paths[i], "/dev/tty") == 0 && !g_file_test ("/dev/tty", G_FILE_TEST_EXISTS))
        continue;
      g_assert_cmpint (sandstep_handle_libc_resolve (arg, front), ==, 0);
      helper = sandstep_resolve_handle (arg, &error);
      g_assert_null (helper);
      g_assert_error (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BAD_HANDLE);
      g_test_message ("%s: %s", paths[i], error->message);
      if (kinds[i] != NULL)
        g_assert_nonnull (strstr (error->message, kinds[i]));
      g_assert_null (strpbrk (error->message, "\n\033"));
      g_assert_cmpuint (strlen (error->message), <, 600);
      g_assert_cmpint (g_get_monotonic_time () - start, <, G_USEC_PER_SEC);
    }
  alarm (0);
  g_unlink (fifo);
  g_unlink (huge);
  g_rmdir (dir);
}

/* A handle file that is a link to a secret (as /etc/shadow would be, for a root caller): the error names
 * the path and what is wrong, never a byte of what it read. */
static void
test_never_shows_content (void)
{
  static const char secret[] = "root:$y$j9T$SECRETSALT$SECRETHASHSECRETHASH:19000:0:99999:7:::\n"
                               "daemon:*:19000:0:99999:7:::\n";
  g_autofree char *dir = g_dir_make_tmp ("sandstep-test-handle-XXXXXX", NULL);
  g_autofree char *shadow = g_build_filename (dir, "shadow", NULL);
  g_autofree char *one_line = g_build_filename (dir, "one-line", NULL);
  g_autofree char *with_nul = g_build_filename (dir, "nul", NULL);
  g_autofree char *huge = g_build_filename (dir, "huge", NULL);
  g_autofree char *huge_text = g_strnfill (SANDSTEP_HANDLE_FILE_MAX + 10, 'x');
  g_autofree char *link = g_build_filename (dir, "box.sbx", NULL);
  const char *targets[] = { shadow, one_line, with_nul, huge };

  g_test_summary ("issue 30 item 11: a handle file linked to a file that is no handle (/etc/shadow) puts none "
                  "of its content into the error");
  g_assert_nonnull (dir);
  g_assert_true (g_file_set_contents (shadow, secret, -1, NULL));
  g_assert_true (g_file_set_contents (one_line, "SECRETHASH-one-line-token", -1, NULL));
  g_assert_true (g_file_set_contents (with_nul, "SECRETHASH\0rest", 15, NULL));
  memcpy (huge_text, "SECRETHASH", 10);
  g_assert_true (g_file_set_contents (huge, huge_text, -1, NULL));
  for (gsize i = 0; i < G_N_ELEMENTS (targets); i++)
    {
      g_autofree char *arg = g_strconcat ("@", link, NULL);
      g_autoptr(GError) error = NULL;
      g_autofree char *helper = NULL;
      char front[SANDSTEP_HANDLE_LOCAL_LEN + 1] = "";

      g_assert_cmpint (symlink (targets[i], link), ==, 0);
      g_assert_cmpint (sandstep_handle_libc_resolve (arg, front), ==, 0);
      helper = sandstep_resolve_handle (arg, &error);
      g_assert_null (helper);
      g_assert_error (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BAD_HANDLE);
      g_test_message ("%s: %s", targets[i], error->message);
      g_assert_null (strstr (error->message, "SECRET"));
      g_assert_null (strstr (error->message, "root:"));
      g_assert_nonnull (strstr (error->message, link));
      g_assert_nonnull (strstr (error->message, "not shown"));
      g_unlink (link);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (targets); i++)
    g_unlink (targets[i]);
  g_rmdir (dir);
}

static void
test_split (void)
{
  g_autofree char *server = NULL;
  g_autofree char *local = NULL;
  g_autofree char *normalized = sandstep_server_url_normalize ("http://10.0.0.5:7700/prefix/");

  g_assert_true (sandstep_handle_split ("https://h.example:8443/a/b/sandstep-0123456789abcdef", &server, &local));
  g_assert_cmpstr (server, ==, "https://h.example:8443/a/b");
  g_assert_cmpstr (local, ==, "sandstep-0123456789abcdef");
  g_assert_cmpstr (normalized, ==, "http://10.0.0.5:7700/prefix");
  g_assert_false (sandstep_handle_split ("sandstep-0123456789abcdef", NULL, NULL));
}

static void
test_backend_name (void)
{
  g_assert_true (sandstep_backend_name_is_local (NULL));
  g_assert_true (sandstep_backend_name_is_local (""));
  g_assert_true (sandstep_backend_name_is_local ("local"));
  g_assert_false (sandstep_backend_name_is_local ("http://127.0.0.1:7700"));
  g_assert_false (sandstep_backend_name_is_local ("Local"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/handle/grammar", test_grammar);
  g_test_add_func ("/handle/twins/text", test_twins_text);
  g_test_add_func ("/handle/twins/file", test_twins_file);
  g_test_add_func ("/handle/twins/never-block", test_never_blocks);
  g_test_add_func ("/handle/never-shows-content", test_never_shows_content);
  g_test_add_func ("/handle/split", test_split);
  g_test_add_func ("/handle/backend-name", test_backend_name);
  return g_test_run ();
}
