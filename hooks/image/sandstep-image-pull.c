/* sandstep-image-pull.c: from a reference to verified, unpacked layers (sandstep-image-pull.h). */
#include "sandstep-image-pull.h"

#include <errno.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-image-manifest.h"
#include "sandstep-image-unpack.h"
#include "sandstep-test-hooks.h"

/* Layers of one image fetched and unpacked at once: each is one connection to the registry and one core
 * unpacking, and more than a few only share the same link and disk. */
#define PARALLEL_LAYERS 4

/* In sandstep-net only (sandstep-image-source.h). */
#pragma weak sandstep_registry_source_new

gboolean
sandstep_image_has_registry_client (void)
{
  return sandstep_registry_source_new != NULL;
}

SandstepImageSource *
sandstep_image_source_new (const SandstepImageRef *ref, GError **error)
{
  switch (ref->transport)
    {
    case SANDSTEP_IMAGE_TRANSPORT_REGISTRY:
      if (sandstep_registry_source_new == NULL)
        {
          sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_UNSUPPORTED,
                          "image '%s': this program has no registry client; run it through 'sandstep', which "
                          "hands registry pulls to sandstep-net", ref->text);
          return NULL;
        }
      return sandstep_registry_source_new (ref, error);
    case SANDSTEP_IMAGE_TRANSPORT_OCI:
    case SANDSTEP_IMAGE_TRANSPORT_OCI_ARCHIVE:
      return sandstep_layout_source_new (ref, error);
    case SANDSTEP_IMAGE_TRANSPORT_DOCKER_ARCHIVE:
      return sandstep_docker_archive_source_new (ref, error);
    }
  g_return_val_if_reached (NULL);
}

const char *
sandstep_image_host_platform (void)
{
  static const char *platform;

  if (g_once_init_enter (&platform))
    {
      struct utsname u;
      const char *arch = "unknown";

      if (uname (&u) == 0)
        {
          if (strcmp (u.machine, "x86_64") == 0)
            arch = "amd64";
          else if (strcmp (u.machine, "aarch64") == 0)
            arch = "arm64";
          else if (g_str_has_prefix (u.machine, "armv7"))
            arch = "arm/v7";
          else if (g_str_has_prefix (u.machine, "armv6"))
            arch = "arm/v6";
          else if (strcmp (u.machine, "i686") == 0 || strcmp (u.machine, "i386") == 0)
            arch = "386";
          else
            arch = u.machine;   /* ppc64le, s390x, riscv64: the same words */
        }
      g_once_init_leave (&platform, g_strconcat ("linux/", arch, NULL));
    }
  return platform;
}

static char *
digest_of (GBytes *bytes)
{
  g_autofree char *hex = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, bytes);

  return g_strconcat ("sha256:", hex, NULL);
}

/* The manifest's parts (sandstep-image-manifest.h). */
typedef SandstepImageDescriptor Descriptor;
#define descriptor_clear sandstep_image_descriptor_clear

/* With @digest's lock held: the blob is in the store, fetched and verified if it was not. */
static gboolean
ensure_blob (SandstepImageStore *store, SandstepImageSource *source, const Descriptor *d,
             SandstepImageBytesFunc on_bytes, gpointer data, gboolean *out_fetched, GError **error)
{
  g_autoptr(SandstepImageBlobWriter) writer = NULL;

  *out_fetched = FALSE;
  if (sandstep_image_store_has_blob (store, d->digest))
    return TRUE;
  writer = sandstep_image_blob_writer_new (store, d->digest, d->size, error);
  if (writer == NULL || !source->get_blob (source, d->digest, writer, on_bytes, data, error) ||
      !sandstep_image_blob_writer_commit (writer, error))
    return FALSE;
  *out_fetched = TRUE;
  return TRUE;
}

