/* sandstep-limits.c: cgroups for one command, and the defaults. */
#include "sandstep-limits.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "sandstep-error.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

/* rmdir of a cgroup fails while its last tasks are still exiting. */
#define RMDIR_ATTEMPTS 200

SandstepLimits
sandstep_limits_resolve (const SandstepLimits *limits)
{
  SandstepLimits out = *limits;

  if (out.memory == 0)
    out.memory = SANDSTEP_DEFAULT_MEMORY;
  if (out.pids == 0)
    out.pids = SANDSTEP_DEFAULT_PIDS;
  if (out.cpu_time_s == 0)
    out.cpu_time_s = SANDSTEP_DEFAULT_CPU_TIME_S;
  if (out.disk == 0)
    out.disk = SANDSTEP_DEFAULT_DISK;
  return out;
}

struct _SandstepCgroup {
  SandstepCgroupKind kind;
  guint64 oom_kills;       /* counters when this process entered */
  guint64 pids_max_events;
  char *memory_dir;        /* the new cgroup (v2: the only one) */
  char *pids_dir;          /* v1: in the pids hierarchy */
  char *memory_home;       /* where this process was, to go back */
  char *pids_home;
  const char *member_file; /* cgroup.procs (this process), or v1's tasks (this thread) */
  char *member;            /* the pid or tid written there */
};

/* This process's cgroup in the hierarchy holding @controller ("" for v2). */
static char *
own_cgroup (const char *controller)
{
  g_autofree char *text = NULL;
  g_auto(GStrv) lines = NULL;

  if (!g_file_get_contents ("/proc/self/cgroup", &text, NULL, NULL))
    return NULL;
  lines = g_strsplit (text, "\n", -1);
  for (char **l = lines; *l; l++)
    {
      g_auto(GStrv) parts = g_strsplit (*l, ":", 3);
      g_auto(GStrv) controllers = NULL;
      if (g_strv_length (parts) != 3)
        continue;
      controllers = g_strsplit (parts[1], ",", -1);
      if (controller[0] == '\0' ? strcmp (parts[0], "0") == 0 && parts[1][0] == '\0'
                                : g_strv_contains ((const char *const *) controllers, controller))
        return g_strdup (parts[2]);
    }
  return NULL;
}

