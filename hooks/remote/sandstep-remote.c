/* sandstep-remote.c: the backend interface on a sandstepd, over a SoupSession.
 *
 * Built into the module sandstep-remote.so only (see meson.build and
 * sandstep_backend_open()): nothing that runs local steps loads libsoup for it.
 *
 * Every call is synchronous, as the vtable is; the session is used only from
 * the thread that made the backend.  The one exception to "one request, one
 * answer" is the claim: its response stays open for as long as the
 * attachment lives (see sandstep-remote.h).
 */
#include "sandstep-remote-private.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-progress.h"
#include "sandstep-sparse.h"
#include "sandstep-token.h"

static void remote_detach (SandstepAttachment *parent);

static char *
remote_provision (SandstepBackend *backend, const SandstepSpec *spec, const SandstepIdentity *who,
                  gboolean *out_existing, GError **error)
{
  RemoteBackend *r = (RemoteBackend *) backend;
  g_autoptr(JsonObject) answer = NULL;
  const char *handle;

  *out_existing = FALSE;
  if (r->url == NULL)
    {
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                      "no sandbox server to provision on: pass --backend=URL or set " SANDSTEP_BACKEND_ENV);
      return NULL;
    }
  answer = sandstep_remote_call (r, r->url, "/sandboxes", sandstep_wire_provision_request (who, spec), NULL, error);
  if (answer == NULL)
    return NULL;
  handle = sandstep_wire_read_provision_reply (answer, out_existing);
  if (handle == NULL)
    {
      *out_existing = FALSE;
      sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                      "The sandbox server at '%s' provisioned a sandbox but sent no handle for it", r->url);
      return NULL;
    }
  return g_strdup_printf ("%s/%s", r->url, handle);
}

static SandstepAttachment *
remote_try_attach (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, GError **error)
{
  RemoteBackend *r = (RemoteBackend *) backend;
  Target t;
  g_autofree char *path = NULL;
  g_autoptr(SoupMessage) msg = NULL;
  g_autoptr(GInputStream) stream = NULL;
  g_autoptr(GError) local_error = NULL;
  RemoteAttachment *a;
  LineReader lr;
  g_autofree char *line = NULL;
  g_autoptr(JsonObject) first = NULL;
  const char *claim = NULL;

  if (!sandstep_remote_target_parse (r, handle, &t, error))
    return NULL;
  sandstep_remote_trace (r, "claim sent");
  path = g_strdup_printf ("/sandboxes/%s/claim", t.local);
  msg = sandstep_remote_message (r, t.server, path, NULL);
  sandstep_remote_set_body (msg, sandstep_wire_identity_request (who));
  stream = soup_session_send (r->session, msg, NULL, &local_error);
  if (stream == NULL)
    {
      sandstep_remote_throw_unreachable (error, t.server, local_error);
      sandstep_remote_target_clear (&t);
      return NULL;
    }
  if (soup_message_get_status (msg) != SOUP_STATUS_OK)
    {
      /* A busy refusal names its holder: sandstep_backend_attach() waits on it. */
      g_propagate_error (error, sandstep_remote_error_from_stream (msg, stream, &t));
      sandstep_remote_target_clear (&t);
      return NULL;
    }

  a = g_new0 (RemoteAttachment, 1);
  a->parent.backend = backend;
  a->parent.handle = g_strdup (t.shown);
  a->remote = r;
  a->target = t;
  a->claim_msg = g_steal_pointer (&msg);
  a->claim_stream = g_steal_pointer (&stream);
  /* Only the first line is read here: the rest of the answer is the lease. */
  sandstep_remote_line_reader_init (&lr, a->claim_stream);
  do
    {
      g_free (line);
      line = sandstep_remote_line_reader_next (&lr, &local_error);
    }
  while (line != NULL && line[0] == '\0');
  if (line != NULL)
    first = sandstep_remote_parse_line (line, t.server, &local_error);
  if (first == NULL || !sandstep_wire_read_claim (first, &claim, &a->remaining_at_claim, &a->spec))
    {
      sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                      "The sandbox server at '%s' did not confirm the claim on '%s'%s%s", t.server, t.shown,
                      local_error ? ": " : "", local_error ? local_error->message : "");
      remote_detach (&a->parent);
      return NULL;
    }
  a->claim = g_strdup (claim);
  a->claimed_at = g_get_monotonic_time ();
  sandstep_remote_trace (r, "claimed");
  return &a->parent;
}

