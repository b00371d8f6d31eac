/* sandstep-aws-config.h: where an S3 client finds its endpoint, region and credentials.
 *
 * As the AWS CLI and SDKs read them, first found wins:
 * - endpoint: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's
 *   endpoint_url in the config file (all ignored when
 *   AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true); else AWS itself.
 * - region: AWS_REGION, AWS_DEFAULT_REGION, the profile's region; else us-east-1.
 * - credentials: AWS_ACCESS_KEY_ID with AWS_SECRET_ACCESS_KEY (and
 *   AWS_SESSION_TOKEN); else the profile in AWS_SHARED_CREDENTIALS_FILE
 *   (~/.aws/credentials), else in AWS_CONFIG_FILE (~/.aws/config).
 * - profile: AWS_PROFILE, else "default".
 * - addressing: the profile's "s3 =" block, addressing_style = auto|path|virtual.
 * Never from a command line.  The secret and the token never reach a
 * message: errors name where a value came from, not the value.
 */
#pragma once

#include <gio/gio.h>
#include <glib.h>

G_BEGIN_DECLS

#define SANDSTEP_AWS_CONFIG_ERROR (sandstep_aws_config_error_quark ())
typedef enum {
  SANDSTEP_AWS_CONFIG_ERROR_FAILED,
  SANDSTEP_AWS_CONFIG_ERROR_NO_CREDENTIALS,
  SANDSTEP_AWS_CONFIG_ERROR_NO_PROFILE,
  SANDSTEP_AWS_CONFIG_ERROR_BAD_VALUE,
} SandstepAwsConfigError;
GQuark sandstep_aws_config_error_quark (void);

typedef enum {
  SANDSTEP_S3_ADDRESSING_AUTO,      /* virtual-hosted on AWS for DNS-safe names, else path-style */
  SANDSTEP_S3_ADDRESSING_PATH,      /* https://endpoint/BUCKET/KEY */
  SANDSTEP_S3_ADDRESSING_VIRTUAL,   /* https://BUCKET.endpoint/KEY */
} SandstepS3Addressing;

typedef struct {
  char *access_key_id;
  char *secret_access_key;
  char *session_token;        /* NULL: none */
  char *region;
  char *endpoint;             /* NULL: AWS's (https://s3.REGION.amazonaws.com) */
  SandstepS3Addressing addressing;
  char *credentials_from;     /* for messages: "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", "profile 'x' in '...'" */
  char *endpoint_from;        /* for messages: "AWS_ENDPOINT_URL_S3", ...; NULL for AWS's */
} SandstepAwsConfig;

/* The proxies the AWS tools use: HTTPS_PROXY for https://, HTTP_PROXY for
 * http:// (either case), NO_PROXY's hosts and this machine's loopback
 * direct.  Never the desktop's proxy settings (GSettings). */
GProxyResolver *sandstep_aws_proxy_resolver (void);

/* Reads the environment and the files.  The file paths are the
 * environment's or the defaults under the home directory. */
SandstepAwsConfig *sandstep_aws_config_load (GError **error);
void sandstep_aws_config_free (SandstepAwsConfig *config);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepAwsConfig, sandstep_aws_config_free)

G_END_DECLS
