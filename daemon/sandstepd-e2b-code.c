/* sandstepd-e2b-code.c: the code interpreter's runCode (npm @e2b/code-interpreter) on sandstepd's sandboxes.
 *
 * The SDK POSTs {code, language, context_id, env_vars} to /execute on the sandbox's port 49999 (with
 * E2B_SANDBOX_URL set: to sandstepd, naming the sandbox and port in E2b-Sandbox-Id and E2b-Sandbox-Port) and
 * reads the answer as JSON lines: stdout, stderr, result, error {name, value, traceback}, end_of_execution.
 *
 * The code runs in run_python's session (operators/sandstep-python.h) through the worker's "python" operation
 * (sandstepd-e2b-code-worker.c), whose output comes back on pipes as it is written and streams out as the SDK's
 * lines.  Python's state lives as long as the session, and the session as long as the worker's claim, so the
 * claim stays between calls.  It ends: when a call's client goes away before its end (the SDK's timeoutMs; the
 * code cannot be stopped alone, so the interpreter goes with the claim); after CODE_IDLE_S without a call; or
 * with the sandbox.  The next call then starts a new interpreter and says so on its stderr.  The claim is E2B's
 * holder's (sandstepd_e2b_holder()), which envd's calls share: they run beside the interpreter, and it beside
 * them; a make step's command waits for them all, as for any claim.
 */
#include "sandstepd-private.h"
#include "sandstepd-e2b-code.h"
#include "sandstepd-e2b-answer.h"

#include <string.h>

#include "sandstep-error.h"
#include "sandstep-python.h"
#include "sandstep-test-hooks.h"
#include "sandstep-wire.h"

#define CODE_PORT "49999"
/* The one code context of a sandbox: its Python session. */
#define CODE_CONTEXT "default"
/* A session with no call for this long gives the sandbox back (its state goes). */
#define CODE_IDLE_S 300
/* How long a session whose interpreter went keeps the note for the next call (then the sandbox is likely gone). */
#define CODE_LOST_KEEP_S (24 * 3600)
/* The SDK shows an error's HTTP reason phrase, not its body (but for 404 and 502): the message goes there too. */
#define MAX_REASON 400

/* ---- the sessions: one claim per sandbox that runs code, kept between calls (main loop only) ---- */

typedef struct {
  char *handle;
  Lease *lease;             /* ref; NULL: no interpreter */
  gboolean attaching;
  guint idle_timer;
  char *lost;               /* why the last interpreter went, for the next call's stderr; NULL: none went */
  gint64 lost_at;           /* when (monotonic) */
} CodeSession;

static GHashTable *sessions;  /* handle -> CodeSession */

/* CODE_IDLE_S, or a test's shorter one (SANDSTEP_TEST_E2B_CODE_IDLE_S, build tree only). */
static guint
idle_s (void)
{
  const char *value = sandstep_test_hook ("SANDSTEP_TEST_E2B_CODE_IDLE_S");
  guint64 n = 0;

  if (value != NULL && g_ascii_string_to_unsigned (value, 10, 1, CODE_IDLE_S, &n, NULL))
    return (guint) n;
  return CODE_IDLE_S;
}

static void
session_free (CodeSession *s)
{
  if (s->idle_timer != 0)
    g_source_remove (s->idle_timer);
  sandstepd_lease_unref (s->lease);
  g_free (s->handle);
  g_free (s->lost);
  g_free (s);
}

/* Drops @s's lease once it ended (its client went away, its worker died, the sandbox went): its interpreter is
 * gone, which the next call says. */
static void
session_check (CodeSession *s)
{
  if (s->lease == NULL || (!s->lease->ended && s->lease->worker != NULL))
    return;
  if (s->lost == NULL)
    {
      s->lost = g_strdup ("a call's client went away before its end (the SDK's timeoutMs), or the sandbox's claim "
                          "ended on the server");
      s->lost_at = g_get_monotonic_time ();
    }
  g_clear_pointer (&s->lease, sandstepd_lease_unref);
}

static gboolean on_idle (gpointer data);

/* Idle is counted from now: the end of the last call (or the start of one, which ends later). */
static void
session_arm_idle (CodeSession *s)
{
  if (s->idle_timer != 0)
    g_source_remove (s->idle_timer);
  s->idle_timer = g_timeout_add_seconds (idle_s (), on_idle, s);
}

