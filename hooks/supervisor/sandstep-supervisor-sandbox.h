/* sandstep-supervisor-sandbox.h: the live sandbox a supervisor keeps: its plan, its jail (built, or adopted from the
 * front), its cgroup, its init, the sources it was built from, and its network helpers (pasta, the egress proxy and
 * its notices).
 *
 * Its fields are sandstep-supervisor-sandbox.c's alone: the supervisor's loop and its commands use it through the
 * functions below, and what else they need of the plan comes out once, as SupervisorTerms.
 */
#pragma once

#include <glib.h>

#include "sandstep-jail.h"
#include "sandstep-jail-start.h"

typedef struct _SupervisorSandbox SupervisorSandbox;

/* What a sandbox's plan says beside its jail: who may use it and the terms its commands run under. */
typedef struct {
  char *owner;
  char *default_owner;
  char *default_holder;
  guint64 memory;           /* the limits a command's status reports */
  gint64 pids, cpu_time_s;
  guint64 disk;
  gboolean retry_clean;     /* --retry=clean: a make recipe's lines go through the helper (FALLBACK), which keeps
                             * the target's checkpoint (sandstep-local-fork.c) */
  char *core_path;          /* sandstep-core, which reclaims a released sandbox */
  char **helper_env;        /* what the supervisor's helpers run with */
} SupervisorTerms;

/* Reads the plan at SANDSTEP_SUPERVISOR_PLAN_FD (and closes it) for the sandbox @handle, whose directory is @dir_fd
 * (borrowed; init is noted there), and fills *@out_terms.  The sandbox takes *@adopt, the jail the front started
 * (none when its pidfd is -1), leaving none there; on failure *@adopt stays the caller's. */
SupervisorSandbox *sandstep_supervisor_sandbox_load (const char *handle, int dir_fd, SandstepJailStart *adopt,
                                                     SupervisorTerms *out_terms, GError **error);
/* Ends the sandbox and its helpers; its cgroup stays made (sandstep_cgroup_remove()). */
void sandstep_supervisor_sandbox_free (SupervisorSandbox *sandbox);

/* The uid the sandbox's processes have on the host. */
guint32 sandstep_supervisor_sandbox_outer_uid (SupervisorSandbox *sandbox);

/* Builds it (adopting the front's jail if there is one), ending whatever was there. */
gboolean sandstep_supervisor_sandbox_build (SupervisorSandbox *sandbox, GError **error);
/* The front's jail, if it was not adopted, is of no use: killed and reaped. */
void sandstep_supervisor_sandbox_abandon_start (SupervisorSandbox *sandbox);
/* Is it there, as it should be for the next command?  If not, built again; a failed build leaves it stale. */
gboolean sandstep_supervisor_sandbox_ready (SupervisorSandbox *sandbox, GError **error);
/* Its init and network helpers run, and nothing marked it stale: commands may begin in it as it is. */
gboolean sandstep_supervisor_sandbox_live (SupervisorSandbox *sandbox);
/* To be built again before the next command. */
void sandstep_supervisor_sandbox_mark_stale (SupervisorSandbox *sandbox);
/* Kills its init, and with it every process of the sandbox. */
void sandstep_supervisor_sandbox_end_init (SupervisorSandbox *sandbox);

/* The fds a loop waits on: init's control socket, init's pidfd, the egress proxy's notices (-1 when none). */
int sandstep_supervisor_sandbox_control_fd (SupervisorSandbox *sandbox);
int sandstep_supervisor_sandbox_init_pidfd (SupervisorSandbox *sandbox);
int sandstep_supervisor_sandbox_notices_fd (SupervisorSandbox *sandbox);

/* Hands init @command, named @id, with the caller's environment as the jail passes it on and the caller's
 * @stdio; @beside: to run beside the commands init runs (else init refuses it while any does). */
gboolean sandstep_supervisor_sandbox_run (SupervisorSandbox *sandbox, gint32 id, gboolean beside, const char *command,
                                          char **caller_env, const int stdio[3]);
/* Tells init to kill command @id. */
void sandstep_supervisor_sandbox_kill (SupervisorSandbox *sandbox, gint32 id);
/* The cgroup's OOM kills and hits of its pids limit so far (0 without a cgroup). */
void sandstep_supervisor_sandbox_counters (SupervisorSandbox *sandbox, guint64 *out_oom_kills, guint64 *out_pids_max);

typedef enum {
  SUPERVISOR_INIT_QUIET,    /* nothing to read */
  SUPERVISOR_INIT_EXITED,   /* command *@out_id ended: *@out_status, *@out_exec_error */
  SUPERVISOR_INIT_LOST,     /* init is gone or says nonsense: the sandbox is stale */
} SupervisorInitEvent;

/* What init says on its control socket. */
SupervisorInitEvent sandstep_supervisor_sandbox_read_init (SupervisorSandbox *sandbox, gint32 *out_id,
                                                           int *out_status, int *out_exec_error);

typedef void (*SupervisorNoticeFunc) (const char *line, gpointer user_data);
/* Reads the egress proxy's refusals and gives each whole line to @say; a proxy that ended leaves the sandbox stale. */
void sandstep_supervisor_sandbox_read_notices (SupervisorSandbox *sandbox, SupervisorNoticeFunc say,
                                               gpointer user_data);
