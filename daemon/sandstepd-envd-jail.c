/* sandstepd-envd-jail.c: E2B's Stat, Remove, Move and MakeDir, each a command in the sandbox's jail.
 *
 * sandstepd-envd.c claims the sandbox (as for any of envd's file operations) and hands the job here.
 */
#include "sandstepd-envd.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-wire.h"

/* The worker's file tools read, write and list; these four run as a command of the sandbox does, in its
 * jail, so a path means what it means to a command there (a relative one starts in /workspace; /workspace
 * itself can be looked up) and none reaches the host.  The script's exit status says what went wrong; on
 * success it prints the entry's type and absolute path.  The scripts number their refusals as below. */
#define FS_EXIT_NOT_FOUND 3
#define FS_EXIT_EXISTS 4
#define FS_EXIT_NOT_DIR 5
/* A remove of a large tree may take a while; a file operation that runs past this is stopped. */
#define FS_TIMEOUT_S 120
/* Stat's output: a link's target and the entry's path, each up to PATH_MAX, and a few short lines. */
#define FS_OUTPUT_MAX (3 * 4096)

/* The entry's type, then "SIZE MODE MTIME PERMISSIONS OWNER GROUP" (of what a link points to), then for a link
 * the length of its target's absolute path and that path (which may hold newlines: the shell's $(...) would drop
 * trailing ones but for the x after them), else -1, then the entry's absolute path. */
static const char stat_script[] =
  "{ [ -e \"$1\" ] || [ -L \"$1\" ]; } || exit " G_STRINGIFY (FS_EXIT_NOT_FOUND) "; "
  "if [ -d \"$1\" ]; then echo dir; else echo file; fi; "
  "stat -L -c '%s %a %Y %A %U %G' -- \"$1\" 2>/dev/null || stat -c '%s %a %Y %A %U %G' -- \"$1\" || exit 1; "
  "if [ -L \"$1\" ] && t=$(readlink -f -- \"$1\" && echo x); then t=${t%?x}; printf '%s\\n%s\\n' \"${#t}\" \"$t\"; "
  "else echo -1; fi; "
  "realpath -s -- \"$1\"";
static const char remove_script[] = "rm -rf -- \"$1\"";
static const char move_script[] =
  "{ [ -e \"$1\" ] || [ -L \"$1\" ]; } || exit " G_STRINGIFY (FS_EXIT_NOT_FOUND) "; "
  "mkdir -p -- \"$(dirname -- \"$2\")\" && mv -T -- \"$1\" \"$2\" || exit 1; "
  "if [ -d \"$2\" ] && [ ! -L \"$2\" ]; then echo dir; else echo file; fi; realpath -s -- \"$2\"";
static const char mkdir_script[] =
  "if [ -d \"$1\" ]; then exit " G_STRINGIFY (FS_EXIT_EXISTS) "; fi; "
  "if [ -e \"$1\" ] || [ -L \"$1\" ]; then exit " G_STRINGIFY (FS_EXIT_NOT_DIR) "; fi; "
  "mkdir -p -- \"$1\" || exit 1; echo dir; realpath -s -- \"$1\"";

/* The shell command of @job: its script, its path (and destination) as $1 (and $2). */
static char *
fs_command (Envd *job)
{
  g_autofree char *first = g_shell_quote (job->path);
  g_autofree char *second = job->dest != NULL ? g_shell_quote (job->dest) : g_strdup ("");
  const char *script = job->op == ENVD_STAT     ? stat_script
                       : job->op == ENVD_REMOVE ? remove_script
                       : job->op == ENVD_MOVE   ? move_script
                                                : mkdir_script;

  /* LC_ALL=C: the tools' messages, which the answer carries, in ASCII. */
  return g_strdup_printf ("export LC_ALL=C; set -- %s %s; %s", first, second, script);
}

