/* sandstep-seccomp.c: the default seccomp policy.
 *
 * Default allow with an explicit deny table, as Flatpak and bubblewrap users
 * do: a generic build or test command must keep working, so what is refused
 * is what a sandboxed command has no business doing (escaping namespaces,
 * talking to the kernel's debug, keyring, module and BPF interfaces) plus the
 * arguments of a few calls that are dangerous only with some values.
 * Calls of a foreign ABI (i386, x32) kill the process.
 */
#include "sandstep-seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <sched.h>
#include <seccomp.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sandstep-error.h"

static const SandstepSeccompRule deny_rules[] = {
  /* syscall              errno   why */
  { "unshare",            EPERM,  "new namespaces would undo the jail's (nested userns, CVE-2022-0185 class)" },
  { "setns",              EPERM,  "joining another namespace leaves the jail" },
  { "mount",              EPERM,  "the mount table is fixed at setup" },
  { "umount2",            EPERM,  "unmounting could expose what a mount covers" },
  { "pivot_root",         EPERM,  "the root is fixed at setup" },
  { "chroot",             EPERM,  "the root is fixed at setup" },
  { "open_tree",          ENOSYS, "new mount API (CVE-2021-41133); ENOSYS so callers fall back" },
  { "move_mount",         ENOSYS, "new mount API (CVE-2021-41133)" },
  { "fsopen",             ENOSYS, "new mount API (CVE-2021-41133)" },
  { "fsconfig",           ENOSYS, "new mount API (CVE-2021-41133)" },
  { "fsmount",            ENOSYS, "new mount API (CVE-2021-41133)" },
  { "fspick",             ENOSYS, "new mount API (CVE-2021-41133)" },
  { "mount_setattr",      ENOSYS, "new mount API (CVE-2021-41133)" },
  { "clone3",             ENOSYS, "its flags live in memory seccomp cannot read; ENOSYS makes libc use clone" },
  { "add_key",            EPERM,  "kernel keyrings are not namespaced" },
  { "keyctl",             EPERM,  "kernel keyrings are not namespaced" },
  { "request_key",        EPERM,  "kernel keyrings are not namespaced" },
  { "bpf",                EPERM,  "eBPF is kernel attack surface" },
  { "perf_event_open",    EPERM,  "perf events leak host activity and are attack surface" },
  { "userfaultfd",        EPERM,  "used to widen kernel race windows in exploits" },
  { "io_uring_setup",     EPERM,  "io_uring bypasses seccomp for the calls it runs" },
  { "io_uring_enter",     EPERM,  "io_uring bypasses seccomp for the calls it runs" },
  { "io_uring_register",  EPERM,  "io_uring bypasses seccomp for the calls it runs" },
  { "ptrace",             EPERM,  "tracing is a way around seccomp" },
  { "pidfd_getfd",        EPERM,  "takes another process's fds (a run_python driver's protocol pipe)" },
  { "process_vm_readv",   EPERM,  "reads another process's memory" },
  { "process_vm_writev",  EPERM,  "writes another process's memory" },
  { "kexec_load",         EPERM,  "replaces the running kernel" },
  { "kexec_file_load",    EPERM,  "replaces the running kernel" },
  { "init_module",        EPERM,  "loads kernel code" },
  { "finit_module",       EPERM,  "loads kernel code" },
  { "delete_module",      EPERM,  "unloads kernel code" },
  { "syslog",             EPERM,  "the kernel log leaks host addresses and activity" },
  { "acct",               EPERM,  "process accounting is host-wide" },
  { "quotactl",           EPERM,  "quotas are host-wide" },
  { "open_by_handle_at",  EPERM,  "opens files by handle, outside any mount (the shocker escape)" },
  { "name_to_handle_at",  EPERM,  "pairs with open_by_handle_at" },
  { "lookup_dcookie",     EPERM,  "kernel profiling interface" },
  { "uselib",             EPERM,  "obsolete loader call" },
  { "modify_ldt",         EPERM,  "16-bit segments, a history of kernel bugs" },
  { "move_pages",         EPERM,  "NUMA placement of other processes' memory" },
  { "mbind",              EPERM,  "NUMA policy; not needed by commands" },
  { "migrate_pages",      EPERM,  "NUMA placement of other processes' memory" },
  { "set_mempolicy",      EPERM,  "NUMA policy; not needed by commands" },
  { "get_mempolicy",      EPERM,  "NUMA policy; leaks host topology" },
  { "swapon",             EPERM,  "host-wide" },
  { "swapoff",            EPERM,  "host-wide" },
  { "reboot",             EPERM,  "host-wide" },
  { "settimeofday",       EPERM,  "the clock is host-wide" },
  { "clock_settime",      EPERM,  "the clock is host-wide" },
  { "clock_adjtime",      EPERM,  "the clock is host-wide" },
  { "adjtimex",           EPERM,  "the clock is host-wide" },
  { "fanotify_init",      EPERM,  "watches the host's file systems" },
  { "vhangup",            EPERM,  "hangs up the terminal of others" },
};

const SandstepSeccompRule *
sandstep_seccomp_rules (gsize *n_rules)
{
  *n_rules = G_N_ELEMENTS (deny_rules);
  return deny_rules;
}

