/* test-supervisor.c: a live sandbox's supervisor, through the real `sandstep`.
 *
 * The first `sandstep run` of a sandbox starts its supervisor: from the
 * static front with the plan the helper kept at provision, or through the
 * helper, which then holds the claim itself.  On the front's way the
 * supervisor claims the sandbox for each command and writes its own pid
 * into the claim: that is how these cases know which path a run took.  Whatever the path, a run must behave the same:
 * streams, status, timeout, refusals.
 */
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <grp.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include "sandstep-cgroup.h"
#include "sandstep-cgroup-warm.h"
#include "sandstep-exit.h"
#include "sandstep-host-files.h"
#include "sandstep-limit-defaults.h"
#include "sandstep-run-wire.h"
#include "sandstep-supervisor.h"
#include "sandstep-supervisor-keep.h"
#include "sandstep-supervisor-start.h"
#include "sandstep-store.h"
#include "sandstep-test-utils.h"

typedef SandstepTestFixture Fixture;

enum { EXIT_NOT_OWNER = 67, EXIT_BUSY = 75, EXIT_TIMEOUT = 124 };

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

/* Running, not a zombie: an ended supervisor waits for whoever adopted it to reap it. */
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

/* Running processes whose argv is @handle's supervisor's (a jail it is
 * cloning shows that argv too until it execs init). */
static GArray *
find_supervisors (const char *handle)
{
  const char *argv[] = { "sandstep", "--supervisor", handle, NULL };

  return sandstep_test_find_processes (argv);
}

static guint
count_supervisors (const char *handle)
{
  g_autoptr(GArray) pids = find_supervisors (handle);

  return pids->len;
}

