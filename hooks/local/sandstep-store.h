/* sandstep-store.h: the local backend's state directory.
 *
 *   STATE/provision.lock          flock held while a provision looks up or creates
 *   STATE/holders/<sha256>        the handle a (owner, holder) pair provisioned
 *   STATE/sandboxes/<handle>/
 *       record.json               owner, holder, spec (with secret values), times, the
 *                                 host uid and gid of its uid 0  (0600)
 *       lifetime                  "EXPIRES RELEASED": the record's lifetime, for the
 *                                 static supervisor, which reads no JSON
 *       claim                     flock held by the operator using the sandbox;
 *                                 its content names that holder and its pid
 *       tree/workspace, tree/tmp  the persistent files
 *       root/upper, root/work     an image root's writable layer
 *       rw/                       instead of tree/ and root/ in a layered sandbox (forked, or with
 *                                 checkpoints): its writable layers over its frozen ones (sandstep-layers.h)
 *   STATE/layers/<id>/            frozen layers, shared by the sandboxes whose records name them
 *
 * The store knows nothing of what runs a sandbox: destroying one whole
 * (its supervisor, its cgroup) is sandstep_sandbox_destroy() in sandstep-teardown.h.
 *
 * A sandbox is destroyed by renaming its directory into STATE/trash first,
 * so it disappears for every reader at once, then deleting it.
 */
#pragma once

#include <glib.h>
#include <sys/types.h>

#include "sandstep-spec.h"

G_BEGIN_DECLS

typedef struct {
  char *handle;
  char *owner;
  char *holder;           /* who provisioned it */
  gint64 created;         /* unix seconds */
  gint64 expires;         /* unix seconds */
  gboolean released;      /* the DAG is done with it */
  gboolean ends_when_idle;/* released with nothing kept: its commands run on, then it is destroyed */
  guint32 uid;            /* the host uid and gid of its uid 0 (sandstep-uids.h); 0: the caller's */
  guint32 gid;
  SandstepSpec *spec;
  /* Forks and checkpoints (sandstep-layers.h): */
  char *parent;           /* the sandbox this one was forked from; NULL: provisioned */
  char **layers;          /* its frozen layers, top first; NULL: not layered (tree/, root/ as provisioned) */
  GHashTable *checkpoints;/* name -> char ** (the layers it names, top first); NULL: none */
} SandstepRecord;

typedef struct {
  char *dir;
  int dir_fd;
  GRecMutex provision_mutex;
  int provision_fd;       /* STATE/provision.lock while locked, else -1 */
  guint provision_depth;  /* of the thread that holds provision_mutex */
} SandstepStore;

void sandstep_record_free (SandstepRecord *record);
/* The names of @record's checkpoints, sorted. */
GPtrArray *sandstep_record_checkpoint_names (const SandstepRecord *record);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepRecord, sandstep_record_free)

/* The grammar of a layer id (32 lowercase hex digits) and of a checkpoint's name (1 to 64 of A-Z a-z 0-9 . _ - :,
 * not starting with . or -): both become path components. */
gboolean sandstep_layer_id_is_valid (const char *id);
gboolean sandstep_checkpoint_name_is_valid (const char *name);

/* Makes @name in the sandbox directory @dir_fd: a layered sandbox's writable layers (tree/workspace, tree/tmp,
 * tree-work, root, root-work), empty.  FALSE with errno set. */
gboolean sandstep_store_make_rw (int dir_fd, const char *name);

SandstepStore *sandstep_store_open (const char *dir, GError **error);
/* A store over @dir_fd (taken), the state directory at @dir, creating
 * nothing: a state directory removed meanwhile stays removed. */
SandstepStore *sandstep_store_adopt (int dir_fd, const char *dir);
void sandstep_store_free (SandstepStore *store);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepStore, sandstep_store_free)

char *sandstep_store_sandbox_path (SandstepStore *store, const char *handle, const char *member);

/* SANDSTEP_SANDBOX_ERROR_NOT_FOUND when the handle names nothing here;
 * SANDSTEP_SANDBOX_ERROR_BROKEN when its directory, record or spec is damaged
 * (missing, not a regular file, not JSON, a member missing or of the wrong
 * type).  Never blocks: a FIFO in place of a file is refused. */
SandstepRecord *sandstep_store_load (SandstepStore *store, const char *handle, GError **error);
gboolean sandstep_store_save (SandstepStore *store, const SandstepRecord *record, GError **error);

/* Writes @name, a file of @handle's own beside its record (0600), whole or not at all. */
gboolean sandstep_store_write_member (SandstepStore *store, const char *handle, const char *name, const void *data,
                                      gsize len, GError **error);

/* Creates the sandbox's directory, tree and record for a new handle. */
gboolean sandstep_store_create (SandstepStore *store, SandstepRecord *record, GError **error);

/* A blocking exclusive lock on STATE/provision.lock, against other processes
 * and the other threads using @store, held until as many unlocks as locks. */
gboolean sandstep_store_lock_provision (SandstepStore *store, GError **error);
void sandstep_store_unlock_provision (SandstepStore *store);
char *sandstep_store_find_holder (SandstepStore *store, const char *owner, const char *holder);
gboolean sandstep_store_set_holder (SandstepStore *store, const char *owner, const char *holder, const char *handle,
                                    GError **error);

/* Removes the holder's entry if it still names @handle (its sandbox is being destroyed). */
void sandstep_store_forget_holder (SandstepStore *store, const char *owner, const char *holder, const char *handle);

/* Removes what killed operators left: sandboxes half made by a provision and
 * temporary holder files (in staging/), trees in the trash; with @holders
 * also the holder entries whose sandbox is gone and what a build before
 * staging/ left in sandboxes/ and holders/.  Without @holders it lists no
 * directory that grows with the sandboxes there are.  Takes the provision
 * lock. */
void sandstep_store_sweep (SandstepStore *store, gboolean holders);

/* ---- claims (sandstep-claim.c) ---- */

/* Tries to claim; returns the lock fd, or -1 with *out_current set to the
 * current holder's name (when busy) or @error (when something failed). */
int sandstep_store_try_claim (SandstepStore *store, const char *handle, const char *holder, char **out_current,
                              GError **error);

/* Who holds the claim now (the name its holder wrote), or NULL when nobody
 * does; never takes it, never blocks. */
char *sandstep_store_peek_holder (SandstepStore *store, const char *handle);

/* Kills whatever holds the claim, then removes the sandbox's directory; gone
 * already is fine.  @claim_fd: a claim this process already holds, or -1. */
gboolean sandstep_store_destroy (SandstepStore *store, const char *handle, int claim_fd, GError **error);

/* Whether the lifetime of @handle is over: @record's, or for a damaged
 * sandbox (@record NULL) what its lifetime file says, else whether its
 * directory is older than the longest lifetime.  gc and list judge by it. */
gboolean sandstep_store_is_over (SandstepStore *store, const char *handle, const SandstepRecord *record);

/* The start time of @pid (clock ticks since boot; 0: unknown), so a recycled
 * pid is never mistaken for the process that wrote it down. */
guint64 sandstep_process_start_time (pid_t pid);

/* Every handle in the store. */
GPtrArray *sandstep_store_list (SandstepStore *store);

G_END_DECLS
