/* sandstep-uid-slots.h: which sandbox of a state directory holds each uid.
 *
 * As root each sandbox's uid 0 is a host uid of its own (sandstep-uids.h).  Which sandbox holds which is a
 * symbolic link per slot, "uids/SLOT" -> HANDLE, in the state directory: a provision takes a slot by making its
 * link, and reads one link or a few, never every other sandbox's record (issue 33: no scan of every sandbox on
 * a hot path).  A link whose sandbox is gone is a free slot; destroy removes its own.
 */
#pragma once

#include <glib.h>

#include "sandstep-store.h"

G_BEGIN_DECLS

/* As root, where the state directory can be idmapped: a uid of its own for @record (its uid and gid set), under
 * the provision lock.  Otherwise, or with every slot taken, @record is left as it is. */
void sandstep_uid_slot_take (SandstepStore *store, SandstepRecord *record);

/* Frees @record's slot, if its link is still @record's. */
void sandstep_uid_slot_forget (SandstepStore *store, const SandstepRecord *record);

G_END_DECLS
