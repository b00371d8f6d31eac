/* op-tools.c: the sandbox's four tools for an external agent, over MCP.
 *
 *   sandstep mcp --handle=H [--http=ADDR:PORT (--token-file=FILE | --print-token)]
 *       Serves the tools to one MCP client: on stdin/stdout (the client
 *       spawned us), or with --http on a loopback Streamable HTTP endpoint
 *       whose URL goes to stderr ("port 0" picks a free port) and whose
 *       bearer token goes to FILE (0600) or, once, to stderr.  Ends at EOF on
 *       stdin (with --http, only where stdin is a pipe or a socket: not under
 *       a service manager's /dev/null), on SIGINT or SIGTERM, or after
 *       answering a tool call that found the sandbox unusable (then non-zero).
 *
 *   sandstep tools --handle=H -- AGENT-COMMAND
 *   $(sandbox-tools @FILE,AGENT-COMMAND)
 *       Runs AGENT-COMMAND on the host (/bin/sh -c, in this directory, with
 *       this environment) and serves it the tools over Streamable HTTP on a
 *       loopback port of our choosing, whose endpoint URL the agent finds in
 *       $SANDSTEP_MCP_URL (e.g. http://127.0.0.1:40123/mcp) and the bearer
 *       token every request must carry in $SANDSTEP_MCP_TOKEN.  The agent's exit
 *       status is the step's; the server ends with the agent.  Interrupted, we
 *       end the agent by its pid (SIGTERM, then SIGKILL after a grace period).
 *       When the environment names an HTTP proxy, 127.0.0.1 is added to the
 *       agent's no_proxy and NO_PROXY.
 *
 * Both claim the sandbox once, for their whole run.
 */
#include "sandstep-operator.h"

#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gio/gio.h>
#include <glib-unix.h>

#include "sandstep-error.h"
#include "sandstep-mcp.h"
#include "sandstep-token.h"
#include "sandstep-tool-options.h"
#include "sandstep-tools.h"

/* How long a stopping agent gets between SIGTERM and SIGKILL. */
#define AGENT_GRACE_S 5
/* How long a tool call in progress may finish once the server ends. */
#define CALL_GRACE_S 2.0

typedef struct {
  SandstepMcpServer *server;
  GSubprocess *agent;
  gboolean agent_done;
  int signal;                 /* the signal that interrupted us, or 0 */
  guint kill_timer;
} ToolsRun;

static gboolean agent_kill (gpointer user_data);

static gboolean
on_signal (ToolsRun *run, int signum)
{
  if (run->signal == 0)
    run->signal = signum;
  if (run->agent != NULL && !run->agent_done)
    {
      /* The server stops when the agent has gone (agent_exited). */
      g_debug ("signal %d: ending the agent", signum);
      g_subprocess_send_signal (run->agent, SIGTERM);
      if (run->kill_timer == 0)
        run->kill_timer = g_timeout_add_seconds (AGENT_GRACE_S, agent_kill, run);
    }
  else
    sandstep_mcp_server_quit (run->server);
  return G_SOURCE_CONTINUE;
}

static gboolean
on_sigint (gpointer user_data)
{
  return on_signal (user_data, SIGINT);
}

static gboolean
on_sigterm (gpointer user_data)
{
  return on_signal (user_data, SIGTERM);
}

/* Ends the process at once, when a tool call still runs on the sandbox and
 * so nothing of it may be freed; its jail dies with us. */
static G_NORETURN void
exit_now (int status)
{
  fflush (stdout);
  fflush (stderr);
  _exit (status);
}

/* With @out_unreachable, a sandbox that cannot be reached (no state directory in a client's minimal
 * environment, a handle not found) is not an error: the toolbox only describes the tools, and
 * *out_unreachable says why, for the server to answer each call with. */
