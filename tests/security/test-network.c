/* test-network.c: network modes and the egress allowlist.
 *
 * Two parts:
 *
 *  /egress/...   unit tests of hooks/sandstep-egress.c: literal parsing,
 *                what counts as internal, and every decision of the policy,
 *                with a resolver of the test's own (no DNS).
 *  /network/...  the real helper: sandboxes provisioned with --network=none
 *                or an allowlist, commands inside (tests/security/attack.c,
 *                curl) against stand-ins for the internet that exist only on
 *                this machine:
 *                  - a "test host": a network namespace made here (held by a
 *                    child process, never named, gone when this program is), reached
 *                    from the host over a veth pair, 10.231.X.1 (host side)
 *                    and 10.231.X.2 (inside), fd00:231:X::1 and fd00:231:X::2;
 *                    it serves HTTPS (a self-signed certificate made here) on
 *                    8443, a TCP echo on 7777 and counts UDP datagrams on 53;
 *                  - listeners on the host's own loopback, which must never
 *                    see a connection from a sandbox.
 *                The helper is told the test host's names with
 *                SANDSTEP_TEST_RESOLVE and dials 8443 for 443 with
 *                SANDSTEP_TEST_HTTPS_PORT (both read by the helper only).
 *                Making the namespace needs root; without root these cases
 *                are skipped, saying so.  Every server runs in a thread of
 *                this program and stops with it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attack-utils.h"
#include "sandstep-egress.h"

/* ======================================================================
 * Part 1: the policy, unit by unit
 * ====================================================================== */

static GPtrArray *
strv_array (const char *const *items)
{
  GPtrArray *array = g_ptr_array_new_with_free_func (g_free);

  for (gsize i = 0; items != NULL && items[i] != NULL; i++)
    g_ptr_array_add (array, g_strdup (items[i]));
  return array;
}

static SandstepEgress *
egress_new (const char *const *hosts, const char *const *cidrs)
{
  g_autoptr(GPtrArray) h = strv_array (hosts);
  g_autoptr(GPtrArray) c = strv_array (cidrs);
  g_autoptr(GError) error = NULL;
  SandstepEgress *egress = sandstep_egress_new (h, c, &error);

  g_assert_no_error (error);
  g_assert_nonnull (egress);
  return egress;
}

/* The test's resolver: a fixed table, and a log of every name asked. */
static const char *const *resolve_table;
static GPtrArray *resolve_log;

static GList *
fake_resolve (const char *host, GError **error)
{
  GList *found = NULL;

  if (resolve_log != NULL)
    g_ptr_array_add (resolve_log, g_strdup (host));
  for (gsize i = 0; resolve_table != NULL && resolve_table[i] != NULL; i += 2)
    if (strcmp (resolve_table[i], host) == 0)
      found = g_list_append (found, g_inet_address_new_from_string (resolve_table[i + 1]));
  if (found == NULL)
    g_set_error (error, G_RESOLVER_ERROR, G_RESOLVER_ERROR_NOT_FOUND, "no test address for '%s'", host);
  return found;
}

typedef struct {
  char *reason;      /* refusal, or NULL */
  char *dial;        /* the addresses allowed, space-separated */
  char *asked;       /* the names resolved, space-separated */
} Decision;

static void
decision_clear (Decision *d)
{
  g_free (d->reason);
  g_free (d->dial);
  g_free (d->asked);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Decision, decision_clear)

static void
decide (SandstepEgress *egress, const char *host, guint16 port, const char *const *table, Decision *out)
{
  g_autolist(GInetAddress) dial = NULL;
  g_autoptr(GString) text = g_string_new (NULL);

  resolve_table = table;
  resolve_log = g_ptr_array_new_with_free_func (g_free);
  dial = sandstep_egress_decide (egress, host, port, fake_resolve, &out->reason);
  for (GList *l = dial; l != NULL; l = l->next)
    {
      g_autofree char *a = g_inet_address_to_string (l->data);
      g_string_append_printf (text, "%s%s", text->len ? " " : "", a);
    }
  out->dial = g_string_free (g_steal_pointer (&text), FALSE);
  g_ptr_array_add (resolve_log, NULL);
  out->asked = g_strjoinv (" ", (char **) resolve_log->pdata);
  g_ptr_array_unref (resolve_log);
  resolve_log = NULL;
  resolve_table = NULL;
  /* Exactly one of the two. */
  g_assert_true ((out->reason == NULL) != (out->dial[0] == '\0'));
}

static void
test_parse_literal (void)
{
  static const struct { const char *text; const char *expected; } cases[] = {
    { "127.0.0.1", "127.0.0.1" },
    { "127.1", "127.0.0.1" },
    { "0x7f.1", "127.0.0.1" },
    { "0177.0.0.1", "127.0.0.1" },
    { "2130706433", "127.0.0.1" },
    { "017700000001", "127.0.0.1" },
    { "0x7f000001", "127.0.0.1" },
    { "0xA9.0xFE.0xA9.0xFE", "169.254.169.254" },
    { "[::1]", "::1" },
    { "::ffff:127.0.0.1", "127.0.0.1" },
    { "[::ffff:127.0.0.1]", "127.0.0.1" },
    { "[::ffff:7f00:1]", "127.0.0.1" },
    { "[64:ff9b::7f00:1]", "64:ff9b::7f00:1" },
    { "[fd00:231::2]", "fd00:231::2" },
    { "93.184.216.34", "93.184.216.34" },
    /* names */
    { "example.com", NULL },
    { "127.0.0.1.nip.io", NULL },
    { "deadbeef", NULL },
    { "1e100", NULL },
    { "", NULL },
    { "[]", NULL },
    { "127.0.0.1 ", NULL },
  };

  g_test_summary ("IP literals are normalised in every inet_aton/inet_pton spelling (and v4-mapped IPv6 "
                  "becomes IPv4); names stay names");
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GInetAddress) a = sandstep_egress_parse_literal (cases[i].text);
      g_autofree char *got = a != NULL ? g_inet_address_to_string (a) : NULL;
      if (g_strcmp0 (got, cases[i].expected) != 0)
        g_test_message ("parse_literal('%s') = %s, expected %s", cases[i].text, got, cases[i].expected);
      g_assert_cmpstr (got, ==, cases[i].expected);
    }
}

static void
test_internal_addresses (void)
{
  static const char *const internal[] = {
    "127.0.0.1", "127.255.255.254", "10.0.0.1", "10.231.7.2", "100.64.0.1", "169.254.169.254", "172.16.0.1",
    "172.31.255.255", "192.168.1.1", "192.0.0.8", "198.18.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255",
    "::1", "::", "fc00::1", "fd00:231::2", "fe80::1", "ff02::1", "64:ff9b::7f00:1",
    /* Issue 30: every non-global address, not a list of known bad ones. */
    "fec0::1", "::ffff:0:7f00:1", "::ffff:0:808:808", "100::1", "5f00::1", "2001:db8::1", "2001:2::1", "3fff::1",
    "4000::1", "e000::1", "192.0.2.1", "198.51.100.7", "203.0.113.9", "192.88.99.1",
  };
  static const char *const external[] = {
    "93.184.216.34", "1.1.1.1", "8.8.8.8", "172.32.0.1", "192.169.0.1", "100.128.0.1", "2606:4700::1111",
    "2a00:1450:4001::1", "198.20.0.1",
  };
  struct ifaddrs *list = NULL;

  g_test_summary ("loopback, private, shared, link-local, multicast, unspecified, ULA, NAT64, documentation, "
                  "site-local, discard, IPv4-translated, every IPv6 address outside 2000::/3, and the host's own "
                  "addresses are internal; global ones are not");
  for (gsize i = 0; i < G_N_ELEMENTS (internal); i++)
    {
      g_autoptr(GInetAddress) a = g_inet_address_new_from_string (internal[i]);
      if (!sandstep_egress_address_is_internal (a))
        g_test_message ("%s should be internal", internal[i]);
      g_assert_true (sandstep_egress_address_is_internal (a));
    }
  for (gsize i = 0; i < G_N_ELEMENTS (external); i++)
    {
      g_autoptr(GInetAddress) a = g_inet_address_new_from_string (external[i]);
      if (sandstep_egress_address_is_internal (a))
        g_test_message ("%s should not be internal", external[i]);
      g_assert_false (sandstep_egress_address_is_internal (a));
    }
  /* Every address of this host, whatever its range. */
  g_assert_cmpint (getifaddrs (&list), ==, 0);
  for (struct ifaddrs *i = list; i != NULL; i = i->ifa_next)
    if (i->ifa_addr != NULL && (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6))
      {
        g_autoptr(GSocketAddress) sa = g_socket_address_new_from_native (
          i->ifa_addr, i->ifa_addr->sa_family == AF_INET ? sizeof (struct sockaddr_in) : sizeof (struct sockaddr_in6));
        GInetAddress *a = g_inet_socket_address_get_address (G_INET_SOCKET_ADDRESS (sa));
        g_autofree char *text = g_inet_address_to_string (a);
        if (!sandstep_egress_address_is_internal (a))
          g_test_message ("this host's own %s (%s) should be internal", text, i->ifa_name);
        g_assert_true (sandstep_egress_address_is_internal (a));
      }
  freeifaddrs (list);
}

static void
test_internal_v4_mapped (void)
{
  static const char *const mapped[] = {
    "::ffff:127.0.0.1", "::ffff:10.231.7.2", "::ffff:169.254.169.254", "::ffff:192.168.1.1", "::ffff:0.0.0.0",
  };

  g_test_summary ("an IPv4-mapped IPv6 address (::ffff:a.b.c.d, which an IPv6 socket dials as a.b.c.d) is as "
                  "internal as the IPv4 address it carries; a resolver can return one for any name");
  for (gsize i = 0; i < G_N_ELEMENTS (mapped); i++)
    {
      g_autoptr(GInetAddress) a = g_inet_address_new_from_string (mapped[i]);
      g_assert_nonnull (a);
      if (!sandstep_egress_address_is_internal (a))
        g_test_message ("%s is not counted as internal", mapped[i]);
      g_assert_true (sandstep_egress_address_is_internal (a));
    }
}

/* IPv6 spellings of an IPv4 address, each carrying 127.0.0.1, 10.231.7.2 or 169.254.169.254. */
static const struct { const char *v6; const char *carried; } embedding[] = {
  { "::127.0.0.1", "127.0.0.1" },                        /* IPv4-compatible */
  { "::a9fe:a9fe", "169.254.169.254" },
  { "::ffff:10.231.7.2", "10.231.7.2" },                 /* mapped */
  { "64:ff9b::127.0.0.1", "127.0.0.1" },                 /* NAT64, well-known prefix */
  { "64:ff9b::a9fe:a9fe", "169.254.169.254" },
  { "64:ff9b:1::7f00:1", "127.0.0.1" },                  /* NAT64, local use, a /96 inside the /48 */
  { "64:ff9b:1:a9fe:00a9:fe00::", "169.254.169.254" },   /* ... and a /48 prefix: bits 48-63, 72-87 */
  { "2002:7f00:1::", "127.0.0.1" },                      /* 6to4 */
  { "2002:a9fe:a9fe:1::1", "169.254.169.254" },
  { "2001:0:a9fe:a9fe::1", "169.254.169.254" },          /* Teredo: the server */
  { "2001:0:4136:e378:8000:63bf:80ff:fffe", "127.0.0.1" }, /* Teredo: the client, inverted */
  { "2001:0:4136:e378:8000:63bf:f5d8:f8fd", "10.39.7.2" },
};

