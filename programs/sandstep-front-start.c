/* sandstep-front-start.c: the front starting a supervisor with a kept plan; see the header. */
#include "sandstep-front-start.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-run-wire.h"
#include "sandstep-supervisor-start.h"

extern char **environ;

/* The jail's image at the head of the kept plan in @plan, mapped, when the front may start the jail with it:
 * a file only its owner could have written (as the supervisor requires), of this build's format, and a
 * sandbox without an egress proxy (whose socket the supervisor makes).  NULL otherwise. */
static const SandstepJailImage *
map_image (int plan, size_t *out_size)
{
  const SandstepJailImage *image;
  struct stat st;
  void *map;

  if (fstat (plan, &st) < 0 || !sandstep_kept_plan_trusted (&st) ||
      st.st_size < (off_t) sizeof *image)
    return NULL;
  map = mmap (NULL, st.st_size, PROT_READ, MAP_PRIVATE, plan, 0);
  if (map == MAP_FAILED)
    return NULL;
  image = sandstep_jail_image_check (map, st.st_size, SANDSTEP_PLAN_FORMAT);
  if (image == NULL || (image->flags & SANDSTEP_JAIL_IMAGE_EGRESS))
    {
      munmap (map, st.st_size);
      return NULL;
    }
  *out_size = st.st_size;
  return image;
}

int
sandstep_front_start_supervisor (const char *program, const char *init, const char *state_dir,
                                 int sandbox_dir_fd, const char *handle)
{
  int plan = -1, lock = -1, store = -1, ready = -1, init_fd = -1, pair[2] = { -1, -1 };
  const SandstepJailImage *image = NULL;
  size_t image_size = 0;
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
  if (init != NULL && (image = map_image (plan, &image_size)) != NULL &&
      (init_fd = open (init, O_PATH | O_CLOEXEC)) < 0)
    {
      munmap ((void *) image, image_size);
      image = NULL;
    }
  /* With no jail to start here, the supervisor builds it, moving no process by its pid: no warm-up
   * (sandstep-cgroup-warm.h). */
  ready = sandstep_supervisor_spawn (program, handle, store, lock, plan, pair[1], env, image, init_fd);
  if (ready < 0)
    {
      close (pair[0]);
      pair[0] = -1;
    }
out:
  if (image != NULL)
    munmap ((void *) image, image_size);
  if (init_fd >= 0)
    close (init_fd);
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
