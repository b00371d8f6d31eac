/* sandstep-front-start.c: the front starting a supervisor with a kept plan; see the header. */
#include "sandstep-front-start.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sandstep-run-wire.h"
#include "sandstep-supervisor-start.h"

extern char **environ;

int
sandstep_front_start_supervisor (const char *program, const char *state_dir, int sandbox_dir_fd,
                                 const char *handle)
{
  int plan = -1, lock = -1, store = -1, ready = -1, pair[2] = { -1, -1 };
  char **env = NULL;

  plan = openat (sandbox_dir_fd, SANDSTEP_PLAN_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (plan < 0)
    goto out;
  lock = openat (sandbox_dir_fd, SANDSTEP_RUN_LOCK, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  /* Held: another caller starts one, or one is ending; the helper waits for it. */
  if (lock < 0 || flock (lock, LOCK_EX | LOCK_NB) < 0)
    goto out;
  store = open (state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  env = sandstep_supervisor_environment (state_dir, environ);
  if (store < 0 || env == NULL || socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
    goto out;
  /* Our request goes on our end at once and waits there; the supervisor takes it once it serves.  One
   * that cannot serve closes its end unanswered, and then nothing ran. */
  ready = sandstep_supervisor_spawn (program, handle, store, lock, plan, pair[1], env);
  if (ready < 0)
    {
      close (pair[0]);
      pair[0] = -1;
    }
out:
  sandstep_supervisor_environment_free (env);
  if (pair[1] >= 0)
    close (pair[1]);
  if (ready >= 0)
    close (ready);
  if (store >= 0)
    close (store);
  if (lock >= 0)
    close (lock);
  if (plan >= 0)
    close (plan);
  return pair[0];
}
