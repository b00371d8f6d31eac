/* sandstep-supervisor-network.c: a live sandbox's network helpers; see sandstep-supervisor-network.h. */
#include "sandstep-supervisor-network.h"
#include "sandstep-supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-uids.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* How long the user-mode network stack may take to come up. */
#define NETWORK_TIMEOUT_MS 10000

void
sandstep_supervisor_child_end (SupervisorChild *child)
{
  if (child->pidfd < 0)
    return;
  syscall (SYS_pidfd_send_signal, child->pidfd, SIGKILL, NULL, 0);
  while (waitid (P_PIDFD, child->pidfd, &(siginfo_t) { 0 }, WEXITED) < 0 && errno == EINTR)
    ;
  close (child->pidfd);
  child->pidfd = -1;
  child->pid = 0;
}

static void
helper_child_setup (int keep_from, const int *keep, int n_keep)
{
  sigset_t none;

  prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  /* Nothing of ours: an ignored SIGPIPE survives exec, and pasta takes it for a failure. */
  for (int sig = 1; sig < NSIG; sig++)
    signal (sig, SIG_DFL);
  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  for (int i = 0; i < n_keep; i++)
    if (keep[i] >= 0 && dup2 (keep[i], keep_from + i) < 0)
      _exit (127);
  syscall (SYS_close_range, keep_from + n_keep, ~0U, 0);
}

/* Forks and execs @argv with @keep at fds 3, 4, ... and /dev/null as stdio. */
static gboolean
spawn_helper (char **env, char **argv, const int *keep, int n_keep, SupervisorChild *out, GError **error)
{
  struct clone_args args = { .flags = CLONE_PIDFD, .exit_signal = SIGCHLD };
  int pidfd = -1;
  pid_t pid;

  args.pidfd = (guint64) (guintptr) &pidfd;
  pid = syscall (SYS_clone3, &args, sizeof args);
  if (pid == 0)
    {
      int null = open ("/dev/null", O_RDWR);
      if (null < 0 || dup2 (null, 0) < 0 || dup2 (null, 1) < 0 || dup2 (null, 2) < 0)
        _exit (127);
      helper_child_setup (3, keep, n_keep);
      execve (argv[0], argv, env);
      _exit (127);
    }
  if (pid < 0)
    return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errno,
                                 "Could not start '%s' for the sandbox", argv[0]);
  out->pid = pid;
  out->pidfd = pidfd;
  return TRUE;
}

/* network=open as root: pasta's sockets are the host's, so a sandbox that
 * dials any address of the host (a second NIC, docker0, a VPN, not only
 * loopback and the gateway) would reach what listens there.  One host-side
 * rule refuses every local destination to the gids sandstep gives
 * sandboxes, which pasta runs as (with uid 0 where only root may open
 * /dev/net/tun): for the whole range, so nothing is left behind when a
 * sandbox ends, and set again by each start as one atomic nft transaction
 * (the same rule, never a second copy). */
#define HOST_FILTER_TABLE "sandstep"
#define HOST_FILTER_CHAIN "open-network-no-host-addresses"

