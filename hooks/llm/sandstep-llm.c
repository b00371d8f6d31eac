/* sandstep-llm.c: an OpenAI-compatible chat-completions client (libsoup 3). */
#include "sandstep-llm.h"

#include <libsoup/soup.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sandstep-json.h"

/* No chat completion is bigger. */
#define MAX_REPLY_BYTES (64 * 1024 * 1024)

G_DEFINE_QUARK (sandstep-llm-error-quark, sandstep_llm_error)

struct _SandstepLlm {
  SoupSession *session;
  char *url;
  char *authorization;        /* "Bearer KEY", or NULL */
  SandstepLlmOptions options;
  SandstepLlmRetryFunc retry_func;
  gpointer retry_data;
};

void
sandstep_llm_options_init (SandstepLlmOptions *options)
{
  memset (options, 0, sizeof *options);
  options->max_retries = 4;
  options->initial_backoff_s = 0.5;
  options->max_backoff_s = 8;
  options->max_retry_after_s = 60;
  options->request_timeout_s = 600;
}

SandstepLlm *
sandstep_llm_new (const SandstepLlmOptions *options, GError **error)
{
  g_autoptr(SandstepLlm) llm = g_new0 (SandstepLlm, 1);
  g_autoptr(GUri) uri = NULL;
  g_autofree char *base = NULL;
  const char *key;

  if (options != NULL)
    llm->options = *options;
  else
    sandstep_llm_options_init (&llm->options);

  base = g_strdup (llm->options.base_url != NULL ? llm->options.base_url : g_getenv ("OPENAI_BASE_URL"));
  if (base == NULL || base[0] == '\0')
    {
      g_free (base);
      base = g_strdup (SANDSTEP_LLM_DEFAULT_BASE_URL);
    }
  g_strstrip (base);
  while (g_str_has_suffix (base, "/"))
    base[strlen (base) - 1] = '\0';
  uri = g_uri_parse (base, G_URI_FLAGS_NONE, NULL);
  if (uri == NULL || (g_strcmp0 (g_uri_get_scheme (uri), "http") != 0 &&
                      g_strcmp0 (g_uri_get_scheme (uri), "https") != 0) ||
      g_uri_get_host (uri) == NULL || g_uri_get_host (uri)[0] == '\0')
    {
      g_set_error (error, SANDSTEP_LLM_ERROR, SANDSTEP_LLM_ERROR_CONFIG,
                   "The chat endpoint's base URL '%s' is not an http:// or https:// URL; set OPENAI_BASE_URL to "
                   "one such as https://api.openai.com/v1 or http://127.0.0.1:8000/v1", base);
      return NULL;
    }
  llm->url = g_strconcat (base, "/chat/completions", NULL);

  key = llm->options.api_key != NULL ? llm->options.api_key : g_getenv ("OPENAI_API_KEY");
  if (key != NULL && key[0] != '\0')
    llm->authorization = g_strconcat ("Bearer ", key, NULL);

  llm->session = soup_session_new_with_options ("user-agent", "sandstep", "timeout",
                                                (guint) MIN (ceil (llm->options.request_timeout_s), G_MAXUINT),
                                                NULL);
  /* The strings the options pointed at may not live on. */
  llm->options.base_url = NULL;
  llm->options.api_key = NULL;
  return g_steal_pointer (&llm);
}

void
sandstep_llm_free (SandstepLlm *llm)
{
  if (llm == NULL)
    return;
  if (llm->session != NULL)
    soup_session_abort (llm->session);
  g_clear_object (&llm->session);
  g_free (llm->url);
  if (llm->authorization != NULL)
    explicit_bzero (llm->authorization, strlen (llm->authorization));
  g_free (llm->authorization);
  g_free (llm);
}

const char *
sandstep_llm_get_url (SandstepLlm *llm)
{
  return llm->url;
}

