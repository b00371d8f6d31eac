/* sandstep-image-registry.c: the OCI distribution API over libsoup, as a pull's source (docker://).
 *
 * Auth as the container tools do it: anonymous first; a 401 with
 * "WWW-Authenticate: Bearer realm=...,service=...,scope=..." gets a token
 * from the realm (with the Basic credentials of the registry's entry in
 * $REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json or
 * ~/.docker/config.json, when there is one), a 401 asking for Basic gets
 * those credentials.  Redirects (a blob in object storage) are followed by
 * hand, without the Authorization header.  HTTPS always, except a registry
 * on loopback or listed in $SANDSTEP_INSECURE_REGISTRIES (HOST[:PORT], comma
 * separated): those are tried over HTTPS first and over plain HTTP when they
 * do not speak TLS, as docker and skopeo do; credentials never travel over
 * plain HTTP to anything else.  Certificates: the host's CA bundle, and the
 * CAs (*.crt) of the registry's directory in the certs.d trees the container
 * tools read ($HOME/.config/containers/certs.d/HOST:PORT,
 * /etc/containers/certs.d/HOST:PORT, /etc/docker/certs.d/HOST:PORT).
 */
#include "sandstep-image-source.h"

#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <string.h>

/* A token server's answer: a token and a few numbers. */
#define TOKEN_ANSWER_MAX (1024 * 1024)

#include "sandstep-error.h"
#include "sandstep-json.h"
#include "sandstep-members.h"

#define MANIFEST_ACCEPT SANDSTEP_MEDIA_OCI_MANIFEST ", " SANDSTEP_MEDIA_OCI_INDEX ", " \
                        SANDSTEP_MEDIA_DOCKER_MANIFEST ", " SANDSTEP_MEDIA_DOCKER_LIST
#define MAX_HOPS 5
#define HINT_LOGIN "log in with 'skopeo login', 'podman login' or 'docker login', or set REGISTRY_AUTH_FILE"

typedef struct {
  SandstepImageSource source;
  SoupSession *session;
  char *text;           /* the reference, for messages */
  char *registry;       /* HOST[:PORT] as written */
  char *repository;
  GMutex lock;          /* base and authorization: the layers of an image are fetched from several threads */
  char *base;           /* SCHEME://API-HOST/v2/REPOSITORY */
  char *basic;          /* base64 user:password from an auth file, or NULL */
  char *authorization;  /* the header value that worked, or NULL: anonymous */
  gboolean plain_allowed; /* loopback or listed: plain HTTP when the registry does not speak TLS */
  GPtrArray *cas;       /* GTlsCertificate: the registry's CAs from certs.d */
  char *cas_for;        /* the HOST:PORT they are for */
} RegistrySource;

/* TRUE when plain HTTP is allowed to @host_port: loopback, or listed in $SANDSTEP_INSECURE_REGISTRIES. */
static gboolean
plain_http_allowed (const char *host_port)
{
  g_autofree char *host = NULL;
  const char *list = g_getenv ("SANDSTEP_INSECURE_REGISTRIES");
  const char *colon;

  if (host_port[0] == '[')
    host = g_strndup (host_port + 1, strcspn (host_port + 1, "]"));
  else
    {
      colon = strrchr (host_port, ':');
      host = colon != NULL ? g_strndup (host_port, colon - host_port) : g_strdup (host_port);
    }
  if (strcmp (host, "localhost") == 0 || g_str_has_prefix (host, "127.") || strcmp (host, "::1") == 0)
    return TRUE;
  if (list != NULL)
    {
      g_auto(GStrv) entries = g_strsplit_set (list, ", ", -1);
      for (guint i = 0; entries[i] != NULL; i++)
        if (entries[i][0] != '\0' && (g_ascii_strcasecmp (entries[i], host_port) == 0 ||
                                      g_ascii_strcasecmp (entries[i], host) == 0))
          return TRUE;
    }
  return FALSE;
}

