/* sandstep-launcher.h: a sandbox's launcher, which keeps its next jail built.
 *
 * Building a jail (namespaces, about fifty mounts, init's exec) is most of a
 * command's start, and none of it depends on the command.  A launcher is a
 * small service per sandbox, started by the first `sandstep run`: it builds
 * the jail for the next command as soon as the last one ended, and
 * `sandstep run` hands it the command over STATE/sandboxes/<handle>/launcher.sock
 * (sandstep-launch-wire.h).  Every command still gets fresh namespaces: a
 * jail serves one command and is thrown away with it.
 *
 * The launcher claims the sandbox for each command as any helper does, and
 * answers "do it yourself" (FALLBACK) whenever anything is not plain: a
 * sandbox busy or gone, another owner, a bad value.  The ordinary path then
 * gives the error or the wait, word for word.  It ends after
 * SANDSTEP_LAUNCHER_IDLE_S without a command, when its sandbox expires or
 * goes away, or on SIGTERM (sandstep_launcher_stop()).
 */
#pragma once

#include <glib.h>

#include "sandstep-backend.h"
#include "sandstep-store.h"

G_BEGIN_DECLS

#define SANDSTEP_LAUNCHER_IDLE_S 30

/* One request, as the caller sent it (empty strings: not given). */
typedef struct {
  const char *handle;
  const char *owner;
  const char *holder;
  const char *wait;
  const char *timeout;
  const char *command;
  char **env;              /* the caller's terminal and locale, NAME=VALUE */
} SandstepLaunchRequest;

typedef struct {
  /* Resolves who asks and the command's budget as `sandstep run` would;
   * FALSE when the ordinary path must take the request (it reports why). */
  gboolean (*accept) (const SandstepLaunchRequest *request, char **out_owner, char **out_holder,
                      double *out_timeout_s, gpointer user_data);
  /* Says on @err_fd what the command ran into; returns the exit status for the caller. */
  int (*report) (int err_fd, const SandstepSpec *spec, const SandstepLaunchRequest *request,
                 const SandstepRunResult *result, gpointer user_data);
  gpointer user_data;
} SandstepLauncherHooks;

/* What sandstep_launcher_ensure() hands the launcher it starts: the state
 * directory (sandstep_store_adopt()) and the launcher's lock, already held. */
#define SANDSTEP_LAUNCHER_STORE_FD 3
#define SANDSTEP_LAUNCHER_LOCK_FD 4

/* Serves @handle's commands until the launcher has no reason to live,
 * holding the lock it was handed at SANDSTEP_LAUNCHER_LOCK_FD.  Returns at
 * once when it cannot be served ahead (network=allow, gone, expired). */
gboolean sandstep_launcher_serve (SandstepStore *store, const char *handle, const SandstepLauncherHooks *hooks,
                                  GError **error);

/* Starts a launcher for @handle in the background unless one runs. */
void sandstep_launcher_ensure (SandstepStore *store, const char *handle);

/* Ends @handle's launcher, if one runs, and waits until it is gone with its jail. */
void sandstep_launcher_stop (SandstepStore *store, const char *handle);

G_END_DECLS
