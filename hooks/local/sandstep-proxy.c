/* sandstep-proxy.c: CONNECT-only egress proxy on a unix socket. */
#include "sandstep-proxy.h"

#include <errno.h>
#include <gio/gio.h>
#include <gio/gunixsocketaddress.h>
#include <sys/socket.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-relay.h"

#define HEAD_MAX 8192
#define CONNECT_TIMEOUT_S 15
#define MAX_CONNECTIONS 64

struct _SandstepProxy {
  char *socket_path;
  char *sandbox;
  char *log_path;
  SandstepEgress *egress;
  SandstepRefusalFunc on_refusal;
  gpointer user_data;
  GMutex log_lock;
  GMainContext *context;
  GMainLoop *loop;
  GSocketService *service;
  GThread *thread;
  gint active;             /* connections being handled */
};

/* SANDSTEP_TEST_RESOLVE="name=address,..." replaces DNS for tests; it comes
 * from the helper's own environment, which nothing in a sandbox can set. */
static GList *
resolve (const char *host, GError **error)
{
  const char *table = g_getenv ("SANDSTEP_TEST_RESOLVE");

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

/* @text with every byte outside printable ASCII written as \xNN: what a
 * sandbox sends must never start a new log line or reach a terminal raw. */
static char *
escape_text (const char *text)
{
  GString *out = g_string_new (NULL);

  for (const guchar *p = (const guchar *) text; *p; p++)
    if (*p >= 0x20 && *p < 0x7f && *p != '\\')
      g_string_append_c (out, *p);
    else
      g_string_append_printf (out, "\\x%02x", *p);
  return g_string_free (out, FALSE);
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
  FILE *log;

  g_output_stream_write_all (out, response, strlen (response), NULL, NULL, NULL);
  g_mutex_lock (&proxy->log_lock);
  log = proxy->log_path != NULL ? fopen (proxy->log_path, "ae") : NULL;
  if (log != NULL)
    {
      fprintf (log, "%s sandbox=%s target=%s refused: %s\n", when, proxy->sandbox, target, reason);
      fclose (log);
    }
  g_mutex_unlock (&proxy->log_lock);
  if (proxy->on_refusal != NULL)
    proxy->on_refusal (target, reason, proxy->user_data);
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

static gboolean handle_one (SandstepProxy *proxy, GSocketConnection *connection);

static gboolean
handle_connection (GThreadedSocketService *service, GSocketConnection *connection, GObject *source, gpointer data)
{
  SandstepProxy *proxy = data;
  gboolean handled;

  g_atomic_int_inc (&proxy->active);
  handled = handle_one (proxy, connection);
  g_atomic_int_dec_and_test (&proxy->active);
  return handled;
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
  const char *test_port = g_getenv ("SANDSTEP_TEST_HTTPS_PORT");

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

static gpointer
serve (gpointer data)
{
  SandstepProxy *proxy = data;

  g_main_context_push_thread_default (proxy->context);
  g_main_loop_run (proxy->loop);
  g_main_context_pop_thread_default (proxy->context);
  return NULL;
}

SandstepProxy *
sandstep_proxy_start (const char *socket_path, SandstepEgress *egress, const char *sandbox, const char *log_path,
                      SandstepRefusalFunc on_refusal, gpointer user_data, GError **error)
{
  SandstepProxy *proxy = g_new0 (SandstepProxy, 1);
  g_autoptr(GSocketAddress) address = NULL;

  proxy->socket_path = g_strdup (socket_path);
  proxy->sandbox = g_strdup (sandbox);
  proxy->log_path = g_strdup (log_path);
  proxy->egress = egress;
  proxy->on_refusal = on_refusal;
  proxy->user_data = user_data;
  g_mutex_init (&proxy->log_lock);
  proxy->context = g_main_context_new ();
  proxy->loop = g_main_loop_new (proxy->context, FALSE);

  unlink (socket_path);
  g_main_context_push_thread_default (proxy->context);
  proxy->service = g_threaded_socket_service_new (MAX_CONNECTIONS);
  address = g_unix_socket_address_new (socket_path);
  if (!g_socket_listener_add_address (G_SOCKET_LISTENER (proxy->service), address, G_SOCKET_TYPE_STREAM,
                                      G_SOCKET_PROTOCOL_DEFAULT, NULL, NULL, error))
    {
      g_main_context_pop_thread_default (proxy->context);
      g_prefix_error (error, "Could not start the egress proxy on '%s': ", socket_path);
      sandstep_proxy_stop (proxy);
      return NULL;
    }
  g_signal_connect (proxy->service, "run", G_CALLBACK (handle_connection), proxy);
  g_socket_service_start (proxy->service);
  g_main_context_pop_thread_default (proxy->context);
  proxy->thread = g_thread_new ("sandstep-proxy", serve, proxy);
  return proxy;
}

static gboolean
quit_loop (gpointer data)
{
  g_main_loop_quit (data);
  return G_SOURCE_REMOVE;
}

void
sandstep_proxy_stop (SandstepProxy *proxy)
{
  if (proxy == NULL)
    return;
  if (proxy->service != NULL)
    {
      g_socket_service_stop (proxy->service);
      g_socket_listener_close (G_SOCKET_LISTENER (proxy->service));
    }
  if (proxy->thread != NULL)
    {
      g_main_context_invoke (proxy->context, quit_loop, proxy->loop);
      g_thread_join (proxy->thread);
    }
  /* Connections end with the jail that made them; wait briefly for their
   * threads, and if one still runs, leave the proxy to it rather than free it. */
  for (int i = 0; i < 200 && g_atomic_int_get (&proxy->active) > 0; i++)
    g_usleep (10 * 1000);
  unlink (proxy->socket_path);
  if (g_atomic_int_get (&proxy->active) > 0)
    {
      g_debug ("egress proxy of %s: connections still open at stop, left running", proxy->sandbox);
      return;
    }
  g_clear_object (&proxy->service);
  g_main_loop_unref (proxy->loop);
  g_main_context_unref (proxy->context);
  sandstep_egress_free (proxy->egress);
  g_free (proxy->socket_path);
  g_free (proxy->sandbox);
  g_free (proxy->log_path);
  g_free (proxy);
}