/* Runs once (the helper starts the supervisor), then checks that it listens; returns its pid. */
static int
start_supervisor (Fixture *f, const char *handle)
{
  g_autofree char *socket_path = sandbox_file (f, handle, SANDSTEP_RUN_SOCKET);
  g_autofree char *lock_path = sandbox_file (f, handle, SANDSTEP_RUN_LOCK);
  g_autofree char *out = sandstep_test_run_ok (f, handle, "echo first");
  int pid;

  g_assert_cmpstr (out, ==, "first\n");
  /* Up to 60 s for a slow host; a quick one ends the wait at once. */
  for (int i = 0; i < 6000 && !g_file_test (socket_path, G_FILE_TEST_EXISTS); i++)
    g_usleep (10 * 1000);
  g_assert_true (g_file_test (socket_path, G_FILE_TEST_EXISTS));
  pid = pid_in_file (lock_path, NULL);
  g_assert_true (process_alive (pid));
  {
    g_autoptr(GArray) supervisors = find_supervisors (handle);
    gboolean named = FALSE;
    for (guint i = 0; i < supervisors->len; i++)
      named = named || g_array_index (supervisors, GPid, i) == pid;
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

/* Waits until nobody holds @handle's claim: a command the supervisor was
 * serving has ended and its claim is released. */
static gboolean
wait_claim_free (Fixture *f, const char *handle, double seconds)
{
  g_autofree char *claim = sandbox_file (f, handle, "claim");
  gint64 until = g_get_monotonic_time () + (gint64) (seconds * G_USEC_PER_SEC);

  do
    {
      int fd = open (claim, O_RDONLY | O_CLOEXEC);
      gboolean unheld = fd >= 0 && flock (fd, LOCK_EX | LOCK_NB) == 0;

      if (fd >= 0)
        close (fd);
      if (unheld)
        return TRUE;
      g_usleep (10 * 1000);
    }
  while (g_get_monotonic_time () < until);
  return FALSE;
}

static ino_t
inode_of (const char *path)
{
  struct stat st;

  g_assert_cmpint (stat (path, &st), ==, 0);
  return st.st_ino;
}

/* The @n-th run of a command that counts its runs, as @handle's first command: it must run once and go the
 * front's way (the supervisor claims the sandbox) or, with @by_helper, the helper's. */
static void
counted_first_run (Fixture *f, const char *handle, int n, gboolean by_helper)
{
  g_autofree char *lock_path = sandbox_file (f, handle, SANDSTEP_RUN_LOCK);
  g_autofree char *out = sandstep_test_run_ok (f, handle, "echo x >> runs; wc -l < runs");
  g_autofree char *expected = g_strdup_printf ("%d\n", n);
  int supervisor = pid_in_file (lock_path, NULL);

  g_assert_cmpstr (out, ==, expected);
  g_assert_true (process_alive (supervisor));
  if (by_helper)
    g_assert_cmpint (last_claimer (f, handle), !=, supervisor);
  else
    g_assert_cmpint (last_claimer (f, handle), ==, supervisor);
}

static void
test_first_from_kept_plan (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *plan = sandbox_file (f, handle, SANDSTEP_PLAN_FILE);
  g_autofree char *record = sandbox_file (f, handle, "record.json");
  ino_t kept;

  g_test_summary ("provision keeps the sandbox's compiled plan; its first command starts the supervisor from the "
                  "front with it (the supervisor, not the helper, claims the sandbox for it); a kept plan whose "
                  "host files changed since, a damaged one, or one that others could have written, is refused and "
                  "the helper compiles and keeps a new one; the command runs exactly once either way");
  g_assert_true (g_file_test (plan, G_FILE_TEST_IS_REGULAR));
  counted_first_run (f, handle, 1, FALSE);

  /* An input changed (its change time is part of its identity): the helper's way, and a new plan kept. */
  sandstep_test_end_supervisor (f, handle, SIGTERM);
  kept = inode_of (plan);
  g_assert_cmpint (chmod (record, 0600), ==, 0);
  counted_first_run (f, handle, 2, TRUE);
  g_assert_cmpuint (inode_of (plan), !=, kept);

  /* Damaged: the same. */
  sandstep_test_end_supervisor (f, handle, SIGTERM);
  g_assert_true (g_file_set_contents (plan, "not a plan", -1, NULL));
  counted_first_run (f, handle, 3, TRUE);

  /* One that others could have written: the same. */
  sandstep_test_end_supervisor (f, handle, SIGTERM);
  g_assert_cmpint (chmod (plan, 0666), ==, 0);
  counted_first_run (f, handle, 4, TRUE);

  /* And the plan the helper kept serves the next first command. */
  sandstep_test_end_supervisor (f, handle, SIGTERM);
  counted_first_run (f, handle, 5, FALSE);
}

static void
test_kept_plan_live_binds (Fixture *f, gconstpointer data)
{
  g_autofree char *docs = sandstep_test_host_path (f, "docs");
  g_autofree char *mount = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *lock_path = NULL;
  g_autofree char *note = NULL;
  g_autofree char *out = NULL;

  g_test_summary ("what a kept plan binds live may change before the first command without making the plan stale: "
                  "a file added to a data mount is seen, through the front's start (the supervisor's claim)");
  g_assert_cmpint (g_mkdir_with_parents (docs, 0755), ==, 0);
  mount = g_strdup_printf ("--mount=%s:/data/docs", docs);
  handle = sandstep_test_provision (f, mount, NULL);
  lock_path = sandbox_file (f, handle, SANDSTEP_RUN_LOCK);
  note = g_build_filename (docs, "added-after-provision", NULL);
  g_assert_true (g_file_set_contents (note, "new\n", -1, NULL));
  out = sandstep_test_run_ok (f, handle, "cat /data/docs/added-after-provision");
  g_assert_cmpstr (out, ==, "new\n");
  g_assert_cmpint (last_claimer (f, handle), ==, pid_in_file (lock_path, NULL));
}

static void
test_first_refusals (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *h = handle_arg (handle);
  g_autoptr(SandstepTestResult) other = NULL;
  g_autoptr(SandstepTestResult) bad = NULL;
  g_autofree char *out = NULL;

  g_test_summary ("a sandbox's first command is refused as any: another owner (exit 67), a bad --timeout (exit 64), "
                  "each in the ordinary words; the owner's command then runs once");
  other = sandstep_test_helper (f, "run", h, "--owner=someone/else", "--", "echo x >> runs", NULL);
  sandstep_test_assert_status (other, EXIT_NOT_OWNER);
  sandstep_test_assert_contains (other->err, "is not owned by 'someone/else'");
  bad = sandstep_test_helper (f, "run", h, "--timeout=soon", "--", "echo x >> runs", NULL);
  sandstep_test_assert_status (bad, 64);
  sandstep_test_assert_contains (bad->err, "'soon'");
  out = sandstep_test_run_ok (f, handle, "echo x >> runs; wc -l < runs");
  g_assert_cmpstr (out, ==, "1\n");
}

static void
test_front_jail_fallback (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *out = NULL;

  g_test_summary ("a jail that the front could not start for a sandbox's first command (here: its init cannot be "
                  "executed) is built by the supervisor itself: the command runs once, served by the supervisor the "
                  "front started, not by the helper");
  f->envp = g_environ_setenv (f->envp, "SANDSTEP_TEST_FRONT_INIT", "/dev/null", TRUE);
  counted_first_run (f, handle, 1, FALSE);
  out = sandstep_test_run_ok (f, handle, "echo x >> runs; wc -l < runs");
  g_assert_cmpstr (out, ==, "2\n");
}

static void
test_first_holds_nothing_of_caller (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *lock_path = sandbox_file (f, handle, SANDSTEP_RUN_LOCK);
  g_autofree char *command = NULL;
  g_autoptr(GError) error = NULL;
  struct pollfd pfd;
  char byte;
  int fds[2], status = -1;

  g_test_summary ("a sandbox's first command leaves nothing of its caller's open in the supervisor or the jail the "
                  "front starts for it: a pipe the caller passed down (as make passes its jobserver) reaches its "
                  "end when the run does, while the supervisor lives on");
  g_assert_cmpint (pipe (fds), ==, 0);
  /* Above every fd sandstep places, where nothing overwrites it by chance. */
  {
    int high = fcntl (fds[1], F_DUPFD, 50);
    g_assert_cmpint (high, >=, 50);
    close (fds[1]);
    fds[1] = high;
  }
  command = g_strdup_printf ("exec '%s' run --handle=%s -- true", f->helper, handle);
  {
    const char *argv[] = { "/bin/sh", "-c", command, NULL };
    g_assert_true (g_spawn_sync (NULL, (char **) argv, f->envp, G_SPAWN_LEAVE_DESCRIPTORS_OPEN, NULL, NULL, NULL,
                                 NULL, &status, &error));
  }
  g_assert_no_error (error);
  g_assert_cmpint (status, ==, 0);
  close (fds[1]);
  pfd = (struct pollfd) { .fd = fds[0], .events = POLLIN };
  g_assert_cmpint (poll (&pfd, 1, 5000), ==, 1);
  g_assert_cmpint (read (fds[0], &byte, 1), ==, 0);
  close (fds[0]);
  g_assert_true (process_alive (pid_in_file (lock_path, NULL)));
}

static void
test_closed_stdin (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);

  g_test_summary ("a run whose caller closed its stdin gives the command an empty stdin, on the first command and on "
                  "a live sandbox alike: never a descriptor of sandstep's own (its start mark) in its place");
  for (int round = 0; round < 2; round++)
    {
      g_autofree char *command = g_strdup_printf ("exec 0<&-; exec '%s' run --handle=%s -- od -c", f->helper, handle);
      const char *argv[] = { "/bin/sh", "-c", command, NULL };
      g_autofree char *out = NULL;
      g_autoptr(GError) error = NULL;
      int status = -1;

      g_assert_true (g_spawn_sync (NULL, (char **) argv, f->envp, G_SPAWN_DEFAULT, NULL, NULL, &out, NULL, &status,
                                   &error));
      g_assert_no_error (error);
      g_assert_cmpint (status, ==, 0);
      g_assert_cmpstr (out, ==, "0000000\n");
    }
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
  int supervisor = start_supervisor (f, handle);

  g_test_summary ("after the first run, runs are served by the sandbox's supervisor with the same results: "
                  "stdout and stderr, exit status (128+N for signal N), stdin, the caller's TERM and LANG, "
                  "and files that persist");
  for (gsize i = 0; i < G_N_ELEMENTS (statuses); i++)
    {
      g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "run", h, "--", statuses[i].command, NULL);
      sandstep_test_assert_status (r, statuses[i].status);
      g_assert_cmpint (last_claimer (f, handle), ==, supervisor);
    }
  {
    g_autoptr(SandstepTestResult) r = NULL;
    sandstep_test_fixture_setenv (f, "TERM", "sandstep-term");
    sandstep_test_fixture_setenv (f, "LANG", "C.UTF-8");
    r = sandstep_test_helper (f, "run", h, "--", "echo out $TERM $LANG; echo err >&2; echo kept > /workspace/f", NULL);
    sandstep_test_assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "out sandstep-term C.UTF-8\n");
    g_assert_cmpstr (r->err, ==, "err\n");
    g_assert_cmpint (last_claimer (f, handle), ==, supervisor);
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
    g_assert_cmpint (last_claimer (f, handle), ==, supervisor);
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
  int supervisor = start_supervisor (f, handle);

  g_test_summary ("a supervisor-served run keeps its --timeout: everything it started is killed, exit 124, and the "
                  "message names the budget");
  r = sandstep_test_helper (f, "run", h, "--timeout=1.5", "--", command, NULL);
  sandstep_test_assert_status (r, EXIT_TIMEOUT);
  g_assert_cmpint (last_claimer (f, handle), ==, supervisor);
  /* It waited for none of what it started (the shortest, the command itself, sleeps 50 s); how soon after
   * the 1.5 s budget it ended is the host's speed. */
  g_assert_cmpfloat (r->elapsed_s, <, 50.0);
  sandstep_test_assert_contains (r->err, "ran out of its 1.5s budget (--timeout=1.5)");
  g_assert_true (sandstep_test_wait_for_process (child_argv, FALSE, 60));
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

  start_supervisor (f, handle);
  g_test_summary ("with a supervisor up, what the ordinary path refuses is refused the same: another owner (exit 67), "
                  "a sandbox another holder uses (exit 75, naming it), a bad --timeout (exit 64)");
  other = sandstep_test_helper (f, "run", h, "--owner=someone/else", "--", "true", NULL);
  sandstep_test_assert_status (other, EXIT_NOT_OWNER);
  sandstep_test_assert_contains (other->err, "is not owned by 'someone/else'");

  proc = sandstep_test_spawn (f, "run", h, "--holder=first/holder", "--", command, NULL);
  g_assert_true (sandstep_test_wait_for_process (marker_argv, TRUE, 5));
  busy = sandstep_test_helper (f, "run", h, "--holder=second/holder", "--wait=0", "--", "true", NULL);
  sandstep_test_assert_status (busy, EXIT_BUSY);
  sandstep_test_assert_contains (busy->err, "is held by 'first/holder'");
  sandstep_test_proc_kill (proc, SIGTERM);
  held = sandstep_test_proc_wait (proc, 5);
  g_assert_true (sandstep_test_wait_for_process (marker_argv, FALSE, 3));
  {
    g_autoptr(SandstepTestResult) bad = sandstep_test_helper (f, "run", h, "--timeout=soon", "--", "true", NULL);
    sandstep_test_assert_status (bad, 64);
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
  int supervisor = start_supervisor (f, handle);

  g_test_summary ("killing a supervisor-served `sandstep run` (as make does on ^C) kills its command; the supervisor "
                  "lives on and serves the next run");
  proc = sandstep_test_spawn (f, "run", h, "--", command, NULL);
  g_assert_true (sandstep_test_wait_for_process (marker_argv, TRUE, 5));
  g_assert_cmpint (last_claimer (f, handle), ==, supervisor);
  sandstep_test_proc_kill (proc, SIGKILL);
  r = sandstep_test_proc_wait (proc, 5);
  g_assert_true (sandstep_test_wait_for_process (marker_argv, FALSE, 3));
  /* The command's processes go before init reports it ended: a run that came in between would find the
   * supervisor still busy with it and wait there, which this case does not show. */
  g_assert_true (wait_claim_free (f, handle, 5));
  g_assert_true (process_alive (supervisor));
  {
    g_autofree char *out = sandstep_test_run_ok (f, handle, "echo again");
    g_assert_cmpstr (out, ==, "again\n");
    g_assert_cmpint (last_claimer (f, handle), ==, supervisor);
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
  int supervisor_a = start_supervisor (f, a);
  int supervisor_b = start_supervisor (f, b);

  g_test_summary ("a supervisor ends with its sandbox: at destroy, and at release once idle");
  destroy = sandstep_test_helper (f, "destroy", ha, NULL);
  sandstep_test_assert_status (destroy, 0);
  g_assert_false (process_alive (supervisor_a));

  release = sandstep_test_helper (f, "release", hb, NULL);
  sandstep_test_assert_status (release, 0);
  for (int i = 0; i < 6000 && process_alive (supervisor_b); i++)
    g_usleep (10 * 1000);
  g_assert_false (process_alive (supervisor_b));
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
  int supervisor;

  g_test_summary ("a data mount replaced on the host between two runs (rm -rf and made again) is seen new by the "
                  "next run, as on the ordinary path: the jail built ahead with the old one is not used");
  g_assert_cmpint (g_mkdir_with_parents (docs, 0755), ==, 0);
  g_assert_true (g_file_set_contents (file, "one\n", -1, NULL));
  handle = sandstep_test_provision (f, mount, NULL);
  supervisor = start_supervisor (f, handle);
  first = sandstep_test_run_ok (f, handle, "cat /data/docs/f");
  g_assert_cmpstr (first, ==, "one\n");
  g_assert_cmpint (last_claimer (f, handle), ==, supervisor);

  g_assert_cmpint (unlink (file), ==, 0);
  g_assert_cmpint (rmdir (docs), ==, 0);
  g_assert_cmpint (g_mkdir_with_parents (docs, 0755), ==, 0);
  g_assert_true (g_file_set_contents (file, "two\n", -1, NULL));
  second = sandstep_test_run_ok (f, handle, "cat /data/docs/f");
  g_assert_cmpstr (second, ==, "two\n");
  /* And the supervisor serves again, with the new one. */
  third = sandstep_test_run_ok (f, handle, "cat /data/docs/f");
  g_assert_cmpstr (third, ==, "two\n");
  g_assert_cmpint (last_claimer (f, handle), ==, supervisor);
}

static void
test_closed_stderr (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *command = NULL;
  g_autofree char *out = NULL;
  g_autoptr(GError) error = NULL;
  const char *argv[] = { "/bin/sh", "-c", NULL, NULL };
  int supervisor = start_supervisor (f, handle);
  int status = -1;

  g_test_summary ("a caller whose stderr is a pipe closed before the timeout message (| head -c 1) does not take "
                  "the supervisor down: it serves the next run");
  command = g_strdup_printf ("'%s' run --handle=%s --timeout=1 -- 'echo x; sleep 5' 2>&1 | head -c 1", f->helper,
                             handle);
  argv[2] = command;
  g_assert_true (g_spawn_sync (NULL, (char **) argv, f->envp, G_SPAWN_DEFAULT, NULL, NULL, &out, NULL, &status,
                               &error));
  g_assert_no_error (error);
  g_assert_cmpstr (out, ==, "x");
  g_usleep (1500 * 1000);
  g_assert_true (process_alive (supervisor));
  {
    g_autofree char *again = sandstep_test_run_ok (f, handle, "echo again");
    g_assert_cmpstr (again, ==, "again\n");
    g_assert_cmpint (last_claimer (f, handle), ==, supervisor);
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
  int supervisor = start_supervisor (f, target);

  g_test_summary ("a jail that can see another sandbox's supervisor socket (its state directory data-mounted, so "
                  "the socket is reachable and the jail's uid 0 is the owner's uid) cannot make it run anything: "
                  "the supervisor refuses callers outside its user namespace");
  command = g_strdup_printf ("SANDSTEP_STATE_DIR=/data/state SANDSTEP_OWNER='%s' SANDSTEP_HOLDER='%s' "
                             "/data/bin/sandstep run --handle=%s -- 'echo pwned > /workspace/pwned'; echo rc=$?",
                             f->owner, f->holder, target);
  r = sandstep_test_helper (f, "run", ha, "--", command, NULL);
  sandstep_test_assert_status (r, 0);
  sandstep_test_assert_not_contains (r->out, "rc=0");
  g_assert_false (g_file_test (pwned, G_FILE_TEST_EXISTS));
  g_assert_true (process_alive (supervisor));
}

static void
test_limits (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autoptr(SandstepTestResult) forks = NULL;
  g_autoptr(SandstepTestResult) memory = NULL;
  g_autoptr(SandstepTestResult) fine = NULL;
  int supervisor;

  g_test_summary ("a supervisor-served run keeps the sandbox's limits and names the one it hit: more processes "
                  "than pids=16 (forks fail), more memory than memory=64M (the kernel kills it); a run within "
                  "them says nothing");
  if (sandstep_test_skip_without_cgroup ("checking the process and memory limits"))
    return;
  handle = sandstep_test_provision (f, "--pids=16", "--memory=64M", NULL);
  h = handle_arg (handle);
  supervisor = start_supervisor (f, handle);

  forks = sandstep_test_helper (f, "run", h, "--", "for i in $(seq 40); do sleep 2 & done 2>/dev/null; wait", NULL);
  g_assert_cmpint (last_claimer (f, handle), ==, supervisor);
  sandstep_test_assert_contains (forks->err, "the command hit the sandbox's process limit (pids=16)");

  memory = sandstep_test_helper (f, "run", h, "--", "dd if=/dev/zero of=/dev/null bs=256M count=1", NULL);
  g_assert_cmpint (last_claimer (f, handle), ==, supervisor);
  g_assert_cmpint (memory->status, ==, 128 + SIGKILL);
  sandstep_test_assert_contains (memory->err, "the command hit the sandbox's memory limit (memory=64M)");

  fine = sandstep_test_helper (f, "run", h, "--", "for i in 1 2 3 4; do sleep 0.1 & done; wait", NULL);
  sandstep_test_assert_status (fine, 0);
  g_assert_cmpint (last_claimer (f, handle), ==, supervisor);
  sandstep_test_assert_not_contains (fine->err, "limit");
}

static void
test_destroy_while_starting (Fixture *f, gconstpointer data)
{
  g_test_summary ("destroy right after a sandbox's first run stops the supervisor that run starts, even while it "
                  "is still starting: in 20 rounds, no supervisor is left, and a state directory removed after the "
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
      g_assert_cmpuint (count_supervisors (handle), ==, 0);

      base_fd = open (f->base_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      g_assert_cmpint (base_fd, >=, 0);
      sandstep_remove_tree_at (base_fd, name);
      close (base_fd);
      g_usleep (100 * 1000);
      g_assert_false (g_file_test (state, G_FILE_TEST_EXISTS));
      g_assert_cmpuint (count_supervisors (handle), ==, 0);
    }
  sandstep_test_fixture_setenv (f, "SANDSTEP_STATE_DIR", f->state_dir);
}

/* In a child running as @user: connects to @socket_path and, when that
 * works, asks the supervisor to run @command with this process's stdio, in
 * the name of the sandbox's own owner and holder (no secret).
 * Exits with the errno of connect, or 100 + the reply's kind, or 97 when it
 * marked the command started, or 98-99. */
static int
attempt_as (Fixture *f, SandstepTestUser *user, const char *socket_path, const char *handle, const char *command)
{
  pid_t pid = fork ();
  int status = -1;

  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      struct sockaddr_un address = { .sun_family = AF_UNIX };
      const char *fields[SANDSTEP_RUN_FIELDS] = { SANDSTEP_RUN_MAGIC, handle, f->owner, f->holder,
                                                    "", "", "", command, "", "" };
      char buf[4096];
      size_t len = 0;
      /* stdio and a start mark: a request whole in every part but its sender. */
      int mark[2];
      int fds[4] = { 0, 1, 2, -1 };
      union { char buf[CMSG_SPACE (sizeof fds)]; struct cmsghdr align; } control;
      struct iovec iov = { .iov_base = buf };
      struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                            .msg_controllen = sizeof control.buf };
      struct cmsghdr *cmsg = CMSG_FIRSTHDR (&msg);
      SandstepRunReply reply;
      int fd;

      if (setgroups (0, NULL) < 0 || setresgid (user->gid, user->gid, user->gid) < 0 ||
          setresuid (user->uid, user->uid, user->uid) < 0)
        _exit (99);
      if (pipe (mark) < 0)
        _exit (99);
      fds[3] = mark[1];
      strncpy (address.sun_path, socket_path, sizeof address.sun_path - 1);
      fd = socket (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
      if (connect (fd, (struct sockaddr *) &address, sizeof address) < 0)
        _exit (errno);
      for (int i = 0; i < SANDSTEP_RUN_FIELDS; i++)
        {
          memcpy (buf + len, fields[i], strlen (fields[i]) + 1);
          len += strlen (fields[i]) + 1;
        }
      iov.iov_len = len;
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN (sizeof fds);
      memcpy (CMSG_DATA (cmsg), fds, sizeof fds);
      /* The supervisor may answer and hang up before reading: the answer is what counts. */
      if (sendmsg (fd, &msg, MSG_NOSIGNAL) < 0 && errno != EPIPE && errno != ECONNRESET)
        _exit (99);
      if (recv (fd, &reply, sizeof reply, 0) != sizeof reply)
        _exit (98);
      /* Marked started, whatever it answered: the command may have run. */
      close (mark[1]);
      if (read (mark[0], buf, 1) == 1)
        _exit (97);
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
  g_autofree char *socket_path = sandbox_file (f, handle, "supervisor.sock");
  g_autofree char *sandbox_dir = g_build_filename (f->state_dir, "sandboxes", handle, NULL);
  g_autofree char *sandboxes = g_build_filename (f->state_dir, "sandboxes", NULL);
  g_autofree char *pwned = g_build_filename (sandbox_dir, "tree", "workspace", "pwned", NULL);
  const char *opened[] = { f->base_dir, f->state_dir, sandboxes, sandbox_dir };
  g_autofree char *reason = NULL;
  g_autoptr(SandstepTestUser) user = NULL;
  int supervisor;

  g_test_summary ("another user cannot drive a sandbox's supervisor: connecting gives EACCES (the sandbox's "
                  "directory is 0700), and with every permission opened by hand the supervisor still sends the "
                  "caller away (SO_PEERCRED) and runs nothing");
  user = sandstep_test_user_new (&reason);
  if (user == NULL)
    {
      g_test_skip (reason);
      return;
    }
  supervisor = start_supervisor (f, handle);
  g_assert_cmpint (attempt_as (f, user, socket_path, handle, "echo pwned > /workspace/pwned"), ==, EACCES);

  for (gsize i = 0; i < G_N_ELEMENTS (opened); i++)
    g_assert_cmpint (chmod (opened[i], 0711), ==, 0);
  g_assert_cmpint (chmod (socket_path, 0777), ==, 0);
  g_assert_cmpint (attempt_as (f, user, socket_path, handle, "echo pwned > /workspace/pwned"), ==,
                   100 + SANDSTEP_RUN_FALLBACK);
  for (gsize i = 0; i < G_N_ELEMENTS (opened); i++)
    g_assert_cmpint (chmod (opened[i], 0700), ==, 0);
  g_assert_false (g_file_test (pwned, G_FILE_TEST_EXISTS));
  g_assert_true (process_alive (supervisor));
}

/* Asks the supervisor at @socket_path, in the fixture's name as @holder, to run @command with stdout to @out_fd
 * (stdin and stderr /dev/null), waiting @wait ("": not given), asking to run beside @holder's commands when
 * @beside.  Returns the connection; the start mark's read end, which a caller keeps (one closed is a caller
 * gone), is added to @marks. */
static int
request_beside (Fixture *f, const char *socket_path, const char *handle, const char *holder, const char *wait,
                gboolean beside, const char *command, int out_fd, GArray *marks)
{
  struct sockaddr_un address = { .sun_family = AF_UNIX };
  const char *fields[SANDSTEP_RUN_FIELDS] = { [SANDSTEP_RUN_FIELD_MAGIC] = SANDSTEP_RUN_MAGIC,
                                              [SANDSTEP_RUN_FIELD_HANDLE] = handle,
                                              [SANDSTEP_RUN_FIELD_OWNER] = f->owner,
                                              [SANDSTEP_RUN_FIELD_HOLDER] = holder,
                                              [SANDSTEP_RUN_FIELD_WAIT] = wait,
                                              [SANDSTEP_RUN_FIELD_COMMAND] = command,
                                              [SANDSTEP_RUN_FIELD_BESIDE] = beside ? "1" : "" };
  g_autoptr(GString) buf = g_string_new (NULL);
  int null_fd = open ("/dev/null", O_RDWR | O_CLOEXEC);
  int mark[2], fds[4], fd;
  union { char buf[CMSG_SPACE (sizeof fds)]; struct cmsghdr align; } control;
  struct iovec iov;
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                        .msg_controllen = sizeof control.buf };
  struct cmsghdr *cmsg = CMSG_FIRSTHDR (&msg);

  for (int i = 0; i < SANDSTEP_RUN_FIELDS; i++)
    g_string_append_len (buf, fields[i] != NULL ? fields[i] : "", strlen (fields[i] != NULL ? fields[i] : "") + 1);
  g_assert_cmpint (pipe2 (mark, O_CLOEXEC), ==, 0);
  fds[0] = null_fd;
  fds[1] = out_fd;
  fds[2] = null_fd;
  fds[3] = mark[1];
  strncpy (address.sun_path, socket_path, sizeof address.sun_path - 1);
  fd = socket (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  g_assert_cmpint (connect (fd, (struct sockaddr *) &address, sizeof address), ==, 0);
  iov = (struct iovec) { buf->str, buf->len };
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN (sizeof fds);
  memcpy (CMSG_DATA (cmsg), fds, sizeof fds);
  g_assert_cmpint (sendmsg (fd, &msg, MSG_NOSIGNAL), ==, (ssize_t) buf->len);
  close (null_fd);
  close (mark[1]);
  g_array_append_val (marks, mark[0]);
  return fd;
}

/* The next answer on @conn that is not a NOTICE. */
static SandstepRunReply
next_reply (int conn)
{
  for (;;)
    {
      char buf[4096];
      SandstepRunReply reply;
      struct pollfd pfd = { .fd = conn, .events = POLLIN };
      ssize_t n;

      g_assert_cmpint (poll (&pfd, 1, (int) (60000 * sandstep_test_time_scale ())), ==, 1);
      n = recv (conn, buf, sizeof buf, 0);
      g_assert_cmpint (n, >=, (ssize_t) sizeof reply);
      memcpy (&reply, buf, sizeof reply);
      if (reply.kind != SANDSTEP_RUN_NOTICE)
        return reply;
    }
}

/* What @fd gives until its end (every writer gone), within a minute (scaled). */
static char *
read_to_end (int fd)
{
  GString *out = g_string_new (NULL);

  for (;;)
    {
      char buf[256];
      struct pollfd pfd = { .fd = fd, .events = POLLIN };
      ssize_t n;

      g_assert_cmpint (poll (&pfd, 1, (int) (60000 * sandstep_test_time_scale ())), ==, 1);
      n = read (fd, buf, sizeof buf);
      g_assert_cmpint (n, >=, 0);
      if (n == 0)
        return g_string_free (out, FALSE);
      g_string_append_len (out, buf, n);
    }
}

/* The first line @fd gives, within a minute (scaled). */
static char *
read_line (int fd)
{
  GString *out = g_string_new (NULL);

  while (out->len == 0 || out->str[out->len - 1] != '\n')
    {
      char c;
      struct pollfd pfd = { .fd = fd, .events = POLLIN };

      g_assert_cmpint (poll (&pfd, 1, (int) (60000 * sandstep_test_time_scale ())), ==, 1);
      g_assert_cmpint (read (fd, &c, 1), ==, 1);
      g_string_append_c (out, c);
    }
  return g_string_free (out, FALSE);
}

/* A caller turned away: one answer of KIND, then the caller goes. */
static void
assert_answered (int conn, SandstepRunKind kind)
{
  g_assert_cmpint (next_reply (conn).kind, ==, kind);
  close (conn);
}

/* Every writer of FD is gone and wrote nothing. */
static void
assert_no_output (int fd)
{
  g_autofree char *rest = read_to_end (fd);

  g_assert_cmpstr (rest, ==, "");
}

static void
test_beside (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *socket_path = sandbox_file (f, handle, SANDSTEP_RUN_SOCKET);
  g_autofree char *line = NULL, *rest = NULL;
  g_autoptr(GArray) marks = g_array_new (FALSE, FALSE, sizeof (int));
  SandstepRunReply reply;
  int first[2], second[2], other[2], left[2], six[2], seven[2];
  int c1, c2, c3, c4, c5, c6, supervisor;

  g_test_summary ("commands that ask to run beside those of their holder (E2B's calls) do, at once, while "
                  "another holder's, or one that did not ask, is not let in (refused here with --wait=0); a "
                  "command killed beside another takes what it started in its process group with it, and the "
                  "other runs on; a caller that cannot run beside them waits for them to end, and meanwhile "
                  "nothing more begins beside them");
  supervisor = start_supervisor (f, handle);
  g_assert_cmpint (pipe2 (first, O_CLOEXEC), ==, 0);
  g_assert_cmpint (pipe2 (second, O_CLOEXEC), ==, 0);
  g_assert_cmpint (pipe2 (other, O_CLOEXEC), ==, 0);
  g_assert_cmpint (pipe2 (left, O_CLOEXEC), ==, 0);
  g_assert_cmpint (pipe2 (six, O_CLOEXEC), ==, 0);
  g_assert_cmpint (pipe2 (seven, O_CLOEXEC), ==, 0);

  c1 = request_beside (f, socket_path, handle, "dag/run/e2b", "", TRUE, "echo one; exec sleep 1000", first[1], marks);
  close (first[1]);
  line = read_line (first[0]);
  g_assert_cmpstr (line, ==, "one\n");

  /* Beside it, at once, to its end. */
  c2 = request_beside (f, socket_path, handle, "dag/run/e2b", "", TRUE, "echo two", second[1], marks);
  close (second[1]);
  reply = next_reply (c2);
  g_assert_cmpint (reply.kind, ==, SANDSTEP_RUN_DONE);
  g_assert_cmpint (reply.exit_status, ==, 0);
  rest = read_to_end (second[0]);
  g_assert_cmpstr (rest, ==, "two\n");
  close (c2);

  /* Another holder's, and one that did not ask: held out (with --wait=0, the ordinary path is told to judge). */
  c3 = request_beside (f, socket_path, handle, "dag/run/other", "0", TRUE, "echo three", other[1], marks);
  assert_answered (c3, SANDSTEP_RUN_FALLBACK);
  c3 = request_beside (f, socket_path, handle, "dag/run/e2b", "0", FALSE, "echo four", other[1], marks);
  close (other[1]);
  assert_answered (c3, SANDSTEP_RUN_FALLBACK);
  assert_no_output (other[0]);

  /* One that leaves processes in its group, killed (its caller goes): they go with it; the first runs on. */
  c4 = request_beside (f, socket_path, handle, "dag/run/e2b", "", TRUE,
                       "sleep 1001 & sleep 1002 & echo five; wait", left[1], marks);
  close (left[1]);
  g_clear_pointer (&line, g_free);
  line = read_line (left[0]);
  g_assert_cmpstr (line, ==, "five\n");
  close (c4);
  assert_no_output (left[0]);
  g_assert_cmpint (poll (&(struct pollfd) { .fd = first[0], .events = POLLIN }, 1, 0), ==, 0);

  /* A caller that cannot run beside them waits for them to end (told so), and while it waits nothing more begins
   * beside them: its turn comes. */
  c5 = request_beside (f, socket_path, handle, "dag/run/other", "", FALSE, "echo six", six[1], marks);
  close (six[1]);
  {
    char buf[4096];
    SandstepRunReply notice;
    struct pollfd pfd = { .fd = c5, .events = POLLIN };
    g_assert_cmpint (poll (&pfd, 1, (int) (60000 * sandstep_test_time_scale ())), ==, 1);
    g_assert_cmpint (recv (c5, buf, sizeof buf, 0), >, (ssize_t) sizeof notice);
    memcpy (&notice, buf, sizeof notice);
    g_assert_cmpint (notice.kind, ==, SANDSTEP_RUN_NOTICE);
  }
  c6 = request_beside (f, socket_path, handle, "dag/run/e2b", "1", TRUE, "echo seven", seven[1], marks);
  close (seven[1]);
  assert_answered (c6, SANDSTEP_RUN_BUSY);
  assert_no_output (seven[0]);

  /* The last one killed: everything goes, the waiting caller's command runs, and the supervisor serves on. */
  close (c1);
  assert_no_output (first[0]);
  reply = next_reply (c5);
  g_assert_cmpint (reply.kind, ==, SANDSTEP_RUN_DONE);
  g_assert_cmpint (reply.exit_status, ==, 0);
  close (c5);
  g_clear_pointer (&rest, g_free);
  rest = read_to_end (six[0]);
  g_assert_cmpstr (rest, ==, "six\n");
  g_free (sandstep_test_run_ok (f, handle, "true"));
  g_assert_true (process_alive (supervisor));
  close (first[0]);
  close (second[0]);
  close (other[0]);
  close (left[0]);
  close (six[0]);
  close (seven[0]);
  for (guint i = 0; i < marks->len; i++)
    close (g_array_index (marks, int, i));
}

/* A listening unix socket at @path made with @user's effective uid (the file, and SO_PEERCRED, are
 * @user's), as another user's planted supervisor would be. */
static int
listen_as (SandstepTestUser *user, const char *path)
{
  struct sockaddr_un address = { .sun_family = AF_UNIX };
  int fd = socket (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpuint (strlen (path), <, sizeof address.sun_path);
  strcpy (address.sun_path, path);
  g_assert_cmpint (setegid (user->gid), ==, 0);
  g_assert_cmpint (seteuid (user->uid), ==, 0);
  g_assert_cmpint (bind (fd, (struct sockaddr *) &address, sizeof address), ==, 0);
  g_assert_cmpint (listen (fd, 16), ==, 0);
  g_assert_cmpint (seteuid (0), ==, 0);
  g_assert_cmpint (setegid (0), ==, 0);
  return fd;
}

/* The bytes every connection made to @listener so far sent it. */
static gsize
bytes_sent_to (int listener, guint *out_connections)
{
  gsize total = 0;
  int conn;

  *out_connections = 0;
  while ((conn = accept4 (listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0)
    {
      char buf[65536];
      ssize_t n;

      (*out_connections)++;
      while ((n = recv (conn, buf, sizeof buf, MSG_DONTWAIT)) > 0)
        total += n;
      close (conn);
    }
  return total;
}

static void
test_foreign_state_dir (Fixture *f, gconstpointer data)
{
  const char *handle = "sandstep-00000000deadbeef";
  g_autofree char *evil = g_build_filename (f->host_dir, "evil-state", NULL);
  g_autofree char *evil_boxes = g_build_filename (evil, "sandboxes", NULL);
  g_autofree char *evil_box = g_build_filename (evil_boxes, handle, NULL);
  g_autofree char *evil_sock = g_build_filename (evil_box, SANDSTEP_RUN_SOCKET, NULL);
  g_autofree char *own = NULL;
  g_autofree char *own_box = NULL;
  g_autofree char *own_sock = NULL;
  g_autofree char *own_boxes = g_build_filename (f->state_dir, "sandboxes", NULL);
  g_autofree char *h = g_strconcat ("--handle=", handle, NULL);
  g_autofree char *reason = NULL;
  g_autoptr(SandstepTestUser) user = NULL;
  const char *opened[] = { f->base_dir, f->host_dir, f->state_dir, own_boxes };
  struct stat st_opened[G_N_ELEMENTS (opened)];
  guint connections = 0;
  int listener;

  g_test_summary ("issue 30 item 3: a state directory another user made (with a supervisor.sock planted in it) is "
                  "refused with one line, and nothing is sent to the planted socket; in the caller's own state "
                  "directory, a supervisor.sock another user serves (SO_PEERCRED) gets nothing either");
  user = sandstep_test_user_new (&reason);
  if (user == NULL)
    {
      g_test_skip (reason);
      return;
    }
  own = sandstep_test_provision (f, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS (opened); i++)
    {
      g_assert_cmpint (stat (opened[i], &st_opened[i]), ==, 0);
      g_assert_cmpint (chmod (opened[i], 0711), ==, 0);
    }

  /* 1. The whole state directory is the other user's, as one made in /tmp before root's first run. */
  g_assert_cmpint (mkdir (evil, 0755), ==, 0);
  g_assert_cmpint (mkdir (evil_boxes, 0755), ==, 0);
  g_assert_cmpint (mkdir (evil_box, 0755), ==, 0);
  g_assert_cmpint (chown (evil, user->uid, user->gid), ==, 0);
  g_assert_cmpint (chown (evil_boxes, user->uid, user->gid), ==, 0);
  g_assert_cmpint (chown (evil_box, user->uid, user->gid), ==, 0);
  listener = listen_as (user, evil_sock);
  sandstep_test_fixture_setenv (f, "SANDSTEP_STATE_DIR", evil);
  {
    const char *args[] = { "run", h, "--", "echo secret-stdout", NULL };
    g_autoptr(SandstepTestResult) r = sandstep_test_helper_argv (f, args, 15);
    gsize sent = bytes_sent_to (listener, &connections);

    g_test_message ("foreign state dir: status %d, %u connections, %zu bytes; stderr: %s", r->status, connections,
                    sent, r->err);
    g_assert_false (r->timed_out);
    g_assert_cmpint (r->status, !=, 0);
    g_assert_cmpuint (connections, ==, 0);
    g_assert_cmpuint (sent, ==, 0);
    sandstep_test_assert_contains (r->err, evil);
    sandstep_test_assert_contains (r->err, "belongs to another user");
    sandstep_test_assert_contains (r->err, "SANDSTEP_STATE_DIR");
    /* One line. */
    g_assert_true (strchr (r->err, '\n') == r->err + strlen (r->err) - 1);
  }
  close (listener);
  sandstep_test_fixture_setenv (f, "SANDSTEP_STATE_DIR", f->state_dir);

  /* 2. The caller's own state directory, a socket in a sandbox's directory served by another user. */
  own_box = g_build_filename (own_boxes, own, NULL);
  own_sock = g_build_filename (own_box, SANDSTEP_RUN_SOCKET, NULL);
  unlink (own_sock);
  g_assert_cmpint (chown (own_box, user->uid, user->gid), ==, 0);
  listener = listen_as (user, own_sock);
  g_assert_cmpint (chown (own_box, 0, 0), ==, 0);
  {
    g_autofree char *own_h = g_strconcat ("--handle=", own, NULL);
    const char *args[] = { "run", own_h, "--", "echo secret-stdout", NULL };
    g_autoptr(SandstepTestResult) r = sandstep_test_helper_argv (f, args, 15);
    gsize sent = bytes_sent_to (listener, &connections);

    g_test_message ("planted socket: status %d, %u connections, %zu bytes; stderr: %s", r->status, connections, sent,
                    r->err);
    g_assert_false (r->timed_out);
    g_assert_cmpint (r->status, !=, 0);
    g_assert_cmpuint (sent, ==, 0);
    sandstep_test_assert_contains (r->err, "served by another user");
    sandstep_test_assert_not_contains (r->out, "secret-stdout");
  }
  close (listener);
  unlink (own_sock);
  for (gsize i = 0; i < G_N_ELEMENTS (opened); i++)
    g_assert_cmpint (chmod (opened[i], st_opened[i].st_mode & 07777), ==, 0);
}

/* Runs @script with /bin/sh -c in the fixture's environment; returns its stdout, asserting exit 0. */
static char *
shell_ok (Fixture *f, const char *script)
{
  const char *argv[] = { "/bin/sh", "-c", script, NULL };
  g_autoptr(GError) error = NULL;
  g_autofree char *err = NULL;
  char *out = NULL;
  int status = -1;

  g_assert_true (g_spawn_sync (f->host_dir, (char **) argv, f->envp, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                               &status, &error));
  g_assert_no_error (error);
  if (!g_spawn_check_wait_status (status, NULL))
    g_error ("'%s' failed: %s", script, err);
  return out;
}

/* Fields of /proc/PID/stat after "pid (comm)": index 0 is field 3 (state). */
static char **
proc_stat_fields (const char *stat_text)
{
  const char *close = strrchr (stat_text, ')');

  g_assert_nonnull (close);
  return g_strsplit (close + 2, " ", -1);
}

/* A line of /proc/PID/status, after "NAME:\t". */
static char *
status_field (int pid, const char *name)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/status", pid);
  g_autofree char *text = NULL;
  g_autofree char *key = g_strdup_printf ("\n%s:\t", name);
  const char *p, *end;

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  p = strstr (text, key);
  g_assert_nonnull (p);
  p += strlen (key);
  end = strchr (p, '\n');
  return g_strndup (p, end != NULL ? end - p : (gssize) strlen (p));
}

static gboolean
has_cap_sys_resource (void)
{
  g_autofree char *caps = status_field (getpid (), "CapEff");

  return (g_ascii_strtoull (caps, NULL, 16) >> 24) & 1;
}

static guint count_fds_now (int pid);

/* The fd count once the supervisor is idle: it closes a caller's connection just after answering it. */
static guint
count_fds (int pid)
{
  guint last = count_fds_now (pid), now;

  for (int i = 0; i < 50; i++)
    {
      g_usleep (20 * 1000);
      if ((now = count_fds_now (pid)) == last)
        return now;
      last = now;
    }
  return last;
}

static guint
count_fds_now (int pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/fd", pid);
  g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
  guint n = 0;

  g_assert_nonnull (dir);
  while (g_dir_read_name (dir) != NULL)
    n++;
  return n;
}

static void
test_live_namespaces (Fixture *f, gconstpointer data)
{
  static const char *const names[] = { "user", "mnt", "net", "ipc", "uts", "pid", "cgroup" };
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autoptr(GString) command = g_string_new (NULL);
  g_autofree char *first = NULL;
  g_autofree char *second = NULL;
  g_autofree char *marker = sandstep_test_unique_seconds (300);
  g_autofree char *background = NULL;
  const char *marker_argv[] = { "sleep", marker, NULL };

  g_test_summary ("a sandbox is live: its commands share one set of namespaces (user, mount, net, ipc, uts, pid, "
                  "cgroup), none of them the host's, and each command is a fresh process tree: what one left in "
                  "the background is gone when it returns");
  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    g_string_append_printf (command, "readlink /proc/self/ns/%s; ", names[i]);
  first = sandstep_test_run_ok (f, handle, command->str);
  background = g_strdup_printf ("sleep %s & echo started", marker);
  g_free (sandstep_test_run_ok (f, handle, background));
  g_assert_false (sandstep_test_wait_for_process (marker_argv, TRUE, 0.01));
  second = sandstep_test_run_ok (f, handle, command->str);
  g_assert_cmpstr (first, ==, second);
  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree char *self = g_strdup_printf ("/proc/self/ns/%s", names[i]);
      g_autofree char *host = g_file_read_link (self, NULL);
      g_assert_nonnull (host);
      sandstep_test_assert_not_contains (first, host);
    }
}

static void
test_ipc_removed (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autoptr(SandstepTestResult) made = NULL;
  g_autofree char *after = NULL;
  g_autofree char *h = handle_arg (handle);

  g_test_summary ("what a command leaves in the sandbox's IPC goes with it: SysV shared memory, semaphores and "
                  "message queues, and POSIX shared memory (/dev/shm), are gone for the next command");
  made = sandstep_test_helper (f, "run", h, "--",
                               "ipcmk -M 4096 >/dev/null && ipcmk -S 2 >/dev/null && ipcmk -Q >/dev/null && "
                               "mkdir /dev/shm/d && echo x > /dev/shm/d/seg && echo y > /dev/shm/top && "
                               "ipcs -m | grep -c 0x; ipcs -s | grep -c 0x; ipcs -q | grep -c 0x; ls /dev/shm",
                               NULL);
  sandstep_test_assert_status (made, 0);
  g_assert_cmpstr (made->out, ==, "1\n1\n1\nd\ntop\n");
  after = sandstep_test_run_ok (f, handle, "ipcs -m | grep -c 0x; ipcs -s | grep -c 0x; ipcs -q | grep -c 0x; "
                                           "ls -A /dev/shm | wc -l");
  g_assert_cmpstr (after, ==, "0\n0\n0\n0\n");
}

static void
test_plain_words_path (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, "--env=PATH=/workspace/bin:/usr/bin:/bin", NULL);
  g_autofree char *id = NULL;
  g_autofree char *bare = NULL;

  g_test_summary ("a command of plain words, which init execs without a shell, runs what its shell would: the "
                  "first of that name on the command's own PATH (a /workspace/bin/id before /usr/bin/id), and a "
                  "file there without #! as a shell script, not a later file of the same name");
  g_free (sandstep_test_run_ok (f, handle, "mkdir -p bin && printf '#!/bin/sh\necho mine\n' > bin/id && "
                                           "printf 'echo as a script\n' > bin/ls && chmod +x bin/id bin/ls"));
  id = sandstep_test_run_ok (f, handle, "id");
  g_assert_cmpstr (id, ==, "mine\n");
  bare = sandstep_test_run_ok (f, handle, "ls");
  g_assert_cmpstr (bare, ==, "as a script\n");
}

static void
test_own_process_state (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *script = NULL;
  g_autofree char *supervisor_cpus = NULL;
  g_autofree char *system_cpus = status_field (1, "Cpus_allowed_list");
  g_autofree char *umask_text = NULL;
  g_autofree char *limits_path = NULL;
  g_autofree char *limits = NULL;
  g_autofree char *environ_path = NULL;
  g_autofree char *environ_text = NULL;
  g_autofree char *seen = NULL;
  int supervisor;

  g_test_summary ("a supervisor's process state is its own, never that of the caller that started it, but for "
                  "the caller's CPUs: a first run under umask 077, CPU 0 only, 64 open files and an odd "
                  "environment leaves it with umask 0022, CPU 0 only (as taskset or Slurm bound the caller), "
                  "the system's limits and no caller variable; and every command gets CPU 0 only, "
                  "umask 0022, no signal ignored (not even libc's own, which a glibc posix_spawn leaves ignored) "
                  "and the caller's own terminal and locale, whatever its caller's umask and ignored signals");
  /* A hard limit lowered by the caller comes back only with CAP_SYS_RESOURCE; the soft one always. */
  script = g_strdup_printf ("umask 077; ulimit %s -n 64; trap '' PIPE HUP; SANDSTEP_ODD=1 LANG=C exec "
                            "taskset -c 0 '%s' run --handle=%s -- 'umask; grep -e SigIgn -e Cpus_allowed_list: /proc/self/status'",
                            has_cap_sys_resource () ? "" : "-S", f->helper, handle);
  seen = shell_ok (f, script);
  g_assert_cmpstr (seen, ==, "0022\nSigIgn:\t0000000000000000\nCpus_allowed_list:\t0\n");
  supervisor = start_supervisor (f, handle);
  umask_text = status_field (supervisor, "Umask");
  g_assert_cmpstr (umask_text, ==, "0022");
  supervisor_cpus = status_field (supervisor, "Cpus_allowed_list");
  g_assert_cmpstr (supervisor_cpus, ==, "0");
  limits_path = g_strdup_printf ("/proc/%d/limits", supervisor);
  g_assert_true (g_file_get_contents (limits_path, &limits, NULL, NULL));
  sandstep_test_assert_not_contains (limits, "Max open files            64 ");
  environ_path = g_strdup_printf ("/proc/%d/environ", supervisor);
  g_assert_true (g_file_get_contents (environ_path, &environ_text, NULL, NULL));
  g_assert_null (g_strstr_len (environ_text, -1, "SANDSTEP_ODD"));
  {
    g_autofree char *again = NULL;
    script = (g_free (script), g_strdup_printf ("umask 077; LANG=C.UTF-8 '%s' run --handle=%s -- 'umask; echo $LANG'",
                                                f->helper, handle));
    again = shell_ok (f, script);
    g_assert_cmpstr (again, ==, "0022\nC.UTF-8\n");
    g_assert_cmpint (last_claimer (f, handle), ==, supervisor);
  }
  {
    /* A caller with every CPU starts a sandbox that has them all. */
    g_autofree char *other = sandstep_test_provision (f, "--holder=every-cpu", NULL);
    g_autofree char *cpus = sandstep_test_run_ok (f, other, "grep Cpus_allowed_list: /proc/self/status");
    g_autofree char *expected = g_strdup_printf ("Cpus_allowed_list:\t%s\n", system_cpus);
    g_assert_cmpstr (cpus, ==, expected);
    supervisor_cpus = (g_free (supervisor_cpus), status_field (start_supervisor (f, other), "Cpus_allowed_list"));
    g_assert_cmpstr (supervisor_cpus, ==, system_cpus);
  }
}

/* Whether this process may lower its nice value back to 0 after raising it: CAP_SYS_NICE, or an
 * RLIMIT_NICE of 20 (the limit is 20 - the lowest nice allowed). */
static gboolean
can_lower_nice (void)
{
  g_autofree char *caps = status_field (getpid (), "CapEff");
  struct rlimit nice_limit;

  if ((g_ascii_strtoull (caps, NULL, 16) >> 23) & 1)
    return TRUE;
  return getrlimit (RLIMIT_NICE, &nice_limit) == 0 && nice_limit.rlim_cur >= 20;
}

static void
test_own_nice (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *script = NULL;
  g_autofree char *seen = NULL;
  g_autofree char *path = NULL;
  g_autofree char *text = NULL;
  g_auto(GStrv) stat_fields = NULL;
  int supervisor;

  g_test_summary ("a supervisor and its commands run at nice 0 whatever the nice of the caller that started it "
                  "(nice 5 here)");
  if (!can_lower_nice ())
    {
      /* The supervisor runs as its caller: without these, no process of this user can undo nice 5. */
      g_test_skip ("lowering a nice value back to 0 needs CAP_SYS_NICE or an RLIMIT_NICE of 20 (limits.conf's "
                   "nice item), and this user has neither");
      return;
    }
  handle = sandstep_test_provision (f, NULL);
  script = g_strdup_printf ("exec nice -n 5 '%s' run --handle=%s -- nice", f->helper, handle);
  seen = shell_ok (f, script);
  g_assert_cmpstr (seen, ==, "0\n");
  supervisor = start_supervisor (f, handle);
  path = g_strdup_printf ("/proc/%d/stat", supervisor);
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  stat_fields = proc_stat_fields (text);
  /* Field 19 of stat, the nice value; 16 after "pid (comm)". */
  g_assert_cmpstr (stat_fields[16], ==, "0");
}

static void
test_caller_credentials_not_kept (Fixture *f, gconstpointer data)
{
  g_autofree char *data_dir = sandstep_test_host_path (f, "group-data");
  g_autofree char *secret = g_build_filename (data_dir, "secret", NULL);
  g_autofree char *mount = g_strdup_printf ("--mount=%s:/data/d", data_dir);
  g_autofree char *handle = NULL;
  g_autofree char *script = NULL;
  g_autofree char *seen = NULL;
  g_autofree char *expected = NULL;

  g_test_summary ("a sandbox's first command started by a root caller with supplementary groups, no address "
                  "randomisation, the idle scheduling policy and idle I/O priority: no command has any of them (a "
                  "group-readable file of a data mount stays unreadable), whichever of sandstep's processes started "
                  "the sandbox; the caller's one CPU (taskset) binds the sandbox as it binds the caller");
  if (geteuid () != 0)
    {
      g_test_skip ("dropping a caller's supplementary groups takes root; another user keeps its own");
      return;
    }
  g_assert_cmpint (g_mkdir_with_parents (data_dir, 0755), ==, 0);
  g_assert_true (g_file_set_contents (secret, "group-only\n", -1, NULL));
  g_assert_cmpint (chown (secret, 0, 4), ==, 0);
  g_assert_cmpint (chmod (secret, 0640), ==, 0);
  handle = sandstep_test_provision (f, mount, NULL);
  script = g_strdup_printf ("exec setpriv --groups=4 setarch -R chrt -i 0 ionice -c3 taskset -c 0 '%s' run "
                            "--handle=%s -- 'id -G; cat /proc/self/personality; chrt -p $$ | head -1 | sed "
                            "\"s/.*: //\"; ionice; grep Cpus_allowed_list /proc/self/status; cat /data/d/secret 2>&1 "
                            "| sed \"s/.*: //\"'", f->helper, handle);
  seen = shell_ok (f, script);
  expected = g_strdup_printf ("0\n00000000\nSCHED_OTHER\nnone: prio 0\nCpus_allowed_list:\t0\n"
                              "Permission denied\n");
  g_assert_cmpstr (seen, ==, expected);
}

static void
test_stdio_not_reopenable (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *input = sandstep_test_host_path (f, "input");
  g_autofree char *log = sandstep_test_host_path (f, "log");
  g_autofree char *script = NULL;
  g_autofree char *out = NULL;
  g_autofree char *input_after = NULL;
  g_autofree char *log_after = NULL;

  g_test_summary ("a command never gets a descriptor through which it could reopen a host file with more "
                  "rights: a read-only stdin file cannot be written through /proc/self/fd/0, an O_APPEND stdout "
                  "log cannot be read back through /proc/self/fd/1, a directory as stdin shows nothing; each "
                  "arrives as a pipe and the data still flows");
  start_supervisor (f, handle);
  g_assert_true (g_file_set_contents (input, "input\n", -1, NULL));
  g_assert_true (g_file_set_contents (log, "SECRET-BEFORE\n", -1, NULL));
  script = g_strdup_printf ("'%s' run --handle=%s -- 'readlink /proc/self/fd/0 | cut -c1-5; "
                            "echo pwned > /proc/self/fd/0; cat; cat /proc/self/fd/1 & sleep 0.2; kill $! 2>/dev/null; "
                            "wait $!; echo done' < '%s' >> '%s'",
                            f->helper, handle, input, log);
  g_free (shell_ok (f, script));
  g_assert_true (g_file_get_contents (input, &input_after, NULL, NULL));
  g_assert_cmpstr (input_after, ==, "input\n");
  g_assert_true (g_file_get_contents (log, &log_after, NULL, NULL));
  g_assert_true (g_str_has_prefix (log_after, "SECRET-BEFORE\npipe:\n"));
  g_assert_cmpuint (g_strrstr (log_after, "SECRET-BEFORE") - log_after, ==, 0);
  sandstep_test_assert_contains (log_after, "input\n");
  g_assert_true (g_str_has_suffix (log_after, "done\n"));

  script = (g_free (script), g_strdup_printf ("'%s' run --handle=%s -- 'ls /proc/self/fd/0/ 2>&1 | wc -l; "
                                              "wc -c; readlink /proc/self/fd/0 | cut -c1-5' < /etc",
                                              f->helper, handle));
  out = shell_ok (f, script);
  g_assert_cmpstr (out, ==, "1\n0\npipe:\n");
}

static void
test_terminal_modes_restored (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *h = handle_arg (handle);
  struct termios before, after;
  int master, slave;
  char *slave_name;
  pid_t pid;
  int status;

  g_test_summary ("the caller's terminal is given back in the modes it had: a command that puts it in raw mode "
                  "without echo leaves it as it was");
  start_supervisor (f, handle);
  master = posix_openpt (O_RDWR | O_NOCTTY | O_CLOEXEC);
  g_assert_cmpint (master, >=, 0);
  g_assert_cmpint (grantpt (master), ==, 0);
  g_assert_cmpint (unlockpt (master), ==, 0);
  slave_name = ptsname (master);
  g_assert_nonnull (slave_name);
  slave = open (slave_name, O_RDWR | O_NOCTTY | O_CLOEXEC);
  g_assert_cmpint (slave, >=, 0);
  g_assert_cmpint (tcgetattr (slave, &before), ==, 0);
  pid = fork ();
  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      const char *argv[] = { f->helper, "run", h, "--", "stty raw -echo; echo moded", NULL };
      dup2 (slave, 0);
      dup2 (slave, 1);
      dup2 (slave, 2);
      execve (f->helper, (char **) argv, f->envp);
      _exit (127);
    }
  {
    /* Drain the terminal so that nothing blocks on it. */
    char buf[256];
    struct pollfd pfd = { .fd = master, .events = POLLIN };
    while (waitpid (pid, &status, WNOHANG) == 0)
      if (poll (&pfd, 1, 50) > 0 && read (master, buf, sizeof buf) < 0)
        break;
  }
  g_assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  g_assert_cmpint (tcgetattr (slave, &after), ==, 0);
  g_assert_cmpint (after.c_lflag, ==, before.c_lflag);
  g_assert_cmpint (after.c_iflag, ==, before.c_iflag);
  g_assert_cmpint (after.c_oflag, ==, before.c_oflag);
  close (slave);
  close (master);
}

/* Starts the helper with @in, @out and @err as its stdin, stdout and stderr (as make would); its pid. */
static pid_t
spawn_with_stdio (Fixture *f, const char *const *args, int in, int out, int err)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  pid_t pid;

  g_ptr_array_add (argv, f->helper);
  for (const char *const *a = args; *a != NULL; a++)
    g_ptr_array_add (argv, (char *) *a);
  g_ptr_array_add (argv, NULL);
  pid = fork ();
  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      dup2 (in, 0);
      dup2 (out, 1);
      dup2 (err, 2);
      execve (f->helper, (char **) argv->pdata, f->envp);
      _exit (127);
    }
  return pid;
}

/* Reads @fd (nonblocking) until @needle shows up in what was read, for up to @timeout_s; what was read. */
static char *
read_until (int fd, const char *needle, double timeout_s)
{
  GString *got = g_string_new ("");
  gint64 end = g_get_monotonic_time () + (gint64) (timeout_s * G_USEC_PER_SEC);

  while (strstr (got->str, needle) == NULL && g_get_monotonic_time () < end)
    {
      struct pollfd pfd = { .fd = fd, .events = POLLIN };
      char buf[4096];
      ssize_t n;

      if (poll (&pfd, 1, 100) <= 0)
        continue;
      n = read (fd, buf, sizeof buf);
      if (n <= 0)
        break;
      g_string_append_len (got, buf, n);
    }
  return g_string_free (got, FALSE);
}

/* How a command ends while it has changed the caller's stdio. */
typedef enum { END_EXIT, END_KILLED, END_TIMEOUT, END_SUPERVISOR_DIES } Ending;

/* Sets O_NONBLOCK on the command's stdin, stdout and stderr, says so, then ends by @how. */
#define SET_NONBLOCK \
  "python3 -c 'import fcntl, os\nfor fd in (0, 1, 2): fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)'; "

static void
test_stdio_flags_restored (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *h = handle_arg (handle);
  static const struct { Ending how; const char *name; const char *tail; } endings[] = {
    { END_EXIT, "exit", "echo nonblocking; exit 3" },
    { END_KILLED, "killed", "echo nonblocking; kill -9 $$" },
    { END_TIMEOUT, "timeout", "echo nonblocking; sleep 60" },
    { END_SUPERVISOR_DIES, "supervisor-dies", "echo nonblocking; sleep 60" },
  };

  g_test_summary ("issue 30 item 6: a command that sets O_NONBLOCK on its stdin, stdout and stderr (make's pipes) "
                  "leaves the caller's descriptors as they were, whether it exits, is killed, runs past its "
                  "timeout or its supervisor dies");
  for (gsize e = 0; e < G_N_ELEMENTS (endings); e++)
    {
      g_autofree char *command = g_strconcat (SET_NONBLOCK, endings[e].tail, NULL);
      const char *args[] = { "run", h, endings[e].how == END_TIMEOUT ? "--timeout=2" : "--timeout=60", "--",
                             command, NULL };
      int in[2], out[2], err[2];
      int supervisor = start_supervisor (f, handle);
      g_autofree char *seen = NULL;
      pid_t pid;
      int status;

      g_test_message ("ending: %s", endings[e].name);
      g_assert_cmpint (pipe2 (in, O_CLOEXEC), ==, 0);
      g_assert_cmpint (pipe2 (out, O_CLOEXEC), ==, 0);
      g_assert_cmpint (pipe2 (err, O_CLOEXEC), ==, 0);
      pid = spawn_with_stdio (f, args, in[0], out[1], err[1]);
      seen = read_until (out[0], "nonblocking\n", 30);
      g_assert_nonnull (strstr (seen, "nonblocking\n"));
      if (endings[e].how == END_SUPERVISOR_DIES)
        g_assert_cmpint (kill (supervisor, SIGKILL), ==, 0);
      g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
      g_test_message ("status %d", status);
      /* The descriptors the caller holds, as make holds its pipes: each as it was, blocking. */
      g_assert_cmpint (fcntl (in[0], F_GETFL) & O_NONBLOCK, ==, 0);
      g_assert_cmpint (fcntl (out[1], F_GETFL) & O_NONBLOCK, ==, 0);
      g_assert_cmpint (fcntl (err[1], F_GETFL) & O_NONBLOCK, ==, 0);
      for (int i = 0; i < 2; i++)
        {
          close (in[i]);
          close (out[i]);
          close (err[i]);
        }
      if (endings[e].how == END_SUPERVISOR_DIES)
        for (int i = 0; i < 500 && process_alive (supervisor); i++)
          g_usleep (10 * 1000);
    }
}

static void
test_terminal_flow_restored (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *h = handle_arg (handle);
  static const Ending endings[] = { END_EXIT, END_TIMEOUT, END_SUPERVISOR_DIES };

  g_test_summary ("issue 30 item 6: a command that stops its terminal's output (tcflow TCOOFF) and makes it "
                  "O_NONBLOCK leaves the caller's terminal flowing and blocking, whether it exits, runs past its "
                  "timeout or its supervisor dies");
  for (gsize e = 0; e < G_N_ELEMENTS (endings); e++)
    {
      /* It says it runs, makes the terminal nonblocking, stops its output, and notes that it did. */
      const char *freeze = "python3 -c 'import fcntl, os, termios\n"
                           "print(\"frozen\", flush=True)\n"
                           "fcntl.fcntl(1, fcntl.F_SETFL, fcntl.fcntl(1, fcntl.F_GETFL) | os.O_NONBLOCK)\n"
                           "termios.tcflow(1, termios.TCOOFF)\n"
                           "open(\"/workspace/tcflow\", \"w\").write(\"stopped\")'";
      g_autofree char *cmd = g_strconcat (freeze, endings[e] == END_EXIT ? "" : "; sleep 60", NULL);
      const char *args[] = { "run", h, endings[e] == END_TIMEOUT ? "--timeout=2" : "--timeout=60", "--", cmd, NULL };
      g_autofree char *noted_path = g_build_filename (f->state_dir, "sandboxes", handle, "tree", "workspace", "tcflow",
                                                      NULL);
      g_autofree char *noted = NULL;
      int supervisor = start_supervisor (f, handle);
      g_autofree char *seen = NULL;
      g_autofree char *after = NULL;
      int master, slave;
      char *slave_name;
      pid_t pid;
      int status;

      g_test_message ("ending %d", (int) endings[e]);
      unlink (noted_path);
      master = posix_openpt (O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
      g_assert_cmpint (master, >=, 0);
      g_assert_cmpint (grantpt (master), ==, 0);
      g_assert_cmpint (unlockpt (master), ==, 0);
      slave_name = ptsname (master);
      g_assert_nonnull (slave_name);
      slave = open (slave_name, O_RDWR | O_NOCTTY | O_CLOEXEC);
      g_assert_cmpint (slave, >=, 0);
      pid = spawn_with_stdio (f, args, slave, slave, slave);
      seen = read_until (master, "frozen", 30);
      g_assert_nonnull (strstr (seen, "frozen"));
      /* Written whole, not only made: a supervisor killed between the two would leave the note empty. */
      for (int i = 0; i < 500; i++)
        {
          g_autofree char *so_far = NULL;
          if (g_file_get_contents (noted_path, &so_far, NULL, NULL) && strcmp (so_far, "stopped") == 0)
            break;
          g_usleep (10 * 1000);
        }
      if (endings[e] == END_SUPERVISOR_DIES)
        g_assert_cmpint (kill (supervisor, SIGKILL), ==, 0);
      /* Drain while it ends, so that nothing it writes waits on the terminal. */
      while (waitpid (pid, &status, WNOHANG) == 0)
        g_free (read_until (master, "\001", 0.05));
      g_test_message ("status %d", status);
      /* The command's tcflow worked (it ran), and the caller's terminal flows again, blocking. */
      g_assert_true (g_file_get_contents (noted_path, &noted, NULL, NULL));
      g_assert_cmpstr (noted, ==, "stopped");
      g_assert_cmpint (fcntl (slave, F_GETFL) & O_NONBLOCK, ==, 0);
      g_assert_cmpint (write (slave, "after-the-command\n", 18), ==, 18);
      after = read_until (master, "after-the-command", 3);
      g_assert_nonnull (strstr (after, "after-the-command"));
      close (slave);
      close (master);
      if (endings[e] == END_SUPERVISOR_DIES)
        for (int i = 0; i < 500 && process_alive (supervisor); i++)
          g_usleep (10 * 1000);
    }
}

static void
test_stdout_not_read_back (Fixture *f, gconstpointer data)
{
  g_autofree char *reason = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *log = NULL;
  g_autofree char *script = NULL;
  g_autofree char *stolen_path = NULL;
  g_autofree char *stolen = NULL;
  g_autofree char *logged = NULL;
  g_auto(GStrv) argv = NULL;
  g_autoptr(GError) error = NULL;
  int status = -1;

  g_test_summary ("issue 30 item 4: as a non-root caller (the jail's uid can reopen the caller's pipe), a command "
                  "that reads its stdout back through /proc/self/fd/1 while a parallel host step writes to the "
                  "same pipe (make -j | cat) gets none of those lines, and every host line arrives");
  if (getuid () == 0)
    {
      SandstepTestUser *user = sandstep_test_user_new (&reason);
      if (user == NULL)
        {
          g_test_skip (reason);
          return;
        }
      if (!sandstep_test_user_can_unshare (user, &reason))
        {
          sandstep_test_user_free (user);
          g_test_skip (reason);
          return;
        }
      sandstep_test_fixture_set_user (f, user);
    }
  handle = sandstep_test_provision (f, NULL);
  log = sandstep_test_host_path (f, "make.log");
  stolen_path = g_build_filename (f->state_dir, "sandboxes", handle, "tree", "workspace", "stolen", NULL);
  /* The host step writes 40 key lines while the command tries to read the pipe they go to; the log's
   * reader starts late, so that only the command could take them meanwhile. */
  script = g_strdup_printf ("{ (i=0; while [ $i -lt 40 ]; do echo deploy-key-$i; i=$((i+1)); sleep 0.1; done) & "
                            "'%s' run --handle=%s -- 'exec 3</proc/self/fd/1 && timeout 5 cat <&3 > /workspace/stolen "
                            "2>/workspace/stolen.err; echo command-done'; wait; } | { sleep 7; cat; } > '%s'",
                            f->helper, handle, log);
  {
    const char *sh[] = { "/bin/sh", "-c", script, NULL };
    argv = sandstep_test_fixture_argv (f, sh);
  }
  g_assert_true (g_spawn_sync (f->host_dir, argv, f->envp, G_SPAWN_DEFAULT, NULL, NULL, NULL, NULL, &status, &error));
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  g_assert_true (g_file_get_contents (log, &logged, NULL, NULL));
  g_assert_true (g_file_get_contents (stolen_path, &stolen, NULL, NULL));
  {
    g_autofree char *err_path = g_strconcat (stolen_path, ".err", NULL);
    g_autofree char *err = NULL;
    g_file_get_contents (err_path, &err, NULL, NULL);
    g_test_message ("stolen: '%s'; cat said: '%s'", stolen, err);
  }
  g_assert_null (strstr (stolen, "deploy-key"));
  for (int i = 0; i < 40; i++)
    {
      g_autofree char *line = g_strdup_printf ("deploy-key-%d\n", i);
      sandstep_test_assert_contains (logged, line);
    }
  sandstep_test_assert_contains (logged, "command-done\n");
}

/* A UDP socket on 127.0.0.1 (bound to a free port when @port is 0, else connected to @port); its port. */
static int
udp_socket (int port, int *out_fd)
{
  struct sockaddr_in address = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  socklen_t len = sizeof address;
  int fd = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

  g_assert_cmpint (fd, >=, 0);
  if (port == 0)
    {
      g_assert_cmpint (bind (fd, (struct sockaddr *) &address, sizeof address), ==, 0);
      g_assert_cmpint (getsockname (fd, (struct sockaddr *) &address, &len), ==, 0);
    }
  else
    {
      address.sin_port = htons (port);
      g_assert_cmpint (connect (fd, (struct sockaddr *) &address, sizeof address), ==, 0);
    }
  *out_fd = fd;
  return ntohs (address.sin_port);
}

static void
test_datagram_stdio_relayed (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, "--network=none", NULL);
  g_autofree char *h = handle_arg (handle);
  g_autofree char *command = NULL;
  g_autofree char *got = NULL;
  g_autofree char *noted_path = g_build_filename (f->state_dir, "sandboxes", handle, "tree", "workspace", "sent", NULL);
  g_autofree char *noted = NULL;
  int wanted, target, given;
  int wanted_port = udp_socket (0, &wanted);
  int target_port = udp_socket (0, &target);
  pid_t pid;
  int status;
  char buf[256];

  g_test_summary ("issue 30 item 9: a UDP socket given as a network=none command's stdin and stdout is relayed: "
                  "the command cannot send a datagram through it to the host's loopback, and its output still "
                  "reaches the socket's peer");
  udp_socket (wanted_port, &given);
  command = g_strdup_printf ("python3 -c 'import socket\n"
                             "for fd in (0, 1):\n"
                             "  try:\n"
                             "    socket.socket(fileno=fd).sendto(b\"exfiltrated\", (\"127.0.0.1\", %d)); r = \"sent\"\n"
                             "  except OSError as e:\n"
                             "    r = e.strerror\n"
                             "  open(\"/workspace/sent\", \"a\").write(\"%%d: %%s\\n\" %% (fd, r))'; "
                             "echo output-line",
                             target_port);
  {
    const char *args[] = { "run", h, "--", command, NULL };
    pid = spawn_with_stdio (f, args, given, given, 2);
  }
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_assert_true (g_file_get_contents (noted_path, &noted, NULL, NULL));
  g_test_message ("status %d; inside: %s", status, noted);
  g_assert_null (strstr (noted, "sent"));
  /* Nothing at the target; the output at the peer. */
  g_assert_cmpint (recv (target, buf, sizeof buf, MSG_DONTWAIT), ==, -1);
  g_assert_cmpint (errno, ==, EAGAIN);
  {
    struct pollfd pfd = { .fd = wanted, .events = POLLIN };
    ssize_t n;
    g_assert_cmpint (poll (&pfd, 1, 5000), ==, 1);
    n = recv (wanted, buf, sizeof buf - 1, 0);
    g_assert_cmpint (n, >, 0);
    buf[n] = '\0';
    got = g_strdup (buf);
  }
  g_assert_cmpstr (got, ==, "output-line\n");
  close (wanted);
  close (target);
  close (given);
}

static void
test_merged_streams_keep_order (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *script = g_strdup_printf ("'%s' run --handle=%s -- 'for i in 1 2 3 4 5 6 7 8; do echo out$i; "
                                             "echo err$i >&2; done' 2>&1 | cat",
                                             f->helper, handle);
  g_autofree char *out = NULL;

  g_test_summary ("stdout and stderr that are one pipe (2>&1 | cat) are relayed as one, so the command's lines "
                  "keep their order");
  out = shell_ok (f, script);
  g_assert_cmpstr (out, ==, "out1\nerr1\nout2\nerr2\nout3\nerr3\nout4\nerr4\nout5\nerr5\nout6\nerr6\nout7\nerr7\n"
                            "out8\nerr8\n");
}

static void
test_host_inodes_untouchable (Fixture *f, gconstpointer data)
{
  g_autofree char *docs = sandstep_test_host_path (f, "docs");
  g_autofree char *mount = g_strdup_printf ("--mount=%s:/data/docs", docs);
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *marker = sandstep_test_unique_seconds (300);
  g_autofree char *command = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  const char *marker_argv[] = { "sleep", marker, NULL };
  SandstepTestProc *proc;
  struct stat null_before, null_after, docs_before, docs_after;

  g_test_summary ("the sandbox's uid 0 can change no host inode it sees: chmod, chown and writes of device nodes, "
                  "/usr, /etc binds and data mounts fail and the host's inodes keep their modes; as root, the "
                  "command's processes are, on the host, the sandbox's own uid (never root, never the caller), so "
                  "what the kernel counts per user counts against it");
  g_assert_cmpint (mkdir (docs, 0755), ==, 0);
  handle = sandstep_test_provision (f, mount, NULL);
  h = handle_arg (handle);
  g_assert_cmpint (stat ("/dev/null", &null_before), ==, 0);
  g_assert_cmpint (stat (docs, &docs_before), ==, 0);
  r = sandstep_test_helper (f, "run", h, "--",
                            "for p in /dev/null /dev/zero /usr/bin /etc/ssl/certs /data/docs; do "
                            "chmod 777 $p 2>/dev/null && echo chmod-ok $p; chown 0:0 $p 2>/dev/null && [ -n \"$(ls -ld $p | grep -v ' root root ')\" ] && echo chown-ok $p; "
                            "touch $p/x 2>/dev/null && echo touch-ok $p; done; echo end", NULL);
  sandstep_test_assert_status (r, 0);
  g_assert_cmpstr (r->out, ==, "end\n");
  g_assert_cmpint (stat ("/dev/null", &null_after), ==, 0);
  g_assert_cmpint (stat (docs, &docs_after), ==, 0);
  g_assert_cmpint (null_after.st_mode, ==, null_before.st_mode);
  g_assert_cmpint (docs_after.st_mode, ==, docs_before.st_mode);
  g_assert_cmpint (docs_after.st_uid, ==, docs_before.st_uid);

  command = g_strdup_printf ("sleep %s", marker);
  proc = sandstep_test_spawn (f, "run", h, "--", command, NULL);
  g_assert_true (sandstep_test_wait_for_process (marker_argv, TRUE, 5));
  {
    g_autoptr(GArray) pids = sandstep_test_find_processes (marker_argv);
    g_autofree char *uids = NULL;
    g_auto(GStrv) fields = NULL;
    g_assert_cmpuint (pids->len, ==, 1);
    uids = status_field (g_array_index (pids, GPid, 0), "Uid");
    fields = g_strsplit (uids, "\t", -1);
    if (getuid () == 0)
      {
        g_assert_cmpstr (fields[0], !=, "0");
        g_assert_cmpstr (fields[0], ==, fields[1]);
        g_assert_cmpstr (fields[0], ==, fields[2]);
      }
    else
      g_assert_cmpint (g_ascii_strtoll (fields[0], NULL, 10), ==, getuid ());
  }
  sandstep_test_proc_kill (proc, SIGTERM);
  g_clear_pointer (&r, sandstep_test_result_free);
  r = sandstep_test_proc_wait (proc, 5);
}

static void
test_submounts_read_only (Fixture *f, gconstpointer data)
{
  g_autofree char *docs = sandstep_test_host_path (f, "docs");
  g_autofree char *sub = g_build_filename (docs, "sub", NULL);
  g_autofree char *mount_arg = g_strdup_printf ("--mount=%s:/data/docs", docs);
  g_autofree char *handle = NULL;
  g_autofree char *out = NULL;

  g_test_summary ("every bind is read-only down its whole subtree: a file system the host has mounted below a "
                  "data mount (writable by anyone) is read-only inside too (EROFS)");
  if (getuid () != 0)
    {
      g_test_skip ("needs root: the case mounts a tmpfs on the host below the data mount");
      return;
    }
  g_assert_cmpint (g_mkdir_with_parents (sub, 0777), ==, 0);
  g_assert_cmpint (mount ("tmpfs", sub, "tmpfs", 0, "mode=0777,size=1m"), ==, 0);
  handle = sandstep_test_provision (f, mount_arg, NULL);
  out = sandstep_test_run_ok (f, handle, "touch /data/docs/sub/x 2>&1 | grep -c 'Read-only file system'; "
                                         "grep ' /data/docs/sub ' /proc/self/mountinfo | grep -c ' ro,'");
  g_assert_cmpint (umount2 (sub, MNT_DETACH), ==, 0);
  g_assert_cmpstr (out, ==, "1\n1\n");
}

static void
test_mountinfo_names_little (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, "--network=allow", "--allow=example.com", NULL);
  g_autofree char *mountinfo = NULL;
  g_auto(GStrv) lines = NULL;
  guint naming_state = 0;

  g_test_summary ("/proc/self/mountinfo inside names nothing of the state directory but the sandbox's own two "
                  "trees (workspace and tmp: a bind shows its path in its file system, which no mount API hides): "
                  "no copy of /etc, no proxy directory, no other sandbox; /proc/self/uid_map shows one id");
  mountinfo = sandstep_test_run_ok (f, handle, "cat /proc/self/mountinfo; cat /proc/self/uid_map");
  lines = g_strsplit (mountinfo, "\n", -1);
  for (char **l = lines; *l; l++)
    if (strstr (*l, f->state_dir) != NULL)
      {
        naming_state++;
        g_assert_true (strstr (*l, " /workspace ") != NULL || strstr (*l, " /tmp ") != NULL);
      }
  g_assert_cmpuint (naming_state, ==, 2);
  sandstep_test_assert_not_contains (mountinfo, "/etc ");
  sandstep_test_assert_not_contains (mountinfo, "proxy");
}

