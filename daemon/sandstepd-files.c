/* sandstepd-files.c: read, list, write and put under a claim.
 *
 * read's bytes come back from the worker in a memfd, which is mapped and
 * sent without a copy on the heap; write's and put's bodies are staged
 * under the state directory as they arrive (sandstepd-routes.c, and
 * sandstepd-upload.c for put) before the worker writes them in.
 */
#include "sandstepd-private.h"

#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-wire.h"

static void
on_simple_done (Call *call, JsonObject *reply, int reply_fd, const GError *error)
{
  Request *req = call->data;

  if (error != NULL)
    {
      sandstepd_answer_error (req, error);
      return;
    }
  switch (req->route)
    {
    case ROUTE_READ:
      {
        g_autoptr(GError) map_error = NULL;
        g_autoptr(GMappedFile) mapped = NULL;
        g_autoptr(GBytes) bytes = NULL;

        if (reply_fd < 0)
          {
            sandstepd_answer_refusal (req, SOUP_STATUS_INTERNAL_SERVER_ERROR, "internal", "see the server's log",
                                      SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                                      "The worker read the file but passed nothing back");
            return;
          }
        if (lseek (reply_fd, 0, SEEK_END) == 0)
          bytes = g_bytes_new_static ("", 0);
        else if ((mapped = g_mapped_file_new_from_fd (reply_fd, FALSE, &map_error)) != NULL)
          bytes = g_mapped_file_get_bytes (mapped);
        if (bytes == NULL)
          {
            sandstepd_answer_refusal (req, SOUP_STATUS_INTERNAL_SERVER_ERROR, "internal", "see the server's log",
                                      SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, "Cannot map the file read: %s",
                                      map_error ? map_error->message : "");
            return;
          }
        soup_server_message_set_status (req->msg, SOUP_STATUS_OK, NULL);
        soup_message_headers_set_content_type (soup_server_message_get_response_headers (req->msg),
                                               "application/octet-stream", NULL);
        soup_message_body_append_bytes (soup_server_message_get_response_body (req->msg), bytes);
        req->completed = TRUE;
        sandstepd_request_resume (req);
        return;
      }
    case ROUTE_LIST:
      {
        g_autoptr(GPtrArray) entries = sandstep_wire_read_entries (reply);
        g_autoptr(JsonObject) object = sandstep_wire_entries (entries);
        sandstepd_answer_json (req, SOUP_STATUS_OK, object);
        return;
      }
    case ROUTE_WRITE:
    case ROUTE_PUT:
      {
        g_autoptr(JsonObject) object = json_object_new ();
        sandstepd_answer_json (req, SOUP_STATUS_OK, object);
        return;
      }
    case ROUTE_NONE:
    case ROUTE_HEALTH:
    case ROUTE_PROVISION:
    case ROUTE_GC:
    case ROUTE_SANDBOXES:
    case ROUTE_DESCRIBE:
    case ROUTE_RELEASE:
    case ROUTE_DESTROY:
    case ROUTE_CLAIM:
    case ROUTE_RELEASE_CLAIM:
    case ROUTE_RUN:
    case ROUTE_CLAIM_RUN:
    case ROUTE_EXPORT:
    case ROUTE_FORK:
    case ROUTE_CHECKPOINT:
    case ROUTE_ROLLBACK:
    case ROUTE_CHECKPOINTS:
    case ROUTE_E2B:
      g_assert_not_reached ();
    }
}

void
sandstepd_handle_read_list (Request *req)
{
  g_autoptr(JsonObject) body = NULL;
  g_autoptr(GError) error = NULL;
  gboolean read = req->route == ROUTE_READ;
  const char *path;
  guint64 max_bytes = 0;
  Lease *lease = sandstepd_claimed_body (req, &body);

  if (lease == NULL)
    return;
  if (!sandstep_wire_read_path_request (body, SANDSTEP_DEFAULT_READ_MAX, &path, &max_bytes, &error))
    {
      sandstepd_answer_bad_request (req, SANDSTEPD_API_HINT, error);
      return;
    }
  sandstepd_worker_call (lease->worker, read ? "read" : "list",
                         sandstep_wire_path_request (NULL, path, read ? (gint64) max_bytes : -1), NULL, 0,
                         on_simple_done, sandstepd_request_ref (req), (GDestroyNotify) sandstepd_request_unref);
}

void
sandstepd_handle_write (Request *req)
{
  GHashTable *query = g_object_get_data (G_OBJECT (req->msg), "sandstepd-query");
  const char *path = query != NULL ? g_hash_table_lookup (query, "path") : NULL;
  int fd;

  if (req->lease == NULL || req->lease->ended || req->lease->worker == NULL)
    {
      sandstepd_find_lease (req, NULL);
      return;
    }
  if (path == NULL || path[0] == '\0')
    {
      sandstepd_answer_refusal (req, SOUP_STATUS_BAD_REQUEST, "bad-request", "add ?path=PATH", SANDSTEP_USAGE_ERROR,
                                SANDSTEP_USAGE_ERROR_MISSING, "%s %s: no path", req->method, req->path);
      return;
    }
  fd = g_steal_fd (&req->upload_fd);
  sandstepd_worker_call (req->lease->worker, "write", sandstep_wire_path_request (NULL, path, -1), &fd, 1,
                         on_simple_done, sandstepd_request_ref (req), (GDestroyNotify) sandstepd_request_unref);
}

typedef struct {
  Request *req;
  SandstepdUpload *upload;
} PutJob;

static void
put_job_free (PutJob *job)
{
  sandstepd_upload_free (job->upload);
  sandstepd_request_unref (job->req);
  g_free (job);
}

static void
on_put_done (Call *call, JsonObject *reply, int reply_fd, const GError *error)
{
  PutJob *job = call->data;
  Call shim = *call;

  shim.data = job->req;
  on_simple_done (&shim, reply, reply_fd, error);
}

void
sandstepd_handle_put (Request *req)
{
  GHashTable *query = g_object_get_data (G_OBJECT (req->msg), "sandstepd-query");
  const char *dest = query != NULL ? g_hash_table_lookup (query, "dest") : NULL;
  const char *contents = query != NULL ? g_hash_table_lookup (query, "contents") : NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *src = NULL;
  PutJob *job;

  if (req->lease == NULL || req->lease->ended || req->lease->worker == NULL)
    {
      sandstepd_find_lease (req, NULL);
      return;
    }
  if (dest == NULL || dest[0] == '\0' || req->upload == NULL)
    {
      sandstepd_answer_refusal (req, SOUP_STATUS_BAD_REQUEST, "bad-request", "add ?dest=PATH&name=NAME",
                                SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING, "%s %s: no dest or name",
                                req->method, req->path);
      return;
    }
  if (!sandstepd_upload_finish (req->upload, &error))
    {
      sandstepd_answer_error (req, error);
      return;
    }
  /* "src/" puts the contents of src, as the local put does. */
  src = g_strconcat (sandstepd_upload_path (req->upload), g_strcmp0 (contents, "1") == 0 ? "/" : "", NULL);
  job = g_new0 (PutJob, 1);
  job->req = sandstepd_request_ref (req);
  job->upload = g_steal_pointer (&req->upload);
  sandstepd_worker_call (req->lease->worker, "put", sandstep_wire_put_request (src, dest), NULL, 0, on_put_done, job,
                         (GDestroyNotify) put_job_free);
}
