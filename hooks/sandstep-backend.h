/* sandstep-backend.h: the one interface every backend serves (local jail, remote daemon).
 *
 * Operators never know which backend they talk to.  A step attaches to a
 * sandbox (owner check + claim), works through the attachment, and detaches;
 * the claim lasts exactly as long as the attachment, and dies with the process.
 */
#pragma once

#include <glib.h>
#include <gio/gio.h>
#include <json-glib/json-glib.h>

#include "sandstep-handle.h"
#include "sandstep-spec.h"

G_BEGIN_DECLS

typedef struct _SandstepBackend SandstepBackend;
typedef struct _SandstepAttachment SandstepAttachment;

/* Who is asking: the owner must match the sandbox's; the holder names the claim. */
typedef struct {
  const char *owner;
  const char *holder;
  /* A make recipe line that holds the sandbox across the recipe's lines, as
   * "PID START ENDS" (hooks/supervisor/sandstep-step.h); NULL: the claim lasts one
   * command.  Only the local backend keeps such holds. */
  const char *step;
  /* Attach beside the claim when another attachment of this same holder holds
   * it, taking none, and run commands beside that holder's (E2B's calls,
   * which share one holder and order themselves).  Such an attachment
   * checkpoints, forks and destroys nothing.  Only the local backend. */
  gboolean beside;
} SandstepIdentity;

/* How long E2B's calls wait for a claim another holder has, or for a turn beside their holder's commands, before
 * they answer busy: E2B's SDK never asks again. */
#define SANDSTEP_BESIDE_WAIT_S 5.0

/* What read_file refuses above when the caller names no limit. */
#define SANDSTEP_DEFAULT_READ_MAX (5 * 1024 * 1024)

/* Receives a command's output as it comes: @stream is 1 (stdout) or 2 (stderr). */
typedef void (*SandstepOutputFunc) (int stream, const char *data, gsize len, gpointer user_data);

typedef struct {
  const char *command;     /* run as /bin/sh -c COMMAND */
  double timeout_s;        /* <= 0: no budget but the sandbox's lifetime */
  int stdin_fd;            /* -1: /dev/null */
  int stdout_fd;           /* ignored when on_output is set */
  int stderr_fd;
  SandstepOutputFunc on_output;  /* NULL: output goes to stdout_fd and stderr_fd */
  gpointer user_data;
  /* Host-side events while the command runs (an egress refusal), one line each;
   * called from another thread.  May be NULL. */
  void (*on_notice) (const char *message, gpointer user_data);
  /* Cancelled: the command is killed with everything it started, and the call fails.  May be NULL. */
  GCancellable *cancellable;
  /* Set by sandstep_attachment_run_command(): the caller's own timeout_s, before the lifetime cut it; a backend
   * that keeps the lifetime itself (the local one's supervisor, which moves a budget with a later release) runs
   * by it. */
  double own_timeout_s;
} SandstepRunRequest;

typedef struct {
  int exit_status;         /* as from waitpid(); meaningless when timed_out */
  gboolean timed_out;
  double applied_timeout_s;/* the budget that applied (0: none) */
  gboolean clamped;        /* the budget was cut to the remaining lifetime */
  gboolean memory_limit_hit;
  gboolean pids_limit_hit;
} SandstepRunResult;

typedef struct {
  char *name;
  gboolean is_dir;
} SandstepDirEntry;

void sandstep_dir_entry_free (SandstepDirEntry *entry);

/* A directory opened for a watch that outlives the claim (sandstep_attachment_open_directory()): each fd
 * close-on-exec, or -1 where there is none. */
typedef struct {
  int dir;    /* the directory, for reading */
  int root;   /* the root of the sandbox's files (O_PATH): it moves or goes when they stop being where the
               * directory is (a fork, a destroy) */
  int keep;   /* files that live in a jail (a layered sandbox's, in its overlay): what keeps that jail from ending
               * idle while it is held (sandstep-supervisor-keep.h) ... */
  int jail;   /* ... and a pidfd of the jail's init, readable once the jail ended, and with it the watch */
} SandstepWatchedDir;

/* Closes what @dir holds and sets each to -1. */
void sandstep_watched_dir_clear (SandstepWatchedDir *dir);

/* Called on every wait step while another holder has the sandbox (once, with
 * the holder's name), so a CLI can say who it waits for. */
typedef void (*SandstepWaitNotify) (const char *handle, const char *current_holder, double wait_s, gpointer user_data);

