/* test-export.c: `sandstep export` to file:// destinations, attacked and killed.
 *
 * Each case runs the real helper against its own state directory and checks
 * what an export leaves on the host: a URL naming another host is refused, a
 * link planted in a shared directory does not redirect a root export, a kill
 * leaves no staging file, an export removes what an earlier one left, a
 * sparse file stays sparse, and --no-clobber keeps what exists.  tests/
 * meson.build runs it locally and through a sandstepd (test-export-remote).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-test-utils.h"

typedef SandstepTestFixture Fixture;

enum {
  EXIT_USAGE = 64,
  EXIT_EXPORT = 73,
};

static char *
handle_arg (const char *handle)
{
  return g_strconcat ("--handle=", handle, NULL);
}

static char *
file_url (const char *path)
{
  g_autoptr(GError) error = NULL;
  char *url = g_filename_to_uri (path, NULL, &error);

  g_assert_no_error (error);
  return url;
}

static int
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* The names in @dir, sorted and joined with spaces. */
static char *
dir_names (const char *dir)
{
  g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *name;

  g_assert_nonnull (d);
  while ((name = g_dir_read_name (d)) != NULL)
    g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, compare_names);
  g_ptr_array_add (names, NULL);
  return g_strjoinv (" ", (char **) names->pdata);
}

static char *
provision (Fixture *f, const char *command)
{
  char *handle = sandstep_test_provision (f, NULL);

  if (command != NULL)
    g_free (sandstep_test_run_ok (f, handle, command));
  return handle;
}

/* ---- the URL's host ---- */

static void
test_file_url_host (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = provision (f, "echo new > a.txt");
  g_autofree char *h = handle_arg (handle);
  g_autofree char *name = g_strdup_printf ("sandstep-test-export-%d-%08x.txt", (int) getpid (), g_random_int ());
  g_autofree char *at_root = g_build_filename ("/", name, NULL);
  g_autofree char *relative = g_strdup_printf ("a.txt=file://relative/%s", name);
  g_autofree char *other = g_strdup_printf ("a.txt=file://build-host.example%s", at_root);
  g_autofree char *dest = sandstep_test_host_path (f, "via-localhost.txt");
  g_autofree char *localhost = g_strdup_printf ("a.txt=file://localhost%s", dest);
  const char *refused[] = { relative, other };

  g_test_summary ("a file:// URL naming a host other than empty or localhost is refused (64) and writes nothing; "
                  "file://relative/NAME once wrote /NAME");
  for (gsize i = 0; i < G_N_ELEMENTS (refused); i++)
    {
      g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "export", h, refused[i], NULL);
      gboolean wrote = g_file_test (at_root, G_FILE_TEST_EXISTS);

      if (wrote)
        g_assert_cmpint (unlink (at_root), ==, 0);
      sandstep_test_assert_status (r, EXIT_USAGE);
      sandstep_test_assert_contains (r->err, strchr (refused[i], '=') + 1);
      sandstep_test_assert_contains (r->err, "localhost");
      g_assert_false (wrote);
    }

  {
    g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "export", h, localhost, NULL);
    g_autofree char *got = NULL;

    sandstep_test_assert_status (r, 0);
    got = sandstep_test_read_file (dest);
    g_assert_cmpstr (got, ==, "new\n");
  }
}

/* ---- links on the way to the destination ---- */