static gboolean
on_idle (gpointer data)
{
  CodeSession *s = data;
  Worker *w;

  s->idle_timer = 0;
  session_check (s);
  if (s->lease == NULL)
    return G_SOURCE_REMOVE;
  w = s->lease->worker;
  /* A call still runs, or waits: its end starts the count again. */
  if (w->inflight != NULL || !g_queue_is_empty (&w->queue))
    {
      session_arm_idle (s);
      return G_SOURCE_REMOVE;
    }
  g_free (s->lost);
  s->lost = g_strdup_printf ("no code ran for %u s, and the sandbox was given back", idle_s ());
  s->lost_at = g_get_monotonic_time ();
  sandstepd_lease_end (s->lease, "the code interpreter was idle", FALSE);
  g_clear_pointer (&s->lease, sandstepd_lease_unref);
  return G_SOURCE_REMOVE;
}

static CodeSession *
session_get (const char *handle)
{
  CodeSession *s;
  GHashTableIter iter;
  gpointer value;

  if (sessions == NULL)
    sessions = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) session_free);
  /* Those of sandboxes that are gone go too. */
  g_hash_table_iter_init (&iter, sessions);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      CodeSession *other = value;

      session_check (other);
      if (other->lease == NULL && !other->attaching && strcmp (other->handle, handle) != 0 &&
          (other->lost == NULL ||
           g_get_monotonic_time () - other->lost_at > (gint64) CODE_LOST_KEEP_S * G_USEC_PER_SEC))
        g_hash_table_iter_remove (&iter);
    }
  s = g_hash_table_lookup (sessions, handle);
  if (s == NULL)
    {
      s = g_new0 (CodeSession, 1);
      s->handle = g_strdup (handle);
      g_hash_table_insert (sessions, s->handle, s);
    }
  return s;
}

/* ---- answers ---- */

/* The reason phrase of @status, with @message where the SDK shows it: one line of printable ASCII. */
static void
set_reason (Request *req, guint status, const char *message)
{
  g_autoptr(GString) reason = g_string_new (NULL);

  if (req->finished)
    return;
  for (const char *p = message; *p != '\0' && reason->len < MAX_REASON; p++)
    g_string_append_c (reason, g_ascii_isprint (*p) ? *p : ' ');
  soup_server_message_set_status (req->msg, status, reason->str);
}

/* An error in E2B's shape, the message in the reason phrase too. */
static void
code_error (Request *req, guint status, const char *format, ...) G_GNUC_PRINTF (3, 4);

static void
code_error (Request *req, guint status, const char *format, ...)
{
  g_autofree char *message = NULL;
  va_list args;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  sandstepd_e2b_error (req, status, "%s", message);
  set_reason (req, status, message);
}

static void
code_backend_error (Request *req, const GError *error)
{
  sandstepd_e2b_backend_error (req, error);
  set_reason (req, soup_server_message_get_status (req->msg), error->message);
}

/* ---- the answer's lines (a framing of sandstepd-streams.c's) ---- */

/* Why the interpreter of the call that starts now is a new one, told first (a framing's first() takes no
 * context, and sandstepd_stream_op_framed() calls it before it returns; main loop only). */
static const char *starting_lost;

static char *
line_of (JsonObject *object, gsize *out_len)
{
  char *line = sandstep_wire_to_line (object, out_len);

  json_object_unref (object);
  return line;
}

static JsonObject *
output_object (const char *type, const char *text)
{
  JsonObject *o = json_object_new ();
  g_autoptr(GDateTime) now = g_date_time_new_now_utc ();
  g_autofree char *timestamp = g_date_time_format_iso8601 (now);

  json_object_set_string_member (o, "type", type);
  json_object_set_string_member (o, "text", text);
  json_object_set_string_member (o, "timestamp", timestamp);
  return o;
}

static char *
code_first (gsize *out_len)
{
  JsonObject *o;

  if (starting_lost == NULL)
    {
      /* Lines of a type the SDK does not know are skipped: this one says the call has started. */
      o = json_object_new ();
      json_object_set_string_member (o, "type", "start");
      return line_of (o, out_len);
    }
  {
    g_autofree char *text = g_strdup_printf ("[sandstep] This code runs in a new Python interpreter: the last one "
                                             "ended (%s), and its variables and imports went with it.\n",
                                             starting_lost);
    return line_of (output_object ("stderr", text), out_len);
  }
}