/* What `sandstep list` says of a sandbox.  gc and list judge expired and
 * broken alike (the local backend's sandstep_local_judge()). */
typedef enum {
  SANDSTEP_CONDITION_IDLE,      /* alive, and nobody uses it */
  SANDSTEP_CONDITION_RUNNING,   /* an operator or a command holds its claim */
  SANDSTEP_CONDITION_HELD,      /* a make recipe holds it between its lines */
  SANDSTEP_CONDITION_EXPIRED,   /* its lifetime, or a release's keep, is over: gc reclaims it */
  SANDSTEP_CONDITION_BROKEN,    /* its record cannot be read: only destroy removes it */
} SandstepCondition;

typedef struct {
  char *handle;
  char *owner;            /* NULL when broken */
  char *provisioned_by;   /* NULL when broken */
  char *held_by;          /* running or held: who; else NULL */
  SandstepCondition condition;
  gint64 created;         /* unix seconds; 0 when broken */
  gint64 expires;
  guint64 size;           /* bytes of its files */
  char *problem;          /* broken: why its record cannot be read */
  char *image;            /* its root's image: the reference, and the digest; NULL: the host's /usr */
  char *image_digest;
  char *parent;           /* the sandbox it was forked from; NULL: provisioned */
} SandstepListEntry;

void sandstep_list_entry_free (SandstepListEntry *entry);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepListEntry, sandstep_list_entry_free)
/* "idle", "running", "held", "expired", "broken". */
const char *sandstep_condition_to_string (SandstepCondition condition);
gboolean sandstep_condition_from_string (const char *text, SandstepCondition *out);

/* What a backend implements.  Callers use the wrappers below, never these:
 * the rules every backend shares (waiting for a claim, a command's budget,
 * a release that came while the claim was held) are the wrappers', once. */
