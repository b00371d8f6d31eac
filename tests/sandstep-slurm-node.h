/* sandstep-slurm-node.h: the single-node Slurm of tests/test-slurm.c
 * (tests/slurm-node.sh), and running commands against it: srun, sbatch,
 * squeue, the helper, each under timeout(1), with the suite's environment
 * (SLURM_CONF, SANDSTEP_STATE_DIR) unless told otherwise.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  char *dir;          /* everything of this suite */
  char *node_dir;     /* the Slurm node's */
  char *state_dir;    /* SANDSTEP_STATE_DIR of every job */
  char *rundir;       /* the plugin's job records (plugstack.conf rundir=) */
  char *helper;       /* $SANDSTEP */
  char *spank;        /* sandstep-spank.so; empty: not built */
  char *make_plugin;  /* sandstep.so; empty: not built */
  char *node_script;  /* tests/slurm-node.sh */
  char **envp;        /* the environment of every command */
  GPid guardian;      /* stops the node when this process ends */
  int guardian_fd;    /* its stdin: EOF tells it to */
} SlurmNode;

extern SlurmNode node;

typedef struct {
  int status;  /* exit status, 128+N for signal N */
  char *out;
  char *err;
} Run;

void run_free (Run *run);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Run, run_free)

/* The suite's environment plus NAME, VALUE pairs (a NULL value unsets). */
char **env_with (const char *first, ...) G_GNUC_NULL_TERMINATED;
/* Runs @argv (under timeout(1)) in @cwd (NULL: the suite's directory) with @envp (NULL: the suite's). */
Run *run_in (const char *cwd, char **envp, const char *const *argv);
#define run(...) run_in (NULL, NULL, (const char *const[]) { __VA_ARGS__, NULL })
#define run_env(envp, ...) run_in (NULL, (envp), (const char *const[]) { __VA_ARGS__, NULL })

/* How many polls 100 ms apart make @seconds on this host: a slow one (SANDSTEP_TEST_TIME_SCALE) stretches them. */
int slurm_polls (double seconds);
/* timeout(1)'s limit on one Slurm command, stretched the same way ("120" on a host at full speed). */
char *slurm_command_limit (void);

/* Fails the test (g_error) when @r did not exit with @expected, showing both streams. */
void assert_status (const Run *r, int expected);
/* The value of "KEY" : VALUE in JSON that json-glib printed (quotes removed); NULL if absent. */
char *json_field (const char *json, const char *key);
/* @key of `sandstep describe` of @handle, as @owner. */
char *describe (const char *handle, const char *owner, const char *key);
/* TRUE if `sandstep list --json` names @handle. */
gboolean sandbox_exists (const char *handle);
/* Waits until squeue no longer shows @job_id: it ended and its epilog ran. */
void wait_job_gone (const char *job_id);
/* TRUE if a process here (not this one) has @needle in its command line. */
gboolean process_with (const char *needle);
/* RUNDIR/job-JOBID: where the plugin records the job's sandboxes. */
char *record_dir (const char *job_id);
/* The node's state in sinfo's words (idle, alloc, drain, ...). */
char *node_state (void);
/* The node's state once it is idle, or after 10s (a drained node stays "drain"). */
char *wait_node_idle (void);

/* Why the suite cannot run here as root (no plugin, Slurm missing); NULL when it can.  Another user's run
 * skips before asking (test-slurm.c). */
char *missing_prerequisite (void);
/* Starts the node (node.* set up first), and the guardian that stops it when this process ends. */
gboolean start_node (char **out_reason);
/* Cancels what runs, then stops the node by the pids it recorded. */
void stop_node (void);

/* g_test_add_data_func() cases that only report: a node that could not start (fails the suite), or one that cannot
 * start here (a skip), @reason saying why. */
void fail_with_reason (gconstpointer reason);
void skip_with_reason (gconstpointer reason);

G_END_DECLS
