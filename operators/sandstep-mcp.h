/* sandstep-mcp.h: an MCP server for the four sandbox tools.
 *
 * Model Context Protocol in both eras, chosen by what each request sends:
 * the "legacy" one (initialize handshake), protocol versions 2024-11-05
 * through 2025-11-25: initialize, notifications/initialized, ping,
 * tools/list, tools/call; and the revision of 2026-07-28 (the version in
 * each request's params._meta, no initialize, no sessions): server/discover,
 * tools/list, tools/call, every result with resultType (see
 * sandstep-mcp-modern.c).  JSON-RPC 2.0 with a dispatch table.  Two
 * transports over one server:
 *
 *  - stdio: one JSON message per line on stdin, one reply per line on stdout;
 *    EOF on stdin ends the server.  Nothing else is ever written to stdout.
 *  - Streamable HTTP: one endpoint, /mcp, on a loopback address.  POST answers
 *    application/json (202 for notifications), GET 405 (no server stream),
 *    DELETE ends a session.  Sessions are optional: initialize issues an
 *    Mcp-Session-Id; a request that carries an unknown one gets 404.  A
 *    request whose Origin is not a loopback origin, or whose Host is not a
 *    loopback name or the bound address (DNS rebinding), gets 403.  Every
 *    request must carry "Authorization: Bearer TOKEN", the server's own
 *    random token (sandstep_mcp_server_http_token()); without it, 401 with
 *    "WWW-Authenticate: Bearer".  A body is read up to 64 MiB, chunked or
 *    not, then refused with 413.  A 2026-07-28 request opens no session; its
 *    MCP-Protocol-Version, Mcp-Method and (tools/call) Mcp-Name headers
 *    must mirror the body (else 400, -32020); an unknown method is 404 and
 *    a version it does not speak 400.
 *
 * Tool calls run one at a time, in the order they came, each on a GTask
 * thread, so the main loop keeps answering ping and HTTP while a command
 * runs.  A tool failure the model can act on is a result with isError; a
 * terminal one (the sandbox is unusable) is also answered with isError and
 * its message, logged on stderr, and then ends the server with that error
 * (sandstep_mcp_server_run() returns FALSE).
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "sandstep-tools.h"

G_BEGIN_DECLS

/* The newest version this server speaks; it answers an initialize asking for
 * a version it does not know with this one. */
#define SANDSTEP_MCP_PROTOCOL_VERSION "2025-11-25"

/* The endpoint's path on the HTTP transport. */
#define SANDSTEP_MCP_PATH "/mcp"

/* Errors on the wire.  The values are the JSON-RPC error codes. */
#define SANDSTEP_MCP_ERROR (sandstep_mcp_error_quark ())
typedef enum {
  SANDSTEP_MCP_ERROR_PARSE = -32700,            /* the message is not JSON */
  SANDSTEP_MCP_ERROR_INVALID_REQUEST = -32600,  /* JSON, but not a JSON-RPC 2.0 request */
  SANDSTEP_MCP_ERROR_METHOD_NOT_FOUND = -32601,
  SANDSTEP_MCP_ERROR_INVALID_PARAMS = -32602,   /* also: an unknown tool */
  SANDSTEP_MCP_ERROR_INTERNAL = -32603,
  SANDSTEP_MCP_ERROR_REFUSED = -32000,          /* HTTP: refused before dispatch (Origin, Host, session) */
  /* 2026-07-28 */
  SANDSTEP_MCP_ERROR_HEADER_MISMATCH = -32020,  /* HTTP: MCP-Protocol-Version, Mcp-Method or Mcp-Name disagree with the body */
  SANDSTEP_MCP_ERROR_UNSUPPORTED_VERSION = -32022,
} SandstepMcpError;

GQuark sandstep_mcp_error_quark (void);

typedef struct _SandstepMcpServer SandstepMcpServer;

/* A server for @toolbox, which stays owned by the caller and must outlive it
 * (a tool call may use it on another thread until sandstep_mcp_server_free()
 * or a FALSE sandstep_mcp_server_stop()).  @handle names the sandbox in the
 * instructions sent at initialize.  Works in the thread-default main context. */
SandstepMcpServer *sandstep_mcp_server_new (SandstepToolbox *toolbox, const char *handle);

/* Waits for a tool call in progress, then frees. */
void sandstep_mcp_server_free (SandstepMcpServer *server);

/* The sandbox could not be reached (@why says why and what to do): the
 * server still answers initialize and tools/list, and answers every tool
 * call with isError and @why, without touching the toolbox. */
void sandstep_mcp_server_set_unreachable (SandstepMcpServer *server, const char *why);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepMcpServer, sandstep_mcp_server_free)

/* Called with one reply (a JSON-RPC response as compact JSON, no newline), or
 * with NULL when the message needs none (a notification, a response). */
typedef void (*SandstepMcpReplyFunc) (const char *reply, gpointer user_data);

/* Handles one JSON-RPC message.  @reply runs exactly once, in the server's
 * main context: at once, or when a tool call finishes. */
void sandstep_mcp_server_handle (SandstepMcpServer *server, const char *message, gsize length,
                                 SandstepMcpReplyFunc reply, gpointer user_data);

/* Serves stdin/stdout (@in_fd, @out_fd) until EOF on @in_fd. */
gboolean sandstep_mcp_server_listen_stdio (SandstepMcpServer *server, int in_fd, int out_fd, GError **error);

/* Checks an address for sandstep_mcp_server_listen_http() without binding:
 * a usage error (SANDSTEP_USAGE_ERROR) names what is wrong with it. */
gboolean sandstep_mcp_check_address (const char *address, GError **error);

/* Serves Streamable HTTP on @address ("PORT", "ADDR:PORT" or "[ADDR]:PORT";
 * NULL or an empty ADDR: 127.0.0.1; port 0 picks a free one).  ADDR must be a
 * loopback address or "localhost".  Makes the server's bearer token.
 * Returns the endpoint's URL, e.g. "http://127.0.0.1:40123/mcp". */
char *sandstep_mcp_server_listen_http (SandstepMcpServer *server, const char *address, GError **error);

/* The token every HTTP request must carry (256 random bits, hex), made by
 * sandstep_mcp_server_listen_http(); NULL before. */
const char *sandstep_mcp_server_http_token (SandstepMcpServer *server);

/* Ends the server, once every request taken is answered, at EOF on @fd
 * (whatever comes before it is read and dropped): `sandstep mcp --http`
 * holds the sandbox until its stdin closes, as the stdio transport does. */
void sandstep_mcp_server_quit_at_eof (SandstepMcpServer *server, int fd);

/* Runs the main loop until sandstep_mcp_server_quit(), EOF on stdio, or a
 * terminal tool error (after its reply went out); the last is returned as
 * FALSE with @error set. */
gboolean sandstep_mcp_server_run (SandstepMcpServer *server, GError **error);
void sandstep_mcp_server_quit (SandstepMcpServer *server);

/* Starts no more tool calls, and lets a call in progress finish for up to
 * @wait_s seconds (iterating the server's main context; its reply goes out
 * as usual).  FALSE: a call is still running on the toolbox, so neither it
 * nor the sandbox may be freed; the caller should end the process (which ends
 * the command's jail with it). */
gboolean sandstep_mcp_server_stop (SandstepMcpServer *server, double wait_s);

G_END_DECLS