typedef struct {
  const char *name;

  /* Get-or-create by holder: the same owner and holder get the same handle back. */
  char *(*provision) (SandstepBackend *backend, const SandstepSpec *spec, const SandstepIdentity *who,
                      gboolean *out_existing, GError **error);

  /* Checks the owner and the lifetime, then claims, once: while another
   * holder has it, fails with SANDSTEP_SANDBOX_ERROR_BUSY naming that holder
   * (sandstep_throw_busy()); sandstep_backend_attach() waits and asks again. */
  SandstepAttachment *(*try_attach) (SandstepBackend *backend, const char *handle, const SandstepIdentity *who,
                                     GError **error);
  /* Ends the claim and frees the attachment. */
  void (*detach) (SandstepAttachment *attachment);
  /* TRUE when the sandbox was released while this claim held it and its
   * keep is over; then destroy_claimed() destroys it before the claim ends.
   * NULL for a backend whose server does this itself. */
  gboolean (*release_due) (SandstepAttachment *attachment);
  void (*destroy_claimed) (SandstepAttachment *attachment);

  /* @request->timeout_s is the budget, already cut to the remaining lifetime
   * (sandstep_attachment_run_command()); the backend leaves
   * result->applied_timeout_s and ->clamped as they are unless it knows
   * better (a server's own cut). */
  gboolean (*run_command) (SandstepAttachment *attachment, const SandstepRunRequest *request,
                           SandstepRunResult *result, GError **error);
  /* Optional: claims, runs @request and ends the claim in one exchange (a
   * server's one request).  A refusal before the command ran, a busy one
   * included, is try_attach's; @out_spec gets the sandbox's spec. */
  gboolean (*try_run_step) (SandstepBackend *backend, const char *handle, const SandstepIdentity *who,
                            const SandstepRunRequest *request, SandstepRunResult *result, SandstepSpec **out_spec,
                            GError **error);
  /* Optional, with try_run_step: the tries of @request are over, whatever came of them; what the backend kept
   * for them (a spooled stdin) goes. */
  void (*end_run_step) (SandstepBackend *backend, const SandstepRunRequest *request);
  GBytes *(*read_file) (SandstepAttachment *attachment, const char *path, gsize max_bytes, GError **error);
  gboolean (*write_file) (SandstepAttachment *attachment, const char *path, const void *data, gsize len, GError **error);
  /* Copies a host file or directory tree to @dest inside the sandbox. */
  gboolean (*put) (SandstepAttachment *attachment, const char *host_src, const char *dest, GError **error);
  GPtrArray *(*list_directory) (SandstepAttachment *attachment, const char *path, GError **error);
  /* Optional (NULL: none): a directory of the sandbox opened for a watch of its files that outlives the claim;
   * refuses one outside /workspace and /tmp. */
  gboolean (*open_directory) (SandstepAttachment *attachment, const char *path, SandstepWatchedDir *out,
                              GError **error);
  /* Streams a regular file into @dest_fd; returns bytes written or -1. */
  gint64 (*export_file) (SandstepAttachment *attachment, const char *path, int dest_fd, guint64 max_bytes, GError **error);
  /* Seconds of lifetime left, clamped at 0. */
  double (*remaining_lifetime) (SandstepAttachment *attachment);
  const SandstepSpec *(*spec) (SandstepAttachment *attachment);

  /* Optional (NULL: this backend has none), on a claimed sandbox: forks and checkpoints.  fork() makes @count
   * sandboxes of @who's owner, each a copy-on-write snapshot of this one, found again by @who's holder (with
   * "#N" after it for each of several) as provision finds its sandbox; appends their handles to @out_handles. */
  gboolean (*fork) (SandstepAttachment *attachment, const SandstepIdentity *who, guint count,
                    GPtrArray *out_handles, GError **error);
  gboolean (*checkpoint) (SandstepAttachment *attachment, const char *name, GError **error);
  gboolean (*rollback) (SandstepAttachment *attachment, const char *name, GError **error);
  /* The checkpoints' names, sorted. */
  GPtrArray *(*checkpoints) (SandstepAttachment *attachment, GError **error);

  /* The sandbox's record and who holds it now, without claiming; secret values never appear. */
  JsonNode *(*describe) (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, GError **error);

  /* The DAG is done with it: destroy once no command runs, or keep it @keep_s longer. */
  gboolean (*release) (SandstepBackend *backend, const char *handle, const SandstepIdentity *who,
                       gint64 keep_s, gboolean *out_destroyed, GError **error);
  /* At once, killing what runs; destroying a sandbox that is gone is no error. */
  gboolean (*destroy) (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, GError **error);
  /* Reclaims sandboxes of @run (NULL: any) whose owner starts with
   * @owner_prefix (NULL: any owner) that are expired, or all of the run's
   * when !@expired_only; damaged ones once they are certainly expired, or all
   * of them with @broken.  Appends the handles it destroyed to @destroyed. */
  gboolean (*gc) (SandstepBackend *backend, const char *run, const char *owner_prefix, gboolean expired_only,
                  gboolean broken,
                  GPtrArray *destroyed, GError **error);
  /* Every sandbox, sorted by handle, as SandstepListEntry; of @run and of
   * @owner only when they are not NULL (a broken one has neither). */
  GPtrArray *(*list) (SandstepBackend *backend, const char *run, const char *owner, GError **error);

  void (*free) (SandstepBackend *backend);
} SandstepBackendClass;

struct _SandstepBackend {
  const SandstepBackendClass *klass;
};

struct _SandstepAttachment {
  SandstepBackend *backend;
  char *handle;
};

/* The local jail backend over @state_dir (NULL: sandstep_local_backend_default_dir()). */
SandstepBackend *sandstep_local_backend_new (const char *state_dir, GError **error);
/* $SANDSTEP_STATE_DIR, else /var/lib/sandstep for root, else $XDG_STATE_HOME/sandstep. */
char *sandstep_local_backend_default_dir (void);

/* ---- the interface: one wrapper per entry ---- */

char *sandstep_backend_provision (SandstepBackend *backend, const SandstepSpec *spec, const SandstepIdentity *who,
                                  gboolean *out_existing, GError **error);

/* Checks the owner and the lifetime, then claims.  While another holder has
 * the sandbox it asks again, more slowly each time (5 ms doubling to 100 ms),
 * for up to @wait_s seconds, calling @notify once with the holder's name;
 * then fails with SANDSTEP_SANDBOX_ERROR_BUSY (the backend's refusal when
 * @wait_s <= 0, else "still held by ... after waiting"). */
SandstepAttachment *sandstep_backend_attach (SandstepBackend *backend, const char *handle,
                                             const SandstepIdentity *who, double wait_s, SandstepWaitNotify notify,
                                             gpointer notify_data, GError **error);
/* A step's one command: attaches (waiting as sandstep_backend_attach()
 * does), runs @request within its budget, and ends the claim; in one
 * exchange where the backend can.  @on_ran gets the sandbox's spec and the
 * result once the command ran, before the call returns TRUE. */