static char *
code_data (int stream, const char *data, gsize len, gsize *out_len)
{
  /* A chunk may end inside a character: that one shows as U+FFFD. */
  g_autofree char *text = g_utf8_make_valid (data, len);

  return line_of (output_object (stream == 2 ? "stderr" : "stdout", text), out_len);
}

/* Python's traceback ends with the exception's line, "NAME: VALUE" (or NAME alone; VALUE may go on for
 * lines); E2B's error gives the name without its module, and the value, apart. */
static void
split_exception (const char *traceback, char **out_name, char **out_value)
{
  g_auto(GStrv) lines = g_strsplit (traceback, "\n", -1);
  guint n = g_strv_length (lines);

  for (guint i = n; i-- > 0;)
    {
      const char *line = lines[i];
      const char *p = line;
      const char *dot;

      if (!g_ascii_isalpha (*p) && *p != '_')
        continue;
      while (g_ascii_isalnum (*p) || *p == '_' || *p == '.')
        p++;
      if (*p != '\0' && *p != ':')
        continue;
      dot = g_strrstr_len (line, p - line, ".");
      *out_name = g_strndup (dot != NULL ? dot + 1 : line, p - (dot != NULL ? dot + 1 : line));
      if (*p == ':')
        {
          g_autofree char *rest = g_strjoinv ("\n", lines + i + 1);
          const char *first = p[1] == ' ' ? p + 2 : p + 1;
          char *value = rest[0] != '\0' ? g_strconcat (first, "\n", rest, NULL) : g_strdup (first);

          *out_value = g_strchomp (value);
        }
      else
        *out_value = g_strdup ("");
      return;
    }
  *out_name = g_strdup ("Error");
  *out_value = g_strstrip (g_strdup (traceback));
}

static JsonObject *
error_object (const char *name, const char *value, const char *traceback)
{
  JsonObject *o = json_object_new ();

  json_object_set_string_member (o, "type", "error");
  json_object_set_string_member (o, "name", name);
  json_object_set_string_member (o, "value", value);
  json_object_set_string_member (o, "traceback", traceback);
  return o;
}

static char *
code_last (JsonObject *reply, const GError *error, gsize *out_len)
{
  g_autoptr(GString) out = g_string_new (NULL);
  JsonObject *end = json_object_new ();
  const char *failure, *value, *traceback, *startup;
  char *line;
  gsize len;

#define ADD_LINE(object) \
  (line = line_of ((object), &len), g_string_append_len (out, line, len), g_free (line))

  if (error != NULL)
    ADD_LINE (error_object ("SandstepError", error->message, ""));
  else
    {
      failure = json_object_get_string_member_with_default (reply, "failure", NULL);
      value = json_object_get_string_member_with_default (reply, "value", NULL);
      traceback = json_object_get_string_member_with_default (reply, "traceback", NULL);
      startup = json_object_get_string_member_with_default (reply, "stderr", "");
      if (startup[0] != '\0' &&
          (failure != NULL || json_object_get_boolean_member_with_default (reply, "died", FALSE)))
        ADD_LINE (output_object ("stderr", startup));
      if (json_object_get_boolean_member_with_default (reply, "restarted", FALSE))
        ADD_LINE (output_object ("stderr", "[sandstep] This code ran in a new Python interpreter: the last one died, "
                                           "and its state went with it.\n"));
      if (value != NULL)
        {
          JsonObject *o = json_object_new ();

          /* The final expression's repr(), as Jupyter's text/plain. */
          json_object_set_string_member (o, "type", "result");
          json_object_set_string_member (o, "text", value);
          json_object_set_boolean_member (o, "is_main_result", TRUE);
          ADD_LINE (o);
        }
      if (traceback != NULL)
        {
          g_autofree char *name = NULL;
          g_autofree char *text = NULL;

          split_exception (traceback, &name, &text);
          ADD_LINE (error_object (name, text, traceback));
        }
      else if (failure != NULL)
        ADD_LINE (error_object ("SandstepError", failure, ""));
      else if (json_object_get_boolean_member_with_default (reply, "timedOut", FALSE))
        ADD_LINE (error_object ("TimeoutError",
                                "The code ran until its sandbox's lifetime ended; the interpreter was stopped, "
                                "and its state is gone", ""));
      else if (json_object_get_boolean_member_with_default (reply, "died", FALSE))
        {
          gint64 status = json_object_get_int_member_with_default (reply, "exitStatus", 0);
          g_autofree char *text = g_strdup_printf (
            "The Python interpreter ended (exit status %" G_GINT64_FORMAT "%s): its state is gone, and the next "
            "call starts a new one", status,
            json_object_get_boolean_member_with_default (reply, "memoryLimitHit", FALSE) ? ", the sandbox's memory "
                                                                                           "limit hit"
            : json_object_get_boolean_member_with_default (reply, "pidsLimitHit", FALSE) ? ", the sandbox's process "
                                                                                           "limit hit"
                                                                                         : "");
          ADD_LINE (error_object ("InterpreterDied", text, ""));
        }
    }
  json_object_set_string_member (end, "type", "end_of_execution");
  ADD_LINE (end);
#undef ADD_LINE
  *out_len = out->len;
  return g_string_free (g_steal_pointer (&out), FALSE);
}

