/* sandstep-error.c: the error domains, the table of what each code means, and the facts two codes carry. */
#include "sandstep-error.h"

#include <errno.h>
#include <string.h>

/* The holder of a busy sandbox travels with SANDSTEP_SANDBOX_ERROR. */
typedef struct {
  char *holder;
} SandstepSandboxErrorPrivate;

static void
sandstep_sandbox_error_private_init (SandstepSandboxErrorPrivate *priv)
{
  priv->holder = NULL;
}

static void
sandstep_sandbox_error_private_copy (const SandstepSandboxErrorPrivate *src, SandstepSandboxErrorPrivate *dest)
{
  dest->holder = g_strdup (src->holder);
}

static void
sandstep_sandbox_error_private_clear (SandstepSandboxErrorPrivate *priv)
{
  g_clear_pointer (&priv->holder, g_free);
}

G_DEFINE_EXTENDED_ERROR (SandstepSandboxError, sandstep_sandbox_error)

/* The size and limit of a file refused as too large travel with SANDSTEP_PATH_ERROR. */
typedef struct {
  gboolean has_size;
  guint64 size;
  guint64 limit;
} SandstepPathErrorPrivate;

static void
sandstep_path_error_private_init (SandstepPathErrorPrivate *priv)
{
  memset (priv, 0, sizeof *priv);
}

static void
sandstep_path_error_private_copy (const SandstepPathErrorPrivate *src, SandstepPathErrorPrivate *dest)
{
  *dest = *src;
}

static void
sandstep_path_error_private_clear (SandstepPathErrorPrivate *priv)
{
}

G_DEFINE_EXTENDED_ERROR (SandstepPathError, sandstep_path_error)

G_DEFINE_QUARK (sandstep-usage-error-quark, sandstep_usage_error)
G_DEFINE_QUARK (sandstep-jail-error-quark, sandstep_jail_error)
G_DEFINE_QUARK (sandstep-export-error-quark, sandstep_export_error)
G_DEFINE_QUARK (sandstep-image-error-quark, sandstep_image_error)

#define HINT_LOG "see the sandbox server's log"

/* Every code of every domain, once.  The exit statuses are those docs/reference.md lists;
 * the HTTP statuses and wire codes are what sandstepd answers with. */
