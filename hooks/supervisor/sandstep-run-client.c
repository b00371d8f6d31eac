/* sandstep-run-client.c: handing one command to a sandbox's supervisor. */
#include "sandstep-run-client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <termios.h>
#include <unistd.h>

#include "sandstep-trust-libc.h"

#define RELAY_CHUNK 65536

/* One stream the client carries between the caller and the command. */
typedef enum {
  RELAY_IN,          /* the caller's stdin -> a pipe the command reads */
  RELAY_OUT,         /* a pipe the command writes -> the caller's stdout or stderr */
  RELAY_CAPTURE,     /* a pipe the command writes -> on_output */
} RelayKind;

typedef struct {
  RelayKind kind;
  int from;          /* -1 once done */
  int to;
  int stream;        /* RELAY_CAPTURE: 1 or 2 */
  int stalled;       /* where it goes was full: wait for room, not for more to read */
} Relay;

typedef struct {
  const SandstepRunCall *call;
  Relay relays[3];
  int n_relays;
  int passed[3];     /* what the command gets as 0, 1, 2 */
  int close_passed[3];
  int ttys[3];
  struct termios modes[3];
  int n_ttys;
  int kept[3];       /* the caller's descriptors the command gets as they are */
  int kept_flags[3]; /* and their file status flags (O_NONBLOCK...), given back after the command */
  int n_kept;
} Streams;

int
sandstep_run_connect (int sandbox_dir_fd)
{
  struct sockaddr_un address = { .sun_family = AF_UNIX };
  int fd;

  /* Through the directory's fd, so a long state path still fits sun_path. */
  snprintf (address.sun_path, sizeof address.sun_path, "/proc/self/fd/%d/" SANDSTEP_RUN_SOCKET, sandbox_dir_fd);
  fd = socket (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect (fd, (struct sockaddr *) &address, sizeof address) < 0)
    {
      close (fd);
      fd = -1;
    }
  /* Nothing goes to a socket another user serves: it would take the command's stdio and answer for it. */
  if (fd >= 0 && !sandstep_socket_peer_trusted (fd))
    {
      close (fd);
      errno = EPERM;
      fd = SANDSTEP_RUN_CONNECT_NOT_OURS;
    }
  return fd;
}

/* A connected stream socket: what the command writes goes to its one peer, and no further. */
static int
connected_stream (int fd)
{
  struct sockaddr_storage peer;
  socklen_t peer_len = sizeof peer;
  int type = 0;
  socklen_t type_len = sizeof type;

  return getsockopt (fd, SOL_SOCKET, SO_TYPE, &type, &type_len) == 0 && type == SOCK_STREAM &&
         getpeername (fd, (struct sockaddr *) &peer, &peer_len) == 0;
}

/* Passed as it is as stream @i: nothing can be reopened through it with more rights, and nothing written
 * through it goes anywhere but where the caller's own writes go.  Else relayed through a pipe:
 *  - a pipe as stdout or stderr, which /proc/self/fd/1 reopens for reading where the jail's uid may (a
 *    non-root caller's): the command would read back, and take, what parallel host steps write to it;
 *  - a socket that is not a connected stream (a UDP socket sends wherever the command says, the host's
 *    loopback included, out of a network=none sandbox). */
static int
passes_as_is (int fd, const struct stat *st, int i)
{
  if (S_ISFIFO (st->st_mode))
    return i == 0;
  if (S_ISSOCK (st->st_mode))
    return connected_stream (fd);
  return S_ISCHR (st->st_mode) && (st->st_rdev == makedev (1, 3) || isatty (fd));
}

static void
add_relay (Streams *streams, RelayKind kind, int from, int to, int stream)
{
  streams->relays[streams->n_relays++] = (Relay) { .kind = kind, .from = from, .to = to, .stream = stream };
}