static void
test_internal_embedded_v4 (void)
{
  static const char *const public_forms[] = {
    "64:ff9b::93.184.216.34", "2002:5db8:d822::1", "::93.184.216.34",
    "2001:0:4136:e378:8000:63bf:a247:27dd",             /* Teredo client 93.184.216.34 */
  };

  g_test_summary ("an IPv6 address that carries an IPv4 one (::a.b.c.d, ::ffff:a.b.c.d, 64:ff9b::/96, "
                  "64:ff9b:1::/48, 6to4 2002::/16, Teredo 2001::/32) is judged as the IPv4 address it carries: "
                  "internal when that one is, public when it is public");
  for (gsize i = 0; i < G_N_ELEMENTS (embedding); i++)
    {
      g_autoptr(GInetAddress) a = g_inet_address_new_from_string (embedding[i].v6);
      GInetAddress *carried[2] = { NULL, NULL };
      guint n;
      gboolean found = FALSE;

      g_assert_nonnull (a);
      n = sandstep_egress_embedded_ipv4 (a, carried);
      g_assert_cmpuint (n, >=, 1);
      for (guint j = 0; j < n; j++)
        {
          g_autofree char *text = g_inet_address_to_string (carried[j]);
          found = found || strcmp (text, embedding[i].carried) == 0;
          g_object_unref (carried[j]);
        }
      if (!found)
        g_test_message ("%s does not carry %s", embedding[i].v6, embedding[i].carried);
      g_assert_true (found);
      if (!sandstep_egress_address_is_internal (a))
        g_test_message ("%s (carrying %s) is not counted as internal", embedding[i].v6, embedding[i].carried);
      g_assert_true (sandstep_egress_address_is_internal (a));
    }
  for (gsize i = 0; i < G_N_ELEMENTS (public_forms); i++)
    {
      g_autoptr(GInetAddress) a = g_inet_address_new_from_string (public_forms[i]);
      g_assert_nonnull (a);
      if (sandstep_egress_address_is_internal (a))
        g_test_message ("%s carries a public address but counts as internal", public_forms[i]);
      g_assert_false (sandstep_egress_address_is_internal (a));
    }
}

static void
test_decide_rebinding_embedded_v4 (void)
{
  static const char *const hosts[] = { "svc.test", NULL };
  static const char *const cidrs[] = { "10.231.7.0/24", NULL };
  g_autoptr(SandstepEgress) egress = egress_new (hosts, cidrs);

  g_test_summary ("an allowed name whose AAAA answer carries loopback, metadata or a private address in any IPv6 "
                  "form is refused; one that carries an address of an allowed range is reached; a literal in "
                  "such a form needs the range of the IPv4 address it carries");
  for (gsize i = 0; i < G_N_ELEMENTS (embedding); i++)
    {
      const char *table[] = { "svc.test", embedding[i].v6, NULL };
      gboolean in_range = g_str_has_prefix (embedding[i].carried, "10.231.7.");
      g_autofree char *literal = g_strdup_printf ("[%s]", embedding[i].v6);
      g_auto(Decision) named = { 0 };
      g_auto(Decision) given = { 0 };

      decide (egress, "svc.test", 443, table, &named);
      decide (egress, literal, 443, NULL, &given);
      if ((named.reason == NULL) != in_range || (given.reason == NULL) != in_range)
        g_test_message ("%s carrying %s: by name %s, as a literal %s", embedding[i].v6, embedding[i].carried,
                        named.reason != NULL ? named.reason : named.dial,
                        given.reason != NULL ? given.reason : given.dial);
      g_assert_cmpint (named.reason == NULL, ==, in_range);
      g_assert_cmpint (given.reason == NULL, ==, in_range);
    }
}

static void
test_entries (void)
{
  static const struct { const char *host; const char *cidr; const char *message; } bad[] = {
    { "127.0.0.1", NULL, "is an address, not a host name" },
    { "0x7f.1", NULL, "is an address, not a host name" },
    { "bad_host", NULL, "is not a host name" },
    { "a..b", NULL, "is not a host name" },
    { "*", NULL, "is not a host name" },
    { "ex*ample.com", NULL, "is not a host name" },
    { NULL, "10.0.0.1/8", "has host bits set" },
    { NULL, "0.0.0.0/0", "allows every address" },
    { NULL, "::/0", "allows every address" },
    { NULL, "10.0.0.0/33", "is not an address range" },
    { NULL, "10.0.0.0", "is not an address range" },
    { NULL, "example.com/24", "is not an address range" },
  };

  g_test_summary ("allowlist entries are checked: addresses are not host names, ranges have no host bits and "
                  "never cover everything");
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      const char *hosts[] = { bad[i].host, NULL };
      const char *cidrs[] = { bad[i].cidr, NULL };
      g_autoptr(GPtrArray) h = strv_array (bad[i].host ? hosts : NULL);
      g_autoptr(GPtrArray) c = strv_array (bad[i].cidr ? cidrs : NULL);
      g_autoptr(GError) error = NULL;
      g_autoptr(SandstepEgress) egress = sandstep_egress_new (h, c, &error);
      g_assert_null (egress);
      g_assert_nonnull (error);
      if (strstr (error->message, bad[i].message) == NULL)
        g_test_message ("'%s': %s", bad[i].host ? bad[i].host : bad[i].cidr, error->message);
      g_assert_nonnull (strstr (error->message, bad[i].message));
    }
}

static void
test_decide_named (void)
{
  static const char *const table[] = {
    "svc.test", "93.184.216.34",
    "loop.test", "127.0.0.1", "meta.test", "169.254.169.254", "lan.test", "10.231.7.2", "v6loop.test", "::1",
    "ula.test", "fd00:231::2", "nat64.test", "64:ff9b::7f00:1",
    "mixed.test", "10.0.0.1", "mixed.test", "93.184.216.34",
    NULL,
  };
  static const char *const hosts[] = { "svc.test", "loop.test", "meta.test", "lan.test", "v6loop.test", "ula.test",
                                       "nat64.test", "mixed.test", "gone.test", NULL };
  g_autoptr(SandstepEgress) egress = egress_new (hosts, NULL);
  static const char *const internal[][2] = {
    { "loop.test", "127.0.0.1" }, { "meta.test", "169.254.169.254" }, { "lan.test", "10.231.7.2" },
    { "v6loop.test", "::1" }, { "ula.test", "fd00:231::2" }, { "nat64.test", "64:ff9b::7f00:1" },
  };

  g_test_summary ("an allowed name reaches its public addresses on 443 only; resolving to an internal address "
                  "(DNS rebinding) is refused, naming it; of mixed answers only the public ones are dialled");
  {
    g_auto(Decision) d = { 0 };
    decide (egress, "svc.test", 443, table, &d);
    g_assert_cmpstr (d.reason, ==, NULL);
    g_assert_cmpstr (d.dial, ==, "93.184.216.34");
  }
  {
    g_auto(Decision) d = { 0 };
    decide (egress, "SVC.Test.", 443, table, &d);
    g_assert_cmpstr (d.dial, ==, "93.184.216.34");
  }
  {
    g_auto(Decision) d = { 0 };
    decide (egress, "svc.test", 80, table, &d);
    g_assert_cmpstr (d.reason, ==, "svc.test is allowed over HTTPS on port 443 only, not port 80");
    g_assert_cmpstr (d.asked, ==, "");
  }
  for (gsize i = 0; i < G_N_ELEMENTS (internal); i++)
    {
      g_auto(Decision) d = { 0 };
      g_autofree char *want = g_strdup_printf ("%s resolves to %s, an internal address, and no allowed range "
                                               "covers it", internal[i][0], internal[i][1]);
      decide (egress, internal[i][0], 443, table, &d);
      g_assert_cmpstr (d.reason, ==, want);
    }
  {
    g_auto(Decision) d = { 0 };
    decide (egress, "mixed.test", 443, table, &d);
    g_assert_cmpstr (d.dial, ==, "93.184.216.34");
  }
  {
    g_auto(Decision) d = { 0 };
    decide (egress, "gone.test", 443, table, &d);
    g_assert_cmpstr (d.reason, ==, "gone.test does not resolve: no test address for 'gone.test'");
  }
}

static void
test_decide_rebinding_v4_mapped (void)
{
  static const char *const table[] = { "svc.test", "::ffff:127.0.0.1", "meta.test", "::ffff:169.254.169.254", NULL };
  static const char *const hosts[] = { "svc.test", "meta.test", NULL };
  g_autoptr(SandstepEgress) egress = egress_new (hosts, NULL);

  g_test_summary ("an allowed name whose AAAA answer is ::ffff:127.0.0.1 (or ::ffff:169.254.169.254) is "
                  "refused: an IPv6 socket dials that as the IPv4 address");
  {
    g_auto(Decision) d = { 0 };
    decide (egress, "svc.test", 443, table, &d);
    if (d.reason == NULL)
      g_test_message ("svc.test -> ::ffff:127.0.0.1 was allowed: dial %s", d.dial);
    g_assert_nonnull (d.reason);
    g_assert_cmpstr (d.dial, ==, "");
  }
  {
    g_auto(Decision) d = { 0 };
    decide (egress, "meta.test", 443, table, &d);
    g_assert_nonnull (d.reason);
  }
}

static void
test_decide_not_global (void)
{
  static const char *const answers[] = { "fec0::1", "::ffff:0:7f00:1", "100::1", "2001:db8::1", "192.0.2.1" };
  static const char *const hosts[] = { "svc.test", NULL };
  g_autoptr(SandstepEgress) egress = egress_new (hosts, NULL);

  g_test_bug ("30");
  g_test_summary ("issue 30: an allowed name whose answer is a non-global address the red team dialled "
                  "(fec0::1 site-local, ::ffff:0:7f00:1 translated loopback, 100::1 discard) or a documentation "
                  "address is refused, with the reason the model reads");
  for (gsize i = 0; i < G_N_ELEMENTS (answers); i++)
    {
      const char *table[] = { "svc.test", answers[i], NULL };
      g_auto(Decision) d = { 0 };

      decide (egress, "svc.test", 443, table, &d);
      if (d.reason == NULL)
        g_test_message ("svc.test -> %s was allowed: dial %s", answers[i], d.dial);
      g_assert_nonnull (d.reason);
      g_assert_cmpstr (d.dial, ==, "");
      sandstep_test_assert_contains (d.reason, ", an internal address, and no allowed range covers it");
    }
}

