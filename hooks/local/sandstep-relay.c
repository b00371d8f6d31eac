/* sandstep-relay.c: both-way copy with half-close (see sandstep-relay.h). */
#include "sandstep-relay.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

static int
write_all (int fd, const char *buf, size_t len)
{
  for (size_t done = 0; done < len;)
    {
      ssize_t w = write (fd, buf + done, len - done);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        return -1;
      done += (size_t) w;
    }
  return 0;
}

void
sandstep_relay (int a, int b, const char *pending, size_t pending_len)
{
  struct pollfd fds[2] = { { .fd = a, .events = POLLIN }, { .fd = b, .events = POLLIN } };
  char buf[65536];
  int open_ends = 2;

  if (pending_len > 0 && write_all (b, pending, pending_len) < 0)
    return;
  while (open_ends > 0)
    {
      if (poll (fds, 2, -1) < 0)
        {
          if (errno == EINTR)
            continue;
          return;
        }
      for (int i = 0; i < 2; i++)
        {
          int other = i == 0 ? b : a;
          ssize_t n;

          if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
          n = read (fds[i].fd, buf, sizeof buf);
          if (n < 0 && errno == EINTR)
            continue;
          if (n <= 0)
            {
              shutdown (other, SHUT_WR);
              fds[i].fd = -1;
              open_ends--;
              continue;
            }
          if (write_all (other, buf, (size_t) n) < 0)
            return;
        }
    }
}
