/* sandstep-test-utils.c: driving the real `sandstep` helper from GTest suites. */
#include "sandstep-test-utils.h"

#include <gio/gio.h>

#include "sandstep-cgroup.h"
#include "sandstep-handle.h"
#include "sandstep-host-files.h"
#include "sandstep-store.h"
#include "sandstep-test-hooks.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Throwaway users and temporary directories: "sandstep-test-<pid>...". */
#define USER_PREFIX "sandstep-test-"
/* After a timeout kill, how long the harness still collects output. */
#define DRAIN_AFTER_KILL_US (5 * G_USEC_PER_SEC)

/* ---- small host helpers ---- */

static char *
find_tool (const char *name)
{
  static const char *const dirs[] = { "/usr/sbin", "/usr/bin", "/sbin", "/bin" };
  char *found = g_find_program_in_path (name);

  for (gsize i = 0; found == NULL && i < G_N_ELEMENTS (dirs); i++)
    {
      g_autofree char *path = g_build_filename (dirs[i], name, NULL);
      if (g_file_test (path, G_FILE_TEST_IS_EXECUTABLE))
        found = g_steal_pointer (&path);
    }
  return found;
}

/* Runs @argv to completion, output discarded; returns its exit status (-1: could not start). */
static int
run_quietly (const char *const *argv, char **out_stderr)
{
  g_autoptr(GError) error = NULL;
  int wait_status = 0;

  if (!g_spawn_sync ("/", (char **) argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDIN_FROM_DEV_NULL, NULL,
                     NULL, NULL, out_stderr, &wait_status, &error))
    {
      if (out_stderr != NULL)
        *out_stderr = g_strdup (error->message);
      return -1;
    }
  if (WIFEXITED (wait_status))
    return WEXITSTATUS (wait_status);
  return 128 + WTERMSIG (wait_status);
}

static void
chown_tree (const char *path, uid_t uid, gid_t gid)
{
  g_autoptr(GDir) dir = NULL;
  const char *name;
  struct stat st;

  g_assert_cmpint (lchown (path, uid, gid), ==, 0);
  if (lstat (path, &st) < 0 || !S_ISDIR (st.st_mode))
    return;
  dir = g_dir_open (path, 0, NULL);
  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *child = g_build_filename (path, name, NULL);
      chown_tree (child, uid, gid);
    }
}

static char *
join_argv (const char *const *argv)
{
  g_autoptr(GString) out = g_string_new (NULL);

  for (gsize i = 0; argv[i] != NULL; i++)
    {
      g_autofree char *quoted = g_shell_quote (argv[i]);
      g_string_append_printf (out, "%s%s", i ? " " : "", quoted);
    }
  return g_string_free (g_steal_pointer (&out), FALSE);
}

static GPtrArray *
collect_args (const char *first_arg, va_list ap)
{
  GPtrArray *args = g_ptr_array_new ();

  for (const char *arg = first_arg; arg != NULL; arg = va_arg (ap, const char *))
    g_ptr_array_add (args, (gpointer) arg);
  g_ptr_array_add (args, NULL);
  return args;
}

/* ---- unprivileged users ---- */

static void
remove_stale_users (const char *userdel)
{
  g_autofree char *passwd = NULL;
  g_auto(GStrv) lines = NULL;

  if (!g_file_get_contents ("/etc/passwd", &passwd, NULL, NULL))
    return;
  lines = g_strsplit (passwd, "\n", -1);
  for (gsize i = 0; lines[i] != NULL; i++)
    {
      const char *colon = strchr (lines[i], ':');
      g_autofree char *name = NULL;
      char *end = NULL;
      gint64 pid;

      if (!g_str_has_prefix (lines[i], USER_PREFIX) || colon == NULL)
        continue;
      name = g_strndup (lines[i], colon - lines[i]);
      pid = g_ascii_strtoll (name + strlen (USER_PREFIX), &end, 10);
      if (end == name + strlen (USER_PREFIX) || *end != '\0' || pid <= 0)
        continue;
      /* Left by a test process that died before its teardown. */
      if (kill ((pid_t) pid, 0) < 0 && errno == ESRCH)
        {
          const char *argv[] = { userdel, "--force", name, NULL };
          run_quietly (argv, NULL);
        }
    }
}

SandstepTestUser *
sandstep_test_user_new (char **out_reason)
{
  g_autofree char *useradd = NULL;
  g_autofree char *userdel = NULL;
  g_autofree char *name = NULL;
  g_autofree char *last_error = NULL;
  SandstepTestUser *user;
  struct passwd *pw;
  int status = -1;

  if (getuid () != 0)
    {
      *out_reason = g_strdup ("the tests do not run as root, so they cannot create a throwaway user; "
                              "the other cases already run the helper unprivileged");
      return NULL;
    }
  useradd = find_tool ("useradd");
  userdel = find_tool ("userdel");
  if (useradd == NULL || userdel == NULL)
    {
      *out_reason = g_strdup ("useradd or userdel is not installed");
      return NULL;
    }
  remove_stale_users (userdel);

  name = g_strdup_printf (USER_PREFIX "%d", (int) getpid ());
  if (getpwnam (name) == NULL)
    {
      /* Another test program may hold the passwd lock for a moment: retry. */
      for (int attempt = 0; attempt < 50; attempt++)
        {
          const char *argv[] = { useradd, "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin",
                                 "--comment", "sandstep test user", name, NULL };
          g_clear_pointer (&last_error, g_free);
          status = run_quietly (argv, &last_error);
          if (status == 0)
            break;
          g_usleep (100 * 1000);
        }
      g_assert_cmpstr (status == 0 ? NULL : last_error, ==, NULL);
    }
  pw = getpwnam (name);
  g_assert_nonnull (pw);

  user = g_new0 (SandstepTestUser, 1);
  user->name = g_steal_pointer (&name);
  user->uid = pw->pw_uid;
  user->gid = pw->pw_gid;
  user->created = TRUE;
  return user;
}

void
sandstep_test_user_free (SandstepTestUser *user)
{
  if (user == NULL)
    return;
  if (user->created)
    {
      g_autofree char *userdel = find_tool ("userdel");
      g_autofree char *last_error = NULL;
      int status = -1;

      g_assert_nonnull (userdel);
      for (int attempt = 0; attempt < 50; attempt++)
        {
          const char *argv[] = { userdel, "--force", user->name, NULL };
          g_clear_pointer (&last_error, g_free);
          status = run_quietly (argv, &last_error);
          if (status == 0 || getpwnam (user->name) == NULL)
            break;
          g_usleep (100 * 1000);
        }
      g_assert_null (getpwnam (user->name));
    }
  g_free (user->name);
  g_free (user);
}

char **
sandstep_test_user_wrap_argv (SandstepTestUser *user, const char *const *argv)
{
  g_autofree char *setpriv = find_tool ("setpriv");
  GPtrArray *out = g_ptr_array_new ();

  g_assert_nonnull (setpriv);
  g_ptr_array_add (out, g_strdup (setpriv));
  g_ptr_array_add (out, g_strdup_printf ("--reuid=%u", (unsigned) user->uid));
  g_ptr_array_add (out, g_strdup_printf ("--regid=%u", (unsigned) user->gid));
  g_ptr_array_add (out, g_strdup ("--clear-groups"));
  /* The uid change clears a parent-death signal set before exec: set it again. */
  g_ptr_array_add (out, g_strdup ("--pdeathsig=KILL"));
  g_ptr_array_add (out, g_strdup ("--"));
  for (gsize i = 0; argv[i] != NULL; i++)
    g_ptr_array_add (out, g_strdup (argv[i]));
  g_ptr_array_add (out, NULL);
  return (char **) g_ptr_array_free (out, FALSE);
}