static void
test_planted_link (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *shared = sandstep_test_host_path (f, "shared");
  g_autofree char *victim = sandstep_test_host_path (f, "victim");
  g_autofree char *link = g_build_filename (shared, "out", NULL);
  g_autofree char *through = g_build_filename (link, "passwd", NULL);
  g_autofree char *victim_file = g_build_filename (victim, "passwd", NULL);
  g_autofree char *url = NULL;
  g_autofree char *pair = NULL;
  g_autofree char *got = NULL;

  g_test_summary ("a symbolic link owned by another user on the way to a file:// destination is not followed: "
                  "the export is refused (73) and the link's target is untouched; links owned by the caller or "
                  "root are followed");
  if (geteuid () != 0)
    {
      g_test_skip ("making a link owned by another user needs root");
      return;
    }
  handle = provision (f, "echo 'root::0:0:planted' > passwd");
  h = handle_arg (handle);
  g_assert_cmpint (mkdir (shared, 01777), ==, 0);
  g_assert_cmpint (chmod (shared, 01777), ==, 0);
  g_assert_cmpint (mkdir (victim, 0755), ==, 0);
  sandstep_test_write_file (victim_file, "the real one\n", -1);
  g_assert_cmpint (symlink (victim, link), ==, 0);
  /* As if user 65534 had planted it in the shared directory. */
  g_assert_cmpint (lchown (link, 65534, 65534), ==, 0);
  url = file_url (through);
  pair = g_strconcat ("passwd=", url, NULL);

  {
    g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "export", h, pair, NULL);

    sandstep_test_assert_status (r, EXIT_EXPORT);
    sandstep_test_assert_contains (r->err, link);
    sandstep_test_assert_contains (r->err, "65534");
    got = sandstep_test_read_file (victim_file);
    g_assert_cmpstr (got, ==, "the real one\n");
    g_clear_pointer (&got, g_free);
  }

  /* The same link owned by root (the caller here) is the caller's own choice. */
  g_assert_cmpint (lchown (link, 0, 0), ==, 0);
  {
    g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "export", h, pair, NULL);

    sandstep_test_assert_status (r, 0);
    got = sandstep_test_read_file (victim_file);
    g_assert_cmpstr (got, ==, "root::0:0:planted\n");
  }
}

/* The same as an unprivileged caller: its own links and root's are followed, another user's are not. */
static void
test_planted_link_unprivileged (Fixture *f, gconstpointer data)
{
  g_autofree char *reason = NULL;
  SandstepTestUser *user = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *shared = sandstep_test_host_path (f, "shared");
  g_autofree char *victim = sandstep_test_host_path (f, "victim");
  g_autofree char *link = g_build_filename (shared, "out", NULL);
  g_autofree char *through = g_build_filename (link, "notes.txt", NULL);
  g_autofree char *victim_file = g_build_filename (victim, "notes.txt", NULL);
  g_autofree char *url = NULL;
  g_autofree char *pair = NULL;
  g_autofree char *got = NULL;
  const char *token_file = g_getenv ("SANDSTEP_TOKEN_FILE");
  uid_t uid;
  gid_t gid;

  g_test_summary ("as an unprivileged caller too, a link on the way to a file:// destination is followed only "
                  "when the caller or root owns it: another user's link in a shared directory is refused (73) "
                  "and its target untouched");
  if (geteuid () != 0)
    {
      g_test_skip ("making a link owned by another user needs root");
      return;
    }
  user = sandstep_test_user_new (&reason);
  if (user == NULL)
    {
      g_test_skip (reason);
      return;
    }
  if (g_getenv ("SANDSTEP_BACKEND") == NULL && !sandstep_test_user_can_unshare (user, &reason))
    {
      sandstep_test_user_free (user);
      g_test_skip (reason);
      return;
    }
  uid = user->uid;
  gid = user->gid;
  sandstep_test_fixture_set_user (f, user);
  /* Through a sandstepd, the user needs the token in a file it can read. */
  if (token_file != NULL)
    {
      g_autofree char *mine = sandstep_test_host_path (f, "token");
      g_autofree char *text = sandstep_test_read_file (token_file);

      sandstep_test_write_file (mine, text, -1);
      sandstep_test_fixture_chown (f, mine);
      sandstep_test_fixture_setenv (f, "SANDSTEP_TOKEN_FILE", mine);
    }
  handle = provision (f, "echo planted-by-the-sandbox > notes.txt");
  h = handle_arg (handle);
  g_assert_cmpint (mkdir (shared, 01777), ==, 0);
  g_assert_cmpint (chmod (shared, 01777), ==, 0);
  g_assert_cmpint (mkdir (victim, 0755), ==, 0);
  sandstep_test_write_file (victim_file, "the real one\n", -1);
  sandstep_test_fixture_chown (f, victim);
  g_assert_cmpint (symlink (victim, link), ==, 0);
  url = file_url (through);
  pair = g_strconcat ("notes.txt=", url, NULL);

  /* Planted by another user (65534): not followed. */
  g_assert_cmpint (lchown (link, 65534, 65534), ==, 0);
  {
    g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "export", h, pair, NULL);

    sandstep_test_assert_status (r, EXIT_EXPORT);
    sandstep_test_assert_contains (r->err, link);
    sandstep_test_assert_contains (r->err, "65534");
    got = sandstep_test_read_file (victim_file);
    g_assert_cmpstr (got, ==, "the real one\n");
    g_clear_pointer (&got, g_free);
  }
  /* The caller's own link, and then root's: followed. */
  for (int i = 0; i < 2; i++)
    {
      g_autoptr(SandstepTestResult) r = NULL;

      g_assert_cmpint (lchown (link, i == 0 ? uid : 0, i == 0 ? gid : 0), ==, 0);
      g_assert_cmpint (unlink (victim_file), ==, 0);
      r = sandstep_test_helper (f, "export", h, pair, NULL);
      sandstep_test_assert_status (r, 0);
      got = sandstep_test_read_file (victim_file);
      g_assert_cmpstr (got, ==, "planted-by-the-sandbox\n");
      g_clear_pointer (&got, g_free);
    }
}

