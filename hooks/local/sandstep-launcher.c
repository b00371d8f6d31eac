/* sandstep-launcher.c: a sandbox's launcher; see sandstep-launcher.h. */
#include "sandstep-launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-jail.h"
#include "sandstep-launch-wire.h"
#include "sandstep-limits.h"
#include "sandstep-local.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* How long a request may take to arrive once its caller connected: for one
 * that will run, and for one sent the ordinary way while a command runs. */
#define REQUEST_TIMEOUT_S 2
#define REFUSE_TIMEOUT_MS 100
/* How long sandstep_launcher_stop() waits for each signal to work. */
#define STOP_GRACE_MS 2000

/* Builds jails on its own thread, one ahead: the next command's jail is
 * made while the current one runs, so that a command right after another
 * finds its jail ready.  Its own thread because a jail's init dies with the
 * thread that cloned it (PR_SET_PDEATHSIG), and this one lives as long as
 * the launcher. */
typedef struct {
  GMutex lock;
  GCond changed;
  GThread *thread;
  SandstepJail *jail;
  const char *handle;
  SandstepLimits limits;
  gboolean wanted;             /* build one */
  gboolean quit;
  gboolean failed;
  gboolean have;               /* .ready holds a jail */
  SandstepJailReady ready;
} Builder;

/* Jails whose command ended and whose init still tears its namespaces down. */
#define MAX_REAPING 8

typedef struct {
  SandstepStore *store;
  const char *handle;
  const SandstepLauncherHooks *hooks;
  SandstepRecord *record;
  SandstepJail *jail;
  Builder builder;
  SandstepCgroup *cgroup;      /* its paths, found once: the builder moves this process while it builds */
  int dir_fd;                  /* the sandbox's directory */
  int listener;
  int watch;                   /* inotify on the sandbox's directory */
  int signals;
  int reaping[MAX_REAPING];    /* pidfds */
  gint64 idle_deadline;        /* monotonic µs */
  gboolean done;

  /* The command that runs, when conn >= 0. */
  int conn;
  int claim_fd;
  int err_fd;                  /* the caller's stderr, for the report */
  int status_fd;               /* init says the exit status here */
  char *request_text;          /* owns the strings of .request */
  SandstepLaunchRequest request;
  SandstepJailProcess process;
  gint64 deadline;             /* monotonic µs */
  gboolean caller_gone;
  SandstepRunResult result;
  guint64 oom_kills, pids_max;
} Launcher;

static void
reply (int conn, SandstepLaunchKind kind, int exit_status)
{
  SandstepLaunchReply message = { kind, exit_status };

  if (send (conn, &message, sizeof message, MSG_NOSIGNAL) < 0)
    g_debug ("Could not answer a caller: %s", g_strerror (errno));
}

/* The socket's address through the directory's fd: any state path fits sun_path. */
static void
socket_address (Launcher *launcher, struct sockaddr_un *address)
{
  memset (address, 0, sizeof *address);
  address->sun_family = AF_UNIX;
  g_snprintf (address->sun_path, sizeof address->sun_path, "/proc/self/fd/%d/" SANDSTEP_LAUNCH_SOCKET,
              launcher->dir_fd);
}

static gboolean
alive (const SandstepRecord *record)
{
  return g_get_real_time () / G_USEC_PER_SEC < record->expires;
}

/* One jail, born in the sandbox's cgroup. */
static gboolean
build_one (Builder *builder, SandstepJailReady *out_ready, GError **error)
{
  SandstepCgroup *cgroup;
  gboolean memory_hit, pids_hit;
  gboolean ok;

  /* Only this thread moves (where it can): the launcher's other thread stays out of the sandbox's counts. */
  cgroup = sandstep_cgroup_enter_thread (builder->handle, builder->limits.memory, builder->limits.pids, error);
  if (cgroup == NULL && error != NULL && *error != NULL)
    return FALSE;
  ok = sandstep_jail_prepare (builder->jail, out_ready, error);
  sandstep_cgroup_leave (cgroup, &memory_hit, &pids_hit);
  return ok;
}

