/* sandstep-http-guard.h: the connections of an HTTP server, guarded against slow and idle clients.
 *
 * sandstepd and the MCP server over HTTP (`sandstep mcp --http`, `sandstep
 * tools`) accept their connections here and hand each to their SoupServer
 * (soup_server_accept_iostream), rather than letting SoupServer listen:
 * libsoup before 3.4 leaks a GSocket for every connection its own listener
 * accepts (fixed upstream by b545d5f0), and before 3.3 every keep-alive
 * connection a client closes while idle (d20c6601), so ~1,000 idle
 * connections once left a server without descriptors for good.  A server
 * without listeners also closes each connection after its answer, so none
 * idles; every answer says "Connection: close" (set with the request's
 * headers), so that no client sends a second request on it.
 *
 * Slow and hostile clients: a connection must bring its request's headers
 * within the header deadline of being accepted (TLS handshake included), and
 * a body must keep coming (no gap over the idle deadline); else it is shut
 * down.  A connection that has not brought its headers yet is pending: a
 * peer holds at most max_pending_per_peer of them and all peers max_pending,
 * and a new one evicts the oldest, so half-open connections cannot crowd
 * out a client that sends its request at once.  Connections are capped per
 * peer and in all (beyond: closed at once), and when file descriptors run
 * out, accepting backs off (100 ms doubling to 2 s) and the oldest pending
 * connection is evicted, instead of spinning on a listening socket that
 * stays readable.
 */
#pragma once

#include <gio/gio.h>
#include <libsoup/soup.h>

G_BEGIN_DECLS

typedef struct {
  guint header_timeout_s;        /* from accept to the request's last header */
  guint idle_timeout_s;          /* the longest gap in a body */
  guint max_connections;
  guint max_connections_per_peer;
  guint max_pending;             /* connections without their headers yet */
  guint max_pending_per_peer;
  GTlsCertificate *certificate;  /* serve TLS; NULL: plain HTTP */
  gboolean debug;                /* say why each connection is closed */
  /* Where the guard's lines go (one line, no newline); NULL: g_debug(). */
  void (*say) (const char *line);
} SandstepHttpGuardConfig;

typedef struct _SandstepHttpGuard SandstepHttpGuard;

/* Accepts on @listener (bound and listening) from the thread-default main
 * context, for @server, by @config (copied; the certificate is referenced). */
SandstepHttpGuard *sandstep_http_guard_new (SoupServer *server, GSocket *listener,
                                            const SandstepHttpGuardConfig *config);
/* Stops accepting; connections already handed to the server stay its own. */
void sandstep_http_guard_free (SandstepHttpGuard *guard);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepHttpGuard, sandstep_http_guard_free)

/* Connections open now (for tests and logs). */
guint sandstep_http_guard_count (const SandstepHttpGuard *guard);
/* The socket it accepts on (NULL once freed): what the server listens on. */
GSocket *sandstep_http_guard_listener (const SandstepHttpGuard *guard);

/* The connection's socket, for TCP_NODELAY and to notice a peer that hangs up. */
GSocket *sandstep_http_guard_message_socket (SoupServerMessage *msg);
/* A request's headers are in (its body deadline starts); a body chunk came; the body is in. */
void sandstep_http_guard_got_headers (SoupServerMessage *msg);
void sandstep_http_guard_body_progress (SoupServerMessage *msg);
void sandstep_http_guard_body_done (SoupServerMessage *msg);

G_END_DECLS
