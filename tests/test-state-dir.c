/* test-state-dir.c: where the state directory is, and whether it is trusted (sandstep-trust-libc.h).
 *
 * The static front and the core find the state directory with the one rule
 * sandstep_state_dir_default() writes, and judge it with
 * sandstep_state_dir_trusted(); each row below is an environment and the
 * directory the rule must give.  A sandbox's claim file is read by one
 * rule too (sandstep-claim-libc.h), by the helper and the supervisor alike.
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <limits.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "sandstep-claim-libc.h"
#include "sandstep-state-dir.h"
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
          g_autofree char *core = sandstep_state_dir ();
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

/* What a claim file names: both writers' forms (json-glib's, the supervisor's), and what no writer makes. */
static void
test_claim_text (void)
{
  static const struct {
    const char *text;
    const char *holder;   /* NULL: refused */
    int pid;
  } rows[] = {
    { "{\"holder\":\"dag/run/step\",\"pid\":42,\"start\":123456}", "dag/run/step", 42 },
    { "{\"holder\":\"a\\\"b\\\\c\\u001b\",\"pid\":7,\"start\":0}", "a\"b\\c\033", 7 },
    { "{\"holder\":\"caf\xc3\xa9\",\"pid\":2147483647,\"start\":9}", "caf\xc3\xa9", 2147483647 },
    { "", NULL, 0 },
    { "{ not json", NULL, 0 },
    { "{\"holder\":\"x\",\"pid\":0,\"start\":1}", NULL, 0 },
    { "{\"holder\":\"x\",\"pid\":2147483648,\"start\":1}", NULL, 0 },
    { "{\"holder\":\"x\",\"pid\":4.5,\"start\":1}", NULL, 0 },
    { "{\"holder\":\"x\",\"pid\":\"42\",\"start\":1}", NULL, 0 },
    { "{\"holder\":\"x\",\"pid\":42,\"start\":-1}", NULL, 0 },
    { "{\"holder\":42,\"pid\":42,\"start\":1}", NULL, 0 },
    { "{\"pid\":42,\"start\":1}", NULL, 0 },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (rows); i++)
    {
      SandstepClaimText text;
      int named = sandstep_claim_parse (rows[i].text, strlen (rows[i].text), &text);

      g_test_message ("%s", rows[i].text);
      g_assert_cmpint (named, ==, rows[i].holder != NULL);
      if (rows[i].holder != NULL)
        {
          g_assert_cmpstr (text.holder, ==, rows[i].holder);
          g_assert_cmpint (text.pid, ==, rows[i].pid);
        }
      else
        g_assert_cmpint (text.pid, ==, 0);
    }
}

/* A lock and its holder's name: trusted when /proc/locks shows that pid holding it, not when the file still names
 * another (the previous holder, or a new one that has not written its name yet). */
static void
test_claim_lock (void)
{
  g_autofree char *dir = g_dir_make_tmp ("sandstep-claim-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "claim", NULL);
  g_autofree char *ours = g_strdup_printf ("{\"holder\":\"me\",\"pid\":%d,\"start\":0}", (int) getpid ());
  g_autofree char *theirs = g_strdup_printf ("{\"holder\":\"before\",\"pid\":%d,\"start\":0}", (int) getpid () + 1);
  SandstepClaimText text;
  int fd;

  g_assert_true (g_file_set_contents (path, ours, -1, NULL));
  fd = open (path, O_RDWR | O_CLOEXEC);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (sandstep_claim_lock_holder (fd), ==, 0);
  g_assert_cmpint (flock (fd, LOCK_EX | LOCK_NB), ==, 0);
  g_assert_cmpint (sandstep_claim_lock_holder (fd), ==, getpid ());
  g_assert_cmpint (sandstep_claim_read_once (fd, &text), ==, 1);
  g_assert_cmpstr (text.holder, ==, "me");
  g_assert_cmpint (pwrite (fd, theirs, strlen (theirs), 0), ==, (ssize_t) strlen (theirs));
  g_assert_cmpint (sandstep_claim_read_once (fd, &text), ==, 0);
  g_assert_cmpint (text.pid, ==, getpid ());
  g_assert_cmpstr (text.holder, ==, "");
  close (fd);
  g_unlink (path);
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/state-dir/default", test_default);
  g_test_add_func ("/state-dir/trusted", test_trusted);
  g_test_add_func ("/state-dir/claim-text", test_claim_text);
  g_test_add_func ("/state-dir/claim-lock", test_claim_lock);
  return g_test_run ();
}
