/* sandstep-jail-private.h: a jail's plan, as the compiler and the builder share it.
 *
 * sandstep-jail-plan.c (in the helper, which reads records and host files)
 * turns a sandbox's spec into a SandstepJail: every mount and file of the
 * sandbox as a list of steps, its environment, limits and seccomp program.
 * It travels to the supervisor as the jail's image (sandstep-jail-image.h)
 * and a GVariant; sandstep-jail-start.c executes the image.
 */
#pragma once

#include <glib.h>
#include <sys/resource.h>

#include "sandstep-jail-image.h"

G_BEGIN_DECLS


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

/* The compiler fills the arrays and numbers and writes them as the jail's image (sandstep-jail-image.h); the
 * loader reads them from that image in place. */
struct _SandstepJail {
  GArray *ops;              /* of JailOp: compiled */
  GArray *trees;            /* of JailTree: compiled */
  int n_slots;
  guint32 outer_uid;        /* the host uid and gid the sandbox's uid 0 is */
  guint32 outer_gid;
  gboolean idmap;           /* the trees are shown through idmapped mounts */
  gboolean open_net;        /* a user-mode network stack connects the namespace */
  gboolean egress;          /* network=allow: init hands connections to the proxy */
  gboolean writable_root;   /* an image's root with a writable layer of its own */
  int cwd_slot;             /* 0: init starts in /workspace; N: in slot N-1 (a layered tree's root) */
  int tree_slots[2];        /* a layered tree's /workspace and /tmp, opened before an image's root covers them */
  int n_rlimits;
  struct { int resource; struct rlimit value; } rlimits[SANDSTEP_JAIL_MAX_RLIMITS];
  char **env_base;          /* fixed variables: a command's terminal and locale come on top */
  char **env_own;           /* the spec's own, which win */
  GPtrArray *sources;       /* host paths bound: a sandbox is rebuilt when one was replaced */
  const SandstepJailImage *image;  /* loaded: in the plan's mapping, which outlives the jail */
  char *init_path;          /* sandstep-init, exec'd by fd: it is not visible inside */
  int init_fd;
};

/* An empty jail, for the compiler and the loader. */
SandstepJail *sandstep_jail_alloc (void);


G_END_DECLS