static gpointer
builder_thread (gpointer data)
{
  Builder *builder = data;

  g_mutex_lock (&builder->lock);
  for (;;)
    {
      SandstepJailReady ready;
      g_autoptr(GError) error = NULL;
      gboolean ok;

      while (!builder->wanted && !builder->quit)
        g_cond_wait (&builder->changed, &builder->lock);
      if (builder->quit)
        break;
      g_mutex_unlock (&builder->lock);
      ok = build_one (builder, &ready, &error);
      if (!ok)
        g_debug ("%s", error->message);
      g_mutex_lock (&builder->lock);
      builder->wanted = FALSE;
      builder->failed = !ok;
      builder->have = ok;
      if (ok)
        builder->ready = ready;
      g_cond_broadcast (&builder->changed);
    }
  g_mutex_unlock (&builder->lock);
  return NULL;
}

static void
builder_start (Builder *builder, SandstepJail *jail, const char *handle, const SandstepLimits *limits)
{
  g_mutex_init (&builder->lock);
  g_cond_init (&builder->changed);
  builder->jail = jail;
  builder->handle = handle;
  builder->limits = sandstep_limits_resolve (limits);
  builder->wanted = TRUE;
  builder->thread = g_thread_new ("sandstep-builder", builder_thread, builder);
}

/* The jail built ahead, waiting for it if it is being built; asks for the next. */
static gboolean
builder_take (Builder *builder, SandstepJailReady *out_ready)
{
  gboolean ok;

  g_mutex_lock (&builder->lock);
  while (builder->wanted && !builder->have)
    g_cond_wait (&builder->changed, &builder->lock);
  ok = builder->have;
  if (ok)
    {
      *out_ready = builder->ready;
      builder->have = FALSE;
      builder->wanted = TRUE;
      g_cond_broadcast (&builder->changed);
    }
  g_mutex_unlock (&builder->lock);
  return ok;
}

static gboolean
builder_failed (Builder *builder)
{
  gboolean failed;

  g_mutex_lock (&builder->lock);
  failed = builder->failed;
  g_mutex_unlock (&builder->lock);
  return failed;
}

static void
builder_stop (Builder *builder)
{
  if (builder->thread == NULL)
    return;
  g_mutex_lock (&builder->lock);
  builder->quit = TRUE;
  g_cond_broadcast (&builder->changed);
  g_mutex_unlock (&builder->lock);
  g_thread_join (builder->thread);
  if (builder->have)
    sandstep_jail_ready_clear (&builder->ready);
  g_mutex_clear (&builder->lock);
  g_cond_clear (&builder->changed);
}

/* Collects jails whose init has exited; with @all, waits for every one. */
static void
reap (Launcher *launcher, gboolean all)
{
  for (int i = 0; i < MAX_REAPING; i++)
    {
      struct pollfd pfd = { .fd = launcher->reaping[i], .events = POLLIN };
      if (pfd.fd < 0 || (!all && poll (&pfd, 1, 0) <= 0))
        continue;
      while (waitid (P_PIDFD, pfd.fd, &(siginfo_t) { 0 }, WEXITED) < 0 && errno == EINTR)
        ;
      close (pfd.fd);
      launcher->reaping[i] = -1;
    }
}

static void
reap_later (Launcher *launcher, int pidfd)
{
  for (;;)
    {
      for (int i = 0; i < MAX_REAPING; i++)
        if (launcher->reaping[i] < 0)
          {
            launcher->reaping[i] = pidfd;
            return;
          }
      reap (launcher, TRUE);
    }
}

