/* sandstep-supervisor-command.c: one command served in a live sandbox, from request to status; see sandstep-supervisor-command.h. */
#include "sandstep-supervisor-command.h"
#include "sandstep-supervisor.h"
#include "sandstep-units.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-claim-libc.h"
#include "sandstep-error.h"
#include "sandstep-step.h"

/* How long a caller has to send its request once connected. */
#define REQUEST_TIMEOUT_MS 2000
/* After KILL, how long init may take to report before it is killed itself. */
#define KILL_GRACE_US (5 * G_USEC_PER_SEC)

struct _SupervisorCommand {
  gint32 id;               /* init's name for it */
  gboolean beside;         /* asked to run beside its holder's (SANDSTEP_RUN_FIELD_BESIDE) */
  gboolean handed_claim;   /* its claim came from another of its holder's commands */
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
  double own_timeout_s;    /* its own --timeout; 0: none (the sandbox's life is its budget) */
  gint64 started;          /* monotonic µs */
  guint64 oom_kills, pids_max;
};

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

/* Seconds as `sandstep run` reads them, by the same rule (decimal only: a strtod of its own here took the front's
 * --timeout=0x10 as 16); anything else goes to the core, which says what is wrong. */
static gboolean
parse_seconds (const char *text, gboolean allow_zero, double *out)
{
  return sandstep_parse_seconds ("seconds", text, allow_zero, out, NULL);
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
peer_is_ours (const SupervisorRules *rules, int conn)
{
  struct ucred cred;
  socklen_t len = sizeof cred;
  g_autofree char *path = NULL;
  g_autofree char *theirs = NULL;

  if (getsockopt (conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != getuid () || cred.pid <= 0)
    return FALSE;
  if (!rules->jail_is_peer)
    return TRUE;
  path = g_strdup_printf ("/proc/%d/ns/user", (int) cred.pid);
  theirs = g_file_read_link (path, NULL);
  return theirs != NULL && rules->own_userns != NULL && strcmp (theirs, rules->own_userns) == 0;
}

typedef struct {
  char *buf;
  SandstepSupervisorRequest text;   /* into buf */
  int fds[5];       /* stdin, stdout, stderr, the start mark, the caller's claim */
  int n_fds;
} Request;

static void
request_clear (Request *request)
{
  g_free (request->buf);
  g_clear_pointer (&request->text.env, g_ptr_array_unref);
  for (int i = 0; i < request->n_fds; i++)
    close (request->fds[i]);
  request->n_fds = 0;
}

static gboolean
receive_request (int conn, Request *request)
{
  union { char buf[CMSG_SPACE (G_N_ELEMENTS (request->fds) * sizeof (int))]; struct cmsghdr align; } cmsg_buf;
  struct pollfd pfd = { .fd = conn, .events = POLLIN };
  struct iovec iov;
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cmsg_buf.buf,
                        .msg_controllen = sizeof cmsg_buf.buf };
  struct cmsghdr *cmsg;
  ssize_t size, n;

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
          if (request->n_fds < (int) G_N_ELEMENTS (request->fds))
            request->fds[request->n_fds++] = fd;
          else
            close (fd);
        }
  if (n != size || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
    return FALSE;
  return sandstep_supervisor_parse_request (request->buf, size, &request->text);
}

gboolean
sandstep_supervisor_parse_request (char *buf, gsize size, SandstepSupervisorRequest *out)
{
  const char *p, *end;
  int field = 0;

  memset (out, 0, sizeof *out);
  buf[size] = '\0';
  out->env = g_ptr_array_new ();
  for (p = buf, end = buf + size; p < end; p += strlen (p) + 1)
    if (field < SANDSTEP_RUN_FIELDS)
      out->field[field++] = p;
    else
      g_ptr_array_add (out->env, (gpointer) p);
  g_ptr_array_add (out->env, NULL);
  if (field != SANDSTEP_RUN_FIELDS || strcmp (out->field[SANDSTEP_RUN_FIELD_MAGIC], SANDSTEP_RUN_MAGIC) != 0)
    return FALSE;
  out->have_timeout = out->field[SANDSTEP_RUN_FIELD_TIMEOUT][0] != '\0';
  return (out->field[SANDSTEP_RUN_FIELD_WAIT][0] == '\0' ||
          parse_seconds (out->field[SANDSTEP_RUN_FIELD_WAIT], TRUE, &out->wait_s)) &&
         (!out->have_timeout || parse_seconds (out->field[SANDSTEP_RUN_FIELD_TIMEOUT], FALSE, &out->timeout_s));
}

static gboolean
is_pipe (int fd)
{
  struct stat st;

  return fstat (fd, &st) == 0 && S_ISFIFO (st.st_mode);
}

/* The caller's claim: the claim file of this sandbox, locked through that very fd. */
static gboolean
caller_holds_claim (const SupervisorRules *rules, int fd)
{
  struct stat given, ours;

  return fstat (fd, &given) == 0 && fstat (rules->claim_fd, &ours) == 0 && given.st_dev == ours.st_dev &&
         given.st_ino == ours.st_ino && flock (fd, LOCK_EX | LOCK_NB) == 0;
}

static gboolean
take_claim (const SupervisorRules *rules, const char *holder)
{
  g_autoptr(GString) text = g_string_new ("{\"holder\":");
  struct stat st;

  if (flock (rules->claim_fd, LOCK_EX | LOCK_NB) < 0)
    return FALSE;
  append_json_string (text, holder);
  g_string_append_printf (text, ",\"pid\":%d,\"start\":%" G_GUINT64_FORMAT "}", (int) getpid (),
                          rules->start_time);
  /* Overwritten in place, cut only when shorter (truncating costs a journal transaction). */
  if (fstat (rules->claim_fd, &st) < 0 || pwrite (rules->claim_fd, text->str, text->len, 0) != (ssize_t) text->len ||
      ((gsize) st.st_size > text->len && ftruncate (rules->claim_fd, text->len) < 0))
    g_debug ("Could not record the holder of '%s': %s", rules->handle, g_strerror (errno));
  return TRUE;
}

static void
release_claim (const SupervisorRules *rules, SupervisorCommand *command)
{
  /* The recipe's last line for this sandbox ends its hold, before the claim goes. */
  if (command->own_claim && command->step.pid > 0 && command->step.ends)
    sandstep_step_update (rules->dir_fd, command->holder, &command->step);
  if (command->own_claim)
    flock (rules->claim_fd, LOCK_UN);
  if (command->caller_claim >= 0)
    close (command->caller_claim);
  command->own_claim = FALSE;
  command->caller_claim = -1;
}

static void
kill_command (SupervisorCommand *command, SupervisorSandbox *sandbox)
{
  if (command->killed)
    return;
  command->killed = TRUE;
  command->kill_deadline = g_get_monotonic_time () + KILL_GRACE_US;
  sandstep_supervisor_sandbox_kill (sandbox, command->id);
}

void
sandstep_supervisor_command_caller_gone (SupervisorCommand *command, SupervisorSandbox *sandbox)
{
  command->caller_gone = TRUE;
  kill_command (command, sandbox);
}

void
sandstep_supervisor_command_stop (SupervisorCommand *command, SupervisorSandbox *sandbox)
{
  command->interrupted = TRUE;
  kill_command (command, sandbox);
}

gboolean
sandstep_supervisor_command_overdue (SupervisorCommand *command, SupervisorSandbox *sandbox, gint64 now)
{
  if (!command->killed && now >= command->deadline)
    {
      command->timed_out = TRUE;
      kill_command (command, sandbox);
      return FALSE;
    }
  return command->killed && now >= command->kill_deadline;
}

int
sandstep_supervisor_command_caller_fd (SupervisorCommand *command)
{
  return command->caller_gone ? -1 : command->conn;
}

void
sandstep_supervisor_command_lifetime (SupervisorCommand *command, gint64 expires)
{
  gint64 now = g_get_monotonic_time ();
  double elapsed = (now - command->started) / (double) G_USEC_PER_SEC;
  double remaining = MAX (expires - g_get_real_time () / (double) G_USEC_PER_SEC, 0);
  double own_left = command->own_timeout_s > 0 ? MAX (command->own_timeout_s - elapsed, 0) : G_MAXDOUBLE;
  double left = MIN (own_left, remaining);

  /* Only a budget the sandbox's end set moves with it; one killed already stays killed. */
  if (command->killed || !command->clamped)
    return;
  command->applied_timeout_s = elapsed + left;
  command->clamped = own_left > remaining;
  command->deadline = now + (gint64) (left * G_USEC_PER_SEC);
}

gint64
sandstep_supervisor_command_deadline (SupervisorCommand *command)
{
  return command->killed ? command->kill_deadline : command->deadline;
}

gboolean
sandstep_supervisor_command_handed_claim (SupervisorCommand *command)
{
  return command->handed_claim && (command->own_claim || command->caller_claim >= 0);
}

gboolean
sandstep_supervisor_command_own_claim (SupervisorCommand *command)
{
  return command->own_claim;
}

const char *
sandstep_supervisor_command_holder (SupervisorCommand *command)
{
  return command->holder;
}

gint32
sandstep_supervisor_command_id (SupervisorCommand *command)
{
  return command->id;
}

gboolean
sandstep_supervisor_command_beside (SupervisorCommand *command, const char *holder)
{
  return command->beside && strcmp (command->holder, holder) == 0;
}

void
sandstep_supervisor_command_hand_claim (SupervisorCommand *from, SupervisorCommand *to)
{
  if (!from->beside || (!from->own_claim && from->caller_claim < 0) || to->own_claim || to->caller_claim >= 0)
    return;
  to->own_claim = from->own_claim;
  to->caller_claim = from->caller_claim;
  to->handed_claim = TRUE;
  from->own_claim = FALSE;
  from->caller_claim = -1;
}

void
sandstep_supervisor_command_notice (SupervisorCommand *command, const char *line)
{
  if (!command->caller_gone)
    reply_text (command->conn, SANDSTEP_RUN_NOTICE, line);
}

void
sandstep_supervisor_command_finish (SupervisorCommand *command, SupervisorSandbox *sandbox,
                                    const SupervisorRules *rules, int status, int exec_error, gboolean interrupted,
                                    gboolean others_run)
{
  SandstepRunReply message = {
    .kind = SANDSTEP_RUN_DONE,
    .exit_status = exec_error != 0 ? exec_error : status,
    .applied_timeout_s = command->applied_timeout_s,
    .memory = rules->terms->memory, .pids = rules->terms->pids, .cpu_time_s = rules->terms->cpu_time_s,
    .disk = rules->terms->disk,
  };
  guint64 oom_kills, pids_max;

  if (interrupted)
    command->interrupted = TRUE;
  sandstep_supervisor_sandbox_counters (sandbox, &oom_kills, &pids_max);
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
  if (others_run)
    message.flags |= SANDSTEP_RUN_OTHERS_RUN;
  /* The claim goes before the caller hears: its next step may claim the sandbox at once. */
  release_claim (rules, command);
  if (!command->caller_gone)
    send (command->conn, &message, sizeof message, MSG_NOSIGNAL | MSG_DONTWAIT);
  close (command->conn);
  g_free (command->holder);
  g_free (command);
}

/* ---- a caller, until its command begins ---- */

struct _SupervisorCaller {
  int conn;
  Request request;
  const char *holder;      /* into request */
  gboolean claimed;        /* it holds the claim: the helper, which never waits here */
  double wait_s;
  gint64 wait_deadline;    /* monotonic µs */
  char *held_by;           /* who kept the sandbox from it last; NULL: nobody yet */
  pid_t unnamed_pid;       /* a holder of the claim that had not written its name, by its pid (0: unknown) */
  gint64 unnamed_since;    /* when such a holder first kept the sandbox from it (monotonic µs); 0: none yet */
};

static void
caller_free (SupervisorCaller *caller)
{
  if (caller->conn >= 0)
    close (caller->conn);
  request_clear (&caller->request);
  g_free (caller->held_by);
  g_free (caller);
}

void
sandstep_supervisor_refuse (int conn, SandstepRunKind kind)
{
  Request request = { 0 };

  receive_request (conn, &request);
  request_clear (&request);
  reply (conn, kind);
  close (conn);
}

void
sandstep_supervisor_caller_answer (SupervisorCaller *caller, SandstepRunKind kind)
{
  reply (caller->conn, kind);
  caller_free (caller);
}

SupervisorCaller *
sandstep_supervisor_caller_receive (const SupervisorRules *rules, int conn)
{
  SupervisorCaller *caller = g_new0 (SupervisorCaller, 1);
  const SandstepSupervisorRequest *text = &caller->request.text;
  const char *owner;

  caller->conn = conn;
  /* Read first, whoever asks: a socket closed with a request unread loses the answer on its way. */
  if (!receive_request (conn, &caller->request) || !peer_is_ours (rules, conn) || caller->request.n_fds < 4 ||
      !is_pipe (caller->request.fds[3]))
    goto refuse;
  /* Anything the ordinary path would judge, it judges, word for word. */
  owner = text->field[SANDSTEP_RUN_FIELD_OWNER][0] ? text->field[SANDSTEP_RUN_FIELD_OWNER]
                                                    : rules->terms->default_owner;
  caller->holder = text->field[SANDSTEP_RUN_FIELD_HOLDER][0] ? text->field[SANDSTEP_RUN_FIELD_HOLDER]
                                                              : rules->terms->default_holder;
  if (strcmp (text->field[SANDSTEP_RUN_FIELD_HANDLE], rules->handle) != 0 ||
      strcmp (owner, rules->terms->owner) != 0 || !g_utf8_validate (caller->holder, -1, NULL))
    goto refuse;
  caller->claimed = strcmp (text->field[SANDSTEP_RUN_FIELD_CLAIMED], "1") == 0;
  caller->wait_s = text->field[SANDSTEP_RUN_FIELD_WAIT][0] ? text->wait_s : SANDSTEP_WAIT_DEFAULT_S;
  caller->wait_deadline = g_get_monotonic_time () + (gint64) MIN (caller->wait_s * G_USEC_PER_SEC, G_MAXINT64 / 4);
  return caller;

refuse:
  sandstep_supervisor_caller_answer (caller, SANDSTEP_RUN_FALLBACK);
  return NULL;
}

int
sandstep_supervisor_caller_fd (SupervisorCaller *caller)
{
  return caller->conn;
}

gint64
sandstep_supervisor_caller_deadline (SupervisorCaller *caller)
{
  return caller->wait_deadline;
}

const char *
sandstep_supervisor_caller_beside_holder (SupervisorCaller *caller)
{
  return strcmp (caller->request.text.field[SANDSTEP_RUN_FIELD_BESIDE], "1") == 0 ? caller->holder : NULL;
}

void
sandstep_supervisor_caller_gone (SupervisorCaller *caller)
{
  caller_free (caller);
}

gboolean
sandstep_supervisor_caller_wait (SupervisorCaller *caller, const SupervisorRules *rules, const char *holder,
                                 gint64 now)
{
  g_autoptr(GError) error = NULL;
  gboolean first = caller->held_by == NULL;
  char unnamed[96];

  /* "": a holder of the claim that has not written its name, which a later look may read; named by its pid
   * after as long as the helper waits for a name, or when this caller's wait is over. */
  if (holder == NULL && caller->held_by == NULL && caller->unnamed_since != 0)
    holder = "";
  if (holder != NULL && holder[0] == '\0')
    {
      if (caller->unnamed_since == 0)
        caller->unnamed_since = now;
      if (now - caller->unnamed_since >= SANDSTEP_CLAIM_NAME_WAIT_US || now >= caller->wait_deadline)
        {
          sandstep_claim_unnamed (caller->unnamed_pid, unnamed, sizeof unnamed);
          holder = unnamed;
        }
    }
  else if (holder != NULL)
    caller->unnamed_since = 0;
  if (holder != NULL && holder[0] != '\0')
    {
      g_free (caller->held_by);
      caller->held_by = g_strdup (holder);
    }
  /* The helper, which has the claim, is never kept; nor is a caller that asked not to wait: the ordinary path
   * says at once who holds the sandbox. */
  if (caller->claimed || caller->wait_s <= 0)
    {
      sandstep_supervisor_caller_answer (caller, SANDSTEP_RUN_FALLBACK);
      return FALSE;
    }
  /* Its wait over with no holder ever named: the ordinary path names it, or runs the command. */
  if (now >= caller->wait_deadline && caller->held_by == NULL)
    {
      sandstep_supervisor_caller_answer (caller, SANDSTEP_RUN_FALLBACK);
      return FALSE;
    }
  if (now >= caller->wait_deadline)
    {
      sandstep_throw_busy_waited (&error, rules->handle, caller->held_by, caller->wait_s);
      reply_text (caller->conn, SANDSTEP_RUN_BUSY, error->message);
      caller_free (caller);
      return FALSE;
    }
  if (first && caller->held_by != NULL)
    {
      g_autofree char *text = sandstep_busy_waiting_text (rules->handle, caller->held_by, caller->wait_s);
      reply_text (caller->conn, SANDSTEP_RUN_NOTICE, text);
    }
  return TRUE;
}

/* ---- one command ---- */

SupervisorCommand *
sandstep_supervisor_command_begin (const SupervisorRules *rules, SupervisorSandbox *sandbox, gint64 expires,
                                   SupervisorCaller *caller, gboolean beside, gboolean *out_running,
                                   char **out_held_by)
{
  static gint32 last_id;
  Request *request = &caller->request;
  g_autoptr(GError) error = NULL;
  SupervisorCommand *command = NULL;
  SandstepRunKind answer = SANDSTEP_RUN_FALLBACK;   /* what a caller sent away hears; 0: nothing */
  char held_by[SANDSTEP_STEP_HOLDER_MAX];
  double timeout_s, remaining;
  gboolean have_timeout;
  int stdio[3];

  *out_running = FALSE;
  *out_held_by = NULL;
  have_timeout = request->text.have_timeout;
  timeout_s = request->text.timeout_s;

  command = g_new0 (SupervisorCommand, 1);
  command->id = last_id = last_id == G_MAXINT32 ? 1 : last_id + 1;
  command->beside = sandstep_supervisor_caller_beside_holder (caller) != NULL;
  command->caller_claim = -1;
  command->holder = g_strdup (caller->holder);
  /* Beside a command of its holder: under that command's claim, with no recipe's hold of its own. */
  if (beside)
    ;
  else if (caller->claimed)
    {
      if (request->n_fds < 5 || !caller_holds_claim (rules, request->fds[4]))
        goto drop;
      command->caller_claim = request->fds[4];
      request->n_fds = 4;
    }
  /* Another step's recipe holds it: seen before the claim is taken (and its file written), as a waiting caller
   * asks again and again; judged again under the claim, which makes the judgement atomic. */
  else if (sandstep_step_scan (request->text.field[SANDSTEP_RUN_FIELD_STEP], &command->step) &&
           sandstep_step_bars (rules->dir_fd, caller->holder, &command->step, held_by, sizeof held_by, NULL))
    {
      command->step.pid = 0;
      *out_held_by = g_strdup (held_by);
      answer = 0;
      goto drop;
    }
  else if (!take_claim (rules, caller->holder))
    {
      /* Another process has the claim (the helper, for an export or an agent's tool call): the caller waits here
       * as the helper's own waits do, looking again now and then.  Its name may not be written yet (""). */
      SandstepClaimText text;
      gboolean named;
      if (errno != EWOULDBLOCK)
        goto drop;
      named = sandstep_claim_read_once (rules->claim_fd, &text) && g_utf8_validate (text.holder, -1, NULL);
      caller->unnamed_pid = named ? 0 : text.pid;
      *out_held_by = g_strdup (named ? text.holder : "");
      answer = 0;
      goto drop;
    }
  else
    {
      command->own_claim = TRUE;
      if (!sandstep_step_scan (request->text.field[SANDSTEP_RUN_FIELD_STEP], &command->step))
        {
          command->step.pid = 0;
          goto drop;
        }
      /* Another step's recipe holds it: the caller waits, here or on the ordinary path. */
      if (sandstep_step_bars (rules->dir_fd, caller->holder, &command->step, held_by, sizeof held_by, NULL))
        {
          command->step.pid = 0;
          *out_held_by = g_strdup (held_by);
          answer = 0;
          goto drop;
        }
      /* A retry-safe sandbox's recipe lines go through the helper, which checkpoints and rolls back. */
      if (rules->terms->retry_clean && command->step.pid > 0)
        {
          command->step.pid = 0;
          goto drop;
        }
      if (command->step.pid > 0 && !command->step.ends &&
          !sandstep_step_update (rules->dir_fd, caller->holder, &command->step))
        g_debug ("Could not leave the recipe's hold on '%s': %s", rules->handle, g_strerror (errno));
    }

  /* Beside others, in the sandbox they run in as it is (the caller made sure it lives): never one built anew, which
   * would end them. */
  if (!beside && !sandstep_supervisor_sandbox_ready (sandbox, &error))
    {
      answer = SANDSTEP_RUN_ERROR;
      goto drop;
    }

  /* The command's budget never outlives the sandbox. */
  command->own_timeout_s = have_timeout ? timeout_s : 0;
  command->started = g_get_monotonic_time ();
  remaining = MAX (expires - g_get_real_time () / (double) G_USEC_PER_SEC, 0);
  command->applied_timeout_s = have_timeout ? MIN (timeout_s, remaining) : remaining;
  command->clamped = !have_timeout || timeout_s > remaining;
  command->deadline = command->started + (gint64) (command->applied_timeout_s * G_USEC_PER_SEC);
  sandstep_supervisor_sandbox_counters (sandbox, &command->oom_kills, &command->pids_max);

  /* From here on the command may run: the caller must never run it again.  A caller that cannot read the
   * mark is gone, and nothing runs for it; a mark with no room is refused the same way, never waited on. */
  if (poll (&(struct pollfd) { .fd = request->fds[3], .events = POLLOUT }, 1, 0) != 1 ||
      write (request->fds[3], "s", 1) != 1)
    {
      answer = 0;
      goto drop;
    }
  memcpy (stdio, request->fds, sizeof stdio);
  *out_running = sandstep_supervisor_sandbox_run (sandbox, command->id, beside,
                                                  request->text.field[SANDSTEP_RUN_FIELD_COMMAND],
                                                  (char **) request->text.env->pdata, stdio);
  /* Not handed to init: the sandbox is built again for the next command. */
  if (!*out_running)
    sandstep_supervisor_sandbox_mark_stale (sandbox);
  command->conn = caller->conn;
  caller->conn = -1;
  caller_free (caller);
  return command;

drop:
  /* Nothing ran: whatever claim was taken goes, and the caller hears why, unless it is gone or waits on. */
  release_claim (rules, command);
  g_free (command->holder);
  g_free (command);
  if (*out_held_by != NULL)
    return NULL;
  if (answer == SANDSTEP_RUN_ERROR)
    reply_text (caller->conn, answer, error->message);
  else if (answer != 0)
    reply (caller->conn, answer);
  caller_free (caller);
  return NULL;
}
