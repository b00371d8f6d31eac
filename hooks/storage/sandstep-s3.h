/* sandstep-s3.h: a small S3 client on libsoup, signed with SigV4 (sandstep-sigv4.h).
 *
 * The requests an export makes (PutObject, HeadObject, the four multipart
 * calls) and a few a test or a tool needs (buckets, listings, GetObject,
 * DeleteObject).  Every payload is signed with its SHA-256; nothing is sent
 * aws-chunked and no x-amz-checksum-* header is sent, which S3-compatible
 * servers reject.  Synchronous; the calls may be made from several threads
 * at once (libsoup 3.2 sends from any thread), on up to SANDSTEP_S3_MAX_CONNS
 * connections.  No retries: an export that fails changed nothing and may
 * simply run again.  Errors quote the server's code
 * and message, never a credential.
 */
#pragma once

#include <glib.h>

#include "sandstep-aws-config.h"

G_BEGIN_DECLS

#define SANDSTEP_S3_ERROR (sandstep_s3_error_quark ())
typedef enum {
  SANDSTEP_S3_ERROR_FAILED,
  SANDSTEP_S3_ERROR_BAD_NAME,       /* a bucket or key S3 cannot take */
  SANDSTEP_S3_ERROR_UNREACHABLE,    /* no connection, or no answer within the read timeout */
  SANDSTEP_S3_ERROR_REFUSED,        /* the server answered with an error */
  SANDSTEP_S3_ERROR_PRECONDITION,   /* 412: If-None-Match: * met an object */
  SANDSTEP_S3_ERROR_PROTOCOL,       /* an answer this client cannot read */
} SandstepS3Error;
GQuark sandstep_s3_error_quark (void);

typedef struct _SandstepS3Client SandstepS3Client;

/* Connections to the endpoint at most, so as many requests at once. */
#define SANDSTEP_S3_MAX_CONNS 8

/* Takes @config.  @read_timeout_s: how long a request may go unanswered. */
SandstepS3Client *sandstep_s3_client_new (SandstepAwsConfig *config, double read_timeout_s, GError **error);
void sandstep_s3_client_free (SandstepS3Client *client);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepS3Client, sandstep_s3_client_free)

/* The endpoint, for messages: "http://127.0.0.1:9000" or "https://s3.eu-west-3.amazonaws.com". */
const char *sandstep_s3_client_endpoint (SandstepS3Client *client);

/* Checks a bucket name and a key before anything is sent. */
gboolean sandstep_s3_check_names (const char *bucket, const char *key, GError **error);

/* PutObject of @body (its SHA-256 in @sha256_hex, or NULL to compute it). */
gboolean sandstep_s3_put_object (SandstepS3Client *client, const char *bucket, const char *key, GBytes *body,
                                 const char *sha256_hex, gboolean if_none_match, GError **error);
/* The same, its body the first @len bytes of @fd (read with pread()). */
gboolean sandstep_s3_put_object_from_fd (SandstepS3Client *client, const char *bucket, const char *key, int fd,
                                         goffset len, const char *sha256_hex, gboolean if_none_match,
                                         GError **error);
/* HeadObject: *@out_exists tells whether the key exists. */
gboolean sandstep_s3_head_object (SandstepS3Client *client, const char *bucket, const char *key,
                                  gboolean *out_exists, GError **error);

/* The upload id. */
char *sandstep_s3_create_multipart_upload (SandstepS3Client *client, const char *bucket, const char *key,
                                           GError **error);
/* The part's ETag, as the server quoted it; its body the first @len bytes of @fd (read with pread(),
 * so the fd's offset does not move; several threads may send parts of one). */
char *sandstep_s3_upload_part_from_fd (SandstepS3Client *client, const char *bucket, const char *key,
                                       const char *upload_id, guint part_number, int fd, goffset len,
                                       const char *sha256_hex, GError **error);
/* @etags: the parts' ETags, part 1 first. */
gboolean sandstep_s3_complete_multipart_upload (SandstepS3Client *client, const char *bucket, const char *key,
                                                const char *upload_id, GPtrArray *etags, gboolean if_none_match,
                                                GError **error);
gboolean sandstep_s3_abort_multipart_upload (SandstepS3Client *client, const char *bucket, const char *key,
                                             const char *upload_id, GError **error);

/* For tests and tools. */
gboolean sandstep_s3_create_bucket (SandstepS3Client *client, const char *bucket, GError **error);
GBytes *sandstep_s3_get_object (SandstepS3Client *client, const char *bucket, const char *key, char **out_etag,
                                GError **error);
gboolean sandstep_s3_delete_object (SandstepS3Client *client, const char *bucket, const char *key, GError **error);
/* Keys of the bucket (first 1000), sorted as S3 lists them. */
GPtrArray *sandstep_s3_list_objects (SandstepS3Client *client, const char *bucket, GError **error);
/* "KEY UPLOAD-ID" of each multipart upload in progress (first 1000). */
GPtrArray *sandstep_s3_list_multipart_uploads (SandstepS3Client *client, const char *bucket, GError **error);

G_END_DECLS
