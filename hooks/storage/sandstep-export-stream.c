/* sandstep-export-stream.c: export_file in a thread, into a pipe. */
#include "sandstep-export-stream.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "sandstep-error.h"

/* A larger pipe means fewer wake-ups per MiB; the kernel may cap it. */
#define PIPE_SIZE (1024 * 1024)

struct _SandstepExportStream {
  SandstepAttachment *attachment;
  char *path;
  guint64 max_bytes;
  int read_fd;
  int write_fd;               /* owned by the thread while it runs */
  GThread *thread;
  gint64 copied;              /* the thread's result */
  GError *error;              /* the thread's error */
};

static gpointer
copy_thread (gpointer data)
{
  SandstepExportStream *s = data;
  sigset_t pipe_only;

  /* A reader that stops early makes our writes fail with EPIPE; the
   * signal must not end the process (the helper keeps SIGPIPE's default). */
  sigemptyset (&pipe_only);
  sigaddset (&pipe_only, SIGPIPE);
  pthread_sigmask (SIG_BLOCK, &pipe_only, NULL);

  s->copied = sandstep_attachment_export_file (s->attachment, s->path, s->write_fd, s->max_bytes,
                                                          &s->error);
  close (s->write_fd);
  s->write_fd = -1;
  return NULL;
}

SandstepExportStream *
sandstep_export_stream_start (SandstepAttachment *attachment, const char *path, guint64 max_bytes, GError **error)
{
  SandstepExportStream *s;
  int fds[2];

  if (pipe2 (fds, O_CLOEXEC) < 0)
    return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                 "Cannot make a pipe to read '%s' through", path), NULL;
  if (fcntl (fds[1], F_SETPIPE_SZ, PIPE_SIZE) < 0)
    g_debug ("F_SETPIPE_SZ: %s; keeping the default pipe size", g_strerror (errno));
  s = g_new0 (SandstepExportStream, 1);
  s->attachment = attachment;
  s->path = g_strdup (path);
  s->max_bytes = max_bytes;
  s->read_fd = fds[0];
  s->write_fd = fds[1];
  s->thread = g_thread_new ("sandstep-export", copy_thread, s);
  return s;
}

gssize
sandstep_export_stream_read (SandstepExportStream *s, void *buffer, gsize len, GError **error)
{
  gsize got = 0;

  while (got < len)
    {
      ssize_t n = read (s->read_fd, (char *) buffer + got, len - got);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                     "Cannot read '%s' from the sandbox", s->path), -1;
      if (n == 0)
        break;
      got += n;
    }
  return got;
}

static void
join (SandstepExportStream *s)
{
  if (s->thread != NULL)
    g_thread_join (g_steal_pointer (&s->thread));
}

gint64
sandstep_export_stream_finish (SandstepExportStream *s, GError **error)
{
  join (s);
  if (s->error != NULL)
    {
      g_propagate_error (error, g_steal_pointer (&s->error));
      return -1;
    }
  return s->copied;
}

int
sandstep_export_spool_open (GError **error)
{
  const char *dir = g_get_tmp_dir ();
  int fd = open (dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL))
    {
      /* No O_TMPFILE there: a named file, unlinked at once. */
      g_autofree char *path = g_build_filename (dir, "sandstep-spool-XXXXXX", NULL);
      fd = g_mkstemp_full (path, O_RDWR | O_CLOEXEC, 0600);
      if (fd >= 0)
        unlink (path);
    }
  if (fd < 0)
    return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                 "Cannot make a spool file in '%s' (TMPDIR); point TMPDIR at a writable "
                                 "directory", dir), -1;
  return fd;
}

void
sandstep_export_stream_free (SandstepExportStream *s)
{
  if (s == NULL)
    return;
  /* Closing our end first makes a copy still running fail at its next write. */
  if (s->read_fd >= 0)
    close (s->read_fd);
  join (s);
  g_clear_error (&s->error);
  g_free (s->path);
  g_free (s);
}
