/* sandstepd-envd-connect.c: the Connect protocol as E2B's envd speaks it: envelopes, events, the end of a
 * stream, and the errors of a streaming or a unary call (sandstepd-envd.c says how the SDK calls envd).
 * sandstepd-envd.c, -envd-job.c and -envd-commands.c frame their answers here; it calls no envd file, so the
 * calls go one way (docs/architecture.md).
 */
#include "sandstepd-private.h"
#include "sandstepd-envd.h"
#include "sandstepd-e2b-answer.h"

#include <signal.h>
#include <string.h>

#include "sandstep-error.h"
#include "sandstep-wire.h"

#define ENVELOPE_HEADER 5
#define FLAG_COMPRESSED 0x01
#define FLAG_END_STREAM 0x02

/* ---- Connect's envelopes ---- */

static char *
envelope (guint8 flags, const char *payload, gsize len, gsize *out_len)
{
  char *out = g_malloc (ENVELOPE_HEADER + len);

  out[0] = (char) flags;
  out[1] = (char) ((len >> 24) & 0xff);
  out[2] = (char) ((len >> 16) & 0xff);
  out[3] = (char) ((len >> 8) & 0xff);
  out[4] = (char) (len & 0xff);
  memcpy (out + ENVELOPE_HEADER, payload, len);
  *out_len = ENVELOPE_HEADER + len;
  return out;
}

static char *
envelope_object (guint8 flags, JsonObject *object, gsize *out_len)
{
  gsize len = 0;
  g_autofree char *text = sandstep_wire_to_text (object, &len);

  return envelope (flags, text, len, out_len);
}

/* The one message of a streaming request's @body: uncompressed, its length what the envelope says, nothing
 * after it (the body's size is bounded already, SANDSTEPD_MAX_JSON_BODY). */
JsonObject *
sandstepd_envd_read_envelope (const guint8 *body, gsize len, GError **error)
{
  guint32 n;

  if (len < ENVELOPE_HEADER)
    {
      g_set_error (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                   "The request's body of %" G_GSIZE_FORMAT " bytes is shorter than Connect's 5-byte envelope; "
                   "send one enveloped JSON message", len);
      return NULL;
    }
  if (body[0] != 0)
    {
      g_set_error (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                   "The request's envelope has flags '0x%02x'; send one uncompressed message (flags 0)%s", body[0],
                   (body[0] & FLAG_COMPRESSED) ? ": sandstepd takes no compressed messages" : "");
      return NULL;
    }
  n = ((guint32) body[1] << 24) | ((guint32) body[2] << 16) | ((guint32) body[3] << 8) | body[4];
  if ((gsize) n != len - ENVELOPE_HEADER)
    {
      g_set_error (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                   "The request's envelope says '%" G_GUINT32_FORMAT "' bytes, and %" G_GSIZE_FORMAT
                   " follow it; send one message whose length the envelope gives", n, len - ENVELOPE_HEADER);
      return NULL;
    }
  return sandstep_wire_parse_object ((const char *) body + ENVELOPE_HEADER, n, error);
}

/* Connect's code for a sandbox's or a request's error. */
const char *
sandstepd_envd_connect_code (const GError *error)
{
  if (error->domain == SANDSTEP_SANDBOX_ERROR &&
      (error->code == SANDSTEP_SANDBOX_ERROR_NOT_FOUND || error->code == SANDSTEP_SANDBOX_ERROR_NOT_OWNER ||
       error->code == SANDSTEP_SANDBOX_ERROR_EXPIRED))
    return "not_found";
  if (error->domain == SANDSTEP_SANDBOX_ERROR && error->code == SANDSTEP_SANDBOX_ERROR_BUSY)
    return "aborted";
  if (error->domain == SANDSTEP_USAGE_ERROR)
    return "invalid_argument";
  return "internal";
}

char *
sandstepd_envd_end_stream (const char *code, const char *message, gsize *out_len)
{
  g_autoptr(JsonObject) end = json_object_new ();

  if (code != NULL)
    {
      JsonObject *e = json_object_new ();
      json_object_set_string_member (e, "code", code);
      json_object_set_string_member (e, "message", message);
      json_object_set_object_member (end, "error", e);
    }
  return envelope_object (FLAG_END_STREAM, end, out_len);
}

