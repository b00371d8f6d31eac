/* sandstepd-e2b.c: E2B's platform API (the control plane of the `e2b` SDKs) on sandstepd's sandboxes.
 *
 * The SDK talks to two services: the platform API (E2B_API_URL: create, list, get, kill, connect a sandbox)
 * and envd inside each sandbox (E2B_SANDBOX_URL, each call naming its sandbox in E2b-Sandbox-Id;
 * sandstepd-envd.c).  Both are served here on sandstepd's own port beside /v1, behind its tokens: the SDK's
 * API key (X-API-KEY, "e2b_" and hex) is a token of the token file; envd's calls carry the sandbox's own envd
 * access token that its create or connect answers (or a key), the code interpreter's contexts calls only the
 * sandbox's traffic access token, and uploadUrl()'s URLs a signature made with the envd token.
 * A sandbox ID is a sandstep handle; the template "base" is a host-root sandbox; errors take E2B's shape
 * {"code", "message"}.  What the subset does not serve says so (docs/e2b.md).
 */
#include "sandstepd-private.h"
#include "sandstepd-e2b-answer.h"
#include "sandstepd-e2b-code.h"
#include "sandstepd-e2b-tokens.h"
#include "sandstepd-envd.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-token.h"
#include "sandstep-wire.h"

/* The envd version the SDK is told: its features are switched by it (>= 0.4.0: no user is needed). */
#define E2B_ENVD_VERSION "0.5.7"
#define E2B_BASE_TEMPLATE "base"
/* @e2b/code-interpreter's default template (its Sandbox.defaultTemplate): E2B's image with Python; the host's root
 * has python3, so it is "base" unless --e2b-template names it. */
#define E2B_CODE_TEMPLATE "code-interpreter-v1"
/* The owner of an admin key's sandboxes; a scoped key's are under its prefix. */
#define E2B_OWNER "e2b"

/* The platform API's areas that sandstepd does not serve: answered in E2B's shape, saying so. */
static const char *const unserved_areas[] = { "snapshots", "templates", "volumes", "volumecontent", "v3" };

static gboolean
is_unserved_area (const char *path)
{
  for (gsize i = 0; i < G_N_ELEMENTS (unserved_areas); i++)
    {
      gsize n = strlen (unserved_areas[i]);
      if (path[0] == '/' && strncmp (path + 1, unserved_areas[i], n) == 0 &&
          (path[n + 1] == '\0' || path[n + 1] == '/'))
        return TRUE;
    }
  return FALSE;
}

gboolean
sandstepd_e2b_is_path (const char *path)
{
  return strcmp (path, "/sandboxes") == 0 || g_str_has_prefix (path, "/sandboxes/") ||
         strcmp (path, "/v2/sandboxes") == 0 || is_unserved_area (path) || sandstepd_envd_is_path (path) ||
         sandstepd_e2b_code_is_path (path);
}

gboolean
sandstepd_e2b_set_templates (Daemon *d, char **pairs, GError **error)
{
  for (char **p = pairs; p != NULL && *p != NULL; p++)
    {
      const char *eq = strchr (*p, '=');
      g_autofree char *name = eq != NULL ? g_strndup (*p, eq - *p) : NULL;

      if (name == NULL || name[0] == '\0' || eq[1] == '\0')
        return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                               "--e2b-template '%s' is not NAME=REF; give a template name and an image reference, "
                               "e.g. --e2b-template=python=docker://registry.example/python:3", *p);
      /* "base" is the host's root, the SDK's default: an image under its name would change every default create. */
      if (strcmp (name, E2B_BASE_TEMPLATE) == 0)
        return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                               "--e2b-template '%s': the template '" E2B_BASE_TEMPLATE "' is the host's root; "
                               "give the image another name", *p);
      if (d->e2b_templates == NULL)
        d->e2b_templates = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
      g_hash_table_replace (d->e2b_templates, g_steal_pointer (&name), g_strdup (eq + 1));
    }
  return TRUE;
}

/* The configured template names, for a message: "a, b", or "none". */
static char *
template_names (Daemon *d)
{
  g_autoptr(GList) names = d->e2b_templates != NULL ? g_hash_table_get_keys (d->e2b_templates) : NULL;
  g_autoptr(GString) out = g_string_new (NULL);

  names = g_list_sort (names, (GCompareFunc) strcmp);
  for (GList *l = names; l != NULL; l = l->next)
    g_string_append_printf (out, "%s'%s'", out->len > 0 ? ", " : "", (const char *) l->data);
  return out->len > 0 ? g_string_free (g_steal_pointer (&out), FALSE) : g_strdup ("none");
}

