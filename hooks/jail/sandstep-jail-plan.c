/* sandstep-jail-plan.c: a sandbox's spec compiled into the steps that build it.
 *
 * Runs in the helper, which may read the record and the host's files; the
 * result travels to the supervisor as a GVariant (sandstep-jail.c builds
 * it).  Construction order follows bubblewrap's: a tmpfs root, read-only
 * /usr, the persistent trees, /etc, a minimal /dev, data mounts, then /proc
 * while the host's is still visible, and the /proc masks.
 */
#include "sandstep-jail-plan.h"
#include "sandstep-jail-private.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/mount.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-etc.h"
#include "sandstep-jail-init.h"
#include "sandstep-limits.h"
#include "sandstep-plan-inputs.h"
#include "sandstep-jail-image.h"

#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV 0x00000004
#endif

#define NEWROOT SANDSTEP_JAIL_NEWROOT
/* Every bind of a host path is read-only, nosuid and nodev down its whole subtree. */
#define HOST_BIND_ATTRS (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
#define TREE_ATTRS (MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)

static JailOp *
add_op (SandstepJail *jail, JailOpKind kind, const char *path, const char *source, guint64 flags, GBytes *data,
        const char *what)
{
  JailOp op = {
    .kind = kind,
    .path = kind == JAIL_OP_OPEN ? g_strdup (path) : g_strconcat (NEWROOT, path, NULL),
    .source = g_strdup (source),
    .data = data,
    .flags = flags,
    .slot = -1,
    .what = g_strdup (what),
  };

  g_array_append_val (jail->ops, op);
  return &g_array_index (jail->ops, JailOp, jail->ops->len - 1);
}

static void
add_tmpfs (SandstepJail *jail, const char *path, guint64 flags, const char *options, const char *what)
{
  add_op (jail, JAIL_OP_TMPFS, path, NULL, flags, g_bytes_new (options, strlen (options) + 1), what);
}

static gboolean
take_slot (SandstepJail *jail, int *out_slot, GError **error)
{
  if (jail->n_slots == SANDSTEP_JAIL_MAX_SLOTS)
    return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                           "Too many mounts for one sandbox (at most %d); use fewer data mounts",
                           SANDSTEP_JAIL_MAX_SLOTS - 4);
  *out_slot = jail->n_slots++;
  return TRUE;
}

/* Binds @host_path on @target, read-only through its whole subtree unless
 * @attrs says otherwise.  With @early, the child opens the host path
 * before the tmpfs root is mounted (the path may lie under NEWROOT). */
static gboolean
add_bind (SandstepJail *jail, const char *host_path, gboolean early, const char *target, guint64 attrs,
          gboolean is_dir, GError **error)
{
  g_autofree char *what = g_strdup_printf ("bind '%s' on %s", host_path, target);
  int slot = -1;

  if (early)
    {
      JailOp open_op = { .kind = JAIL_OP_OPEN, .path = g_strdup (host_path), .what = g_strdup (what) };
      if (!take_slot (jail, &slot, error))
        return FALSE;
      open_op.slot = slot;
      /* Opens run first: before every other op. */
      g_array_prepend_val (jail->ops, open_op);
    }
  add_op (jail, is_dir ? JAIL_OP_MKDIR : JAIL_OP_TOUCH, target, NULL, 0, NULL, what);
  add_op (jail, JAIL_OP_BIND, target, early ? NULL : host_path, MS_BIND | MS_REC, NULL, what)->slot = slot;
  add_op (jail, JAIL_OP_RESTRICT, target, NULL, attrs, NULL, what);
  g_ptr_array_add (jail->sources, g_strdup (host_path));
  return TRUE;
}

/* A mount the supervisor makes of @host_path, attached on @target by the child. */
static gboolean
add_detached (SandstepJail *jail, const char *host_path, const char *target, guint64 attrs, gboolean idmap,
              gboolean is_dir, GError **error)
{
  g_autofree char *what = g_strdup_printf ("attach '%s' on %s", host_path, target);
  JailTree tree = { .attrs = attrs, .idmap = idmap, .recursive = !idmap };

  if (!take_slot (jail, &tree.slot, error))
    return FALSE;
  tree.host_path = g_strdup (host_path);
  g_array_append_val (jail->trees, tree);
  add_op (jail, is_dir ? JAIL_OP_MKDIR : JAIL_OP_TOUCH, target, NULL, 0755, NULL, what);
  add_op (jail, JAIL_OP_ATTACH, target, NULL, 0, NULL, what)->slot = tree.slot;
  g_ptr_array_add (jail->sources, g_strdup (host_path));
  return TRUE;
}

/* A persistent tree: through an idmapped mount the supervisor makes (as root), or bound as it is. */
static gboolean
add_tree (SandstepJail *jail, const char *host_path, const char *target, GError **error)
{
  if (jail->idmap)
    return add_detached (jail, host_path, target, TREE_ATTRS, TRUE, TRUE, error);
  return add_bind (jail, host_path, TRUE, target, TREE_ATTRS, TRUE, error);
}