static void
remote_detach (SandstepAttachment *parent)
{
  RemoteAttachment *a = (RemoteAttachment *) parent;

  /* Said explicitly, and answered once the claim is gone, so the next step
   * never finds it still held; dropping the connection would end it too. */
  sandstep_remote_trace (a->remote, "release sent");
  if (a->claim != NULL)
    {
      g_autofree char *path = g_strdup_printf ("/sandboxes/%s/release-claim", a->target.local);
      g_autoptr(SoupMessage) msg = sandstep_remote_message (a->remote, a->target.server, path, NULL);
      g_autoptr(GBytes) answer = NULL;

      sandstep_remote_set_body (msg, sandstep_wire_release_claim_request (a->claim));
      answer = soup_session_send_and_read (a->remote->session, msg, NULL, NULL);
    }
  sandstep_remote_trace (a->remote, "released");
  if (a->claim_stream != NULL)
    g_input_stream_close (a->claim_stream, NULL, NULL);
  g_clear_object (&a->claim_stream);
  g_clear_object (&a->claim_msg);
  sandstep_spec_free (a->spec);
  g_free (a->claim);
  sandstep_remote_target_clear (&a->target);
  g_free (parent->handle);
  g_free (a);
}

static double
remote_remaining_lifetime (SandstepAttachment *parent)
{
  RemoteAttachment *a = (RemoteAttachment *) parent;
  double left = a->remaining_at_claim - (g_get_monotonic_time () - a->claimed_at) / (double) G_USEC_PER_SEC;

  return MAX (left, 0);
}

static const SandstepSpec *
remote_spec (SandstepAttachment *parent)
{
  return ((RemoteAttachment *) parent)->spec;
}

static gboolean
remote_run_command (SandstepAttachment *parent, const SandstepRunRequest *request, SandstepRunResult *result,
                    GError **error)
{
  RemoteAttachment *a = (RemoteAttachment *) parent;
  g_autoptr(SoupMessage) msg = NULL;
  g_autoptr(GInputStream) stream = NULL;
  RunOutput out = { request, TRUE };

  sandstep_remote_trace (a->remote, "run sent");
  stream = sandstep_remote_open_stream (a, "run", sandstep_wire_run_request (a->claim, request->command,
                                                                             request->timeout_s), &msg, error);
  if (stream == NULL)
    return FALSE;
  sandstep_remote_trace (a->remote, "run started");
  for (;;)
    {
      g_autoptr(JsonObject) last = sandstep_remote_read_stream (a, stream, "the command ran", "run it again", sandstep_remote_on_run_output, &out,
                                                error);
      if (last == NULL)
        return FALSE;
      /* The server's result: its budget is the one that applied. */
      if (sandstep_wire_read_run_result (last, result))
        {
          sandstep_remote_trace (a->remote, "run ended");
          /* The server's notices (egress refusals) come with the result, not as they happen. */
          if (request->on_notice != NULL)
            sandstep_wire_read_notices (last, request->on_notice, request->user_data);
          return TRUE;
        }
      /* Anything else is a newer server's news: ignored. */
    }
}

static GBytes *
remote_read_file (SandstepAttachment *parent, const char *path, gsize max_bytes, GError **error)
{
  RemoteAttachment *a = (RemoteAttachment *) parent;
  g_autofree char *url_path = g_strdup_printf ("/sandboxes/%s/read", a->target.local);
  g_autoptr(SoupMessage) msg = sandstep_remote_message (a->remote, a->target.server, url_path, NULL);
  GBytes *answer;

  sandstep_remote_set_body (msg, sandstep_wire_path_request (a->claim, path,
                                                             (gint64) MIN (max_bytes, (gsize) G_MAXINT64)));
  answer = sandstep_remote_send_and_read (a->remote, msg, a->target.server, &a->target, error);
  if (answer != NULL && g_bytes_get_size (answer) > max_bytes)
    {
      g_bytes_unref (answer);
      sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                      "The sandbox server at '%s' sent more of '%s' than the %" G_GSIZE_FORMAT " bytes asked for",
                      a->target.server, path, max_bytes);
      return NULL;
    }
  /* The body comes whole: counted once it is in. */
  if (answer != NULL)
    sandstep_progress_add (g_bytes_get_size (answer));
  return answer;
}

