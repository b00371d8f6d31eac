/* sandstepd-e2b.c: E2B's platform API (the control plane of the `e2b` SDKs) on sandstepd's sandboxes.
 *
 * The SDK talks to two services: the platform API (E2B_API_URL: create, list, get, kill, connect a sandbox)
 * and envd inside each sandbox (E2B_SANDBOX_URL, each call naming its sandbox in E2b-Sandbox-Id;
 * sandstepd-envd.c).  Both are served here on sandstepd's own port beside /v1, behind its tokens: the SDK's
 * API key (X-API-KEY, "e2b_" and hex) is a token of the token file, and so is the envd access token a
 * sandbox's create or connect answers (the caller's own key), so one rule authorizes both.
 * A sandbox ID is a sandstep handle; the template "base" is a host-root sandbox; errors take E2B's shape
 * {"code", "message"}.  What the subset does not serve says so (docs/e2b.md).
 */
#include "sandstepd-private.h"

#include <string.h>

#include "sandstep-error.h"
#include "sandstep-wire.h"

/* The envd version the SDK is told: its features are switched by it (>= 0.4.0: no user is needed). */
#define E2B_ENVD_VERSION "0.5.7"
#define E2B_BASE_TEMPLATE "base"
/* The owner of an admin key's sandboxes; a scoped key's are under its prefix. */
#define E2B_OWNER "e2b"

gboolean
sandstepd_e2b_is_path (const char *path)
{
  return strcmp (path, "/sandboxes") == 0 || g_str_has_prefix (path, "/sandboxes/") ||
         strcmp (path, "/v2/sandboxes") == 0 || sandstepd_envd_is_path (path);
}

const SandstepTokenEntry *
sandstepd_e2b_authorized (Daemon *d, SoupServerMessage *msg, const char **out_why)
{
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (msg);
  const char *key = soup_message_headers_get_one (headers, "X-API-Key");
  const SandstepTokenEntry *entry;
  g_autofree char *bearer = NULL;

  if (key == NULL)
    key = soup_message_headers_get_one (headers, "X-Access-Token");
  if (key == NULL)
    {
      *out_why = "no E2B API key (X-API-KEY) or access token (X-Access-Token)";
      return NULL;
    }
  bearer = g_strconcat ("Bearer ", key, NULL);
  entry = sandstep_token_set_match (d->tokens, bearer);
  if (entry == NULL)
    *out_why = "a wrong E2B API key";
  return entry;
}

void
sandstepd_e2b_answer (Request *req, guint status, const char *content_type, char *data, gsize len)
{
  if (req->finished || req->completed)
    {
      g_free (data);
      return;
    }
  soup_server_message_set_status (req->msg, status, NULL);
  if (data != NULL)
    soup_server_message_set_response (req->msg, content_type, SOUP_MEMORY_TAKE, data, len);
  req->completed = TRUE;
  sandstepd_request_resume (req);
}

void
sandstepd_e2b_error (Request *req, guint status, const char *format, ...)
{
  g_autoptr(JsonObject) object = json_object_new ();
  va_list args;
  char *message;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  json_object_set_int_member (object, "code", status);
  json_object_set_string_member (object, "message", message);
  g_free (message);
  sandstepd_answer_json (req, status, object);
}

/* E2B's status for a backend's error. */
static guint
status_of (const GError *error)
{
  if (error->domain == SANDSTEP_SANDBOX_ERROR &&
      (error->code == SANDSTEP_SANDBOX_ERROR_NOT_FOUND || error->code == SANDSTEP_SANDBOX_ERROR_NOT_OWNER))
    return SOUP_STATUS_NOT_FOUND;
  if (error->domain == SANDSTEP_SANDBOX_ERROR && error->code == SANDSTEP_SANDBOX_ERROR_BUSY)
    return SOUP_STATUS_CONFLICT;
  if (error->domain == SANDSTEP_USAGE_ERROR)
    return SOUP_STATUS_BAD_REQUEST;
  return SOUP_STATUS_INTERNAL_SERVER_ERROR;
}

void
sandstepd_e2b_backend_error (Request *req, const GError *error)
{
  sandstepd_e2b_error (req, status_of (error), "%s", error->message);
}

char *
sandstepd_e2b_owner (const SandstepTokenEntry *scope)
{
  /* A scoped key (owner=DAG/) makes sandboxes it covers: DAG/e2b. */
  return scope->owner_prefix != NULL ? g_strconcat (scope->owner_prefix, E2B_OWNER, NULL) : g_strdup (E2B_OWNER);
}

