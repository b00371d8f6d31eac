/* sandstepd.c: the backend interface over HTTP, so steps on other machines share sandboxes.
 *
 *   sandstepd [--listen=ADDR:PORT] [--token-file=FILE] [--tls-cert=FILE --tls-key=FILE]
 *             [--state-dir=DIR] [--max-upload=SIZE] [--max-claims=N]
 *
 * The API is hooks/sandstep-wire.h's; how the daemon serves it,
 * sandstepd-private.h's.  Every request needs "Authorization: Bearer TOKEN"
 * when a token file is given; a missing or wrong one is a 401, logged
 * without it.  This file starts the server: options, the state and staging
 * directories, the listening socket, the spare workers, the main loop.
 */
#include "sandstepd-private.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-host-files.h"
#include "sandstep-token.h"
#include "sandstep-units.h"

#define DEFAULT_LISTEN "127.0.0.1:7700"
#define DEFAULT_MAX_UPLOAD (1ULL << 30)
#define DEFAULT_MAX_CLAIMS 256

static Daemon *the_daemon;

static gboolean
parse_listen (const char *text, GInetSocketAddress **out, GError **error)
{
  g_autofree char *host = NULL;
  guint16 port;
  GSocketAddress *address;

  if (sandstep_parse_host_port (text, FALSE, &host, &port) &&
      (address = g_inet_socket_address_new_from_string (host, port)) != NULL)
    {
      *out = G_INET_SOCKET_ADDRESS (address);
      return TRUE;
    }
  return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                         "--listen '%s' is not ADDRESS:PORT (e.g. 127.0.0.1:7700, [::1]:7700, 0.0.0.0:7700)", text);
}

static gboolean
on_quit_signal (gpointer data)
{
  sandstepd_say ("stopping; sandboxes stay in '%s'", the_daemon->state_dir);
  g_main_loop_quit (data);
  return G_SOURCE_REMOVE;
}

static void
clean_staging (Daemon *d)
{
  sandstep_remove_entries_at (d->staging_fd);
}

static int
usage_error (const char *message)
{
  g_printerr ("sandstepd: %s\n", message);
  return SANDSTEP_EXIT_USAGE;
}

