/* test-recovery.c: what killed and failed operators leave behind, damaged
 * sandboxes, a full disk, and values that would make a sandbox unusable.
 *
 * The rule under test: a killed or failed operator leaves nothing that the
 * next successful operator or `gc` does not remove, and every sandbox,
 * however damaged, can be destroyed and is reclaimed by `gc`.  Every case
 * ends in the fixture's teardown, which fails it if anything is left.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "sandstep-cgroup.h"
#include "sandstep-test-utils.h"

typedef SandstepTestFixture Fixture;

static char *
handle_arg (const char *handle)
{
  return g_strconcat ("--handle=", handle, NULL);
}

static char *
sandbox_path (Fixture *f, const char *handle, const char *member)
{
  return g_build_filename (f->state_dir, "sandboxes", handle, member, NULL);
}

static char *
state_names (Fixture *f, const char *sub)
{
  g_autofree char *dir = g_build_filename (f->state_dir, sub, NULL);

  return sandstep_test_dir_names (dir);
}

/* Output of `sh -c COMMAND` run in @dir on the host. */
static char *
host_sh (const char *dir, const char *command)
{
  g_autofree char *out = NULL;
  g_autoptr(GError) error = NULL;
  const char *argv[] = { "/bin/sh", "-c", command, NULL };
  int status;

  g_spawn_sync (dir, (char **) argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, NULL, &status, &error);
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  return g_steal_pointer (&out);
}

/* Every entry of a tree, hidden ones too, with its size, then every file's checksum. */
#define LISTING "find . -printf '%p %y %s\\n' | LC_ALL=C sort && find . -type f -exec md5sum {} + | LC_ALL=C sort"

/* @files files of @size random bytes each under @dir (made). */
static void
make_host_tree (const char *dir, guint files, gsize size)
{
  g_autofree guint32 *data = g_new (guint32, size / 4 + 1);

  g_assert_cmpint (g_mkdir_with_parents (dir, 0755), ==, 0);
  for (guint i = 0; i < files; i++)
    {
      g_autofree char *path = g_strdup_printf ("%s/%s/file-%03u.bin", dir, i % 2 ? "odd" : "even", i);
      g_autofree char *parent = g_path_get_dirname (path);
      for (gsize k = 0; k < size / 4 + 1; k++)
        data[k] = g_random_int ();
      g_assert_cmpint (g_mkdir_with_parents (parent, 0755), ==, 0);
      sandstep_test_write_file (path, (const char *) data, size);
    }
}

/* Spawns `sandstep ARGS`, kills it with SIGKILL after @delay_us, and says whether the kill landed. */
static gboolean
spawn_and_kill (Fixture *f, const char *const *args, gulong delay_us)
{
  SandstepTestProc *proc = sandstep_test_spawn_full (f, args, NULL, NULL, 0);
  g_autoptr(SandstepTestResult) r = NULL;

  g_usleep (delay_us);
  sandstep_test_proc_kill (proc, SIGKILL);
  r = sandstep_test_proc_wait (proc, 30);
  g_assert_false (r->timed_out);
  return r->status == 128 + SIGKILL;
}

static double
time_helper (Fixture *f, const char *const *args)
{
  g_autoptr(SandstepTestResult) r = sandstep_test_helper_argv (f, args, 60);

  sandstep_test_assert_status (r, 0);
  return r->elapsed_s;
}

/* ---- kills ---- */

static void
test_put_killed_converges (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *h = handle_arg (handle);
  g_autofree char *src = sandstep_test_host_path (f, "src");
  g_autofree char *src_slash = g_strconcat (src, "/", NULL);
  const char *args[] = { "put", h, src_slash, "/workspace/dst/", NULL };
  g_autofree char *want = NULL;
  g_autofree char *got = NULL;
  g_autofree char *leftovers = NULL;
  guint killed = 0, rounds;
  double full;

  g_test_summary ("a put of a tree killed (SIGKILL) at random moments, then run again, leaves the sandbox's "
                  "copy equal to the source, hidden files and all: 43 of 48 such kills once left "
                  ".NAME.XXXXXX files that no later put removed");
  make_host_tree (src, 48, 1 << 20);
  want = host_sh (src, LISTING);
  full = time_helper (f, args);
  sandstep_test_result_free (sandstep_test_helper (f, "run", h, "--", "rm -rf /workspace/dst", NULL));
  /* Until six kills have landed mid-put; a put that finished first starts the next from nothing. */
  for (rounds = 0; killed < 6 && rounds < 60; rounds++)
    if (spawn_and_kill (f, args, (gulong) (g_random_double_range (0.02, 0.9) * full * G_USEC_PER_SEC)))
      killed++;
    else
      sandstep_test_result_free (sandstep_test_helper (f, "run", h, "--", "rm -rf /workspace/dst", NULL));
  g_test_message ("a whole put took %.3f s; %u of %u kills landed while it ran", full, killed, rounds);
  g_assert_cmpuint (killed, ==, 6);

  time_helper (f, args);
  got = sandstep_test_run_ok (f, handle, "cd /workspace/dst && " LISTING);
  g_assert_cmpstr (got, ==, want);
  leftovers = sandstep_test_run_ok (f, handle, "find / -xdev -name '.*' -newer /workspace/dst 2>/dev/null | "
                                               "grep -v '^/proc' || true");
  g_assert_cmpstr (leftovers, ==, "");
}

/* The handles whose record names @holder, from the records themselves. */
static guint
sandboxes_of_holder (Fixture *f, const char *holder, char **out_handle)
{
  g_autofree char *dir = g_build_filename (f->state_dir, "sandboxes", NULL);
  g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;
  guint n = 0;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *record = g_build_filename (dir, name, "record.json", NULL);
      g_autofree char *text = NULL;
      g_autofree char *needle = g_strdup_printf ("\"holder\" : \"%s\"", holder);
      if (name[0] == '.' || !g_file_get_contents (record, &text, NULL, NULL) || strstr (text, needle) == NULL)
        continue;
      n++;
      if (out_handle != NULL)
        {
          g_free (*out_handle);
          *out_handle = g_strdup (name);
        }
    }
  return n;
}

static void
test_provision_killed (Fixture *f, gconstpointer data)
{
  g_autoptr(GPtrArray) handles = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *sandboxes = NULL;
  g_autofree char *holders = NULL;
  guint killed = 0;
  double full;

  g_test_summary ("provisions killed (SIGKILL) at random moments, each retried by the same holder, leave one "
                  "sandbox per holder, no half-made sandbox (.new-*) and no temporary holder file; destroying "
                  "the sandboxes empties holders/: once 28 of 120 such kills left .new-* directories, 21 an "
                  "orphan sandbox beside the retry's, 19 holders/.* files, and 318 of 320 holder entries "
                  "outlived their sandboxes");
  {
    const char *args[] = { "provision", "--holder=timing", NULL };
    g_autofree char *h = NULL;
    full = time_helper (f, args);
    g_assert_cmpuint (sandboxes_of_holder (f, "timing", &h), ==, 1);
    g_ptr_array_add (handles, g_steal_pointer (&h));
  }
  for (int round = 0; round < 40; round++)
    {
      g_autofree char *holder = g_strdup_printf ("step-%02d", round);
      g_autofree char *holder_arg = g_strconcat ("--holder=", holder, NULL);
      const char *args[] = { "provision", holder_arg, NULL };
      g_autoptr(SandstepTestResult) retry = NULL;
      g_autofree char *found = NULL;

      if (spawn_and_kill (f, args, (gulong) (g_random_double_range (0.0, 1.2) * full * G_USEC_PER_SEC)))
        killed++;
      retry = sandstep_test_helper_argv (f, args, 30);
      sandstep_test_assert_status (retry, 0);
      /* Kills aim within what a provision takes now: one slow first measurement (a busy host) would put most of
       * them after the end. */
      full = MIN (full, retry->elapsed_s);
      g_strchomp (retry->out);
      g_assert_cmpuint (sandboxes_of_holder (f, holder, &found), ==, 1);
      g_assert_cmpstr (found, ==, retry->out);
      g_ptr_array_add (handles, g_strdup (retry->out));
    }
  g_test_message ("a provision took %.3f s; %u of 40 kills landed while it ran", full, killed);
  g_assert_cmpuint (killed, >=, 10);

  sandboxes = state_names (f, "sandboxes");
  g_assert_null (strstr (sandboxes, ".new-"));
  holders = state_names (f, "holders");
  g_assert_null (strstr (holders, "."));
  for (guint i = 0; i < handles->len; i++)
    {
      g_autofree char *h = handle_arg (handles->pdata[i]);
      g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "destroy", h, NULL);
      sandstep_test_assert_status (r, 0);
    }
  g_free (holders);
  holders = state_names (f, "holders");
  g_assert_cmpstr (holders, ==, "");
}

