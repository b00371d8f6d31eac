/* test-cgroup-birth.c: a jail's first process born in its cgroup (clone3's CLONE_INTO_CGROUP), or moving itself in.
 *
 * On cgroup v2 sandstep_jail_start() starts the child in the sandbox's cgroup,
 * so that no process is ever moved by its pid (such a move after a quiet
 * spell waits for the kernel).  Its cgroup is read from /proc/PID/cgroup
 * before the child is told to go on: nothing has moved it then.  Where the
 * kernel refuses, the child starts where its starter is, for the caller to
 * move, and no later start of the process tries again.  On cgroup v1 the
 * child moves itself in with the `tasks` files its starter opened
 * (sandstep_cgroup_open_moves()), before it execs init.  Making a cgroup
 * needs root; the refusal does not.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <linux/filter.h>
#include <linux/securebits.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "sandstep-cgroup.h"
#include "sandstep-jail-init.h"
#include "sandstep-jail-start.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

/* The uid a sandbox of root's is: not root, as sandstep's own are not. */
#define SANDBOX_UID 65534

/* A jail that builds a tmpfs root with a /workspace and /dev/null and then waits to be told it is in its cgroup. */
typedef struct {
  SandstepJailImage header;
  SandstepJailImageOp ops[5];
  struct sock_filter filters[1];
  char strings[320];
} Image;

static guint32
put_string (Image *image, guint32 *used, const char *text)
{
  guint32 offset = G_STRUCT_OFFSET (Image, strings) + *used;
  gsize len = strlen (text) + 1;

  g_assert_cmpuint (*used + len, <=, sizeof image->strings);
  memcpy (image->strings + *used, text, len);
  *used += len;
  return offset;
}

static Image *
waiting_image (void)
{
  Image *image = g_new0 (Image, 1);
  guint32 used = 0;
  guint32 uid = geteuid () == 0 ? SANDBOX_UID : geteuid ();
  guint32 gid = geteuid () == 0 ? SANDBOX_UID : getegid ();

  image->header = (SandstepJailImage) {
    .magic = SANDSTEP_JAIL_IMAGE_MAGIC, .format = SANDSTEP_PLAN_FORMAT, .size = sizeof *image,
    .outer_uid = uid, .outer_gid = gid,
    .n_ops = G_N_ELEMENTS (image->ops), .ops = G_STRUCT_OFFSET (Image, ops),
    .n_filters = 1, .filters = G_STRUCT_OFFSET (Image, filters),
  };
  image->ops[0] = (SandstepJailImageOp) { .kind = JAIL_OP_TMPFS, .slot = -1,
                                          .path = put_string (image, &used, "/tmp"),
                                          .what = put_string (image, &used, "mount the root") };
  image->ops[0].data = put_string (image, &used, "size=1m");
  image->ops[0].data_len = sizeof "size=1m";
  image->ops[1] = (SandstepJailImageOp) { .kind = JAIL_OP_MKDIR, .slot = -1, .flags = 0755,
                                          .path = put_string (image, &used, "/tmp/workspace"),
                                          .what = put_string (image, &used, "make /workspace") };
  image->ops[2] = (SandstepJailImageOp) { .kind = JAIL_OP_MKDIR, .slot = -1, .flags = 0755,
                                          .path = put_string (image, &used, "/tmp/dev"),
                                          .what = put_string (image, &used, "make /dev") };
  image->ops[3] = (SandstepJailImageOp) { .kind = JAIL_OP_TOUCH, .slot = -1,
                                          .path = put_string (image, &used, "/tmp/dev/null"),
                                          .what = put_string (image, &used, "make /dev/null") };
  image->ops[4] = (SandstepJailImageOp) { .kind = JAIL_OP_BIND, .slot = -1, .flags = MS_BIND,
                                          .path = put_string (image, &used, "/tmp/dev/null"),
                                          .source = put_string (image, &used, "/dev/null"),
                                          .what = put_string (image, &used, "bind /dev/null") };
  image->filters[0] = (struct sock_filter) BPF_STMT (BPF_RET | BPF_K, 0x7fff0000);
  g_assert_true (sandstep_jail_image_check (image, sizeof *image, SANDSTEP_PLAN_FORMAT) == &image->header);
  return image;
}

/* The cgroup v2 path of @pid ("self" or a number), from its "0::" line; NULL without cgroup v2. */
static char *
v2_cgroup_of (const char *pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%s/cgroup", pid);
  g_autofree char *text = NULL;
  g_auto(GStrv) lines = NULL;

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  lines = g_strsplit (text, "\n", -1);
  for (char **line = lines; *line != NULL; line++)
    if (g_str_has_prefix (*line, "0::"))
      return g_strdup (*line + 3);
  return NULL;
}