/* Copies the regular executables of @src_dir into @dest_dir. */
static void
copy_executables (const char *src_dir, const char *dest_dir)
{
  g_autoptr(GDir) dir = g_dir_open (src_dir, 0, NULL);
  const char *name;

  g_assert_nonnull (dir);
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *src = g_build_filename (src_dir, name, NULL);
      g_autofree char *dest = g_build_filename (dest_dir, name, NULL);
      g_autofree char *contents = NULL;
      gsize len = 0;
      g_autoptr(GError) error = NULL;
      struct stat st;

      if (stat (src, &st) < 0 || !S_ISREG (st.st_mode) || !(st.st_mode & S_IXUSR))
        continue;
      g_file_get_contents (src, &contents, &len, &error);
      g_assert_no_error (error);
      g_file_set_contents_full (dest, contents, len, G_FILE_SET_CONTENTS_NONE, 0755, &error);
      g_assert_no_error (error);
    }
}

/* A checkout under /root (0700 on Debian): a throwaway user cannot reach the build tree, and runs copies. */
static void
test_build_unreachable (Fixture *f, gconstpointer data)
{
  g_autofree char *reason = NULL;
  SandstepTestUser *user = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *hidden = NULL;
  g_autofree char *operators = NULL;
  g_autofree char *remote = NULL;
  g_autofree char *build_dir = g_path_get_dirname (f->helper);
  g_autofree char *module = g_build_filename (build_dir, "..", "hooks", "remote", "sandstep-remote.so", NULL);
  g_autofree char *base = g_path_get_basename (f->helper);
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *out_dir = sandstep_test_host_path (f, "out");
  g_autofree char *out = g_build_filename (out_dir, "notes.txt", NULL);
  g_autofree char *url = NULL;
  g_autofree char *pair = NULL;
  g_autofree char *got = NULL;
  const char *token_file = g_getenv ("SANDSTEP_TOKEN_FILE");

  g_test_summary ("a build tree its throwaway user cannot reach (under a 0700 directory, as /root is on Debian) "
                  "is run from copies that hold all it needs: a sandbox provisioned and exported from as that "
                  "user, locally and through a sandstepd (the remote backend module is copied too)");
  if (geteuid () != 0)
    {
      g_test_skip ("a throwaway user needs root to make");
      return;
    }
  user = sandstep_test_user_new (&reason);
  if (user == NULL)
    {
      g_test_skip (reason);
      return;
    }
  if (g_getenv ("SANDSTEP_BACKEND") == NULL && !sandstep_test_user_can_unshare (user, &reason))
    {
      sandstep_test_user_free (user);
      g_test_skip (reason);
      return;
    }
  /* The build tree's layout (operators/ and hooks/remote/) under a directory only root may enter. */
  hidden = g_dir_make_tmp ("sandstep-0700-XXXXXX", &error);
  g_assert_no_error (error);
  g_assert_cmpint (chmod (hidden, 0700), ==, 0);
  operators = g_build_filename (hidden, "operators", NULL);
  remote = g_build_filename (hidden, "hooks", "remote", NULL);
  g_assert_cmpint (g_mkdir_with_parents (operators, 0755), ==, 0);
  g_assert_cmpint (g_mkdir_with_parents (remote, 0755), ==, 0);
  copy_executables (build_dir, operators);
  {
    g_autofree char *contents = NULL;
    g_autofree char *dest = g_build_filename (remote, "sandstep-remote.so", NULL);
    gsize len = 0;

    g_file_get_contents (module, &contents, &len, &error);
    g_assert_no_error (error);
    g_file_set_contents_full (dest, contents, len, G_FILE_SET_CONTENTS_NONE, 0755, &error);
    g_assert_no_error (error);
  }
  g_free (f->helper);
  f->helper = g_build_filename (operators, base, NULL);

  sandstep_test_fixture_set_user (f, user);
  g_assert_false (g_str_has_prefix (f->helper, hidden));
  if (token_file != NULL)
    {
      g_autofree char *mine = sandstep_test_host_path (f, "token");
      g_autofree char *text = sandstep_test_read_file (token_file);

      sandstep_test_write_file (mine, text, -1);
      sandstep_test_fixture_chown (f, mine);
      sandstep_test_fixture_setenv (f, "SANDSTEP_TOKEN_FILE", mine);
    }
  handle = provision (f, "echo made-by-the-copies > notes.txt");
  h = handle_arg (handle);
  g_assert_cmpint (mkdir (out_dir, 0755), ==, 0);
  sandstep_test_fixture_chown (f, out_dir);
  url = file_url (out);
  pair = g_strconcat ("notes.txt=", url, NULL);
  {
    g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "export", h, pair, NULL);

    sandstep_test_assert_status (r, 0);
  }
  got = sandstep_test_read_file (out);
  g_assert_cmpstr (got, ==, "made-by-the-copies\n");
  {
    const char *rm[] = { "rm", "-rf", hidden, NULL };
    int status = -1;

    g_spawn_sync (NULL, (char **) rm, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, &status, &error);
    g_assert_no_error (error);
  }
}

