/* sandstepd-envd-job.c: Envd, one call of E2B's envd that claims its sandbox (a command, or a file
 * operation), and what sandstepd-envd.c and sandstepd-envd-jail.c share of it: its life, its failure in
 * Connect's shape, and a file operation's answer given once its claim is gone.  It calls no envd file above
 * it, so the calls go one way (docs/architecture.md).
 */
#include "sandstepd-private.h"
#include "sandstepd-envd.h"
#include "sandstepd-e2b-answer.h"

#include <string.h>
#include <unistd.h>

#include "sandstep-error.h"

/* ---- a call that claims its sandbox: a command, or a file operation (Envd: sandstepd-envd.h) ---- */

Envd *
sandstepd_envd_ref (Envd *job)
{
  job->refs++;
  return job;
}

void
sandstepd_envd_unref (Envd *job)
{
  if (--job->refs > 0)
    return;
  sandstepd_request_unref (job->req);
  if (job->lease != NULL)
    sandstepd_lease_unref (job->lease);
  g_free (job->command);
  if (job->process != NULL)
    json_object_unref (job->process);
  g_free (job->tag);
  if (job->selector != NULL)
    json_object_unref (job->selector);
  if (job->input != NULL)
    g_bytes_unref (job->input);
  g_free (job->fork_holder);
  g_free (job->fork_handle);
  if (job->forked_destroy != NULL)
    job->forked_destroy (job->forked_data);
  g_free (job->path);
  g_free (job->dest);
  if (job->fd >= 0)
    close (job->fd);
  if (job->more != NULL)
    g_ptr_array_unref (job->more);
  if (job->written != NULL)
    json_array_unref (job->written);
  if (job->out_fd >= 0)
    close (job->out_fd);
  if (job->err_fd >= 0)
    close (job->err_fd);
  g_free (job->owner);
  g_free (job->holder);
  g_clear_error (&job->error);
  if (job->answer != NULL)
    g_bytes_unref (job->answer);
  g_free (job);
}

Envd *
sandstepd_envd_new (Request *req, EnvdOp op)
{
  Envd *job = g_new0 (Envd, 1);

  job->refs = 1;
  job->req = sandstepd_request_ref (req);
  job->op = op;
  job->fd = -1;
  job->out_fd = -1;
  job->err_fd = -1;
  return job;
}

/* A fork's end: its handle or @error to whom asked for it, once. */
static void
forked (Envd *job, const char *handle, const GError *error)
{
  EnvdForked done = g_steal_pointer (&job->forked);

  if (done != NULL)
    done (job->req, handle, error, job->forked_data);
}

void
sandstepd_envd_fail (Envd *job, const char *code, const char *message)
{
  if (job->op == ENVD_FORK)
    {
      g_autoptr(GError) error = g_error_new_literal (SANDSTEP_SANDBOX_ERROR,
                                                     strcmp (code, "not_found") == 0 ? SANDSTEP_SANDBOX_ERROR_NOT_FOUND
                                                     : strcmp (code, "aborted") == 0 ? SANDSTEP_SANDBOX_ERROR_BUSY
                                                                                     : SANDSTEP_SANDBOX_ERROR_STATE,
                                                     message);
      forked (job, NULL, error);
      return;
    }
  if (job->op == ENVD_START || job->op == ENVD_WATCH)
    sandstepd_envd_answer_stream_error (job->req, code, message);
  else
    sandstepd_envd_answer_unary_error (job->req, code, message);
}

/* Connect's code for a file operation's error: a path that is not there is not_found. */
static const char *
files_code (const GError *error)
{
  if (error->domain == SANDSTEP_PATH_ERROR && error->code == SANDSTEP_PATH_ERROR_NOT_FOUND)
    return "not_found";
  if (error->domain == SANDSTEP_PATH_ERROR)
    return "invalid_argument";
  return sandstepd_envd_connect_code (error);
}

static void
on_released (gpointer data)
{
  Envd *job = data;

  if (job->op == ENVD_FORK)
    forked (job, job->error == NULL ? job->fork_handle : NULL, job->error);
  else if (job->error != NULL)
    sandstepd_envd_fail (job, job->fail_code != NULL ? job->fail_code : files_code (job->error), job->error->message);
  else if (job->op == ENVD_WATCH)
    ;                       /* answered already: its stream, or why it could not watch */
  else
    {
      gsize len = 0;
      gconstpointer bytes = g_bytes_get_data (job->answer, &len);
      sandstepd_e2b_answer (job->req, job->status, job->content_type, g_memdup2 (bytes, len), len);
    }
  sandstepd_envd_unref (job);
}

/* The file operation is done (@error, or its answer set): the claim goes, then the answer. */
void
sandstepd_envd_files_finish (Envd *job, const GError *error)
{
  Lease *lease = job->lease;

  if (error != NULL && job->error == NULL)
    job->error = g_error_copy (error);
  if (lease->ended)
    {
      on_released (sandstepd_envd_ref (job));
      return;
    }
  lease->on_released = on_released;
  lease->on_released_data = sandstepd_envd_ref (job);
  sandstepd_lease_end (lease, "the E2B file operation ended", FALSE);
}

void
sandstepd_envd_answer_json (Envd *job, JsonNode *node)
{
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  gsize len = 0;
  char *text;

  json_generator_set_root (gen, node);
  text = json_generator_to_data (gen, &len);
  job->status = SOUP_STATUS_OK;
  job->content_type = "application/json";
  job->answer = g_bytes_new_take (text, len);
}

/* EntryInfo of filesystem.proto, as protobuf's JSON writes it. */
JsonObject *
sandstepd_envd_entry_info (const char *dir, const char *name, gboolean is_dir)
{
  JsonObject *o = json_object_new ();
  g_autofree char *path = g_build_filename (dir, name, NULL);

  json_object_set_string_member (o, "name", name);
  json_object_set_string_member (o, "type", is_dir ? "FILE_TYPE_DIRECTORY" : "FILE_TYPE_FILE");
  json_object_set_string_member (o, "path", path);
  return o;
}