static void
test_stable_over_many (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *h = handle_arg (handle);
  g_autofree char *rss_before = NULL;
  g_autofree char *rss_after = NULL;
  guint fds_before, fds_after;
  int supervisor;

  g_test_summary ("1,000 commands on one sandbox leave its supervisor's fd count and resident memory as they "
                  "were after the first hundred");
  supervisor = start_supervisor (f, handle);
  for (int i = 0; i < 100; i++)
    {
      g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "run", h, "--", "true", NULL);
      sandstep_test_assert_status (r, 0);
    }
  fds_before = count_fds (supervisor);
  rss_before = status_field (supervisor, "VmRSS");
  for (int i = 0; i < 1000; i++)
    {
      g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "run", h, "--", "true", NULL);
      sandstep_test_assert_status (r, 0);
    }
  fds_after = count_fds (supervisor);
  rss_after = status_field (supervisor, "VmRSS");
  g_test_message ("supervisor after 100 commands: %u fds, %s; after 1,100: %u fds, %s", fds_before, rss_before,
                  fds_after, rss_after);
  g_assert_cmpint (last_claimer (f, handle), ==, supervisor);
  g_assert_cmpuint (fds_after, ==, fds_before);
  g_assert_cmpstr (rss_after, ==, rss_before);
}

/* How many of @pid's fds are inotify instances. */
static guint
count_inotify_fds (int pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/fd", pid);
  g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
  const char *name;
  guint n = 0;

  g_assert_nonnull (dir);
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *fd_path = g_build_filename (path, name, NULL);
      g_autofree char *target = g_file_read_link (fd_path, NULL);
      n += target != NULL && strcmp (target, "anon_inode:inotify") == 0;
    }
  return n;
}

