/* sandstep-supervisor-sandbox.c: the live sandbox a supervisor keeps: its jail and network helpers; see sandstep-supervisor-private.h. */
#include "sandstep-supervisor.h"
#include "sandstep-supervisor-private.h"

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

#include "sandstep-cgroup.h"
#include "sandstep-error.h"
#include "sandstep-jail-init.h"
#include "sandstep-plan-inputs.h"

/* ---- small things ---- */

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

typedef struct {
  void *map;
  gsize size;
} Mapping;

static void
unmap_plan (gpointer data)
{
  Mapping *mapping = data;

  munmap (mapping->map, mapping->size);
  g_free (mapping);
}

/* The plan in @fd: its jail's image, checked, at its head (*@out_image), and the rest. */
static GVariant *
read_plan (int fd, const SandstepJailImage **out_image, GError **error)
{
  struct stat st;
  void *map = MAP_FAILED;
  const SandstepJailImage *image;
  int errsv;

  /* Mapped, not copied (the copies of the host's /etc files in it are 150 kB here), and whole at once: a page
   * first touched by the hundredth command would look like a leak. */
  if (fstat (fd, &st) < 0)
    errsv = errno;
  else if (st.st_size == 0)
    errsv = ENODATA;
  else if ((map = mmap (NULL, st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0)) == MAP_FAILED)
    errsv = errno;
  if (map == MAP_FAILED)
    {
      sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errsv,
                            "Could not read the sandbox's plan");
      return NULL;
    }
  image = sandstep_jail_image_check (map, st.st_size, SANDSTEP_PLAN_FORMAT);
  if (image == NULL || sandstep_jail_image_end (image) >= (gsize) st.st_size)
    {
      munmap (map, st.st_size);
      sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_STALE_PLAN,
                      "The sandbox's plan is damaged, or was compiled by another version of sandstep");
      return NULL;
    }
  {
    /* Trusted, as GVariant means it: serialised by the helper, into a memfd it sealed and gave only us, or into
     * the plan it keeps beside the record, which only the state directory's owner can write.  Checking its
     * normal form cost a first command 2.3 ms, more than reading it. */
    Mapping *mapping = g_new (Mapping, 1);
    g_autoptr(GBytes) bytes = NULL, rest = NULL;
    gsize end = sandstep_jail_image_end (image);

    /* Replaced by a rename, never written in place: the mapping stays what was read. */
    *mapping = (Mapping) { map, st.st_size };
    bytes = g_bytes_new_with_free_func (map, st.st_size, unmap_plan, mapping);
    rest = g_bytes_new_from_bytes (bytes, end, st.st_size - end);
    *out_image = image;
    return g_variant_new_from_bytes (G_VARIANT_TYPE_VARDICT, rest, TRUE);
  }
}

/* Is @fd the sealed memfd of a plan the helper has just compiled? */
static gboolean
fresh_plan (int fd)
{
  int seals = fcntl (fd, F_GET_SEALS);

  return seals >= 0 && (seals & F_SEAL_WRITE);
}

/* A kept plan is used only while it is what the helper would compile now, and only if nobody but the
 * state directory's owner could have written it. */
static gboolean
check_kept_plan (Supervisor *s, const struct stat *st, GError **error)
{
  g_autoptr(GVariant) inputs = NULL;
  const char *host, *changed;
  guint32 cgroup_kind;

  if (!sandstep_kept_plan_trusted (st))
    return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_STALE_PLAN,
                           "The sandbox's kept plan is not a file of its owner's only");
  if (!g_variant_lookup (s->plan, "host", "^&ay", &host) || strcmp (host, g_get_host_name ()) != 0)
    return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_STALE_PLAN,
                           "The sandbox's plan was compiled under another host name");
  if (!g_variant_lookup (s->plan, "cgroup-kind", "u", &cgroup_kind) || cgroup_kind != sandstep_cgroup_kind ())
    return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_STALE_PLAN,
                           "The sandbox's plan was compiled for other cgroups");
  inputs = g_variant_lookup_value (s->plan, "inputs", G_VARIANT_TYPE (SANDSTEP_PLAN_INPUTS_TYPE));
  if (inputs == NULL)
    return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_STALE_PLAN,
                           "The sandbox's plan does not say what it was compiled from");
  if ((changed = sandstep_plan_inputs_changed (inputs)) != NULL)
    return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_STALE_PLAN,
                           "'%s' changed since the sandbox's plan was compiled; run the step again", changed);
  return TRUE;
}