/* The Basic credentials an auth file holds for @registry, or NULL. */
static char *
credentials_for (const char *registry)
{
  g_autofree char *containers = NULL, *docker = NULL;
  const char *files[3] = { g_getenv ("REGISTRY_AUTH_FILE"), NULL, NULL };
  g_autofree char *keys[5] = { NULL };

  if (g_getenv ("XDG_RUNTIME_DIR") != NULL)
    files[1] = containers = g_build_filename (g_getenv ("XDG_RUNTIME_DIR"), "containers", "auth.json", NULL);
  files[2] = docker = g_build_filename (g_get_home_dir (), ".docker", "config.json", NULL);
  keys[0] = g_strdup (registry);
  keys[1] = g_strconcat ("https://", registry, NULL);
  keys[2] = g_strconcat ("http://", registry, NULL);
  if (strcmp (registry, "docker.io") == 0)
    {
      keys[3] = g_strdup ("https://index.docker.io/v1/");
      keys[4] = g_strdup ("registry-1.docker.io");
    }
  for (gsize f = 0; f < G_N_ELEMENTS (files); f++)
    {
      g_autoptr(JsonParser) parser = json_parser_new ();
      JsonObject *root, *auths;

      if (files[f] == NULL || !json_parser_load_from_file (parser, files[f], NULL) ||
          !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
        continue;
      root = json_node_get_object (json_parser_get_root (parser));
      /* Each member typed before it is read: a file of another shape names no credentials. */
      if (!sandstep_member_object (root, "auths", &auths))
        auths = NULL;
      for (gsize k = 0; auths != NULL && k < G_N_ELEMENTS (keys); k++)
        {
          JsonObject *entry = NULL;
          const char *auth = NULL;
          if (keys[k] == NULL || !sandstep_member_object (auths, keys[k], &entry))
            continue;
          sandstep_member_string (entry, "auth", &auth);
          if (auth != NULL && *auth != '\0')
            return g_strdup (auth);
        }
    }
  return NULL;
}

/* The parameters of a WWW-Authenticate challenge: scheme, then key="value" pairs. */
static GHashTable *
parse_challenge (const char *header, char **out_scheme)
{
  GHashTable *params = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  const char *p = header;

  *out_scheme = g_strndup (p, strcspn (p, " "));
  p += strlen (*out_scheme);
  while (*p != '\0')
    {
      g_autofree char *key = NULL;
      GString *value = g_string_new (NULL);

      while (*p == ' ' || *p == ',')
        p++;
      key = g_strndup (p, strcspn (p, "="));
      p += strlen (key);
      if (*p != '=')
        {
          g_string_free (value, TRUE);
          break;
        }
      p++;
      if (*p == '"')
        {
          for (p++; *p != '\0' && *p != '"'; p++)
            {
              if (*p == '\\' && p[1] != '\0')
                p++;
              g_string_append_c (value, *p);
            }
          if (*p == '"')
            p++;
        }
      else
        while (*p != '\0' && *p != ',')
          g_string_append_c (value, *p++);
      g_hash_table_replace (params, g_ascii_strdown (g_strstrip (key), -1), g_string_free (value, FALSE));
    }
  return params;
}

static gboolean
url_allowed (const char *url, gboolean *out_plain)
{
  g_autoptr(GUri) uri = g_uri_parse (url, G_URI_FLAGS_NONE, NULL);
  g_autofree char *host_port = NULL;

  if (uri == NULL || g_uri_get_host (uri) == NULL)
    return FALSE;
  *out_plain = g_strcmp0 (g_uri_get_scheme (uri), "http") == 0;
  if (g_strcmp0 (g_uri_get_scheme (uri), "https") == 0)
    return TRUE;
  if (!*out_plain)
    return FALSE;
  host_port = g_uri_get_port (uri) > 0 ? g_strdup_printf ("%s:%d", g_uri_get_host (uri), g_uri_get_port (uri))
                                       : g_strdup (g_uri_get_host (uri));
  return plain_http_allowed (host_port);
}

/* The CAs (*.crt) that the certs.d trees hold for @host_port. */
static GPtrArray *
load_cas (const char *host_port)
{
  g_autofree char *user = g_build_filename (g_get_home_dir (), ".config", "containers", "certs.d", host_port, NULL);
  g_autofree char *etc = g_build_filename ("/etc/containers/certs.d", host_port, NULL);
  g_autofree char *docker = g_build_filename ("/etc/docker/certs.d", host_port, NULL);
  const char *dirs[] = { user, etc, docker };
  GPtrArray *cas = g_ptr_array_new_with_free_func (g_object_unref);

  for (gsize i = 0; i < G_N_ELEMENTS (dirs); i++)
    {
      g_autoptr(GDir) dir = g_dir_open (dirs[i], 0, NULL);
      const char *name;

      while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
        {
          g_autofree char *path = NULL;
          g_autoptr(GError) local = NULL;
          GTlsCertificate *ca;

          if (!g_str_has_suffix (name, ".crt"))
            continue;
          path = g_build_filename (dirs[i], name, NULL);
          ca = g_tls_certificate_new_from_file (path, &local);
          if (ca != NULL)
            g_ptr_array_add (cas, ca);
          else
            g_debug ("registry CA '%s' cannot be read: %s", path, local->message);
        }
    }
  return cas;
}

/* A certificate the host's CAs do not vouch for: accepted when one of the
 * registry's own CAs (certs.d) does, for the host the message went to. */
static gboolean
on_accept_certificate (SoupMessage *msg, GTlsCertificate *cert, GTlsCertificateFlags errors, gpointer data)
{
  RegistrySource *self = data;
  GUri *uri = soup_message_get_uri (msg);
  g_autofree char *host_port = g_strdup_printf ("%s:%d", g_uri_get_host (uri), g_uri_get_port (uri));
  g_autoptr(GSocketConnectable) identity = g_network_address_new (g_uri_get_host (uri), g_uri_get_port (uri));

  if (g_strcmp0 (host_port, self->cas_for) != 0 && g_strcmp0 (g_uri_get_host (uri), self->cas_for) != 0)
    return FALSE;
  for (guint i = 0; i < self->cas->len; i++)
    if (g_tls_certificate_verify (cert, identity, self->cas->pdata[i]) == 0)
      return TRUE;
  return FALSE;
}

static SoupMessage *
new_message (RegistrySource *self, const char *url)
{
  SoupMessage *msg = soup_message_new ("GET", url);

  if (msg != NULL && self->cas->len > 0)
    g_signal_connect (msg, "accept-certificate", G_CALLBACK (on_accept_certificate), self);
  return msg;
}

/* Fetches a token (Bearer) or picks the credentials (Basic) that the challenge of @msg asks for. */
static gboolean
authenticate (RegistrySource *self, SoupMessage *msg, GError **error)
{
  const char *header = soup_message_headers_get_one (soup_message_get_response_headers (msg), "WWW-Authenticate");
  g_autofree char *scheme = NULL;
  g_autoptr(GHashTable) params = NULL;

  if (header == NULL)
    return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_AUTH,
                           "image '%s': registry '%s' refused us (401) without saying how to log in", self->text,
                           self->registry);
  params = parse_challenge (header, &scheme);
  if (g_ascii_strcasecmp (scheme, "Basic") == 0)
    {
      if (self->basic == NULL)
        return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_AUTH,
                               "image '%s': registry '%s' needs credentials and no auth file has them; " HINT_LOGIN,
                               self->text, self->registry);
      self->authorization = g_strconcat ("Basic ", self->basic, NULL);
      return TRUE;
    }
  if (g_ascii_strcasecmp (scheme, "Bearer") == 0)
    {
      const char *realm = g_hash_table_lookup (params, "realm");
      const char *service = g_hash_table_lookup (params, "service");
      const char *scope = g_hash_table_lookup (params, "scope");
      g_autofree char *default_scope = g_strdup_printf ("repository:%s:pull", self->repository);
      g_autoptr(GString) url = NULL;
      g_autoptr(SoupMessage) token_msg = NULL;
      g_autoptr(GBytes) body = NULL;
      g_autoptr(JsonNode) answer = NULL;
      g_autoptr(GError) local = NULL;
      gboolean plain = FALSE;
      const char *token = NULL;

      if (realm == NULL || !url_allowed (realm, &plain))
        return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_AUTH,
                               "image '%s': registry '%s' sends us for a token to '%s', which is not an HTTPS URL "
                               "(nor a loopback or SANDSTEP_INSECURE_REGISTRIES one)", self->text, self->registry,
                               realm != NULL ? realm : "");
      url = g_string_new (realm);
      g_string_append_c (url, strchr (realm, '?') != NULL ? '&' : '?');
      if (service != NULL)
        {
          g_autofree char *escaped = g_uri_escape_string (service, NULL, FALSE);
          g_string_append_printf (url, "service=%s&", escaped);
        }
      {
        g_autofree char *escaped = g_uri_escape_string (scope != NULL ? scope : default_scope, NULL, FALSE);
        g_string_append_printf (url, "scope=%s", escaped);
      }
      token_msg = new_message (self, url->str);
      if (token_msg == NULL)
        return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_AUTH,
                               "image '%s': the token URL '%s' is malformed", self->text, url->str);
      if (self->basic != NULL)
        {
          g_autofree char *value = g_strconcat ("Basic ", self->basic, NULL);
          soup_message_headers_replace (soup_message_get_request_headers (token_msg), "Authorization", value);
        }
      body = soup_session_send_and_read (self->session, token_msg, NULL, &local);
      if (body == NULL)
        return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_NETWORK,
                               "image '%s': cannot reach the token server '%s': %s", self->text, realm,
                               local->message);
      if (soup_message_get_status (token_msg) != SOUP_STATUS_OK)
        return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_AUTH,
                               "image '%s': the token server '%s' refused us (HTTP %u)%s", self->text, realm,
                               soup_message_get_status (token_msg),
                               self->basic == NULL ? "; " HINT_LOGIN : "; check the credentials in the auth file");
      /* The token server's answer is bounded and typed as every JSON we read from outside. */
      answer = sandstep_json_parse (g_bytes_get_data (body, NULL), g_bytes_get_size (body), TOKEN_ANSWER_MAX, NULL);
      if (answer != NULL && JSON_NODE_HOLDS_OBJECT (answer))
        {
          JsonObject *o = json_node_get_object (answer);
          if (!sandstep_member_string (o, "token", &token))
            sandstep_member_string (o, "access_token", &token);
        }
      if (token == NULL || *token == '\0')
        return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_AUTH,
                               "image '%s': the token server '%s' answered without a token", self->text, realm);
      self->authorization = g_strconcat ("Bearer ", token, NULL);
      return TRUE;
    }
  return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_AUTH,
                         "image '%s': registry '%s' asks for '%s' authentication, which sandstep does not speak",
                         self->text, self->registry, scheme);
}

