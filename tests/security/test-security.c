/* test-security.c: the security battery.
 *
 * One GTest case per attack, named by its class and number (A terminal, B
 * namespaces and mounts, C files, D processes and /proc, E seccomp, F
 * network, G privileges, H leaks, I resources: B05, C12, ...), each
 * asserting the exact outcome: an errno name, a signal, a message, or an
 * absence.
 *
 * The attacks are made by tests/security/attack.c, a static program that
 * prints one machine-readable line per attempt; $SANDSTEP_ATTACK names it.
 * Each case copies it into a host directory that the sandbox sees as
 * /data/bin (--mount) and runs `/data/bin/attack NAME ARGS` there with
 * `sandstep run`.  The attack program refuses to run outside a jail.
 *
 * Every case runs as the test's own user (/security/as-caller/...: root on
 * the project's machines, so the jail's uid 0 is the host's root); the cases
 * about seccomp, capabilities, mounts, /proc, files, leaks and the network
 * run again as a throwaway unprivileged user (/security/as-user/...), which
 * is skipped only when that user cannot create a user namespace (probed).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "attack-utils.h"
#include "sandstep-error.h"

typedef struct {
  AttackFixture af;          /* first */
  int shm_id;                /* a host SysV segment to remove at teardown, or -1 */
} SecFixture;

static void
sec_setup (SecFixture *sf, RunAs as)
{
  attack_fixture_setup (&sf->af, as);
  sf->shm_id = -1;
}

static void
sec_teardown (SecFixture *sf)
{
  if (sf->shm_id >= 0)
    shmctl (sf->shm_id, IPC_RMID, NULL);
  attack_fixture_teardown (&sf->af);
}

#define sec_begin(sf) attack_begin (&(sf)->af)
#define helper_uid(sf) attack_helper_uid (&(sf)->af)
#define sec_provision(sf, ...) attack_provision (&(sf)->af, __VA_ARGS__)
#define run_command(sf, handle, command) attack_run_command (&(sf)->af, (handle), (command))
#define run_attack(sf, handle, attack) attack_run (&(sf)->af, (handle), (attack))
#define assert_line(r, line) attack_assert_line ((r), (line))
#define handle_arg(handle) attack_handle_arg (handle)
#define copy_file(from, to, mode) attack_copy_file ((from), (to), (mode))

/* The host path of a file in the sandbox's persistent tree. */
static char *
tree_path (SecFixture *sf, const char *handle, const char *inside)
{
  g_autofree char *rel = g_build_filename ("tree", inside, NULL);

  return attack_sandbox_path (&sf->af, handle, rel);
}

/* ---- table-driven cases: one attack, one exact line ---- */

typedef struct {
  const char *name;      /* test path component */
  const char *attack;    /* attack arguments; %S: state dir, %H: host scratch dir, %P: this test's pid */
  const char *expected;  /* the one line it must print */
  gboolean as_user;      /* also run as the unprivileged user */
  const char *summary;
} SimpleCase;

