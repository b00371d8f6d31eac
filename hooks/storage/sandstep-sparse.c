/* sandstep-sparse.c: zero blocks become holes. */
#include "sandstep-sparse.h"
#include "sandstep-write-libc.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLOCK 4096

void
sandstep_sparse_writer_init (SandstepSparseWriter *writer, int fd)
{
  struct stat st;
  int flags = fcntl (fd, F_GETFL);

  writer->fd = fd;
  writer->holes = flags >= 0 && !(flags & O_APPEND) && fstat (fd, &st) == 0 && S_ISREG (st.st_mode);
  writer->ends_in_hole = FALSE;
}

static gboolean
is_zero (const guint8 *p, gsize len)
{
  /* A block is zero when its first byte is and it equals itself shifted by one. */
  return len > 0 && p[0] == 0 && memcmp (p, p + 1, len - 1) == 0;
}

gboolean
sandstep_sparse_write (SandstepSparseWriter *writer, const void *data, gsize len)
{
  const guint8 *p = data;

  if (!writer->holes)
    return sandstep_write_all (writer->fd, p, len);
  while (len > 0)
    {
      gsize n = MIN (len, BLOCK);

      if (n == BLOCK && is_zero (p, n))
        {
          if (lseek (writer->fd, n, SEEK_CUR) < 0)
            return FALSE;
          writer->ends_in_hole = TRUE;
        }
      else
        {
          if (!sandstep_write_all (writer->fd, p, n))
            return FALSE;
          writer->ends_in_hole = FALSE;
        }
      p += n;
      len -= n;
    }
  return TRUE;
}

gboolean
sandstep_sparse_finish (SandstepSparseWriter *writer)
{
  off_t end;

  if (!writer->ends_in_hole)
    return TRUE;
  end = lseek (writer->fd, 0, SEEK_CUR);
  return end >= 0 && ftruncate (writer->fd, end) == 0;
}