/* Directory opens of @fd's watches since the last call: an open that can list a directory (not O_PATH) of the
 * directory itself, not of an entry in it. */
static guint
directory_opens (int fd)
{
  char buf[4096] __attribute__ ((aligned (__alignof__ (struct inotify_event))));
  guint opens = 0;
  ssize_t n;

  while ((n = read (fd, buf, sizeof buf)) > 0)
    for (char *p = buf; p < buf + n; p += sizeof (struct inotify_event) + ((struct inotify_event *) p)->len)
      {
        const struct inotify_event *event = (const struct inotify_event *) p;
        if ((event->mask & IN_OPEN) && (event->mask & IN_ISDIR) && event->len == 0)
          opens++;
      }
  g_assert_true (n < 0 && errno == EAGAIN);
  return opens;
}

static void
test_provision_lists_nothing (Fixture *f, gconstpointer data)
{
  const char *const dirs[] = { "sandboxes", "holders" };
  int fd = inotify_init1 (IN_NONBLOCK | IN_CLOEXEC);

  g_test_summary ("a provision opens neither sandboxes/ nor holders/ to list them (it built each sandbox under a "
                  "hidden name in sandboxes/ and swept both of what killed provisions left, so its cost grew "
                  "with the sandboxes of the state directory: issue 33); gc still sweeps them");
  if (fd < 0 && errno == ENOSYS)
    {
      g_test_skip ("inotify_init1: this kernel has no inotify (CONFIG_INOTIFY_USER)");
      return;
    }
  g_assert_cmpint (fd, >=, 0);
  for (int i = 0; i < 3; i++)
    {
      g_autofree char *holder = g_strdup_printf ("--holder=before-%d", i);
      g_free (sandstep_test_provision (f, holder, NULL));
    }
  for (gsize i = 0; i < G_N_ELEMENTS (dirs); i++)
    {
      g_autofree char *dir = g_build_filename (f->state_dir, dirs[i], NULL);
      g_assert_cmpint (inotify_add_watch (fd, dir, IN_OPEN | IN_ONLYDIR), >=, 0);
      /* The watch sees a listing: this case cannot pass for want of events. */
      g_free (sandstep_test_dir_names (dir));
      g_assert_cmpuint (directory_opens (fd), ==, 1);
    }
  {
    g_autofree char *h = sandstep_test_provision (f, "--holder=measured", NULL);
    g_autofree char *again = sandstep_test_provision (f, "--holder=measured", NULL);
    g_assert_cmpstr (h, ==, again);
  }
  g_assert_cmpuint (directory_opens (fd), ==, 0);
  {
    g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "gc", NULL);
    sandstep_test_assert_status (r, 0);
  }
  g_assert_cmpuint (directory_opens (fd), >, 0);
  close (fd);
}

static void
test_staging_swept (Fixture *f, gconstpointer data)
{
  g_autofree char *staging = g_build_filename (f->state_dir, "staging", NULL);
  g_autofree char *half = NULL;
  g_autofree char *names = NULL;
  g_autofree char *first = sandstep_test_provision (f, "--holder=first", NULL);
  g_autofree char *second = NULL;

  g_test_summary ("what a provision killed part way leaves in staging/ (a half-made sandbox with its files, a holder "
                  "entry's temporary file) is gone after the next provision, which finds no sandbox made from it");
  half = g_build_filename (staging, "sandstep-0123456789abcdef", "tree", "workspace", NULL);
  g_assert_cmpint (g_mkdir_with_parents (half, 0700), ==, 0);
  g_free (half);
  half = g_build_filename (staging, "sandstep-0123456789abcdef", "record.json", NULL);
  sandstep_test_write_file (half, "{", -1);
  g_free (half);
  half = g_build_filename (staging, ".0123abcd.5678ef90", NULL);
  sandstep_test_write_file (half, "sandstep-0123456789abcdef\n", -1);
  second = sandstep_test_provision (f, "--holder=second", NULL);
  names = state_names (f, "staging");
  g_assert_cmpstr (names, ==, "");
  g_free (names);
  names = state_names (f, "sandboxes");
  g_assert_null (strstr (names, "sandstep-0123456789abcdef"));
  g_assert_nonnull (strstr (names, first));
  g_assert_nonnull (strstr (names, second));
}

static void
test_older_leftovers_swept (Fixture *f, gconstpointer data)
{
  g_autofree char *kept = sandstep_test_provision (f, "--holder=kept", NULL);
  g_autofree char *half = g_build_filename (f->state_dir, "sandboxes", ".new-sandstep-0123456789abcdef", "tree",
                                            NULL);
  g_autofree char *temporary = g_build_filename (f->state_dir, "holders", ".0123abcd.5678ef90", NULL);
  g_autoptr(SandstepTestResult) r = NULL;
  g_autofree char *names = NULL;

  g_test_summary ("what a provision of a build before staging/ left when killed (a half-made sandboxes/.new-* "
                  "directory, a holders/.* temporary file) is removed by gc, which keeps the live sandbox and its "
                  "holder entry");
  g_assert_cmpint (g_mkdir_with_parents (half, 0700), ==, 0);
  sandstep_test_write_file (temporary, "sandstep-0123456789abcdef\n", -1);
  r = sandstep_test_helper (f, "gc", NULL);
  sandstep_test_assert_status (r, 0);
  names = state_names (f, "sandboxes");
  g_assert_cmpstr (names, ==, kept);
  g_free (names);
  names = state_names (f, "holders");
  g_assert_cmpuint (strlen (names), ==, 64);
}

static void
test_holders_forgotten (Fixture *f, gconstpointer data)
{
  g_autofree char *a = sandstep_test_provision (f, "--holder=a", NULL);
  g_autofree char *b = sandstep_test_provision (f, "--holder=b", NULL);
  g_autofree char *c = sandstep_test_provision (f, "--holder=c", NULL);
  g_autofree char *ha = handle_arg (a);
  g_autofree char *hb = handle_arg (b);
  g_autofree char *run_arg = g_strconcat ("--run=", f->run, NULL);
  g_autofree char *holders = NULL;
  g_autoptr(SandstepTestResult) r = NULL;

  g_test_summary ("a sandbox's holder entry goes with it, whichever way it ends: destroy, release, gc --run");
  holders = state_names (f, "holders");
  g_assert_cmpuint (strlen (holders), ==, 3 * 64 + 2);
  r = sandstep_test_helper (f, "destroy", ha, NULL);
  sandstep_test_assert_status (r, 0);
  g_clear_pointer (&r, sandstep_test_result_free);
  r = sandstep_test_helper (f, "release", hb, NULL);
  sandstep_test_assert_status (r, 0);
  g_clear_pointer (&r, sandstep_test_result_free);
  g_free (holders);
  holders = state_names (f, "holders");
  g_assert_cmpuint (strlen (holders), ==, 64);
  r = sandstep_test_helper (f, "gc", run_arg, NULL);
  sandstep_test_assert_status (r, 0);
  sandstep_test_assert_contains (r->out, c);
  g_free (holders);
  holders = state_names (f, "holders");
  g_assert_cmpstr (holders, ==, "");
}