/* Socket families a command may open; the rest answer EAFNOSUPPORT.
 * AF_NETLINK is allowed for NETLINK_ROUTE only: glibc's getaddrinfo and `ip`
 * read interfaces through it, and without capabilities it changes nothing.
 * AF_VSOCK reaches the hypervisor on this kind of machine; AF_PACKET sniffs. */
static gboolean
family_is_allowed (int family)
{
  return family == AF_UNIX || family == AF_INET || family == AF_INET6 || family == AF_NETLINK;
}

#define SANDSTEP_AF_LIMIT 64

static int
add_arg_rules (scmp_filter_ctx ctx)
{
  static const unsigned long namespace_flags[] = {
    CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP,
  };
  int r;

  /* clone() with any namespace flag; fork and threads stay allowed. */
  for (gsize i = 0; i < G_N_ELEMENTS (namespace_flags); i++)
    if ((r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), SCMP_SYS (clone), 1,
                               SCMP_A0 (SCMP_CMP_MASKED_EQ, namespace_flags[i], namespace_flags[i]))) < 0)
      return r;

  /* TIOCSTI pushes input into the terminal (CVE-2017-5226), TIOCLINUX can too
   * (CVE-2023-28100); compare the low 32 bits only (CVE-2019-10063). */
  if ((r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), SCMP_SYS (ioctl), 1,
                             SCMP_A1 (SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI))) < 0 ||
      (r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), SCMP_SYS (ioctl), 1,
                             SCMP_A1 (SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX))) < 0)
    return r;

  for (int family = 0; family < SANDSTEP_AF_LIMIT; family++)
    if (!family_is_allowed (family) &&
        (r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EAFNOSUPPORT), SCMP_SYS (socket), 1,
                               SCMP_A0 (SCMP_CMP_EQ, family))) < 0)
      return r;
  if ((r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EAFNOSUPPORT), SCMP_SYS (socket), 1,
                             SCMP_A0 (SCMP_CMP_GE, SANDSTEP_AF_LIMIT))) < 0 ||
      (r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EAFNOSUPPORT), SCMP_SYS (socket), 2,
                             SCMP_A0 (SCMP_CMP_EQ, AF_NETLINK), SCMP_A2 (SCMP_CMP_NE, NETLINK_ROUTE))) < 0)
    return r;

  /* Raw IP sockets forge traffic (netlink sockets are SOCK_RAW too, and stay). */
  for (gsize i = 0; i < 2; i++)
    {
      static const int inet_families[] = { AF_INET, AF_INET6 };
      if ((r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), SCMP_SYS (socket), 2,
                                 SCMP_A0 (SCMP_CMP_EQ, inet_families[i]),
                                 SCMP_A1 (SCMP_CMP_MASKED_EQ, 0xf, SOCK_RAW))) < 0 ||
          (r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), SCMP_SYS (socket), 2,
                                 SCMP_A0 (SCMP_CMP_EQ, inet_families[i]),
                                 SCMP_A1 (SCMP_CMP_MASKED_EQ, 0xf, SOCK_PACKET))) < 0)
        return r;
    }

  return 0;
}

GBytes *
sandstep_seccomp_compile (GError **error)
{
  scmp_filter_ctx ctx = seccomp_init (SCMP_ACT_ALLOW);
  int memfd = -1;
  int r;
  off_t size;
  g_autofree guint8 *buf = NULL;

  if (ctx == NULL)
    {
      sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, "seccomp_init failed");
      return NULL;
    }
  /* Foreign ABIs (i386 int 0x80, x32) bypass a table written for x86_64 numbers. */
  if ((r = seccomp_attr_set (ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0 ||
      (r = seccomp_attr_set (ctx, SCMP_FLTATR_CTL_NNP, 0)) < 0)
    goto fail;

  for (gsize i = 0; i < G_N_ELEMENTS (deny_rules); i++)
    {
      int nr = seccomp_syscall_resolve_name (deny_rules[i].syscall);
      if (nr == __NR_SCMP_ERROR)
        continue; /* not on this architecture */
      if ((r = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (deny_rules[i].errno_value), nr, 0)) < 0)
        goto fail;
    }
  if ((r = add_arg_rules (ctx)) < 0)
    goto fail;

  memfd = memfd_create ("sandstep-seccomp", MFD_CLOEXEC);
  if (memfd < 0)
    {
      r = -errno;
      goto fail;
    }
  if ((r = seccomp_export_bpf (ctx, memfd)) < 0)
    goto fail;
  size = lseek (memfd, 0, SEEK_END);
  buf = g_malloc (size);
  if (size <= 0 || pread (memfd, buf, size, 0) != size)
    {
      r = -EIO;
      goto fail;
    }
  close (memfd);
  seccomp_release (ctx);
  return g_bytes_new_take (g_steal_pointer (&buf), size);

fail:
  if (memfd >= 0)
    close (memfd);
  seccomp_release (ctx);
  sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, -r,
                        "Could not compile the seccomp policy with libseccomp %u.%u.%u",
                        seccomp_version ()->major, seccomp_version ()->minor, seccomp_version ()->micro);
  return NULL;
}