static gboolean
close_host_addresses (char **env, guint32 pasta_gid, GError **error)
{
  static const char *const nft_paths[] = { "/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft" };
  SandstepUidRange range = sandstep_uids_range ();
  g_autofree char *nft = NULL;
  g_autofree char *rules = NULL;
  char *argv[] = { NULL, (char *) "-f", (char *) "/proc/self/fd/3", NULL };
  SupervisorChild child = { .pidfd = -1 };
  siginfo_t info = { 0 };
  struct pollfd pfd;
  int memfd, keep[1];
  gboolean ok;

  /* The sandbox's outer gid comes from this range (sandstep-uids.c), unless /etc/subgid changed since. */
  if (pasta_gid < range.gid_base || pasta_gid - range.gid_base >= range.count)
    return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                           "The sandbox's gid %u is outside sandstep's sandbox gids (%u-%u), so no host-side rule "
                           "could keep --network=open from the host's own addresses; was /etc/subgid's '"
                           SANDSTEP_UIDS_USER "' range changed? Destroy and provision the sandbox again",
                           pasta_gid, range.gid_base, range.gid_base + range.count - 1);
  for (gsize i = 0; i < G_N_ELEMENTS (nft_paths) && nft == NULL; i++)
    if (access (nft_paths[i], X_OK) == 0)
      nft = g_strdup (nft_paths[i]);
  if (nft == NULL)
    nft = g_find_program_in_path ("nft");
  if (nft == NULL)
    return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED,
                           "--network=open as root needs nftables' 'nft' to keep the sandbox from the host's own "
                           "addresses, and it is not installed (apt-get install nftables); or provision with "
                           "--network=none or --allow=HOST");
  rules = g_strdup_printf ("table inet " HOST_FILTER_TABLE " {\n"
                           "  chain " HOST_FILTER_CHAIN " { type filter hook output priority filter; policy accept; }\n"
                           "}\n"
                           "flush chain inet " HOST_FILTER_TABLE " " HOST_FILTER_CHAIN "\n"
                           /* A reset for TCP, so that pasta's connect fails at once (an ICMP error is soft to a
                            * SYN, retried until the sandbox gives up). */
                           "add rule inet " HOST_FILTER_TABLE " " HOST_FILTER_CHAIN " meta skgid %u-%u "
                           "fib daddr type { local, broadcast, anycast, multicast } meta l4proto tcp counter "
                           "reject with tcp reset\n"
                           "add rule inet " HOST_FILTER_TABLE " " HOST_FILTER_CHAIN " meta skgid %u-%u "
                           "fib daddr type { local, broadcast, anycast, multicast } counter reject\n",
                           range.gid_base, range.gid_base + range.count - 1, range.gid_base,
                           range.gid_base + range.count - 1);
  memfd = memfd_create ("sandstep-nft", MFD_CLOEXEC);
  if (memfd < 0 || write (memfd, rules, strlen (rules)) != (gssize) strlen (rules))
    {
      int errsv = errno;
      if (memfd >= 0)
        close (memfd);
      return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errsv,
                                   "Could not write the sandbox's host-side network rule");
    }
  argv[0] = nft;
  keep[0] = memfd;
  ok = spawn_helper (env, argv, keep, 1, &child, error);
  close (memfd);
  if (!ok)
    return FALSE;
  pfd = (struct pollfd) { .fd = child.pidfd, .events = POLLIN };
  if (poll (&pfd, 1, NETWORK_TIMEOUT_MS) <= 0)
    {
      sandstep_supervisor_child_end (&child);
      return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                             "'%s' did not set the sandbox's host-side network rule within %d s; check that nftables "
                             "works here, or provision with --network=none or --allow=HOST", nft,
                             NETWORK_TIMEOUT_MS / 1000);
    }
  while (waitid (P_PIDFD, child.pidfd, &info, WEXITED) < 0 && errno == EINTR)
    ;
  close (child.pidfd);
  if (info.si_code != CLD_EXITED || info.si_status != 0)
    return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                           "'%s -f' could not set the sandbox's host-side network rule (status %d); check that "
                           "nftables works here (the kernel's nf_tables with its fib expression), or provision "
                           "with --network=none or --allow=HOST", nft, info.si_status);
  return TRUE;
}

/* pasta says it is up by writing its pid to the file --pid names.  It opens that file after switching
 * to its --runas user (passt 0.0~git20230309, Debian 12's), and passt's AppArmor profile lets it write
 * only files of its own under /tmp or a home: so a FIFO of that user's in a directory of that user's
 * under /tmp (never TMPDIR, which the profile does not know), read here.  Returns its read end (or -1,
 * errno set) and the directory, for pasta_ready_remove(). */