typedef struct {
  SandstepJail *jail;
  GVariantBuilder *inputs;
  GError **error;
  gboolean ok;
} EtcSink;

static void
etc_file (const char *name, GBytes *content, guint mode, gpointer data)
{
  EtcSink *sink = data;
  g_autofree char *path = g_strconcat ("/etc/", name, NULL);
  g_autofree char *what = g_strdup_printf ("write %s", path);

  add_op (sink->jail, JAIL_OP_WRITE, path, NULL, mode, g_bytes_ref (content), what);
}

static void
etc_directory (const char *name, gpointer data)
{
  EtcSink *sink = data;
  g_autofree char *path = g_strconcat ("/etc/", name, NULL);
  g_autofree char *what = g_strdup_printf ("create %s", path);

  add_op (sink->jail, JAIL_OP_MKDIR, path, NULL, 0755, NULL, what);
}

static void
etc_symlink (const char *name, const char *target, gpointer data)
{
  EtcSink *sink = data;
  g_autofree char *path = g_strconcat ("/etc/", name, NULL);

  add_op (sink->jail, JAIL_OP_SYMLINK, path, target, 0, NULL, path);
}

static void
etc_live (const char *host_path, gboolean is_dir, gpointer data)
{
  EtcSink *sink = data;

  if (sink->ok)
    sink->ok = add_bind (sink->jail, host_path, FALSE, host_path, HOST_BIND_ATTRS, is_dir, sink->error);
}

/* @seen: the stat (lstat without @follow) that the plan acted on; NULL: absent, or probed otherwise. */
static void
add_input (GVariantBuilder *inputs, const char *host_path, SandstepPlanInputLevel level, gboolean follow,
           const struct stat *seen)
{
  if (inputs != NULL)
    sandstep_plan_inputs_add (inputs, host_path, level, follow, seen);
}

static void
etc_input (const char *host_path, const struct stat *seen, gboolean copied, gpointer data)
{
  add_input (((EtcSink *) data)->inputs, host_path,
             copied ? SANDSTEP_PLAN_INPUT_CONTENT : SANDSTEP_PLAN_INPUT_IDENTITY, FALSE, seen);
}

/* The sandbox's own /etc in its root (read-only with the root), with the
 * host directories it lists bound live on top. */
static gboolean
add_etc (SandstepJail *jail, gboolean open_network, GVariantBuilder *inputs, GError **error)
{
  static const SandstepEtcSink sink_funcs = { etc_file, etc_directory, etc_symlink, etc_live, etc_input };
  EtcSink sink = { jail, inputs, error, TRUE };

  add_op (jail, JAIL_OP_MKDIR, "/etc", NULL, 0755, NULL, "create /etc");
  sandstep_etc_build (open_network, &sink_funcs, &sink);
  return sink.ok;
}