/* The value of @name in the query of @msg's URI, or NULL. */
static char *
query_value (SoupServerMessage *msg, const char *name)
{
  GUri *uri = soup_server_message_get_uri (msg);
  g_autoptr(GHashTable) query = NULL;

  if (uri == NULL || g_uri_get_query (uri) == NULL)
    return NULL;
  query = soup_form_decode (g_uri_get_query (uri));
  return g_strdup (g_hash_table_lookup (query, name));
}

const SandstepTokenEntry *
sandstepd_e2b_authorized (Daemon *d, SoupServerMessage *msg, const char *path, const char **out_why)
{
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (msg);
  const char *key = soup_message_headers_get_one (headers, "X-API-Key");
  const char *access = soup_message_headers_get_one (headers, "X-Access-Token");
  const char *traffic = soup_message_headers_get_one (headers, "E2B-Traffic-Access-Token");
  const char *id = soup_message_headers_get_one (headers, "E2b-Sandbox-Id");
  gboolean sandbox_path = sandstepd_e2b_code_is_path (path) || sandstepd_envd_is_path (path);
  const SandstepTokenEntry *entry;
  g_autofree char *bearer = NULL;

  /* The sandbox's envd access token opens its envd and code routes. */
  if (key == NULL && access != NULL && sandbox_path && id != NULL && sandstep_handle_is_local (id) &&
      sandstepd_e2b_token_matches (SANDSTEPD_E2B_ENVD_TOKEN, id, access))
    return sandstepd_e2b_sandbox_scope ();
  if (key == NULL)
    key = access;
  if (key == NULL && traffic != NULL && sandstepd_e2b_code_is_path (path))
    {
      if (id != NULL && sandstep_handle_is_local (id) && sandstepd_e2b_token_matches (SANDSTEPD_E2B_TRAFFIC_TOKEN, id, traffic))
        return sandstepd_e2b_sandbox_scope ();
      *out_why = "a traffic access token (E2B-Traffic-Access-Token) that is not the sandbox's (Sandbox.connect "
                 "gives its token, anew after sandstepd restarted)";
      return NULL;
    }
  /* uploadUrl()'s and downloadUrl()'s URLs: no key, no sandbox named, a signature that finds its sandbox. */
  if (key == NULL && id == NULL && strcmp (path, "/files") == 0)
    {
      g_autofree char *signature = query_value (msg, "signature");

      if (signature != NULL)
        return sandstepd_e2b_signed_scope ();
      *out_why = "no E2B API key and no signature (a URL of uploadUrl() or downloadUrl() is signed when its sandbox "
                 "was created with secure: true, the SDK's default, and the SDK was given its envdAccessToken)";
      return NULL;
    }
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

char *
sandstepd_e2b_owner (const SandstepTokenEntry *scope)
{
  /* A scoped key (owner=DAG/) makes sandboxes it covers: DAG/e2b. */
  return scope->owner_prefix != NULL ? g_strconcat (scope->owner_prefix, E2B_OWNER, NULL) : g_strdup (E2B_OWNER);
}

/* ---- metadata: E2B's tags of a sandbox, kept beside the backend's records ----
 *
 * The backend's record has no tags, so a sandbox's metadata is a file of sandstepd's own,
 * STATE/e2b/HANDLE.json ({"metadata": {NAME: VALUE}}); a sandbox without one has none (a make step's).
 * Kill removes it; a create removes those whose sandbox is gone (gc, destroy by another client). */

static char *
meta_path (Daemon *d, const char *handle)
{
  g_autofree char *name = g_strconcat (handle, ".json", NULL);

  return g_build_filename (d->state_dir, "e2b", name, NULL);
}

/* The record of @handle, or NULL when it has none or its file is unreadable. */
static JsonObject *
meta_record (Daemon *d, const char *handle)
{
  g_autofree char *path = meta_path (d, handle);
  g_autofree char *text = NULL;
  gsize len = 0;

  if (!g_file_get_contents (path, &text, &len, NULL))
    return NULL;
  return sandstep_wire_parse_object (text, len, NULL);
}

/* The metadata of @handle: an object, empty when it has none or its file is unreadable. */
static JsonObject *
meta_load (Daemon *d, const char *handle)
{
  g_autoptr(JsonObject) record = meta_record (d, handle);
  JsonNode *node = record != NULL ? json_object_get_member (record, "metadata") : NULL;

  if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node))
    return json_object_new ();
  return json_object_ref (json_node_get_object (node));
}

/* The template @handle was made from: "base" for one without a record (a make step's) or made so. */
static char *
meta_template (Daemon *d, const char *handle)
{
  g_autoptr(JsonObject) record = meta_record (d, handle);
  const char *template = record != NULL ? json_object_get_string_member_with_default (record, "template", NULL)
                                        : NULL;

  return g_strdup (template != NULL ? template : E2B_BASE_TEMPLATE);
}

