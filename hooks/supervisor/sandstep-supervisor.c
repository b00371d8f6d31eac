/* sandstep-supervisor.c: one live sandbox's supervisor; see sandstep-supervisor.h.
 *
 * Single-threaded and poll-driven: the jail is built with clone3(), which
 * wants a single thread, and every wait is one of the fds below.  It is
 * linked statically with GLib's core only (no GIO, no JSON): the helper
 * compiled everything it needs into its plan.
 */
#include "sandstep-supervisor.h"
#include "sandstep-supervisor-keep.h"
#include "sandstep-supervisor-command.h"
#include "sandstep-supervisor-sandbox.h"
#include "sandstep-read-libc.h"
#include "sandstep-remove-libc.h"
#include "sandstep-units.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "sandstep-cgroup.h"
#include "sandstep-claim-libc.h"
#include "sandstep-error.h"
#include "sandstep-jail-init.h"
#include "sandstep-process-state.h"
#include "sandstep-test-hooks.h"

/* How often a supervisor looks whether its sandbox's directory changed under it (destroyed by hand, released,
 * its record or claim replaced); a command always looks first. */
#define CHECK_INTERVAL_US (1 * G_USEC_PER_SEC)
/* Callers that wait here for the sandbox at most; any more take the ordinary path, which waits as well. */
#define WAITING_MAX 64

typedef struct {
  char *handle;
  SupervisorTerms terms;

  int store_fd;
  int dir_fd;              /* the sandbox's directory */
  int claim_fd;
  guint64 start_time;      /* ours, for the claim: a pid is named with it */
  char *own_userns;        /* where the sandbox's uid is ours: our user namespace, as /proc/self/ns/user names it */
  SupervisorRules rules;   /* what each command is judged by: the above, once started */
  int listener;
  ino_t listener_ino;  /* the socket it bound: anything else under its name is damage */
  /* What the directory held when we started, checked every CHECK_INTERVAL_US and before each command (no inotify
   * instance: those are counted per user, host-wide, and 128 by default). */
  struct stat dir_stat, record_stat, lifetime_stat;
  gint64 next_check;       /* monotonic µs */
  int signals;
  gint64 expires;
  gboolean released;
  gboolean ends_when_idle; /* released with nothing kept: running commands keep their budgets */
  gint64 idle_us;          /* how long it stays without a command (idle_time()) */
  int keep_ending;         /* ending idle: the keep lock, held until the jail is gone (sandstep-supervisor-keep.h) */
  gint64 idle_deadline;
  gboolean done;
  gboolean ending;         /* done once no command runs; until then, only commands beside those begin */
  gboolean reclaim;        /* a release came while a command ran under our claim: destroying is ours */
  int stop_signal;

  SandstepJailStart adopt;  /* the jail the front started for us, until the sandbox takes it */
  SupervisorSandbox *sandbox;
  GPtrArray *running;      /* of SupervisorCommand, as they began: several only beside each other */
  GQueue waiting;          /* of SupervisorCaller, in the order they came */
  gint64 next_try;         /* monotonic µs: when the first of them asks again (another recipe's hold may end) */
  gint64 try_pause_us;
} Supervisor;

/* ---- small things ---- */

static gint64
now_unix (void)
{
  return g_get_real_time () / G_USEC_PER_SEC;
}

/* "EXPIRES RELEASED": the record's lifetime, which the store keeps beside it for us (RELEASED's values:
 * write_lifetime() in sandstep-store.c). */
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
  s->ends_when_idle = released == 2;
  return TRUE;
}

/* SANDSTEP_SUPERVISOR_IDLE_S in µs, or a test's shorter time (SANDSTEP_TEST_SUPERVISOR_IDLE_S, build tree
 * only). */
static gint64
idle_time (void)
{
  const char *value = sandstep_test_hook ("SANDSTEP_TEST_SUPERVISOR_IDLE_S");
  guint64 n = 0;

  if (value != NULL && g_ascii_string_to_unsigned (value, 10, 1, SANDSTEP_SUPERVISOR_IDLE_S, &n, NULL))
    return (gint64) n * G_USEC_PER_SEC;
  return SANDSTEP_SUPERVISOR_IDLE_S * G_USEC_PER_SEC;
}