static const SandstepErrorKind kinds[] = {
  /* domain                         code                                exit                        HTTP  wire code        hint */
  { sandstep_usage_error_quark,     SANDSTEP_USAGE_ERROR_UNKNOWN_OPTION, SANDSTEP_EXIT_USAGE,       400, "usage",          "fix the request as the message says" },
  { sandstep_usage_error_quark,     SANDSTEP_USAGE_ERROR_BAD_VALUE,      SANDSTEP_EXIT_USAGE,       400, "usage",          "fix the request as the message says" },
  { sandstep_usage_error_quark,     SANDSTEP_USAGE_ERROR_MISSING,        SANDSTEP_EXIT_USAGE,       400, "usage",          "fix the request as the message says" },
  { sandstep_usage_error_quark,     SANDSTEP_USAGE_ERROR_FAILED,         SANDSTEP_EXIT_USAGE,       400, "usage",          "fix the request as the message says" },
  { sandstep_sandbox_error_quark,   SANDSTEP_SANDBOX_ERROR_BAD_HANDLE,   SANDSTEP_EXIT_BAD_HANDLE,  400, "bad-handle",     "pass the handle that 'sandstep provision' printed" },
  { sandstep_sandbox_error_quark,   SANDSTEP_SANDBOX_ERROR_NOT_FOUND,    SANDSTEP_EXIT_NO_SANDBOX,  404, "not-found",      "the sandbox is gone: provision a new one" },
  { sandstep_sandbox_error_quark,   SANDSTEP_SANDBOX_ERROR_NOT_OWNER,    SANDSTEP_EXIT_NOT_OWNER,   403, "not-owner",      "use the handle this run provisioned, or pass the owner that provisioned it" },
  { sandstep_sandbox_error_quark,   SANDSTEP_SANDBOX_ERROR_EXPIRED,      SANDSTEP_EXIT_EXPIRED,     410, "expired",        "provision a new sandbox; 'sandstep gc --expired' reclaims this one" },
  { sandstep_sandbox_error_quark,   SANDSTEP_SANDBOX_ERROR_BUSY,         SANDSTEP_EXIT_BUSY,        409, "busy",           "wait for the holder (--wait=SECONDS) or provision one sandbox per step" },
  { sandstep_sandbox_error_quark,   SANDSTEP_SANDBOX_ERROR_STATE,        SANDSTEP_EXIT_INTERNAL,    500, "state",          HINT_LOG "; its state directory may be unreadable" },
  { sandstep_sandbox_error_quark,   SANDSTEP_SANDBOX_ERROR_BROKEN,       SANDSTEP_EXIT_INTERNAL,    500, "broken",         "destroy it with 'sandstep destroy', or reclaim every damaged sandbox with 'sandstep gc --broken'" },
  { sandstep_sandbox_error_quark,   SANDSTEP_SANDBOX_ERROR_NO_SPACE,     SANDSTEP_EXIT_INTERNAL,    507, "no-space",       "free space on the disk that holds the state directory" },
  { sandstep_sandbox_error_quark,   SANDSTEP_SANDBOX_ERROR_FAILED,       SANDSTEP_EXIT_INTERNAL,    500, "state",          HINT_LOG "; its state directory may be unreadable" },
  { sandstep_sandbox_error_quark,   SANDSTEP_SANDBOX_ERROR_CONFLICT,     SANDSTEP_EXIT_USAGE,       409, "spec-conflict",  "destroy the sandbox this holder provisioned, or provision under another holder" },
  { sandstep_jail_error_quark,      SANDSTEP_JAIL_ERROR_SETUP,           SANDSTEP_EXIT_INTERNAL,    500, "jail",           HINT_LOG },
  { sandstep_jail_error_quark,      SANDSTEP_JAIL_ERROR_UNSUPPORTED,     SANDSTEP_EXIT_INTERNAL,    501, "unsupported",    "the server's kernel lacks what the sandbox needs; see the message" },
  { sandstep_jail_error_quark,      SANDSTEP_JAIL_ERROR_TIMEOUT,         SANDSTEP_EXIT_TIMEOUT,     504, "timeout",        "give the command a larger budget" },
  { sandstep_jail_error_quark,      SANDSTEP_JAIL_ERROR_KILLED,          SANDSTEP_EXIT_INTERNAL,    500, "jail-killed",    "run the step again" },
  { sandstep_jail_error_quark,      SANDSTEP_JAIL_ERROR_FAILED,          SANDSTEP_EXIT_INTERNAL,    500, "jail",           HINT_LOG },
  { sandstep_jail_error_quark,      SANDSTEP_JAIL_ERROR_STALE_PLAN,      SANDSTEP_EXIT_INTERNAL,    500, "jail",           "run the step again" },
  { sandstep_path_error_quark,      SANDSTEP_PATH_ERROR_ESCAPES,         SANDSTEP_EXIT_PATH,        400, "path-escapes",   "give a path under /workspace or /tmp" },
  { sandstep_path_error_quark,      SANDSTEP_PATH_ERROR_NOT_FOUND,       SANDSTEP_EXIT_PATH,        404, "path-not-found", "list the directory to see what is there" },
  { sandstep_path_error_quark,      SANDSTEP_PATH_ERROR_IS_DIRECTORY,    SANDSTEP_EXIT_PATH,        422, "is-directory",   "name a file, or list the directory" },
  { sandstep_path_error_quark,      SANDSTEP_PATH_ERROR_NOT_REGULAR,     SANDSTEP_EXIT_PATH,        422, "not-regular",    "only regular files can be read or copied" },
  { sandstep_path_error_quark,      SANDSTEP_PATH_ERROR_TOO_LARGE,       SANDSTEP_EXIT_PATH,        413, "too-large",      "read a part of it with head, tail or sed through 'sandstep run', or raise the limit" },
  { sandstep_path_error_quark,      SANDSTEP_PATH_ERROR_CHANGED,         SANDSTEP_EXIT_PATH,        409, "changed",        "try again once the file stops changing" },
  { sandstep_path_error_quark,      SANDSTEP_PATH_ERROR_IO,              SANDSTEP_EXIT_PATH,        500, "path-io",        "see the message" },
  { sandstep_path_error_quark,      SANDSTEP_PATH_ERROR_FAILED,          SANDSTEP_EXIT_PATH,        500, "path-io",        "see the message" },
  { sandstep_export_error_quark,    SANDSTEP_EXPORT_ERROR_BAD_URL,       SANDSTEP_EXIT_USAGE,       400, "bad-url",        "give a file:// URL" },
  { sandstep_export_error_quark,    SANDSTEP_EXPORT_ERROR_WRITE,         SANDSTEP_EXIT_EXPORT,      500, "export",         "see the message" },
  { sandstep_export_error_quark,    SANDSTEP_EXPORT_ERROR_FAILED,        SANDSTEP_EXIT_EXPORT,      500, "export",         "see the message" },
  { sandstep_image_error_quark,     SANDSTEP_IMAGE_ERROR_BAD_REFERENCE, SANDSTEP_EXIT_USAGE,     400, "bad-image-ref",  "write the image as docker://HOST/REPO:TAG, oci:DIR[:TAG], oci-archive:FILE or docker-archive:FILE" },
  { sandstep_image_error_quark,     SANDSTEP_IMAGE_ERROR_NOT_FOUND,     SANDSTEP_EXIT_IMAGE,     404, "image-not-found", "check the image's name and tag, and that the registry has it" },
  { sandstep_image_error_quark,     SANDSTEP_IMAGE_ERROR_AUTH,          SANDSTEP_EXIT_IMAGE,     401, "image-auth",     "log in to the registry (podman login, skopeo login or docker login write the credentials sandstep reads)" },
  { sandstep_image_error_quark,     SANDSTEP_IMAGE_ERROR_DIGEST,        SANDSTEP_EXIT_IMAGE,     502, "image-digest",   "the registry sent other bytes than the image names: pull again, or ask who runs the registry" },
  { sandstep_image_error_quark,     SANDSTEP_IMAGE_ERROR_PLATFORM,      SANDSTEP_EXIT_IMAGE,     422, "image-platform", "use an image built for this host's platform" },
  { sandstep_image_error_quark,     SANDSTEP_IMAGE_ERROR_TOO_LARGE,     SANDSTEP_EXIT_IMAGE,     413, "image-too-large", "use a smaller image, or raise --max-image-size" },
  { sandstep_image_error_quark,     SANDSTEP_IMAGE_ERROR_HOSTILE,       SANDSTEP_EXIT_IMAGE,     422, "image-hostile",  "the image's layer is refused as it is: use another image" },
  { sandstep_image_error_quark,     SANDSTEP_IMAGE_ERROR_INSECURE,      SANDSTEP_EXIT_IMAGE,     400, "image-insecure", "serve the registry over HTTPS, or list it in SANDSTEP_INSECURE_REGISTRIES" },
  { sandstep_image_error_quark,     SANDSTEP_IMAGE_ERROR_UNSUPPORTED,   SANDSTEP_EXIT_IMAGE,     415, "image-unsupported", "use an image in the OCI or Docker schema 2 format" },
  { sandstep_image_error_quark,     SANDSTEP_IMAGE_ERROR_STORE,         SANDSTEP_EXIT_INTERNAL,  500, "image-store",    HINT_LOG "; the image store (SANDSTEP_IMAGE_DIR) may be unwritable" },
  { sandstep_image_error_quark,     SANDSTEP_IMAGE_ERROR_NETWORK,       SANDSTEP_EXIT_IMAGE,     502, "image-network",  "check that the registry can be reached from here, then pull again" },
  { sandstep_image_error_quark,     SANDSTEP_IMAGE_ERROR_FAILED,        SANDSTEP_EXIT_IMAGE,     500, "image",          "see the message" },
};

