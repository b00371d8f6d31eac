/* test-slurm-nodes.c: the Slurm SPANK front-end across nodes.
 *
 * The suite starts a two-node Slurm of its own on this machine
 * (tests/slurm-nodes.sh): this process first moves to a network namespace of
 * its own, the cluster's network (a bridge, 10.231.40.1/24), where munged,
 * slurmctld, a sandstepd and every Slurm command run; node1 and node2 are
 * each a network, UTS, PID and mount namespace (their own address, hostname,
 * slurmd -N NAME, job records and local sandboxes).  Everything is stopped
 * by pid, and the node namespaces deleted, when the suite ends, however it
 * ends (a guardian).  Then:
 *
 * - one job, steps on node1 and node2: node1 provisions through sandstepd and
 *   writes a file in the sandbox; node2 runs in it by handle and reads it;
 * - the same as a make DAG (SHELL := srun), each target on its node;
 * - `srun -N2`: a job on both nodes gets the server's one sandbox, and ends it;
 * - a multi-node batch job with local sandboxes (one per node): the epilog
 *   on every node sweeps its node's records and sandbox;
 * - a node killed mid-step (its slurmd, its step and everything in its
 *   namespaces at once): the step fails, its command ran once, and nothing
 *   is left on sandstepd.
 *
 * Root only (slurmd starts jobs as their users): another user skips, saying
 * so.  Without Slurm or the plugin the suite fails, saying what to install.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-slurm-node.h"

static char *server_url;
static char *server_token;

/* The suite's environment, with every helper and job going through the cluster's sandstepd, in run RUN. */
static GStrv
server_env (const char *run)
{
  return env_with ("SANDSTEP_BACKEND", server_url, "SANDSTEP_TOKEN_FILE", server_token, "SANDSTEP_ALLOW_HTTP", "1",
                   "SANDSTEP_RUN", run, "SANDSTEP_DAG", "nodes-dag", NULL);
}

static char *
read_text (const char *path)
{
  g_autofree char *text = NULL;
  g_autoptr(GError) error = NULL;

  if (!g_file_get_contents (path, &text, NULL, &error))
    g_error ("could not read '%s': %s", path, error->message);
  return g_steal_pointer (&text);
}

/* `sandstep list --json` through the server, as the owner nodes-dag/RUN. */
static char *
server_list (const char *run)
{
  g_auto(GStrv) envp = server_env (run);
  g_autoptr(Run) r = run_env (envp, node.helper, "list", "--json");

  assert_status (r, 0);
  return g_strdup (r->out);
}

/* Waits until squeue shows no job: every epilog ran. */
static void
wait_queue_empty (void)
{
  for (int i = 0; i < slurm_polls (60); i++)
    {
      g_autoptr(Run) r = run ("squeue", "-h", "-o", "%i");
      if (r->status == 0 && g_strstrip (r->out)[0] == '\0')
        return;
      g_usleep (100 * 1000);
    }
  g_error ("jobs still in squeue after %d polls 100 ms apart", slurm_polls (60));
}

/* ---- one sandbox on sandstepd, steps on two nodes, by handle ---- */

static void
test_share_by_handle (void)
{
  g_auto(GStrv) envp = server_env ("share-run");
  g_autofree char *out_path = g_build_filename (node.dir, "share.out", NULL);
  g_autofree char *out_arg = g_strconcat ("--output=", out_path, NULL);
  g_autofree char *box_path = g_build_filename (node.dir, "share.sbx", NULL);
  g_autofree char *handle = NULL;
  g_autofree char *handle_arg = NULL;
  g_autofree char *text = NULL;

  g_test_summary ("a batch job on two nodes: a step on node1 provisions through sandstepd and writes a file in the "
                  "sandbox; a step on node2 runs in it by its handle (@FILE) and reads the file");
  /* A batch job on both nodes: node1 provisions through sandstepd and writes
   * a.txt inside; node2 runs in the sandbox by its handle (@share.sbx, read
   * where srun runs) and finds a.txt. */
  {
    g_autoptr(Run) r = run_env (envp, "sbatch", "--wait", "--quiet", "-N2", out_arg, "--wrap",
                                "srun -N1 -n1 -w node1 --sandbox=none sh -c "
                                "'\"$SANDSTEP\" provision --network=none > share.sbx && hostname'; "
                                "srun -N1 -n1 -w node1 --sandbox=@share.sbx sh -c 'echo written on node1 > a.txt'; "
                                "srun -N1 -n1 -w node2 --sandbox=none hostname; "
                                "srun -N1 -n1 -w node2 --sandbox=@share.sbx sh -c 'cat a.txt; hostname'");
    assert_status (r, 0);
  }
  text = read_text (out_path);
  g_assert_cmpstr (text, ==, "node1\nnode2\nwritten on node1\nsandstep\n");
  handle = g_strstrip (read_text (box_path));
  g_assert_true (g_str_has_prefix (handle, server_url));

  /* The file is on the server's sandbox: this host reads it there too. */
  handle_arg = g_strconcat ("--handle=", handle, NULL);
  {
    g_autoptr(Run) r = run_env (envp, node.helper, "get", handle_arg, "a.txt");
    assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "written on node1\n");
  }
  {
    g_autoptr(Run) r = run_env (envp, node.helper, "destroy", handle_arg);
    assert_status (r, 0);
  }
  {
    g_autofree char *listed = server_list ("share-run");
    g_assert_null (strstr (listed, handle));
  }
}