/* Its lifetime is not over. */
static gboolean
alive (Supervisor *s)
{
  return now_unix () < s->expires;
}

/* ---- the loop ---- */

/* @command ended (see sandstep_supervisor_command_finish()); once none runs, the supervisor waits for the next. */
static void
finish (Supervisor *s, SupervisorCommand *command, int status, int exec_error, gboolean interrupted)
{
  g_ptr_array_remove (s->running, command);
  /* Its claim stays while its holder's commands run on beside it. */
  for (guint i = 0; i < s->running->len; i++)
    if (sandstep_supervisor_command_beside (s->running->pdata[i], sandstep_supervisor_command_holder (command)))
      {
        sandstep_supervisor_command_hand_claim (command, s->running->pdata[i]);
        break;
      }
  /* A release that came while the command ran left the destruction to its holder: us, when the claim was ours
   * (or came to it from a command whose caller may be gone). */
  if ((sandstep_supervisor_command_own_claim (command) || sandstep_supervisor_command_handed_claim (command)) &&
      s->released && !alive (s))
    s->done = s->reclaim = TRUE;
  sandstep_supervisor_command_finish (command, s->sandbox, &s->rules, status, exec_error, interrupted,
                                      s->running->len > 0);
  if (s->running->len > 0)
    return;
  s->idle_deadline = g_get_monotonic_time () + s->idle_us;
  /* The waiting callers' turn. */
  s->next_try = 0;
  s->try_pause_us = 0;
}

/* Every command goes with the sandbox's init. */
static void
finish_all (Supervisor *s, int status)
{
  while (s->running->len > 0)
    finish (s, s->running->pdata[0], status, 0, TRUE);
}

static SupervisorCommand *
find_command (Supervisor *s, gint32 id)
{
  for (guint i = 0; i < s->running->len; i++)
    if (sandstep_supervisor_command_id (s->running->pdata[i]) == id)
      return s->running->pdata[i];
  return NULL;
}

/* May @caller begin now, beside the commands that run?  Only when it asked to, one of them is its holder's and
 * asked so too, their sandbox lives as it is (one to be built anew waits until none runs), and no caller that
 * cannot run beside them waits for them to end (a make step's turn comes, however many calls come beside). */
static gboolean
may_run_beside (Supervisor *s, SupervisorCaller *caller)
{
  const char *holder = sandstep_supervisor_caller_beside_holder (caller);

  if (holder == NULL || s->running->len == 0 || s->running->len >= SANDSTEP_INIT_MAX_COMMANDS ||
      !sandstep_supervisor_sandbox_live (s->sandbox))
    return FALSE;
  for (GList *l = s->waiting.head; l != NULL; l = l->next)
    if (l->data != caller && sandstep_supervisor_caller_beside_holder (l->data) == NULL)
      return FALSE;
  for (guint i = 0; i < s->running->len; i++)
    if (sandstep_supervisor_command_beside (s->running->pdata[i], holder))
      return TRUE;
  return FALSE;
}

/* Another recipe's hold, or another process's claim, ends without a word to us: waiting callers ask again, ever
 * less often until a command ends (finish() starts the pauses over). */
static void
try_again_later (Supervisor *s)
{
  s->try_pause_us = s->try_pause_us == 0 ? SANDSTEP_CLAIM_PAUSE_FIRST_US
                                         : MIN (s->try_pause_us * 2, SANDSTEP_CLAIM_PAUSE_MAX_US);
  s->next_try = g_get_monotonic_time () + s->try_pause_us;
}

/* Another process has the sandbox's claim: no waiting caller can begin, and each would only look again.  Read
 * from /proc/locks, not tried: a try would hold the lock for a moment that another claimer could find taken. */
static gboolean
claimed_elsewhere (Supervisor *s)
{
  pid_t holder = sandstep_claim_lock_holder (s->claim_fd);

  return holder > 0 && holder != getpid ();
}

