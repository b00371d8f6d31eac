/* sandstep-image-manifest.h: an image's JSON documents, read from their bytes.
 *
 * A registry's or a layout's manifest and index, a layout's index.json, a
 * docker-archive's manifest.json and an image config are all hostile bytes.
 * These functions only parse: bytes in, a value or a GError out, no I/O, so
 * that the pull and the sources call them and tests/fuzz attacks them as
 * they are (fuzz-image-manifest.c).  @text names the image in messages.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* A blob a manifest names: digest checked to be sha256:HEX, size known. */
typedef struct {
  char *media_type;   /* "" when the descriptor names none */
  char *digest;
  guint64 size;
} SandstepImageDescriptor;

void sandstep_image_descriptor_clear (SandstepImageDescriptor *d);

/* A manifest or an index. */
typedef struct {
  JsonNode *root;
  gboolean is_index;
  /* A manifest's; unset for an index. */
  SandstepImageDescriptor config;
  GArray *layers;               /* SandstepImageDescriptor, each of a media type sandstep unpacks */
  guint64 compressed;           /* the layers' sizes together; G_MAXUINT64 when that is more */
} SandstepImageManifest;

void sandstep_image_manifest_free (SandstepImageManifest *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepImageManifest, sandstep_image_manifest_free)

/* @data as a manifest or an index: an index when @media_type (else the
 * document's own mediaType, else a "manifests" member) says so; otherwise a
 * schema 2 manifest whose config and layers are read and checked. */
SandstepImageManifest *sandstep_image_manifest_parse (const char *data, gsize len, const char *media_type,
                                                      const char *text, GError **error);

/* The digest of @index's manifest for @platform ("linux/amd64"; "linux/arm64"
 * takes "linux/arm64/v8" too), and its media type (NULL when it names none). */
char *sandstep_image_index_pick (const SandstepImageManifest *index, const char *platform, const char *text,
                                 char **out_media_type, GError **error);

/* An OCI layout's index.json: the digest of the manifest tagged @reference
 * (NULL: the only one), and its media type (NULL when it names none). */
char *sandstep_image_layout_index_pick (const char *data, gsize len, const char *reference, const char *text,
                                        char **out_media_type, GError **error);

/* A docker-archive's manifest.json: its one image's Config path, and its
 * Layers (a NULL for an element that is not a string, which the caller
 * refuses when it reaches it). */
char *sandstep_image_archive_manifest_parse (const char *data, gsize len, const char *text, GPtrArray **out_layers,
                                             GError **error);

/* An image config's config.Env entries that an environment can hold
 * (NAME=VALUE, NAME not empty, UTF-8), added to @out_env; FALSE when @data
 * is not a JSON object. */
gboolean sandstep_image_config_read_env (const char *data, gsize len, GPtrArray *out_env);

G_END_DECLS