static char *
code_keepalive (gsize *out_len)
{
  JsonObject *o = json_object_new ();

  json_object_set_string_member (o, "type", "keepalive");
  return line_of (o, out_len);
}

static const SandstepdFraming code_framing = {
  "application/x-ndjson", code_first, code_data, code_last, code_keepalive,
};

/* ---- /execute ---- */

typedef struct {
  Request *req;             /* ref */
  char *code;               /* NULL: a contexts call */
  JsonObject *env;          /* runCode's envs, or NULL */
  char *owner;
  GError *error;
} Exec;

static void
exec_free (Exec *x)
{
  sandstepd_request_unref (x->req);
  g_free (x->code);
  if (x->env != NULL)
    json_object_unref (x->env);
  g_free (x->owner);
  g_clear_error (&x->error);
  g_free (x);
}

/* A call's exchange is over, however it ended. */
static void
on_exec_finished (SoupServerMessage *msg, gpointer data)
{
  CodeSession *s = sessions != NULL ? g_hash_table_lookup (sessions, data) : NULL;

  if (s != NULL && s->lease != NULL)
    session_arm_idle (s);
}

static void
exec_run (CodeSession *s, Exec *x)
{
  JsonObject *message = json_object_new ();

  json_object_set_string_member (message, "code", x->code);
  if (x->env != NULL)
    json_object_set_object_member (message, "env", json_object_ref (x->env));
  session_arm_idle (s);
  if (!x->req->finished)
    g_signal_connect_data (x->req->msg, "finished", G_CALLBACK (on_exec_finished), g_strdup (s->handle),
                           (GClosureNotify) (void (*) (void)) g_free, 0);
  starting_lost = s->lost;
  sandstepd_stream_op_framed (x->req, s->lease, "python", message, &code_framing);
  starting_lost = NULL;
  g_clear_pointer (&s->lost, g_free);
}

static void
on_attached (Call *call, JsonObject *reply, int reply_fd, const GError *error)
{
  Exec *x = call->data;
  CodeSession *s = g_hash_table_lookup (sessions, x->req->handle);
  Lease *lease = s->lease;

  s->attaching = FALSE;
  if (error != NULL)
    {
      sandstepd_lease_abandon (lease);
      g_clear_pointer (&s->lease, sandstepd_lease_unref);
      code_backend_error (x->req, error);
      return;
    }
  sandstepd_lease_activate (lease);
  if (x->req->finished)
    {
      sandstepd_lease_end (lease, "the runCode call's connection closed while attaching", FALSE);
      g_clear_pointer (&s->lease, sandstepd_lease_unref);
      return;
    }
  exec_run (s, x);
}

static void
owner_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  Exec *x = data;

  x->owner = sandstepd_e2b_owner_of (x->req, x->req->handle, &x->error);
  g_task_return_boolean (task, TRUE);
}

