/* sandstep-teardown.h: a sandbox torn down whole.
 *
 * The one function above the store, the supervisor and the cgroup: the
 * store knows nothing of supervisors and cgroups, so destroying a sandbox
 * (destroy, release, gc, a failed provision, a supervisor's reclaim) is here.
 */
#pragma once

#include <glib.h>

#include "sandstep-store.h"

G_BEGIN_DECLS

/* Destroys a sandbox whole: its supervisor (and every process of it), the
 * holder of its claim, its directory, its cgroup.  Gone already is fine. */
gboolean sandstep_sandbox_destroy (SandstepStore *store, const char *handle, int claim_fd, GError **error);

G_END_DECLS
