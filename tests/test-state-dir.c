/* test-state-dir.c: where the state directory is, and whether it is trusted (sandstep-trust-libc.h).
 *
 * The static front and the core find the state directory with the one rule
 * sandstep_state_dir_default() writes, and judge it with
 * sandstep_state_dir_trusted(); each row below is an environment and the
 * directory the rule must give.
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "sandstep-store.h"
#include "sandstep-trust-libc.h"

typedef struct {
  const char *state, *xdg, *home;
  const char *expected;   /* NULL: none known; "ROOT" where root gets /var/lib/sandstep */
} Row;

static void
set_or_unset (const char *name, const char *value)
{
  if (value != NULL)
    g_setenv (name, value, TRUE);
  else
    g_unsetenv (name);
}

static void
test_default (void)
{
  const Row rows[] = {
    { "/srv/state", "/x", "/home/u", "/srv/state" },
    { "", NULL, "/home/u", "ROOT /home/u/.local/state/sandstep" },
    { NULL, "/xdg", "/home/u", "ROOT /xdg/sandstep" },
    { NULL, "relative", "/home/u", "ROOT /home/u/.local/state/sandstep" },
    { NULL, NULL, "relative", "ROOT -" },
    { NULL, NULL, NULL, "ROOT -" },
  };
  gboolean root = geteuid () == 0 && getuid () == 0;

  g_test_summary ("The state directory the front and the core both use: SANDSTEP_STATE_DIR, else /var/lib/sandstep "
                  "for root, else $XDG_STATE_HOME/sandstep (absolute only), else ~/.local/state/sandstep");
  for (gsize i = 0; i < G_N_ELEMENTS (rows); i++)
    {
      char out[PATH_MAX];
      const char *expected = rows[i].expected;
      int found;

      set_or_unset ("SANDSTEP_STATE_DIR", rows[i].state);
      set_or_unset ("XDG_STATE_HOME", rows[i].xdg);
      set_or_unset ("HOME", rows[i].home);
      if (g_str_has_prefix (expected, "ROOT "))
        expected = root ? "/var/lib/sandstep" : expected + strlen ("ROOT ");
      found = sandstep_state_dir_default (out, sizeof out);
      g_test_message ("row %" G_GSIZE_FORMAT ": %s", i, found ? out : "-");
      if (g_str_equal (expected, "-"))
        g_assert_cmpint (found, ==, 0);
      else
        {
          g_autofree char *core = sandstep_store_default_dir ();
          g_assert_cmpint (found, ==, 1);
          g_assert_cmpstr (out, ==, expected);
          /* The core's answer is the same. */
          g_assert_cmpstr (core, ==, expected);
        }
    }
}

/* A directory others may write is refused, naming it; one of the caller's own, 0700, is trusted. */
static void
test_trusted (void)
{
  g_autofree char *dir = g_dir_make_tmp ("sandstep-state-XXXXXX", NULL);
  char why[1024] = "";

  g_test_summary ("A state directory of the caller's, 0700, is trusted; one that others may write is refused in one "
                  "line that names it and its mode");
  g_assert_nonnull (dir);
  g_assert_cmpint (g_chmod (dir, 0700), ==, 0);
  g_assert_cmpint (sandstep_state_dir_trusted (dir, why, sizeof why), ==, 1);
  g_assert_cmpint (g_chmod (dir, 0777), ==, 0);
  g_assert_cmpint (sandstep_state_dir_trusted (dir, why, sizeof why), ==, 0);
  g_test_message ("%s", why);
  g_assert_nonnull (strstr (why, dir));
  g_assert_nonnull (strstr (why, "0777"));
  g_assert_null (strchr (why, '\n'));
  g_assert_cmpint (g_rmdir (dir), ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/state-dir/default", test_default);
  g_test_add_func ("/state-dir/trusted", test_trusted);
  return g_test_run ();
}
