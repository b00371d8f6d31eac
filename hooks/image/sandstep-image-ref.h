/* sandstep-image-ref.h: an image reference, in skopeo's transport names.
 *
 *   docker://[HOST[:PORT]/]REPO[:TAG][@sha256:HEX]   a registry; no HOST: docker.io, and a
 *                                                    one-word REPO is library/REPO, as docker does
 *   oci:DIR[:TAG]                                    an OCI image layout
 *   oci-archive:FILE[:TAG]                           a tar of one
 *   docker-archive:FILE                              what `docker save` writes
 *
 * Without a tag or digest a registry reference means ":latest"; a layout
 * reference without a tag means the layout's only image.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  SANDSTEP_IMAGE_TRANSPORT_REGISTRY,
  SANDSTEP_IMAGE_TRANSPORT_OCI,
  SANDSTEP_IMAGE_TRANSPORT_OCI_ARCHIVE,
  SANDSTEP_IMAGE_TRANSPORT_DOCKER_ARCHIVE,
} SandstepImageTransport;

typedef struct {
  SandstepImageTransport transport;
  char *registry;     /* HOST[:PORT] (docker.io when none was given); registry only */
  char *repository;   /* library/busybox; registry only */
  char *tag;          /* NULL when none was given */
  char *digest;       /* sha256:HEX, or NULL */
  char *path;         /* the layout directory or archive file; not registry */
  char *text;         /* the reference in full, defaults applied: what `sandstep images` shows */
} SandstepImageRef;

SandstepImageRef *sandstep_image_ref_parse (const char *text, GError **error);
void sandstep_image_ref_free (SandstepImageRef *ref);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepImageRef, sandstep_image_ref_free)

/* TRUE for "sha256:" and 64 lower-case hex digits: the only digests we accept (a path is made of one). */
gboolean sandstep_image_digest_is_valid (const char *digest);

/* TRUE for a tag as the distribution spec allows it: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}. */
gboolean sandstep_image_tag_is_valid (const char *tag);

G_END_DECLS