/* A link to a link: the second one, planted by another user, is refused too. */
static void
test_planted_link_chain (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *shared = sandstep_test_host_path (f, "shared");
  g_autofree char *victim = sandstep_test_host_path (f, "victim");
  g_autofree char *mine = sandstep_test_host_path (f, "mine");
  g_autofree char *planted = g_build_filename (shared, "hop", NULL);
  g_autofree char *through = g_build_filename (mine, "x.txt", NULL);
  g_autofree char *url = NULL;
  g_autofree char *pair = NULL;
  g_autofree char *victim_file = g_build_filename (victim, "x.txt", NULL);

  g_test_summary ("the ownership rule holds for every link a path resolves through, not only the first");
  if (geteuid () != 0)
    {
      g_test_skip ("making a link owned by another user needs root");
      return;
    }
  handle = provision (f, "echo planted > x.txt");
  h = handle_arg (handle);
  g_assert_cmpint (mkdir (shared, 01777), ==, 0);
  g_assert_cmpint (mkdir (victim, 0755), ==, 0);
  g_assert_cmpint (symlink (victim, planted), ==, 0);
  g_assert_cmpint (lchown (planted, 65534, 65534), ==, 0);
  g_assert_cmpint (symlink (planted, mine), ==, 0);   /* root's own link, to the planted one */
  url = file_url (through);
  pair = g_strconcat ("x.txt=", url, NULL);

  {
    g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "export", h, pair, NULL);

    sandstep_test_assert_status (r, EXIT_EXPORT);
    sandstep_test_assert_contains (r->err, planted);
    g_assert_false (g_file_test (victim_file, G_FILE_TEST_EXISTS));
  }
}

