/* sandstep-jail.h: one command in a fresh Linux jail over a persistent tree.
 *
 * A jail is prepared once (paths opened, strings and the seccomp program
 * built) and can then spawn any number of commands; each spawn is a fresh
 * set of namespaces (user, mount, pid, ipc, uts, cgroup, and net unless the
 * network is open).  Between clone and exec the child only makes system
 * calls on data prepared here: no allocation, no locks.
 */
#pragma once

#include <glib.h>
#include <sys/types.h>

#include "sandstep-backend.h"
#include "sandstep-spec.h"

G_BEGIN_DECLS

typedef struct _SandstepJail SandstepJail;

typedef struct {
  const char *workspace;     /* host directory seen as /workspace (cwd, HOME) */
  const char *tmp;           /* host directory seen as /tmp */
  const char *etc_dir;       /* the sandbox's /etc, made by sandstep_etc_prepare() */
  const SandstepSpec *spec;  /* network, env, secrets, mounts, limits */
  gboolean memory_by_rlimit; /* no cgroup limits the command's memory: bound each process */
  const char *proxy_dir;     /* network=allow: host directory holding proxy.sock */
} SandstepJailConfig;

/* Inside a network=allow jail: where programs find the egress proxy. */
#define SANDSTEP_PROXY_PORT "3128"
#define SANDSTEP_PROXY_URL "http://127.0.0.1:" SANDSTEP_PROXY_PORT

typedef struct {
  int pid;                   /* in the caller's pid namespace: the jail's init */
  int pidfd;
} SandstepJailProcess;

SandstepJail *sandstep_jail_new (const SandstepJailConfig *config, GError **error);
void sandstep_jail_free (SandstepJail *jail);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepJail, sandstep_jail_free)

/* Starts `/bin/sh -c COMMAND` in the jail with the given standard fds.
 * Returns once the command has been exec'd, or with the setup step that failed. */
gboolean sandstep_jail_spawn (SandstepJail *jail, const char *command, int stdin_fd, int stdout_fd, int stderr_fd,
                              SandstepJailProcess *out_process, GError **error);

/* A jail built ahead of its command: namespaces, mounts and hardening done,
 * its init waiting on @control for the command.  Never for network=allow. */
#define SANDSTEP_JAIL_MAX_SOURCES 96

typedef struct {
  SandstepJailProcess process;
  int control;
  int report;
  /* The host paths it binds, as they were when it was built. */
  int n_sources;
  struct { dev_t dev; ino_t ino; } sources[SANDSTEP_JAIL_MAX_SOURCES];
} SandstepJailReady;

gboolean sandstep_jail_prepare (SandstepJail *jail, SandstepJailReady *out_ready, GError **error);

/* Hands @command and @stdio to the init of @ready, which is used up: like
 * sandstep_jail_spawn(), with the terminal and locale of @caller_env.
 * @out_status_fd delivers the command's exit status (an int32, 128+N for
 * signal N) once every process of the jail is gone, before the namespaces
 * are torn down; EOF if init was killed. */
gboolean sandstep_jail_start (SandstepJail *jail, SandstepJailReady *ready, const char *command, const int stdio[3],
                              char **caller_env, SandstepJailProcess *out_process, int *out_status_fd,
                              GError **error);

/* FALSE when a host path @ready binds (a data mount, /etc, /usr) has been
 * replaced since it was built: its command would see the old one. */
gboolean sandstep_jail_ready_current (SandstepJail *jail, const SandstepJailReady *ready);

/* Kills and reaps a jail that got no command. */
void sandstep_jail_ready_clear (SandstepJailReady *ready);

/* Waits until the command ends or @deadline (g_get_monotonic_time() µs; 0:
 * none) passes; then kills the whole jail.  @out_exit is the command's exit
 * status, 128+N when a signal N ended it. */
gboolean sandstep_jail_wait (SandstepJailProcess *process, gint64 deadline, int *out_exit, gboolean *out_timed_out,
                             GError **error);

/* Like sandstep_jail_wait(), while handing what arrives on @out_fd and
 * @err_fd (read ends of the command's pipes, taken over and closed) to
 * @on_output as it comes; the last bytes are read after the jail ends. */
gboolean sandstep_jail_wait_output (SandstepJailProcess *process, gint64 deadline, int out_fd, int err_fd,
                                    SandstepOutputFunc on_output, gpointer user_data, int *out_exit,
                                    gboolean *out_timed_out, GError **error);

/* Kills every process of the jail at once. */
void sandstep_jail_kill (SandstepJailProcess *process);

G_END_DECLS
