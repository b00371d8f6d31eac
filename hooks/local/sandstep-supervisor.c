/* sandstep-supervisor.c: one live sandbox's supervisor; see sandstep-supervisor.h.
 *
 * Single-threaded and poll-driven: the jail is built with clone3(), which
 * wants a single thread, and every wait is one of the fds below.  It is
 * linked statically with GLib's core only (no GIO, no JSON): the helper
 * compiled everything it needs into its plan.
 */
#include "sandstep-supervisor.h"
#include "sandstep-units.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-cgroup.h"
#include "sandstep-error.h"
#include "sandstep-jail-init.h"
#include "sandstep-jail.h"
#include "sandstep-run-wire.h"
#include "sandstep-step.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* How often a sandbox whose first process was killed as it started is built again. */
#define BUILD_RETRIES 3

/* How long a caller has to send its request once connected. */
#define REQUEST_TIMEOUT_MS 2000
/* How long the user-mode network stack may take to come up. */
#define NETWORK_TIMEOUT_MS 10000
/* After KILL, how long init may take to report before it is killed itself. */
#define KILL_GRACE_US (5 * G_USEC_PER_SEC)

typedef struct {
  int pid;
  int pidfd;
} Child;

typedef struct {
  int conn;
  gboolean own_claim;      /* the supervisor holds the claim for the caller */
  int caller_claim;        /* the caller's claim fd, held while its command runs */
  SandstepStep step;       /* the make recipe line it serves, when the claim is ours */
  char *holder;
  gint64 deadline;         /* monotonic µs */
  gint64 kill_deadline;    /* after KILL: when init is given up on */
  gboolean timed_out;
  gboolean caller_gone;
  gboolean killed;
  gboolean interrupted;
  double applied_timeout_s;
  gboolean clamped;
  guint64 oom_kills, pids_max;
} Command;

typedef struct {
  char *handle;
  GVariant *plan;
  char *owner;
  char *default_owner;
  char *default_holder;
  char *network;
  guint64 memory;
  gint64 pids, cpu_time_s;
  guint64 disk;
  char *core_path;         /* sandstep-core: the egress proxy, and the reclaim of a released sandbox */
  char *pasta_path;
  char **helper_env;

  int store_fd;
  int dir_fd;              /* the sandbox's directory */
  int claim_fd;
  guint64 start_time;      /* ours, for the claim: a pid is named with it */
  gboolean jail_is_peer;   /* the sandbox's uid is ours: its processes could reach us but for the namespace */
  int listener;
  int watch;
  int signals;
  gint64 expires;
  gboolean released;
  gint64 idle_deadline;
  gboolean done;
  gboolean reclaim;        /* a release came while a command ran under our claim: destroying is ours */
  int stop_signal;

  SandstepJail *jail;
  SandstepCgroup *cgroup;
  SandstepJailProcess init;
  GArray *sources;         /* as they were when the sandbox was built */
  gboolean stale;          /* rebuild before the next command */
  Child pasta;
  Child proxy;
  int notices;             /* the proxy's refusal lines */
  GString *notice_text;

  Command *current;
} Supervisor;

/* ---- small things ---- */

static gint64
now_unix (void)
{
  return g_get_real_time () / G_USEC_PER_SEC;
}

static void
child_end (Child *child)
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

static gboolean
pidfd_ended (int pidfd)
{
  struct pollfd pfd = { .fd = pidfd, .events = POLLIN };

  return pidfd >= 0 && poll (&pfd, 1, 0) > 0;
}

/* @text as a JSON string: the claim file is JSON, and a holder's name is the caller's. */
static void
append_json_string (GString *out, const char *text)
{
  g_string_append_c (out, '"');
  for (const guchar *p = (const guchar *) text; *p; p++)
    if (*p == '"' || *p == '\\')
      g_string_append_printf (out, "\\%c", *p);
    else if (*p < 0x20 || *p == 0x7f)
      g_string_append_printf (out, "\\u%04x", *p);
    else
      g_string_append_c (out, *p);
  g_string_append_c (out, '"');
}

static guint64
start_time (pid_t pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", (int) pid);
  g_autofree char *text = NULL;
  const char *p;

  if (!g_file_get_contents (path, &text, NULL, NULL) || (p = strrchr (text, ')')) == NULL)
    return 0;
  for (int field = 2; field < 22 && p != NULL; field++)
    p = strchr (p + 1, ' ');
  return p != NULL ? g_ascii_strtoull (p + 1, NULL, 10) : 0;
}

/* Seconds as `sandstep run` reads them (sandstep_parse_seconds()): the whole text a finite number, above 0
 * unless @allow_zero, at most ten years; anything else goes to the core, which says what is wrong. */
static gboolean
parse_seconds (const char *text, gboolean allow_zero, double *out)
{
  char *end = NULL;
  double value;

  if (text[0] == '\0' || g_ascii_isspace (text[0]))
    return FALSE;
  value = g_ascii_strtod (text, &end);
  if (*end != '\0' || !isfinite (value) || value < 0 || (value == 0 && !allow_zero) || value > SANDSTEP_MAX_DURATION_S)
    return FALSE;
  *out = value;
  return TRUE;
}

/* ---- the process state of a service, not of whoever started it ---- */

static void
reset_limit (int resource, const char *label, const char *limits)
{
  const char *line = limits != NULL ? strstr (limits, label) : NULL;
  struct rlimit now, want;
  char soft[32] = "", hard[32] = "";

  if (line == NULL || sscanf (line + strlen (label), "%31s %31s", soft, hard) != 2 || getrlimit (resource, &now) < 0)
    return;
  want.rlim_cur = strcmp (soft, "unlimited") == 0 ? RLIM_INFINITY : g_ascii_strtoull (soft, NULL, 10);
  want.rlim_max = strcmp (hard, "unlimited") == 0 ? RLIM_INFINITY : g_ascii_strtoull (hard, NULL, 10);
  if (want.rlim_cur > want.rlim_max)
    want.rlim_cur = want.rlim_max;
  /* Raising a hard limit takes CAP_SYS_RESOURCE; without it, as close as allowed. */
  if (setrlimit (resource, &want) == 0 || want.rlim_max <= now.rlim_max)
    return;
  want.rlim_max = now.rlim_max;
  want.rlim_cur = MIN (want.rlim_cur, want.rlim_max);
  setrlimit (resource, &want);
}