static SandstepToolbox *
open_toolbox (SandstepInvocation *invocation, SandstepAttachment **out_attachment, GError **out_unreachable,
              GError **error)
{
  g_autoptr(SandstepAttachment) attachment = NULL;
  g_autoptr(GError) local_error = NULL;
  SandstepToolLimits limits;
  SandstepToolbox *toolbox;

  /* Bad options are refused before the sandbox is claimed. */
  if (!sandstep_tool_options_parse (invocation, &limits, error))
    return NULL;
  if (invocation->unreachable != NULL)
    local_error = g_error_copy (invocation->unreachable);
  else
    attachment = sandstep_invocation_attach (invocation, &local_error);
  if (attachment == NULL && out_unreachable != NULL &&
      local_error->domain != SANDSTEP_USAGE_ERROR)
    {
      *out_unreachable = g_steal_pointer (&local_error);
      *out_attachment = NULL;
      return sandstep_toolbox_new (NULL, &limits);
    }
  if (attachment == NULL)
    {
      g_propagate_error (error, g_steal_pointer (&local_error));
      return NULL;
    }
  toolbox = sandstep_toolbox_new (attachment, &limits);
  if (sandstep_invocation_has (invocation, "python") &&
      !sandstep_offer_python (toolbox, attachment, sandstep_invocation_get (invocation, "python-budget"),
                              invocation->op->name, error))
    {
      sandstep_toolbox_free (toolbox);
      return NULL;
    }
  *out_attachment = g_steal_pointer (&attachment);
  return toolbox;
}

/* A pipe, or a socket as libuv's spawn gives a child for one. */
static gboolean
stdin_is_pipe (void)
{
  struct stat st;

  return fstat (STDIN_FILENO, &st) == 0 && (S_ISFIFO (st.st_mode) || S_ISSOCK (st.st_mode));
}

gboolean
sandstep_op_mcp (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  g_autoptr(SandstepAttachment) attachment = NULL;
  g_autoptr(SandstepToolbox) toolbox = NULL;
  g_autoptr(SandstepMcpServer) server = NULL;
  g_autoptr(GError) local_error = NULL;
  g_autoptr(GError) unreachable = NULL;
  const char *http = sandstep_invocation_get (invocation, "http");
  const char *token_file = sandstep_invocation_get (invocation, "token-file");
  gboolean print_token = sandstep_invocation_has (invocation, "print-token");
  ToolsRun run = { 0 };
  guint sigint_id, sigterm_id;
  gboolean ok;

  if (invocation->operands->len > 0)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "unexpected argument '%s'; write: sandstep mcp --handle=H [--http=ADDR:PORT]",
                           (const char *) invocation->operands->pdata[0]);
  /* Check --http before claiming the sandbox, so a typo costs no wait. */
  if (http != NULL && !sandstep_mcp_check_address (http, error))
    return FALSE;
  if (http == NULL && (token_file != NULL || print_token))
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "--token-file and --print-token go with --http; over stdin and stdout no token is needed");
  /* Loopback reaches every local user and every open sandbox: the agent alone may know the token. */
  if (http != NULL && token_file == NULL && !print_token)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                           "--http needs --token-file=FILE (the bearer token is written there, mode 0600) or "
                           "--print-token (printed once on stderr): every request must carry it");

  /* Over stdio the client must get its initialize answered whatever happens: a sandbox out of reach is said
   * in each tool call's result (and here), not by ending before the client can show anything. */
  toolbox = open_toolbox (invocation, &attachment, http == NULL ? &unreachable : NULL, error);
  if (toolbox == NULL)
    return FALSE;
  server = run.server = sandstep_mcp_server_new (toolbox, invocation->handle);
  if (unreachable != NULL)
    {
      g_autofree char *why = sandstep_escape (unreachable->message, -1, 0, SANDSTEP_ESCAPE_LINE);
      /* Named, whatever failed: a state directory's error does not name the sandbox. */
      g_autofree char *text = g_strdup_printf ("Cannot reach sandbox '%s': %s", invocation->handle,
                                               unreachable->message);

      g_printerr ("sandstep mcp: cannot reach sandbox '%s'; each tool call will say so: %s\n", invocation->handle,
                  why);
      sandstep_mcp_server_set_unreachable (server, text);
    }
  if (http != NULL)
    {
      g_autofree char *url = sandstep_mcp_server_listen_http (server, http, error);
      if (url == NULL)
        return FALSE;
      if (token_file != NULL && !sandstep_token_write_file (token_file, sandstep_mcp_server_http_token (server), error))
        return FALSE;
      g_printerr ("sandstep mcp: serving sandbox '%s' over MCP (Streamable HTTP) at %s\n", invocation->handle, url);
      if (print_token)
        g_printerr ("sandstep mcp: bearer token: %s\n", sandstep_mcp_server_http_token (server));
      else
        g_printerr ("sandstep mcp: bearer token in '%s'\n", token_file);
      /* A client that spawned us with a pipe ends us by closing it, as over stdio; any other stdin (a service
       * manager's /dev/null, a terminal) says nothing of a client, so only a signal ends us. */
      if (stdin_is_pipe ())
        sandstep_mcp_server_quit_at_eof (server, STDIN_FILENO);
    }
  else
    {
      if (!sandstep_mcp_server_listen_stdio (server, STDIN_FILENO, STDOUT_FILENO, error))
        return FALSE;
      g_debug ("serving sandbox '%s' over MCP on stdin and stdout", invocation->handle);
    }

  sigint_id = g_unix_signal_add (SIGINT, on_sigint, &run);
  sigterm_id = g_unix_signal_add (SIGTERM, on_sigterm, &run);
  ok = sandstep_mcp_server_run (server, &local_error);
  g_source_remove (sigint_id);
  g_source_remove (sigterm_id);

  *out_exit = run.signal != 0 ? 128 + run.signal : SANDSTEP_EXIT_OK;
  if (!ok)
    {
      g_autofree char *why = sandstep_escape (local_error->message, -1, 0, SANDSTEP_ESCAPE_LINE);

      g_printerr ("sandstep mcp: a tool call found the sandbox unusable, stopping: %s\n", why);
      *out_exit = sandstep_error_exit_status (local_error);
    }
  if (!sandstep_mcp_server_stop (server, run.signal != 0 ? 0 : CALL_GRACE_S))
    {
      g_printerr ("sandstep mcp: a tool call was still running; it ends with us\n");
      exit_now (*out_exit);
    }
  return TRUE;
}