/* Begins @caller's command (@beside the ones that run), or answers it.  FALSE: another make recipe or process
 * holds the sandbox, named in *@out_held_by, and @caller is still to be answered. */
static gboolean
begin (Supervisor *s, SupervisorCaller *caller, gboolean beside, char **out_held_by)
{
  SupervisorCommand *command;
  gboolean running;

  *out_held_by = NULL;
  /* An expired sandbox runs nothing: the ordinary path says so. */
  if (!alive (s))
    {
      sandstep_supervisor_caller_answer (caller, SANDSTEP_RUN_FALLBACK);
      return TRUE;
    }
  command = sandstep_supervisor_command_begin (&s->rules, s->sandbox, s->expires, caller, beside, &running,
                                               out_held_by);
  if (command != NULL)
    {
      g_ptr_array_add (s->running, command);
      if (!running)
        finish (s, command, SANDSTEP_EXIT_INTERNAL, 0, TRUE);
    }
  return *out_held_by == NULL;
}

/* Waiting callers that may now run beside a command of their holder begin. */
static void
serve_beside (Supervisor *s)
{
  GList *next;

  for (GList *l = s->waiting.head; l != NULL && !s->done; l = next)
    {
      g_autofree char *held_by = NULL;

      next = l->next;
      if (may_run_beside (s, l->data))
        {
          begin (s, l->data, TRUE, &held_by);
          g_queue_delete_link (&s->waiting, l);
        }
    }
}

/* The sandbox is free of commands: the waiting callers' turn, in order, until one's command begins (and those
 * that may run beside it). */
static void
serve_waiting (Supervisor *s)
{
  GList *next;

  for (GList *l = s->waiting.head; l != NULL && s->running->len == 0 && !s->done; l = next)
    {
      SupervisorCaller *caller = l->data;
      g_autofree char *held_by = NULL;

      next = l->next;
      if (begin (s, caller, FALSE, &held_by) ||
          !sandstep_supervisor_caller_wait (caller, &s->rules, held_by, g_get_monotonic_time ()))
        g_queue_delete_link (&s->waiting, l);
    }
  serve_beside (s);
  try_again_later (s);
}

/* A new caller: its command begins now (beside those of its holder, if it asked to), or it waits behind those
 * who came before it. */
static void
take_caller (Supervisor *s, int conn)
{
  SupervisorCaller *caller = sandstep_supervisor_caller_receive (&s->rules, conn);

  if (caller == NULL)
    return;
  if (may_run_beside (s, caller))
    {
      g_autofree char *held_by = NULL;
      begin (s, caller, TRUE, &held_by);
      serve_beside (s);
    }
  else if (s->waiting.length >= WAITING_MAX)
    sandstep_supervisor_caller_answer (caller, SANDSTEP_RUN_FALLBACK);
  else if (s->ending)
    g_queue_push_tail (&s->waiting, caller);   /* the next supervisor's, once these end (RETRY) */
  else if (s->running->len == 0)
    {
      /* Its turn, after those before it (held by another recipe, they may have theirs now too). */
      g_queue_push_tail (&s->waiting, caller);
      serve_waiting (s);
    }
  else if (sandstep_supervisor_caller_wait (caller, &s->rules,
                                            sandstep_supervisor_command_holder (s->running->pdata[0]),
                                            g_get_monotonic_time ()))
    g_queue_push_tail (&s->waiting, caller);
}

/* Callers whose wait is over, or who went, leave the queue; when the supervisor ends, all do (a new one serves
 * them, or the ordinary path says why not). */
static void
prune_waiting (Supervisor *s, const struct pollfd *fds, guint n_fds, gint64 now)
{
  GList *next;
  guint i = 0;

  for (GList *l = s->waiting.head; l != NULL; l = next, i++)
    {
      SupervisorCaller *caller = l->data;

      next = l->next;
      if (i < n_fds && fds[i].revents != 0)
        sandstep_supervisor_caller_gone (caller);
      else if (s->done)
        sandstep_supervisor_caller_answer (caller, SANDSTEP_RUN_RETRY);
      else if (now < sandstep_supervisor_caller_deadline (caller) ||
               sandstep_supervisor_caller_wait (caller, &s->rules, NULL, now))
        continue;
      g_queue_delete_link (&s->waiting, l);
      /* The last waiter gone with no command of its own: the supervisor idles from now. */
      if (g_queue_is_empty (&s->waiting) && s->running->len == 0)
        s->idle_deadline = now + s->idle_us;
    }
}

