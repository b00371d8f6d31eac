/* sandstep-s3-dest.c: s3://BUCKET/KEY destinations.
 *
 * Staging streams the sandbox's file (sandstep-export-stream.h) in parts of
 * at least 8 MiB, each into an unnamed spool file in TMPDIR (hashed on the
 * way, for its signature).  A file that ends within its first part is
 * small: its spool waits, and is sent with one PutObject at commit.  A
 * larger one becomes a multipart upload whose parts are all uploaded while
 * staging, PARTS_IN_FLIGHT at once from their spools, and which only
 * CompleteMultipartUpload at commit makes visible.  Abort deletes the
 * upload.  Memory holds one read buffer and the requests' own, whatever the
 * file's size and however many parts are in flight; TMPDIR holds
 * PARTS_IN_FLIGHT + 1 parts at most.
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
#include "sandstep-sha256.h"

#define MIN_PART_SIZE (8 * 1024 * 1024)
#define MAX_PARTS 10000
/* UploadParts at once.  S3 takes parts in any order and on any connection,
 * and servers take them side by side (moto's 1 GiB part phase: 6.9 s one at
 * a time, 4.4 s with four or eight).  At most SANDSTEP_S3_MAX_CONNS. */
#define PARTS_IN_FLIGHT 4
#define READ_BUFFER_SIZE (1024 * 1024)

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

/* ---- the parts ---- */

/* A part spooled in TMPDIR, hashed, waiting for its UploadPart. */
typedef struct {
  guint number;
  int fd;
  gsize len;
  char *sha256;
  gboolean last;              /* the file ended within this part */
} Part;

static void
part_free (Part *part)
{
  if (part->fd >= 0)
    close (part->fd);
  g_free (part->sha256);
  g_free (part);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Part, part_free)

/* The next @part_size bytes of @stream (fewer at its end) into a spool
 * file of their own, hashed on the way through @buffer. */
static Part *
spool_next_part (S3Destination *d, SandstepExportStream *stream, gsize part_size, guint8 *buffer, GError **error)
{
  g_autoptr(Part) part = g_new0 (Part, 1);
  g_autoptr(SandstepSha256) sha256 = sandstep_sha256_new ();

  part->fd = sandstep_export_spool_open (error);
  if (part->fd < 0)
    return NULL;
  while (part->len < part_size)
    {
      gsize want = MIN ((gsize) READ_BUFFER_SIZE, part_size - part->len);
      gssize n = sandstep_export_stream_read (stream, buffer, want, error);
      gsize done = 0;

      if (n < 0)
        return NULL;
      sandstep_sha256_update (sha256, buffer, n);
      while (done < (gsize) n)
        {
          ssize_t w = pwrite (part->fd, buffer + done, n - done, part->len + done);
          if (w < 0 && errno == EINTR)
            continue;
          if (w <= 0)
            return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE,
                                         w < 0 ? errno : EIO, "Cannot spool '%s' in TMPDIR ('%s')",
                                         d->parent.path, g_get_tmp_dir ()), NULL;
          done += w;
        }
      part->len += n;
      if ((gsize) n < want)
        break;                /* the end of the file */
    }
  part->last = part->len < part_size;
  part->sha256 = sandstep_sha256_hex (sha256);
  return g_steal_pointer (&part);
}

/* The UploadParts in flight, sent by a pool of threads. */
typedef struct {
  S3Destination *d;
  GMutex lock;
  GCond done;                 /* a part is done with */
  guint in_flight;            /* pushed, not yet done with */
  GError *error;              /* the first part that failed */
} Uploads;