static void
own_process_state (void)
{
  static const struct { int resource; const char *label; } limits[] = {
    { RLIMIT_CPU, "Max cpu time" }, { RLIMIT_FSIZE, "Max file size" }, { RLIMIT_DATA, "Max data size" },
    { RLIMIT_STACK, "Max stack size" }, { RLIMIT_CORE, "Max core file size" }, { RLIMIT_RSS, "Max resident set" },
    { RLIMIT_NPROC, "Max processes" }, { RLIMIT_NOFILE, "Max open files" }, { RLIMIT_MEMLOCK, "Max locked memory" },
    { RLIMIT_AS, "Max address space" }, { RLIMIT_LOCKS, "Max file locks" }, { RLIMIT_SIGPENDING, "Max pending signals" },
    { RLIMIT_MSGQUEUE, "Max msgqueue size" }, { RLIMIT_NICE, "Max nice priority" },
    { RLIMIT_RTPRIO, "Max realtime priority" }, { RLIMIT_RTTIME, "Max realtime timeout" },
  };
  g_autofree char *system_limits = NULL;
  cpu_set_t all;

  umask (022);
  /* A lowered priority can only be undone by root; then it stays. */
  setpriority (PRIO_PROCESS, 0, 0);
  CPU_ZERO (&all);
  for (int i = 0; i < CPU_SETSIZE; i++)
    CPU_SET (i, &all);
  sched_setaffinity (0, sizeof all, &all);
  /* The system's defaults are pid 1's. */
  g_file_get_contents ("/proc/1/limits", &system_limits, NULL, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS (limits); i++)
    reset_limit (limits[i].resource, limits[i].label, system_limits);
}

/* One of sandstep's programs: beside this one, in a build tree as once installed. */
static char *
own_program (const char *name)
{
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree char *dir = self != NULL ? g_path_get_dirname (self) : NULL;
  g_autofree char *beside = dir != NULL ? g_build_filename (dir, name, NULL) : NULL;

  if (beside != NULL && access (beside, X_OK) == 0)
    return g_steal_pointer (&beside);
  return g_build_filename (SANDSTEP_LIBEXECDIR, name, NULL);
}

/* ---- the plan ---- */

static GVariant *
read_plan (int fd, GError **error)
{
  g_autoptr(GByteArray) data = g_byte_array_new ();
  guint8 buf[65536];
  ssize_t n;

  while ((n = pread (fd, buf, sizeof buf, data->len)) > 0)
    g_byte_array_append (data, buf, n);
  if (n < 0 || data->len == 0)
    {
      sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, n < 0 ? errno : ENODATA,
                            "Could not read the sandbox's plan");
      return NULL;
    }
  {
    g_autoptr(GBytes) bytes = g_byte_array_free_to_bytes (g_steal_pointer (&data));
    g_autoptr(GVariant) plan = g_variant_new_from_bytes (G_VARIANT_TYPE_VARDICT, bytes, FALSE);
    return g_variant_get_normal_form (plan);
  }
}

static gboolean
load_plan (Supervisor *s, GError **error)
{
  g_autoptr(GVariant) jail = NULL;
  const char *owner, *default_owner, *default_holder, *network, *pasta;
  g_autoptr(GVariant) env = NULL;

  s->plan = read_plan (SANDSTEP_SUPERVISOR_PLAN_FD, error);
  if (s->plan == NULL)
    return FALSE;
  if (!g_variant_lookup (s->plan, "owner", "^&ay", &owner) ||
      !g_variant_lookup (s->plan, "default-owner", "^&ay", &default_owner) ||
      !g_variant_lookup (s->plan, "default-holder", "^&ay", &default_holder) ||
      !g_variant_lookup (s->plan, "network", "&s", &network) ||
      !g_variant_lookup (s->plan, "limits", "(txxt)", &s->memory, &s->pids, &s->cpu_time_s, &s->disk) ||
      !g_variant_lookup (s->plan, "pasta", "^&ay", &pasta) ||
      (env = g_variant_lookup_value (s->plan, "helper-env", G_VARIANT_TYPE_BYTESTRING_ARRAY)) == NULL ||
      (jail = g_variant_lookup_value (s->plan, "jail", G_VARIANT_TYPE_VARDICT)) == NULL)
    return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                           "The sandbox's plan is damaged (a member is missing); reinstall sandstep if this persists");
  s->owner = g_strdup (owner);
  s->default_owner = g_strdup (default_owner);
  s->default_holder = g_strdup (default_holder);
  s->network = g_strdup (network);
  s->core_path = own_program ("sandstep-core");
  s->pasta_path = g_strdup (pasta);
  s->helper_env = g_variant_dup_bytestring_array (env, NULL);
  s->jail = sandstep_jail_from_variant (jail, error);
  return s->jail != NULL;
}

