/* sandstep-supervisor-keep.c: keeping a sandbox's jail past its idle time; see sandstep-supervisor-keep.h. */
#include "sandstep-supervisor-keep.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

int
sandstep_supervisor_keep (int dir_fd)
{
  int fd = openat (dir_fd, SANDSTEP_SUPERVISOR_KEEP_FILE, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);

  if (fd < 0)
    return -1;
  /* Shared: several watches keep one jail.  The supervisor's probe holds it exclusively for an instant. */
  while (flock (fd, LOCK_SH) < 0)
    if (errno != EINTR)
      {
        int errsv = errno;
        close (fd);
        errno = errsv;
        return -1;
      }
  return fd;
}

int
sandstep_supervisor_kept (int dir_fd, int *out_ending)
{
  int fd = openat (dir_fd, SANDSTEP_SUPERVISOR_KEEP_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

  if (out_ending != NULL)
    *out_ending = -1;
  if (fd < 0)
    return 0;
  if (flock (fd, LOCK_EX | LOCK_NB) < 0)
    {
      int kept = errno == EWOULDBLOCK;
      close (fd);
      return kept;
    }
  /* Nobody keeps it: ours now, until the caller lets it go (or at once). */
  if (out_ending != NULL)
    *out_ending = fd;
  else
    close (fd);
  return 0;
}
