/* sandstep-remote-put.c: a put to a sandstepd.
 *
 * The host tree streams as entries: one JSON line each, a file's bytes after its line.
 *
 * The walk is the local backend's (sandstep-host-files.c), so both copy the
 * same entries by the same rules and with the same messages; the entries
 * are read by daemon/sandstepd-upload.c.  A thread writes them into a pipe
 * that is the request's body while the request is sent.
 */
#include "sandstep-remote-private.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gunixinputstream.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-progress.h"
#include "sandstep-host-files.h"

#define PUT_BLOCK (64 * 1024)

typedef struct {
  int fd;                 /* the pipe the request body reads */
  GError *error;
} PutWriter;

static gboolean
put_header (PutWriter *w, const char *rel, const char *type, mode_t mode, gint64 size, const char *target)
{
  SandstepWirePutEntry entry = { rel, type, mode, size, target };
  gsize len;
  g_autofree char *line = sandstep_wire_put_entry_line (&entry, &len);

  return sandstep_write_all (w->fd, line, len);
}

/* remote_put()'s sink: each entry as a header line, a file's bytes after its header. */
static gboolean
wire_sink_dir (const char *rel, mode_t mode, gpointer data, GError **error)
{
  return put_header (data, rel, "dir", mode, -1, NULL);
}

static gboolean
wire_sink_link (const char *rel, const char *target, gpointer data, GError **error)
{
  return put_header (data, rel, "link", 0777, -1, target);
}

static gboolean
wire_sink_file (const char *rel, int fd, const struct stat *st, const char *shown, gpointer data, GError **error)
{
  PutWriter *w = data;
  char buf[PUT_BLOCK];

  if (!put_header (w, rel, "file", st->st_mode, st->st_size, NULL))
    return FALSE;
  for (guint64 left = st->st_size; left > 0;)
    {
      ssize_t n = read (fd, buf, MIN (left, sizeof buf));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                     "Cannot read '%s' on the host", shown);
      if (n == 0)
        return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_CHANGED,
                               "'%s' on the host was replaced while it was copied; put it again", shown);
      if (!sandstep_write_all (w->fd, buf, n))
        return FALSE;
      sandstep_progress_add (n);
      left -= n;
    }
  return TRUE;
}

static const SandstepHostSink wire_sink = { wire_sink_dir, wire_sink_link, wire_sink_file };

typedef struct {
  PutWriter writer;
  char *src;
  struct stat st;
} PutJob;

static gpointer
put_writer_thread (gpointer data)
{
  PutJob *job = data;
  sigset_t pipe_only;

  /* A server that stops reading must not kill us with SIGPIPE: the write fails instead. */
  sigemptyset (&pipe_only);
  sigaddset (&pipe_only, SIGPIPE);
  pthread_sigmask (SIG_BLOCK, &pipe_only, NULL);
  if (sandstep_host_walk (job->src, &job->st, "", &wire_sink, &job->writer, &job->writer.error))
    {
      gsize len;
      g_autofree char *end = sandstep_wire_put_end_line (&len);
      sandstep_write_all (job->writer.fd, end, len);
    }
  close (job->writer.fd);
  job->writer.fd = -1;
  return NULL;
}

gboolean
sandstep_remote_put (SandstepAttachment *parent, const char *host_src, const char *dest, GError **error)
{
  RemoteAttachment *a = (RemoteAttachment *) parent;
  g_autofree char *src = NULL;
  g_autofree char *base = NULL;
  g_autofree char *url_path = NULL;
  g_autofree char *query = NULL;
  g_autoptr(SoupMessage) msg = NULL;
  g_autoptr(GInputStream) body = NULL;
  g_autoptr(GBytes) answer = NULL;
  g_autoptr(GError) server_error = NULL;
  PutJob job = { .writer = { .fd = -1 } };
  GThread *thread;
  int fds[2];
  gboolean contents;

  /* The host side is checked here, with the local backend's words. */
  if (!sandstep_host_source (host_src, &src, &base, &job.st, error))
    return FALSE;
  contents = S_ISDIR (job.st.st_mode) && g_str_has_suffix (host_src, "/");

  if (pipe2 (fds, O_CLOEXEC) < 0)
    return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                 "Cannot create a pipe to send '%s'", host_src);
  url_path = g_strdup_printf ("/sandboxes/%s/put", a->target.local);
  query = sandstep_remote_query ("dest", dest, "name", base, "contents", contents ? "1" : "0", NULL);
  msg = sandstep_remote_message (a->remote, a->target.server, url_path, query);
  soup_message_headers_replace (soup_message_get_request_headers (msg), SANDSTEP_CLAIM_HEADER, a->claim);
  body = g_unix_input_stream_new (fds[0], TRUE);
  soup_message_set_request_body (msg, "application/x-sandstep-entries", body, -1);

  job.writer.fd = fds[1];
  job.src = src;
  thread = g_thread_new ("sandstep-put", put_writer_thread, &job);
  answer = sandstep_remote_send_and_read (a->remote, msg, a->target.server, &a->target, &server_error);
  /* If the server stopped reading, unblock the writer before joining it. */
  g_input_stream_close (body, NULL, NULL);
  g_thread_join (thread);

  /* A host-side failure explains a refused or cut upload better than the server can. */
  if (job.writer.error != NULL)
    {
      g_propagate_error (error, job.writer.error);
      return FALSE;
    }
  if (answer == NULL)
    {
      g_propagate_error (error, g_steal_pointer (&server_error));
      return FALSE;
    }
  return TRUE;
}