static gboolean
store_bytes (SandstepImageStore *store, const char *digest, GBytes *bytes, GError **error)
{
  g_autoptr(SandstepImageBlobWriter) writer = NULL;
  int lock;
  gboolean ok;

  if (sandstep_image_store_has_blob (store, digest))
    return TRUE;
  lock = sandstep_image_store_lock_digest (store, digest, error);
  if (lock < 0)
    return FALSE;
  writer = sandstep_image_blob_writer_new (store, digest, g_bytes_get_size (bytes), error);
  ok = writer != NULL &&
       sandstep_image_blob_writer_write (writer, g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes), error) &&
       sandstep_image_blob_writer_commit (writer, error);
  close (lock);
  return ok;
}

typedef struct {
  const SandstepPullOptions *options;
  GMutex *lock;                 /* one caller's callback at a time, whichever layer's thread reports */
  SandstepPullEvent event;
} Progress;

static void
report (Progress *p)
{
  if (p->options->progress == NULL)
    return;
  g_mutex_lock (p->lock);
  p->options->progress (&p->event, p->options->data);
  g_mutex_unlock (p->lock);
}

static void
on_layer_bytes (guint64 done, gpointer data)
{
  Progress *p = data;

  p->event.kind = SANDSTEP_PULL_LAYER_BYTES;
  p->event.done = done;
  report (p);
}

static void
test_delay (void)
{
  const char *ms = sandstep_test_hook ("SANDSTEP_TEST_IMAGE_BLOB_DELAY_MS");

  if (ms != NULL)
    g_usleep (g_ascii_strtoull (ms, NULL, 10) * 1000);
}

/* One layer: fetched and unpacked under its digest's lock.  *@budget: unpacked bytes left, shared by the
 * layers unpacked at once (lowered atomically). */
static gboolean
pull_layer (SandstepImageStore *store, SandstepImageSource *source, const Descriptor *d, Progress *progress,
            guint64 *budget, guint64 *out_unpacked, GError **error)
{
  int lock = sandstep_image_store_lock_digest (store, d->digest, error);
  gboolean fetched = FALSE, ok = TRUE;

  if (lock < 0)
    return FALSE;
  test_delay ();
  if (!sandstep_image_store_has_layer (store, d->digest))
    {
      g_autofree char *tmp = NULL;
      int dir_fd = -1, blob_fd = -1;
      guint64 size = 0;
      gboolean unpacked = FALSE;

      ok = ensure_blob (store, source, d, on_layer_bytes, progress, &fetched, error) &&
           (dir_fd = sandstep_image_store_begin_layer (store, d->digest, &tmp, error)) >= 0 &&
           (blob_fd = sandstep_image_store_open_blob (store, d->digest, error)) >= 0 &&
           (unpacked = sandstep_image_unpack_layer (blob_fd, d->media_type, dir_fd, budget, &size, error));
      /* A layer refused as hostile or too large: its blob goes too, so the store keeps nothing of it. */
      if (blob_fd >= 0 && !unpacked)
        sandstep_image_store_remove_blob (store, d->digest);
      if (blob_fd >= 0)
        close (blob_fd);
      if (dir_fd >= 0)
        close (dir_fd);
      if (ok)
        ok = sandstep_image_store_commit_layer (store, d->digest, tmp, size, error);
      if (!ok && tmp != NULL)
        sandstep_image_store_abort_layer (store, tmp);
      if (!ok)
        g_prefix_error (error, "layer '%s': ", d->digest);
      *out_unpacked = size;
    }
  else
    {
      guint64 size = sandstep_image_store_layer_size (store, d->digest);
      *out_unpacked = size;
      if (!sandstep_image_budget_take (budget, size))
        ok = sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_TOO_LARGE,
                             "layer '%s' takes the image over --max-image-size", d->digest);
    }
  close (lock);
  if (ok)
    {
      progress->event.kind = fetched ? SANDSTEP_PULL_LAYER_DONE : SANDSTEP_PULL_LAYER_PRESENT;
      progress->event.done = fetched ? d->size : 0;
      report (progress);
    }
  return ok;
}

