/* sandstep-relay.c: both-way copy with half-close (see sandstep-relay.h). */
#include "sandstep-relay.h"
#include "sandstep-write-libc.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

void
sandstep_relay (int a, int b, const char *pending, size_t pending_len)
{
  struct pollfd fds[2] = { { .fd = a, .events = POLLIN }, { .fd = b, .events = POLLIN } };
  char buf[65536];
  int open_ends = 2;

  if (pending_len > 0 && !sandstep_write_all (b, pending, pending_len))
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
          if (!sandstep_write_all (other, buf, (size_t) n))
            return;
        }
    }
}