/* Reads one request; @out_text owns the strings of @out_request. */
static gboolean
receive_request (int conn, int fds[3], char **out_text, SandstepLaunchRequest *out_request)
{
  union { char buf[CMSG_SPACE (3 * sizeof (int))]; struct cmsghdr align; } control;
  struct iovec iov;
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                        .msg_controllen = sizeof control.buf };
  struct cmsghdr *cmsg;
  const char *fields[SANDSTEP_LAUNCH_FIELDS];
  g_autoptr(GPtrArray) env = g_ptr_array_new ();
  char *buf = g_malloc (SANDSTEP_LAUNCH_MAX + 1);
  const char *p, *end;
  ssize_t n;

  iov.iov_base = buf;
  iov.iov_len = SANDSTEP_LAUNCH_MAX;
  do
    n = recvmsg (conn, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  cmsg = CMSG_FIRSTHDR (&msg);
  if (cmsg != NULL && cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS &&
      cmsg->cmsg_len == CMSG_LEN (3 * sizeof (int)))
    memcpy (fds, CMSG_DATA (cmsg), 3 * sizeof (int));
  else if (cmsg != NULL && cmsg->cmsg_type == SCM_RIGHTS)
    {
      /* Not ours to keep: close whatever came. */
      int count = (cmsg->cmsg_len - CMSG_LEN (0)) / sizeof (int);
      for (int i = 0; i < count; i++)
        close (((int *) CMSG_DATA (cmsg))[i]);
    }
  if (n <= 0 || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || fds[0] < 0)
    {
      g_free (buf);
      return FALSE;
    }

  /* Fields, then environment entries; every string NUL-terminated. */
  buf[n] = '\0';
  end = buf + n;
  p = buf;
  for (int i = 0; i < SANDSTEP_LAUNCH_FIELDS; i++)
    {
      if (p >= end)
        {
          g_free (buf);
          return FALSE;
        }
      fields[i] = p;
      p += strlen (p) + 1;
    }
  for (; p < end; p += strlen (p) + 1)
    g_ptr_array_add (env, (char *) p);
  g_ptr_array_add (env, NULL);
  if (strcmp (fields[SANDSTEP_LAUNCH_FIELD_MAGIC], SANDSTEP_LAUNCH_MAGIC) != 0)
    {
      g_free (buf);
      return FALSE;
    }
  *out_text = buf;
  *out_request = (SandstepLaunchRequest) {
    .handle = fields[SANDSTEP_LAUNCH_FIELD_HANDLE],
    .owner = fields[SANDSTEP_LAUNCH_FIELD_OWNER],
    .holder = fields[SANDSTEP_LAUNCH_FIELD_HOLDER],
    .wait = fields[SANDSTEP_LAUNCH_FIELD_WAIT],
    .timeout = fields[SANDSTEP_LAUNCH_FIELD_TIMEOUT],
    .command = fields[SANDSTEP_LAUNCH_FIELD_COMMAND],
    .env = (char **) g_ptr_array_free (g_steal_pointer (&env), FALSE),
  };
  return TRUE;
}

static void
forget_request (char **text, SandstepLaunchRequest *request)
{
  g_free (request->env);
  g_clear_pointer (text, g_free);
  memset (request, 0, sizeof *request);
}

static void check_sandbox (Launcher *launcher);
static void destroy_own_sandbox (Launcher *launcher, int claim_fd);

/* TRUE if @pid shares this process's user namespace (not a jail's). */
static gboolean
same_user_namespace (pid_t pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/ns/user", (int) pid);
  struct stat theirs, ours;

  return pid > 0 && stat (path, &theirs) == 0 && stat ("/proc/self/ns/user", &ours) == 0 &&
         theirs.st_dev == ours.st_dev && theirs.st_ino == ours.st_ino;
}

/* Sends a caller the ordinary way.  Its request is read first: a unix socket
 * closed with unread data resets the peer, which would lose the answer.
 * A caller sends it right after connecting; one that does not is not waited
 * for long, since a command may be running meanwhile. */
static void
refuse (int conn)
{
  struct timeval patience = { .tv_usec = REFUSE_TIMEOUT_MS * 1000 };
  int fds[3] = { -1, -1, -1 };
  SandstepLaunchRequest request;
  char *text = NULL;

  setsockopt (conn, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience);
  if (receive_request (conn, fds, &text, &request))
    forget_request (&text, &request);
  for (int i = 0; i < 3; i++)
    if (fds[i] >= 0)
      close (fds[i]);
  reply (conn, SANDSTEP_LAUNCH_FALLBACK, 0);
  close (conn);
}

/* Starts the caller's command in the jail built for it, or tells the caller
 * to run it the ordinary way.  Takes @conn. */