static void
add_dev (SandstepJail *jail)
{
  static const char *const nodes[] = { "null", "zero", "full", "random", "urandom", "tty" };
  static const char *const links[][2] = {
    { "/dev/fd", "/proc/self/fd" }, { "/dev/stdin", "/proc/self/fd/0" },
    { "/dev/stdout", "/proc/self/fd/1" }, { "/dev/stderr", "/proc/self/fd/2" },
  };

  add_op (jail, JAIL_OP_MKDIR, "/dev", NULL, 0755, NULL, "create /dev");
  add_tmpfs (jail, "/dev", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64", "mount a tmpfs on /dev");
  for (gsize i = 0; i < G_N_ELEMENTS (nodes); i++)
    {
      g_autofree char *path = g_strconcat ("/dev/", nodes[i], NULL);
      g_autofree char *what = g_strdup_printf ("bind the device %s", path);
      add_op (jail, JAIL_OP_TOUCH, path, NULL, 0, NULL, what);
      add_op (jail, JAIL_OP_BIND, path, path, MS_BIND, NULL, what);
      /* A device's reads and writes do not go through its mount; chmod, chown and utimes do, and fail. */
      add_op (jail, JAIL_OP_RESTRICT, path, NULL, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, NULL, what);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (links); i++)
    add_op (jail, JAIL_OP_SYMLINK, links[i][0], links[i][1], 0, NULL, links[i][0]);
  add_op (jail, JAIL_OP_MKDIR, "/dev/shm", NULL, 01777, NULL, "create /dev/shm");
  add_tmpfs (jail, "/dev/shm", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=1777,size=64m", "mount a tmpfs on /dev/shm");
  add_op (jail, JAIL_OP_REMOUNT, "/dev", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC, NULL,
          "make /dev read-only");
}

/* The top-level links of a merged-/usr system (/bin -> usr/bin); where the
 * host has a real directory instead, it is bound read-only. */
static gboolean
add_usr (SandstepJail *jail, GVariantBuilder *inputs, GError **error)
{
  static const char *const tops[] = { "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32" };

  if (!add_bind (jail, "/usr", FALSE, "/usr", HOST_BIND_ATTRS, TRUE, error))
    return FALSE;
  for (gsize i = 0; i < G_N_ELEMENTS (tops); i++)
    {
      struct stat st;
      if (lstat (tops[i], &st) < 0)
        {
          add_input (inputs, tops[i], SANDSTEP_PLAN_INPUT_PRESENCE, FALSE, NULL);
          continue;
        }
      /* A link's target is copied; a directory is bound live. */
      add_input (inputs, tops[i], S_ISLNK (st.st_mode) ? SANDSTEP_PLAN_INPUT_CONTENT : SANDSTEP_PLAN_INPUT_IDENTITY,
                 FALSE, &st);
      if (S_ISLNK (st.st_mode))
        {
          g_autofree char *target = g_file_read_link (tops[i], NULL);
          if (target != NULL)
            add_op (jail, JAIL_OP_SYMLINK, tops[i], target, 0, NULL, tops[i]);
        }
      else if (S_ISDIR (st.st_mode) && !add_bind (jail, tops[i], FALSE, tops[i], HOST_BIND_ATTRS, TRUE, error))
        return FALSE;
    }
  return TRUE;
}

/* Where an image's root is put together, on the staging tmpfs that the overlay then covers: each layer's
 * directory (IMAGE_STAGE/N), the sandbox's writable layer (IMAGE_STAGE/rw), and sandstep's own top layer
 * (IMAGE_STAGE/top): the mount points and the files of /etc that the sandbox gets whatever the image has. */
#define IMAGE_STAGE "/.sandstep"

static void
top_file (SandstepJail *jail, const char *name, const char *text)
{
  g_autofree char *path = g_strconcat (IMAGE_STAGE "/top/etc/", name, NULL);
  g_autofree char *what = g_strdup_printf ("write /etc/%s", name);

  add_op (jail, JAIL_OP_WRITE, path, NULL, 0644, g_bytes_new (text, strlen (text)), what);
}

/* An overlayfs at @target.  A writable one (@workdir, under the new root, as @target is) is "volatile": else each
 * time a jail ends overlayfs syncs the whole file system under its upper layer, every program's unwritten data
 * with it.  Sandstep syncs no sandbox's writes, bound or overlaid, so this takes away nothing it promised.
 * overlayfs marks such a work directory and refuses it the next time: the mark goes just before. */
static void
add_overlay (SandstepJail *jail, const char *target, GString *options, const char *workdir, gulong flags,
             const char *what)
{
  if (workdir != NULL)
    {
      static const char *const mark[] = { "/work/incompat/volatile/dirty", "/work/incompat/volatile" };
      for (gsize i = 0; i < G_N_ELEMENTS (mark); i++)
        {
          g_autofree char *path = g_strconcat (workdir, mark[i], NULL);
          add_op (jail, JAIL_OP_REMOVE, path, NULL, 0, NULL, "clear the mark of the overlay's last mount");
        }
      g_string_append_printf (options, ",workdir=" NEWROOT "%s,volatile", workdir);
    }
  add_op (jail, JAIL_OP_OVERLAY, target, NULL, flags, g_bytes_new (options->str, options->len + 1), what);
}

/* The image's layers, lowest first in @config, under sandstep's top layer, with the sandbox's own writable
 * layer over them all (or none: read-only), as overlayfs in the sandbox's user namespace ("userxattr": the
 * unpacker wrote opaque directories as user.overlay.opaque).  Nothing of the host's /usr or /etc shows. */
static gboolean
add_image_root (SandstepJail *jail, const SandstepJailConfig *config, const char *layered_lowers, GError **error)
{
  static const char *const mount_points[] = { "/workspace", "/tmp", "/dev", "/proc", "/etc" };
  g_autoptr(GString) options = g_string_new ("lowerdir=");
  const SandstepSpec *spec = config->spec;
  const char *workdir = NULL;
  guint n = 0;

  /* A layered sandbox's frozen changes to the root lie over sandstep's top layer, as its writable layer does. */
  if (layered_lowers != NULL && !spec->root_readonly)
    g_string_append (options, layered_lowers);
  g_string_append (options, NEWROOT IMAGE_STAGE "/top");
  while (config->image_layers[n] != NULL)
    n++;
  if (n == 0)
    return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                           "image '%s' has no layers; provision from another image", spec->image);
  /* Each layer takes a slot, as a mount does; the trees and the data mounts need theirs too. */
  if (n + 3 + spec->mounts->len > SANDSTEP_JAIL_MAX_SLOTS)
    return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                           "image '%s' has %u layers, more than a sandbox stacks with %u data mounts (at most %u "
                           "layers and mounts together); flatten the image (squash its layers) or use fewer mounts",
                           spec->image, n, spec->mounts->len, SANDSTEP_JAIL_MAX_SLOTS - 3);
  /* overlayfs takes the top layer first. */
  for (guint i = n; i-- > 0;)
    {
      g_autofree char *target = g_strdup_printf (IMAGE_STAGE "/%u", i);
      /* As root the layers are the image's uids (mostly 0): shown through the sandbox's idmap, host 0 is the
       * sandbox's 0.  A caller's own layers are the sandbox's uid 0 already. */
      if (jail->idmap ? !add_detached (jail, config->image_layers[i], target, HOST_BIND_ATTRS, TRUE, TRUE, error)
                      : !add_bind (jail, config->image_layers[i], TRUE, target, HOST_BIND_ATTRS, TRUE, error))
        return FALSE;
      g_string_append_printf (options, ":" NEWROOT "%s", target);
    }
  if (layered_lowers != NULL && !spec->root_readonly)
    {
      /* The layered tree mounted the writable layers' directory there already. */
      workdir = IMAGE_STAGE "/rw/root-work";
      g_string_append (options, ",upperdir=" NEWROOT IMAGE_STAGE "/rw/root");
    }
  else if (layered_lowers == NULL && config->image_rw != NULL)
    {
      if (!add_tree (jail, config->image_rw, IMAGE_STAGE "/rw", error))
        return FALSE;
      workdir = IMAGE_STAGE "/rw/work";
      g_string_append (options, ",upperdir=" NEWROOT IMAGE_STAGE "/rw/upper");
    }
  jail->writable_root = workdir != NULL;
  g_string_append (options, ",userxattr");

  add_op (jail, JAIL_OP_MKDIR, IMAGE_STAGE "/top", NULL, 0755, NULL, "create sandstep's top layer");
  for (gsize i = 0; i < G_N_ELEMENTS (mount_points); i++)
    {
      g_autofree char *path = g_strconcat (IMAGE_STAGE "/top", mount_points[i], NULL);
      add_op (jail, JAIL_OP_MKDIR, path, NULL, 0755, NULL, "create a mount point in sandstep's top layer");
    }
  if (spec->mounts->len > 0)
    add_op (jail, JAIL_OP_MKDIR, IMAGE_STAGE "/top/data", NULL, 0755, NULL, "create /data");
  for (guint i = 0; i < spec->mounts->len; i++)
    {
      const SandstepMount *mount = spec->mounts->pdata[i];
      g_autofree char *path = g_strconcat (IMAGE_STAGE "/top/data/", mount->name, NULL);
      add_op (jail, g_file_test (mount->host_path, G_FILE_TEST_IS_DIR) ? JAIL_OP_MKDIR : JAIL_OP_TOUCH, path, NULL,
              0755, NULL, "create a data mount's mount point");
    }
  top_file (jail, "hostname", SANDSTEP_JAIL_HOSTNAME "\n");
  top_file (jail, "hosts", SANDSTEP_ETC_HOSTS);
  /* Where DNS is meant to work, the host's resolver; elsewhere an empty one, so that it fails. */
  if (jail->open_net)
    {
      g_autofree char *resolv = NULL;
      add_input (config->inputs, "/etc/resolv.conf", SANDSTEP_PLAN_INPUT_CONTENT, TRUE, NULL);
      if (g_file_get_contents ("/etc/resolv.conf", &resolv, NULL, NULL))
        top_file (jail, "resolv.conf", resolv);
    }
  else
    top_file (jail, "resolv.conf", "");
  add_overlay (jail, "", options, workdir, MS_NOSUID | MS_NODEV | (jail->writable_root ? 0 : MS_RDONLY),
               "mount the image's layers as the root (overlayfs)");
  return TRUE;
}

