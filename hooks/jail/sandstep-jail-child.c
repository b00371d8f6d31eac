/* sandstep-jail-child.c: the jail's child, from clone3() to the exec of init; see sandstep-jail-child.h. */
#include "sandstep-jail-child.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/mount.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandstep-jail-init.h"
#include "sandstep-limit-defaults.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

#define NEWROOT SANDSTEP_JAIL_NEWROOT

static __attribute__ ((noreturn)) void
child_fail (int report_fd, int step, int errsv)
{
  SandstepJailFailure failure = { step, errsv };

  if (write (report_fd, &failure, sizeof failure) < 0)
    {
      /* nothing more can be said */
    }
  _exit (125);
}

int
sandstep_jail_write_file (const char *path, const void *data, size_t len, int open_flags, mode_t mode)
{
  int fd = open (path, open_flags | O_CLOEXEC | O_NOFOLLOW, mode);
  int ok, errsv;

  if (fd < 0)
    return -1;
  ok = write (fd, data, len) == (ssize_t) len;
  errsv = errno;
  if (close (fd) < 0 && ok)
    return -1;
  errno = errsv;
  return ok ? 0 : -1;
}

/* /proc/sys/user/@name of the user namespace we are in. */
static void
set_user_limit (const char *name, int value)
{
  char path[64], text[16];
  int len = snprintf (text, sizeof text, "%d", value);

  snprintf (path, sizeof path, "/proc/sys/user/%s", name);
  sandstep_jail_write_file (path, text, (size_t) len, O_WRONLY, 0);
}

