/* sandstep-uids.c: the host uids a sandbox's uid 0 is. */
#include "sandstep-uids.h"
#include "sandstep-test-hooks.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

/* The first range "sandstep:START:COUNT" of @path, if it holds one. */
static gboolean
read_range (const char *path, guint32 *out_start, guint32 *out_count)
{
  g_autofree char *text = NULL;
  g_auto(GStrv) lines = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return FALSE;
  lines = g_strsplit (text, "\n", -1);
  for (char **l = lines; *l; l++)
    {
      g_auto(GStrv) fields = g_strsplit (*l, ":", 3);
      guint64 start, count;
      if (g_strv_length (fields) != 3 || strcmp (fields[0], SANDSTEP_UIDS_USER) != 0 ||
          !g_ascii_string_to_unsigned (fields[1], 10, 1, G_MAXUINT32, &start, NULL) ||
          !g_ascii_string_to_unsigned (fields[2], 10, 1, G_MAXUINT32, &count, NULL) ||
          start + count > G_MAXUINT32)
        continue;
      *out_start = (guint32) start;
      *out_count = (guint32) count;
      return TRUE;
    }
  return FALSE;
}

SandstepUidRange
sandstep_uids_range (void)
{
  SandstepUidRange range = { SANDSTEP_UIDS_BASE, SANDSTEP_UIDS_BASE, SANDSTEP_UIDS_COUNT };
  guint32 uid_start, uid_count, gid_start, gid_count;

  if (read_range ("/etc/subuid", &uid_start, &uid_count) && read_range ("/etc/subgid", &gid_start, &gid_count))
    {
      range.uid_base = uid_start;
      range.gid_base = gid_start;
      range.count = MIN (uid_count, gid_count);
    }
  return range;
}

static gboolean
write_proc (pid_t pid, const char *file, const char *text)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/%s", (int) pid, file);
  int fd = open (path, O_WRONLY | O_CLOEXEC);
  gboolean ok = fd >= 0 && write (fd, text, strlen (text)) == (ssize_t) strlen (text);

  if (fd >= 0)
    close (fd);
  return ok;
}

