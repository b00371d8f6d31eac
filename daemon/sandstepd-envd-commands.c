/* sandstepd-envd-commands.c: the commands E2B's envd runs, by pid: commands.list, kill, connect, sendStdin and
 * closeStdin.
 *
 * A command started by process.Process/Start streams to the call that started it and holds its sandbox's
 * claim while it runs (sandstepd-envd.c); it outlives that call, as envd's do, until it ends, is killed, or its
 * sandbox ends (sandstepd_stream_step_detached()).  Here each one is known by a pid of sandstepd's own (the SDK's
 * handle.pid: not the process's pid in the sandbox, which the daemon never learns), with the process it
 * was asked to run, until its claim ends.  process.Process/List lists a sandbox's; SendSignal ends the claim,
 * which kills the command and everything it started, and ends its stream as envd's says a killed command
 * ended.  Connect tees the command's stream into another (sandstepd_stream_tee()); a command started with
 * stdin: true reads a pipe whose write end is kept here, for SendInput and CloseStdin.  Main loop only.
 */
#include "sandstepd-private.h"
#include "sandstepd-envd.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* Shown as the first pid, so that no one takes it for the sandbox's init (1). */
#define FIRST_PID 1000

typedef struct {
  guint32 pid;
  Request *req;             /* ref: where its output streams */
  char *handle;
  char *tag;                /* NULL: none */
  JsonObject *process;      /* cmd, args, envs, cwd, as sent */
  Lease *lease;             /* ref */
  int stdin_fd;             /* the write end of the pipe it reads (non-blocking); -1: none, or closed */
} Command;

static GHashTable *commands;  /* pid -> Command */
static guint32 next_pid = FIRST_PID;

static void
command_free (Command *c)
{
  sandstepd_request_unref (c->req);
  g_free (c->handle);
  g_free (c->tag);
  if (c->process != NULL)
    json_object_unref (c->process);
  sandstepd_lease_unref (c->lease);
  if (c->stdin_fd >= 0)
    close (c->stdin_fd);
  g_free (c);
}

/* Forgets the commands whose claim is over: they ended, or were killed. */
static void
prune (void)
{
  GHashTableIter iter;
  Command *c;

  if (commands == NULL)
    return;
  g_hash_table_iter_init (&iter, commands);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &c))
    if (c->lease->ended)
      g_hash_table_iter_remove (&iter);
}

guint32
sandstepd_envd_command_add (Request *req, JsonObject *process, const char *tag, Lease *lease)
{
  Command *c = g_new0 (Command, 1);

  if (commands == NULL)
    commands = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, (GDestroyNotify) command_free);
  prune ();
  /* After 2^32 commands of one daemon the numbers start again; one still listed is skipped. */
  while (next_pid < FIRST_PID || g_hash_table_contains (commands, GUINT_TO_POINTER (next_pid)))
    next_pid = next_pid < FIRST_PID ? FIRST_PID : next_pid + 1;
  c->pid = next_pid++;
  c->req = sandstepd_request_ref (req);
  c->handle = g_strdup (req->handle);
  c->tag = g_strdup (tag);
  c->process = process != NULL ? json_object_ref (process) : json_object_new ();
  c->lease = lease;
  c->stdin_fd = -1;
  lease->refs++;
  g_hash_table_insert (commands, GUINT_TO_POINTER (c->pid), c);
  return c->pid;
}

JsonObject *
sandstepd_envd_command_list (const char *handle)
{
  JsonObject *answer = json_object_new ();
  JsonArray *processes = json_array_new ();
  g_autoptr(GList) values = NULL;

  prune ();
  if (commands != NULL)
    values = g_hash_table_get_values (commands);
  for (GList *l = values; l != NULL; l = l->next)
    {
      Command *c = l->data;
      JsonObject *info;

      if (strcmp (c->handle, handle) != 0)
        continue;
      /* ProcessInfo of process.proto, as protobuf's JSON writes it. */
      info = json_object_new ();
      json_object_set_object_member (info, "config", json_object_ref (c->process));
      json_object_set_int_member (info, "pid", c->pid);
      if (c->tag != NULL)
        json_object_set_string_member (info, "tag", c->tag);
      json_array_add_object_element (processes, info);
    }
  json_object_set_array_member (answer, "processes", processes);
  return answer;
}

