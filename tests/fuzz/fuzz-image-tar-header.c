/* fuzz-image-tar-header.c: a layer's tar headers (hooks/image/sandstep-image-unpack.c), read without unpacking.
 *
 * Every 512-byte block of the input goes to the header reader (ustar
 * prefixes, GNU base-256 numbers, the checksum), and the whole input to the
 * pax record reader, as the unpacker hands it a pax header's data (NUL after
 * its bytes).  fuzz-image-tar.c unpacks the same kind of bytes.
 */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#include "sandstep-image-unpack.h"

#define BLOCK 512

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fuzz_init_glib ();
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  for (size_t off = 0; off + BLOCK <= size; off += BLOCK)
    {
      g_auto(SandstepImageTarHeader) header = { 0 };
      g_autoptr(GError) error = NULL;

      if (sandstep_image_tar_header_parse (data + off, off / BLOCK + 1, &header, &error))
        {
          if (header.size > G_MAXUINT64 / 2 || strlen (header.name) > 256 || strlen (header.link) > 100)
            abort ();
        }
      else if (error == NULL)
        abort ();
    }
  {
    /* As read_meta() gives it: the bytes, then a NUL. */
    g_autofree char *meta = g_malloc (size + 1);
    g_autofree char *path = NULL, *linkpath = NULL;
    g_autoptr(GError) error = NULL;
    guint64 pax_size = 0, uid = G_MAXUINT64, gid = G_MAXUINT64;
    gboolean has_size = FALSE;

    memcpy (meta, data, size);
    meta[size] = '\0';
    if (sandstep_image_tar_parse_pax (meta, size, &path, &linkpath, &pax_size, &has_size, &uid, &gid, &error))
      {
        if ((has_size && pax_size > G_MAXUINT64 / 2) || (uid != G_MAXUINT64 && uid > G_MAXUINT32) ||
            (gid != G_MAXUINT64 && gid > G_MAXUINT32))
          abort ();
        (void) (path != NULL && strlen (path) > 0);
        (void) (linkpath != NULL && strlen (linkpath) > 0);
      }
    else if (error == NULL)
      abort ();
  }
  return 0;
}
