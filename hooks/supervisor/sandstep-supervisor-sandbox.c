/* sandstep-supervisor-sandbox.c: the live sandbox a supervisor keeps: its plan, jail, cgroup and init; see sandstep-supervisor-sandbox.h. */
#include "sandstep-supervisor-sandbox.h"
#include "sandstep-supervisor-network.h"
#include "sandstep-supervisor.h"
#include "sandstep-read-libc.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-cgroup.h"
#include "sandstep-error.h"
#include "sandstep-programs-libc.h"
#include "sandstep-jail-init.h"
#include "sandstep-plan-inputs.h"

/* How often a sandbox whose first process was killed as it started is built again. */
#define BUILD_RETRIES 3

struct _SupervisorSandbox {
  char *handle;
  int dir_fd;               /* borrowed: the sandbox's directory */
  GVariant *plan;
  SandstepCgroupLimits limits;
  char *core_path;          /* sandstep-core: the egress proxy */
  char *pasta_path;
  char **helper_env;

  SandstepJail *jail;
  SandstepJailStart adopt;  /* the jail the front started for us, until adopted (sandstep-supervisor-start.h) */
  gboolean plan_checked;    /* a kept plan's inputs were found current (a fresh one is by its making) */
  struct stat plan_stat;
  SandstepCgroup *cgroup;
  SandstepJailProcess init;
  GArray *sources;          /* as they were when the sandbox was built */
  gboolean stale;           /* rebuild before the next command */
  SupervisorChild pasta;
  SupervisorChild proxy;
  int notices;              /* the proxy's refusal lines */
  GString *notice_text;
};

/* ---- small things ---- */

static gboolean
pidfd_ended (int pidfd)
{
  struct pollfd pfd = { .fd = pidfd, .events = POLLIN };

  return pidfd >= 0 && poll (&pfd, 1, 0) > 0;
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
check_kept_plan (SupervisorSandbox *s, const struct stat *st, GError **error)
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

static gboolean
load_plan (SupervisorSandbox *s, SupervisorTerms *out, GError **error)
{
  g_autoptr(GVariant) jail = NULL;
  const SandstepJailImage *image = NULL;
  const char *owner, *default_owner, *default_holder, *network, *pasta;
  gboolean ok;

  /* One the helper has just compiled is current by its making.  A kept one with a jail the front started on
   * it is checked while that jail finishes (sandstep_supervisor_sandbox_build()). */
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
      !g_variant_lookup (s->plan, "limits", "(txxt)", &out->memory, &out->pids, &out->cpu_time_s, &out->disk) ||
      !g_variant_lookup (s->plan, "pasta", "^&ay", &pasta) ||
      !g_variant_lookup (s->plan, "cpu-io", "(xx)", &s->limits.millicpus, &s->limits.io_weight) ||
      (jail = g_variant_lookup_value (s->plan, "jail", G_VARIANT_TYPE_VARDICT)) == NULL)
    return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                           "The sandbox's plan is damaged (a member is missing); reinstall sandstep if this persists");
  s->limits.memory = out->memory;
  s->limits.pids = out->pids;
  /* Absent from a plan an older helper kept: no retry-safe steps then. */
  if (!g_variant_lookup (s->plan, "retry-clean", "b", &out->retry_clean))
    out->retry_clean = FALSE;
  out->owner = g_strdup (owner);
  out->default_owner = g_strdup (default_owner);
  out->default_holder = g_strdup (default_holder);
  s->core_path = sandstep_program_path (NULL, "sandstep-core");
  out->core_path = g_strdup (s->core_path);
  s->pasta_path = g_strdup (pasta);
  /* Its own, which its starter set as sandstep-supervisor-start.h says. */
  s->helper_env = g_get_environ ();
  out->helper_env = g_strdupv (s->helper_env);
  s->jail = sandstep_jail_from_variant (image, jail, error);
  return s->jail != NULL;
}