gboolean
sandstep_test_user_can_unshare (SandstepTestUser *user, char **out_reason)
{
  g_autofree char *unshare = find_tool ("unshare");
  g_autofree char *true_path = find_tool ("true");
  g_autofree char *err = NULL;
  g_auto(GStrv) argv = NULL;
  int status;

  if (unshare == NULL || true_path == NULL)
    {
      *out_reason = g_strdup ("unshare(1) is not installed, so user namespaces cannot be probed");
      return FALSE;
    }
  {
    const char *probe[] = { unshare, "-U", true_path, NULL };
    argv = sandstep_test_user_wrap_argv (user, probe);
  }
  status = run_quietly ((const char *const *) argv, &err);
  if (status == 0)
    return TRUE;
  *out_reason = g_strdup_printf ("'unshare -U true' as the unprivileged user '%s' failed (status %d: %s): "
                                 "this kernel refuses unprivileged user namespaces",
                                 user->name, status, err ? g_strstrip (err) : "");
  return FALSE;
}

/* ---- the fixture ---- */

/* Removes TMPDIR/sandstep-test-<pid>-* directories of test processes that died
 * before their teardown (a failed assertion aborts the program). */
static void
remove_stale_dirs (void)
{
  const char *tmp = g_get_tmp_dir ();
  g_autoptr(GDir) dir = g_dir_open (tmp, 0, NULL);
  int tmp_fd = open (tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const char *name;

  while (dir != NULL && tmp_fd >= 0 && (name = g_dir_read_name (dir)) != NULL)
    {
      const char *digits = name + strlen (USER_PREFIX);
      char *end = NULL;
      gint64 pid;

      if (!g_str_has_prefix (name, USER_PREFIX))
        continue;
      pid = g_ascii_strtoll (digits, &end, 10);
      if (end == digits || *end != '-' || pid <= 0 || pid == getpid ())
        continue;
      if (kill ((pid_t) pid, 0) < 0 && errno == ESRCH)
        sandstep_remove_tree_at (tmp_fd, name);
    }
  if (tmp_fd >= 0)
    close (tmp_fd);
}

void
sandstep_test_setup (SandstepTestFixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  const char *helper = g_getenv ("SANDSTEP");

  memset (f, 0, sizeof *f);
  if (helper == NULL)
    g_test_message ("SANDSTEP must name the built helper; tests/meson.build sets it (run through 'meson test')");
  g_assert_nonnull (helper);
  g_assert_true (g_file_test (helper, G_FILE_TEST_IS_EXECUTABLE));
  f->helper = g_strdup (helper);

  remove_stale_dirs ();
  {
    g_autofree char *template = g_strdup_printf (USER_PREFIX "%d-XXXXXX", (int) getpid ());
    f->base_dir = g_dir_make_tmp (template, &error);
  }
  g_assert_no_error (error);
  f->state_dir = g_build_filename (f->base_dir, "state", NULL);
  f->host_dir = g_build_filename (f->base_dir, "host", NULL);
  g_assert_cmpint (mkdir (f->state_dir, 0700), ==, 0);
  g_assert_cmpint (mkdir (f->host_dir, 0700), ==, 0);

  f->run = g_strdup_printf ("run-%d-%08x", (int) getpid (), g_random_int ());
  f->dag = g_strdup ("sandstep-test");
  f->owner = g_strdup_printf ("%s/%s", f->dag, f->run);
  f->holder = g_strdup_printf ("%s/main", f->owner);

  f->envp = g_get_environ ();
  f->envp = g_environ_setenv (f->envp, "SANDSTEP_STATE_DIR", f->state_dir, TRUE);
  f->envp = g_environ_setenv (f->envp, "SANDSTEP_OWNER", f->owner, TRUE);
  f->envp = g_environ_setenv (f->envp, "SANDSTEP_HOLDER", f->holder, TRUE);
  f->procs = g_ptr_array_new ();
  f->handles = g_ptr_array_new_with_free_func (g_free);
}

/* TRUE if @user may execute @program and every executable beside it
 * (access(2) as that user: `test -x`). */
static gboolean
user_can_execute_beside (SandstepTestUser *user, const char *program)
{
  g_autofree char *test = find_tool ("test");
  g_autofree char *dir_path = g_path_get_dirname (program);
  g_autoptr(GDir) dir = g_dir_open (dir_path, 0, NULL);
  const char *name;

  g_assert_nonnull (test);
  g_assert_nonnull (dir);
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *path = g_build_filename (dir_path, name, NULL);
      const char *check[] = { test, "-x", path, NULL };
      g_auto(GStrv) argv = NULL;
      struct stat st;

      if (stat (path, &st) < 0 || !S_ISREG (st.st_mode) || !(st.st_mode & S_IXUSR))
        continue;
      argv = sandstep_test_user_wrap_argv (user, check);
      if (run_quietly ((const char *const *) argv, NULL) != 0)
        return FALSE;
    }
  return TRUE;
}

/* TRUE if @user may read @path (`test -r` as that user). */
static gboolean
user_can_read (SandstepTestUser *user, const char *path)
{
  g_autofree char *test = find_tool ("test");
  const char *check[] = { test, "-r", path, NULL };
  g_auto(GStrv) argv = NULL;

  g_assert_nonnull (test);
  argv = sandstep_test_user_wrap_argv (user, check);
  return run_quietly ((const char *const *) argv, NULL) == 0;
}

/* The remote backend module of the build tree whose programs sit in @program_dir (hooks/remote beside
 * operators/), which the helper loads from beside itself or from there (sandstep-backend.c). */
static char *
build_remote_module (const char *program_dir)
{
  return g_build_filename (program_dir, "..", "hooks", "remote", "sandstep-remote.so", NULL);
}

static void
copy_file (const char *src, const char *dest, uid_t uid, gid_t gid)
{
  g_autofree char *contents = NULL;
  gsize len = 0;
  g_autoptr(GError) error = NULL;

  g_file_get_contents (src, &contents, &len, &error);
  g_assert_no_error (error);
  g_file_set_contents_full (dest, contents, len, G_FILE_SET_CONTENTS_NONE, 0755, &error);
  g_assert_no_error (error);
  g_assert_cmpint (lchown (dest, uid, gid), ==, 0);
}