/* "EXPIRES RELEASED": the record's lifetime, which the store keeps beside it for us. */
static gboolean
read_lifetime (Supervisor *s)
{
  char buf[64];
  int fd = openat (s->dir_fd, "lifetime", O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  ssize_t n = fd >= 0 ? read (fd, buf, sizeof buf - 1) : -1;
  gint64 expires;
  int released;

  if (fd >= 0)
    close (fd);
  if (n <= 0)
    return FALSE;
  buf[n] = '\0';
  if (sscanf (buf, "%" G_GINT64_FORMAT " %d", &expires, &released) != 2)
    return FALSE;
  s->expires = expires;
  s->released = released != 0;
  return TRUE;
}

static gboolean
alive (Supervisor *s)
{
  return now_unix () < s->expires;
}

/* ---- the sandbox's network helpers ---- */

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
spawn_helper (Supervisor *s, char **argv, const int *keep, int n_keep, Child *out, GError **error)
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
      execve (argv[0], argv, s->helper_env);
      _exit (127);
    }
  if (pid < 0)
    return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errno,
                                 "Could not start '%s' for the sandbox", argv[0]);
  out->pid = pid;
  out->pidfd = pidfd;
  return TRUE;
}

/* network=open: pasta joins the sandbox's network namespace to a user-mode
 * stack on the host side, with no port mapped either way and the gateway
 * not mapped to the host: the sandbox reaches the network as a process of
 * the sandbox's uid would, never the host's loopback services. */
static gboolean
start_pasta (Supervisor *s, GError **error)
{
  g_autofree char *netns_path = g_strdup_printf ("/proc/%d/ns/net", s->init.pid);
  g_autofree char *userns_path = g_strdup_printf ("/proc/%d/ns/user", s->init.pid);
  g_autofree char *runas = NULL;
  int ready[2], keep[3];
  char *argv[24];
  int n = 0;
  char buf[32];
  struct pollfd pfd;
  gboolean ok;

  /* The namespaces as fds: pasta, with fewer rights than this process, could not open init's. */
  keep[1] = open (netns_path, O_RDONLY | O_CLOEXEC);
  keep[2] = open (userns_path, O_RDONLY | O_CLOEXEC);
  if (keep[1] < 0 || keep[2] < 0 || pipe2 (ready, O_CLOEXEC) < 0)
    {
      int errsv = errno;
      for (int i = 1; i < 3; i++)
        if (keep[i] >= 0)
          close (keep[i]);
      return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errsv,
                                   "Could not start the sandbox's network");
    }
  keep[0] = ready[1];
  argv[n++] = s->pasta_path;
  argv[n++] = (char *) "--config-net";
  argv[n++] = (char *) "--no-map-gw";
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
  argv[n++] = (char *) "/proc/self/fd/4";
  argv[n++] = (char *) "--userns";
  argv[n++] = (char *) "/proc/self/fd/5";
  /* It writes its pid once the namespace's interface is up. */
  argv[n++] = (char *) "--pid";
  argv[n++] = (char *) "/proc/self/fd/3";
  if (geteuid () == 0)
    {
      /* The sandbox's own uid owns its namespaces (sandstep-jail.c): the stack runs as that, unless the
       * host keeps /dev/net/tun to root (0600; Debian's default is 0666), where it runs as root, within
       * pasta's own confinement. */
      struct stat tun;
      guint32 uid, gid;
      sandstep_jail_outer_ids (s->jail, &uid, &gid);
      if (stat ("/dev/net/tun", &tun) == 0 && (tun.st_mode & 0006) != 0006)
        uid = gid = 0;
      runas = g_strdup_printf ("%u:%u", uid, gid);
      argv[n++] = (char *) "--runas";
      argv[n++] = runas;
    }
  argv[n] = NULL;
  ok = spawn_helper (s, argv, keep, 3, &s->pasta, error);
  for (int i = 0; i < 3; i++)
    close (keep[i]);
  if (!ok)
    {
      close (ready[0]);
      return FALSE;
    }
  pfd = (struct pollfd) { .fd = ready[0], .events = POLLIN };
  ok = poll (&pfd, 1, NETWORK_TIMEOUT_MS) > 0 && read (ready[0], buf, sizeof buf) > 0;
  close (ready[0]);
  if (!ok)
    {
      child_end (&s->pasta);
      if (access ("/dev/net/tun", R_OK | W_OK) < 0)
        return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED,
                               "--network=open needs /dev/net/tun for its user-mode network stack, and this user may "
                               "not open it (%s); make it mode 0666 (udev's default), run as root, or provision "
                               "with --network=none or --allow=HOST", g_strerror (errno));
      return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                             "The sandbox's network stack ('%s') did not come up; check that the passt "
                             "package works here, or provision with --network=none", s->pasta_path);
    }
  return TRUE;
}

/* network=allow: the egress proxy, a helper of its own (it resolves names
 * on the host); init hands it every connection made to the proxy port. */
static gboolean
start_proxy (Supervisor *s, int *out_egress, GError **error)
{
  char *argv[] = { s->core_path, (char *) "--egress", s->handle, NULL };
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
  ok = spawn_helper (s, argv, keep, 2, &s->proxy, error);
  close (pair[0]);
  close (notices[1]);
  if (!ok)
    {
      close (pair[1]);
      close (notices[0]);
      return FALSE;
    }
  s->notices = notices[0];
  *out_egress = pair[1];
  return TRUE;
}

/* ---- the sandbox ---- */

static gboolean
attach_to_cgroup (int pid, gpointer user_data, GError **error)
{
  Supervisor *s = user_data;

  return s->cgroup == NULL || sandstep_cgroup_attach (s->cgroup, pid, error);
}

static void
end_sandbox (Supervisor *s)
{
  sandstep_jail_end (&s->init);
  child_end (&s->pasta);
  child_end (&s->proxy);
  if (s->notices >= 0)
    close (s->notices);
  s->notices = -1;
  g_clear_pointer (&s->sources, g_array_unref);
}