/* A streaming call's error before anything streamed: HTTP 200 and the error in the end of the stream, as
 * Connect answers it. */
void
sandstepd_envd_answer_stream_error (Request *req, const char *code, const char *message)
{
  gsize len = 0;
  char *bytes = sandstepd_envd_end_stream (code, message, &len);

  sandstepd_e2b_answer (req, SOUP_STATUS_OK, CONNECT_STREAM_TYPE, bytes, len);
}

char *
sandstepd_envd_message (JsonObject *message, gsize *out_len)
{
  return envelope_object (0, message, out_len);
}

/* A process event, {"event": {@kind: @value}}, enveloped. */
char *
sandstepd_envd_event (const char *kind, JsonObject *value, gsize *out_len)
{
  g_autoptr(JsonObject) message = json_object_new ();
  JsonObject *e = json_object_new ();

  json_object_set_object_member (e, kind, value);
  json_object_set_object_member (message, "event", e);
  return envelope_object (0, message, out_len);
}

/* The end event of a command, {exitCode, exited, status}, then the end of the stream. */
char *
sandstepd_envd_end_event (int exit_code, gboolean exited, const char *status, gsize *out_len)
{
  JsonObject *end = json_object_new ();
  g_autofree char *end_bytes = NULL;
  g_autofree char *stream_end = NULL;
  gsize end_len = 0, stream_end_len = 0;
  char *out;

  json_object_set_int_member (end, "exitCode", exit_code);
  json_object_set_boolean_member (end, "exited", exited);
  json_object_set_string_member (end, "status", status);
  /* The SDK's CommandExitError says what ended a command that did not exit by itself. */
  if (!exited)
    json_object_set_string_member (end, "error", status);
  end_bytes = sandstepd_envd_event ("end", end, &end_len);
  stream_end = sandstepd_envd_end_stream (NULL, NULL, &stream_end_len);
  out = g_malloc (end_len + stream_end_len);
  memcpy (out, end_bytes, end_len);
  memcpy (out + end_len, stream_end, stream_end_len);
  *out_len = end_len + stream_end_len;
  return out;
}

void
sandstepd_envd_end_killed (Request *req)
{
  gsize len = 0;
  /* As the shell says it (128 + SIGKILL), and as envd's status reads. */
  char *bytes = sandstepd_envd_end_event (128 + SIGKILL, FALSE, "signal: killed", &len);

  /* What the command's own end would write later finds the answer complete, and is dropped. */
  sandstepd_stream_take (req, bytes, len);
  sandstepd_stream_end (req);
}

/* A unary call's error: Connect's HTTP status for @code and {"code", "message"}. */
void
sandstepd_envd_answer_unary_error (Request *req, const char *code, const char *message)
{
  g_autoptr(JsonObject) object = json_object_new ();
  guint status = strcmp (code, "not_found") == 0          ? SOUP_STATUS_NOT_FOUND
                 : strcmp (code, "invalid_argument") == 0 ? SOUP_STATUS_BAD_REQUEST
                 : strcmp (code, "aborted") == 0          ? SOUP_STATUS_CONFLICT
                 : strcmp (code, "failed_precondition") == 0 ? SOUP_STATUS_BAD_REQUEST
                 : strcmp (code, "already_exists") == 0   ? SOUP_STATUS_CONFLICT
                 : strcmp (code, "deadline_exceeded") == 0 ? SOUP_STATUS_GATEWAY_TIMEOUT
                 : strcmp (code, "unimplemented") == 0    ? SOUP_STATUS_NOT_FOUND
                 : strcmp (code, "resource_exhausted") == 0 ? 429
                                                          : SOUP_STATUS_INTERNAL_SERVER_ERROR;

  json_object_set_string_member (object, "code", code);
  json_object_set_string_member (object, "message", message);
  sandstepd_answer_json (req, status, object);
}
