/* test-launcher.c: a sandbox's launcher, through the real `sandstep`.
 *
 * The first `sandstep run` of a sandbox starts its launcher; the runs after
 * it are served by the launcher, which writes its own pid into the claim it
 * takes: that is how these cases know which path a run took.  Whatever the
 * path, a run must behave the same: streams, status, timeout, refusals.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-launch-wire.h"
#include "sandstep-host-files.h"
#include "sandstep-store.h"
#include "sandstep-test-utils.h"

typedef SandstepTestFixture Fixture;


static char *
handle_arg (const char *handle)
{
  return g_strdup_printf ("--handle=%s", handle);
}

static char *
sandbox_file (Fixture *f, const char *handle, const char *name)
{
  return g_build_filename (f->state_dir, "sandboxes", handle, name, NULL);
}

/* The pid in a "PID ..." or {"pid":PID} file, or 0. */
static int
pid_in_file (const char *path, const char *key)
{
  g_autofree char *text = NULL;
  const char *p;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return 0;
  p = key != NULL ? strstr (text, key) : text;
  return p != NULL ? atoi (p + (key != NULL ? strlen (key) : 0)) : 0;
}

/* Running, not a zombie: an ended launcher waits for whoever adopted it to reap it. */
static gboolean
process_alive (int pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", pid);
  g_autofree char *text = NULL;
  const char *p;

  if (pid <= 0 || !g_file_get_contents (path, &text, NULL, NULL) || (p = strrchr (text, ')')) == NULL)
    return FALSE;
  return p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

/* Running processes whose argv is @handle's launcher's (a jail it is
 * cloning shows that argv too until it execs init). */
static GArray *
find_launchers (const char *handle)
{
  const char *argv[] = { "sandstep", "--launcher", handle, NULL };

  return sandstep_test_find_processes (argv);
}

static guint
count_launchers (const char *handle)
{
  g_autoptr(GArray) pids = find_launchers (handle);

  return pids->len;
}

/* Runs once the ordinary way, then waits until the launcher it started listens; returns its pid. */
static int
start_launcher (Fixture *f, const char *handle)
{
  g_autofree char *socket_path = sandbox_file (f, handle, "launcher.sock");
  g_autofree char *lock_path = sandbox_file (f, handle, "launcher");
  g_autofree char *out = sandstep_test_run_ok (f, handle, "echo first");
  int pid;

  g_assert_cmpstr (out, ==, "first\n");
  for (int i = 0; i < 500 && !g_file_test (socket_path, G_FILE_TEST_EXISTS); i++)
    g_usleep (10 * 1000);
  g_assert_true (g_file_test (socket_path, G_FILE_TEST_EXISTS));
  pid = pid_in_file (lock_path, NULL);
  g_assert_true (process_alive (pid));
  {
    g_autoptr(GArray) launchers = find_launchers (handle);
    gboolean named = FALSE;
    for (guint i = 0; i < launchers->len; i++)
      named = named || g_array_index (launchers, GPid, i) == pid;
    g_assert_true (named);
  }
  return pid;
}

/* The pid that took the sandbox's claim last. */
static int
last_claimer (Fixture *f, const char *handle)
{
  g_autofree char *claim = sandbox_file (f, handle, "claim");

  return pid_in_file (claim, "\"pid\":");
}

static void
test_serves_runs (Fixture *f, gconstpointer data)
{
  static const struct { const char *command; int status; } statuses[] = {
    { "true", 0 }, { "exit 3", 3 }, { "false", 1 }, { "kill -TERM $$", 128 + SIGTERM },
    { "kill -KILL $$", 128 + SIGKILL },
  };
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *h = handle_arg (handle);
  int launcher = start_launcher (f, handle);

  g_test_summary ("after the first run, runs are served by the sandbox's launcher with the same results: "
                  "stdout and stderr, exit status (128+N for signal N), stdin, the caller's TERM and LANG, "
                  "and files that persist");
  for (gsize i = 0; i < G_N_ELEMENTS (statuses); i++)
    {
      g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "run", h, "--", statuses[i].command, NULL);
      sandstep_test_assert_status (r, statuses[i].status);
      g_assert_cmpint (last_claimer (f, handle), ==, launcher);
    }
  {
    g_autoptr(SandstepTestResult) r = NULL;
    sandstep_test_fixture_setenv (f, "TERM", "sandstep-term");
    sandstep_test_fixture_setenv (f, "LANG", "C.UTF-8");
    r = sandstep_test_helper (f, "run", h, "--", "echo out $TERM $LANG; echo err >&2; echo kept > /workspace/f", NULL);
    sandstep_test_assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "out sandstep-term C.UTF-8\n");
    g_assert_cmpstr (r->err, ==, "err\n");
    g_assert_cmpint (last_claimer (f, handle), ==, launcher);
  }
  {
    g_autofree char *input = sandstep_test_host_path (f, "input");
    g_autofree char *command = NULL;
    g_assert_true (g_file_set_contents (input, "from stdin\n", -1, NULL));
    g_autofree char *out = NULL;
    g_autoptr(GError) error = NULL;
    const char *argv[] = { "/bin/sh", "-c", NULL, NULL };
    int status = -1;
    /* Not through the harness, whose runs read /dev/null. */
    command = g_strdup_printf ("'%s' run %s -- 'cat; cat /workspace/f' < '%s'", f->helper, h, input);
    argv[2] = command;
    g_assert_true (g_spawn_sync (NULL, (char **) argv, f->envp, G_SPAWN_DEFAULT, NULL, NULL, &out, NULL, &status,
                                 &error));
    g_assert_no_error (error);
    g_assert_true (g_spawn_check_wait_status (status, NULL));
    g_assert_cmpstr (out, ==, "from stdin\nkept\n");
    g_assert_cmpint (last_claimer (f, handle), ==, launcher);
  }
}