static void
test_decide_wildcard (void)
{
  static const char *const table[] = {
    "a.example.com", "93.184.216.34", "a.b.example.com", "93.184.216.34", "example.com", "93.184.216.34",
    "evilexample.com", "93.184.216.34", "example.com.evil.net", "93.184.216.34", NULL,
  };
  static const char *const hosts[] = { "*.example.com", NULL };
  static const char *const allowed[] = { "a.example.com", "a.b.example.com", "A.EXAMPLE.COM." };
  static const char *const refused[] = { "example.com", "evilexample.com", "example.com.evil.net", "xexample.com" };
  g_autoptr(SandstepEgress) egress = egress_new (hosts, NULL);

  g_test_summary ("*.example.com allows every name under example.com, never example.com itself or look-alikes");
  for (gsize i = 0; i < G_N_ELEMENTS (allowed); i++)
    {
      g_auto(Decision) d = { 0 };
      decide (egress, allowed[i], 443, table, &d);
      g_assert_cmpstr (d.dial, ==, "93.184.216.34");
    }
  for (gsize i = 0; i < G_N_ELEMENTS (refused); i++)
    {
      g_auto(Decision) d = { 0 };
      g_autofree char *want = g_strdup_printf ("%s is not an allowed host", refused[i]);
      decide (egress, refused[i], 443, table, &d);
      g_assert_cmpstr (d.reason, ==, want);
      /* an unlisted name is never looked up. */
      g_assert_cmpstr (d.asked, ==, "");
    }
}

static void
test_decide_literals (void)
{
  static const char *const hosts[] = { "svc.test", NULL };
  static const struct { const char *given; const char *shown; } literals[] = {
    { "127.0.0.1", "127.0.0.1" }, { "2130706433", "127.0.0.1" }, { "0177.0.0.1", "127.0.0.1" },
    { "0x7f.1", "127.0.0.1" }, { "127.1", "127.0.0.1" }, { "[::ffff:127.0.0.1]", "127.0.0.1" },
    { "[64:ff9b::7f00:1]", "64:ff9b::7f00:1" }, { "[::1]", "::1" }, { "169.254.169.254", "169.254.169.254" },
    { "93.184.216.34", "93.184.216.34" },
  };
  g_autoptr(SandstepEgress) egress = egress_new (hosts, NULL);

  g_test_summary ("an IP literal, in any spelling, needs an allowed range (even a public one); the "
                  "refusal names the normalised address and the spelling given, and nothing is resolved");
  for (gsize i = 0; i < G_N_ELEMENTS (literals); i++)
    {
      g_auto(Decision) d = { 0 };
      g_autofree char *want = g_strdup_printf ("%s (given as '%s') is in no allowed address range", literals[i].shown,
                                               literals[i].given);
      decide (egress, literals[i].given, 443, NULL, &d);
      g_assert_cmpstr (d.reason, ==, want);
      g_assert_cmpstr (d.asked, ==, "");
    }
}

static void
test_decide_ranges (void)
{
  static const char *const table[] = { "db.test", "10.231.7.2", "loop.test", "127.0.0.1", NULL };
  static const char *const cidrs[] = { "10.231.7.0/24", "fd00:231::/64", NULL };
  g_autoptr(SandstepEgress) egress = egress_new (NULL, cidrs);
  static const struct { const char *host; guint16 port; const char *dial; } allowed[] = {
    { "10.231.7.2", 7777, "10.231.7.2" }, { "0xa.0xe7.7.2", 22, "10.231.7.2" }, { "182912770", 1, "10.231.7.2" },
    { "[::ffff:10.231.7.2]", 65535, "10.231.7.2" }, { "[fd00:231::2]", 7777, "fd00:231::2" },
  };

  g_test_summary ("an allowed range is reached on any port, from a literal in any spelling; a name is never "
                  "looked up unless it is listed (no DNS exfiltration), even one that would resolve into the "
                  "range; addresses outside it are refused");
  for (gsize i = 0; i < G_N_ELEMENTS (allowed); i++)
    {
      g_auto(Decision) d = { 0 };
      decide (egress, allowed[i].host, allowed[i].port, table, &d);
      if (d.reason != NULL)
        g_test_message ("%s:%u refused: %s", allowed[i].host, allowed[i].port, d.reason);
      g_assert_cmpstr (d.dial, ==, allowed[i].dial);
    }
  {
    g_auto(Decision) d = { 0 };
    decide (egress, "10.231.8.2", 7777, table, &d);
    g_assert_cmpstr (d.reason, ==, "10.231.8.2 (given as '10.231.8.2') is in no allowed address range");
  }
  {
    g_auto(Decision) d = { 0 };
    decide (egress, "db.test", 7777, table, &d);
    g_assert_cmpstr (d.reason, ==, "db.test is not an allowed host");
    g_assert_cmpstr (d.asked, ==, "");
  }
  {
    g_auto(Decision) d = { 0 };
    decide (egress, "loop.test", 443, table, &d);
    g_assert_cmpstr (d.reason, ==, "loop.test is not an allowed host");
    g_assert_cmpstr (d.asked, ==, "");
  }
}

static void
test_decide_no_lookup_of_unlisted_names (void)
{
  static const char *const hosts[] = { "svc.test", NULL };
  static const char *const cidrs[] = { "10.231.7.0/24", NULL };
  g_autoptr(SandstepEgress) egress = egress_new (hosts, cidrs);
  g_auto(Decision) d = { 0 };

  g_test_summary ("DNS exfiltration: with an allowed range configured too, CONNECT "
                  "<secret>.attacker.tld:443 is refused without the proxy looking the name up (a lookup alone "
                  "carries the secret to the attacker's DNS server)");
  decide (egress, "c2VjcmV0.attacker.tld", 443, NULL, &d);
  g_assert_nonnull (d.reason);
  if (d.asked[0] != '\0')
    g_test_message ("the policy looked up '%s' (reason: %s)", d.asked, d.reason);
  g_assert_cmpstr (d.asked, ==, "");
}

/* ======================================================================
 * Part 2: the helper, end to end
 * ====================================================================== */

/* ---- servers ---- */

typedef enum {
  SERVE_COUNT,   /* accept and close */
  SERVE_ECHO,    /* reply "echo:" + the first bytes, then close */
  SERVE_TLS,     /* TLS, then a fixed HTTP response */
  SERVE_UDP,     /* count datagrams */
} ServeKind;

typedef struct {
  ServeKind kind;
  int fd;
  guint16 port;
  gint hits;          /* connections accepted (TCP) or datagrams (UDP) */
  gint stop;
  GThread *thread;
} Server;

#define TLS_BODY "hello from the test host\n"

static GTlsCertificate *tls_certificate;

static void
serve_tls (int fd)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GSocket) socket = g_socket_new_from_fd (fd, &error);
  g_autoptr(GSocketConnection) plain = NULL;
  g_autoptr(GIOStream) tls = NULL;
  static const char response[] = "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 25\r\n"
                                 "Connection: close\r\n\r\n" TLS_BODY;
  char head[4096];
  gsize len = 0;

  if (socket == NULL)
    return;
  g_socket_set_timeout (socket, 10);
  plain = g_socket_connection_factory_create_connection (socket);
  tls = g_tls_server_connection_new (G_IO_STREAM (plain), tls_certificate, &error);
  if (tls == NULL || !g_tls_connection_handshake (G_TLS_CONNECTION (tls), NULL, &error))
    return;
  while (len < sizeof head - 1)
    {
      gssize n = g_input_stream_read (g_io_stream_get_input_stream (tls), head + len, sizeof head - 1 - len, NULL,
                                      NULL);
      if (n <= 0)
        break;
      len += n;
      head[len] = '\0';
      if (strstr (head, "\r\n\r\n") != NULL)
        break;
    }
  g_output_stream_write_all (g_io_stream_get_output_stream (tls), response, sizeof response - 1, NULL, NULL, NULL);
  g_io_stream_close (tls, NULL, NULL);
}

static void
serve_echo (int fd)
{
  struct pollfd pfd = { .fd = fd, .events = POLLIN };
  char buf[1024] = "echo:";
  ssize_t n;

  if (poll (&pfd, 1, 5000) <= 0)
    return;
  n = read (fd, buf + 5, sizeof buf - 5);
  if (n > 0 && write (fd, buf, 5 + n) < 0)
    return;
}

static gpointer
server_thread (gpointer data)
{
  Server *s = data;

  while (!g_atomic_int_get (&s->stop))
    {
      struct pollfd pfd = { .fd = s->fd, .events = POLLIN };
      int c;

      if (poll (&pfd, 1, 100) <= 0)
        continue;
      if (s->kind == SERVE_UDP)
        {
          char buf[2048];
          if (recv (s->fd, buf, sizeof buf, MSG_DONTWAIT) >= 0)
            g_atomic_int_inc (&s->hits);
          continue;
        }
      c = accept4 (s->fd, NULL, NULL, SOCK_CLOEXEC);
      if (c < 0)
        continue;
      g_atomic_int_inc (&s->hits);
      switch (s->kind)
        {
        case SERVE_TLS:
          serve_tls (c);   /* the GSocket owns c */
          continue;
        case SERVE_ECHO:
          serve_echo (c);
          break;
        case SERVE_COUNT:
        case SERVE_UDP:
          break;
        }
      close (c);
    }
  return NULL;
}

/* A socket bound in the network namespace @netns_fd (-1: this one). */
static int
bind_in (int netns_fd, int family, int type, const char *address, guint16 port, guint16 *out_port)
{
  struct sockaddr_storage ss = { 0 };
  socklen_t len;
  int own = -1, fd, one = 1;

  if (netns_fd >= 0)
    {
      own = open ("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
      g_assert_cmpint (own, >=, 0);
      g_assert_cmpint (setns (netns_fd, CLONE_NEWNET), ==, 0);
    }
  if (family == AF_INET)
    {
      struct sockaddr_in *in = (struct sockaddr_in *) &ss;
      in->sin_family = AF_INET;
      in->sin_port = htons (port);
      g_assert_cmpint (inet_pton (AF_INET, address, &in->sin_addr), ==, 1);
      len = sizeof *in;
    }
  else
    {
      struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &ss;
      in6->sin6_family = AF_INET6;
      in6->sin6_port = htons (port);
      g_assert_cmpint (inet_pton (AF_INET6, address, &in6->sin6_addr), ==, 1);
      len = sizeof *in6;
    }
  fd = socket (family, type | SOCK_CLOEXEC, 0);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), ==, 0);
  if (family == AF_INET6)
    g_assert_cmpint (setsockopt (fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one), ==, 0);
  if (bind (fd, (struct sockaddr *) &ss, len) < 0)
    g_error ("cannot bind %s port %u: %s", address, port, g_strerror (errno));
  if (type == SOCK_STREAM)
    g_assert_cmpint (listen (fd, 16), ==, 0);
  g_assert_cmpint (getsockname (fd, (struct sockaddr *) &ss, &len), ==, 0);
  *out_port = ntohs (family == AF_INET ? ((struct sockaddr_in *) &ss)->sin_port
                                       : ((struct sockaddr_in6 *) &ss)->sin6_port);
  if (own >= 0)
    {
      g_assert_cmpint (setns (own, CLONE_NEWNET), ==, 0);
      close (own);
    }
  return fd;
}

static gint
server_hits (Server *s)
{
  return s != NULL ? g_atomic_int_get (&s->hits) : 0;
}

static Server *
server_start (ServeKind kind, int netns_fd, int family, const char *address, guint16 port)
{
  Server *s = g_new0 (Server, 1);

  s->kind = kind;
  s->fd = bind_in (netns_fd, family, kind == SERVE_UDP ? SOCK_DGRAM : SOCK_STREAM, address, port, &s->port);
  s->thread = g_thread_new ("test-server", server_thread, s);
  return s;
}