static void
begin (Launcher *launcher, int conn)
{
  struct ucred peer;
  socklen_t len = sizeof peer;
  int fds[3] = { -1, -1, -1 };
  g_autofree char *owner = NULL;
  g_autofree char *holder = NULL;
  g_autofree char *current = NULL;
  g_autoptr(GError) error = NULL;
  SandstepJailReady ready;
  double timeout_s = 0, remaining, budget;
  int claim_fd = -1;

  /* The directory is the owner's alone; this is the second lock on the door.
   * Another user (root, say) runs the ordinary way, as itself; so does a
   * process of a jail (its uid 0 is this uid) that could reach the socket
   * through a data mount: it never drives a sandbox's launcher. */
  if (getsockopt (conn, SOL_SOCKET, SO_PEERCRED, &peer, &len) < 0 || peer.uid != getuid () ||
      !same_user_namespace (peer.pid))
    {
      refuse (conn);
      return;
    }
  {
    struct timeval patience = { .tv_sec = REQUEST_TIMEOUT_S };
    setsockopt (conn, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience);
  }
  if (!receive_request (conn, fds, &launcher->request_text, &launcher->request))
    goto fallback;
  if (strcmp (launcher->request.handle, launcher->handle) != 0 ||
      !launcher->hooks->accept (&launcher->request, &owner, &holder, &timeout_s, launcher->hooks->user_data))
    goto fallback;

  /* The record as of now: a release, an extension or a destruction shows in the directory's events. */
  check_sandbox (launcher);
  if (launcher->done || strcmp (launcher->record->owner, owner) != 0 || !alive (launcher->record))
    goto fallback;
  claim_fd = sandstep_store_try_claim (launcher->store, launcher->handle, holder, &current, NULL);
  if (claim_fd < 0)
    goto fallback;
  /* A release that came just before the claim left the destruction to us, as to any holder. */
  check_sandbox (launcher);
  if (launcher->done || !alive (launcher->record))
    {
      if (!launcher->done && launcher->record->released)
        destroy_own_sandbox (launcher, claim_fd);
      close (claim_fd);
      goto fallback;
    }
  if (!builder_take (&launcher->builder, &ready))
    {
      close (claim_fd);
      launcher->done = TRUE;
      goto fallback;
    }
  /* Built before a data mount (or /etc, /usr) was replaced on the host: the ordinary path binds it afresh. */
  if (!sandstep_jail_ready_current (launcher->jail, &ready))
    {
      sandstep_jail_ready_clear (&ready);
      close (claim_fd);
      goto fallback;
    }

  /* The command's budget never outlives the sandbox. */
  remaining = MAX (launcher->record->expires - g_get_real_time () / (double) G_USEC_PER_SEC, 0);
  budget = timeout_s > 0 ? MIN (timeout_s, remaining) : remaining;
  memset (&launcher->result, 0, sizeof launcher->result);
  launcher->result.clamped = timeout_s <= 0 || timeout_s > remaining;
  launcher->result.applied_timeout_s = budget;

  sandstep_cgroup_counters (launcher->cgroup, &launcher->oom_kills, &launcher->pids_max);
  if (!sandstep_jail_start (launcher->jail, &ready, launcher->request.command, fds, launcher->request.env,
                            &launcher->process, &launcher->status_fd, &error))
    {
      /* Nothing ran: the ordinary path builds a jail of its own and says what fails. */
      g_debug ("%s", error->message);
      close (claim_fd);
      goto fallback;
    }
  /* From here the caller must not run it again, whatever becomes of this launcher. */
  reply (conn, SANDSTEP_LAUNCH_STARTED, 0);
  close (fds[0]);
  close (fds[1]);
  launcher->err_fd = fds[2];
  launcher->conn = conn;
  launcher->claim_fd = claim_fd;
  launcher->caller_gone = FALSE;
  launcher->deadline = g_get_monotonic_time () + (gint64) (budget * G_USEC_PER_SEC);
  return;

fallback:
  for (int i = 0; i < 3; i++)
    if (fds[i] >= 0)
      close (fds[i]);
  forget_request (&launcher->request_text, &launcher->request);
  reply (conn, SANDSTEP_LAUNCH_FALLBACK, 0);
  close (conn);
}

