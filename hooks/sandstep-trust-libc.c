/* sandstep-trust-libc.c: the trust of a state directory and of a socket's peer (see the header). */
#include "sandstep-trust-libc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static int
refuse (char *why, size_t why_size, const char *dir, const char *at, const char *what, const struct stat *st)
{
  snprintf (why, why_size,
            "The state directory '%s' is not safe to use: '%s' %s (owner uid %u, mode %04o), so another user could "
            "serve its sandboxes' commands; use a directory of your own that only you can write (mode 0700), "
            "in directories only you or root can write, with SANDSTEP_STATE_DIR",
            dir, at, what, (unsigned) st->st_uid, (unsigned) (st->st_mode & 07777));
  return 0;
}

int
sandstep_state_dir_default (char *out, size_t size)
{
  const char *state = getenv ("SANDSTEP_STATE_DIR");
  const char *xdg = getenv ("XDG_STATE_HOME");
  const char *home = getenv ("HOME");
  int n;

  if (state != NULL && state[0] != '\0')
    n = snprintf (out, size, "%s", state);
  else if (getuid () == 0)
    n = snprintf (out, size, "/var/lib/sandstep");
  else if (xdg != NULL && xdg[0] == '/')
    n = snprintf (out, size, "%s/sandstep", xdg);
  else if (home != NULL && home[0] == '/')
    n = snprintf (out, size, "%s/.local/state/sandstep", home);
  else
    return 0;
  return n > 0 && (size_t) n < size;
}

int
sandstep_state_dir_trusted (const char *dir, char *why, size_t why_size)
{
  char real[PATH_MAX];
  char *slash;
  uid_t me = geteuid ();
  int fd = -1;

  if (realpath (dir, real) == NULL)
    {
      snprintf (why, why_size, "Could not resolve the state directory '%s' (%s); set SANDSTEP_STATE_DIR to a "
                "directory of your own", dir, strerror (errno));
      return 0;
    }
  /* Each component by its fd from "/", never through a link: what is checked is what is used. */
  for (char *p = real;; p = slash + 1)
    {
      struct stat st;
      int next;
      int last;
      char saved = '\0';

      slash = strchr (p, '/');
      last = slash == NULL;
      if (!last)
        {
          saved = *slash;
          *slash = '\0';
        }
      next = fd < 0 ? open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC)
                    : openat (fd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (next < 0 || fstat (next, &st) < 0)
        {
          int errsv = errno;
          if (next >= 0)
            close (next);
          if (fd >= 0)
            close (fd);
          snprintf (why, why_size, "Could not open '%s' on the way to the state directory '%s' (%s); set "
                    "SANDSTEP_STATE_DIR to a directory of your own", real[0] ? real : "/", dir, strerror (errsv));
          return 0;
        }
      if (fd >= 0)
        close (fd);
      fd = next;
      {
        /* The path walked so far, for messages. */
        const char *at = real[0] != '\0' ? real : "/";
        int others_write = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
        const char *problem = NULL;

        if (last)
          /* The state directory itself: the caller's, and no one else's to write. */
          problem = st.st_uid != me ? "belongs to another user" : others_write ? "is writable by others" : NULL;
        else if (st.st_uid != 0 && st.st_uid != me)
          problem = "belongs to another user";
        else if (others_write && !(st.st_uid == 0 && (st.st_mode & S_ISVTX)))
          problem = "is writable by others";
        if (problem != NULL)
          {
            close (fd);
            return refuse (why, why_size, dir, at, problem, &st);
          }
      }
      if (last)
        break;
      *slash = saved;
      /* realpath() gives "/" alone for the root: nothing after its slash. */
      if (slash[1] == '\0')
        break;
    }
  close (fd);
  return 1;
}

int
sandstep_socket_peer_trusted (int sock)
{
  struct ucred cred;
  socklen_t len = sizeof cred;

  if (getsockopt (sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || len != sizeof cred)
    return 0;
  if (cred.uid != geteuid ())
    {
      errno = EPERM;
      return 0;
    }
  return 1;
}