/* At most FS_OUTPUT_MAX bytes of what a command wrote to @fd (a memfd), from its start. */
static char *
fs_output (int fd)
{
  g_autofree char *buf = g_malloc (FS_OUTPUT_MAX);
  ssize_t n;

  do
    n = pread (fd, buf, FS_OUTPUT_MAX, 0);
  while (n < 0 && errno == EINTR);
  return g_strndup (buf, n > 0 ? (gsize) n : 0);
}

/* EntryInfo's size, mode, permissions, owner, group and modifiedTime from stat's "SIZE MODE MTIME
 * PERMISSIONS OWNER GROUP" (@line); what does not parse is left out. */
static void
stat_attributes (JsonObject *entry, const char *line)
{
  g_auto(GStrv) fields = g_strsplit (line, " ", 6);
  guint64 size, mode, mtime;

  if (g_strv_length (fields) != 6 || !g_ascii_string_to_unsigned (fields[0], 10, 0, G_MAXINT64, &size, NULL) ||
      !g_ascii_string_to_unsigned (fields[1], 8, 0, 07777, &mode, NULL) ||
      !g_ascii_string_to_unsigned (fields[2], 10, 0, G_MAXINT64, &mtime, NULL))
    return;
  {
    g_autoptr(GDateTime) t = g_date_time_new_from_unix_utc ((gint64) mtime);
    g_autofree char *when = t != NULL ? g_date_time_format (t, "%Y-%m-%dT%H:%M:%SZ") : NULL;

    /* Protobuf's JSON writes an int64 as a string, and a Timestamp in RFC 3339. */
    json_object_set_string_member (entry, "size", fields[0]);
    json_object_set_int_member (entry, "mode", (gint64) mode);
    json_object_set_string_member (entry, "permissions", fields[3]);
    json_object_set_string_member (entry, "owner", fields[4]);
    json_object_set_string_member (entry, "group", fields[5]);
    if (when != NULL)
      json_object_set_string_member (entry, "modifiedTime", when);
  }
}

/* Stat's output from its link line on: @length ("-1", or the target's length) and @rest (the target, a newline,
 * then the path; or the path).  Returns the path within @rest, the target in @out_target; NULL when it does not
 * parse. */
static char *
split_target (char *rest, const char *length, char **out_target)
{
  guint64 n = 0;

  if (strcmp (length, "-1") == 0)
    return rest;
  if (!g_ascii_string_to_unsigned (length, 10, 1, FS_OUTPUT_MAX, &n, NULL) || strlen (rest) <= n || rest[n] != '\n')
    return NULL;
  *out_target = g_strndup (rest, n);
  return rest + n + 1;
}

static const char *
fs_verb (EnvdOp op)
{
  return op == ENVD_STAT     ? "Looking up"
         : op == ENVD_REMOVE ? "Removing"
         : op == ENVD_MOVE   ? "Moving"
                             : "Making the directory";
}

