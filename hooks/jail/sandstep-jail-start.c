/* sandstep-jail-start.c: cloning a jail's child and starting it on its image; see the header. */
#include "sandstep-jail-start.h"
#include "sandstep-jail-child.h"
#include "sandstep-process-state.h"
#include "sandstep-read-libc.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <linux/securebits.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif
#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

/* Set once the kernel refused to start a child in a cgroup (sandstep_jail_start_clones_into_cgroup()). */
static int into_cgroup_refused;

int
sandstep_jail_start_clones_into_cgroup (void)
{
  return !into_cgroup_refused;
}

/* Whether a refusal of CLONE_INTO_CGROUP holds for every later start of this process: not for a cgroup removed
 * meanwhile (ENOENT, ENODEV: the caller makes it again) nor one that holds controllers for children (EBUSY). */
static int
refused_for_good (int errsv)
{
  return errsv != ENOENT && errsv != ENODEV && errsv != EBUSY;
}

/* @n of @fds (none: nothing) as @msg's SCM_RIGHTS, in @buf of at least CMSG_SPACE (@n * sizeof (int)). */
static void
put_fds (struct msghdr *msg, char *buf, const int *fds, size_t n)
{
  struct cmsghdr *cmsg;

  if (n == 0)
    return;
  msg->msg_control = buf;
  msg->msg_controllen = CMSG_SPACE (n * sizeof (int));
  cmsg = CMSG_FIRSTHDR (msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN (n * sizeof (int));
  memcpy (CMSG_DATA (cmsg), fds, n * sizeof (int));
}

static int
read_last_cap (void)
{
  char text[16];

  return sandstep_read_small ("/proc/sys/kernel/cap_last_cap", text, sizeof text) > 0 ? atoi (text) : 63;
}

static int
fail (SandstepJailStartFailure *failure, SandstepJailStartStage stage, int index, int errsv)
{
  *failure = (SandstepJailStartFailure) { stage, index, errsv };
  return -1;
}

static int
write_proc (pid_t pid, const char *file, const char *text)
{
  char path[64];

  snprintf (path, sizeof path, "/proc/%d/%s", (int) pid, file);
  return sandstep_jail_write_file (path, text, strlen (text), O_WRONLY, 0);
}

/* The detached mounts the child attaches: the trees idmapped, so that the sandbox's uid 0 sees the files of
 * their host owner as its own and what it writes keeps that owner; data mounts read-only down their whole
 * subtree.  Then the go message, with them. */
static int
make_trees_and_go (const SandstepJailImage *image, pid_t pid, int go, SandstepJailStartFailure *failure)
{
  union { char buf[CMSG_SPACE (SANDSTEP_JAIL_MAX_SLOTS * sizeof (int))]; struct cmsghdr align; } cmsg_buf;
  int fds[SANDSTEP_JAIL_MAX_SLOTS];
  char byte = 'g', ns_path[64];
  struct iovec iov = { &byte, 1 };
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
  uint32_t made = 0;
  int userns = -1, r = 0;

  if (image->n_trees > 0)
    {
      snprintf (ns_path, sizeof ns_path, "/proc/%d/ns/user", (int) pid);
      if ((userns = open (ns_path, O_RDONLY | O_CLOEXEC)) < 0)
        return fail (failure, SANDSTEP_JAIL_START_USERNS, 0, errno);
    }
  for (; made < image->n_trees; made++)
    {
      const SandstepJailImageTree *tree = sandstep_jail_image_tree (image, made);
      struct mount_attr attr = { .attr_set = tree->attrs | (tree->idmap ? MOUNT_ATTR_IDMAP : 0),
                                 .userns_fd = tree->idmap ? (uint64_t) userns : 0 };
      unsigned recursive = tree->recursive ? AT_RECURSIVE : 0;
      int fd = sys_open_tree (AT_FDCWD, sandstep_jail_image_at (image, tree->host_path),
                              OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | recursive);

      if (fd < 0 || sys_mount_setattr (fd, "", AT_EMPTY_PATH | recursive, &attr) < 0)
        {
          r = fail (failure, SANDSTEP_JAIL_START_TREE, (int) made, errno);
          if (fd >= 0)
            close (fd);
          break;
        }
      fds[made] = fd;
    }
  if (r == 0)
    {
      put_fds (&msg, cmsg_buf.buf, fds, made);
      if (sendmsg (go, &msg, MSG_NOSIGNAL) != 1)
        r = fail (failure, SANDSTEP_JAIL_START_GO, 0, errno);
    }
  for (uint32_t i = 0; i < made; i++)
    close (fds[i]);
  if (userns >= 0)
    close (userns);
  return r;
}

int
sandstep_jail_start (const SandstepJailImage *image, int init_fd, int egress_fd, int cgroup_fd, const cpu_set_t *cpus,
                     SandstepJailStart *out, SandstepJailStartFailure *failure)
{
  /* The network namespace the child makes itself (sandstep-jail-child.c). */
  struct clone_args clone_args = {
    .flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_PIDFD,
    .exit_signal = SIGCHLD,
  };
  int control[2] = { -1, -1 }, go[2] = { -1, -1 }, report[2] = { -1, -1 };
  char control_text[16], egress_text[16], uid_map[32], gid_map[32];
  char *init_argv[] = { (char *) "sandstep-init", control_text, egress_fd >= 0 ? egress_text : NULL, NULL };
  SandstepJailChildArgs args = { .image = image, .init_fd = init_fd, .egress = egress_fd, .argv = init_argv };
  int as_root = geteuid () == 0;
  SandstepHostAddresses host_addresses;
  int into = cgroup_fd >= 0 && !into_cgroup_refused;
  long securebits = -1;
  cpu_set_t allowed;
  int pidfd = -1, errsv, r = -1;
  pid_t pid;

  *out = (SandstepJailStart) { .pid = -1, .pidfd = -1, .go = -1, .report = -1, .control = -1 };
  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, control) < 0 ||
      socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, go) < 0 || pipe2 (report, O_CLOEXEC) < 0)
    {
      fail (failure, SANDSTEP_JAIL_START_SOCKETS, 0, errno);
      goto out;
    }
  if (image->flags & SANDSTEP_JAIL_IMAGE_OPEN_NET)
    {
      if (sandstep_host_addresses_read (&host_addresses) < 0)
        {
          fail (failure, SANDSTEP_JAIL_START_HOST_ADDRESSES, 0, errno);
          goto out;
        }
      args.unreachable = &host_addresses;
    }
  snprintf (control_text, sizeof control_text, "%d", control[1]);
  snprintf (egress_text, sizeof egress_text, "%d", egress_fd);
  snprintf (uid_map, sizeof uid_map, "0 %u 1\n", image->outer_uid);
  snprintf (gid_map, sizeof gid_map, "0 %u 1\n", image->outer_gid);
  args.last_cap = read_last_cap ();
  args.go = go[1];
  args.report = report[1];
  args.control = control[1];
  args.others[0] = go[0];
  args.others[1] = report[0];
  args.others[2] = control[0];

  /* As root, the namespaces belong to the sandbox's uid, so that its network stack (running as that uid) may
   * join them; nothing else on the host runs as that uid. */
  clone_args.pidfd = (uint64_t) (uintptr_t) &pidfd;
  /* The kernel lets a child be born in a cgroup if its starter may write the cgroup's cgroup.procs, as the
   * sandbox's uid it may not: as root, the capabilities (not root's uid) are kept over the clone alone.  The
   * child's are its own user namespace's either way. */
  if (into && as_root)
    {
      securebits = prctl (PR_GET_SECUREBITS);
      if (securebits < 0 || prctl (PR_SET_SECUREBITS, securebits | SECBIT_NO_SETUID_FIXUP) < 0)
        {
          into = 0;
          into_cgroup_refused = 1;
          securebits = -1;
        }
    }
  if (as_root && (setresgid (-1, image->outer_gid, -1) < 0 || setresuid (-1, image->outer_uid, -1) < 0))
    {
      fail (failure, SANDSTEP_JAIL_START_TAKE_UID, 0, errno);
      setresgid (-1, 0, -1);
      if (securebits >= 0 && prctl (PR_SET_SECUREBITS, securebits) < 0)
        abort ();
      goto out;
    }
  /* The caller's CPUs for the child once it goes; started on another of them than ours. */
  if (cpus != NULL)
    allowed = *cpus;
  else if (sched_getaffinity (0, sizeof allowed, &allowed) < 0)
    CPU_ZERO (&allowed);
  args.cpus = allowed;
  if (into)
    {
      clone_args.flags |= CLONE_INTO_CGROUP;
      clone_args.cgroup = (uint64_t) cgroup_fd;
    }
  pid = syscall (SYS_clone3, &clone_args, sizeof clone_args);
  if (pid == 0)
    _exit (sandstep_jail_child_main (&args));
  if (pid < 0 && into)
    {
      /* Refused (a kernel before 5.7: EINVAL; not cgroup v2: EBADF): started where we are, for the caller to
       * move, and not tried again where it never works. */
      if (refused_for_good (errno))
        into_cgroup_refused = 1;
      into = 0;
      clone_args.flags &= ~(uint64_t) CLONE_INTO_CGROUP;
      clone_args.cgroup = 0;
      pid = syscall (SYS_clone3, &clone_args, sizeof clone_args);
      if (pid == 0)
        _exit (sandstep_jail_child_main (&args));
    }
  errsv = errno;
  /* Not taking root back would leave this process the sandbox's uid: nothing it could safely do then. */
  if (as_root && (setresuid (-1, 0, -1) < 0 || setresgid (-1, 0, -1) < 0))
    abort ();
  if (securebits >= 0 && prctl (PR_SET_SECUREBITS, securebits) < 0)
    abort ();
  if (pid < 0)
    {
      fail (failure, SANDSTEP_JAIL_START_CLONE, 0, errsv);
      goto out;
    }
  out->pid = pid;
  out->pidfd = pidfd;
  out->born_in_cgroup = into;
  /* Its build and our start (the supervisor's exec) at once: it takes back every CPU once told to go
   * (sandstep-jail-child.c), which is after this. */
  sandstep_process_start_elsewhere (pid, &allowed);
  close (go[1]);
  close (report[1]);
  close (control[1]);
  go[1] = report[1] = control[1] = -1;
  if (write_proc (pid, "setgroups", "deny") < 0)
    fail (failure, SANDSTEP_JAIL_START_SETGROUPS, 0, errno);
  else if (write_proc (pid, "uid_map", uid_map) < 0)
    fail (failure, SANDSTEP_JAIL_START_UID_MAP, 0, errno);
  else if (write_proc (pid, "gid_map", gid_map) < 0)
    fail (failure, SANDSTEP_JAIL_START_GID_MAP, 0, errno);
  else if (make_trees_and_go (image, pid, go[0], failure) == 0)
    r = 0;

