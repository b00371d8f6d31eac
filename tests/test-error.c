/* test-error.c: the error table (sandstep-error.c): every code of every
 * domain has one row, its exit status is the README's, and an error crosses
 * sandstepd's wire and comes back the same, facts included.
 *
 * A new error code needs a row here in `codes` (and one in the table); the
 * test fails until both exist.
 */
#include <gio/gio.h>
#include <glib.h>
#include <json-glib/json-glib.h>
#include <string.h>

#include "sandstep-error.h"
#include "sandstep-wire.h"

typedef struct {
  GQuark (*domain) (void);
  int code;
  SandstepExit exit_status;   /* the README's "Exit statuses" */
} Code;

static const Code codes[] = {
  { sandstep_usage_error_quark,   SANDSTEP_USAGE_ERROR_UNKNOWN_OPTION, SANDSTEP_EXIT_USAGE },
  { sandstep_usage_error_quark,   SANDSTEP_USAGE_ERROR_BAD_VALUE,      SANDSTEP_EXIT_USAGE },
  { sandstep_usage_error_quark,   SANDSTEP_USAGE_ERROR_MISSING,        SANDSTEP_EXIT_USAGE },
  { sandstep_usage_error_quark,   SANDSTEP_USAGE_ERROR_FAILED,         SANDSTEP_EXIT_USAGE },
  { sandstep_sandbox_error_quark, SANDSTEP_SANDBOX_ERROR_BAD_HANDLE,   SANDSTEP_EXIT_BAD_HANDLE },
  { sandstep_sandbox_error_quark, SANDSTEP_SANDBOX_ERROR_NOT_FOUND,    SANDSTEP_EXIT_NO_SANDBOX },
  { sandstep_sandbox_error_quark, SANDSTEP_SANDBOX_ERROR_NOT_OWNER,    SANDSTEP_EXIT_NOT_OWNER },
  { sandstep_sandbox_error_quark, SANDSTEP_SANDBOX_ERROR_EXPIRED,      SANDSTEP_EXIT_EXPIRED },
  { sandstep_sandbox_error_quark, SANDSTEP_SANDBOX_ERROR_BUSY,         SANDSTEP_EXIT_BUSY },
  { sandstep_sandbox_error_quark, SANDSTEP_SANDBOX_ERROR_STATE,        SANDSTEP_EXIT_INTERNAL },
  { sandstep_sandbox_error_quark, SANDSTEP_SANDBOX_ERROR_BROKEN,       SANDSTEP_EXIT_INTERNAL },
  { sandstep_sandbox_error_quark, SANDSTEP_SANDBOX_ERROR_NO_SPACE,     SANDSTEP_EXIT_INTERNAL },
  { sandstep_sandbox_error_quark, SANDSTEP_SANDBOX_ERROR_FAILED,       SANDSTEP_EXIT_INTERNAL },
  { sandstep_sandbox_error_quark, SANDSTEP_SANDBOX_ERROR_CONFLICT,     SANDSTEP_EXIT_USAGE },
  { sandstep_jail_error_quark,    SANDSTEP_JAIL_ERROR_SETUP,           SANDSTEP_EXIT_INTERNAL },
  { sandstep_jail_error_quark,    SANDSTEP_JAIL_ERROR_UNSUPPORTED,     SANDSTEP_EXIT_INTERNAL },
  { sandstep_jail_error_quark,    SANDSTEP_JAIL_ERROR_TIMEOUT,         SANDSTEP_EXIT_TIMEOUT },
  { sandstep_jail_error_quark,    SANDSTEP_JAIL_ERROR_KILLED,          SANDSTEP_EXIT_INTERNAL },
  { sandstep_jail_error_quark,    SANDSTEP_JAIL_ERROR_FAILED,          SANDSTEP_EXIT_INTERNAL },
  { sandstep_jail_error_quark,    SANDSTEP_JAIL_ERROR_STALE_PLAN,      SANDSTEP_EXIT_INTERNAL },
  { sandstep_path_error_quark,    SANDSTEP_PATH_ERROR_ESCAPES,         SANDSTEP_EXIT_PATH },
  { sandstep_path_error_quark,    SANDSTEP_PATH_ERROR_NOT_FOUND,       SANDSTEP_EXIT_PATH },
  { sandstep_path_error_quark,    SANDSTEP_PATH_ERROR_IS_DIRECTORY,    SANDSTEP_EXIT_PATH },
  { sandstep_path_error_quark,    SANDSTEP_PATH_ERROR_NOT_REGULAR,     SANDSTEP_EXIT_PATH },
  { sandstep_path_error_quark,    SANDSTEP_PATH_ERROR_TOO_LARGE,       SANDSTEP_EXIT_PATH },
  { sandstep_path_error_quark,    SANDSTEP_PATH_ERROR_CHANGED,         SANDSTEP_EXIT_PATH },
  { sandstep_path_error_quark,    SANDSTEP_PATH_ERROR_IO,              SANDSTEP_EXIT_PATH },
  { sandstep_path_error_quark,    SANDSTEP_PATH_ERROR_FAILED,          SANDSTEP_EXIT_PATH },
  { sandstep_export_error_quark,  SANDSTEP_EXPORT_ERROR_BAD_URL,       SANDSTEP_EXIT_USAGE },
  { sandstep_export_error_quark,  SANDSTEP_EXPORT_ERROR_WRITE,         SANDSTEP_EXIT_EXPORT },
  { sandstep_export_error_quark,  SANDSTEP_EXPORT_ERROR_FAILED,        SANDSTEP_EXIT_EXPORT },
  { sandstep_image_error_quark,   SANDSTEP_IMAGE_ERROR_BAD_REFERENCE,  SANDSTEP_EXIT_USAGE },
  { sandstep_image_error_quark,   SANDSTEP_IMAGE_ERROR_NOT_FOUND,      SANDSTEP_EXIT_IMAGE },
  { sandstep_image_error_quark,   SANDSTEP_IMAGE_ERROR_AUTH,           SANDSTEP_EXIT_IMAGE },
  { sandstep_image_error_quark,   SANDSTEP_IMAGE_ERROR_DIGEST,         SANDSTEP_EXIT_IMAGE },
  { sandstep_image_error_quark,   SANDSTEP_IMAGE_ERROR_PLATFORM,       SANDSTEP_EXIT_IMAGE },
  { sandstep_image_error_quark,   SANDSTEP_IMAGE_ERROR_TOO_LARGE,      SANDSTEP_EXIT_IMAGE },
  { sandstep_image_error_quark,   SANDSTEP_IMAGE_ERROR_HOSTILE,        SANDSTEP_EXIT_IMAGE },
  { sandstep_image_error_quark,   SANDSTEP_IMAGE_ERROR_INSECURE,       SANDSTEP_EXIT_IMAGE },
  { sandstep_image_error_quark,   SANDSTEP_IMAGE_ERROR_UNSUPPORTED,    SANDSTEP_EXIT_IMAGE },
  { sandstep_image_error_quark,   SANDSTEP_IMAGE_ERROR_STORE,          SANDSTEP_EXIT_INTERNAL },
  { sandstep_image_error_quark,   SANDSTEP_IMAGE_ERROR_NETWORK,        SANDSTEP_EXIT_IMAGE },
  { sandstep_image_error_quark,   SANDSTEP_IMAGE_ERROR_FAILED,         SANDSTEP_EXIT_IMAGE },
};