gboolean
sandstep_uids_idmap_works (const char *dir)
{
  SandstepUidRange range = sandstep_uids_range ();
  g_autofree char *uid_map = g_strdup_printf ("0 %u 1\n", range.uid_base);
  g_autofree char *gid_map = g_strdup_printf ("0 %u 1\n", range.gid_base);
  g_autofree char *path = NULL;
  struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP };
  int ready[2];
  gboolean ok = FALSE;
  pid_t pid;
  char byte;

  pid_t parent = getpid ();

  if (geteuid () != 0 || pipe2 (ready, O_CLOEXEC) < 0)
    return FALSE;
  pid = fork ();
  if (pid == 0)
    {
      /* A user namespace to map through, alive until killed, and never longer than its parent: it
       * shares the parent's fds, the provision lock among them. */
      close (ready[0]);
      if (prctl (PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid () != parent || unshare (CLONE_NEWUSER) < 0 ||
          write (ready[1], "x", 1) != 1)
        _exit (1);
      pause ();
      _exit (0);
    }
  close (ready[1]);
  if (pid > 0 && read (ready[0], &byte, 1) == 1)
    {
      /* An idmapped mount needs both maps. */
      gboolean mapped = write_proc (pid, "uid_map", uid_map) && write_proc (pid, "setgroups", "deny") &&
                        write_proc (pid, "gid_map", gid_map);
      int fd;
      if (mapped)
        {
          int userns;
          path = g_strdup_printf ("/proc/%d/ns/user", (int) pid);
          userns = open (path, O_RDONLY | O_CLOEXEC);
          attr.userns_fd = userns;
          fd = syscall (SYS_open_tree, AT_FDCWD, dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
          ok = userns >= 0 && fd >= 0 && syscall (SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &attr, sizeof attr) == 0;
          if (fd >= 0)
            close (fd);
          if (userns >= 0)
            close (userns);
        }
    }
  close (ready[0]);
  if (pid > 0)
    {
      kill (pid, SIGKILL);
      waitpid (pid, NULL, 0);
    }
  return ok;
}

/* Whether the lease @name in @dir_fd names a sandbox that still exists. */
static gboolean
lease_held (int dir_fd, const char *name)
{
  char buf[4200];
  int fd = openat (dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  ssize_t n = fd >= 0 ? read (fd, buf, sizeof buf - 1) : -1;
  g_auto(GStrv) lines = NULL;
  g_autofree char *sandbox = NULL;
  struct stat st;

  if (fd >= 0)
    close (fd);
  if (n <= 0)
    return FALSE;
  buf[n] = '\0';
  lines = g_strsplit (buf, "\n", 3);
  if (g_strv_length (lines) < 2 || lines[0][0] != '/' || !g_str_has_prefix (lines[1], "sandstep-") ||
      strchr (lines[1], '/') != NULL)
    return FALSE;
  sandbox = g_build_filename (lines[0], "sandboxes", lines[1], NULL);
  /* Gone, or not knowable (unreadable): only a sandbox seen to exist holds its slot. */
  return lstat (sandbox, &st) == 0 || errno != ENOENT;
}

struct _SandstepUidLeases {
  int dir_fd;
  int lock;
  char *path;
};

SandstepUidLeases *
sandstep_uids_leases_lock (void)
{
  const char *hook_dir = sandstep_test_hook ("SANDSTEP_TEST_UIDS_DIR");
  const char *path = hook_dir != NULL ? hook_dir : SANDSTEP_UIDS_LEASES_DIR;
  SandstepUidLeases *leases;
  int dir_fd, lock;

  if (mkdir (path, 0700) < 0 && errno != EEXIST)
    g_debug ("No uid leases in '%s': %s", path, g_strerror (errno));
  dir_fd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd < 0)
    return NULL;
  if ((lock = openat (dir_fd, ".lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0 ||
      flock (lock, LOCK_EX) < 0)
    {
      if (lock >= 0)
        close (lock);
      close (dir_fd);
      return NULL;
    }
  leases = g_new0 (SandstepUidLeases, 1);
  leases->dir_fd = dir_fd;
  leases->lock = lock;
  leases->path = g_strdup (path);
  return leases;
}

void
sandstep_uids_leases_unlock (SandstepUidLeases *leases)
{
  if (leases == NULL)
    return;
  close (leases->lock);
  close (leases->dir_fd);
  g_free (leases->path);
  g_free (leases);
}

gboolean
sandstep_uids_leases_held (SandstepUidLeases *leases, guint32 slot)
{
  char name[16];

  g_snprintf (name, sizeof name, "%u", slot);
  return leases != NULL && lease_held (leases->dir_fd, name);
}

void
sandstep_uids_leases_write (SandstepUidLeases *leases, guint32 slot, const char *state_dir, const char *handle)
{
  g_autofree char *text = g_strdup_printf ("%s\n%s\n", state_dir, handle);
  g_autofree char *tmp = NULL;
  char name[16];
  gboolean ok;
  int fd;

  if (leases == NULL)
    return;
  g_snprintf (name, sizeof name, "%u", slot);
  /* Written whole, then renamed over the last lease of the slot. */
  tmp = g_strdup_printf (".%s.%d", name, (int) getpid ());
  fd = openat (leases->dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  ok = fd >= 0 && write (fd, text, strlen (text)) == (ssize_t) strlen (text);
  if (fd >= 0 && close (fd) < 0)
    ok = FALSE;
  if (!ok || renameat (leases->dir_fd, tmp, leases->dir_fd, name) < 0)
    {
      g_debug ("Could not lease uid slot %u in '%s': %s", slot, leases->path, g_strerror (errno));
      unlinkat (leases->dir_fd, tmp, 0);
    }
}

guint32
sandstep_uids_first_slot (guint32 preferred)
{
  const char *hook_slot = sandstep_test_hook ("SANDSTEP_TEST_UID_SLOT");

  return hook_slot != NULL ? (guint32) g_ascii_strtoull (hook_slot, NULL, 10) : preferred;
}