/* What a destroy killed after its rename into the trash leaves: a tree,
 * with a read-only directory in it, as a command may make. */
static void
plant_trash (Fixture *f, const char *name)
{
  g_autofree char *deep = g_build_filename (f->state_dir, "trash", name, "tree", "workspace", "ro", NULL);
  g_autofree char *file = g_build_filename (deep, "data", NULL);

  g_assert_cmpint (g_mkdir_with_parents (deep, 0755), ==, 0);
  sandstep_test_write_file (file, "left\n", -1);
  g_assert_cmpint (chmod (deep, 0500), ==, 0);
}

static void
test_trash_emptied (Fixture *f, gconstpointer data)
{
  g_autoptr(SandstepTestResult) r = NULL;
  g_autofree char *trash = NULL;
  g_autofree char *handle = NULL;
  guint killed = 0;

  g_test_summary ("trees that killed releases and destroys left in STATE/trash are removed by the next gc or "
                  "provision (once 10 of 16 killed releases left 979 MB there, which nothing emptied); a "
                  "release killed while it removes a tree of 20,000 files leaves nothing after a gc");
  plant_trash (f, "sandstep-0123456789abcdef.0badf00d");
  r = sandstep_test_helper (f, "gc", NULL);
  sandstep_test_assert_status (r, 0);
  g_clear_pointer (&r, sandstep_test_result_free);
  trash = state_names (f, "trash");
  g_assert_cmpstr (trash, ==, "");

  plant_trash (f, "sandstep-fedcba9876543210.0badf00d");
  handle = sandstep_test_provision (f, NULL);
  g_free (trash);
  trash = state_names (f, "trash");
  g_assert_cmpstr (trash, ==, "");

  for (int round = 0; round < 4; round++)
    {
      g_autofree char *holder_arg = g_strdup_printf ("--holder=many-%d", round);
      g_autofree char *many = sandstep_test_provision (f, holder_arg, NULL);
      g_autofree char *h = handle_arg (many);
      const char *args[] = { "release", h, NULL };
      g_autofree char *out = sandstep_test_run_ok (f, many, "mkdir -p d && cd d && seq 1 20000 | xargs touch");
      /* A release of this size takes tens of milliseconds; kill it within them. */
      if (spawn_and_kill (f, args, 2000 + round * 4000))
        killed++;
    }
  g_test_message ("%u of 4 kills landed while the release ran", killed);
  r = sandstep_test_helper (f, "gc", NULL);
  sandstep_test_assert_status (r, 0);
  g_free (trash);
  trash = state_names (f, "trash");
  g_assert_cmpstr (trash, ==, "");
}

/* ---- a full disk ---- */

/* Fills the file system holding @dir to its last byte with @dir/filler. */
static void
fill_disk (const char *dir)
{
  g_autofree char *path = g_build_filename (dir, "filler", NULL);
  static char block[64 * 1024];
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  gsize size = sizeof block;

  g_assert_cmpint (fd, >=, 0);
  while (size > 0)
    if (write (fd, block, size) < 0)
      {
        g_assert_cmpint (errno, ==, ENOSPC);
        size /= 2;
      }
  close (fd);
}

