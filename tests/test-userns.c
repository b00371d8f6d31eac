/* test-userns.c: hosts that restrict user namespaces get one line that names
 * the restriction and its fix, and exit 125.
 *
 * /userns/diagnose/...  the judgement alone, over /proc-like trees laid out
 *                       as each restricted host has them.
 * /userns/helper/...    the real helper where this test can make the host so:
 *                       user.max_user_namespaces=0 inside a user namespace of
 *                       the test's own (unshare -U -r), and a seccomp filter
 *                       that denies clone3 and unshare as Docker's profile does.
 * AppArmor's restriction and kernel.unprivileged_userns_clone are host
 * settings a test may not change: the judgement covers them.
 */
#include <errno.h>
#include <seccomp.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-exit.h"
#include "sandstep-test-utils.h"
#include "sandstep-userns.h"

/* ---- the judgement ---- */

typedef struct {
  const char *name;
  const char *files[4][2];       /* path under the fake /proc, content */
  SandstepUsernsStage stage;
  int errsv;
  const char *expected[3];       /* in the sentence; NULL first: no sentence */
} Case;

static const Case cases[] = {
  { "max-user-namespaces", { { "sys/user/max_user_namespaces", "0\n" } }, SANDSTEP_USERNS_CREATE, ENOSPC,
    { "user.max_user_namespaces is 0", "sysctl -w user.max_user_namespaces=15000" } },
  { "all-in-use", { { "sys/user/max_user_namespaces", "7\n" } }, SANDSTEP_USERNS_CREATE, ENOSPC,
    { "(user.max_user_namespaces is 7)", "raise it" } },
  { "unprivileged-userns-clone", { { "sys/user/max_user_namespaces", "100\n" },
                                   { "sys/kernel/unprivileged_userns_clone", "0\n" } },
    SANDSTEP_USERNS_CREATE, EPERM,
    { "kernel.unprivileged_userns_clone is 0", "sysctl -w kernel.unprivileged_userns_clone=1" } },
  { "apparmor", { { "sys/user/max_user_namespaces", "100\n" },
                  { "sys/kernel/apparmor_restrict_unprivileged_userns", "1\n" } },
    SANDSTEP_USERNS_USE, EPERM,
    { "kernel.apparmor_restrict_unprivileged_userns=1", "apparmor_parser -r ", "apparmor.d/sandstep" } },
  { "seccomp", { { "sys/user/max_user_namespaces", "100\n" }, { "self/status", "Name:\tx\nSeccomp:\t2\n" } },
    SANDSTEP_USERNS_CREATE, ENOSYS,
    { "a seccomp filter", "clone3 answers ENOSYS", "--security-opt seccomp=unconfined" } },
  /* A host that restricts nothing: the caller says what failed. */
  { "none", { { "sys/user/max_user_namespaces", "100\n" }, { "sys/kernel/unprivileged_userns_clone", "1\n" },
              { "sys/kernel/apparmor_restrict_unprivileged_userns", "0\n" }, { "self/status", "Seccomp:\t0\n" } },
    SANDSTEP_USERNS_CREATE, EPERM, { NULL } },
  /* Allowed, but this failure is another one. */
  { "unrelated-errno", { { "sys/user/max_user_namespaces", "100\n" },
                         { "sys/kernel/apparmor_restrict_unprivileged_userns", "1\n" } },
    SANDSTEP_USERNS_USE, ENOENT, { NULL } },
};

static void
test_diagnose (gconstpointer data)
{
  const Case *c = data;
  g_autoptr(GError) error = NULL;
  g_autofree char *proc = g_dir_make_tmp ("sandstep-proc-XXXXXX", &error);
  g_autofree char *why = NULL;

  g_assert_no_error (error);
  for (gsize i = 0; i < G_N_ELEMENTS (c->files) && c->files[i][0] != NULL; i++)
    {
      g_autofree char *path = g_build_filename (proc, c->files[i][0], NULL);
      g_autofree char *dir = g_path_get_dirname (path);
      g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
      g_file_set_contents (path, c->files[i][1], -1, &error);
      g_assert_no_error (error);
    }
  why = sandstep_userns_diagnose (proc, c->stage, c->errsv);
  g_test_message ("%s: %s", c->name, why != NULL ? why : "(none)");
  if (c->expected[0] == NULL)
    g_assert_null (why);
  for (gsize i = 0; i < G_N_ELEMENTS (c->expected) && c->expected[i] != NULL; i++)
    sandstep_test_assert_contains (why, c->expected[i]);
  if (why != NULL)
    g_assert_null (strchr (why, '\n'));
  {
    const char *argv[] = { "rm", "-rf", proc, NULL };
    g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, NULL, NULL);
  }
}

/* ---- the real helper ---- */

