/* sandstep-local.h: what the local backend shares with its launcher. */
#pragma once

#include "sandstep-jail.h"
#include "sandstep-store.h"

G_BEGIN_DECLS

/* The jail of @record's sandbox, its /etc made on first use. */
SandstepJail *sandstep_local_jail_new (SandstepStore *store, const SandstepRecord *record, GError **error);

G_END_DECLS