static gboolean
remote_write_file (SandstepAttachment *parent, const char *path, const void *data, gsize len, GError **error)
{
  RemoteAttachment *a = (RemoteAttachment *) parent;
  g_autofree char *url_path = g_strdup_printf ("/sandboxes/%s/write", a->target.local);
  g_autofree char *query = sandstep_remote_query ("path", path, NULL);
  g_autoptr(SoupMessage) msg = sandstep_remote_message (a->remote, a->target.server, url_path, query);
  g_autoptr(GBytes) bytes = g_bytes_new_static (data, len);
  g_autoptr(GBytes) answer = NULL;

  soup_message_headers_replace (soup_message_get_request_headers (msg), SANDSTEP_CLAIM_HEADER, a->claim);
  soup_message_set_request_body_from_bytes (msg, "application/octet-stream", bytes);
  answer = sandstep_remote_send_and_read (a->remote, msg, a->target.server, &a->target, error);
  return answer != NULL;
}

static GPtrArray *
remote_list_directory (SandstepAttachment *parent, const char *path, GError **error)
{
  RemoteAttachment *a = (RemoteAttachment *) parent;
  g_autofree char *url_path = g_strdup_printf ("/sandboxes/%s/list", a->target.local);
  g_autoptr(JsonObject) answer = NULL;

  answer = sandstep_remote_call (a->remote, a->target.server, url_path, sandstep_wire_path_request (a->claim, path, -1),
                                 &a->target, error);
  return answer != NULL ? sandstep_wire_read_entries (answer) : NULL;
}

static gboolean
remote_fork (SandstepAttachment *parent, const SandstepIdentity *who, guint count, GPtrArray *out_handles,
             GError **error)
{
  RemoteAttachment *a = (RemoteAttachment *) parent;
  g_autofree char *url_path = g_strdup_printf ("/sandboxes/%s/fork", a->target.local);
  g_autoptr(JsonObject) answer = NULL;
  g_autoptr(GPtrArray) handles = NULL;

  answer = sandstep_remote_call (a->remote, a->target.server, url_path,
                                 sandstep_wire_fork_request (a->claim, who->holder, count), &a->target, error);
  if (answer == NULL)
    return FALSE;
  handles = sandstep_wire_read_strings (answer, "handles");
  if (handles == NULL || handles->len != count)
    return sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                           "The sandbox server at '%s' forked '%s' but sent no handles for the forks",
                           a->target.server, a->target.local);
  /* The server's handles, named with the server as a provision's are. */
  for (guint i = 0; i < handles->len; i++)
    g_ptr_array_add (out_handles, g_strdup_printf ("%s/%s", a->target.server, (char *) handles->pdata[i]));
  return TRUE;
}

static gboolean
remote_checkpoint_call (SandstepAttachment *parent, const char *route, const char *name, GError **error)
{
  RemoteAttachment *a = (RemoteAttachment *) parent;
  g_autofree char *url_path = g_strdup_printf ("/sandboxes/%s/%s", a->target.local, route);
  g_autoptr(JsonObject) answer = NULL;

  answer = sandstep_remote_call (a->remote, a->target.server, url_path, sandstep_wire_name_request (a->claim, name),
                                 &a->target, error);
  return answer != NULL;
}

static gboolean
remote_checkpoint (SandstepAttachment *parent, const char *name, GError **error)
{
  return remote_checkpoint_call (parent, "checkpoint", name, error);
}

static gboolean
remote_rollback (SandstepAttachment *parent, const char *name, GError **error)
{
  return remote_checkpoint_call (parent, "rollback", name, error);
}