/* A layered sandbox's files (forks and checkpoints, sandstep-store.h): /workspace and /tmp are one overlayfs, its
 * frozen layers' tree/ under its own writable rw/tree, built in the staging directory before an image's root
 * covers it.  Its root is opened three times: /workspace and /tmp, bound later, and the tree itself, which
 * becomes init's cwd: the helper's file tools reach it there (/proc/PID/cwd), so that they and the commands
 * use one overlay, never two over one upper.  @root_lowers gets the layers' root/, for an image's root. */
static gboolean
add_layered_tree (SandstepJail *jail, const SandstepJailConfig *config, GString *root_lowers, GError **error)
{
  static const char *const opened[] = { IMAGE_STAGE "/w/workspace", IMAGE_STAGE "/w/tmp", IMAGE_STAGE "/w" };
  g_autoptr(GString) options = g_string_new ("lowerdir=");
  guint n = g_strv_length ((char **) config->tree_layers);

  if (n == 0 || config->rw == NULL)
    return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                           "a layered sandbox needs its layers and its writable directory; destroy it and "
                           "provision again");
  if (n + 5 + config->spec->mounts->len + (config->image_layers != NULL ? g_strv_length ((char **) config->image_layers) : 0) >
      SANDSTEP_JAIL_MAX_SLOTS)
    return sandstep_throw (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP,
                           "the sandbox has %u layers of forks and checkpoints, more than one sandbox stacks with its "
                           "image and data mounts (at most %u mounts together); fork a new sandbox from an export of "
                           "this one, or use fewer checkpoints",
                           n, SANDSTEP_JAIL_MAX_SLOTS - 5);
  if (!add_tree (jail, config->rw, IMAGE_STAGE "/rw", error))
    return FALSE;
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *target = g_strdup_printf (IMAGE_STAGE "/l%u", i);
      /* As root the layers are host 0's, as a sandbox's files are: shown through this sandbox's idmap. */
      if (jail->idmap ? !add_detached (jail, config->tree_layers[i], target, HOST_BIND_ATTRS, TRUE, TRUE, error)
                      : !add_bind (jail, config->tree_layers[i], TRUE, target, HOST_BIND_ATTRS, TRUE, error))
        return FALSE;
      g_string_append_printf (options, "%s" NEWROOT "%s/tree", i > 0 ? ":" : "", target);
      if (root_lowers != NULL)
        g_string_append_printf (root_lowers, NEWROOT "%s/root:", target);
    }
  g_string_append (options, ",upperdir=" NEWROOT IMAGE_STAGE "/rw/tree,userxattr");
  add_op (jail, JAIL_OP_MKDIR, IMAGE_STAGE "/w", NULL, 0700, NULL, "create the layered tree's mount point");
  add_overlay (jail, IMAGE_STAGE "/w", options, IMAGE_STAGE "/rw/tree-work", MS_NOSUID | MS_NODEV,
               "mount the sandbox's layers (overlayfs)");
  for (gsize i = 0; i < G_N_ELEMENTS (opened); i++)
    {
      g_autofree char *path = g_strconcat (NEWROOT, opened[i], NULL);
      int slot = -1;

      if (!take_slot (jail, &slot, error))
        return FALSE;
      /* In order, not first as a host path's open: the overlay is there by now. */
      add_op (jail, JAIL_OP_OPEN, path, NULL, 0, NULL, "open the layered tree")->slot = slot;
      if (i < 2)
        jail->tree_slots[i] = slot;
      else
        jail->cwd_slot = slot + 1;
    }
  return TRUE;
}