char *
sandstep_test_copy_programs (const char *helper, const char *dest_dir, uid_t uid, gid_t gid)
{
  g_autofree char *src_dir = g_path_get_dirname (helper);
  g_autofree char *base = g_path_get_basename (helper);
  g_autofree char *module = build_remote_module (src_dir);
  g_autoptr(GDir) dir = g_dir_open (src_dir, 0, NULL);
  g_autofree char *copy = NULL;
  const char *name;

  g_assert_nonnull (dir);
  g_assert_cmpint (mkdir (dest_dir, 0755), ==, 0);
  g_assert_cmpint (chmod (dest_dir, 0755), ==, 0);
  g_assert_cmpint (lchown (dest_dir, uid, gid), ==, 0);
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *src = g_build_filename (src_dir, name, NULL);
      g_autofree char *dest = g_build_filename (dest_dir, name, NULL);
      struct stat st;

      if (stat (src, &st) < 0 || !S_ISREG (st.st_mode) || !(st.st_mode & S_IXUSR))
        continue;
      copy_file (src, dest, uid, gid);
    }
  /* The remote backend: beside the copy of the helper, where an installed helper has it. */
  if (g_file_test (module, G_FILE_TEST_EXISTS))
    {
      g_autofree char *dest = g_build_filename (dest_dir, "sandstep-remote.so", NULL);
      copy_file (module, dest, uid, gid);
    }
  copy = g_build_filename (dest_dir, base, NULL);
  g_assert_true (g_file_test (copy, G_FILE_TEST_IS_EXECUTABLE));
  /* Copies of the build tree's programs keep its test hooks (sandstep-test-hooks.h). */
  {
    g_autofree char *mark = g_build_filename (dest_dir, SANDSTEP_TEST_HOOKS_MARK, NULL);
    g_autoptr(GError) error = NULL;

    g_file_set_contents (mark, "copies of a build tree's programs, for a test\n", -1, &error);
    g_assert_no_error (error);
  }
  return g_steal_pointer (&copy);
}

gboolean
sandstep_test_path_reachable_by_all (const char *path)
{
  g_autofree char *at = g_canonicalize_filename (path, NULL);
  struct stat st;

  if (stat (at, &st) < 0 || !(st.st_mode & S_IXOTH))
    return FALSE;
  while (strcmp (at, "/") != 0)
    {
      char *parent = g_path_get_dirname (at);

      g_free (at);
      at = parent;
      if (stat (at, &st) < 0 || !(st.st_mode & S_IXOTH))
        return FALSE;
    }
  return TRUE;
}

void
sandstep_test_fixture_set_user (SandstepTestFixture *f, SandstepTestUser *user)
{
  g_autofree char *module = NULL;
  g_autofree char *src_dir = g_path_get_dirname (f->helper);

  g_assert_null (f->user);
  f->user = user;
  g_assert_cmpint (chmod (f->base_dir, 0700), ==, 0);
  chown_tree (f->base_dir, user->uid, user->gid);

  /* The build tree may sit where the user cannot reach (a checkout under /root, 0700 on Debian): use
   * copies then, of the programs beside the helper (sandstep-init is found there) and of the remote
   * backend module.  The helper links its own libraries statically, so a copy runs the same code. */
  module = build_remote_module (src_dir);
  if (!user_can_execute_beside (user, f->helper) ||
      (g_file_test (module, G_FILE_TEST_EXISTS) && !user_can_read (user, module)))
    {
      g_autofree char *dest_dir = g_build_filename (f->base_dir, "bin", NULL);
      char *copy = sandstep_test_copy_programs (f->helper, dest_dir, user->uid, user->gid);

      g_test_message ("the user '%s' cannot execute '%s'; using copies in '%s'", user->name, f->helper, dest_dir);
      g_free (f->helper);
      f->helper = copy;
    }
}

char **
sandstep_test_fixture_argv (SandstepTestFixture *f, const char *const *argv)
{
  if (f->user != NULL)
    return sandstep_test_user_wrap_argv (f->user, argv);
  return g_strdupv ((char **) argv);
}

void
sandstep_test_fixture_setenv (SandstepTestFixture *f, const char *name, const char *value)
{
  if (value != NULL)
    f->envp = g_environ_setenv (f->envp, name, value, TRUE);
  else
    f->envp = g_environ_unsetenv (f->envp, name);
}

void
sandstep_test_fixture_chown (SandstepTestFixture *f, const char *path)
{
  if (f->user != NULL)
    chown_tree (path, f->user->uid, f->user->gid);
}

char *
sandstep_test_host_path (SandstepTestFixture *f, const char *name)
{
  return g_build_filename (f->host_dir, name, NULL);
}

static void proc_free (SandstepTestProc *proc);

/* Helper runs may be started and waited for from several threads at once (the soak test). */
static GMutex fixture_lock;

/* A helper left running by an aborted test case dies with the test program. */
static void
die_with_parent (gpointer data)
{
  prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
}

/* The state directory the case's sandboxes live in: the fixture's own, or
 * the sandstepd's that with-sandstepd.sh started for this program. */
static const char *
sandboxes_dir (SandstepTestFixture *f)
{
  const char *daemon_state = g_getenv ("SANDSTEP_TEST_DAEMON_STATE");

  return daemon_state != NULL && g_getenv ("SANDSTEP_BACKEND") != NULL ? daemon_state : f->state_dir;
}

/* Destroys, through the helper as a user would, every sandbox left in the
 * state directory (damaged ones too); returns their handles. */
/* The fixture's store (its own, or a sandstepd's), opened as the user whose state directory it is: root
 * trusts no other user's (hooks/sandstep-trust-libc.h), and the harness reads it only to find what to
 * destroy through the helper. */
static SandstepStore *
open_store_as_owner (SandstepTestFixture *f)
{
  const char *dir = sandboxes_dir (f);
  SandstepStore *store;
  struct stat st;

  if (geteuid () != 0 || stat (dir, &st) < 0 || st.st_uid == 0)
    return sandstep_store_open (dir, NULL);
  g_assert_cmpint (seteuid (st.st_uid), ==, 0);
  store = sandstep_store_open (dir, NULL);
  g_assert_cmpint (seteuid (0), ==, 0);
  return store;
}

static GPtrArray *
destroy_leftovers (SandstepTestFixture *f)
{
  g_autoptr(SandstepStore) store = open_store_as_owner (f);
  g_autoptr(GPtrArray) handles = store != NULL ? sandstep_store_list (store) : g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; i < handles->len; i++)
    {
      const char *name = handles->pdata[i];
      g_autoptr(SandstepRecord) record = sandstep_store_load (store, name, NULL);
      g_autofree char *owner_arg = g_strdup_printf ("--owner=%s", record != NULL ? record->owner : f->owner);
      g_autofree char *handle_arg = g_strdup_printf ("--handle=%s", name);
      g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "destroy", handle_arg, owner_arg, NULL);

      sandstep_test_assert_status (r, 0);
    }
  return g_steal_pointer (&handles);
}

char *
sandstep_test_dir_names (const char *dir)
{
  g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
  g_autoptr(GPtrArray) names = g_ptr_array_new ();
  const char *name;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    g_ptr_array_add (names, (gpointer) name);
  g_ptr_array_sort (names, (GCompareFunc) g_strcmp0);
  g_ptr_array_add (names, NULL);
  return g_strjoinv (" ", (char **) names->pdata);
}

static char *
entries_of (const char *dir, const char *sub)
{
  g_autofree char *path = g_build_filename (dir, sub, NULL);

  return sandstep_test_dir_names (path);
}