/* The sandbox @handle is a snapshot of (E2B's createSnapshot): NULL for a sandbox that is none. */
static char *
meta_snapshot_of (Daemon *d, const char *handle)
{
  g_autoptr(JsonObject) record = meta_record (d, handle);

  return record != NULL ? g_strdup (json_object_get_string_member_with_default (record, "snapshot_of", NULL)) : NULL;
}

static gboolean
meta_save (Daemon *d, const char *handle, JsonObject *metadata, const char *template, const char *snapshot_of,
           GError **error)
{
  g_autofree char *path = meta_path (d, handle);
  g_autofree char *dir = g_path_get_dirname (path);
  g_autoptr(JsonObject) record = json_object_new ();
  g_autofree char *text = NULL;
  gsize len = 0;

  if (g_mkdir_with_parents (dir, 0700) < 0)
    {
      int errsv = errno;
      return sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errsv,
                                   "Cannot make '%s' for E2B's metadata", dir);
    }
  json_object_set_object_member (record, "metadata", json_object_ref (metadata));
  json_object_set_string_member (record, "template", template);
  if (snapshot_of != NULL)
    json_object_set_string_member (record, "snapshot_of", snapshot_of);
  text = sandstep_wire_to_text (record, &len);
  return g_file_set_contents_full (path, text, len, G_FILE_SET_CONTENTS_CONSISTENT, 0600, error);
}

static void
meta_remove (Daemon *d, const char *handle)
{
  g_autofree char *path = meta_path (d, handle);

  unlink (path);
}

/* Removes the metadata of sandboxes that are gone: @entries is every sandbox there is. */
static void
meta_prune (Daemon *d, GPtrArray *entries)
{
  g_autofree char *dir_path = g_build_filename (d->state_dir, "e2b", NULL);
  g_autoptr(GHashTable) alive = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr(GDir) dir = g_dir_open (dir_path, 0, NULL);
  const char *name;

  if (dir == NULL)
    return;
  for (guint i = 0; i < entries->len; i++)
    g_hash_table_add (alive, ((const SandstepListEntry *) entries->pdata[i])->handle);
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *handle = g_str_has_suffix (name, ".json") ? g_strndup (name, strlen (name) - 5) : NULL;
      if (handle != NULL && sandstep_handle_is_local (handle) && !g_hash_table_contains (alive, handle))
        meta_remove (d, handle);
    }
}

/* TRUE when @metadata has every NAME=VALUE of @filter. */
static gboolean
meta_matches (JsonObject *metadata, GHashTable *filter)
{
  GHashTableIter iter;
  gpointer name, value;

  if (filter == NULL)
    return TRUE;
  g_hash_table_iter_init (&iter, filter);
  while (g_hash_table_iter_next (&iter, &name, &value))
    {
      JsonNode *node = json_object_get_member (metadata, name);
      if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING ||
          strcmp (json_node_get_string (node), value) != 0)
        return FALSE;
    }
  return TRUE;
}

/* E2B's metadata is string to string; NULL after setting @error naming the first member that is not. */
static JsonObject *
meta_check (JsonNode *node, GError **error)
{
  JsonObject *metadata;
  g_autoptr(GList) names = NULL;

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return json_object_new ();
  if (!JSON_NODE_HOLDS_OBJECT (node))
    {
      g_set_error (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                   "The sandbox's metadata is not an object; send {NAME: VALUE} with string values");
      return NULL;
    }
  metadata = json_node_get_object (node);
  names = json_object_get_members (metadata);
  for (GList *l = names; l != NULL; l = l->next)
    {
      JsonNode *value = json_object_get_member (metadata, l->data);
      if (!JSON_NODE_HOLDS_VALUE (value) || json_node_get_value_type (value) != G_TYPE_STRING)
        {
          g_autofree char *shown = sandstep_escape (l->data, -1, 200, SANDSTEP_ESCAPE_VALUE);
          g_set_error (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                       "The value of metadata '%s' is not a string; E2B's metadata maps names to strings", shown);
          return NULL;
        }
    }
  return json_object_ref (metadata);
}

static char *
iso8601 (gint64 unix_s)
{
  g_autoptr(GDateTime) t = g_date_time_new_from_unix_utc (unix_s);
  return t != NULL ? g_date_time_format_iso8601 (t) : g_strdup ("1970-01-01T00:00:00Z");
}

