/* sandstep-tree-copy.c: copying bytes between a tree and the host, holes kept, a full disk named. */
#include "sandstep-tree.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandstep-backend.h"
#include "sandstep-error.h"
#include "sandstep-progress.h"
#include "sandstep-host-files.h"
#include "sandstep-units.h"
#include "sandstep-tree-private.h"

/* Waits until a non-blocking @fd can take more. */
static void
wait_writable (int fd)
{
  struct pollfd pfd = { .fd = fd, .events = POLLOUT };

  while (poll (&pfd, 1, -1) < 0 && errno == EINTR)
    ;
}

/* Returns 0, or the errno of the failed write. */
int
sandstep_tree_write_all (int fd, const void *data, gsize len)
{
  const guint8 *p = data;

  while (len > 0)
    {
      ssize_t n = write (fd, p, MIN (len, (gsize) G_MAXSSIZE));

      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          if (errno == EAGAIN)
            {
              wait_writable (fd);
              continue;
            }
          return errno;
        }
      p += n;
      len -= n;
    }
  return 0;
}

/* Copies up to @limit bytes from @in_fd's offset to @out_fd's, stopping at end
 * of file.  On failure returns -1 with *@out_errno set and *@out_read_failed
 * saying which side failed (copy_file_range() cannot say: counted as the
 * write side). */
gint64
sandstep_tree_copy_bytes (int in_fd, int out_fd, guint64 limit, gboolean *out_read_failed, int *out_errno)
{
  guint64 total = 0;
  gboolean kernel_copy = TRUE;
  g_autofree guint8 *buffer = NULL;

  while (total < limit)
    {
      gsize want = MIN (limit - total, sandstep_progress_piece ((guint64) 1 << 30));
      ssize_t n;

      if (kernel_copy)
        {
          n = copy_file_range (in_fd, NULL, out_fd, NULL, want, 0);
          if (n > 0)
            {
              total += n;
              sandstep_progress_add (n);
              continue;
            }
          if (n == 0)
            break;
          if (errno == EINTR)
            continue;
          if (errno == EAGAIN)
            {
              wait_writable (out_fd);
              continue;
            }
          /* Not every pair of fds takes it: pipes, two file systems, old kernels,
           * an O_APPEND destination.  The offsets are shared, so read/write
           * carries on where it stopped. */
          if (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP || errno == EBADF)
            {
              kernel_copy = FALSE;
              continue;
            }
          *out_read_failed = FALSE;
          *out_errno = errno;
          return -1;
        }

      if (buffer == NULL)
        buffer = g_malloc (COPY_CHUNK);
      n = read (in_fd, buffer, MIN (want, COPY_CHUNK));
      if (n == 0)
        break;
      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          *out_read_failed = TRUE;
          *out_errno = errno;
          return -1;
        }
      int errsv = sandstep_tree_write_all (out_fd, buffer, n);
      if (errsv != 0)
        {
          *out_read_failed = FALSE;
          *out_errno = errsv;
          return -1;
        }
      total += n;
      sandstep_progress_add (n);
    }

  return total;
}

/* Copies @size bytes of a file with holes run by run (SEEK_DATA, SEEK_HOLE),
 * seeking over the holes in @out_fd, so the copy is as sparse as the source.
 * @out_fd must be a regular file open without O_APPEND; writing starts at its
 * offset.  Returns the bytes the copy covers (holes included), or -1. */
gint64
sandstep_tree_copy_sparse (int in_fd, int out_fd, guint64 size, gboolean *out_read_failed, int *out_errno)
{
  off_t out_start = lseek (out_fd, 0, SEEK_CUR);
  off_t pos = 0;

  if (out_start < 0)
    goto write_failed;
  while ((guint64) pos < size)
    {
      off_t data = lseek (in_fd, pos, SEEK_DATA);
      off_t hole;
      gint64 n;

      if (data < 0 && errno == ENXIO)
        break;                    /* only a hole from here on */
      if (data < 0)
        goto read_failed;
      if ((guint64) data >= size)
        break;
      hole = lseek (in_fd, data, SEEK_HOLE);
      if (hole < 0)
        goto read_failed;
      hole = MIN ((guint64) hole, size);
      if (lseek (in_fd, data, SEEK_SET) < 0)
        goto read_failed;
      if (lseek (out_fd, out_start + data, SEEK_SET) < 0)
        goto write_failed;
      /* A hole is copied the moment it is skipped. */
      sandstep_progress_add (data - pos);
      n = sandstep_tree_copy_bytes (in_fd, out_fd, hole - data, out_read_failed, out_errno);
      if (n < 0)
        return -1;
      if (n < hole - data)
        return data + n;          /* the file shrank: the caller reports the change */
      pos = hole;
    }
  /* A hole at the end is the file's length, not data. */
  if (ftruncate (out_fd, out_start + size) < 0 || lseek (out_fd, out_start + size, SEEK_SET) < 0)
    goto write_failed;
  sandstep_progress_add (size - MIN ((guint64) pos, size));
  return size;

read_failed:
  *out_read_failed = TRUE;
  *out_errno = errno;
  return -1;
write_failed:
  *out_read_failed = FALSE;
  *out_errno = errno;
  return -1;
}

/* Holes are worth keeping only where they can be made: a regular file
 * written at its offset (O_APPEND puts every write at the end). */
gboolean
sandstep_tree_can_copy_sparse (int in_fd, const struct stat *in_st, int out_fd)
{
  struct stat out_st;
  int flags;

  if ((guint64) in_st->st_blocks * 512 >= (guint64) in_st->st_size)
    return FALSE;
  flags = fcntl (out_fd, F_GETFL);
  return flags >= 0 && !(flags & O_APPEND) && fstat (out_fd, &out_st) == 0 && S_ISREG (out_st.st_mode);
}
