/* sandstep-egress.h: the egress allowlist of a sandbox (network=allow).
 *
 * A command reaches the network only through the host-side proxy, which asks
 * this policy about every CONNECT.  Allowed hosts are reached over HTTPS on
 * port 443 only; allowed address ranges on any port.  A name resolves only
 * on the host, and an allowed name whose addresses are loopback, link-local,
 * private or the host's own is refused (DNS rebinding) unless an allowed
 * range covers that address.  IP literals are normalised (127.1, 0x7f.0.0.1,
 * 2130706433, ::ffff:127.0.0.1) before any check, and an IPv6 address that
 * carries an IPv4 one (IPv4-compatible, mapped, NAT64, 6to4, Teredo) is
 * judged as the IPv4 address it carries.
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

/* The proxy's line for a refused connection, as a command's caller gets it
 * (SandstepRunRequest.on_notice): "egress refused: TARGET: REASON". */
#define SANDSTEP_EGRESS_NOTICE_PREFIX "egress refused: "

/* A refusal line (SANDSTEP_EGRESS_NOTICE_PREFIX ...) in the words a model
 * reads after a command's result: "[network: refused example.org:443: not in
 * the allowlist]"; the reasons sandstep_egress_decide() and the proxy give
 * are shortened to what the model can act on, any other is kept whole.
 * NULL for a line that is no refusal. */
char *sandstep_egress_notice_for_model (const char *notice);

/* Parses an IP literal in any spelling inet_aton or inet_pton accepts, with
 * IPv4-mapped IPv6 turned into IPv4; NULL for a name. */
GInetAddress *sandstep_egress_parse_literal (const char *text);

/* The IPv4 addresses an IPv6 @address carries, into @out (new references):
 * ::a.b.c.d (IPv4-compatible), ::ffff:a.b.c.d (mapped), NAT64's
 * 64:ff9b::/96 (the last 32 bits) and the local-use 64:ff9b:1::/48 (the last
 * 32 bits, or bits 48-63 and 72-87 for a /48 prefix: both are taken), 6to4's
 * 2002::/16 (bits 16-47), Teredo's 2001:0::/32 (the server, bits 32-63, and
 * the client, the last 32 bits inverted).  Returns how many (0 to 2); 0 for
 * an IPv4 address, ::, ::1 and every other IPv6 address. */
guint sandstep_egress_embedded_ipv4 (GInetAddress *address, GInetAddress *out[2]);

/* Every address that is not globally reachable (loopback, link-local,
 * private, shared, multicast, unspecified, documentation, and for IPv6
 * anything outside global unicast 2000::/3), or one of this host's own
 * addresses; an IPv6 address that carries an IPv4 one is internal when that
 * IPv4 address is (either, when it carries two). */
gboolean sandstep_egress_address_is_internal (GInetAddress *address);

/* Whether @address is one of this host's interfaces' addresses now. */
gboolean sandstep_egress_address_is_own (GInetAddress *address);

G_END_DECLS