/* Where a sandbox's cgroup may live (sandstep-cgroup.c): v1 memory, pids, cpu and blkio, v2 at the root. */
static gboolean
cgroup_exists (const char *handle)
{
  static const char *const parents[] = {
    "/sys/fs/cgroup/memory/sandstep", "/sys/fs/cgroup/pids/sandstep", "/sys/fs/cgroup/sandstep",
    "/sys/fs/cgroup/unified/sandstep", "/sys/fs/cgroup/cpu/sandstep", "/sys/fs/cgroup/blkio/sandstep",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (parents); i++)
    {
      g_autofree char *path = g_build_filename (parents[i], handle, NULL);
      if (g_file_test (path, G_FILE_TEST_IS_DIR))
        return TRUE;
    }
  return FALSE;
}

GArray *
sandstep_test_processes_naming (const char *text)
{
  g_autoptr(GDir) proc = g_dir_open ("/proc", 0, NULL);
  GArray *pids = g_array_new (FALSE, FALSE, sizeof (GPid));
  const char *name;

  while (proc != NULL && (name = g_dir_read_name (proc)) != NULL)
    {
      g_autofree char *path = NULL;
      g_autofree char *cmdline = NULL;
      GPid pid = atoi (name);
      gsize len;

      if (!g_ascii_isdigit (name[0]) || pid == getpid ())
        continue;
      path = g_build_filename ("/proc", name, "cmdline", NULL);
      if (!g_file_get_contents (path, &cmdline, &len, NULL))
        continue;
      for (gsize i = 0; i + 1 < len; i++)
        if (cmdline[i] == '\0')
          cmdline[i] = ' ';
      if (strstr (cmdline, text) != NULL)
        g_array_append_val (pids, pid);
    }
  return pids;
}

static gboolean
process_names (const char *handle)
{
  g_autoptr(GArray) pids = sandstep_test_processes_naming (handle);

  return pids->len > 0;
}

/* Asserts that a case left nothing once its sandboxes are destroyed: no
 * sandbox, half-made sandbox, holder entry or trash in the state directory,
 * no cgroup and no process of any of @handles, no mount under the case's
 * directories.  A supervisor finishes its own end a moment after a destroy
 * returns, so processes and cgroups get a few seconds. */
static void
assert_nothing_left (SandstepTestFixture *f, GPtrArray *handles)
{
  const char *dir = sandboxes_dir (f);
  g_autofree char *sandboxes = entries_of (dir, "sandboxes");
  g_autofree char *holders = entries_of (dir, "holders");
  g_autofree char *trash = entries_of (dir, "trash");
  g_autofree char *layers = entries_of (dir, "layers");
  g_autofree char *mounts = NULL;
  gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;

  g_assert_cmpstr (sandboxes, ==, "");
  g_assert_cmpstr (holders, ==, "");
  g_assert_cmpstr (trash, ==, "");
  /* Frozen layers go with the last sandbox that names them (forks, checkpoints). */
  g_assert_cmpstr (layers, ==, "");
  for (guint i = 0; i < handles->len; i++)
    {
      const char *handle = handles->pdata[i];
      while ((cgroup_exists (handle) || process_names (handle)) && g_get_monotonic_time () < deadline)
        g_usleep (20 * 1000);
      if (cgroup_exists (handle))
        g_test_message ("the cgroup of sandbox '%s' is still there", handle);
      g_assert_false (cgroup_exists (handle));
      if (process_names (handle))
        g_test_message ("a process of sandbox '%s' still runs", handle);
      g_assert_false (process_names (handle));
    }
  g_assert_true (g_file_get_contents ("/proc/self/mountinfo", &mounts, NULL, NULL));
  g_assert_null (strstr (mounts, f->base_dir));
}

