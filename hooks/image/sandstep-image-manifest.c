/* sandstep-image-manifest.c: an image's JSON documents read from bytes (sandstep-image-manifest.h). */
#include "sandstep-image-manifest.h"

#include <string.h>

#include "sandstep-error.h"
#include "sandstep-json.h"
#include "sandstep-image-ref.h"
#include "sandstep-image-source.h"
#include "sandstep-image-unpack.h"

void
sandstep_image_descriptor_clear (SandstepImageDescriptor *d)
{
  g_clear_pointer (&d->media_type, g_free);
  g_clear_pointer (&d->digest, g_free);
}

void
sandstep_image_manifest_free (SandstepImageManifest *m)
{
  if (m == NULL)
    return;
  g_clear_pointer (&m->root, json_node_unref);
  sandstep_image_descriptor_clear (&m->config);
  g_clear_pointer (&m->layers, g_array_unref);
  g_free (m);
}

/* @data as JSON; NULL when it does not parse, or breaks sandstep-json.h's limits: a registry's 4 MiB of '['
 * would overflow json-glib's stack. */
static JsonNode *
parse (const char *data, gsize len)
{
  return sandstep_json_parse (data, len, SANDSTEP_IMAGE_MAX_MANIFEST, NULL);
}

/* @o's member @name when it is of that kind, else NULL (a missing member, null, another kind): json-glib's own
 * getters are CRITICAL about each of those, and every one is a hostile document's choice. */
static JsonArray *
member_array (JsonObject *o, const char *name)
{
  JsonNode *node = json_object_get_member (o, name);

  return node != NULL && JSON_NODE_HOLDS_ARRAY (node) ? json_node_get_array (node) : NULL;
}

static JsonObject *
member_object (JsonObject *o, const char *name)
{
  JsonNode *node = json_object_get_member (o, name);

  return node != NULL && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
}

/* An integer member, or @fallback: json-glib would read a string as 0 and cast a double of 1e300 to an integer,
 * which C leaves undefined. */
static gint64
member_int (JsonObject *o, const char *name, gint64 fallback)
{
  JsonNode *node = json_object_get_member (o, name);

  return node != NULL && JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_INT64
           ? json_node_get_int (node) : fallback;
}

/* A string member, or @fallback: a number where a digest belongs is no string either. */
static const char *
member_string (JsonObject *o, const char *name, const char *fallback)
{
  JsonNode *node = json_object_get_member (o, name);

  return node != NULL && JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING
           ? json_node_get_string (node) : fallback;
}

static char *
platform_of (JsonObject *descriptor)
{
  JsonObject *p = member_object (descriptor, "platform");
  const char *variant;

  if (p == NULL)
    return g_strdup ("unknown");
  variant = member_string (p, "variant", NULL);
  return g_strdup_printf ("%s/%s%s%s", member_string (p, "os", "?"), member_string (p, "architecture", "?"),
                          variant != NULL ? "/" : "", variant != NULL ? variant : "");
}

char *
sandstep_image_index_pick (const SandstepImageManifest *index, const char *platform, const char *text,
                           char **out_media_type, GError **error)
{
  JsonArray *manifests = member_array (json_node_get_object (index->root), "manifests");
  g_autoptr(GString) seen = g_string_new (NULL);
  JsonObject *chosen = NULL;
  const char *child;

  for (guint i = 0; manifests != NULL && i < json_array_get_length (manifests) && chosen == NULL; i++)
    {
      JsonNode *node = json_array_get_element (manifests, i);
      JsonObject *d = JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
      g_autofree char *p = d != NULL ? platform_of (d) : NULL;

      if (p == NULL)
        continue;
      if (strcmp (p, platform) == 0 || (strcmp (platform, "linux/arm64") == 0 && strcmp (p, "linux/arm64/v8") == 0))
        chosen = d;
      else
        g_string_append_printf (seen, "%s%s", seen->len > 0 ? ", " : "", p);
    }
  if (chosen == NULL)
    {
      sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_PLATFORM,
                      "image '%s' has no manifest for this host's platform '%s' (it has: %s); pull an image built "
                      "for %s", text, platform, seen->len > 0 ? seen->str : "none", platform);
      return NULL;
    }
  child = member_string (chosen, "digest", "");
  if (!sandstep_image_digest_is_valid (child))
    {
      sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_UNSUPPORTED,
                      "image '%s': its index names the manifest '%s', not a sha256 digest", text, child);
      return NULL;
    }
  *out_media_type = g_strdup (member_string (chosen, "mediaType", NULL));
  return g_strdup (child);
}