static void
agent_exited (GObject *source, GAsyncResult *result, gpointer user_data)
{
  ToolsRun *run = user_data;

  g_subprocess_wait_finish (G_SUBPROCESS (source), result, NULL);
  run->agent_done = TRUE;
  sandstep_mcp_server_quit (run->server);
}

static gboolean
agent_kill (gpointer user_data)
{
  ToolsRun *run = user_data;

  run->kill_timer = 0;
  if (!run->agent_done)
    {
      g_printerr ("sandstep tools: the agent did not end within %ds of SIGTERM; killing it\n", AGENT_GRACE_S);
      g_subprocess_force_exit (run->agent);
    }
  return G_SOURCE_REMOVE;
}

/* Ends the agent by its pid and waits for it. */
static void
agent_stop (ToolsRun *run)
{
  GMainContext *context = g_main_context_get_thread_default ();

  if (run->agent_done)
    return;
  g_subprocess_send_signal (run->agent, SIGTERM);
  if (run->kill_timer == 0)
    run->kill_timer = g_timeout_add_seconds (AGENT_GRACE_S, agent_kill, run);
  while (!run->agent_done)
    g_main_context_iteration (context, TRUE);
}

/* An agent whose environment names an HTTP proxy (for its model API) must
 * still reach our loopback endpoint directly: add 127.0.0.1 to no_proxy and
 * NO_PROXY, which curl, Python and most HTTP clients honour. */
static void
exempt_loopback_from_proxy (GSubprocessLauncher *launcher)
{
  static const char *const proxies[] = { "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy",
                                         "ALL_PROXY" };
  static const char *const exemptions[] = { "no_proxy", "NO_PROXY" };
  gboolean proxied = FALSE;

  for (gsize i = 0; i < G_N_ELEMENTS (proxies); i++)
    if (g_getenv (proxies[i]) != NULL && g_getenv (proxies[i])[0] != '\0')
      proxied = TRUE;
  if (!proxied)
    return;
  for (gsize i = 0; i < G_N_ELEMENTS (exemptions); i++)
    {
      const char *current = g_getenv (exemptions[i]);
      g_autofree char *value = current != NULL && current[0] != '\0'
                                 ? g_strconcat (current, ",127.0.0.1", NULL)
                                 : g_strdup ("127.0.0.1");
      g_subprocess_launcher_setenv (launcher, exemptions[i], value, TRUE);
    }
}