static char *
iso8601 (gint64 unix_s)
{
  g_autoptr(GDateTime) t = g_date_time_new_from_unix_utc (unix_s);
  return t != NULL ? g_date_time_format_iso8601 (t) : g_strdup ("1970-01-01T00:00:00Z");
}

/* The sandboxes @scope covers; with @handle, that one only. */
static GPtrArray *
covered (Request *req, const char *handle, GError **error)
{
  g_autoptr(GPtrArray) entries = sandstep_backend_list (req->d->backend, NULL, NULL, error);

  if (entries == NULL)
    return NULL;
  for (guint i = 0; i < entries->len;)
    {
      const SandstepListEntry *entry = entries->pdata[i];
      if (entry->owner != NULL && entry->condition != SANDSTEP_CONDITION_EXPIRED &&
          sandstep_token_entry_covers (req->scope, entry->owner) &&
          (handle == NULL || strcmp (entry->handle, handle) == 0))
        i++;
      else
        g_ptr_array_remove_index (entries, i);
    }
  return g_steal_pointer (&entries);
}

char *
sandstepd_e2b_not_found (const char *id, gboolean malformed)
{
  g_autofree char *shown = sandstep_escape (id != NULL ? id : "(none)", -1, 200, SANDSTEP_ESCAPE_VALUE);

  if (malformed)
    return g_strdup_printf ("Sandbox '%s' not found: sandstep's sandbox IDs look like sandstep-0123456789abcdef "
                            "(envd's calls name theirs in E2b-Sandbox-Id)", shown);
  return g_strdup_printf ("Sandbox '%s' not found: it is gone, or another owner's", shown);
}

char *
sandstepd_e2b_owner_of (Request *req, const char *handle, GError **error)
{
  g_autoptr(GPtrArray) entries = covered (req, handle, error);

  if (entries == NULL)
    return NULL;
  if (entries->len == 0)
    {
      g_autofree char *message = sandstepd_e2b_not_found (handle, FALSE);
      g_set_error_literal (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_FOUND, message);
      return NULL;
    }
  return g_strdup (((const SandstepListEntry *) entries->pdata[0])->owner);
}

/* A sandbox as GET /sandboxes/{id} and GET /v2/sandboxes show it. */
static JsonObject *
sandbox_object (Request *req, const SandstepListEntry *entry, gboolean with_token)
{
  JsonObject *o = json_object_new ();
  const char *key = soup_message_headers_get_one (soup_server_message_get_request_headers (req->msg), "X-API-Key");
  g_autofree char *started = iso8601 (entry->created);
  g_autofree char *ends = iso8601 (entry->expires);

  json_object_set_string_member (o, "sandboxID", entry->handle);
  json_object_set_string_member (o, "templateID", E2B_BASE_TEMPLATE);
  json_object_set_string_member (o, "clientID", "sandstep");
  json_object_set_object_member (o, "metadata", json_object_new ());
  json_object_set_string_member (o, "startedAt", started);
  json_object_set_string_member (o, "endAt", ends);
  json_object_set_string_member (o, "state", "running");
  json_object_set_int_member (o, "cpuCount", g_get_num_processors ());
  json_object_set_int_member (o, "memoryMB", 0);
  json_object_set_int_member (o, "diskSizeMB", 0);
  json_object_set_string_member (o, "envdVersion", E2B_ENVD_VERSION);
  if (with_token && key != NULL)
    json_object_set_string_member (o, "envdAccessToken", key);
  return o;
}

/* What POST /sandboxes and POST /sandboxes/{id}/connect answer. */
static JsonObject *
created_object (Request *req, const char *handle)
{
  JsonObject *o = json_object_new ();
  const char *key = soup_message_headers_get_one (soup_server_message_get_request_headers (req->msg), "X-API-Key");

  json_object_set_string_member (o, "sandboxID", handle);
  json_object_set_string_member (o, "templateID", E2B_BASE_TEMPLATE);
  json_object_set_string_member (o, "clientID", "sandstep");
  json_object_set_string_member (o, "envdVersion", E2B_ENVD_VERSION);
  /* envd's calls carry it back as X-Access-Token: the caller's own key, checked as every key is. */
  if (key != NULL)
    json_object_set_string_member (o, "envdAccessToken", key);
  json_object_set_null_member (o, "domain");
  return o;
}

typedef enum {
  E2B_CREATE,
  E2B_LIST,
  E2B_GET,
  E2B_KILL,
  E2B_CONNECT,
} E2bOp;