static void
test_full_disk (Fixture *f, gconstpointer data)
{
  g_autofree char *idle = NULL;
  g_autofree char *fresh = NULL;
  g_autofree char *busy = NULL;
  g_autofree char *hi = NULL;
  g_autofree char *hf = NULL;
  g_autofree char *hb = NULL;
  g_autofree char *big = sandstep_test_host_path (f, "big.bin");
  g_autofree char *workspace = NULL;
  g_autofree char *filler = NULL;
  g_autofree char *marker = sandstep_test_unique_seconds (30);
  g_autofree char *sleeper = g_strconcat ("exec sleep ", marker, NULL);
  const char *marker_argv[] = { "sleep", marker, NULL };
  SandstepTestProc *running;
  g_autoptr(SandstepTestResult) r = NULL;

  g_test_summary ("on a full state directory: put exits 125 saying the host's disk is full (once 69, 'path "
                  "refused') and leaves nothing; a sandbox's first run starts (writing fails inside with ENOSPC); "
                  "release of an idle "
                  "sandbox destroys it and frees its space (once it exited 0 and freed nothing); release of a "
                  "held one exits 125 naming the sandbox left");
  if (getuid () != 0)
    {
      g_test_skip ("needs root: the full disk is a small tmpfs mounted over the state directory");
      return;
    }
  /* In this program's own mount namespace (main), so a failed case cannot leave it mounted. */
  g_assert_cmpint (mount ("tmpfs", f->state_dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=0700"), ==, 0);
  idle = sandstep_test_provision (f, "--holder=idle", NULL);
  fresh = sandstep_test_provision (f, "--holder=fresh", NULL);
  busy = sandstep_test_provision (f, "--holder=busy", NULL);
  hi = handle_arg (idle);
  hf = handle_arg (fresh);
  hb = handle_arg (busy);
  g_free (sandstep_test_run_ok (f, idle, "echo before > kept"));
  running = sandstep_test_spawn (f, "run", hb, "--", sleeper, NULL);
  g_assert_true (sandstep_test_wait_for_process (marker_argv, TRUE, 10));
  {
    g_autofree guint8 *bytes = g_malloc0 (1 << 20);
    sandstep_test_write_file (big, (const char *) bytes, 1 << 20);
  }
  fill_disk (f->state_dir);

  r = sandstep_test_helper (f, "put", hi, big, "/workspace/big.bin", NULL);
  sandstep_test_assert_status (r, 125);
  sandstep_test_assert_contains (r->err, "the host's disk that holds the sandboxes is full; free space there");
  g_clear_pointer (&r, sandstep_test_result_free);
  workspace = sandbox_path (f, idle, "tree/workspace");
  {
    g_autofree char *names = sandstep_test_dir_names (workspace);
    g_assert_cmpstr (names, ==, "kept");
  }

  /* A first run writes nothing in the state directory (its supervisor's socket takes no block), and
   * a full disk inside the sandbox is the command's own ENOSPC. */
  r = sandstep_test_helper (f, "run", hf, "--", "echo started; dd if=/dev/zero of=/workspace/new bs=4k count=1 || exit 7", NULL);
  sandstep_test_assert_status (r, 7);
  g_assert_cmpstr (r->out, ==, "started\n");
  sandstep_test_assert_contains (r->err, "No space left on device");
  g_clear_pointer (&r, sandstep_test_result_free);

  r = sandstep_test_helper (f, "release", hb, NULL);
  sandstep_test_assert_status (r, 125);
  sandstep_test_assert_contains (r->err, busy);
  sandstep_test_assert_contains (r->err, "is left until its lifetime ends");
  g_clear_pointer (&r, sandstep_test_result_free);

  r = sandstep_test_helper (f, "release", hi, NULL);
  sandstep_test_assert_status (r, 0);
  sandstep_test_assert_contains (r->err, "destroyed sandbox");
  g_clear_pointer (&r, sandstep_test_result_free);
  {
    g_autofree char *dir = sandbox_path (f, idle, NULL);
    g_assert_false (g_file_test (dir, G_FILE_TEST_EXISTS));
  }

  sandstep_test_proc_kill (running, SIGKILL);
  sandstep_test_result_free (sandstep_test_proc_wait (running, 10));
  filler = g_build_filename (f->state_dir, "filler", NULL);
  g_assert_cmpint (unlink (filler), ==, 0);
  /* With space again, the fresh sandbox runs. */
  g_free (sandstep_test_run_ok (f, fresh, "true"));

  /* The teardown's checks need the state directory as it was: empty it here, then unmount. */
  for (int i = 0; i < 2; i++)
    {
      g_autoptr(SandstepTestResult) d = sandstep_test_helper (f, "destroy", i == 0 ? hf : hb, NULL);
      sandstep_test_assert_status (d, 0);
    }
  sandstep_test_result_free (sandstep_test_helper (f, "gc", NULL));
  {
    gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;
    while (umount (f->state_dir) < 0 && errno == EBUSY && g_get_monotonic_time () < deadline)
      g_usleep (20 * 1000);
    g_assert_cmpint (umount2 (f->state_dir, MNT_DETACH) < 0 ? errno : 0, ==, EINVAL);
  }
}

/* ---- damaged sandboxes ---- */

typedef struct {
  const char *name;
  const char *member;   /* the file damaged, in the sandbox's directory ("" for the directory itself) */
  const char *how;      /* "text:...", "truncate", "dir", "fifo", "remove", "replace:FROM=>TO" */
} Damage;

static const Damage damages[] = {
  { "record-truncated", "record.json", "truncate" },
  { "record-empty", "record.json", "text:" },
  { "record-blank", "record.json", "text: \n\t\n" },
  { "record-garbled", "record.json", "text:\x01\xff\xfe garbage" },
  { "record-not-an-object", "record.json", "text:[1, 2, 3]" },
  { "record-wrong-types", "record.json", "replace:\"released\" : false=>\"released\" : \"no\"" },
  { "record-owner-a-number", "record.json", "replace:\"owner\" : \"=>\"owner\" : 17, \"x\" : \"" },
  { "record-missing-owner", "record.json", "replace:\"owner\"=>\"nobody\"" },
  { "spec-wrong-types", "record.json", "replace:\"pids\" : 0=>\"pids\" : \"many\"" },
  { "spec-not-an-object", "record.json", "replace:\"spec\" : {=>\"spec\" : 7, \"was\" : {" },
  { "record-a-directory", "record.json", "dir" },
  { "record-a-fifo", "record.json", "fifo" },
  { "record-missing", "record.json", "remove" },
  { "claim-a-directory", "claim", "dir" },
  { "claim-a-fifo", "claim", "fifo" },
  { "claim-missing", "claim", "remove" },
  { "sandbox-a-fifo", "", "fifo" },
};

static void
apply_damage (Fixture *f, const char *handle, const Damage *d)
{
  g_autofree char *path = d->member[0] != '\0' ? sandbox_path (f, handle, d->member) : sandbox_path (f, handle, NULL);
  g_autofree char *text = NULL;

  if (g_str_has_prefix (d->how, "text:"))
    sandstep_test_write_file (path, d->how + strlen ("text:"), -1);
  else if (strcmp (d->how, "truncate") == 0)
    {
      struct stat st;
      g_assert_cmpint (stat (path, &st), ==, 0);
      g_assert_cmpint (truncate (path, st.st_size / 2), ==, 0);
    }
  else if (g_str_has_prefix (d->how, "replace:"))
    {
      g_auto(GStrv) parts = g_strsplit (d->how + strlen ("replace:"), "=>", 2);
      g_autofree char *changed = NULL;
      g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
      g_assert_nonnull (strstr (text, parts[0]));
      {
        g_auto(GStrv) pieces = g_strsplit (text, parts[0], 2);
        changed = g_strjoinv (parts[1], pieces);
      }
      sandstep_test_write_file (path, changed, -1);
    }
  else
    {
      /* The directory itself: everything in it goes; a supervisor may be listening there. */
      g_autofree char *cmd = g_strdup_printf ("rm -rf '%s'", path);
      g_assert_cmpint (system (cmd), ==, 0);
      if (strcmp (d->how, "dir") == 0)
        g_assert_cmpint (mkdir (path, 0700), ==, 0);
      else if (strcmp (d->how, "fifo") == 0)
        g_assert_cmpint (mkfifo (path, 0600), ==, 0);
    }
}

static void
test_damaged (Fixture *f, gconstpointer data)
{
  const Damage *d = data;
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *dir = NULL;
  g_autofree char *out = sandstep_test_host_path (f, "out.txt");
  g_autofree char *out_url = g_strconcat ("x.txt=file://", out, NULL);
  g_autofree char *host_file = sandstep_test_host_path (f, "in.txt");
  const char *const ops[][6] = {
    { "run", NULL, "--", "true", NULL },
    { "put", NULL, host_file, "/workspace/in.txt", NULL },
    { "get", NULL, "/workspace/x.txt", NULL },
    { "ls", NULL, "/workspace", NULL },
    { "export", NULL, out_url, NULL },
    { "describe", NULL, NULL },
    { "release", NULL, NULL },
  };

  g_test_summary ("a sandbox with a damaged record, claim or directory: every operator answers in one line "
                  "saying it is damaged, with status 125 (never 64), within seconds, without a json-glib "
                  "warning; the holder's next provision is refused naming it and how to destroy it (it quietly "
                  "made a second); destroy removes the damaged one, and the holder's provision then gets a new one");
  sandstep_test_write_file (host_file, "in\n", -1);
  handle = sandstep_test_provision (f, "--holder=damaged", NULL);
  h = handle_arg (handle);
  g_free (sandstep_test_run_ok (f, handle, "echo x > x.txt"));
  apply_damage (f, handle, d);

  for (gsize i = 0; i < G_N_ELEMENTS (ops); i++)
    {
      const char *args[6];
      g_autoptr(SandstepTestResult) r = NULL;
      g_auto(GStrv) lines = NULL;
      memcpy (args, ops[i], sizeof args);
      args[1] = h;
      r = sandstep_test_helper_argv (f, args, 15);
      g_assert_false (r->timed_out);
      sandstep_test_assert_status (r, 125);
      sandstep_test_assert_contains (r->err, "is damaged");
      sandstep_test_assert_contains (r->err, handle);
      sandstep_test_assert_not_contains (r->err, "CRITICAL");
      sandstep_test_assert_not_contains (r->err, "WARNING");
      lines = g_strsplit (g_strchomp (r->err), "\n", -1);
      g_assert_cmpuint (g_strv_length (lines), ==, 1);
    }
  {
    /* Refused, naming the damaged sandbox and how to remove it: it made a second one quietly. */
    g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "provision", "--holder=damaged", NULL);
    g_autofree char *sandboxes = NULL;
    sandstep_test_assert_status (r, 125);
    g_assert_cmpstr (r->out, ==, "");
    sandstep_test_assert_contains (r->err, "'damaged' already provisioned a sandbox: Sandbox '");
    sandstep_test_assert_contains (r->err, handle);
    sandstep_test_assert_contains (r->err, "is damaged");
    sandstep_test_assert_contains (r->err, "sandstep destroy --handle=");
    sandboxes = state_names (f, "sandboxes");
    g_assert_cmpstr (sandboxes, ==, handle);
  }
  {
    g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "destroy", h, NULL);
    sandstep_test_assert_status (r, 0);
  }
  dir = sandbox_path (f, handle, NULL);
  g_assert_false (g_file_test (dir, G_FILE_TEST_EXISTS));
  {
    /* Once it is destroyed, the holder gets a new one. */
    g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "provision", "--holder=damaged", NULL);
    sandstep_test_assert_status (r, 0);
    sandstep_test_assert_not_contains (r->out, handle);
    g_ptr_array_add (f->handles, g_strdup (g_strchomp (r->out)));
  }
  /* The damaged sandbox could not say whose holder entry it had: gc sweeps it. */
  sandstep_test_result_free (sandstep_test_helper (f, "gc", NULL));
}

