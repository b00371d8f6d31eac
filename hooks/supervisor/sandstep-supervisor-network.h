/* sandstep-supervisor-network.h: a live sandbox's network helpers, which its supervisor starts beside the jail
 * (sandstep-supervisor-sandbox.c) and ends with it: pasta, the user-mode network stack of network=open (as root
 * behind a host-side rule that keeps it from the host's own addresses), and the egress proxy of network=allow.
 * Each runs with @env, nothing else of the supervisor's but the fds it is given, and dies with the supervisor.
 */
#pragma once

#include <glib.h>

#include "sandstep-jail.h"

/* A helper process: its pid and pidfd (-1: none). */
typedef struct {
  int pid;
  int pidfd;
} SupervisorChild;

/* Kills and reaps @child, if there is one. */
void sandstep_supervisor_child_end (SupervisorChild *child);

/* Joins the network namespace of @jail's init (@init_pid) to a user-mode stack on the host side (@pasta_path),
 * into *@out, once it is up. */
gboolean sandstep_supervisor_start_pasta (const char *pasta_path, char **env, int init_pid, SandstepJail *jail,
                                          SupervisorChild *out, GError **error);

/* Starts the egress proxy of @handle (sandstep-core at @core_path) into *@out: *@out_egress is the socket init
 * hands it connections on (for sandstep_jail_build(), then the caller's to close), *@out_notices the pipe of its
 * refusal lines. */
gboolean sandstep_supervisor_start_proxy (const char *core_path, char **env, const char *handle,
                                          SupervisorChild *out, int *out_notices, int *out_egress, GError **error);