/* /workspace or /tmp from a layered tree's slot. */
static void
add_layered_bind (SandstepJail *jail, int slot, const char *target)
{
  g_autofree char *what = g_strdup_printf ("bind the layered tree on %s", target);

  add_op (jail, JAIL_OP_MKDIR, target, NULL, 0755, NULL, what);
  add_op (jail, JAIL_OP_BIND, target, NULL, MS_BIND | MS_REC, NULL, what)->slot = slot;
  add_op (jail, JAIL_OP_RESTRICT, target, NULL, TREE_ATTRS, NULL, what);
}

/* /workspace and /tmp: the sandbox's own directories, or its layered tree. */
static gboolean
add_files (SandstepJail *jail, const SandstepJailConfig *config, GError **error)
{
  if (config->tree_layers != NULL)
    {
      add_layered_bind (jail, jail->tree_slots[0], "/workspace");
      add_layered_bind (jail, jail->tree_slots[1], "/tmp");
      return TRUE;
    }
  return add_tree (jail, config->workspace, "/workspace", error) && add_tree (jail, config->tmp, "/tmp", error);
}

/* The host-wide knobs and views of /proc, which a sandbox has no business
 * changing or reading: read-only or hidden, as Docker masks them. */
static void
add_proc_masks (SandstepJail *jail, GVariantBuilder *inputs)
{
  static const char *const read_only_dirs[] = { "sys", "irq", "bus", "fs", "sysvipc" };
  static const char *const hidden_files[] = {
    "sysrq-trigger", "kcore", "kmsg", "keys", "key-users", "timer_list", "sched_debug", "latency_stats",
    "kallsyms", "kpagecount", "kpageflags", "kpagecgroup", "config.gz", "slabinfo", "vmallocinfo",
  };
  static const char *const hidden_dirs[] = { "acpi", "scsi", "asound", "driver", "tty", "dynamic_debug" };
  g_autofree char *first_file = NULL;
  g_autofree char *first_dir = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS (read_only_dirs); i++)
    {
      g_autofree char *host = g_strconcat ("/proc/", read_only_dirs[i], NULL);
      g_autofree char *inside = g_strconcat (NEWROOT, host, NULL);
      g_autofree char *what = g_strdup_printf ("make %s read-only", host);
      add_input (inputs, host, SANDSTEP_PLAN_INPUT_PRESENCE, TRUE, NULL);
      if (!g_file_test (host, G_FILE_TEST_IS_DIR))
        continue;
      /* Bound onto itself (the sandbox's own /proc/NAME), so that it can be made read-only. */
      add_op (jail, JAIL_OP_BIND, host, inside, MS_BIND | MS_REC, NULL, what);
      add_op (jail, JAIL_OP_RESTRICT, host, NULL, HOST_BIND_ATTRS, NULL, what);
    }
  /* The first mask of each kind gets its mount flags; the others are binds of it, which carry them. */
  for (gsize i = 0; i < G_N_ELEMENTS (hidden_files); i++)
    {
      g_autofree char *host = g_strconcat ("/proc/", hidden_files[i], NULL);
      g_autofree char *what = g_strdup_printf ("hide %s", host);
      add_input (inputs, host, SANDSTEP_PLAN_INPUT_PRESENCE, TRUE, NULL);
      if (!g_file_test (host, G_FILE_TEST_EXISTS))
        continue;
      /* The mask is /dev/null: a read sees nothing, a write vanishes, the real file is out of reach. */
      if (first_file == NULL)
        {
          add_op (jail, JAIL_OP_BIND, host, "/dev/null", MS_BIND, NULL, what);
          add_op (jail, JAIL_OP_RESTRICT, host, NULL, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, NULL, what);
          first_file = g_strconcat (NEWROOT, host, NULL);
        }
      else
        add_op (jail, JAIL_OP_BIND, host, first_file, MS_BIND, NULL, what);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (hidden_dirs); i++)
    {
      g_autofree char *host = g_strconcat ("/proc/", hidden_dirs[i], NULL);
      g_autofree char *what = g_strdup_printf ("hide %s", host);
      add_input (inputs, host, SANDSTEP_PLAN_INPUT_PRESENCE, TRUE, NULL);
      if (!g_file_test (host, G_FILE_TEST_IS_DIR))
        continue;
      if (first_dir == NULL)
        {
          add_tmpfs (jail, host, MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "mode=0555,size=0", what);
          first_dir = g_strconcat (NEWROOT, host, NULL);
        }
      else
        add_op (jail, JAIL_OP_BIND, host, first_dir, MS_BIND, NULL, what);
    }
}