/* The code an unknown code of each domain becomes. */
static const struct {
  GQuark (*domain) (void);
  int failed;
} failed_codes[] = {
  { sandstep_usage_error_quark,   SANDSTEP_USAGE_ERROR_FAILED },
  { sandstep_sandbox_error_quark, SANDSTEP_SANDBOX_ERROR_FAILED },
  { sandstep_jail_error_quark,    SANDSTEP_JAIL_ERROR_FAILED },
  { sandstep_path_error_quark,    SANDSTEP_PATH_ERROR_FAILED },
  { sandstep_export_error_quark,  SANDSTEP_EXPORT_ERROR_FAILED },
};

static void
test_every_code_one_row (void)
{
  gsize n_kinds;
  const SandstepErrorKind *kinds = sandstep_error_kinds (&n_kinds);

  g_assert_cmpuint (n_kinds, ==, G_N_ELEMENTS (codes));
  for (gsize i = 0; i < G_N_ELEMENTS (codes); i++)
    {
      guint rows = 0;
      for (gsize k = 0; k < n_kinds; k++)
        if (kinds[k].domain () == codes[i].domain () && kinds[k].code == codes[i].code)
          rows++;
      g_test_message ("%s %d", g_quark_to_string (codes[i].domain ()), codes[i].code);
      g_assert_cmpuint (rows, ==, 1);
    }
  for (gsize k = 0; k < n_kinds; k++)
    {
      g_assert_cmpuint (kinds[k].http_status, >=, 400);
      g_assert_cmpuint (kinds[k].http_status, <, 600);
      g_assert_nonnull (kinds[k].wire_code);
      g_assert_cmpstr (kinds[k].hint, !=, "");
    }
}