typedef struct {
  Request *req;
  E2bOp op;
  char *handle;
  SandstepSpec *spec;
  char *owner;
  char *holder;
  /* results */
  guint status;
  JsonNode *answer;         /* NULL: no body */
  GError *error;
} E2bJob;

static void
e2b_job_free (E2bJob *job)
{
  sandstepd_request_unref (job->req);
  g_free (job->handle);
  sandstep_spec_free (job->spec);
  g_free (job->owner);
  g_free (job->holder);
  if (job->answer != NULL)
    json_node_unref (job->answer);
  g_clear_error (&job->error);
  g_free (job);
}

static void
e2b_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  E2bJob *job = data;
  Request *req = job->req;
  SandstepBackend *b = req->d->backend;
  g_autoptr(GPtrArray) entries = NULL;

  if (job->op == E2B_CREATE)
    {
      SandstepIdentity who = { job->owner, job->holder, NULL };
      gboolean existing = FALSE;
      g_autofree char *handle = sandstep_backend_provision (b, job->spec, &who, &existing, &job->error);

      if (handle != NULL)
        {
          job->status = SOUP_STATUS_CREATED;
          job->answer = json_node_init_object (json_node_alloc (), created_object (req, handle));
          json_object_unref (json_node_get_object (job->answer));
        }
      g_task_return_boolean (task, TRUE);
      return;
    }
  entries = covered (req, job->handle, &job->error);
  if (entries == NULL)
    {
      g_task_return_boolean (task, TRUE);
      return;
    }
  if (job->op == E2B_LIST)
    {
      JsonArray *array = json_array_new ();
      for (guint i = 0; i < entries->len; i++)
        json_array_add_object_element (array, sandbox_object (req, entries->pdata[i], FALSE));
      job->status = SOUP_STATUS_OK;
      job->answer = json_node_init_array (json_node_alloc (), array);
      json_array_unref (array);
      g_task_return_boolean (task, TRUE);
      return;
    }
  if (entries->len == 0)
    {
      /* Another owner's sandbox is no more found than one that never was. */
      job->status = SOUP_STATUS_NOT_FOUND;
      g_task_return_boolean (task, TRUE);
      return;
    }
  if (job->op == E2B_KILL)
    {
      const SandstepListEntry *entry = entries->pdata[0];
      g_autofree char *holder = g_strconcat (entry->owner, "/e2b-kill", NULL);
      SandstepIdentity who = { entry->owner, holder, NULL };

      if (sandstep_backend_destroy (b, job->handle, &who, &job->error))
        job->status = SOUP_STATUS_NO_CONTENT;
    }
  else
    {
      JsonObject *o = job->op == E2B_GET ? sandbox_object (req, entries->pdata[0], TRUE)
                                         : created_object (req, job->handle);
      job->status = SOUP_STATUS_OK;
      job->answer = json_node_init_object (json_node_alloc (), o);
      json_object_unref (o);
    }
  g_task_return_boolean (task, TRUE);
}

static void
e2b_done (GObject *source, GAsyncResult *result, gpointer data)
{
  E2bJob *job = g_task_get_task_data (G_TASK (result));
  Request *req = job->req;

  if (job->error != NULL)
    sandstepd_e2b_backend_error (req, job->error);
  else if (job->status == SOUP_STATUS_NOT_FOUND)
    {
      g_autofree char *message = sandstepd_e2b_not_found (job->handle, FALSE);
      sandstepd_e2b_error (req, SOUP_STATUS_NOT_FOUND, "%s", message);
    }
  else if (job->answer == NULL)
    sandstepd_e2b_answer (req, job->status, NULL, NULL, 0);
  else
    {
      g_autoptr(JsonGenerator) gen = json_generator_new ();
      gsize len = 0;
      char *text;

      json_generator_set_root (gen, job->answer);
      text = json_generator_to_data (gen, &len);
      sandstepd_e2b_answer (req, job->status, "application/json", text, len);
    }
}