static void
owner_done (GObject *source, GAsyncResult *result, gpointer data)
{
  Exec *x = g_task_get_task_data (G_TASK (result));
  Request *req = x->req;
  g_autoptr(GError) error = NULL;
  g_autofree char *holder = NULL;
  SandstepIdentity who = { NULL, NULL, NULL };
  CodeSession *s;
  Worker *w;

  if (x->error != NULL)
    {
      code_backend_error (req, x->error);
      return;
    }
  s = session_get (req->handle);
  session_check (s);
  if (s->lease != NULL)
    {
      exec_run (s, x);
      return;
    }
  if (s->attaching)
    {
      code_error (req, SOUP_STATUS_CONFLICT,
                  "Sandbox '%s' is busy: another runCode call is starting its Python interpreter; run the calls "
                  "one after the other", req->handle);
      return;
    }
  w = sandstepd_worker_take (req->d, &error);
  if (w == NULL)
    {
      code_backend_error (req, error);
      return;
    }
  holder = sandstepd_e2b_holder (x->owner);
  who.owner = x->owner;
  who.holder = holder;
  s->lease = sandstepd_lease_new (req, &who, w);
  s->attaching = TRUE;
  {
    JsonObject *attach = sandstep_wire_attach_request (req->handle, &who);
    /* The task's data goes with the task: the call takes its own. */
    Exec *y = g_new0 (Exec, 1);

    y->req = sandstepd_request_ref (req);
    y->code = g_steal_pointer (&x->code);
    y->env = g_steal_pointer (&x->env);
    json_object_set_double_member (attach, "wait", SANDSTEP_BESIDE_WAIT_S);
    /* Beside the sandbox's envd calls: a command runs while the interpreter lives, and the other way round. */
    json_object_set_boolean_member (attach, "beside", TRUE);
    sandstepd_worker_call (w, "attach", attach, NULL, 0, on_attached, y, (GDestroyNotify) exec_free);
  }
}

static const char *
string_member (JsonObject *object, const char *name, gboolean *out_bad)
{
  JsonNode *node = json_object_get_member (object, name);

  *out_bad = FALSE;
  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return NULL;
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING)
    {
      *out_bad = TRUE;
      return NULL;
    }
  return json_node_get_string (node);
}

/* The one language the session speaks (the sandbox's python3): TRUE, or FALSE once @req is answered why not,
 * @subject naming what asked for another. */
static gboolean
python_only (Request *req, const char *language, gboolean bad, const char *subject)
{
  g_autofree char *shown = NULL;

  if (!bad && (language == NULL || g_ascii_strcasecmp (language, "python") == 0))
    return TRUE;
  shown = sandstep_escape (language != NULL ? language : "(not a string)", -1, 100, SANDSTEP_ESCAPE_VALUE);
  code_error (req, SOUP_STATUS_BAD_REQUEST,
              "%s '%s' is not served by sandstepd's code interpreter: only 'python' (the sandbox's python3); run "
              "other languages with commands.run", subject, shown);
  return FALSE;
}

static void
handle_execute (Request *req)
{
  const char *content_type = soup_message_headers_get_content_type (
    soup_server_message_get_request_headers (req->msg), NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) body = NULL;
  const char *code, *language, *context;
  JsonNode *envs;
  gboolean bad = FALSE;
  g_autoptr(GTask) task = NULL;
  Exec *x;

  if (strcmp (req->method, "POST") != 0)
    {
      code_error (req, SOUP_STATUS_METHOD_NOT_ALLOWED, "%s /execute is not served; POST the code", req->method);
      return;
    }
  if (g_strcmp0 (content_type, "application/json") != 0)
    {
      code_error (req, SOUP_STATUS_UNSUPPORTED_MEDIA_TYPE, "POST /execute takes application/json");
      return;
    }
  body = sandstep_wire_parse_object ((const char *) req->body->data, req->body->len, &error);
  if (body == NULL)
    {
      code_error (req, SOUP_STATUS_BAD_REQUEST, "POST /execute: %s; send {\"code\": \"...\"}", error->message);
      return;
    }
  code = string_member (body, "code", &bad);
  if (code == NULL)
    {
      code_error (req, SOUP_STATUS_BAD_REQUEST, "POST /execute: the request has no 'code' string; send the Python "
                                                "code to run");
      return;
    }
  language = string_member (body, "language", &bad);
  if (!python_only (req, language, bad, "Language"))
    return;
  context = string_member (body, "context_id", &bad);
  if (bad || (context != NULL && strcmp (context, CODE_CONTEXT) != 0))
    {
      g_autofree char *shown = sandstep_escape (context != NULL ? context : "(not a string)", -1, 100,
                                                SANDSTEP_ESCAPE_VALUE);
      code_error (req, SOUP_STATUS_BAD_REQUEST,
                  "Code context '%s' is not served by sandstepd: each sandbox has one, '" CODE_CONTEXT "' (its "
                  "Python session); call runCode without a context or with that one", shown);
      return;
    }
  /* envs: set for this code only (sandstep-python-driver.py). */
  envs = json_object_get_member (body, "env_vars");
  if (envs != NULL && !JSON_NODE_HOLDS_NULL (envs) &&
      (!JSON_NODE_HOLDS_OBJECT (envs) || !sandstep_python_check_env (json_node_get_object (envs), &error)))
    {
      code_error (req, SOUP_STATUS_BAD_REQUEST, "runCode's envs: %s",
                  error != NULL ? error->message : "not an object; give {NAME: 'value', ...}");
      return;
    }
  x = g_new0 (Exec, 1);
  x->req = sandstepd_request_ref (req);
  x->code = g_strdup (code);
  if (envs != NULL && JSON_NODE_HOLDS_OBJECT (envs) && json_object_get_size (json_node_get_object (envs)) > 0)
    x->env = json_object_ref (json_node_get_object (envs));
  task = g_task_new (NULL, NULL, owner_done, NULL);
  g_task_set_task_data (task, x, (GDestroyNotify) exec_free);
  g_task_run_in_thread (task, owner_thread);
}