#define MANY_LIVE 20

static void
test_no_host_wide_per_sandbox (Fixture *f, gconstpointer data)
{
  guint caller_fds = count_fds_now (getpid ());
  guint first_fds = 0;
  int probe;

  g_test_summary ("20 live sandboxes hold no inotify instance (counted per user, host-wide: 128 by default), "
                  "each supervisor as many fds as the first, and their caller no fd at all (issue 33)");
  for (int i = 0; i < MANY_LIVE; i++)
    {
      g_autofree char *holder = g_strdup_printf ("--holder=many-%d", i);
      g_autofree char *handle = sandstep_test_provision (f, holder, NULL);
      int supervisor = start_supervisor (f, handle);
      guint fds = count_fds (supervisor);

      g_assert_cmpuint (count_inotify_fds (supervisor), ==, 0);
      if (i == 0)
        first_fds = fds;
      g_assert_cmpuint (fds, ==, first_fds);
    }
  g_assert_cmpuint (count_fds_now (getpid ()), ==, caller_fds);
  /* And the calling user can still make one. */
  probe = inotify_init1 (IN_CLOEXEC);
  g_assert_cmpint (probe, >=, 0);
  close (probe);
}

/* What issue 33 asks of one host: this many sandboxes live at once. */
#define HOST_LIVE 300

