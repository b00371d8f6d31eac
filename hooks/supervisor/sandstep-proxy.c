/* sandstep-proxy.c: the CONNECT-only egress proxy of a network=allow sandbox. */
#include "sandstep-proxy.h"

#include <errno.h>
#include <gio/gio.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-test-hooks.h"
#include "sandstep-relay.h"

#define HEAD_MAX 8192
#define CONNECT_TIMEOUT_S 15
#define MAX_CONNECTIONS 64

typedef struct {
  const char *sandbox;
  const char *log_path;
  SandstepEgress *egress;
  int notices;             /* a line per refusal, for the step that made the connection */
  GMutex log_lock;
} SandstepProxy;

/* SANDSTEP_TEST_RESOLVE="name=address,..." replaces DNS for tests, in the
 * build tree only (sandstep-test-hooks.h). */
static GList *
resolve (const char *host, GError **error)
{
  const char *table = sandstep_test_hook ("SANDSTEP_TEST_RESOLVE");

  if (table != NULL)
    {
      g_auto(GStrv) entries = g_strsplit (table, ",", -1);
      GList *found = NULL;
      for (char **e = entries; *e; e++)
        {
          char *eq = strchr (*e, '=');
          GInetAddress *address;
          if (eq == NULL || strncmp (*e, host, eq - *e) != 0 || host[eq - *e] != '\0')
            continue;
          address = g_inet_address_new_from_string (eq + 1);
          if (address != NULL)
            found = g_list_append (found, address);
        }
      if (found == NULL)
        g_set_error (error, G_RESOLVER_ERROR, G_RESOLVER_ERROR_NOT_FOUND, "no test address for '%s'", host);
      return found;
    }
  return g_resolver_lookup_by_name (g_resolver_get_default (), host, NULL, error);
}

/* What a sandbox sends must never start a new log line or reach a terminal raw. */
static char *
escape_text (const char *text)
{
  return sandstep_escape (text, -1, 0, SANDSTEP_ESCAPE_VALUE);
}

static void
refuse (SandstepProxy *proxy, GOutputStream *out, int status, const char *raw_target, const char *raw_reason)
{
  g_autofree char *target = escape_text (raw_target);
  g_autofree char *reason = escape_text (raw_reason);
  g_autofree char *body = g_strdup_printf ("sandstep: %s\n", reason);
  g_autofree char *response = g_strdup_printf ("HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                                               "Connection: close\r\n\r\n%s",
                                               status, status == 403 ? "Forbidden" : "Bad Gateway", strlen (body),
                                               body);
  g_autoptr(GDateTime) now = g_date_time_new_now_utc ();
  g_autofree char *when = g_date_time_format_iso8601 (now);
  gboolean noticed = FALSE;
  FILE *log;

  /* Said before the client hears it: the step's line must not come after the command has ended. */
  g_mutex_lock (&proxy->log_lock);
  log = proxy->log_path != NULL ? fopen (proxy->log_path, "ae") : NULL;
  if (log != NULL)
    {
      fprintf (log, "%s sandbox=%s target=%s refused: %s\n", when, proxy->sandbox, target, reason);
      fclose (log);
    }
  if (proxy->notices >= 0)
    {
      g_autofree char *line = g_strdup_printf (SANDSTEP_EGRESS_NOTICE_PREFIX "%s: %s\n", target, reason);
      /* A supervisor that does not keep up loses the line, never stalls the proxy. */
      if (write (proxy->notices, line, strlen (line)) < 0)
        g_debug ("egress notice dropped: %s", g_strerror (errno));
      else
        noticed = TRUE;
    }
  g_mutex_unlock (&proxy->log_lock);
  if (noticed)
    {
      /* The client hears once the supervisor has taken the line, so that it reaches the step before whatever
       * the client does on hearing (a session's reply comes back another way); for 0.1 s at most.  Outside the
       * lock: the queue counts every line, this one among them, and other refusals need not wait on it. */
      gint64 deadline = g_get_monotonic_time () + G_USEC_PER_SEC / 10;
      int queued = 0;
      while (ioctl (proxy->notices, FIONREAD, &queued) == 0 && queued > 0 && g_get_monotonic_time () < deadline)
        g_usleep (100);
    }
  g_output_stream_write_all (out, response, strlen (response), NULL, NULL, NULL);
}

static gboolean
parse_target (const char *target, char **out_host, guint16 *out_port)
{
  const char *colon;
  char *end = NULL;
  guint64 port;

  if (target[0] == '[')
    {
      const char *close = strchr (target, ']');
      if (close == NULL || close[1] != ':')
        return FALSE;
      *out_host = g_strndup (target, close - target + 1);
      colon = close + 1;
    }
  else
    {
      colon = strrchr (target, ':');
      if (colon == NULL || colon == target)
        return FALSE;
      *out_host = g_strndup (target, colon - target);
    }
  port = g_ascii_strtoull (colon + 1, &end, 10);
  if (*end != '\0' || port == 0 || port > 65535)
    {
      g_clear_pointer (out_host, g_free);
      return FALSE;
    }
  *out_port = (guint16) port;
  return TRUE;
}