static void
server_stop (Server *s)
{
  if (s == NULL)
    return;
  g_atomic_int_set (&s->stop, 1);
  g_thread_join (s->thread);
  close (s->fd);
  g_free (s);
}

/* ---- the test host ---- */

typedef struct {
  gboolean ready;
  char *skip_reason;       /* why the end-to-end cases cannot run here */
  char *tls_skip_reason;   /* why the HTTPS cases cannot run here */
  pid_t holder;            /* holds the test host's network namespace */
  char *veth;              /* host side */
  int netns_fd;
  guint subnet;            /* X of 10.231.X.0/24 */
  char *host_v4;           /* 10.231.X.1: the machine's side */
  char *peer_v4;           /* 10.231.X.2: the test host */
  char *host_v6;           /* fd00:231:X::1 */
  char *peer_v6;           /* fd00:231:X::2 */
  char *cidr_v6;           /* fd00:231:X::/64 */
  char *workdir;           /* certificate and key */
  Server *https;           /* peer_v4:8443 (stands in for 443); NULL without TLS */
  Server *echo;            /* peer_v4:7777 */
  Server *echo6;           /* [peer_v6]:7777 */
  Server *dns;             /* peer_v4:53/udp */
  Server *loopback;        /* 127.0.0.1:<any>: the host's own services */
  Server *loopback_https;  /* 127.0.0.1:<any>: the port rebinding attempts would be dialled on */
  Server *veth_host;       /* host_v4:<any> */
} TestNet;

static TestNet net = { .netns_fd = -1 };

#define HTTPS_PORT 8443
#define ECHO_PORT 7777

static gboolean
run_ip (char **out_error, const char *first, ...)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_autofree char *err = NULL;
  g_autoptr(GError) error = NULL;
  int status = 0;
  va_list ap;

  g_ptr_array_add (argv, (gpointer) "ip");
  va_start (ap, first);
  for (const char *a = first; a != NULL; a = va_arg (ap, const char *))
    g_ptr_array_add (argv, (gpointer) a);
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  if (!g_spawn_sync (NULL, (char **) argv->pdata, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL,
                     NULL, &err, &status, &error) ||
      !g_spawn_check_wait_status (status, NULL))
    {
      if (out_error != NULL)
        {
          g_autofree char *line = g_strjoinv (" ", (char **) argv->pdata);
          *out_error = g_strdup_printf ("'%s' failed: %s", line, error ? error->message : g_strstrip (err));
        }
      return FALSE;
    }
  return TRUE;
}

/* `nsenter -t HOLDER -n ip ARGS...`: ip inside the test host. */
static gboolean
run_ip_inside (char **out_error, const char *first, ...)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *err = NULL;
  g_autoptr(GError) error = NULL;
  int status = 0;
  va_list ap;

  g_ptr_array_add (argv, g_strdup ("nsenter"));
  g_ptr_array_add (argv, g_strdup_printf ("--target=%d", (int) net.holder));
  g_ptr_array_add (argv, g_strdup ("--net"));
  g_ptr_array_add (argv, g_strdup ("ip"));
  va_start (ap, first);
  for (const char *a = first; a != NULL; a = va_arg (ap, const char *))
    g_ptr_array_add (argv, g_strdup (a));
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  if (!g_spawn_sync (NULL, (char **) argv->pdata, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL,
                     NULL, &err, &status, &error) ||
      !g_spawn_check_wait_status (status, NULL))
    {
      g_autofree char *line = g_strjoinv (" ", (char **) argv->pdata);
      *out_error = g_strdup_printf ("'%s' failed: %s", line, error ? error->message : g_strstrip (err));
      return FALSE;
    }
  return TRUE;
}

/* A process holding a fresh network namespace: the test host.  It dies with
 * this program (PDEATHSIG), and the namespace with it and netns_fd, taking the
 * veth pair along: nothing is left behind, even after a failed assertion. */
static gboolean
start_holder (char **out_reason)
{
  g_autofree char *path = NULL;
  int ready[2];
  char byte = 0;
  pid_t pid;

  g_assert_cmpint (pipe2 (ready, O_CLOEXEC), ==, 0);
  pid = fork ();
  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      char ok = unshare (CLONE_NEWNET) == 0 ? 1 : 0;
      prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
      if (write (ready[1], &ok, 1) < 0 || !ok)
        _exit (1);
      for (;;)
        pause ();
    }
  close (ready[1]);
  if (read (ready[0], &byte, 1) != 1 || byte != 1)
    {
      close (ready[0]);
      kill (pid, SIGKILL);
      waitpid (pid, NULL, 0);
      *out_reason = g_strdup ("cannot make a network namespace for the test host (unshare(CLONE_NEWNET) failed)");
      return FALSE;
    }
  close (ready[0]);
  net.holder = pid;
  path = g_strdup_printf ("/proc/%d/ns/net", (int) pid);
  net.netns_fd = open (path, O_RDONLY | O_CLOEXEC);
  g_assert_cmpint (net.netns_fd, >=, 0);
  return TRUE;
}

/* Removes the certificate's directory (and what openssl left in it) and frees its name. */
static void
remove_workdir (char *dir)
{
  static const char *const files[] = { "cert.pem", "key.pem" };

  for (gsize i = 0; i < G_N_ELEMENTS (files); i++)
    {
      g_autofree char *path = g_build_filename (dir, files[i], NULL);
      unlink (path);
    }
  rmdir (dir);
  g_free (dir);
}

static void
testnet_down (void)
{
  server_stop (net.https);
  server_stop (net.echo);
  server_stop (net.echo6);
  server_stop (net.dns);
  server_stop (net.loopback);
  server_stop (net.loopback_https);
  server_stop (net.veth_host);
  /* The namespace goes with its last holder, and the veth pair with it. */
  if (net.netns_fd >= 0)
    close (net.netns_fd);
  net.netns_fd = -1;
  if (net.holder > 0)
    {
      kill (net.holder, SIGKILL);
      waitpid (net.holder, NULL, 0);
      net.holder = 0;
    }
  g_clear_pointer (&net.workdir, remove_workdir);
  g_clear_object (&tls_certificate);
}

static gboolean
make_certificate (char **out_reason)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *cert = NULL;
  g_autofree char *key = NULL;
  g_autofree char *err = NULL;
  int status = 0;

  net.workdir = g_dir_make_tmp ("sandstep-net-cert-XXXXXX", &error);
  g_assert_no_error (error);
  cert = g_build_filename (net.workdir, "cert.pem", NULL);
  key = g_build_filename (net.workdir, "key.pem", NULL);
  {
    const char *argv[] = { "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                           "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=svc.test",
                           "-addext", "subjectAltName=DNS:svc.test", NULL };
    if (!g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL,
                       NULL, &err, &status, &error) ||
        !g_spawn_check_wait_status (status, NULL))
      {
        *out_reason = g_strdup_printf ("openssl could not make a self-signed certificate: %s",
                                       error ? error->message : err);
        return FALSE;
      }
  }
  if (!g_tls_backend_supports_tls (g_tls_backend_get_default ()))
    {
      *out_reason = g_strdup ("GIO has no TLS backend here (glib-networking is not installed)");
      return FALSE;
    }
  tls_certificate = g_tls_certificate_new_from_files (cert, key, &error);
  /* Loaded: nothing of it need stay on disk. */
  unlink (cert);
  unlink (key);
  g_clear_pointer (&net.workdir, remove_workdir);
  if (tls_certificate == NULL)
    {
      *out_reason = g_strdup_printf ("GIO cannot load the test certificate: %s", error->message);
      return FALSE;
    }
  return TRUE;
}

/* Builds the test host on first use.  FALSE (with net.skip_reason) where it cannot be built. */
static gboolean
testnet_up (void)
{
  g_autofree char *holder = NULL;
  g_autofree char *v4_host = NULL, *v4_peer = NULL, *v6_host = NULL, *v6_peer = NULL;
  g_autofree char *peer_if = NULL;
  char *reason = NULL;

  if (net.ready || net.skip_reason != NULL)
    return net.ready;
  net.netns_fd = -1;
  if (getuid () != 0)
    {
      net.skip_reason = g_strdup ("making the test host (a network namespace and a veth pair) needs root");
      return FALSE;
    }
  /* Without a certificate (or TLS in GIO) only the HTTPS cases skip. */
  if (!make_certificate (&reason))
    net.tls_skip_reason = reason;
  reason = NULL;
  if (!start_holder (&reason))
    {
      net.skip_reason = reason;
      return FALSE;
    }
  /* 10.231.1.x and 10.231.2.x belong to test-remote's namespaces; ours are 100..199. */
  net.subnet = 100 + getpid () % 100;
  net.veth = g_strdup_printf ("ssn%d", (int) getpid ());
  peer_if = g_strdup_printf ("%sp", net.veth);
  holder = g_strdup_printf ("%d", (int) net.holder);
  net.host_v4 = g_strdup_printf ("10.231.%u.1", net.subnet);
  net.peer_v4 = g_strdup_printf ("10.231.%u.2", net.subnet);
  /* A /64 of its own, as the /24 is: test runs of other trees may hold a veth of theirs. */
  net.host_v6 = g_strdup_printf ("fd00:231:%x::1", net.subnet);
  net.peer_v6 = g_strdup_printf ("fd00:231:%x::2", net.subnet);
  net.cidr_v6 = g_strdup_printf ("fd00:231:%x::/64", net.subnet);
  v4_host = g_strconcat (net.host_v4, "/24", NULL);
  v4_peer = g_strconcat (net.peer_v4, "/24", NULL);
  v6_host = g_strconcat (net.host_v6, "/64", NULL);
  v6_peer = g_strconcat (net.peer_v6, "/64", NULL);

  if (!run_ip (&reason, "link", "add", net.veth, "type", "veth", "peer", "name", peer_if, "netns", holder, NULL) ||
      !run_ip (&reason, "addr", "add", v4_host, "dev", net.veth, NULL) ||
      !run_ip (&reason, "-6", "addr", "add", v6_host, "dev", net.veth, "nodad", NULL) ||
      !run_ip (&reason, "link", "set", net.veth, "up", NULL) ||
      !run_ip_inside (&reason, "link", "set", "lo", "up", NULL) ||
      !run_ip_inside (&reason, "addr", "add", v4_peer, "dev", peer_if, NULL) ||
      !run_ip_inside (&reason, "-6", "addr", "add", v6_peer, "dev", peer_if, "nodad", NULL) ||
      !run_ip_inside (&reason, "link", "set", peer_if, "up", NULL))
    {
      net.skip_reason = reason;
      testnet_down ();
      return FALSE;
    }

  if (tls_certificate != NULL)
    net.https = server_start (SERVE_TLS, net.netns_fd, AF_INET, net.peer_v4, HTTPS_PORT);
  net.echo = server_start (SERVE_ECHO, net.netns_fd, AF_INET, net.peer_v4, ECHO_PORT);
  net.echo6 = server_start (SERVE_ECHO, net.netns_fd, AF_INET6, net.peer_v6, ECHO_PORT);
  net.dns = server_start (SERVE_UDP, net.netns_fd, AF_INET, net.peer_v4, 53);
  net.loopback = server_start (SERVE_COUNT, -1, AF_INET, "127.0.0.1", 0);
  net.loopback_https = server_start (SERVE_ECHO, -1, AF_INET, "127.0.0.1", 0);
  net.veth_host = server_start (SERVE_ECHO, -1, AF_INET, net.host_v4, 0);
  net.ready = TRUE;

  /* The host reaches the test host (else every case below would fail for the wrong reason). */
  {
    g_autoptr(GSocketClient) client = g_socket_client_new ();
    g_autoptr(GSocketConnection) c = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(GSocketAddress) address = g_inet_socket_address_new_from_string (net.peer_v4, ECHO_PORT);
    char buf[64] = "";
    gsize n = 0;

    g_socket_client_set_timeout (client, 5);
    c = g_socket_client_connect (client, G_SOCKET_CONNECTABLE (address), NULL, &error);
    g_assert_no_error (error);
    g_output_stream_write_all (g_io_stream_get_output_stream (G_IO_STREAM (c)), "up", 2, NULL, NULL, &error);
    g_assert_no_error (error);
    g_input_stream_read_all (g_io_stream_get_input_stream (G_IO_STREAM (c)), buf, sizeof buf - 1, &n, NULL, &error);
    g_assert_no_error (error);
    g_assert_cmpstr (buf, ==, "echo:up");
    g_atomic_int_set (&net.echo->hits, 0);
  }
  return TRUE;
}

