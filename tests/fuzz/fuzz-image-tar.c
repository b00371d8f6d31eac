/* fuzz-image-tar.c: a layer's tar (hooks/image/sandstep-image-unpack.c), unpacked as a pull unpacks it.
 *
 * The bytes are the decompressed layer stream; each input is unpacked into a
 * directory of its own under $TMPDIR, removed after it.  Whatever the bytes,
 * the unpacker must end with TRUE or a GError, and nothing may appear beside
 * that directory (a name with "..", a leading "/" or a link on the way is
 * refused, never followed).  The budget is small, so a run stays fast.
 */
#include "fuzz.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include <gio/gio.h>

#include "sandstep-image-source.h"
#include "sandstep-image-unpack.h"

static char *base;   /* holds each input's directory, and nothing else after it */

static void
remove_base (void)
{
  sandstep_image_archive_remove (base);
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fuzz_init_glib ();
  base = g_dir_make_tmp ("sandstep-fuzz-image-tar-XXXXXX", NULL);
  if (base == NULL)
    abort ();
  atexit (remove_base);
  return 0;
}

/* The names in @dir, which holds only "layer" while an input is unpacked. */
static guint
count_entries (const char *dir)
{
  g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
  guint n = 0;

  while (d != NULL && g_dir_read_name (d) != NULL)
    n++;
  return n;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr(GInputStream) in = g_memory_input_stream_new_from_data (data, size, NULL);
  g_autofree char *dir = g_build_filename (base, "layer", NULL);
  g_autoptr(GError) error = NULL;
  guint64 budget = 64 * 1024 * 1024, written = 0;
  int fd;

  if (mkdir (dir, 0700) < 0 || (fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
    abort ();
  if (!sandstep_image_unpack_tar (in, fd, &budget, &written, &error) && error == NULL)
    abort ();
  close (fd);
  if (count_entries (base) != 1)
    abort ();
  sandstep_image_archive_remove (dir);
  if (count_entries (base) != 0)
    abort ();
  return 0;
}
