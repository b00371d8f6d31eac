/* sandstep-cgroup.c: the cgroup that holds a live sandbox. */
#include "sandstep-cgroup.h"
#include "sandstep-cgroup-warm.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-limit-defaults.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

#define PARENT "sandstep"
/* rmdir of a cgroup fails while its last tasks are still exiting: those of a jail whose supervisor was killed die
 * with it, and one in the middle of a write may take a while under load.  Nothing removes the cgroup later but a
 * gc's sweep, so its removal waits up to this long. */
#define RMDIR_WAIT_US (5 * G_USEC_PER_SEC)
/* The CFS period of a --cpus cap, docker's: the quota is --cpus of it. */
#define CPU_PERIOD_US 100000

struct _SandstepCgroup {
  SandstepCgroupKind kind;
  char *memory_dir;        /* the sandbox's cgroup (v2: the only one) */
  char *pids_dir;          /* v1: in the pids hierarchy */
  char *cpu_dir;           /* v1: in the cpu hierarchy: the sandbox's own with a cap, else sandstep's group */
  char *blkio_dir;         /* v1: in the blkio hierarchy where it weighs I/O: the sandbox's own with a weight
                            * other than the default, else sandstep's group; NULL where it has no weight */
  char *own_cpu_dir;       /* v1: the sandbox's own in those two, made only when asked for, removed with it */
  char *own_blkio_dir;
  int oom_fd;              /* memory.oom_control (v1) or memory.events, kept open for the counters */
  int pids_fd;             /* pids.events */
  int dir_fd;              /* v2: memory_dir, O_PATH */
};

static gboolean
write_text (const char *dir, const char *file, const char *text)
{
  g_autofree char *path = g_build_filename (dir, file, NULL);
  int fd = open (path, O_WRONLY | O_CLOEXEC);
  gboolean ok;

  if (fd < 0)
    return FALSE;
  ok = write (fd, text, strlen (text)) == (ssize_t) strlen (text);
  if (close (fd) < 0)
    ok = FALSE;
  return ok;
}

static gboolean
is_cgroup2 (const char *path)
{
  struct statfs st;

  return statfs (path, &st) == 0 && st.f_type == CGROUP2_SUPER_MAGIC;
}

static const char *
unified_mount (void)
{
  if (is_cgroup2 ("/sys/fs/cgroup"))
    return "/sys/fs/cgroup";
  if (is_cgroup2 ("/sys/fs/cgroup/unified"))
    return "/sys/fs/cgroup/unified";
  return NULL;
}

static int
make_dir (const char *path)
{
  if (mkdir (path, 0755) == 0)
    return 1;
  return errno == EEXIST ? 0 : -1;
}

/* v1 blkio's weight file, by I/O scheduler: BFQ's, or the old CFQ's (scale 10 to 1000, default 500). */
static const char *const v1_io_weight_files[] = { "blkio.bfq.weight", "blkio.weight" };

/* @weight (io.weight's scale, default 100) in @file's. */
static char *
v1_io_weight_text (const char *file, gint64 weight)
{
  if (strcmp (file, "blkio.weight") == 0)
    return g_strdup_printf ("%" G_GINT64_FORMAT, CLAMP (weight * 5, 10, 1000));
  return g_strdup_printf ("%" G_GINT64_FORMAT, CLAMP (weight, 1, 1000));
}

/* The weight file of the blkio cgroup @dir, or NULL: none without a weighing scheduler. */
static const char *
v1_io_weight_file (const char *dir)
{
  for (gsize i = 0; i < G_N_ELEMENTS (v1_io_weight_files); i++)
    {
      g_autofree char *path = g_build_filename (dir, v1_io_weight_files[i], NULL);
      if (access (path, W_OK) == 0)
        return v1_io_weight_files[i];
    }
  return NULL;
}

/* v1: the parent in @controller's hierarchy, made on first use; the cpu and blkio ones weigh every sandbox
 * together against the host (SANDSTEP_GROUP_*_WEIGHT), set when made. */
