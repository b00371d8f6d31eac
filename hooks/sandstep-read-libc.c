/* sandstep-read-libc.c: a small file read whole; see the header. */
#include "sandstep-read-libc.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

ssize_t
sandstep_read_small (const char *path, char *buf, size_t size)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  ssize_t n;
  int errsv;

  if (size == 0)
    {
      errno = EINVAL;
      return -1;
    }
  if (fd < 0)
    return -1;
  do
    n = read (fd, buf, size - 1);
  while (n < 0 && errno == EINTR);
  errsv = errno;
  close (fd);
  errno = errsv;
  buf[n > 0 ? n : 0] = '\0';
  return n;
}