static int
run_op (const SandstepJailImage *image, const SandstepJailImageOp *op, int *slots)
{
  const char *path = sandstep_jail_image_at (image, op->path);
  const char *source = sandstep_jail_image_at (image, op->source);
  const char *data = op->data_len > 0 ? sandstep_jail_image_at (image, op->data) : "";
  char fd_path[32];
  struct mount_attr attr = { 0 };
  int fd;

  switch ((JailOpKind) op->kind)
    {
    case JAIL_OP_TMPFS:
      return mount ("tmpfs", path, "tmpfs", op->flags, data);
    case JAIL_OP_MKDIR:
      return mkdir (path, op->flags ? (mode_t) op->flags : 0755) < 0 && errno != EEXIST ? -1 : 0;
    case JAIL_OP_TOUCH:
      fd = open (path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);
      if (fd < 0)
        return -1;
      close (fd);
      return 0;
    case JAIL_OP_SYMLINK:
      return symlink (source, path);
    case JAIL_OP_WRITE:
      return sandstep_jail_write_file (path, data, op->data_len, O_WRONLY | O_CREAT | O_EXCL, (mode_t) op->flags);
    case JAIL_OP_BIND:
      if (op->slot >= 0)
        {
          snprintf (fd_path, sizeof fd_path, "/proc/self/fd/%d", slots[op->slot]);
          return mount (fd_path, path, NULL, op->flags, NULL);
        }
      return mount (source, path, NULL, op->flags, NULL);
    case JAIL_OP_REMOUNT:
      return mount (NULL, path, NULL, op->flags, NULL);
    case JAIL_OP_RESTRICT:
      attr.attr_set = op->flags;
      return sys_mount_setattr (AT_FDCWD, path, AT_RECURSIVE | AT_SYMLINK_NOFOLLOW, &attr);
    case JAIL_OP_PROC:
      return mount ("proc", path, "proc", op->flags, NULL);
    case JAIL_OP_OPEN:
      fd = open (path, O_PATH | O_CLOEXEC);
      slots[op->slot] = fd;
      return fd < 0 ? -1 : 0;
    case JAIL_OP_ATTACH:
      return sys_move_mount (slots[op->slot], "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH);
    case JAIL_OP_OVERLAY:
      return mount ("overlay", path, "overlay", op->flags, data);
    case JAIL_OP_UNSTAGE:
      return umount2 (path, MNT_DETACH) < 0 ? -1 : rmdir (path);
    case JAIL_OP_REMOVE:
      if (unlink (path) == 0 || errno == ENOENT)
        return 0;
      return errno == EISDIR && (rmdir (path) == 0 || errno == ENOENT) ? 0 : -1;
    case JAIL_OP_N_KINDS:
      break;
    }
  errno = EINVAL;
  return -1;
}

static int
bring_up_loopback (void)
{
  struct ifreq ifr = { .ifr_name = "lo" };
  int fd = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int r = -1;

  if (fd < 0)
    return -1;
  if (ioctl (fd, SIOCGIFFLAGS, &ifr) == 0)
    {
      ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
      r = ioctl (fd, SIOCSIFFLAGS, &ifr);
    }
  close (fd);
  return r;
}

static int
drop_capabilities (int last_cap)
{
  struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
  struct __user_cap_data_struct data[2] = { { 0 } };

  for (int cap = 0; cap <= last_cap; cap++)
    if (prctl (PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
      return -1;
  if (prctl (PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
    return -1;
  return syscall (SYS_capset, &header, data);
}

/* The go message: one byte, with the trees' mounts in the image's order. */
static int
receive_go (const SandstepJailImage *image, int go, int *slots)
{
  union { char buf[CMSG_SPACE (SANDSTEP_JAIL_MAX_SLOTS * sizeof (int))]; struct cmsghdr align; } cmsg_buf;
  char byte;
  struct iovec iov = { &byte, 1 };
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cmsg_buf.buf,
                        .msg_controllen = sizeof cmsg_buf.buf };
  struct cmsghdr *cmsg;
  ssize_t n;
  uint32_t next = 0;

  do
    n = recvmsg (go, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n != 1)
    return -1;
  for (cmsg = CMSG_FIRSTHDR (&msg); cmsg != NULL; cmsg = CMSG_NXTHDR (&msg, cmsg))
    if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS)
      for (size_t i = 0; i < (cmsg->cmsg_len - CMSG_LEN (0)) / sizeof (int) && next < image->n_trees; i++)
        memcpy (&slots[sandstep_jail_image_tree (image, next++)->slot], CMSG_DATA (cmsg) + i * sizeof (int),
                sizeof (int));
  return next == image->n_trees ? 0 : -1;
}

/* The word that it is in the sandbox's cgroup, or with the `tasks` files of its v1 cgroups (opened by the starter,
 * whose right to write them the kernel checks) to move itself in: a thread that moves itself takes none of the
 * kernel's wait for a move of a process by its pid (sandstep-cgroup-warm.h), and it is our only one.  0, or -1
 * with errno and the step that failed in *@out_step. */
static int
receive_cgroup_word (int go, int *out_step)
{
  union { char buf[CMSG_SPACE (SANDSTEP_JAIL_MAX_CGROUP_FDS * sizeof (int))]; struct cmsghdr align; } cmsg_buf;
  char byte;
  struct iovec iov = { &byte, 1 };
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cmsg_buf.buf,
                        .msg_controllen = sizeof cmsg_buf.buf };
  struct cmsghdr *cmsg;
  int r = 0, errsv = 0;
  ssize_t n;

  *out_step = SANDSTEP_JAIL_STEP_PARENT_GONE;
  do
    n = recvmsg (go, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n != 1)
    return -1;
  for (cmsg = CMSG_FIRSTHDR (&msg); cmsg != NULL; cmsg = CMSG_NXTHDR (&msg, cmsg))
    if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS)
      for (size_t i = 0; i < (cmsg->cmsg_len - CMSG_LEN (0)) / sizeof (int); i++)
        {
          int fd;
          memcpy (&fd, CMSG_DATA (cmsg) + i * sizeof (int), sizeof (int));
          /* "0": the writer's own thread.  Each closed at once: none reaches init. */
          if (r == 0 && write (fd, "0", 1) != 1)
            r = -1, errsv = errno;
          close (fd);
        }
  *out_step = SANDSTEP_JAIL_STEP_CGROUP_MOVE;
  errno = errsv;
  return r;
}

static void
set_limit (int report, const SandstepJailImageRlimit *limit)
{
  /* A hard limit can only be raised with CAP_SYS_RESOURCE in the host's namespace: where the starter inherited
   * a lower one, that one holds, tighter than asked, never looser. */
  struct rlimit want = { limit->soft, limit->hard }, now;

  if (getrlimit (limit->resource, &now) == 0 && want.rlim_max > now.rlim_max)
    {
      want.rlim_max = now.rlim_max;
      if (want.rlim_cur > want.rlim_max)
        want.rlim_cur = want.rlim_max;
    }
  if (setrlimit (limit->resource, &want) < 0)
    child_fail (report, SANDSTEP_JAIL_STEP_RLIMIT, errno);
}

int
sandstep_jail_child_main (SandstepJailChildArgs *args)
{
  static const unsigned long securebits =
    SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
    SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
  const SandstepJailImage *image = args->image;
  struct sock_fprog seccomp = { .len = image->n_filters,
                                .filter = (struct sock_filter *) ((char *) image + image->filters) };
  int report = args->report;
  int slots[SANDSTEP_JAIL_MAX_SLOTS];
  int step;
  sigset_t none;

  for (int i = 0; i < 3; i++)
    close (args->others[i]);
  /* Die with the starter; if it is already gone, the go message never comes. */
  if (prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
    child_fail (report, SANDSTEP_JAIL_STEP_PARENT_GONE, errno);
  /* Ours to make, while the starter writes the maps: the costliest namespace, and it needs no map. */
  if (unshare (CLONE_NEWNET) < 0)
    child_fail (report, SANDSTEP_JAIL_STEP_NETNS, errno);
  if (receive_go (image, args->go, slots) < 0)
    child_fail (report, SANDSTEP_JAIL_STEP_PARENT_GONE, errno);
  /* Started on one CPU, which the starter chose before it said go (sandstep-jail-start.c): from here on, on any
   * of its starter's, the caller's. */
  if (CPU_COUNT (&args->cpus) > 0)
    sched_setaffinity (0, sizeof args->cpus, &args->cpus);
  /* The maps are written: become the sandbox's uid 0, which is the sandbox's host uid. */
  if (setresgid (0, 0, 0) < 0 || setresuid (0, 0, 0) < 0)
    child_fail (report, SANDSTEP_JAIL_STEP_SETUID, errno);
  /* If a memory limit is hit, the kernel picks a command's process before init. */
  sandstep_jail_write_file ("/proc/self/oom_score_adj", "1000", 4, O_WRONLY, 0);
  /* Our share of the caller's inotify instances and watches: /proc/sys/user is this user namespace's, ours to
   * set while we hold its capabilities.  Best effort: a host whose /proc/sys is read-only keeps its own limit. */
  set_user_limit ("max_inotify_instances", SANDSTEP_DEFAULT_INOTIFY_INSTANCES);
  set_user_limit ("max_inotify_watches", SANDSTEP_DEFAULT_INOTIFY_WATCHES);
  if (mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    child_fail (report, SANDSTEP_JAIL_STEP_PRIVATE, errno);

  /* The root is built while the starter makes the sandbox's cgroup and moves this process into it. */
  for (uint32_t i = 0; i < image->n_ops; i++)
    if (run_op (image, sandstep_jail_image_op (image, i), slots) < 0)
      child_fail (report, (int) i, errno);
  if (chdir (NEWROOT) < 0 || syscall (SYS_pivot_root, ".", ".") < 0 || umount2 (".", MNT_DETACH) < 0 ||
      chdir ("/") < 0)
    child_fail (report, SANDSTEP_JAIL_STEP_PIVOT, errno);
  /* Read-only, but for an image's root with a writable layer of its own. */
  if (mount (NULL, "/", NULL,
             MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV |
               ((image->flags & SANDSTEP_JAIL_IMAGE_WRITABLE_ROOT) ? 0 : MS_RDONLY), NULL) < 0)
    child_fail (report, SANDSTEP_JAIL_STEP_ROOT_RDONLY, errno);
  if (bring_up_loopback () < 0)
    child_fail (report, SANDSTEP_JAIL_STEP_LOOPBACK, errno);
  if (args->unreachable != NULL && sandstep_host_addresses_unroute (args->unreachable) < 0)
    child_fail (report, SANDSTEP_JAIL_STEP_HOST_ROUTES, errno);
  if (sethostname (SANDSTEP_JAIL_HOSTNAME, strlen (SANDSTEP_JAIL_HOSTNAME)) < 0)
    child_fail (report, SANDSTEP_JAIL_STEP_HOSTNAME, errno);
  if (setsid () < 0)
    child_fail (report, SANDSTEP_JAIL_STEP_SETSID, errno);
  for (uint32_t i = 0; i < image->n_rlimits; i++)
    set_limit (report, sandstep_jail_image_rlimit (image, i));
  for (int i = 0; i < 3; i++)
    {
      int fd = open ("/dev/null", O_RDWR | O_CLOEXEC);
      if (fd < 0 || dup2 (fd, i) < 0)
        child_fail (report, SANDSTEP_JAIL_STEP_STDIO, errno);
      if (fd > 2)
        close (fd);
    }
  /* Every other fd of the starter closes at exec; init keeps its control socket (and the egress one). */
  if (syscall (SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
    child_fail (report, SANDSTEP_JAIL_STEP_STDIO, errno);
  /* A layered tree's root is init's cwd, where the helper's file tools reach the same overlay as the commands;
   * each command starts in /workspace (sandstep-init.c). */
  if (image->cwd_slot > 0 ? fchdir (slots[image->cwd_slot - 1]) < 0 : chdir ("/workspace") < 0)
    child_fail (report, SANDSTEP_JAIL_STEP_CHDIR, errno);

  /* Inside the sandbox's cgroup once told so: make that the root of what it sees. */
  if (receive_cgroup_word (args->go, &step) < 0)
    child_fail (report, step, errno);
  /* A move into a cgroup of another cpuset (cgroup v2 where the host enables cpuset, as systemd does) gave it
   * every CPU of that cpuset: the caller's again, so that taskset, numactl and Slurm still bind the sandbox. */
  if (CPU_COUNT (&args->cpus) > 0)
    sched_setaffinity (0, sizeof args->cpus, &args->cpus);
  if (unshare (CLONE_NEWCGROUP) < 0)
    child_fail (report, SANDSTEP_JAIL_STEP_CGROUP_NS, errno);
  if (prctl (PR_SET_SECUREBITS, securebits, 0, 0, 0) < 0)
    child_fail (report, SANDSTEP_JAIL_STEP_SECUREBITS, errno);
  if (drop_capabilities (args->last_cap) < 0)
    child_fail (report, SANDSTEP_JAIL_STEP_CAPS, errno);
  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    child_fail (report, SANDSTEP_JAIL_STEP_NNP, errno);
  if (prctl (PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &seccomp, 0, 0) < 0)
    child_fail (report, SANDSTEP_JAIL_STEP_SECCOMP, errno);
  if (fcntl (args->control, F_SETFD, 0) < 0 || (args->egress >= 0 && fcntl (args->egress, F_SETFD, 0) < 0))
    child_fail (report, SANDSTEP_JAIL_STEP_INIT_FD, errno);
  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  syscall (SYS_execveat, args->init_fd, "", args->argv, (char *[]) { NULL }, AT_EMPTY_PATH);
  child_fail (report, SANDSTEP_JAIL_STEP_INIT_FD, errno);
}