static gboolean
is_index (const char *media_type, JsonObject *o)
{
  if (media_type != NULL && (strcmp (media_type, SANDSTEP_MEDIA_OCI_INDEX) == 0 ||
                             strcmp (media_type, SANDSTEP_MEDIA_DOCKER_LIST) == 0))
    return TRUE;
  return media_type == NULL && json_object_has_member (o, "manifests");
}

static gboolean
read_descriptor (JsonNode *node, SandstepImageDescriptor *d, const char *text, GError **error)
{
  JsonObject *o = node != NULL && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
  gint64 size;

  if (o == NULL)
    return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_UNSUPPORTED,
                           "image '%s': its manifest has a malformed descriptor", text);
  d->media_type = g_strdup (member_string (o, "mediaType", ""));
  d->digest = g_strdup (member_string (o, "digest", ""));
  size = member_int (o, "size", -1);
  if (!sandstep_image_digest_is_valid (d->digest) || size < 0)
    return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_UNSUPPORTED,
                           "image '%s': its manifest names the blob '%s' (size %" G_GINT64_FORMAT "): only sha256 "
                           "digests and known sizes are accepted", text, d->digest, size);
  d->size = size;
  return TRUE;
}

SandstepImageManifest *
sandstep_image_manifest_parse (const char *data, gsize len, const char *media_type, const char *text, GError **error)
{
  g_autoptr(SandstepImageManifest) m = g_new0 (SandstepImageManifest, 1);
  JsonObject *o;
  JsonArray *array;

  m->layers = g_array_new (FALSE, TRUE, sizeof (SandstepImageDescriptor));
  g_array_set_clear_func (m->layers, (GDestroyNotify) sandstep_image_descriptor_clear);
  m->root = parse (data, len);
  if (m->root == NULL || !JSON_NODE_HOLDS_OBJECT (m->root))
    {
      sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_UNSUPPORTED,
                      "image '%s': its manifest is not a JSON object", text);
      return NULL;
    }
  o = json_node_get_object (m->root);
  if (media_type == NULL)
    media_type = member_string (o, "mediaType", NULL);
  m->is_index = is_index (media_type, o);
  if (m->is_index)
    return g_steal_pointer (&m);
  if (member_int (o, "schemaVersion", 0) != 2 ||
      !json_object_has_member (o, "config") || (array = member_array (o, "layers")) == NULL)
    {
      sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_UNSUPPORTED,
                      "image '%s': its manifest (media type '%s') is neither an OCI manifest nor a Docker schema 2 "
                      "one; push it again with a current tool (skopeo copy)", text,
                      media_type != NULL ? media_type : "none");
      return NULL;
    }
  if (!read_descriptor (json_object_get_member (o, "config"), &m->config, text, error))
    return NULL;
  for (guint i = 0; i < json_array_get_length (array); i++)
    {
      SandstepImageDescriptor d = { 0 };
      if (!read_descriptor (json_array_get_element (array, i), &d, text, error))
        {
          sandstep_image_descriptor_clear (&d);
          return NULL;
        }
      g_array_append_val (m->layers, d);
      if (!sandstep_image_layer_type_is_known (d.media_type))
        {
          sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_UNSUPPORTED,
                          "image '%s': layer '%s' has the media type '%s', which sandstep does not read (tar, "
                          "tar+gzip, or tar+zstd where built with libzstd); rebuild the image with gzip layers",
                          text, d.digest, d.media_type);
          return NULL;
        }
      /* Saturated: a wrapped sum would pass --max-image-size with sizes near 2^63 each. */
      m->compressed = m->compressed + d.size < m->compressed ? G_MAXUINT64 : m->compressed + d.size;
    }
  return g_steal_pointer (&m);
}

