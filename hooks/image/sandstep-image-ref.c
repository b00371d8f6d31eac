/* sandstep-image-ref.c: the image reference grammar (sandstep-image-ref.h). */
#include "sandstep-image-ref.h"

#include <string.h>

#include "sandstep-error.h"
#include "sandstep-error.h"

#define DOCKER_HUB "docker.io"
#define HINT "write docker://[HOST[:PORT]/]REPO[:TAG|@sha256:DIGEST], oci:DIR[:TAG], oci-archive:FILE[:TAG] or " \
             "docker-archive:FILE"

void
sandstep_image_ref_free (SandstepImageRef *ref)
{
  if (ref == NULL)
    return;
  g_free (ref->registry);
  g_free (ref->repository);
  g_free (ref->tag);
  g_free (ref->digest);
  g_free (ref->path);
  g_free (ref->text);
  g_free (ref);
}

gboolean
sandstep_image_digest_is_valid (const char *digest)
{
  if (digest == NULL || !g_str_has_prefix (digest, "sha256:") || strlen (digest) != 7 + 64)
    return FALSE;
  for (const char *p = digest + 7; *p != '\0'; p++)
    if (!g_ascii_isdigit (*p) && !(*p >= 'a' && *p <= 'f'))
      return FALSE;
  return TRUE;
}

gboolean
sandstep_image_tag_is_valid (const char *tag)
{
  gsize len = tag != NULL ? strlen (tag) : 0;

  if (len == 0 || len > 128 || !(g_ascii_isalnum (tag[0]) || tag[0] == '_'))
    return FALSE;
  for (gsize i = 1; i < len; i++)
    if (!g_ascii_isalnum (tag[i]) && tag[i] != '_' && tag[i] != '.' && tag[i] != '-')
      return FALSE;
  return TRUE;
}

/* One path component of a repository: [a-z0-9]+ joined by '.', '_', '__' or runs of '-'. */
static gboolean
repo_component_is_valid (const char *c)
{
  gsize len = strlen (c);

  if (len == 0 || !g_ascii_isalnum (c[0]) || !g_ascii_isalnum (c[len - 1]))
    return FALSE;
  for (gsize i = 0; i < len; i++)
    {
      if (g_ascii_isupper (c[i]))
        return FALSE;
      if (g_ascii_isalnum (c[i]))
        continue;
      if (c[i] == '-')
        continue;
      if (c[i] == '.' || c[i] == '_')
        {
          /* '.' alone, '_' or '__'; never two separators of different kinds in a row */
          if (!g_ascii_isalnum (c[i - 1]) && !(c[i] == '_' && c[i - 1] == '_' && i >= 2 && g_ascii_isalnum (c[i - 2])))
            return FALSE;
          continue;
        }
      return FALSE;
    }
  return TRUE;
}

/* HOST[:PORT]: letters, digits, '.', '-', or a bracketed IPv6 address, then an optional port. */
static gboolean
host_is_valid (const char *host)
{
  const char *colon;

  if (host[0] == '[')
    {
      const char *end = strchr (host, ']');
      if (end == NULL || end == host + 1)
        return FALSE;
      for (const char *p = host + 1; p < end; p++)
        if (!g_ascii_isxdigit (*p) && *p != ':' && *p != '.')
          return FALSE;
      colon = end[1] == ':' ? end + 1 : NULL;
      if (end[1] != '\0' && colon == NULL)
        return FALSE;
    }
  else
    {
      colon = strchr (host, ':');
      if (colon == host || host[0] == '\0')
        return FALSE;
      for (const char *p = host; *p != '\0' && p != colon; p++)
        if (!g_ascii_isalnum (*p) && *p != '.' && *p != '-')
          return FALSE;
    }
  if (colon != NULL)
    {
      guint64 port = 0;
      if (!g_ascii_string_to_unsigned (colon + 1, 10, 1, 65535, &port, NULL))
        return FALSE;
    }
  return TRUE;
}

