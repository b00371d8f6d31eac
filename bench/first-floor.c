/* first-floor.c: the floor the kernel allows for a sandbox's first command.
 *
 *   first-floor CGROUP-NAME PROGRAM [ARGS...]
 *
 * What a first command cannot do without when the sandbox has limits: make
 * its cgroup (v1: in the memory and pids hierarchies under "sandstep"; v2:
 * under /sys/fs/cgroup/sandstep), clone a child into new user, mount, pid,
 * net, ipc and uts namespaces, write its uid and gid maps, put it into the
 * cgroup as sandstep does (v1: the child moves itself in through the `tasks`
 * files opened here, which takes none of the kernel's wait that a move by
 * pid takes after a quiet spell; v2: it is born inside, clone3's
 * CLONE_INTO_CGROUP), and in the child mount a tmpfs root with /usr bound
 * read-only, pivot into it and exec PROGRAM; then wait and remove the cgroup.  No
 * plan, no /etc, no seccomp, no init, no claim: a floor, not a sandbox.
 * bench/run builds it statically and measures it beside sandstep and
 * bubblewrap (which makes no cgroup).  Needs root.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int
write_file (const char *path, const char *text)
{
  int fd = open (path, O_WRONLY | O_CLOEXEC);
  ssize_t n;

  if (fd < 0)
    return -1;
  n = write (fd, text, strlen (text));
  close (fd);
  return n == (ssize_t) strlen (text) ? 0 : -1;
}

static int
child (int go, const int *tasks, int n_tasks, char **argv)
{
  char byte;

  if (read (go, &byte, 1) != 1)
    _exit (126);
  /* "0": this thread, our only one. */
  for (int i = 0; i < n_tasks; i++)
    if (write (tasks[i], "0", 1) != 1)
      {
        perror ("first-floor: the child's move into its cgroup");
        _exit (126);
      }
  if (mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
      mount ("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0 ||
      mkdir ("/tmp/usr", 0755) < 0 ||
      mount ("/usr", "/tmp/usr", NULL, MS_BIND | MS_REC, NULL) < 0 ||
      mount (NULL, "/tmp/usr", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) < 0 ||
      symlink ("usr/bin", "/tmp/bin") < 0 || symlink ("usr/lib", "/tmp/lib") < 0 ||
      symlink ("usr/lib64", "/tmp/lib64") < 0 || chdir ("/tmp") < 0 ||
      syscall (SYS_pivot_root, ".", ".") < 0 || umount2 (".", MNT_DETACH) < 0 || chdir ("/") < 0)
    {
      perror ("first-floor: the child's mounts");
      _exit (126);
    }
  execv (argv[0], argv);
  _exit (127);
}

int
main (int argc, char **argv)
{
  const char *v1[] = { "/sys/fs/cgroup/memory/sandstep", "/sys/fs/cgroup/pids/sandstep" };
  char dirs[2][256], path[320], text[64];
  int n_dirs = 0, pipe_fds[2], status, tasks[2], n_tasks = 0;
  struct clone_args args = { .flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
                                      CLONE_NEWUTS,
                             .exit_signal = SIGCHLD };
  pid_t pid;

  if (argc < 3)
    {
      fprintf (stderr, "usage: first-floor CGROUP-NAME PROGRAM [ARGS...]\n");
      return 2;
    }
  int is_v1 = access (v1[0], W_OK) == 0 && access (v1[1], W_OK) == 0;

  if (is_v1)
    for (int i = 0; i < 2; i++)
      snprintf (dirs[n_dirs++], sizeof dirs[0], "%s/%s", v1[i], argv[1]);
  else
    snprintf (dirs[n_dirs++], sizeof dirs[0], "/sys/fs/cgroup/sandstep/%s", argv[1]);
  for (int i = 0; i < n_dirs; i++)
    {
      int fd;
      if (mkdir (dirs[i], 0755) < 0 && errno != EEXIST)
        {
          perror (dirs[i]);
          return 1;
        }
      snprintf (path, sizeof path, "%s/%s", dirs[i], is_v1 ? "tasks" : "");
      fd = open (path, is_v1 ? O_WRONLY | O_CLOEXEC : O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0)
        {
          perror (path);
          return 1;
        }
      if (is_v1)
        tasks[n_tasks++] = fd;
      else
        {
          args.flags |= CLONE_INTO_CGROUP;
          args.cgroup = (uint64_t) fd;
        }
    }
  if (pipe2 (pipe_fds, O_CLOEXEC) < 0)
    return 1;
  pid = syscall (SYS_clone3, &args, sizeof args);
  if (pid == 0)
    {
      close (pipe_fds[1]);
      return child (pipe_fds[0], tasks, n_tasks, argv + 2);
    }
  if (pid < 0)
    {
      perror ("first-floor: clone3");
      return 1;
    }
  close (pipe_fds[0]);
  snprintf (path, sizeof path, "/proc/%d/setgroups", (int) pid);
  write_file (path, "deny");
  snprintf (text, sizeof text, "0 %u 1\n", (unsigned) getuid ());
  snprintf (path, sizeof path, "/proc/%d/uid_map", (int) pid);
  write_file (path, text);
  snprintf (text, sizeof text, "0 %u 1\n", (unsigned) getgid ());
  snprintf (path, sizeof path, "/proc/%d/gid_map", (int) pid);
  write_file (path, text);
  if (write (pipe_fds[1], "g", 1) != 1 || waitpid (pid, &status, 0) < 0)
    return 1;
  for (int i = 0; i < n_dirs; i++)
    while (rmdir (dirs[i]) < 0 && errno == EBUSY)
      usleep (100);
  return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}