/* ---- fixture ---- */

typedef struct {
  AttackFixture af;   /* first */
  gint hits_https, hits_echo, hits_echo6, hits_dns, hits_loopback, hits_loopback_https, hits_veth_host;
} NetFixture;

static void
net_setup (NetFixture *nf, gconstpointer data)
{
  attack_fixture_setup (&nf->af, GPOINTER_TO_INT (data));
  if (nf->af.skip_reason == NULL && !testnet_up ())
    nf->af.skip_reason = g_strdup (net.skip_reason);
  if (!net.ready)
    return;
  /* Test-only knobs, read by the helper process alone. */
  {
    g_autofree char *resolve = g_strdup_printf (
      "svc.test=%s,db.test=%s,loop.test=127.0.0.1,meta.test=169.254.169.254,own.test=%s,"
      "mapped.test=::ffff:127.0.0.1,v6loop.test=::1,ula.test=%s",
      net.peer_v4, net.peer_v4, net.host_v4, net.peer_v6);
    sandstep_test_fixture_setenv (&nf->af.base, "SANDSTEP_TEST_RESOLVE", resolve);
    sandstep_test_fixture_setenv (&nf->af.base, "SANDSTEP_TEST_HTTPS_PORT", G_STRINGIFY (HTTPS_PORT));
  }
  nf->hits_https = server_hits (net.https);
  nf->hits_echo = server_hits (net.echo);
  nf->hits_echo6 = server_hits (net.echo6);
  nf->hits_dns = server_hits (net.dns);
  nf->hits_loopback = server_hits (net.loopback);
  nf->hits_loopback_https = server_hits (net.loopback_https);
  nf->hits_veth_host = server_hits (net.veth_host);
}

static void
net_teardown (NetFixture *nf, gconstpointer data)
{
  attack_fixture_teardown (&nf->af);
}

/* Connections (or datagrams) a server got since the case began. */
#define NEW_HITS(nf, name) (server_hits (net.name) - (nf)->hits_##name)
/* The hits seen within 10 s, once @n have come: through a user-mode stack the sandbox's connect can complete
 * before the stack's own connection reaches the server. */
#define WAIT_NEW_HITS(nf, name, n)                                                                           \
  ({                                                                                                         \
    gint64 deadline_ = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;                                        \
    while (NEW_HITS (nf, name) < (n) && g_get_monotonic_time () < deadline_)                                 \
      g_usleep (10 * 1000);                                                                                  \
    NEW_HITS (nf, name);                                                                                     \
  })

static SandstepTestFixture *
net_begin (NetFixture *nf)
{
  return attack_begin (&nf->af);
}

#define provision(nf, ...) attack_provision (&(nf)->af, __VA_ARGS__)
#define run_attack(nf, handle, attack) attack_run (&(nf)->af, (handle), (attack))
#define run_command(nf, handle, command) attack_run_command (&(nf)->af, (handle), (command))

static char *
read_egress_log (NetFixture *nf, const char *handle)
{
  g_autofree char *path = attack_sandbox_path (&nf->af, handle, "egress.log");
  char *text = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return g_strdup ("");
  return text;
}

/* Asserts one CONNECT refusal end to end: the 403 with its reason line inside,
 * "egress refused" on the helper's stderr, and a line in egress.log. */
static void
assert_refused (NetFixture *nf, const char *handle, const char *method, const char *target, const char *reason)
{
  g_autofree char *attack = g_strdup_printf ("proxy %s %s", method, target);
  g_autofree char *line = g_strdup_printf ("status=403 body=sandstep: %s", reason);
  g_autofree char *stderr_line = g_strdup_printf ("sandstep run: egress refused: %s: %s\n", target, reason);
  g_autofree char *log_line = g_strdup_printf (" target=%s refused: %s\n", target, reason);
  g_autofree char *log = NULL;
  g_autofree char *sandbox_field = g_strdup_printf ("sandbox=%s ", handle);
  g_autoptr(SandstepTestResult) r = run_attack (nf, handle, attack);

  attack_assert_line (r, line);
  sandstep_test_assert_contains (r->err, stderr_line);
  log = read_egress_log (nf, handle);
  sandstep_test_assert_contains (log, log_line);
  sandstep_test_assert_contains (log, sandbox_field);
}

/* ---- the allowlist, end to end ---- */

/* The HTTPS cases need the test host's TLS server and curl (run inside from the host's /usr). */
static gboolean
https_available (void)
{
  if (net.tls_skip_reason != NULL)
    {
      g_test_skip (net.tls_skip_reason);
      return FALSE;
    }
  if (!g_file_test ("/usr/bin/curl", G_FILE_TEST_IS_EXECUTABLE))
    {
      g_test_skip ("curl is not installed (it runs inside the jail from the host's /usr)");
      return FALSE;
    }
  return TRUE;
}

static void
test_allowed_host_https (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *cidr = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *log = NULL;
  g_autoptr(SandstepTestResult) r = NULL;

  if (!https_available ())
    return;
  /* The test host's address is private: the name alone would be refused (rebinding), so its /32 is allowed too. */
  cidr = g_strdup_printf ("--allow-cidr=%s/32", net.peer_v4);
  handle = provision (nf, "--allow=svc.test", cidr, NULL);
  r = run_command (nf, handle, "curl -sS -k --max-time 20 https://svc.test/");
  sandstep_test_assert_status (r, 0);
  g_assert_cmpstr (r->out, ==, TLS_BODY);
  sandstep_test_assert_not_contains (r->err, "egress refused");
  g_assert_cmpint (NEW_HITS (nf, https), ==, 1);
  log = read_egress_log (nf, handle);
  g_assert_cmpstr (log, ==, "");
}

static void
test_plain_http_refused (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *cidr = NULL;
  g_autofree char *handle = NULL;
  g_autoptr(SandstepTestResult) r = NULL;

  cidr = g_strdup_printf ("--allow-cidr=%s/32", net.peer_v4);
  handle = provision (nf, "--allow=svc.test", cidr, NULL);
  assert_refused (nf, handle, "GET", "http://svc.test/",
                  "plain HTTP (GET http://svc.test/) is not allowed; only HTTPS to allowed hosts");
  if (g_file_test ("/usr/bin/curl", G_FILE_TEST_IS_EXECUTABLE))
    {
      r = run_command (nf, handle, "curl -s -o /dev/null -w '%{http_code}' --max-time 20 http://svc.test/; echo");
      attack_assert_line (r, "403");
    }
  g_assert_cmpint (NEW_HITS (nf, https), ==, 0);
  g_assert_cmpint (NEW_HITS (nf, echo), ==, 0);
}

static void
test_allowed_host_other_port (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;

  handle = provision (nf, "--allow=svc.test", NULL);
  assert_refused (nf, handle, "CONNECT", "svc.test:7777", "svc.test is allowed over HTTPS on port 443 only, not "
                                                          "port 7777");
  g_assert_cmpint (NEW_HITS (nf, echo), ==, 0);
}

static void
test_allowed_cidr_any_port (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *cidr4 = g_strdup_printf ("--allow-cidr=10.231.%u.0/24", net.subnet);
  g_autofree char *cidr6 = g_strdup_printf ("--allow-cidr=%s", net.cidr_v6);
  g_autofree char *handle = NULL;
  g_autofree char *target = NULL;
  g_autofree char *hex = NULL;
  g_autofree char *decimal = NULL;
  g_autoptr(SandstepTestResult) r = NULL;

  handle = provision (nf, cidr4, cidr6, NULL);
  target = g_strdup_printf ("proxy CONNECT %s:%u ping", net.peer_v4, ECHO_PORT);
  r = run_attack (nf, handle, target);
  attack_assert_line (r, "status=200 reply=echo:ping");
  g_clear_pointer (&r, sandstep_test_result_free);

  hex = g_strdup_printf ("proxy CONNECT 0xa.0xe7.0x%x.0x2:%u hex", net.subnet, ECHO_PORT);
  r = run_attack (nf, handle, hex);
  attack_assert_line (r, "status=200 reply=echo:hex");
  g_clear_pointer (&r, sandstep_test_result_free);

  decimal = g_strdup_printf ("proxy CONNECT %u:%u int", (10u << 24) | (231u << 16) | (net.subnet << 8) | 2u,
                             ECHO_PORT);
  r = run_attack (nf, handle, decimal);
  attack_assert_line (r, "status=200 reply=echo:int");
  g_clear_pointer (&r, sandstep_test_result_free);

  r = run_attack (nf, handle, "proxy CONNECT db.test:7777 name");
  attack_assert_line (r, "status=403 body=sandstep: db.test is not an allowed host");
  g_clear_pointer (&r, sandstep_test_result_free);

  g_free (target);
  target = g_strdup_printf ("proxy CONNECT [%s]:%u six", net.peer_v6, ECHO_PORT);
  r = run_attack (nf, handle, target);
  attack_assert_line (r, "status=200 reply=echo:six");
  g_assert_cmpint (NEW_HITS (nf, echo), ==, 3);
  g_assert_cmpint (NEW_HITS (nf, echo6), ==, 1);
}

static void
test_tunnel_half_close (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *cidr = g_strdup_printf ("--allow-cidr=%s/32", net.peer_v4);
  g_autofree char *handle = NULL;
  g_autofree char *attack = NULL;
  g_autoptr(SandstepTestResult) r = NULL;

  handle = provision (nf, cidr, NULL);
  attack = g_strdup_printf ("proxy CONNECT %s:%u request halfclose", net.peer_v4, ECHO_PORT);
  r = run_attack (nf, handle, attack);
  attack_assert_line (r, "status=200 reply=echo:request");
  g_assert_cmpint (NEW_HITS (nf, echo), ==, 1);
}