/* A copy of *@field (self->base or self->authorization), read under the lock. */
static char *
dup_locked (RegistrySource *self, char **field)
{
  char *copy;

  g_mutex_lock (&self->lock);
  copy = g_strdup (*field);
  g_mutex_unlock (&self->lock);
  return copy;
}

/* GETs @url: authenticates once when asked, follows redirects without the
 * credentials.  Returns the body stream; *@out_msg the final message.  Called
 * from several threads at once (libsoup 3.2 sends from any thread). */
static GInputStream *
get (RegistrySource *self, const char *url, const char *accept, SoupMessage **out_msg, GError **error)
{
  g_autofree char *current = g_strdup (url);
  gboolean ours = TRUE;   /* the registry's own URL: the credentials go there, and nowhere else */
  gboolean retried = FALSE;

  for (guint hop = 0; hop <= MAX_HOPS;)
    {
      g_autoptr(SoupMessage) msg = new_message (self, current);
      g_autoptr(GInputStream) stream = NULL;
      g_autoptr(GError) local = NULL;
      g_autofree char *authorization = ours ? dup_locked (self, &self->authorization) : NULL;
      guint status;

      if (msg == NULL)
        {
          sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_NETWORK,
                          "image '%s': the URL '%s' is malformed", self->text, current);
          return NULL;
        }
      soup_message_add_flags (msg, SOUP_MESSAGE_NO_REDIRECT);
      if (accept != NULL)
        soup_message_headers_replace (soup_message_get_request_headers (msg), "Accept", accept);
      if (authorization != NULL)
        soup_message_headers_replace (soup_message_get_request_headers (msg), "Authorization", authorization);
      stream = soup_session_send (self->session, msg, NULL, &local);
      if (stream == NULL && ours && self->plain_allowed && local->domain == G_TLS_ERROR &&
          local->code != G_TLS_ERROR_BAD_CERTIFICATE && local->code != G_TLS_ERROR_CERTIFICATE_REQUIRED &&
          g_str_has_prefix (current, "https://"))
        {
          /* A loopback or listed registry without TLS: plain HTTP from now on, for this URL and the rest. */
          char *next = g_strconcat ("http://", current + strlen ("https://"), NULL);

          g_mutex_lock (&self->lock);
          if (g_str_has_prefix (self->base, "https://"))
            {
              char *base = g_strconcat ("http://", self->base + strlen ("https://"), NULL);
              g_free (self->base);
              self->base = base;
            }
          g_mutex_unlock (&self->lock);
          g_free (current);
          current = next;
          continue;
        }
      if (stream == NULL && g_error_matches (local, G_TLS_ERROR, G_TLS_ERROR_BAD_CERTIFICATE))
        {
          sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_NETWORK,
                          "image '%s': the TLS certificate of '%s' is not trusted (%s); if the registry has a CA of "
                          "its own, put it in ~/.config/containers/certs.d/%s/ca.crt or /etc/containers/certs.d/%s/",
                          self->text, current, local->message, self->registry, self->registry);
          return NULL;
        }
      if (stream == NULL)
        {
          sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_NETWORK,
                          "image '%s': cannot reach '%s': %s; check the registry's address and that it runs",
                          self->text, current, local->message);
          return NULL;
        }
      status = soup_message_get_status (msg);
      if (status == SOUP_STATUS_UNAUTHORIZED && ours && !retried)
        {
          gboolean authenticated;

          retried = TRUE;
          /* One thread asks for a token at a time; the others then use the one it got. */
          g_mutex_lock (&self->lock);
          if (g_strcmp0 (self->authorization, authorization) == 0)
            {
              g_clear_pointer (&self->authorization, g_free);
              authenticated = authenticate (self, msg, error);
            }
          else
            authenticated = TRUE;
          g_mutex_unlock (&self->lock);
          if (!authenticated)
            return NULL;
          continue;
        }
      if (SOUP_STATUS_IS_REDIRECTION (status))
        {
          const char *location = soup_message_headers_get_one (soup_message_get_response_headers (msg), "Location");
          g_autofree char *next = location != NULL ? g_uri_resolve_relative (current, location, G_URI_FLAGS_NONE, NULL)
                                                   : NULL;
          gboolean plain = FALSE;

          if (next == NULL || !url_allowed (next, &plain))
            {
              sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_INSECURE,
                              "image '%s': the registry redirects to '%s', which is not an HTTPS URL (nor a loopback "
                              "or SANDSTEP_INSECURE_REGISTRIES one); refused", self->text,
                              location != NULL ? location : "(nothing)");
              return NULL;
            }
          g_free (current);
          current = g_steal_pointer (&next);
          ours = FALSE;         /* object storage gets no registry credentials */
          hop++;
          continue;
        }
      *out_msg = g_steal_pointer (&msg);
      return g_steal_pointer (&stream);
    }
  sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_NETWORK,
                  "image '%s': more than %d redirects for '%s'", self->text, MAX_HOPS, url);
  return NULL;
}