/* A sandbox as GET /sandboxes/{id} and GET /v2/sandboxes show it. */
static JsonObject *
sandbox_object (Request *req, const SandstepListEntry *entry, gboolean with_token)
{
  JsonObject *o = json_object_new ();
  g_autofree char *started = iso8601 (entry->created);
  g_autofree char *ends = iso8601 (entry->expires);
  g_autofree char *template = meta_template (req->d, entry->handle);

  json_object_set_string_member (o, "sandboxID", entry->handle);
  json_object_set_string_member (o, "templateID", template);
  json_object_set_string_member (o, "clientID", "sandstep");
  json_object_set_object_member (o, "metadata", meta_load (req->d, entry->handle));
  json_object_set_string_member (o, "startedAt", started);
  json_object_set_string_member (o, "endAt", ends);
  json_object_set_string_member (o, "state", "running");
  json_object_set_int_member (o, "cpuCount", g_get_num_processors ());
  json_object_set_int_member (o, "memoryMB", 0);
  json_object_set_int_member (o, "diskSizeMB", 0);
  json_object_set_string_member (o, "envdVersion", E2B_ENVD_VERSION);
  if (with_token)
    {
      g_autofree char *envd = sandstepd_e2b_token (SANDSTEPD_E2B_ENVD_TOKEN, entry->handle);
      json_object_set_string_member (o, "envdAccessToken", envd);
    }
  return o;
}

/* What POST /sandboxes and POST /sandboxes/{id}/connect answer. */
static JsonObject *
created_object (Request *req, const char *handle)
{
  JsonObject *o = json_object_new ();
  g_autofree char *template = meta_template (req->d, handle);

  json_object_set_string_member (o, "sandboxID", handle);
  json_object_set_string_member (o, "templateID", template);
  json_object_set_string_member (o, "clientID", "sandstep");
  json_object_set_string_member (o, "envdVersion", E2B_ENVD_VERSION);
  /* envd's calls carry it back as X-Access-Token, and signed URLs are made with it: the sandbox's own. */
  {
    g_autofree char *envd = sandstepd_e2b_token (SANDSTEPD_E2B_ENVD_TOKEN, handle);
    g_autofree char *traffic = sandstepd_e2b_token (SANDSTEPD_E2B_TRAFFIC_TOKEN, handle);
    json_object_set_string_member (o, "envdAccessToken", envd);
    json_object_set_string_member (o, "trafficAccessToken", traffic);
  }
  json_object_set_null_member (o, "domain");
  return o;
}

typedef enum {
  E2B_CREATE,
  E2B_LIST,
  E2B_GET,
  E2B_KILL,
  E2B_CONNECT,
  E2B_TIMEOUT,
  E2B_SNAPSHOT,             /* POST /sandboxes/{id}/snapshots: a fork of the sandbox that runs nothing */
  E2B_SNAPSHOT_MADE,        /* its fork is made: the snapshot's record, then the answer */
  E2B_FORK_MADE,            /* create from a snapshot: its fork is made: the sandbox's record, then the answer */
  E2B_SNAPSHOTS,            /* GET /snapshots */
  E2B_DELETE_SNAPSHOT,      /* DELETE /templates/{id} */
} E2bOp;

typedef struct {
  Request *req;
  E2bOp op;
  char *handle;
  SandstepSpec *spec;
  char *owner;
  char *holder;
  JsonObject *metadata;     /* create: what to keep */
  char *template;           /* create: the template as named */
  gboolean template_is_name;  /* create: a configured name (--e2b-template), not a reference */
  char *from_snapshot;      /* create: the snapshot (a sandbox's handle) to fork; NULL: none */
  char *fork;               /* snapshot, create from one: the fork made */
  char *source;             /* snapshots: the sandbox whose snapshots are listed; NULL: all */
  GHashTable *filter;       /* list: the metadata it must have; NULL: any */
  gint64 timeout_s;         /* timeout, connect: the sandbox ends this long from now; 0: unchanged */
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
  g_free (job->template);
  g_free (job->from_snapshot);
  g_free (job->fork);
  g_free (job->source);
  if (job->metadata != NULL)
    json_object_unref (job->metadata);
  if (job->filter != NULL)
    g_hash_table_unref (job->filter);
  if (job->answer != NULL)
    json_node_unref (job->answer);
  g_clear_error (&job->error);
  g_free (job);
}

/* The sandbox @entry ends @timeout_s from now (E2B's setTimeout).  The backend's release with a keep is that
 * rule already: the sandbox lives until then, and is destroyed once its last command after it ends. */
