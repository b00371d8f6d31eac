/* sandstepd-channel.c: one JSON object and a few fds per packet. */
#include "sandstepd-channel.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-json.h"

/* A packet's payload; longer messages go through a memfd. */
#define MAX_INLINE (48 * 1024)
/* Nothing the daemon and a worker say to each other is longer (directory listings are the longest). */
#define MAX_MESSAGE (256 * 1024 * 1024)
#define MEMFD_MARK "@memfd"

static gboolean
send_packet (int sock, const char *data, gsize len, const int *fds, guint n_fds, int timeout_ms, GError **error)
{
  struct iovec iov = { .iov_base = (void *) data, .iov_len = len };
  union {
    char buf[CMSG_SPACE (sizeof (int) * SANDSTEPD_CHANNEL_MAX_FDS)];
    struct cmsghdr align;
  } control;
  struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

  g_return_val_if_fail (n_fds <= SANDSTEPD_CHANNEL_MAX_FDS, FALSE);
  if (n_fds > 0)
    {
      struct cmsghdr *cmsg;
      memset (&control, 0, sizeof control);
      mh.msg_control = control.buf;
      mh.msg_controllen = CMSG_SPACE (sizeof (int) * n_fds);
      cmsg = CMSG_FIRSTHDR (&mh);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN (sizeof (int) * n_fds);
      memcpy (CMSG_DATA (cmsg), fds, sizeof (int) * n_fds);
    }
  for (;;)
    {
      ssize_t n = sendmsg (sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
      struct pollfd pfd = { .fd = sock, .events = POLLOUT };
      int r;

      if (n >= 0)
        return TRUE;
      if (errno == EINTR)
        continue;
      if (errno != EAGAIN)
        {
          int errsv = errno;
          g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv), "Cannot send to the worker: %s",
                       g_strerror (errsv));
          return FALSE;
        }
      do
        r = poll (&pfd, 1, timeout_ms);
      while (r < 0 && errno == EINTR);
      if (r == 0)
        {
          g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT, "The worker stopped reading");
          return FALSE;
        }
    }
}

gboolean
sandstepd_channel_send (int sock, JsonNode *message, const int *fds, guint n_fds, int timeout_ms, GError **error)
{
  g_autofree char *text = json_to_string (message, FALSE);
  gsize len = strlen (text);
  int all[SANDSTEPD_CHANNEL_MAX_FDS + 1];
  int memfd;
  gboolean ok;

  if (len <= MAX_INLINE)
    return send_packet (sock, text, len, fds, n_fds, timeout_ms, error);
  if (len > MAX_MESSAGE || n_fds >= SANDSTEPD_CHANNEL_MAX_FDS)
    {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE, "The message is too large");
      return FALSE;
    }
  memfd = memfd_create ("sandstepd-message", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (memfd < 0)
    {
      int errsv = errno;
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv), "Cannot create a memfd: %s",
                   g_strerror (errsv));
      return FALSE;
    }
  for (gsize done = 0; done < len;)
    {
      ssize_t n = write (memfd, text + done, len - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        {
          int errsv = errno;
          close (memfd);
          g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv), "Cannot fill a memfd: %s",
                       g_strerror (errsv));
          return FALSE;
        }
      done += n;
    }
  fcntl (memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  all[0] = memfd;
  if (n_fds > 0)
    memcpy (all + 1, fds, sizeof (int) * n_fds);
  ok = send_packet (sock, MEMFD_MARK, strlen (MEMFD_MARK), all, n_fds + 1, timeout_ms, error);
  close (memfd);
  return ok;
}

gboolean
sandstepd_channel_send_object (int sock, JsonObject *object, const int *fds, guint n_fds, int timeout_ms,
                            GError **error)
{
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);

  json_node_set_object (node, object);
  return sandstepd_channel_send (sock, node, fds, n_fds, timeout_ms, error);
}

static void
close_all (int *fds, guint n)
{
  for (guint i = 0; i < n; i++)
    if (fds[i] >= 0)
      close (fds[i]);
}

static char *
read_memfd (int fd, gsize *out_len)
{
  struct stat st;
  char *text;
  gsize done = 0;

  if (fstat (fd, &st) < 0 || st.st_size <= 0 || st.st_size > MAX_MESSAGE)
    return NULL;
  text = g_malloc (st.st_size + 1);
  while (done < (gsize) st.st_size)
    {
      ssize_t n = pread (fd, text + done, st.st_size - done, done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        {
          g_free (text);
          return NULL;
        }
      done += n;
    }
  text[done] = '\0';
  *out_len = done;
  return text;
}

gboolean
sandstepd_channel_recv (int sock, JsonObject **out_message, int *out_fds, guint *out_n_fds, GError **error)
{
  g_autofree char *buf = g_malloc (MAX_INLINE + 1);
  g_autofree char *big = NULL;
  struct iovec iov = { .iov_base = buf, .iov_len = MAX_INLINE + 1 };
  union {
    char buf[CMSG_SPACE (sizeof (int) * (SANDSTEPD_CHANNEL_MAX_FDS + 1))];
    struct cmsghdr align;
  } control;
  struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                       .msg_controllen = sizeof control.buf };
  int fds[SANDSTEPD_CHANNEL_MAX_FDS + 1];
  guint n_fds = 0;
  const char *text;
  gsize len;
  ssize_t n;
  g_autoptr(JsonNode) root = NULL;

  *out_message = NULL;
  *out_n_fds = 0;
  do
    n = recvmsg (sock, &mh, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    {
      int errsv = errno;
      if (errsv == ECONNRESET)
        return FALSE;
      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv), "Cannot receive: %s", g_strerror (errsv));
      return FALSE;
    }
  for (struct cmsghdr *c = CMSG_FIRSTHDR (&mh); c != NULL; c = CMSG_NXTHDR (&mh, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
      {
        guint count = (c->cmsg_len - CMSG_LEN (0)) / sizeof (int);
        int *data = (int *) CMSG_DATA (c);
        for (guint i = 0; i < count; i++)
          {
            if (n_fds < G_N_ELEMENTS (fds))
              fds[n_fds++] = data[i];
            else
              close (data[i]);
          }
      }
  if (n == 0)
    {
      close_all (fds, n_fds);
      return FALSE;
    }
  if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0)
    {
      close_all (fds, n_fds);
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "A message was cut short");
      return FALSE;
    }
  text = buf;
  len = n;
  if (len == strlen (MEMFD_MARK) && memcmp (buf, MEMFD_MARK, len) == 0)
    {
      if (n_fds == 0 || (big = read_memfd (fds[0], &len)) == NULL)
        {
          close_all (fds, n_fds);
          g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "A long message could not be read");
          return FALSE;
        }
      close (fds[0]);
      memmove (fds, fds + 1, sizeof (int) * (n_fds - 1));
      n_fds--;
      text = big;
    }
  root = sandstep_json_parse (text, len, MAX_MESSAGE, NULL);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root) || n_fds > SANDSTEPD_CHANNEL_MAX_FDS)
    {
      close_all (fds, n_fds);
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "A message is not a JSON object");
      return FALSE;
    }
  *out_message = json_object_ref (json_node_get_object (root));
  memcpy (out_fds, fds, sizeof (int) * n_fds);
  *out_n_fds = n_fds;
  return TRUE;
}
