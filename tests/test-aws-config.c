/* test-aws-config.c: where the S3 client finds endpoint, region and credentials.
 *
 * Each case sets the environment and writes the two AWS files in a
 * temporary home, then checks what sandstep_aws_config_load() took, and
 * that a refusal names where a value came from but never the value.
 */
#include <glib/gstdio.h>
#include <string.h>

#include "sandstep-aws-config.h"

static const char *const aws_variables[] = {
  "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION",
  "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
  "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
};

typedef struct {
  char *dir;
  char *credentials;
  char *config;
} Home;

static void
home_setup (Home *h, gconstpointer data)
{
  g_autoptr(GError) error = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS (aws_variables); i++)
    g_unsetenv (aws_variables[i]);
  h->dir = g_dir_make_tmp ("sandstep-aws-XXXXXX", &error);
  g_assert_no_error (error);
  h->credentials = g_build_filename (h->dir, "credentials", NULL);
  h->config = g_build_filename (h->dir, "config", NULL);
  g_setenv ("AWS_SHARED_CREDENTIALS_FILE", h->credentials, TRUE);
  g_setenv ("AWS_CONFIG_FILE", h->config, TRUE);
}

static void
home_teardown (Home *h, gconstpointer data)
{
  g_unlink (h->credentials);
  g_unlink (h->config);
  g_rmdir (h->dir);
  g_free (h->dir);
  g_free (h->credentials);
  g_free (h->config);
}

static void
write_file (const char *path, const char *text)
{
  g_autoptr(GError) error = NULL;

  g_file_set_contents (path, text, -1, &error);
  g_assert_no_error (error);
}

static void
test_environment_first (Home *h, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SandstepAwsConfig) c = NULL;

  g_test_summary ("the environment's key pair wins over any profile; AWS_ENDPOINT_URL_S3 over AWS_ENDPOINT_URL; "
                  "AWS_REGION over AWS_DEFAULT_REGION over the profile's region");
  write_file (h->credentials, "[default]\naws_access_key_id = AKIAFILE\naws_secret_access_key = file-secret\n");
  write_file (h->config, "[default]\nregion = eu-north-1\nendpoint_url = http://127.0.0.1:1\n");
  g_setenv ("AWS_ACCESS_KEY_ID", "AKIAENV", TRUE);
  g_setenv ("AWS_SECRET_ACCESS_KEY", "env-secret", TRUE);
  g_setenv ("AWS_SESSION_TOKEN", "env-token", TRUE);
  g_setenv ("AWS_ENDPOINT_URL", "http://127.0.0.1:2", TRUE);
  g_setenv ("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:3", TRUE);
  g_setenv ("AWS_DEFAULT_REGION", "eu-west-1", TRUE);
  c = sandstep_aws_config_load (&error);
  g_assert_no_error (error);
  g_assert_cmpstr (c->access_key_id, ==, "AKIAENV");
  g_assert_cmpstr (c->secret_access_key, ==, "env-secret");
  g_assert_cmpstr (c->session_token, ==, "env-token");
  g_assert_cmpstr (c->endpoint, ==, "http://127.0.0.1:3");
  g_assert_cmpstr (c->endpoint_from, ==, "AWS_ENDPOINT_URL_S3");
  g_assert_cmpstr (c->region, ==, "eu-west-1");
  g_clear_pointer (&c, sandstep_aws_config_free);

  g_unsetenv ("AWS_ENDPOINT_URL_S3");
  g_setenv ("AWS_REGION", "ap-south-1", TRUE);
  c = sandstep_aws_config_load (&error);
  g_assert_no_error (error);
  g_assert_cmpstr (c->endpoint, ==, "http://127.0.0.1:2");
  g_assert_cmpstr (c->region, ==, "ap-south-1");
  g_clear_pointer (&c, sandstep_aws_config_free);

  g_setenv ("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true", TRUE);
  c = sandstep_aws_config_load (&error);
  g_assert_no_error (error);
  g_assert_null (c->endpoint);
}