static void
on_fs_command_done (Call *call, JsonObject *reply, int reply_fd, const GError *error)
{
  Envd *job = call->data;
  SandstepRunResult result = { 0 };
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autofree char *shown = sandstep_escape (job->path, -1, 200, SANDSTEP_ESCAPE_VALUE);
  g_autoptr(GError) failed = NULL;

  if (error != NULL)
    {
      sandstepd_envd_files_finish (job, error);
      return;
    }
  sandstep_wire_read_run_result (reply, &result);
  out = fs_output (job->out_fd);
  err = g_strstrip (fs_output (job->err_fd));
  if (result.timed_out)
    {
      job->fail_code = "deadline_exceeded";
      failed = g_error_new (SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                            "%s '%s' ran past %d s and was stopped; do it with commands.run, which takes a "
                            "timeoutMs", fs_verb (job->op), shown, FS_TIMEOUT_S);
    }
  else if (result.exit_status == FS_EXIT_NOT_FOUND)
    failed = g_error_new (SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND, "'%s' does not exist in the sandbox",
                          shown);
  else if (result.exit_status == FS_EXIT_EXISTS)
    {
      /* The SDK's makeDir answers false for it. */
      job->fail_code = "already_exists";
      failed = g_error_new (SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_FAILED, "The directory '%s' exists already",
                            shown);
    }
  else if (result.exit_status == FS_EXIT_NOT_DIR)
    failed = g_error_new (SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_FAILED,
                          "'%s' exists and is not a directory; remove it first, or make the directory elsewhere",
                          shown);
  else if (result.exit_status != 0)
    failed = g_error_new (SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO,
                          "%s '%s' failed in the sandbox (exit status %d): %s; only /workspace and /tmp are "
                          "writable", fs_verb (job->op), shown, result.exit_status,
                          err[0] != '\0' ? err : "no message");
  if (failed != NULL)
    {
      sandstepd_envd_files_finish (job, failed);
      return;
    }
  {
    g_autoptr(JsonObject) answer = json_object_new ();
    g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);

    if (job->op != ENVD_REMOVE)
      {
        /* "dir" or "file", Stat's attributes and a link's target, then the absolute path, which may hold newlines
         * itself, and one to end it. */
        guint n_lines = job->op == ENVD_STAT ? 4 : 2;
        g_auto(GStrv) lines = g_strsplit (out, "\n", n_lines);
        char *path = g_strv_length (lines) == n_lines ? lines[n_lines - 1] : NULL;
        g_autofree char *target = NULL;
        JsonObject *entry;

        if (path != NULL && job->op == ENVD_STAT)
          path = split_target (path, lines[2], &target);

        /* The script ends the path with a newline: without it, the output was cut (or is not the script's). */
        if (path != NULL && g_str_has_suffix (path, "\n"))
          path[strlen (path) - 1] = '\0';
        else
          path = NULL;
        if (path == NULL || path[0] != '/')
          {
            g_autofree char *printed = sandstep_escape (out, -1, 200, SANDSTEP_ESCAPE_VALUE);
            g_autoptr(GError) odd = g_error_new (SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                                                 "%s '%s' gave no entry back (it printed '%s'); look at it with "
                                                 "commands.run", fs_verb (job->op), shown, printed);
            sandstepd_envd_files_finish (job, odd);
            return;
          }
        {
          g_autofree char *dir = g_path_get_dirname (path);
          g_autofree char *name = g_path_get_basename (path);
          entry = sandstepd_envd_entry_info (dir, name, strcmp (lines[0], "dir") == 0);
        }
        if (job->op == ENVD_STAT)
          stat_attributes (entry, lines[1]);
        if (target != NULL)
          json_object_set_string_member (entry, "symlinkTarget", target);
        json_object_set_object_member (answer, "entry", entry);
      }
    json_node_set_object (node, answer);
    sandstepd_envd_answer_json (job, node);
    sandstepd_envd_files_finish (job, NULL);
  }
}

/* Runs @job's command on its lease's worker, its output into two memfds it keeps. */
void
sandstepd_envd_fs_start (Envd *job)
{
  g_autofree char *command = fs_command (job);
  int fds[2];

  job->out_fd = memfd_create ("sandstepd-e2b-stdout", MFD_CLOEXEC);
  job->err_fd = memfd_create ("sandstepd-e2b-stderr", MFD_CLOEXEC);
  fds[0] = job->out_fd >= 0 ? fcntl (job->out_fd, F_DUPFD_CLOEXEC, 0) : -1;
  fds[1] = job->err_fd >= 0 ? fcntl (job->err_fd, F_DUPFD_CLOEXEC, 0) : -1;
  if (fds[0] < 0 || fds[1] < 0)
    {
      int errsv = errno;
      g_autoptr(GError) error = NULL;

      if (fds[0] >= 0)
        close (fds[0]);
      if (fds[1] >= 0)
        close (fds[1]);
      sandstep_throw_errno (&error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errsv,
                            "Cannot hold the output of %s", fs_verb (job->op));
      sandstepd_envd_files_finish (job, error);
      return;
    }
  sandstepd_worker_call (job->lease->worker, "run", sandstep_wire_run_request (NULL, command, FS_TIMEOUT_S), fds,
                         2, on_fs_command_done, sandstepd_envd_ref (job), (GDestroyNotify) sandstepd_envd_unref);
}