static void
test_exit_statuses (void)
{
  g_assert_cmpint (sandstep_error_exit_status (NULL), ==, SANDSTEP_EXIT_OK);
  for (gsize i = 0; i < G_N_ELEMENTS (codes); i++)
    {
      g_autoptr(GError) error = g_error_new_literal (codes[i].domain (), codes[i].code, "x");
      g_assert_cmpint (sandstep_error_exit_status (error), ==, codes[i].exit_status);
    }
  {
    g_autoptr(GError) other = g_error_new_literal (G_IO_ERROR, G_IO_ERROR_FAILED, "x");
    g_assert_cmpint (sandstep_error_exit_status (other), ==, SANDSTEP_EXIT_INTERNAL);
    g_assert_cmpstr (sandstep_error_kind (other)->wire_code, ==, "internal");
  }
}

static void
test_failed_fallback (void)
{
  for (gsize i = 0; i < G_N_ELEMENTS (failed_codes); i++)
    {
      GQuark domain = failed_codes[i].domain ();
      const char *name = sandstep_error_domain_name (domain);
      g_autoptr(GError) unknown = sandstep_error_new_from_name (name, failed_codes[i].failed + 7, "newer");
      g_autoptr(GError) made = g_error_new_literal (domain, failed_codes[i].failed + 7, "newer");
      g_autoptr(GError) failed = g_error_new_literal (domain, failed_codes[i].failed, "x");

      g_assert_nonnull (name);
      g_assert_error (unknown, domain, failed_codes[i].failed);
      g_assert_cmpstr (unknown->message, ==, "newer");
      /* A code the table lacks means what _FAILED means. */
      g_assert_true (sandstep_error_kind (made) == sandstep_error_kind (failed));
    }
  {
    g_autoptr(GError) foreign = sandstep_error_new_from_name ("g-io-error-quark", 0, "gone");
    g_autoptr(GError) none = sandstep_error_new_from_name (NULL, 3, "gone");
    g_assert_error (foreign, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE);
    g_assert_error (none, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE);
  }
}

static GError *
round_trip (const GError *error)
{
  g_autoptr(JsonNode) node = sandstep_wire_error_to_json (error);
  g_autofree char *text = json_to_string (node, FALSE);
  g_autoptr(JsonNode) back = json_from_string (text, NULL);

  return sandstep_wire_error_from_json (back, 500);
}

static void
test_wire_round_trip (void)
{
  for (gsize i = 0; i < G_N_ELEMENTS (codes); i++)
    {
      g_autoptr(GError) error = g_error_new (codes[i].domain (), codes[i].code, "message %zu", i);
      g_autoptr(GError) back = round_trip (error);

      g_assert_error (back, codes[i].domain (), codes[i].code);
      g_assert_cmpstr (back->message, ==, error->message);
    }
}