static gboolean
build_sandbox (Supervisor *s, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  int egress = -1;
  gboolean ok;

  end_sandbox (s);
  s->stale = FALSE;
  if (sandstep_jail_egress (s->jail) && !start_proxy (s, &egress, error))
    return FALSE;
  s->sources = sandstep_jail_sources (s->jail);
  ok = sandstep_jail_build (s->jail, egress, attach_to_cgroup, s, &s->init, &local_error);
  /* Its first process killed from outside while it started: nothing ran yet, so build it again. */
  for (int retry = 0; !ok && retry < BUILD_RETRIES &&
                      g_error_matches (local_error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_KILLED); retry++)
    {
      g_clear_error (&local_error);
      ok = sandstep_jail_build (s->jail, egress, attach_to_cgroup, s, &s->init, &local_error);
    }
  if (!ok)
    g_propagate_error (error, g_steal_pointer (&local_error));
  if (egress >= 0)
    close (egress);
  if (ok && sandstep_jail_open_network (s->jail))
    ok = start_pasta (s, error);
  if (!ok)
    end_sandbox (s);
  return ok;
}

/* Is the sandbox there, as it should be for the next command? */
static gboolean
sandbox_current (Supervisor *s)
{
  g_autoptr(GArray) now = NULL;

  if (s->stale || s->init.pidfd < 0 || pidfd_ended (s->init.pidfd) ||
      (sandstep_jail_open_network (s->jail) && (s->pasta.pidfd < 0 || pidfd_ended (s->pasta.pidfd))) ||
      (sandstep_jail_egress (s->jail) && (s->proxy.pidfd < 0 || pidfd_ended (s->proxy.pidfd))))
    return FALSE;
  now = sandstep_jail_sources (s->jail);
  return sandstep_jail_sources_equal (s->sources, now);
}

/* ---- one command ---- */

