/* sandstep-mcp-private.h: what the files of the MCP server share.
 *
 * sandstep-mcp.c is the server: JSON-RPC dispatch, its methods, and the
 * tool calls, one at a time in the order they came, each on a GTask thread
 * so that the main loop keeps answering ping and HTTP while a command runs.
 * The transports feed it messages and write its replies:
 * sandstep-mcp-stdio.c (one message a line) and sandstep-mcp-http.c
 * (Streamable HTTP).
 */
#pragma once

#include <gio/gio.h>
#include <libsoup/soup.h>

#include "sandstep-http-guard.h"

#include "sandstep-mcp.h"

G_BEGIN_DECLS

typedef struct _SandstepMcpRequest SandstepMcpRequest;

struct _SandstepMcpServer {
  SandstepToolbox *toolbox;
  char *handle;
  GMainContext *context;
  GMainLoop *loop;
  JsonArray *tools;          /* the definitions, fixed when the server starts */
  GHashTable *tool_names;    /* name -> itself (borrowed from @tools) */
  char *tool_list;           /* "run_command, read_file, ...", for messages */

  guint in_flight;           /* requests taken and not yet answered */
  GError *terminal;          /* the first terminal tool error */
  gboolean replying_terminal;/* TRUE while the reply to a terminal failure is handed over */
  gboolean quit_when_idle;   /* stdio reached EOF: end once every request is answered */

  /* Tool calls: waiting in @jobs, one running on a GTask thread while @busy. */
  GQueue jobs;               /* ToolJob *, waiting */
  gboolean busy;             /* a call's task is out (its reply not yet made) */
  gint running;              /* atomic: the task's thread is still in the toolbox */
  gboolean stopping;         /* no call starts any more */
  char *dead;                /* the terminal message, once the toolbox has failed for good */
  char *unreachable;         /* why the sandbox could not be reached: every call's isError text */
  guint start_idle;          /* the source that starts the next call */

  /* stdio */
  GDataInputStream *stdio_in;
  GOutputStream *stdio_out;
  GCancellable *cancellable;

  /* Streamable HTTP */
  SoupServer *http;
  SandstepHttpGuard *http_guard;  /* accepts its connections: caps, deadlines (hooks/sandstep-http-guard.h) */
  char *bound_host;          /* the literal address bound, e.g. "127.0.0.1" or "::1" */
  GHashTable *sessions;      /* Mcp-Session-Id -> itself */
  char *token;               /* the bearer token every request must carry */
  guint8 token_digest[32];

  /* EOF on a descriptor the caller watches (sandstep_mcp_server_quit_at_eof) */
  GInputStream *eof_in;
};

/* A JSON-RPC message bigger than this is refused; write_file content is the
 * only big thing a client sends. */
#define SANDSTEP_MCP_MAX_MESSAGE (64 * 1024 * 1024)

/* The legacy era (initialize), newest first; the first is the answer to a
 * version we do not know. */
extern const char *const sandstep_mcp_protocol_versions[4];

/* The 2026-07-28 era (sandstep-mcp-modern.c): the version each request names in _meta. */
#define SANDSTEP_MCP_MODERN_VERSION "2026-07-28"
#define SANDSTEP_MCP_META_VERSION "io.modelcontextprotocol/protocolVersion"
#define SANDSTEP_MCP_META_CAPABILITIES "io.modelcontextprotocol/clientCapabilities"
#define SANDSTEP_MCP_META_SERVER_INFO "io.modelcontextprotocol/serverInfo"
extern const char *const sandstep_mcp_modern_versions[1];

/* TRUE when params._meta names a protocol version: a request of the 2026-07-28 era. */
gboolean sandstep_mcp_request_is_modern (JsonObject *params);
/* That version when it is a string, else NULL. */
const char *sandstep_mcp_request_version (JsonObject *params);
/* The error reply to a modern request whose envelope we refuse (a version we
 * do not speak: -32022 with the supported ones; no clientCapabilities:
 * -32602), or NULL when it is fine. */
char *sandstep_mcp_modern_refusal (JsonNode *id, JsonObject *params);
/* server/discover's result. */
JsonNode *sandstep_mcp_method_discover (SandstepMcpServer *server, JsonObject *params, GError **error);
/* Adds what every modern result carries: resultType, _meta's serverInfo, and
 * the cache hints of server/discover and tools/list. */
void sandstep_mcp_modern_finish (JsonNode *result, const char *method);
/* {name, title, version}, for initialize and server/discover. */
JsonObject *sandstep_mcp_server_info (void);
char *sandstep_mcp_instructions (SandstepMcpServer *server);

/* Called with one reply, or NULL when the message needs none. */
typedef void (*SandstepMcpReplyTo) (SandstepMcpServer *server, const char *reply, gpointer user_data);

/* Handles one parsed message; @reply runs once, now or when a tool call ends. */
void sandstep_mcp_handle_node (SandstepMcpServer *server, JsonNode *root, SandstepMcpReplyTo reply,
                               gpointer user_data);
/* Answers a message that is not JSON. */
void sandstep_mcp_handle_parse_error (SandstepMcpServer *server, const GError *parse_error, SandstepMcpReplyTo reply,
                                      gpointer user_data);
/* One message as JSON: UTF-8, not empty. */
JsonNode *sandstep_mcp_parse_message (const char *message, gsize length, GError **error);
/* "Parse error: the message is not JSON (...)". */
char *sandstep_mcp_parse_error_message (const GError *parse_error);
/* A JSON-RPC error response; @id NULL: the request's id is not known. */
/* The message @node as text, always UTF-8 (sandstep-mcp-message.c). */
char *sandstep_mcp_to_json (JsonNode *node);
char *sandstep_mcp_response_error (JsonNode *id, int code, const char *message);
/* Whether @id (NULL: none) is one a reply may echo: a string or an integer. */
gboolean sandstep_mcp_id_is_valid (JsonNode *id);
/* The same with error.data (copied). */
char *sandstep_mcp_response_error_data (JsonNode *id, int code, const char *message, JsonNode *data);
/* After a reply went out: ends the server once a terminal failure is answered. */
void sandstep_mcp_reply_delivered (SandstepMcpServer *server, gboolean was_terminal);
gboolean sandstep_mcp_version_is_supported (const char *version);
/* The string member @name of @object, or NULL when it is absent or not a string. */
const char *sandstep_mcp_member_string (JsonObject *object, const char *name);

G_END_DECLS
