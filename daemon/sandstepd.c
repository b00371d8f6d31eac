/* sandstepd.c: the backend interface over HTTP, so steps on other machines share sandboxes.
 *
 *   sandstepd [--listen=ADDR:PORT] [--token-file=FILE] [--tls-cert=FILE --tls-key=FILE]
 *             [--state-dir=DIR] [--max-upload=SIZE] [--max-claims=N] [--server-name=NAME]...
 *             [--header-timeout=SECONDS] [--idle-timeout=SECONDS]
 *
 * The API is hooks/sandstep-wire.h's; how the daemon serves it,
 * sandstepd-private.h's.  Every request needs "Authorization: Bearer TOKEN"
 * with a token of the token file (sandstep-token.h: admin tokens, and tokens
 * for some owners only); a missing or wrong one is a 401, logged without it.
 * Without --token-file the daemon uses STATE/sandstepd.token, which it
 * makes (0600) on first start, and says so: it never serves without a token,
 * loopback included.  This file starts the server: options, the tokens, the
 * state and staging directories, the listening socket, the spare workers,
 * the main loop.
 */
#include "sandstepd-private.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-host-files.h"
#include "sandstep-token.h"
#include "sandstep-units.h"

#define DEFAULT_LISTEN "127.0.0.1:7700"
#define DEFAULT_MAX_UPLOAD (1ULL << 30)
#define DEFAULT_MAX_CLAIMS 256
/* The token file made in the state directory when none is given. */
#define OWN_TOKEN_FILE "sandstepd.token"

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

/* STATE/sandstepd.token: read if it is there, else made with a fresh token. */
static SandstepTokenSet *
own_tokens (const char *state_dir, char **out_path, GError **error)
{
  g_autofree char *path = g_build_filename (state_dir, OWN_TOKEN_FILE, NULL);
  g_autofree char *token = NULL;
  SandstepTokenSet *set;

  if (g_file_test (path, G_FILE_TEST_EXISTS))
    set = sandstep_token_set_load (path, error);
  else
    {
      token = sandstep_token_new ();
      set = sandstep_token_write_file (path, token, error) ? sandstep_token_set_new_admin (token) : NULL;
      explicit_bzero (token, strlen (token));
    }
  if (set != NULL)
    *out_path = g_steal_pointer (&path);
  return set;
}

/* As many connections as descriptors allow (the soft limit raised to the
 * hard one), less what workers and files take, and never over the cap. */
