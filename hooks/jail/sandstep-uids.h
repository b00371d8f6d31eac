/* sandstep-uids.h: the host uids a sandbox's uid 0 is.
 *
 * When sandstep runs as root, each sandbox's uid 0 is a host uid of its
 * own, taken from a range reserved for sandboxes: the subordinate ranges of
 * the system user "sandstep" in /etc/subuid and /etc/subgid (reserved
 * once by hand, as the README says), else the fixed range SANDSTEP_UIDS_BASE, 65536
 * ids long.  No file or process of the host belongs to those ids, so a
 * command can change nothing of the host it can see, and whatever the
 * kernel counts per user (processes, inotify watches) counts against the
 * sandbox alone.  Its tree is shown through idmapped mounts, so its files
 * keep their host owner.  Any other user's sandboxes run as that user.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define SANDSTEP_UIDS_USER "sandstep"
#define SANDSTEP_UIDS_BASE 1879048192u   /* 0x70000000: above the ranges systemd hands out to containers */
#define SANDSTEP_UIDS_COUNT 65536u

typedef struct {
  guint32 uid_base;
  guint32 gid_base;
  guint32 count;
} SandstepUidRange;

SandstepUidRange sandstep_uids_range (void);

/* Where slots of the range are leased host-wide (root only): a sandbox's uid is its own among every state
 * directory's, not only its own directory's.  One file per slot, "STATE-DIR\nHANDLE\n"; a lease whose sandbox
 * no longer exists (destroyed, or its state directory removed by hand) is free again.  The test hook
 * SANDSTEP_TEST_UIDS_DIR names another directory, SANDSTEP_TEST_UID_SLOT the slot a probe starts at. */
#define SANDSTEP_UIDS_LEASES_DIR "/var/lib/sandstep-uids"

/* The host-wide leases, locked for one provision; NULL where they cannot be kept (only the caller's own state
 * directory then counts). */
typedef struct _SandstepUidLeases SandstepUidLeases;
SandstepUidLeases *sandstep_uids_leases_lock (void);
void sandstep_uids_leases_unlock (SandstepUidLeases *leases);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepUidLeases, sandstep_uids_leases_unlock)
/* Whether @slot is leased to a sandbox that exists (in any state directory). */
gboolean sandstep_uids_leases_held (SandstepUidLeases *leases, guint32 slot);
/* Leases @slot to @handle of @state_dir (absolute). */
void sandstep_uids_leases_write (SandstepUidLeases *leases, guint32 slot, const char *state_dir, const char *handle);
/* Where a provision's probe starts: @preferred, unless the test hook SANDSTEP_TEST_UID_SLOT says otherwise. */
guint32 sandstep_uids_first_slot (guint32 preferred);

/* Whether @dir's file system can be shown through an idmapped mount here. */
gboolean sandstep_uids_idmap_works (const char *dir);

G_END_DECLS
