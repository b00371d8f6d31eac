/* attack-utils.c: running tests/security/attack.c inside sandboxes. */
#include "attack-utils.h"

#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

void
attack_copy_file (const char *from, const char *to, mode_t mode)
{
  g_autofree char *contents = NULL;
  gsize len = 0;
  g_autoptr(GError) error = NULL;

  g_file_get_contents (from, &contents, &len, &error);
  g_assert_no_error (error);
  g_file_set_contents_full (to, contents, len, G_FILE_SET_CONTENTS_NONE, mode, &error);
  g_assert_no_error (error);
  g_assert_cmpint (chmod (to, mode), ==, 0);
}

void
attack_fixture_setup (AttackFixture *af, RunAs as)
{
  const char *attack = g_getenv ("SANDSTEP_ATTACK");
  g_autofree char *bin = NULL;
  g_autofree char *note = NULL;
  g_autoptr(GError) error = NULL;
  char *reason = NULL;

  sandstep_test_setup (&af->base, NULL);
  af->skip_reason = NULL;
  if (attack == NULL)
    g_test_message ("SANDSTEP_ATTACK must name the built attack program; tests/security/meson.build sets it");
  g_assert_nonnull (attack);

  if (as == AS_USER)
    {
      SandstepTestUser *user = sandstep_test_user_new (&reason);
      if (user == NULL)
        af->skip_reason = reason;
      else if (!sandstep_test_user_can_unshare (user, &reason))
        {
          sandstep_test_user_free (user);
          af->skip_reason = reason;
        }
      else
        sandstep_test_fixture_set_user (&af->base, user);
    }

  af->bin_dir = sandstep_test_host_path (&af->base, "bin");
  g_assert_cmpint (mkdir (af->bin_dir, 0755), ==, 0);
  bin = g_build_filename (af->bin_dir, "attack", NULL);
  attack_copy_file (attack, bin, 0755);
  /* A plain data file beside it (the program itself is busy while it runs), writable by anyone: only the
   * read-only mount stands between a command and it. */
  note = g_build_filename (af->bin_dir, "note.txt", NULL);
  g_file_set_contents (note, "data\n", -1, &error);
  g_assert_no_error (error);
  g_assert_cmpint (chmod (note, 0666), ==, 0);
  sandstep_test_fixture_chown (&af->base, af->bin_dir);
  af->mount_arg = g_strdup_printf ("--mount=%s:/data/bin", af->bin_dir);
}

void
attack_fixture_teardown (AttackFixture *af)
{
  /* Destroy this case's sandboxes through the helper, so that what lives
   * outside the state directory (their cgroups) goes too. */
  if (af->base.state_dir != NULL && g_file_test (af->base.state_dir, G_FILE_TEST_IS_DIR))
    {
      g_autofree char *run = g_strconcat ("--run=", af->base.run, NULL);
      const char *args[] = { "gc", run, NULL };
      g_autoptr(SandstepTestResult) r = sandstep_test_helper_argv (&af->base, args, 60);
      if (r->status != 0)
        g_test_message ("gc of run %s at teardown: status %d: %s", af->base.run, r->status, r->err);
    }
  g_free (af->skip_reason);
  g_free (af->bin_dir);
  g_free (af->mount_arg);
  sandstep_test_teardown (&af->base, NULL);
}

SandstepTestFixture *
attack_begin (AttackFixture *af)
{
  if (af->skip_reason != NULL)
    {
      g_test_skip (af->skip_reason);
      return NULL;
    }
  return &af->base;
}

uid_t
attack_helper_uid (AttackFixture *af)
{
  return af->base.user != NULL ? af->base.user->uid : getuid ();
}

char *
attack_provision (AttackFixture *af, ...)
{
  g_autoptr(GPtrArray) args = g_ptr_array_new ();
  g_autoptr(SandstepTestResult) r = NULL;
  const char *arg;
  va_list ap;

  g_ptr_array_add (args, (gpointer) "provision");
  g_ptr_array_add (args, af->mount_arg);
  va_start (ap, af);
  while ((arg = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (args, (gpointer) arg);
  va_end (ap);
  g_ptr_array_add (args, NULL);
  r = sandstep_test_helper_argv (&af->base, (const char *const *) args->pdata, ATTACK_TIMEOUT_S);
  sandstep_test_assert_status (r, 0);
  g_assert_true (g_str_has_suffix (r->out, "\n"));
  /* Assertions may be non-fatal (the suites keep going): never index an empty output. */
  if (r->status != 0 || r->out_len == 0)
    return g_strdup ("sandstep-provision-failed");
  return g_strndup (r->out, r->out_len - 1);
}

char *
attack_handle_arg (const char *handle)
{
  return g_strconcat ("--handle=", handle, NULL);
}

SandstepTestResult *
attack_run_command (AttackFixture *af, const char *handle, const char *command)
{
  g_autofree char *h = attack_handle_arg (handle);
  const char *args[] = { "run", h, "--", command, NULL };

  return sandstep_test_helper_argv (&af->base, args, ATTACK_TIMEOUT_S);
}

SandstepTestResult *
attack_run (AttackFixture *af, const char *handle, const char *attack)
{
  g_autofree char *command = g_strconcat ("/data/bin/attack ", attack, NULL);

  return attack_run_command (af, handle, command);
}

void
attack_assert_line_impl (const char *file, int line, const char *func, const SandstepTestResult *r,
                         const char *expected)
{
  g_autofree char *want = g_strconcat (expected, "\n", NULL);

  sandstep_test_assert_status_impl (file, line, func, r, 0);
  if (g_strcmp0 (r->out, want) != 0)
    {
      g_autofree char *got = g_strdup (r->out);
      g_autofree char *message = g_strdup_printf ("'%s' printed '%s', expected '%s' (stderr: %s)", r->command,
                                                  g_strchomp (got), expected, r->err);
      g_assertion_message (G_LOG_DOMAIN, file, line, func, message);
    }
}

char *
attack_sandbox_path (AttackFixture *af, const char *handle, const char *rel)
{
  return g_build_filename (af->base.state_dir, "sandboxes", handle, rel, NULL);
}