void
sandstep_test_teardown (SandstepTestFixture *f, gconstpointer data)
{
  /* What a case left running (a failed assertion, a deliberate background run). */
  while (f->procs->len > 0)
    {
      SandstepTestProc *proc = f->procs->pdata[f->procs->len - 1];
      sandstep_test_proc_kill (proc, SIGKILL);
      sandstep_test_result_free (sandstep_test_proc_wait (proc, 10));
    }
  /* Destroy what the case left through the helper, so that what lives
   * outside the state directory (supervisors, cgroups) goes with it, then
   * check that nothing at all is left. */
  if (f->state_dir != NULL)
    {
      g_autoptr(GPtrArray) handles = destroy_leftovers (f);
      for (guint i = 0; i < f->handles->len; i++)
        if (!g_ptr_array_find_with_equal_func (handles, f->handles->pdata[i], g_str_equal, NULL))
          g_ptr_array_add (handles, g_strdup (f->handles->pdata[i]));
      assert_nothing_left (f, handles);
    }
  g_ptr_array_unref (f->handles);
  g_ptr_array_unref (f->procs);
  if (f->base_dir != NULL)
    {
      g_autofree char *parent = g_path_get_dirname (f->base_dir);
      g_autofree char *name = g_path_get_basename (f->base_dir);
      int fd = open (parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

      g_assert_cmpint (fd, >=, 0);
      sandstep_remove_tree_at (fd, name);
      close (fd);
      g_assert_false (g_file_test (f->base_dir, G_FILE_TEST_EXISTS));
    }
  sandstep_test_user_free (f->user);
  g_strfreev (f->envp);
  g_free (f->base_dir);
  g_free (f->state_dir);
  g_free (f->host_dir);
  g_free (f->helper);
  g_free (f->run);
  g_free (f->dag);
  g_free (f->owner);
  g_free (f->holder);
  memset (f, 0, sizeof *f);
}

/* ---- results ---- */

void
sandstep_test_result_free (SandstepTestResult *result)
{
  if (result == NULL)
    return;
  g_free (result->out);
  g_free (result->err);
  g_free (result->command);
  g_free (result);
}

void
sandstep_test_message_output (const char *label, const char *text)
{
  /* A progress line's carriage returns become newlines, each of which g_test_message starts with "#": as one
   * line, a slow copy's redraws grow past what meson's TAP reader takes, and it reads the rest as unknown TAP. */
  g_autofree char *lines = g_strdelimit (g_strdup (text != NULL ? text : ""), "\r", '\n');

  g_test_message ("%s: %s", label, lines);
}

static void
print_result (const SandstepTestResult *result)
{
  g_test_message ("command: %s", result->command);
  g_test_message ("status: %d%s after %.2fs", result->status, result->timed_out ? " (killed by the harness's timeout)" : "",
                  result->elapsed_s);
  sandstep_test_message_output ("stdout", result->out);
  sandstep_test_message_output ("stderr", result->err);
}

void
sandstep_test_assert_status_impl (const char *file, int line, const char *func, const SandstepTestResult *result,
                                  int expected)
{
  g_autofree char *expr = NULL;

  if (result->status == expected)
    return;
  print_result (result);
  expr = g_strdup_printf ("exit status of '%s' == %d", result->command, expected);
  g_assertion_message_cmpnum (G_LOG_DOMAIN, file, line, func, expr, result->status, "==", expected, 'i');
}

void
sandstep_test_assert_contains_impl (const char *file, int line, const char *func, const char *haystack,
                                    const char *needle, gboolean expected)
{
  g_autofree char *message = NULL;
  gboolean found = haystack != NULL && strstr (haystack, needle) != NULL;

  if (found == expected)
    return;
  message = g_strdup_printf ("expected %s'%s' in:\n%s", expected ? "" : "no ", needle, haystack ? haystack : "(null)");
  g_assertion_message (G_LOG_DOMAIN, file, line, func, message);
}

/* ---- processes ---- */

struct _SandstepTestProc {
  SandstepTestFixture *f;
  GPid pid;
  int pidfd;
  int out_fd;
  int err_fd;
  GString *out;
  GString *err;
  gsize out_pos;       /* how much of out read_line has handed out */
  gsize err_pos;
  gboolean exited;
  int status;
  gint64 started;
  char *command;
  gboolean provision;  /* a `provision`: its handle is recorded in f->handles */
};

static void
proc_free (SandstepTestProc *proc)
{
  if (proc->pidfd >= 0)
    close (proc->pidfd);
  if (proc->out_fd >= 0)
    close (proc->out_fd);
  if (proc->err_fd >= 0)
    close (proc->err_fd);
  if (proc->out != NULL)
    g_string_free (proc->out, TRUE);
  if (proc->err != NULL)
    g_string_free (proc->err, TRUE);
  g_free (proc->command);
  g_free (proc);
}

static void
proc_reap (SandstepTestProc *proc, int options)
{
  int wait_status = 0;
  pid_t r;

  if (proc->exited)
    return;
  do
    r = waitpid (proc->pid, &wait_status, options);
  while (r < 0 && errno == EINTR);
  if (r != proc->pid)
    return;
  proc->exited = TRUE;
  proc->status = WIFEXITED (wait_status) ? WEXITSTATUS (wait_status) : 128 + WTERMSIG (wait_status);
}

static void
drain (int *fd, GString *into)
{
  char buf[65536];
  ssize_t n;

  for (;;)
    {
      n = read (*fd, buf, sizeof buf);
      if (n > 0)
        {
          g_string_append_len (into, buf, n);
          continue;
        }
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        return;
      /* End of file, or an error that ends this stream just the same. */
      close (*fd);
      *fd = -1;
      return;
    }
}

static gboolean
proc_done (SandstepTestProc *proc)
{
  return proc->exited && proc->out_fd < 0 && proc->err_fd < 0;
}

/* Waits up to @timeout_ms for output or the exit and takes what came; FALSE when nothing came. */
static gboolean
proc_poll (SandstepTestProc *proc, int timeout_ms)
{
  struct pollfd fds[3];
  int n = 0;
  int r;

  if (proc->out_fd >= 0)
    fds[n++] = (struct pollfd) { .fd = proc->out_fd, .events = POLLIN };
  if (proc->err_fd >= 0)
    fds[n++] = (struct pollfd) { .fd = proc->err_fd, .events = POLLIN };
  if (!proc->exited)
    fds[n++] = (struct pollfd) { .fd = proc->pidfd, .events = POLLIN };
  if (n == 0)
    return TRUE;
  r = poll (fds, n, timeout_ms);
  if (r < 0)
    {
      g_assert_cmpint (errno, ==, EINTR);
      return TRUE;
    }
  if (r == 0)
    return FALSE;
  if (proc->out_fd >= 0)
    drain (&proc->out_fd, proc->out);
  if (proc->err_fd >= 0)
    drain (&proc->err_fd, proc->err);
  if (!proc->exited)
    proc_reap (proc, WNOHANG);
  return TRUE;
}

/* Waits for output or the exit until @deadline (monotonic µs); FALSE when it passed. */
static gboolean
proc_step (SandstepTestProc *proc, gint64 deadline)
{
  gint64 left = deadline - g_get_monotonic_time ();

  if (proc_done (proc))
    return TRUE;
  if (left <= 0)
    return FALSE;
  return proc_poll (proc, (int) MIN ((left + 999) / 1000, G_MAXINT)) || g_get_monotonic_time () < deadline;
}

static SandstepTestProc *
proc_start (const char *const *argv, const char *const *envp, const char *cwd, const int *source_fds,
            const int *target_fds, gsize n_fds)
{
  g_autoptr(GError) error = NULL;
  SandstepTestProc *proc = g_new0 (SandstepTestProc, 1);
  int out_fd = -1, err_fd = -1;

  proc->pidfd = proc->out_fd = proc->err_fd = -1;
  proc->out = g_string_new (NULL);
  proc->err = g_string_new (NULL);
  proc->command = join_argv (argv);
  proc->started = g_get_monotonic_time ();
  g_spawn_async_with_pipes_and_fds (cwd, argv, envp,
                                    G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDIN_FROM_DEV_NULL | G_SPAWN_SEARCH_PATH,
                                    die_with_parent, NULL, -1, -1, -1, source_fds, target_fds, n_fds, &proc->pid, NULL,
                                    &out_fd, &err_fd, &error);
  g_assert_no_error (error);
  proc->out_fd = out_fd;
  proc->err_fd = err_fd;
  g_assert_cmpint (fcntl (proc->out_fd, F_SETFL, O_NONBLOCK), ==, 0);
  g_assert_cmpint (fcntl (proc->err_fd, F_SETFL, O_NONBLOCK), ==, 0);
  g_assert_cmpint (fcntl (proc->out_fd, F_SETFD, FD_CLOEXEC), ==, 0);
  g_assert_cmpint (fcntl (proc->err_fd, F_SETFD, FD_CLOEXEC), ==, 0);
  proc->pidfd = (int) syscall (SYS_pidfd_open, proc->pid, 0);
  g_assert_cmpint (proc->pidfd, >=, 0);
  g_assert_cmpint (fcntl (proc->pidfd, F_SETFD, FD_CLOEXEC), ==, 0);
  return proc;
}

SandstepTestProc *
sandstep_test_proc_start (const char *const *argv, const char *const *envp, const char *cwd)
{
  return proc_start (argv, envp, cwd, NULL, NULL, 0);
}

SandstepTestProc *
sandstep_test_spawn_full (SandstepTestFixture *f, const char *const *args, const int *source_fds,
                          const int *target_fds, gsize n_fds)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_auto(GStrv) final_argv = NULL;
  SandstepTestProc *proc;

  g_ptr_array_add (argv, f->helper);
  for (gsize i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer) args[i]);
  g_ptr_array_add (argv, NULL);
  final_argv = sandstep_test_fixture_argv (f, (const char *const *) argv->pdata);

  proc = proc_start ((const char *const *) final_argv, (const char *const *) f->envp, f->host_dir, source_fds,
                     target_fds, n_fds);
  proc->f = f;
  proc->provision = args[0] != NULL && strcmp (args[0], "provision") == 0;
  g_mutex_lock (&fixture_lock);
  g_ptr_array_add (f->procs, proc);
  g_mutex_unlock (&fixture_lock);
  return proc;
}

SandstepTestProc *
sandstep_test_spawn (SandstepTestFixture *f, const char *first_arg, ...)
{
  g_autoptr(GPtrArray) args = NULL;
  va_list ap;

  va_start (ap, first_arg);
  args = collect_args (first_arg, ap);
  va_end (ap);
  return sandstep_test_spawn_full (f, (const char *const *) args->pdata, NULL, NULL, 0);
}

GPid
sandstep_test_proc_pid (SandstepTestProc *proc)
{
  return proc->pid;
}

