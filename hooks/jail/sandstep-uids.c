/* sandstep-uids.c: the host uids a sandbox's uid 0 is. */
#include "sandstep-uids.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/prctl.h>
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
