/* sandstep-aws-config.c: the AWS tools' configuration, read as they read it. */
#include "sandstep-aws-config.h"

#include <errno.h>
#include <string.h>

G_DEFINE_QUARK (sandstep-aws-config-error-quark, sandstep_aws_config_error)

/* One INI file as AWS reads it: [section], "key = value", full-line '#' and
 * ';' comments, and nested blocks ("s3 =" followed by indented "key = value"
 * lines), stored as "s3.key".  Values are kept byte for byte (GKeyFile would
 * unescape backslashes in a secret). */
static GHashTable *
parse_ini (const char *text)
{
  GHashTable *sections = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                (GDestroyNotify) g_hash_table_unref);
  g_auto(GStrv) lines = g_strsplit (text, "\n", -1);
  GHashTable *current = NULL;
  g_autofree char *parent = NULL;   /* the key whose nested block is open */

  for (guint i = 0; lines[i] != NULL; i++)
    {
      char *line = lines[i];
      gboolean indented = line[0] == ' ' || line[0] == '\t';
      char *eq;

      g_strstrip (line);
      if (line[0] == '\0' || line[0] == '#' || line[0] == ';')
        continue;
      if (line[0] == '[')
        {
          char *close = strchr (line, ']');
          g_autofree char *name = NULL;

          g_clear_pointer (&parent, g_free);
          if (close == NULL)
            {
              current = NULL;
              continue;
            }
          name = g_strstrip (g_strndup (line + 1, close - line - 1));
          current = g_hash_table_lookup (sections, name);
          if (current == NULL)
            {
              current = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
              g_hash_table_insert (sections, g_steal_pointer (&name), current);
            }
          continue;
        }
      eq = strchr (line, '=');
      if (current == NULL || eq == NULL)
        continue;
      *eq = '\0';
      g_strstrip (line);
      g_strstrip (eq + 1);
      if (indented && parent != NULL)
        {
          g_hash_table_replace (current, g_strdup_printf ("%s.%s", parent, line), g_strdup (eq + 1));
          continue;
        }
      g_clear_pointer (&parent, g_free);
      if (eq[1] == '\0')
        parent = g_strdup (line);
      else
        g_hash_table_replace (current, g_strdup (line), g_strdup (eq + 1));
    }
  return sections;
}

/* A path from the environment (with ~ expanded, as the AWS tools do), or ~/.aws/@name. */
static char *
aws_file (const char *variable, const char *name)
{
  const char *given = g_getenv (variable);

  if (given != NULL && given[0] != '\0')
    {
      if (given[0] == '~' && (given[1] == '/' || given[1] == '\0'))
        return g_build_filename (g_get_home_dir (), given + 1, NULL);
      return g_strdup (given);
    }
  return g_build_filename (g_get_home_dir (), ".aws", name, NULL);
}

typedef struct {
  char *path;
  GHashTable *sections;   /* NULL: no such file */
} IniFile;

