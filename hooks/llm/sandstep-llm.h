/* sandstep-llm.h: a client for OpenAI-compatible chat completions.
 *
 * POST {base}/chat/completions with a JSON body, synchronous (the helper does
 * one thing at a time), through libsoup 3.  Retries, with exponential backoff
 * or the server's Retry-After when that is short, on 408, 409, 429, 5xx and
 * connection errors (the rule of the openai SDK); any other 4xx fails at
 * once with the server's error.message quoted.  The API key goes only into the Authorization header:
 * it is never logged, and no request body is logged above debug level.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

#define SANDSTEP_LLM_DEFAULT_BASE_URL "https://api.openai.com/v1"

#define SANDSTEP_LLM_ERROR (sandstep_llm_error_quark ())
typedef enum {
  SANDSTEP_LLM_ERROR_CONFIG,        /* the base URL is not an http(s) URL */
  SANDSTEP_LLM_ERROR_REFUSED,       /* a 4xx that retrying cannot fix; the message quotes the server's */
  SANDSTEP_LLM_ERROR_UNAVAILABLE,   /* still failing (408/409/429/5xx, connection) after every retry */
  SANDSTEP_LLM_ERROR_BAD_RESPONSE,  /* the reply is not a chat completion */
  SANDSTEP_LLM_ERROR_DEADLINE,      /* the caller's deadline came first */
} SandstepLlmError;

GQuark sandstep_llm_error_quark (void);

typedef struct {
  const char *base_url;       /* NULL: $OPENAI_BASE_URL, else SANDSTEP_LLM_DEFAULT_BASE_URL */
  const char *api_key;        /* NULL: $OPENAI_API_KEY; none at all: no Authorization header */
  guint max_retries;          /* retries after the first attempt; default 4 */
  double initial_backoff_s;   /* default 0.5, doubled on each retry ... */
  double max_backoff_s;       /* ... up to this; default 8 */
  double max_retry_after_s;   /* a Retry-After up to this is honoured, else backoff; default 60 */
  double request_timeout_s;   /* one attempt, from send to the last byte; default 600 */
} SandstepLlmOptions;

void sandstep_llm_options_init (SandstepLlmOptions *options);

/* Told before each retry: the attempt that failed (1-based), its HTTP status
 * (0 for a connection error), why, and how long the client waits. */
typedef void (*SandstepLlmRetryFunc) (guint attempt, guint status, const char *reason, double delay_s,
                                      gpointer user_data);

typedef struct _SandstepLlm SandstepLlm;

SandstepLlm *sandstep_llm_new (const SandstepLlmOptions *options, GError **error);
void sandstep_llm_free (SandstepLlm *llm);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepLlm, sandstep_llm_free)

/* The URL requests go to ({base}/chat/completions). */
const char *sandstep_llm_get_url (SandstepLlm *llm);

void sandstep_llm_set_retry_func (SandstepLlm *llm, SandstepLlmRetryFunc func, gpointer user_data);

/* POSTs @request and returns the reply, checked to hold choices[0].message
 * (an object).  Nothing runs past @deadline_us (g_get_monotonic_time() clock;
 * 0: none): a request in flight is cancelled and a wait cut short, with
 * SANDSTEP_LLM_ERROR_DEADLINE.  *out_attempts (may be NULL) gets the number of
 * attempts made. */
JsonObject *sandstep_llm_chat (SandstepLlm *llm, JsonObject *request, gint64 deadline_us, guint *out_attempts,
                               GError **error);

/* The OpenAI "tools" array for MCP-style tool definitions (name, description,
 * inputSchema): {"type": "function", "function": {"name", "description",
 * "parameters": inputSchema}}. */
JsonArray *sandstep_llm_tools_from_definitions (JsonArray *definitions);

/* The delay a Retry-After header asks for, in seconds: "retry-after-ms", or
 * "Retry-After" as seconds or an HTTP date; -1 when absent or unreadable.
 * @now_unix is the current time, for dates. */
double sandstep_llm_parse_retry_after (const char *retry_after_ms, const char *retry_after, gint64 now_unix);

G_END_DECLS
