/* sandstep-s3-dest.c: s3://BUCKET/KEY destinations.
 *
 * Staging streams the sandbox's file (sandstep-export-stream.h) in parts of
 * at least 8 MiB.  A file that ends within its first part is small: it waits
 * in an unnamed spool file and is sent with one PutObject at commit.  A
 * larger one becomes a multipart upload whose parts are all uploaded while
 * staging, and which only CompleteMultipartUpload at commit makes visible.
 * Abort deletes the upload.  A thread reads and hashes the next part while
 * this one uploads, so memory is two parts, whatever the file's size.
 *
 * The key is the URL's text after the bucket, byte for byte, as the AWS
 * CLI takes it (no percent-decoding); one ending in '/' gets the sandbox
 * file's name, as `aws s3 cp` does.
 */
#include "sandstep-destination.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-export-stream.h"
#include "sandstep-s3.h"
#include "sandstep-sigv4.h"

#define MIN_PART_SIZE (8 * 1024 * 1024)
#define MAX_PARTS 10000

typedef struct {
  SandstepDestination parent;
  SandstepS3Client *client;   /* the context's */
  char *bucket;
  char *key;
  char *upload_id;            /* a multipart upload in progress */
  GPtrArray *etags;
  int spool_fd;               /* a small file, waiting for its PutObject */
  gsize spool_len;
  char *spool_sha256;
} S3Destination;

/* ---- the part reader ---- */

typedef struct {
  guint8 *data;
  gsize len;
  char *sha256;
  gboolean last;              /* the file ended within this part */
} Part;

typedef struct {
  SandstepExportStream *stream;
  gsize part_size;
  GAsyncQueue *empty;         /* Part *, to fill; the sentinel stops the thread */
  GAsyncQueue *full;          /* Part *, filled; NULL: a read failed (see error) */
  GThread *thread;
  GError *error;
  Part parts[2];
} PartReader;

static Part stop_sentinel;

static gpointer
part_reader_thread (gpointer data)
{
  PartReader *r = data;

  for (;;)
    {
      Part *part = g_async_queue_pop (r->empty);
      gssize n;

      if (part == &stop_sentinel)
        return NULL;
      if (part->data == NULL)
        part->data = g_malloc (r->part_size);
      n = sandstep_export_stream_read (r->stream, part->data, r->part_size, &r->error);
      if (n < 0)
        {
          g_async_queue_push (r->full, &stop_sentinel);
          return NULL;
        }
      part->len = n;
      part->last = (gsize) n < r->part_size;
      g_free (part->sha256);
      part->sha256 = sandstep_sigv4_sha256_hex (part->data, part->len);
      g_async_queue_push (r->full, part);
      if (part->last)
        return NULL;
    }
}

static void
part_reader_start (PartReader *r, SandstepExportStream *stream, gsize part_size)
{
  memset (r, 0, sizeof *r);
  r->stream = stream;
  r->part_size = part_size;
  r->empty = g_async_queue_new ();
  r->full = g_async_queue_new ();
  g_async_queue_push (r->empty, &r->parts[0]);
  g_async_queue_push (r->empty, &r->parts[1]);
  r->thread = g_thread_new ("sandstep-parts", part_reader_thread, r);
}

/* The next part, or NULL with @error set. */
static Part *
part_reader_next (PartReader *r, GError **error)
{
  Part *part = g_async_queue_pop (r->full);

  if (part == &stop_sentinel)
    {
      g_propagate_error (error, g_steal_pointer (&r->error));
      return NULL;
    }
  return part;
}

static void
part_reader_give_back (PartReader *r, Part *part)
{
  g_async_queue_push (r->empty, part);
}

static void
part_reader_stop (PartReader *r)
{
  if (r->thread != NULL)
    {
      g_async_queue_push (r->empty, &stop_sentinel);
      g_thread_join (g_steal_pointer (&r->thread));
    }
  for (gsize i = 0; i < G_N_ELEMENTS (r->parts); i++)
    {
      g_free (r->parts[i].data);
      g_free (r->parts[i].sha256);
    }
  g_clear_pointer (&r->empty, g_async_queue_unref);
  g_clear_pointer (&r->full, g_async_queue_unref);
  g_clear_error (&r->error);
}

/* ---- the destination ---- */

/* S3's own errors become the export's, which map to exit 73. */
static gboolean
as_export_error (GError *local_error, GError **error)
{
  if (local_error->domain == SANDSTEP_S3_ERROR || local_error->domain == SANDSTEP_AWS_CONFIG_ERROR)
    g_set_error_literal (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, local_error->message);
  else
    g_propagate_error (error, g_error_copy (local_error));
  return FALSE;
}