static const SimpleCase simple_cases[] = {
  /* B. namespaces and mounts */
  { "B05-unshare-newuser", "unshare user", "errno=EPERM", TRUE, "unshare(CLONE_NEWUSER) is refused with EPERM" },
  { "B05-clone-newuser", "clone user", "errno=EPERM", TRUE, "clone(CLONE_NEWUSER) is refused with EPERM" },
  { "B06-clone3", "clone3", "errno=ENOSYS", TRUE, "clone3 answers ENOSYS (its flags are unreadable to seccomp)" },
  { "B07-unshare-user-mnt", "unshare user+mnt", "errno=EPERM", TRUE,
    "a nested user+mount namespace (to unmount the read-only binds) is refused with EPERM" },
  { "B07-unshare-newns", "unshare mnt", "errno=EPERM", TRUE, "unshare(CLONE_NEWNS) is refused with EPERM" },
  { "B07-clone-newnet", "clone net", "errno=EPERM", TRUE, "clone(CLONE_NEWNET) is refused with EPERM" },
  { "B07-clone-newpid", "clone pid", "errno=EPERM", TRUE, "clone(CLONE_NEWPID) is refused with EPERM" },
  { "B08-mount", "mount", "errno=EPERM", TRUE, "mount(2) of a tmpfs is refused with EPERM" },
  { "B08-umount2", "umount /usr", "errno=EPERM", TRUE, "umount2(/usr, MNT_DETACH) is refused with EPERM" },
  { "B08-umount2-proc-mask", "umount /proc/sys", "errno=EPERM", TRUE,
    "unmounting the read-only /proc/sys mask is refused with EPERM" },
  { "B08-pivot-root", "pivot-root", "errno=EPERM", TRUE, "pivot_root is refused with EPERM" },
  { "B08-chroot", "chroot", "errno=EPERM", TRUE, "chroot is refused with EPERM" },
  { "B09-open-tree", "newmount open_tree", "errno=ENOSYS", TRUE, "open_tree answers ENOSYS" },
  { "B09-move-mount", "newmount move_mount", "errno=ENOSYS", TRUE, "move_mount answers ENOSYS" },
  { "B09-fsopen", "newmount fsopen", "errno=ENOSYS", TRUE, "fsopen answers ENOSYS" },
  { "B09-fsconfig", "newmount fsconfig", "errno=ENOSYS", TRUE, "fsconfig answers ENOSYS" },
  { "B09-fsmount", "newmount fsmount", "errno=ENOSYS", TRUE, "fsmount answers ENOSYS" },
  { "B09-fspick", "newmount fspick", "errno=ENOSYS", TRUE, "fspick answers ENOSYS" },
  { "B09-mount-setattr", "newmount mount_setattr", "errno=ENOSYS", TRUE, "mount_setattr answers ENOSYS" },
  { "B10-setns-own", "setns /proc/self/ns/net", "errno=EPERM", TRUE,
    "setns, even into a namespace the command already holds, is refused with EPERM" },
  { "B10-setns-host-pid", "setns /proc/%P/ns/mnt", "open=ENOENT", TRUE,
    "a host process's namespaces are not reachable: /proc/<host pid> does not exist inside" },
  { "B10-setns-init", "setns /proc/1/ns/mnt", "open=EACCES", TRUE,
    "the jail's init (non-dumpable) does not lend its namespace files: EACCES" },
  { "B11-remount-workspace-suid", "remount /workspace", "errno=EPERM", TRUE,
    "remounting /workspace without nosuid/nodev is refused with EPERM" },
  { "B11-remount-usr-rw", "remount /usr", "errno=EPERM", TRUE, "remounting /usr read-write is refused with EPERM" },
  /* C. files */
  { "C12-read-etc-shadow", "open /etc/shadow r", "errno=ENOENT", TRUE, "/etc/shadow is not in the jail: ENOENT" },
  { "C12-read-root-home", "open /root dir", "errno=ENOENT", TRUE, "/root is not in the jail: ENOENT" },
  { "C12-read-ssh-keys", "open /root/.ssh dir", "errno=ENOENT", TRUE, "~/.ssh is not in the jail: ENOENT" },
  { "C12-read-ssl-private", "stat /etc/ssl/private", "errno=ENOENT", TRUE,
    "the host's TLS private keys (/etc/ssl/private) are not in the jail: ENOENT" },
  { "C12-read-other-sandboxes", "open %S dir", "errno=ENOENT", TRUE,
    "the state directory holding every sandbox's files is not in the jail: ENOENT" },
  { "C12-read-host-scratch", "open %H dir", "errno=ENOENT", TRUE,
    "the helper's own working directory on the host is not in the jail: ENOENT" },
  { "C13-write-usr", "open /usr/sandstep-attack creat", "errno=EROFS", TRUE, "a file in /usr: EROFS" },
  { "C13-write-root", "open /sandstep-attack creat", "errno=EROFS", TRUE, "a file in /: EROFS" },
  { "C13-write-etc", "open /etc/passwd w", "errno=EROFS", TRUE, "rewriting /etc/passwd: EROFS" },
  { "C13-write-data-mount", "open /data/bin/note.txt w", "errno=EROFS", TRUE,
    "a --mount data directory is read-only even for its owner: EROFS" },
  { "C16-hardlink-usr", "link /usr/bin/id /workspace/id-link", "errno=EXDEV", TRUE,
    "a hard link from /usr into the workspace is impossible: EXDEV" },
  { "C16-hardlink-data", "link /data/bin/attack /workspace/attack-link", "errno=EXDEV", TRUE,
    "a hard link from a host data mount into the workspace is impossible: EXDEV" },
  { "C17-mknod-char", "mknod chr /workspace/null2", "errno=EPERM", TRUE,
    "mknod of a character device in the workspace: EPERM" },
  { "C17-mknod-block", "mknod blk /workspace/disk", "errno=EPERM", TRUE,
    "mknod of a block device in the workspace: EPERM" },
  { "C17-workspace-nosuid-nodev", "mountflags /workspace", "ro=0 nosuid=1 nodev=1", TRUE,
    "/workspace is writable but mounted nosuid and nodev" },
  { "C18-plant-suid-workspace", "plant-suid /workspace/suid-attack",
    "uid=0 euid=0 suid=0 capeff=0000000000000000 capprm=0000000000000000 capbnd=0000000000000000 "
    "capamb=0000000000000000 nnp=1 seccomp=2", TRUE,
    "a set-uid/set-gid copy made in the workspace gains nothing when executed (nosuid + NNP)" },
  { "C18-file-capability", "setcap /workspace", "errno=EPERM", TRUE,
    "writing a security.capability xattr (file capabilities) is refused with EPERM" },
  /* D. processes and /proc */
  { "D23-ptrace-attach-init", "ptrace attach 1", "errno=EPERM", TRUE, "ptrace(PTRACE_ATTACH) on pid 1: EPERM" },
  { "D23-ptrace-traceme", "ptrace traceme", "errno=EPERM", TRUE, "ptrace(PTRACE_TRACEME): EPERM" },
  { "D24-process-vm-readv", "vm read 1", "errno=EPERM", TRUE, "process_vm_readv on pid 1: EPERM" },
  { "D24-process-vm-writev", "vm write 1", "errno=EPERM", TRUE, "process_vm_writev on pid 1: EPERM" },
  { "D24-pidfd-getfd", "pidfd-getfd self 1", "errno=EPERM", TRUE,
    "pidfd_getfd, even on the command's own fd: EPERM (it takes fds across processes, issue 30)" },
  { "D25-proc-1-mem", "open /proc/1/mem r", "errno=EACCES", TRUE, "/proc/1/mem: EACCES" },
  { "D25-proc-1-environ", "read /proc/1/environ", "errno=EACCES", TRUE, "/proc/1/environ: EACCES" },
  { "D25-proc-1-exe-write", "open /proc/1/exe w", "errno=EACCES", TRUE, "/proc/1/exe for writing: EACCES" },
  { "D28-sys-absent", "stat /sys", "errno=ENOENT", TRUE, "/sys is not mounted: ENOENT" },
  /* E. seccomp */
  { "E29-x32-syscall", "x32", NULL, TRUE, "an x32 syscall number kills the process with SIGSYS" },
  { "E31-io-uring-setup", "io-uring setup", "errno=EPERM", TRUE, "io_uring_setup: EPERM" },
  { "E31-io-uring-enter", "io-uring enter", "errno=EPERM", TRUE, "io_uring_enter: EPERM" },
  { "E31-io-uring-register", "io-uring register", "errno=EPERM", TRUE, "io_uring_register: EPERM" },
  { "E32-regain-privileges", "regain",
    "capset=EPERM ambient=EPERM securebits=EPERM nnp-off=EINVAL capeff=0000000000000000 nnp=1", TRUE,
    "capset, an ambient raise, clearing securebits and unsetting no_new_privs all fail; CapEff stays 0" },
  { "E32-status", "creds",
    "uid=0 euid=0 suid=0 capeff=0000000000000000 capprm=0000000000000000 capbnd=0000000000000000 "
    "capamb=0000000000000000 nnp=1 seccomp=2", TRUE,
    "the command's /proc/self/status: NoNewPrivs 1, Seccomp 2, CapEff/CapPrm/CapBnd/CapAmb all zero "
    "(the jail's uid 0 holds nothing, even when it is the host's root)" },
  { "E33-bpf", "sys bpf", "errno=EPERM", TRUE, "bpf(BPF_MAP_CREATE): EPERM" },
  { "E33-perf-event-open", "sys perf_event_open", "errno=EPERM", TRUE, "perf_event_open: EPERM" },
  { "E33-userfaultfd", "sys userfaultfd", "errno=EPERM", TRUE, "userfaultfd: EPERM" },
  { "E33-add-key", "sys add_key", "errno=EPERM", TRUE, "add_key: EPERM" },
  { "E33-keyctl", "sys keyctl", "errno=EPERM", TRUE, "keyctl: EPERM" },
  { "E33-request-key", "sys request_key", "errno=EPERM", TRUE, "request_key: EPERM" },
  { "E33-open-by-handle-at", "sys open_by_handle_at", "errno=EPERM", TRUE, "open_by_handle_at (shocker): EPERM" },
  { "E33-name-to-handle-at", "sys name_to_handle_at", "errno=EPERM", TRUE, "name_to_handle_at: EPERM" },
  { "E33-syslog", "sys syslog", "errno=EPERM", TRUE, "syslog(READ_ALL): EPERM" },
  { "E33-kexec-load", "sys kexec_load", "errno=EPERM", TRUE, "kexec_load: EPERM" },
  { "E33-kexec-file-load", "sys kexec_file_load", "errno=EPERM", TRUE, "kexec_file_load: EPERM" },
  { "E33-init-module", "sys init_module", "errno=EPERM", TRUE, "init_module: EPERM" },
  { "E33-finit-module", "sys finit_module", "errno=EPERM", TRUE, "finit_module: EPERM" },
  { "E33-delete-module", "sys delete_module", "errno=EPERM", TRUE, "delete_module: EPERM" },
  { "E33-acct", "sys acct", "errno=EPERM", TRUE, "acct: EPERM" },
  { "E33-quotactl", "sys quotactl", "errno=EPERM", TRUE, "quotactl: EPERM" },
  { "E33-reboot", "sys reboot", "errno=EPERM", TRUE, "reboot (power off): EPERM" },
  { "E33-swapon", "sys swapon", "errno=EPERM", TRUE, "swapon: EPERM" },
  { "E33-settimeofday", "sys settimeofday", "errno=EPERM", TRUE, "settimeofday: EPERM" },
  { "E33-clock-settime", "sys clock_settime", "errno=EPERM", TRUE, "clock_settime: EPERM" },
  { "E33-modify-ldt", "sys modify_ldt", "errno=EPERM", TRUE, "modify_ldt: EPERM" },
  { "E33-fanotify-init", "sys fanotify_init", "errno=EPERM", TRUE, "fanotify_init: EPERM" },
  /* F. network (--network=none) */
  { "F37-af-packet", "socket packet dgram 0", "errno=EAFNOSUPPORT", TRUE, "socket(AF_PACKET): EAFNOSUPPORT" },
  { "F37-af-vsock", "socket vsock stream 0", "errno=EAFNOSUPPORT", TRUE,
    "socket(AF_VSOCK) (reaches the hypervisor on this VM): EAFNOSUPPORT" },
  { "F37-af-vsock-connect-host", "vsock-connect", "errno=EAFNOSUPPORT", TRUE,
    "a vsock connect to the host (CID 2) ends at socket(): EAFNOSUPPORT" },
  { "F37-af-bluetooth", "socket bluetooth seqpacket 0", "errno=EAFNOSUPPORT", TRUE,
    "socket(AF_BLUETOOTH): EAFNOSUPPORT" },
  { "F37-af-alg", "socket alg seqpacket 0", "errno=EAFNOSUPPORT", TRUE, "socket(AF_ALG): EAFNOSUPPORT" },
  { "F37-af-key", "socket key raw 2", "errno=EAFNOSUPPORT", TRUE, "socket(AF_KEY): EAFNOSUPPORT" },
  { "F37-af-xdp", "socket xdp raw 0", "errno=EAFNOSUPPORT", TRUE, "socket(AF_XDP): EAFNOSUPPORT" },
  { "F37-af-beyond-table", "socket 100 dgram 0", "errno=EAFNOSUPPORT", TRUE,
    "a socket family number beyond every known one: EAFNOSUPPORT" },
  { "F37-raw-inet", "socket inet raw 1", "errno=EPERM", TRUE, "a raw AF_INET socket: EPERM" },
  { "F37-raw-inet-flags", "socket inet raw-cloexec 1", "errno=EPERM", TRUE,
    "a raw AF_INET socket with SOCK_CLOEXEC|SOCK_NONBLOCK in the type: EPERM" },
  { "F37-raw-inet6", "socket inet6 raw 58", "errno=EPERM", TRUE, "a raw AF_INET6 (ICMPv6) socket: EPERM" },
  { "F37-sock-packet", "socket inet packet 0", "errno=EPERM", TRUE, "an AF_INET SOCK_PACKET socket: EPERM" },
  { "F37-netlink-route-allowed", "socket netlink raw 0", "ok", TRUE,
    "NETLINK_ROUTE stays allowed (getaddrinfo and ip need it)" },
  { "F37-netlink-audit", "socket netlink raw 9", "errno=EAFNOSUPPORT", TRUE, "NETLINK_AUDIT: EAFNOSUPPORT" },
  { "F37-netlink-uevent", "socket netlink dgram 15", "errno=EAFNOSUPPORT", TRUE,
    "NETLINK_KOBJECT_UEVENT: EAFNOSUPPORT" },
  { "F38-dns-udp", "udp 1.1.1.1 53", "errno=ENETUNREACH", TRUE,
    "a DNS query sent straight to a resolver: ENETUNREACH" },
  { "F42-raw-connect-v4", "connect 1.1.1.1 443", "errno=ENETUNREACH", TRUE,
    "a proxy-unaware connect to 1.1.1.1:443: ENETUNREACH" },
  { "F42-raw-connect-v6", "connect 2606:4700::1111 443", "errno=ENETUNREACH", TRUE,
    "a proxy-unaware connect over IPv6: ENETUNREACH" },
  { "F36-host-dbus-socket", "connect-unix /run/dbus/system_bus_socket", "errno=ENOENT", TRUE,
    "the host's D-Bus socket is not in the jail: ENOENT" },
  { "F36-host-docker-socket", "connect-unix /run/docker.sock", "errno=ENOENT", TRUE,
    "the host's docker socket is not in the jail: ENOENT" },
  /* H. leaks */
  { "H49-cwd", "cwd", "cwd=/workspace proc-cwd=/workspace root-parent=root", TRUE,
    "the command's cwd is /workspace, not the helper's, and .. of / is / (no way out)" },
  /* I. lifecycle */
  { "I57-core-limit", "core", "core=0/0 raise=EPERM dumpable=1", TRUE,
    "RLIMIT_CORE is 0/0 and cannot be raised" },
  { "I58-sethostname", "sethostname evil-host", "sethostname=EPERM nodename=sandstep", TRUE,
    "sethostname is refused (no capabilities) and the jail's name stays 'sandstep'" },
};