/* Whether this process can still make an inotify instance and open a file: what a host-wide use per sandbox took
 * from every process of its user before (issue 33). */
static void
assert_host_not_used_up (void)
{
  int probe = inotify_init1 (IN_CLOEXEC);
  int file = open ("/dev/null", O_RDONLY | O_CLOEXEC);

  g_assert_cmpint (probe, >=, 0);
  g_assert_cmpint (file, >=, 0);
  close (probe);
  close (file);
}

static void
test_host_live (Fixture *f, gconstpointer data)
{
  g_autoptr(GPtrArray) handles = g_ptr_array_new_with_free_func (g_free);

  g_test_summary ("300 sandboxes live at once, each having run a command: their caller can still make inotify "
                  "instances and open files while they live, and every one answers its next command (issue 33)");
  for (int i = 0; i < HOST_LIVE; i++)
    {
      g_autofree char *holder = g_strdup_printf ("--holder=host-live-%d", i);
      g_autofree char *handle = sandstep_test_provision (f, holder, NULL);
      g_autofree char *command = g_strdup_printf ("echo %d", i);
      g_autofree char *expected = g_strdup_printf ("%d\n", i);
      g_autofree char *out = sandstep_test_run_ok (f, handle, command);

      g_assert_cmpstr (out, ==, expected);
      g_ptr_array_add (handles, g_steal_pointer (&handle));
      if (i % 50 == 49)
        assert_host_not_used_up ();
    }
  for (guint i = 0; i < handles->len; i++)
    {
      g_autofree char *out = sandstep_test_run_ok (f, handles->pdata[i], "echo again");
      g_assert_cmpstr (out, ==, "again\n");
    }
  assert_host_not_used_up ();
}

