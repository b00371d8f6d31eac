/* sandstep-egress.c: the egress allowlist policy. */
#include "sandstep-egress.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <string.h>

#include "sandstep-error.h"

typedef struct {
  GInetAddressMask *mask;
  char *text;
} AllowedRange;

struct _SandstepEgress {
  GPtrArray *hosts;        /* lowercase names; "*.x" suffix patterns */
  GPtrArray *ranges;       /* AllowedRange */
};

static void
allowed_range_free (AllowedRange *range)
{
  g_object_unref (range->mask);
  g_free (range->text);
  g_free (range);
}

void
sandstep_egress_free (SandstepEgress *egress)
{
  if (egress == NULL)
    return;
  g_ptr_array_unref (egress->hosts);
  g_ptr_array_unref (egress->ranges);
  g_free (egress);
}

GInetAddress *
sandstep_egress_parse_literal (const char *text)
{
  g_autofree char *bare = NULL;
  struct in_addr v4;
  struct in6_addr v6;
  gsize len = strlen (text);

  if (len >= 2 && text[0] == '[' && text[len - 1] == ']')
    bare = g_strndup (text + 1, len - 2);
  else
    bare = g_strdup (text);

  if (inet_pton (AF_INET6, bare, &v6) == 1)
    {
      if (IN6_IS_ADDR_V4MAPPED (&v6))
        return g_inet_address_new_from_bytes (v6.s6_addr + 12, G_SOCKET_FAMILY_IPV4);
      return g_inet_address_new_from_bytes (v6.s6_addr, G_SOCKET_FAMILY_IPV6);
    }
  /* inet_aton takes every historic IPv4 spelling: 127.1, 0x7f.1, 017700000001, 2130706433. */
  if (bare[0] != '\0' && strspn (bare, "0123456789abcdefABCDEFxX.") == strlen (bare) && inet_aton (bare, &v4) == 1)
    return g_inet_address_new_from_bytes ((const guint8 *) &v4.s_addr, G_SOCKET_FAMILY_IPV4);
  return NULL;
}

gboolean
sandstep_egress_check_host_entry (const char *host, GError **error)
{
  const char *name = g_str_has_prefix (host, "*.") ? host + 2 : host;
  g_autoptr(GInetAddress) literal = sandstep_egress_parse_literal (host);

  if (literal != NULL)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "allow '%s' is an address, not a host name; allow addresses with allow-cidr=%s/%d", host,
                           host, g_inet_address_get_family (literal) == G_SOCKET_FAMILY_IPV4 ? 32 : 128);
  if (name[0] == '\0' || strlen (name) > 253 || name[0] == '.' || name[0] == '-' || strstr (name, "..") != NULL)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                           "allow '%s' is not a host name; write for example --allow=pypi.org or --allow='*.github.com'",
                           host);
  for (const char *p = name; *p; p++)
    if (!g_ascii_isalnum (*p) && *p != '-' && *p != '.')
      return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                             "allow '%s' is not a host name (letters, digits, '-' and '.'; '*.' only in front)", host);
  return TRUE;
}

static GInetAddressMask *
parse_cidr (const char *cidr, GError **error)
{
  const char *slash = strchr (cidr, '/');
  g_autofree char *address_text = slash != NULL ? g_strndup (cidr, slash - cidr) : NULL;
  g_autoptr(GInetAddress) address = NULL;
  g_autoptr(GInetAddressMask) mask = NULL;
  char *end = NULL;
  guint64 length;
  guint bits;

  if (slash == NULL || !g_ascii_isdigit (slash[1]))
    goto bad;
  length = g_ascii_strtoull (slash + 1, &end, 10);
  address = g_inet_address_new_from_string (address_text);
  if (*end != '\0' || address == NULL)
    goto bad;
  bits = g_inet_address_get_native_size (address) * 8;
  if (length > bits)
    goto bad;
  mask = g_inet_address_mask_new (address, (guint) length, NULL);
  if (mask == NULL)
    {
      /* GIO refuses host bits set below the prefix: so do we, loudly. */
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                      "allow-cidr '%s' has host bits set; write the network address of the range", cidr);
      return NULL;
    }
  if (length == 0)
    {
      sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                      "allow-cidr '%s' allows every address; use --network=open if that is what you mean", cidr);
      return NULL;
    }
  return g_steal_pointer (&mask);

