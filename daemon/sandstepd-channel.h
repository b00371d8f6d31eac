/* sandstepd-channel.h: messages between sandstepd and its workers.
 *
 * Each claim is served by one worker process (sandstepd-worker.c) that holds
 * the claim exactly as a `sandstep` helper would, so the local backend's
 * rules (one command per sandbox at a time, a destroy that kills the holder,
 * a claim that dies with its process) hold unchanged.  They talk over a
 * SOCK_SEQPACKET socket pair: one message is one JSON object, with up to
 * SANDSTEPD_CHANNEL_MAX_FDS file descriptors riding along (SCM_RIGHTS); a
 * message too long for one packet travels in a sealed memfd instead.
 *
 *   daemon -> worker  {"op": "attach"|"run"|"read"|"write"|"put"|"list"|"export"|"detach", "id": N, ...}
 *                     {"op": "cancel", "id": N}     kill what op N runs, at once
 *   worker -> daemon  {"ready": true}               once, at start
 *                     {"id": N, ...result...} or {"id": N, "error": {wire error}}
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

#define SANDSTEPD_CHANNEL_MAX_FDS 4

/* Sends @message and @fds (which stay open here).  Blocks at most @timeout_ms when the peer is slow. */
gboolean sandstepd_channel_send (int sock, JsonNode *message, const int *fds, guint n_fds, int timeout_ms,
                              GError **error);
gboolean sandstepd_channel_send_object (int sock, JsonObject *object, const int *fds, guint n_fds, int timeout_ms,
                                     GError **error);

/* Receives one message (blocking unless the socket is non-blocking: then
 * FALSE with G_IO_ERROR_WOULD_BLOCK).  At the end of the stream returns FALSE
 * with @error unset.  Received fds are close-on-exec; the caller owns them. */
gboolean sandstepd_channel_recv (int sock, JsonObject **out_message, int *out_fds, guint *out_n_fds, GError **error);

G_END_DECLS