static GPtrArray *
remote_checkpoints (SandstepAttachment *parent, GError **error)
{
  RemoteAttachment *a = (RemoteAttachment *) parent;
  g_autofree char *url_path = g_strdup_printf ("/sandboxes/%s/checkpoints", a->target.local);
  g_autoptr(JsonObject) answer = NULL;
  GPtrArray *names;

  answer = sandstep_remote_call (a->remote, a->target.server, url_path, sandstep_wire_claimed_request (a->claim), &a->target,
                                 error);
  if (answer == NULL)
    return NULL;
  names = sandstep_wire_read_strings (answer, "names");
  if (names == NULL)
    sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                    "The sandbox server at '%s' sent no checkpoint names for '%s'", a->target.server,
                    a->target.local);
  return names;
}

typedef struct {
  RemoteAttachment *a;
  const char *path;
  SandstepSparseWriter sparse;   /* blocks of zeros become holes: a sparse file stays sparse */
  guint64 max_bytes;
  guint64 written;
} ExportOutput;

static gboolean
on_export_data (int stream, GBytes *bytes, gpointer data, GError **error)
{
  ExportOutput *out = data;
  gsize len = 0;
  const char *chunk = g_bytes_get_data (bytes, &len);

  if (out->written + len > out->max_bytes)
    return sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                           "The sandbox server at '%s' sent more of '%s' than the %" G_GUINT64_FORMAT
                           " bytes allowed", out->a->target.server, out->path, out->max_bytes);
  if (!sandstep_sparse_write (&out->sparse, chunk, len))
    return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                 "Cannot write '%s' where it is exported to", out->path);
  out->written += len;
  sandstep_progress_add (len);
  return TRUE;
}

static gint64
remote_export_file (SandstepAttachment *parent, const char *path, int dest_fd, guint64 max_bytes, GError **error)
{
  RemoteAttachment *a = (RemoteAttachment *) parent;
  g_autoptr(SoupMessage) msg = NULL;
  g_autoptr(GInputStream) stream = NULL;
  g_autofree char *what = g_strdup_printf ("'%s' was exported", path);
  ExportOutput out = { .a = a, .path = path, .max_bytes = max_bytes };

  sandstep_sparse_writer_init (&out.sparse, dest_fd);
  stream = sandstep_remote_open_stream (a, "export",
                                        sandstep_wire_path_request (a->claim, path,
                                                                    (gint64) MIN (max_bytes, (guint64) G_MAXINT64)),
                                        &msg, error);
  if (stream == NULL)
    return -1;
  for (;;)
    {
      g_autoptr(JsonObject) last = sandstep_remote_read_stream (a, stream, what, "export it again", on_export_data, &out, error);
      if (last == NULL)
        return -1;
      if (sandstep_wire_is_done_line (last))
        {
          if (!sandstep_sparse_finish (&out.sparse))
            return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                         "Cannot write '%s' where it is exported to", path), -1;
          return (gint64) out.written;
        }
    }
}

static JsonNode *
remote_describe (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, GError **error)
{
  RemoteBackend *r = (RemoteBackend *) backend;
  g_autoptr(JsonObject) answer = NULL;
  g_autofree char *path = NULL;
  JsonNode *node;
  Target t;

  if (!sandstep_remote_target_parse (r, handle, &t, error))
    return NULL;
  path = g_strdup_printf ("/sandboxes/%s/describe", t.local);
  answer = sandstep_remote_call (r, t.server, path, sandstep_wire_identity_request (who), &t, error);
  if (answer != NULL)
    {
      json_object_set_string_member (answer, "handle", t.shown);
      json_object_set_string_member (answer, "backend", "remote");
      json_object_set_string_member (answer, "server", t.server);
    }
  sandstep_remote_target_clear (&t);
  if (answer == NULL)
    return NULL;
  node = json_node_new (JSON_NODE_OBJECT);
  json_node_set_object (node, answer);
  return node;
}