/* The fixed variables, and the spec's own; a command's terminal and locale
 * come between them (sandstep_jail_environment()). */
static void
build_environment (SandstepJail *jail, const SandstepSpec *spec, const char *const *image_env)
{
  GHashTableIter iter;
  gpointer key, value;
  char **base = NULL, **own = NULL;

  base = g_environ_setenv (base, "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", TRUE);
  base = g_environ_setenv (base, "HOME", "/workspace", TRUE);
  base = g_environ_setenv (base, "PWD", "/workspace", TRUE);
  base = g_environ_setenv (base, "TMPDIR", "/tmp", TRUE);
  base = g_environ_setenv (base, "USER", "root", TRUE);
  base = g_environ_setenv (base, "LOGNAME", "root", TRUE);
  base = g_environ_setenv (base, "SHELL", "/bin/sh", TRUE);
  base = g_environ_setenv (base, "HOSTNAME", SANDSTEP_JAIL_HOSTNAME, TRUE);
  base = g_environ_setenv (base, "SANDSTEP", "1", TRUE);
  /* An image's Env is the base (its PATH, its language's variables); the working directory and HOME stay. */
  for (gsize i = 0; image_env != NULL && image_env[i] != NULL; i++)
    {
      g_autofree char *name = g_strndup (image_env[i], strcspn (image_env[i], "="));
      if (strcmp (name, "HOME") != 0 && strcmp (name, "PWD") != 0)
        base = g_environ_setenv (base, name, image_env[i] + strlen (name) + 1, TRUE);
    }
  if (spec->network == SANDSTEP_NETWORK_ALLOW)
    {
      static const char *const proxy_vars[] = { "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy",
                                                "ALL_PROXY", "all_proxy" };
      for (gsize i = 0; i < G_N_ELEMENTS (proxy_vars); i++)
        base = g_environ_setenv (base, proxy_vars[i], SANDSTEP_PROXY_URL, TRUE);
      base = g_environ_setenv (base, "NO_PROXY", "localhost,127.0.0.1,::1", TRUE);
      base = g_environ_setenv (base, "no_proxy", "localhost,127.0.0.1,::1", TRUE);
    }
  g_hash_table_iter_init (&iter, spec->env);
  while (g_hash_table_iter_next (&iter, &key, &value))
    own = g_environ_setenv (own, key, value, TRUE);
  g_hash_table_iter_init (&iter, spec->secrets);
  while (g_hash_table_iter_next (&iter, &key, &value))
    own = g_environ_setenv (own, key, value, TRUE);
  jail->env_base = base;
  jail->env_own = own;
}

static void
add_rlimit (SandstepJail *jail, int resource, rlim_t soft, rlim_t hard)
{
  jail->rlimits[jail->n_rlimits].resource = resource;
  jail->rlimits[jail->n_rlimits].value.rlim_cur = soft;
  jail->rlimits[jail->n_rlimits].value.rlim_max = hard;
  jail->n_rlimits++;
}