gboolean
sandstep_test_proc_running (SandstepTestProc *proc)
{
  struct pollfd pfd = { .fd = proc->pidfd, .events = POLLIN };

  if (!proc->exited && poll (&pfd, 1, 0) > 0)
    proc_reap (proc, WNOHANG);
  return !proc->exited;
}

static char *
read_line_from (SandstepTestProc *proc, GString *buf, const int *fd, gsize *pos, double timeout_s)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) (timeout_s * sandstep_test_time_scale () * G_USEC_PER_SEC);

  for (;;)
    {
      const char *start = buf->str + *pos;
      const char *nl = memchr (start, '\n', buf->len - *pos);

      if (nl != NULL)
        {
          char *line = g_strndup (start, nl - start);
          *pos += nl - start + 1;
          return line;
        }
      if (*fd < 0 || !proc_step (proc, deadline))
        return NULL;
    }
}

char *
sandstep_test_proc_read_line (SandstepTestProc *proc, double timeout_s)
{
  return read_line_from (proc, proc->out, &proc->out_fd, &proc->out_pos, timeout_s);
}

char *
sandstep_test_proc_read_err_line (SandstepTestProc *proc, double timeout_s)
{
  return read_line_from (proc, proc->err, &proc->err_fd, &proc->err_pos, timeout_s);
}

gboolean
sandstep_test_proc_pump (SandstepTestProc *proc, double timeout_s)
{
  if (!proc_done (proc))
    proc_poll (proc, (int) (timeout_s * 1000));
  return !proc_done (proc);
}

const char *
sandstep_test_proc_out (SandstepTestProc *proc)
{
  return proc->out->str;
}

const char *
sandstep_test_proc_err (SandstepTestProc *proc)
{
  return proc->err->str;
}

void
sandstep_test_proc_kill (SandstepTestProc *proc, int sig)
{
  /* Not reaped yet, so the pid cannot have been reused. */
  if (!proc->exited)
    kill (proc->pid, sig);
}

SandstepTestResult *
sandstep_test_proc_wait (SandstepTestProc *proc, double timeout_s)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) (timeout_s * sandstep_test_time_scale () * G_USEC_PER_SEC);
  SandstepTestResult *result = g_new0 (SandstepTestResult, 1);
  gboolean timed_out = FALSE;

  while (!proc_done (proc))
    {
      if (proc_step (proc, deadline))
        continue;
      if (timed_out)
        break;   /* killed and drained for a while: give up on the rest */
      timed_out = TRUE;
      sandstep_test_proc_kill (proc, SIGKILL);
      deadline = g_get_monotonic_time () + DRAIN_AFTER_KILL_US;
    }
  if (!proc->exited)
    {
      sandstep_test_proc_kill (proc, SIGKILL);
      proc_reap (proc, 0);
    }

  result->timed_out = timed_out;
  result->status = timed_out ? -1 : proc->status;
  result->elapsed_s = (g_get_monotonic_time () - proc->started) / (double) G_USEC_PER_SEC;
  result->out_len = proc->out->len;
  result->out = g_string_free (g_steal_pointer (&proc->out), FALSE);
  result->err = g_string_free (g_steal_pointer (&proc->err), FALSE);
  result->command = g_steal_pointer (&proc->command);
  if (proc->f == NULL)
    {
      proc_free (proc);
      return result;
    }
  g_mutex_lock (&fixture_lock);
  if (proc->provision && result->status == 0 && result->out_len > 1 && result->out[result->out_len - 1] == '\n')
    {
      g_autofree char *handle = g_strndup (result->out, result->out_len - 1);
      if (sandstep_handle_is_valid (handle) &&
          !g_ptr_array_find_with_equal_func (proc->f->handles, handle, g_str_equal, NULL))
        g_ptr_array_add (proc->f->handles, g_steal_pointer (&handle));
    }
  g_ptr_array_remove_fast (proc->f->procs, proc);
  g_mutex_unlock (&fixture_lock);
  proc_free (proc);
  return result;
}

/* ---- synchronous runs ---- */

SandstepTestResult *
sandstep_test_helper_argv (SandstepTestFixture *f, const char *const *args, double timeout_s)
{
  return sandstep_test_proc_wait (sandstep_test_spawn_full (f, args, NULL, NULL, 0), timeout_s);
}

SandstepTestResult *
sandstep_test_helper (SandstepTestFixture *f, const char *first_arg, ...)
{
  g_autoptr(GPtrArray) args = NULL;
  va_list ap;

  va_start (ap, first_arg);
  args = collect_args (first_arg, ap);
  va_end (ap);
  return sandstep_test_helper_argv (f, (const char *const *) args->pdata, SANDSTEP_TEST_DEFAULT_TIMEOUT_S);
}

char *
sandstep_test_provision (SandstepTestFixture *f, ...)
{
  g_autoptr(GPtrArray) args = NULL;
  g_autoptr(SandstepTestResult) result = NULL;
  va_list ap;

  const char *first_arg;

  va_start (ap, f);
  first_arg = va_arg (ap, const char *);
  args = collect_args (first_arg, ap);
  va_end (ap);
  g_ptr_array_insert (args, 0, (gpointer) "provision");
  result = sandstep_test_helper_argv (f, (const char *const *) args->pdata, SANDSTEP_TEST_DEFAULT_TIMEOUT_S);
  sandstep_test_assert_status (result, 0);
  /* One line: the handle. */
  if (result->out_len < 2 || strchr (result->out, '\n') != result->out + result->out_len - 1)
    print_result (result);
  g_assert_cmpuint (result->out_len, >, 1);
  g_assert_true (strchr (result->out, '\n') == result->out + result->out_len - 1);
  return g_strndup (result->out, result->out_len - 1);
}

char *
sandstep_test_run_ok (SandstepTestFixture *f, const char *handle, const char *command)
{
  g_autofree char *handle_arg = g_strconcat ("--handle=", handle, NULL);
  g_autoptr(SandstepTestResult) result = sandstep_test_helper (f, "run", handle_arg, "--", command, NULL);

  sandstep_test_assert_status (result, 0);
  return g_steal_pointer (&result->out);
}

void
sandstep_test_end_supervisor (SandstepTestFixture *f, const char *handle, int sig)
{
  g_autofree char *path = g_build_filename (f->state_dir, "sandboxes", handle, "supervisor", NULL);
  g_autofree char *text = NULL;
  gint64 deadline = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
  pid_t pid;
  int lock;

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  pid = (pid_t) g_ascii_strtoll (g_strchug (text), NULL, 10);
  g_assert_cmpint (pid, >, 1);
  g_assert_cmpint (kill (pid, sig), ==, 0);
  while (kill (pid, 0) == 0 && g_get_monotonic_time () < deadline)
    g_usleep (10 * 1000);
  g_assert_cmpint (kill (pid, 0) < 0 ? errno : 0, ==, ESRCH);
  /* Its lock went with it: the next command starts a supervisor of its own. */
  lock = open (path, O_RDWR | O_CLOEXEC);
  g_assert_cmpint (lock, >=, 0);
  g_assert_cmpint (flock (lock, LOCK_EX | LOCK_NB), ==, 0);
  close (lock);
}