/* ---- /contexts: the one context, the Python session ---- */

/* The context the SDK reads: {id, language, cwd}. */
static JsonObject *
context_object (void)
{
  JsonObject *o = json_object_new ();

  json_object_set_string_member (o, "id", CODE_CONTEXT);
  json_object_set_string_member (o, "language", "python");
  json_object_set_string_member (o, "cwd", "/workspace");
  return o;
}

static void
answer_node (Request *req, JsonNode *node)
{
  gsize len = 0;
  char *text = json_to_string (node, FALSE);

  len = strlen (text);
  sandstepd_e2b_answer (req, SOUP_STATUS_OK, "application/json", text, len);
}

/* The sandbox is the key's (or the traffic token's): the call is served. */
static void
contexts_done (GObject *source, GAsyncResult *result, gpointer data)
{
  Exec *x = g_task_get_task_data (G_TASK (result));
  Request *req = x->req;
  g_autoptr(JsonNode) node = NULL;
  CodeSession *s;

  if (x->error != NULL)
    {
      code_backend_error (req, x->error);
      return;
    }
  if (strcmp (req->path, "/contexts") == 0)
    {
      /* GET lists the one context; POST (checked before) "creates" it: it is there already. */
      if (strcmp (req->method, "GET") == 0)
        {
          JsonArray *all = json_array_new ();
          json_array_add_object_element (all, context_object ());
          node = json_node_init_array (json_node_alloc (), all);
          json_array_unref (all);
        }
      else
        {
          JsonObject *o = context_object ();
          node = json_node_init_object (json_node_alloc (), o);
          json_object_unref (o);
        }
      answer_node (req, node);
      return;
    }
  /* POST /contexts/default/restart: the interpreter ends with its claim, and the next runCode starts a new one
   * (without a note on its stderr: this end was asked for). */
  s = session_get (req->handle);
  session_check (s);
  if (s->attaching)
    {
      code_error (req, SOUP_STATUS_CONFLICT,
                  "Sandbox '%s' is busy: a runCode call is starting its Python interpreter; restart it after that "
                  "call", req->handle);
      return;
    }
  if (s->lease != NULL)
    {
      sandstepd_lease_end (s->lease, "the code context was restarted (restartCodeContext)", FALSE);
      g_clear_pointer (&s->lease, sandstepd_lease_unref);
    }
  if (s->idle_timer != 0)
    g_clear_handle_id (&s->idle_timer, g_source_remove);
  g_clear_pointer (&s->lost, g_free);
  sandstepd_e2b_answer (req, SOUP_STATUS_NO_CONTENT, NULL, NULL, 0);
}

