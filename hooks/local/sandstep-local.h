/* sandstep-local.h: the local backend's entry points beyond the vtable. */
#pragma once

#include <glib.h>

#include "sandstep-backend.h"
#include "sandstep-store.h"
#include "sandstep-teardown.h"

G_BEGIN_DECLS

/* The one judgement gc and list share: whether the sandbox @handle is
 * alive (SANDSTEP_CONDITION_IDLE, whoever may be using it), expired (its
 * lifetime or a release's keep is over: sandstep_store_is_over()) or broken
 * (its record cannot be loaded, whatever the store's error; @out_problem
 * says it, and @out_over whether gc may reclaim it unasked).  @out_record
 * gets the record unless broken.  FALSE when @handle is gone (destroyed
 * meanwhile). */
gboolean sandstep_local_judge (SandstepStore *store, const char *handle, SandstepCondition *out_condition,
                               gboolean *out_over, SandstepRecord **out_record, char **out_problem);

/* `sandstep-core --reclaim HANDLE`: what a supervisor execs as it ends
 * after the last command of a released sandbox: destroys it. */
int sandstep_local_reclaim_main (const char *handle);

/* `sandstep-core --egress HANDLE`: the egress proxy a supervisor starts for
 * a network=allow sandbox, with init's connections on fd 3 and its notices
 * on fd 4 (sandstep-proxy.h). */
int sandstep_local_egress_main (const char *handle);

G_END_DECLS