/* A sandbox's lifetime file ("EXPIRES RELEASED", beside its record, what its supervisor reads) damaged. */
static const Damage lifetime_damages[] = {
  { "empty", "lifetime", "text:" },
  { "garbled", "lifetime", "text:\x01\xff\xfe garbage" },
  { "a-directory", "lifetime", "dir" },
  { "a-fifo", "lifetime", "fifo" },
  { "missing", "lifetime", "remove" },
};

static void
test_damaged_lifetime (Fixture *f, gconstpointer data)
{
  const Damage *d = data;
  g_autofree char *handle = sandstep_test_provision (f, "--holder=lifetime", NULL);
  g_autofree char *h = handle_arg (handle);
  g_autoptr(SandstepTestResult) r = NULL;
  g_auto(GStrv) lines = NULL;

  g_test_summary ("a damaged lifetime file (empty, garbled, a directory, a FIFO, missing): run exits 125 in one "
                  "line saying the sandbox is damaged and how to destroy it, and destroy removes it; run aborted "
                  "with free(): invalid pointer (status 134) in all five");
  g_free (sandstep_test_run_ok (f, handle, "true"));
  apply_damage (f, handle, d);
  r = sandstep_test_helper_argv (f, (const char *[]) { "run", h, "--", "echo ran", NULL }, 15);
  g_assert_false (r->timed_out);
  sandstep_test_assert_status (r, 125);
  g_assert_cmpstr (r->out, ==, "");
  sandstep_test_assert_contains (r->err, "is damaged: its lifetime file");
  sandstep_test_assert_contains (r->err, handle);
  sandstep_test_assert_contains (r->err, "sandstep destroy");
  sandstep_test_assert_not_contains (r->err, "CRITICAL");
  lines = g_strsplit (g_strchomp (r->err), "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), ==, 1);
  g_clear_pointer (&r, sandstep_test_result_free);
  r = sandstep_test_helper (f, "destroy", h, NULL);
  sandstep_test_assert_status (r, 0);
  {
    g_autofree char *dir = sandbox_path (f, handle, NULL);
    g_assert_false (g_file_test (dir, G_FILE_TEST_EXISTS));
  }
}

static void
test_damaged_neighbour (Fixture *f, gconstpointer data)
{
  g_autofree char *healthy = sandstep_test_provision (f, "--holder=healthy", NULL);
  g_autofree char *empty = sandstep_test_provision (f, "--holder=empty", NULL);
  g_autofree char *blank_claim = sandstep_test_provision (f, "--holder=blank-claim", NULL);
  g_autofree char *h = handle_arg (healthy);
  g_autofree char *record = sandbox_path (f, empty, "record.json");
  g_autofree char *claim = sandbox_path (f, blank_claim, "claim");
  const char *const ops[][5] = {
    { "run", h, "--", "true", NULL },
    { "describe", h, NULL },
    { "list", NULL },
    { "list", "--json", NULL },
    { "gc", NULL },
  };

  g_test_summary ("an empty record.json and a claim of blanks beside a healthy sandbox: no operator on the "
                  "healthy one, nor list or gc, prints a json-glib warning (each printed Json-CRITICAL)");
  sandstep_test_write_file (record, "", 0);
  sandstep_test_write_file (claim, " \n", -1);
  for (gsize i = 0; i < G_N_ELEMENTS (ops); i++)
    {
      g_autoptr(SandstepTestResult) r = sandstep_test_helper_argv (f, ops[i], 15);
      g_assert_false (r->timed_out);
      sandstep_test_assert_not_contains (r->err, "CRITICAL");
      sandstep_test_assert_not_contains (r->err, "WARNING");
      if (strcmp (ops[i][0], "list") != 0)
        sandstep_test_assert_status (r, 0);
    }
  {
    g_autofree char *e = handle_arg (empty);
    g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "destroy", e, NULL);
    sandstep_test_assert_status (r, 0);
  }
  /* The damaged sandbox could not say whose holder entry it had: gc sweeps it. */
  sandstep_test_result_free (sandstep_test_helper (f, "gc", NULL));
}

/* ---- a damaged supervisor socket ---- */

static const char *const socket_damages[] = { "a-file", "a-directory", "a-fifo", "a-dead-socket" };

/* Puts @how in place of the sandbox's supervisor.sock. */
static void
damage_socket (Fixture *f, const char *handle, const char *how)
{
  g_autofree char *path = sandbox_path (f, handle, "supervisor.sock");

  /* The socket a live supervisor listens on, or the one a killed supervisor left. */
  g_assert_cmpint (unlink (path), ==, 0);
  if (strcmp (how, "a-file") == 0)
    sandstep_test_write_file (path, "x\n", -1);
  else if (strcmp (how, "a-directory") == 0)
    g_assert_cmpint (mkdir (path, 0700), ==, 0);
  else if (strcmp (how, "a-fifo") == 0)
    g_assert_cmpint (mkfifo (path, 0600), ==, 0);
  else
    {
      /* Bound, never listened on, closed: connect() is refused. */
      struct sockaddr_un address = { .sun_family = AF_UNIX };
      int fd = socket (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
      g_assert_cmpint (fd, >=, 0);
      g_assert_cmpuint (strlen (path), <, sizeof address.sun_path);
      strcpy (address.sun_path, path);
      g_assert_cmpint (bind (fd, (struct sockaddr *) &address, sizeof address), ==, 0);
      close (fd);
    }
}

static void
test_damaged_socket (Fixture *f, gconstpointer data)
{
  const char *how = data;
  g_autofree char *handle = sandstep_test_provision (f, "--holder=socket", NULL);
  g_autofree char *h = handle_arg (handle);

  g_test_summary ("supervisor.sock replaced by a file, a directory, a FIFO or a socket nobody listens on, under a "
                  "live supervisor and under a killed one: the next run --wait=1 runs its command at once (it "
                  "waited 20 s, whatever --wait said, and failed)");
  for (int killed = 0; killed < 2; killed++)
    {
      g_autoptr(SandstepTestResult) r = NULL;

      g_free (sandstep_test_run_ok (f, handle, "true"));
      if (killed)
        sandstep_test_end_supervisor (f, handle, SIGKILL);
      damage_socket (f, handle, how);
      r = sandstep_test_helper_argv (f, (const char *[]) { "run", h, "--wait=1", "--", "echo ran", NULL }, 15);
      g_assert_false (r->timed_out);
      sandstep_test_assert_status (r, 0);
      g_assert_cmpstr (r->out, ==, "ran\n");
      g_test_message ("%s, supervisor %s: %.3f s", how, killed ? "killed" : "live", r->elapsed_s);
      g_assert_cmpfloat (r->elapsed_s, <, 10.0);
    }
}

static void
test_holder_a_directory (Fixture *f, gconstpointer data)
{
  g_autofree char *first = sandstep_test_provision (f, "--holder=entry", NULL);
  g_autofree char *holders = g_build_filename (f->state_dir, "holders", NULL);
  g_autofree char *names = sandstep_test_dir_names (holders);
  g_autofree char *entry = NULL;
  g_autofree char *inside = NULL;
  g_autofree char *second = NULL;
  g_autofree char *again = NULL;

  g_test_summary ("a holder entry turned into a directory (with a file in it): the holder's next provision "
                  "succeeds and puts the entry back, so the one after finds the same sandbox; it failed for "
                  "that holder until someone removed the directory by hand");
  g_assert_cmpstr (names, !=, "");
  g_assert_null (strchr (names, ' '));
  entry = g_build_filename (holders, names, NULL);
  g_assert_cmpint (unlink (entry), ==, 0);
  g_assert_cmpint (mkdir (entry, 0700), ==, 0);
  inside = g_build_filename (entry, "x", NULL);
  sandstep_test_write_file (inside, "x\n", -1);

  second = sandstep_test_provision (f, "--holder=entry", NULL);
  again = sandstep_test_provision (f, "--holder=entry", NULL);
  g_assert_cmpstr (again, ==, second);
  g_assert_true (g_file_test (entry, G_FILE_TEST_IS_REGULAR));
  /* The first lost its entry with the damage (its lifetime or gc --run reclaims it; here the teardown). */
  g_assert_cmpstr (second, !=, first);
}

/* ---- cgroups whose sandbox is gone ---- */

/* The directories under which sandstep makes the cgroup of a sandbox as root (v1: one per hierarchy; v2: one). */
static const char *const cgroup_parents[] = {
  "/sys/fs/cgroup/memory/sandstep", "/sys/fs/cgroup/pids/sandstep", "/sys/fs/cgroup/sandstep",
  "/sys/fs/cgroup/cpu/sandstep",
};

static void
make_orphan_cgroups (GPtrArray *parents, const char *name, gboolean old)
{
  for (guint i = 0; i < parents->len; i++)
    {
      g_autofree char *path = g_build_filename (parents->pdata[i], name, NULL);
      g_assert_cmpint (mkdir (path, 0755), ==, 0);
      if (old)
        {
          /* Made two hours ago, as far as its age goes. */
          struct timespec times[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = time (NULL) - 7200 } };
          g_assert_cmpint (utimensat (AT_FDCWD, path, times, 0), ==, 0);
        }
    }
}

