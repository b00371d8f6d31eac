/* sandstepd-envd.h: what sandstepd-envd.c and sandstepd-envd-commands.c share (E2B's envd). */
#pragma once

#include "sandstepd-private.h"

G_BEGIN_DECLS

/* Registers the command that @lease runs in @handle, started with @process (StartRequest.process; it keeps a
 * reference) and @tag (NULL: none), until @lease ends; returns its pid, which the SDK names it by. */
guint32 sandstepd_envd_command_add (const char *handle, JsonObject *process, const char *tag, Lease *lease);
/* ListResponse of process.proto: the commands of @handle that still run. */
JsonObject *sandstepd_envd_command_list (const char *handle);
/* Kills the command of @handle that @selector ({"pid": N} or {"tag": T}) names; FALSE when none runs. */
gboolean sandstepd_envd_command_kill (const char *handle, JsonObject *selector);

G_END_DECLS