void
sandstep_llm_set_retry_func (SandstepLlm *llm, SandstepLlmRetryFunc func, gpointer user_data)
{
  llm->retry_func = func;
  llm->retry_data = user_data;
}

JsonArray *
sandstep_llm_tools_from_definitions (JsonArray *definitions)
{
  JsonArray *tools = json_array_new ();

  for (guint i = 0; i < json_array_get_length (definitions); i++)
    {
      JsonObject *definition = json_array_get_object_element (definitions, i);
      JsonObject *tool = json_object_new ();
      JsonObject *function = json_object_new ();
      JsonNode *schema = json_object_get_member (definition, "inputSchema");

      json_object_set_string_member (function, "name", json_object_get_string_member (definition, "name"));
      if (json_object_has_member (definition, "description"))
        json_object_set_string_member (function, "description",
                                       json_object_get_string_member (definition, "description"));
      if (schema != NULL)
        json_object_set_member (function, "parameters", json_node_copy (schema));
      json_object_set_string_member (tool, "type", "function");
      json_object_set_object_member (tool, "function", function);
      json_array_add_object_element (tools, tool);
    }
  return tools;
}

double
sandstep_llm_parse_retry_after (const char *retry_after_ms, const char *retry_after, gint64 now_unix)
{
  char *end = NULL;
  double value;

  if (retry_after_ms != NULL)
    {
      value = g_ascii_strtod (retry_after_ms, &end);
      if (end != retry_after_ms && *end == '\0' && isfinite (value) && value >= 0)
        return value / 1000.0;
    }
  if (retry_after != NULL)
    {
      g_autoptr(GDateTime) date = NULL;

      value = g_ascii_strtod (retry_after, &end);
      if (end != retry_after && *end == '\0' && isfinite (value) && value >= 0)
        return value;
      date = soup_date_time_new_from_http_string (retry_after);
      if (date != NULL)
        return MAX ((double) (g_date_time_to_unix (date) - now_unix), 0);
    }
  return -1;
}

/* ---- a deadline for a blocking send ---- */

typedef struct {
  GMutex lock;
  GCond cond;
  gboolean done;
  gint64 deadline_us;
  GCancellable *cancellable;
} Watchdog;

static gpointer
watchdog_thread (gpointer data)
{
  Watchdog *dog = data;

  g_mutex_lock (&dog->lock);
  while (!dog->done)
    if (!g_cond_wait_until (&dog->cond, &dog->lock, dog->deadline_us))
      {
        if (!dog->done)
          g_cancellable_cancel (dog->cancellable);
        break;
      }
  g_mutex_unlock (&dog->lock);
  return NULL;
}

/* ---- one attempt ---- */

typedef enum {
  ATTEMPT_OK,
  ATTEMPT_RETRY,     /* worth another try: *out_reason says why */
  ATTEMPT_FAILED,    /* *error set */
} AttemptResult;

static char *
error_message_of (GBytes *body)
{
  gsize len = 0;
  const char *data = body != NULL ? g_bytes_get_data (body, &len) : NULL;
  g_autoptr(JsonNode) root = NULL;

  if (data == NULL || len == 0)
    return g_strdup ("(empty reply)");
  root = sandstep_json_parse (data, len, MAX_REPLY_BYTES, NULL);
  if (root != NULL && JSON_NODE_HOLDS_OBJECT (root))
    {
      JsonObject *object = json_node_get_object (root);
      JsonNode *err = json_object_get_member (object, "error");

      if (err != NULL && JSON_NODE_HOLDS_OBJECT (err) &&
          json_object_has_member (json_node_get_object (err), "message"))
        {
          const char *message = json_object_get_string_member_with_default (json_node_get_object (err), "message",
                                                                              NULL);
          if (message != NULL)
            return g_strdup (message);
        }
      if (err != NULL && JSON_NODE_HOLDS_VALUE (err) && json_node_get_value_type (err) == G_TYPE_STRING)
        return g_strdup (json_node_get_string (err));
    }
  /* Not the OpenAI shape: the start of the body, on one line. */
  {
    char *text = g_utf8_make_valid (data, MIN (len, 300));

    for (char *p = text; *p != '\0'; p++)
      if ((guchar) *p < 0x20)
        *p = ' ';
    g_strstrip (text);
    if (len > 300)
      {
        char *longer = g_strconcat (text, "...", NULL);
        g_free (text);
        text = longer;
      }
    return text;
  }
}