static void
test_simple (SecFixture *sf, gconstpointer data)
{
  const SimpleCase *c = data;
  SandstepTestFixture *f = sec_begin (sf);
  g_autofree char *pid = g_strdup_printf ("%d", (int) getpid ());
  g_autofree char *attack = NULL;
  g_autofree char *handle = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  char *tmp;

  g_test_summary (c->summary);
  if (f == NULL)
    return;
  attack = g_strdup (c->attack);
  if (strstr (attack, "%P") != NULL)
    {
      g_auto(GStrv) parts = g_strsplit (attack, "%P", -1);
      tmp = g_strjoinv (pid, parts);
      g_free (attack);
      attack = tmp;
    }
  if (strstr (attack, "%S") != NULL)
    {
      g_auto(GStrv) parts = g_strsplit (attack, "%S", -1);
      tmp = g_strjoinv (f->state_dir, parts);
      g_free (attack);
      attack = tmp;
    }
  if (strstr (attack, "%H") != NULL)
    {
      g_auto(GStrv) parts = g_strsplit (attack, "%H", -1);
      tmp = g_strjoinv (f->host_dir, parts);
      g_free (attack);
      attack = tmp;
    }

  handle = sec_provision (sf, NULL);
  r = run_attack (sf, handle, attack);
  if (c->expected != NULL)
    {
      assert_line (r, c->expected);
      return;
    }
  /* Killed by the filter: no line, status 128+SIGSYS. */
  sandstep_test_assert_status (r, 128 + SIGSYS);
  g_assert_cmpstr (r->out, ==, "");
}

/* One registered case: its table entry (SimpleCase, TerminalCase or
 * SpecialCase, by the function) and the user it runs as. */
typedef struct {
  gconstpointer c;
  RunAs as;
} Variant;

static void
variant_setup (SecFixture *sf, gconstpointer data)
{
  const Variant *v = data;
  sec_setup (sf, v->as);
}

static void
variant_teardown (SecFixture *sf, gconstpointer data)
{
  sec_teardown (sf);
}

static void
simple_run (SecFixture *sf, gconstpointer data)
{
  const Variant *v = data;
  test_simple (sf, v->c);
}

/* ---- A. terminal ---- */

typedef struct {
  int master;
  int slave;
} Pty;

static void
pty_open (Pty *pty)
{
  struct termios t;

  pty->master = posix_openpt (O_RDWR | O_NOCTTY | O_CLOEXEC);
  g_assert_cmpint (pty->master, >=, 0);
  g_assert_cmpint (grantpt (pty->master), ==, 0);
  g_assert_cmpint (unlockpt (pty->master), ==, 0);
  pty->slave = open (ptsname (pty->master), O_RDWR | O_NOCTTY | O_CLOEXEC);
  g_assert_cmpint (pty->slave, >=, 0);
  /* Raw: a single injected byte is readable at once, no line needed. */
  g_assert_cmpint (tcgetattr (pty->slave, &t), ==, 0);
  cfmakeraw (&t);
  g_assert_cmpint (tcsetattr (pty->slave, TCSANOW, &t), ==, 0);
}

static void
pty_close (Pty *pty)
{
  close (pty->slave);
  close (pty->master);
}

/* Bytes waiting in the terminal's input queue (what TIOCSTI would have pushed). */
static char *
pty_pending_input (Pty *pty)
{
  struct pollfd pfd = { .fd = pty->slave, .events = POLLIN };
  char buf[256];
  ssize_t n;

  if (poll (&pfd, 1, 200) <= 0)
    return g_strdup ("");
  n = read (pty->slave, buf, sizeof buf - 1);
  return g_strndup (buf, MAX (n, 0));
}

static void
drain_fd (int *fd, GString *into)
{
  char buf[65536];
  ssize_t n = read (*fd, buf, sizeof buf);

  if (n > 0)
    g_string_append_len (into, buf, n);
  else if (n == 0 || (errno != EINTR && errno != EAGAIN))
    {
      close (*fd);
      *fd = -1;
    }
}

/* Runs `sandstep ARGS` with the pty as stdin.  With @helper_ctty it is also
 * the controlling terminal of the helper's session, as when a user types the
 * command in a terminal; without, it is nobody's controlling terminal. */
static SandstepTestResult *
run_on_terminal (SandstepTestFixture *f, const char *const *args, Pty *pty, gboolean helper_ctty)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_auto(GStrv) final_argv = NULL;
  SandstepTestResult *r = g_new0 (SandstepTestResult, 1);
  g_autoptr(GString) out = g_string_new (NULL);
  g_autoptr(GString) err = g_string_new (NULL);
  gint64 start = g_get_monotonic_time ();
  gint64 deadline = start + (gint64) (ATTACK_TIMEOUT_S * G_USEC_PER_SEC);
  int out_pipe[2], err_pipe[2];
  int status = 0;
  pid_t pid;

  g_ptr_array_add (argv, f->helper);
  for (gsize i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer) args[i]);
  g_ptr_array_add (argv, NULL);
  final_argv = sandstep_test_fixture_argv (f, (const char *const *) argv->pdata);
  r->command = g_strjoinv (" ", final_argv);

  g_assert_cmpint (pipe2 (out_pipe, O_CLOEXEC), ==, 0);
  g_assert_cmpint (pipe2 (err_pipe, O_CLOEXEC), ==, 0);
  pid = fork ();
  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      /* Async-signal-safe calls only from here to exec. */
      if ((helper_ctty && (setsid () < 0 || ioctl (pty->slave, TIOCSCTTY, 0) < 0)) || dup2 (pty->slave, 0) < 0 ||
          dup2 (out_pipe[1], 1) < 0 || dup2 (err_pipe[1], 2) < 0 || chdir (f->host_dir) < 0)
        _exit (126);
      execve (final_argv[0], final_argv, f->envp);
      _exit (127);
    }
  close (out_pipe[1]);
  close (err_pipe[1]);
  while (out_pipe[0] >= 0 || err_pipe[0] >= 0)
    {
      struct pollfd fds[2] = { { .fd = out_pipe[0], .events = POLLIN }, { .fd = err_pipe[0], .events = POLLIN } };
      gint64 left = deadline - g_get_monotonic_time ();
      if (left <= 0)
        {
          kill (pid, SIGKILL);
          r->timed_out = TRUE;
          break;
        }
      if (poll (fds, 2, (int) (left / 1000) + 1) <= 0)
        continue;
      if (out_pipe[0] >= 0 && fds[0].revents)
        drain_fd (&out_pipe[0], out);
      if (err_pipe[0] >= 0 && fds[1].revents)
        drain_fd (&err_pipe[0], err);
    }
  if (out_pipe[0] >= 0)
    close (out_pipe[0]);
  if (err_pipe[0] >= 0)
    close (err_pipe[0]);
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  r->status = r->timed_out ? -1 : WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
  r->elapsed_s = (g_get_monotonic_time () - start) / (double) G_USEC_PER_SEC;
  r->out_len = out->len;
  r->out = g_string_free (g_steal_pointer (&out), FALSE);
  r->err = g_string_free (g_steal_pointer (&err), FALSE);
  return r;
}