static gboolean
status_ok (RegistrySource *self, SoupMessage *msg, const char *what, GError **error)
{
  guint status = soup_message_get_status (msg);

  if (status == SOUP_STATUS_OK)
    return TRUE;
  if (status == SOUP_STATUS_NOT_FOUND)
    return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_NOT_FOUND,
                           "image '%s': registry '%s' has no %s (HTTP 404); check the repository and tag",
                           self->text, self->registry, what);
  if (status == SOUP_STATUS_UNAUTHORIZED || status == SOUP_STATUS_FORBIDDEN)
    return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_AUTH,
                           "image '%s': registry '%s' refused access to %s (HTTP %u); " HINT_LOGIN,
                           self->text, self->registry, what, status);
  return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_NETWORK,
                         "image '%s': registry '%s' answered HTTP %u %s for %s", self->text, self->registry, status,
                         soup_message_get_reason_phrase (msg) != NULL ? soup_message_get_reason_phrase (msg) : "",
                         what);
}

static GBytes *
registry_get_manifest (SandstepImageSource *source, const char *reference, char **out_media_type, GError **error)
{
  RegistrySource *self = (RegistrySource *) source;
  g_autofree char *base = dup_locked (self, &self->base);
  g_autofree char *url = g_strdup_printf ("%s/manifests/%s", base, reference);
  g_autofree char *what = g_strdup_printf ("manifest '%s'", reference);
  g_autoptr(SoupMessage) msg = NULL;
  g_autoptr(GInputStream) stream = get (self, url, MANIFEST_ACCEPT, &msg, error);
  g_autoptr(GBytes) bytes = NULL;
  const char *type;

  if (stream == NULL || !status_ok (self, msg, what, error))
    return NULL;
  bytes = g_input_stream_read_bytes (stream, SANDSTEP_IMAGE_MAX_MANIFEST + 1, NULL, error);
  if (bytes == NULL)
    return NULL;
  if (g_bytes_get_size (bytes) > SANDSTEP_IMAGE_MAX_MANIFEST)
    {
      sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_TOO_LARGE,
                      "image '%s': the manifest '%s' is over %d bytes; refused", self->text, reference,
                      SANDSTEP_IMAGE_MAX_MANIFEST);
      return NULL;
    }
  type = soup_message_headers_get_content_type (soup_message_get_response_headers (msg), NULL);
  *out_media_type = type != NULL && strcmp (type, "application/json") != 0 ? g_strdup (type) : NULL;
  return g_steal_pointer (&bytes);
}