/* Another domain's error (GIO's, a plugin's). */
static const SandstepErrorKind other_kind = { NULL, 0, SANDSTEP_EXIT_INTERNAL, 500, "internal", HINT_LOG };

/* The domains, their names on the wire (older builds sent the quark names), and their fallback. */
static const struct {
  GQuark (*domain) (void);
  const char *name;
  int failed;
} domains[] = {
  { sandstep_usage_error_quark,   "sandstep-usage-error-quark",   SANDSTEP_USAGE_ERROR_FAILED },
  { sandstep_sandbox_error_quark, "sandstep-sandbox-error-quark", SANDSTEP_SANDBOX_ERROR_FAILED },
  { sandstep_jail_error_quark,    "sandstep-jail-error-quark",    SANDSTEP_JAIL_ERROR_FAILED },
  { sandstep_path_error_quark,    "sandstep-path-error-quark",    SANDSTEP_PATH_ERROR_FAILED },
  { sandstep_export_error_quark,  "sandstep-export-error-quark",  SANDSTEP_EXPORT_ERROR_FAILED },
  { sandstep_image_error_quark,   "sandstep-image-error-quark",   SANDSTEP_IMAGE_ERROR_FAILED },
};

gboolean
sandstep_throw (GError **error, GQuark domain, int code, const char *format, ...)
{
  va_list args;

  va_start (args, format);
  g_propagate_error (error, g_error_new_valist (domain, code, format, args));
  va_end (args);
  return FALSE;
}