/* libsoup's table lacks some that chat APIs use (429, 422). */
static const char *
status_phrase (guint status)
{
  const char *phrase;

  switch (status)
    {
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 529: return "Overloaded";
    default:
      phrase = soup_status_get_phrase (status);
      return phrase != NULL && strcmp (phrase, "Unknown Error") != 0 ? phrase : "?";
    }
}

static gboolean
is_retryable_status (guint status)
{
  return status == 408 || status == 409 || status == 429 || status >= 500;
}

static const char *
hint_for_status (guint status)
{
  switch (status)
    {
    case 401:
    case 403:
      return " (check OPENAI_API_KEY)";
    case 404:
      return " (check OPENAI_BASE_URL, which usually ends in /v1, and the model name)";
    default:
      return "";
    }
}

static gboolean
check_completion (JsonNode *root, const char *url, GError **error)
{
  JsonObject *object;
  JsonArray *choices;
  JsonNode *message;

  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    goto bad;
  object = json_node_get_object (root);
  if (!json_object_has_member (object, "choices") ||
      !JSON_NODE_HOLDS_ARRAY (json_object_get_member (object, "choices")))
    goto bad;
  choices = json_object_get_array_member (object, "choices");
  if (json_array_get_length (choices) == 0 || !JSON_NODE_HOLDS_OBJECT (json_array_get_element (choices, 0)))
    goto bad;
  message = json_object_get_member (json_array_get_object_element (choices, 0), "message");
  if (message == NULL || !JSON_NODE_HOLDS_OBJECT (message))
    goto bad;
  return TRUE;

bad:
  g_set_error (error, SANDSTEP_LLM_ERROR, SANDSTEP_LLM_ERROR_BAD_RESPONSE,
               "The chat endpoint '%s' answered with something that is not a chat completion (no "
               "choices[0].message); is OPENAI_BASE_URL an OpenAI-compatible API?", url);
  return FALSE;
}


/* Sends @msg and reads the whole reply, up to MAX_REPLY_BYTES (over it:
 * *out_too_large).  Our own loop rather than soup_session_send_and_read(),
 * which leaks its buffer when cancelled (libsoup 3.2). */
static GBytes *
send_and_read (SoupSession *session, SoupMessage *msg, GCancellable *cancellable, gboolean *out_too_large,
               GError **error)
{
  g_autoptr(GInputStream) in = soup_session_send (session, msg, cancellable, error);
  g_autoptr(GByteArray) buffer = NULL;

  *out_too_large = FALSE;
  if (in == NULL)
    return NULL;
  buffer = g_byte_array_new ();
  for (;;)
    {
      guint old = buffer->len;
      gssize n;

      if (old >= MAX_REPLY_BYTES)
        {
          *out_too_large = TRUE;
          g_input_stream_close (in, NULL, NULL);
          return NULL;
        }
      g_byte_array_set_size (buffer, old + 65536);
      n = g_input_stream_read (in, buffer->data + old, 65536, cancellable, error);
      g_byte_array_set_size (buffer, old + MAX (n, 0));
      if (n < 0)
        {
          g_input_stream_close (in, NULL, NULL);
          return NULL;
        }
      if (n == 0)
        break;
    }
  if (!g_input_stream_close (in, cancellable, error))
    return NULL;
  return g_byte_array_free_to_bytes (g_steal_pointer (&buffer));
}