/* Runs @argv with the fixture's environment; its status, stdout and stderr. */
static int
spawn_status (SandstepTestFixture *f, const char *const *argv, char **out, char **err, GSpawnChildSetupFunc setup)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *shown = g_strjoinv (" ", (char **) argv);
  int status = 0;

  g_spawn_sync (f->host_dir, (char **) argv, f->envp, G_SPAWN_SEARCH_PATH, setup, NULL, out, err, &status, &error);
  g_assert_no_error (error);
  g_test_message ("$ %s\nwait status %d\n%s%s", shown, status, out && *out ? *out : "", err && *err ? *err : "");
  return WIFEXITED (status) ? WEXITSTATUS (status) : -1;
}

/* The one line a refused run prints, with what it must say. */
static void
assert_one_line (const char *err, const char *const *expected)
{
  g_assert_true (g_str_has_prefix (err, "sandstep run: "));
  g_assert_true (strchr (err, '\n') == err + strlen (err) - 1);
  for (; *expected != NULL; expected++)
    sandstep_test_assert_contains (err, *expected);
}

static void
test_max_user_namespaces (SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *script = NULL;
  const char *expected[] = { "Cannot create the sandbox's namespaces (No space left on device)",
                             "user.max_user_namespaces is 0",
                             "sysctl -w user.max_user_namespaces=15000", NULL };

  g_test_summary ("with user.max_user_namespaces=0 (set in a user namespace of the test's own) the first "
                  "command exits 125 with one line naming the sysctl and its fix");
  {
    /* Can this host give the test a user namespace at all? */
    const char *probe[] = { "unshare", "-U", "-r", "true", NULL };
    g_autofree char *pout = NULL, *perr = NULL;
    if (spawn_status (f, probe, &pout, &perr, NULL) != 0)
      {
        g_test_skip_printf ("no user namespace for the test here: %s", perr);
        return;
      }
  }
  /* In a user namespace of a user's own, the host's / is nobody's (unmapped), and no state directory below it
   * passes the trust rule; root's maps root, who owns /. */
  if (geteuid () != 0)
    {
      g_test_skip ("run as a user, the test's user namespace shows the host's / as nobody's, so no state directory "
                   "in it passes the state directory's trust rule (run as root to check this diagnosis)");
      return;
    }
  /* Everything inside the namespace: the state, the supervisor, its jail's clone. */
  script = g_strdup_printf ("echo 0 > /proc/sys/user/max_user_namespaces || exit 99; "
                            "h=$('%s' provision) || exit 98; '%s' run --handle=\"$h\" -- true; s=$?; "
                            "'%s' destroy --handle=\"$h\" >/dev/null 2>&1; exit $s",
                            f->helper, f->helper, f->helper);
  {
    const char *argv[] = { "unshare", "-U", "-r", "/bin/sh", "-c", script, NULL };
    g_assert_cmpint (spawn_status (f, argv, &out, &err, NULL), ==, SANDSTEP_EXIT_INTERNAL);
  }
  g_assert_cmpstr (out, ==, "");
  assert_one_line (err, expected);
}

/* In the child, before exec: what Docker's default seccomp profile does to namespaces. */
static void
deny_namespaces (gpointer user_data)
{
  scmp_filter_ctx ctx = seccomp_init (SCMP_ACT_ALLOW);

  if (ctx == NULL || seccomp_rule_add (ctx, SCMP_ACT_ERRNO (ENOSYS), SCMP_SYS (clone3), 0) < 0 ||
      seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), SCMP_SYS (unshare), 0) < 0 ||
      prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || seccomp_load (ctx) < 0)
    _exit (97);
  seccomp_release (ctx);
}

static void
test_seccomp (SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *handle_arg = g_strconcat ("--handle=", handle, NULL);
  g_autofree char *out = NULL, *err = NULL;
  const char *argv[] = { f->helper, "run", handle_arg, "--", "true", NULL };
  const char *expected[] = { "a seccomp filter", "clone3 answers ENOSYS", "seccomp=unconfined", NULL };

  g_test_summary ("under a seccomp filter that denies clone3 and unshare (a container's default profile) the "
                  "first command exits 125 with one line naming the filter and its fix");
  g_assert_cmpint (spawn_status (f, argv, &out, &err, deny_namespaces), ==, SANDSTEP_EXIT_INTERNAL);
  g_assert_cmpstr (out, ==, "");
  assert_one_line (err, expected);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *path = g_strconcat ("/userns/diagnose/", cases[i].name, NULL);
      g_test_add_data_func (path, &cases[i], test_diagnose);
    }
  g_test_add ("/userns/helper/max-user-namespaces", SandstepTestFixture, NULL, sandstep_test_setup,
              test_max_user_namespaces, sandstep_test_teardown);
  g_test_add ("/userns/helper/seccomp", SandstepTestFixture, NULL, sandstep_test_setup, test_seccomp,
              sandstep_test_teardown);
  return g_test_run ();
}