static void
test_facts (void)
{
  g_autoptr(GError) busy = NULL;
  g_autoptr(GError) big = NULL;
  g_autoptr(GError) busy_back = NULL;
  g_autoptr(GError) big_back = NULL;
  g_autoptr(GError) copy = NULL;
  g_autoptr(GError) plain = g_error_new_literal (SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_TOO_LARGE, "x");
  guint64 size = 0, limit = 0;

  g_assert_false (sandstep_throw_busy (&busy, "dag/run/a.sbx", "held by %s", "someone"));
  g_assert_error (busy, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BUSY);
  g_assert_cmpstr (sandstep_error_get_holder (busy), ==, "dag/run/a.sbx");
  copy = g_error_copy (busy);
  g_assert_cmpstr (sandstep_error_get_holder (copy), ==, "dag/run/a.sbx");
  busy_back = round_trip (busy);
  g_assert_cmpstr (sandstep_error_get_holder (busy_back), ==, "dag/run/a.sbx");

  g_assert_false (sandstep_throw_too_large (&big, 6 << 20, 5 << 20, "too big"));
  g_assert_true (sandstep_error_get_size (big, &size, &limit));
  g_assert_cmpuint (size, ==, 6 << 20);
  g_assert_cmpuint (limit, ==, 5 << 20);
  big_back = round_trip (big);
  size = limit = 0;
  g_assert_true (sandstep_error_get_size (big_back, &size, &limit));
  g_assert_cmpuint (size, ==, 6 << 20);
  g_assert_cmpuint (limit, ==, 5 << 20);

  g_assert_false (sandstep_error_get_size (plain, NULL, NULL));
  g_assert_null (sandstep_error_get_holder (plain));
}

static void
test_escape (void)
{
  static const struct {
    const char *text;
    gssize len;
    gsize max;
    SandstepEscapeFlags flags;
    const char *expected;
  } cases[] = {
    { "plain name.txt", -1, 0, SANDSTEP_ESCAPE_VALUE, "plain name.txt" },
    { "two\nlines", -1, 0, SANDSTEP_ESCAPE_VALUE, "two\\nlines" },
    { "cr\rtab\t", -1, 0, SANDSTEP_ESCAPE_VALUE, "cr\\rtab\\t" },
    { "\033[2J\033]0;title\007", -1, 0, SANDSTEP_ESCAPE_VALUE, "\\x1b[2J\\x1b]0;title\\x07" },
    { "del\177", -1, 0, SANDSTEP_ESCAPE_VALUE, "del\\x7f" },
    /* C1 CSI (U+009B) is an escape sequence to many terminals. */
    { "c1\302\233" "31m", -1, 0, SANDSTEP_ESCAPE_VALUE, "c1\\xc2\\x9b" "31m" },
    { "bad\377\376utf8", -1, 0, SANDSTEP_ESCAPE_VALUE, "bad\\xff\\xfeutf8" },
    { "cut \303", -1, 0, SANDSTEP_ESCAPE_VALUE, "cut \\xc3" },
    { "r\342\200\256evil", -1, 0, SANDSTEP_ESCAPE_VALUE, "r\\u{202e}evil" },
    { "caf\303\251 \342\200\234q\342\200\235", -1, 0, SANDSTEP_ESCAPE_VALUE, "caf\303\251 \342\200\234q\342\200\235" },
    { "back\\slash", -1, 0, SANDSTEP_ESCAPE_VALUE, "back\\\\slash" },
    { "back\\slash\n", -1, 0, SANDSTEP_ESCAPE_LINE, "back\\slash\\n" },
    { "nul\0inside", 10, 0, SANDSTEP_ESCAPE_VALUE, "nul\\x00inside" },
    { "0123456789abcdef", -1, 8, SANDSTEP_ESCAPE_VALUE, "01234567..." },
    { "short", -1, 8, SANDSTEP_ESCAPE_VALUE, "short" },
    { "", -1, 0, SANDSTEP_ESCAPE_VALUE, "" },
  };

  g_test_summary ("values shown in messages and on terminals have control characters (C0, DEL, C1), bidi "
                  "controls and invalid UTF-8 escaped, and a backslash doubled in a value, so no name can start a "
                  "line, fake an entry or send an escape sequence; printable UTF-8 stays as it is");
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *got = sandstep_escape (cases[i].text, cases[i].len, cases[i].max, cases[i].flags);

      g_assert_cmpstr (got, ==, cases[i].expected);
      g_assert_null (strpbrk (got, "\n\r\033\a"));
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/error/escape", test_escape);
  g_test_add_func ("/error/table/every-code", test_every_code_one_row);
  g_test_add_func ("/error/table/exit-statuses", test_exit_statuses);
  g_test_add_func ("/error/table/failed-fallback", test_failed_fallback);
  g_test_add_func ("/error/wire/round-trip", test_wire_round_trip);
  g_test_add_func ("/error/facts", test_facts);
  return g_test_run ();
}