static char *
v1_parent (const char *controller, gboolean make)
{
  g_autofree char *root = g_build_filename ("/sys/fs/cgroup", controller, NULL);
  g_autofree char *parent = g_build_filename (root, PARENT, NULL);
  int made = 0;

  if (access (root, W_OK) != 0 || (make && (made = make_dir (parent)) < 0))
    return NULL;
  if (made == 1 && strcmp (controller, "cpu") == 0)
    {
      g_autofree char *shares = g_strdup_printf ("%d", SANDSTEP_GROUP_CPU_WEIGHT * 1024 / 100);
      write_text (parent, "cpu.shares", shares);
    }
  else if (made == 1 && strcmp (controller, "blkio") == 0)
    {
      const char *file = v1_io_weight_file (parent);
      g_autofree char *weight = file != NULL ? v1_io_weight_text (file, SANDSTEP_GROUP_IO_WEIGHT) : NULL;
      if (file != NULL)
        write_text (parent, file, weight);
    }
  return g_steal_pointer (&parent);
}

/* Whether the space-separated list @words has @word (cgroup.controllers: "cpuset" is not "cpu"). */
static gboolean
has_word (const char *words, const char *word)
{
  g_auto(GStrv) list = g_strsplit_set (words, " \n", -1);

  return g_strv_contains ((const char *const *) list, word);
}

/* Whether cgroup v2's @dir was delegated to @uid: its directory and the files that move processes and enable
 * controllers are that user's, and memory and pids are among its controllers. */
static gboolean
delegated_to (const char *dir, uid_t uid)
{
  g_autofree char *procs = g_build_filename (dir, "cgroup.procs", NULL);
  g_autofree char *subtree = g_build_filename (dir, "cgroup.subtree_control", NULL);
  g_autofree char *path = g_build_filename (dir, "cgroup.controllers", NULL);
  g_autofree char *controllers = NULL;
  struct stat st, procs_st;

  return stat (dir, &st) == 0 && st.st_uid == uid && stat (procs, &procs_st) == 0 && procs_st.st_uid == uid &&
         faccessat (AT_FDCWD, procs, W_OK, AT_EACCESS) == 0 && faccessat (AT_FDCWD, subtree, W_OK, AT_EACCESS) == 0 &&
         g_file_get_contents (path, &controllers, NULL, NULL) && has_word (controllers, "memory") &&
         has_word (controllers, "pids");
}

char *
sandstep_cgroup_v2_delegated (const char *mount, const char *own, uid_t uid)
{
  g_autofree char *rel = g_strdup (own);
  char *found = NULL;

  /* Outside the root of its cgroup namespace a process's path climbs ("/../.."): nothing of the mount's. */
  if (strstr (own, "/..") != NULL || strstr (own, "//") != NULL)
    return NULL;

  /* From the caller's own cgroup up, while each is delegated: the topmost one has no process of its own
   * (systemd's user@UID.service keeps its manager in init.scope), so controllers can be enabled below it. */
  while (rel[0] == '/' && rel[1] != '\0')
    {
      g_autofree char *dir = g_build_filename (mount, rel, NULL);
      char *slash;

      if (!delegated_to (dir, uid))
        break;
      g_free (found);
      found = g_steal_pointer (&dir);
      slash = strrchr (rel, '/');
      *slash = '\0';
      if (slash == rel)
        break;
    }
  return found;
}

/* This process's cgroup on the unified hierarchy ("0::PATH" of /proc/self/cgroup), or NULL. */
static char *
own_v2_cgroup (void)
{
  g_autofree char *text = NULL;
  g_auto(GStrv) lines = NULL;

  if (!g_file_get_contents ("/proc/self/cgroup", &text, NULL, NULL))
    return NULL;
  lines = g_strsplit (text, "\n", -1);
  for (char **l = lines; *l != NULL; l++)
    if (g_str_has_prefix (*l, "0::/"))
      return g_strdup (*l + 3);
  return NULL;
}

/* Enables @controller (with "+") below @dir, and the same below its parent, which must allow it first. */
static gboolean
enable_below (const char *above, const char *dir, const char *controllers)
{
  return write_text (above, "cgroup.subtree_control", controllers) &&
         write_text (dir, "cgroup.subtree_control", controllers);
}