static int
set_up_streams (Streams *streams, const SandstepRunCall *call)
{
  struct stat out_st = { 0 };
  int out_relayed = 0;

  memset (streams, 0, sizeof *streams);
  streams->call = call;
  for (int i = 0; i < 3; i++)
    streams->passed[i] = -1;
  for (int i = 0; i < 3; i++)
    {
      int fd = call->stdio[i];
      int pipe_fds[2];
      struct stat st;

      if (i > 0 && call->on_output != NULL)
        {
          if (pipe2 (pipe_fds, O_CLOEXEC) < 0)
            return -1;
          add_relay (streams, RELAY_CAPTURE, pipe_fds[0], -1, i);
          streams->passed[i] = pipe_fds[1];
          streams->close_passed[i] = 1;
          continue;
        }
      if (fd < 0 || fcntl (fd, F_GETFD) < 0)
        {
          /* A closed standard stream reads as /dev/null. */
          streams->passed[i] = open ("/dev/null", (i == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
          streams->close_passed[i] = 1;
          if (streams->passed[i] < 0)
            return -1;
          continue;
        }
      if (fstat (fd, &st) < 0)
        return -1;
      if (passes_as_is (fd, &st, i))
        {
          int flags = fcntl (fd, F_GETFL);
          streams->passed[i] = fd;
          if (flags >= 0)
            {
              streams->kept[streams->n_kept] = fd;
              streams->kept_flags[streams->n_kept++] = flags;
            }
          if (isatty (fd) && tcgetattr (fd, &streams->modes[streams->n_ttys]) == 0)
            streams->ttys[streams->n_ttys++] = fd;
          continue;
        }
      if (i == 2 && out_relayed && st.st_dev == out_st.st_dev && st.st_ino == out_st.st_ino)
        {
          /* stderr where stdout goes (2>&1): one relay for both, so their lines keep their order. */
          streams->passed[2] = streams->passed[1];
          continue;
        }
      if (pipe2 (pipe_fds, O_CLOEXEC) < 0)
        return -1;
      if (i == 0)
        {
          fcntl (pipe_fds[1], F_SETFL, O_NONBLOCK);
          add_relay (streams, RELAY_IN, fd, pipe_fds[1], 0);
          streams->passed[i] = pipe_fds[0];
        }
      else
        {
          add_relay (streams, RELAY_OUT, pipe_fds[0], fd, i);
          streams->passed[i] = pipe_fds[1];
          if (i == 1)
            {
              out_st = st;
              out_relayed = 1;
            }
        }
      streams->close_passed[i] = 1;
    }
  return 0;
}

static void
close_passed (Streams *streams)
{
  for (int i = 0; i < 3; i++)
    if (streams->close_passed[i] && streams->passed[i] >= 0)
      {
        close (streams->passed[i]);
        streams->passed[i] = -1;
      }
}

/* Closes the client's pipe end; the caller's own fd stays open. */
static void
close_relay (Relay *relay)
{
  int own = relay->kind == RELAY_IN ? relay->to : relay->from;

  if (own >= 0)
    close (own);
  relay->from = relay->to = -1;
}

static int
write_all (Relay *relay, const char *buf, ssize_t n)
{
  ssize_t done = 0;

  while (done < n)
    {
      ssize_t w = write (relay->to, buf + done, n - done);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0 && errno == EAGAIN)
        {
          struct pollfd pfd = { .fd = relay->to, .events = POLLOUT };
          if (poll (&pfd, 1, -1) > 0 && !(pfd.revents & (POLLERR | POLLHUP)))
            continue;
        }
      if (w <= 0)
        return 0;
      done += w;
    }
  return 1;
}

/* Moves what is there; 0 once the relay is done. */
static int
pump (Streams *streams, Relay *relay)
{
  char buf[RELAY_CHUNK];
  ssize_t n;

  if (relay->from < 0)
    return 0;
  relay->stalled = 0;
  if (relay->kind != RELAY_CAPTURE)
    {
      n = splice (relay->from, NULL, relay->to, NULL, RELAY_CHUNK, SPLICE_F_NONBLOCK);
      if (n > 0 || (n < 0 && errno == EINTR))
        return 1;
      if (n < 0 && errno == EAGAIN)
        {
          /* Something to move (poll said so), and no room where it goes: wait for room. */
          relay->stalled = 1;
          return 1;
        }
      if (n == 0 || (errno != EINVAL && errno != ESPIPE))
        {
          close_relay (relay);
          return 0;
        }
      /* Not splicable: a directory reads as nothing, an O_APPEND file takes plain writes. */
    }
  n = read (relay->from, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return 1;
  if (n <= 0)
    {
      close_relay (relay);
      return 0;
    }
  if (relay->kind == RELAY_CAPTURE)
    streams->call->on_output (relay->stream, buf, n, streams->call->user_data);
  else if (!write_all (relay, buf, n))
    {
      close_relay (relay);
      return 0;
    }
  return 1;
}

/* What @relay's pipe holds now, passed on; a writer that stays is not waited for (where it goes, a second at most
 * for room). */
static void
drain_present (Streams *streams, Relay *relay)
{
  while (relay->from >= 0 && poll (&(struct pollfd) { .fd = relay->from, .events = POLLIN }, 1, 0) == 1)
    {
      if (!pump (streams, relay))
        break;
      if (relay->stalled && poll (&(struct pollfd) { .fd = relay->to, .events = POLLOUT }, 1, 1000) != 1)
        break;
    }
}

static volatile sig_atomic_t stop_signal;

static void
on_stop_signal (int sig)
{
  stop_signal = sig;
}

/* What a command may change in the caller's stdio and outlive it, given back on every path: file status
 * flags (O_NONBLOCK left on make's stdout fails the next recipe's writes with EAGAIN), a terminal's modes
 * and its flow (tcflow (TCOOFF) froze the user's terminal). */
static void
restore_stdio (Streams *streams)
{
  for (int i = 0; i < streams->n_kept; i++)
    fcntl (streams->kept[i], F_SETFL, streams->kept_flags[i]);
  for (int i = 0; i < streams->n_ttys; i++)
    {
      tcsetattr (streams->ttys[i], TCSANOW, &streams->modes[i]);
      tcflow (streams->ttys[i], TCOON);
    }
}

static int
send_request (int sock, const SandstepRunCall *call, const Streams *streams, int start_mark)
{
  char *buf = malloc (SANDSTEP_RUN_MAX);
  int sent;
  union { char buf[CMSG_SPACE (5 * sizeof (int))]; struct cmsghdr align; } control;
  struct iovec iov = { 0 };
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf };
  struct cmsghdr *cmsg;
  int fds[5];
  int n_fds = 3;
  size_t len = 0;

  if (buf == NULL)
    return 0;
  iov.iov_base = buf;
  for (int i = 0; i < SANDSTEP_RUN_FIELDS; i++)
    {
      const char *value = i == SANDSTEP_RUN_FIELD_MAGIC     ? SANDSTEP_RUN_MAGIC
                          : i == SANDSTEP_RUN_FIELD_CLAIMED ? (call->claim_fd >= 0 ? "1" : "")
                          : i == SANDSTEP_RUN_FIELD_BESIDE  ? (call->beside ? "1" : "")
                          : call->field[i] != NULL          ? call->field[i]
                                                            : "";
      size_t n = strlen (value) + 1;
      if (len + n > SANDSTEP_RUN_MAX)
        {
          free (buf);
          return 0;
        }
      memcpy (buf + len, value, n);
      len += n;
    }
  for (char *const *e = call->env; e != NULL && *e != NULL; e++)
    {
      size_t n = strlen (*e) + 1;
      if (len + n > SANDSTEP_RUN_MAX)
        {
          free (buf);
          return 0;
        }
      memcpy (buf + len, *e, n);
      len += n;
    }
  memcpy (fds, streams->passed, sizeof streams->passed);
  fds[n_fds++] = start_mark;
  if (call->claim_fd >= 0)
    fds[n_fds++] = call->claim_fd;
  iov.iov_len = len;
  msg.msg_controllen = CMSG_SPACE (n_fds * sizeof (int));
  cmsg = CMSG_FIRSTHDR (&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN (n_fds * sizeof (int));
  memcpy (CMSG_DATA (cmsg), fds, n_fds * sizeof (int));
  sent = sendmsg (sock, &msg, MSG_NOSIGNAL) == (ssize_t) len;
  free (buf);
  return sent;
}

/* Has the supervisor marked the command started?  Read only once the
 * socket says the call is over: the mark itself wakes nobody. */
static int
marked_started (int start_mark)
{
  char byte;

  return read (start_mark, &byte, 1) == 1;
}

/* One reply; 0 when the call is over. */
static int
on_reply (int sock, const SandstepRunCall *call, int start_mark, SandstepRunCallResult *result)
{
  char buf[sizeof (SandstepRunReply) + 4096];
  SandstepRunReply reply;
  ssize_t got;

  do
    got = recv (sock, buf, sizeof buf - 1, 0);
  while (got < 0 && errno == EINTR);
  if (got < (ssize_t) sizeof reply)
    {
      /* The supervisor went away. */
      result->outcome = marked_started (start_mark) ? SANDSTEP_RUN_CALL_LOST : SANDSTEP_RUN_CALL_RETRY;
      return 0;
    }
  memcpy (&reply, buf, sizeof reply);
  buf[got] = '\0';
  switch (reply.kind)
    {
    case SANDSTEP_RUN_NOTICE:
      if (call->on_notice != NULL)
        call->on_notice (buf + sizeof reply, call->user_data);
      return 1;
    case SANDSTEP_RUN_DONE:
      result->outcome = SANDSTEP_RUN_CALL_DONE;
      result->reply = reply;
      return 0;
    case SANDSTEP_RUN_ERROR:
    case SANDSTEP_RUN_BUSY:
      {
        size_t n = strnlen (buf + sizeof reply, sizeof result->text - 1);
        result->outcome = reply.kind == SANDSTEP_RUN_BUSY ? SANDSTEP_RUN_CALL_BUSY : SANDSTEP_RUN_CALL_ERROR;
        memcpy (result->text, buf + sizeof reply, n);
        result->text[n] = '\0';
      }
      return 0;
    case SANDSTEP_RUN_RETRY:
      result->outcome = SANDSTEP_RUN_CALL_RETRY;
      return 0;
    default:
      result->outcome = marked_started (start_mark) ? SANDSTEP_RUN_CALL_LOST : SANDSTEP_RUN_CALL_FALLBACK;
      return 0;
    }
}

void
sandstep_run_call (int sock, const SandstepRunCall *call, SandstepRunCallResult *result)
{
  static const int stop_signals[3] = { SIGINT, SIGTERM, SIGHUP };
  struct sigaction stop = { .sa_handler = on_stop_signal }, old[3];
  struct sigaction ignore = { .sa_handler = SIG_IGN }, old_pipe;
  Streams streams;
  int start_mark[2];

  memset (result, 0, sizeof *result);
  result->outcome = SANDSTEP_RUN_CALL_FALLBACK;
  if (pipe2 (start_mark, O_CLOEXEC | O_NONBLOCK) < 0)
    return;
  if (set_up_streams (&streams, call) < 0 || !send_request (sock, call, &streams, start_mark[1]))
    {
      close (start_mark[0]);
      close (start_mark[1]);
      close_passed (&streams);
      for (int i = 0; i < streams.n_relays; i++)
        close_relay (&streams.relays[i]);
      return;
    }
  close (start_mark[1]);
  close_passed (&streams);
  /* A caller's pipe whose reader left ends its relay (EPIPE), and the command sees its own pipe close, as it
   * would have seen the caller's; this process goes on to give the caller's stdio back. */
  sigaction (SIGPIPE, &ignore, &old_pipe);
  /* The caller's stdio comes back as it was even when this process is told to stop. */
  if (streams.n_kept > 0)
    for (int i = 0; i < 3; i++)
      sigaction (stop_signals[i], &stop, &old[i]);

  for (;;)
    {
      struct pollfd fds[5] = { { .fd = sock, .events = POLLIN } };
      int n = 1;

      for (int i = 0; i < streams.n_relays; i++)
        {
          const Relay *relay = &streams.relays[i];
          /* Each moves when there is something to read (never a blocking read: stdin may be a socket
           * that stays silent), and, once where it goes was full, when there is room again. */
          fds[n++] = relay->stalled ? (struct pollfd) { .fd = relay->to, .events = POLLOUT }
                                    : (struct pollfd) { .fd = relay->from, .events = POLLIN };
        }
      fds[n] = (struct pollfd) { .fd = call->cancel_fd, .events = POLLIN };
      if (poll (fds, n + 1, -1) < 0)
        {
          if (errno == EINTR && stop_signal == 0)
            continue;
          /* Told to stop, or poll failed: the supervisor may yet mark the command started, so it may have run. */
          result->outcome = SANDSTEP_RUN_CALL_LOST;
          break;
        }
      if (call->cancel_fd >= 0 && (fds[n].revents & POLLIN))
        {
          /* The supervisor sees the connection go, and kills the command with everything it started. */
          result->outcome = SANDSTEP_RUN_CALL_CANCELLED;
          break;
        }
      for (int i = 0; i < streams.n_relays; i++)
        if (fds[1 + i].fd >= 0 && (fds[1 + i].revents & POLLERR) && streams.relays[i].kind == RELAY_IN &&
            streams.relays[i].stalled)
          close_relay (&streams.relays[i]);   /* the command closed its stdin */
        else if (fds[1 + i].fd >= 0 && fds[1 + i].revents)
          pump (&streams, &streams.relays[i]);
      if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) && !on_reply (sock, call, start_mark[0], result))
        break;
    }

  /* What the command wrote before it ended: every writer is gone now, but a process that left its group while
   * commands ran beside it (OTHERS_RUN), which may hold the pipe for ever: then what is in it, and no more. */
  for (int i = 0; i < streams.n_relays; i++)
    {
      Relay *relay = &streams.relays[i];
      if (relay->kind != RELAY_IN && result->outcome == SANDSTEP_RUN_CALL_DONE && relay->from >= 0)
        {
          if (result->reply.flags & SANDSTEP_RUN_OTHERS_RUN)
            drain_present (&streams, relay);
          else
            {
              fcntl (relay->from, F_SETFL, 0);
              while (pump (&streams, relay))
                ;
            }
        }
      close_relay (relay);
    }
  close (start_mark[0]);
  restore_stdio (&streams);
  sigaction (SIGPIPE, &old_pipe, NULL);
  if (streams.n_kept > 0)
    for (int i = 0; i < 3; i++)
      sigaction (stop_signals[i], &old[i], NULL);
  if (stop_signal != 0)
    raise (stop_signal);
}