static gboolean
write_text (const char *dir, const char *file, const char *text)
{
  g_autofree char *path = g_build_filename (dir, file, NULL);
  int fd = open (path, O_WRONLY | O_CLOEXEC);
  gboolean ok;

  if (fd < 0)
    return FALSE;
  ok = write (fd, text, strlen (text)) == (ssize_t) strlen (text);
  close (fd);
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

static char *
v1_dir (const char *controller)
{
  g_autofree char *own = own_cgroup (controller);
  g_autofree char *root = g_build_filename ("/sys/fs/cgroup", controller, NULL);

  if (own == NULL || access (root, W_OK) != 0)
    return NULL;
  return g_build_filename (root, own, NULL);
}

/* v2: controllers must be enabled in the parent's subtree_control, which the
 * no-internal-process rule allows only at the root; so v2 cgroups live under
 * /sandstep at the root, and need a root helper. */
static char *
v2_parent (void)
{
  const char *mount = unified_mount ();
  g_autofree char *controllers = NULL;
  g_autofree char *path = NULL;

  if (mount == NULL)
    return NULL;
  path = g_build_filename (mount, "cgroup.controllers", NULL);
  if (!g_file_get_contents (path, &controllers, NULL, NULL) || strstr (controllers, "memory") == NULL ||
      strstr (controllers, "pids") == NULL)
    return NULL;
  g_free (path);
  path = g_build_filename (mount, "sandstep", NULL);
  if (mkdir (path, 0755) < 0 && errno != EEXIST)
    return NULL;
  if (!write_text (mount, "cgroup.subtree_control", "+memory +pids") ||
      !write_text (path, "cgroup.subtree_control", "+memory +pids"))
    return NULL;
  return g_steal_pointer (&path);
}

SandstepCgroupKind
sandstep_cgroup_kind (void)
{
  static gsize once;
  static SandstepCgroupKind kind;

  if (g_once_init_enter (&once))
    {
      g_autofree char *memory = v1_dir ("memory");
      g_autofree char *pids = v1_dir ("pids");
      g_autofree char *v2 = NULL;

      if (memory != NULL && pids != NULL)
        kind = SANDSTEP_CGROUP_V1;
      else if ((v2 = v2_parent ()) != NULL)
        kind = SANDSTEP_CGROUP_V2;
      else
        kind = SANDSTEP_CGROUP_NONE;
      g_once_init_leave (&once, 1);
    }
  return kind;
}

static void
cgroup_free (SandstepCgroup *cgroup)
{
  g_free (cgroup->memory_dir);
  g_free (cgroup->pids_dir);
  g_free (cgroup->memory_home);
  g_free (cgroup->pids_home);
  g_free (cgroup->member);
  g_free (cgroup);
}

static void
remove_dir (const char *dir)
{
  if (dir == NULL)
    return;
  for (int i = 0; i < RMDIR_ATTEMPTS && rmdir (dir) < 0 && errno == EBUSY; i++)
    g_usleep (1000);
}

static guint64 read_counter (const char *dir, const char *file, const char *key);

static void
read_counters (SandstepCgroup *cgroup, guint64 *oom_kills, guint64 *pids_max)
{
  if (cgroup->kind == SANDSTEP_CGROUP_V1)
    {
      *oom_kills = read_counter (cgroup->memory_dir, "memory.oom_control", "oom_kill");
      *pids_max = read_counter (cgroup->pids_dir, "pids.events", "max");
    }
  else
    {
      *oom_kills = read_counter (cgroup->memory_dir, "memory.events", "oom_kill");
      *pids_max = read_counter (cgroup->memory_dir, "pids.events", "max");
    }
}

/* mkdir that tells a new directory from an existing one. */
static int
make_dir (const char *path)
{
  if (mkdir (path, 0755) == 0)
    return 1;
  return errno == EEXIST ? 0 : -1;
}

static gboolean
place_paths (SandstepCgroup *cgroup, const char *name)
{
  switch (cgroup->kind)
    {
    case SANDSTEP_CGROUP_NONE:
      return FALSE;
    case SANDSTEP_CGROUP_V1:
      cgroup->memory_home = v1_dir ("memory");
      cgroup->pids_home = v1_dir ("pids");
      if (cgroup->memory_home == NULL || cgroup->pids_home == NULL)
        return FALSE;
      cgroup->memory_dir = g_build_filename (cgroup->memory_home, name, NULL);
      cgroup->pids_dir = g_build_filename (cgroup->pids_home, name, NULL);
      return TRUE;
    case SANDSTEP_CGROUP_V2:
      {
        g_autofree char *parent = v2_parent ();
        g_autofree char *own = own_cgroup ("");
        if (parent == NULL || own == NULL)
          return FALSE;
        cgroup->memory_home = g_build_filename (unified_mount (), own, NULL);
        cgroup->memory_dir = g_build_filename (parent, name, NULL);
        return TRUE;
      }
    }
  return FALSE;
}

static SandstepCgroup *
enter (const char *name, guint64 memory, gint64 pids, gboolean thread_only, GError **error)
{
  SandstepCgroup *cgroup;
  g_autofree char *memory_text = g_strdup_printf ("%" G_GUINT64_FORMAT, memory);
  /* The helper itself is in the cgroup too. */
  g_autofree char *pids_text = g_strdup_printf ("%" G_GINT64_FORMAT, pids + 1);
  const char *self;
  int made;

  cgroup = g_new0 (SandstepCgroup, 1);
  cgroup->kind = sandstep_cgroup_kind ();
  if (cgroup->kind == SANDSTEP_CGROUP_NONE)
    {
      cgroup_free (cgroup);
      return NULL;
    }
  thread_only = thread_only && cgroup->kind == SANDSTEP_CGROUP_V1;
  cgroup->member_file = thread_only ? "tasks" : "cgroup.procs";
  cgroup->member = g_strdup_printf ("%d", thread_only ? (int) gettid () : (int) getpid ());
  self = cgroup->member;
  if (!place_paths (cgroup, name))
    goto fail;

  if (cgroup->kind == SANDSTEP_CGROUP_V1)
    {
      if ((made = make_dir (cgroup->memory_dir)) < 0 || make_dir (cgroup->pids_dir) < 0)
        goto fail;
      /* Swap counts too where the kernel accounts it, so a bomb cannot spill to swap. */
      if (made && (!write_text (cgroup->memory_dir, "memory.limit_in_bytes", memory_text) ||
                   !write_text (cgroup->pids_dir, "pids.max", pids_text)))
        goto fail;
      if (made)
        write_text (cgroup->memory_dir, "memory.memsw.limit_in_bytes", memory_text);
      read_counters (cgroup, &cgroup->oom_kills, &cgroup->pids_max_events);
      if (!write_text (cgroup->memory_dir, cgroup->member_file, self) ||
          !write_text (cgroup->pids_dir, cgroup->member_file, self))
        goto fail;
      return cgroup;
    }

  if ((made = make_dir (cgroup->memory_dir)) < 0)
    goto fail;
  if (made && (!write_text (cgroup->memory_dir, "memory.max", memory_text) ||
               !write_text (cgroup->memory_dir, "pids.max", pids_text)))
    goto fail;
  if (made)
    write_text (cgroup->memory_dir, "memory.swap.max", "0");
  read_counters (cgroup, &cgroup->oom_kills, &cgroup->pids_max_events);
  if (!write_text (cgroup->memory_dir, "cgroup.procs", self))
    goto fail;
  return cgroup;

fail:
  {
    int errsv = errno;
    if (cgroup->memory_home != NULL)
      write_text (cgroup->memory_home, cgroup->member_file, self);
    if (cgroup->pids_home != NULL)
      write_text (cgroup->pids_home, cgroup->member_file, self);
    sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_UNSUPPORTED, errsv,
                          "Could not set up the cgroup '%s' that limits the command's memory and processes",
                          cgroup->memory_dir ? cgroup->memory_dir : name);
    cgroup_free (cgroup);
    return NULL;
  }
}

