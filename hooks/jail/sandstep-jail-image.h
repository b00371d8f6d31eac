/* sandstep-jail-image.h: what builds a sandbox's jail, flat, at the head of its plan.
 *
 * The helper compiles a sandbox's spec into steps (sandstep-jail-plan.c) and
 * writes them, with its uids, limits and seccomp program, as one image of
 * fixed-size records and the strings they point to: offsets from the image's
 * start, NUL-terminated.  The plan file is the image followed, 8-aligned, by
 * the GVariant the supervisor reads for the rest (sandstep-supervisor-start.h).
 * Whoever builds the jail reads the image in place, with no library: the
 * supervisor, or the static front for a sandbox's first command
 * (sandstep-jail-start.h).
 *
 * Plain C.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

/* The plan the helper keeps beside a sandbox's record, and the layout it has: a supervisor refuses a plan of
 * another layout, or one whose inputs changed (sandstep-plan-inputs.h), and the helper compiles a new one. */
#define SANDSTEP_PLAN_FILE "plan"
#define SANDSTEP_PLAN_FORMAT 3

/* A kept plan is used only if nobody but the state directory's owner could have written it. */
static inline int
sandstep_kept_plan_trusted (const struct stat *st)
{
  return S_ISREG (st->st_mode) && st->st_uid == geteuid () && !(st->st_mode & 022);
}

#define SANDSTEP_JAIL_IMAGE_MAGIC 0x4c494a53u /* "SJIL" */
#define SANDSTEP_JAIL_MAX_SLOTS 64
#define SANDSTEP_JAIL_MAX_RLIMITS 8
/* The most cgroups a jail's child moves itself into: v1's memory, pids, cpu and blkio hierarchies
 * (sandstep_jail_start_in_cgroup()). */
#define SANDSTEP_JAIL_MAX_CGROUP_FDS 4

/* The jail's hostname, also in its /etc/hostname and /etc/hosts. */
#define SANDSTEP_JAIL_HOSTNAME "sandstep"

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
  JAIL_OP_ATTACH,     /* move the detached mount in the slot (made by the builder's parent) onto path */
  JAIL_OP_OVERLAY,    /* mount an overlayfs at path, data as options (an image's root, a layered tree) */
  JAIL_OP_UNSTAGE,    /* detach the mount at path with every mount below it, and remove its directory */
  JAIL_OP_REMOVE,     /* remove the file or empty directory at path, where there is one */
  JAIL_OP_N_KINDS,    /* not a kind: how many there are */
} JailOpKind;

enum {
  SANDSTEP_JAIL_IMAGE_IDMAP = 1 << 0,     /* the trees are shown through idmapped mounts */
  SANDSTEP_JAIL_IMAGE_OPEN_NET = 1 << 1,  /* a user-mode network stack joins the namespace (network=open) */
  SANDSTEP_JAIL_IMAGE_EGRESS = 1 << 2,    /* init hands connections to the egress proxy (network=allow) */
  SANDSTEP_JAIL_IMAGE_WRITABLE_ROOT = 1 << 3,  /* the root stays writable (an image's, with a layer of its own) */
};

typedef struct {
  uint32_t magic;
  uint32_t format;          /* SANDSTEP_PLAN_FORMAT of the helper that wrote it */
  uint32_t size;            /* of the image, this header included */
  uint32_t flags;
  uint32_t outer_uid;       /* the host uid and gid the sandbox's uid 0 is */
  uint32_t outer_gid;
  uint32_t n_slots;
  uint32_t n_ops, ops;      /* how many, and where: SandstepJailImageOp[] */
  uint32_t n_trees, trees;  /* SandstepJailImageTree[] */
  uint32_t n_rlimits, rlimits;  /* SandstepJailImageRlimit[] */
  uint32_t n_filters, filters;  /* the seccomp program: struct sock_filter[] */
  uint32_t cwd_slot;        /* 0: init starts in /workspace; N: in slot N-1's directory (a layered tree's root,
                             * which the helper reaches as init's cwd: sandstep-jail-plan.c) */
} SandstepJailImage;

typedef struct {
  uint32_t kind;            /* JailOpKind */
  int32_t slot;             /* -1: none */
  uint64_t flags;
  uint32_t path;            /* absolute, under SANDSTEP_JAIL_NEWROOT (a host path for JAIL_OP_OPEN) */
  uint32_t source;          /* 0: none */
  uint32_t what;            /* for messages: what this step does, in words */
  uint32_t data, data_len;  /* JAIL_OP_TMPFS, JAIL_OP_OVERLAY: options (NUL-terminated); JAIL_OP_WRITE: content */
  uint32_t reserved;
} SandstepJailImageOp;

/* A mount the builder's parent makes, detached, before the child runs, of a host path the sandbox's uid may not
 * even reach: the trees (idmapped) and, as root, the data mounts (read-only down their whole subtree). */
typedef struct {
  uint32_t host_path;
  int32_t slot;
  uint64_t attrs;           /* MOUNT_ATTR_* */
  uint32_t idmap;           /* through the sandbox's user namespace */
  uint32_t recursive;       /* with every mount below it */
} SandstepJailImageTree;

typedef struct {
  int32_t resource;
  uint32_t reserved;
  uint64_t soft, hard;
} SandstepJailImageRlimit;

/* The image at the head of @data, checked whole (every record and string inside it, every slot in range); NULL
 * if it is damaged or of another format. */
const SandstepJailImage *sandstep_jail_image_check (const void *data, size_t size, uint32_t format);

/* Where the rest of the plan begins. */
static inline size_t
sandstep_jail_image_end (const SandstepJailImage *image)
{
  return ((size_t) image->size + 7) & ~(size_t) 7;
}

static inline const char *
sandstep_jail_image_at (const SandstepJailImage *image, uint32_t offset)
{
  return offset != 0 ? (const char *) image + offset : NULL;
}

static inline const SandstepJailImageOp *
sandstep_jail_image_op (const SandstepJailImage *image, uint32_t i)
{
  return (const SandstepJailImageOp *) ((const char *) image + image->ops) + i;
}

static inline const SandstepJailImageTree *
sandstep_jail_image_tree (const SandstepJailImage *image, uint32_t i)
{
  return (const SandstepJailImageTree *) ((const char *) image + image->trees) + i;
}

static inline const SandstepJailImageRlimit *
sandstep_jail_image_rlimit (const SandstepJailImage *image, uint32_t i)
{
  return (const SandstepJailImageRlimit *) ((const char *) image + image->rlimits) + i;
}
