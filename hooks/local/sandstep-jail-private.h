/* sandstep-jail-private.h: a jail's plan, as the compiler and the builder share it.
 *
 * sandstep-jail-plan.c (in the helper, which reads records and host files)
 * turns a sandbox's spec into a SandstepJail: every mount and file of the
 * sandbox as a list of steps, its environment, limits and seccomp program.
 * It travels to the supervisor as a GVariant; sandstep-jail.c executes it.
 */
#pragma once

#include <glib.h>
#include <linux/filter.h>
#include <sys/resource.h>

G_BEGIN_DECLS

/* The sandbox's root is a tmpfs mounted here, in the child's private mount namespace. */
#define SANDSTEP_JAIL_NEWROOT "/tmp"

typedef enum {
  JAIL_OP_TMPFS,      /* mount a tmpfs at path, data as options */
  JAIL_OP_MKDIR,      /* flags: the mode */
  JAIL_OP_TOUCH,      /* an empty file to bind a file onto */
  JAIL_OP_SYMLINK,    /* path -> source */
  JAIL_OP_WRITE,      /* a file of the sandbox's own with data as content, flags as mode */
  JAIL_OP_BIND,       /* bind source (a host path, or the slot's fd) on path */
  JAIL_OP_REMOUNT,    /* change the flags of the mount at path */
  JAIL_OP_RESTRICT,   /* mount_setattr: flags as MOUNT_ATTR_* on path and every mount below it */
  JAIL_OP_PROC,
  JAIL_OP_OPEN,       /* open the host path (not under the new root) into the slot */
  JAIL_OP_ATTACH,     /* move the detached mount in the slot (made by the supervisor) onto path */
} JailOpKind;

typedef struct {
  JailOpKind kind;
  char *path;         /* absolute, under SANDSTEP_JAIL_NEWROOT (a host path for JAIL_OP_OPEN) */
  char *source;
  GBytes *data;       /* JAIL_OP_TMPFS: options; JAIL_OP_WRITE: content */
  guint64 flags;
  int slot;           /* -1: none */
  char *what;         /* for messages: what this step does, in words */
} JailOp;

/* Mounts the supervisor makes, detached, before the child runs, for host
 * paths the sandbox's uid may not even reach: the trees (idmapped) and, as
 * root, the data mounts (read-only down their whole subtree). */
typedef struct {
  char *host_path;
  int slot;
  guint64 attrs;      /* MOUNT_ATTR_* */
  gboolean idmap;     /* through the sandbox's user namespace */
  gboolean recursive; /* with every mount below it */
} JailTree;

#define SANDSTEP_JAIL_MAX_SLOTS 64

struct _SandstepJail {
  GArray *ops;              /* of JailOp */
  GArray *trees;            /* of JailTree: made by the supervisor */
  int n_slots;
  int slots[SANDSTEP_JAIL_MAX_SLOTS];
  guint32 outer_uid;        /* the host uid and gid the sandbox's uid 0 is */
  guint32 outer_gid;
  gboolean idmap;           /* the trees are shown through idmapped mounts */
  gboolean open_net;        /* a user-mode network stack connects the namespace */
  gboolean egress;          /* network=allow: init hands connections to the proxy */
  char **env_base;          /* fixed variables: a command's terminal and locale come on top */
  char **env_own;           /* the spec's own, which win */
  GBytes *seccomp;
  struct sock_fprog seccomp_prog;
  int last_cap;
  int n_rlimits;
  struct { int resource; struct rlimit value; } rlimits[8];
  char *init_path;          /* sandstep-init, exec'd by fd: it is not visible inside */
  int init_fd;
  GPtrArray *sources;       /* host paths bound: a sandbox is rebuilt when one was replaced */
};

/* An empty jail, for the compiler and the loader. */
SandstepJail *sandstep_jail_alloc (void);

#define SANDSTEP_JAIL_OPS_TYPE "a(uayayaytiay)"
#define SANDSTEP_JAIL_TREES_TYPE "a(ayitbb)"

G_END_DECLS
