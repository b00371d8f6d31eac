/* test-front-json.c: the static front's JSON reader (hooks/sandstep-json-libc.c), which reads
 * sandstepd's answers with libc alone.
 *
 * Strings end right before a page the process may not read, so a read past a line's end is a SIGSEGV,
 * not a silent pass.
 */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <glib.h>

#include "sandstep-json-libc.h"

/* @text (with its NUL) copied so that its NUL is the last readable byte: the next page is PROT_NONE. */
static char *
at_page_end (const char *text, void **out_map, size_t *out_len)
{
  size_t page = (size_t) sysconf (_SC_PAGESIZE);
  size_t len = strlen (text) + 1;
  char *map = mmap (NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

  g_assert_true (map != MAP_FAILED);
  g_assert_cmpuint (len, <=, page);
  g_assert_cmpint (mprotect (map + page, page, PROT_NONE), ==, 0);
  memcpy (map + page - len, text, len);
  *out_map = map;
  *out_len = 2 * page;
  return map + page - len;
}

static void
test_unicode_escape_at_end (void)
{
  /* Each is cut inside a \u escape (or the low half of a pair) by the line's end. */
  static const char *const cut[] = {
    "\"\\u", "\"\\u1", "\"\\u12", "\"\\u123", "\"\\ud83d\\u", "\"\\ud83d\\ude", "\"\\ud83d\\ude0",
  };
  static const struct { const char *json; const char *text; } good[] = {
    { "\"a\\u0041b\"", "aAb" },
    { "\"\\u00e9\"", "\xc3\xa9" },
    { "\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80" },
    { "\"\\uD83D\\uDE00!\"", "\xf0\x9f\x98\x80!" },
  };
  static const char *const not_hex[] = { "\"\\u12g4\"", "\"\\u+123\"", "\"\\u 123\"", "\"\\u-1aa\"" };

  g_test_bug ("30");
  g_test_summary ("issue 30: a \\u escape cut by the end of the line is no string, and reading it stays inside the "
                  "line (the next page is unreadable); escapes that are there decode, digits that are not hex are "
                  "refused");
  for (gsize i = 0; i < G_N_ELEMENTS (cut); i++)
    {
      void *map;
      size_t map_len;
      const char *json = at_page_end (cut[i], &map, &map_len);
      char out[64];

      g_test_message ("%s", cut[i]);
      g_assert_cmpint (sandstep_json_libc_string (json, out, sizeof out), ==, 0);
      munmap (map, map_len);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (good); i++)
    {
      void *map;
      size_t map_len;
      const char *json = at_page_end (good[i].json, &map, &map_len);
      char out[64];

      g_assert_cmpint (sandstep_json_libc_string (json, out, sizeof out), ==, 1);
      g_assert_cmpstr (out, ==, good[i].text);
      munmap (map, map_len);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (not_hex); i++)
    {
      char out[64];

      g_test_message ("%s", not_hex[i]);
      g_assert_cmpint (sandstep_json_libc_string (not_hex[i], out, sizeof out), ==, 0);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/front-json/unicode-escape-at-end", test_unicode_escape_at_end);
  return g_test_run ();
}
