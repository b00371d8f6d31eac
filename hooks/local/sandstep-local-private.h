/* sandstep-local-private.h: what the local backend's files share
 * (sandstep-local.c: provision, attach and the run of one sandbox;
 * sandstep-local-list.c: judging, listing and collecting them all). */
#pragma once

#include "sandstep-backend.h"
#include "sandstep-step.h"
#include "sandstep-store.h"

typedef struct {
  SandstepBackend parent;
  SandstepStore *store;
} LocalBackend;

typedef struct {
  SandstepAttachment parent;
  LocalBackend *local;
  SandstepRecord *record;
  int claim_fd;            /* -1: beside, under the claim another attachment of its holder holds */
  int tree_fd;
  int tools_keep;          /* a layered sandbox's jail kept while a file tool uses it (tools_tree()), or -1 */
  SandstepStep step;       /* the make recipe line this attachment serves; .pid 0: none */
  char *holder;
  gboolean run_failed;     /* a command run through it failed: a retry-safe target has not succeeded */
  gboolean beside;         /* its commands may run beside its holder's (SandstepIdentity.beside) */
} LocalAttachment;

/* Forks and checkpoints (sandstep-local-fork.c): the backend's entries, and a layered sandbox's files as its
 * live jail has them, for the file tools (an fd to close), started if need be (with @out_init_pidfd, not NULL, a
 * pidfd of that jail's init as well). */
gboolean sandstep_local_fork (SandstepAttachment *attachment, const SandstepIdentity *who, guint count,
                              GPtrArray *out_handles, GError **error);
gboolean sandstep_local_checkpoint (SandstepAttachment *attachment, const char *name, GError **error);
gboolean sandstep_local_rollback (SandstepAttachment *attachment, const char *name, GError **error);
GPtrArray *sandstep_local_checkpoints (SandstepAttachment *attachment, GError **error);
int sandstep_local_layered_tree (LocalAttachment *attachment, int *out_init_pidfd, GError **error);
/* --retry=clean: at a make target's first line, a checkpoint of the sandbox for that target, or, when its last
 * attempt did not succeed, a rollback to it; at its last line, success noted. */
gboolean sandstep_local_retry_begin (LocalAttachment *attachment, GError **error);
void sandstep_local_retry_done (LocalAttachment *attachment);

/* The sandbox's directory as an O_PATH fd, or -1. */
int sandstep_local_open_dir (LocalBackend *local, const char *handle);

/* Who uses the sandbox now: its claim's holder (*out_running), or the holder of a make
 * recipe's hold between its lines; NULL for nobody. */
char *sandstep_local_current_user (LocalBackend *local, const char *handle, gboolean *out_running);

gboolean sandstep_local_gc (SandstepBackend *backend, const char *run, const char *owner_prefix, gboolean expired_only,
                            gboolean broken, GPtrArray *destroyed, GError **error);
GPtrArray *sandstep_local_list (SandstepBackend *backend, const char *run, const char *owner, GError **error);