/* v2: controllers must be enabled in the parent's subtree_control, which the no-internal-process rule allows
 * only where the parent has no process of its own: at the root, for root, under /sandstep there; for anyone
 * else in the topmost cgroup delegated to them above their own (systemd's user@UID.service), under "sandstep"
 * there.  NULL where neither is: a login session's scope is delegated to nobody. */
static char *
v2_parent (gboolean make)
{
  const char *mount = unified_mount ();
  g_autofree char *controllers = NULL;
  g_autofree char *path = NULL;
  g_autofree char *base = NULL;
  g_autofree char *own = NULL;

  if (mount == NULL)
    return NULL;
  path = g_build_filename (mount, "cgroup.subtree_control", NULL);
  if (access (path, W_OK) == 0)
    base = g_strdup (mount);
  else if ((own = own_v2_cgroup ()) == NULL || (base = sandstep_cgroup_v2_delegated (mount, own, geteuid ())) == NULL ||
           !is_cgroup2 (base))
    return NULL;
  g_free (path);
  path = g_build_filename (base, "cgroup.controllers", NULL);
  if (!g_file_get_contents (path, &controllers, NULL, NULL) || !has_word (controllers, "memory") ||
      !has_word (controllers, "pids"))
    return NULL;
  g_free (path);
  path = g_build_filename (base, PARENT, NULL);
  if (!make)
    return access (path, W_OK) == 0 ? g_steal_pointer (&path) : NULL;
  if (make_dir (path) < 0 || !enable_below (base, path, "+memory +pids"))
    return NULL;
  /* cpu and io where the kernel has them (a sandbox that needs one is refused or told at provision,
   * sandstep_cgroup_cpu_cap_unavailable()): they weigh every sandbox together against the host. */
  if (has_word (controllers, "cpu") && enable_below (base, path, "+cpu"))
    {
      g_autofree char *weight = g_strdup_printf ("%d", SANDSTEP_GROUP_CPU_WEIGHT);
      write_text (path, "cpu.weight", weight);
    }
  if (has_word (controllers, "io") && enable_below (base, path, "+io"))
    {
      g_autofree char *weight = g_strdup_printf ("default %d", SANDSTEP_GROUP_IO_WEIGHT);
      write_text (path, "io.weight", weight);
      write_text (path, "io.bfq.weight", weight);
    }
  return g_steal_pointer (&path);
}

char *
sandstep_cgroup_v2_parent (void)
{
  return v2_parent (FALSE);
}

SandstepCgroupKind
sandstep_cgroup_kind (void)
{
  static gsize once;
  static SandstepCgroupKind kind;

  if (g_once_init_enter (&once))
    {
      g_autofree char *v2 = NULL;

      if (sandstep_cgroup_v1_writable ())
        kind = SANDSTEP_CGROUP_V1;
      else if ((v2 = v2_parent (TRUE)) != NULL)
        kind = SANDSTEP_CGROUP_V2;
      else
        kind = SANDSTEP_CGROUP_NONE;
      g_once_init_leave (&once, 1);
    }
  return kind;
}

void
sandstep_cgroup_free (SandstepCgroup *cgroup)
{
  if (cgroup == NULL)
    return;
  if (cgroup->oom_fd >= 0)
    close (cgroup->oom_fd);
  if (cgroup->pids_fd >= 0)
    close (cgroup->pids_fd);
  if (cgroup->dir_fd >= 0)
    close (cgroup->dir_fd);
  g_free (cgroup->memory_dir);
  g_free (cgroup->pids_dir);
  g_free (cgroup->cpu_dir);
  g_free (cgroup->blkio_dir);
  g_free (cgroup->own_cpu_dir);
  g_free (cgroup->own_blkio_dir);
  g_free (cgroup);
}

