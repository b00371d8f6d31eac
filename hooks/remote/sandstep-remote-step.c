/* sandstep-remote-step.c: a step's command on a sandstepd in one request.
 *
 * POST .../claim-run carries who asks and the command as its first line and
 * the command's stdin after it; the answer is the claim's line, the output
 * and the result, sent once the server has ended the claim.  A refusal
 * (busy, another owner) comes before anything ran, so
 * sandstep_backend_run_step() may wait and try again: the line and the
 * stdin are spooled once, to a file, and sent again from there.
 *
 * stdin is forwarded when it is a pipe, a socket or a regular file, read to
 * its end before the command starts; a terminal or /dev/null is not read
 * (the command's stdin is then /dev/null, as make's parallel jobs have it).
 */
#include "sandstep-remote-private.h"
#include "sandstep-fd-stream.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <gio/gunixinputstream.h>

#include "sandstep-error.h"

/* The most stdin a remote command is given: sandstepd's default --max-upload. */
#define MAX_STDIN (G_GUINT64_CONSTANT (1) << 30)

/* A pipe, socket or file to read; a terminal, /dev/null or no stdin: nothing to send. */
static gboolean
stdin_is_forwarded (int fd)
{
  struct stat st;

  if (fd < 0 || fstat (fd, &st) < 0)
    return FALSE;
  return S_ISFIFO (st.st_mode) || S_ISSOCK (st.st_mode) || S_ISREG (st.st_mode) ||
         (S_ISCHR (st.st_mode) && !isatty (fd) && st.st_rdev != (dev_t) makedev (1, 3));
}

static int
spool_open (void)
{
  int fd = open (g_get_tmp_dir (), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

  if (fd < 0)
    fd = memfd_create ("sandstep-stdin", MFD_CLOEXEC);
  return fd;
}

/* The request line, then all of @in, in @fd; its length in @out_len. */
static gboolean
spool_into (int fd, const char *line, gsize line_len, int in, goffset *out_len, GError **error)
{
  g_autofree char *buf = g_malloc (65536);
  guint64 taken = 0;

  if (!sandstep_write_all (fd, line, line_len))
    return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                 "Cannot keep the command's stdin in '%s' to send it", g_get_tmp_dir ());
  for (;;)
    {
      ssize_t n = read (in, buf, 65536);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                     "Cannot read the command's stdin to send it to the sandbox server");
      if (n == 0)
        break;
      taken += n;
      if (taken > MAX_STDIN)
        return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_TOO_LARGE,
                               "The command's stdin is larger than %" G_GUINT64_FORMAT " bytes, the most a command "
                               "on a sandbox server is given; put a large input in the sandbox with 'sandstep put' "
                               "and read it from there", MAX_STDIN);
      if (!sandstep_write_all (fd, buf, n))
        return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                     "Cannot keep the command's stdin in '%s' to send it", g_get_tmp_dir ());
    }
  *out_len = (goffset) (line_len + taken);
  return TRUE;
}

static int
spool (const char *line, gsize line_len, int in, goffset *out_len, GError **error)
{
  int fd = spool_open ();

  if (fd < 0)
    return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                 "Cannot keep the command's stdin in '%s' to send it", g_get_tmp_dir ()), -1;
  if (!spool_into (fd, line, line_len, in, out_len, error))
    {
      close (fd);
      return -1;
    }
  return fd;
}

/* The body of @request's tries: spooled at the first, read again at every other. */
static gboolean
set_body (RemoteBackend *r, SoupMessage *msg, const SandstepIdentity *who, const SandstepRunRequest *request,
          GError **error)
{
  g_autoptr(JsonObject) first = sandstep_wire_run_step_request (who, request->command, request->timeout_s);
  gsize len = 0;
  g_autofree char *line = sandstep_wire_to_line (first, &len);
  g_autoptr(GInputStream) body = NULL;

  if (!stdin_is_forwarded (request->stdin_fd))
    {
      g_autoptr(GBytes) bytes = g_bytes_new_take (g_steal_pointer (&line), len);
      soup_message_set_request_body_from_bytes (msg, SANDSTEP_RUN_STEP_TYPE, bytes);
      return TRUE;
    }
  if (r->spool_for != request)
    {
      if (r->spool_fd >= 0)
        close (r->spool_fd);
      r->spool_for = NULL;
      r->spool_fd = spool (line, len, request->stdin_fd, &r->spool_len, error);
      if (r->spool_fd < 0)
        return FALSE;
      r->spool_for = request;
    }
  /* Read with pread from its start, and seekable, so libsoup can send it again on a new connection. */
  body = sandstep_fd_stream_new (r->spool_fd, r->spool_len, error);
  if (body == NULL)
    return FALSE;
  soup_message_set_request_body (msg, SANDSTEP_RUN_STEP_TYPE, body, r->spool_len);
  return TRUE;
}

