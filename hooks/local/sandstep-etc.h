/* sandstep-etc.h: the jail's /etc, made once per sandbox.
 *
 * The files a command commonly needs (passwd and group of the jail's own,
 * hosts, and an allowlist of the host's: ld.so.cache, nsswitch.conf, ...)
 * are copied into the sandbox's state directory on its first command and
 * bound read-only as /etc from then on: a command costs one bind, not a
 * read of every file in the helper and a write of it in the jail.  The
 * allowlisted host directories (ssl/certs, alternatives, ...) stay live:
 * the copy holds an empty directory where each is bound.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The jail's hostname, also in its /etc/hostname and /etc/hosts. */
#define SANDSTEP_JAIL_HOSTNAME "sandstep"

/* Creates @dir (absent: built beside it, renamed into place whole) unless it
 * exists.  resolv.conf is copied only with @open_network: elsewhere DNS is
 * meant to fail. */
gboolean sandstep_etc_prepare (const char *dir, gboolean open_network, GError **error);

/* Calls @bind for each host path that is bound live at /etc/NAME over the copy. */
typedef void (*SandstepEtcBindFunc) (const char *host_path, gboolean is_dir, gpointer user_data);
void sandstep_etc_foreach_live (SandstepEtcBindFunc bind, gpointer user_data);

G_END_DECLS