typedef struct {
  const char *name;
  const char *attack;
  const char *expected;
  const char *summary;
  gboolean helper_ctty;   /* the pty is the helper's controlling terminal (else nobody's) */
} TerminalCase;

static const TerminalCase terminal_cases[] = {
  { "A01-tiocsti", "tiocsti", "errno=EPERM",
    "TIOCSTI on the inherited terminal (the helper's controlling tty) is refused with EPERM; nothing is "
    "injected", TRUE },
  { "A02-tiocsti-high-bits", "tiocsti-hi", "errno=EPERM",
    "TIOCSTI|1<<32 in the 64-bit request word (CVE-2019-10063) is refused with EPERM; nothing is injected",
    TRUE },
  { "A01-tiocsti-after-setsid-tiocsctty", "tiocsti-ctty", "setsid=ok tiocsctty=EPERM tiocsti=EPERM",
    "a new session cannot take the helper's terminal as its own (TIOCSCTTY: EPERM), and TIOCSTI still fails",
    TRUE },
  { "A01-tiocsti-own-ctty", "tiocsti-ctty", "setsid=ok tiocsctty=ok tiocsti=EPERM",
    "a terminal that is nobody's becomes the command's own (TIOCSCTTY works), where the kernel would allow "
    "TIOCSTI: the seccomp filter alone refuses it (EPERM); nothing is injected", FALSE },
  { "A02-tiocsti-high-bits-own-ctty", "tiocsti-ctty hi", "setsid=ok tiocsctty=ok tiocsti=EPERM",
    "the same with TIOCSTI|1<<32: the filter compares the low 32 bits (CVE-2019-10063), EPERM; nothing is "
    "injected", FALSE },
  { "A03-tioclinux", "tioclinux", "errno=EPERM", "TIOCLINUX (TIOCL_PASTESEL) is refused with EPERM", TRUE },
  { "A04-open-dev-tty", "open /dev/tty rw", "errno=ENXIO",
    "/dev/tty cannot be opened: the command has no controlling terminal (ENXIO)", TRUE },
};

static void
test_terminal (SecFixture *sf, gconstpointer data)
{
  const TerminalCase *c = ((const Variant *) data)->c;
  SandstepTestFixture *f = sec_begin (sf);
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *command = NULL;
  g_autofree char *injected = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  Pty pty;

  g_test_summary (c->summary);
  if (f == NULL)
    return;
  handle = sec_provision (sf, NULL);
  h = handle_arg (handle);
  command = g_strconcat ("/data/bin/attack ", c->attack, NULL);
  pty_open (&pty);

  /* The detector works: as root this process may inject, and the bytes show up. */
  if (getuid () == 0)
    {
      char probe = 'P';
      g_autofree char *seen = NULL;
      g_assert_cmpint (ioctl (pty.slave, TIOCSTI, &probe), ==, 0);
      seen = pty_pending_input (&pty);
      g_assert_cmpstr (seen, ==, "P");
    }

  r = run_on_terminal (f, (const char *[]) { "run", h, "--", command, NULL }, &pty, c->helper_ctty);
  injected = pty_pending_input (&pty);
  pty_close (&pty);
  assert_line (r, c->expected);
  g_assert_cmpstr (injected, ==, "");
}

/* ---- C. files: the setuid-root binary from the host ---- */

static void
test_setuid_root_data_mount (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *suid = NULL;
  g_autofree char *handle = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  struct stat st;

  if (getuid () != 0)
    {
      g_test_skip ("only root can make a set-uid-root file on the host");
      return;
    }
  suid = g_build_filename (sf->af.bin_dir, "attack-suid", NULL);
  copy_file (g_getenv ("SANDSTEP_ATTACK"), suid, 0755);
  g_assert_cmpint (chown (suid, 0, 0), ==, 0);
  g_assert_cmpint (chmod (suid, 04755), ==, 0);
  g_assert_cmpint (stat (suid, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 07777, ==, 04755);

  handle = sec_provision (sf, NULL);
  r = run_attack (sf, handle, "mountflags /data/bin");
  assert_line (r, "ro=1 nosuid=1 nodev=1");
  g_clear_pointer (&r, sandstep_test_result_free);
  r = run_command (sf, handle, "/data/bin/attack-suid creds");
  assert_line (r, "uid=0 euid=0 suid=0 capeff=0000000000000000 capprm=0000000000000000 capbnd=0000000000000000 "
                  "capamb=0000000000000000 nnp=1 seccomp=2");
}

static void
test_write_workspace (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *host = NULL;
  g_autoptr(SandstepTestResult) r = NULL;

  handle = sec_provision (sf, NULL);
  r = run_attack (sf, handle, "open /workspace/written creat");
  assert_line (r, "ok");
  host = tree_path (sf, handle, "workspace/written");
  g_assert_true (g_file_test (host, G_FILE_TEST_IS_REGULAR));
}

/* ---- C. traps against the host-side tools ---- */

/* Runs a host-side tool and asserts it refused (69) within 5 s, printing nothing. */
static SandstepTestResult *
host_tool_refuses (SecFixture *sf, const char *const *args)
{
  SandstepTestResult *r = sandstep_test_helper_argv (&sf->af.base, args, 10);

  sandstep_test_assert_status (r, SANDSTEP_EXIT_PATH);
  g_assert_cmpfloat (r->elapsed_s, <, 5.0);
  g_assert_cmpstr (r->out, ==, "");
  return r;
}

static void
test_trap_fifo (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *dest = NULL;
  g_autofree char *url = NULL;
  g_autofree char *export_arg = NULL;
  g_autoptr(SandstepTestResult) r = NULL;

  handle = sec_provision (sf, NULL);
  h = handle_arg (handle);
  r = run_attack (sf, handle, "mknod fifo /workspace/fifo");
  assert_line (r, "ok");
  g_clear_pointer (&r, sandstep_test_result_free);

  r = host_tool_refuses (sf, (const char *[]) { "get", h, "fifo", NULL });
  sandstep_test_assert_contains (r->err, "is a FIFO");
  g_clear_pointer (&r, sandstep_test_result_free);
  r = host_tool_refuses (sf, (const char *[]) { "ls", h, "fifo", NULL });
  sandstep_test_assert_contains (r->err, "is a FIFO");
  g_clear_pointer (&r, sandstep_test_result_free);
  dest = sandstep_test_host_path (f, "fifo-export");
  url = g_strconcat ("file://", dest, NULL);
  export_arg = g_strconcat ("fifo=", url, NULL);
  r = sandstep_test_helper_argv (f, (const char *[]) { "export", h, export_arg, NULL }, 10);
  sandstep_test_assert_status (r, SANDSTEP_EXIT_PATH);
  g_assert_cmpfloat (r->elapsed_s, <, 5.0);
  sandstep_test_assert_contains (r->err, "is a FIFO");
  g_assert_false (g_file_test (dest, G_FILE_TEST_EXISTS));
}

static void
test_trap_symlinks (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *secret_dir = NULL;
  g_autofree char *secret = NULL;
  g_autofree char *marker = g_strdup_printf ("host-secret-%08x", g_random_int ());
  g_autofree char *command = NULL;
  g_autofree char *dest = NULL;
  g_autofree char *export_arg = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  g_autoptr(GError) error = NULL;
  const char *gets[] = { "shadow", "updots", "hostdir/secret" };

  secret_dir = sandstep_test_host_path (f, "secret-dir");
  g_assert_cmpint (mkdir (secret_dir, 0755), ==, 0);
  secret = g_build_filename (secret_dir, "secret", NULL);
  g_file_set_contents (secret, marker, -1, &error);
  g_assert_no_error (error);
  sandstep_test_fixture_chown (f, secret_dir);

  handle = sec_provision (sf, NULL);
  h = handle_arg (handle);
  command = g_strdup_printf ("ln -s /etc/shadow shadow && ln -s ../../../../../../../../../../etc/passwd updots && "
                             "ln -s %s hostdir && echo planted", secret_dir);
  r = run_command (sf, handle, command);
  assert_line (r, "planted");

  for (gsize i = 0; i < G_N_ELEMENTS (gets); i++)
    {
      g_clear_pointer (&r, sandstep_test_result_free);
      r = host_tool_refuses (sf, (const char *[]) { "get", h, gets[i], NULL });
      sandstep_test_assert_contains (r->err, "does not exist in the sandbox");
      sandstep_test_assert_not_contains (r->err, marker);
    }
  g_clear_pointer (&r, sandstep_test_result_free);
  r = host_tool_refuses (sf, (const char *[]) { "ls", h, "hostdir", NULL });
  sandstep_test_assert_not_contains (r->err, "secret\n");
  g_clear_pointer (&r, sandstep_test_result_free);
  dest = sandstep_test_host_path (f, "exported-secret");
  export_arg = g_strdup_printf ("hostdir/secret=file://%s", dest);
  r = sandstep_test_helper_argv (f, (const char *[]) { "export", h, export_arg, NULL }, 10);
  sandstep_test_assert_status (r, SANDSTEP_EXIT_PATH);
  g_assert_false (g_file_test (dest, G_FILE_TEST_EXISTS));
}

static void
test_trap_put_through_symlink (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *target_dir = NULL;
  g_autofree char *planted = NULL;
  g_autofree char *source = NULL;
  g_autofree char *command = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GDir) dir = NULL;

  target_dir = sandstep_test_host_path (f, "victim");
  g_assert_cmpint (mkdir (target_dir, 0755), ==, 0);
  sandstep_test_fixture_chown (f, target_dir);
  source = sandstep_test_host_path (f, "payload.txt");
  g_file_set_contents (source, "payload\n", -1, &error);
  g_assert_no_error (error);
  sandstep_test_fixture_chown (f, source);

  handle = sec_provision (sf, NULL);
  h = handle_arg (handle);
  command = g_strdup_printf ("ln -s %s victim && echo planted", target_dir);
  r = run_command (sf, handle, command);
  assert_line (r, "planted");
  g_clear_pointer (&r, sandstep_test_result_free);
  r = host_tool_refuses (sf, (const char *[]) { "put", h, source, "/workspace/victim/", NULL });
  g_clear_pointer (&r, sandstep_test_result_free);
  r = host_tool_refuses (sf, (const char *[]) { "put", h, source, "victim/planted.txt", NULL });
  planted = g_build_filename (target_dir, "planted.txt", NULL);
  g_assert_false (g_file_test (planted, G_FILE_TEST_EXISTS));
  dir = g_dir_open (target_dir, 0, NULL);
  g_assert_nonnull (dir);
  g_assert_null (g_dir_read_name (dir));
}