JsonObject *
sandstep_test_describe (SandstepTestFixture *f, const char *handle)
{
  g_autofree char *handle_arg = g_strconcat ("--handle=", handle, NULL);
  g_autoptr(SandstepTestResult) result = sandstep_test_helper (f, "describe", handle_arg, NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) error = NULL;

  sandstep_test_assert_status (result, 0);
  json_parser_load_from_data (parser, result->out, -1, &error);
  g_assert_no_error (error);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)));
  return json_object_ref (json_node_get_object (json_parser_get_root (parser)));
}

void
sandstep_test_wait_until_expired (SandstepTestFixture *f, const char *handle, double timeout_s)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) (timeout_s * G_USEC_PER_SEC);

  for (;;)
    {
      g_autoptr(JsonObject) d = sandstep_test_describe (f, handle);
      if (json_object_get_int_member (d, "remaining_seconds") == 0)
        return;
      if (g_get_monotonic_time () >= deadline)
        g_error ("sandbox '%s' had %" G_GINT64_FORMAT " s of its lifetime left after %.0f s of waiting", handle,
                 json_object_get_int_member (d, "remaining_seconds"), timeout_s);
      g_usleep (100 * 1000);
    }
}

char *
sandstep_test_snapshot (SandstepTestFixture *f, const char *handle)
{
  return sandstep_test_run_ok (f, handle,
                               "cd / && find workspace tmp -exec stat -c '%n %F %a %s' {} + | LC_ALL=C sort && "
                               "find workspace tmp -type f -exec md5sum {} + | LC_ALL=C sort");
}

/* ---- a sandstepd of the test's own ---- */

#define DAEMON_ANNOUNCES "sandstepd: listening on "

static void
end_with_test (gpointer data)
{
  /* SIGTERM, not SIGKILL: the daemon ends its sandboxes on the way out. */
  prctl (PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
}

void
sandstep_test_daemon_start (SandstepTestDaemon *d, const char *const *argv, const char *const *envp,
                            const char *cwd, const char *log)
{
  g_autoptr(GString) out = g_string_new (NULL);
  g_autoptr(GError) error = NULL;
  gint64 deadline = g_get_monotonic_time () + (gint64) (15 * sandstep_test_time_scale () * G_USEC_PER_SEC);
  int log_fd;

  g_assert_cmpint (d->pid, ==, 0);
  log_fd = open (log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  g_assert_cmpint (log_fd, >=, 0);
  g_spawn_async_with_pipes_and_fds (cwd, argv, envp,
                                    G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDIN_FROM_DEV_NULL | G_SPAWN_SEARCH_PATH,
                                    end_with_test, NULL, -1, -1, log_fd, NULL, NULL, 0, &d->pid, NULL, &d->out_fd, NULL,
                                    &error);
  close (log_fd);
  g_assert_no_error (error);
  g_assert_cmpint (fcntl (d->out_fd, F_SETFD, FD_CLOEXEC), ==, 0);

  g_clear_pointer (&d->url, g_free);
  while (d->url == NULL && g_get_monotonic_time () < deadline)
    {
      struct pollfd pfd = { d->out_fd, POLLIN, 0 };
      char buf[512];
      const char *nl;
      ssize_t n;

      if (poll (&pfd, 1, 100) <= 0)
        continue;
      n = read (d->out_fd, buf, sizeof buf);
      if (n <= 0)
        break;
      g_string_append_len (out, buf, n);
      if ((nl = strchr (out->str, '\n')) != NULL && g_str_has_prefix (out->str, DAEMON_ANNOUNCES))
        d->url = g_strndup (out->str + strlen (DAEMON_ANNOUNCES), nl - out->str - strlen (DAEMON_ANNOUNCES));
    }
  if (d->url == NULL)
    {
      g_autofree char *text = NULL;

      g_file_get_contents (log, &text, NULL, NULL);
      g_test_message ("%s did not name its URL; its stdout: %s; its log (%s): %s", argv[0], out->str, log,
                      text != NULL ? text : "(none)");
    }
  g_assert_nonnull (d->url);
}

void
sandstep_test_daemon_stop (SandstepTestDaemon *d, int sig)
{
  int status;

  if (d->pid <= 0)
    return;
  kill (d->pid, sig);
  for (int i = 0; i < 100 && waitpid (d->pid, &status, WNOHANG) == 0; i++)
    g_usleep (50 * 1000);
  if (waitpid (d->pid, &status, WNOHANG) == 0)
    {
      kill (d->pid, SIGKILL);
      waitpid (d->pid, &status, 0);
    }
  d->pid = 0;
  if (d->out_fd >= 0)
    close (d->out_fd);
  d->out_fd = -1;
}

void
sandstep_test_daemon_clear (SandstepTestDaemon *d)
{
  sandstep_test_daemon_stop (d, SIGTERM);
  g_clear_pointer (&d->url, g_free);
}

/* ---- host files ---- */

char *
sandstep_test_read_file (const char *path)
{
  g_autoptr(GError) error = NULL;
  char *contents = NULL;

  g_file_get_contents (path, &contents, NULL, &error);
  g_assert_no_error (error);
  return contents;
}

void
sandstep_test_write_file (const char *path, const char *data, gssize len)
{
  g_autoptr(GError) error = NULL;

  g_file_set_contents (path, data, len, &error);
  g_assert_no_error (error);
}

/* ---- host processes ---- */

char *
sandstep_test_unique_seconds (guint whole_seconds)
{
  static guint counter;

  /* The pid's digits then three of a counter: unique across concurrent test programs. */
  return g_strdup_printf ("%u.%d%03u", whole_seconds, (int) getpid (), counter++ % 1000);
}

GArray *
sandstep_test_find_processes (const char *const *argv)
{
  GArray *pids = g_array_new (FALSE, FALSE, sizeof (GPid));
  g_autoptr(GDir) dir = g_dir_open ("/proc", 0, NULL);
  g_autoptr(GString) wanted = g_string_new (NULL);
  const char *name;

  g_assert_nonnull (dir);
  for (gsize i = 0; argv[i] != NULL; i++)
    g_string_append_len (wanted, argv[i], strlen (argv[i]) + 1);
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *path = NULL;
      g_autofree char *cmdline = NULL;
      gsize len = 0;

      if (!g_ascii_isdigit (name[0]))
        continue;
      path = g_build_filename ("/proc", name, "cmdline", NULL);
      if (!g_file_get_contents (path, &cmdline, &len, NULL))
        continue;
      if (len >= wanted->len && memcmp (cmdline, wanted->str, wanted->len) == 0)
        {
          GPid pid = (GPid) g_ascii_strtoll (name, NULL, 10);
          g_array_append_val (pids, pid);
        }
    }
  return pids;
}

gboolean
sandstep_test_wait_for_process (const char *const *argv, gboolean present, double timeout_s)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) (timeout_s * sandstep_test_time_scale () * G_USEC_PER_SEC);

  for (;;)
    {
      g_autoptr(GArray) pids = sandstep_test_find_processes (argv);
      if ((pids->len > 0) == present)
        return TRUE;
      if (g_get_monotonic_time () >= deadline)
        return FALSE;
      g_usleep (20 * 1000);
    }
}