/* ---- a make DAG whose steps srun on two nodes ---- */

static const char dag_makefile[] =
  "# Every recipe line is a job; each target says where it runs.\n"
  "SHELL := srun\n"
  ".SHELLFLAGS := --quiet -N1 -w node1 --sandbox=none sh -c\n"
  "all: read\n"
  "box.sbx:\n"
  "\t\"$$SANDSTEP\" provision --network=none > $@\n"
  "write: box.sbx\n"
  "write: private .SHELLFLAGS := --quiet -N1 -w node1 --sandbox=@box.sbx sh -c\n"
  "write:\n"
  "\techo written on node1 > a.txt\n"
  "read: write\n"
  "read: private .SHELLFLAGS := --quiet -N1 -w node2 --sandbox=@box.sbx sh -c\n"
  "read:\n"
  "\tcat a.txt\n"
  ".PHONY: all write read\n";

static void
test_make_dag (void)
{
  g_auto(GStrv) envp = server_env ("dag-run");
  g_autofree char *dir = g_build_filename (node.dir, "dag", NULL);
  g_autofree char *makefile = g_build_filename (dir, "Makefile", NULL);
  g_autofree char *box_path = g_build_filename (dir, "box.sbx", NULL);
  g_autofree char *handle = NULL;
  g_autofree char *handle_arg = NULL;

  g_test_summary ("a make DAG (SHELL := srun) whose steps run on node1 and node2 shares one sandbox of the "
                  "server by its handle: node2's step reads what node1's wrote");
  g_assert_cmpint (g_mkdir_with_parents (dir, 0755), ==, 0);
  g_assert_true (g_file_set_contents (makefile, dag_makefile, -1, NULL));
  {
    g_autoptr(Run) r = run_in (dir, envp, (const char *const[]) { "make", "-j2", NULL });
    assert_status (r, 0);
    g_assert_true (g_str_has_suffix (r->out, "cat a.txt\nwritten on node1\n"));
  }
  handle = g_strstrip (read_text (box_path));
  g_assert_true (g_str_has_prefix (handle, server_url));
  handle_arg = g_strconcat ("--handle=", handle, NULL);
  {
    g_autoptr(Run) r = run_env (envp, node.helper, "destroy", handle_arg);
    assert_status (r, 0);
  }
}

/* ---- srun -N2: the job's sandbox on the server, one for both nodes ---- */

