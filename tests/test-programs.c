/* test-programs.c: where sandstep's programs find each other (sandstep-programs-libc.h).
 *
 * The front, the helper, the supervisor, sandstepd and both plugins ask the
 * one rule; each row is a caller's directory and the program it looks for,
 * with the places the rule must give, in order.  A build tree, an installed
 * prefix seen from each install directory, a prefix moved elsewhere, and a
 * directory of neither kind.
 */
#include <glib.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-programs-libc.h"

#define BUILD SANDSTEP_BUILD_ROOT

typedef struct {
  const char *from;
  const char *name;
  const char *places[SANDSTEP_PROGRAM_CANDIDATES];  /* NULL: that place does not apply */
} Row;

/* The install layout the rows assume is meson's default; other layouts are checked by test-install. */
static gboolean
default_layout (void)
{
  return g_str_equal (SANDSTEP_BINDIR_REL, "bin") && g_str_equal (SANDSTEP_SBINDIR_REL, "sbin") &&
         g_str_equal (SANDSTEP_LIBEXECDIR_REL, "libexec") &&
         g_str_has_prefix (SANDSTEP_PLUGINDIR_REL, "lib/") && g_str_has_suffix (SANDSTEP_PLUGINDIR_REL, "/sandstep");
}

static void
test_rows (void)
{
  const Row rows[] = {
    /* The build tree: each program where the build puts it. */
    { BUILD "/programs", "sandstep-core",
      { BUILD "/programs/sandstep-core", BUILD "/programs/sandstep-core", NULL,
        SANDSTEP_LIBEXECDIR "/sandstep-core" } },
    { BUILD "/daemon", "sandstep-supervise",
      { BUILD "/daemon/sandstep-supervise", BUILD "/programs/sandstep-supervise", NULL,
        SANDSTEP_LIBEXECDIR "/sandstep-supervise" } },
    { BUILD "/tests", "sandstep-remote.so",
      { BUILD "/tests/sandstep-remote.so", BUILD "/hooks/remote/sandstep-remote.so", NULL,
        SANDSTEP_LIBEXECDIR "/sandstep-remote.so" } },
    { BUILD "/plugin/slurm", "sandstep",
      { BUILD "/plugin/slurm/sandstep", BUILD "/programs/sandstep", NULL, SANDSTEP_BINDIR "/sandstep" } },
    { BUILD "/tests", "sandstepd",
      { BUILD "/tests/sandstepd", BUILD "/daemon/sandstepd", NULL, SANDSTEP_SBINDIR "/sandstepd" } },
    /* An installed prefix (or one staged with DESTDIR, or moved), seen from each of its directories. */
    { "/opt/moved/bin", "sandstep-core",
      { "/opt/moved/bin/sandstep-core", NULL, "/opt/moved/libexec/sandstep-core",
        SANDSTEP_LIBEXECDIR "/sandstep-core" } },
    { "/opt/moved/sbin", "sandstep-supervise",
      { "/opt/moved/sbin/sandstep-supervise", NULL, "/opt/moved/libexec/sandstep-supervise",
        SANDSTEP_LIBEXECDIR "/sandstep-supervise" } },
    { "/opt/moved/libexec", "sandstep-remote.so",
      { "/opt/moved/libexec/sandstep-remote.so", NULL, "/opt/moved/libexec/sandstep-remote.so",
        SANDSTEP_LIBEXECDIR "/sandstep-remote.so" } },
    { "/opt/moved/" SANDSTEP_PLUGINDIR_REL, "sandstep",
      { "/opt/moved/" SANDSTEP_PLUGINDIR_REL "/sandstep", NULL, "/opt/moved/bin/sandstep",
        SANDSTEP_BINDIR "/sandstep" } },
    /* Neither: beside it, then the compiled-in place. */
    { "/srv/elsewhere", "sandstep-init",
      { "/srv/elsewhere/sandstep-init", NULL, NULL, SANDSTEP_LIBEXECDIR "/sandstep-init" } },
    { NULL, "sandstep-init", { NULL, NULL, NULL, SANDSTEP_LIBEXECDIR "/sandstep-init" } },
  };

  g_test_summary ("Every caller's directory gives the same places in the same order: beside it, the build tree, "
                  "the prefix it is installed under, the compiled-in directory");
  if (!default_layout ())
    {
      g_test_skip ("this build is configured with another install layout than meson's default");
      return;
    }
  for (gsize r = 0; r < G_N_ELEMENTS (rows); r++)
    {
      char out[4096];
      int i;

      for (i = 0; i < SANDSTEP_PROGRAM_CANDIDATES; i++)
        {
          int found = sandstep_program_candidate (i, rows[r].from, rows[r].name, out, sizeof out);
          g_test_message ("%s, %s, place %d: %s", rows[r].from, rows[r].name, i, found > 0 ? out : "-");
          g_assert_cmpint (found, ==, rows[r].places[i] != NULL);
          if (found > 0)
            g_assert_cmpstr (out, ==, rows[r].places[i]);
        }
      g_assert_cmpint (sandstep_program_candidate (i, rows[r].from, rows[r].name, out, sizeof out), ==, -1);
    }
}

/* A place that does not fit the caller's buffer is skipped, never cut short. */
static void
test_too_long (void)
{
  char out[16];

  g_assert_cmpint (sandstep_program_candidate (0, "/a/directory/longer/than/out", "sandstep", out, sizeof out), ==,
                   0);
  g_assert_cmpint (sandstep_program_candidate (3, NULL, "sandstep-supervise", out, sizeof out), ==, 0);
}

/* sandstep_program_path: the first place that holds a program, else the compiled-in one. */
static void
test_path (void)
{
  g_autofree char *dir = g_dir_make_tmp ("sandstep-programs-XXXXXX", NULL);
  g_autofree char *program = g_build_filename (dir, "sandstep-core", NULL);
  g_autofree char *module = g_build_filename (dir, "sandstep-remote.so", NULL);
  char *path;

  g_assert_nonnull (dir);
  path = sandstep_program_path (dir, "sandstep-core");
  g_assert_cmpstr (path, ==, SANDSTEP_LIBEXECDIR "/sandstep-core");
  free (path);
  /* Beside it, but not executable: not a program. */
  g_assert_true (g_file_set_contents (program, "#!/bin/sh\n", -1, NULL));
  path = sandstep_program_path (dir, "sandstep-core");
  g_assert_cmpstr (path, ==, SANDSTEP_LIBEXECDIR "/sandstep-core");
  free (path);
  g_assert_cmpint (chmod (program, 0755), ==, 0);
  path = sandstep_program_path (dir, "sandstep-core");
  g_assert_cmpstr (path, ==, program);
  free (path);
  /* A module is loaded, so readable is enough. */
  g_assert_true (g_file_set_contents (module, "", -1, NULL));
  path = sandstep_program_path (dir, "sandstep-remote.so");
  g_assert_cmpstr (path, ==, module);
  free (path);
  g_assert_cmpint (unlink (program), ==, 0);
  g_assert_cmpint (unlink (module), ==, 0);
  g_assert_cmpint (rmdir (dir), ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/programs/places", test_rows);
  g_test_add_func ("/programs/too-long", test_too_long);
  g_test_add_func ("/programs/path", test_path);
  return g_test_run ();
}