int
main (int argc, char **argv)
{
  g_autofree char *listen = NULL;
  g_autofree char *token_file = NULL;
  g_autofree char *tls_cert = NULL;
  g_autofree char *tls_key = NULL;
  g_autofree char *state_dir = NULL;
  g_autofree char *max_upload = NULL;
  int max_claims = DEFAULT_MAX_CLAIMS;
  gboolean worker = FALSE;
  gboolean version = FALSE;
  int parent = 0;
  GOptionEntry entries[] = {
    { "listen", 0, 0, G_OPTION_ARG_STRING, &listen, "Address and port to serve (default " DEFAULT_LISTEN "; port 0: any free one)", "ADDR:PORT" },
    { "token-file", 0, 0, G_OPTION_ARG_FILENAME, &token_file, "Require this bearer token (the file's first line) on every request", "FILE" },
    { "tls-cert", 0, 0, G_OPTION_ARG_FILENAME, &tls_cert, "Serve HTTPS with this PEM certificate (chain)", "FILE" },
    { "tls-key", 0, 0, G_OPTION_ARG_FILENAME, &tls_key, "The certificate's PEM private key", "FILE" },
    { "state-dir", 0, 0, G_OPTION_ARG_FILENAME, &state_dir, "Where sandboxes live (default $SANDSTEP_STATE_DIR, else sandstep's default)", "DIR" },
    { "max-upload", 0, 0, G_OPTION_ARG_STRING, &max_upload, "Largest put or write accepted (default 1G)", "BYTES" },
    { "max-claims", 0, 0, G_OPTION_ARG_INT, &max_claims, "Claims held at once (default 256)", "N" },
    { "version", 0, 0, G_OPTION_ARG_NONE, &version, "Print the version", NULL },
    { "worker", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_NONE, &worker, NULL, NULL },
    { "parent", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &parent, NULL, NULL },
    { NULL }
  };
  g_autoptr(GOptionContext) context = g_option_context_new ("- serve sandstep sandboxes over HTTP");
  g_autoptr(GError) error = NULL;
  g_autoptr(GInetSocketAddress) address = NULL;
  g_autoptr(GMainLoop) loop = NULL;
  g_autoptr(GSocketService) service = NULL;
  g_autoptr(GSocketAddress) effective = NULL;
  g_autofree char *token = NULL;
  Daemon *d;

  setlocale (LC_ALL, "");
  g_option_context_add_main_entries (context, entries, NULL);
  if (!g_option_context_parse (context, &argc, &argv, &error))
    return usage_error (error->message);
  if (version)
    {
      g_print ("sandstepd %s\n", SANDSTEP_VERSION);
      return 0;
    }
  if (worker)
    return sandstepd_worker_main (3, state_dir, parent);
  signal (SIGPIPE, SIG_IGN);

  d = g_new0 (Daemon, 1);
  the_daemon = d;
  d->debug = g_getenv ("SANDSTEPD_DEBUG") != NULL;
  d->max_workers = max_claims > 0 ? (guint) max_claims : DEFAULT_MAX_CLAIMS;
  d->max_upload = DEFAULT_MAX_UPLOAD;
  d->staging_fd = -1;
  g_queue_init (&d->idle);
  d->leases = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) sandstepd_lease_unref);
  if (max_upload != NULL && !sandstep_parse_size (max_upload, &d->max_upload, NULL))
    return usage_error ("--max-upload must be a size: bytes, or a number with K, M or G");

  if (!parse_listen (listen != NULL ? listen : DEFAULT_LISTEN, &address, &error))
    return usage_error (error->message);
  if (token_file != NULL)
    {
      token = sandstep_token_read_file (token_file, &error);
      if (token == NULL)
        return usage_error (error->message);
      sandstep_token_digest (token, d->token_digest);
      explicit_bzero (token, strlen (token));
      d->has_token = TRUE;
    }
  if (!g_inet_address_get_is_loopback (g_inet_socket_address_get_address (address)) && !d->has_token)
    return usage_error ("refusing to listen beyond loopback without a token: anyone who reaches the port could run "
                        "commands; pass --token-file=FILE (and --tls-cert/--tls-key), or listen on 127.0.0.1");
  if ((tls_cert != NULL) != (tls_key != NULL))
    return usage_error ("--tls-cert and --tls-key go together");

  d->state_dir = state_dir != NULL ? g_strdup (state_dir) : sandstep_local_backend_default_dir ();
  d->backend = sandstep_local_backend_new (d->state_dir, &error);
  if (d->backend == NULL)
    {
      g_printerr ("sandstepd: %s\n", error->message);
      return sandstep_error_exit_status (error);
    }
  d->staging_dir = g_build_filename (d->state_dir, SANDSTEPD_STAGING, NULL);
  if ((mkdir (d->staging_dir, 0700) < 0 && errno != EEXIST) ||
      (d->staging_fd = open (d->staging_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
    {
      g_printerr ("sandstepd: cannot use the staging directory '%s': %s\n", d->staging_dir, g_strerror (errno));
      return SANDSTEP_EXIT_INTERNAL;
    }
  clean_staging (d);
  d->self_exe = g_file_read_link ("/proc/self/exe", NULL);
  if (d->self_exe == NULL)
    d->self_exe = g_strdup (argv[0]);

  d->server = soup_server_new ("server-header", "sandstepd/" SANDSTEP_VERSION, NULL);
  if (tls_cert != NULL)
    {
      d->certificate = g_tls_certificate_new_from_files (tls_cert, tls_key, &error);
      if (d->certificate == NULL)
        {
          g_printerr ("sandstepd: cannot use the TLS certificate '%s' and key '%s': %s\n", tls_cert, tls_key,
                      error->message);
          return SANDSTEP_EXIT_USAGE;
        }
    }
  g_signal_connect (d->server, "request-started", G_CALLBACK (sandstepd_on_request_started), d);
  soup_server_add_handler (d->server, NULL, sandstepd_on_request, d, NULL);

  /* Connections are accepted here and handed to the SoupServer (see sandstepd_on_incoming). */
  service = g_socket_service_new ();
  if (!g_socket_listener_add_address (G_SOCKET_LISTENER (service), G_SOCKET_ADDRESS (address), G_SOCKET_TYPE_STREAM,
                                      G_SOCKET_PROTOCOL_TCP, NULL, &effective, &error))
    {
      g_autofree char *shown = g_socket_connectable_to_string (G_SOCKET_CONNECTABLE (address));
      g_printerr ("sandstepd: cannot listen on %s: %s\n", shown, error->message);
      return SANDSTEP_EXIT_INTERNAL;
    }
  g_signal_connect (service, "incoming", G_CALLBACK (sandstepd_on_incoming), d);
  g_socket_service_start (service);
  if (!g_inet_address_get_is_loopback (g_inet_socket_address_get_address (address)) && tls_cert == NULL)
    sandstepd_say ("warning: serving beyond loopback without TLS: the token and all traffic travel in clear text");

  sandstepd_workers_top_up (d);
  {
    GInetAddress *host = g_inet_socket_address_get_address (G_INET_SOCKET_ADDRESS (effective));
    g_autofree char *text = g_inet_address_to_string (host);
    gboolean v6 = g_inet_address_get_family (host) == G_SOCKET_FAMILY_IPV6;

    /* Tests and scripts read this line to learn the port. */
    printf ("sandstepd: listening on %s://%s%s%s:%u\n", d->certificate != NULL ? "https" : "http", v6 ? "[" : "",
            text, v6 ? "]" : "", g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (effective)));
  }
  fflush (stdout);
  sandstepd_say ("serving sandboxes of '%s'%s", d->state_dir, d->has_token ? " (token required)" : "");

  loop = g_main_loop_new (NULL, FALSE);
  g_unix_signal_add (SIGTERM, on_quit_signal, loop);
  g_unix_signal_add (SIGINT, on_quit_signal, loop);
  g_main_loop_run (loop);
  /* Workers die with us (PR_SET_PDEATHSIG), their jails with them; the claims go with the processes. */
  return 0;
}
