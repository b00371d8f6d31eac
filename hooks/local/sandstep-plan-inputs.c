/* sandstep-plan-inputs.c: the identities of a plan's host files; see the header. */
#include "sandstep-plan-inputs.h"

#include <fcntl.h>
#include <sys/stat.h>

typedef struct {
  guint64 dev, ino, size;
  gint64 ctime_ns;
} Identity;

/* An absent path: all zero, which no existing file has (its inode is never 0). */
static Identity
identify (const char *path, gboolean follow)
{
  struct stat st;

  if (fstatat (AT_FDCWD, path, &st, follow ? 0 : AT_SYMLINK_NOFOLLOW) < 0)
    return (Identity) { 0 };
  return (Identity) {
    .dev = st.st_dev, .ino = st.st_ino, .size = st.st_size,
    .ctime_ns = (gint64) st.st_ctim.tv_sec * G_GINT64_CONSTANT (1000000000) + st.st_ctim.tv_nsec,
  };
}

void
sandstep_plan_inputs_add (GVariantBuilder *inputs, const char *path, gboolean follow)
{
  Identity id = identify (path, follow);

  g_variant_builder_add (inputs, "(^aybtttx)", path, follow, id.dev, id.ino, id.size, id.ctime_ns);
}

const char *
sandstep_plan_inputs_changed (GVariant *inputs)
{
  GVariantIter iter;
  const char *path;
  gboolean follow;
  Identity then;

  g_variant_iter_init (&iter, inputs);
  while (g_variant_iter_next (&iter, "(^&aybtttx)", &path, &follow, &then.dev, &then.ino, &then.size,
                              &then.ctime_ns))
    {
      Identity now = identify (path, follow);
      if (now.dev != then.dev || now.ino != then.ino || now.size != then.size || now.ctime_ns != then.ctime_ns)
        return path;
    }
  return NULL;
}