out:
  out->go = go[0];
  out->report = report[0];
  out->control = control[0];
  if (go[1] >= 0)
    close (go[1]);
  if (report[1] >= 0)
    close (report[1]);
  if (control[1] >= 0)
    close (control[1]);
  return r;
}

int
sandstep_jail_start_in_cgroup (SandstepJailStart *start, const int *fds, unsigned n_fds)
{
  union { char buf[CMSG_SPACE (SANDSTEP_JAIL_MAX_CGROUP_FDS * sizeof (int))]; struct cmsghdr align; } cmsg_buf;
  char byte = 'c';
  struct iovec iov = { &byte, 1 };
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

  if (n_fds > SANDSTEP_JAIL_MAX_CGROUP_FDS)
    return (errno = EINVAL, -1);
  put_fds (&msg, cmsg_buf.buf, fds, n_fds);
  if (sendmsg (start->go, &msg, MSG_NOSIGNAL) == 1)
    return 0;
  if (errno == ECONNRESET)
    errno = EPIPE;
  return -1;
}

void
sandstep_jail_start_abandon (SandstepJailStart *start)
{
  if (start->pidfd >= 0)
    {
      syscall (SYS_pidfd_send_signal, start->pidfd, SIGKILL, NULL, 0);
      while (waitid (P_PIDFD, start->pidfd, &(siginfo_t) { 0 }, WEXITED) < 0 && errno == EINTR)
        ;
      close (start->pidfd);
    }
  if (start->go >= 0)
    close (start->go);
  if (start->report >= 0)
    close (start->report);
  if (start->control >= 0)
    close (start->control);
  *start = (SandstepJailStart) { .pid = -1, .pidfd = -1, .go = -1, .report = -1, .control = -1 };
}