static void
test_srun_two_nodes (void)
{
  g_auto(GStrv) envp = server_env ("n2-run");
  g_auto(GStrv) lines = NULL;
  g_auto(GStrv) first = NULL;
  g_auto(GStrv) second = NULL;
  g_autofree char *job_id = NULL;

  g_test_summary ("srun -N2 --sandbox-provision through sandstepd: one sandbox of the server for both nodes, ended "
                  "with the job; the two tasks of a -N2 step take turns in one sandbox");
  {
    g_autoptr(Run) r = run_env (envp, "srun", "--quiet", "-N2", "-n2", "--sandbox-provision=network=none",
                                "--sandbox=none", "sh", "-c",
                                "echo \"$(hostname) $SLURM_JOB_ID $SANDSTEP_HANDLE\"");
    assert_status (r, 0);
    lines = g_strsplit (g_strstrip (r->out), "\n", -1);
  }
  g_assert_cmpuint (g_strv_length (lines), ==, 2);
  if (g_str_has_prefix (lines[0], "node2"))
    {
      char *swap = lines[0];
      lines[0] = lines[1];
      lines[1] = swap;
    }
  first = g_strsplit (lines[0], " ", -1);
  second = g_strsplit (lines[1], " ", -1);
  g_assert_cmpuint (g_strv_length (first), ==, 3);
  g_assert_cmpuint (g_strv_length (second), ==, 3);
  g_assert_cmpstr (first[0], ==, "node1");
  g_assert_cmpstr (second[0], ==, "node2");
  /* One job, one sandbox on the server for both nodes (get-or-create by the job's holder). */
  g_assert_cmpstr (first[1], ==, second[1]);
  g_assert_true (g_str_has_prefix (first[2], server_url));
  g_assert_cmpstr (first[2], ==, second[2]);
  job_id = g_strdup (first[1]);
  wait_job_gone (job_id);
  {
    g_autofree char *listed = server_list ("n2-run");
    g_assert_null (strstr (listed, first[2]));
  }

  /* The tasks of a two-node step take turns in one sandbox on the server. */
  {
    g_autoptr(Run) made = run_env (envp, node.helper, "provision", "--network=none");
    g_autofree char *handle = NULL;
    g_autofree char *sandbox_arg = NULL;
    g_autofree char *handle_arg = NULL;

    assert_status (made, 0);
    handle = g_strdup (g_strstrip (made->out));
    sandbox_arg = g_strconcat ("--sandbox=", handle, NULL);
    handle_arg = g_strconcat ("--handle=", handle, NULL);
    {
      g_autoptr(Run) r = run_env (envp, "srun", "--quiet", "-N2", "-n2", sandbox_arg, "sh", "-c",
                                  "echo task >> tasks.txt");
      assert_status (r, 0);
    }
    {
      g_autoptr(Run) r = run_env (envp, node.helper, "get", handle_arg, "tasks.txt");
      assert_status (r, 0);
      g_assert_cmpstr (r->out, ==, "task\ntask\n");
    }
    {
      g_autoptr(Run) r = run_env (envp, node.helper, "destroy", handle_arg);
      assert_status (r, 0);
    }
  }
}

/* ---- the epilog's sweep on every node ---- */

static char *
node_path (const char *name, const char *what)
{
  return g_build_filename (node.node_dir, "nodes", name, what, NULL);
}