typedef void (*SandstepRanFunc) (const SandstepSpec *spec, const SandstepRunResult *result, gpointer user_data);
gboolean sandstep_backend_run_step (SandstepBackend *backend, const char *handle, const SandstepIdentity *who,
                                    double wait_s, SandstepWaitNotify notify, gpointer notify_data,
                                    const SandstepRunRequest *request, SandstepRanFunc on_ran, gpointer ran_data,
                                    GError **error);
JsonNode *sandstep_backend_describe (SandstepBackend *backend, const char *handle, const SandstepIdentity *who,
                                     GError **error);
gboolean sandstep_backend_release (SandstepBackend *backend, const char *handle, const SandstepIdentity *who,
                                   gint64 keep_s, gboolean *out_destroyed, GError **error);
gboolean sandstep_backend_destroy (SandstepBackend *backend, const char *handle, const SandstepIdentity *who,
                                   GError **error);
gboolean sandstep_backend_gc (SandstepBackend *backend, const char *run, const char *owner_prefix,
                              gboolean expired_only, gboolean broken, GPtrArray *destroyed, GError **error);
GPtrArray *sandstep_backend_list (SandstepBackend *backend, const char *run, const char *owner, GError **error);
void sandstep_backend_free (SandstepBackend *backend);

/* Ends the claim; a release that came while it was held, and whose keep is
 * over, destroys the sandbox first (its holder finishes what the release
 * could not).  NULL is fine. */
void sandstep_attachment_detach (SandstepAttachment *attachment);

/* Runs a command within its budget: @request->timeout_s (<= 0: none) cut to
 * the sandbox's remaining lifetime (sandstep_run_budget()). */
gboolean sandstep_attachment_run_command (SandstepAttachment *attachment, const SandstepRunRequest *request,
                                          SandstepRunResult *result, GError **error);
GBytes *sandstep_attachment_read_file (SandstepAttachment *attachment, const char *path, gsize max_bytes,
                                       GError **error);
gboolean sandstep_attachment_write_file (SandstepAttachment *attachment, const char *path, const void *data,
                                         gsize len, GError **error);
gboolean sandstep_attachment_fork (SandstepAttachment *attachment, const SandstepIdentity *who, guint count,
                                   GPtrArray *out_handles, GError **error);
gboolean sandstep_attachment_checkpoint (SandstepAttachment *attachment, const char *name, GError **error);
gboolean sandstep_attachment_rollback (SandstepAttachment *attachment, const char *name, GError **error);
GPtrArray *sandstep_attachment_checkpoints (SandstepAttachment *attachment, GError **error);
gboolean sandstep_attachment_put (SandstepAttachment *attachment, const char *host_src, const char *dest,
                                  GError **error);
GPtrArray *sandstep_attachment_list_directory (SandstepAttachment *attachment, const char *path, GError **error);
/* A directory of the claimed sandbox opened for a watch into @out, or FALSE: a backend whose files are elsewhere
 * (remote) has none to give. */
gboolean sandstep_attachment_open_directory (SandstepAttachment *attachment, const char *path,
                                             SandstepWatchedDir *out, GError **error);
gint64 sandstep_attachment_export_file (SandstepAttachment *attachment, const char *path, int dest_fd,
                                        guint64 max_bytes, GError **error);
double sandstep_attachment_remaining_lifetime (SandstepAttachment *attachment);
const SandstepSpec *sandstep_attachment_spec (SandstepAttachment *attachment);

/* A command's budget: @timeout_s (<= 0: none) cut to @remaining_s, which it
 * never outlives.  Sets @result's applied_timeout_s to it and clamped to
 * whether the lifetime cut it (or set it, for no timeout). */
double sandstep_run_budget (double timeout_s, double remaining_s, SandstepRunResult *result);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepBackend, sandstep_backend_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepAttachment, sandstep_attachment_detach)

/* Where a client of sandstepd finds its token: never on the command line. */
#define SANDSTEP_TOKEN_ENV "SANDSTEP_TOKEN"
#define SANDSTEP_TOKEN_FILE_ENV "SANDSTEP_TOKEN_FILE"
/* A PEM file of CA certificates to trust for https:// servers (default: the system's). */
#define SANDSTEP_CA_FILE_ENV "SANDSTEP_CA_FILE"


G_END_DECLS