static void
reply (int conn, SandstepRunKind kind)
{
  SandstepRunReply message = { .kind = kind };

  send (conn, &message, sizeof message, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void
reply_text (int conn, SandstepRunKind kind, const char *raw)
{
  SandstepRunReply message = { .kind = kind };
  /* The caller prints it as one line on a terminal. */
  g_autofree char *text = sandstep_escape (raw, -1, 0, SANDSTEP_ESCAPE_LINE);
  struct iovec iov[2] = { { &message, sizeof message }, { text, strlen (text) } };
  struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };

  sendmsg (conn, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* The caller must be this user, in this user namespace: never a process of a sandbox.  Where the
 * sandbox's uid is not ours, the uid alone tells. */
static gboolean
peer_is_ours (Supervisor *s, int conn)
{
  struct ucred cred;
  socklen_t len = sizeof cred;
  g_autofree char *path = NULL;
  g_autofree char *theirs = NULL;
  g_autofree char *ours = NULL;

  if (getsockopt (conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != getuid () || cred.pid <= 0)
    return FALSE;
  if (!s->jail_is_peer)
    return TRUE;
  path = g_strdup_printf ("/proc/%d/ns/user", (int) cred.pid);
  theirs = g_file_read_link (path, NULL);
  ours = g_file_read_link ("/proc/self/ns/user", NULL);
  return theirs != NULL && ours != NULL && strcmp (theirs, ours) == 0;
}

typedef struct {
  char *buf;
  const char *field[SANDSTEP_RUN_FIELDS];
  GPtrArray *env;
  int fds[4];
  int n_fds;
} Request;

static void
request_clear (Request *request)
{
  g_free (request->buf);
  g_clear_pointer (&request->env, g_ptr_array_unref);
  for (int i = 0; i < request->n_fds; i++)
    close (request->fds[i]);
  request->n_fds = 0;
}

static gboolean
receive_request (int conn, Request *request)
{
  union { char buf[CMSG_SPACE (4 * sizeof (int))]; struct cmsghdr align; } cmsg_buf;
  struct pollfd pfd = { .fd = conn, .events = POLLIN };
  struct iovec iov;
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cmsg_buf.buf,
                        .msg_controllen = sizeof cmsg_buf.buf };
  struct cmsghdr *cmsg;
  ssize_t size, n;
  const char *p, *end;
  int field = 0;

  if (poll (&pfd, 1, REQUEST_TIMEOUT_MS) <= 0)
    return FALSE;
  size = recv (conn, NULL, 0, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
  if (size <= 0 || size > SANDSTEP_RUN_MAX)
    return FALSE;
  request->buf = g_malloc (size + 1);
  iov = (struct iovec) { request->buf, size };
  n = recvmsg (conn, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  for (cmsg = CMSG_FIRSTHDR (&msg); cmsg != NULL; cmsg = CMSG_NXTHDR (&msg, cmsg))
    if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS)
      for (size_t i = 0; i < (cmsg->cmsg_len - CMSG_LEN (0)) / sizeof (int); i++)
        {
          int fd;
          memcpy (&fd, CMSG_DATA (cmsg) + i * sizeof (int), sizeof fd);
          if (request->n_fds < 4)
            request->fds[request->n_fds++] = fd;
          else
            close (fd);
        }
  if (n != size || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
    return FALSE;
  request->buf[size] = '\0';
  request->env = g_ptr_array_new ();
  for (p = request->buf, end = request->buf + size; p < end; p += strlen (p) + 1)
    if (field < SANDSTEP_RUN_FIELDS)
      request->field[field++] = p;
    else
      g_ptr_array_add (request->env, (gpointer) p);
  g_ptr_array_add (request->env, NULL);
  return field == SANDSTEP_RUN_FIELDS && strcmp (request->field[SANDSTEP_RUN_FIELD_MAGIC], SANDSTEP_RUN_MAGIC) == 0;
}

/* Answers a caller without running anything; its request is read first, so that the answer arrives. */
static void
refuse (int conn, SandstepRunKind kind)
{
  Request request = { 0 };

  receive_request (conn, &request);
  request_clear (&request);
  reply (conn, kind);
  close (conn);
}

/* The caller's claim: the claim file of this sandbox, locked through that very fd. */
static gboolean
caller_holds_claim (Supervisor *s, int fd)
{
  struct stat given, ours;

  return fstat (fd, &given) == 0 && fstat (s->claim_fd, &ours) == 0 && given.st_dev == ours.st_dev &&
         given.st_ino == ours.st_ino && flock (fd, LOCK_EX | LOCK_NB) == 0;
}

static gboolean
take_claim (Supervisor *s, const char *holder)
{
  g_autoptr(GString) text = g_string_new ("{\"holder\":");
  struct stat st;

  if (flock (s->claim_fd, LOCK_EX | LOCK_NB) < 0)
    return FALSE;
  append_json_string (text, holder);
  g_string_append_printf (text, ",\"pid\":%d,\"start\":%" G_GUINT64_FORMAT "}", (int) getpid (),
                          s->start_time);
  /* Overwritten in place, cut only when shorter (truncating costs a journal transaction). */
  if (fstat (s->claim_fd, &st) < 0 || pwrite (s->claim_fd, text->str, text->len, 0) != (ssize_t) text->len ||
      ((gsize) st.st_size > text->len && ftruncate (s->claim_fd, text->len) < 0))
    g_debug ("Could not record the holder of '%s': %s", s->handle, g_strerror (errno));
  return TRUE;
}

/* Under our claim: does another holder's make recipe hold the sandbox between its lines? */
static gboolean
held_by_other_step (Supervisor *s, const char *holder)
{
  char current[SANDSTEP_STEP_HOLDER_MAX];

  return sandstep_step_held (s->dir_fd, current, sizeof current, NULL) && strcmp (current, holder) != 0;
}

static void
release_claim (Supervisor *s, Command *command)
{
  /* The recipe's last line for this sandbox ends its hold, before the claim goes. */
  if (command->own_claim && command->step.pid > 0 && command->step.ends)
    sandstep_step_update (s->dir_fd, command->holder, &command->step);
  if (command->own_claim)
    flock (s->claim_fd, LOCK_UN);
  if (command->caller_claim >= 0)
    close (command->caller_claim);
  command->own_claim = FALSE;
  command->caller_claim = -1;
}

static gboolean
send_run (Supervisor *s, const char *command, char **caller_env, const int stdio[3])
{
  g_autoptr(GPtrArray) argv = sandstep_jail_command_argv (command);
  g_auto(GStrv) envp = sandstep_jail_environment (s->jail, caller_env);
  g_autoptr(GString) body = g_string_new (NULL);
  SandstepInitMessage header = { .kind = SANDSTEP_INIT_RUN };
  union { char buf[CMSG_SPACE (3 * sizeof (int))]; struct cmsghdr align; } cmsg_buf;
  struct iovec iov[2];
  struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2, .msg_control = cmsg_buf.buf,
                        .msg_controllen = sizeof cmsg_buf.buf };
  struct cmsghdr *cmsg = CMSG_FIRSTHDR (&msg);
  ssize_t n;

  g_string_append_printf (body, "%u", argv->len);
  g_string_append_c (body, '\0');
  for (guint i = 0; i < argv->len; i++)
    g_string_append_len (body, argv->pdata[i], strlen (argv->pdata[i]) + 1);
  for (char **e = envp; *e; e++)
    g_string_append_len (body, *e, strlen (*e) + 1);
  iov[0] = (struct iovec) { &header, sizeof header };
  iov[1] = (struct iovec) { body->str, body->len };
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN (3 * sizeof (int));
  memcpy (CMSG_DATA (cmsg), stdio, 3 * sizeof (int));
  do
    n = sendmsg (s->init.control, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n == (ssize_t) (sizeof header + body->len);
}

static void
tell_init (Supervisor *s, SandstepInitKind kind)
{
  SandstepInitMessage message = { .kind = kind };

  send (s->init.control, &message, sizeof message, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void
kill_command (Supervisor *s, Command *command)
{
  if (command->killed)
    return;
  command->killed = TRUE;
  command->kill_deadline = g_get_monotonic_time () + KILL_GRACE_US;
  tell_init (s, SANDSTEP_INIT_KILL);
}

static void
finish (Supervisor *s, int status, int exec_error)
{
  Command *command = s->current;
  SandstepRunReply message = {
    .kind = SANDSTEP_RUN_DONE,
    .exit_status = exec_error != 0 ? exec_error : status,
    .applied_timeout_s = command->applied_timeout_s,
    .memory = s->memory, .pids = s->pids, .cpu_time_s = s->cpu_time_s, .disk = s->disk,
  };
  guint64 oom_kills, pids_max;

  sandstep_cgroup_counters (s->cgroup, &oom_kills, &pids_max);
  if (command->timed_out)
    message.flags |= SANDSTEP_RUN_TIMED_OUT;
  if (command->clamped)
    message.flags |= SANDSTEP_RUN_CLAMPED;
  if (oom_kills > command->oom_kills)
    message.flags |= SANDSTEP_RUN_MEMORY_HIT;
  if (pids_max > command->pids_max)
    message.flags |= SANDSTEP_RUN_PIDS_HIT;
  if (command->interrupted)
    message.flags |= SANDSTEP_RUN_INTERRUPTED;
  if (exec_error != 0)
    message.flags |= SANDSTEP_RUN_EXEC_FAILED;
  /* A release that came while the command ran left the destruction to its holder: us, when the claim was ours. */
  if (command->own_claim && s->released && !alive (s))
    s->done = s->reclaim = TRUE;
  /* The claim goes before the caller hears: its next step may claim the sandbox at once. */
  release_claim (s, command);
  if (!command->caller_gone)
    send (command->conn, &message, sizeof message, MSG_NOSIGNAL | MSG_DONTWAIT);
  close (command->conn);
  g_free (command->holder);
  g_clear_pointer (&s->current, g_free);
  s->idle_deadline = g_get_monotonic_time () + SANDSTEP_SUPERVISOR_IDLE_S * G_USEC_PER_SEC;
}

static void
begin (Supervisor *s, int conn)
{
  Request request = { 0 };
  g_autoptr(GError) error = NULL;
  Command *command;
  const char *owner, *holder;
  double timeout_s = 0, wait_s, remaining;
  gboolean have_timeout;
  int stdio[3];

  /* Read first, whoever asks: a socket closed with a request unread loses the answer on its way. */
  if (!receive_request (conn, &request) || !peer_is_ours (s, conn) || request.n_fds < 3)
    goto fallback;
  /* Anything the ordinary path would judge, it judges, word for word. */
  owner = request.field[SANDSTEP_RUN_FIELD_OWNER][0] ? request.field[SANDSTEP_RUN_FIELD_OWNER] : s->default_owner;
  holder = request.field[SANDSTEP_RUN_FIELD_HOLDER][0] ? request.field[SANDSTEP_RUN_FIELD_HOLDER] : s->default_holder;
  have_timeout = request.field[SANDSTEP_RUN_FIELD_TIMEOUT][0] != '\0';
  if (strcmp (request.field[SANDSTEP_RUN_FIELD_HANDLE], s->handle) != 0 || strcmp (owner, s->owner) != 0 ||
      !g_utf8_validate (holder, -1, NULL) || !alive (s) ||
      (request.field[SANDSTEP_RUN_FIELD_WAIT][0] && !parse_seconds (request.field[SANDSTEP_RUN_FIELD_WAIT], TRUE,
                                                                     &wait_s)) ||
      (have_timeout && !parse_seconds (request.field[SANDSTEP_RUN_FIELD_TIMEOUT], FALSE, &timeout_s)))
    goto fallback;

  command = g_new0 (Command, 1);
  command->conn = conn;
  command->caller_claim = -1;
  if (strcmp (request.field[SANDSTEP_RUN_FIELD_CLAIMED], "1") == 0)
    {
      if (request.n_fds < 4 || !caller_holds_claim (s, request.fds[3]))
        {
          g_free (command);
          goto fallback;
        }
      command->caller_claim = request.fds[3];
      request.n_fds = 3;
    }
  else if (!take_claim (s, holder))
    {
      g_free (command);
      goto fallback;
    }
  else
    {
      command->own_claim = TRUE;
      /* Another step's recipe holds it: the ordinary path waits, or says who holds it. */
      if (held_by_other_step (s, holder) ||
          !sandstep_step_scan (request.field[SANDSTEP_RUN_FIELD_STEP], &command->step))
        {
          command->step.pid = 0;
          release_claim (s, command);
          g_free (command);
          goto fallback;
        }
      command->holder = g_strdup (holder);
      if (command->step.pid > 0 && !command->step.ends &&
          !sandstep_step_update (s->dir_fd, holder, &command->step))
        g_debug ("Could not leave the recipe's hold on '%s': %s", s->handle, g_strerror (errno));
    }

  if (!sandbox_current (s) && !build_sandbox (s, &error))
    {
      release_claim (s, command);
      g_free (command->holder);
      g_free (command);
      reply_text (conn, SANDSTEP_RUN_ERROR, error->message);
      close (conn);
      request_clear (&request);
      s->stale = TRUE;
      return;
    }

  /* The command's budget never outlives the sandbox. */
  remaining = MAX (s->expires - g_get_real_time () / (double) G_USEC_PER_SEC, 0);
  command->applied_timeout_s = have_timeout ? MIN (timeout_s, remaining) : remaining;
  command->clamped = !have_timeout || timeout_s > remaining;
  command->deadline = g_get_monotonic_time () + (gint64) (command->applied_timeout_s * G_USEC_PER_SEC);
  sandstep_cgroup_counters (s->cgroup, &command->oom_kills, &command->pids_max);
  s->current = command;

  /* From here on the command may run: the caller must never run it again. */
  reply (conn, SANDSTEP_RUN_STARTED);
  memcpy (stdio, request.fds, sizeof stdio);
  if (!send_run (s, request.field[SANDSTEP_RUN_FIELD_COMMAND], (char **) request.env->pdata, stdio))
    {
      command->interrupted = TRUE;
      s->stale = TRUE;
      finish (s, SANDSTEP_EXIT_INTERNAL, 0);
    }
  request_clear (&request);
  return;

fallback:
  reply (conn, SANDSTEP_RUN_FALLBACK);
  close (conn);
  request_clear (&request);
}

static void
on_init_message (Supervisor *s)
{
  SandstepInitMessage message;
  ssize_t n;

  do
    n = recv (s->init.control, &message, sizeof message, MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n < 0 && errno == EAGAIN)
    return;
  if (n != (ssize_t) sizeof message || message.kind != SANDSTEP_INIT_EXITED)
    {
      /* init is gone, or says nonsense: the sandbox is rebuilt for the next command. */
      s->stale = TRUE;
      if (s->current != NULL)
        {
          s->current->interrupted = TRUE;
          finish (s, 128 + SIGKILL, 0);
        }
      sandstep_jail_end (&s->init);
      return;
    }
  if (s->current != NULL)
    finish (s, message.status, message.error);
}

static void
on_notices (Supervisor *s)
{
  char buf[4096];
  ssize_t n;
  char *eol;

  while ((n = read (s->notices, buf, sizeof buf)) > 0)
    g_string_append_len (s->notice_text, buf, n);
  while ((eol = strchr (s->notice_text->str, '\n')) != NULL)
    {
      *eol = '\0';
      if (s->current != NULL && !s->current->caller_gone)
        reply_text (s->current->conn, SANDSTEP_RUN_NOTICE, s->notice_text->str);
      g_string_erase (s->notice_text, 0, eol - s->notice_text->str + 1);
    }
  if (n == 0)
    {
      /* The proxy ended: the next command gets a new sandbox with a new one. */
      close (s->notices);
      s->notices = -1;
      s->stale = TRUE;
    }
}

static void
on_watch (Supervisor *s)
{
  char buf[4096] __attribute__ ((aligned (__alignof__ (struct inotify_event))));
  gboolean reload = FALSE;
  ssize_t n;

  while ((n = read (s->watch, buf, sizeof buf)) > 0)
    for (char *p = buf; p < buf + n;)
      {
        const struct inotify_event *event = (const struct inotify_event *) p;
        if (event->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED))
          s->done = TRUE;
        else if (event->len > 0 && strcmp (event->name, "lifetime") == 0)
          reload = TRUE;
        /* The record changed (or was damaged) or the claim file was replaced: what this supervisor
         * was started from no longer holds, so it ends, and the next command starts from the record. */
        else if (event->len > 0 && (strcmp (event->name, "record.json") == 0 ||
                                    (strcmp (event->name, "claim") == 0 &&
                                     (event->mask & (IN_DELETE | IN_CREATE | IN_MOVED_TO)))))
          s->done = TRUE;
        p += sizeof *event + event->len;
      }
  if (reload && !s->done && !read_lifetime (s))
    s->done = TRUE;
}

static void
loop (Supervisor *s)
{
  /* Once done, a command that runs still ends; nothing new starts. */
  while (!s->done || s->current != NULL)
    {
      Command *command = s->current;
      struct pollfd fds[7] = {
        { .fd = s->signals, .events = POLLIN },
        { .fd = s->watch, .events = POLLIN },
        { .fd = s->done ? -1 : s->listener, .events = POLLIN },
        { .fd = s->init.control, .events = POLLIN },
        { .fd = command != NULL && !command->caller_gone ? command->conn : -1, .events = POLLIN },
        { .fd = s->notices, .events = POLLIN },
        { .fd = s->init.pidfd, .events = POLLIN },
      };
      gint64 now = g_get_monotonic_time ();
      gint64 until;
      int r;

      if (command != NULL)
        until = command->killed ? command->kill_deadline : command->deadline;
      else
        until = MIN (s->idle_deadline, now + (s->expires - now_unix ()) * G_USEC_PER_SEC);
      r = poll (fds, G_N_ELEMENTS (fds), (int) CLAMP ((until - now + 999) / 1000, 0, G_MAXINT));
      if (r < 0 && errno != EINTR)
        break;
      now = g_get_monotonic_time ();

      if (fds[0].revents & POLLIN)
        {
          struct signalfd_siginfo info;
          while (read (s->signals, &info, sizeof info) > 0)
            if (info.ssi_signo != SIGCHLD)
              {
                s->done = TRUE;
                s->stop_signal = info.ssi_signo;
              }
          if (s->stop_signal != 0 && s->current != NULL)
            {
              /* Told to stop mid-command (destroy): the command goes with the sandbox. */
              s->current->interrupted = TRUE;
              kill_command (s, s->current);
            }
        }
      if (fds[1].revents & POLLIN)
        on_watch (s);
      if (fds[5].revents & (POLLIN | POLLHUP))
        on_notices (s);
      if (fds[3].revents & (POLLIN | POLLHUP | POLLERR))
        on_init_message (s);
      else if (fds[6].revents & POLLIN)
        {
          /* init died without a word (the kernel's OOM killer, or someone with the rights). */
          s->stale = TRUE;
          if (s->current != NULL)
            {
              s->current->interrupted = TRUE;
              finish (s, 128 + SIGKILL, 0);
            }
          sandstep_jail_end (&s->init);
        }

      command = s->current;
      if (command != NULL)
        {
          if (fds[4].revents & (POLLIN | POLLHUP | POLLERR))
            {
              /* The caller went away (killed with make): so does its command. */
              command->caller_gone = TRUE;
              kill_command (s, command);
            }
          if (!command->killed && now >= command->deadline)
            {
              command->timed_out = TRUE;
              kill_command (s, command);
            }
          else if (command->killed && now >= command->kill_deadline)
            {
              /* init did not answer: the sandbox goes, and with it the command. */
              command->interrupted = TRUE;
              s->stale = TRUE;
              sandstep_jail_end (&s->init);
              finish (s, 128 + SIGKILL, 0);
            }
        }
      else if (now >= s->idle_deadline || !alive (s))
        s->done = TRUE;

      if (!s->done && s->current == NULL && (fds[2].revents & POLLIN))
        {
          int conn = accept4 (s->listener, NULL, NULL, SOCK_CLOEXEC);
          if (conn >= 0)
            begin (s, conn);
        }
      else if (!s->done && s->current != NULL && (fds[2].revents & POLLIN))
        {
          /* Busy: the ordinary path waits for the claim, or says who holds it. */
          int conn = accept4 (s->listener, NULL, NULL, SOCK_CLOEXEC);
          if (conn >= 0)
            refuse (conn, SANDSTEP_RUN_FALLBACK);
        }
    }
}

/* ---- start and end ---- */

static void
say_ready (const GError *error)
{
  g_autofree char *text = error == NULL
                            ? g_strdup ("ok\n")
                            : g_strdup_printf ("%s\t%d\t%s\n", g_quark_to_string (error->domain), error->code,
                                               error->message);

  if (write (SANDSTEP_SUPERVISOR_READY_FD, text, strlen (text)) < 0)
    g_debug ("Nobody waits for the supervisor's start");
  close (SANDSTEP_SUPERVISOR_READY_FD);
}

static gboolean
listen_socket (Supervisor *s, GError **error)
{
  struct sockaddr_un address = { .sun_family = AF_UNIX };

  /* Through the directory's fd: any state path fits sun_path. */
  g_snprintf (address.sun_path, sizeof address.sun_path, "/proc/self/fd/%d/" SANDSTEP_RUN_SOCKET, s->dir_fd);
  unlinkat (s->dir_fd, SANDSTEP_RUN_SOCKET, 0);
  s->listener = socket (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s->listener < 0 || bind (s->listener, (struct sockaddr *) &address, sizeof address) < 0 ||
      listen (s->listener, 128) < 0)
    return sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                                 "Could not listen on the supervisor socket of sandbox '%s'", s->handle);
  return TRUE;
}

/* Every caller still queued asks again, of a new supervisor: nobody is left without an answer. */
static void
close_listener (Supervisor *s)
{
  int conn;

  unlinkat (s->dir_fd, SANDSTEP_RUN_SOCKET, 0);
  while ((conn = accept4 (s->listener, NULL, NULL, SOCK_CLOEXEC)) >= 0)
    refuse (conn, SANDSTEP_RUN_RETRY);
  close (s->listener);
  s->listener = -1;
}

static gboolean
start (Supervisor *s, GError **error)
{
  g_autofree char *dir = g_build_filename ("sandboxes", s->handle, NULL);
  g_autofree char *watched = NULL;
  sigset_t handled;

  sigemptyset (&handled);
  sigaddset (&handled, SIGTERM);
  sigaddset (&handled, SIGINT);
  sigaddset (&handled, SIGHUP);
  sigaddset (&handled, SIGCHLD);
  /* A caller's socket closed under a reply is EPIPE, not death. */
  signal (SIGPIPE, SIG_IGN);
  if (sigprocmask (SIG_BLOCK, &handled, NULL) < 0 ||
      (s->signals = signalfd (-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK)) < 0 ||
      (s->dir_fd = openat (s->store_fd, dir, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0 ||
      (s->claim_fd = openat (s->dir_fd, "claim", O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0 ||
      (s->watch = inotify_init1 (IN_CLOEXEC | IN_NONBLOCK)) < 0)
    return sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                                 "Could not set up the supervisor of sandbox '%s'", s->handle);
  watched = g_strdup_printf ("/proc/self/fd/%d", s->dir_fd);
  if (inotify_add_watch (s->watch, watched, IN_DELETE_SELF | IN_MOVE_SELF | IN_MOVED_TO | IN_CLOSE_WRITE | IN_MODIFY |
                                            IN_DELETE | IN_CREATE) < 0)
    return sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                                 "Could not watch the directory of sandbox '%s'", s->handle);
  if (!read_lifetime (s))
    return sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_FOUND,
                           "Sandbox '%s' has no readable lifetime beside its record; it is being destroyed, "
                           "or its state is damaged", s->handle);
  if (!alive (s))
    return sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_EXPIRED,
                           "Sandbox '%s' expired", s->handle);
  if (!load_plan (s, error))
    return FALSE;
  {
    guint32 uid, gid;
    sandstep_jail_outer_ids (s->jail, &uid, &gid);
    s->jail_is_peer = uid == getuid ();
  }
  s->start_time = start_time (getpid ());
  if (sandstep_cgroup_kind () != SANDSTEP_CGROUP_NONE &&
      (s->cgroup = sandstep_cgroup_make (s->handle, s->memory, s->pids, error)) == NULL)
    return FALSE;
  if (!build_sandbox (s, error) || !listen_socket (s, error))
    return FALSE;
  s->idle_deadline = g_get_monotonic_time () + SANDSTEP_SUPERVISOR_IDLE_S * G_USEC_PER_SEC;
  return TRUE;
}

/* Forks once more and lets the starter reap the first process: the
 * supervisor is then a child of init (or of a subreaper), and writes its
 * pid where sandstep_supervisor_stop() reads it. */
static gboolean
become_daemon (void)
{
  g_autofree char *text = NULL;
  pid_t pid = fork ();

  if (pid < 0)
    return FALSE;
  if (pid > 0)
    _exit (0);
  text = g_strdup_printf ("%d %" G_GUINT64_FORMAT "\n", (int) getpid (), start_time (getpid ()));
  if (ftruncate (SANDSTEP_SUPERVISOR_LOCK_FD, 0) < 0 ||
      pwrite (SANDSTEP_SUPERVISOR_LOCK_FD, text, strlen (text), 0) != (ssize_t) strlen (text))
    g_debug ("Could not write the supervisor's pid: %s", g_strerror (errno));
  return TRUE;
}

/* A released sandbox whose last command ended is destroyed: by the helper, which owns the store. */
static void
reclaim (Supervisor *s)
{
  char *argv[] = { s->core_path, (char *) "--reclaim", s->handle, NULL };

  execve (argv[0], argv, s->helper_env);
  g_debug ("Could not reclaim '%s': %s", s->handle, g_strerror (errno));
}

int
sandstep_supervisor_main (const char *handle)
{
  g_autoptr(GError) error = NULL;
  Supervisor s = {
    .handle = g_strdup (handle), .store_fd = SANDSTEP_SUPERVISOR_STORE_FD, .dir_fd = -1, .claim_fd = -1,
    .listener = -1, .watch = -1, .signals = -1, .init = { .pidfd = -1, .control = -1 },
    .pasta = { .pidfd = -1 }, .proxy = { .pidfd = -1 }, .notices = -1, .notice_text = g_string_new (NULL),
  };
  gboolean ok;

  /* Nobody's child: whoever started us may kill its children, or wait for them. */
  if (!become_daemon ())
    return SANDSTEP_EXIT_INTERNAL;
  own_process_state ();
  ok = start (&s, &error);
  say_ready (ok ? NULL : error);
  if (ok)
    loop (&s);
  if (s.listener >= 0)
    close_listener (&s);
  end_sandbox (&s);
  sandstep_cgroup_free (s.cgroup);
  if (ok)
    sandstep_cgroup_remove (handle);
  /* The lock goes before the exec: a destroy that waits for us waits no longer than needed. */
  close (SANDSTEP_SUPERVISOR_LOCK_FD);
  if (s.reclaim && s.stop_signal == 0)
    reclaim (&s);
  return ok ? 0 : sandstep_error_exit_status (error);
}