static void
test_cidr_outside_refused (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *cidr = g_strdup_printf ("--allow-cidr=%s/32", net.peer_v4);
  g_autofree char *handle = NULL;
  g_autofree char *target = NULL;
  g_autofree char *reason = NULL;

  handle = provision (nf, cidr, NULL);
  target = g_strdup_printf ("%s:%u", net.host_v4, net.veth_host->port);
  reason = g_strdup_printf ("%s (given as '%s') is in no allowed address range", net.host_v4, net.host_v4);
  assert_refused (nf, handle, "CONNECT", target, reason);
  if (attack_helper_uid (&nf->af) == 0)
    g_assert_cmpint (NEW_HITS (nf, veth_host), ==, 0);
}

typedef struct {
  const char *name;
  const char *host;        /* as resolved by SANDSTEP_TEST_RESOLVE (see net_setup) */
  const char *address;     /* NULL: computed */
  const char *summary;
} RebindCase;

static const RebindCase rebind_cases[] = {
  { "F39-rebind-loopback", "loop.test", "127.0.0.1",
    "an allowed name resolving to 127.0.0.1 is refused (the host's loopback service sees nothing)" },
  { "F39-rebind-test-host", "svc.test", NULL,
    "an allowed name resolving to the private 10.231.X.2 is refused unless a range covers it" },
  { "F39-rebind-metadata", "meta.test", "169.254.169.254",
    "an allowed name resolving to 169.254.169.254 (cloud metadata) is refused" },
  { "F39-rebind-host-own", "own.test", NULL,
    "an allowed name resolving to one of the host's own addresses is refused" },
  { "F39-rebind-v6-loopback", "v6loop.test", "::1", "an allowed name resolving to ::1 is refused" },
  { "F39-rebind-v6-ula", "ula.test", NULL, "an allowed name resolving to fd00:231:X::2 (ULA) is refused" },
};

static void
test_rebinding (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  const RebindCase *c = data;
  g_autofree char *allow = g_strdup_printf ("--allow=%s", c->host);
  g_autofree char *handle = NULL;
  g_autofree char *target = g_strdup_printf ("%s:443", c->host);
  g_autofree char *reason = NULL;
  const char *address = c->address;

  if (address == NULL)
    address = strcmp (c->host, "svc.test") == 0 ? net.peer_v4 : strcmp (c->host, "own.test") == 0 ? net.host_v4
                                                                                                 : net.peer_v6;
  /* Were it dialled, 443 would go to the loopback echo. */
  {
    g_autofree char *port = g_strdup_printf ("%u", net.loopback_https->port);
    sandstep_test_fixture_setenv (f, "SANDSTEP_TEST_HTTPS_PORT", port);
  }
  handle = provision (nf, allow, NULL);
  reason = g_strdup_printf ("%s resolves to %s, an internal address, and no allowed range covers it", c->host,
                            address);
  assert_refused (nf, handle, "CONNECT", target, reason);
  g_assert_cmpint (NEW_HITS (nf, loopback_https), ==, 0);
  g_assert_cmpint (NEW_HITS (nf, https), ==, 0);
}

static void
test_rebind_v4_mapped (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *port = NULL;
  g_autoptr(SandstepTestResult) r = NULL;

  port = g_strdup_printf ("%u", net.loopback_https->port);
  sandstep_test_fixture_setenv (f, "SANDSTEP_TEST_HTTPS_PORT", port);
  handle = provision (nf, "--allow=mapped.test", NULL);
  r = run_attack (nf, handle, "proxy CONNECT mapped.test:443 GET-secret");
  g_test_message ("inside: %s", r->out);
  g_assert_cmpint (NEW_HITS (nf, loopback_https), ==, 0);
  sandstep_test_assert_not_contains (r->out, "status=200");
  sandstep_test_assert_contains (r->out, "status=403");
  sandstep_test_assert_contains (r->err, "egress refused: mapped.test:443");
}

static void
test_rebind_allowed_by_range (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *cidr = g_strdup_printf ("--allow-cidr=10.231.%u.0/24", net.subnet);
  g_autofree char *handle = NULL;
  g_autoptr(SandstepTestResult) r = NULL;

  if (!https_available ())
    return;
  handle = provision (nf, "--allow=svc.test", cidr, NULL);
  r = run_command (nf, handle, "curl -sS -k --max-time 20 https://svc.test/");
  sandstep_test_assert_status (r, 0);
  g_assert_cmpstr (r->out, ==, TLS_BODY);
  g_assert_cmpint (NEW_HITS (nf, https), ==, 1);
}

static void
test_literal_spellings (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  static const struct { const char *target; const char *shown; const char *given; } literals[] = {
    { "2130706433:443", "127.0.0.1", "2130706433" },
    { "0177.0.0.1:443", "127.0.0.1", "0177.0.0.1" },
    { "0x7f.1:443", "127.0.0.1", "0x7f.1" },
    { "127.1:443", "127.0.0.1", "127.1" },
    { "[::ffff:127.0.0.1]:443", "127.0.0.1", "[::ffff:127.0.0.1]" },
    { "[64:ff9b::7f00:1]:443", "64:ff9b::7f00:1", "[64:ff9b::7f00:1]" },
    { "[::1]:443", "::1", "[::1]" },
    { "0xA9.0xFE.0xA9.0xFE:80", "169.254.169.254", "0xA9.0xFE.0xA9.0xFE" },
  };
  g_autofree char *handle = NULL;
  g_autofree char *port = NULL;

  port = g_strdup_printf ("%u", net.loopback_https->port);
  sandstep_test_fixture_setenv (f, "SANDSTEP_TEST_HTTPS_PORT", port);
  handle = provision (nf, "--allow=svc.test", NULL);
  for (gsize i = 0; i < G_N_ELEMENTS (literals); i++)
    {
      g_autofree char *reason = g_strdup_printf ("%s (given as '%s') is in no allowed address range",
                                                 literals[i].shown, literals[i].given);
      assert_refused (nf, handle, "CONNECT", literals[i].target, reason);
    }
  g_assert_cmpint (NEW_HITS (nf, loopback_https), ==, 0);
  g_assert_cmpint (NEW_HITS (nf, loopback), ==, 0);
}

static void
test_unlisted_name (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;

  handle = provision (nf, "--allow=svc.test", NULL);
  assert_refused (nf, handle, "CONNECT", "c2VjcmV0.attacker.tld:443", "c2vjcmv0.attacker.tld is not an allowed host");
}

static void
test_unlisted_name_with_range (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *cidr = g_strdup_printf ("--allow-cidr=10.231.%u.0/24", net.subnet);
  g_autofree char *handle = NULL;

  handle = provision (nf, "--allow=svc.test", cidr, NULL);
  assert_refused (nf, handle, "CONNECT", "c2VjcmV0.attacker.tld:443", "c2vjcmv0.attacker.tld is not an allowed host");
}

static void
test_dns_fails (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  const char *mode = data;
  g_autofree char *handle = NULL;
  g_autofree char *udp = g_strdup_printf ("udp %s 53", net.peer_v4);
  g_autoptr(SandstepTestResult) r = NULL;

  handle = strcmp (mode, "none") == 0 ? provision (nf, "--network=none", NULL) : provision (nf, "--allow=svc.test", NULL);
  r = run_attack (nf, handle, "stat /etc/resolv.conf");
  attack_assert_line (r, "errno=ENOENT");
  g_clear_pointer (&r, sandstep_test_result_free);
  r = run_command (nf, handle, "getent hosts svc.test; echo getent=$?");
  attack_assert_line (r, "getent=2");
  g_clear_pointer (&r, sandstep_test_result_free);
  r = run_attack (nf, handle, udp);
  attack_assert_line (r, "errno=ENETUNREACH");
  g_assert_cmpint (NEW_HITS (nf, dns), ==, 0);
}

static void
test_none_reaches_nothing (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *attack = NULL;
  g_autoptr(SandstepTestResult) r = NULL;

  handle = provision (nf, "--network=none", NULL);
  attack = g_strdup_printf ("connect %s %u", net.peer_v4, ECHO_PORT);
  r = run_attack (nf, handle, attack);
  attack_assert_line (r, "errno=ENETUNREACH");
  g_clear_pointer (&r, sandstep_test_result_free);
  attack = (g_free (attack), g_strdup_printf ("connect %s %u", net.peer_v6, ECHO_PORT));
  r = run_attack (nf, handle, attack);
  attack_assert_line (r, "errno=ENETUNREACH");
  g_clear_pointer (&r, sandstep_test_result_free);
  attack = (g_free (attack), g_strdup_printf ("connect 127.0.0.1 %u", net.loopback->port));
  r = run_attack (nf, handle, attack);
  attack_assert_line (r, "errno=ECONNREFUSED");
  g_clear_pointer (&r, sandstep_test_result_free);
  r = run_attack (nf, handle, "proxy CONNECT svc.test:443");
  attack_assert_line (r, "errno=ECONNREFUSED");
  g_assert_cmpint (NEW_HITS (nf, echo), ==, 0);
  g_assert_cmpint (NEW_HITS (nf, echo6), ==, 0);
  g_assert_cmpint (NEW_HITS (nf, loopback), ==, 0);
}

static void
test_proxy_unaware (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *cidr = g_strdup_printf ("--allow-cidr=10.231.%u.0/24", net.subnet);
  g_autofree char *handle = NULL;
  g_autofree char *attack = NULL;
  g_autoptr(SandstepTestResult) r = NULL;

  handle = provision (nf, "--allow=svc.test", cidr, NULL);
  r = run_attack (nf, handle, "connect 1.1.1.1 443");
  attack_assert_line (r, "errno=ENETUNREACH");
  g_clear_pointer (&r, sandstep_test_result_free);
  attack = g_strdup_printf ("connect %s %u", net.peer_v4, ECHO_PORT);
  r = run_attack (nf, handle, attack);
  attack_assert_line (r, "errno=ENETUNREACH");
  g_clear_pointer (&r, sandstep_test_result_free);
  attack = (g_free (attack), g_strdup_printf ("connect %s %u", net.peer_v6, ECHO_PORT));
  r = run_attack (nf, handle, attack);
  attack_assert_line (r, "errno=ENETUNREACH");
  g_assert_cmpint (NEW_HITS (nf, echo), ==, 0);
  g_assert_cmpint (NEW_HITS (nf, echo6), ==, 0);
}

/* Whether @uid may open /dev/net/tun, which the user-mode network stack of network=open needs. */
static gboolean
tun_usable_by (uid_t uid)
{
  struct stat st;

  if (stat ("/dev/net/tun", &st) < 0)
    return FALSE;
  return (st.st_mode & 0006) == 0006 || (st.st_uid == uid && (st.st_mode & 0600) == 0600);
}