/* ---- kills and what earlier exports left ---- */

/* TRUE once @pid holds an fd on a file in @dir (its staging file). */
static gboolean
holds_file_in (GPid pid, const char *dir)
{
  g_autofree char *fd_dir = g_strdup_printf ("/proc/%d/fd", (int) pid);
  g_autofree char *prefix = g_strconcat (dir, "/", NULL);
  g_autoptr(GDir) d = g_dir_open (fd_dir, 0, NULL);
  const char *name;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *fd_path = g_build_filename (fd_dir, name, NULL);
      g_autofree char *target = g_file_read_link (fd_path, NULL);

      if (target != NULL && g_str_has_prefix (target, prefix))
        return TRUE;
    }
  return FALSE;
}

static void
test_killed_leaves_nothing (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = provision (f, "head -c 1G /dev/zero > big");
  g_autofree char *h = handle_arg (handle);
  g_autofree char *dir = sandstep_test_host_path (f, "out");
  g_autofree char *dest = g_build_filename (dir, "big.bin", NULL);
  g_autofree char *url = file_url (dest);
  g_autofree char *pair = g_strconcat ("big=", url, NULL);
  guint killed = 0;

  g_test_summary ("an export of 1 GiB killed (SIGKILL) while it copies leaves nothing beside the destination, "
                  "which keeps its old content; 48 of 50 such kills once left a .NAME.<hex>.partial "
                  "(reliability issue)");
  g_assert_cmpint (mkdir (dir, 0755), ==, 0);
  sandstep_test_write_file (dest, "old\n", -1);

  for (int round = 0; round < 3; round++)
    {
      SandstepTestProc *proc = sandstep_test_spawn (f, "export", h, pair, NULL);
      GPid pid = sandstep_test_proc_pid (proc);
      g_autoptr(SandstepTestResult) r = NULL;
      g_autofree char *names = NULL;
      g_autofree char *got = NULL;
      gint64 deadline = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;
      gboolean caught = FALSE;

      while (g_get_monotonic_time () < deadline && sandstep_test_proc_running (proc))
        {
          if (holds_file_in (pid, dir))
            {
              /* Let it copy a while: the kill lands mid-file. */
              g_usleep ((round + 1) * 20 * 1000);
              sandstep_test_proc_kill (proc, SIGKILL);
              caught = TRUE;
              break;
            }
          g_usleep (500);
        }
      r = sandstep_test_proc_wait (proc, 20);
      if (caught && r->status == 128 + SIGKILL)
        killed++;
      names = dir_names (dir);
      g_assert_cmpstr (names, ==, "big.bin");
      got = sandstep_test_read_file (dest);
      g_assert_cmpstr (got, ==, "old\n");
    }
  /* At least one kill landed while the file was being copied. */
  g_assert_cmpuint (killed, >=, 1);
}