static guint
connection_limit (void)
{
  struct rlimit nofile;

  if (getrlimit (RLIMIT_NOFILE, &nofile) < 0)
    return 512;
  if (nofile.rlim_cur < nofile.rlim_max)
    {
      nofile.rlim_cur = nofile.rlim_max;
      setrlimit (RLIMIT_NOFILE, &nofile);
      getrlimit (RLIMIT_NOFILE, &nofile);
    }
  if (nofile.rlim_cur < 256 + 64)
    return 64;
  return (guint) MIN (nofile.rlim_cur / 2, SANDSTEPD_MAX_CONNECTIONS);
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
  g_auto(GStrv) server_names = NULL;
  g_auto(GStrv) e2b_templates = NULL;
  int header_timeout = SANDSTEPD_HEADERS_DEADLINE_S;
  int idle_timeout = SANDSTEPD_BODY_IDLE_S;
  g_autofree char *own_token_path = NULL;
  int max_claims = DEFAULT_MAX_CLAIMS;
  gboolean worker = FALSE;
  gboolean version = FALSE;
  int parent = 0;
  GOptionEntry entries[] = {
    { "listen", 0, 0, G_OPTION_ARG_STRING, &listen, "Address and port to serve (default " DEFAULT_LISTEN "; port 0: any free one)", "ADDR:PORT" },
    { "token-file", 0, 0, G_OPTION_ARG_FILENAME, &token_file, "Require a bearer token of this file on every request: one a line, 'TOKEN' (admin) or 'TOKEN owner=PREFIX/' (default: STATE/" OWN_TOKEN_FILE ", made on first start)", "FILE" },
    { "server-name", 0, 0, G_OPTION_ARG_STRING_ARRAY, &server_names, "A name clients reach this server by (Host), besides its addresses, localhost and this host's name; repeatable", "NAME" },
    { "e2b-template", 0, 0, G_OPTION_ARG_STRING_ARRAY, &e2b_templates, "An E2B template: Sandbox.create(NAME) makes a sandbox whose root is the image REF (docker://...); repeatable", "NAME=REF" },
    { "tls-cert", 0, 0, G_OPTION_ARG_FILENAME, &tls_cert, "Serve HTTPS with this PEM certificate (chain)", "FILE" },
    { "tls-key", 0, 0, G_OPTION_ARG_FILENAME, &tls_key, "The certificate's PEM private key", "FILE" },
    { "state-dir", 0, 0, G_OPTION_ARG_FILENAME, &state_dir, "Where sandboxes live (default $SANDSTEP_STATE_DIR, else sandstep's default)", "DIR" },
    { "max-upload", 0, 0, G_OPTION_ARG_STRING, &max_upload, "Largest put or write accepted (default 1G)", "BYTES" },
    { "max-claims", 0, 0, G_OPTION_ARG_INT, &max_claims, "Claims held at once (default 256)", "N" },
    { "header-timeout", 0, 0, G_OPTION_ARG_INT, &header_timeout, "Seconds a connection has to send its request's headers (default " G_STRINGIFY (SANDSTEPD_HEADERS_DEADLINE_S) ")", "SECONDS" },
    { "idle-timeout", 0, 0, G_OPTION_ARG_INT, &idle_timeout, "Seconds a request's body may pause (default " G_STRINGIFY (SANDSTEPD_BODY_IDLE_S) ")", "SECONDS" },
    { "version", 0, 0, G_OPTION_ARG_NONE, &version, "Print the version", NULL },
    { "worker", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_NONE, &worker, NULL, NULL },
    { "parent", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_INT, &parent, NULL, NULL },
    { NULL }
  };
  g_autoptr(GOptionContext) context = g_option_context_new ("- serve sandstep sandboxes over HTTP");
  g_autoptr(GError) error = NULL;
  g_autoptr(GInetSocketAddress) address = NULL;
  g_autoptr(GMainLoop) loop = NULL;
  g_autoptr(GSocket) listener = NULL;
  g_autoptr(GSocketAddress) effective = NULL;
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
  /* --state-dir is SANDSTEP_STATE_DIR for what reads it besides the backend (the image store under it), in this
   * process and its workers, as for the helper. */
  if (state_dir != NULL)
    g_setenv ("SANDSTEP_STATE_DIR", state_dir, TRUE);
  if (worker)
    return sandstepd_worker_main (3, state_dir, parent);
  signal (SIGPIPE, SIG_IGN);

  d = g_new0 (Daemon, 1);
  the_daemon = d;
  d->debug = g_getenv ("SANDSTEPD_DEBUG") != NULL;
  d->max_workers = max_claims > 0 ? (guint) max_claims : DEFAULT_MAX_CLAIMS;
  d->max_connections = connection_limit ();
  if (header_timeout <= 0 || idle_timeout <= 0)
    return usage_error ("--header-timeout and --idle-timeout must be positive whole seconds");
  d->header_timeout_s = (guint) header_timeout;
  d->idle_timeout_s = (guint) idle_timeout;
  d->max_upload = DEFAULT_MAX_UPLOAD;
  d->staging_fd = -1;
  sandstepd_workers_init (d);
  d->leases = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) sandstepd_lease_unref);
  if (max_upload != NULL && !sandstep_parse_size (max_upload, &d->max_upload, NULL))
    return usage_error ("--max-upload must be a size: bytes, or a number with K, M or G");

  if (!parse_listen (listen != NULL ? listen : DEFAULT_LISTEN, &address, &error))
    return usage_error (error->message);
  if (token_file != NULL)
    {
      d->tokens = sandstep_token_set_load (token_file, &error);
      if (d->tokens == NULL)
        return usage_error (error->message);
    }
  /* Beyond loopback the operator chooses the tokens; on loopback one is made. */
  if (!g_inet_address_get_is_loopback (g_inet_socket_address_get_address (address)) && d->tokens == NULL)
    return usage_error ("refusing to listen beyond loopback without a token: anyone who reaches the port could run "
                        "commands; pass --token-file=FILE (and --tls-cert/--tls-key), or listen on 127.0.0.1");
  d->server_names = g_steal_pointer (&server_names);
  if (!sandstepd_e2b_set_templates (d, e2b_templates, &error))
    return usage_error (error->message);
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
  if (d->tokens == NULL)
    {
      d->tokens = own_tokens (d->state_dir, &own_token_path, &error);
      if (d->tokens == NULL)
        {
          g_printerr ("sandstepd: %s\n", error->message);
          return SANDSTEP_EXIT_INTERNAL;
        }
    }
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

  /* Connections are accepted here and handed to the SoupServer (see sandstepd_listen). */
  listener = g_socket_new (g_socket_address_get_family (G_SOCKET_ADDRESS (address)), G_SOCKET_TYPE_STREAM,
                           G_SOCKET_PROTOCOL_TCP, &error);
  if (listener != NULL)
    g_socket_set_listen_backlog (listener, 1024);
  if (listener == NULL || !g_socket_bind (listener, G_SOCKET_ADDRESS (address), TRUE, &error) ||
      !g_socket_listen (listener, &error) || (effective = g_socket_get_local_address (listener, &error)) == NULL)
    {
      g_autofree char *shown = g_socket_connectable_to_string (G_SOCKET_CONNECTABLE (address));
      g_printerr ("sandstepd: cannot listen on %s: %s\n", shown, error->message);
      return SANDSTEP_EXIT_INTERNAL;
    }
  sandstepd_listen (d, listener);
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
  sandstepd_say ("serving sandboxes of '%s' (a token of %u required)", d->state_dir,
                 sandstep_token_set_size (d->tokens));
  if (own_token_path != NULL)
    sandstepd_say ("no --token-file: clients need the token in '%s' (SANDSTEP_TOKEN_FILE=%s)", own_token_path,
                   own_token_path);

  loop = g_main_loop_new (NULL, FALSE);
  g_unix_signal_add (SIGTERM, on_quit_signal, loop);
  g_unix_signal_add (SIGINT, on_quit_signal, loop);
  g_main_loop_run (loop);
  /* Workers die with us (PR_SET_PDEATHSIG), their jails with them; the claims go with the processes. */
  return 0;
}
