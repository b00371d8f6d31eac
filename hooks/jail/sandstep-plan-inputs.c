/* sandstep-plan-inputs.c: the identities of a plan's host paths; see the header. */
#include "sandstep-plan-inputs.h"

#include <fcntl.h>

typedef struct {
  guint64 dev, ino, size;
  guint32 type;
  gint64 ctime_ns;
} Identity;

static Identity
identity_of (const struct stat *st)
{
  return (Identity) {
    .dev = st->st_dev, .ino = st->st_ino, .size = st->st_size, .type = st->st_mode & S_IFMT,
    .ctime_ns = (gint64) st->st_ctim.tv_sec * G_GINT64_CONSTANT (1000000000) + st->st_ctim.tv_nsec,
  };
}

/* An absent path: all zero, which no existing file has (its type is never 0). */
static Identity
identify (const char *path, gboolean follow)
{
  struct stat st;

  if (fstatat (AT_FDCWD, path, &st, follow ? 0 : AT_SYMLINK_NOFOLLOW) < 0)
    return (Identity) { 0 };
  return identity_of (&st);
}

void
sandstep_plan_inputs_add (GVariantBuilder *inputs, const char *path, SandstepPlanInputLevel level,
                          gboolean follow, const struct stat *seen)
{
  Identity id = seen != NULL ? identity_of (seen) : identify (path, follow);

  g_variant_builder_add (inputs, "(^ayybttutx)", path, (guchar) level, follow, id.dev, id.ino, id.type, id.size,
                         id.ctime_ns);
}

const char *
sandstep_plan_inputs_changed (GVariant *inputs)
{
  GVariantIter iter;
  const char *path;
  guchar level;
  gboolean follow;
  Identity then;

  g_variant_iter_init (&iter, inputs);
  while (g_variant_iter_next (&iter, "(^&ayybttutx)", &path, &level, &follow, &then.dev, &then.ino, &then.type,
                              &then.size, &then.ctime_ns))
    {
      Identity now = identify (path, follow);
      gboolean same = now.type == then.type;

      if (level >= SANDSTEP_PLAN_INPUT_IDENTITY && now.type != 0)
        same = same && now.dev == then.dev && now.ino == then.ino;
      if (level >= SANDSTEP_PLAN_INPUT_CONTENT && now.type != 0)
        same = same && now.size == then.size && now.ctime_ns == then.ctime_ns;
      if (!same)
        return path;
    }
  return NULL;
}
