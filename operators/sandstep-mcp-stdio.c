/* sandstep-mcp-stdio.c: the MCP server on stdin and stdout, one message per line.
 *
 * Nothing but replies is ever written to stdout.  EOF on stdin ends the
 * server once every request taken is answered; with the HTTP transport too,
 * when the caller watches stdin (sandstep_mcp_server_quit_at_eof()).
 */
#include "sandstep-mcp-private.h"

#include <gio/gunixinputstream.h>
#include <gio/gunixoutputstream.h>
#include <string.h>

static void stdio_read_next (SandstepMcpServer *server);

static void
stdio_reply (SandstepMcpServer *server, const char *reply, gpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *line = NULL;

  if (reply == NULL)
    return;
  /* The generator escapes every newline inside strings, so a reply is one line. */
  line = g_strconcat (reply, "\n", NULL);
  if (!g_output_stream_write_all (server->stdio_out, line, strlen (line), NULL, NULL, &error))
    {
      g_debug ("cannot write a reply to stdout, stopping: %s", error->message);
      sandstep_mcp_server_quit (server);
      return;
    }
  sandstep_mcp_reply_delivered (server, server->replying_terminal);
}

static void
stdio_line_read (GObject *source, GAsyncResult *result, gpointer user_data)
{
  SandstepMcpServer *server = user_data;
  g_autoptr(GError) error = NULL;
  gsize length = 0;
  g_autofree char *line = g_data_input_stream_read_line_finish (G_DATA_INPUT_STREAM (source), result, &length, &error);

  if (line == NULL)
    {
      if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        return;
      if (error != NULL)
        g_debug ("cannot read stdin, stopping: %s", error->message);
      /* EOF: the client is done; answer what is still running, then end. */
      server->quit_when_idle = TRUE;
      if (server->in_flight == 0)
        sandstep_mcp_server_quit (server);
      return;
    }
  if (length > 0 && line[length - 1] == '\r')
    line[--length] = '\0';
  if (strspn (line, " \t") != length)
    {
      g_autoptr(GError) parse_error = NULL;
      g_autoptr(JsonNode) root = sandstep_mcp_parse_message (line, length, &parse_error);

      if (root == NULL)
        sandstep_mcp_handle_parse_error (server, parse_error, stdio_reply, NULL);
      else
        sandstep_mcp_handle_node (server, root, stdio_reply, NULL);
    }
  stdio_read_next (server);
}

static void
stdio_read_next (SandstepMcpServer *server)
{
  g_data_input_stream_read_line_async (server->stdio_in, G_PRIORITY_DEFAULT, server->cancellable, stdio_line_read,
                                       server);
}

gboolean
sandstep_mcp_server_listen_stdio (SandstepMcpServer *server, int in_fd, int out_fd, GError **error)
{
  g_autoptr(GInputStream) in = g_unix_input_stream_new (in_fd, FALSE);

  g_return_val_if_fail (server->stdio_in == NULL, FALSE);
  server->stdio_in = g_data_input_stream_new (in);
  g_data_input_stream_set_newline_type (server->stdio_in, G_DATA_STREAM_NEWLINE_TYPE_LF);
  server->stdio_out = g_unix_output_stream_new (out_fd, FALSE);
  server->cancellable = g_cancellable_new ();
  stdio_read_next (server);
  return TRUE;
}

static void eof_read_next (SandstepMcpServer *server);

static void
eof_read_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  SandstepMcpServer *server = user_data;
  g_autoptr(GError) error = NULL;
  gssize n = g_input_stream_skip_finish (G_INPUT_STREAM (source), result, &error);

  if (n < 0 && g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return;
  if (n > 0)
    {
      eof_read_next (server);
      return;
    }
  if (error != NULL)
    g_debug ("cannot read stdin, stopping: %s", error->message);
  server->quit_when_idle = TRUE;
  if (server->in_flight == 0)
    sandstep_mcp_server_quit (server);
}

static void
eof_read_next (SandstepMcpServer *server)
{
  g_input_stream_skip_async (server->eof_in, 65536, G_PRIORITY_DEFAULT, server->cancellable, eof_read_done, server);
}

void
sandstep_mcp_server_quit_at_eof (SandstepMcpServer *server, int fd)
{
  g_return_if_fail (server->eof_in == NULL);
  server->eof_in = g_unix_input_stream_new (fd, FALSE);
  if (server->cancellable == NULL)
    server->cancellable = g_cancellable_new ();
  eof_read_next (server);
}