static gboolean
remote_release (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, gint64 keep_s,
                gboolean *out_destroyed, GError **error)
{
  RemoteBackend *r = (RemoteBackend *) backend;
  g_autoptr(JsonObject) answer = NULL;
  g_autofree char *path = NULL;
  Target t;

  *out_destroyed = FALSE;
  if (!sandstep_remote_target_parse (r, handle, &t, error))
    return FALSE;
  path = g_strdup_printf ("/sandboxes/%s/release", t.local);
  answer = sandstep_remote_call (r, t.server, path, sandstep_wire_release_request (who, keep_s), &t, error);
  sandstep_remote_target_clear (&t);
  if (answer == NULL)
    return FALSE;
  *out_destroyed = sandstep_wire_read_release_reply (answer);
  return TRUE;
}

static gboolean
remote_destroy (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, GError **error)
{
  RemoteBackend *r = (RemoteBackend *) backend;
  g_autoptr(JsonObject) answer = NULL;
  g_autofree char *path = NULL;
  Target t;

  if (!sandstep_remote_target_parse (r, handle, &t, error))
    return FALSE;
  path = g_strdup_printf ("/sandboxes/%s/destroy", t.local);
  answer = sandstep_remote_call (r, t.server, path, sandstep_wire_identity_request (who), &t, error);
  sandstep_remote_target_clear (&t);
  return answer != NULL;
}

static gboolean
remote_gc (SandstepBackend *backend, const char *run, const char *owner_prefix, gboolean expired_only,
           gboolean broken, GPtrArray *destroyed, GError **error)
{
  RemoteBackend *r = (RemoteBackend *) backend;
  g_autoptr(JsonObject) answer = NULL;
  GError *failed;

  /* The server narrows it to what the token covers. */
  g_return_val_if_fail (owner_prefix == NULL, FALSE);
  if (r->url == NULL)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                           "no sandbox server to reclaim sandboxes on: pass --backend=URL or set "
                           SANDSTEP_BACKEND_ENV);
  answer = sandstep_remote_call (r, r->url, "/gc", sandstep_wire_gc_request (run, expired_only, broken), NULL, error);
  if (answer == NULL)
    return FALSE;
  failed = sandstep_wire_read_gc_reply (answer, r->url, destroyed);
  if (failed != NULL)
    {
      g_propagate_error (error, failed);
      return FALSE;
    }
  return TRUE;
}

static void
remote_free (SandstepBackend *backend)
{
  RemoteBackend *r = (RemoteBackend *) backend;

  g_clear_object (&r->session);
  if (r->spool_fd >= 0)
    close (r->spool_fd);
  g_clear_pointer (&r->trusted, g_ptr_array_unref);
  g_free (r->trusted_from);
  g_free (r->url);
  if (r->token != NULL)
    explicit_bzero (r->token, strlen (r->token));
  g_free (r->token);
  g_free (r);
}

static GPtrArray *
remote_list (SandstepBackend *backend, const char *run, const char *owner, GError **error)
{
  RemoteBackend *r = (RemoteBackend *) backend;
  g_autoptr(JsonObject) answer = NULL;

  if (r->url == NULL)
    {
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                      "no sandbox server to list the sandboxes of: pass --backend=URL or set " SANDSTEP_BACKEND_ENV);
      return NULL;
    }
  answer = sandstep_remote_call (r, r->url, "/list", sandstep_wire_list_request (run, owner), NULL, error);
  return answer != NULL ? sandstep_wire_read_list_reply (answer, r->url) : NULL;
}

static const SandstepBackendClass remote_class = {
  .name = "remote",
  .provision = remote_provision,
  .try_attach = remote_try_attach,
  .detach = remote_detach,
  .run_command = remote_run_command,
  .try_run_step = sandstep_remote_try_run_step,
  .end_run_step = sandstep_remote_end_run_step,
  .read_file = remote_read_file,
  .write_file = remote_write_file,
  .put = sandstep_remote_put,
  .list_directory = remote_list_directory,
  .fork = remote_fork,
  .checkpoint = remote_checkpoint,
  .rollback = remote_rollback,
  .checkpoints = remote_checkpoints,
  .export_file = remote_export_file,
  .remaining_lifetime = remote_remaining_lifetime,
  .spec = remote_spec,
  .describe = remote_describe,
  .release = remote_release,
  .destroy = remote_destroy,
  .gc = remote_gc,
  .list = remote_list,
  .free = remote_free,
};