static void
test_epilog_sweep (void)
{
  /* No server: each node provisions a sandbox of its own, in its own state directory. */
  g_auto(GStrv) envp = env_with ("SANDSTEP_RUN", "sweep-run", "SANDSTEP_DAG", "nodes-dag", NULL);
  g_autofree char *out_path = g_build_filename (node.dir, "sweep.out", NULL);
  g_autofree char *out_arg = g_strconcat ("--output=", out_path, NULL);
  g_autofree char *script = NULL;
  g_autofree char *text = NULL;
  g_auto(GStrv) lines = NULL;
  g_autofree char *job_id = NULL;
  const char *handles[2] = { NULL, NULL };

  g_test_summary ("a two-node batch job with local sandboxes: each node provisions its own and records it; when the "
                  "job ends, every node's records and sandbox are gone (node2's by the epilog alone)");
  /* The batch script (node1) runs one step on both nodes, then lists the job
   * records and sandboxes each node holds.  Only node1's sandbox ends with the batch
   * script; node2's is left to the epilog. */
  script = g_strdup_printf ("echo \"$SLURM_JOB_ID\"; "
                            "srun --quiet -N2 -n2 --sandbox=none sh -c 'echo \"$(hostname) $SANDSTEP_HANDLE\"' | sort; "
                            "for n in %s/nodes/node1 %s/nodes/node2; do "
                            "echo $(ls $n/local/spank/job-$SLURM_JOB_ID | wc -l) $(ls -d $n/state/sandboxes/sandstep-* | wc -l); "
                            "done", node.node_dir, node.node_dir);
  {
    g_autoptr(Run) r = run_env (envp, "sbatch", "--wait", "--quiet", "-N2", "--sandbox-provision=network=none",
                                out_arg, "--wrap", script);
    assert_status (r, 0);
  }
  text = read_text (out_path);
  lines = g_strsplit (g_strstrip (text), "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), ==, 5);
  job_id = g_strdup (lines[0]);
  g_assert_true (g_str_has_prefix (lines[1], "node1 sandstep-"));
  g_assert_true (g_str_has_prefix (lines[2], "node2 sandstep-"));
  handles[0] = lines[1] + strlen ("node1 ");
  handles[1] = lines[2] + strlen ("node2 ");
  /* Local sandboxes: one per node. */
  g_assert_cmpstr (handles[0], !=, handles[1]);
  /* While the job ran, each node had one record and one sandbox of its own. */
  g_assert_cmpstr (lines[3], ==, "1 1");
  g_assert_cmpstr (lines[4], ==, "1 1");

  wait_job_gone (job_id);
  for (int i = 0; i < 2; i++)
    {
      const char *name = i == 0 ? "node1" : "node2";
      g_autofree char *records = g_strdup_printf ("%s/nodes/%s/local/spank/job-%s", node.node_dir, name, job_id);
      g_autofree char *state = node_path (name, "state");
      g_autofree char *sandbox = g_build_filename (state, "sandboxes", handles[i], NULL);

      g_assert_false (g_file_test (records, G_FILE_TEST_EXISTS));
      g_assert_false (g_file_test (sandbox, G_FILE_TEST_EXISTS));
    }
}

/* ---- a node killed mid-step ---- */

/* Starts @argv with its stdout and stderr in @log_path. */
static GPid
spawn_logged (char **envp, const char *const *argv, const char *log_path)
{
  g_autoptr(GPtrArray) full = g_ptr_array_new ();
  g_autoptr(GError) error = NULL;
  GPid pid;

  g_ptr_array_add (full, "/bin/sh");
  g_ptr_array_add (full, "-c");
  g_ptr_array_add (full, "log=$0; exec \"$@\" > \"$log\" 2>&1");
  g_ptr_array_add (full, (gpointer) log_path);
  for (const char *const *a = argv; *a != NULL; a++)
    g_ptr_array_add (full, (gpointer) *a);
  g_ptr_array_add (full, NULL);
  if (!g_spawn_async (node.dir, (char **) full->pdata, envp, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid, &error))
    g_error ("could not start %s: %s", argv[0], error->message);
  return pid;
}

static void
test_node_killed (void)
{
  g_auto(GStrv) envp = server_env ("kill-run");
  g_autofree char *handle = NULL;
  g_autofree char *handle_arg = NULL;
  g_autofree char *sandbox_arg = NULL;
  g_autofree char *pid_path = g_build_filename (node.node_dir, "run", "node-node2.pid", NULL);
  g_autofree char *pid_text = NULL;
  g_autofree char *held = NULL;
  g_autofree char *srun_log = g_build_filename (node.dir, "killed-srun.log", NULL);
  g_autofree char *limit = slurm_command_limit ();
  int status = 0;
  gboolean ended = FALSE;
  GPid srun;

  g_test_summary ("node2 killed mid-step (slurmd and everything on the node): the job ends NODE_FAIL, not "
                  "requeued; the command ran once; no process or claim is left; the server's list is empty after gc");
  {
    g_autoptr(Run) r = run_env (envp, node.helper, "provision", "--network=none");
    assert_status (r, 0);
    handle = g_strdup (g_strstrip (r->out));
  }
  handle_arg = g_strconcat ("--handle=", handle, NULL);
  sandbox_arg = g_strconcat ("--sandbox=", handle, NULL);
  srun = spawn_logged (envp, (const char *const[]) { "timeout", "-k5", limit, "srun", "--quiet", "-N1", "-w", "node2",
                                                     sandbox_arg, "sh", "-c", "echo ran >> count.txt; sleep 300.75",
                                                     NULL }, srun_log);
  /* The command runs, on the server's sandbox, under node2's claim (a get would wait for that claim). */
  for (int i = 0; i < slurm_polls (30) && held == NULL; i++)
    {
      g_autoptr(Run) r = run_env (envp, node.helper, "describe", handle_arg);
      g_autofree char *by = r->status == 0 ? json_field (r->out, "held_by") : NULL;
      if (by != NULL && strcmp (by, "null") != 0 && process_with ("sleep 300.75"))
        held = g_steal_pointer (&by);
      else
        g_usleep (100 * 1000);
    }
  if (held == NULL)
    {
      g_autofree char *log = read_text (srun_log);
      g_autoptr(Run) nodes = run ("sinfo", "-N");
      g_error ("the step did not start in %d polls 100 ms apart; srun said: %s", slurm_polls (30), log);
    }
  g_assert_true (g_str_has_prefix (held, "nodes-dag/kill-run/"));

  /* The node dies: its slurmd, the step's slurmstepd and the task's `sandstep run`, all at once. */
  pid_text = g_strstrip (read_text (pid_path));
  g_assert_cmpint (kill (atoi (pid_text), SIGKILL), ==, 0);

  /* The step fails: Slurm finds the node gone (SlurmdTimeout=10), and the job ends NODE_FAIL, not requeued.
   * srun says so, but exits 0 all the same (Slurm 22.05's srun: a node failure is not a task's exit
   * status), so its status is not what tells. */
  for (int i = 0; i < slurm_polls (90) && !ended; i++)
    {
      if (waitpid (srun, &status, WNOHANG) == srun)
        ended = TRUE;
      else
        g_usleep (100 * 1000);
    }
  g_assert_true (ended);
  {
    g_autofree char *log = read_text (srun_log);
    g_test_message ("srun ended with wait status %d, saying: %s", status, log);
    g_assert_false (WIFEXITED (status) && WEXITSTATUS (status) == 124);
    g_assert_nonnull (strstr (log, "Node failure on node2"));
  }
  {
    const char *job_id = held + strlen ("nodes-dag/kill-run/");
    g_autofree char *id = g_strndup (job_id, strcspn (job_id, "."));
    g_autoptr(Run) r = run ("scontrol", "show", "job", id);
    assert_status (r, 0);
    g_assert_nonnull (strstr (r->out, "JobState=NODE_FAIL "));
    g_assert_nonnull (strstr (r->out, "Restarts=0 "));
  }
  wait_queue_empty ();

  /* The command's claim died with its client: no process left, the sandbox free. */
  for (int i = 0; i < slurm_polls (30) && process_with ("sleep 300.75"); i++)
    g_usleep (100 * 1000);
  g_assert_false (process_with ("sleep 300.75"));
  {
    g_autofree char *held = NULL;
    g_autoptr(Run) r = run_env (envp, node.helper, "describe", handle_arg);
    assert_status (r, 0);
    held = json_field (r->out, "held_by");
    g_assert_cmpstr (held, ==, "null");
  }
  /* It ran once, and not again. */
  {
    g_autoptr(Run) r = run_env (envp, node.helper, "get", handle_arg, "count.txt");
    assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "ran\n");
  }
  {
    g_autoptr(Run) r = run_env (envp, node.helper, "destroy", handle_arg);
    assert_status (r, 0);
  }
  {
    g_autoptr(Run) r = run_env (envp, node.helper, "gc");
    assert_status (r, 0);
  }
  {
    g_autofree char *listed = server_list ("kill-run");
    g_autofree char *found = json_field (listed, "handle");
    g_assert_null (found);
  }
  /* Nor in the server's state directory (what list would not show: a half-made or damaged one). */
  {
    g_autofree char *sandboxes = g_build_filename (node.node_dir, "sandstepd", "state", "sandboxes", NULL);
    g_autoptr(GDir) d = g_dir_open (sandboxes, 0, NULL);
    const char *name;

    g_assert_nonnull (d);
    while ((name = g_dir_read_name (d)) != NULL)
      g_assert_false (g_str_has_prefix (name, "sandstep-"));
  }
}