static void
on_init_message (Supervisor *s)
{
  SupervisorCommand *command;
  int status, exec_error;
  gint32 id;

  switch (sandstep_supervisor_sandbox_read_init (s->sandbox, &id, &status, &exec_error))
    {
    case SUPERVISOR_INIT_QUIET:
      break;
    case SUPERVISOR_INIT_LOST:
      /* The sandbox (stale now) is rebuilt for the next command. */
      finish_all (s, 128 + SIGKILL);
      sandstep_supervisor_sandbox_end_init (s->sandbox);
      break;
    case SUPERVISOR_INIT_EXITED:
      if ((command = find_command (s, id)) != NULL)
        finish (s, command, status, exec_error, FALSE);
      else
        {
          /* No command of ours by that name: init says nonsense, and the sandbox goes as if it were lost. */
          sandstep_supervisor_sandbox_mark_stale (s->sandbox);
          finish_all (s, 128 + SIGKILL);
          sandstep_supervisor_sandbox_end_init (s->sandbox);
        }
      break;
    }
}

static void
on_notice (const char *line, gpointer user_data)
{
  Supervisor *s = user_data;

  /* Whose connection it was, init does not say: every command's caller hears it. */
  for (guint i = 0; i < s->running->len; i++)
    sandstep_supervisor_command_notice (s->running->pdata[i], line);
}