/* Destroys the sandbox, whose claim @claim_fd holds, after its jails: they live in its cgroup. */
static void
destroy_own_sandbox (Launcher *launcher, int claim_fd)
{
  builder_stop (&launcher->builder);
  memset (&launcher->builder, 0, sizeof launcher->builder);
  reap (launcher, TRUE);
  sandstep_store_destroy (launcher->store, launcher->handle, claim_fd, NULL);
  launcher->done = TRUE;
}

/* The command ended (or was killed): report, release the claim, finish a release. */
static void
finish (Launcher *launcher)
{
  int32_t code;
  ssize_t n;
  guint64 oom_kills, pids_max;

  do
    n = read (launcher->status_fd, &code, sizeof code);
  while (n < 0 && errno == EINTR);
  close (launcher->status_fd);
  launcher->status_fd = -1;
  if (n == (ssize_t) sizeof code)
    {
      /* Init has ended every process of the jail; its namespaces go while the caller moves on. */
      launcher->result.exit_status = code;
      reap_later (launcher, launcher->process.pidfd);
    }
  else
    {
      /* Init itself was killed: at the deadline, or by the caller going away. */
      gboolean timed_out;
      if (!sandstep_jail_wait (&launcher->process, 0, &launcher->result.exit_status, &timed_out, NULL))
        launcher->result.exit_status = SANDSTEP_EXIT_INTERNAL;
    }
  launcher->process.pidfd = -1;
  sandstep_cgroup_counters (launcher->cgroup, &oom_kills, &pids_max);
  launcher->result.memory_limit_hit = oom_kills > launcher->oom_kills;
  launcher->result.pids_limit_hit = pids_max > launcher->pids_max;

  if (!launcher->caller_gone)
    {
      int exit_status = launcher->hooks->report (launcher->err_fd, launcher->record->spec, &launcher->request,
                                                 &launcher->result, launcher->hooks->user_data);
      reply (launcher->conn, SANDSTEP_LAUNCH_DONE, exit_status);
    }
  close (launcher->conn);
  close (launcher->err_fd);
  launcher->conn = launcher->err_fd = -1;
  forget_request (&launcher->request_text, &launcher->request);

  /* A release that came while the command ran left the destruction to its holder. */
  check_sandbox (launcher);
  if (!launcher->done && launcher->record->released && !alive (launcher->record))
    destroy_own_sandbox (launcher, launcher->claim_fd);
  close (launcher->claim_fd);
  launcher->claim_fd = -1;
  launcher->idle_deadline = g_get_monotonic_time () + SANDSTEP_LAUNCHER_IDLE_S * G_USEC_PER_SEC;
}

/* Something changed in the sandbox's directory: is the sandbox still there and alive? */
static void
check_sandbox (Launcher *launcher)
{
  char buf[4096] __attribute__ ((aligned (__alignof__ (struct inotify_event))));
  gboolean reload = FALSE;
  ssize_t n;

  while ((n = read (launcher->watch, buf, sizeof buf)) > 0)
    for (char *p = buf; p < buf + n;)
      {
        const struct inotify_event *event = (const struct inotify_event *) p;
        if (event->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED))
          launcher->done = TRUE;
        else if (event->len > 0 && strcmp (event->name, "record.json") == 0)
          reload = TRUE;
        p += sizeof *event + event->len;
      }
  if (reload && !launcher->done)
    {
      SandstepRecord *record = sandstep_store_load (launcher->store, launcher->handle, NULL);
      if (record == NULL)
        launcher->done = TRUE;
      else
        {
          sandstep_record_free (launcher->record);
          launcher->record = record;
        }
    }
}

