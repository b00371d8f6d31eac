/* sandstep-write-libc.c: all of a buffer to a descriptor; see the header. */
#include "sandstep-write-libc.h"

#include <errno.h>
#include <unistd.h>

int
sandstep_write_all (int fd, const void *data, size_t len)
{
  const char *p = data;

  while (len > 0)
    {
      ssize_t n = write (fd, p, len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        {
          if (n == 0)
            errno = EIO;
          return 0;
        }
      p += n;
      len -= (size_t) n;
    }
  return 1;
}