static gboolean
socket_is_ours (Supervisor *s)
{
  struct stat st;

  return s->listener >= 0 && fstatat (s->dir_fd, SANDSTEP_RUN_SOCKET, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
         S_ISSOCK (st.st_mode) && st.st_ino == s->listener_ino;
}

/* A file's version as far as we care: replaced (a new inode), written or truncated.  A missing file is all zeros. */
static void
file_version (int dir_fd, const char *name, struct stat *st)
{
  if (fstatat (dir_fd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
    memset (st, 0, sizeof *st);
}

static gboolean
same_version (const struct stat *a, const struct stat *b)
{
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
         a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
         a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static void
note_state (Supervisor *s)
{
  if (fstat (s->dir_fd, &s->dir_stat) < 0)
    memset (&s->dir_stat, 0, sizeof s->dir_stat);
  file_version (s->dir_fd, "record.json", &s->record_stat);
  file_version (s->dir_fd, "lifetime", &s->lifetime_stat);
  s->next_check = g_get_monotonic_time () + CHECK_INTERVAL_US;
}

/* Is what this supervisor was started from still there?  Asked on a timer and before each command: a few stat
 * calls, where an inotify watch would hold one of the user's host-wide inotify instances per live sandbox. */
static void
check_state (Supervisor *s)
{
  g_autofree char *dir = g_build_filename ("sandboxes", s->handle, NULL);
  struct stat now, claim;

  s->next_check = g_get_monotonic_time () + CHECK_INTERVAL_US;
  /* Removed (no link left), or moved away from its name (destroy renames it first). */
  if (fstat (s->dir_fd, &now) < 0 || now.st_nlink == 0 ||
      fstatat (s->store_fd, dir, &now, AT_SYMLINK_NOFOLLOW) < 0 || now.st_dev != s->dir_stat.st_dev ||
      now.st_ino != s->dir_stat.st_ino)
    {
      s->done = TRUE;
      return;
    }
  /* The record changed (or was damaged) or the claim file was replaced: what this supervisor was started from
   * no longer holds, so it ends, and the next command starts from the record. */
  file_version (s->dir_fd, "record.json", &now);
  if (!same_version (&now, &s->record_stat) || fstat (s->claim_fd, &claim) < 0 ||
      fstatat (s->dir_fd, "claim", &now, AT_SYMLINK_NOFOLLOW) < 0 || now.st_ino != claim.st_ino ||
      now.st_dev != claim.st_dev)
    {
      /* Commands that run beside each other (under their claim, which kept any fork or checkpoint out) go on
       * taking their holder's: a release (E2B's setTimeout) must not stop a background command's neighbours. */
      if (s->running->len == 0)
        s->done = TRUE;
      else
        s->ending = TRUE;
      if (s->done)
        return;
    }
  /* Our socket removed or replaced (a file, a FIFO, a directory, another socket): nobody can reach us, and
   * callers would wait for us in vain.  Ending lets the next caller start a supervisor that listens. */
  if (!socket_is_ours (s))
    {
      s->done = TRUE;
      return;
    }
  file_version (s->dir_fd, "lifetime", &now);
  if (!same_version (&now, &s->lifetime_stat))
    {
      s->lifetime_stat = now;
      if (!read_lifetime (s))
        s->done = TRUE;
      else if (!s->ends_when_idle)
        for (guint i = 0; i < s->running->len; i++)
          sandstep_supervisor_command_lifetime (s->running->pdata[i], s->expires);
    }
}

static void
loop (Supervisor *s)
{
  /* Once done, commands that run still end; nothing new starts. */
  while (!s->done || s->running->len > 0)
    {
      enum { FIXED = 5 };
      struct pollfd fds[FIXED + SANDSTEP_INIT_MAX_COMMANDS + WAITING_MAX] = {
        { .fd = s->signals, .events = POLLIN },
        { .fd = s->done ? -1 : s->listener, .events = POLLIN },
        { .fd = sandstep_supervisor_sandbox_control_fd (s->sandbox), .events = POLLIN },
        { .fd = sandstep_supervisor_sandbox_notices_fd (s->sandbox), .events = POLLIN },
        { .fd = sandstep_supervisor_sandbox_init_pidfd (s->sandbox), .events = POLLIN },
      };
      g_autoptr(GPtrArray) polled = g_ptr_array_new ();   /* the commands whose callers fds[FIXED..] watch */
      guint n_fds = FIXED, first_waiting;
      gint64 now = g_get_monotonic_time ();
      gint64 until;
      int r;

      if (s->running->len > 0)
        until = G_MAXINT64;
      else
        until = now + (s->expires - now_unix ()) * G_USEC_PER_SEC;
      /* Each command's caller, watched for its going, and its deadline. */
      for (guint i = 0; i < s->running->len; i++)
        {
          SupervisorCommand *command = s->running->pdata[i];
          g_ptr_array_add (polled, command);
          fds[n_fds++] = (struct pollfd) { .fd = sandstep_supervisor_command_caller_fd (command), .events = POLLIN };
          until = MIN (until, sandstep_supervisor_command_deadline (command));
        }
      first_waiting = n_fds;
      /* An idle supervisor ends at its idle deadline; one with callers waiting does not. */
      if (s->running->len == 0 && g_queue_is_empty (&s->waiting))
        until = MIN (until, s->idle_deadline);
      until = MIN (until, s->next_check);
      /* A waiting caller leaves when it goes or its wait is over, and asks again while no command runs. */
      for (GList *l = s->waiting.head; l != NULL; l = l->next)
        {
          fds[n_fds++] = (struct pollfd) { .fd = sandstep_supervisor_caller_fd (l->data), .events = POLLIN };
          until = MIN (until, sandstep_supervisor_caller_deadline (l->data));
        }
      if (s->running->len == 0 && !g_queue_is_empty (&s->waiting))
        until = MIN (until, s->next_try);
      r = poll (fds, n_fds, (int) CLAMP ((until - now + 999) / 1000, 0, G_MAXINT));
      if (r < 0 && errno != EINTR)
        {
          s->done = TRUE;
          break;
        }
      now = g_get_monotonic_time ();
      prune_waiting (s, fds + first_waiting, n_fds - first_waiting, now);

      if (fds[0].revents & POLLIN)
        {
          struct signalfd_siginfo info;
          while (read (s->signals, &info, sizeof info) > 0)
            if (info.ssi_signo != SIGCHLD)
              {
                s->done = TRUE;
                s->stop_signal = info.ssi_signo;
              }
          if (s->stop_signal != 0)
            for (guint i = 0; i < s->running->len; i++)
              sandstep_supervisor_command_stop (s->running->pdata[i], s->sandbox);
        }
      /* Before a command is taken, and before an idle sandbox ends as expired (its lifetime may have grown). */
      if (!s->done && (now >= s->next_check || (fds[1].revents & POLLIN) ||
                       (s->running->len == 0 && !alive (s))))
        check_state (s);
      if (fds[3].revents & (POLLIN | POLLHUP))
        sandstep_supervisor_sandbox_read_notices (s->sandbox, on_notice, s);
      if (fds[2].revents & (POLLIN | POLLHUP | POLLERR))
        on_init_message (s);
      else if (fds[4].revents & POLLIN)
        {
          /* init died without a word (the kernel's OOM killer, or someone with the rights). */
          sandstep_supervisor_sandbox_mark_stale (s->sandbox);
          finish_all (s, 128 + SIGKILL);
          sandstep_supervisor_sandbox_end_init (s->sandbox);
        }

      /* The commands polled that still run: their callers, their time. */
      for (guint i = 0; i < polled->len; i++)
        {
          SupervisorCommand *command = polled->pdata[i];
          if (!g_ptr_array_find (s->running, command, NULL))
            continue;
          if (fds[FIXED + i].revents & (POLLIN | POLLHUP | POLLERR))
            sandstep_supervisor_command_caller_gone (command, s->sandbox);
          if (sandstep_supervisor_command_overdue (command, s->sandbox, now))
            {
              /* init did not answer: the sandbox goes, and with it every command. */
              sandstep_supervisor_sandbox_mark_stale (s->sandbox);
              sandstep_supervisor_sandbox_end_init (s->sandbox);
              finish_all (s, 128 + SIGKILL);
              break;
            }
        }
      if (s->running->len > 0)
        ;
      else if (s->ending || !alive (s))
        s->done = TRUE;
      else if (now >= s->idle_deadline && g_queue_is_empty (&s->waiting))
        {
          /* A watch of the jail's files keeps it (sandstep-supervisor-keep.h): asked again each check, so that
           * the jail ends within one once the last watch goes. */
          if (sandstep_supervisor_kept (s->dir_fd, &s->keep_ending))
            s->idle_deadline = now + CHECK_INTERVAL_US;
          else
            s->done = TRUE;
        }

      /* A caller that finds the sandbox busy waits here, for as long as its --wait allows. */
      if (!s->done && (fds[1].revents & POLLIN))
        {
          int conn = accept4 (s->listener, NULL, NULL, SOCK_CLOEXEC);
          if (conn >= 0)
            take_caller (s, conn);
        }
      if (s->done)
        prune_waiting (s, NULL, 0, now);
      else if (s->running->len > 0 && !g_queue_is_empty (&s->waiting))
        serve_beside (s);   /* a place beside them may have come free */
      else if (s->running->len == 0 && !g_queue_is_empty (&s->waiting) && g_get_monotonic_time () >= s->next_try)
        {
          check_state (s);
          if (s->done)
            prune_waiting (s, NULL, 0, now);
          else if (claimed_elsewhere (s))
            try_again_later (s);
          else
            serve_waiting (s);
        }
    }
  prune_waiting (s, NULL, 0, g_get_monotonic_time ());
}

/* ---- start and end ---- */

static void
say_ready (const GError *error)
{
  /* The domain by its wire name (an extended domain's quark is its type's name, which no table knows). */
  const char *domain = error == NULL ? NULL : sandstep_error_domain_name (error->domain);
  g_autofree char *text = error == NULL
                            ? g_strdup ("ok\n")
                            : g_strdup_printf ("%s\t%d\t%s\n", domain != NULL ? domain : g_quark_to_string (error->domain),
                                               error->code, error->message);

  if (write (SANDSTEP_SUPERVISOR_READY_FD, text, strlen (text)) < 0)
    g_debug ("Nobody waits for the supervisor's start");
  close (SANDSTEP_SUPERVISOR_READY_FD);
}

static gboolean
listen_socket (Supervisor *s, GError **error)
{
  struct sockaddr_un address = { .sun_family = AF_UNIX };

  /* Through the directory's fd: any state path fits sun_path. */
  struct stat st;

  g_snprintf (address.sun_path, sizeof address.sun_path, "/proc/self/fd/%d/" SANDSTEP_RUN_SOCKET, s->dir_fd);
  /* Whatever is there (a socket left by a killed supervisor, or damage: a file, a directory) goes: the name is
   * ours, and we hold the lock that says so. */
  sandstep_remove_at (s->dir_fd, SANDSTEP_RUN_SOCKET);
  s->listener = socket (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s->listener < 0 || bind (s->listener, (struct sockaddr *) &address, sizeof address) < 0 ||
      listen (s->listener, 128) < 0 || fstatat (s->dir_fd, SANDSTEP_RUN_SOCKET, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                                 "Could not listen on the supervisor socket of sandbox '%s'", s->handle);
  s->listener_ino = st.st_ino;
  return TRUE;
}

/* Every caller still queued asks again, of a new supervisor: nobody is left without an answer. */
static void
close_listener (Supervisor *s)
{
  int conn;

  unlinkat (s->dir_fd, SANDSTEP_RUN_SOCKET, 0);
  while ((conn = accept4 (s->listener, NULL, NULL, SOCK_CLOEXEC)) >= 0)
    sandstep_supervisor_refuse (conn, SANDSTEP_RUN_RETRY);
  close (s->listener);
  s->listener = -1;
}

static gboolean
start (Supervisor *s, GError **error)
{
  g_autofree char *dir = g_build_filename ("sandboxes", s->handle, NULL);
  sigset_t handled;
  struct stat st;

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
      (s->claim_fd = openat (s->dir_fd, "claim", O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0)
    return sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                                 "Could not set up the supervisor of sandbox '%s'", s->handle);
  /* A claim that is no file is damage, which the helper explains (started by the front, nobody checked). */
  if (fstat (s->claim_fd, &st) < 0 || !S_ISREG (st.st_mode))
    return sandstep_throw_broken (error, s->handle, "its claim is not a regular file");
  note_state (s);
  if (!read_lifetime (s))
    {
      /* Gone with its record: a destroy under way.  Beside a record: damage, said as every damage is. */
      if (fstatat (s->dir_fd, "record.json", &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
        return sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_FOUND,
                               "Sandbox '%s' is being destroyed", s->handle);
      return sandstep_throw_broken (error, s->handle, "its lifetime file is missing, or not two numbers");
    }
  if (!alive (s))
    return sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_EXPIRED,
                           "Sandbox '%s' expired", s->handle);
  if ((s->sandbox = sandstep_supervisor_sandbox_load (s->handle, s->dir_fd, &s->adopt, &s->terms, error)) == NULL)
    return FALSE;
  s->rules = (SupervisorRules) {
    .handle = s->handle, .terms = &s->terms, .dir_fd = s->dir_fd, .claim_fd = s->claim_fd,
    .start_time = s->start_time, .jail_is_peer = sandstep_supervisor_sandbox_outer_uid (s->sandbox) == getuid (),
  };
  if (s->rules.jail_is_peer)
    s->rules.own_userns = s->own_userns = g_file_read_link ("/proc/self/ns/user", NULL);
  /* Listening first: a caller that comes while the sandbox is built waits in the queue, and is told to ask
   * again if it cannot be. */
  if (!listen_socket (s, error) || !sandstep_supervisor_sandbox_build (s->sandbox, error))
    return FALSE;
  s->idle_deadline = g_get_monotonic_time () + s->idle_us;
  return TRUE;
}

/* Writes our pid where sandstep_supervisor_stop() reads it.  Nobody's child already: a go-between started us
 * (sandstep-supervisor-start.h), so whoever started it may kill its children, or wait for them. */
static void
record_pid (guint64 start)
{
  /* Always as long, so that it overwrites the last one whole: a truncation costs a journal transaction, and
   * ext4 then flushes the file when it is closed. */
  g_autofree char *text = g_strdup_printf ("%10d %20" G_GUINT64_FORMAT "\n", (int) getpid (), start);

  if (pwrite (SANDSTEP_SUPERVISOR_LOCK_FD, text, strlen (text), 0) != (ssize_t) strlen (text))
    g_debug ("Could not write the supervisor's pid: %s", g_strerror (errno));
}

/* A released sandbox whose last command ended is destroyed: by the helper, which owns the store. */
static void
reclaim (Supervisor *s)
{
  char *argv[] = { s->terms.core_path, (char *) "--reclaim", s->handle, NULL };

  execve (argv[0], argv, s->terms.helper_env);
  g_debug ("Could not reclaim '%s': %s", s->handle, g_strerror (errno));
}

int
sandstep_supervisor_main (const char *handle, int jail_pid)
{
  g_autoptr(GError) error = NULL;
  Supervisor s = {
    .handle = g_strdup (handle), .store_fd = SANDSTEP_SUPERVISOR_STORE_FD, .dir_fd = -1, .claim_fd = -1,
    .listener = -1, .signals = -1, .idle_us = idle_time (), .keep_ending = -1,
    .adopt = { .pid = -1, .pidfd = -1, .go = -1, .report = -1, .control = -1 },
  };
  gboolean ok;

  s.running = g_ptr_array_new ();
  if (jail_pid > 0)
    s.adopt = (SandstepJailStart) { .pid = jail_pid, .pidfd = SANDSTEP_SUPERVISOR_JAIL_PIDFD_FD,
                                    .go = SANDSTEP_SUPERVISOR_JAIL_GO_FD, .report = SANDSTEP_SUPERVISOR_JAIL_REPORT_FD,
                                    .control = SANDSTEP_SUPERVISOR_JAIL_CONTROL_FD };

  s.start_time = sandstep_process_start_time (getpid ());
  record_pid (s.start_time);
  /* The go-between that started a jail for us reset it before (sandstep-supervisor-start.h), and we keep it; the
   * caller's CPUs are back already (sandstep-supervise.c). */
  if (jail_pid == 0)
    sandstep_process_state_reset ();
  ok = start (&s, &error);
  /* One not adopted (its plan refused, or this supervisor could not start) is of no use. */
  if (s.sandbox != NULL)
    sandstep_supervisor_sandbox_abandon_start (s.sandbox);
  sandstep_jail_start_abandon (&s.adopt);
  say_ready (ok ? NULL : error);
  if (ok)
    {
      struct stat st;
      /* The starter's own request is the first: it came with us, not through the socket. */
      if (fstat (SANDSTEP_SUPERVISOR_CALLER_FD, &st) == 0 && S_ISSOCK (st.st_mode))
        take_caller (&s, SANDSTEP_SUPERVISOR_CALLER_FD);
      else
        close (SANDSTEP_SUPERVISOR_CALLER_FD);
      loop (&s);
    }
  else
    close (SANDSTEP_SUPERVISOR_CALLER_FD);
  if (s.listener >= 0)
    close_listener (&s);
  sandstep_supervisor_sandbox_free (s.sandbox);
  g_ptr_array_unref (s.running);
  /* The jail is gone: a keeper waiting for the lock goes on, to the next supervisor. */
  if (s.keep_ending >= 0)
    close (s.keep_ending);
  /* The cgroup goes with us (provision makes the first one, the next supervisor its own): one kept would
   * outlive a state directory removed by hand. */
  sandstep_cgroup_remove (handle);
  /* The lock goes before the exec: a destroy that waits for us waits no longer than needed. */
  close (SANDSTEP_SUPERVISOR_LOCK_FD);
  if (s.reclaim && s.stop_signal == 0)
    reclaim (&s);
  return ok ? 0 : sandstep_error_exit_status (error);
}