static AttemptResult
attempt (SandstepLlm *llm, GBytes *body, gint64 deadline_us, guint *out_status, char **out_reason,
         double *out_retry_after, JsonObject **out_response, GError **error)
{
  g_autoptr(SoupMessage) msg = soup_message_new ("POST", llm->url);
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autoptr(GError) local = NULL;
  g_autoptr(GBytes) reply = NULL;
  g_autoptr(JsonNode) root = NULL;
  SoupMessageHeaders *headers;
  gint64 attempt_deadline = g_get_monotonic_time () + (gint64) (llm->options.request_timeout_s * G_USEC_PER_SEC);
  gboolean overall = FALSE;
  Watchdog dog = { 0 };
  GThread *thread;
  guint status;
  gboolean too_large = FALSE;

  *out_status = 0;
  *out_retry_after = -1;
  if (deadline_us > 0 && deadline_us <= attempt_deadline)
    {
      attempt_deadline = deadline_us;
      overall = TRUE;
    }
  if (msg == NULL)
    {
      g_set_error (error, SANDSTEP_LLM_ERROR, SANDSTEP_LLM_ERROR_CONFIG, "Cannot make a request to '%s'", llm->url);
      return ATTEMPT_FAILED;
    }
  headers = soup_message_get_request_headers (msg);
  soup_message_headers_replace (headers, "Accept", "application/json");
  if (llm->authorization != NULL)
    soup_message_headers_replace (headers, "Authorization", llm->authorization);
  soup_message_set_request_body_from_bytes (msg, "application/json", body);

  g_mutex_init (&dog.lock);
  g_cond_init (&dog.cond);
  dog.deadline_us = attempt_deadline;
  dog.cancellable = cancellable;
  thread = g_thread_new ("sandstep-llm-deadline", watchdog_thread, &dog);
  reply = send_and_read (llm->session, msg, cancellable, &too_large, &local);
  g_mutex_lock (&dog.lock);
  dog.done = TRUE;
  g_cond_signal (&dog.cond);
  g_mutex_unlock (&dog.lock);
  g_thread_join (thread);
  g_mutex_clear (&dog.lock);
  g_cond_clear (&dog.cond);

  if (too_large)
    {
      g_set_error (error, SANDSTEP_LLM_ERROR, SANDSTEP_LLM_ERROR_BAD_RESPONSE,
                   "The chat endpoint '%s' sent a reply over %d MiB; that is no chat completion", llm->url,
                   MAX_REPLY_BYTES / (1024 * 1024));
      return ATTEMPT_FAILED;
    }
  if (reply == NULL)
    {
      if (g_cancellable_is_cancelled (cancellable) && overall)
        {
          g_set_error (error, SANDSTEP_LLM_ERROR, SANDSTEP_LLM_ERROR_DEADLINE,
                       "The time budget ran out while waiting for the chat endpoint '%s'", llm->url);
          return ATTEMPT_FAILED;
        }
      if (g_cancellable_is_cancelled (cancellable))
        {
          *out_reason = g_strdup_printf ("no complete reply within %gs", llm->options.request_timeout_s);
          return ATTEMPT_RETRY;
        }
      if (local->domain == G_TLS_ERROR)
        {
          g_set_error (error, SANDSTEP_LLM_ERROR, SANDSTEP_LLM_ERROR_UNAVAILABLE,
                       "Cannot reach the chat endpoint '%s' securely: %s", llm->url, local->message);
          return ATTEMPT_FAILED;
        }
      *out_reason = g_strdup (local->message);
      return ATTEMPT_RETRY;
    }

  status = soup_message_get_status (msg);
  *out_status = status;
  if (status < 200 || status >= 300)
    {
      g_autofree char *message = error_message_of (reply);
      SoupMessageHeaders *response_headers = soup_message_get_response_headers (msg);
      const char *should_retry = soup_message_headers_get_one (response_headers, "x-should-retry");
      gboolean retry = is_retryable_status (status);

      if (should_retry != NULL)
        retry = g_ascii_strcasecmp (should_retry, "true") == 0;
      if (retry)
        {
          *out_retry_after =
            sandstep_llm_parse_retry_after (soup_message_headers_get_one (response_headers, "retry-after-ms"),
                                            soup_message_headers_get_one (response_headers, "retry-after"),
                                            g_get_real_time () / G_USEC_PER_SEC);
          *out_reason = g_strdup_printf ("HTTP %u (%s): %s", status, status_phrase (status), message);
          return ATTEMPT_RETRY;
        }
      g_set_error (error, SANDSTEP_LLM_ERROR, SANDSTEP_LLM_ERROR_REFUSED,
                   "The chat endpoint '%s' refused the request with HTTP %u (%s): \"%s\"%s", llm->url, status,
                   status_phrase (status), message, hint_for_status (status));
      return ATTEMPT_FAILED;
    }

  {
    gsize len = 0;
    const char *data = g_bytes_get_data (reply, &len);
    g_autoptr(GError) parse_error = NULL;

    /* Depth and size checked before json-glib recurses into it. */
    if (data == NULL || (root = sandstep_json_parse (data, len, MAX_REPLY_BYTES, &parse_error)) == NULL)
      {
        g_set_error (error, SANDSTEP_LLM_ERROR, SANDSTEP_LLM_ERROR_BAD_RESPONSE,
                     "The chat endpoint '%s' answered HTTP %u with a body that is not JSON (%s)", llm->url, status,
                     parse_error != NULL ? parse_error->message : "empty");
        return ATTEMPT_FAILED;
      }
  }
  if (!check_completion (root, llm->url, error))
    return ATTEMPT_FAILED;
  *out_response = json_object_ref (json_node_get_object (root));
  return ATTEMPT_OK;
}

