/* sandstep-front-start.c: the front starting a supervisor with a kept plan; see the header. */
#include "sandstep-front-start.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "sandstep-run-wire.h"
#include "sandstep-supervisor-start.h"

extern char **environ;

int
sandstep_front_start_supervisor (const char *program, const char *state_dir, int sandbox_dir_fd,
                                 const char *handle)
{
  int plan = -1, lock = -1, store = -1, ready = -1, ok = 0;
  char **env = NULL;
  char text[4];
  size_t got = 0;
  ssize_t n;

  plan = openat (sandbox_dir_fd, SANDSTEP_PLAN_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (plan < 0)
    goto out;
  lock = openat (sandbox_dir_fd, SANDSTEP_RUN_LOCK, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  /* Held: another caller starts one, or one is ending; the helper waits for it. */
  if (lock < 0 || flock (lock, LOCK_EX | LOCK_NB) < 0)
    goto out;
  store = open (state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  env = sandstep_supervisor_environment (state_dir, environ);
  if (store < 0 || env == NULL)
    goto out;
  ready = sandstep_supervisor_spawn (program, handle, store, lock, plan, env);
  if (ready < 0)
    goto out;
  /* "ok\n", or why not, which the helper says in its own words when it tries. */
  while (got < sizeof text - 1 && ((n = read (ready, text + got, sizeof text - 1 - got)) > 0 || (n < 0 && errno == EINTR)))
    if (n > 0)
      got += n;
  text[got] = '\0';
  ok = strcmp (text, "ok\n") == 0;
out:
  sandstep_supervisor_environment_free (env);
  if (ready >= 0)
    close (ready);
  if (store >= 0)
    close (store);
  if (lock >= 0)
    close (lock);
  if (plan >= 0)
    close (plan);
  return ok;
}