static int
agent_exit_status (GSubprocess *agent)
{
  if (g_subprocess_get_if_exited (agent))
    return g_subprocess_get_exit_status (agent);
  if (g_subprocess_get_if_signaled (agent))
    return 128 + g_subprocess_get_term_sig (agent);
  return SANDSTEP_EXIT_INTERNAL;
}

gboolean
sandstep_op_tools (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  g_autoptr(SandstepAttachment) attachment = NULL;
  g_autoptr(SandstepToolbox) toolbox = NULL;
  g_autoptr(SandstepMcpServer) server = NULL;
  g_autoptr(GSubprocessLauncher) launcher = NULL;
  g_autoptr(GSubprocess) agent = NULL;
  g_autoptr(GError) local_error = NULL;
  g_autofree char *command = NULL;
  g_autofree char *url = NULL;
  ToolsRun run = { 0 };
  guint sigint_id, sigterm_id;
  gboolean ok;

  if (invocation->operands->len == 0)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                           "no agent command given; write: sandstep tools --handle=H -- AGENT-COMMAND (it finds "
                           "the MCP endpoint in $SANDSTEP_MCP_URL)");
  g_ptr_array_add (invocation->operands, NULL);
  command = g_strjoinv (" ", (char **) invocation->operands->pdata);
  g_ptr_array_remove_index (invocation->operands, invocation->operands->len - 1);

  toolbox = open_toolbox (invocation, &attachment, NULL, error);
  if (toolbox == NULL)
    return FALSE;
  server = run.server = sandstep_mcp_server_new (toolbox, invocation->handle);
  url = sandstep_mcp_server_listen_http (server, "127.0.0.1:0", error);
  if (url == NULL)
    return FALSE;

  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_subprocess_launcher_setenv (launcher, "SANDSTEP_MCP_URL", url, TRUE);
  g_subprocess_launcher_setenv (launcher, "SANDSTEP_MCP_TOKEN", sandstep_mcp_server_http_token (server), TRUE);
  exempt_loopback_from_proxy (launcher);
  /* Before the agent starts: a signal that came between its start and our watch would be taken by GLib's handler
   * (a claim's wait may have left it) and lost, and the agent would run on. */
  sigint_id = g_unix_signal_add (SIGINT, on_sigint, &run);
  sigterm_id = g_unix_signal_add (SIGTERM, on_sigterm, &run);
  agent = g_subprocess_launcher_spawn (launcher, error, "/bin/sh", "-c", command, NULL);
  if (agent == NULL)
    {
      g_source_remove (sigint_id);
      g_source_remove (sigterm_id);
      g_prefix_error (error, "Cannot start the agent command: ");
      return FALSE;
    }
  run.agent = agent;
  g_printerr ("sandstep tools: serving sandbox '%s' to the agent (pid %s) at %s\n", invocation->handle,
              g_subprocess_get_identifier (agent), url);
  g_subprocess_wait_async (agent, NULL, agent_exited, &run);
  ok = sandstep_mcp_server_run (server, &local_error);
  if (!ok)
    {
      g_autofree char *why = sandstep_escape (local_error->message, -1, 0, SANDSTEP_ESCAPE_LINE);

      g_printerr ("sandstep tools: a tool call found the sandbox unusable; ending the agent: %s\n", why);
      agent_stop (&run);
    }
  g_source_remove (sigint_id);
  g_source_remove (sigterm_id);
  if (run.kill_timer != 0)
    g_source_remove (run.kill_timer);

  if (!ok)
    *out_exit = sandstep_error_exit_status (local_error);
  else if (run.signal != 0)
    *out_exit = 128 + run.signal;
  else
    *out_exit = agent_exit_status (agent);
  if (!sandstep_mcp_server_stop (server, run.signal != 0 ? 0 : CALL_GRACE_S))
    {
      g_printerr ("sandstep tools: a tool call was still running; it ends with us\n");
      exit_now (*out_exit);
    }
  return TRUE;
}