static void
test_trap_sparse (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *dest = NULL;
  g_autofree char *export_arg = NULL;
  g_autoptr(SandstepTestResult) r = NULL;

  handle = sec_provision (sf, "--disk=16G", NULL);
  h = handle_arg (handle);
  r = run_command (sf, handle, "truncate -s 10G sparse && echo planted");
  assert_line (r, "planted");
  g_clear_pointer (&r, sandstep_test_result_free);
  r = host_tool_refuses (sf, (const char *[]) { "get", h, "sparse", NULL });
  sandstep_test_assert_contains (r->err, "over the 5.0MB read limit");
  g_clear_pointer (&r, sandstep_test_result_free);
  dest = sandstep_test_host_path (f, "sparse-copy");
  export_arg = g_strdup_printf ("sparse=file://%s", dest);
  r = sandstep_test_helper_argv (f, (const char *[]) { "export", h, export_arg, NULL }, 10);
  sandstep_test_assert_status (r, SANDSTEP_EXIT_PATH);
  g_assert_cmpfloat (r->elapsed_s, <, 5.0);
  sandstep_test_assert_contains (r->err, "export limit");
  g_assert_false (g_file_test (dest, G_FILE_TEST_EXISTS));
}

/* ---- C. disk and inodes ---- */

static void
test_disk_filler (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *big = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  struct stat st;

  handle = sec_provision (sf, "--disk=1M", NULL);
  r = run_attack (sf, handle, "fill /workspace/big 64");
  sandstep_test_assert_status (r, 128 + SIGXFSZ);
  g_assert_cmpstr (r->out, ==, "");
  sandstep_test_assert_contains (r->err, "sandstep run: the command tried to write a file larger than the "
                                         "sandbox's disk limit (disk=1M) and was killed");
  big = tree_path (sf, handle, "workspace/big");
  g_assert_cmpint (stat (big, &st), ==, 0);
  g_assert_cmpint (st.st_size, ==, 1 << 20);
}

static guint
count_entries (const char *path)
{
  g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
  guint n = 0;

  while (dir != NULL && g_dir_read_name (dir) != NULL)
    n++;
  return n;
}

static void
test_inode_exhaustion (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *flood = NULL;
  g_autofree char *sandbox_dir = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  struct statvfs before, after;
  guint created;

  if (sandstep_test_skip_without_cgroup ("the memory limit"))
    return;
  /* In /dev/shm: the memory limit must end it.  The CPU time is only a backstop here, ample for a slow host to
   * fill 64M with inodes (the stock-host VM under TCG made 4,565 files a CPU second, where 1 s ran out first). */
  {
    g_autofree char *cpu = g_strdup_printf ("--cpu-time=%.0f", 30 * sandstep_test_time_scale ());
    g_autofree char *holder = g_strconcat ("--holder=", f->holder, "-shm", NULL);
    g_autofree char *shm_handle = sec_provision (sf, "--memory=64M", cpu, holder, NULL);
    g_autofree char *shm_h = handle_arg (shm_handle);

    r = run_attack (sf, shm_handle, "inodes /dev/shm/flood 100000000");
    sandstep_test_assert_status (r, 128 + SIGKILL);
    sandstep_test_assert_contains (r->err,
                                   "sandstep run: the command hit the sandbox's memory limit (memory=64M)");
    g_clear_pointer (&r, sandstep_test_result_free);
    r = sandstep_test_helper_argv (f, (const char *[]) { "destroy", shm_h, NULL }, 60);
    sandstep_test_assert_status (r, 0);
    g_clear_pointer (&r, sandstep_test_result_free);
  }

  handle = sec_provision (sf, "--memory=64M", "--cpu-time=1", NULL);
  h = handle_arg (handle);

  flood = tree_path (sf, handle, "workspace/flood");
  g_assert_cmpint (statvfs (f->state_dir, &before), ==, 0);
  r = run_attack (sf, handle, "inodes /workspace/flood 100000000");
  /* Where the state directory is on tmpfs (as /tmp often is), its inodes are charged to the memory
   * limit, which may end the flood before the CPU-time limit does: either ending is contained. */
  if (r->status == 128 + SIGKILL)
    sandstep_test_assert_contains (r->err, "sandstep run: the command hit the sandbox's memory limit (memory=64M)");
  else
    {
      sandstep_test_assert_status (r, 128 + SIGXCPU);
      sandstep_test_assert_contains (r->err, "sandstep run: a process of the command used up its CPU time "
                                             "(cpu-time=1s) and was killed");
    }
  created = count_entries (flood);
  g_test_message ("the flooder made %u files in its second of CPU", created);
  g_assert_cmpuint (created, >, 0);
  g_assert_cmpuint (created, <, 1000000);
  g_assert_cmpint (statvfs (f->state_dir, &after), ==, 0);
  g_assert_cmpuint (after.f_ffree, >, 100000);
  g_clear_pointer (&r, sandstep_test_result_free);

  r = sandstep_test_helper_argv (f, (const char *[]) { "destroy", h, NULL }, 60);
  sandstep_test_assert_status (r, 0);
  sandbox_dir = g_build_filename (f->state_dir, "sandboxes", handle, NULL);
  g_assert_false (g_file_test (sandbox_dir, G_FILE_TEST_EXISTS));
}