static gboolean
cgroups_exist (GPtrArray *parents, const char *name)
{
  for (guint i = 0; i < parents->len; i++)
    {
      g_autofree char *path = g_build_filename (parents->pdata[i], name, NULL);
      if (g_file_test (path, G_FILE_TEST_IS_DIR))
        return TRUE;
    }
  return FALSE;
}

static void
test_orphan_cgroups (Fixture *f, gconstpointer data)
{
  /* With a CPU cap where one can be set: a cgroup of its own in v1's cpu hierarchy too (issue 30, 12). */
  g_autofree char *cap_unavailable = sandstep_cgroup_cpu_cap_unavailable ();
  g_autofree char *live = sandstep_test_provision (f, "--holder=live", cap_unavailable == NULL ? "--cpus=1" : NULL,
                                                   NULL);
  g_autofree char *h = handle_arg (live);
  g_autofree char *marker = sandstep_test_unique_seconds (60);
  g_autofree char *sleeper = g_strconcat ("exec sleep ", marker, NULL);
  const char *marker_argv[] = { "sleep", marker, NULL };
  g_autoptr(GPtrArray) candidates = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *user_parent = NULL;
  g_autoptr(GPtrArray) parents = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *old_orphan = g_strdup_printf ("sandstep-%08x%08x", g_random_int (), g_random_int ());
  g_autofree char *young_orphan = g_strdup_printf ("sandstep-%08x%08x", g_random_int (), g_random_int ());
  SandstepTestProc *running;

  g_test_summary ("cgroups of sandboxes whose state directory was removed by hand (empty, two hours old) are "
                  "removed by gc run from any state directory; a live sandbox's cgroup and an empty one made "
                  "just now (a sandbox about to start) stay: 30 such cgroups once piled up in a day");
  if (sandstep_test_skip_without_cgroup ("sweeping the cgroups of sandboxes gone"))
    return;
  running = sandstep_test_spawn (f, "run", h, "--", sleeper, NULL);
  g_assert_true (sandstep_test_wait_for_process (marker_argv, TRUE, 10));
  for (gsize i = 0; i < G_N_ELEMENTS (cgroup_parents); i++)
    g_ptr_array_add (candidates, g_strdup (cgroup_parents[i]));
  /* Where a user's sandboxes have theirs: under the cgroup v2 subtree systemd delegates to it (root's is above). */
  if ((user_parent = sandstep_cgroup_v2_parent ()) != NULL)
    g_ptr_array_add (candidates, g_steal_pointer (&user_parent));
  for (guint i = 0; i < candidates->len; i++)
    {
      const char *parent = candidates->pdata[i];
      g_autofree char *path = g_build_filename (parent, live, NULL);
      if (g_file_test (path, G_FILE_TEST_IS_DIR) &&
          !g_ptr_array_find_with_equal_func (parents, parent, g_str_equal, NULL))
        g_ptr_array_add (parents, g_strdup (parent));
    }
  /* Where a cgroup holds a sandbox, the live one's is found. */
  g_assert_cmpuint (parents->len, >, 0);
  make_orphan_cgroups (parents, old_orphan, TRUE);
  make_orphan_cgroups (parents, young_orphan, FALSE);

  {
    g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "gc", NULL);
    sandstep_test_assert_status (r, 0);
  }
  g_assert_false (cgroups_exist (parents, old_orphan));
  g_assert_true (cgroups_exist (parents, young_orphan));
  g_assert_true (cgroups_exist (parents, live));

  sandstep_test_proc_kill (running, SIGKILL);
  sandstep_test_result_free (sandstep_test_proc_wait (running, 10));
  for (guint i = 0; i < parents->len; i++)
    {
      g_autofree char *path = g_build_filename (parents->pdata[i], young_orphan, NULL);
      g_assert_cmpint (rmdir (path), ==, 0);
    }
}

static void
test_gc_broken (Fixture *f, gconstpointer data)
{
  g_autofree char *healthy = sandstep_test_provision (f, "--holder=healthy", NULL);
  g_autofree char *over = sandstep_test_provision (f, "--holder=over", NULL);
  g_autoptr(GPtrArray) damaged = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(SandstepTestResult) r = NULL;
  g_autofree char *left = NULL;

  g_test_summary ("gc and damaged sandboxes: a plain gc, even across a FIFO in place of a record, returns at "
                  "once, leaves the live healthy sandbox and the damaged ones whose lifetime may still run, "
                  "and reclaims a damaged one whose lifetime file says it is over; gc --broken reclaims every "
                  "damaged one and nothing else");
  for (gsize i = 0; i < G_N_ELEMENTS (damages); i++)
    {
      g_autofree char *holder_arg = g_strdup_printf ("--holder=%s", damages[i].name);
      char *handle = sandstep_test_provision (f, holder_arg, NULL);
      apply_damage (f, handle, &damages[i]);
      g_ptr_array_add (damaged, handle);
    }
  {
    /* Damaged, and its lifetime file (which the supervisor reads, beside the record) says over. */
    g_autofree char *record = sandbox_path (f, over, "record.json");
    g_autofree char *lifetime = sandbox_path (f, over, "lifetime");
    sandstep_test_write_file (record, "{", -1);
    sandstep_test_write_file (lifetime, "1000 0\n", -1);
  }

  r = sandstep_test_helper_argv (f, (const char *[]) { "gc", NULL }, 15);
  g_assert_false (r->timed_out);
  sandstep_test_assert_status (r, 0);
  g_assert_cmpstr (g_strchomp (r->out), ==, over);
  g_clear_pointer (&r, sandstep_test_result_free);
  left = state_names (f, "sandboxes");
  {
    g_auto(GStrv) names = g_strsplit (left, " ", -1);
    /* The healthy one and every damaged one but "over". */
    g_assert_cmpuint (g_strv_length (names), ==, damaged->len + 1);
  }

  r = sandstep_test_helper_argv (f, (const char *[]) { "gc", "--broken", NULL }, 15);
  g_assert_false (r->timed_out);
  sandstep_test_assert_status (r, 0);
  for (guint i = 0; i < damaged->len; i++)
    sandstep_test_assert_contains (r->out, damaged->pdata[i]);
  sandstep_test_assert_not_contains (r->out, healthy);
  g_free (left);
  left = state_names (f, "sandboxes");
  g_assert_cmpstr (left, ==, healthy);
}

