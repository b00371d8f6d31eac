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
  guint start_idle;          /* the source that starts the next call */

  /* stdio */
  GDataInputStream *stdio_in;
  GOutputStream *stdio_out;
  GCancellable *cancellable;

  /* Streamable HTTP */
  SoupServer *http;
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

/* Newest first; the first is the answer to a version we do not know. */
extern const char *const sandstep_mcp_protocol_versions[4];

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
char *sandstep_mcp_response_error (JsonNode *id, int code, const char *message);
/* After a reply went out: ends the server once a terminal failure is answered. */
void sandstep_mcp_reply_delivered (SandstepMcpServer *server, gboolean was_terminal);
gboolean sandstep_mcp_version_is_supported (const char *version);
/* The string member @name of @object, or NULL when it is absent or not a string. */
const char *sandstep_mcp_member_string (JsonObject *object, const char *name);

G_END_DECLS
