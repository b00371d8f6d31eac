/* sandstep-sigv4.c: AWS Signature Version 4. */
#include "sandstep-sigv4.h"

#include <string.h>

#define SHA256_LEN 32

char *
sandstep_sigv4_uri_encode (const char *text, gboolean keep_slash)
{
  GString *out = g_string_sized_new (strlen (text) + 16);

  for (const guchar *p = (const guchar *) text; *p != '\0'; p++)
    {
      if (g_ascii_isalnum (*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' || (keep_slash && *p == '/'))
        g_string_append_c (out, *p);
      else
        g_string_append_printf (out, "%%%02X", *p);
    }
  return g_string_free (out, FALSE);
}

typedef struct {
  char *name;
  char *value;
} Pair;

static int
compare_pairs (gconstpointer a, gconstpointer b)
{
  const Pair *pa = a, *pb = b;
  int c = strcmp (pa->name, pb->name);

  return c != 0 ? c : strcmp (pa->value, pb->value);
}

char *
sandstep_sigv4_canonical_query (const char *const *pairs)
{
  g_autoptr(GArray) encoded = g_array_new (FALSE, FALSE, sizeof (Pair));
  GString *out = g_string_new (NULL);

  for (gsize i = 0; pairs != NULL && pairs[i] != NULL; i += 2)
    {
      Pair pair = { sandstep_sigv4_uri_encode (pairs[i], FALSE),
                    sandstep_sigv4_uri_encode (pairs[i + 1] != NULL ? pairs[i + 1] : "", FALSE) };
      g_array_append_val (encoded, pair);
    }
  /* Sorted by the encoded names, as the signature's canonical form says. */
  g_array_sort (encoded, compare_pairs);
  for (guint i = 0; i < encoded->len; i++)
    {
      Pair *pair = &g_array_index (encoded, Pair, i);
      g_string_append_printf (out, "%s%s=%s", i > 0 ? "&" : "", pair->name, pair->value);
      g_free (pair->name);
      g_free (pair->value);
    }
  return g_string_free (out, FALSE);
}

char *
sandstep_sigv4_amz_date (GDateTime *when)
{
  g_autoptr(GDateTime) utc = g_date_time_to_utc (when);

  return g_date_time_format (utc, "%Y%m%dT%H%M%SZ");
}

char *
sandstep_sigv4_sha256_hex (const void *data, gsize len)
{
  return g_compute_checksum_for_data (G_CHECKSUM_SHA256, data, len);
}

static void
hmac (const guint8 *key, gsize key_len, const char *data, guint8 out[SHA256_LEN])
{
  g_autoptr(GHmac) h = g_hmac_new (G_CHECKSUM_SHA256, key, key_len);
  gsize len = SHA256_LEN;

  g_hmac_update (h, (const guchar *) data, strlen (data));
  g_hmac_get_digest (h, out, &len);
}

/* kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), service), "aws4_request") */
static void
signing_key (const SandstepSigV4Key *key, const char *date, guint8 out[SHA256_LEN])
{
  g_autofree char *secret = g_strconcat ("AWS4", key->secret_access_key, NULL);
  guint8 k[SHA256_LEN];

  hmac ((const guint8 *) secret, strlen (secret), date, k);
  hmac (k, sizeof k, key->region, k);
  hmac (k, sizeof k, key->service, k);
  hmac (k, sizeof k, "aws4_request", out);
  /* The secret is not left in freed memory. */
  memset (secret, 0, strlen (secret));
  memset (k, 0, sizeof k);
}

static char *
hex (const guint8 *bytes, gsize len)
{
  GString *out = g_string_sized_new (len * 2);

  for (gsize i = 0; i < len; i++)
    g_string_append_printf (out, "%02x", bytes[i]);
  return g_string_free (out, FALSE);
}

char *
sandstep_sigv4_signing_key_hex (const SandstepSigV4Key *key, const char *date)
{
  guint8 k[SHA256_LEN];
  char *out;

  signing_key (key, date, k);
  out = hex (k, sizeof k);
  memset (k, 0, sizeof k);
  return out;
}

typedef struct {
  char *name;    /* lower case */
  char *value;   /* trimmed, inner runs of spaces made one */
} Header;

static int
compare_headers (gconstpointer a, gconstpointer b)
{
  return strcmp (((const Header *) a)->name, ((const Header *) b)->name);
}

static char *
trim_value (const char *value)
{
  g_autofree char *stripped = g_strstrip (g_strdup (value));
  GString *out = g_string_new (NULL);

  for (const char *p = stripped; *p != '\0'; p++)
    if (*p != ' ' || (out->len > 0 && out->str[out->len - 1] != ' '))
      g_string_append_c (out, *p);
  return g_string_free (out, FALSE);
}

char *
sandstep_sigv4_authorization (const SandstepSigV4Key *key, const char *amz_date, const char *method,
                              const char *encoded_path, const char *canonical_query, const char *const *headers,
                              const char *payload_hash, char **out_canonical_request, char **out_string_to_sign)
{
  g_autoptr(GArray) sorted = g_array_new (FALSE, FALSE, sizeof (Header));
  g_autoptr(GString) canonical = g_string_new (NULL);
  g_autoptr(GString) signed_names = g_string_new (NULL);
  g_autofree char *date = g_strndup (amz_date, 8);
  g_autofree char *scope = NULL;
  g_autofree char *request_hash = NULL;
  g_autofree char *string_to_sign = NULL;
  g_autofree char *signature = NULL;
  guint8 k[SHA256_LEN], sig[SHA256_LEN];

  g_return_val_if_fail (key != NULL && amz_date != NULL && strlen (amz_date) == 16, NULL);

  for (gsize i = 0; headers != NULL && headers[i] != NULL; i += 2)
    {
      Header h = { g_ascii_strdown (headers[i], -1), trim_value (headers[i + 1] != NULL ? headers[i + 1] : "") };
      g_array_append_val (sorted, h);
    }
  g_array_sort (sorted, compare_headers);

  g_string_append_printf (canonical, "%s\n%s\n%s\n", method, encoded_path[0] != '\0' ? encoded_path : "/",
                          canonical_query != NULL ? canonical_query : "");
  for (guint i = 0; i < sorted->len; i++)
    {
      Header *h = &g_array_index (sorted, Header, i);
      g_string_append_printf (canonical, "%s:%s\n", h->name, h->value);
      g_string_append_printf (signed_names, "%s%s", i > 0 ? ";" : "", h->name);
    }
  g_string_append_printf (canonical, "\n%s\n%s", signed_names->str, payload_hash);

  scope = g_strdup_printf ("%s/%s/%s/aws4_request", date, key->region, key->service);
  request_hash = sandstep_sigv4_sha256_hex (canonical->str, canonical->len);
  string_to_sign = g_strdup_printf ("AWS4-HMAC-SHA256\n%s\n%s\n%s", amz_date, scope, request_hash);

  signing_key (key, date, k);
  hmac (k, sizeof k, string_to_sign, sig);
  memset (k, 0, sizeof k);
  signature = hex (sig, sizeof sig);

  for (guint i = 0; i < sorted->len; i++)
    {
      g_free (g_array_index (sorted, Header, i).name);
      g_free (g_array_index (sorted, Header, i).value);
    }
  if (out_canonical_request != NULL)
    *out_canonical_request = g_strdup (canonical->str);
  if (out_string_to_sign != NULL)
    *out_string_to_sign = g_strdup (string_to_sign);
  return g_strdup_printf ("AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s", key->access_key_id,
                          scope, signed_names->str, signature);
}