SandstepCgroup *
sandstep_cgroup_enter (const char *name, guint64 memory, gint64 pids, GError **error)
{
  return enter (name, memory, pids, FALSE, error);
}

SandstepCgroup *
sandstep_cgroup_enter_thread (const char *name, guint64 memory, gint64 pids, GError **error)
{
  return enter (name, memory, pids, TRUE, error);
}

/* The number after @key in a "key value" per line file, or 0. */
static guint64
read_counter (const char *dir, const char *file, const char *key)
{
  g_autofree char *path = NULL;
  g_autofree char *text = NULL;
  g_auto(GStrv) lines = NULL;

  if (dir == NULL)
    return 0;
  path = g_build_filename (dir, file, NULL);
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return 0;
  lines = g_strsplit (text, "\n", -1);
  for (char **l = lines; *l; l++)
    if (g_str_has_prefix (*l, key) && (*l)[strlen (key)] == ' ')
      return g_ascii_strtoull (*l + strlen (key) + 1, NULL, 10);
  return 0;
}

void
sandstep_cgroup_leave (SandstepCgroup *cgroup, gboolean *out_memory_hit, gboolean *out_pids_hit)
{
  guint64 oom_kills, pids_max;

  *out_memory_hit = FALSE;
  *out_pids_hit = FALSE;
  if (cgroup == NULL)
    return;
  read_counters (cgroup, &oom_kills, &pids_max);
  *out_memory_hit = oom_kills > cgroup->oom_kills;
  *out_pids_hit = pids_max > cgroup->pids_max_events;
  write_text (cgroup->memory_home, cgroup->member_file, cgroup->member);
  if (cgroup->pids_home != NULL)
    write_text (cgroup->pids_home, cgroup->member_file, cgroup->member);
  cgroup_free (cgroup);
}

SandstepCgroup *
sandstep_cgroup_find (const char *name)
{
  SandstepCgroup *cgroup = g_new0 (SandstepCgroup, 1);

  cgroup->kind = sandstep_cgroup_kind ();
  if (!place_paths (cgroup, name))
    {
      cgroup_free (cgroup);
      return NULL;
    }
  return cgroup;
}

void
sandstep_cgroup_counters (SandstepCgroup *cgroup, guint64 *out_oom_kills, guint64 *out_pids_max)
{
  *out_oom_kills = *out_pids_max = 0;
  if (cgroup != NULL)
    read_counters (cgroup, out_oom_kills, out_pids_max);
}

void
sandstep_cgroup_free (SandstepCgroup *cgroup)
{
  if (cgroup != NULL)
    cgroup_free (cgroup);
}

void
sandstep_cgroup_remove (const char *name)
{
  SandstepCgroup *cgroup = sandstep_cgroup_find (name);

  if (cgroup == NULL)
    return;
  remove_dir (cgroup->memory_dir);
  remove_dir (cgroup->pids_dir);
  cgroup_free (cgroup);
}
