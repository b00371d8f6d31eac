/* sandstep-wire.h: what sandstepd and its clients agree on.
 *
 * An error crosses the wire as one JSON object:
 *   {"code": "not-owner", "message": "...", "hint": "...",
 *    "domain": "sandstep-sandbox-error-quark", "error_code": 2}
 * with the HTTP status of its kind; "code" and "hint" are for people and
 * scripts, "domain" and "error_code" rebuild the very GError the server's
 * local backend raised, so the client exits with the same status.  Readers
 * ignore members they do not know.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

#define SANDSTEP_API_PREFIX "/v1"
/* Header naming the claim on raw-body requests (write, put); JSON requests carry "claim". */
#define SANDSTEP_CLAIM_HEADER "X-Sandstep-Claim"
/* Seconds between keepalive lines on long responses (claims, commands, exports). */
#define SANDSTEP_KEEPALIVE_S 10

/* The error object for @error; @holder (the current holder) is added for a busy sandbox. */
JsonNode *sandstep_wire_error_to_json (const GError *error, const char *holder);
/* The HTTP status for @error's kind. */
guint sandstep_wire_error_status (const GError *error);
/* The short code ("not-owner") and the hint for @error's kind. */
const char *sandstep_wire_error_code (const GError *error);

/* The GError an error object stands for (never NULL); an object without a
 * known domain becomes SANDSTEP_SANDBOX_ERROR_STATE with its message.
 * @out_holder: the "holder" member, if any. */
GError *sandstep_wire_error_from_json (JsonNode *node, guint http_status, char **out_holder);

/* Parses @data as one JSON object. */
JsonObject *sandstep_wire_parse_object (const char *data, gsize len, GError **error);

/* Fills @out with the SHA-256 of @token, for comparisons that take the same time whatever matches. */
void sandstep_wire_token_digest (const char *token, guint8 out[32]);
/* Constant-time comparison of two digests. */
gboolean sandstep_wire_digest_equal (const guint8 a[32], const guint8 b[32]);

/* The token in @path: its first line, surrounding whitespace removed; an
 * empty or unreadable file is an error naming @path (never the contents). */
char *sandstep_wire_read_token_file (const char *path, GError **error);

G_END_DECLS