SupervisorSandbox *
sandstep_supervisor_sandbox_load (const char *handle, int dir_fd, SandstepJailStart *adopt, SupervisorTerms *out_terms,
                                  GError **error)
{
  SupervisorSandbox *s = g_new0 (SupervisorSandbox, 1);

  s->handle = g_strdup (handle);
  s->dir_fd = dir_fd;
  s->adopt = *adopt;
  s->init = (SandstepJailProcess) { .pidfd = -1, .control = -1 };
  s->pasta = s->proxy = (SupervisorChild) { .pidfd = -1 };
  s->notices = -1;
  s->notice_text = g_string_new (NULL);
  if (!load_plan (s, out_terms, error))
    {
      /* The front's jail stays the caller's to abandon. */
      s->adopt = (SandstepJailStart) { .pid = -1, .pidfd = -1, .go = -1, .report = -1, .control = -1 };
      sandstep_supervisor_sandbox_free (s);
      return NULL;
    }
  *adopt = (SandstepJailStart) { .pid = -1, .pidfd = -1, .go = -1, .report = -1, .control = -1 };
  return s;
}

/* ---- the sandbox ---- */

/* The cgroup is made at the sandbox's first build, while its first process builds its root (where provision did
 * not make it).  On v1 the child moves itself in (sandstep_cgroup_open_moves()), so that no process is moved by its
 * pid, which waits for the kernel after a quiet spell (sandstep-cgroup-warm.h). */
static gboolean
attach_to_cgroup (int pid, int *out_fds, guint *out_n_fds, gpointer user_data, GError **error)
{
  SupervisorSandbox *s = user_data;
  const SandstepCgroupLimits *limits = &s->limits;

  *out_n_fds = 0;
  if (s->cgroup == NULL && sandstep_cgroup_kind () != SANDSTEP_CGROUP_NONE &&
      (s->cgroup = sandstep_cgroup_make (s->handle, limits, error)) == NULL)
    return FALSE;
  if (s->cgroup == NULL)
    return TRUE;
  if (sandstep_cgroup_kind () == SANDSTEP_CGROUP_V1 ? sandstep_cgroup_open_moves (s->cgroup, out_fds, out_n_fds, NULL)
                                                    : sandstep_cgroup_attach (s->cgroup, pid, NULL))
    return TRUE;
  /* Removed between its making and this move (a gc's sweep of empty cgroups, sandstep_cgroup_sweep): once more. */
  g_clear_pointer (&s->cgroup, sandstep_cgroup_free);
  if ((s->cgroup = sandstep_cgroup_make (s->handle, limits, error)) == NULL)
    return FALSE;
  return sandstep_cgroup_kind () == SANDSTEP_CGROUP_V1 ? sandstep_cgroup_open_moves (s->cgroup, out_fds, out_n_fds, error)
                                                       : sandstep_cgroup_attach (s->cgroup, pid, error);
}

/* On cgroup v2 the jail's first process is born in the sandbox's cgroup, made before it (sandstep_jail_start()):
 * its directory, or -1 (v1, or not made: attach_to_cgroup() makes it again and says why). */
static int
cgroup_to_start_in (SupervisorSandbox *s)
{
  const SandstepCgroupLimits *limits = &s->limits;
  g_autoptr(GError) error = NULL;

  if (sandstep_cgroup_kind () != SANDSTEP_CGROUP_V2)
    return -1;
  if (s->cgroup == NULL && (s->cgroup = sandstep_cgroup_make (s->handle, limits, &error)) == NULL)
    {
      g_debug ("No cgroup to start the sandbox in: %s", error != NULL ? error->message : "none here");
      return -1;
    }
  return sandstep_cgroup_dir_fd (s->cgroup);
}

static void
end_sandbox (SupervisorSandbox *s)
{
  sandstep_jail_end (&s->init);
  sandstep_supervisor_child_end (&s->pasta);
  sandstep_supervisor_child_end (&s->proxy);
  if (s->notices >= 0)
    close (s->notices);
  s->notices = -1;
  g_clear_pointer (&s->sources, g_array_unref);
}

/* The kept plan, checked once the jail the front started on it is in its cgroup: the jail finishes meanwhile. */
static gboolean
check_adopted_plan (gpointer user_data, GError **error)
{
  SupervisorSandbox *s = user_data;

  return (s->plan_checked = check_kept_plan (s, &s->plan_stat, error));
}

/* The jail the front started, as the sandbox; FALSE with no error when this supervisor is to build its own. */
static gboolean
adopt_sandbox (SupervisorSandbox *s, GError **error)
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