JsonNode *
sandstep_test_parse_json (const char *text)
{
  g_autoptr(GError) error = NULL;
  JsonNode *node = json_from_string (text, &error);

  if (node == NULL)
    g_test_message ("not JSON (%s): %s", error != NULL ? error->message : "empty", text);
  g_assert_nonnull (node);
  return node;
}

JsonObject *
sandstep_test_mcp_call (JsonObject *report, guint i, const char *name)
{
  JsonArray *calls = json_object_get_array_member (report, "calls");
  JsonObject *call;

  g_assert_cmpuint (i, <, json_array_get_length (calls));
  call = json_array_get_object_element (calls, i);
  g_assert_cmpstr (json_object_get_string_member (call, "name"), ==, name);
  return call;
}

gboolean
sandstep_test_skip_without_cgroup (const char *what)
{
  g_autofree char *why = sandstep_cgroup_unavailable ();

  if (why == NULL)
    return FALSE;
  g_test_skip_printf ("%s needs a cgroup, and %s", what, why);
  return TRUE;
}

gboolean
sandstep_test_node_missing (const char *reason)
{
  if (g_strcmp0 (g_getenv ("SANDSTEP_TESTS_REQUIRE_NODE"), "1") == 0)
    g_test_fail_printf ("SANDSTEP_TESTS_REQUIRE_NODE=1 but %s", reason);
  else
    g_test_skip (reason);
  return FALSE;
}

/* ---- images ---- */

static void
registry_dies_with_test (gpointer data)
{
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

/* Runs @argv, asserting that it succeeds. */
static void
run_image_tool (const char *const *argv)
{
  g_autofree char *err = NULL;
  int status = 0;
  g_autoptr(GError) error = NULL;

  g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, &err,
                &status, &error);
  g_assert_no_error (error);
  if (!g_spawn_check_wait_status (status, NULL))
    g_error ("%s failed: %s", argv[0], err);
}

/* A docker-registry on a free loopback port, its storage under @dir; its pid. */
static GPid
start_registry (const char *dir, guint16 *out_port)
{
  g_autofree char *config = g_build_filename (dir, "registry.yml", NULL);
  g_autofree char *storage = g_build_filename (dir, "registry", NULL);
  g_autofree char *text = NULL;
  const char *argv[] = { "docker-registry", "serve", config, NULL };
  g_autoptr(GError) error = NULL;
  g_autoptr(GSocket) probe = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL);
  g_autoptr(GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) any = g_inet_socket_address_new (loopback, 0);
  g_autoptr(GSocketAddress) bound = NULL;
  GPid pid;

  g_assert_true (g_socket_bind (probe, any, FALSE, NULL));
  bound = g_socket_get_local_address (probe, NULL);
  *out_port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
  g_socket_close (probe, NULL);
  text = g_strdup_printf ("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\n"
                          "http:\n  addr: 127.0.0.1:%u\n", storage, *out_port);
  g_assert_true (g_file_set_contents (config, text, -1, NULL));
  g_spawn_async (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD |
                 G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL, registry_dies_with_test, NULL, &pid, &error);
  g_assert_no_error (error);
  for (int i = 0; i < 200; i++)
    {
      g_autoptr(GSocketClient) client = g_socket_client_new ();
      g_autoptr(GSocketConnection) connection = g_socket_client_connect_to_host (client, "127.0.0.1", *out_port, NULL,
                                                                                 NULL);
      if (connection != NULL)
        return pid;
      g_usleep (50000);
    }
  kill (pid, SIGKILL);
  waitpid (pid, NULL, 0);
  g_error ("docker-registry did not answer on 127.0.0.1:%u", *out_port);
}

GPid
sandstep_test_busybox_in_registry (const char *dir, const char *repo_tag, gboolean bash, char **out_ref)
{
  g_autofree char *layout = g_build_filename (dir, "image", NULL);
  g_autofree char *image = g_strconcat (layout, ":t", NULL);
  g_autofree char *bundle = g_build_filename (dir, "bundle", NULL);
  g_autofree char *bin = g_build_filename (bundle, "rootfs", "bin", NULL);
  g_autofree char *busybox = g_build_filename (bin, "busybox", NULL);
  g_autofree char *sh = g_build_filename (bin, "sh", NULL);
  g_autofree char *marker = g_build_filename (bundle, "rootfs", "marker", NULL);
  const char *tools[] = { "docker-registry", "umoci", "skopeo" };
  guint16 port = 0;
  GPid pid;

  for (gsize i = 0; i < G_N_ELEMENTS (tools); i++)
    {
      g_autofree char *found = g_find_program_in_path (tools[i]);
      if (found == NULL)
        g_error ("'%s' is not installed; scripts/deps.sh installs it (apt-get install docker-registry skopeo umoci "
                 "busybox-static)", tools[i]);
    }
  {
    const char *init[] = { "umoci", "init", "--layout", layout, NULL };
    const char *make[] = { "umoci", "new", "--image", image, NULL };
    const char *unpack[] = { "umoci", "unpack", "--rootless", "--image", image, bundle, NULL };
    const char *copy[] = { "cp", "/bin/busybox", busybox, NULL };
    const char *repack[] = { "umoci", "repack", "--image", image, bundle, NULL };

    run_image_tool (init);
    run_image_tool (make);
    run_image_tool (unpack);
    g_assert_cmpint (g_mkdir_with_parents (bin, 0755), ==, 0);
    run_image_tool (copy);
    g_assert_cmpint (symlink ("busybox", sh), ==, 0);
    if (bash)
      {
        g_autofree char *path = g_build_filename (bin, "bash", NULL);
        g_assert_true (g_file_set_contents_full (path, "#!/bin/sh\nexec /bin/sh \"$@\"\n", -1,
                                                 G_FILE_SET_CONTENTS_NONE, 0755, NULL));
      }
    g_assert_true (g_file_set_contents (marker, "from the image\n", -1, NULL));
    run_image_tool (repack);
  }
  pid = start_registry (dir, &port);
  {
    g_autofree char *src = g_strconcat ("oci:", image, NULL);
    g_autofree char *dst = g_strdup_printf ("docker://127.0.0.1:%u/%s", port, repo_tag);
    const char *push[] = { "skopeo", "copy", "--quiet", "--dest-tls-verify=false", src, dst, NULL };

    run_image_tool (push);
    *out_ref = g_steal_pointer (&dst);
  }
  return pid;
}

double
sandstep_test_cpu_seconds (GPid pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", (int) pid);
  g_autofree char *text = NULL;
  g_auto(GStrv) fields = NULL;
  const char *after;

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  /* The fields after the command's name, which may hold spaces: utime and stime are the 14th and 15th. */
  after = strrchr (text, ')');
  g_assert_nonnull (after);
  fields = g_strsplit (after + 2, " ", -1);
  g_assert_cmpuint (g_strv_length (fields), >, 13);
  return (g_ascii_strtod (fields[11], NULL) + g_ascii_strtod (fields[12], NULL)) / sysconf (_SC_CLK_TCK);
}

double
sandstep_test_time_scale (void)
{
  const char *text = g_getenv ("SANDSTEP_TEST_TIME_SCALE");
  double scale = text != NULL ? g_ascii_strtod (text, NULL) : 1.0;

  return scale >= 1.0 && scale <= 100.0 ? scale : 1.0;
}