/* The command of @handle that @selector names ({"pid": N} or {"tag": T}), or NULL. */
static Command *
find (const char *handle, JsonObject *selector)
{
  JsonNode *pid = json_object_get_member (selector, "pid");
  JsonNode *tag = json_object_get_member (selector, "tag");
  g_autoptr(GList) values = NULL;

  prune ();
  if (commands == NULL)
    return NULL;
  values = g_hash_table_get_values (commands);
  for (GList *l = values; l != NULL; l = l->next)
    {
      Command *c = l->data;

      if (strcmp (c->handle, handle) != 0)
        continue;
      if (pid != NULL && JSON_NODE_HOLDS_VALUE (pid) && json_node_get_value_type (pid) == G_TYPE_INT64 &&
          json_node_get_int (pid) == (gint64) c->pid)
        return c;
      if (tag != NULL && JSON_NODE_HOLDS_VALUE (tag) && json_node_get_value_type (tag) == G_TYPE_STRING &&
          c->tag != NULL && strcmp (json_node_get_string (tag), c->tag) == 0)
        return c;
    }
  return NULL;
}

gboolean
sandstepd_envd_command_kill (const char *handle, JsonObject *selector)
{
  Command *c = find (handle, selector);

  if (c == NULL)
    return FALSE;
  /* Not abrupt: the worker kills what it runs and stays, and the sandbox is free for the next call.  The
   * command's stream says it was killed (its own end would say the claim ended). */
  sandstepd_lease_end (c->lease, "the command was killed (E2B's commands.kill)", FALSE);
  sandstepd_envd_end_killed (c->req);
  prune ();
  return TRUE;
}

void
sandstepd_envd_command_set_stdin (guint32 pid, int fd)
{
  Command *c = commands != NULL ? g_hash_table_lookup (commands, GUINT_TO_POINTER (pid)) : NULL;

  if (c == NULL)
    {
      if (fd >= 0)
        close (fd);
      return;
    }
  if (c->stdin_fd >= 0)
    close (c->stdin_fd);
  c->stdin_fd = fd;
}

gboolean
sandstepd_envd_command_connect (const char *handle, JsonObject *selector, Request *req)
{
  Command *c = find (handle, selector);
  JsonObject *start;
  gsize len = 0;
  char *bytes;

  /* The call that started it may be gone: the command runs on while its claim lasts (find() prunes the rest). */
  if (c == NULL)
    return FALSE;
  req->keepalive_frame = sandstepd_envd_event ("keepalive", json_object_new (), &req->keepalive_len);
  sandstepd_stream_begin (req);
  soup_message_headers_set_content_type (soup_server_message_get_response_headers (req->msg), CONNECT_STREAM_TYPE,
                                         NULL);
  /* ConnectResponse is StartResponse's shape ({event}): the start event, then the command's own frames as they
   * come, its end included.  Its output before now is not kept. */
  start = json_object_new ();
  json_object_set_int_member (start, "pid", c->pid);
  bytes = sandstepd_envd_event ("start", start, &len);
  sandstepd_stream_take (req, bytes, len);
  sandstepd_stream_tee (c->req, req);
  return TRUE;
}

const char *
sandstepd_envd_command_input (const char *handle, JsonObject *selector, GBytes *data, char **message)
{
  Command *c = find (handle, selector);
  gsize len = 0, done = 0;
  const char *bytes = data != NULL ? g_bytes_get_data (data, &len) : NULL;

  if (c == NULL)
    {
      *message = g_strdup ("No command with that pid runs in the sandbox: it ended, or was killed; "
                           "commands.list() shows those that run");
      return "not_found";
    }
  if (c->stdin_fd < 0)
    {
      *message = g_strdup_printf ("Command %" G_GUINT32_FORMAT " has no stdin to write: start it with "
                                  "commands.run(cmd, {background: true, stdin: true}) (or its stdin was closed)",
                                  c->pid);
      return "failed_precondition";
    }
  if (data == NULL)
    {
      close (c->stdin_fd);
      c->stdin_fd = -1;
      return NULL;
    }
  /* Never waits: the main loop serves everyone.  What the command has not read yet waits in the pipe. */
  while (done < len)
    {
      ssize_t n = write (c->stdin_fd, bytes + done, len - done);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        {
          *message = g_strdup_printf ("Command %" G_GUINT32_FORMAT " has not read its stdin: %" G_GSIZE_FORMAT
                                      " of %" G_GSIZE_FORMAT " bytes went in and the pipe is full; send the rest "
                                      "once it has read", c->pid, done, len);
          return "resource_exhausted";
        }
      if (n < 0)
        {
          int errsv = errno;
          *message = g_strdup_printf ("Command %" G_GUINT32_FORMAT "'s stdin cannot be written (%s): it closed "
                                      "its stdin or ended", c->pid, g_strerror (errsv));
          return errsv == EPIPE ? "failed_precondition" : "internal";
        }
      done += n;
    }
  return NULL;
}