static void
test_profiles (Home *h, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SandstepAwsConfig) c = NULL;

  g_test_summary ("AWS_PROFILE picks a section of the credentials file ([NAME]) and of the config file "
                  "([profile NAME]); comments, spacing and a nested s3 block are read as the AWS CLI reads them; "
                  "a backslash in a secret is kept");
  write_file (h->credentials, "# comment\n; another\n[default]\naws_access_key_id=AKIADEFAULT\n"
                              "aws_secret_access_key=default-secret\n\n[build]\n  aws_access_key_id  =  AKIABUILD  \n"
                              "aws_secret_access_key = back\\slash/secret+=\naws_session_token = tok\n");
  write_file (h->config, "[default]\nregion = us-west-2\n[profile build]\nregion = eu-central-1\n"
                         "endpoint_url = https://minio.example:9000\ns3 =\n  addressing_style = virtual\n"
                         "  signature_version = s3v4\n");
  c = sandstep_aws_config_load (&error);
  g_assert_no_error (error);
  g_assert_cmpstr (c->access_key_id, ==, "AKIADEFAULT");
  g_assert_cmpstr (c->region, ==, "us-west-2");
  g_assert_cmpint (c->addressing, ==, SANDSTEP_S3_ADDRESSING_AUTO);
  g_assert_null (c->endpoint);
  g_clear_pointer (&c, sandstep_aws_config_free);

  g_setenv ("AWS_PROFILE", "build", TRUE);
  c = sandstep_aws_config_load (&error);
  g_assert_no_error (error);
  g_assert_cmpstr (c->access_key_id, ==, "AKIABUILD");
  g_assert_cmpstr (c->secret_access_key, ==, "back\\slash/secret+=");
  g_assert_cmpstr (c->session_token, ==, "tok");
  g_assert_cmpstr (c->region, ==, "eu-central-1");
  g_assert_cmpstr (c->endpoint, ==, "https://minio.example:9000");
  g_assert_cmpint (c->addressing, ==, SANDSTEP_S3_ADDRESSING_VIRTUAL);
  g_assert_nonnull (strstr (c->credentials_from, "profile 'build'"));
}

static void
test_refusals (Home *h, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  SandstepAwsConfig *c;

  g_test_summary ("half a key pair, an unknown profile, no credentials at all and a bad addressing_style are "
                  "refused, naming the variable or file and never a secret");
  g_setenv ("AWS_SECRET_ACCESS_KEY", "lonely-secret", TRUE);
  c = sandstep_aws_config_load (&error);
  g_assert_null (c);
  g_assert_error (error, SANDSTEP_AWS_CONFIG_ERROR, SANDSTEP_AWS_CONFIG_ERROR_NO_CREDENTIALS);
  g_assert_nonnull (strstr (error->message, "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not"));
  g_assert_null (strstr (error->message, "lonely-secret"));
  g_clear_error (&error);
  g_unsetenv ("AWS_SECRET_ACCESS_KEY");

  c = sandstep_aws_config_load (&error);
  g_assert_null (c);
  g_assert_error (error, SANDSTEP_AWS_CONFIG_ERROR, SANDSTEP_AWS_CONFIG_ERROR_NO_CREDENTIALS);
  g_assert_nonnull (strstr (error->message, h->credentials));
  g_clear_error (&error);

  g_setenv ("AWS_PROFILE", "nowhere", TRUE);
  c = sandstep_aws_config_load (&error);
  g_assert_null (c);
  g_assert_error (error, SANDSTEP_AWS_CONFIG_ERROR, SANDSTEP_AWS_CONFIG_ERROR_NO_PROFILE);
  g_assert_nonnull (strstr (error->message, "'nowhere' (AWS_PROFILE)"));
  g_clear_error (&error);
  g_unsetenv ("AWS_PROFILE");

  write_file (h->credentials, "[default]\naws_access_key_id = AKIAHALF\n");
  c = sandstep_aws_config_load (&error);
  g_assert_null (c);
  g_assert_error (error, SANDSTEP_AWS_CONFIG_ERROR, SANDSTEP_AWS_CONFIG_ERROR_NO_CREDENTIALS);
  g_assert_nonnull (strstr (error->message, "not aws_secret_access_key"));
  g_clear_error (&error);

  write_file (h->credentials, "[default]\naws_access_key_id = AKIAOK\naws_secret_access_key = ok-secret\n");
  write_file (h->config, "[default]\ns3 =\n  addressing_style = sideways\n");
  c = sandstep_aws_config_load (&error);
  g_assert_null (c);
  g_assert_error (error, SANDSTEP_AWS_CONFIG_ERROR, SANDSTEP_AWS_CONFIG_ERROR_BAD_VALUE);
  g_assert_nonnull (strstr (error->message, "'sideways'"));
  g_assert_null (strstr (error->message, "ok-secret"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add ("/aws-config/environment-first", Home, NULL, home_setup, test_environment_first, home_teardown);
  g_test_add ("/aws-config/profiles", Home, NULL, home_setup, test_profiles, home_teardown);
  g_test_add ("/aws-config/refusals", Home, NULL, home_setup, test_refusals, home_teardown);
  return g_test_run ();
}