static void
test_timeout (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *h = handle_arg (handle);
  g_autofree char *child = sandstep_test_unique_seconds (100);
  g_autofree char *command = g_strdup_printf ("sleep %s & sleep 50", child);
  const char *child_argv[] = { "sleep", child, NULL };
  g_autoptr(SandstepTestResult) r = NULL;
  int launcher = start_launcher (f, handle);

  g_test_summary ("a launcher-served run keeps its --timeout: everything it started is killed, exit 124, and the "
                  "message names the budget");
  r = sandstep_test_helper (f, "run", h, "--timeout=1.5", "--", command, NULL);
  sandstep_test_assert_status (r, SANDSTEP_EXIT_TIMEOUT);
  g_assert_cmpint (last_claimer (f, handle), ==, launcher);
  g_assert_cmpfloat (r->elapsed_s, <, 4.0);
  sandstep_test_assert_contains (r->err, "ran out of its 1.5s budget (--timeout=1.5)");
  g_assert_true (sandstep_test_wait_for_process (child_argv, FALSE, 2));
}

static void
test_refusals_match (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *h = handle_arg (handle);
  g_autofree char *marker = sandstep_test_unique_seconds (100);
  g_autofree char *command = g_strdup_printf ("sleep %s", marker);
  const char *marker_argv[] = { "sleep", marker, NULL };
  g_autoptr(SandstepTestResult) other = NULL;
  g_autoptr(SandstepTestResult) busy = NULL;
  g_autoptr(SandstepTestResult) held = NULL;
  SandstepTestProc *proc;

  start_launcher (f, handle);
  g_test_summary ("with a launcher up, what the ordinary path refuses is refused the same: another owner (exit 67), "
                  "a sandbox another holder uses (exit 75, naming it), a bad --timeout (exit 64)");
  other = sandstep_test_helper (f, "run", h, "--owner=someone/else", "--", "true", NULL);
  sandstep_test_assert_status (other, SANDSTEP_EXIT_NOT_OWNER);
  sandstep_test_assert_contains (other->err, "is not owned by 'someone/else'");

  proc = sandstep_test_spawn (f, "run", h, "--holder=first/holder", "--", command, NULL);
  g_assert_true (sandstep_test_wait_for_process (marker_argv, TRUE, 5));
  busy = sandstep_test_helper (f, "run", h, "--holder=second/holder", "--wait=0", "--", "true", NULL);
  sandstep_test_assert_status (busy, SANDSTEP_EXIT_BUSY);
  sandstep_test_assert_contains (busy->err, "is held by 'first/holder'");
  sandstep_test_proc_kill (proc, SIGTERM);
  held = sandstep_test_proc_wait (proc, 5);
  g_assert_true (sandstep_test_wait_for_process (marker_argv, FALSE, 3));
  {
    g_autoptr(SandstepTestResult) bad = sandstep_test_helper (f, "run", h, "--timeout=soon", "--", "true", NULL);
    sandstep_test_assert_status (bad, SANDSTEP_EXIT_USAGE);
    sandstep_test_assert_contains (bad->err, "'soon'");
  }
}

