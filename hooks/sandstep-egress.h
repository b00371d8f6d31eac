/* sandstep-egress.h: the egress allowlist of a sandbox (network=allow).
 *
 * A command reaches the network only through the host-side proxy, which asks
 * this policy about every CONNECT.  Allowed hosts are reached over HTTPS on
 * port 443 only; allowed address ranges on any port.  A name resolves only
 * on the host, and an allowed name whose addresses are loopback, link-local,
 * private or the host's own is refused (DNS rebinding) unless an allowed
 * range covers that address.  IP literals are normalised (127.1, 0x7f.0.0.1,
 * 2130706433, ::ffff:127.0.0.1) before any check.
 */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

typedef struct _SandstepEgress SandstepEgress;

/* @hosts: names, or "*.example.com" for every name under example.com.
 * @cidrs: "10.0.0.0/8", "2001:db8::/32"; host bits must be zero. */
SandstepEgress *sandstep_egress_new (GPtrArray *hosts, GPtrArray *cidrs, GError **error);
void sandstep_egress_free (SandstepEgress *egress);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepEgress, sandstep_egress_free)

/* Checks one host name (as given in the proxy request) for validity as an allowlist entry. */
gboolean sandstep_egress_check_host_entry (const char *host, GError **error);
gboolean sandstep_egress_check_cidr_entry (const char *cidr, GError **error);

/* Resolves @host with the system resolver, or with SANDSTEP_TEST_RESOLVE
 * ("name=address,...", tests only; read from the helper's own environment,
 * which nothing inside a sandbox can set). */
typedef GList *(*SandstepResolveFunc) (const char *host, GError **error);

/* Decides a CONNECT to @host:@port.  On success returns the addresses that
 * may be dialled (GInetAddress, in order).  On refusal returns NULL and sets
 * *out_reason to one line naming the rule. */
GList *sandstep_egress_decide (SandstepEgress *egress, const char *host, guint16 port, SandstepResolveFunc resolve,
                               char **out_reason);

/* Parses an IP literal in any spelling inet_aton or inet_pton accepts, with
 * IPv4-mapped IPv6 turned into IPv4; NULL for a name. */
GInetAddress *sandstep_egress_parse_literal (const char *text);

/* Loopback, link-local, private, shared, multicast, unspecified, or one of
 * this host's own addresses. */
gboolean sandstep_egress_address_is_internal (GInetAddress *address);

G_END_DECLS