static gboolean
ini_load (IniFile *ini, const char *variable, const char *name, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autofree char *text = NULL;

  ini->path = aws_file (variable, name);
  if (!g_file_get_contents (ini->path, &text, NULL, &local_error))
    {
      if (g_error_matches (local_error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
        return TRUE;
      return g_set_error (error, SANDSTEP_AWS_CONFIG_ERROR, SANDSTEP_AWS_CONFIG_ERROR_BAD_VALUE,
                          "Cannot read the AWS file '%s' (%s): %s; fix it or point %s elsewhere", ini->path,
                          variable, local_error->message, variable), FALSE;
    }
  ini->sections = parse_ini (text);
  return TRUE;
}

static void
ini_clear (IniFile *ini)
{
  g_free (ini->path);
  g_clear_pointer (&ini->sections, g_hash_table_unref);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (IniFile, ini_clear)

static GHashTable *
ini_section (IniFile *ini, const char *name)
{
  return ini->sections != NULL ? g_hash_table_lookup (ini->sections, name) : NULL;
}

static const char *
section_get (GHashTable *section, const char *key)
{
  const char *value = section != NULL ? g_hash_table_lookup (section, key) : NULL;

  return value != NULL && value[0] != '\0' ? value : NULL;
}

static const char *
env_value (const char *name)
{
  const char *value = g_getenv (name);

  return value != NULL && value[0] != '\0' ? value : NULL;
}

void
sandstep_aws_config_free (SandstepAwsConfig *config)
{
  if (config == NULL)
    return;
  g_free (config->access_key_id);
  if (config->secret_access_key != NULL)
    memset (config->secret_access_key, 0, strlen (config->secret_access_key));
  g_free (config->secret_access_key);
  if (config->session_token != NULL)
    memset (config->session_token, 0, strlen (config->session_token));
  g_free (config->session_token);
  g_free (config->region);
  g_free (config->endpoint);
  g_free (config->credentials_from);
  g_free (config->endpoint_from);
  g_free (config);
}

/* Keys from one profile section; FALSE (no error) when it has none; an error when it has half. */
static gboolean
keys_from_section (SandstepAwsConfig *config, GHashTable *section, const char *from, gboolean *out_found,
                   GError **error)
{
  const char *id = section_get (section, "aws_access_key_id");
  const char *secret = section_get (section, "aws_secret_access_key");

  *out_found = FALSE;
  if (id == NULL && secret == NULL)
    return TRUE;
  if (id == NULL || secret == NULL)
    return g_set_error (error, SANDSTEP_AWS_CONFIG_ERROR, SANDSTEP_AWS_CONFIG_ERROR_NO_CREDENTIALS,
                        "%s has %s but not %s; give both", from,
                        id != NULL ? "aws_access_key_id" : "aws_secret_access_key",
                        id != NULL ? "aws_secret_access_key" : "aws_access_key_id"), FALSE;
  config->access_key_id = g_strdup (id);
  config->secret_access_key = g_strdup (secret);
  config->session_token = g_strdup (section_get (section, "aws_session_token"));
  config->credentials_from = g_strdup (from);
  *out_found = TRUE;
  return TRUE;
}

static gboolean
is_true (const char *value)
{
  return value != NULL && g_ascii_strcasecmp (value, "true") == 0;
}

SandstepAwsConfig *
sandstep_aws_config_load (GError **error)
{
  g_autoptr(SandstepAwsConfig) config = g_new0 (SandstepAwsConfig, 1);
  g_auto(IniFile) credentials = { 0 };
  g_auto(IniFile) settings = { 0 };
  const char *profile = env_value ("AWS_PROFILE");
  g_autofree char *config_section_name = NULL;
  GHashTable *profile_settings, *profile_credentials;
  const char *id = env_value ("AWS_ACCESS_KEY_ID");
  const char *secret = env_value ("AWS_SECRET_ACCESS_KEY");
  const char *style;
  gboolean found = FALSE;

  if (profile == NULL)
    profile = "default";
  if (!ini_load (&credentials, "AWS_SHARED_CREDENTIALS_FILE", "credentials", error) ||
      !ini_load (&settings, "AWS_CONFIG_FILE", "config", error))
    return NULL;
  /* The config file names profiles "[profile NAME]", except [default]. */
  config_section_name = strcmp (profile, "default") == 0 ? g_strdup ("default")
                                                          : g_strdup_printf ("profile %s", profile);
  profile_settings = ini_section (&settings, config_section_name);
  profile_credentials = ini_section (&credentials, profile);
  if (env_value ("AWS_PROFILE") != NULL && profile_settings == NULL && profile_credentials == NULL &&
      (id == NULL || secret == NULL))
    return g_set_error (error, SANDSTEP_AWS_CONFIG_ERROR, SANDSTEP_AWS_CONFIG_ERROR_NO_PROFILE,
                        "The AWS profile '%s' (AWS_PROFILE) is neither in '%s' nor in '%s'; add it, or set "
                        "AWS_PROFILE to one that exists", profile, credentials.path, settings.path), NULL;

  /* Endpoint. */
  if (!is_true (env_value ("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")))
    {
      const char *from[] = { "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL" };
      for (gsize i = 0; i < G_N_ELEMENTS (from) && config->endpoint == NULL; i++)
        if (env_value (from[i]) != NULL)
          {
            config->endpoint = g_strdup (env_value (from[i]));
            config->endpoint_from = g_strdup (from[i]);
          }
      if (config->endpoint == NULL && section_get (profile_settings, "endpoint_url") != NULL)
        {
          config->endpoint = g_strdup (section_get (profile_settings, "endpoint_url"));
          config->endpoint_from = g_strdup_printf ("endpoint_url of profile '%s' in '%s'", profile, settings.path);
        }
    }

  /* Region. */
  if (env_value ("AWS_REGION") != NULL)
    config->region = g_strdup (env_value ("AWS_REGION"));
  else if (env_value ("AWS_DEFAULT_REGION") != NULL)
    config->region = g_strdup (env_value ("AWS_DEFAULT_REGION"));
  else if (section_get (profile_settings, "region") != NULL)
    config->region = g_strdup (section_get (profile_settings, "region"));
  else
    config->region = g_strdup ("us-east-1");

  /* Addressing. */
  style = section_get (profile_settings, "s3.addressing_style");
  if (style == NULL || strcmp (style, "auto") == 0)
    config->addressing = SANDSTEP_S3_ADDRESSING_AUTO;
  else if (strcmp (style, "path") == 0)
    config->addressing = SANDSTEP_S3_ADDRESSING_PATH;
  else if (strcmp (style, "virtual") == 0)
    config->addressing = SANDSTEP_S3_ADDRESSING_VIRTUAL;
  else
    return g_set_error (error, SANDSTEP_AWS_CONFIG_ERROR, SANDSTEP_AWS_CONFIG_ERROR_BAD_VALUE,
                        "addressing_style '%s' of profile '%s' in '%s' is none of auto, path, virtual; fix it",
                        style, profile, settings.path), NULL;

  /* Credentials: the environment's pair, then the profile's. */
  if (id != NULL || secret != NULL)
    {
      if (id == NULL || secret == NULL)
        return g_set_error (error, SANDSTEP_AWS_CONFIG_ERROR, SANDSTEP_AWS_CONFIG_ERROR_NO_CREDENTIALS,
                            "%s is set but %s is not; set both, or neither to use a profile",
                            id != NULL ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
                            id != NULL ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID"), NULL;
      config->access_key_id = g_strdup (id);
      config->secret_access_key = g_strdup (secret);
      config->session_token = g_strdup (env_value ("AWS_SESSION_TOKEN"));
      config->credentials_from = g_strdup ("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
      return g_steal_pointer (&config);
    }
  {
    g_autofree char *from = g_strdup_printf ("profile '%s' in '%s'", profile, credentials.path);
    if (!keys_from_section (config, profile_credentials, from, &found, error))
      return NULL;
  }
  if (!found)
    {
      g_autofree char *from = g_strdup_printf ("profile '%s' in '%s'", profile, settings.path);
      if (!keys_from_section (config, profile_settings, from, &found, error))
        return NULL;
    }
  if (!found)
    return g_set_error (error, SANDSTEP_AWS_CONFIG_ERROR, SANDSTEP_AWS_CONFIG_ERROR_NO_CREDENTIALS,
                        "No AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give profile "
                        "'%s' aws_access_key_id and aws_secret_access_key in '%s' (AWS_PROFILE picks the "
                        "profile, AWS_SHARED_CREDENTIALS_FILE the file)", profile, credentials.path), NULL;
  return g_steal_pointer (&config);
}

static const char *
proxy_env (const char *upper)
{
  g_autofree char *lower = g_ascii_strdown (upper, -1);
  const char *value = env_value (upper);

  return value != NULL ? value : env_value (lower);
}

GProxyResolver *
sandstep_aws_proxy_resolver (void)
{
  g_autoptr(GPtrArray) ignore = g_ptr_array_new_with_free_func (g_free);
  const char *no_proxy = proxy_env ("NO_PROXY");
  const char *https_proxy = proxy_env ("HTTPS_PROXY");
  const char *http_proxy = proxy_env ("HTTP_PROXY");
  GProxyResolver *resolver;

  g_ptr_array_add (ignore, g_strdup ("localhost"));
  g_ptr_array_add (ignore, g_strdup ("127.0.0.0/8"));
  g_ptr_array_add (ignore, g_strdup ("::1"));
  if (no_proxy != NULL)
    {
      g_auto(GStrv) hosts = g_strsplit (no_proxy, ",", -1);
      for (guint i = 0; hosts[i] != NULL; i++)
        if (g_strstrip (hosts[i])[0] != '\0')
          g_ptr_array_add (ignore, g_strdup (hosts[i]));
    }
  g_ptr_array_add (ignore, NULL);
  resolver = g_simple_proxy_resolver_new (NULL, (char **) ignore->pdata);
  if (https_proxy != NULL)
    g_simple_proxy_resolver_set_uri_proxy (G_SIMPLE_PROXY_RESOLVER (resolver), "https", https_proxy);
  if (http_proxy != NULL)
    g_simple_proxy_resolver_set_uri_proxy (G_SIMPLE_PROXY_RESOLVER (resolver), "http", http_proxy);
  return resolver;
}