/* ---- a deep tree ---- */

/* A chain of 50,000 directories made as a command can, through directory fds (mkdirat, openat), so no path
 * grows long; a file of 3000 bytes at the bottom. */
static const char deep_chain_py[] =
  "import os\n"
  "fd = os.open('.', os.O_RDONLY)\n"
  "for i in range(50000):\n"
  "    os.mkdir('d', dir_fd=fd)\n"
  "    down = os.open('d', os.O_RDONLY, dir_fd=fd)\n"
  "    os.close(fd)\n"
  "    fd = down\n"
  "f = os.open('bottom', os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd)\n"
  "os.write(f, b'x' * 3000)\n";

/* Every helper this process starts from now gets a stack of @bytes (RLIMIT_STACK is inherited); the old
 * limit in @old. */
static void
limit_stack (rlim_t bytes, struct rlimit *old)
{
  struct rlimit small;

  g_assert_cmpint (getrlimit (RLIMIT_STACK, old), ==, 0);
  small = *old;
  small.rlim_cur = MIN (bytes, old->rlim_max);
  g_assert_cmpint (setrlimit (RLIMIT_STACK, &small), ==, 0);
}

static gint64
listed_size (Fixture *f, const char *handle)
{
  g_autoptr(SandstepTestResult) r = sandstep_test_helper_argv (f, (const char *[]) { "list", "--json", NULL }, 120);
  g_autoptr(JsonNode) node = NULL;
  JsonArray *all;

  sandstep_test_assert_status (r, 0);
  node = sandstep_test_parse_json (r->out);
  all = json_node_get_array (node);
  for (guint i = 0; i < json_array_get_length (all); i++)
    {
      JsonObject *e = json_array_get_object_element (all, i);
      if (g_strcmp0 (json_object_get_string_member (e, "handle"), handle) == 0)
        return json_object_get_int_member (e, "size_bytes");
    }
  g_assert_not_reached ();
}

static void
test_deep_tree (Fixture *f, gconstpointer data)
{
  g_autofree char *script = sandstep_test_host_path (f, "deep.py");
  g_autofree char *run_arg = g_strconcat ("--run=", f->run, NULL);
  g_autofree char *left = NULL;
  g_autofree char *trash = NULL;
  const char *const holders[] = { "--holder=deep-destroy", "--holder=deep-gc" };
  char *handles[G_N_ELEMENTS (holders)];
  struct rlimit old;

  g_test_summary ("a command builds a chain of 50,000 nested directories (through directory fds) with a file at "
                  "the bottom; under a 1 MiB stack, list shows the file's 3000 bytes (once 0B), destroy removes "
                  "one such sandbox and gc --run the other, and provision's sweep empties such a tree in the "
                  "trash: the removal recursed once per level, and the helper died of SIGSEGV every time");
  sandstep_test_write_file (script, deep_chain_py, -1);
  sandstep_test_fixture_chown (f, script);
  for (gsize i = 0; i < G_N_ELEMENTS (holders); i++)
    {
      g_autofree char *h = NULL;
      g_autoptr(SandstepTestResult) r = NULL;

      handles[i] = sandstep_test_provision (f, holders[i], NULL);
      h = handle_arg (handles[i]);
      r = sandstep_test_helper_argv (f, (const char *[]) { "put", h, script, "/tmp/deep.py", NULL }, 30);
      sandstep_test_assert_status (r, 0);
      g_clear_pointer (&r, sandstep_test_result_free);
      r = sandstep_test_helper_argv (f, (const char *[]) { "run", h, "--", "python3 /tmp/deep.py && rm /tmp/deep.py",
                                                          NULL }, 240);
      sandstep_test_assert_status (r, 0);
    }

  limit_stack (1024 * 1024, &old);
  g_assert_cmpint (listed_size (f, handles[0]), ==, 3000);
  {
    g_autofree char *h = handle_arg (handles[0]);
    g_autoptr(SandstepTestResult) r = sandstep_test_helper_argv (f, (const char *[]) { "destroy", h, NULL }, 240);
    sandstep_test_assert_status (r, 0);
  }
  {
    g_autoptr(SandstepTestResult) r = sandstep_test_helper_argv (f, (const char *[]) { "gc", run_arg, NULL }, 240);
    sandstep_test_assert_status (r, 0);
    sandstep_test_assert_contains (r->out, handles[1]);
  }
  left = state_names (f, "sandboxes");
  g_assert_cmpstr (left, ==, "");
  trash = state_names (f, "trash");
  g_assert_cmpstr (trash, ==, "");

  /* A removal cut short leaves such a tree in the trash: the next provision empties it. */
  {
    g_autofree char *planted = g_build_filename (f->state_dir, "trash", "sandstep-0123456789abcdef.0badf00d", NULL);
    g_autofree char *command = g_strdup_printf ("python3 -c \"$(cat '%s')\"", script);
    g_autofree char *handle = NULL;
    g_assert_cmpint (g_mkdir_with_parents (planted, 0755), ==, 0);
    g_free (host_sh (planted, command));
    {
      /* The removal's budget, as destroy's and gc's above: a slow disk takes a while over 50,000 levels. */
      g_autoptr(SandstepTestResult) r = sandstep_test_helper_argv (f, (const char *[]) { "provision",
                                                                                          "--holder=deep-after",
                                                                                          NULL }, 240);
      sandstep_test_assert_status (r, 0);
      handle = g_strdup (g_strstrip (r->out));
    }
    g_free (trash);
    trash = state_names (f, "trash");
    g_assert_cmpstr (trash, ==, "");
  }
  g_assert_cmpint (setrlimit (RLIMIT_STACK, &old), ==, 0);
  for (gsize i = 0; i < G_N_ELEMENTS (holders); i++)
    g_free (handles[i]);
}

/* ---- values ---- */

typedef struct {
  const char *name;
  const char *args[4];
  int status;
  const char *message;
} ValueCase;