/* The cgroup's directories, without making anything. */
static SandstepCgroup *
find (const char *name, gboolean make)
{
  g_autoptr(SandstepCgroup) cgroup = g_new0 (SandstepCgroup, 1);

  cgroup->oom_fd = cgroup->pids_fd = cgroup->dir_fd = -1;
  cgroup->kind = sandstep_cgroup_kind ();
  switch (cgroup->kind)
    {
    case SANDSTEP_CGROUP_NONE:
      return NULL;
    case SANDSTEP_CGROUP_V1:
      {
        g_autofree char *memory = v1_parent ("memory", make);
        g_autofree char *pids = v1_parent ("pids", make);
        g_autofree char *cpu = v1_parent ("cpu", make);
        g_autofree char *blkio = v1_parent ("blkio", make);
        if (memory == NULL || pids == NULL)
          return NULL;
        cgroup->memory_dir = g_build_filename (memory, name, NULL);
        cgroup->pids_dir = g_build_filename (pids, name, NULL);
        /* Optional: a host without them holds its sandboxes by memory and pids alone. */
        cgroup->own_cpu_dir = cpu != NULL ? g_build_filename (cpu, name, NULL) : NULL;
        cgroup->own_blkio_dir = blkio != NULL ? g_build_filename (blkio, name, NULL) : NULL;
        cgroup->cpu_dir = g_steal_pointer (&cpu);
        /* Without a weight file a blkio cgroup only throttles, which sandstep does not: the sandbox stays out. */
        if (blkio != NULL && v1_io_weight_file (blkio) != NULL)
          cgroup->blkio_dir = g_steal_pointer (&blkio);
        return g_steal_pointer (&cgroup);
      }
    case SANDSTEP_CGROUP_V2:
      {
        g_autofree char *parent = v2_parent (make);
        if (parent == NULL)
          return NULL;
        cgroup->memory_dir = g_build_filename (parent, name, NULL);
        return g_steal_pointer (&cgroup);
      }
    }
  return NULL;
}

static int
open_counter (const char *dir, const char *file)
{
  g_autofree char *path = g_build_filename (dir, file, NULL);

  return open (path, O_RDONLY | O_CLOEXEC);
}

/* The sandbox's CPU cap and I/O weight, beyond memory and pids: a cgroup of its own in v1's cpu and blkio
 * hierarchies only where it asks for one (each one more cgroup to make at provision), else sandstep's group;
 * in v2 its one cgroup's files.  A cap that cannot be set fails; a weight is best effort (provision said so). */
static gboolean
set_cpu_and_io (SandstepCgroup *cgroup, const SandstepCgroupLimits *limits)
{
  g_autofree char *quota = g_strdup_printf ("%" G_GINT64_FORMAT, limits->millicpus * CPU_PERIOD_US / 1000);
  gboolean weigh = limits->io_weight != 0 && limits->io_weight != SANDSTEP_DEFAULT_IO_WEIGHT;

  if (cgroup->kind == SANDSTEP_CGROUP_V2)
    {
      g_autofree char *max = g_strdup_printf ("%s %d", quota, CPU_PERIOD_US);
      g_autofree char *weight = g_strdup_printf ("default %" G_GINT64_FORMAT, limits->io_weight);
      if (limits->millicpus > 0 && !write_text (cgroup->memory_dir, "cpu.max", max))
        return FALSE;
      if (weigh && !write_text (cgroup->memory_dir, "io.weight", weight))
        write_text (cgroup->memory_dir, "io.bfq.weight", weight);
      return TRUE;
    }
  if (limits->millicpus > 0)
    {
      g_autofree char *period = g_strdup_printf ("%d", CPU_PERIOD_US);
      if (cgroup->own_cpu_dir == NULL)
        return (errno = ENOENT, FALSE);
      if (make_dir (cgroup->own_cpu_dir) < 0 || !write_text (cgroup->own_cpu_dir, "cpu.cfs_period_us", period) ||
          !write_text (cgroup->own_cpu_dir, "cpu.cfs_quota_us", quota))
        return FALSE;
      g_free (cgroup->cpu_dir);
      cgroup->cpu_dir = g_strdup (cgroup->own_cpu_dir);
    }
  if (weigh && cgroup->blkio_dir != NULL && make_dir (cgroup->own_blkio_dir) >= 0)
    {
      const char *file = v1_io_weight_file (cgroup->own_blkio_dir);
      g_autofree char *weight = file != NULL ? v1_io_weight_text (file, limits->io_weight) : NULL;
      if (file != NULL && write_text (cgroup->own_blkio_dir, file, weight))
        {
          g_free (cgroup->blkio_dir);
          cgroup->blkio_dir = g_strdup (cgroup->own_blkio_dir);
        }
    }
  return TRUE;
}