gboolean
sandstep_throw_errno (GError **error, GQuark domain, int code, int errsv, const char *format, ...)
{
  va_list args;
  g_autofree char *message = NULL;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  g_set_error (error, domain, code, "%s: %s", message, g_strerror (errsv));
  return FALSE;
}

gboolean
sandstep_throw_write_errno (GError **error, GQuark domain, int code, int errsv, const char *format, ...)
{
  va_list args;
  g_autofree char *message = NULL;
  gboolean full = errsv == ENOSPC || errsv == EDQUOT;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  g_set_error (error, full ? SANDSTEP_SANDBOX_ERROR : domain, full ? SANDSTEP_SANDBOX_ERROR_NO_SPACE : code,
               "%s: %s%s", message, g_strerror (errsv),
               full ? ": the host's disk that holds the sandboxes is full; free space there and try again" : "");
  return FALSE;
}

gboolean
sandstep_throw_busy (GError **error, const char *holder, const char *format, ...)
{
  va_list args;
  GError *busy;

  va_start (args, format);
  busy = g_error_new_valist (SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BUSY, format, args);
  va_end (args);
  sandstep_error_set_holder (busy, holder);
  g_propagate_error (error, busy);
  return FALSE;
}

char *
sandstep_busy_waiting_text (const char *handle, const char *holder, double wait_s)
{
  g_autofree char *shown = sandstep_escape (holder, -1, 0, SANDSTEP_ESCAPE_VALUE);

  return g_strdup_printf ("sandbox '%s' is held by '%s'; waiting up to %gs", handle, shown, wait_s);
}

gboolean
sandstep_throw_busy_waited (GError **error, const char *handle, const char *holder, double wait_s)
{
  return sandstep_throw_busy (error, holder,
                              "Sandbox '%s' is still held by '%s' after waiting %gs; raise --wait or provision one "
                              "sandbox per step",
                              handle, holder, wait_s);
}

gboolean
sandstep_throw_broken (GError **error, const char *handle, const char *format, ...)
{
  va_list args;
  g_autofree char *what = NULL;

  va_start (args, format);
  what = g_strdup_vprintf (format, args);
  va_end (args);
  return sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_BROKEN,
                         "Sandbox '%s' is damaged: %s; destroy it with 'sandstep destroy --handle=%s', or reclaim "
                         "every damaged sandbox with 'sandstep gc --broken'",
                         handle, what, handle);
}

gboolean
sandstep_throw_too_large (GError **error, guint64 size, guint64 limit, const char *format, ...)
{
  va_list args;
  GError *too_large;

  va_start (args, format);
  too_large = g_error_new_valist (SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_TOO_LARGE, format, args);
  va_end (args);
  sandstep_error_set_size (too_large, size, limit);
  g_propagate_error (error, too_large);
  return FALSE;
}

const char *
sandstep_error_get_holder (const GError *error)
{
  if (error == NULL || error->domain != SANDSTEP_SANDBOX_ERROR)
    return NULL;
  return sandstep_sandbox_error_get_private (error)->holder;
}

void
sandstep_error_set_holder (GError *error, const char *holder)
{
  SandstepSandboxErrorPrivate *priv;

  g_return_if_fail (error != NULL && error->domain == SANDSTEP_SANDBOX_ERROR);
  priv = sandstep_sandbox_error_get_private (error);
  g_free (priv->holder);
  priv->holder = g_strdup (holder);
}

gboolean
sandstep_error_get_size (const GError *error, guint64 *out_size, guint64 *out_limit)
{
  const SandstepPathErrorPrivate *priv;

  if (error == NULL || error->domain != SANDSTEP_PATH_ERROR)
    return FALSE;
  priv = sandstep_path_error_get_private (error);
  if (!priv->has_size)
    return FALSE;
  if (out_size != NULL)
    *out_size = priv->size;
  if (out_limit != NULL)
    *out_limit = priv->limit;
  return TRUE;
}

