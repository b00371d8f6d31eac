/* sandstep-sigv4.h: AWS Signature Version 4, on GLib's GHmac and GChecksum.
 *
 * The request is signed as sent: the caller builds the path with
 * sandstep_sigv4_uri_encode() (S3 keys are encoded once, '/' kept, and never
 * normalised) and the query with sandstep_sigv4_canonical_query(), and puts
 * both on the wire exactly so.  Headers are signed by name, lower-cased,
 * values trimmed; the payload is its SHA-256 in hex, or UNSIGNED-PAYLOAD.
 * Nothing here knows HTTP, and nothing here logs: the secret stays in the key.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define SANDSTEP_SIGV4_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define SANDSTEP_SIGV4_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"

typedef struct {
  const char *access_key_id;
  const char *secret_access_key;
  const char *region;            /* "us-east-1" */
  const char *service;           /* "s3" */
} SandstepSigV4Key;

/* RFC 3986 unreserved characters stay, every other byte becomes %XX
 * (upper-case hex); '/' stays too when @keep_slash. */
char *sandstep_sigv4_uri_encode (const char *text, gboolean keep_slash);

/* "a=1&b=" from the NULL-terminated name, value, name, value... list
 * (a NULL value is an empty one), encoded and sorted as SigV4 wants;
 * "" for none. */
char *sandstep_sigv4_canonical_query (const char *const *pairs);

/* "20130524T000000Z" for @when (UTC). */
char *sandstep_sigv4_amz_date (GDateTime *when);

/* The hex SHA-256 of @data. */
char *sandstep_sigv4_sha256_hex (const void *data, gsize len);

/* The derived signing key, in hex (for tests against AWS's examples). */
char *sandstep_sigv4_signing_key_hex (const SandstepSigV4Key *key, const char *date);

/* The Authorization header's value for a request whose headers are the
 * NULL-terminated name, value, ... list @headers (every one is signed; it
 * must hold host and x-amz-date as sent).  @amz_date is x-amz-date's value.
 * @out_canonical_request and @out_string_to_sign may be NULL. */
char *sandstep_sigv4_authorization (const SandstepSigV4Key *key, const char *amz_date, const char *method,
                                    const char *encoded_path, const char *canonical_query,
                                    const char *const *headers, const char *payload_hash,
                                    char **out_canonical_request, char **out_string_to_sign);

G_END_DECLS
