/* sandstep-read-libc.c: a small file read whole; see the header. */
#include "sandstep-read-libc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

uint64_t
sandstep_process_start_time (pid_t pid)
{
  char path[64], buf[1024];
  const char *p;

  if (pid <= 0)
    return 0;
  snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
  if (sandstep_read_small (path, buf, sizeof buf) <= 0)
    return 0;
  /* After "pid (comm)", whatever the name holds: the state is field 3, the start time field 22. */
  if ((p = strrchr (buf, ')')) == NULL)
    return 0;
  for (int field = 2; field < 22 && p != NULL; field++)
    p = strchr (p + 1, ' ');
  return p != NULL ? strtoull (p + 1, NULL, 10) : 0;
}