static const ValueCase value_cases[] = {
  { "pids-over-the-kernel", { "provision", "--pids=5000000" }, 64, "pids '5000000' is more than the kernel can count" },
  { "memory-one-byte", { "provision", "--memory=1" }, 64, "memory '1' is too little" },
  { "memory-4k", { "provision", "--memory=4K" }, 64, "memory '4K' is too little" },
  { "owner-not-utf8", { "provision", "--owner=dag/\xff\xfe" }, 64, "the owner 'dag/\xef\xbf\xbd\xef\xbf\xbd' is not valid UTF-8" },
  { "holder-not-utf8", { "provision", "--holder=step\xff" }, 64, "the holder 'step\xef\xbf\xbd' is not valid UTF-8" },
  { "env-not-utf8", { "provision", "--env=NAME=value\xff" }, 64, "env 'NAME' is not valid UTF-8" },
  { "mount-name-too-long", { "provision", "--mount=/tmp:/data/"
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" }, 64, "at most 255 of them" },
  { "wait-beyond-ten-years", { "run", "HANDLE", "--wait=9300000000000", "true" }, 64, "wait '9300000000000' is more than ten years" },
  { "timeout-beyond-ten-years", { "run", "HANDLE", "--timeout=1e13", "true" }, 64, "timeout '1e13' is more than ten years" },
  { "get-to-name-too-long", { "get", "HANDLE", "x.txt", "TO" }, 73, "Could not write --to" },
  /* Decimal only, whichever way a run goes (the sandbox's supervisor is live here: the static front first). */
  { "timeout-hex", { "run", "HANDLE", "--timeout=0x10", "true" }, 64, "timeout '0x10' is not a decimal number of seconds (30, 2.5)" },
  { "wait-leading-zero", { "run", "HANDLE", "--wait=010", "true" }, 64, "wait '010' is not a number of seconds: numbers are decimal" },
  { "lifetime-leading-zero", { "provision", "--lifetime=010m" }, 64, "duration '010m' is not a duration" },
  { "pids-hex", { "provision", "--pids=0x10" }, 64, "got '0x10'" },
};

static void
test_value (Fixture *f, gconstpointer data)
{
  const ValueCase *c = data;
  g_autofree char *handle = sandstep_test_provision (f, "--holder=values", NULL);
  g_autofree char *h = handle_arg (handle);
  g_autofree char *to = NULL;
  g_autoptr(GPtrArray) args = g_ptr_array_new ();
  g_autoptr(SandstepTestResult) r = NULL;
  g_autofree char *sandboxes = NULL;

  g_test_summary ("a value that would make every later command fail, or that a record cannot store, is "
                  "refused when it is given, with its status and the value quoted; nothing is provisioned");
  g_free (sandstep_test_run_ok (f, handle, "echo x > x.txt"));
  for (gsize i = 0; i < G_N_ELEMENTS (c->args) && c->args[i] != NULL; i++)
    if (strcmp (c->args[i], "HANDLE") == 0)
      g_ptr_array_add (args, h);
    else if (strcmp (c->args[i], "TO") == 0)
      {
        g_autofree char *name = g_strnfill (5000, 'b');
        to = g_strdup_printf ("--to=%s/%s", f->host_dir, name);
        g_ptr_array_add (args, to);
      }
    else
      g_ptr_array_add (args, (gpointer) c->args[i]);
  if (strcmp (c->args[0], "run") == 0)
    g_ptr_array_insert (args, args->len - 1, (gpointer) "--");
  g_ptr_array_add (args, NULL);
  r = sandstep_test_helper_argv (f, (const char *const *) args->pdata, 30);
  sandstep_test_assert_status (r, c->status);
  sandstep_test_assert_contains (r->err, c->message);
  sandboxes = state_names (f, "sandboxes");
  g_assert_cmpstr (sandboxes, ==, handle);
}

static void
test_identity_lengths (Fixture *f, gconstpointer data)
{
  g_autofree char *long_text = g_strnfill (1025, 'a');
  g_autofree char *long_holder = g_strconcat ("--holder=", long_text, NULL);
  g_autofree char *long_owner = g_strconcat ("--owner=", long_text, NULL);
  g_autofree char *escaped = g_strnfill (1024, '\033');
  g_autofree char *edge_holder = g_strconcat ("--holder=", escaped, NULL);
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *sandboxes = NULL;

  g_test_summary ("an owner or holder of 1025 bytes is refused (64, naming the limit) by provision and run, "
                  "from an option or the environment; one of 1024 bytes that JSON escapes six times over "
                  "provisions, runs and releases: no length was checked");
  for (int i = 0; i < 2; i++)
    {
      g_autoptr(SandstepTestResult) r =
        sandstep_test_helper (f, "provision", i == 0 ? long_holder : long_owner, NULL);
      sandstep_test_assert_status (r, 64);
      sandstep_test_assert_contains (r->err, i == 0 ? "the holder 'aaaa" : "the owner 'aaaa");
      sandstep_test_assert_contains (r->err, "is 1025 bytes; give one of 1 to 1024 bytes");
    }
  sandboxes = state_names (f, "sandboxes");
  g_assert_cmpstr (sandboxes, ==, "");

  handle = sandstep_test_provision (f, edge_holder, NULL);
  h = handle_arg (handle);
  {
    g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "run", h, edge_holder, "--", "echo ran", NULL);
    sandstep_test_assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "ran\n");
  }
  {
    /* Through the environment, and through the static front that a plain run goes to first. */
    g_autoptr(SandstepTestResult) r = NULL;
    sandstep_test_fixture_setenv (f, "SANDSTEP_HOLDER", long_text);
    r = sandstep_test_helper (f, "run", h, "--", "echo ran", NULL);
    sandstep_test_fixture_setenv (f, "SANDSTEP_HOLDER", f->holder);
    sandstep_test_assert_status (r, 64);
    g_assert_cmpstr (r->out, ==, "");
    sandstep_test_assert_contains (r->err, "give one of 1 to 1024 bytes (--holder or SANDSTEP_HOLDER)");
  }
  {
    g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "release", h, edge_holder, NULL);
    sandstep_test_assert_status (r, 0);
  }
}

static void
test_values_at_the_edge_work (Fixture *f, gconstpointer data)
{
  g_autofree char *most = sandstep_test_provision (f, "--holder=most", "--pids=4194303", NULL);
  g_autofree char *least = sandstep_test_provision (f, "--holder=least", "--memory=4M", NULL);
  g_autofree char *out = NULL;

  g_test_summary ("the largest process count the kernel allows (4194303) and the smallest memory accepted "
                  "(4M) give sandboxes whose commands run");
  out = sandstep_test_run_ok (f, most, "echo ran");
  g_assert_cmpstr (out, ==, "ran\n");
  g_free (out);
  out = sandstep_test_run_ok (f, least, "echo ran");
  g_assert_cmpstr (out, ==, "ran\n");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  /* A mount made by a case (the full disk's tmpfs) must never outlive this program. */
  if (getuid () == 0)
    {
      g_assert_cmpint (unshare (CLONE_NEWNS), ==, 0);
      g_assert_cmpint (mount (NULL, "/", NULL, MS_REC | MS_SLAVE, NULL), ==, 0);
    }
#define ADD(path, func, data) g_test_add (path, Fixture, data, sandstep_test_setup, func, sandstep_test_teardown)
  ADD ("/recovery/put-killed-converges", test_put_killed_converges, NULL);
  ADD ("/recovery/provision-killed", test_provision_killed, NULL);
  ADD ("/recovery/provision-lists-nothing", test_provision_lists_nothing, NULL);
  ADD ("/recovery/staging-swept", test_staging_swept, NULL);
  ADD ("/recovery/older-leftovers-swept", test_older_leftovers_swept, NULL);
  ADD ("/recovery/holders-forgotten", test_holders_forgotten, NULL);
  ADD ("/recovery/trash-emptied", test_trash_emptied, NULL);
  ADD ("/recovery/full-disk", test_full_disk, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS (damages); i++)
    {
      g_autofree char *path = g_strdup_printf ("/recovery/damaged/%s", damages[i].name);
      ADD (path, test_damaged, &damages[i]);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (lifetime_damages); i++)
    {
      g_autofree char *path = g_strdup_printf ("/recovery/damaged-lifetime/%s", lifetime_damages[i].name);
      ADD (path, test_damaged_lifetime, &lifetime_damages[i]);
    }
  ADD ("/recovery/damaged-neighbour", test_damaged_neighbour, NULL);
  ADD ("/recovery/holder-a-directory", test_holder_a_directory, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS (socket_damages); i++)
    {
      g_autofree char *path = g_strdup_printf ("/recovery/damaged-socket/%s", socket_damages[i]);
      ADD (path, test_damaged_socket, socket_damages[i]);
    }
  ADD ("/recovery/gc-broken", test_gc_broken, NULL);
  ADD ("/recovery/orphan-cgroups", test_orphan_cgroups, NULL);
  ADD ("/recovery/deep-tree", test_deep_tree, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS (value_cases); i++)
    {
      g_autofree char *path = g_strdup_printf ("/recovery/values/%s", value_cases[i].name);
      ADD (path, test_value, &value_cases[i]);
    }
  ADD ("/recovery/values/at-the-edge-work", test_values_at_the_edge_work, NULL);
  ADD ("/recovery/values/identity-lengths", test_identity_lengths, NULL);
  return g_test_run ();
}
