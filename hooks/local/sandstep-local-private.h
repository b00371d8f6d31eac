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
  int claim_fd;
  int tree_fd;
  SandstepStep step;       /* the make recipe line this attachment serves; .pid 0: none */
  char *holder;
} LocalAttachment;

/* The sandbox's directory as an O_PATH fd, or -1. */
int sandstep_local_open_dir (LocalBackend *local, const char *handle);

/* Who uses the sandbox now: its claim's holder (*out_running), or the holder of a make
 * recipe's hold between its lines; NULL for nobody. */
char *sandstep_local_current_user (LocalBackend *local, const char *handle, gboolean *out_running);

gboolean sandstep_local_gc (SandstepBackend *backend, const char *run, const char *owner_prefix, gboolean expired_only,
                            gboolean broken, GPtrArray *destroyed, GError **error);
GPtrArray *sandstep_local_list (SandstepBackend *backend, const char *run, const char *owner, GError **error);
