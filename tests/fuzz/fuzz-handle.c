/* fuzz-handle.c: handle files and --handle's text, read by both dialects (hooks/sandstep-handle*.c).
 *
 * The helper reads a handle with GLib (sandstep_resolve_handle()), the static
 * front with libc alone (sandstep_handle_libc_resolve()); tests/test-handle.c
 * shows that they agree on known rows, and this that they agree on any bytes:
 * both as the content of an @FILE and, when the bytes hold no NUL, as the
 * text itself.
 */
#include "fuzz.h"

#include <string.h>

#include "sandstep-handle.h"
#include "sandstep-operator.h"

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fuzz_init_glib ();
  return 0;
}

static void
assert_twins_agree (const char *given)
{
  g_autofree char *helper = sandstep_resolve_handle (given, NULL);
  char front[SANDSTEP_HANDLE_LOCAL_LEN + 1] = "";
  int front_ok = sandstep_handle_libc_resolve (given, front);

  if (helper != NULL)
    sandstep_handle_is_valid (helper);
  g_assert_cmpint (front_ok, ==, helper != NULL && sandstep_handle_is_local (helper));
  if (front_ok)
    g_assert_cmpstr (front, ==, helper);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autofree char *file_arg = g_strconcat ("@", fuzz_bytes_as_file (data, size), NULL);
  g_autofree char *text = NULL;

  {
    /* The file as the helper's other readers take it. */
    g_autofree char *contents = sandstep_handle_read_file (file_arg + 1, NULL);
  }
  assert_twins_agree (file_arg);
  if (size > 0 && memchr (data, '\0', size) == NULL && data[0] != '@')
    {
      g_autofree char *server = NULL;
      g_autofree char *local = NULL;

      text = g_strndup ((const char *) data, size);
      assert_twins_agree (text);
      if (sandstep_handle_split (text, &server, &local))
        g_assert_true (sandstep_handle_is_local (local));
      g_free (sandstep_server_url_normalize (text));
    }
  return 0;
}