bad:
  sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_BAD_VALUE,
                  "allow-cidr '%s' is not an address range; write for example 10.1.2.0/24 or 2001:db8::/32", cidr);
  return NULL;
}

gboolean
sandstep_egress_check_cidr_entry (const char *cidr, GError **error)
{
  g_autoptr(GInetAddressMask) mask = parse_cidr (cidr, error);

  return mask != NULL;
}

SandstepEgress *
sandstep_egress_new (GPtrArray *hosts, GPtrArray *cidrs, GError **error)
{
  g_autoptr(SandstepEgress) egress = g_new0 (SandstepEgress, 1);

  egress->hosts = g_ptr_array_new_with_free_func (g_free);
  egress->ranges = g_ptr_array_new_with_free_func ((GDestroyNotify) allowed_range_free);
  for (guint i = 0; hosts != NULL && i < hosts->len; i++)
    {
      if (!sandstep_egress_check_host_entry (hosts->pdata[i], error))
        return NULL;
      g_ptr_array_add (egress->hosts, g_ascii_strdown (hosts->pdata[i], -1));
    }
  for (guint i = 0; cidrs != NULL && i < cidrs->len; i++)
    {
      GInetAddressMask *mask = parse_cidr (cidrs->pdata[i], error);
      AllowedRange *range;
      if (mask == NULL)
        return NULL;
      range = g_new0 (AllowedRange, 1);
      range->mask = mask;
      range->text = g_strdup (cidrs->pdata[i]);
      g_ptr_array_add (egress->ranges, range);
    }
  return g_steal_pointer (&egress);
}

static gboolean
host_is_allowed (SandstepEgress *egress, const char *name)
{
  for (guint i = 0; i < egress->hosts->len; i++)
    {
      const char *entry = egress->hosts->pdata[i];
      if (g_str_has_prefix (entry, "*."))
        {
          if (g_str_has_suffix (name, entry + 1) && strlen (name) > strlen (entry + 1))
            return TRUE;
        }
      else if (strcmp (entry, name) == 0)
        return TRUE;
    }
  return FALSE;
}

guint
sandstep_egress_embedded_ipv4 (GInetAddress *address, GInetAddress *out[2])
{
  const guint8 *b;
  guint8 v4[4];
  guint n = 0;
  static const guint8 zero[12] = { 0 };

  if (g_inet_address_get_family (address) != G_SOCKET_FAMILY_IPV6)
    return 0;
  b = g_inet_address_to_bytes (address);
#define ADD_V4(a, b_, c, d)                                                           \
  G_STMT_START                                                                        \
  {                                                                                   \
    v4[0] = (a), v4[1] = (b_), v4[2] = (c), v4[3] = (d);                              \
    out[n++] = g_inet_address_new_from_bytes (v4, G_SOCKET_FAMILY_IPV4);             \
  }                                                                                   \
  G_STMT_END
  if (memcmp (b, zero, 12) == 0)
    {
      /* ::a.b.c.d, but not :: and ::1, which are IPv6's own. */
      if (b[12] != 0 || b[13] != 0 || b[14] != 0 || b[15] > 1)
        ADD_V4 (b[12], b[13], b[14], b[15]);
    }
  else if (memcmp (b, zero, 10) == 0 && b[10] == 0xff && b[11] == 0xff)
    ADD_V4 (b[12], b[13], b[14], b[15]);
  else if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && memcmp (b + 4, zero, 8) == 0)
    ADD_V4 (b[12], b[13], b[14], b[15]);
  else if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4] == 0x00 && b[5] == 0x01)
    {
      /* The operator picks the prefix length inside the /48: judge both places. */
      ADD_V4 (b[12], b[13], b[14], b[15]);
      ADD_V4 (b[6], b[7], b[9], b[10]);
    }
  else if (b[0] == 0x20 && b[1] == 0x02)
    ADD_V4 (b[2], b[3], b[4], b[5]);
  else if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x00 && b[3] == 0x00)
    {
      ADD_V4 (b[4], b[5], b[6], b[7]);
      ADD_V4 (b[12] ^ 0xff, b[13] ^ 0xff, b[14] ^ 0xff, b[15] ^ 0xff);
    }
#undef ADD_V4
  return n;
}

