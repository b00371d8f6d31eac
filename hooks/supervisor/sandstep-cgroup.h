/* sandstep-cgroup.h: the cgroup that holds a live sandbox.
 *
 * One cgroup per sandbox, under a parent of sandstep's own (the v1
 * hierarchies' or the v2 root's "sandstep"; for a user that is not root,
 * "sandstep" in the v2 subtree systemd delegates to it), never under the
 * caller's own cgroup: a destroy from any cgroup of that subtree finds it.  Every process of the sandbox
 * is born inside (on v2 the jail's first process is started in it, else the
 * supervisor moves it in before it starts); the supervisor itself stays out,
 * so that only the sandbox is charged and counted.  Memory (swap included) and process counts are
 * limited there.  GLib core only: the static supervisor links it.
 */
#pragma once

#include <glib.h>
#include <sys/types.h>

G_BEGIN_DECLS

typedef enum {
  SANDSTEP_CGROUP_NONE,     /* no cgroup can be made here: rlimits only */
  SANDSTEP_CGROUP_V1,
  SANDSTEP_CGROUP_V2,
} SandstepCgroupKind;

/* What this process can make, found once. */
SandstepCgroupKind sandstep_cgroup_kind (void);

/* cgroup v2 mounted at @mount, a process of @uid in its cgroup @own ("/user.slice/.../app.slice/x.scope"): the
 * topmost cgroup delegated to @uid that holds @own (owned by @uid, with memory and pids among its controllers),
 * as a path under @mount; NULL where @own is in none.  Under systemd: user@UID.service, for a process its user
 * manager started (`systemd-run --user`, a desktop's terminal), never a login session's scope. */
char *sandstep_cgroup_v2_delegated (const char *mount, const char *own, uid_t uid);

/* cgroup v2: the directory under which this process's sandboxes have their cgroups (root's /sandstep, a user's
 * under the subtree delegated to it), or NULL where there is none yet, or none can be. */
char *sandstep_cgroup_v2_parent (void);

typedef struct _SandstepCgroup SandstepCgroup;

typedef struct {
  guint64 memory;          /* bytes, swap included */
  gint64 pids;             /* the sandbox's processes, not counting its init */
  gint64 millicpus;        /* the CPU cap in thousandths of a CPU (cpu.max, cpu.cfs_quota_us); 0: none */
  gint64 io_weight;        /* io.weight's scale; the default (SANDSTEP_DEFAULT_IO_WEIGHT) writes nothing */
} SandstepCgroupLimits;

/* The sandbox's cgroup @name with its limits, made if absent.  NULL
 * without an error when no cgroup can be made here.  Every sandbox is also
 * in sandstep's group of the cpu (and, where it weighs, blkio) controller,
 * whose weight is below the host's default (SANDSTEP_GROUP_CPU_WEIGHT);
 * one with a cap or another weight in a cgroup of its own under it. */
SandstepCgroup *sandstep_cgroup_make (const char *name, const SandstepCgroupLimits *limits, GError **error);

/* Why no cgroup holds a sandbox made here (a phrase), or NULL where one does: its memory limit then bounds each
 * process's address space (RLIMIT_AS), and its process limit counts its uid's processes (RLIMIT_NPROC). */
char *sandstep_cgroup_unavailable (void);
/* Why a --cpus cap, or an --io-weight, cannot apply to a sandbox made
 * here (a phrase that names what is missing), or NULL where it can. */
char *sandstep_cgroup_cpu_cap_unavailable (void);
char *sandstep_cgroup_io_weight_unavailable (void);
void sandstep_cgroup_free (SandstepCgroup *cgroup);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepCgroup, sandstep_cgroup_free)

/* v2: its directory, opened O_PATH, to start a process in (sandstep_jail_start()); owned by @cgroup.  -1 on
 * v1, whose hierarchies a process can only be moved into. */
int sandstep_cgroup_dir_fd (SandstepCgroup *cgroup);

/* Moves the process @pid in. */
gboolean sandstep_cgroup_attach (SandstepCgroup *cgroup, int pid, GError **error);

/* v1: the `tasks` files of its cgroups, opened for writing (close-on-exec) into @fds (up to 4; *@out_n of them),
 * with which a single-threaded process moves itself in by writing "0" there: a thread that moves itself takes no
 * lock of every process's, so none of the kernel's wait for one (sandstep-cgroup-warm.h), which a move of a
 * process by its pid takes.  The process needs no right of its own: the kernel checks the opener's.  v2: none
 * (*@out_n 0): there a process is started inside, or moved (sandstep_cgroup_attach()). */
gboolean sandstep_cgroup_open_moves (SandstepCgroup *cgroup, int *fds, guint *out_n, GError **error);

/* Its count of OOM kills and of forks refused at its pids limit (0 for
 * NULL): a command that ran while they grew hit them. */
void sandstep_cgroup_counters (SandstepCgroup *cgroup, guint64 *out_oom_kills, guint64 *out_pids_max);

/* Removes the sandbox's cgroup once its last process is gone; absent is fine. */
void sandstep_cgroup_remove (const char *name);

/* Removes every sandbox cgroup under sandstep's parent that holds no process, is at least @min_age_s old, and
 * that @keep does not claim: cgroups are named by handle alone, so one whose state directory was removed by hand
 * is found only this way, from any state directory.  One of a live sandbox of another state directory, made at its
 * provision and not used yet, may go too: its supervisor makes it again.  Returns how many went. */
guint sandstep_cgroup_sweep (gboolean (*keep) (const char *name, gpointer data), gpointer data, gint64 min_age_s);

G_END_DECLS