/* Where cgroup v2 is mounted, or NULL. */
static const char *
cgroup2_mount (void)
{
  static const char *const mounts[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/unified" };
  struct statfs st;

  for (gsize i = 0; i < G_N_ELEMENTS (mounts); i++)
    if (statfs (mounts[i], &st) == 0 && st.f_type == CGROUP2_SUPER_MAGIC)
      return mounts[i];
  return NULL;
}

/* A cgroup of the test's own under the v2 mount's root (its path there in *@out_name), or NULL after a skip. */
static char *
make_cgroup (char **out_name)
{
  const char *mount = cgroup2_mount ();
  g_autofree char *name = NULL;
  char *dir;

  if (geteuid () != 0)
    {
      g_test_skip ("making a cgroup at the cgroup v2 root needs root");
      return NULL;
    }
  if (mount == NULL)
    {
      g_test_skip ("no cgroup v2 hierarchy is mounted here (/sys/fs/cgroup, /sys/fs/cgroup/unified)");
      return NULL;
    }
  name = g_strdup_printf ("sandstep-test-birth-%d", (int) getpid ());
  dir = g_build_filename (mount, name, NULL);
  if (mkdir (dir, 0755) < 0)
    g_assert_cmpint (errno, ==, EEXIST);
  *out_name = g_strconcat ("/", name, NULL);
  return dir;
}

/* Starts the waiting jail with @cgroup_fd; the child's v2 cgroup at birth in *@out_cgroup.  FALSE after a skip:
 * an unprivileged user with no user namespace here. */
static gboolean
start_and_look (int cgroup_fd, SandstepJailStart *start, char **out_cgroup)
{
  g_autofree Image *image = waiting_image ();
  SandstepJailStartFailure failure = { 0 };
  int init_fd = open ("/bin/true", O_PATH | O_CLOEXEC);
  g_autofree char *pid = NULL;
  int r;

  g_assert_cmpint (init_fd, >=, 0);
  r = sandstep_jail_start (&image->header, init_fd, -1, cgroup_fd, NULL, start, &failure);
  close (init_fd);
  if (r < 0 && geteuid () != 0 && failure.stage == SANDSTEP_JAIL_START_CLONE)
    {
      sandstep_jail_start_abandon (start);
      g_test_skip_printf ("no user namespace for uid %u here (clone3: %s)", (unsigned) geteuid (),
                          g_strerror (failure.errsv));
      return FALSE;
    }
  if (r < 0)
    g_error ("The jail did not start: stage %d, %s", failure.stage, g_strerror (failure.errsv));
  /* Not told to go on: nothing has moved it yet. */
  pid = g_strdup_printf ("%d", (int) start->pid);
  *out_cgroup = v2_cgroup_of (pid);
  return TRUE;
}

static void
test_born_inside (void)
{
  g_autofree char *name = NULL;
  g_autofree char *dir = make_cgroup (&name);
  long securebits = prctl (PR_GET_SECUREBITS);
  int fd;

  if (dir == NULL)
    return;
  fd = open (dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  g_assert_cmpint (fd, >=, 0);
  /* Twice: the first start leaves the process as it found it, able to start the next one so. */
  for (int i = 0; i < 2; i++)
    {
      SandstepJailStart start;
      g_autofree char *born_in = NULL;

      g_assert_true (start_and_look (fd, &start, &born_in));
      g_assert_cmpint (start.born_in_cgroup, ==, 1);
      g_assert_cmpstr (born_in, ==, name);
      sandstep_jail_start_abandon (&start);
      /* As root the starter kept its capabilities over the clone as the sandbox's uid: all back as they were. */
      g_assert_cmpint (geteuid (), ==, 0);
      g_assert_cmpint (getegid (), ==, 0);
      g_assert_cmpint (prctl (PR_GET_SECUREBITS), ==, securebits);
    }
  g_assert_cmpint (sandstep_jail_start_clones_into_cgroup (), ==, 1);
  close (fd);
  g_assert_cmpint (rmdir (dir), ==, 0);
}

/* A cgroup removed after it was opened (a gc's sweep): started where we are, and the next start tries again. */
static void
test_removed_cgroup (void)
{
  g_autofree char *name = NULL;
  g_autofree char *dir = make_cgroup (&name);
  g_autofree char *ours = v2_cgroup_of ("self");
  g_autofree char *born_in = NULL;
  SandstepJailStart start;
  int fd;

  if (dir == NULL)
    return;
  fd = open (dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (rmdir (dir), ==, 0);
  g_assert_true (start_and_look (fd, &start, &born_in));
  g_assert_cmpint (start.born_in_cgroup, ==, 0);
  g_assert_cmpstr (born_in, ==, ours);
  sandstep_jail_start_abandon (&start);
  g_assert_cmpint (sandstep_jail_start_clones_into_cgroup (), ==, 1);
  close (fd);
}

/* A directory that is no cgroup v2 one, as a v1 hierarchy's is not: the kernel refuses (EBADF), the child
 * starts where we are, and no later start of this process asks the kernel again. */
static void
test_refused_falls_back (void)
{
  g_autofree char *tmp = NULL;
  g_autofree char *ours = v2_cgroup_of ("self");
  int fd;

  if (ours == NULL)
    {
      g_test_skip ("no cgroup v2 hierarchy here: the child's cgroup v2 line is what this case reads");
      return;
    }
  tmp = g_dir_make_tmp ("sandstep-birth-XXXXXX", NULL);
  g_assert_nonnull (tmp);
  fd = open (tmp, O_PATH | O_DIRECTORY | O_CLOEXEC);
  g_assert_cmpint (fd, >=, 0);
  for (int i = 0; i < 2; i++)
    {
      SandstepJailStart start;
      g_autofree char *born_in = NULL;

      if (!start_and_look (fd, &start, &born_in))
        break;
      g_assert_cmpint (start.born_in_cgroup, ==, 0);
      g_assert_cmpstr (born_in, ==, ours);
      g_assert_cmpint (kill (start.pid, 0), ==, 0);
      sandstep_jail_start_abandon (&start);
      g_assert_cmpint (sandstep_jail_start_clones_into_cgroup (), ==, 0);
    }
  close (fd);
  g_rmdir (tmp);
}

/* The cgroup path of @pid in v1's @controller hierarchy, or NULL. */
static char *
v1_cgroup_of (int pid, const char *controller)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/cgroup", pid);
  g_autofree char *text = NULL;
  g_autofree char *infix = g_strdup_printf (":%s:", controller);
  g_auto(GStrv) lines = NULL;

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  lines = g_strsplit (text, "\n", -1);
  for (char **line = lines; *line != NULL; line++)
    {
      const char *at = strstr (*line, infix);
      if (at != NULL)
        return g_strdup (at + strlen (infix));
    }
  return NULL;
}

/* A sandbox's v1 cgroup made as sandstep makes it, or NULL after a skip. */
static SandstepCgroup *
make_v1_cgroup (const char *name)
{
  SandstepCgroupLimits limits = { .memory = 256 << 20, .pids = 64 };
  g_autoptr(GError) error = NULL;
  SandstepCgroup *cgroup;

  if (geteuid () != 0)
    {
      g_test_skip ("cgroup v1's hierarchies are root's: making a sandbox's cgroup there needs root");
      return NULL;
    }
  if (sandstep_cgroup_kind () != SANDSTEP_CGROUP_V1)
    {
      g_test_skip ("no writable cgroup v1 memory and pids hierarchies here (/sys/fs/cgroup/memory, /pids)");
      return NULL;
    }
  cgroup = sandstep_cgroup_make (name, &limits, &error);
  g_assert_no_error (error);
  g_assert_nonnull (cgroup);
  return cgroup;
}

/* The starter opens the `tasks` files; the child, told to go on with them, moves itself in before it execs init
 * (sandstep-init, which then waits for its first command). */
static void
test_moves_itself_v1 (void)
{
  g_autofree char *name = g_strdup_printf ("sandstep-test-birth-%d", (int) getpid ());
  g_autofree char *expected = g_strconcat ("/sandstep/", name, NULL);
  g_autoptr(SandstepCgroup) cgroup = make_v1_cgroup (name);
  g_autofree Image *image = NULL;
  g_autofree char *init = NULL;
  g_autofree char *ours = v1_cgroup_of (getpid (), "pids");
  g_autofree char *at_birth = NULL;
  g_autoptr(GError) error = NULL;
  SandstepJailStartFailure failure = { 0 };
  SandstepJailStart start;
  int fds[SANDSTEP_JAIL_MAX_CGROUP_FDS];
  guint n_fds = 0;
  SandstepJailFailure report = { 0 };
  ssize_t got;
  int init_fd;

  if (cgroup == NULL)
    return;
  image = waiting_image ();
  init = g_build_filename (g_path_get_dirname (g_getenv ("SANDSTEP")), "sandstep-init", NULL);
  init_fd = open (init, O_PATH | O_CLOEXEC);
  g_assert_cmpint (init_fd, >=, 0);
  g_assert_true (sandstep_cgroup_open_moves (cgroup, fds, &n_fds, &error));
  g_assert_no_error (error);
  /* memory and pids at least; cpu and blkio where the host has them. */
  g_assert_cmpuint (n_fds, >=, 2);
  g_assert_cmpint (sandstep_jail_start (&image->header, init_fd, -1, -1, NULL, &start, &failure), ==, 0);
  close (init_fd);
  at_birth = v1_cgroup_of (start.pid, "pids");
  g_assert_cmpstr (at_birth, ==, ours);
  g_assert_cmpint (sandstep_jail_start_in_cgroup (&start, fds, n_fds), ==, 0);
  for (guint i = 0; i < n_fds; i++)
    close (fds[i]);
  /* The report pipe ends, unwritten, when init runs. */
  got = read (start.report, &report, sizeof report);
  if (got > 0)
    g_error ("The jail's child failed at step %d: %s", report.step, g_strerror (report.errsv));
  g_assert_cmpint (got, ==, 0);
  for (const char *const *c = (const char *const[]) { "memory", "pids", NULL }; *c != NULL; c++)
    {
      g_autofree char *now = v1_cgroup_of (start.pid, *c);
      g_assert_cmpstr (now, ==, expected);
    }
  /* None of the files it moved itself with reaches init: they were opened by root. */
  {
    g_autofree char *fd_dir = g_strdup_printf ("/proc/%d/fd", (int) start.pid);
    g_autoptr(GDir) dir = g_dir_open (fd_dir, 0, NULL);
    const char *name;

    g_assert_nonnull (dir);
    while ((name = g_dir_read_name (dir)) != NULL)
      {
        g_autofree char *link = g_build_filename (fd_dir, name, NULL);
        g_autofree char *target = g_file_read_link (link, NULL);
        g_assert_false (target != NULL && g_str_has_prefix (target, "/sys/fs/cgroup/"));
      }
  }
  sandstep_jail_start_abandon (&start);
  sandstep_cgroup_remove (name);
}

/* A cgroup gone before the child's move (a gc's sweep): the child says so, with the step and the kernel's error,
 * and execs nothing. */
static void
test_self_move_fails_v1 (void)
{
  g_autofree char *name = g_strdup_printf ("sandstep-test-birth-gone-%d", (int) getpid ());
  g_autoptr(SandstepCgroup) cgroup = make_v1_cgroup (name);
  g_autofree Image *image = NULL;
  g_autoptr(GError) error = NULL;
  SandstepJailStartFailure failure = { 0 };
  SandstepJailFailure report = { 0 };
  SandstepJailStart start;
  int fds[SANDSTEP_JAIL_MAX_CGROUP_FDS];
  guint n_fds = 0;
  int init_fd;

  if (cgroup == NULL)
    return;
  image = waiting_image ();
  init_fd = open ("/bin/true", O_PATH | O_CLOEXEC);
  g_assert_true (sandstep_cgroup_open_moves (cgroup, fds, &n_fds, &error));
  g_assert_no_error (error);
  sandstep_cgroup_remove (name);
  g_assert_cmpint (sandstep_jail_start (&image->header, init_fd, -1, -1, NULL, &start, &failure), ==, 0);
  close (init_fd);
  g_assert_cmpint (sandstep_jail_start_in_cgroup (&start, fds, n_fds), ==, 0);
  for (guint i = 0; i < n_fds; i++)
    close (fds[i]);
  g_assert_cmpint (read (start.report, &report, sizeof report), ==, sizeof report);
  g_assert_cmpint (report.step, ==, SANDSTEP_JAIL_STEP_CGROUP_MOVE);
  g_assert_cmpint (report.errsv, ==, ENODEV);
  sandstep_jail_start_abandon (&start);
}

/* A cgroup v2 directory of the test's tree: delegated to the caller (its own, writable) or not (another's, as
 * systemd's slices are root's: chown where the test is root, else no write). */
static void
make_cgroup_dir (const char *mount, const char *rel, const char *controllers, gboolean delegated)
{
  g_autofree char *dir = g_build_filename (mount, rel, NULL);
  const char *files[] = { "cgroup.procs", "cgroup.subtree_control" };

  g_assert_cmpint (g_mkdir_with_parents (dir, 0755), ==, 0);
  for (gsize i = 0; i < G_N_ELEMENTS (files); i++)
    {
      g_autofree char *path = g_build_filename (dir, files[i], NULL);
      g_assert_true (g_file_set_contents (path, "", 0, NULL));
      if (!delegated)
        {
          g_assert_cmpint (chmod (path, 0444), ==, 0);
          if (geteuid () == 0)
            g_assert_cmpint (chown (path, SANDBOX_UID, SANDBOX_UID), ==, 0);
        }
    }
  {
    g_autofree char *path = g_build_filename (dir, "cgroup.controllers", NULL);
    g_assert_true (g_file_set_contents (path, controllers, -1, NULL));
  }
  if (!delegated && geteuid () == 0)
    g_assert_cmpint (chown (dir, SANDBOX_UID, SANDBOX_UID), ==, 0);
}

static void
test_v2_delegated_subtree (void)
{
  g_autofree char *mount = g_dir_make_tmp ("sandstep-cgroup2-XXXXXX", NULL);
  g_autofree char *service = g_build_filename (mount, "user.slice/user-1000.slice/user@1000.service", NULL);
  g_autofree char *found = NULL;
  g_autofree char *rm = NULL;

  g_test_summary ("a caller that is not root makes its sandboxes' cgroups in the topmost cgroup v2 subtree that "
                  "systemd delegates to it and that holds its own cgroup (user@UID.service, with memory and pids), "
                  "never in a login session's scope, which is delegated to nobody (issue 32)");
  make_cgroup_dir (mount, "user.slice", "cpu io memory pids", FALSE);
  make_cgroup_dir (mount, "user.slice/user-1000.slice", "cpu io memory pids", FALSE);
  make_cgroup_dir (mount, "user.slice/user-1000.slice/session-3.scope", "cpu io memory pids", FALSE);
  make_cgroup_dir (mount, "user.slice/user-1000.slice/user@1000.service", "cpu memory pids", TRUE);
  make_cgroup_dir (mount, "user.slice/user-1000.slice/user@1000.service/app.slice", "cpu memory pids", TRUE);
  make_cgroup_dir (mount, "user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope", "cpu memory pids",
                   TRUE);
  make_cgroup_dir (mount, "user.slice/user-1000.slice/user@1000.service/app.slice/other.scope", "", FALSE);
  make_cgroup_dir (mount, "system.slice", "cpu memory pids", FALSE);
  make_cgroup_dir (mount, "system.slice/job.service", "pids", TRUE);

  found = sandstep_cgroup_v2_delegated (mount, "/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope",
                                        geteuid ());
  g_assert_cmpstr (found, ==, service);
  g_clear_pointer (&found, g_free);
  /* A login session's scope (su, ssh), a cgroup inside the subtree that is not the caller's, one delegated without
   * the memory controller, another user's: none. */
  g_assert_null (sandstep_cgroup_v2_delegated (mount, "/user.slice/user-1000.slice/session-3.scope", geteuid ()));
  g_assert_null (sandstep_cgroup_v2_delegated (mount, "/user.slice/user-1000.slice/user@1000.service/app.slice/"
                                               "other.scope", geteuid ()));
  g_assert_null (sandstep_cgroup_v2_delegated (mount, "/system.slice/job.service", geteuid ()));
  g_assert_null (sandstep_cgroup_v2_delegated (mount, "/user.slice/user-1000.slice/user@1000.service/app.slice/"
                                               "run-r1.scope", geteuid () + 1));
  g_assert_null (sandstep_cgroup_v2_delegated (mount, "/", geteuid ()));
  /* Outside its cgroup namespace's root a path climbs: never out of the mount. */
  g_assert_null (sandstep_cgroup_v2_delegated (mount, "/user.slice/user-1000.slice/user@1000.service/app.slice/"
                                               "run-r1.scope/../../../..", geteuid ()));
  rm = g_strdup_printf ("rm -rf '%s'", mount);
  g_assert_cmpint (system (rm), ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cgroup-birth/born-inside", test_born_inside);
  g_test_add_func ("/cgroup-birth/v2-delegated-subtree", test_v2_delegated_subtree);
  g_test_add_func ("/cgroup-birth/removed-cgroup", test_removed_cgroup);
  g_test_add_func ("/cgroup-birth/moves-itself-v1", test_moves_itself_v1);
  g_test_add_func ("/cgroup-birth/self-move-fails-v1", test_self_move_fails_v1);
  /* Last: the refusal it provokes holds for the rest of the process. */
  g_test_add_func ("/cgroup-birth/refused-falls-back", test_refused_falls_back);
  return g_test_run ();
}