/* Appends the servers listed in @path (missing: none). */
static void
read_servers_file (const char *path, GPtrArray *into)
{
  g_autofree char *text = NULL;
  g_auto(GStrv) lines = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return;
  lines = g_strsplit (text, "\n", -1);
  for (char **l = lines; *l != NULL; l++)
    {
      char *line = g_strstrip (*l);
      char *server;

      if (line[0] == '\0' || line[0] == '#')
        continue;
      server = sandstep_server_url_normalize (line);
      if (server != NULL)
        g_ptr_array_add (into, server);
      else
        g_debug ("%s: '%s' is not a server URL, ignored", path, line);
    }
}

SandstepBackend *
sandstep_remote_backend_new (const char *url, const char *token, GError **error)
{
  g_autofree char *user_file = g_build_filename (g_get_user_config_dir (), SANDSTEP_SERVERS_FILE, NULL);
  g_autofree char *server = NULL;
  g_autofree char *secret = NULL;
  const char *ca_file = g_getenv (SANDSTEP_CA_FILE_ENV);
  RemoteBackend *r;

  if (url != NULL)
    {
      server = sandstep_server_url_normalize (url);
      if (server == NULL)
        {
          sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                          "backend '%s' is not a sandbox server URL; give http://HOST:PORT or https://HOST:PORT "
                          "(where sandstepd listens), or 'local'", url);
          return NULL;
        }
    }
  if (token != NULL)
    secret = g_strdup (token);
  else if (g_getenv (SANDSTEP_TOKEN_ENV) != NULL && g_getenv (SANDSTEP_TOKEN_ENV)[0] != '\0')
    secret = g_strstrip (g_strdup (g_getenv (SANDSTEP_TOKEN_ENV)));
  else if (g_getenv (SANDSTEP_TOKEN_FILE_ENV) != NULL && g_getenv (SANDSTEP_TOKEN_FILE_ENV)[0] != '\0')
    {
      secret = sandstep_token_read_file (g_getenv (SANDSTEP_TOKEN_FILE_ENV), error);
      if (secret == NULL)
        return NULL;
    }

  r = g_new0 (RemoteBackend, 1);
  r->parent.klass = &remote_class;
  r->spool_fd = -1;
  r->url = g_steal_pointer (&server);
  r->token = g_steal_pointer (&secret);
  r->allow_http = g_strcmp0 (g_getenv (SANDSTEP_ALLOW_HTTP_ENV), "1") == 0;
  r->trusted = g_ptr_array_new_with_free_func (g_free);
  read_servers_file (user_file, r->trusted);
  read_servers_file (SANDSTEP_SYSTEM_SERVERS_FILE, r->trusted);
  r->trusted_from = g_strdup_printf ("'%s' or '%s'", user_file, SANDSTEP_SYSTEM_SERVERS_FILE);
  if (r->url != NULL && !sandstep_remote_check_scheme (r, r->url, error))
    {
      remote_free (&r->parent);
      return NULL;
    }
  r->created = g_get_monotonic_time ();
  r->session = soup_session_new_with_options ("timeout", SANDSTEP_REMOTE_IO_TIMEOUT_S, "user-agent", "sandstep", NULL);
  /* Straight to the server: no proxy (it would see the token), and no proxy
   * modules loaded at every helper start. */
  soup_session_set_proxy_resolver (r->session, NULL);
  if (ca_file != NULL && ca_file[0] != '\0')
    {
      g_autoptr(GError) local_error = NULL;
      g_autoptr(GTlsDatabase) database = g_tls_file_database_new (ca_file, &local_error);
      if (database == NULL)
        {
          sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                          SANDSTEP_CA_FILE_ENV " '%s' cannot be used: %s", ca_file, local_error->message);
          remote_free (&r->parent);
          return NULL;
        }
      soup_session_set_tls_database (r->session, database);
    }
  return &r->parent;
}