SandstepCgroup *
sandstep_cgroup_make (const char *name, const SandstepCgroupLimits *limits, GError **error)
{
  g_autoptr(SandstepCgroup) cgroup = NULL;
  g_autofree char *memory_text = g_strdup_printf ("%" G_GUINT64_FORMAT, limits->memory);
  /* The sandbox's init is one of its processes. */
  g_autofree char *pids_text = g_strdup_printf ("%" G_GINT64_FORMAT, limits->pids + 1);
  const char *pids_dir;

  if (sandstep_cgroup_kind () == SANDSTEP_CGROUP_NONE)
    return NULL;
  cgroup = find (name, TRUE);
  if (cgroup == NULL)
    goto fail;
  pids_dir = cgroup->kind == SANDSTEP_CGROUP_V1 ? cgroup->pids_dir : cgroup->memory_dir;
  if (make_dir (cgroup->memory_dir) < 0 || (cgroup->kind == SANDSTEP_CGROUP_V1 && make_dir (cgroup->pids_dir) < 0) ||
      !write_text (cgroup->memory_dir, cgroup->kind == SANDSTEP_CGROUP_V1 ? "memory.limit_in_bytes" : "memory.max",
                   memory_text) ||
      !write_text (pids_dir, "pids.max", pids_text))
    goto fail;
  if (!set_cpu_and_io (cgroup, limits))
    {
      sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED, errno,
                            "Could not cap the sandbox's CPU at cpus=%g in its cgroup '%s'; provision it again "
                            "without --cpus, or make the cgroup cpu controller writable to sandstep",
                            limits->millicpus / 1000.0,
                            cgroup->own_cpu_dir != NULL ? cgroup->own_cpu_dir : cgroup->memory_dir);
      return NULL;
    }
  /* Swap counts too where the kernel accounts it, so a bomb cannot spill to swap. */
  if (cgroup->kind == SANDSTEP_CGROUP_V1)
    write_text (cgroup->memory_dir, "memory.memsw.limit_in_bytes", memory_text);
  else
    write_text (cgroup->memory_dir, "memory.swap.max", "0");
  cgroup->oom_fd = open_counter (cgroup->memory_dir,
                                 cgroup->kind == SANDSTEP_CGROUP_V1 ? "memory.oom_control" : "memory.events");
  cgroup->pids_fd = open_counter (pids_dir, "pids.events");
  if (cgroup->kind == SANDSTEP_CGROUP_V2)
    cgroup->dir_fd = open (cgroup->memory_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  return g_steal_pointer (&cgroup);

fail:
  sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED, errno,
                        "Could not set up the cgroup '%s' that limits the sandbox's memory and processes",
                        cgroup != NULL ? cgroup->memory_dir : name);
  return NULL;
}

char *
sandstep_cgroup_unavailable (void)
{
  if (sandstep_cgroup_kind () != SANDSTEP_CGROUP_NONE)
    return NULL;
  return geteuid () != 0 ? g_strdup_printf ("no cgroup can be made here: the cgroup hierarchies are root's, and "
                                            "sandstep runs as uid %u outside any cgroup v2 subtree delegated to it",
                                            (unsigned) geteuid ())
                         : g_strdup ("no cgroup can be made here: neither cgroup v1's memory and pids "
                                     "hierarchies nor cgroup v2 with those controllers");
}

