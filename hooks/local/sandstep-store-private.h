/* sandstep-store-private.h: what the store's two files share (sandstep-store.c, sandstep-claim.c). */
#pragma once

#include <sys/stat.h>

#include "sandstep-store.h"

G_BEGIN_DECLS

/* SANDSTEP_SANDBOX_ERROR_NOT_FOUND for @handle, naming the state directory. */
gboolean sandstep_store_not_found (SandstepStore *store, GError **error, const char *handle);

/* SANDSTEP_SANDBOX_ERROR_BROKEN: "Sandbox 'H' is damaged: <what>; destroy it ...". */
gboolean sandstep_store_broken (GError **error, const char *handle, const char *format, ...) G_GNUC_PRINTF (3, 4);

/* The claim file of @handle, opened read-write without blocking; a missing
 * sandbox is NOT_FOUND, a claim file that is missing or not a regular file BROKEN. */
int sandstep_store_open_claim (SandstepStore *store, const char *handle, struct stat *out_st, GError **error);

/* Waits for the claim on @fd, ending its holder (SIGTERM, then SIGKILL) if it does not let go. */
gboolean sandstep_store_take_claim_by_force (int fd, const char *handle, GError **error);

G_END_DECLS