static void
upload_one (gpointer data, gpointer user_data)
{
  g_autoptr(Part) part = data;
  Uploads *u = user_data;
  S3Destination *d = u->d;
  g_autoptr(GError) local_error = NULL;
  char *etag = NULL;
  gboolean failed;

  g_mutex_lock (&u->lock);
  failed = u->error != NULL;
  g_mutex_unlock (&u->lock);
  /* Once one part failed the export fails: the rest are not sent. */
  if (!failed)
    {
      gint64 started = g_get_monotonic_time ();

      etag = sandstep_s3_upload_part_from_fd (d->client, d->bucket, d->key, d->upload_id, part->number, part->fd,
                                              part->len, part->sha256, &local_error);
      g_debug ("%s: part %u (%zu bytes) took %.0f ms", d->parent.shown, part->number, part->len,
               (g_get_monotonic_time () - started) / 1000.0);
    }
  g_mutex_lock (&u->lock);
  if (etag != NULL)
    {
      if (d->etags->len < part->number)
        g_ptr_array_set_size (d->etags, part->number);
      d->etags->pdata[part->number - 1] = etag;
    }
  else if (local_error != NULL && u->error == NULL)
    u->error = g_steal_pointer (&local_error);
  u->in_flight--;
  g_cond_signal (&u->done);
  g_mutex_unlock (&u->lock);
}

static gboolean
stage_parts (S3Destination *d, SandstepExportStream *stream, GError **error)
{
  SandstepExportContext *context = d->parent.context;
  gsize part_size = part_size_for (context->max_bytes);
  g_autofree guint8 *buffer = g_malloc (READ_BUFFER_SIZE);
  g_autoptr(GError) local_error = NULL;
  GThreadPool *pool = NULL;
  Uploads u = { .d = d };
  gint64 started = g_get_monotonic_time ();
  gboolean ok = FALSE;
  guint number = 0;

  g_mutex_init (&u.lock);
  g_cond_init (&u.done);
  for (;;)
    {
      g_autoptr(Part) part = NULL;
      gboolean failed;

      /* One part spools while PARTS_IN_FLIGHT go up: TMPDIR holds PARTS_IN_FLIGHT + 1 parts at most. */
      g_mutex_lock (&u.lock);
      while (u.in_flight >= PARTS_IN_FLIGHT && u.error == NULL)
        g_cond_wait (&u.done, &u.lock);
      failed = u.error != NULL;
      g_mutex_unlock (&u.lock);
      if (failed)
        break;
      part = spool_next_part (d, stream, part_size, buffer, &local_error);
      if (part == NULL)
        break;
      part->number = ++number;
      if (number == 1 && part->last)
        {
          /* Small: its spool waits for the PutObject at commit. */
          d->spool_fd = g_steal_fd (&part->fd);
          d->spool_len = part->len;
          d->spool_sha256 = g_steal_pointer (&part->sha256);
          ok = TRUE;
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
          sandstep_throw (&local_error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE,
                          "'%s' needs more than %d parts; raise --max-bytes so the parts grow", d->parent.path,
                          MAX_PARTS);
          break;
        }
      if (d->upload_id == NULL)
        {
          g_autoptr(GError) s3_error = NULL;

          d->upload_id = sandstep_s3_create_multipart_upload (d->client, d->bucket, d->key, &s3_error);
          if (d->upload_id == NULL)
            {
              as_export_error (s3_error, &local_error);
              break;
            }
          pool = g_thread_pool_new (upload_one, &u, PARTS_IN_FLIGHT, FALSE, NULL);
        }
      ok = part->last;
      g_mutex_lock (&u.lock);
      u.in_flight++;
      g_mutex_unlock (&u.lock);
      g_thread_pool_push (pool, g_steal_pointer (&part), NULL);
      if (ok)
        break;
    }
  /* Every UploadPart sent has ended (answered, refused or timed out) before
   * the export goes on, or aborts the upload. */
  if (pool != NULL)
    g_thread_pool_free (pool, FALSE, TRUE);
  if (d->upload_id != NULL)
    g_debug ("%s: %u parts took %.0f ms", d->parent.shown, d->etags->len, (g_get_monotonic_time () - started) / 1000.0);
  /* What went wrong reading the file comes first; else the part that failed. */
  ok = ok && local_error == NULL && u.error == NULL;
  if (local_error != NULL)
    g_propagate_error (error, g_steal_pointer (&local_error));
  else if (u.error != NULL)
    as_export_error (u.error, error);
  g_clear_error (&u.error);
  g_mutex_clear (&u.lock);
  g_cond_clear (&u.done);
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
  staged = stage_parts (d, stream, error);
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
  if (!sandstep_s3_put_object_from_fd (d->client, d->bucket, d->key, d->spool_fd, d->spool_len, d->spool_sha256,
                                       parent->context->no_clobber, &local_error))
    return as_export_error (local_error, error);
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