static gboolean
registry_get_blob (SandstepImageSource *source, const char *digest, SandstepImageBlobWriter *writer,
                   SandstepImageBytesFunc on_bytes, gpointer data, GError **error)
{
  RegistrySource *self = (RegistrySource *) source;
  g_autofree char *base = dup_locked (self, &self->base);
  g_autofree char *url = g_strdup_printf ("%s/blobs/%s", base, digest);
  g_autofree char *what = g_strdup_printf ("blob '%s'", digest);
  g_autoptr(SoupMessage) msg = NULL;
  g_autoptr(GInputStream) stream = get (self, url, NULL, &msg, error);
  g_autofree char *buf = g_malloc (65536);

  if (stream == NULL || !status_ok (self, msg, what, error))
    return FALSE;
  for (;;)
    {
      gssize n = g_input_stream_read (stream, buf, 65536, NULL, error);
      if (n < 0)
        {
          g_prefix_error (error, "image '%s': reading blob '%s': ", self->text, digest);
          return FALSE;
        }
      if (n == 0)
        return TRUE;
      if (!sandstep_image_blob_writer_write (writer, buf, n, error))
        return FALSE;
      if (on_bytes != NULL)
        on_bytes (sandstep_image_blob_writer_get_written (writer), data);
    }
}

static void
registry_free (SandstepImageSource *source)
{
  RegistrySource *self = (RegistrySource *) source;

  g_clear_object (&self->session);
  g_free (self->text);
  g_free (self->registry);
  g_free (self->repository);
  g_free (self->base);
  g_free (self->basic);
  g_free (self->authorization);
  g_ptr_array_unref (self->cas);
  g_free (self->cas_for);
  g_mutex_clear (&self->lock);
  g_free (self);
}

SandstepImageSource *
sandstep_registry_source_new (const SandstepImageRef *ref, GError **error)
{
  RegistrySource *self = g_new0 (RegistrySource, 1);
  g_autoptr(SandstepImageSource) source = &self->source;
  const char *api_host = strcmp (ref->registry, "docker.io") == 0 ? "registry-1.docker.io" : ref->registry;

  self->source.get_manifest = registry_get_manifest;
  self->source.get_blob = registry_get_blob;
  self->source.free = registry_free;
  g_mutex_init (&self->lock);
  self->text = g_strdup (ref->text);
  self->registry = g_strdup (ref->registry);
  self->repository = g_strdup (ref->repository);
  self->plain_allowed = plain_http_allowed (ref->registry);
  self->base = g_strdup_printf ("https://%s/v2/%s", api_host, ref->repository);
  self->basic = credentials_for (ref->registry);
  self->cas = load_cas (ref->registry);
  self->cas_for = g_strdup (ref->registry);
  self->session = soup_session_new_with_options ("user-agent", "sandstep", "timeout", 120, "idle-timeout", 60, NULL);
  return g_steal_pointer (&source);
}