static gsize
part_size_for (guint64 max_bytes)
{
  /* At most 10,000 parts: a larger limit takes larger parts, in whole MiB. */
  guint64 size = (max_bytes + MAX_PARTS - 1) / MAX_PARTS;

  size = (size + 1024 * 1024 - 1) / (1024 * 1024) * (1024 * 1024);
  return MAX (size, (guint64) MIN_PART_SIZE);
}

static gboolean
spool_part (S3Destination *d, const Part *part, GError **error)
{
  gsize done = 0;

  d->spool_fd = sandstep_export_spool_open (error);
  if (d->spool_fd < 0)
    return FALSE;
  while (done < part->len)
    {
      ssize_t n = pwrite (d->spool_fd, part->data + done, part->len - done, done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                     "Cannot spool '%s' in TMPDIR ('%s')", d->parent.path, g_get_tmp_dir ());
      done += n;
    }
  d->spool_len = part->len;
  d->spool_sha256 = g_strdup (part->sha256);
  return TRUE;
}

static gboolean
stage_parts (S3Destination *d, SandstepAttachment *attachment, SandstepExportStream *stream, GError **error)
{
  SandstepExportContext *context = d->parent.context;
  PartReader reader;
  gboolean ok = FALSE;
  guint number = 0;

  part_reader_start (&reader, stream, part_size_for (context->max_bytes));
  for (;;)
    {
      g_autoptr(GError) local_error = NULL;
      Part *part = part_reader_next (&reader, error);
      char *etag;

      if (part == NULL)
        break;
      number++;
      if (number == 1 && part->last)
        {
          ok = spool_part (d, part, error);
          break;
        }
      /* A file of whole parts ends with an empty read: no part for it. */
      if (part->len == 0)
        {
          ok = TRUE;
          break;
        }
      if (number > MAX_PARTS)
        {
          sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE,
                          "'%s' needs more than %d parts; raise --max-bytes so the parts grow", d->parent.path,
                          MAX_PARTS);
          break;
        }
      if (d->upload_id == NULL)
        {
          d->upload_id = sandstep_s3_create_multipart_upload (d->client, d->bucket, d->key, &local_error);
          if (d->upload_id == NULL)
            {
              as_export_error (local_error, error);
              break;
            }
        }
      {
        g_autoptr(GBytes) body = g_bytes_new_static (part->data, part->len);
        gint64 started = g_get_monotonic_time ();

        etag = sandstep_s3_upload_part (d->client, d->bucket, d->key, d->upload_id, number, body, part->sha256,
                                        &local_error);
        g_debug ("%s: part %u (%zu bytes) took %.0f ms", d->parent.shown, number, part->len,
                 (g_get_monotonic_time () - started) / 1000.0);
      }
      if (etag == NULL)
        {
          as_export_error (local_error, error);
          break;
        }
      g_ptr_array_add (d->etags, etag);
      if (part->last)
        {
          ok = TRUE;
          break;
        }
      part_reader_give_back (&reader, part);
    }
  part_reader_stop (&reader);
  return ok;
}

static gboolean
s3_stage (SandstepDestination *parent, SandstepAttachment *attachment, gint64 *out_bytes, GError **error)
{
  S3Destination *d = (S3Destination *) parent;
  g_autoptr(SandstepExportStream) stream = NULL;
  g_autoptr(GError) local_error = NULL;
  gboolean staged;
  gint64 copied;

  if (parent->context->no_clobber)
    {
      gboolean exists = FALSE;

      if (!sandstep_s3_head_object (d->client, d->bucket, d->key, &exists, &local_error))
        return as_export_error (local_error, error);
      if (exists)
        return sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE,
                               "'%s' exists (HeadObject answered 200), and --no-clobber keeps it; delete it, or "
                               "export without --no-clobber", parent->shown);
    }
  stream = sandstep_export_stream_start (attachment, parent->path, parent->context->max_bytes, error);
  if (stream == NULL)
    return FALSE;
  /* On a failed upload, freeing the stream stops the copy (EPIPE). */
  staged = stage_parts (d, attachment, stream, error);
  if (!staged)
    return FALSE;
  /* A copy that failed ended the stream early: its reason (a missing
   * file, one too large or changed) is the one to give. */
  copied = sandstep_export_stream_finish (stream, error);
  if (copied < 0)
    return FALSE;
  /* What only renames or completes goes after what sends a body. */
  parent->rank = d->upload_id != NULL ? 1 : 0;
  *out_bytes = copied;
  return TRUE;
}

