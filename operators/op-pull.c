/* op-pull.c: `sandstep pull REF`: an image into the layer store; prints its digest. */
#include "sandstep-image-operators.h"

#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-image-pull.h"
#include "sandstep-units.h"

typedef struct {
  gboolean tty;
  gboolean quiet_present;  /* say nothing of a layer already here (a provision from a pulled image) */
  gint64 *started;      /* per layer: its first bytes, monotonic microseconds (layers come several at once) */
  guint n_started;
  gint64 shown;         /* when the terminal line was last redrawn */
} PullProgress;

/* Called for one event at a time (the pull serialises its layers' threads). */
static void
on_progress (const SandstepPullEvent *e, gpointer data)
{
  PullProgress *p = data;
  g_autofree char *short_digest = g_strndup (e->digest, 7 + 12);
  g_autofree char *total = sandstep_format_size (e->total);
  gint64 now = g_get_monotonic_time ();

  if (p->started == NULL)
    {
      p->n_started = e->n_layers;
      p->started = g_new0 (gint64, e->n_layers);
    }
  g_return_if_fail (e->index < p->n_started);
  switch (e->kind)
    {
    case SANDSTEP_PULL_LAYER_BYTES:
      if (e->done > 0 && p->started[e->index] == 0)
        p->started[e->index] = now;
      if (p->tty && now - p->shown > 100000)
        {
          g_autofree char *done = sandstep_format_size (e->done);
          double seconds = (now - p->started[e->index]) / 1e6;
          g_autofree char *rate = sandstep_format_size (seconds > 0 ? (guint64) (e->done / seconds) : 0);
          g_printerr ("\r\033[Ksandstep pull: layer %u/%u %s: %s of %s, %s/s", e->index + 1, e->n_layers,
                      short_digest, done, total, rate);
          p->shown = now;
        }
      break;
    case SANDSTEP_PULL_LAYER_PRESENT:
      if (p->quiet_present)
        break;
      /* fall through */
    case SANDSTEP_PULL_LAYER_DONE:
      /* One line per layer: what a log keeps. */
      g_printerr ("%ssandstep pull: layer %u/%u %s: %s %s\n", p->tty ? "\r\033[K" : "", e->index + 1, e->n_layers,
                  short_digest, total, e->kind == SANDSTEP_PULL_LAYER_DONE ? "fetched and unpacked" : "already here");
      break;
    }
}

static const char *
reference_of (SandstepInvocation *invocation, GError **error)
{
  if (invocation->operands->len != 1)
    {
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                      "pull takes one image reference (docker://REPO[:TAG], oci:DIR[:TAG], ...); got %u arguments",
                      invocation->operands->len);
      return NULL;
    }
  return invocation->operands->pdata[0];
}

/* Every pull runs in sandstep-net: the registry client (libsoup) and zstd (libzstd) are linked there, and
 * the lean helper that every step starts loads neither. */
gboolean
sandstep_op_pull_needs_net (SandstepInvocation *invocation)
{
  return !sandstep_image_has_registry_client ();
}

char *
sandstep_op_pull_image (const char *text, const char *max_text, gboolean quiet_present, char **out_reference,
                        GError **error)
{
  g_autoptr(SandstepImageRef) ref = NULL;
  g_autoptr(SandstepImageStore) store = NULL;
  g_autofree char *dir = NULL;
  PullProgress progress = { isatty (STDERR_FILENO), quiet_present, NULL, 0, 0 };
  SandstepPullOptions options = { 0, on_progress, &progress };
  g_autoptr(GError) local = NULL;
  char *digest = NULL;

  if (max_text != NULL && !sandstep_parse_size (max_text, &options.max_size, error))
    return NULL;
  ref = sandstep_image_ref_parse (text, &local);
  if (ref == NULL)
    {
      /* A reference that does not parse is bad input on the command line: the usage exit status. */
      g_set_error_literal (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE, local->message);
      return NULL;
    }
  dir = sandstep_image_store_default_dir ();
  store = sandstep_image_store_open (dir, FALSE, error);
  if (store != NULL)
    digest = sandstep_image_pull (store, ref, &options, error);
  g_free (progress.started);
  if (digest != NULL && out_reference != NULL)
    *out_reference = g_strdup (ref->text);
  return digest;
}

gboolean
sandstep_op_pull (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  const char *text = reference_of (invocation, error);
  g_autofree char *digest = NULL;

  if (text == NULL)
    return FALSE;
  digest = sandstep_op_pull_image (text, sandstep_invocation_get (invocation, "max-image-size"), FALSE, NULL, error);
  if (digest == NULL)
    return FALSE;
  g_print ("%s\n", digest);
  *out_exit = 0;
  return TRUE;
}