static gboolean
set_end (SandstepBackend *b, const SandstepListEntry *entry, gint64 timeout_s, GError **error)
{
  g_autofree char *holder = g_strconcat (entry->owner, "/e2b-timeout", NULL);
  SandstepIdentity who = { entry->owner, holder, NULL };
  gboolean destroyed = FALSE;

  return sandstep_backend_release (b, entry->handle, &who, timeout_s, &destroyed, error);
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

      /* A template that is neither base, a configured name nor an image reference is a name sandstepd lacks. */
      if (handle == NULL && !job->template_is_name &&
          g_error_matches (job->error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_BAD_REFERENCE))
        {
          g_autofree char *names = template_names (req->d);
          g_autofree char *shown = sandstep_escape (job->template, -1, 200, SANDSTEP_ESCAPE_VALUE);
          g_autofree char *why = g_strdup (job->error->message);

          g_clear_error (&job->error);
          g_set_error (&job->error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_BAD_REFERENCE,
                       "Template '%s' is not served by sandstepd: use '" E2B_BASE_TEMPLATE "' (the host's root), "
                       "a template sandstepd was started with (--e2b-template; here: %s), or an image's "
                       "docker:// reference (as a template: %s)", shown, names, why);
        }
      if (handle != NULL && !meta_save (req->d, handle, job->metadata, job->template, NULL, &job->error))
        {
          /* A sandbox whose metadata is lost would not be found by it: none is made. */
          SandstepIdentity killer = { job->owner, job->holder, NULL };
          sandstep_backend_destroy (b, handle, &killer, NULL);
          g_prefix_error (&job->error, "The sandbox's metadata could not be kept: ");
          g_clear_pointer (&handle, g_free);
        }
      if (handle != NULL)
        {
          g_autoptr(GPtrArray) all = sandstep_backend_list (b, NULL, NULL, NULL);
          if (all != NULL)
            meta_prune (req->d, all);
          job->status = SOUP_STATUS_CREATED;
          job->answer = json_node_init_object (json_node_alloc (), created_object (req, handle));
          json_object_unref (json_node_get_object (job->answer));
        }
      g_task_return_boolean (task, TRUE);
      return;
    }
  if (job->op == E2B_SNAPSHOT_MADE || job->op == E2B_FORK_MADE)
    {
      gboolean snapshot = job->op == E2B_SNAPSHOT_MADE;
      g_autofree char *template = snapshot ? meta_template (req->d, job->handle) : NULL;
      g_autoptr(JsonObject) none = json_object_new ();
      g_autoptr(GPtrArray) made = sandstepd_e2b_covered (req, job->fork, NULL);
      const SandstepListEntry *entry = made != NULL && made->len == 1 ? made->pdata[0] : NULL;

      /* A snapshot keeps its sandbox's template; a sandbox made from one names the snapshot, as E2B's does.  The
       * snapshot ends when its sandbox would have (a fork's end is its parent's); a sandbox made from one lives
       * create's timeout. */
      if (entry == NULL)
        g_set_error (&job->error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                     "The fork '%s' is not among the key's sandboxes", job->fork);
      else if (meta_save (req->d, job->fork, snapshot ? none : job->metadata,
                          snapshot ? template : job->from_snapshot, snapshot ? job->handle : NULL, &job->error) &&
               (snapshot || set_end (b, entry, job->spec->lifetime_s, &job->error)))
        {
          JsonObject *o = snapshot ? json_object_new () : created_object (req, job->fork);

          if (snapshot)
            json_object_set_string_member (o, "snapshotID", job->fork);
          job->status = SOUP_STATUS_CREATED;
          job->answer = json_node_init_object (json_node_alloc (), o);
          json_object_unref (o);
          g_task_return_boolean (task, TRUE);
          return;
        }
      if (entry != NULL)
        {
          /* A fork that cannot be kept as asked is not left behind. */
          g_autofree char *holder = g_strconcat (entry->owner, "/e2b-kill", NULL);
          SandstepIdentity who = { entry->owner, holder, NULL };

          sandstep_backend_destroy (b, job->fork, &who, NULL);
          meta_remove (req->d, job->fork);
        }
      g_task_return_boolean (task, TRUE);
      return;
    }
  entries = sandstepd_e2b_covered (req, job->handle, &job->error);
  if (entries == NULL)
    {
      g_task_return_boolean (task, TRUE);
      return;
    }
  if (job->op == E2B_SNAPSHOTS)
    {
      JsonArray *array = json_array_new ();
      for (guint i = 0; i < entries->len; i++)
        {
          const SandstepListEntry *entry = entries->pdata[i];
          g_autofree char *of = meta_snapshot_of (req->d, entry->handle);
          if (of != NULL && (job->source == NULL || strcmp (of, job->source) == 0))
            {
              JsonObject *o = json_object_new ();
              json_object_set_string_member (o, "snapshotID", entry->handle);
              json_object_set_array_member (o, "names", json_array_new ());
              json_array_add_object_element (array, o);
            }
        }
      job->status = SOUP_STATUS_OK;
      job->answer = json_node_init_array (json_node_alloc (), array);
      json_array_unref (array);
      g_task_return_boolean (task, TRUE);
      return;
    }
  if (job->op == E2B_LIST)
    {
      JsonArray *array = json_array_new ();
      for (guint i = 0; i < entries->len; i++)
        {
          const SandstepListEntry *entry = entries->pdata[i];
          g_autoptr(JsonObject) metadata = meta_load (req->d, entry->handle);
          g_autofree char *of = meta_snapshot_of (req->d, entry->handle);
          /* A snapshot is no running sandbox: listSnapshots shows it. */
          if (of == NULL && meta_matches (metadata, job->filter))
            json_array_add_object_element (array, sandbox_object (req, entry, FALSE));
        }
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
  if (job->op == E2B_DELETE_SNAPSHOT)
    {
      const SandstepListEntry *entry = entries->pdata[0];
      g_autofree char *of = meta_snapshot_of (req->d, entry->handle);
      g_autofree char *holder = g_strconcat (entry->owner, "/e2b-kill", NULL);
      SandstepIdentity who = { entry->owner, holder, NULL };

      /* Only a snapshot is deleted as a template: a sandbox is killed (DELETE /sandboxes/{id}). */
      if (of == NULL)
        job->status = SOUP_STATUS_NOT_FOUND;
      else if (sandstep_backend_destroy (b, job->handle, &who, &job->error))
        {
          meta_remove (req->d, job->handle);
          job->status = SOUP_STATUS_NO_CONTENT;
        }
    }
  else if (job->op == E2B_KILL)
    {
      const SandstepListEntry *entry = entries->pdata[0];
      g_autofree char *holder = g_strconcat (entry->owner, "/e2b-kill", NULL);
      SandstepIdentity who = { entry->owner, holder, NULL };

      if (sandstep_backend_destroy (b, job->handle, &who, &job->error))
        {
          meta_remove (req->d, job->handle);
          job->status = SOUP_STATUS_NO_CONTENT;
        }
    }
  else if (job->op == E2B_TIMEOUT)
    {
      if (set_end (b, entries->pdata[0], job->timeout_s, &job->error))
        job->status = SOUP_STATUS_NO_CONTENT;
    }
  else
    {
      const SandstepListEntry *entry = entries->pdata[0];
      JsonObject *o;

      /* connect's timeout only lengthens the sandbox's life, as E2B's does for a running sandbox. */
      if (job->op == E2B_CONNECT && job->timeout_s > 0 &&
          g_get_real_time () / G_USEC_PER_SEC + job->timeout_s > entry->expires &&
          !set_end (b, entry, job->timeout_s, &job->error))
        {
          g_task_return_boolean (task, TRUE);
          return;
        }
      o = job->op == E2B_GET ? sandbox_object (req, entry, TRUE) : created_object (req, job->handle);
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

  /* A killed sandbox's watches end with it (one whose files went ends by itself, a forked one's may not). */
  if (job->op == E2B_KILL && job->error == NULL && job->status == SOUP_STATUS_NO_CONTENT)
    sandstepd_envd_watch_end_sandbox (job->handle);
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

/* A template named by a sandbox's ID that is no snapshot this key has: one text for all, so that another owner's
 * snapshot is not told from none. */
static void
no_snapshot (Request *req, const char *template)
{
  sandstepd_e2b_error (req, SOUP_STATUS_BAD_REQUEST,
                       "Template '%s' is not a snapshot sandstepd has for this key: it was deleted, is another "
                       "owner's, or is a sandbox (connect to it, or make a snapshot of it with createSnapshot())",
                       template);
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
  job->template = g_strdup (template);
  job->metadata = meta_check (json_object_get_member (body, "metadata"), &error);
  if (job->metadata == NULL)
    {
      sandstepd_e2b_error (req, SOUP_STATUS_BAD_REQUEST, "%s", error->message);
      return FALSE;
    }
  job->spec = sandstep_spec_new ();
  /* A snapshot's ID (a sandbox's handle) makes a fork of it; any other template is an image: a configured
   * name's, or the reference itself, which the backend pulls (and refuses when it names a file of this host, or
   * does not parse). */
  if (sandstep_handle_is_local (template))
    {
      g_autofree char *of = meta_snapshot_of (req->d, template);
      if (of == NULL)
        {
          no_snapshot (req, template);
          return FALSE;
        }
      job->from_snapshot = g_strdup (template);
    }
  else if (strcmp (template, E2B_BASE_TEMPLATE) != 0)
    {
      const char *configured = req->d->e2b_templates != NULL ? g_hash_table_lookup (req->d->e2b_templates, template)
                                                             : NULL;
      job->template_is_name = configured != NULL;
      if (configured != NULL || strcmp (template, E2B_CODE_TEMPLATE) != 0)
        job->spec->image = g_strdup (configured != NULL ? configured : template);
    }
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

/* The body {"timeout": SECONDS} of setTimeout (required) and connect (optional) into @job; FALSE after
 * answering 400.  The bound is a sandbox's lifetime's (sandstep_spec_check()). */
static gboolean
read_timeout (Request *req, E2bJob *job, gboolean required)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonObject) body = NULL;
  g_autoptr(SandstepSpec) spec = NULL;
  JsonNode *node;

  if (req->body->len == 0 && !required)
    return TRUE;
  body = sandstep_wire_parse_object ((const char *) req->body->data, req->body->len, &error);
  if (body == NULL)
    {
      sandstepd_e2b_error (req, SOUP_STATUS_BAD_REQUEST, "%s %s: %s; send {\"timeout\": SECONDS}", req->method,
                           req->path, error->message);
      return FALSE;
    }
  node = json_object_get_member (body, "timeout");
  if (node == NULL && !required)
    return TRUE;
  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64)
    {
      sandstepd_e2b_error (req, SOUP_STATUS_BAD_REQUEST, "%s %s: no whole number 'timeout'; send {\"timeout\": "
                           "SECONDS}", req->method, req->path);
      return FALSE;
    }
  spec = sandstep_spec_new ();
  spec->lifetime_s = json_node_get_int (node);
  if (!sandstep_spec_check (spec, &error))
    {
      sandstepd_e2b_error (req, SOUP_STATUS_BAD_REQUEST, "The sandbox's timeout cannot be set: %s", error->message);
      return FALSE;
    }
  job->timeout_s = spec->lifetime_s;
  return TRUE;
}