static void
loop (Launcher *launcher)
{
  /* Once done, a command that runs still ends as usual; nothing new starts. */
  while (!launcher->done || launcher->conn >= 0)
    {
      struct pollfd fds[5 + MAX_REAPING] = {
        { .fd = launcher->signals, .events = POLLIN },
        { .fd = launcher->watch, .events = POLLIN },
        { .fd = launcher->done ? -1 : launcher->listener, .events = POLLIN },
        { .fd = launcher->conn >= 0 && !launcher->caller_gone ? launcher->conn : -1, .events = POLLIN },
        { .fd = launcher->conn >= 0 ? launcher->status_fd : -1, .events = POLLIN },
      };
      gint64 now = g_get_monotonic_time ();
      gint64 until;
      gboolean reaping = FALSE;
      int r;

      for (int i = 0; i < MAX_REAPING; i++)
        {
          fds[5 + i] = (struct pollfd) { .fd = launcher->reaping[i], .events = POLLIN };
          reaping = reaping || launcher->reaping[i] >= 0;
        }

      if (launcher->conn >= 0)
        until = launcher->result.timed_out ? -1 : launcher->deadline;
      else
        until = MIN (launcher->idle_deadline,
                     now + (launcher->record->expires - g_get_real_time () / G_USEC_PER_SEC) * G_USEC_PER_SEC);
      r = poll (fds, G_N_ELEMENTS (fds), until < 0 ? -1 : (int) CLAMP ((until - now + 999) / 1000, 0, G_MAXINT));
      if (r < 0 && errno != EINTR)
        break;
      now = g_get_monotonic_time ();

      if (fds[0].revents & POLLIN)
        {
          struct signalfd_siginfo info;
          launcher->done = TRUE;
          if (read (launcher->signals, &info, sizeof info) > 0 && launcher->conn >= 0)
            {
              /* Told to stop mid-command (destroy): end the jail; the caller ends as if killed. */
              sandstep_jail_kill (&launcher->process);
              launcher->caller_gone = TRUE;
              reply (launcher->conn, SANDSTEP_LAUNCH_DONE, 128 + (int) info.ssi_signo);
              finish (launcher);
            }
          break;
        }
      if (reaping)
        reap (launcher, FALSE);
      if (fds[1].revents & POLLIN)
        check_sandbox (launcher);
      if (launcher->conn < 0 && builder_failed (&launcher->builder))
        launcher->done = TRUE;
      if (launcher->conn >= 0)
        {
          if (fds[3].revents & (POLLIN | POLLHUP | POLLERR))
            {
              /* The caller went away (killed with make): so does its command. */
              launcher->caller_gone = TRUE;
              sandstep_jail_kill (&launcher->process);
            }
          /* An exit status that came in time wins over the deadline. */
          if (fds[4].revents & (POLLIN | POLLHUP | POLLERR))
            finish (launcher);
          else if (!launcher->result.timed_out && now >= launcher->deadline)
            {
              launcher->result.timed_out = TRUE;
              sandstep_jail_kill (&launcher->process);
            }
        }
      else if (now >= launcher->idle_deadline || !alive (launcher->record))
        launcher->done = TRUE;
      if (!launcher->done && (fds[2].revents & POLLIN))
        {
          int conn = accept4 (launcher->listener, NULL, NULL, SOCK_CLOEXEC);
          if (conn >= 0 && launcher->conn >= 0)
            /* Busy with a command: the ordinary path waits for the claim, or says who holds it. */
            refuse (conn);
          else if (conn >= 0)
            begin (launcher, conn);
        }
    }
}

/* Every caller still queued runs the ordinary way: nobody is left without an answer. */
static void
close_listener (Launcher *launcher)
{
  int conn;

  unlinkat (launcher->dir_fd, SANDSTEP_LAUNCH_SOCKET, 0);
  while ((conn = accept4 (launcher->listener, NULL, NULL, SOCK_CLOEXEC)) >= 0)
    refuse (conn);
  close (launcher->listener);
}