static void
test_open_network (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *attack = NULL;
  g_autofree char *name = g_strdup_printf ("sandstep-net-%d-%08x", (int) getpid (), g_random_int ());
  g_autofree char *command = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  int fd;

  memcpy (addr.sun_path + 1, name, strlen (name));
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  g_assert_cmpint (bind (fd, (struct sockaddr *) &addr, offsetof (struct sockaddr_un, sun_path) + 1 + strlen (name)),
                   ==, 0);
  g_assert_cmpint (listen (fd, 4), ==, 0);
  attack = g_strdup_printf ("connect %s %u", net.peer_v4, ECHO_PORT);
  if (attack_helper_uid (&nf->af) != 0 && !tun_usable_by (attack_helper_uid (&nf->af)))
    {
      /* A host that keeps /dev/net/tun to root: provision refuses in the one clear line, and nothing is made. */
      r = sandstep_test_helper_argv (&nf->af.base, (const char *const[]) { "provision", "--network=open", NULL },
                                     ATTACK_TIMEOUT_S);
      sandstep_test_assert_status (r, 125);
      sandstep_test_assert_contains (r->err, "network=open needs /dev/net/tun for its user-mode network stack, "
                                             "and this user may not open it");
      g_assert_cmpstr (r->out, ==, "");
      close (fd);
      return;
    }
  handle = provision (nf, "--network=open", NULL);
  r = run_attack (nf, handle, attack);
  attack_assert_line (r, "ok");
  g_clear_pointer (&r, sandstep_test_result_free);
  /* Issue 30: the host's address on another interface (a second NIC, docker0, a VPN) is the host too.  The
   * sandbox's own network namespace routes each of the host's addresses to "unreachable" (its commands hold no
   * capability to change that), for every caller: EHOSTUNREACH at once, and the service sees no connection. */
  attack = (g_free (attack), g_strdup_printf ("connect %s %u 3", net.host_v4, net.veth_host->port));
  r = run_attack (nf, handle, attack);
  attack_assert_line (r, "errno=EHOSTUNREACH");
  g_clear_pointer (&r, sandstep_test_result_free);
  attack = (g_free (attack), g_strdup_printf ("connect 127.0.0.1 %u", net.loopback->port));
  r = run_attack (nf, handle, attack);
  attack_assert_line (r, "errno=ECONNREFUSED");
  g_clear_pointer (&r, sandstep_test_result_free);
  attack = (g_free (attack), g_strdup_printf ("connect-abstract %s", name));
  r = run_attack (nf, handle, attack);
  attack_assert_line (r, "errno=ECONNREFUSED");
  g_clear_pointer (&r, sandstep_test_result_free);
  command = g_strdup_printf ("grep -c '@%s' /proc/net/unix || true", name);
  r = run_command (nf, handle, command);
  attack_assert_line (r, "0");
  g_clear_pointer (&r, sandstep_test_result_free);
  r = run_attack (nf, handle, "connect-unix /run/dbus/system_bus_socket");
  attack_assert_line (r, "errno=ENOENT");
  g_assert_cmpint (accept4 (fd, NULL, NULL, SOCK_CLOEXEC), ==, -1);
  close (fd);
  g_assert_cmpint (WAIT_NEW_HITS (nf, echo, 1), >=, 1);
  g_assert_cmpint (NEW_HITS (nf, loopback), ==, 0);
  g_assert_cmpint (NEW_HITS (nf, veth_host), ==, 0);
}

/* Debian 12 as it installs: udev makes /dev/net/tun 0666, so a root helper runs pasta as the sandbox's
 * uid (--runas), and Debian 12's pasta opens its --pid file only after switching to it. */
static void
test_open_network_tun_0666 (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *tun_dir = sandstep_test_host_path (f, "tun");
  g_autofree char *wrapper = sandstep_test_host_path (f, "helper-with-tun-0666");
  g_autofree char *script = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *attack = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  g_autoptr(GError) error = NULL;

  if (geteuid () != 0)
    {
      g_test_skip ("a /dev/net/tun of mode 0666 of this test's own (mknod in a mount namespace) needs root; "
                   "an unprivileged helper runs pasta as itself, with no --runas");
      return;
    }
  if (!g_file_test ("/dev/net/tun", G_FILE_TEST_EXISTS))
    {
      g_test_skip ("this kernel has no /dev/net/tun (CONFIG_TUN), which network=open needs");
      return;
    }
  /* Every helper run, and the supervisor it starts, sees a 0666 tun node of its own over /dev/net/tun,
   * in a mount namespace of its own: the host's node keeps its mode. */
  g_assert_cmpint (mkdir (tun_dir, 0755), ==, 0);
  script = g_strdup_printf ("#!/bin/sh\n"
                            "exec unshare --mount --propagation private /bin/sh -c 'mount -t tmpfs tmpfs \"$0\" && "
                            "mknod -m 0666 \"$0/tun\" c 10 200 && mount --bind \"$0/tun\" /dev/net/tun && "
                            "exec \"$@\"' '%s' '%s' \"$@\"\n",
                            tun_dir, f->helper);
  g_file_set_contents_full (wrapper, script, -1, G_FILE_SET_CONTENTS_NONE, 0755, &error);
  g_assert_no_error (error);
  g_free (f->helper);
  f->helper = g_strdup (wrapper);

  handle = provision (nf, "--network=open", NULL);
  attack = g_strdup_printf ("connect %s %u", net.peer_v4, ECHO_PORT);
  r = run_attack (nf, handle, attack);
  attack_assert_line (r, "ok");
  g_assert_cmpint (WAIT_NEW_HITS (nf, echo, 1), >=, 1);
}

static void
test_host_loopback_from_allow (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *attack = NULL;
  g_autofree char *name = g_strdup_printf ("sandstep-net-%d-%08x", (int) getpid (), g_random_int ());
  g_autoptr(SandstepTestResult) r = NULL;
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  int fd;

  memcpy (addr.sun_path + 1, name, strlen (name));
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  g_assert_cmpint (bind (fd, (struct sockaddr *) &addr, offsetof (struct sockaddr_un, sun_path) + 1 + strlen (name)),
                   ==, 0);
  g_assert_cmpint (listen (fd, 4), ==, 0);
  handle = provision (nf, "--allow=svc.test", NULL);
  attack = g_strdup_printf ("connect 127.0.0.1 %u", net.loopback->port);
  r = run_attack (nf, handle, attack);
  attack_assert_line (r, "errno=ECONNREFUSED");
  g_clear_pointer (&r, sandstep_test_result_free);
  attack = (g_free (attack), g_strdup_printf ("connect-abstract %s", name));
  r = run_attack (nf, handle, attack);
  attack_assert_line (r, "errno=ECONNREFUSED");
  g_clear_pointer (&r, sandstep_test_result_free);
  r = run_attack (nf, handle, "connect-unix /run/dbus/system_bus_socket");
  attack_assert_line (r, "errno=ENOENT");
  g_assert_cmpint (accept4 (fd, NULL, NULL, SOCK_CLOEXEC), ==, -1);
  close (fd);
  g_assert_cmpint (NEW_HITS (nf, loopback), ==, 0);
}

static void
test_families_in_allow (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  static const char *const attacks[][2] = {
    { "socket packet raw 0", "errno=EAFNOSUPPORT" }, { "socket vsock stream 0", "errno=EAFNOSUPPORT" },
    { "socket bluetooth seqpacket 0", "errno=EAFNOSUPPORT" }, { "socket alg seqpacket 0", "errno=EAFNOSUPPORT" },
    { "socket netlink raw 9", "errno=EAFNOSUPPORT" }, { "socket inet raw 1", "errno=EPERM" },
    { "socket inet6 raw 58", "errno=EPERM" },
  };
  g_autofree char *handle = NULL;

  handle = provision (nf, "--allow=svc.test", NULL);
  for (gsize i = 0; i < G_N_ELEMENTS (attacks); i++)
    {
      g_autoptr(SandstepTestResult) r = run_attack (nf, handle, attacks[i][0]);
      attack_assert_line (r, attacks[i][1]);
    }
}

static void
test_relay_abuse (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *target = NULL;
  g_autofree char *reason = NULL;
  g_autoptr(SandstepTestResult) r = NULL;

  handle = provision (nf, "--allow=svc.test", NULL);
  target = g_strdup_printf ("127.0.0.1:%u", net.loopback->port);
  reason = g_strdup_printf ("127.0.0.1 (given as '127.0.0.1') is in no allowed address range");
  assert_refused (nf, handle, "CONNECT", target, reason);
  assert_refused (nf, handle, "CONNECT", "localhost:3128", "localhost is not an allowed host");
  assert_refused (nf, handle, "CONNECT", "svc.test", "the CONNECT target is not HOST:PORT");
  assert_refused (nf, handle, "POST", "/", "plain HTTP (POST /) is not allowed; only HTTPS to allowed hosts");
  r = run_attack (nf, handle, "open /run/sandstep/planted creat");
  attack_assert_line (r, "errno=ENOENT");
  g_clear_pointer (&r, sandstep_test_result_free);
  r = run_attack (nf, handle, "connect 127.0.0.1 3129");
  attack_assert_line (r, "errno=ECONNREFUSED");
  g_clear_pointer (&r, sandstep_test_result_free);
  /* No socket of any kind anywhere in the sandbox's root. */
  r = run_command (nf, handle, "find / -xdev -type s 2>/dev/null | wc -l");
  attack_assert_line (r, "0");
  g_assert_cmpint (NEW_HITS (nf, loopback), ==, 0);
}