void
sandstep_error_set_size (GError *error, guint64 size, guint64 limit)
{
  SandstepPathErrorPrivate *priv;

  g_return_if_fail (error != NULL && error->domain == SANDSTEP_PATH_ERROR);
  priv = sandstep_path_error_get_private (error);
  priv->has_size = TRUE;
  priv->size = size;
  priv->limit = limit;
}

const SandstepErrorKind *
sandstep_error_kind (const GError *error)
{
  for (gsize i = 0; error != NULL && i < G_N_ELEMENTS (kinds); i++)
    if (error->domain == kinds[i].domain () && error->code == kinds[i].code)
      return &kinds[i];
  /* A code of ours that the table lacks is its domain's _FAILED. */
  for (gsize d = 0; error != NULL && d < G_N_ELEMENTS (domains); d++)
    if (error->domain == domains[d].domain ())
      for (gsize i = 0; i < G_N_ELEMENTS (kinds); i++)
        if (kinds[i].domain == domains[d].domain && kinds[i].code == domains[d].failed)
          return &kinds[i];
  return &other_kind;
}

const SandstepErrorKind *
sandstep_error_kinds (gsize *n_kinds)
{
  *n_kinds = G_N_ELEMENTS (kinds);
  return kinds;
}

SandstepExit
sandstep_error_exit_status (const GError *error)
{
  return error != NULL ? sandstep_error_kind (error)->exit_status : SANDSTEP_EXIT_OK;
}

const char *
sandstep_error_domain_name (GQuark domain)
{
  for (gsize d = 0; d < G_N_ELEMENTS (domains); d++)
    if (domain == domains[d].domain ())
      return domains[d].name;
  return NULL;
}

GError *
sandstep_error_new_from_name (const char *domain_name, gint64 code, const char *message)
{
  for (gsize d = 0; domain_name != NULL && d < G_N_ELEMENTS (domains); d++)
    {
      GQuark domain = domains[d].domain ();
      gboolean known = FALSE;

      if (strcmp (domains[d].name, domain_name) != 0)
        continue;
      for (gsize i = 0; i < G_N_ELEMENTS (kinds) && !known; i++)
        known = kinds[i].domain == domains[d].domain && kinds[i].code == code;
      return g_error_new_literal (domain, known ? (int) code : domains[d].failed, message);
    }
  /* Not a domain of ours (GIO's, say): what the server could not do. */
  return g_error_new_literal (SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, message);
}

/* Characters that reorder what follows them on a terminal (and so could
 * make one name look like another): the bidi embeddings, overrides, isolates
 * and marks. */
static gboolean
is_bidi_control (gunichar c)
{
  return c == 0x200e || c == 0x200f || c == 0x061c || (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
}

char *
sandstep_escape (const char *text, gssize len, gsize max, SandstepEscapeFlags flags)
{
  GString *out;
  const char *p, *end;
  gboolean cut = FALSE;

  if (text == NULL)
    return g_strdup ("");
  if (len < 0)
    len = strlen (text);
  if (max > 0 && (gsize) len > max)
    {
      len = max;
      cut = TRUE;
    }
  out = g_string_sized_new (len + 8);
  for (p = text, end = text + len; p < end;)
    {
      guchar b = (guchar) *p;
      gunichar c;
      const char *next;

      if (b < 0x80)
        {
          if (b == '\n')
            g_string_append (out, "\\n");
          else if (b == '\r')
            g_string_append (out, "\\r");
          else if (b == '\t')
            g_string_append (out, "\\t");
          else if (b < 0x20 || b == 0x7f)
            g_string_append_printf (out, "\\x%02x", b);
          else if (b == '\\' && (flags & SANDSTEP_ESCAPE_VALUE))
            g_string_append (out, "\\\\");
          else
            g_string_append_c (out, (char) b);
          p++;
          continue;
        }
      c = g_utf8_get_char_validated (p, end - p);
      if (c == (gunichar) -1 || c == (gunichar) -2)
        {
          /* Not UTF-8 (or cut inside a character): each byte on its own. */
          g_string_append_printf (out, "\\x%02x", b);
          p++;
          continue;
        }
      next = g_utf8_next_char (p);
      if (c >= 0x80 && c <= 0x9f)
        for (const char *q = p; q < next; q++)
          g_string_append_printf (out, "\\x%02x", (guchar) *q);
      else if (is_bidi_control (c))
        g_string_append_printf (out, "\\u{%04x}", c);
      else
        g_string_append_len (out, p, next - p);
      p = next;
    }
  if (cut)
    g_string_append (out, "...");
  return g_string_free (out, FALSE);
}
