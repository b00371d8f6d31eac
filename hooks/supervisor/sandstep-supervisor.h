/* sandstep-supervisor.h: one live sandbox's supervisor.
 *
 * A sandbox in use is live: one set of namespaces held by its supervisor,
 * a small static service (`sandstep --supervisor HANDLE`, started by the
 * sandbox's first command: sandstep-supervisor-start.h).  It builds the
 * sandbox once (sandstep-jail.h) and then runs each command it is asked
 * for (sandstep-run-wire.h) as a fresh process tree under the sandbox's
 * init, claiming the sandbox for it as any step does, enforcing its budget,
 * and reporting its status and the limits it ran into.  It keeps the
 * user-mode network stack of an open sandbox and the egress proxy of an
 * allowlisted one.  It ends after SANDSTEP_SUPERVISOR_IDLE_S without a
 * command, when the sandbox expires, is destroyed or released, or on
 * SIGTERM; a later command starts a new one.
 *
 * Its process state is its own (umask, nice value, CPU affinity, resource
 * limits, environment), never that of the caller that started it.
 */
#pragma once

#include <glib.h>

#include "sandstep-run-wire.h"
#include "sandstep-supervisor-start.h"

G_BEGIN_DECLS

#define SANDSTEP_SUPERVISOR_IDLE_S 30


/* Serves @handle until the supervisor has no reason to live, adopting the
 * jail its starter gave it (@jail_pid, at the fds sandstep-supervisor-start.h
 * names; 0: none).  Returns the exit status of the supervisor. */
int sandstep_supervisor_main (const char *handle, int jail_pid);

/* --network=open's one rule of the host: its user-mode stack opens /dev/net/tun as the caller, unless the
 * caller is root (the stack then runs as root where the host keeps tun to root).  FALSE, with the line the user
 * sees, where this user may not open it: provision refuses then, and so does a command's start. */
gboolean sandstep_network_open_usable (GError **error);

/* A caller's request as the supervisor reads it (sandstep-run-wire.h). */
typedef struct {
  const char *field[SANDSTEP_RUN_FIELDS];
  GPtrArray *env;             /* the NAME=VALUE strings after the fields, NULL-terminated */
  gboolean have_timeout;
  double wait_s, timeout_s;   /* when given */
} SandstepSupervisorRequest;

/* Reads the @size bytes of a request at @buf, which has room for one more: FALSE unless they hold every field,
 * this build's magic and, where given, a wait and a timeout that `sandstep run` would take as they are (any
 * other goes to the core, which says what is wrong).  The strings point into @buf; @out->env is the caller's to
 * free, also on FALSE.  The bytes come from any process of this user: nothing in them is trusted. */
gboolean sandstep_supervisor_parse_request (char *buf, gsize size, SandstepSupervisorRequest *out);

G_END_DECLS