/* POST /sandboxes's body into @job's spec; FALSE after answering 400. */
static gboolean
read_create (Request *req, E2bJob *job)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) body = sandstep_wire_parse_object ((const char *) req->body->data, req->body->len, &error);
  const char *template = E2B_BASE_TEMPLATE;
  JsonNode *node;

  if (body == NULL)
    {
      sandstepd_e2b_error (req, SOUP_STATUS_BAD_REQUEST, "POST /sandboxes: %s; send one JSON object", error->message);
      return FALSE;
    }
  node = json_object_get_member (body, "templateID");
  if (node != NULL && JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING)
    template = json_node_get_string (node);
  if (strcmp (template, E2B_BASE_TEMPLATE) != 0)
    {
      sandstepd_e2b_error (req, SOUP_STATUS_BAD_REQUEST,
                           "Template '%s' is not served by sandstepd: use '" E2B_BASE_TEMPLATE
                           "' (the host's root); images as templates are not served yet", template);
      return FALSE;
    }
  job->spec = sandstep_spec_new ();
  node = json_object_get_member (body, "timeout");
  if (node != NULL && JSON_NODE_HOLDS_VALUE (node))
    {
      gint64 timeout = json_node_get_int (node);
      if (timeout <= 0)
        {
          sandstepd_e2b_error (req, SOUP_STATUS_BAD_REQUEST,
                               "The sandbox's timeout '%" G_GINT64_FORMAT "' is not a positive number of seconds",
                               timeout);
          return FALSE;
        }
      job->spec->lifetime_s = timeout;
    }
  node = json_object_get_member (body, "envVars");
  if (node != NULL && JSON_NODE_HOLDS_OBJECT (node))
    {
      JsonObject *envs = json_node_get_object (node);
      g_autoptr(GList) names = json_object_get_members (envs);
      for (GList *l = names; l != NULL; l = l->next)
        {
          JsonNode *value = json_object_get_member (envs, l->data);
          if (!JSON_NODE_HOLDS_VALUE (value) || json_node_get_value_type (value) != G_TYPE_STRING)
            {
              sandstepd_e2b_error (req, SOUP_STATUS_BAD_REQUEST, "The value of envVars '%s' is not a string",
                                   (const char *) l->data);
              return FALSE;
            }
          g_hash_table_insert (job->spec->env, g_strdup (l->data), g_strdup (json_node_get_string (value)));
        }
    }
  if (!sandstep_spec_check (job->spec, &error))
    {
      sandstepd_e2b_error (req, SOUP_STATUS_BAD_REQUEST, "The sandbox cannot be made: %s", error->message);
      return FALSE;
    }
  job->owner = sandstepd_e2b_owner (req->scope);
  /* provision is get-or-create by holder: every create is a holder of its own. */
  job->holder = g_strdup_printf ("%s/e2b-%08x%08x", job->owner, g_random_int (), g_random_int ());
  return TRUE;
}

static void
handle_platform (Request *req)
{
  g_auto(GStrv) parts = g_strsplit (req->path + 1, "/", -1);
  guint n = g_strv_length (parts);
  gboolean v2 = n >= 1 && strcmp (parts[0], "v2") == 0;
  char **p = v2 ? parts + 1 : parts;
  guint np = v2 ? n - 1 : n;
  const char *method = req->method;
  g_autoptr(GTask) task = NULL;
  E2bJob *job = g_new0 (E2bJob, 1);

  job->req = sandstepd_request_ref (req);
  if (np == 1 && strcmp (method, "GET") == 0)
    job->op = E2B_LIST;
  else if (!v2 && np == 1 && strcmp (method, "POST") == 0)
    job->op = E2B_CREATE;
  else if (!v2 && np == 2 && strcmp (method, "GET") == 0)
    job->op = E2B_GET;
  else if (!v2 && np == 2 && strcmp (method, "DELETE") == 0)
    job->op = E2B_KILL;
  else if (!v2 && np == 3 && strcmp (method, "POST") == 0 && strcmp (p[2], "connect") == 0)
    job->op = E2B_CONNECT;
  else
    {
      sandstepd_e2b_error (req, SOUP_STATUS_NOT_IMPLEMENTED,
                           "%s %s is not served by sandstepd's E2B API; it serves create, connect, list, get and "
                           "kill of sandboxes (docs/e2b.md)", method, req->path);
      e2b_job_free (job);
      return;
    }
  if (np >= 2)
    {
      job->handle = g_strdup (p[1]);
      if (!sandstep_handle_is_local (job->handle))
        {
          g_autofree char *message = sandstepd_e2b_not_found (job->handle, TRUE);
          sandstepd_e2b_error (req, SOUP_STATUS_NOT_FOUND, "%s", message);
          e2b_job_free (job);
          return;
        }
    }
  if (job->op == E2B_CREATE && !read_create (req, job))
    {
      e2b_job_free (job);
      return;
    }
  task = g_task_new (NULL, NULL, e2b_done, NULL);
  g_task_set_task_data (task, job, (GDestroyNotify) e2b_job_free);
  g_task_run_in_thread (task, e2b_thread);
}

void
sandstepd_handle_e2b (Request *req)
{
  if (sandstepd_envd_is_path (req->path))
    sandstepd_handle_envd (req);
  else
    handle_platform (req);
}