/* The layers of one image, PARALLEL_LAYERS at a time: each worker takes the next layer not taken.  Every
 * guarantee is per layer (its lock, its unnamed blob, its unpack directory renamed whole), so layers need
 * nothing of each other but the budget, which is taken atomically. */
typedef struct {
  SandstepImageStore *store;
  SandstepImageSource *source;
  GArray *layers;               /* Descriptor */
  const SandstepPullOptions *options;
  guint64 *budget;
  guint64 *unpacked;            /* per layer: bytes on disk */
  gint next;                    /* atomic: the next layer to take */
  gint failed;                  /* atomic: a layer failed; no worker takes another */
  GMutex lock;                  /* progress reports, and @error */
  GError *error;                /* the first failure */
} LayerWork;

static gpointer
layer_worker (gpointer data)
{
  LayerWork *w = data;

  while (!g_atomic_int_get (&w->failed))
    {
      guint i = (guint) g_atomic_int_add (&w->next, 1);
      const Descriptor *d;
      Progress progress = { w->options, &w->lock, { 0 } };
      GError *local = NULL;

      if (i >= w->layers->len)
        break;
      d = &g_array_index (w->layers, Descriptor, i);
      progress.event = (SandstepPullEvent) { 0, d->digest, i, w->layers->len, 0, d->size };
      if (!pull_layer (w->store, w->source, d, &progress, w->budget, &w->unpacked[i], &local))
        {
          g_mutex_lock (&w->lock);
          if (w->error == NULL)
            w->error = g_steal_pointer (&local);
          g_mutex_unlock (&w->lock);
          g_clear_error (&local);
          g_atomic_int_set (&w->failed, TRUE);
        }
    }
  return NULL;
}

static gboolean
pull_layers (SandstepImageStore *store, SandstepImageSource *source, GArray *layers,
             const SandstepPullOptions *options, guint64 *budget, guint64 *unpacked, GError **error)
{
  LayerWork w = { store, source, layers, options, budget, unpacked, 0, 0, { 0 }, NULL };
  g_autoptr(GPtrArray) threads = g_ptr_array_new ();

  g_mutex_init (&w.lock);
  /* This thread is one of the workers; a thread that cannot start leaves its share to the others. */
  for (guint i = 1; i < MIN (PARALLEL_LAYERS, layers->len); i++)
    {
      GThread *thread = g_thread_try_new ("sandstep-layer", layer_worker, &w, NULL);
      if (thread == NULL)
        break;
      g_ptr_array_add (threads, thread);
    }
  layer_worker (&w);
  for (guint i = 0; i < threads->len; i++)
    g_thread_join (threads->pdata[i]);
  g_mutex_clear (&w.lock);
  if (w.error != NULL)
    {
      g_propagate_error (error, w.error);
      return FALSE;
    }
  return TRUE;
}