gboolean
sandstep_remote_try_run_step (SandstepBackend *backend, const char *handle, const SandstepIdentity *who,
                              const SandstepRunRequest *request, SandstepRunResult *result, SandstepSpec **out_spec,
                              GError **error)
{
  RemoteBackend *r = (RemoteBackend *) backend;
  g_autofree char *path = NULL;
  g_autoptr(SoupMessage) msg = NULL;
  g_autoptr(GInputStream) stream = NULL;
  g_autoptr(GError) local_error = NULL;
  g_autofree LineReader *lr = g_new0 (LineReader, 1);
  g_autofree char *line = NULL;
  g_autoptr(JsonObject) first = NULL;
  RemoteAttachment a = { .parent = { .backend = backend }, .remote = r };
  RunOutput out = { request, TRUE };
  const char *claim = NULL;
  double remaining = 0;
  gboolean ok = FALSE;

  if (!sandstep_remote_target_parse (r, handle, &a.target, error))
    return FALSE;
  a.parent.handle = a.target.shown;
  sandstep_remote_trace (r, "step sent");
  path = g_strdup_printf ("/sandboxes/%s/claim-run", a.target.local);
  msg = sandstep_remote_message (r, a.target.server, path, NULL);
  if (!set_body (r, msg, who, request, error))
    goto out;
  stream = soup_session_send (r->session, msg, NULL, &local_error);
  if (stream == NULL)
    {
      sandstep_remote_throw_unreachable (error, a.target.server, local_error);
      goto out;
    }
  if (soup_message_get_status (msg) != SOUP_STATUS_OK)
    {
      /* Nothing ran; a busy refusal names its holder, and the caller waits on it. */
      g_propagate_error (error, sandstep_remote_error_from_stream (msg, stream, &a.target));
      goto out;
    }
  /* The claim's line: the spec, for the report. */
  sandstep_remote_line_reader_init (lr, stream);
  do
    {
      g_free (line);
      line = sandstep_remote_line_reader_next (lr, &local_error);
    }
  while (line != NULL && line[0] == '\0');
  if (line != NULL)
    first = sandstep_remote_parse_line (line, a.target.server, &local_error);
  if (first == NULL || !sandstep_wire_read_claim (first, &claim, &remaining, out_spec))
    {
      sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                      "The sandbox server at '%s' did not confirm the claim on '%s'%s%s", a.target.server,
                      a.target.shown, local_error ? ": " : "", local_error ? local_error->message : "");
      goto out;
    }
  sandstep_remote_trace (r, "step claimed");
  /* The rest of the answer: what is left in the reader first. */
  for (;;)
    {
      g_autoptr(JsonObject) last = NULL;

      last = sandstep_remote_read_stream_from (&a, lr, "the command ran", "run it again",
                                               sandstep_remote_on_run_output, &out, error);
      if (last == NULL)
        break;
      if (sandstep_wire_read_run_result (last, result))
        {
          sandstep_remote_trace (r, "step ended");
          /* The server's notices (egress refusals) come with the result, not as they happen. */
          if (request->on_notice != NULL)
            sandstep_wire_read_notices (last, request->on_notice, request->user_data);
          ok = TRUE;
          break;
        }
    }
out:
  if (!ok && out_spec != NULL && *out_spec != NULL)
    g_clear_pointer (out_spec, sandstep_spec_free);
  sandstep_remote_target_clear (&a.target);
  return ok;
}

/* The spooled stdin serves every try the claim wait makes of one request; another must never find it. */
void
sandstep_remote_end_run_step (SandstepBackend *backend, const SandstepRunRequest *request)
{
  RemoteBackend *r = (RemoteBackend *) backend;

  if (r->spool_for != request)
    return;
  if (r->spool_fd >= 0)
    close (r->spool_fd);
  r->spool_fd = -1;
  r->spool_for = NULL;
}
