/* sandstep-supervisor-start.c: starting a supervisor, for the front and the helper alike; see the header. */
#include "sandstep-supervisor-start.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-cgroup-warm.h"
#include "sandstep-jail-start.h"
#include "sandstep-process-state.h"

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

static char *
concat (const char *a, const char *b)
{
  size_t la = strlen (a), lb = strlen (b);
  char *out = malloc (la + lb + 1);

  if (out != NULL)
    {
      memcpy (out, a, la);
      memcpy (out + la, b, lb + 1);
    }
  return out;
}

void
sandstep_supervisor_environment_free (char **env)
{
  if (env == NULL)
    return;
  for (char **e = env; *e != NULL; e++)
    free (*e);
  free (env);
}

char **
sandstep_supervisor_environment (const char *state_dir, char *const *caller_env)
{
  size_t n = 0, k = 0;
  char **env;

  for (char *const *e = caller_env; e != NULL && *e != NULL; e++)
    n++;
  env = calloc (n + 3, sizeof *env);
  if (env == NULL)
    return NULL;
  env[k++] = concat ("PATH=", SANDSTEP_HELPER_PATH);
  env[k++] = concat ("SANDSTEP_STATE_DIR=", state_dir);
  for (char *const *e = caller_env; e != NULL && *e != NULL; e++)
    if (strncmp (*e, "SANDSTEP_TEST_", 14) == 0 && strchr (*e, '=') != NULL)
      env[k++] = concat (*e, "");
  for (size_t i = 0; i < k; i++)
    if (env[i] == NULL)
      {
        sandstep_supervisor_environment_free (env);
        return NULL;
      }
  return env;
}

/* Moves @fd at or above @floor, close-on-exec; -1 stays -1.  A supervisor that could not have its fds in their
 * places is not started: the caller's connection then closes unanswered, and the helper takes over. */
static int
lift (int fd, int floor)
{
  int high;

  if (fd < 0 || fd >= floor)
    return fd;
  high = fcntl (fd, F_DUPFD_CLOEXEC, floor);
  if (high < 0)
    _exit (127);
  close (fd);
  return high;
}

/* The go-between's child, which becomes the supervisor: the process state the header promises, its fds in their
 * places and nothing else of its starter's, the jail started on @image (none where that fails: the supervisor
 * then builds it), and the exec.  Never returns. */