/* ---- D. /proc masks ---- */

/* The exact outcome depends on whether the host kernel has the file at all. */
static void
test_proc_masked_file (SecFixture *sf, gconstpointer data)
{
  const SimpleCase *c = ((const Variant *) data)->c;
  const char *path = c->attack;
  SandstepTestFixture *f = sec_begin (sf);
  g_autofree char *handle = NULL;
  g_autofree char *attack = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  gboolean on_host = g_file_test (path, G_FILE_TEST_EXISTS);

  g_test_summary (c->summary);
  if (f == NULL)
    return;
  handle = sec_provision (sf, NULL);
  attack = g_strdup_printf ("stat %s", path);
  r = run_attack (sf, handle, attack);
  /* Absent on the host: absent inside.  Present: the /dev/null mask (char 1:3), never the real file. */
  assert_line (r, on_host ? "type=chr rdev=1:3" : "errno=ENOENT");
  g_clear_pointer (&r, sandstep_test_result_free);
  attack = (g_free (attack), g_strdup_printf ("read %s", path));
  r = run_attack (sf, handle, attack);
  assert_line (r, on_host ? "read=0" : "errno=ENOENT");
}

static void
test_proc_sys_write (SecFixture *sf, gconstpointer data)
{
  const SimpleCase *c = ((const Variant *) data)->c;
  const char *path = c->attack;
  SandstepTestFixture *f = sec_begin (sf);
  g_autofree char *handle = NULL;
  g_autofree char *attack = NULL;
  g_autoptr(SandstepTestResult) r = NULL;

  g_test_summary (c->summary);
  if (f == NULL)
    return;
  handle = sec_provision (sf, NULL);
  attack = g_strdup_printf ("write %s sandstep", path);
  r = run_attack (sf, handle, attack);
  /* The sandbox's uid 0 owns no host file (as root it is a host uid of its own): the file's owner and mode
   * refuse first, the read-only mask stands behind them. */
  assert_line (r, "errno=EACCES");
}

/* ---- D. kill(-1) ---- */

static GPid
spawn_host_marker (SandstepTestFixture *f, const char *seconds)
{
  const char *argv[] = { "/usr/bin/sleep", seconds, NULL };
  g_auto(GStrv) final_argv = sandstep_test_fixture_argv (f, argv);
  g_autoptr(GError) error = NULL;
  GPid pid;

  g_spawn_async (NULL, final_argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid, &error);
  g_assert_no_error (error);
  return pid;
}

static void
test_kill_all (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *seconds = sandstep_test_unique_seconds (60);
  g_autoptr(SandstepTestResult) r = NULL;
  const char *marker[] = { "/usr/bin/sleep", seconds, NULL };
  int status = 0;
  GPid pid;

  pid = spawn_host_marker (f, seconds);
  g_assert_true (sandstep_test_wait_for_process (marker, TRUE, 5));
  handle = sec_provision (sf, NULL);
  r = run_attack (sf, handle, "kill-all");
  assert_line (r, "kill=ok child=KILL visible=2");
  g_assert_cmpint (waitpid (pid, &status, WNOHANG), ==, 0);
  kill (pid, SIGKILL);
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
}

/* ---- E. int 0x80 ---- */

/* What `int $0x80` (i386 getpid) does to a process on this host: 0 if it
 * returns, else the signal that killed it.  Done in a forked child of the
 * test, no attack program involved. */
static int
host_int80_outcome (void)
{
  int status = 0;
  pid_t pid = fork ();

  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      long r;
      __asm__ volatile ("int $0x80" : "=a" (r) : "0" (20L) : "memory");
      _exit (r > 0 ? 0 : 1);
    }
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  return WIFSIGNALED (status) ? WTERMSIG (status) : 0;
}

static void
test_int80 (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  int host = host_int80_outcome ();

  handle = sec_provision (sf, NULL);
  r = run_attack (sf, handle, "int80");
  g_assert_cmpstr (r->out, ==, "");
  if (host == 0)
    sandstep_test_assert_status (r, 128 + SIGSYS);
  else
    {
      g_test_message ("int 0x80 is fatal on this host already (signal %d); the jail must be no more permissive", host);
      sandstep_test_assert_status (r, 128 + host);
    }
}

/* ---- F. host sockets ---- */

static int
listen_tcp_loopback (guint16 *out_port)
{
  struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  socklen_t len = sizeof addr;
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (bind (fd, (struct sockaddr *) &addr, sizeof addr), ==, 0);
  g_assert_cmpint (listen (fd, 16), ==, 0);
  g_assert_cmpint (getsockname (fd, (struct sockaddr *) &addr, &len), ==, 0);
  *out_port = ntohs (addr.sin_port);
  return fd;
}

/* No connection is waiting on @fd (non-blocking listener). */
static void
assert_nobody_connected (int fd)
{
  int c = accept4 (fd, NULL, NULL, SOCK_CLOEXEC);

  if (c >= 0)
    close (c);
  g_assert_cmpint (c, ==, -1);
  g_assert_cmpint (errno, ==, EAGAIN);
}

static void
test_host_loopback_tcp (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *attack = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  guint16 port;
  int fd;

  fd = listen_tcp_loopback (&port);
  handle = sec_provision (sf, "--network=none", NULL);
  attack = g_strdup_printf ("connect 127.0.0.1 %u", port);
  r = run_attack (sf, handle, attack);
  assert_nobody_connected (fd);
  close (fd);
  assert_line (r, "errno=ECONNREFUSED");
}

static void
test_host_abstract_socket (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *name = g_strdup_printf ("sandstep-attack-%d-%08x", (int) getpid (), g_random_int ());
  g_autofree char *handle = NULL;
  g_autofree char *attack = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  int fd;

  memcpy (addr.sun_path + 1, name, strlen (name));
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (bind (fd, (struct sockaddr *) &addr, offsetof (struct sockaddr_un, sun_path) + 1 + strlen (name)),
                   ==, 0);
  g_assert_cmpint (listen (fd, 4), ==, 0);
  handle = sec_provision (sf, "--network=none", NULL);
  attack = g_strdup_printf ("connect-abstract %s", name);
  r = run_attack (sf, handle, attack);
  assert_nobody_connected (fd);
  close (fd);
  assert_line (r, "errno=ECONNREFUSED");
}

static void
test_host_path_socket (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *path = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *attack = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  int fd;

  path = sandstep_test_host_path (f, "s.sock");
  g_assert_cmpuint (strlen (path), <, sizeof addr.sun_path);
  strcpy (addr.sun_path, path);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  g_assert_cmpint (bind (fd, (struct sockaddr *) &addr, sizeof addr), ==, 0);
  g_assert_cmpint (listen (fd, 4), ==, 0);
  handle = sec_provision (sf, "--network=none", NULL);
  attack = g_strdup_printf ("connect-unix %s", path);
  r = run_attack (sf, handle, attack);
  assert_nobody_connected (fd);
  close (fd);
  assert_line (r, "errno=ENOENT");
}

/* ---- H. leaks ---- */

static void
test_inherited_fds (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *path = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  g_autoptr(GError) error = NULL;
  int fds[2];
  int file;

  handle = sec_provision (sf, NULL);
  h = handle_arg (handle);
  path = sandstep_test_host_path (f, "leak.txt");
  g_file_set_contents (path, "leak", -1, &error);
  g_assert_no_error (error);
  file = open (path, O_RDONLY | O_CLOEXEC);
  g_assert_cmpint (file, >=, 0);
  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), ==, 0);
  r = sandstep_test_proc_wait (sandstep_test_spawn_full (f, (const char *[]) { "run", h, "--", "/data/bin/attack fds", NULL },
                                                          (const int[]) { file, fds[0] }, (const int[]) { 7, 9 }, 2),
                               ATTACK_TIMEOUT_S);
  close (file);
  close (fds[0]);
  close (fds[1]);
  assert_line (r, "fds=0,1,2");
}