static void
test_caller_killed (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *h = handle_arg (handle);
  g_autofree char *marker = sandstep_test_unique_seconds (100);
  g_autofree char *command = g_strdup_printf ("sleep %s", marker);
  const char *marker_argv[] = { "sleep", marker, NULL };
  g_autoptr(SandstepTestResult) r = NULL;
  SandstepTestProc *proc;
  int launcher = start_launcher (f, handle);

  g_test_summary ("killing a launcher-served `sandstep run` (as make does on ^C) kills its command; the launcher "
                  "lives on and serves the next run");
  proc = sandstep_test_spawn (f, "run", h, "--", command, NULL);
  g_assert_true (sandstep_test_wait_for_process (marker_argv, TRUE, 5));
  g_assert_cmpint (last_claimer (f, handle), ==, launcher);
  sandstep_test_proc_kill (proc, SIGKILL);
  r = sandstep_test_proc_wait (proc, 5);
  g_assert_true (sandstep_test_wait_for_process (marker_argv, FALSE, 3));
  g_assert_true (process_alive (launcher));
  {
    g_autofree char *out = sandstep_test_run_ok (f, handle, "echo again");
    g_assert_cmpstr (out, ==, "again\n");
    g_assert_cmpint (last_claimer (f, handle), ==, launcher);
  }
}

static void
test_ends_with_sandbox (Fixture *f, gconstpointer data)
{
  g_autofree char *a = sandstep_test_provision (f, "--holder=a", NULL);
  g_autofree char *b = sandstep_test_provision (f, "--holder=b", NULL);
  g_autofree char *ha = handle_arg (a);
  g_autofree char *hb = handle_arg (b);
  g_autoptr(SandstepTestResult) destroy = NULL;
  g_autoptr(SandstepTestResult) release = NULL;
  int launcher_a = start_launcher (f, a);
  int launcher_b = start_launcher (f, b);

  g_test_summary ("a launcher ends with its sandbox: at destroy, and at release once idle");
  destroy = sandstep_test_helper (f, "destroy", ha, NULL);
  sandstep_test_assert_status (destroy, 0);
  g_assert_false (process_alive (launcher_a));

  release = sandstep_test_helper (f, "release", hb, NULL);
  sandstep_test_assert_status (release, 0);
  for (int i = 0; i < 300 && process_alive (launcher_b); i++)
    g_usleep (10 * 1000);
  g_assert_false (process_alive (launcher_b));
}

static void
test_data_mount_replaced (Fixture *f, gconstpointer data)
{
  g_autofree char *docs = sandstep_test_host_path (f, "docs");
  g_autofree char *file = g_build_filename (docs, "f", NULL);
  g_autofree char *mount = g_strdup_printf ("--mount=%s:/data/docs", docs);
  g_autofree char *handle = NULL;
  g_autofree char *first = NULL;
  g_autofree char *second = NULL;
  g_autofree char *third = NULL;
  int launcher;

  g_test_summary ("a data mount replaced on the host between two runs (rm -rf and made again) is seen new by the "
                  "next run, as on the ordinary path: the jail built ahead with the old one is not used");
  g_assert_cmpint (g_mkdir_with_parents (docs, 0755), ==, 0);
  g_assert_true (g_file_set_contents (file, "one\n", -1, NULL));
  handle = sandstep_test_provision (f, mount, NULL);
  launcher = start_launcher (f, handle);
  first = sandstep_test_run_ok (f, handle, "cat /data/docs/f");
  g_assert_cmpstr (first, ==, "one\n");
  g_assert_cmpint (last_claimer (f, handle), ==, launcher);

  g_assert_cmpint (unlink (file), ==, 0);
  g_assert_cmpint (rmdir (docs), ==, 0);
  g_assert_cmpint (g_mkdir_with_parents (docs, 0755), ==, 0);
  g_assert_true (g_file_set_contents (file, "two\n", -1, NULL));
  second = sandstep_test_run_ok (f, handle, "cat /data/docs/f");
  g_assert_cmpstr (second, ==, "two\n");
  /* And the launcher serves again, with the new one. */
  third = sandstep_test_run_ok (f, handle, "cat /data/docs/f");
  g_assert_cmpstr (third, ==, "two\n");
  g_assert_cmpint (last_claimer (f, handle), ==, launcher);
}