static __attribute__ ((noreturn)) void
become_supervisor (const char *program, const char *handle, const int *given, int ready, char *const *env,
                   const SandstepJailImage *image, int init_fd, const cpu_set_t *cpus)
{
  enum { INIT_FD = SANDSTEP_SUPERVISOR_JAIL_PIDFD_FD, TOP = SANDSTEP_SUPERVISOR_JAIL_CONTROL_FD + 1 };
  SandstepJailStart jail = { .pid = -1, .pidfd = -1, .go = -1, .report = -1, .control = -1 };
  SandstepJailStartFailure failure;
  char cpus_arg[sizeof "--cpus=" + SANDSTEP_CPUS_TEXT_MAX];
  char *argv[] = { (char *) "sandstep", (char *) "--supervisor", (char *) handle, cpus_arg, NULL };
  int fds[TOP];
  int null;
  sigset_t none;

  /* First, so that the jail is born with it too: a session of its own (a terminal's ^C is not for it),
   * default signals, and no state of the caller's. */
  setsid ();
  for (int sig = 1; sig < NSIG; sig++)
    signal (sig, SIG_DFL);
  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  if (chdir ("/") < 0 || (null = open ("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
    _exit (127);
  sandstep_process_state_reset ();
  /* Started on one CPU of the caller's (below): the supervisor takes back all of them first thing. */
  memcpy (cpus_arg, "--cpus=", sizeof "--cpus=");
  sandstep_cpus_format (cpus, cpus_arg + strlen ("--cpus="));

  /* Its fds in their places, sandstep-init's above them, and nothing else: the jail is cloned from this
   * process.  Each is first lifted above every slot, so that no dup2 overwrites another's source. */
  for (int fd = 0; fd < TOP; fd++)
    fds[fd] = -1;
  fds[0] = fds[1] = fds[2] = lift (null, TOP);
  fds[SANDSTEP_SUPERVISOR_STORE_FD] = lift (given[0], TOP);
  fds[SANDSTEP_SUPERVISOR_LOCK_FD] = lift (given[1], TOP);
  fds[SANDSTEP_SUPERVISOR_PLAN_FD] = lift (given[2], TOP);
  fds[SANDSTEP_SUPERVISOR_READY_FD] = lift (ready, TOP);
  fds[SANDSTEP_SUPERVISOR_CALLER_FD] = given[3] >= 0 ? lift (given[3], TOP) : fds[0];
  fds[INIT_FD] = lift (init_fd, TOP);
  for (int fd = 0; fd < TOP; fd++)
    if (fds[fd] >= 0 && dup2 (fds[fd], fd) < 0)
      _exit (127);
  syscall (SYS_close_range, INIT_FD + 1, ~0U, 0);
  if (fds[INIT_FD] >= 0)
    {
      fcntl (INIT_FD, F_SETFD, FD_CLOEXEC);
      if (sandstep_jail_start (image, INIT_FD, -1, -1, cpus, &jail, &failure) < 0)
        sandstep_jail_start_abandon (&jail);
      close (INIT_FD);
    }

  if (jail.pidfd >= 0)
    {
      int ends[] = { lift (jail.pidfd, TOP), lift (jail.go, TOP), lift (jail.report, TOP), lift (jail.control, TOP) };
      for (int i = 0; i < 4; i++)
        if (dup2 (ends[i], SANDSTEP_SUPERVISOR_JAIL_PIDFD_FD + i) < 0)
          _exit (127);
    }
  execve (program, argv, env);
  _exit (127);
}

int
sandstep_supervisor_spawn (const char *program, const char *handle, int store_fd, int lock_fd, int plan_fd,
                           int caller_fd, char *const *env, const SandstepJailImage *image, int init_fd)
{
  /* Started where its caller is: on the caller's CPUs. */
  char *argv[] = { (char *) "sandstep", (char *) "--supervisor", (char *) handle, NULL };
  const int given[] = { store_fd, lock_fd, plan_fd, caller_fd };
  int moved[4] = { -1, -1, -1, -1 }, ready[2] = { -1, -1 };
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  sigset_t all, none;
  pid_t pid, middle;
  int errsv = 0;

  /* Above the slots they go to, so that no dup2 overwrites another's source. */
  for (int i = 0; i < 4 && errsv == 0; i++)
    if (given[i] >= 0 && (moved[i] = fcntl (given[i], F_DUPFD_CLOEXEC, SANDSTEP_SUPERVISOR_CALLER_FD + 1)) < 0)
      errsv = errno;
  if (errsv == 0 && pipe2 (ready, O_CLOEXEC) < 0)
    errsv = errno;
  if (errsv == 0 && ready[1] <= SANDSTEP_SUPERVISOR_CALLER_FD)
    {
      int high = fcntl (ready[1], F_DUPFD_CLOEXEC, SANDSTEP_SUPERVISOR_CALLER_FD + 1);
      errsv = high < 0 ? errno : 0;
      close (ready[1]);
      ready[1] = high;
    }
  if (errsv == 0 && image != NULL)
    {
      /* fork, not vfork: the go-between's child goes on in the go-between's memory.  The go-between then makes
       * the kernel start the wait that the supervisor's move of this jail by its pid has on cgroup v2
       * (sandstep-cgroup-warm.h), which may take it tens of milliseconds: nobody waits for it, and whoever
       * reaps our children reaps it. */
      middle = fork ();
      if (middle == 0)
        {
          cpu_set_t cpus;
          pid_t child;
          if (sched_getaffinity (0, sizeof cpus, &cpus) < 0)
            _exit (127);
          child = fork ();
          if (child == 0)
            become_supervisor (program, handle, moved, ready[1], env, image, init_fd, &cpus);
          /* Not behind us and our starter on this CPU: the supervisor takes back the caller's CPUs first thing. */
          if (child > 0)
            sandstep_process_start_elsewhere (child, &cpus);
          sandstep_cgroup_warm_up ();
          _exit (0);
        }
      if (middle < 0)
        errsv = errno;
    }
  else if (errsv == 0)
    {
      posix_spawn_file_actions_init (&actions);
      posix_spawn_file_actions_addopen (&actions, 0, "/dev/null", O_RDONLY, 0);
      posix_spawn_file_actions_addopen (&actions, 1, "/dev/null", O_WRONLY, 0);
      posix_spawn_file_actions_addopen (&actions, 2, "/dev/null", O_WRONLY, 0);
      posix_spawn_file_actions_adddup2 (&actions, moved[0], SANDSTEP_SUPERVISOR_STORE_FD);
      posix_spawn_file_actions_adddup2 (&actions, moved[1], SANDSTEP_SUPERVISOR_LOCK_FD);
      posix_spawn_file_actions_adddup2 (&actions, moved[2], SANDSTEP_SUPERVISOR_PLAN_FD);
      posix_spawn_file_actions_adddup2 (&actions, ready[1], SANDSTEP_SUPERVISOR_READY_FD);
      if (moved[3] >= 0)
        posix_spawn_file_actions_adddup2 (&actions, moved[3], SANDSTEP_SUPERVISOR_CALLER_FD);
      else
        posix_spawn_file_actions_addopen (&actions, SANDSTEP_SUPERVISOR_CALLER_FD, "/dev/null", O_RDONLY, 0);
      posix_spawn_file_actions_addchdir_np (&actions, "/");
      /* Nothing of this caller's signal state: an ignored SIGTERM would outlive a destroy.  Its other fds
       * it closes itself (sandstep-supervise.c). */
      posix_spawnattr_init (&attributes);
      sigfillset (&all);
      sigemptyset (&none);
      posix_spawnattr_setsigdefault (&attributes, &all);
      posix_spawnattr_setsigmask (&attributes, &none);
      posix_spawnattr_setflags (&attributes, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
      /* Started by a go-between that ends at once: the supervisor is nobody's child from its first instruction,
       * and need not fork away itself (a third of a millisecond of a first command here).  The go-between
       * shares our memory until it ends, as posix_spawn's own child does; its status is posix_spawn's. */
      middle = vfork ();
      if (middle == 0)
        _exit (posix_spawn (&pid, program, &actions, &attributes, argv, env));
      if (middle < 0)
        errsv = errno;
      else
        {
          int status = 0, r;
          while ((r = waitpid (middle, &status, 0)) < 0 && errno == EINTR)
            ;
          /* With SIGCHLD ignored by our caller the go-between is reaped unseen: its ready pipe then says
           * whether a supervisor started (nothing on it: none did). */
          errsv = r < 0 ? 0 : WIFEXITED (status) ? WEXITSTATUS (status) : ECHILD;
        }
      posix_spawn_file_actions_destroy (&actions);
      posix_spawnattr_destroy (&attributes);
    }
  for (int i = 0; i < 4; i++)
    if (moved[i] >= 0)
      close (moved[i]);
  if (ready[1] >= 0)
    close (ready[1]);
  if (errsv != 0)
    {
      if (ready[0] >= 0)
        close (ready[0]);
      errno = errsv;
      return -1;
    }
  return ready[0];
}