static gboolean
handle_one (SandstepProxy *proxy, GSocketConnection *connection)
{
  GInputStream *in = g_io_stream_get_input_stream (G_IO_STREAM (connection));
  GOutputStream *out = g_io_stream_get_output_stream (G_IO_STREAM (connection));
  char head[HEAD_MAX + 1];
  gsize len = 0;
  char *end_of_head = NULL;
  g_auto(GStrv) request = NULL;
  g_autofree char *host = NULL;
  g_autofree char *reason = NULL;
  g_autolist(GInetAddress) dial = NULL;
  g_autoptr(GSocketClient) client = NULL;
  g_autoptr(GSocketConnection) upstream = NULL;
  guint16 port = 0;
  guint16 dial_port;
  const char *test_port = sandstep_test_hook ("SANDSTEP_TEST_HTTPS_PORT");

  while (end_of_head == NULL && len < HEAD_MAX)
    {
      gssize n = g_input_stream_read (in, head + len, HEAD_MAX - len, NULL, NULL);
      if (n <= 0)
        return TRUE;
      len += n;
      head[len] = '\0';
      end_of_head = strstr (head, "\r\n\r\n");
    }
  if (end_of_head == NULL)
    {
      refuse (proxy, out, 403, "(unreadable request)", "the request head is too long or malformed");
      return TRUE;
    }
  *strstr (head, "\r\n") = '\0';
  request = g_strsplit (head, " ", 3);
  if (g_strv_length (request) != 3 || !g_str_has_prefix (request[2], "HTTP/"))
    {
      refuse (proxy, out, 403, "(malformed request)", "the proxy speaks HTTP CONNECT only");
      return TRUE;
    }
  if (strcmp (request[0], "CONNECT") != 0)
    {
      g_autofree char *why = g_strdup_printf ("plain HTTP (%s %s) is not allowed; only HTTPS to allowed hosts",
                                              request[0], request[1]);
      refuse (proxy, out, 403, request[1], why);
      return TRUE;
    }
  if (strspn (request[1], "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-:[]") != strlen (request[1]) ||
      !parse_target (request[1], &host, &port))
    {
      refuse (proxy, out, 403, request[1], "the CONNECT target is not HOST:PORT");
      return TRUE;
    }

  dial = sandstep_egress_decide (proxy->egress, host, port, resolve, &reason);
  if (dial == NULL)
    {
      refuse (proxy, out, 403, request[1], reason);
      return TRUE;
    }

  /* Tests stand in for port 443 with an unprivileged port; never set in production. */
  dial_port = port == 443 && test_port != NULL ? (guint16) g_ascii_strtoull (test_port, NULL, 10) : port;
  client = g_socket_client_new ();
  g_socket_client_set_timeout (client, CONNECT_TIMEOUT_S);
  for (GList *l = dial; l != NULL && upstream == NULL; l = l->next)
    {
      g_autoptr(GSocketAddress) address = g_inet_socket_address_new (l->data, dial_port);
      g_autoptr(GError) error = NULL;
      upstream = g_socket_client_connect (client, G_SOCKET_CONNECTABLE (address), NULL, &error);
      if (upstream == NULL && l->next == NULL)
        {
          g_autofree char *why = g_strdup_printf ("could not connect to %s: %s", request[1], error->message);
          refuse (proxy, out, 502, request[1], why);
          return TRUE;
        }
    }
  {
    static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    const char *after = end_of_head + 4;
    if (!g_output_stream_write_all (out, established, sizeof established - 1, NULL, NULL, NULL))
      return TRUE;
    sandstep_relay (g_socket_get_fd (g_socket_connection_get_socket (connection)),
                    g_socket_get_fd (g_socket_connection_get_socket (upstream)), after, head + len - after);
  }
  return TRUE;
}

static void
handle_fd (gpointer data, gpointer user_data)
{
  SandstepProxy *proxy = user_data;
  int fd = GPOINTER_TO_INT (data);
  g_autoptr(GSocket) socket = g_socket_new_from_fd (fd, NULL);
  g_autoptr(GSocketConnection) connection = NULL;

  if (socket == NULL)
    {
      close (fd);
      return;
    }
  connection = g_socket_connection_factory_create_connection (socket);
  handle_one (proxy, connection);
}

/* One connection made in the sandbox, as init hands it over; -1 when init is gone. */
static int
receive_connection (int from)
{
  union { char buf[CMSG_SPACE (sizeof (int))]; struct cmsghdr align; } control;
  char byte;
  struct iovec iov = { &byte, 1 };
  struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                        .msg_controllen = sizeof control.buf };
  struct cmsghdr *cmsg;
  ssize_t n;
  int fd = -1;

  do
    n = recvmsg (from, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n <= 0)
    return -1;
  cmsg = CMSG_FIRSTHDR (&msg);
  if (cmsg != NULL && cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS &&
      cmsg->cmsg_len == CMSG_LEN (sizeof (int)))
    memcpy (&fd, CMSG_DATA (cmsg), sizeof fd);
  return fd >= 0 ? fd : -2;
}

gboolean
sandstep_proxy_serve (int connections, SandstepEgress *egress, const char *sandbox, const char *log_path,
                      int notices, GError **error)
{
  SandstepProxy proxy = { .sandbox = sandbox, .log_path = log_path, .egress = egress, .notices = notices };
  GThreadPool *pool;
  int fd;

  g_mutex_init (&proxy.log_lock);
  pool = g_thread_pool_new (handle_fd, &proxy, MAX_CONNECTIONS, FALSE, error);
  if (pool == NULL)
    return FALSE;
  while ((fd = receive_connection (connections)) != -1)
    if (fd >= 0)
      g_thread_pool_push (pool, GINT_TO_POINTER (fd), NULL);
  /* The sandbox is gone: so are its connections. */
  g_thread_pool_free (pool, TRUE, FALSE);
  g_mutex_clear (&proxy.log_lock);
  return TRUE;
}
