/* sandstep-image-source.h: where a pull reads manifests and blobs from: a registry or an OCI layout.
 *
 * One interface for every transport, so the pull (sandstep-image-pull.c)
 * verifies, stores and unpacks the same way whatever the source.  The
 * registry source is in sandstep-image-registry.c and needs libsoup: it is
 * referenced weakly by the pull, so the lean helper links without it and
 * execs sandstep-net for docker:// references (operators/op-pull.c).
 */
#pragma once

#include <glib.h>

#include "sandstep-image-ref.h"
#include "sandstep-image-store.h"

G_BEGIN_DECLS

#define SANDSTEP_MEDIA_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define SANDSTEP_MEDIA_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define SANDSTEP_MEDIA_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define SANDSTEP_MEDIA_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"

/* The most a manifest, an index or a config may be. */
#define SANDSTEP_IMAGE_MAX_MANIFEST (4 * 1024 * 1024)

typedef struct _SandstepImageSource SandstepImageSource;
struct _SandstepImageSource {
  /* The manifest or index named by @reference (a tag, a digest, or NULL:
   * the only one), and its media type (NULL when the source does not say). */
  GBytes *(*get_manifest) (SandstepImageSource *source, const char *reference, char **out_media_type,
                           GError **error);
  /* Streams the blob @digest into @writer (which checks its size; commit checks its digest). */
  gboolean (*get_blob) (SandstepImageSource *source, const char *digest, SandstepImageBlobWriter *writer,
                        SandstepImageBytesFunc on_bytes, gpointer data, GError **error);
  void (*free) (SandstepImageSource *source);
};

static inline void
sandstep_image_source_free (SandstepImageSource *source)
{
  if (source != NULL)
    source->free (source);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepImageSource, sandstep_image_source_free)

/* oci:DIR[:TAG] and oci-archive:FILE[:TAG] (unpacked to a temporary layout first). */
SandstepImageSource *sandstep_layout_source_new (const SandstepImageRef *ref, GError **error);

/* docker-archive:FILE, what `docker save` writes (sandstep-image-archive.c). */
SandstepImageSource *sandstep_docker_archive_source_new (const SandstepImageRef *ref, GError **error);

/* The tar @file (an oci-archive or a docker-archive) unpacked into a new
 * temporary directory, as hostile as a layer; returns the directory. */
char *sandstep_image_archive_unpack (const char *file, GError **error);
/* Removes what sandstep_image_archive_unpack() made. */
void sandstep_image_archive_remove (const char *dir);

/* docker://: the OCI distribution API over libsoup (sandstep-image-registry.c). */
SandstepImageSource *sandstep_registry_source_new (const SandstepImageRef *ref, GError **error);

G_END_DECLS