static void
test_closed_stderr (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *command = NULL;
  g_autofree char *out = NULL;
  g_autoptr(GError) error = NULL;
  const char *argv[] = { "/bin/sh", "-c", NULL, NULL };
  int launcher = start_launcher (f, handle);
  int status = -1;

  g_test_summary ("a caller whose stderr is a pipe closed before the timeout message (| head -c 1) does not take "
                  "the launcher down: it serves the next run");
  command = g_strdup_printf ("'%s' run --handle=%s --timeout=1 -- 'echo x; sleep 5' 2>&1 | head -c 1", f->helper,
                             handle);
  argv[2] = command;
  g_assert_true (g_spawn_sync (NULL, (char **) argv, f->envp, G_SPAWN_DEFAULT, NULL, NULL, &out, NULL, &status,
                               &error));
  g_assert_no_error (error);
  g_assert_cmpstr (out, ==, "x");
  g_usleep (1500 * 1000);
  g_assert_true (process_alive (launcher));
  {
    g_autofree char *again = sandstep_test_run_ok (f, handle, "echo again");
    g_assert_cmpstr (again, ==, "again\n");
    g_assert_cmpint (last_claimer (f, handle), ==, launcher);
  }
}

static void
test_jail_cannot_drive (Fixture *f, gconstpointer data)
{
  g_autofree char *bin_dir = g_path_get_dirname (f->helper);
  g_autofree char *state_mount = g_strdup_printf ("--mount=%s:/data/state", f->state_dir);
  g_autofree char *bin_mount = g_strdup_printf ("--mount=%s:/data/bin", bin_dir);
  g_autofree char *target = sandstep_test_provision (f, "--holder=target", NULL);
  g_autofree char *attacker = sandstep_test_provision (f, "--holder=attacker", state_mount, bin_mount, NULL);
  g_autofree char *ha = g_strdup_printf ("--handle=%s", attacker);
  g_autofree char *command = NULL;
  g_autofree char *pwned = g_build_filename (f->state_dir, "sandboxes", target, "tree", "workspace", "pwned", NULL);
  g_autoptr(SandstepTestResult) r = NULL;
  int launcher = start_launcher (f, target);

  g_test_summary ("a jail that can see another sandbox's launcher socket (its state directory data-mounted, so "
                  "the socket is reachable and the jail's uid 0 is the owner's uid) cannot make it run anything: "
                  "the launcher refuses callers outside its user namespace");
  command = g_strdup_printf ("SANDSTEP_STATE_DIR=/data/state SANDSTEP_OWNER='%s' SANDSTEP_HOLDER='%s' "
                             "/data/bin/sandstep run --handle=%s -- 'echo pwned > /workspace/pwned'; echo rc=$?",
                             f->owner, f->holder, target);
  r = sandstep_test_helper (f, "run", ha, "--", command, NULL);
  sandstep_test_assert_status (r, 0);
  sandstep_test_assert_not_contains (r->out, "rc=0");
  g_assert_false (g_file_test (pwned, G_FILE_TEST_EXISTS));
  g_assert_true (process_alive (launcher));
}