/* A wrapper of the front that traces its connects and execs (without -f: the supervisor it may start lives on)
 * into @trace; NULL where strace is not installed. */
static char *
traced_front (Fixture *f, const char *trace)
{
  g_autofree char *strace = g_find_program_in_path ("strace");
  g_autofree char *wrapper = NULL, *script = NULL;
  g_autoptr(GError) error = NULL;

  if (strace == NULL)
    return NULL;
  wrapper = sandstep_test_host_path (f, "traced-front");
  script = g_strdup_printf ("#!/bin/sh\nexec '%s' -qq -e trace=connect,execve -o '%s' '%s' \"$@\"\n", strace, trace,
                            f->helper);
  g_file_set_contents_full (wrapper, script, -1, G_FILE_SET_CONTENTS_NONE, 0755, &error);
  g_assert_no_error (error);
  return g_steal_pointer (&wrapper);
}

/* From a traced_front() log: did the front exec the core, and how many connects to a supervisor came before
 * and after that exec (the front execs the core in place, so those before it are the front's). */
static gboolean
read_front_trace (const char *trace, guint *out_front_connects, guint *out_core_connects)
{
  g_autofree char *log = NULL;
  g_auto(GStrv) lines = NULL;
  gboolean exec_seen = FALSE;

  *out_front_connects = *out_core_connects = 0;
  g_assert_true (g_file_get_contents (trace, &log, NULL, NULL));
  g_test_message ("%s", log);
  lines = g_strsplit (log, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      if (strstr (lines[i], "execve(") != NULL && strstr (lines[i], "sandstep-core") != NULL &&
          strstr (lines[i], "= 0") != NULL)
        exec_seen = TRUE;
      else if (strstr (lines[i], "connect(") != NULL && strstr (lines[i], SANDSTEP_RUN_SOCKET) != NULL)
        (*(exec_seen ? out_core_connects : out_front_connects))++;
    }
  return exec_seen;
}

static void
test_retry_clean_to_helper (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, "--retry=clean", NULL);
  g_autofree char *h = g_strconcat ("--handle=", handle, NULL);
  g_autofree char *step = g_strdup_printf ("--step=%d:1", (int) getpid ());
  g_autofree char *ends = g_strdup_printf ("%d:1", (int) getpid ());
  g_autofree char *trace = sandstep_test_host_path (f, "front.strace");
  g_autofree char *wrapper = traced_front (f, trace);
  g_autofree char *helper = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  guint front_connects, core_connects;

  g_test_summary ("a retry-safe sandbox's make recipe line goes from the front straight to the helper, which keeps "
                  "the target's checkpoint, never first to the supervisor to be sent back (issue 31)");
  if (wrapper == NULL)
    {
      g_test_skip ("strace is not installed: this case reads which process connects to the supervisor");
      return;
    }
  /* The supervisor runs, as for a recipe's later lines, so that a front that asked it would connect. */
  g_assert_cmpint (start_supervisor (f, handle), >, 0);
  helper = f->helper;
  f->helper = g_strdup (wrapper);
  sandstep_test_fixture_setenv (f, "SANDSTEP_STEP_ENDS", ends);
  r = sandstep_test_helper (f, "run", h, step, "--", "echo line", NULL);
  sandstep_test_fixture_setenv (f, "SANDSTEP_STEP_ENDS", NULL);
  g_free (f->helper);
  f->helper = g_steal_pointer (&helper);
  sandstep_test_assert_status (r, 0);
  g_assert_cmpstr (r->out, ==, "line\n");
  g_assert_true (read_front_trace (trace, &front_connects, &core_connects));
  g_assert_cmpuint (front_connects, ==, 0);
  g_assert_cmpuint (core_connects, >=, 1);
}

/* `sandstep run ARGS...` started through traced_front(). */
static SandstepTestProc *
spawn_traced (Fixture *f, const char *wrapper, const char *const *args)
{
  char *helper = f->helper;
  SandstepTestProc *proc;

  f->helper = (char *) wrapper;
  proc = sandstep_test_spawn_full (f, args, NULL, NULL, 0);
  f->helper = helper;
  return proc;
}

static void
test_busy_waits_in_supervisor (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *h = handle_arg (handle);
  g_autofree char *trace = sandstep_test_host_path (f, "waiting.strace");
  g_autofree char *wrapper = traced_front (f, trace);
  g_autofree char *marker = sandstep_test_unique_seconds (100);
  g_autofree char *command = g_strdup_printf ("sleep %s", marker);
  g_autofree char *waiting = g_strdup_printf ("sandstep run: sandbox '%s' is held by 'first/holder'; waiting up to "
                                              "600s", handle);
  g_autofree char *line = NULL;
  const char *marker_argv[] = { "sleep", marker, NULL };
  guint front_connects, core_connects;
  int supervisor;

  g_test_summary ("a run that finds the sandbox busy with another holder's command waits in the supervisor, told "
                  "so in the helper's words, and runs there when the sandbox is free: it is never sent to the "
                  "helper only to come back (issue 31); a wait that runs out says who held the sandbox (exit 75), "
                  "and a waiting caller that is killed runs nothing");
  if (wrapper == NULL)
    {
      g_test_skip ("strace is not installed: this case reads whether the front execs the helper");
      return;
    }
  supervisor = start_supervisor (f, handle);

  /* Waits, then runs in turn. */
  {
    const char *args[] = { "run", h, "--holder=second/holder", "--", "echo second", NULL };
    SandstepTestProc *first = sandstep_test_spawn (f, "run", h, "--holder=first/holder", "--", command, NULL);
    SandstepTestProc *second;
    g_autoptr(SandstepTestResult) first_r = NULL, second_r = NULL;

    g_assert_true (sandstep_test_wait_for_process (marker_argv, TRUE, 10));
    second = spawn_traced (f, wrapper, args);
    line = sandstep_test_proc_read_err_line (second, 30);
    g_assert_cmpstr (line, ==, waiting);
    g_assert_true (sandstep_test_proc_running (second));
    /* The first command ends (its caller goes): the second's turn. */
    sandstep_test_proc_kill (first, SIGTERM);
    first_r = sandstep_test_proc_wait (first, 10);
    second_r = sandstep_test_proc_wait (second, 30);
    sandstep_test_assert_status (second_r, 0);
    g_assert_cmpstr (second_r->out, ==, "second\n");
    g_assert_false (read_front_trace (trace, &front_connects, &core_connects));
    g_assert_cmpuint (front_connects, ==, 1);
    g_assert_true (sandstep_test_wait_for_process (marker_argv, FALSE, 10));
  }

  /* A wait that runs out. */
  {
    g_autofree char *expected = g_strdup_printf (
      "sandstep run: sandbox '%s' is held by 'first/holder'; waiting up to 0.3s\n"
      "sandstep run: Sandbox '%s' is still held by 'first/holder' after waiting 0.3s; raise --wait or provision one "
      "sandbox per step\n", handle, handle);
    const char *args[] = { "run", h, "--holder=third/holder", "--wait=0.3", "--", "echo third", NULL };
    SandstepTestProc *first = sandstep_test_spawn (f, "run", h, "--holder=first/holder", "--", command, NULL);
    g_autoptr(SandstepTestResult) third = NULL, first_r = NULL;

    g_assert_true (sandstep_test_wait_for_process (marker_argv, TRUE, 10));
    third = sandstep_test_proc_wait (spawn_traced (f, wrapper, args), 30);
    sandstep_test_assert_status (third, EXIT_BUSY);
    g_assert_cmpstr (third->err, ==, expected);
    g_assert_cmpstr (third->out, ==, "");
    g_assert_false (read_front_trace (trace, &front_connects, &core_connects));

    /* A waiting caller killed (as make kills its recipes on ^C) leaves the queue, and its command never runs. */
    {
      SandstepTestProc *fourth = sandstep_test_spawn (f, "run", h, "--holder=fourth/holder", "--",
                                                      "echo ran > /workspace/fourth", NULL);
      g_autoptr(SandstepTestResult) fourth_r = NULL;
      g_autofree char *out = NULL;

      g_free (line);
      line = sandstep_test_proc_read_err_line (fourth, 30);
      sandstep_test_assert_contains (line, "waiting up to 600s");
      sandstep_test_proc_kill (fourth, SIGKILL);
      fourth_r = sandstep_test_proc_wait (fourth, 10);
      sandstep_test_proc_kill (first, SIGTERM);
      first_r = sandstep_test_proc_wait (first, 10);
      g_assert_true (sandstep_test_wait_for_process (marker_argv, FALSE, 10));
      out = sandstep_test_run_ok (f, handle, "test -e /workspace/fourth && echo ran || echo not run");
      g_assert_cmpstr (out, ==, "not run\n");
    }
  }
  g_assert_true (process_alive (supervisor));
}