char *
sandstep_cgroup_cpu_cap_unavailable (void)
{
  g_autofree char *parent = NULL;

  switch (sandstep_cgroup_kind ())
    {
    case SANDSTEP_CGROUP_NONE:
      return sandstep_cgroup_unavailable ();
    case SANDSTEP_CGROUP_V1:
      parent = v1_parent ("cpu", TRUE);
      if (parent != NULL)
        {
          g_autofree char *quota = g_build_filename (parent, "cpu.cfs_quota_us", NULL);
          if (access (quota, W_OK) == 0)
            return NULL;
        }
      return g_strdup ("the kernel's cpu controller has no writable hierarchy with CFS quotas here "
                       "(/sys/fs/cgroup/cpu/cpu.cfs_quota_us)");
    case SANDSTEP_CGROUP_V2:
      parent = v2_parent (TRUE);
      if (parent != NULL)
        {
          g_autofree char *max = g_build_filename (parent, "cpu.max", NULL);
          if (access (max, F_OK) == 0)
            return NULL;
        }
      return g_strdup ("the kernel's cpu controller is not available in cgroup v2 here (cgroup.controllers)");
    }
  return NULL;
}

char *
sandstep_cgroup_io_weight_unavailable (void)
{
  g_autofree char *parent = NULL;

  switch (sandstep_cgroup_kind ())
    {
    case SANDSTEP_CGROUP_NONE:
      return sandstep_cgroup_cpu_cap_unavailable ();
    case SANDSTEP_CGROUP_V1:
      parent = v1_parent ("blkio", TRUE);
      if (parent != NULL && v1_io_weight_file (parent) != NULL)
        return NULL;
      return g_strdup ("the blkio controller here has no weight (blkio.bfq.weight needs the BFQ I/O scheduler on "
                       "the disks, blkio.weight the old CFQ one)");
    case SANDSTEP_CGROUP_V2:
      parent = v2_parent (TRUE);
      if (parent != NULL)
        {
          g_autofree char *weight = g_build_filename (parent, "io.weight", NULL);
          g_autofree char *bfq = g_build_filename (parent, "io.bfq.weight", NULL);
          if (access (weight, F_OK) == 0 || access (bfq, F_OK) == 0)
            return NULL;
        }
      return g_strdup ("the io controller of cgroup v2 is not available here, or has no weight "
                       "(io.weight, io.bfq.weight)");
    }
  return NULL;
}

int
sandstep_cgroup_dir_fd (SandstepCgroup *cgroup)
{
  return cgroup->dir_fd;
}

gboolean
sandstep_cgroup_attach (SandstepCgroup *cgroup, int pid, GError **error)
{
  g_autofree char *text = g_strdup_printf ("%d", pid);
  const char *dirs[] = { cgroup->memory_dir, cgroup->pids_dir, cgroup->cpu_dir, cgroup->blkio_dir };

  /* Right after the first move the others cost no wait of the kernel's (sandstep-cgroup-warm.h). */
  for (gsize i = 0; i < G_N_ELEMENTS (dirs); i++)
    if (dirs[i] != NULL && !write_text (dirs[i], "cgroup.procs", text))
      return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED, errno,
                                   "Could not move the sandbox into its cgroup '%s'", dirs[i]);
  return TRUE;
}

gboolean
sandstep_cgroup_open_moves (SandstepCgroup *cgroup, int *fds, guint *out_n, GError **error)
{
  const char *dirs[] = { cgroup->memory_dir, cgroup->pids_dir, cgroup->cpu_dir, cgroup->blkio_dir };

  *out_n = 0;
  if (cgroup->kind != SANDSTEP_CGROUP_V1)
    return TRUE;
  for (gsize i = 0; i < G_N_ELEMENTS (dirs); i++)
    {
      g_autofree char *path = NULL;
      int fd, errsv;

      if (dirs[i] == NULL)
        continue;
      path = g_build_filename (dirs[i], "tasks", NULL);
      fd = open (path, O_WRONLY | O_CLOEXEC);
      if (fd >= 0)
        {
          fds[(*out_n)++] = fd;
          continue;
        }
      errsv = errno;
      for (guint k = 0; k < *out_n; k++)
        close (fds[k]);
      *out_n = 0;
      return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED, errsv,
                                   "Could not open the sandbox's cgroup '%s' to move it in; check that sandstep "
                                   "may write the cgroup hierarchy there", dirs[i]);
    }
  return TRUE;
}

