/* sandstep-jail.h: a live sandbox's namespaces, built once and run in.
 *
 * A jail is compiled in the helper from the sandbox's spec (paths checked,
 * /etc read, limits and environment worked out: sandstep-jail-plan.h) and
 * handed to the sandbox's supervisor as its image (sandstep-jail-image.h)
 * and a GVariant.  It is built once, by the supervisor or, for a sandbox's
 * first command, by the front that starts the supervisor
 * (sandstep-jail-start.h): one clone() makes the user, mount, pid, ipc and
 * uts namespaces, the child its network namespace (an open network is
 * joined to the outside by a user-mode network stack); the child
 * builds a tmpfs root with read-only /usr and /etc, the persistent
 * /workspace and /tmp, a minimal /dev and its own /proc, pivots into it,
 * drops every privilege and execs sandstep-init as the sandbox's pid 1.
 * Commands then run as fresh process trees under that init
 * (sandstep-jail-init.h) until the supervisor ends it.
 *
 * The sandbox's uid 0 is an unprivileged host uid: as root, one reserved
 * for the sandbox (sandstep-uids.h), with its tree shown through idmapped
 * mounts so that the files keep their owner on the host; as another user,
 * that user's uid.
 */
#pragma once

#include <glib.h>
#include <sys/types.h>

#include "sandstep-jail-image.h"
#include "sandstep-jail-start.h"

G_BEGIN_DECLS

typedef struct _SandstepJail SandstepJail;

/* The compiler's output: the jail's image with @seccomp (the whole plan file begins with it), and the rest,
 * which only the supervisor reads. */
GBytes *sandstep_jail_to_image (SandstepJail *jail, GBytes *seccomp);
GVariant *sandstep_jail_to_variant (SandstepJail *jail);

/* The supervisor side: the jail of a plan whose image (checked: sandstep_jail_image_check()) is @image, in
 * memory that outlives the jail, and whose "jail" member is @plan. */
SandstepJail *sandstep_jail_from_variant (const SandstepJailImage *image, GVariant *plan, GError **error);
void sandstep_jail_free (SandstepJail *jail);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepJail, sandstep_jail_free)

/* What the supervisor adds around the namespaces: a user-mode network stack
 * (network=open) or the egress proxy (network=allow), run as the sandbox's host uid. */
gboolean sandstep_jail_open_network (SandstepJail *jail);
/* A layered sandbox's jail: init's cwd is its files' overlay (sandstep-jail-plan.c). */
gboolean sandstep_jail_layered (SandstepJail *jail);
gboolean sandstep_jail_egress (SandstepJail *jail);
void sandstep_jail_outer_ids (SandstepJail *jail, guint32 *out_uid, guint32 *out_gid);

/* A built sandbox: its init, and the socket that tells init what to run. */
typedef struct {
  int pid;                   /* in the builder's pid namespace */
  int pidfd;
  int control;
} SandstepJailProcess;

/* Puts the jail's child (@pid) into the sandbox's cgroup before it
 * starts, so that everything of the sandbox is born inside: moves it, or
 * gives in @out_fds (up to SANDSTEP_JAIL_MAX_CGROUP_FDS, *@out_n_fds of
 * them, closed by the caller) the files it moves itself in with
 * (sandstep_jail_start_in_cgroup()).  Not called for a child born in it. */
typedef gboolean (*SandstepJailAttachFunc) (int pid, int *out_fds, guint *out_n_fds, gpointer user_data,
                                            GError **error);

/* Builds the sandbox and starts its init; @egress_fd (network=allow, else
 * -1) is where init hands the connections made to the proxy port;
 * @cgroup_fd: the sandbox's cgroup v2 directory to start it in, or -1
 * (sandstep_jail_start()).  The caller must be single-threaded. */
gboolean sandstep_jail_build (SandstepJail *jail, int egress_fd, int cgroup_fd, SandstepJailAttachFunc attach,
                              gpointer user_data, SandstepJailProcess *out, GError **error);

/* Whether the plan may be used after all, asked while the child finishes: FALSE ends it unused. */
typedef gboolean (*SandstepJailCheckFunc) (gpointer user_data, GError **error);

/* The same, for a child that sandstep_jail_start() started elsewhere on this jail's image (the front that
 * started this supervisor): from its cgroup on, with @check once it is in it.  Takes @start's fds, whatever
 * the outcome. */
gboolean sandstep_jail_adopt (SandstepJail *jail, SandstepJailStart *start, SandstepJailAttachFunc attach,
                              SandstepJailCheckFunc check, gpointer user_data, SandstepJailProcess *out,
                              GError **error);

/* Kills the sandbox's init, and with it every process of the sandbox, and reaps it. */
void sandstep_jail_end (SandstepJailProcess *process);

/* Identity of the host paths the sandbox binds, as they are now: a
 * sandbox built before one was replaced (a data mount rebuilt by a step)
 * would show the old one. */
GArray *sandstep_jail_sources (SandstepJail *jail);
gboolean sandstep_jail_sources_equal (GArray *a, GArray *b);

/* A command's environment: the jail's, with the terminal and locale of
 * @caller_env (NAME=VALUE), the spec's own variables winning.  The
 * strings are borrowed from @jail and @caller_env; not NULL-terminated. */
GPtrArray *sandstep_jail_environment (SandstepJail *jail, char **caller_env);

/* init's arguments for @command: its words directly when the shell would
 * only exec them (--try WORD... --), then `/bin/sh -c COMMAND`. */
GPtrArray *sandstep_jail_command_argv (const char *command);

G_END_DECLS