static gboolean
s3_commit (SandstepDestination *parent, GError **error)
{
  S3Destination *d = (S3Destination *) parent;
  g_autoptr(GError) local_error = NULL;

  if (d->upload_id != NULL)
    {
      gint64 started = g_get_monotonic_time ();

      if (!sandstep_s3_complete_multipart_upload (d->client, d->bucket, d->key, d->upload_id, d->etags,
                                                  parent->context->no_clobber, &local_error))
        return as_export_error (local_error, error);
      g_debug ("%s: CompleteMultipartUpload of %u parts took %.0f ms", parent->shown, d->etags->len,
               (g_get_monotonic_time () - started) / 1000.0);
      g_clear_pointer (&d->upload_id, g_free);
      return TRUE;
    }
  {
    g_autofree guint8 *data = g_malloc (MAX (d->spool_len, 1));
    g_autoptr(GBytes) body = NULL;
    gsize done = 0;

    while (done < d->spool_len)
      {
        ssize_t n = pread (d->spool_fd, data + done, d->spool_len - done, done);
        if (n < 0 && errno == EINTR)
          continue;
        if (n <= 0)
          return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE,
                                       n < 0 ? errno : EIO, "Cannot read back the spool of '%s'", parent->path);
        done += n;
      }
    body = g_bytes_new_take (g_steal_pointer (&data), d->spool_len);
    if (!sandstep_s3_put_object (d->client, d->bucket, d->key, body, d->spool_sha256, parent->context->no_clobber,
                                 &local_error))
      return as_export_error (local_error, error);
  }
  return TRUE;
}

static void
s3_abort (SandstepDestination *parent, GString *left)
{
  S3Destination *d = (S3Destination *) parent;
  g_autoptr(GError) local_error = NULL;

  if (d->spool_fd >= 0)
    close (g_steal_fd (&d->spool_fd));
  if (d->upload_id == NULL)
    return;
  if (!sandstep_s3_abort_multipart_upload (d->client, d->bucket, d->key, d->upload_id, &local_error))
    g_string_append_printf (left, "%sthe multipart upload %s of '%s' (its parts are stored, and billed, until "
                            "aws s3api abort-multipart-upload --bucket %s --key '%s' --upload-id %s; %s)",
                            left->len ? ", " : "", d->upload_id, parent->shown, d->bucket, d->key, d->upload_id,
                            local_error->message);
  g_clear_pointer (&d->upload_id, g_free);
}

static void
s3_free (SandstepDestination *parent)
{
  S3Destination *d = (S3Destination *) parent;

  if (d->spool_fd >= 0)
    close (d->spool_fd);
  g_free (d->bucket);
  g_free (d->key);
  g_free (d->upload_id);
  g_free (d->spool_sha256);
  g_ptr_array_unref (d->etags);
  g_free (d);
}

static const SandstepDestinationClass s3_class = {
  .scheme = "s3",
  .commit_rank = 0,           /* a multipart upload re-ranks itself when staged */
  .stage = s3_stage,
  .commit = s3_commit,
  .abort = s3_abort,
  .free = s3_free,
};

/* The export's S3 client, made by its first s3:// destination. */
static SandstepS3Client *
context_client (SandstepExportContext *context, GError **error)
{
  SandstepAwsConfig *config;

  if (context->s3_client != NULL)
    return context->s3_client;
  config = sandstep_aws_config_load (error);
  if (config == NULL)
    return NULL;
  context->s3_client = sandstep_s3_client_new (config, context->read_timeout_s, error);
  context->s3_client_free = (GDestroyNotify) sandstep_s3_client_free;
  return context->s3_client;
}

SandstepDestination *
sandstep_s3_destination_new (const char *url, const char *path, SandstepExportContext *context, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autofree char *bucket = NULL;
  g_autofree char *key = NULL;
  g_autofree char *shown = NULL;
  const char *rest = url + strlen ("s3://");
  const char *slash = strchr (rest, '/');
  SandstepS3Client *client;
  S3Destination *d;

  bucket = slash != NULL ? g_strndup (rest, slash - rest) : g_strdup (rest);
  key = g_strdup (slash != NULL ? slash + 1 : "");
  if (key[0] == '\0' || g_str_has_suffix (key, "/"))
    {
      g_autofree char *base = g_path_get_basename (path);
      g_autofree char *joined = g_strconcat (key, base, NULL);
      g_free (key);
      key = g_steal_pointer (&joined);
    }
  if (bucket[0] == '\0')
    return sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_BAD_URL,
                           "destination '%s' names no bucket; write s3://BUCKET/KEY", url), NULL;
  if (!sandstep_s3_check_names (bucket, key, &local_error))
    return sandstep_throw (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_BAD_URL, "destination '%s': %s",
                           url, local_error->message), NULL;
  client = context_client (context, &local_error);
  if (client == NULL)
    return as_export_error (local_error, error), NULL;

  d = g_new0 (S3Destination, 1);
  d->client = client;
  d->bucket = g_steal_pointer (&bucket);
  d->key = g_steal_pointer (&key);
  d->etags = g_ptr_array_new_with_free_func (g_free);
  d->spool_fd = -1;
  shown = g_strdup_printf ("s3://%s/%s", d->bucket, d->key);
  return sandstep_destination_init (&d->parent, &s3_class, path, shown, context);
}