static int
open_lock (SandstepStore *store, const char *handle, int flags)
{
  g_autofree char *rel = g_build_filename ("sandboxes", handle, SANDSTEP_LAUNCH_LOCK, NULL);

  return openat (store->dir_fd, rel, flags | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
}

gboolean
sandstep_launcher_serve (SandstepStore *store, const char *handle, const SandstepLauncherHooks *hooks,
                         GError **error)
{
  g_autofree char *dir = g_build_filename ("sandboxes", handle, NULL);
  g_autofree char *watched = NULL;
  Launcher launcher = { .store = store, .handle = handle, .hooks = hooks, .dir_fd = -1, .listener = -1,
                        .watch = -1, .signals = -1, .conn = -1, .claim_fd = -1, .err_fd = -1,
                        .status_fd = -1, .reaping = { -1, -1, -1, -1, -1, -1, -1, -1 } };
  struct sockaddr_un address;
  sigset_t stop;
  gboolean ok = FALSE;

  launcher.record = sandstep_store_load (store, handle, NULL);
  if (launcher.record == NULL || launcher.record->spec->network == SANDSTEP_NETWORK_ALLOW || !alive (launcher.record))
    {
      ok = TRUE;
      goto out;
    }

  sigemptyset (&stop);
  sigaddset (&stop, SIGTERM);
  sigaddset (&stop, SIGINT);
  sigaddset (&stop, SIGHUP);
  /* A caller's stderr closed under a report is EPIPE, not death; the jail's child clears the mask. */
  sigaddset (&stop, SIGPIPE);
  if (sigprocmask (SIG_BLOCK, &stop, NULL) < 0)
    goto out;
  sigdelset (&stop, SIGPIPE);
  if ((launcher.signals = signalfd (-1, &stop, SFD_CLOEXEC)) < 0 ||
      (launcher.dir_fd = openat (store->dir_fd, dir, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0 ||
      (launcher.watch = inotify_init1 (IN_CLOEXEC | IN_NONBLOCK)) < 0)
    {
      sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                            "Could not set up the launcher of sandbox '%s'", handle);
      goto out;
    }
  watched = g_strdup_printf ("/proc/self/fd/%d", launcher.dir_fd);
  if (inotify_add_watch (launcher.watch, watched,
                         IN_DELETE_SELF | IN_MOVE_SELF | IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE) < 0)
    {
      sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                            "Could not watch the directory of sandbox '%s'", handle);
      goto out;
    }

  launcher.cgroup = sandstep_cgroup_find (handle);
  launcher.jail = sandstep_local_jail_new (store, launcher.record, error);
  if (launcher.jail == NULL)
    goto out;
  builder_start (&launcher.builder, launcher.jail, handle, &launcher.record->spec->limits);

  socket_address (&launcher, &address);
  unlinkat (launcher.dir_fd, SANDSTEP_LAUNCH_SOCKET, 0);
  launcher.listener = socket (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (launcher.listener < 0 || bind (launcher.listener, (struct sockaddr *) &address, sizeof address) < 0 ||
      listen (launcher.listener, 64) < 0)
    {
      sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                            "Could not listen on the launcher socket of sandbox '%s'", handle);
      if (launcher.listener >= 0)
        close (launcher.listener);
      launcher.listener = -1;
      goto out;
    }
  launcher.idle_deadline = g_get_monotonic_time () + SANDSTEP_LAUNCHER_IDLE_S * G_USEC_PER_SEC;
  loop (&launcher);
  ok = TRUE;

out:
  if (launcher.listener >= 0)
    close_listener (&launcher);
  builder_stop (&launcher.builder);
  reap (&launcher, TRUE);
  sandstep_cgroup_free (launcher.cgroup);
  sandstep_jail_free (launcher.jail);
  sandstep_record_free (launcher.record);
  for (int i = 0; i < 3; i++)
    {
      int fd = i == 0 ? launcher.dir_fd : i == 1 ? launcher.watch : launcher.signals;
      if (fd >= 0)
        close (fd);
    }
  return ok;
}

void
sandstep_launcher_ensure (SandstepStore *store, const char *handle)
{
  char *argv[] = { (char *) "sandstep", (char *) "--launcher", (char *) handle, NULL };
  g_autofree char *self = NULL;
  g_autofree char *state_dir = NULL;
  g_auto(GStrv) envp = NULL;
  g_autofree char *pid_text = NULL;
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  sigset_t all, none;
  int lock = open_lock (store, handle, O_CREAT);
  int store_fd = -1, lock_fd = -1;
  pid_t pid = -1;

  /* Most runs find one running: nothing more to do then. */
  if (lock < 0 || flock (lock, LOCK_EX | LOCK_NB) < 0 || (self = g_file_read_link ("/proc/self/exe", NULL)) == NULL)
    {
      if (lock >= 0)
        close (lock);
      return;
    }
  /* Absolute: the launcher leaves the caller's working directory (it must not pin it). */
  state_dir = g_canonicalize_filename (store->dir, NULL);
  envp = g_environ_setenv (g_get_environ (), "SANDSTEP_STATE_DIR", state_dir, TRUE);
  /* The launcher inherits this lock, so sandstep_launcher_stop() sees it from
   * this moment, not from when it has started; until the pid is written,
   * the file is empty and stop waits for it. */
  if (ftruncate (lock, 0) < 0 || (store_fd = fcntl (store->dir_fd, F_DUPFD_CLOEXEC, 10)) < 0 ||
      (lock_fd = fcntl (lock, F_DUPFD_CLOEXEC, 10)) < 0)
    goto out;

  /* Its own session, no terminal, in /, and of ours only the store and the
   * lock (SANDSTEP_LAUNCHER_STORE_FD, _LOCK_FD): make must not wait on it. */
  posix_spawn_file_actions_init (&actions);
  posix_spawn_file_actions_addopen (&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen (&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen (&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2 (&actions, store_fd, SANDSTEP_LAUNCHER_STORE_FD);
  posix_spawn_file_actions_adddup2 (&actions, lock_fd, SANDSTEP_LAUNCHER_LOCK_FD);
  posix_spawn_file_actions_addclosefrom_np (&actions, SANDSTEP_LAUNCHER_LOCK_FD + 1);
  posix_spawn_file_actions_addchdir_np (&actions, "/");
  /* Nothing of the first caller's signal state: an ignored SIGTERM would outlive a destroy, and every
   * command after would inherit what was ignored. */
  posix_spawnattr_init (&attributes);
  sigfillset (&all);
  sigemptyset (&none);
  posix_spawnattr_setsigdefault (&attributes, &all);
  posix_spawnattr_setsigmask (&attributes, &none);
  posix_spawnattr_setflags (&attributes, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  if (posix_spawn (&pid, self, &actions, &attributes, argv, envp) != 0)
    pid = -1;
  posix_spawn_file_actions_destroy (&actions);
  posix_spawnattr_destroy (&attributes);
  if (pid > 0)
    {
      pid_text = g_strdup_printf ("%d %" G_GUINT64_FORMAT "\n", (int) pid, sandstep_process_start_time (pid));
      if (pwrite (lock, pid_text, strlen (pid_text), 0) < 0)
        g_debug ("Could not write the pid of the launcher of '%s'", handle);
    }

out:
  if (store_fd >= 0)
    close (store_fd);
  if (lock_fd >= 0)
    close (lock_fd);
  close (lock);
}

/* Sends @sig and waits until @pidfd's process ended; TRUE if it did. */
static gboolean
signal_and_wait (int pidfd, int sig)
{
  struct pollfd pfd = { .fd = pidfd, .events = POLLIN };

  syscall (SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
  return poll (&pfd, 1, STOP_GRACE_MS) > 0;
}

void
sandstep_launcher_stop (SandstepStore *store, const char *handle)
{
  int lock = open_lock (store, handle, 0);
  int pid = 0, pidfd;
  guint64 start = 0;

  if (lock < 0)
    return;
  /* Held with no pid yet, or a dead launcher's: its starter writes the new
   * one right after the spawn.  Only the launcher the file names, identified
   * by pid and start time, is signalled. */
  for (int attempt = 0; attempt < 500; attempt++)
    {
      char text[64] = { 0 };
      if (flock (lock, LOCK_EX | LOCK_NB) == 0)
        break;
      if (pread (lock, text, sizeof text - 1, 0) > 0 && sscanf (text, "%d %" G_GUINT64_FORMAT, &pid, &start) == 2 &&
          pid > 0 && start != 0 && (pid == getpid () || sandstep_process_start_time (pid) == start))
        {
          if (pid != getpid () && (pidfd = syscall (SYS_pidfd_open, pid, 0)) >= 0)
            {
              /* The start time again, now that the pidfd pins the process. */
              if (sandstep_process_start_time (pid) == start && !signal_and_wait (pidfd, SIGTERM))
                signal_and_wait (pidfd, SIGKILL);
              close (pidfd);
            }
          break;
        }
      g_usleep (2000);
    }
  close (lock);
}