static const char *
range_covering_one (SandstepEgress *egress, GInetAddress *address)
{
  for (guint i = 0; i < egress->ranges->len; i++)
    {
      AllowedRange *range = egress->ranges->pdata[i];
      if (g_inet_address_get_family (address) == g_inet_address_mask_get_family (range->mask) &&
          g_inet_address_mask_matches (range->mask, address))
        return range->text;
    }
  return NULL;
}

/* The range that allows @address: one covering it, or, for an address that
 * carries IPv4 ones, ranges covering every one of those. */
static const char *
range_covering (SandstepEgress *egress, GInetAddress *address)
{
  GInetAddress *carried[2] = { NULL, NULL };
  guint n = sandstep_egress_embedded_ipv4 (address, carried);
  const char *found = range_covering_one (egress, address);

  if (found == NULL && n > 0)
    {
      found = range_covering_one (egress, carried[0]);
      for (guint i = 1; i < n && found != NULL; i++)
        if (range_covering_one (egress, carried[i]) == NULL)
          found = NULL;
    }
  for (guint i = 0; i < n; i++)
    g_object_unref (carried[i]);
  return found;
}

gboolean
sandstep_egress_address_is_own (GInetAddress *address)
{
  struct ifaddrs *list = NULL;
  gboolean own = FALSE;

  if (getifaddrs (&list) < 0)
    return FALSE;
  for (struct ifaddrs *i = list; i != NULL && !own; i = i->ifa_next)
    {
      g_autoptr(GSocketAddress) sa = NULL;
      if (i->ifa_addr == NULL || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
        continue;
      sa = g_socket_address_new_from_native (i->ifa_addr, i->ifa_addr->sa_family == AF_INET
                                                              ? sizeof (struct sockaddr_in)
                                                              : sizeof (struct sockaddr_in6));
      own = sa != NULL && g_inet_address_equal (g_inet_socket_address_get_address (G_INET_SOCKET_ADDRESS (sa)), address);
    }
  freeifaddrs (list);
  return own;
}

/* One rule: only a globally reachable address is not internal.  IPv4: all
 * but the special-purpose ranges that are not global (RFC 6890 and its
 * updates, documentation nets included).  IPv6: only global unicast,
 * 2000::/3, is; outside it nothing is (fec0::/10 site-local, 100::/64
 * discard, ::ffff:0:0/96 translated, fc00::/7, fe80::/10, ff00::/8, ...),
 * and inside it the protocol and documentation ranges are not. */
static gboolean
in_any (GInetAddress *address, const char *const *ranges, gsize n)
{
  for (gsize i = 0; i < n; i++)
    {
      g_autoptr(GInetAddressMask) mask = g_inet_address_mask_new_from_string (ranges[i], NULL);

      /* A constant of this file: one that does not parse is a bug every test of this rule catches. */
      g_assert (mask != NULL);
      if (g_inet_address_get_family (address) == g_inet_address_mask_get_family (mask) &&
          g_inet_address_mask_matches (mask, address))
        return TRUE;
    }
  return FALSE;
}

gboolean
sandstep_egress_address_is_internal (GInetAddress *address)
{
  static const char *const not_global_v4[] = {
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
    "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
  };
  static const char *const global_v6[] = { "2000::/3" };
  static const char *const not_global_in_global_v6[] = { "2001::/23", "2001:db8::/32", "3fff::/20" };
  GInetAddress *carried[2] = { NULL, NULL };
  guint n = sandstep_egress_embedded_ipv4 (address, carried);
  gboolean any = FALSE;

  /* Forms that carry an IPv4 address are judged as it, before the rules below. */
  if (n > 0)
    {
      for (guint i = 0; i < n; i++)
        {
          any = any || sandstep_egress_address_is_internal (carried[i]);
          g_object_unref (carried[i]);
        }
      return any;
    }

  if (g_inet_address_get_family (address) == G_SOCKET_FAMILY_IPV4
        ? in_any (address, not_global_v4, G_N_ELEMENTS (not_global_v4))
        : !in_any (address, global_v6, G_N_ELEMENTS (global_v6)) ||
            in_any (address, not_global_in_global_v6, G_N_ELEMENTS (not_global_in_global_v6)))
    return TRUE;
  return sandstep_egress_address_is_own (address);
}

GList *
sandstep_egress_decide (SandstepEgress *egress, const char *host, guint16 port, SandstepResolveFunc resolve,
                        char **out_reason)
{
  g_autoptr(GInetAddress) literal = sandstep_egress_parse_literal (host);
  g_autofree char *name = NULL;
  g_autolist(GInetAddress) resolved = NULL;
  g_autoptr(GError) error = NULL;
  GList *dial = NULL;
  gboolean named;

  *out_reason = NULL;
  if (literal != NULL)
    {
      g_autofree char *text = g_inet_address_to_string (literal);
      if (range_covering (egress, literal) != NULL)
        return g_list_prepend (NULL, g_steal_pointer (&literal));
      *out_reason = g_strdup_printf ("%s (given as '%s') is in no allowed address range", text, host);
      return NULL;
    }

  name = g_ascii_strdown (host, -1);
  if (g_str_has_suffix (name, "."))
    name[strlen (name) - 1] = '\0';
  named = host_is_allowed (egress, name);
  if (named && port != 443)
    {
      *out_reason = g_strdup_printf ("%s is allowed over HTTPS on port 443 only, not port %u", name, port);
      return NULL;
    }
  /* An unlisted name is never looked up: the lookup itself would carry data
   * out through the host's resolver (DNS exfiltration).  Ranges are reached
   * by address. */
  if (!named)
    {
      *out_reason = g_strdup_printf ("%s is not an allowed host", name);
      return NULL;
    }

  resolved = resolve (name, &error);
  if (resolved == NULL)
    {
      *out_reason = g_strdup_printf ("%s does not resolve: %s", name, error ? error->message : "no address");
      return NULL;
    }
  for (GList *l = resolved; l != NULL; l = l->next)
    {
      /* An AAAA record may carry an IPv4 address (::ffff:127.0.0.1): judge and dial the IPv4 one. */
      g_autofree char *text = g_inet_address_to_string (l->data);
      g_autoptr(GInetAddress) address = sandstep_egress_parse_literal (text);
      gboolean covered;

      if (address == NULL)
        continue;
      covered = range_covering (egress, address) != NULL;
      /* A listed range wins; otherwise a listed name may reach public addresses only. */
      if (covered || !sandstep_egress_address_is_internal (address))
        dial = g_list_append (dial, g_steal_pointer (&address));
    }
  if (dial == NULL)
    {
      g_autofree char *first = g_inet_address_to_string (resolved->data);
      *out_reason = g_strdup_printf ("%s resolves to %s, an internal address, and no allowed range covers it", name,
                                     first);
    }
  return dial;
}

/* The refusals' reasons (above, and the proxy's in sandstep-proxy.c) shortened
 * for a model: the whole reason repeats the host and speaks of rules it does
 * not know.  Matched on the fixed part of each reason. */
static const struct {
  const char *part;
  gboolean at_start;
  const char *words;
} refusal_words[] = {
  { " is not an allowed host", FALSE, "not in the allowlist" },
  { " is in no allowed address range", FALSE, "not in the allowlist" },
  { " is allowed over HTTPS on port 443 only, not port ", FALSE, "this host is allowed over HTTPS on port 443 only" },
  { " does not resolve: ", FALSE, "the name does not resolve" },
  { ", an internal address, and no allowed range covers it", FALSE, "the name resolves to an internal address" },
  { "plain HTTP (", TRUE, "plain HTTP is not allowed; use HTTPS" },
  { "could not connect to ", TRUE, "the host did not accept the connection" },
};

char *
sandstep_egress_notice_for_model (const char *notice)
{
  const char *rest, *sep;
  g_autofree char *target = NULL;
  const char *reason;

  if (notice == NULL || !g_str_has_prefix (notice, SANDSTEP_EGRESS_NOTICE_PREFIX))
    return NULL;
  rest = notice + strlen (SANDSTEP_EGRESS_NOTICE_PREFIX);
  /* A target has no ": " (HOST:PORT, [v6]:PORT, or a parenthesised word). */
  sep = strstr (rest, ": ");
  if (sep == NULL)
    return g_strdup_printf ("[network: refused %s]", rest);
  target = g_strndup (rest, sep - rest);
  reason = sep + 2;
  for (gsize i = 0; i < G_N_ELEMENTS (refusal_words); i++)
    if (refusal_words[i].at_start ? g_str_has_prefix (reason, refusal_words[i].part)
                                  : strstr (reason, refusal_words[i].part) != NULL)
      return g_strdup_printf ("[network: refused %s: %s]", target, refusal_words[i].words);
  return g_strdup_printf ("[network: refused %s: %s]", target, reason);
}