/* GET /v2/sandboxes?metadata=...: the SDK sends NAME=VALUE pairs, each side URI-encoded, form-encoded in one
 * query parameter; NULL: no filter. */
static GHashTable *
read_filter (Request *req)
{
  GUri *uri = soup_server_message_get_uri (req->msg);
  g_autoptr(GHashTable) query = NULL;
  g_autoptr(GHashTable) pairs = NULL;
  GHashTable *filter;
  GHashTableIter iter;
  gpointer name, value;
  const char *text;

  if (uri == NULL || g_uri_get_query (uri) == NULL)
    return NULL;
  query = soup_form_decode (g_uri_get_query (uri));
  text = g_hash_table_lookup (query, "metadata");
  if (text == NULL || text[0] == '\0')
    return NULL;
  pairs = soup_form_decode (text);
  filter = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  g_hash_table_iter_init (&iter, pairs);
  while (g_hash_table_iter_next (&iter, &name, &value))
    {
      char *n = g_uri_unescape_string (name, NULL);
      char *v = g_uri_unescape_string (value, NULL);
      /* What does not decode matches nothing (a NUL, say): kept as sent. */
      g_hash_table_insert (filter, n != NULL ? n : g_strdup (name), v != NULL ? v : g_strdup (value));
    }
  return filter;
}