static void
test_env_secrets (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *secret = g_strdup_printf ("sk-%08x%08x", g_random_int (), g_random_int ());
  g_autofree char *handle = NULL;
  g_autofree char *attack = NULL;
  g_autoptr(SandstepTestResult) r = NULL;

  sandstep_test_fixture_setenv (f, "OPENAI_API_KEY", secret);
  sandstep_test_fixture_setenv (f, "AWS_SECRET_ACCESS_KEY", secret);
  handle = sec_provision (sf, NULL);
  attack = g_strdup_printf ("env-grep %s", secret);
  r = run_attack (sf, handle, attack);
  assert_line (r, "absent");
  g_clear_pointer (&r, sandstep_test_result_free);
  r = run_attack (sf, handle, "env-grep API_KEY");
  assert_line (r, "absent");
  g_clear_pointer (&r, sandstep_test_result_free);
  r = run_attack (sf, handle, "env-grep AWS_");
  assert_line (r, "absent");
}

static void
test_sysv_shm (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  key_t key = (key_t) (0x5353000 | (g_random_int () & 0xfff));
  g_autofree char *handle = NULL;
  g_autofree char *attack = NULL;
  g_autoptr(SandstepTestResult) r = NULL;

  sf->shm_id = shmget (key, 4096, IPC_CREAT | IPC_EXCL | 0666);
  g_assert_cmpint (sf->shm_id, >=, 0);
  handle = sec_provision (sf, NULL);
  attack = g_strdup_printf ("shm get %d", (int) key);
  r = run_attack (sf, handle, attack);
  assert_line (r, "errno=ENOENT");
  g_clear_pointer (&r, sandstep_test_result_free);
  attack = (g_free (attack), g_strdup_printf ("shm at %d", sf->shm_id));
  r = run_attack (sf, handle, attack);
  assert_line (r, "errno=EINVAL");
  g_clear_pointer (&r, sandstep_test_result_free);
  r = run_command (sf, handle, "ipcs -m | grep -c '^0x' || true");
  assert_line (r, "0");
}

/* ---- I. resources and lifecycle ---- */

static void
test_fork_bomb (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  SandstepTestProc *proc;
  gint64 max_lag = 0;
  guint samples = 0;

  if (sandstep_test_skip_without_cgroup ("the process limit"))
    return;
  handle = sec_provision (sf, "--pids=64", NULL);
  h = handle_arg (handle);
  proc = sandstep_test_spawn (f, "run", h, "--", "/data/bin/attack forkbomb 2", NULL);
  while (sandstep_test_proc_running (proc))
    {
      gint64 before = g_get_monotonic_time ();
      g_usleep (10 * 1000);
      max_lag = MAX (max_lag, g_get_monotonic_time () - before - 10 * 1000);
      samples++;
      g_assert_cmpuint (samples, <, 3000);
    }
  r = sandstep_test_proc_wait (proc, ATTACK_TIMEOUT_S);
  g_test_message ("longest lag of the host loop during the bomb: %.1f ms over %u samples", max_lag / 1000.0, samples);
  assert_line (r, "errno=EAGAIN");
  sandstep_test_assert_contains (r->err, "sandstep run: the command hit the sandbox's process limit (pids=64)");
  g_assert_cmpint (max_lag, <, G_USEC_PER_SEC);
}

static void
test_memory_bomb (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autoptr(SandstepTestResult) r = NULL;

  if (sandstep_test_skip_without_cgroup ("the memory limit"))
    return;
  handle = sec_provision (sf, "--memory=64M", NULL);
  r = run_attack (sf, handle, "membomb 2048");
  sandstep_test_assert_status (r, 128 + SIGKILL);
  g_assert_cmpstr (r->out, ==, "");
  sandstep_test_assert_contains (r->err, "sandstep run: the command hit the sandbox's memory limit (memory=64M) "
                                         "and the kernel killed the process using the most");
}

static void
test_cpu_spinner (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autoptr(SandstepTestResult) r = NULL;

  handle = sec_provision (sf, "--cpu-time=1", NULL);
  r = run_attack (sf, handle, "spin");
  sandstep_test_assert_status (r, 128 + SIGXCPU);
  g_assert_cmpstr (r->out, ==, "");
  sandstep_test_assert_contains (r->err, "sandstep run: a process of the command used up its CPU time "
                                         "(cpu-time=1s) and was killed");
  g_assert_cmpfloat (r->elapsed_s, <, 15.0);
}

static void
test_daemon (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *seconds = sandstep_test_unique_seconds (300);
  g_autofree char *command = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  const char *marker[] = { "sleep", seconds, NULL };
  SandstepTestProc *proc;

  handle = sec_provision (sf, NULL);
  h = handle_arg (handle);
  command = g_strdup_printf ("/data/bin/attack daemon %s && sleep 1", seconds);
  proc = sandstep_test_spawn (f, "run", h, "--", command, NULL);
  g_assert_true (sandstep_test_wait_for_process (marker, TRUE, 10));
  r = sandstep_test_proc_wait (proc, ATTACK_TIMEOUT_S);
  assert_line (r, "ok");
  g_assert_true (sandstep_test_wait_for_process (marker, FALSE, 3));
}

static void
test_helper_killed (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *seconds = sandstep_test_unique_seconds (300);
  g_autofree char *command = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  const char *marker[] = { "sleep", seconds, NULL };
  SandstepTestProc *proc;

  handle = sec_provision (sf, NULL);
  h = handle_arg (handle);
  command = g_strdup_printf ("sleep %s", seconds);
  proc = sandstep_test_spawn (f, "run", h, "--", command, NULL);
  g_assert_true (sandstep_test_wait_for_process (marker, TRUE, 10));
  sandstep_test_proc_kill (proc, SIGKILL);
  r = sandstep_test_proc_wait (proc, 10);
  g_assert_cmpint (r->status, ==, 128 + SIGKILL);
  g_assert_true (sandstep_test_wait_for_process (marker, FALSE, 3));
}

static void
test_cross_run_persistence (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *seconds = sandstep_test_unique_seconds (300);
  g_autofree char *attack = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  const char *marker[] = { "sleep", seconds, NULL };

  handle = sec_provision (sf, NULL);
  attack = g_strdup_printf ("listen 4444 %s", seconds);
  r = run_attack (sf, handle, attack);
  assert_line (r, "ok");
  g_assert_true (sandstep_test_wait_for_process (marker, FALSE, 3));
  g_clear_pointer (&r, sandstep_test_result_free);
  r = run_attack (sf, handle, "connect 127.0.0.1 4444");
  assert_line (r, "errno=ECONNREFUSED");
}

static void
test_crash_no_core (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *workspace = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  g_autoptr(GDir) dir = NULL;
  const char *name;

  handle = sec_provision (sf, NULL);
  r = run_attack (sf, handle, "crash");
  sandstep_test_assert_status (r, 128 + SIGSEGV);
  workspace = tree_path (sf, handle, "workspace");
  dir = g_dir_open (workspace, 0, NULL);
  g_assert_nonnull (dir);
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_test_message ("workspace entry after the crash: %s", name);
      g_assert_false (g_str_has_prefix (name, "core"));
    }
}

static void
test_sethostname_host_unchanged (SecFixture *sf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  char before[256] = "", after[256] = "";
  g_autoptr(SandstepTestResult) r = NULL;

  g_assert_cmpint (gethostname (before, sizeof before), ==, 0);
  handle = sec_provision (sf, NULL);
  r = run_attack (sf, handle, "sethostname sandstep-attacker");
  assert_line (r, "sethostname=EPERM nodename=sandstep");
  g_assert_cmpint (gethostname (after, sizeof after), ==, 0);
  g_assert_cmpstr (after, ==, before);
}

/* ---- registration ---- */

/* A case of its own: the runner begins it (skipping where it cannot run),
 * gives its summary, and calls it with the fixture ready. */
typedef struct {
  const char *name;
  void (*func) (SecFixture *sf, SandstepTestFixture *f, gconstpointer data);
  gboolean as_user;
  const char *summary;
} SpecialCase;