char *
sandstep_image_pull (SandstepImageStore *store, const SandstepImageRef *ref, const SandstepPullOptions *options,
                     GError **error)
{
  g_autoptr(SandstepImageSource) source = sandstep_image_source_new (ref, error);
  g_autoptr(GBytes) manifest = NULL;
  g_autoptr(SandstepImageManifest) m = NULL;
  g_autofree char *media_type = NULL, *digest = NULL;
  g_autoptr(SandstepImageRecord) record = NULL;
  guint64 max = options->max_size > 0 ? options->max_size : SANDSTEP_IMAGE_DEFAULT_MAX_SIZE;
  guint64 budget = max, compressed = 0;
  Descriptor config = { 0 };
  g_autoptr(GArray) layers = NULL;
  g_autofree guint64 *unpacked = NULL;
  gboolean fetched = FALSE;
  int lock;

  if (source == NULL)
    return NULL;
  manifest = source->get_manifest (source, ref->digest != NULL ? ref->digest : ref->tag, &media_type, error);
  if (manifest == NULL)
    return NULL;
  digest = digest_of (manifest);
  if (ref->digest != NULL && strcmp (digest, ref->digest) != 0)
    {
      sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_DIGEST,
                      "image '%s': the manifest served for '%s' hashes to '%s'; the source is corrupt or tampered "
                      "with", ref->text, ref->digest, digest);
      return NULL;
    }
  m = sandstep_image_manifest_parse (g_bytes_get_data (manifest, NULL), g_bytes_get_size (manifest), media_type,
                                     ref->text, error);
  if (m == NULL)
    return NULL;
  if (m->is_index)
    {
      g_autofree char *child = NULL;

      g_clear_pointer (&media_type, g_free);
      child = sandstep_image_index_pick (m, sandstep_image_host_platform (), ref->text, &media_type, error);
      if (child == NULL)
        return NULL;
      g_clear_pointer (&manifest, g_bytes_unref);
      {
        g_autofree char *served_type = NULL;
        manifest = source->get_manifest (source, child, &served_type, error);
      }
      if (manifest == NULL)
        return NULL;
      g_free (digest);
      digest = digest_of (manifest);
      if (strcmp (digest, child) != 0)
        {
          sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_DIGEST,
                          "image '%s': the manifest '%s' does not match its digest (its bytes hash to '%s'); the "
                          "source is corrupt or tampered with", ref->text, child, digest);
          return NULL;
        }
      sandstep_image_manifest_free (m);
      /* The child's own mediaType says whether it is an index, as the index's word does not bind it. */
      m = sandstep_image_manifest_parse (g_bytes_get_data (manifest, NULL), g_bytes_get_size (manifest), NULL,
                                         ref->text, error);
      if (m == NULL)
        return NULL;
      if (m->is_index)
        {
          sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_UNSUPPORTED,
                          "image '%s': its index names another index; only one level is followed", ref->text);
          return NULL;
        }
    }
  config = m->config;
  m->config = (Descriptor) { 0 };
  layers = g_steal_pointer (&m->layers);
  compressed = m->compressed;
  if (compressed > max || config.size > SANDSTEP_IMAGE_MAX_MANIFEST)
    {
      sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_TOO_LARGE,
                      "image '%s': its layers are %" G_GUINT64_FORMAT " bytes compressed, over --max-image-size "
                      "(%" G_GUINT64_FORMAT "); raise it if the image is meant to be this large",
                      ref->text, compressed, max);
      descriptor_clear (&config);
      return NULL;
    }

  lock = sandstep_image_store_lock_digest (store, config.digest, error);
  if (lock < 0 || !ensure_blob (store, source, &config, NULL, NULL, &fetched, error))
    {
      if (lock >= 0)
        close (lock);
      descriptor_clear (&config);
      return NULL;
    }
  close (lock);

  record = sandstep_image_record_new ();
  record->size = g_bytes_get_size (manifest) + config.size;
  unpacked = g_new0 (guint64, layers->len + 1);
  if (!pull_layers (store, source, layers, options, &budget, unpacked, error))
    {
      g_prefix_error (error, "image '%s': ", ref->text);
      descriptor_clear (&config);
      return NULL;
    }
  for (guint i = 0; i < layers->len; i++)
    {
      const Descriptor *d = &g_array_index (layers, Descriptor, i);

      record->size += d->size + unpacked[i];
      g_ptr_array_add (record->layers, g_strdup (d->digest));
    }
  /* Last: the record, so a killed pull leaves no image that names missing parts. */
  if (!store_bytes (store, digest, manifest, error))
    {
      descriptor_clear (&config);
      return NULL;
    }
  record->digest = g_strdup (digest);
  record->config = g_strdup (config.digest);
  descriptor_clear (&config);
  g_ptr_array_add (record->references, g_strdup (ref->text));
  record->pulled = record->last_used = g_get_real_time () / G_USEC_PER_SEC;
  if (!sandstep_image_store_save_record (store, record, error))
    return NULL;
  return g_steal_pointer (&digest);
}