static void
test_proxy_socket_private (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *a = NULL;
  g_autofree char *b = NULL;
  g_autofree char *ha = NULL;
  g_autofree char *seconds = sandstep_test_unique_seconds (3);
  g_autofree char *command = NULL;
  g_autofree char *sandbox_dir = NULL;
  g_autofree char *sock = NULL;
  g_autofree char *attack = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  const char *marker[] = { "sleep", seconds, NULL };
  SandstepTestProc *proc;
  struct stat st;

  a = provision (nf, "--allow=svc.test", NULL);
  {
    g_autofree char *holder = g_strconcat (f->holder, "/b", NULL);
    g_autofree char *holder_arg = g_strconcat ("--holder=", holder, NULL);
    b = provision (nf, "--allow=svc.test", holder_arg, NULL);
  }
  g_assert_cmpstr (a, !=, b);
  ha = attack_handle_arg (a);
  sandbox_dir = attack_sandbox_path (&nf->af, a, NULL);
  sock = g_build_filename (sandbox_dir, "supervisor.sock", NULL);
  command = g_strdup_printf ("sleep %s", seconds);
  proc = sandstep_test_spawn (f, "run", ha, "--", command, NULL);
  g_assert_true (sandstep_test_wait_for_process (marker, TRUE, 10));
  g_assert_cmpint (stat (sandbox_dir, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0777, ==, 0700);
  {
    g_autoptr(GDir) dir = g_dir_open (sandbox_dir, 0, NULL);
    const char *name;
    guint sockets = 0;
    g_assert_nonnull (dir);
    while ((name = g_dir_read_name (dir)) != NULL)
      {
        g_autofree char *path = g_build_filename (sandbox_dir, name, NULL);
        if (lstat (path, &st) == 0 && S_ISSOCK (st.st_mode))
          {
            g_assert_cmpstr (name, ==, "supervisor.sock");
            sockets++;
          }
      }
    g_assert_cmpuint (sockets, ==, 1);
  }
  /* B, meanwhile, finds A's socket nowhere. */
  attack = g_strdup_printf ("connect-unix %s", sock);
  r = run_attack (nf, b, attack);
  attack_assert_line (r, "errno=ENOENT");
  g_clear_pointer (&r, sandstep_test_result_free);
  r = sandstep_test_proc_wait (proc, ATTACK_TIMEOUT_S);
  sandstep_test_assert_status (r, 0);
}

static void
test_domain_fronting (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *cidr = g_strdup_printf ("--allow-cidr=%s/32", net.peer_v4);
  g_autofree char *handle = NULL;
  g_autoptr(SandstepTestResult) r = NULL;

  if (!https_available ())
    return;
  handle = provision (nf, "--allow=svc.test", cidr, NULL);
  r = run_command (nf, handle, "curl -sS -k --max-time 20 -H 'Host: not-allowed.example' https://svc.test/");
  sandstep_test_assert_status (r, 0);
  g_assert_cmpstr (r->out, ==, TLS_BODY);
}

static void
test_log_injection (NetFixture *nf, SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *log = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  g_auto(GStrv) lines = NULL;

  handle = provision (nf, "--allow=svc.test", NULL);
  r = run_command (nf, handle,
                   "/data/bin/attack proxy CONNECT \"$(printf 'evil.test\\n2026-01-01T00:00:00Z\\tsandbox=x\\t"
                   "target=svc.test:443\\tallowed\\033[2J:443')\"");
  sandstep_test_assert_status (r, 0);
  sandstep_test_assert_contains (r->out, "status=403");
  log = read_egress_log (nf, handle);
  lines = g_strsplit (log, "\n", -1);
  g_test_message ("egress.log: %s", log);
  g_assert_cmpuint (g_strv_length (lines), ==, 2);   /* one line and the empty rest */
  g_assert_null (strchr (log, '\033'));
  g_assert_null (strchr (r->err, '\033'));
}

/* ---- registration ---- */

/* One case: the runner begins it (skipping where the test host cannot be
 * built), gives its summary, and calls it with the fixture ready and @arg. */
typedef struct {
  const char *name;
  void (*func) (NetFixture *nf, SandstepTestFixture *f, gconstpointer arg);
  gboolean as_user;
  gconstpointer arg;
  const char *summary;
} NetCase;

static const NetCase net_cases[] = {
  { "allowed-host-https", test_allowed_host_https, TRUE, NULL,
    "an allowed host works over HTTPS through the proxy: curl inside (HTTPS_PROXY, CONNECT "
    "svc.test:443) gets the test host's page over TLS; nothing is refused or logged" },
  { "plain-http-refused", test_plain_http_refused, TRUE, NULL,
    "plain HTTP to an allowed host is refused: 403 with the reason line, on stderr and in "
    "egress.log; curl sees the 403" },
  { "allowed-host-other-port", test_allowed_host_other_port, FALSE, NULL,
    "an allowed name is reached on port 443 only: CONNECT svc.test:7777 is refused, saying so" },
  { "allowed-cidr-any-port", test_allowed_cidr_any_port, TRUE, NULL,
    "an allowed range works on an arbitrary port (7777), from the literal, its hex and integer "
    "spellings, and over IPv6 (the test host's /64): bytes flow both ways; an unlisted name that would "
    "resolve into it is refused without a lookup" },
  { "tunnel-half-close", test_tunnel_half_close, FALSE, NULL,
    "bytes flow through a tunnel after the client half-closes (shutdown(SHUT_WR) once its request "
    "is sent, as nc -N does): the server's answer still comes back" },
  { "F34-36-host-services-from-allow", test_host_loopback_from_allow, TRUE, NULL,
    "in allow mode too: the host's loopback TCP services (ECONNREFUSED), its abstract "
    "unix sockets (ECONNREFUSED) and its socket files (ENOENT) are out of reach" },
  { "F37-families-in-allow", test_families_in_allow, FALSE, NULL,
    "in allow mode the socket families stay filtered: packet, vsock, bluetooth, alg, "
    "netlink-audit (EAFNOSUPPORT), raw IP (EPERM)" },
  { "F38-dns-fails-none", test_dns_fails, FALSE, "none",
    "no DNS inside: no resolv.conf, getent fails, a query sent straight to the test "
    "host's port 53 gets ENETUNREACH, and the test host receives no datagram" },
  { "F38-dns-fails-allow", test_dns_fails, TRUE, "allow",
    "no DNS inside: no resolv.conf, getent fails, a query sent straight to the test "
    "host's port 53 gets ENETUNREACH, and the test host receives no datagram" },
  { "F38-unlisted-name", test_unlisted_name, FALSE, NULL,
    "a name not on the allowlist is refused as such (no lookup is made for it)" },
  { "F38-unlisted-name-with-range", test_unlisted_name_with_range, FALSE, NULL,
    "DNS exfiltration through the proxy: with an allowed range configured too, an "
    "unlisted name is refused as not allowed, without a lookup on the host (the refusal must not "
    "say it did not resolve)" },
  { "F39-rebind-v4-mapped", test_rebind_v4_mapped, FALSE, NULL,
    "an allowed name whose address is ::ffff:127.0.0.1 (an AAAA record any DNS server can "
    "return) is refused: the host's loopback service must see no connection" },
  { "F39-rebind-allowed-by-range", test_rebind_allowed_by_range, FALSE, NULL,
    "the same name resolving to 10.231.X.2 is reached once --allow-cidr covers it "
    "(HTTPS through the tunnel, TLS handshake with the test host)" },
  { "F39-cidr-outside-refused", test_cidr_outside_refused, FALSE, NULL,
    "an address outside every allowed range is refused, even next door (the host's end of the veth)" },
  { "F40-literal-spellings", test_literal_spellings, TRUE, NULL,
    "IP literal spellings of loopback and metadata (2130706433, 0177.0.0.1, 0x7f.1, 127.1, "
    "[::ffff:127.0.0.1], [64:ff9b::7f00:1], [::1], hex 169.254.169.254) are refused after "
    "normalisation; the host's loopback service sees nothing" },
  { "F41-domain-fronting", test_domain_fronting, FALSE, NULL,
    "domain fronting is a limitation: the proxy checks the "
    "CONNECT target only, so a Host header naming another site goes through the tunnel unseen" },
  { "F42-proxy-unaware", test_proxy_unaware, TRUE, NULL,
    "a proxy-unaware connect fails closed with ENETUNREACH, even to an allowed range "
    "(only the proxy leads out), and the test host sees nothing" },
  { "F43-relay-abuse", test_relay_abuse, FALSE, NULL,
    "the proxy port leads to the proxy and nowhere else: the host's loopback and garbage "
    "requests get 403; nothing of the proxy's host side (a socket, a directory) is in the sandbox; "
    "3128 is the only port" },
  { "F44-proxy-socket-private", test_proxy_socket_private, FALSE, NULL,
    "there is no credential to steal: the proxy has no socket on any file system, only "
    "the connections the sandbox's init hands it; the sandbox's directory (0700) holds one socket, "
    "its supervisor's, which another sandbox cannot reach" },
  { "none-reaches-nothing", test_none_reaches_nothing, TRUE, NULL,
    "--network=none reaches nothing: not the test host (v4, v6: ENETUNREACH), not the host's "
    "loopback services, and there is no proxy port (ECONNREFUSED)" },
  { "open-reaches-network-not-host", test_open_network, TRUE, NULL,
    "--network=open reaches the network through a user-mode stack of its own: the test host's echo "
    "service answers; the host's address on another interface (EHOSTUNREACH, issue 30), its "
    "loopback TCP services (ECONNREFUSED), its abstract unix sockets "
    "(ECONNREFUSED, and absent from /proc/net/unix) and its socket files (ENOENT) stay out of reach" },
  { "open-tun-0666", test_open_network_tun_0666, FALSE, NULL,
    "--network=open comes up as root where /dev/net/tun is 0666 (udev's default on Debian 12), so that "
    "pasta runs as the sandbox's uid and opens its --pid file as that uid: the test host's echo service "
    "answers" },
  { "refusal-log-injection", test_log_injection, FALSE, NULL,
    "a CONNECT target carrying a newline and terminal escapes is refused as one line: egress.log "
    "gains exactly one line, and neither it nor the helper's stderr carries a raw control "
    "character (no forged log lines, no escape sequences on the user's terminal)" },
};

typedef struct {
  const NetCase *c;
  RunAs as;
} NetVariant;

static void
variant_setup (NetFixture *nf, gconstpointer data)
{
  net_setup (nf, GINT_TO_POINTER (((const NetVariant *) data)->as));
}

static void
case_run (NetFixture *nf, gconstpointer data)
{
  const NetCase *c = ((const NetVariant *) data)->c;
  SandstepTestFixture *f = net_begin (nf);

  g_test_summary (c->summary);
  if (f == NULL)
    return;
  c->func (nf, f, c->arg);
}

static void
add_case (const char *prefix, const NetCase *c, RunAs as)
{
  NetVariant *v = g_new0 (NetVariant, 1);   /* lives as long as the program */
  g_autofree char *path = g_strconcat (prefix, c->name, NULL);

  v->c = c;
  v->as = as;
  g_test_add (path, NetFixture, v, variant_setup, case_run, net_teardown);
}

int
main (int argc, char **argv)
{
  static const struct { const char *prefix; RunAs as; } variants[] = {
    { "/network/as-caller/", AS_CALLER },
    { "/network/as-user/", AS_USER },
  };
  int status;

  g_test_init (&argc, &argv, NULL);
  /* A failed expectation fails its case and the battery goes on: every result reaches the TAP stream. */
  g_test_set_nonfatal_assertions ();
  g_test_add_func ("/egress/parse-literal", test_parse_literal);
  g_test_add_func ("/egress/internal-addresses", test_internal_addresses);
  g_test_add_func ("/egress/internal-v4-mapped", test_internal_v4_mapped);
  g_test_add_func ("/egress/internal-embedded-v4", test_internal_embedded_v4);
  g_test_add_func ("/egress/decide-not-global", test_decide_not_global);
  g_test_add_func ("/egress/decide-rebinding-embedded-v4", test_decide_rebinding_embedded_v4);
  g_test_add_func ("/egress/entries", test_entries);
  g_test_add_func ("/egress/decide-named", test_decide_named);
  g_test_add_func ("/egress/decide-rebinding-v4-mapped", test_decide_rebinding_v4_mapped);
  g_test_add_func ("/egress/decide-wildcard", test_decide_wildcard);
  g_test_add_func ("/egress/decide-literals", test_decide_literals);
  g_test_add_func ("/egress/decide-ranges", test_decide_ranges);
  g_test_add_func ("/egress/decide-no-lookup-of-unlisted-names", test_decide_no_lookup_of_unlisted_names);

  for (gsize v = 0; v < G_N_ELEMENTS (variants); v++)
    {
      for (gsize i = 0; i < G_N_ELEMENTS (net_cases); i++)
        if (variants[v].as == AS_CALLER || net_cases[i].as_user)
          add_case (variants[v].prefix, &net_cases[i], variants[v].as);
      for (gsize i = 0; i < G_N_ELEMENTS (rebind_cases); i++)
        if (variants[v].as == AS_CALLER || i == 0)
          {
            NetCase *c = g_new0 (NetCase, 1);   /* lives as long as the program */

            *c = (NetCase) { rebind_cases[i].name, test_rebinding, i == 0, &rebind_cases[i], rebind_cases[i].summary };
            add_case (variants[v].prefix, c, variants[v].as);
          }
    }

  status = g_test_run ();
  testnet_down ();
  return status;
}