JsonObject *
sandstep_llm_chat (SandstepLlm *llm, JsonObject *request, gint64 deadline_us, guint *out_attempts, GError **error)
{
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  g_autoptr(GBytes) body = NULL;
  g_autofree char *text = NULL;
  gsize len = 0;
  double backoff = llm->options.initial_backoff_s;

  json_node_set_object (node, request);
  text = json_to_string (node, FALSE);
  len = strlen (text);
  body = g_bytes_new_take (g_steal_pointer (&text), len);
  g_debug ("POST %s (%" G_GSIZE_FORMAT " bytes)", llm->url, len);

  for (guint n = 1;; n++)
    {
      g_autofree char *reason = NULL;
      JsonObject *response = NULL;
      guint status = 0;
      double retry_after = -1, delay;
      AttemptResult result;

      if (out_attempts != NULL)
        *out_attempts = n;
      result = attempt (llm, body, deadline_us, &status, &reason, &retry_after, &response, error);
      if (result == ATTEMPT_OK)
        return response;
      if (result == ATTEMPT_FAILED)
        return NULL;
      if (n > llm->options.max_retries)
        {
          g_set_error (error, SANDSTEP_LLM_ERROR, SANDSTEP_LLM_ERROR_UNAVAILABLE,
                       "The chat endpoint '%s' still failed after %u attempts: %s", llm->url, n, reason);
          return NULL;
        }
      delay = (retry_after >= 0 && retry_after <= llm->options.max_retry_after_s) ? retry_after : backoff;
      backoff = MIN (backoff * 2, llm->options.max_backoff_s);
      if (deadline_us > 0 && g_get_monotonic_time () + (gint64) (delay * G_USEC_PER_SEC) >= deadline_us)
        {
          g_set_error (error, SANDSTEP_LLM_ERROR, SANDSTEP_LLM_ERROR_DEADLINE,
                       "The time budget ran out while the chat endpoint '%s' was failing: %s", llm->url, reason);
          return NULL;
        }
      g_debug ("attempt %u failed (%s); retrying in %.1fs", n, reason, delay);
      if (llm->retry_func != NULL)
        llm->retry_func (n, status, reason, delay, llm->retry_data);
      if (delay > 0)
        g_usleep ((gulong) (delay * G_USEC_PER_SEC));
    }
}