static void
test_removes_stale_staging (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = provision (f, "echo fresh > out.txt");
  g_autofree char *h = handle_arg (handle);
  g_autofree char *dir = sandstep_test_host_path (f, "out");
  g_autofree char *dest = g_build_filename (dir, "out.txt", NULL);
  g_autofree char *url = file_url (dest);
  g_autofree char *pair = g_strconcat ("out.txt=", url, NULL);
  const char *stale[] = { ".out.txt.0123456789ab.partial", ".out.txt.ba9876543210.partial" };
  const char *kept[] = { ".other.txt.0123456789ab.partial", ".out.txt.keep.partial", "out.txt.0123456789ab.partial",
                         ".out.txt.0123456789AB.partial" };
  g_autofree char *foreign = g_build_filename (dir, ".out.txt.aaaaaaaaaaaa.partial", NULL);
  g_autoptr(SandstepTestResult) r = NULL;
  g_autofree char *names = NULL;
  g_autofree char *got = NULL;

  g_test_summary ("an export removes the staging files (.NAME.<12 hex>.partial) that killed exports of the "
                  "same destination left, and nothing else: not those of other names, not another user's "
                  "(reliability issue)");
  g_assert_cmpint (mkdir (dir, 0755), ==, 0);
  for (gsize i = 0; i < G_N_ELEMENTS (stale); i++)
    {
      g_autofree char *path = g_build_filename (dir, stale[i], NULL);
      sandstep_test_write_file (path, "half a file", -1);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (kept); i++)
    {
      g_autofree char *path = g_build_filename (dir, kept[i], NULL);
      sandstep_test_write_file (path, "not ours to remove", -1);
    }
  sandstep_test_write_file (foreign, "another user's", -1);
  if (geteuid () == 0)
    g_assert_cmpint (lchown (foreign, 65534, 65534), ==, 0);

  r = sandstep_test_helper (f, "export", h, pair, NULL);
  sandstep_test_assert_status (r, 0);
  got = sandstep_test_read_file (dest);
  g_assert_cmpstr (got, ==, "fresh\n");
  names = dir_names (dir);
  if (geteuid () == 0)
    g_assert_cmpstr (names, ==, ".other.txt.0123456789ab.partial .out.txt.0123456789AB.partial "
                                ".out.txt.aaaaaaaaaaaa.partial .out.txt.keep.partial out.txt "
                                "out.txt.0123456789ab.partial");
  else
    g_assert_cmpstr (names, ==, ".other.txt.0123456789ab.partial .out.txt.0123456789AB.partial "
                                ".out.txt.keep.partial out.txt out.txt.0123456789ab.partial");
}

/* ---- sparse files ---- */

static void
test_sparse (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = provision (f, "truncate -s 256M sparse && printf middle | dd of=sparse bs=1 "
                                          "seek=100000000 conv=notrunc status=none && printf end >> sparse");
  g_autofree char *h = handle_arg (handle);
  g_autofree char *dest = sandstep_test_host_path (f, "sparse.out");
  g_autofree char *url = file_url (dest);
  g_autofree char *pair = g_strconcat ("sparse=", url, NULL);
  g_autoptr(SandstepTestResult) r = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GMappedFile) map = NULL;
  const char *bytes;
  struct stat st;

  g_test_summary ("a sparse file (256 MiB, 9 bytes of data) is exported sparse to a file:// destination, "
                  "with the same content");
  r = sandstep_test_helper (f, "export", h, pair, NULL);
  sandstep_test_assert_status (r, 0);
  g_assert_cmpint (stat (dest, &st), ==, 0);
  g_assert_cmpint (st.st_size, ==, 256 * 1024 * 1024 + 3);
  g_assert_cmpint ((gint64) st.st_blocks * 512, <=, 1024 * 1024);
  map = g_mapped_file_new (dest, FALSE, &error);
  g_assert_no_error (error);
  bytes = g_mapped_file_get_contents (map);
  g_assert_cmpmem (bytes + 100000000, 6, "middle", 6);
  g_assert_cmpmem (bytes + st.st_size - 3, 3, "end", 3);
  g_assert_cmpint (bytes[0], ==, 0);
  g_assert_cmpint (bytes[100000000 - 1], ==, 0);
}

/* ---- --no-clobber ---- */