static const SpecialCase special_cases[] = {
  { "C13-write-workspace", test_write_workspace, TRUE,
    "the workspace stays writable (the one place that must be), and the file lands in the "
    "sandbox's tree on the host" },
  { "C14-trap-symlinks", test_trap_symlinks, TRUE,
    "links planted in the workspace (-> /etc/shadow, -> ../../etc/passwd, -> a host "
    "directory) never lead host tools outside the sandbox: get, ls and export refuse (69)" },
  { "C14-trap-put-through-symlink", test_trap_put_through_symlink, TRUE,
    "`sandstep put` onto a workspace link that points at a host directory writes nothing "
    "there (69)" },
  { "C20-trap-fifo", test_trap_fifo, TRUE,
    "a FIFO planted in the workspace hangs no host tool: get, ls and export refuse it at "
    "once (69) and export writes nothing" },
  { "C20-trap-sparse", test_trap_sparse, FALSE,
    "a 10 GB sparse file is refused at once by get (5 MiB cap) and export (1 GiB cap), and "
    "no destination appears" },
  { "C21-disk-filler", test_disk_filler, TRUE,
    "filling the disk with --disk=1M: the writer is killed by SIGXFSZ, the message names "
    "the disk limit, and the file stops at 1 MiB" },
  { "C22-inode-exhaustion", test_inode_exhaustion, FALSE,
    "inode exhaustion ends contained: in /dev/shm (tmpfs) the inodes count against the "
    "memory limit and the flooder is killed naming it; in the persistent workspace (no inode "
    "quota on the host's file system) the cpu-time limit ends it, or the memory limit where the "
    "state directory is on tmpfs, each naming its limit; the host keeps free inodes, "
    "and destroy reclaims every file" },
  { "D26-kill-all", test_kill_all, TRUE,
    "kill(-1, SIGKILL) inside reaches only the jail's processes: a host process of the same "
    "uid survives, and only 2 pids are visible" },
  { "E30-int80", test_int80, TRUE,
    "an i386 syscall through int 0x80 kills the process: SIGSYS from the filter's arch check, "
    "or SIGSEGV where this kernel has no 32-bit gate at all (as on the host)" },
  { "F34-host-loopback-tcp", test_host_loopback_tcp, TRUE,
    "a TCP service on the host's 127.0.0.1 is unreachable (the jail has its own loopback): "
    "ECONNREFUSED, and the service sees no connection" },
  { "F35-host-abstract-socket", test_host_abstract_socket, TRUE,
    "an abstract unix socket bound on the host is unreachable (per network namespace): "
    "ECONNREFUSED" },
  { "F36-host-path-socket", test_host_path_socket, TRUE,
    "a unix socket on the host's file system is not in the jail: ENOENT" },
  { "G45-setuid-root-data-mount", test_setuid_root_data_mount, FALSE,
    "a set-uid-root binary (owned by the host's root, mode 4755) on a data mount gains "
    "nothing: euid stays the jail's 0, no capability, NNP still set" },
  { "H47-inherited-fds", test_inherited_fds, TRUE,
    "fds handed to the helper beyond 0-2 (a file as 7, a socket as 9) are closed in the "
    "command: it holds 0, 1 and 2 only" },
  { "H48-env-secrets", test_env_secrets, TRUE,
    "secrets in the helper's environment (*_API_KEY, AWS_*) do not reach the command: "
    "neither their names nor their values" },
  { "H50-sysv-shm", test_sysv_shm, TRUE,
    "a SysV shared memory segment of the host is invisible: shmget by its key gives "
    "ENOENT, shmat by its id EINVAL, ipcs lists nothing" },
  { "I51-fork-bomb", test_fork_bomb, FALSE,
    "a fork bomb (every process forking for 2 s) with --pids=64 is held at the limit (fork "
    "fails with EAGAIN), ends, the message names the process limit, and the host stays responsive "
    "(this test's 10 ms loop never lags 1 s meanwhile)" },
  { "I52-memory-bomb", test_memory_bomb, FALSE,
    "a memory bomb with --memory=64M is killed by the OOM killer inside the jail, and the "
    "message names the memory limit" },
  { "I53-cpu-spinner", test_cpu_spinner, TRUE,
    "a CPU spinner with --cpu-time=1 is killed by SIGXCPU after about a second, and the "
    "message names cpu-time" },
  { "I54-daemon", test_daemon, TRUE,
    "a double-forked daemon (new session, SIGTERM and SIGHUP ignored) dies with the command" },
  { "I55-helper-killed", test_helper_killed, TRUE,
    "SIGKILL to the helper tears the jail down: the command's processes are gone at once" },
  { "I56-cross-run-persistence", test_cross_run_persistence, TRUE,
    "nothing of one command survives into the next: its listener (held by a detached "
    "child) is gone, and so is the child" },
  { "I57-crash-no-core", test_crash_no_core, TRUE,
    "a crashing command (SIGSEGV) leaves no core file in its workspace" },
  { "I58-sethostname-host-unchanged", test_sethostname_host_unchanged, TRUE,
    "sethostname inside changes nothing on the host (refused, and the host's name is the same)" },
};

/* /proc cases whose expected line depends on the host or the variant. */
static const SimpleCase proc_mask_cases[] = {
  { "D27-proc-sysrq-trigger", "/proc/sysrq-trigger", NULL, TRUE,
    "/proc/sysrq-trigger: absent where the host kernel has none, else the /dev/null mask (never the real file)" },
  { "D27-proc-kcore", "/proc/kcore", NULL, TRUE,
    "/proc/kcore: absent where the host kernel has none, else the /dev/null mask" },
  { "D27-proc-kmsg", "/proc/kmsg", NULL, TRUE, "/proc/kmsg: masked by /dev/null (reads nothing)" },
  { "D27-proc-kallsyms", "/proc/kallsyms", NULL, TRUE, "/proc/kallsyms: masked by /dev/null" },
  { "D27-proc-keys", "/proc/keys", NULL, TRUE, "/proc/keys: masked by /dev/null" },
};

static const SimpleCase proc_sys_cases[] = {
  { "D27-proc-sys-core-pattern", "/proc/sys/kernel/core_pattern", NULL, TRUE,
    "kernel.core_pattern (a pipe there runs as host root) cannot be written: EROFS as root, EACCES "
    "otherwise" },
  { "D27-proc-sys-hostname", "/proc/sys/kernel/hostname", NULL, TRUE,
    "/proc/sys/kernel/hostname cannot be written: EROFS as root, EACCES otherwise" },
  { "D27-proc-sys-drop-caches", "/proc/sys/vm/drop_caches", NULL, TRUE,
    "/proc/sys/vm/drop_caches cannot be written: EROFS as root, EACCES otherwise" },
};

static void
add_variant (const char *prefix, const char *name, gconstpointer c, RunAs as,
             void (*func) (SecFixture *, gconstpointer))
{
  Variant *v = g_new0 (Variant, 1);  /* lives as long as the program */
  g_autofree char *path = g_strconcat (prefix, name, NULL);

  v->c = c;
  v->as = as;
  g_test_add (path, SecFixture, v, variant_setup, func, variant_teardown);
}

static void
special_run (SecFixture *sf, gconstpointer data)
{
  const Variant *v = data;
  const SpecialCase *s = v->c;
  SandstepTestFixture *f = sec_begin (sf);

  g_test_summary (s->summary);
  if (f == NULL)
    return;
  s->func (sf, f, NULL);
}

int
main (int argc, char **argv)
{
  static const struct { const char *prefix; RunAs as; } variants[] = {
    { "/security/as-caller/", AS_CALLER },
    { "/security/as-user/", AS_USER },
  };

  g_test_init (&argc, &argv, NULL);
  /* A failed expectation fails its case and the battery goes on: every result reaches the TAP stream. */
  g_test_set_nonfatal_assertions ();
  for (gsize v = 0; v < G_N_ELEMENTS (variants); v++)
    {
      const char *prefix = variants[v].prefix;
      RunAs as = variants[v].as;

      for (gsize i = 0; i < G_N_ELEMENTS (terminal_cases); i++)
        add_variant (prefix, terminal_cases[i].name, &terminal_cases[i], as, test_terminal);
      for (gsize i = 0; i < G_N_ELEMENTS (simple_cases); i++)
        if (as == AS_CALLER || simple_cases[i].as_user)
          add_variant (prefix, simple_cases[i].name, &simple_cases[i], as, simple_run);
      for (gsize i = 0; i < G_N_ELEMENTS (proc_mask_cases); i++)
        add_variant (prefix, proc_mask_cases[i].name, &proc_mask_cases[i], as, test_proc_masked_file);
      for (gsize i = 0; i < G_N_ELEMENTS (proc_sys_cases); i++)
        add_variant (prefix, proc_sys_cases[i].name, &proc_sys_cases[i], as, test_proc_sys_write);
      for (gsize i = 0; i < G_N_ELEMENTS (special_cases); i++)
        if (as == AS_CALLER || special_cases[i].as_user)
          add_variant (prefix, special_cases[i].name, &special_cases[i], as, special_run);
    }
  return g_test_run ();
}