/* Checks a contexts call before the sandbox is looked up; FALSE after answering. */
static gboolean
contexts_check (Request *req)
{
  const char *rest = req->path + strlen ("/contexts");
  g_autoptr(GError) error = NULL;

  if (rest[0] == '\0')
    {
      g_autoptr(JsonObject) body = NULL;
      const char *language, *cwd;
      gboolean bad_language = FALSE, bad_cwd = FALSE;

      if (strcmp (req->method, "GET") == 0)
        return TRUE;
      if (strcmp (req->method, "POST") != 0)
        {
          code_error (req, SOUP_STATUS_METHOD_NOT_ALLOWED, "%s /contexts is not served; GET lists the sandbox's "
                      "code context, POST gives it", req->method);
          return FALSE;
        }
      body = sandstep_wire_parse_object (req->body->len > 0 ? (const char *) req->body->data : "{}",
                                         req->body->len > 0 ? req->body->len : 2, &error);
      if (body == NULL)
        {
          code_error (req, SOUP_STATUS_BAD_REQUEST, "POST /contexts: %s; send {\"language\": \"python\"}",
                      error->message);
          return FALSE;
        }
      language = string_member (body, "language", &bad_language);
      cwd = string_member (body, "cwd", &bad_cwd);
      if (!python_only (req, language, bad_language, "A code context of language"))
        return FALSE;
      /* A context of its own cwd would be a second session: the sandbox has one, which starts in /workspace. */
      if (bad_cwd || (cwd != NULL && strcmp (cwd, "/workspace") != 0))
        {
          g_autofree char *shown = sandstep_escape (cwd != NULL ? cwd : "(not a string)", -1, 200,
                                                    SANDSTEP_ESCAPE_VALUE);
          code_error (req, SOUP_STATUS_BAD_REQUEST,
                      "A second code context (cwd '%s') is not served by sandstepd: each sandbox has one, '"
                      CODE_CONTEXT "' (its Python session, in /workspace); use it and os.chdir() in the code",
                      shown);
          return FALSE;
        }
      return TRUE;
    }
  if (strcmp (rest, "/" CODE_CONTEXT "/restart") == 0 && strcmp (req->method, "POST") == 0)
    return TRUE;
  if (strcmp (rest, "/" CODE_CONTEXT) == 0 && strcmp (req->method, "DELETE") == 0)
    {
      code_error (req, SOUP_STATUS_BAD_REQUEST,
                  "The code context '" CODE_CONTEXT "' is the sandbox's Python session and is not removed; "
                  "restartCodeContext gives it a new interpreter");
      return FALSE;
    }
  {
    g_autofree char *shown = sandstep_escape (rest + 1, -1, 200, SANDSTEP_ESCAPE_VALUE);
    code_error (req, SOUP_STATUS_NOT_FOUND,
                "%s /contexts/%s is not served: each sandbox has one code context, '" CODE_CONTEXT "' (its Python "
                "session), which restartCodeContext restarts", req->method, shown);
  }
  return FALSE;
}

static void
handle_contexts (Request *req)
{
  g_autoptr(GTask) task = NULL;
  Exec *x;

  if (!contexts_check (req))
    return;
  x = g_new0 (Exec, 1);
  x->req = sandstepd_request_ref (req);
  task = g_task_new (NULL, NULL, contexts_done, NULL);
  g_task_set_task_data (task, x, (GDestroyNotify) exec_free);
  g_task_run_in_thread (task, owner_thread);
}

gboolean
sandstepd_e2b_code_is_path (const char *path)
{
  return strcmp (path, "/execute") == 0 || strcmp (path, "/contexts") == 0 || g_str_has_prefix (path, "/contexts/");
}

void
sandstepd_handle_e2b_code (Request *req)
{
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (req->msg);
  const char *id = soup_message_headers_get_one (headers, "E2b-Sandbox-Id");
  const char *port = soup_message_headers_get_one (headers, "E2b-Sandbox-Port");

  if (id == NULL || !sandstep_handle_is_local (id))
    {
      g_autofree char *message = sandstepd_e2b_not_found (id, TRUE);
      code_error (req, SOUP_STATUS_NOT_FOUND, "%s", message);
      return;
    }
  if (port != NULL && strcmp (port, CODE_PORT) != 0)
    {
      g_autofree char *shown = sandstep_escape (port, -1, 20, SANDSTEP_ESCAPE_VALUE);
      code_error (req, SOUP_STATUS_NOT_FOUND,
                  "Nothing serves %s on the sandbox's port '%s': the code interpreter is port " CODE_PORT,
                  req->path, shown);
      return;
    }
  g_free (req->handle);
  req->handle = g_strdup (id);
  if (strcmp (req->path, "/execute") == 0)
    handle_execute (req);
  else
    handle_contexts (req);
}