static void
test_limits (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autoptr(SandstepTestResult) forks = NULL;
  g_autoptr(SandstepTestResult) memory = NULL;
  g_autoptr(SandstepTestResult) fine = NULL;
  int launcher;

  g_test_summary ("a launcher-served run keeps the sandbox's limits and names the one it hit: more processes "
                  "than pids=16 (forks fail), more memory than memory=64M (the kernel kills it); a run within "
                  "them says nothing");
  if (getuid () != 0)
    {
      g_test_skip ("needs root: the process and memory limits are a cgroup only a root helper can make here");
      return;
    }
  handle = sandstep_test_provision (f, "--pids=16", "--memory=64M", NULL);
  h = handle_arg (handle);
  launcher = start_launcher (f, handle);

  forks = sandstep_test_helper (f, "run", h, "--", "for i in $(seq 40); do sleep 2 & done 2>/dev/null; wait", NULL);
  g_assert_cmpint (last_claimer (f, handle), ==, launcher);
  sandstep_test_assert_contains (forks->err, "the command hit the sandbox's process limit (pids=16)");

  memory = sandstep_test_helper (f, "run", h, "--", "dd if=/dev/zero of=/dev/null bs=256M count=1", NULL);
  g_assert_cmpint (last_claimer (f, handle), ==, launcher);
  g_assert_cmpint (memory->status, ==, 128 + SIGKILL);
  sandstep_test_assert_contains (memory->err, "the command hit the sandbox's memory limit (memory=64M)");

  fine = sandstep_test_helper (f, "run", h, "--", "for i in 1 2 3 4; do sleep 0.1 & done; wait", NULL);
  sandstep_test_assert_status (fine, 0);
  g_assert_cmpint (last_claimer (f, handle), ==, launcher);
  sandstep_test_assert_not_contains (fine->err, "limit");
}

static void
test_destroy_while_starting (Fixture *f, gconstpointer data)
{
  g_test_summary ("destroy right after a sandbox's first run stops the launcher that run starts, even while it "
                  "is still starting: in 20 rounds, no launcher is left, and a state directory removed after the "
                  "destroy stays removed");
  for (int round = 0; round < 20; round++)
    {
      g_autofree char *name = g_strdup_printf ("state-%d", round);
      g_autofree char *state = g_build_filename (f->base_dir, name, NULL);
      g_autofree char *handle = NULL;
      g_autofree char *h = NULL;
      g_autofree char *out = NULL;
      g_autoptr(SandstepTestResult) destroy = NULL;
      int base_fd;

      sandstep_test_fixture_setenv (f, "SANDSTEP_STATE_DIR", state);
      handle = sandstep_test_provision (f, NULL);
      h = handle_arg (handle);
      out = sandstep_test_run_ok (f, handle, "true");
      destroy = sandstep_test_helper (f, "destroy", h, NULL);
      sandstep_test_assert_status (destroy, 0);
      g_assert_cmpuint (count_launchers (handle), ==, 0);

      base_fd = open (f->base_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      g_assert_cmpint (base_fd, >=, 0);
      sandstep_remove_tree_at (base_fd, name);
      close (base_fd);
      g_usleep (100 * 1000);
      g_assert_false (g_file_test (state, G_FILE_TEST_EXISTS));
      g_assert_cmpuint (count_launchers (handle), ==, 0);
    }
  sandstep_test_fixture_setenv (f, "SANDSTEP_STATE_DIR", f->state_dir);
}

/* In a child running as @user: connects to @socket_path and, when that
 * works, asks the launcher to run @command with this process's stdio, in
 * the name of the sandbox's own owner and holder (no secret).
 * Exits with the errno of connect, or 100 + the reply's kind, or 99. */
static int
attempt_as (Fixture *f, SandstepTestUser *user, const char *socket_path, const char *handle, const char *command)
{
  pid_t pid = fork ();
  int status = -1;

  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      struct sockaddr_un address = { .sun_family = AF_UNIX };
      const char *fields[SANDSTEP_LAUNCH_FIELDS] = { SANDSTEP_LAUNCH_MAGIC, handle, f->owner, f->holder,
                                                       "", "", command };
      char buf[4096];
      size_t len = 0;
      int fds[3] = { 0, 1, 2 };
      union { char buf[CMSG_SPACE (sizeof fds)]; struct cmsghdr align; } control;
      struct iovec iov = { .iov_base = buf };
      struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                            .msg_controllen = sizeof control.buf };
      struct cmsghdr *cmsg = CMSG_FIRSTHDR (&msg);
      SandstepLaunchReply reply;
      int fd;

      if (setgroups (0, NULL) < 0 || setresgid (user->gid, user->gid, user->gid) < 0 ||
          setresuid (user->uid, user->uid, user->uid) < 0)
        _exit (99);
      strncpy (address.sun_path, socket_path, sizeof address.sun_path - 1);
      fd = socket (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
      if (connect (fd, (struct sockaddr *) &address, sizeof address) < 0)
        _exit (errno);
      for (int i = 0; i < SANDSTEP_LAUNCH_FIELDS; i++)
        {
          memcpy (buf + len, fields[i], strlen (fields[i]) + 1);
          len += strlen (fields[i]) + 1;
        }
      iov.iov_len = len;
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN (sizeof fds);
      memcpy (CMSG_DATA (cmsg), fds, sizeof fds);
      if (sendmsg (fd, &msg, 0) < 0 || recv (fd, &reply, sizeof reply, 0) != sizeof reply)
        _exit (99);
      _exit (100 + reply.kind);
    }
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_assert_true (WIFEXITED (status));
  return WEXITSTATUS (status);
}