/* Where the helper's file tools find a layered sandbox's files: init's cwd (sandstep-jail-plan.c), named by the
 * pid and start time of init, whole or not at all. */
static void
note_init (SupervisorSandbox *s)
{
  g_autofree char *text = NULL;
  int fd;

  if (!sandstep_jail_layered (s->jail) || s->init.pid <= 0)
    return;
  /* In place and always as long, as the supervisor's pid is: a new file each start would cost an inode on the
   * first command's path.  The reader checks the start time, so a torn read is refused, never trusted. */
  text = g_strdup_printf ("%10d %20" G_GUINT64_FORMAT "\n", s->init.pid,
                          (guint64) sandstep_process_start_time (s->init.pid));
  fd = openat (s->dir_fd, SANDSTEP_SUPERVISOR_INIT_FILE, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return;
  if (pwrite (fd, text, strlen (text), 0) != (ssize_t) strlen (text))
    g_debug ("Could not note the sandbox's init: %s", g_strerror (errno));
  close (fd);
}

static gboolean
build_sandbox (SupervisorSandbox *s, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  int egress = -1;
  gboolean ok;

  end_sandbox (s);
  s->stale = FALSE;
  if (s->adopt.pidfd >= 0)
    {
      if (adopt_sandbox (s, error))
        {
          if (sandstep_jail_open_network (s->jail) &&
              !sandstep_supervisor_start_pasta (s->pasta_path, s->helper_env, s->init.pid, s->jail, &s->pasta, error))
            {
              end_sandbox (s);
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
  if (sandstep_jail_egress (s->jail) &&
      !sandstep_supervisor_start_proxy (s->core_path, s->helper_env, s->handle, &s->proxy, &s->notices, &egress, error))
    return FALSE;
  s->sources = sandstep_jail_sources (s->jail);
  ok = sandstep_jail_build (s->jail, egress, cgroup_to_start_in (s), attach_to_cgroup, s, &s->init, &local_error);
  /* Its first process killed from outside while it started: nothing ran yet, so build it again. */
  for (int retry = 0; !ok && retry < BUILD_RETRIES &&
                      g_error_matches (local_error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_KILLED); retry++)
    {
      g_clear_error (&local_error);
      ok = sandstep_jail_build (s->jail, egress, cgroup_to_start_in (s), attach_to_cgroup, s, &s->init, &local_error);
    }
  if (!ok)
    g_propagate_error (error, g_steal_pointer (&local_error));
  if (egress >= 0)
    close (egress);
  if (ok && sandstep_jail_open_network (s->jail))
    ok = sandstep_supervisor_start_pasta (s->pasta_path, s->helper_env, s->init.pid, s->jail, &s->pasta, error);
  if (!ok)
    end_sandbox (s);
  return ok;
}

/* Is the sandbox there, as it should be for the next command? */
gboolean
sandstep_supervisor_sandbox_live (SupervisorSandbox *s)
{
  return !s->stale && s->init.pidfd >= 0 && !pidfd_ended (s->init.pidfd) &&
         (!sandstep_jail_open_network (s->jail) || (s->pasta.pidfd >= 0 && !pidfd_ended (s->pasta.pidfd))) &&
         (!sandstep_jail_egress (s->jail) || (s->proxy.pidfd >= 0 && !pidfd_ended (s->proxy.pidfd)));
}

static gboolean
sandbox_current (SupervisorSandbox *s)
{
  g_autoptr(GArray) now = NULL;

  if (!sandstep_supervisor_sandbox_live (s))
    return FALSE;
  now = sandstep_jail_sources (s->jail);
  return sandstep_jail_sources_equal (s->sources, now);
}

gboolean
sandstep_supervisor_sandbox_build (SupervisorSandbox *s, GError **error)
{
  if (!build_sandbox (s, error))
    return FALSE;
  note_init (s);
  return TRUE;
}

gboolean
sandstep_supervisor_sandbox_ready (SupervisorSandbox *s, GError **error)
{
  if (sandbox_current (s) || sandstep_supervisor_sandbox_build (s, error))
    return TRUE;
  s->stale = TRUE;
  return FALSE;
}

void
sandstep_supervisor_sandbox_abandon_start (SupervisorSandbox *s)
{
  sandstep_jail_start_abandon (&s->adopt);
}

void
sandstep_supervisor_sandbox_mark_stale (SupervisorSandbox *s)
{
  s->stale = TRUE;
}

void
sandstep_supervisor_sandbox_end_init (SupervisorSandbox *s)
{
  sandstep_jail_end (&s->init);
}

void
sandstep_supervisor_sandbox_free (SupervisorSandbox *s)
{
  if (s == NULL)
    return;
  end_sandbox (s);
  sandstep_jail_start_abandon (&s->adopt);
  sandstep_cgroup_free (s->cgroup);
  g_clear_pointer (&s->jail, sandstep_jail_free);
  g_clear_pointer (&s->plan, g_variant_unref);
  g_string_free (s->notice_text, TRUE);
  g_strfreev (s->helper_env);
  g_free (s->pasta_path);
  g_free (s->core_path);
  g_free (s->handle);
  g_free (s);
}

guint32
sandstep_supervisor_sandbox_outer_uid (SupervisorSandbox *s)
{
  guint32 uid, gid;

  sandstep_jail_outer_ids (s->jail, &uid, &gid);
  return uid;
}

int
sandstep_supervisor_sandbox_control_fd (SupervisorSandbox *s)
{
  return s->init.control;
}

int
sandstep_supervisor_sandbox_init_pidfd (SupervisorSandbox *s)
{
  return s->init.pidfd;
}

int
sandstep_supervisor_sandbox_notices_fd (SupervisorSandbox *s)
{
  return s->notices;
}

/* ---- what init is told and says ---- */

gboolean
sandstep_supervisor_sandbox_run (SupervisorSandbox *s, gint32 id, gboolean beside, const char *command,
                                 char **caller_env, const int stdio[3])
{
  g_autoptr(GPtrArray) argv = sandstep_jail_command_argv (command);
  g_autoptr(GPtrArray) envp = sandstep_jail_environment (s->jail, caller_env);
  g_autoptr(GString) body = g_string_new (NULL);
  SandstepInitMessage header = { .kind = SANDSTEP_INIT_RUN, .flags = beside ? SANDSTEP_INIT_BESIDE : 0, .id = id };
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
  for (guint i = 0; i < envp->len; i++)
    g_string_append_len (body, envp->pdata[i], strlen (envp->pdata[i]) + 1);
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

void
sandstep_supervisor_sandbox_kill (SupervisorSandbox *s, gint32 id)
{
  SandstepInitMessage message = { .kind = SANDSTEP_INIT_KILL, .id = id };

  send (s->init.control, &message, sizeof message, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void
sandstep_supervisor_sandbox_counters (SupervisorSandbox *s, guint64 *out_oom_kills, guint64 *out_pids_max)
{
  sandstep_cgroup_counters (s->cgroup, out_oom_kills, out_pids_max);
}

SupervisorInitEvent
sandstep_supervisor_sandbox_read_init (SupervisorSandbox *s, gint32 *out_id, int *out_status, int *out_exec_error)
{
  SandstepInitMessage message;
  ssize_t n;

  do
    n = recv (s->init.control, &message, sizeof message, MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n < 0 && errno == EAGAIN)
    return SUPERVISOR_INIT_QUIET;
  if (n != (ssize_t) sizeof message || message.kind != SANDSTEP_INIT_EXITED)
    {
      /* init is gone, or says nonsense: the sandbox is rebuilt for the next command. */
      s->stale = TRUE;
      return SUPERVISOR_INIT_LOST;
    }
  *out_id = message.id;
  *out_status = message.status;
  *out_exec_error = message.error;
  return SUPERVISOR_INIT_EXITED;
}

void
sandstep_supervisor_sandbox_read_notices (SupervisorSandbox *s, SupervisorNoticeFunc say, gpointer user_data)
{
  char buf[4096];
  ssize_t n;
  char *eol;

  while ((n = read (s->notices, buf, sizeof buf)) > 0)
    g_string_append_len (s->notice_text, buf, n);
  while ((eol = strchr (s->notice_text->str, '\n')) != NULL)
    {
      *eol = '\0';
      say (s->notice_text->str, user_data);
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
