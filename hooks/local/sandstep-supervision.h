/* sandstep-supervision.h: starting and stopping a sandbox's supervisor, from the helper.
 *
 * The helper compiles the sandbox's plan (sandstep-jail.h) and starts the
 * static `sandstep-supervise` with it (sandstep-supervisor-start.h); a
 * supervisor lock in the sandbox's directory makes sure at most one runs.
 * It keeps the plan beside the record too, from the sandbox's provision
 * on, so that the front can start a supervisor without it.
 */
#pragma once

#include <glib.h>

#include "sandstep-store.h"

G_BEGIN_DECLS

/* A connection to the supervisor of @record's sandbox, started if none
 * runs; -1 with @error when it cannot be started (its build failed). */
int sandstep_supervisor_connect (SandstepStore *store, const SandstepRecord *record, GError **error);

/* Readies a new sandbox for its first command: compiles @record's plan and keeps it beside the record, and
 * makes the supervisor lock.  Without a plan (a spec whose plan fails, a full disk) the first command takes
 * the helper's way, which says what is wrong. */
void sandstep_supervisor_prepare (SandstepStore *store, const SandstepRecord *record);

/* Ends @handle's supervisor, if one runs, and waits until it is gone with its sandbox. */
void sandstep_supervisor_stop (SandstepStore *store, const char *handle);


G_END_DECLS