static void
test_recipe_hold_waits_in_supervisor (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *h = handle_arg (handle);
  g_autofree char *trace = sandstep_test_host_path (f, "recipe.strace");
  g_autofree char *wrapper = traced_front (f, trace);
  g_autofree char *first_step = g_strdup_printf ("--step=%d:1", (int) getpid ());
  g_autofree char *last_step = g_strdup_printf ("--step=%d:2", (int) getpid ());
  g_autofree char *ends = g_strdup_printf ("%d:2", (int) getpid ());
  g_autofree char *other_step = g_strdup_printf ("--step=%d:5", (int) getpid ());
  g_autofree char *other_ends = g_strdup_printf ("%d:5", (int) getpid ());
  g_autofree char *waiting = g_strdup_printf ("sandstep run: sandbox '%s' is held by 'dag/run/first'; waiting up to "
                                              "600s", handle);
  g_autofree char *line = NULL;
  const char *sleeper[] = { "/bin/sleep", "120", NULL };
  const char *args[] = { "run", h, "--holder=dag/run/other", other_step, "--", "echo other", NULL };
  g_auto(GStrv) envp = g_environ_setenv (g_get_environ (), "SANDSTEP_STEP_ENDS", ends, TRUE);
  g_autoptr(SandstepTestResult) first = NULL, last = NULL, other_r = NULL;
  g_autoptr(GError) error = NULL;
  SandstepTestProc *other;
  guint front_connects, core_connects;
  GPid recipe = 0;

  g_test_summary ("a make recipe's line that finds the sandbox held by another recipe between its lines waits in "
                  "the supervisor, told so in the helper's words; the holding recipe's last line still goes first, "
                  "and then the waiting line runs there (issue 31)");
  if (wrapper == NULL)
    {
      g_test_skip ("strace is not installed: this case reads whether the front execs the helper");
      return;
    }
  start_supervisor (f, handle);
  /* This test is the recipes' "make": a child of it that carries the first recipe's SANDSTEP_STEP_ENDS keeps
   * that recipe running between its lines. */
  g_spawn_async (NULL, (char **) sleeper, envp, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &recipe, &error);
  g_assert_no_error (error);
  sandstep_test_fixture_setenv (f, "SANDSTEP_STEP_ENDS", ends);
  first = sandstep_test_helper (f, "run", h, "--holder=dag/run/first", first_step, "--", "echo first", NULL);
  sandstep_test_assert_status (first, 0);

  sandstep_test_fixture_setenv (f, "SANDSTEP_STEP_ENDS", other_ends);
  other = spawn_traced (f, wrapper, args);
  line = sandstep_test_proc_read_err_line (other, 30);
  g_assert_cmpstr (line, ==, waiting);
  g_assert_true (sandstep_test_proc_running (other));

  sandstep_test_fixture_setenv (f, "SANDSTEP_STEP_ENDS", ends);
  last = sandstep_test_helper (f, "run", h, "--holder=dag/run/first", last_step, "--", "echo last", NULL);
  sandstep_test_fixture_setenv (f, "SANDSTEP_STEP_ENDS", NULL);
  sandstep_test_assert_status (last, 0);
  g_assert_cmpstr (last->out, ==, "last\n");

  other_r = sandstep_test_proc_wait (other, 30);
  sandstep_test_assert_status (other_r, 0);
  g_assert_cmpstr (other_r->out, ==, "other\n");
  g_assert_false (read_front_trace (trace, &front_connects, &core_connects));
  g_assert_cmpuint (front_connects, ==, 1);
  kill (recipe, SIGKILL);
  waitpid (recipe, NULL, 0);
  g_spawn_close_pid (recipe);
}

static void
test_claim_held_waits_in_supervisor (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *h = handle_arg (handle);
  g_autofree char *claim = sandbox_file (f, handle, "claim");
  g_autofree char *trace = sandstep_test_host_path (f, "claimed.strace");
  g_autofree char *wrapper = traced_front (f, trace);
  g_autofree char *named = g_strdup_printf ("{\"holder\":\"dag/run/exporter\",\"pid\":%d,\"start\":0}", (int) getpid ());
  g_autofree char *waiting = g_strdup_printf ("sandstep run: sandbox '%s' is held by 'dag/run/exporter'; waiting up "
                                              "to 600s", handle);
  g_autofree char *over = g_strdup_printf (
    "sandstep run: sandbox '%s' is held by 'dag/run/exporter'; waiting up to 0.2s\n"
    "sandstep run: Sandbox '%s' is still held by 'dag/run/exporter' after waiting 0.2s; raise --wait or provision "
    "one sandbox per step\n", handle, handle);
  g_autofree char *line = NULL;
  const char *args[] = { "run", h, "--holder=dag/run/other", "--", "echo other", NULL };
  const char *short_args[] = { "run", h, "--holder=dag/run/short", "--wait=0.2", "--", "echo short", NULL };
  g_autoptr(SandstepTestResult) other_r = NULL, short_r = NULL;
  SandstepTestProc *other;
  guint front_connects, core_connects;
  int fd;

  g_test_summary ("a run that finds the sandbox claimed by another process (the helper, for an export or a tool "
                  "call) waits in the supervisor, told who holds it in the helper's words, and runs there once the "
                  "claim is let go; a wait that runs out says who still holds it (exit 75), word for word as the "
                  "helper says it (issue 31)");
  if (wrapper == NULL)
    {
      g_test_skip ("strace is not installed: this case reads whether the front execs the helper");
      return;
    }
  start_supervisor (f, handle);
  /* This test claims the sandbox as the helper does: the lock, then its name. */
  fd = open (claim, O_RDWR | O_CLOEXEC);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (flock (fd, LOCK_EX | LOCK_NB), ==, 0);
  g_assert_cmpint (pwrite (fd, named, strlen (named), 0), ==, (ssize_t) strlen (named));
  g_assert_cmpint (ftruncate (fd, strlen (named)), ==, 0);

  short_r = sandstep_test_proc_wait (spawn_traced (f, wrapper, short_args), 30);
  sandstep_test_assert_status (short_r, EXIT_BUSY);
  g_assert_cmpstr (short_r->err, ==, over);
  g_assert_false (read_front_trace (trace, &front_connects, &core_connects));

  other = spawn_traced (f, wrapper, args);
  line = sandstep_test_proc_read_err_line (other, 30);
  g_assert_cmpstr (line, ==, waiting);
  g_assert_true (sandstep_test_proc_running (other));
  close (fd);
  other_r = sandstep_test_proc_wait (other, 30);
  sandstep_test_assert_status (other_r, 0);
  g_assert_cmpstr (other_r->out, ==, "other\n");
  g_assert_false (read_front_trace (trace, &front_connects, &core_connects));
  g_assert_cmpuint (front_connects, ==, 1);
}

static void
test_waiting_past_idle (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *h = handle_arg (handle);
  g_autofree char *claim = sandbox_file (f, handle, "claim");
  g_autofree char *named = g_strdup_printf ("{\"holder\":\"dag/run/exporter\",\"pid\":%d,\"start\":0}", (int) getpid ());
  g_autoptr(SandstepTestResult) r = NULL;
  g_autofree char *line = NULL;
  SandstepTestProc *waiting;
  gint64 idle_at;
  double before, after;
  int supervisor, fd;

  g_test_summary ("a supervisor with a caller waiting stays up past its idle time, asleep (it used a whole CPU there "
                  "before: its idle deadline, passed, woke it at once, again and again), and serves the caller when "
                  "the sandbox is free");
  supervisor = start_supervisor (f, handle);
  idle_at = g_get_monotonic_time () + SANDSTEP_SUPERVISOR_IDLE_S * G_USEC_PER_SEC;
  fd = open (claim, O_RDWR | O_CLOEXEC);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (flock (fd, LOCK_EX | LOCK_NB), ==, 0);
  g_assert_cmpint (pwrite (fd, named, strlen (named), 0), ==, (ssize_t) strlen (named));
  g_assert_cmpint (ftruncate (fd, strlen (named)), ==, 0);
  waiting = sandstep_test_spawn (f, "run", h, "--holder=dag/run/waiting", "--wait=120", "--", "echo served", NULL);
  line = sandstep_test_proc_read_err_line (waiting, 30);
  sandstep_test_assert_contains (line, "is held by 'dag/run/exporter'; waiting up to 120s");
  /* Past the idle time, 3 s of the supervisor's CPU. */
  while (g_get_monotonic_time () < idle_at + G_USEC_PER_SEC)
    g_usleep (100 * 1000);
  before = sandstep_test_cpu_seconds (supervisor);
  g_usleep (3 * G_USEC_PER_SEC);
  after = sandstep_test_cpu_seconds (supervisor);
  g_test_message ("the supervisor used %.2f s of CPU in 3 s past its idle time", after - before);
  g_assert_cmpfloat (after - before, <, 1.0);
  g_assert_true (process_alive (supervisor));
  close (fd);
  r = sandstep_test_proc_wait (waiting, 30);
  sandstep_test_assert_status (r, 0);
  g_assert_cmpstr (r->out, ==, "served\n");
}

static void
test_kept_past_idle (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *keep = NULL;
  int supervisor, fd;

  g_test_summary ("a shared lock on the sandbox's keep file (a watch of a layered sandbox's files) keeps its "
                  "supervisor, and its jail, past the idle time; once the lock goes, it ends idle within seconds");
  sandstep_test_fixture_setenv (f, "SANDSTEP_TEST_SUPERVISOR_IDLE_S", "1");
  handle = sandstep_test_provision (f, NULL);
  keep = sandbox_file (f, handle, SANDSTEP_SUPERVISOR_KEEP_FILE);
  /* Kept from before the supervisor starts: on a slow host its first idle second may pass before the test looks. */
  fd = open (keep, O_RDONLY | O_CREAT | O_CLOEXEC, 0600);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (flock (fd, LOCK_SH), ==, 0);
  supervisor = start_supervisor (f, handle);
  g_usleep (4 * G_USEC_PER_SEC);
  g_assert_true (process_alive (supervisor));
  close (fd);
  for (int i = 0; i < 1000 && process_alive (supervisor); i++)
    g_usleep (10 * 1000);
  g_assert_false (process_alive (supervisor));
}

/* `sandstep provision --memory=64M` for the fixture's user: one line on stderr where no cgroup holds the sandbox,
 * none where one does; and where none does, what a command meets past the limit in one process. */
static void
check_memory_notice (Fixture *f, const char *holder, gboolean expect_line)
{
  g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "provision", "--memory=64M", "--pids=200", holder, NULL);
  /* A sandbox of root's has a uid of its own, which RLIMIT_NPROC counts alone; another caller's is its own uid. */
  gboolean as_root = f->user == NULL && geteuid () == 0;
  g_autofree char *handle = NULL;

  sandstep_test_assert_status (r, 0);
  handle = g_strndup (r->out, strcspn (r->out, "\n"));
  if (!expect_line)
    g_assert_cmpstr (r->err, ==, "");
  else
    {
      g_autofree char *h = handle_arg (handle);
      g_autoptr(SandstepTestResult) big = NULL;

      g_assert_true (g_str_has_prefix (r->err, "sandstep provision: --memory=64M bounds each process of the sandbox, "
                                               "not all of them together"));
      sandstep_test_assert_contains (r->err, ": no cgroup can be made here");
      if (as_root)
        sandstep_test_assert_not_contains (r->err, "--pids");
      else
        sandstep_test_assert_contains (r->err, ", and --pids=200 counts every process of uid ");
      sandstep_test_assert_contains (r->err, "systemd-run --user --scope");
      g_assert_cmpint ((int) (strchr (r->err, '\n') - r->err), ==, (int) strlen (r->err) - 1);
      big = sandstep_test_helper (f, "run", h, "--", "dd if=/dev/zero of=/dev/null bs=100M count=1", NULL);
      g_assert_cmpint (big->status, !=, 0);
      sandstep_test_assert_contains (big->err, "memory exhausted");
    }
  /* Gone before the fixture's user changes: the teardown destroys as the user it has then. */
  {
    g_autofree char *h = handle_arg (handle);
    g_autoptr(SandstepTestResult) gone = sandstep_test_helper (f, "destroy", h, NULL);
    sandstep_test_assert_status (gone, 0);
  }
}

static void
test_memory_without_cgroup (Fixture *f, gconstpointer data)
{
  g_autofree char *reason = NULL;
  g_autoptr(SandstepTestUser) user = NULL;

  g_test_summary ("where no cgroup can hold a sandbox (a user outside any cgroup v2 subtree systemd delegates to "
                  "it), provision says in one line that --memory bounds each process, not the sandbox, that --pids "
                  "counts every process of the user's uid, and how to get a cgroup; a command past the memory limit "
                  "in one process fails; where a cgroup holds it, nothing is said (issue 32)");
  check_memory_notice (f, "--holder=memory/caller", sandstep_cgroup_kind () == SANDSTEP_CGROUP_NONE);
  /* A user that root starts is in root's cgroup, which is delegated to nobody. */
  if (geteuid () != 0 || (user = sandstep_test_user_new (&reason)) == NULL)
    return;
  sandstep_test_fixture_set_user (f, g_steal_pointer (&user));
  check_memory_notice (f, "--holder=memory/user", TRUE);
}

static void
test_inotify_share (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *limits = NULL;
  g_autofree char *made = NULL;
  g_autofree char *raised = NULL;

  g_test_summary ("a sandbox makes at most its share of its caller's inotify instances, which the kernel counts per "
                  "user host-wide: its user namespace's limits say so (issue 30 item 13)");
  limits = sandstep_test_run_ok (f, handle, "cat /proc/sys/user/max_inotify_instances /proc/sys/user/max_inotify_watches");
  g_assert_cmpstr (limits, ==, G_STRINGIFY (SANDSTEP_DEFAULT_INOTIFY_INSTANCES) "\n"
                               G_STRINGIFY (SANDSTEP_DEFAULT_INOTIFY_WATCHES) "\n");
  made = sandstep_test_run_ok (f, handle,
                               "python3 -c 'import ctypes, os\n"
                               "libc = ctypes.CDLL(None, use_errno=True)\n"
                               "n = 0\n"
                               "while n < 1000 and libc.inotify_init1(0) >= 0: n += 1\n"
                               "print(n, os.strerror(ctypes.get_errno()))'");
  g_assert_cmpstr (made, ==, G_STRINGIFY (SANDSTEP_DEFAULT_INOTIFY_INSTANCES) " Too many open files\n");
  /* Nor can a command raise its share: the capabilities that could are gone. */
  raised = sandstep_test_run_ok (f, handle, "echo 100000 2>/dev/null > /proc/sys/user/max_inotify_instances; "
                                            "echo $?; cat /proc/sys/user/max_inotify_instances");
  g_assert_cmpstr (raised, !=, "0\n100000\n");
  g_assert_true (g_str_has_suffix (raised, "\n" G_STRINGIFY (SANDSTEP_DEFAULT_INOTIFY_INSTANCES) "\n"));
}

/* A child of ours, as @uid, that holds every inotify instance the kernel lets that user have (as a busy host's
 * services may); its pid, once it holds them. */
static GPid
hold_inotify_instances (uid_t uid, gid_t gid)
{
  int ready[2];
  char byte;
  GPid pid;

  g_assert_cmpint (pipe2 (ready, O_CLOEXEC), ==, 0);
  pid = fork ();
  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      if (setgroups (0, NULL) < 0 || setresgid (gid, gid, gid) < 0 || setresuid (uid, uid, uid) < 0)
        _exit (1);
      while (inotify_init1 (IN_CLOEXEC) >= 0)
        ;
      if (write (ready[1], errno == EMFILE ? "y" : "n", 1) != 1)
        _exit (1);
      pause ();
      _exit (0);
    }
  close (ready[1]);
  g_assert_cmpint (read (ready[0], &byte, 1), ==, 1);
  close (ready[0]);
  g_assert_cmpint (byte, ==, 'y');
  return pid;
}