static gboolean
parse_registry (SandstepImageRef *ref, const char *rest, const char *text, GError **error)
{
  g_autofree char *name = NULL;
  const char *at = strchr (rest, '@');
  const char *slash, *colon;
  g_auto(GStrv) parts = NULL;

  if (at != NULL)
    {
      if (!sandstep_image_digest_is_valid (at + 1))
        return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_BAD_REFERENCE,
                               "image reference '%s': the digest '%s' is not sha256: and 64 lower-case hex digits",
                               text, at + 1);
      ref->digest = g_strdup (at + 1);
      name = g_strndup (rest, at - rest);
    }
  else
    name = g_strdup (rest);

  /* A tag is after the last ':' that follows the last '/' (a port's ':' comes before one). */
  slash = strrchr (name, '/');
  colon = strrchr (slash != NULL ? slash : name, ':');
  if (colon != NULL)
    {
      if (!sandstep_image_tag_is_valid (colon + 1))
        return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_BAD_REFERENCE,
                               "image reference '%s': the tag '%s' is not valid (letters, digits, '_', '.', '-'; "
                               "at most 128)", text, colon + 1);
      ref->tag = g_strdup (colon + 1);
      name[colon - name] = '\0';
    }

  /* As docker does: the first component is a host when it has a '.' or a ':', or is localhost. */
  slash = strchr (name, '/');
  if (slash != NULL)
    {
      g_autofree char *first = g_strndup (name, slash - name);
      if (strchr (first, '.') != NULL || strchr (first, ':') != NULL || strcmp (first, "localhost") == 0 ||
          first[0] == '[')
        {
          if (!host_is_valid (first))
            return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_BAD_REFERENCE,
                                   "image reference '%s': '%s' is not a registry HOST[:PORT]; %s", text, first, HINT);
          ref->registry = g_steal_pointer (&first);
          ref->repository = g_strdup (slash + 1);
        }
    }
  if (ref->registry == NULL)
    {
      ref->registry = g_strdup (DOCKER_HUB);
      ref->repository = g_strdup (name);
    }
  if (strcmp (ref->registry, DOCKER_HUB) == 0 && strchr (ref->repository, '/') == NULL)
    {
      char *library = g_strconcat ("library/", ref->repository, NULL);
      g_free (ref->repository);
      ref->repository = library;
    }
  parts = g_strsplit (ref->repository, "/", -1);
  for (guint i = 0; parts[i] != NULL; i++)
    if (!repo_component_is_valid (parts[i]))
      return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_BAD_REFERENCE,
                             "image reference '%s': the repository '%s' is not valid (lower-case letters and digits "
                             "joined by '.', '_', '__' or '-', in '/'-separated parts); %s",
                             text, ref->repository, HINT);
  if (strlen (ref->repository) > 255)
    return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_BAD_REFERENCE,
                           "image reference '%s': the repository is longer than 255 characters", text);
  if (ref->tag == NULL && ref->digest == NULL)
    ref->tag = g_strdup ("latest");
  ref->text = g_strdup_printf ("docker://%s/%s%s%s%s%s", ref->registry, ref->repository,
                               ref->tag != NULL ? ":" : "", ref->tag != NULL ? ref->tag : "",
                               ref->digest != NULL ? "@" : "", ref->digest != NULL ? ref->digest : "");
  return TRUE;
}

/* PATH[:TAG]: a trailing ":TAG" is a tag when it is one; the rest is the path. */
static gboolean
parse_layout (SandstepImageRef *ref, const char *rest, const char *transport, gboolean takes_tag, const char *text,
              GError **error)
{
  const char *colon = takes_tag ? strrchr (rest, ':') : NULL;

  if (colon != NULL && strchr (colon, '/') == NULL && sandstep_image_tag_is_valid (colon + 1))
    {
      ref->path = g_strndup (rest, colon - rest);
      ref->tag = g_strdup (colon + 1);
    }
  else
    ref->path = g_strdup (rest);
  if (ref->path[0] == '\0')
    return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_BAD_REFERENCE,
                           "image reference '%s': %s needs a path; %s", text, transport, HINT);
  ref->text = g_strdup_printf ("%s%s%s%s", transport, ref->path, ref->tag != NULL ? ":" : "",
                               ref->tag != NULL ? ref->tag : "");
  return TRUE;
}

SandstepImageRef *
sandstep_image_ref_parse (const char *text, GError **error)
{
  g_autoptr(SandstepImageRef) ref = g_new0 (SandstepImageRef, 1);
  gboolean ok;

  if (text == NULL || *text == '\0')
    {
      sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_BAD_REFERENCE, "no image reference; %s", HINT);
      return NULL;
    }
  for (const char *p = text; *p != '\0'; p++)
    if ((guchar) *p <= ' ' || *p == 0x7f)
      {
        g_autofree char *shown = sandstep_escape (text, -1, 200, SANDSTEP_ESCAPE_VALUE);
        sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_BAD_REFERENCE,
                        "image reference '%s' has a space or control character; %s", shown, HINT);
        return NULL;
      }
  if (g_str_has_prefix (text, "docker://"))
    {
      ref->transport = SANDSTEP_IMAGE_TRANSPORT_REGISTRY;
      ok = parse_registry (ref, text + strlen ("docker://"), text, error);
    }
  else if (g_str_has_prefix (text, "oci-archive:"))
    {
      ref->transport = SANDSTEP_IMAGE_TRANSPORT_OCI_ARCHIVE;
      ok = parse_layout (ref, text + strlen ("oci-archive:"), "oci-archive:", TRUE, text, error);
    }
  else if (g_str_has_prefix (text, "oci:"))
    {
      ref->transport = SANDSTEP_IMAGE_TRANSPORT_OCI;
      ok = parse_layout (ref, text + strlen ("oci:"), "oci:", TRUE, text, error);
    }
  else if (g_str_has_prefix (text, "docker-archive:"))
    {
      ref->transport = SANDSTEP_IMAGE_TRANSPORT_DOCKER_ARCHIVE;
      ok = parse_layout (ref, text + strlen ("docker-archive:"), "docker-archive:", FALSE, text, error);
    }
  else
    {
      g_autofree char *shown = sandstep_escape (text, -1, 200, SANDSTEP_ESCAPE_VALUE);
      sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_BAD_REFERENCE,
                      "image reference '%s' names no transport; %s (a registry image is docker://%s)", shown, HINT,
                      shown);
      return NULL;
    }
  return ok ? g_steal_pointer (&ref) : NULL;
}