/* The number after @key in a "key value" per line file, or 0. */
static guint64
read_counter (int fd, const char *key)
{
  char buf[1024];
  ssize_t n = fd >= 0 ? pread (fd, buf, sizeof buf - 1, 0) : -1;
  gsize key_len = strlen (key);

  if (n <= 0)
    return 0;
  buf[n] = '\0';
  for (char *line = buf; line != NULL && *line; line = strchr (line, '\n') ? strchr (line, '\n') + 1 : NULL)
    if (strncmp (line, key, key_len) == 0 && line[key_len] == ' ')
      return g_ascii_strtoull (line + key_len + 1, NULL, 10);
  return 0;
}

void
sandstep_cgroup_counters (SandstepCgroup *cgroup, guint64 *out_oom_kills, guint64 *out_pids_max)
{
  *out_oom_kills = *out_pids_max = 0;
  if (cgroup == NULL)
    return;
  *out_oom_kills = read_counter (cgroup->oom_fd, "oom_kill");
  *out_pids_max = read_counter (cgroup->pids_fd, "max");
}

static void
remove_dir (const char *dir)
{
  gint64 deadline;
  gulong pause_us = 1000;

  if (dir == NULL || rmdir (dir) == 0 || errno != EBUSY)
    return;
  deadline = g_get_monotonic_time () + RMDIR_WAIT_US;
  do
    {
      g_usleep (pause_us);
      pause_us = MIN (pause_us * 2, 50000);
    }
  while (rmdir (dir) < 0 && errno == EBUSY && g_get_monotonic_time () < deadline);
}

void
sandstep_cgroup_remove (const char *name)
{
  g_autoptr(SandstepCgroup) cgroup = find (name, FALSE);

  if (cgroup == NULL)
    return;
  remove_dir (cgroup->memory_dir);
  remove_dir (cgroup->pids_dir);
  remove_dir (cgroup->own_cpu_dir);
  remove_dir (cgroup->own_blkio_dir);
}

guint
sandstep_cgroup_sweep (gboolean (*keep) (const char *name, gpointer data), gpointer data, gint64 min_age_s)
{
  SandstepCgroupKind kind = sandstep_cgroup_kind ();
  g_autofree char *first = kind == SANDSTEP_CGROUP_V1 ? v1_parent ("memory", FALSE)
                           : kind == SANDSTEP_CGROUP_V2 ? v2_parent (FALSE) : NULL;
  g_autofree char *second = kind == SANDSTEP_CGROUP_V1 ? v1_parent ("pids", FALSE) : NULL;
  g_autofree char *cpu = kind == SANDSTEP_CGROUP_V1 ? v1_parent ("cpu", FALSE) : NULL;
  g_autofree char *blkio = kind == SANDSTEP_CGROUP_V1 ? v1_parent ("blkio", FALSE) : NULL;
  const char *parents[] = { first, second, cpu, blkio };
  gint64 now = g_get_real_time () / G_USEC_PER_SEC;
  guint removed = 0;

  for (gsize p = 0; p < G_N_ELEMENTS (parents); p++)
    {
      g_autoptr(GDir) dir = parents[p] != NULL ? g_dir_open (parents[p], 0, NULL) : NULL;
      const char *name;

      while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
        {
          g_autofree char *path = NULL;
          struct stat st;

          if (!g_str_has_prefix (name, "sandstep-") || keep (name, data))
            continue;
          path = g_build_filename (parents[p], name, NULL);
          /* A young one may be about to take its sandbox's first process (made at provision, or by a supervisor
           * just now); the kernel refuses to remove one that holds a process (EBUSY). */
          if (lstat (path, &st) < 0 || !S_ISDIR (st.st_mode) || now - st.st_mtime < min_age_s)
            continue;
          if (rmdir (path) == 0)
            removed++;
        }
    }
  return removed;
}