static void
set_rlimits (SandstepJail *jail, const SandstepJailConfig *config)
{
  SandstepLimits limits = sandstep_limits_resolve (&config->spec->limits);

  add_rlimit (jail, RLIMIT_CORE, 0, 0);
  add_rlimit (jail, RLIMIT_NOFILE, SANDSTEP_DEFAULT_NOFILE, SANDSTEP_DEFAULT_NOFILE);
  add_rlimit (jail, RLIMIT_FSIZE, limits.disk, limits.disk);
  /* SIGXCPU at the limit, SIGKILL a second later for a command that ignores it. */
  add_rlimit (jail, RLIMIT_CPU, limits.cpu_time_s, limits.cpu_time_s + 1);
  /* Counted per user: the sandbox's uid is its own, so this bounds its processes even without a cgroup
   * (init is one of them).  With one, the cgroup's limit comes first, so that hitting it is seen and said. */
  add_rlimit (jail, RLIMIT_NPROC, limits.pids + (config->memory_by_rlimit ? 1 : 2),
              limits.pids + (config->memory_by_rlimit ? 1 : 2));
  if (config->memory_by_rlimit)
    add_rlimit (jail, RLIMIT_AS, limits.memory, limits.memory);
}

SandstepJail *
sandstep_jail_new (const SandstepJailConfig *config, GError **error)
{
  g_autoptr(SandstepJail) jail = sandstep_jail_alloc ();
  const SandstepSpec *spec = config->spec;

  jail->outer_uid = config->outer_uid;
  jail->outer_gid = config->outer_gid;
  jail->idmap = config->idmap;
  /* Every sandbox has a network namespace of its own; an open one is joined to the outside by a
   * user-mode network stack (sandstep-supervisor.c). */
  jail->open_net = spec->network == SANDSTEP_NETWORK_OPEN;
  jail->egress = spec->network == SANDSTEP_NETWORK_ALLOW;
  build_environment (jail, spec, config->image_env);
  set_rlimits (jail, config);

  if (config->image_layers != NULL)
    {
      g_autoptr(GString) root_lowers = g_string_new (NULL);

      add_tmpfs (jail, "", MS_NOSUID | MS_NODEV, "mode=0755,size=8m,nr_inodes=8192", "mount the staging tmpfs");
      add_op (jail, JAIL_OP_MKDIR, IMAGE_STAGE, NULL, 0700, NULL, "create the image's staging directory");
      if ((config->tree_layers != NULL && !add_layered_tree (jail, config, root_lowers, error)) ||
          !add_image_root (jail, config, config->tree_layers != NULL ? root_lowers->str : NULL, error) ||
          !add_files (jail, config, error))
        return NULL;
    }
  else
    {
      add_tmpfs (jail, "", MS_NOSUID | MS_NODEV, "mode=0755,size=8m,nr_inodes=8192", "mount the tmpfs root");
      if (config->tree_layers != NULL)
        {
          /* Staged on a tmpfs of its own, detached once the tree is bound: nothing of it shows inside. */
          add_op (jail, JAIL_OP_MKDIR, IMAGE_STAGE, NULL, 0700, NULL, "create the layers' staging directory");
          add_tmpfs (jail, IMAGE_STAGE, MS_NOSUID | MS_NODEV, "mode=0700,size=64k,nr_inodes=256",
                     "mount the layers' staging tmpfs");
          if (!add_layered_tree (jail, config, NULL, error))
            return NULL;
        }
      if (!add_usr (jail, config->inputs, error) || !add_files (jail, config, error) ||
          !add_etc (jail, jail->open_net, config->inputs, error))
        return NULL;
      if (config->tree_layers != NULL)
        add_op (jail, JAIL_OP_UNSTAGE, IMAGE_STAGE, NULL, 0, NULL, "detach the layers' staging directory");
    }
  add_dev (jail);

  if (spec->mounts->len > 0)
    add_op (jail, JAIL_OP_MKDIR, "/data", NULL, 0755, NULL, "create /data");
  for (guint i = 0; i < spec->mounts->len; i++)
    {
      const SandstepMount *mount = spec->mounts->pdata[i];
      g_autofree char *target = g_strconcat ("/data/", mount->name, NULL);
      struct stat st;

      if (stat (mount->host_path, &st) < 0)
        {
          sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errno,
                                "The data mount '%s' for %s cannot be used; provision again with a path that exists",
                                mount->host_path, target);
          return NULL;
        }
      add_input (config->inputs, mount->host_path, SANDSTEP_PLAN_INPUT_IDENTITY, TRUE, &st);
      /* As root, the sandbox's own uid may not reach the path: the supervisor opens it. */
      if (jail->idmap ? !add_detached (jail, mount->host_path, target, HOST_BIND_ATTRS, FALSE, S_ISDIR (st.st_mode),
                                       error)
                      : !add_bind (jail, mount->host_path, TRUE, target, HOST_BIND_ATTRS, S_ISDIR (st.st_mode), error))
        return NULL;
    }

  /* proc must be mounted while the host's full /proc is still visible. */
  add_op (jail, JAIL_OP_MKDIR, "/proc", NULL, 0555, NULL, "create /proc");
  add_op (jail, JAIL_OP_PROC, "/proc", NULL, MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, "mount /proc");
  add_proc_masks (jail, config->inputs);
  return g_steal_pointer (&jail);
}

static GVariant *
strv_value (char **strv)
{
  return g_variant_new_bytestring_array ((const char *const *) strv, strv != NULL ? -1 : 0);
}

