/* sandstep-fd-stream.c: a seekable stream over a file's first bytes, read with pread(). */
#include "sandstep-fd-stream.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

G_DEFINE_QUARK (sandstep-fd-stream-error-quark, sandstep_fd_stream_error)

struct _SandstepFdStream {
  GInputStream parent;
  int fd;
  goffset len;
  goffset offset;
};

static void seekable_init (GSeekableIface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE (SandstepFdStream, sandstep_fd_stream, G_TYPE_INPUT_STREAM,
                               G_IMPLEMENT_INTERFACE (G_TYPE_SEEKABLE, seekable_init))

static gssize
fd_stream_read (GInputStream *stream, void *buffer, gsize count, GCancellable *cancellable, GError **error)
{
  SandstepFdStream *s = SANDSTEP_FD_STREAM (stream);
  gsize want = MIN (count, (gsize) (s->len - s->offset));
  ssize_t n;

  if (want == 0)
    return 0;
  do
    n = pread (s->fd, buffer, want, s->offset);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    {
      int saved = errno;
      g_set_error (error, SANDSTEP_FD_STREAM_ERROR, g_io_error_from_errno (saved), "cannot read it back: %s",
                   g_strerror (saved));
      return -1;
    }
  if (n == 0)
    {
      /* Shorter than promised: the request's Content-Length would be a lie. */
      g_set_error (error, SANDSTEP_FD_STREAM_ERROR, G_IO_ERROR_FAILED,
                   "it ended %" G_GOFFSET_FORMAT " bytes short of its length", s->len - s->offset);
      return -1;
    }
  s->offset += n;
  return n;
}

static gboolean
fd_stream_close (GInputStream *stream, GCancellable *cancellable, GError **error)
{
  SandstepFdStream *s = SANDSTEP_FD_STREAM (stream);

  if (s->fd >= 0)
    close (g_steal_fd (&s->fd));
  return TRUE;
}

static goffset
fd_stream_tell (GSeekable *seekable)
{
  return SANDSTEP_FD_STREAM (seekable)->offset;
}

static gboolean
fd_stream_can_seek (GSeekable *seekable)
{
  return TRUE;
}

static gboolean
fd_stream_seek (GSeekable *seekable, goffset offset, GSeekType type, GCancellable *cancellable, GError **error)
{
  SandstepFdStream *s = SANDSTEP_FD_STREAM (seekable);
  goffset to = type == G_SEEK_SET ? offset : type == G_SEEK_CUR ? s->offset + offset : s->len + offset;

  if (to < 0 || to > s->len)
    return g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                        "Cannot seek to %" G_GOFFSET_FORMAT " in a part of %" G_GOFFSET_FORMAT " bytes", to,
                        s->len), FALSE;
  s->offset = to;
  return TRUE;
}

static gboolean
fd_stream_can_truncate (GSeekable *seekable)
{
  return FALSE;
}

static gboolean
fd_stream_truncate (GSeekable *seekable, goffset offset, GCancellable *cancellable, GError **error)
{
  return g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED, "A part's stream is read-only"), FALSE;
}

static void
seekable_init (GSeekableIface *iface)
{
  iface->tell = fd_stream_tell;
  iface->can_seek = fd_stream_can_seek;
  iface->seek = fd_stream_seek;
  iface->can_truncate = fd_stream_can_truncate;
  iface->truncate_fn = fd_stream_truncate;
}

static void
fd_stream_finalize (GObject *object)
{
  SandstepFdStream *s = SANDSTEP_FD_STREAM (object);

  if (s->fd >= 0)
    close (s->fd);
  G_OBJECT_CLASS (sandstep_fd_stream_parent_class)->finalize (object);
}

static void
sandstep_fd_stream_class_init (SandstepFdStreamClass *klass)
{
  GInputStreamClass *stream_class = G_INPUT_STREAM_CLASS (klass);

  G_OBJECT_CLASS (klass)->finalize = fd_stream_finalize;
  stream_class->read_fn = fd_stream_read;
  stream_class->close_fn = fd_stream_close;
}

static void
sandstep_fd_stream_init (SandstepFdStream *s)
{
  s->fd = -1;
}

GInputStream *
sandstep_fd_stream_new (int fd, goffset len, GError **error)
{
  int copy = fcntl (fd, F_DUPFD_CLOEXEC, 0);
  SandstepFdStream *s;

  if (copy < 0)
    {
      int saved = errno;
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved), "Cannot duplicate a spooled part's fd: %s",
                   g_strerror (saved));
      return NULL;
    }
  s = g_object_new (SANDSTEP_TYPE_FD_STREAM, NULL);
  s->fd = copy;
  s->len = len;
  return G_INPUT_STREAM (s);
}