char *
sandstep_image_layout_index_pick (const char *data, gsize len, const char *reference, const char *text,
                                  char **out_media_type, GError **error)
{
  g_autoptr(JsonNode) root = parse (data, len);
  JsonArray *manifests;
  JsonObject *chosen = NULL;
  const char *digest;
  guint n;

  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root) ||
      (manifests = member_array (json_node_get_object (root), "manifests")) == NULL)
    {
      sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_UNSUPPORTED,
                      "image '%s': index.json of the layout is not an OCI index", text);
      return NULL;
    }
  n = json_array_get_length (manifests);
  for (guint i = 0; i < n; i++)
    {
      JsonNode *node = json_array_get_element (manifests, i);
      JsonObject *d = JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
      JsonObject *annotations = d != NULL ? member_object (d, "annotations") : NULL;
      const char *name = annotations != NULL
                           ? member_string (annotations, "org.opencontainers.image.ref.name", NULL)
                           : NULL;
      if (d == NULL)
        continue;
      if (reference == NULL ? n == 1 : g_strcmp0 (name, reference) == 0)
        chosen = d;
    }
  if (chosen == NULL)
    {
      if (reference == NULL)
        sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_NOT_FOUND,
                        "image '%s': the layout holds %u images; name one with :TAG", text, n);
      else
        sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_NOT_FOUND,
                        "image '%s': the layout has no image tagged '%s'; check the tag (umoci ls --layout DIR "
                        "lists them)", text, reference);
      return NULL;
    }
  digest = member_string (chosen, "digest", "");
  if (!sandstep_image_digest_is_valid (digest))
    {
      sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_UNSUPPORTED,
                      "image '%s': index.json names the digest '%s', not a sha256 one", text, digest);
      return NULL;
    }
  *out_media_type = g_strdup (member_string (chosen, "mediaType", NULL));
  return g_strdup (digest);
}

char *
sandstep_image_archive_manifest_parse (const char *data, gsize len, const char *text, GPtrArray **out_layers,
                                       GError **error)
{
  g_autoptr(JsonNode) root = parse (data, len);
  g_autoptr(GPtrArray) paths = NULL;
  JsonArray *images, *layers;
  JsonObject *image;
  const char *config;

  if (root == NULL || !JSON_NODE_HOLDS_ARRAY (root))
    {
      sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_UNSUPPORTED,
                      "image '%s': manifest.json of the archive is not a JSON array", text);
      return NULL;
    }
  images = json_node_get_array (root);
  if (json_array_get_length (images) != 1 || !JSON_NODE_HOLDS_OBJECT (json_array_get_element (images, 0)))
    {
      sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_UNSUPPORTED,
                      "image '%s': the archive holds %u images; sandstep reads archives of one (skopeo copy "
                      "docker-archive:FILE:REPO:TAG oci:DIR:TAG picks one)", text, json_array_get_length (images));
      return NULL;
    }
  image = json_array_get_object_element (images, 0);
  config = member_string (image, "Config", NULL);
  layers = member_array (image, "Layers");
  if (config == NULL || layers == NULL)
    {
      sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_UNSUPPORTED,
                      "image '%s': manifest.json of the archive names no Config or no Layers", text);
      return NULL;
    }
  paths = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < json_array_get_length (layers); i++)
    {
      JsonNode *node = json_array_get_element (layers, i);
      g_ptr_array_add (paths, JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING
                                ? g_strdup (json_node_get_string (node)) : NULL);
    }
  *out_layers = g_steal_pointer (&paths);
  return g_strdup (config);
}

gboolean
sandstep_image_config_read_env (const char *data, gsize len, GPtrArray *out_env)
{
  g_autoptr(JsonNode) root = parse (data, len);
  JsonObject *o, *inner;
  JsonArray *env;

  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    return FALSE;
  o = json_node_get_object (root);
  inner = member_object (o, "config");
  env = inner != NULL ? member_array (inner, "Env") : NULL;
  for (guint i = 0; env != NULL && i < json_array_get_length (env); i++)
    {
      JsonNode *node = json_array_get_element (env, i);
      const char *entry = JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING
                            ? json_node_get_string (node) : NULL;
      /* NAME=VALUE, NAME not empty; anything else an environment cannot hold. */
      if (entry != NULL && strchr (entry, '=') != NULL && entry[0] != '=' && g_utf8_validate (entry, -1, NULL))
        g_ptr_array_add (out_env, g_strdup (entry));
    }
  return TRUE;
}
