/* sandstep-etc.h: what a sandbox's /etc holds.
 *
 * A sandbox's /etc is its own, written into its root when it is built: a
 * passwd and group of its own, hosts, hostname, and copies of an allowlist
 * of the host's files a command commonly needs (ld.so.cache,
 * nsswitch.conf, ...).  The allowlisted host directories (ssl/certs,
 * alternatives, ...) and files too large to copy are bound live instead.
 * Nothing else of the host's /etc (shadow, keys, ssl/private, credentials)
 * is there.
 */
#pragma once

#include <glib.h>
#include <sys/stat.h>

#include "sandstep-jail-image.h"

G_BEGIN_DECLS

/* Receives /etc entry by entry, parents first; NAME is relative to /etc. */
typedef struct {
  void (*file) (const char *name, GBytes *content, guint mode, gpointer user_data);
  void (*directory) (const char *name, gpointer user_data);
  void (*symlink) (const char *name, const char *target, gpointer user_data);
  /* A host path to bind live at the same place. */
  void (*live) (const char *host_path, gboolean is_dir, gpointer user_data);
  /* Each host path, as @seen (lstat, before it is read; NULL: absent) shows it: what the result was made
   * from; @copied: its content is (else it is bound live, or absent). */
  void (*input) (const char *host_path, const struct stat *seen, gboolean copied, gpointer user_data);
} SandstepEtcSink;

/* A sandbox's /etc/hosts, whatever its root: its own name and loopback's. */
#define SANDSTEP_ETC_HOSTS \
  "127.0.0.1\tlocalhost " SANDSTEP_JAIL_HOSTNAME "\n" \
  "::1\tlocalhost ip6-localhost ip6-loopback\n"

/* resolv.conf comes only with @open_network: elsewhere DNS is meant to fail. */
void sandstep_etc_build (gboolean open_network, const SandstepEtcSink *sink, gpointer user_data);

G_END_DECLS
