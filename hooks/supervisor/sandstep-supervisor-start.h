/* sandstep-supervisor-start.h: how a sandbox's supervisor is started.
 *
 * `sandstep-supervise HANDLE` is started by whoever finds a sandbox with
 * no supervisor while holding its supervisor lock: the front, when the
 * sandbox's plan is kept beside its record, else the helper, which
 * compiles the plan (sandstep-supervision.h).  It gets, as fds, the state
 * directory, the lock (held), the plan (a GVariant: a memfd the helper
 * sealed, or the kept plan file), a pipe on which it says "ok" once it
 * serves, or "DOMAIN\tCODE\tMESSAGE" if it cannot, and the starter's own
 * connection (one end of a socketpair, on which the starter's request
 * comes as on the supervisor's socket: sandstep-run-wire.h), or /dev/null
 * when the starter has none; nothing else of its starter's: its environment is the helper environment below, its stdio
 * /dev/null, its directory /, its signals default and unblocked, and it
 * has a session of its own.  A go-between starts it and ends, so that it
 * is nobody's child from the start; its starter then reads the ready pipe
 * to its end.
 *
 * The front, which starts a supervisor for a sandbox's first command with
 * the kept plan, starts the sandbox's jail too (sandstep-jail-start.h), in
 * the go-between's child just before it execs the supervisor: the jail's
 * child builds the root while the supervisor starts, and the supervisor
 * adopts it, given as fds 8 to 11 (its pidfd first: of the supervisor's one
 * child), once it has checked the plan.  Where that start fails, the
 * supervisor gets no jail and builds one itself.
 *
 * Plain C: the static front starts supervisors too.
 */
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-jail-image.h"

#define SANDSTEP_SUPERVISOR_STORE_FD 3
#define SANDSTEP_SUPERVISOR_LOCK_FD 4
#define SANDSTEP_SUPERVISOR_PLAN_FD 5
#define SANDSTEP_SUPERVISOR_READY_FD 6
#define SANDSTEP_SUPERVISOR_CALLER_FD 7
#define SANDSTEP_SUPERVISOR_JAIL_PIDFD_FD 8
#define SANDSTEP_SUPERVISOR_JAIL_GO_FD 9
#define SANDSTEP_SUPERVISOR_JAIL_REPORT_FD 10
#define SANDSTEP_SUPERVISOR_JAIL_CONTROL_FD 11

/* Where the helper's file tools find a layered sandbox's init, whose cwd is the sandbox's files as its commands
 * see them (sandstep-jail-plan.c): "PID START" in the sandbox's directory, written by the supervisor each time it
 * builds such a jail. */
#define SANDSTEP_SUPERVISOR_INIT_FILE "init"

/* What the supervisor and its helpers (pasta, the egress proxy) run with: this PATH, SANDSTEP_STATE_DIR, and
 * the starter's SANDSTEP_TEST_* hooks (docs/hacking.md, "Test hooks"); nothing else of the caller's environment. */
#define SANDSTEP_HELPER_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* The helper environment for @state_dir (absolute) from @caller_env, in malloc()ed memory; NULL when out of
 * memory.  Free with sandstep_supervisor_environment_free(). */
char **sandstep_supervisor_environment (const char *state_dir, char *const *caller_env);
void sandstep_supervisor_environment_free (char **env);

/* Starts @program (sandstep-supervise) for @handle as the header says, with @env and @caller_fd (-1: none);
 * returns the read end of its ready pipe (close-on-exec), or -1 with errno.  With @image (the jail's, checked,
 * of the plan in @plan_fd; NULL: none) and @init_fd (sandstep-init, O_PATH), the jail is started for it too,
 * and the cgroup warm-up (sandstep-cgroup-warm.h) done; single-threaded callers only, which then leave a child
 * of theirs unreaped (the go-between, which ends soon). */
int sandstep_supervisor_spawn (const char *program, const char *handle, int store_fd, int lock_fd, int plan_fd,
                               int caller_fd, char *const *env, const SandstepJailImage *image, int init_fd);
