/* fuzz-image-manifest.c: an image's JSON documents (hooks/image/sandstep-image-manifest.c), as a source serves them.
 *
 * A registry or a layout serves a manifest or an index (with or without a
 * media type), a layout its index.json, a docker-archive its manifest.json,
 * and every image a config whose Env the sandbox gets.  Each reader gets the
 * same bytes: none may crash or raise a critical, and what one accepts must
 * hold what its header promises (checked digests, known layer types).
 */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#include "sandstep-image-manifest.h"
#include "sandstep-image-ref.h"
#include "sandstep-image-source.h"
#include "sandstep-image-unpack.h"

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fuzz_init_glib ();
  return 0;
}

static void
check_descriptor (const SandstepImageDescriptor *d)
{
  if (!sandstep_image_digest_is_valid (d->digest) || d->media_type == NULL || d->size > G_MAXINT64)
    abort ();
}

static void
read_manifest (const char *data, gsize size, const char *media_type)
{
  static const char *const platforms[] = { "linux/amd64", "linux/arm64", "linux/arm/v7" };
  g_autoptr(GError) error = NULL;
  g_autoptr(SandstepImageManifest) m = sandstep_image_manifest_parse (data, size, media_type, "fuzz", &error);
  guint64 sum = 0;

  if (m == NULL)
    {
      g_assert_nonnull (error);
      return;
    }
  if (m->is_index)
    {
      for (gsize i = 0; i < G_N_ELEMENTS (platforms); i++)
        {
          g_autoptr(GError) pick_error = NULL;
          g_autofree char *type = NULL;
          g_autofree char *child = sandstep_image_index_pick (m, platforms[i], "fuzz", &type, &pick_error);
          if (child != NULL ? !sandstep_image_digest_is_valid (child) : pick_error == NULL)
            abort ();
        }
      return;
    }
  check_descriptor (&m->config);
  for (guint i = 0; i < m->layers->len; i++)
    {
      const SandstepImageDescriptor *d = &g_array_index (m->layers, SandstepImageDescriptor, i);
      check_descriptor (d);
      if (!sandstep_image_layer_type_is_known (d->media_type))
        abort ();
      sum = sum + d->size < sum ? G_MAXUINT64 : sum + d->size;
    }
  if (m->compressed != sum)
    abort ();
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  const char *text = (const char *) data;

  read_manifest (text, size, NULL);
  read_manifest (text, size, SANDSTEP_MEDIA_OCI_MANIFEST);
  read_manifest (text, size, SANDSTEP_MEDIA_OCI_INDEX);
  {
    const char *const references[] = { NULL, "latest" };
    for (gsize i = 0; i < G_N_ELEMENTS (references); i++)
      {
        g_autoptr(GError) error = NULL;
        g_autofree char *type = NULL;
        g_autofree char *digest = sandstep_image_layout_index_pick (text, size, references[i], "fuzz", &type, &error);
        if (digest != NULL ? !sandstep_image_digest_is_valid (digest) : error == NULL)
          abort ();
      }
  }
  {
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) layers = NULL;
    g_autofree char *config = sandstep_image_archive_manifest_parse (text, size, "fuzz", &layers, &error);
    if (config != NULL)
      for (guint i = 0; i < layers->len; i++)
        (void) (layers->pdata[i] != NULL && strlen (layers->pdata[i]) > 0);
    else if (error == NULL)
      abort ();
  }
  {
    g_autoptr(GPtrArray) env = g_ptr_array_new_with_free_func (g_free);
    if (sandstep_image_config_read_env (text, size, env))
      for (guint i = 0; i < env->len; i++)
        {
          const char *entry = env->pdata[i];
          if (entry[0] == '=' || strchr (entry, '=') == NULL)
            abort ();
        }
  }
  return 0;
}