static void
test_no_clobber (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = provision (f, "echo new > a.txt; echo new > b.txt");
  g_autofree char *h = handle_arg (handle);
  g_autofree char *dir = sandstep_test_host_path (f, "out");
  g_autofree char *dest_a = g_build_filename (dir, "a.txt", NULL);
  g_autofree char *dest_b = g_build_filename (dir, "b.txt", NULL);
  g_autofree char *url_a = file_url (dest_a);
  g_autofree char *url_b = file_url (dest_b);
  g_autofree char *pair_a = g_strconcat ("a.txt=", url_a, NULL);
  g_autofree char *pair_b = g_strconcat ("b.txt=", url_b, NULL);
  g_autofree char *names = NULL;
  g_autofree char *got = NULL;

  g_test_summary ("--no-clobber refuses (73) a set in which one destination exists, naming it, and changes "
                  "nothing; without existing destinations it exports them all");
  g_assert_cmpint (mkdir (dir, 0755), ==, 0);
  sandstep_test_write_file (dest_b, "old\n", -1);
  {
    g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "export", h, "--no-clobber", pair_a, pair_b, NULL);

    sandstep_test_assert_status (r, EXIT_EXPORT);
    sandstep_test_assert_contains (r->err, dest_b);
    sandstep_test_assert_contains (r->err, "--no-clobber");
    names = dir_names (dir);
    g_assert_cmpstr (names, ==, "b.txt");
    got = sandstep_test_read_file (dest_b);
    g_assert_cmpstr (got, ==, "old\n");
    g_clear_pointer (&names, g_free);
    g_clear_pointer (&got, g_free);
  }
  g_assert_cmpint (unlink (dest_b), ==, 0);
  {
    g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "export", h, "--no-clobber", pair_a, pair_b, NULL);

    sandstep_test_assert_status (r, 0);
    got = sandstep_test_read_file (dest_b);
    g_assert_cmpstr (got, ==, "new\n");
    names = dir_names (dir);
    g_assert_cmpstr (names, ==, "a.txt b.txt");
  }
}

/* ---- the mode of a replaced file ---- */

static void
test_keeps_mode (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = provision (f, "echo new > a.txt");
  g_autofree char *h = handle_arg (handle);
  g_autofree char *dest = sandstep_test_host_path (f, "secret.txt");
  g_autofree char *got_dest = sandstep_test_host_path (f, "got.txt");
  g_autofree char *url = file_url (dest);
  g_autofree char *pair = g_strconcat ("a.txt=", url, NULL);
  g_autofree char *to = g_strconcat ("--to=", got_dest, NULL);
  const char *paths[] = { dest, got_dest };
  const mode_t modes[] = { 0600, 0640, 0700 };

  g_test_summary ("issue 30 item 10: export to file:// and get --to over an existing file keep its mode "
                  "(0600 stayed 0600, not 0644) and replace its content");
  for (gsize m = 0; m < G_N_ELEMENTS (modes); m++)
    {
      for (gsize i = 0; i < G_N_ELEMENTS (paths); i++)
        {
          sandstep_test_write_file (paths[i], "old\n", -1);
          g_assert_cmpint (chmod (paths[i], modes[m]), ==, 0);
        }
      {
        g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "export", h, pair, NULL);
        sandstep_test_assert_status (r, 0);
      }
      {
        g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "get", h, to, "a.txt", NULL);
        sandstep_test_assert_status (r, 0);
      }
      for (gsize i = 0; i < G_N_ELEMENTS (paths); i++)
        {
          g_autofree char *got = sandstep_test_read_file (paths[i]);
          struct stat st;

          g_assert_cmpstr (got, ==, "new\n");
          g_assert_cmpint (stat (paths[i], &st), ==, 0);
          g_test_message ("%s: %04o, was %04o", paths[i], (guint) (st.st_mode & 07777), (guint) modes[m]);
          g_assert_cmpint (st.st_mode & 07777, ==, modes[m]);
        }
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

#define ADD(path, func) g_test_add (path, Fixture, NULL, sandstep_test_setup, func, sandstep_test_teardown)
  ADD ("/export/file/url-host", test_file_url_host);
  ADD ("/export/file/planted-link", test_planted_link);
  ADD ("/export/file/planted-link-chain", test_planted_link_chain);
  ADD ("/export/file/planted-link-unprivileged", test_planted_link_unprivileged);
  ADD ("/export/file/build-unreachable", test_build_unreachable);
  ADD ("/export/file/killed-leaves-nothing", test_killed_leaves_nothing);
  ADD ("/export/file/removes-stale-staging", test_removes_stale_staging);
  ADD ("/export/file/sparse", test_sparse);
  ADD ("/export/file/no-clobber", test_no_clobber);
  ADD ("/export/file/keeps-mode", test_keeps_mode);
#undef ADD

  return g_test_run ();
}
