/* sandstep-store-private.h: what the store's two files share (sandstep-store.c, sandstep-claim.c). */
#pragma once

#include <sys/stat.h>

#include "sandstep-store.h"

G_BEGIN_DECLS

/* SANDSTEP_SANDBOX_ERROR_NOT_FOUND for @handle, naming the state directory. */
gboolean sandstep_store_not_found (SandstepStore *store, GError **error, const char *handle);

/* SANDSTEP_SANDBOX_ERROR_BROKEN: "Sandbox 'H' is damaged: <what>; destroy it ...". */
gboolean sandstep_store_broken (GError **error, const char *handle, const char *format, ...) G_GNUC_PRINTF (3, 4);

G_END_DECLS