static int
pasta_ready_open (uid_t uid, gid_t gid, char **out_dir, char **out_fifo)
{
  g_autofree char *dir = g_strdup ("/tmp/sandstep-pasta-XXXXXX");
  g_autofree char *fifo = NULL;
  int fd, errsv;

  if (g_mkdtemp_full (dir, 0700) == NULL)
    return -1;
  fifo = g_build_filename (dir, "ready", NULL);
  if ((geteuid () != uid && chown (dir, uid, gid) < 0) || mkfifo (fifo, 0600) < 0 ||
      (geteuid () != uid && chown (fifo, uid, gid) < 0) ||
      /* Non-blocking: no writer yet; no POLLHUP either until one has come and gone. */
      (fd = open (fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
    {
      errsv = errno;
      unlink (fifo);
      rmdir (dir);
      errno = errsv;
      return -1;
    }
  *out_dir = g_steal_pointer (&dir);
  *out_fifo = g_steal_pointer (&fifo);
  return fd;
}

static void
pasta_ready_remove (char *dir, char *fifo)
{
  unlink (fifo);
  rmdir (dir);
  g_free (fifo);
  g_free (dir);
}

/* network=open: pasta joins the sandbox's network namespace to a user-mode
 * stack on the host side, with no port mapped either way and the gateway
 * not mapped to the host: the sandbox reaches the network as a process of
 * the sandbox's uid would, never the host's loopback services. */
gboolean
sandstep_supervisor_start_pasta (const char *pasta_path, char **env, int init_pid, SandstepJail *jail,
                                 SupervisorChild *out, GError **error)
{
  g_autofree char *netns_path = g_strdup_printf ("/proc/%d/ns/net", init_pid);
  g_autofree char *userns_path = g_strdup_printf ("/proc/%d/ns/user", init_pid);
  g_autofree char *runas = NULL;
  char *ready_dir = NULL, *ready_fifo = NULL;
  int ready, keep[2];
  char *argv[28];
  int n = 0;
  char buf[32];
  struct pollfd pfd[2];
  gboolean spawned, ok = FALSE;
  uid_t uid = geteuid ();
  gid_t gid = getegid ();

  if (uid == 0)
    {
      /* The sandbox's own uid owns its namespaces (sandstep-jail.c): the stack runs as that, unless the
       * host keeps /dev/net/tun to root (0600; Debian's default is 0666), where it runs as root, within
       * pasta's own confinement.  Its gid is the sandbox's either way: the host-side rule knows it by that. */
      struct stat tun;
      guint32 outer_uid, outer_gid;
      sandstep_jail_outer_ids (jail, &outer_uid, &outer_gid);
      if (stat ("/dev/net/tun", &tun) == 0 && (tun.st_mode & 0006) != 0006)
        outer_uid = 0;
      if (!close_host_addresses (env, outer_gid, error))
        return FALSE;
      uid = outer_uid;
      gid = outer_gid;
      runas = g_strdup_printf ("%u:%u", (unsigned) uid, (unsigned) gid);
    }

  /* The namespaces as fds: pasta, with fewer rights than this process, could not open init's. */
  keep[0] = open (netns_path, O_RDONLY | O_CLOEXEC);
  keep[1] = open (userns_path, O_RDONLY | O_CLOEXEC);
  ready = keep[0] >= 0 && keep[1] >= 0 ? pasta_ready_open (uid, gid, &ready_dir, &ready_fifo) : -1;
  if (ready < 0)
    {
      int errsv = errno;
      for (int i = 0; i < 2; i++)
        if (keep[i] >= 0)
          close (keep[i]);
      return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errsv,
                                   "Could not start the sandbox's network");
    }
  argv[n++] = (char *) pasta_path;
  argv[n++] = (char *) "--config-net";
  argv[n++] = (char *) "--no-map-gw";
  /* Its interface is named as a container's, never after the host's (pasta's default): nothing of the host's
   * names inside. */
  argv[n++] = (char *) "-I";
  argv[n++] = (char *) "eth0";
  argv[n++] = (char *) "-t";
  argv[n++] = (char *) "none";
  argv[n++] = (char *) "-u";
  argv[n++] = (char *) "none";
  argv[n++] = (char *) "-T";
  argv[n++] = (char *) "none";
  argv[n++] = (char *) "-U";
  argv[n++] = (char *) "none";
  argv[n++] = (char *) "--foreground";
  argv[n++] = (char *) "--quiet";
  argv[n++] = (char *) "--netns";
  argv[n++] = (char *) "/proc/self/fd/3";
  argv[n++] = (char *) "--userns";
  argv[n++] = (char *) "/proc/self/fd/4";
  /* It writes its pid once the namespace's interface is up. */
  argv[n++] = (char *) "--pid";
  argv[n++] = ready_fifo;
  if (runas != NULL)
    {
      argv[n++] = (char *) "--runas";
      argv[n++] = runas;
    }
  argv[n] = NULL;
  spawned = spawn_helper (env, argv, keep, 2, out, error);
  for (int i = 0; i < 2; i++)
    close (keep[i]);
  if (spawned)
    {
      /* Up when it writes; gone if it exits first. */
      pfd[0] = (struct pollfd) { .fd = ready, .events = POLLIN };
      pfd[1] = (struct pollfd) { .fd = out->pidfd, .events = POLLIN };
      ok = poll (pfd, 2, NETWORK_TIMEOUT_MS) > 0 && (pfd[0].revents & POLLIN) && read (ready, buf, sizeof buf) > 0;
    }
  close (ready);
  pasta_ready_remove (ready_dir, ready_fifo);
  if (!spawned)
    return FALSE;
  if (!ok)
    {
      sandstep_supervisor_child_end (out);
      if (!sandstep_network_open_usable (error))
        return FALSE;
      return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                             "The sandbox's network stack ('%s') did not come up; check that the passt "
                             "package works here, or provision with --network=none", pasta_path);
    }
  return TRUE;
}

gboolean
sandstep_network_open_usable (GError **error)
{
  if (geteuid () == 0 || access ("/dev/net/tun", R_OK | W_OK) == 0)
    return TRUE;
  return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED,
                         "--network=open needs /dev/net/tun for its user-mode network stack, and this user may "
                         "not open it (%s); make it mode 0666 (udev's default), run as root, or provision "
                         "with --network=none or --allow=HOST", g_strerror (errno));
}

/* network=allow: the egress proxy, a helper of its own (it resolves names
 * on the host); init hands it every connection made to the proxy port. */
gboolean
sandstep_supervisor_start_proxy (const char *core_path, char **env, const char *handle, SupervisorChild *out,
                                 int *out_notices, int *out_egress, GError **error)
{
  char *argv[] = { (char *) core_path, (char *) "--egress", (char *) handle, NULL };
  int pair[2], notices[2];
  int keep[2];
  gboolean ok;

  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
    return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errno,
                                 "Could not start the sandbox's egress proxy");
  if (pipe2 (notices, O_CLOEXEC | O_NONBLOCK) < 0)
    {
      close (pair[0]);
      close (pair[1]);
      return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errno,
                                   "Could not start the sandbox's egress proxy");
    }
  keep[0] = pair[0];
  keep[1] = notices[1];
  ok = spawn_helper (env, argv, keep, 2, out, error);
  close (pair[0]);
  close (notices[1]);
  if (!ok)
    {
      close (pair[1]);
      close (notices[0]);
      return FALSE;
    }
  *out_notices = notices[0];
  *out_egress = pair[1];
  return TRUE;
}