gboolean
sandstep_supervisor_load_plan (Supervisor *s, GError **error)
{
  g_autoptr(GVariant) jail = NULL;
  const SandstepJailImage *image = NULL;
  const char *owner, *default_owner, *default_holder, *network, *pasta;
  gboolean ok;

  /* One the helper has just compiled is current by its making.  A kept one with a jail the front started on
   * it is checked while that jail finishes (sandstep_supervisor_build_sandbox()). */
  s->plan = read_plan (SANDSTEP_SUPERVISOR_PLAN_FD, &image, error);
  ok = s->plan != NULL;
  if (ok && fresh_plan (SANDSTEP_SUPERVISOR_PLAN_FD))
    s->plan_checked = TRUE;
  else if (ok && (fstat (SANDSTEP_SUPERVISOR_PLAN_FD, &s->plan_stat) < 0 ||
                  (s->adopt.pidfd < 0 && !(s->plan_checked = check_kept_plan (s, &s->plan_stat, error)))))
    ok = FALSE;
  close (SANDSTEP_SUPERVISOR_PLAN_FD);
  if (!ok)
    return FALSE;
  if (!g_variant_lookup (s->plan, "owner", "^&ay", &owner) ||
      !g_variant_lookup (s->plan, "default-owner", "^&ay", &default_owner) ||
      !g_variant_lookup (s->plan, "default-holder", "^&ay", &default_holder) ||
      !g_variant_lookup (s->plan, "network", "^&ay", &network) ||
      !g_variant_lookup (s->plan, "limits", "(txxt)", &s->memory, &s->pids, &s->cpu_time_s, &s->disk) ||
      !g_variant_lookup (s->plan, "pasta", "^&ay", &pasta) ||
      (jail = g_variant_lookup_value (s->plan, "jail", G_VARIANT_TYPE_VARDICT)) == NULL)
    return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                           "The sandbox's plan is damaged (a member is missing); reinstall sandstep if this persists");
  s->owner = g_strdup (owner);
  s->default_owner = g_strdup (default_owner);
  s->default_holder = g_strdup (default_holder);
  s->network = g_strdup (network);
  s->core_path = own_program ("sandstep-core");
  s->pasta_path = g_strdup (pasta);
  /* Its own, which its starter set as sandstep-supervisor-start.h says. */
  s->helper_env = g_get_environ ();
  s->jail = sandstep_jail_from_variant (image, jail, error);
  return s->jail != NULL;
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

/* The cgroup is made at the sandbox's first build, while its first process builds its root: both wait behind
 * the kernel's grace period that the first move needs (sandstep-cgroup-warm.h). */
static gboolean
attach_to_cgroup (int pid, gpointer user_data, GError **error)
{
  Supervisor *s = user_data;

  if (s->cgroup == NULL && sandstep_cgroup_kind () != SANDSTEP_CGROUP_NONE &&
      (s->cgroup = sandstep_cgroup_make (s->handle, s->memory, s->pids, error)) == NULL)
    return FALSE;
  if (s->cgroup == NULL || sandstep_cgroup_attach (s->cgroup, pid, NULL))
    return TRUE;
  /* Removed between its making and this move (a gc's sweep of empty cgroups, sandstep_cgroup_sweep): once more. */
  g_clear_pointer (&s->cgroup, sandstep_cgroup_free);
  if ((s->cgroup = sandstep_cgroup_make (s->handle, s->memory, s->pids, error)) == NULL)
    return FALSE;
  return sandstep_cgroup_attach (s->cgroup, pid, error);
}

void
sandstep_supervisor_end_sandbox (Supervisor *s)
{
  sandstep_jail_end (&s->init);
  child_end (&s->pasta);
  child_end (&s->proxy);
  if (s->notices >= 0)
    close (s->notices);
  s->notices = -1;
  g_clear_pointer (&s->sources, g_array_unref);
}

/* The kept plan, checked once the jail the front started on it is in its cgroup: the jail finishes meanwhile. */
static gboolean
check_adopted_plan (gpointer user_data, GError **error)
{
  Supervisor *s = user_data;

  return (s->plan_checked = check_kept_plan (s, &s->plan_stat, error));
}

/* The jail the front started, as the sandbox; FALSE with no error when this supervisor is to build its own. */
static gboolean
adopt_sandbox (Supervisor *s, GError **error)
{
  g_autoptr(GError) local_error = NULL;

  /* Before the plan is checked: a host path replaced after it would make the next command build again. */
  s->sources = sandstep_jail_sources (s->jail);
  if (sandstep_jail_adopt (s->jail, &s->adopt, attach_to_cgroup, check_adopted_plan, s, &s->init, &local_error))
    return TRUE;
  g_clear_pointer (&s->sources, g_array_unref);
  if (g_error_matches (local_error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_STALE_PLAN))
    g_propagate_error (error, g_steal_pointer (&local_error));
  else
    g_debug ("The front's jail could not be adopted (%s); building one", local_error->message);
  return FALSE;
}

gboolean
sandstep_supervisor_build_sandbox (Supervisor *s, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  int egress = -1;
  gboolean ok;

  sandstep_supervisor_end_sandbox (s);
  s->stale = FALSE;
  if (s->adopt.pidfd >= 0)
    {
      if (adopt_sandbox (s, error))
        {
          if (sandstep_jail_open_network (s->jail) && !start_pasta (s, error))
            {
              sandstep_supervisor_end_sandbox (s);
              return FALSE;
            }
          return TRUE;
        }
      if (error != NULL && *error != NULL)
        return FALSE;
    }
  if (!s->plan_checked && !check_kept_plan (s, &s->plan_stat, error))
    return FALSE;
  s->plan_checked = TRUE;
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
    sandstep_supervisor_end_sandbox (s);
  return ok;
}

/* Its lifetime is not over. */
gboolean
sandstep_supervisor_alive (Supervisor *s)
{
  return g_get_real_time () / G_USEC_PER_SEC < s->expires;
}

/* Is the sandbox there, as it should be for the next command? */
gboolean
sandstep_supervisor_sandbox_current (Supervisor *s)
{
  g_autoptr(GArray) now = NULL;

  if (s->stale || s->init.pidfd < 0 || pidfd_ended (s->init.pidfd) ||
      (sandstep_jail_open_network (s->jail) && (s->pasta.pidfd < 0 || pidfd_ended (s->pasta.pidfd))) ||
      (sandstep_jail_egress (s->jail) && (s->proxy.pidfd < 0 || pidfd_ended (s->proxy.pidfd))))
    return FALSE;
  now = sandstep_jail_sources (s->jail);
  return sandstep_jail_sources_equal (s->sources, now);
}