static void
test_user_out_of_inotify (Fixture *f, gconstpointer data)
{
  g_autofree char *reason = NULL;
  SandstepTestUser *user = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *out = NULL;
  GPid holder;

  g_test_summary ("a user who has every inotify instance the host allows it in use still runs its sandboxes' "
                  "first commands: a supervisor holds none (it aborted with 'free(): invalid pointer', issue 33)");
  user = sandstep_test_user_new (&reason);
  if (user == NULL)
    {
      g_test_skip (reason);
      return;
    }
  if (!sandstep_test_user_can_unshare (user, &reason))
    {
      sandstep_test_user_free (user);
      g_test_skip (reason);
      return;
    }
  holder = hold_inotify_instances (user->uid, user->gid);
  sandstep_test_fixture_set_user (f, user);
  handle = sandstep_test_provision (f, NULL);
  out = sandstep_test_run_ok (f, handle, "echo served");
  kill (holder, SIGKILL);
  waitpid (holder, NULL, 0);
  g_assert_cmpstr (out, ==, "served\n");
}

static const char *const damaged_lifetimes[] = { "missing", "empty", "garbage" };

static void
test_start_failure_clean (Fixture *f, gconstpointer data)
{
  g_test_summary ("a supervisor that cannot start (its sandbox's lifetime file missing or damaged) is one clear "
                  "line from run, never an abort (it was 'free(): invalid pointer', rc 134: issue 30 item 20, "
                  "issue 33)");
  for (gsize i = 0; i < G_N_ELEMENTS (damaged_lifetimes); i++)
    {
      g_autofree char *holder = g_strdup_printf ("--holder=damaged-%s", damaged_lifetimes[i]);
      g_autofree char *handle = sandstep_test_provision (f, holder, NULL);
      g_autofree char *lifetime = sandbox_file (f, handle, "lifetime");
      g_autofree char *h = handle_arg (handle);
      g_autoptr(SandstepTestResult) r = NULL;
      g_auto(GStrv) lines = NULL;

      if (i == 0)
        g_assert_cmpint (unlink (lifetime), ==, 0);
      else
        g_assert_true (g_file_set_contents (lifetime, i == 1 ? "" : "soon", -1, NULL));
      r = sandstep_test_helper (f, "run", h, "--", "echo ran", NULL);
      /* A damaged sandbox, said as every damage is (test-recovery's /recovery/damaged-lifetime/). */
      sandstep_test_assert_status (r, SANDSTEP_EXIT_INTERNAL);
      sandstep_test_assert_contains (r->err, "is damaged: its lifetime file");
      sandstep_test_assert_not_contains (r->err, "free()");
      g_assert_cmpstr (r->out, ==, "");
      lines = g_strsplit (g_strchomp (r->err), "\n", -1);
      g_assert_cmpuint (g_strv_length (lines), ==, 1);
      /* Mended, for the teardown's destroy. */
      g_assert_true (g_file_set_contents (lifetime, "9999999999 0\n", -1, NULL));
    }
}

static void
test_killed_supervisor_says_so (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *h = handle_arg (handle);
  g_autofree char *marker = sandstep_test_unique_seconds (300);
  g_autofree char *command = g_strdup_printf ("echo once >> /workspace/log; sleep %s", marker);
  const char *marker_argv[] = { "sleep", marker, NULL };
  g_autoptr(SandstepTestResult) r = NULL;
  g_autofree char *log = NULL;
  SandstepTestProc *proc;
  int supervisor = start_supervisor (f, handle);

  g_test_summary ("a command whose supervisor is killed under it ends at once with everything it started, and "
                  "its `sandstep run` exits 125 with one line saying it may or may not have run: it is not run "
                  "again");
  proc = sandstep_test_spawn (f, "run", h, "--", command, NULL);
  g_assert_true (sandstep_test_wait_for_process (marker_argv, TRUE, 5));
  g_assert_cmpint (kill (supervisor, SIGKILL), ==, 0);
  r = sandstep_test_proc_wait (proc, 10);
  sandstep_test_assert_status (r, 125);
  sandstep_test_assert_contains (r->err, "it may or may not have run, in part; it was not run again");
  g_assert_true (strchr (r->err, '\n') == r->err + strlen (r->err) - 1);
  g_assert_true (sandstep_test_wait_for_process (marker_argv, FALSE, 3));
  log = sandstep_test_run_ok (f, handle, "cat /workspace/log");
  g_assert_cmpstr (log, ==, "once\n");
}

/* ---- at most once, under fire ---- */

#define FAULT_STREAMS 8
#define FAULT_RUNS_PER_STREAM 63

typedef struct {
  Fixture *f;
  char *handle;
  int stream;
  guint ok, lost;
  GPtrArray *done;        /* tokens of runs that exited 0 */
  char *failure;
} FaultStream;

static gpointer
fault_stream (gpointer data)
{
  FaultStream *st = data;
  g_autofree char *h = handle_arg (st->handle);

  for (int i = 0; i < FAULT_RUNS_PER_STREAM && st->failure == NULL; i++)
    {
      g_autofree char *token = g_strdup_printf ("s%d-r%d", st->stream, i);
      g_autofree char *command = g_strdup_printf ("echo %s >> /workspace/log", token);
      const char *argv[] = { st->f->helper, "run", h, "--", command, NULL };
      g_autofree char *err = NULL;
      g_autoptr(GError) error = NULL;
      int wait_status = -1, status;

      /* g_spawn_sync, not the fixture's runner, whose bookkeeping is for one thread. */
      if (!g_spawn_sync (NULL, (char **) argv, st->f->envp, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, &err,
                         &wait_status, &error))
        {
          st->failure = g_strdup_printf ("run %s: %s", token, error->message);
          break;
        }
      status = WIFEXITED (wait_status) ? WEXITSTATUS (wait_status) : 128 + WTERMSIG (wait_status);
      if (status == 0)
        {
          st->ok++;
          g_ptr_array_add (st->done, g_steal_pointer (&token));
        }
      else if (status == 125 && strstr (err, "it was not run again") != NULL)
        st->lost++;
      else
        st->failure = g_strdup_printf ("run %s: status %d: %s", token, status, err);
    }
  return NULL;
}

static void
test_at_most_once_under_kills (Fixture *f, gconstpointer data)
{
  FaultStream streams[FAULT_STREAMS] = { 0 };
  GThread *threads[FAULT_STREAMS];
  guint kills = 0, init_kills = 0, ok = 0, lost = 0;
  gboolean running = TRUE;

  g_test_summary ("a command runs at most once, whatever is killed and when: 500 runs in 8 parallel streams, "
                  "one sandbox each, while one of their supervisors, or its sandbox's init, is SIGKILLed every 0-100 ms: every run that "
                  "exited 0 ran exactly once, every other said it may not have run and ran at most once, no "
                  "run failed otherwise, and once the sandboxes are destroyed no process, cgroup or state of "
                  "theirs is left");
  for (int i = 0; i < FAULT_STREAMS; i++)
    {
      g_autofree char *holder = g_strdup_printf ("--holder=stream-%d", i);
      streams[i] = (FaultStream) { .f = f, .stream = i, .done = g_ptr_array_new_with_free_func (g_free) };
      streams[i].handle = sandstep_test_provision (f, holder, NULL);
      threads[i] = g_thread_new ("stream", fault_stream, &streams[i]);
    }
  while (running)
    {
      g_usleep (g_random_int_range (0, 100) * 1000);
      running = FALSE;
      for (int i = 0; i < FAULT_STREAMS; i++)
        running = running || (streams[i].ok + streams[i].lost < FAULT_RUNS_PER_STREAM && streams[i].failure == NULL);
      {
        /* A supervisor, or the init of its sandbox (which a supervisor outlives). */
        FaultStream *victim = &streams[g_random_int_range (0, FAULT_STREAMS)];
        g_autoptr(GArray) pids = find_supervisors (victim->handle);
        /* Whichever kind has had fewer kills, so that both are shown however few rounds a loaded host allows. */
        gboolean at_init = init_kills < kills;
        for (guint k = 0; k < pids->len; k++)
          {
            int target = g_array_index (pids, GPid, k);
            if (at_init)
              {
                g_autofree char *path = g_strdup_printf ("/proc/%d/task/%d/children", target, target);
                g_autofree char *children = NULL;
                g_file_get_contents (path, &children, NULL, NULL);
                target = children != NULL ? atoi (children) : 0;
              }
            if (target > 0 && kill (target, SIGKILL) == 0)
              at_init ? init_kills++ : kills++;
          }
      }
    }
  for (int i = 0; i < FAULT_STREAMS; i++)
    g_thread_join (threads[i]);

  for (int i = 0; i < FAULT_STREAMS; i++)
    {
      FaultStream *st = &streams[i];
      g_autofree char *log = NULL;
      g_autoptr(GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
      g_auto(GStrv) lines = NULL;
      g_autofree char *h = handle_arg (st->handle);
      g_autoptr(SandstepTestResult) destroy = NULL;
      g_autofree char *cgroup = g_build_filename ("/sys/fs/cgroup/pids/sandstep", st->handle, NULL);

      if (st->failure != NULL)
        g_error ("%s", st->failure);
      ok += st->ok;
      lost += st->lost;
      log = sandstep_test_run_ok (f, st->handle, "cat /workspace/log 2>/dev/null || true");
      lines = g_strsplit (log, "\n", -1);
      for (char **l = lines; *l; l++)
        if (**l != '\0')
          {
            if (g_hash_table_contains (seen, *l))
              g_error ("%s ran twice", *l);
            g_hash_table_add (seen, g_strdup (*l));
          }
      for (guint k = 0; k < st->done->len; k++)
        g_assert_true (g_hash_table_contains (seen, st->done->pdata[k]));
      destroy = sandstep_test_helper (f, "destroy", h, NULL);
      sandstep_test_assert_status (destroy, 0);
      g_assert_cmpuint (count_supervisors (st->handle), ==, 0);
      g_assert_false (g_file_test (cgroup, G_FILE_TEST_EXISTS));
      g_ptr_array_unref (st->done);
      g_free (st->handle);
    }
  g_test_message ("%u runs: %u exited 0, %u said they may not have run; %u supervisors and %u inits killed",
                  ok + lost, ok, lost, kills, init_kills);
  g_assert_cmpuint (ok + lost, ==, FAULT_STREAMS * FAULT_RUNS_PER_STREAM);
  g_assert_cmpuint (kills, >, 0);
  g_assert_cmpuint (init_kills, >, 0);
}

/* The cgroup warm-up runs only where the host needs it: where no cgroup file system favors dynamic moves.  The
 * lines are /proc/self/mountinfo's of stock hosts (Debian 12's hybrid, a v2 host remounted with the
 * option), with decoys: the option's name in a mount point, and on a file system that is no cgroup. */
static void
test_cgroup_moves_wait (Fixture *f, gconstpointer data)
{
  static const struct { const char *mountinfo; int waits; } cases[] = {
    { "25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
      "29 25 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755\n"
      "30 29 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 "
      "rw,nsdelegate\n"
      "33 29 0:30 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,pids\n", 1 },
    { "30 29 0:27 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 "
      "rw,nsdelegate,favordynmods,memory_recursiveprot\n", 0 },
    { "33 29 0:30 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup "
      "rw,favordynmods,pids\n", 0 },
    { "40 29 0:40 / /srv/favordynmods rw,relatime shared:20 - cgroup2 cgroup2 rw,nsdelegate\n"
      "41 29 0:41 / /mnt rw,relatime shared:21 - tmpfs favordynmods rw,favordynmods\n", 1 },
    { "", 1 },
  };
  g_autofree char *path = g_build_filename (f->host_dir, "mountinfo", NULL);

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_assert_true (g_file_set_contents (path, cases[i].mountinfo, -1, NULL));
      g_test_message ("case %" G_GSIZE_FORMAT, i);
      g_assert_cmpint (sandstep_cgroup_moves_wait_in (path), ==, cases[i].waits);
    }
  g_assert_cmpint (sandstep_cgroup_moves_wait_in ("/nonexistent/mountinfo"), ==, 1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(path, func) g_test_add (path, Fixture, NULL, sandstep_test_setup, func, sandstep_test_teardown)
  ADD ("/supervisor/serves-runs", test_serves_runs);
  ADD ("/supervisor/cgroup-moves-wait", test_cgroup_moves_wait);
  ADD ("/supervisor/foreign-state-dir", test_foreign_state_dir);
  ADD ("/supervisor/first-from-kept-plan", test_first_from_kept_plan);
  ADD ("/supervisor/kept-plan-live-binds", test_kept_plan_live_binds);
  ADD ("/supervisor/first-refusals", test_first_refusals);
  ADD ("/supervisor/closed-stdin", test_closed_stdin);
  ADD ("/supervisor/front-jail-fallback", test_front_jail_fallback);
  ADD ("/supervisor/first-holds-nothing-of-caller", test_first_holds_nothing_of_caller);
  ADD ("/supervisor/timeout", test_timeout);
  ADD ("/supervisor/limits", test_limits);
  ADD ("/supervisor/refusals-match", test_refusals_match);
  ADD ("/supervisor/caller-killed", test_caller_killed);
  ADD ("/supervisor/ends-with-sandbox", test_ends_with_sandbox);
  ADD ("/supervisor/destroy-while-starting", test_destroy_while_starting);
  ADD ("/supervisor/other-user-refused", test_other_user_refused);
  ADD ("/supervisor/jail-cannot-drive", test_jail_cannot_drive);
  ADD ("/supervisor/data-mount-replaced", test_data_mount_replaced);
  ADD ("/supervisor/closed-stderr", test_closed_stderr);
  ADD ("/supervisor/live-namespaces", test_live_namespaces);
  ADD ("/supervisor/ipc-removed", test_ipc_removed);
  ADD ("/supervisor/own-process-state", test_own_process_state);
  ADD ("/supervisor/own-nice", test_own_nice);
  ADD ("/supervisor/caller-credentials-not-kept", test_caller_credentials_not_kept);
  ADD ("/supervisor/plain-words-path", test_plain_words_path);
  ADD ("/supervisor/stdio-not-reopenable", test_stdio_not_reopenable);
  ADD ("/supervisor/stdio-flags-restored", test_stdio_flags_restored);
  ADD ("/supervisor/stdout-not-read-back", test_stdout_not_read_back);
  ADD ("/supervisor/merged-streams-keep-order", test_merged_streams_keep_order);
  ADD ("/supervisor/datagram-stdio-relayed", test_datagram_stdio_relayed);
  ADD ("/supervisor/terminal-flow-restored", test_terminal_flow_restored);
  ADD ("/supervisor/terminal-modes-restored", test_terminal_modes_restored);
  ADD ("/supervisor/host-inodes-untouchable", test_host_inodes_untouchable);
  ADD ("/supervisor/submounts-read-only", test_submounts_read_only);
  ADD ("/supervisor/mountinfo-names-little", test_mountinfo_names_little);
  ADD ("/supervisor/stable-over-1000-commands", test_stable_over_many);
  ADD ("/supervisor/no-host-wide-per-sandbox", test_no_host_wide_per_sandbox);
  ADD ("/supervisor/host-live", test_host_live);
  ADD ("/supervisor/retry-clean-to-helper", test_retry_clean_to_helper);
  ADD ("/supervisor/busy-waits-in-supervisor", test_busy_waits_in_supervisor);
  ADD ("/supervisor/recipe-hold-waits-in-supervisor", test_recipe_hold_waits_in_supervisor);
  ADD ("/supervisor/claim-held-waits-in-supervisor", test_claim_held_waits_in_supervisor);
  ADD ("/supervisor/memory-without-cgroup", test_memory_without_cgroup);
  ADD ("/supervisor/waiting-past-idle", test_waiting_past_idle);
  ADD ("/supervisor/kept-past-idle", test_kept_past_idle);
  ADD ("/supervisor/inotify-share", test_inotify_share);
  ADD ("/supervisor/user-out-of-inotify", test_user_out_of_inotify);
  ADD ("/supervisor/start-failure-clean", test_start_failure_clean);
  ADD ("/supervisor/killed-supervisor-says-so", test_killed_supervisor_says_so);
  ADD ("/supervisor/at-most-once-under-kills", test_at_most_once_under_kills);
  ADD ("/supervisor/beside", test_beside);
#undef ADD
  return g_test_run ();
}