/* The node killed last: the cluster has one node left after it. */
static const struct {
  const char *path;
  GTestFunc func;
} cases[] = {
  { "/slurm-nodes/share-by-handle", test_share_by_handle },
  { "/slurm-nodes/make-dag", test_make_dag },
  { "/slurm-nodes/srun-two-nodes", test_srun_two_nodes },
  { "/slurm-nodes/epilog-sweep", test_epilog_sweep },
  { "/slurm-nodes/node-killed", test_node_killed },
};

static char *
missing_network_tool (void)
{
  for (const char *const *p = (const char *const[]) { "ip", "nsenter", "unshare", NULL }; *p != NULL; p++)
    {
      g_autofree char *path = g_find_program_in_path (*p);
      if (path == NULL)
        return g_strdup_printf ("'%s' is not installed: install Debian's iproute2 and util-linux", *p);
    }
  return NULL;
}

int
main (int argc, char **argv)
{
  g_autofree char *reason = NULL;
  g_autofree char *prefix = NULL;
  int status;

  g_test_init (&argc, &argv, NULL);
  node.helper = g_strdup (g_getenv ("SANDSTEP"));
  node.spank = g_strdup (g_getenv ("SANDSTEP_SPANK_PLUGIN"));
  node.node_script = g_test_build_filename (G_TEST_DIST, "slurm-nodes.sh", NULL);
  g_assert_nonnull (node.helper);
  g_assert_nonnull (g_getenv ("SANDSTEPD"));

  if (geteuid () != 0)
    {
      for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
        g_test_add_data_func (cases[i].path, "a Slurm node needs root (slurmd starts jobs as their users, and the "
                              "nodes are network namespaces this suite makes); run this suite as root",
                              skip_with_reason);
      return g_test_run ();
    }
  /* Slurm, the plugin or iproute2 absent: skipped, saying what to install (scripts/deps.sh installs them for
   * the suite; test-slurm fails without them). */
  reason = missing_prerequisite ();
  if (reason == NULL)
    reason = missing_network_tool ();
  if (reason != NULL)
    {
      for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
        g_test_add_data_func (cases[i].path, reason, skip_with_reason);
      return g_test_run ();
    }
  {
    g_autoptr(Run) sweep = NULL;

    /* The cluster's network is this process's own namespace: nothing of it reaches the machine's. */
    if (unshare (CLONE_NEWNET) < 0)
      g_error ("could not make a network namespace (unshare): %s", g_strerror (errno));
    node.dir = g_dir_make_tmp ("sandstep-slurm-nodes-XXXXXX", NULL);
    g_assert_nonnull (node.dir);
    g_chmod (node.dir, 0755);
    node.node_dir = g_build_filename (node.dir, "cluster", NULL);
    node.state_dir = g_build_filename (node.dir, "state", NULL);
    node.rundir = g_build_filename (node.node_dir, "local", "spank", NULL);
    node.envp = g_get_environ ();
    for (const char *const *v = (const char *const[]) { "SANDSTEP_RUN", "SANDSTEP_DAG", "SANDSTEP_TOP",
           "SANDSTEP_OWNER", "SANDSTEP_HOLDER", "SANDSTEP_HANDLE", "SANDSTEP_SANDBOX", "SANDSTEP_SANDBOX_PROVISION",
           "SANDSTEP_SANDBOX_KEEP", "SANDSTEP_BACKEND", "SANDSTEP_TOKEN_FILE", "SANDSTEP_TOKEN", "SLURM_JOB_ID",
           "SLURM_JOBID", "SLURM_CONF", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", NULL }; *v != NULL; v++)
      node.envp = g_environ_unsetenv (node.envp, *v);
    node.envp = g_environ_setenv (node.envp, "SANDSTEP_STATE_DIR", node.state_dir, TRUE);
    prefix = g_strdup_printf ("sandstep-test-%d", (int) getpid ());
    node.envp = g_environ_setenv (node.envp, "SANDSTEP_TEST_NETNS_PREFIX", prefix, TRUE);
    /* Namespaces that a killed run of this suite left. */
    sweep = run_in ("/", NULL, (const char *const[]) { node.node_script, "sweep", NULL });
    if (!start_node (&reason))
      stop_node ();
  }
  if (reason != NULL)
    {
      /* Everything is installed, yet the cluster did not start: a failure, with what its script said. */
      g_test_add_data_func ("/slurm-nodes/cluster", reason, fail_with_reason);
      return g_test_run ();
    }
  {
    g_autofree char *url_path = g_build_filename (node.node_dir, "sandstepd.url", NULL);
    server_url = g_strstrip (read_text (url_path));
    server_token = g_build_filename (node.node_dir, "sandstepd.token", NULL);
  }

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    g_test_add_func (cases[i].path, cases[i].func);
  status = g_test_run ();

  stop_node ();
  {
    g_autoptr(Run) r = run ("rm", "-rf", node.dir);
  }
  return status;
}