/* The fork of a snapshot (or for one) is made: its record and answer are written off the main loop. */
static void
on_forked (Request *req, const char *handle, const GError *error, gpointer data)
{
  E2bJob *old = data;
  E2bJob *job;
  g_autoptr(GTask) task = NULL;

  if (error != NULL)
    {
      gboolean not_found = g_error_matches (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_FOUND);

      if (old->from_snapshot != NULL && not_found)
        no_snapshot (req, old->from_snapshot);
      else if (not_found)
        sandstepd_e2b_error (req, SOUP_STATUS_NOT_FOUND, "%s", error->message);
      else
        sandstepd_e2b_backend_error (req, error);
      return;
    }
  /* The fork's call frees @old when it is done: what the answer needs moves to a job of the task's own. */
  job = g_new0 (E2bJob, 1);
  *job = *old;
  memset (old, 0, sizeof *old);
  job->fork = g_strdup (handle);
  job->op = job->op == E2B_SNAPSHOT ? E2B_SNAPSHOT_MADE : E2B_FORK_MADE;
  task = g_task_new (NULL, NULL, e2b_done, NULL);
  g_task_set_task_data (task, job, (GDestroyNotify) e2b_job_free);
  g_task_run_in_thread (task, e2b_thread);
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
  E2bJob *job;

  /* Snapshots: listed (GET /snapshots?sandboxID=) and deleted as templates (DELETE /templates/{id}). */
  if ((n == 1 && strcmp (parts[0], "snapshots") == 0 && strcmp (method, "GET") == 0) ||
      (n == 2 && strcmp (parts[0], "templates") == 0 && strcmp (method, "DELETE") == 0))
    {
      job = g_new0 (E2bJob, 1);
      job->req = sandstepd_request_ref (req);
      if (n == 1)
        {
          GUri *uri = soup_server_message_get_uri (req->msg);
          g_autoptr(GHashTable) query = uri != NULL && g_uri_get_query (uri) != NULL
                                          ? soup_form_decode (g_uri_get_query (uri))
                                          : NULL;
          const char *source = query != NULL ? g_hash_table_lookup (query, "sandboxID") : NULL;

          job->op = E2B_SNAPSHOTS;
          job->source = source != NULL && source[0] != '\0' ? g_strdup (source) : NULL;
        }
      else if (!sandstep_handle_is_local (parts[1]))
        {
          g_autofree char *shown = sandstep_escape (parts[1], -1, 200, SANDSTEP_ESCAPE_VALUE);
          sandstepd_e2b_error (req, SOUP_STATUS_NOT_FOUND, "Snapshot '%s' not found: sandstepd has snapshots only "
                               "(IDs like sandstep-0123456789abcdef), no templates to delete", shown);
          e2b_job_free (job);
          return;
        }
      else
        {
          job->op = E2B_DELETE_SNAPSHOT;
          job->handle = g_strdup (parts[1]);
        }
      task = g_task_new (NULL, NULL, e2b_done, NULL);
      g_task_set_task_data (task, job, (GDestroyNotify) e2b_job_free);
      g_task_run_in_thread (task, e2b_thread);
      return;
    }
  if (is_unserved_area (req->path))
    {
      sandstepd_e2b_error (req, SOUP_STATUS_NOT_IMPLEMENTED,
                           "%s %s is not served by sandstepd's E2B API: it has no templates to build or manage, "
                           "and no volumes (a template names the host's root, 'base', or an image); it serves "
                           "create, connect, list, get, setTimeout and kill of sandboxes, and their snapshots "
                           "(docs/e2b.md)", req->method, req->path);
      return;
    }
  job = g_new0 (E2bJob, 1);
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
  else if (!v2 && np == 3 && strcmp (method, "POST") == 0 && strcmp (p[2], "timeout") == 0)
    job->op = E2B_TIMEOUT;
  else if (!v2 && np == 3 && strcmp (method, "POST") == 0 && strcmp (p[2], "snapshots") == 0)
    job->op = E2B_SNAPSHOT;
  else
    {
      sandstepd_e2b_error (req, SOUP_STATUS_NOT_IMPLEMENTED,
                           "%s %s is not served by sandstepd's E2B API; it serves create, connect, list, get, "
                           "setTimeout and kill of sandboxes, and their snapshots (docs/e2b.md)", method, req->path);
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
  if ((job->op == E2B_CREATE && !read_create (req, job)) ||
      ((job->op == E2B_TIMEOUT || job->op == E2B_CONNECT) && !read_timeout (req, job, job->op == E2B_TIMEOUT)))
    {
      e2b_job_free (job);
      return;
    }
  if (job->op == E2B_LIST)
    job->filter = read_filter (req);
  /* A snapshot is a fork of the sandbox, and a create from one a fork of it: under a claim, as a step's fork. */
  if (job->op == E2B_SNAPSHOT || job->from_snapshot != NULL)
    {
      g_autofree char *holder = NULL;
      const char *parent = job->op == E2B_SNAPSHOT ? job->handle : job->from_snapshot;

      if (job->op == E2B_SNAPSHOT)
        {
          g_autofree char *owner = sandstepd_e2b_owner (req->scope);
          holder = g_strdup_printf ("%s/e2b-snapshot-%08x%08x", owner, g_random_int (), g_random_int ());
        }
      else
        holder = g_strdup (job->holder);
      sandstepd_envd_fork (req, parent, holder, on_forked, job, (GDestroyNotify) e2b_job_free);
      return;
    }
  task = g_task_new (NULL, NULL, e2b_done, NULL);
  g_task_set_task_data (task, job, (GDestroyNotify) e2b_job_free);
  g_task_run_in_thread (task, e2b_thread);
}

void
sandstepd_handle_e2b (Request *req)
{
  if (sandstepd_e2b_code_is_path (req->path))
    sandstepd_handle_e2b_code (req);
  else if (sandstepd_envd_is_path (req->path))
    sandstepd_handle_envd (req);
  else
    handle_platform (req);
}