/* The supervisor's part: what a command's environment is made of, and what the sandbox binds. */
GVariant *
sandstep_jail_to_variant (SandstepJail *jail)
{
  g_auto(GVariantBuilder) plan = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);

  g_variant_builder_add (&plan, "{sv}", "env-base", strv_value (jail->env_base));
  g_variant_builder_add (&plan, "{sv}", "env-own", strv_value (jail->env_own));
  g_variant_builder_add (&plan, "{sv}", "sources",
                         g_variant_new_bytestring_array ((const char *const *) jail->sources->pdata,
                                                         jail->sources->len));
  return g_variant_ref_sink (g_variant_builder_end (&plan));
}

/* Appends @len bytes to the image's tail; their offset, or 0 for none. */
static guint32
append (GByteArray *image, const void *data, gsize len)
{
  guint32 offset = image->len;

  if (data == NULL)
    return 0;
  g_byte_array_append (image, data, len);
  return offset;
}

static guint32
append_string (GByteArray *image, const char *text)
{
  return text != NULL ? append (image, text, strlen (text) + 1) : 0;
}

/* Room for @count records of @size, 8-aligned; their offset. */
static guint32
reserve (GByteArray *image, guint count, gsize size)
{
  guint32 offset = (image->len + 7) & ~7u;

  g_byte_array_set_size (image, offset + count * size);
  memset (image->data + offset, 0, count * size);
  return offset;
}

GBytes *
sandstep_jail_to_image (SandstepJail *jail, GBytes *seccomp)
{
  g_autoptr(GByteArray) bytes = g_byte_array_new ();
  SandstepJailImage header = {
    .magic = SANDSTEP_JAIL_IMAGE_MAGIC, .format = SANDSTEP_PLAN_FORMAT,
    .flags = (jail->idmap ? SANDSTEP_JAIL_IMAGE_IDMAP : 0) | (jail->open_net ? SANDSTEP_JAIL_IMAGE_OPEN_NET : 0) |
             (jail->egress ? SANDSTEP_JAIL_IMAGE_EGRESS : 0) |
             (jail->writable_root ? SANDSTEP_JAIL_IMAGE_WRITABLE_ROOT : 0),
    .outer_uid = jail->outer_uid, .outer_gid = jail->outer_gid, .n_slots = jail->n_slots,
    .n_ops = jail->ops->len, .n_trees = jail->trees->len, .n_rlimits = jail->n_rlimits,
    .n_filters = g_bytes_get_size (seccomp) / sizeof (struct sock_filter),
    .cwd_slot = jail->cwd_slot,
  };
  gsize filters_size = header.n_filters * sizeof (struct sock_filter);

  g_byte_array_set_size (bytes, sizeof header);
  header.ops = reserve (bytes, header.n_ops, sizeof (SandstepJailImageOp));
  header.trees = reserve (bytes, header.n_trees, sizeof (SandstepJailImageTree));
  header.rlimits = reserve (bytes, header.n_rlimits, sizeof (SandstepJailImageRlimit));
  header.filters = reserve (bytes, 1, filters_size);
  memcpy (bytes->data + header.filters, g_bytes_get_data (seccomp, NULL), filters_size);
  /* Records are filled after each append: an append may move the array. */
  for (guint i = 0; i < jail->ops->len; i++)
    {
      const JailOp *op = &g_array_index (jail->ops, JailOp, i);
      SandstepJailImageOp record = { .kind = op->kind, .slot = op->slot, .flags = op->flags };
      gsize len = 0;
      const void *data = op->data != NULL ? g_bytes_get_data (op->data, &len) : NULL;

      record.path = append_string (bytes, op->path);
      record.source = append_string (bytes, op->source);
      record.what = append_string (bytes, op->what);
      record.data = len > 0 ? append (bytes, data, len) : 0;
      record.data_len = len;
      memcpy (bytes->data + header.ops + i * sizeof record, &record, sizeof record);
    }
  for (guint i = 0; i < jail->trees->len; i++)
    {
      const JailTree *tree = &g_array_index (jail->trees, JailTree, i);
      SandstepJailImageTree record = { .slot = tree->slot, .attrs = tree->attrs, .idmap = tree->idmap,
                                       .recursive = tree->recursive };

      record.host_path = append_string (bytes, tree->host_path);
      memcpy (bytes->data + header.trees + i * sizeof record, &record, sizeof record);
    }
  for (int i = 0; i < jail->n_rlimits; i++)
    {
      SandstepJailImageRlimit record = { .resource = jail->rlimits[i].resource,
                                         .soft = jail->rlimits[i].value.rlim_cur,
                                         .hard = jail->rlimits[i].value.rlim_max };
      memcpy (bytes->data + header.rlimits + i * sizeof record, &record, sizeof record);
    }
  header.size = bytes->len;
  memcpy (bytes->data, &header, sizeof header);
  return g_byte_array_free_to_bytes (g_steal_pointer (&bytes));
}