static void
test_other_user_refused (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *socket_path = sandbox_file (f, handle, "launcher.sock");
  g_autofree char *sandbox_dir = g_build_filename (f->state_dir, "sandboxes", handle, NULL);
  g_autofree char *sandboxes = g_build_filename (f->state_dir, "sandboxes", NULL);
  g_autofree char *pwned = g_build_filename (sandbox_dir, "tree", "workspace", "pwned", NULL);
  const char *opened[] = { f->base_dir, f->state_dir, sandboxes, sandbox_dir };
  g_autofree char *reason = NULL;
  g_autoptr(SandstepTestUser) user = NULL;
  int launcher;

  g_test_summary ("another user cannot drive a sandbox's launcher: connecting gives EACCES (the sandbox's "
                  "directory is 0700), and with every permission opened by hand the launcher still sends the "
                  "caller away (SO_PEERCRED) and runs nothing");
  user = sandstep_test_user_new (&reason);
  if (user == NULL)
    {
      g_test_skip (reason);
      return;
    }
  launcher = start_launcher (f, handle);
  g_assert_cmpint (attempt_as (f, user, socket_path, handle, "echo pwned > /workspace/pwned"), ==, EACCES);

  for (gsize i = 0; i < G_N_ELEMENTS (opened); i++)
    g_assert_cmpint (chmod (opened[i], 0711), ==, 0);
  g_assert_cmpint (chmod (socket_path, 0777), ==, 0);
  g_assert_cmpint (attempt_as (f, user, socket_path, handle, "echo pwned > /workspace/pwned"), ==,
                   100 + SANDSTEP_LAUNCH_FALLBACK);
  for (gsize i = 0; i < G_N_ELEMENTS (opened); i++)
    g_assert_cmpint (chmod (opened[i], 0700), ==, 0);
  g_assert_false (g_file_test (pwned, G_FILE_TEST_EXISTS));
  g_assert_true (process_alive (launcher));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(path, func) g_test_add (path, Fixture, NULL, sandstep_test_setup, func, sandstep_test_teardown)
  ADD ("/launcher/serves-runs", test_serves_runs);
  ADD ("/launcher/timeout", test_timeout);
  ADD ("/launcher/limits", test_limits);
  ADD ("/launcher/refusals-match", test_refusals_match);
  ADD ("/launcher/caller-killed", test_caller_killed);
  ADD ("/launcher/ends-with-sandbox", test_ends_with_sandbox);
  ADD ("/launcher/destroy-while-starting", test_destroy_while_starting);
  ADD ("/launcher/other-user-refused", test_other_user_refused);
  ADD ("/launcher/jail-cannot-drive", test_jail_cannot_drive);
  ADD ("/launcher/data-mount-replaced", test_data_mount_replaced);
  ADD ("/launcher/closed-stderr", test_closed_stderr);
#undef ADD
  return g_test_run ();
}
