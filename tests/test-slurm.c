/* test-slurm.c: the Slurm SPANK front-end on a real single-node Slurm.
 *
 * The suite starts its own Slurm (tests/slurm-node.sh: munged, slurmctld and
 * slurmd as root, config, state and sockets under a temporary directory,
 * loopback ports, a plugstack.conf loading the built sandstep-spank.so) and
 * stops it by the pids it recorded; a guardian process stops it too should
 * this process die.  Then, through srun, sbatch and make:
 *
 * - examples/slurm under `make -j2` (SHELL := srun): tasks inside the
 *   sandbox (hostname, /workspace, NoNewPrivs, Seccomp, the sandbox's uid
 *   map), files kept between jobs, the sandbox kept by --sandbox-keep;
 * - identity: owner DAG/RUN from what srun propagates, else slurm/JOBID;
 *   holder OWNER/JOBID.STEP; another owner's sandbox refused with the
 *   message and status `sandstep run` gives locally;
 * - --sandbox-provision: the job's sandbox ends with the job (srun, sbatch,
 *   salloc: the epilog's sweep);
 * - a job of another user: the helper runs as that user, in its state;
 * - scancel mid-step leaves no process, claim or record;
 * - a remote handle: the task runs through a sandstepd (started here);
 * - bad values: one line `srun: error: sandstep: --OPTION...`, status 255,
 *   no job queued, the node still idle; a failure on the node fails the
 *   step's tasks, never the node; so does a helper missing on the node
 *   (a task meant for a sandbox never runs on the host).
 *
 * Without Slurm or the plugin the suite fails, saying what to install.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-slurm-node.h"
#include "sandstep-test-utils.h"

/* ---- examples/slurm under make -j2 ---- */

static void
test_example (void)
{
  g_autofree char *dir = g_build_filename (node.dir, "example", NULL);
  g_autofree char *src = g_test_build_filename (G_TEST_DIST, "..", "examples", "slurm", NULL);
  g_autofree char *plugin_arg = g_strconcat ("SANDSTEP_PLUGIN=", node.make_plugin, NULL);
  g_autofree char *run_path = g_build_filename (dir, ".sandstep", "run", NULL);
  g_autofree char *run_id = NULL;
  g_autofree char *owner = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *report = NULL;
  g_autofree char *handle_path = g_build_filename (dir, "box.sbx", NULL);
  g_autofree char *report_path = g_build_filename (dir, "report.txt", NULL);
  g_autofree char *uid = NULL;
  g_autofree char *uid_map = NULL;
  g_autofree char *provisioned_by = NULL;
  g_auto(GStrv) lines = NULL;

  if (node.make_plugin == NULL || node.make_plugin[0] == '\0')
    g_error ("the make plugin sandstep.so was not built (no gnumake.h: install make's headers); "
             "examples/slurm needs it");
  {
    g_autoptr(Run) cp = run ("cp", "-r", src, dir);
    assert_status (cp, 0);
  }
  {
    /* The run is named: a make that succeeds ends its run, and .sandstep/run with it. */
    g_auto(GStrv) envp = env_with ("SANDSTEP_RUN", "example-run", NULL);
    g_autoptr(Run) make = run_in (dir, envp, (const char *const[]) { "make", "-j2", plugin_arg, NULL });
    assert_status (make, 0);
  }
  g_assert_false (g_file_test (run_path, G_FILE_TEST_EXISTS));
  run_id = g_strdup ("example-run");
  owner = g_strconcat ("example/", run_id, NULL);
  g_assert_true (g_file_get_contents (handle_path, &handle, NULL, NULL));
  g_strstrip (handle);
  g_assert_true (g_file_get_contents (report_path, &report, NULL, NULL));

  /* What the tasks inside saw. */
  lines = g_strsplit (report, "\n", -1);
  g_assert_cmpstr (lines[0], ==, "host: sandstep");
  g_assert_cmpstr (lines[1], ==, "cwd: /workspace");
  g_assert_cmpstr (lines[2], ==, "NoNewPrivs:\t1");
  g_assert_cmpstr (lines[3], ==, "Seccomp:\t2");
  uid = describe (handle, owner, "uid");
  uid_map = g_strdup_printf ("uid_map: 0 %s 1", uid);
  {
    g_autoptr(GRegex) spaces = g_regex_new (" +", 0, 0, NULL);
    g_autofree char *shown = g_regex_replace_literal (spaces, lines[4], -1, 0, " ", 0, NULL);
    g_assert_cmpstr (shown, ==, uid_map);
  }
  g_assert_cmpstr (uid, !=, "0");
  /* words.txt was written by one job, from files another put there, and read by a third. */
  g_assert_cmpstr (lines[5], ==, "  8 the");
  g_assert_cmpstr (lines[6], ==, "  2 and");

  /* The sandbox is the run's, provisioned by the job of box.sbx, released at
   * that job's end with --sandbox-keep (so it is still here). */
  provisioned_by = describe (handle, owner, "provisioned_by");
  g_assert_true (g_str_has_prefix (provisioned_by, owner));
  g_assert_true (g_regex_match_simple ("^/[0-9]+$", provisioned_by + strlen (owner), 0, 0));
  {
    g_autofree char *released = describe (handle, owner, "released");
    g_autofree char *job_records = record_dir (provisioned_by + strlen (owner) + 1);
    g_assert_cmpstr (released, ==, "true");
    wait_job_gone (provisioned_by + strlen (owner) + 1);
    g_assert_false (g_file_test (job_records, G_FILE_TEST_EXISTS));
  }

  {
    /* In the same run: the sandbox is that run's. */
    g_auto(GStrv) envp = env_with ("SANDSTEP_RUN", "example-run", NULL);
    g_autoptr(Run) clean = run_in (dir, envp, (const char *const[]) { "make", "clean", plugin_arg, NULL });
    assert_status (clean, 0);
  }
  g_assert_false (sandbox_exists (handle));
}

/* ---- identity and refusal ---- */

/* Runs `srun ARGS --sandbox=none sh -c 'echo $SLURM_JOB_ID $SANDSTEP_OWNER $SANDSTEP_HOLDER $SANDSTEP_HANDLE'`:
 * the task on the host, as the user asked in so many words. */
static GStrv
host_task_identity (char **envp, const char *options)
{
  g_autofree char *line = g_strdup_printf ("srun --quiet %s --sandbox=none sh -c 'echo \"$SLURM_JOB_ID $SANDSTEP_OWNER "
                                           "$SANDSTEP_HOLDER $SANDSTEP_HANDLE\"'", options);
  g_autoptr(Run) r = run_env (envp, "sh", "-c", line);

  assert_status (r, 0);
  g_strstrip (r->out);
  return g_strsplit (r->out, " ", -1);
}

static void
test_identity (void)
{
  g_auto(GStrv) envp = env_with ("SANDSTEP_RUN", "id-run-1", "SANDSTEP_DAG", "id-dag", NULL);
  g_auto(GStrv) with_top = env_with ("SANDSTEP_RUN", "id-run-2", "SANDSTEP_TOP", "/srv/builds/nightly", NULL);
  g_auto(GStrv) other = env_with ("SANDSTEP_RUN", "id-run-other", "SANDSTEP_DAG", "id-dag", NULL);
  g_auto(GStrv) words = NULL;
  g_autofree char *holder = NULL;
  g_autofree char *provisioned_by = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *handle_arg = NULL;

  /* The run that srun carried: owner DAG/RUN, holder OWNER/JOBID.STEP. */
  words = host_task_identity (envp, "--sandbox-provision --sandbox-keep=10m");
  g_assert_cmpuint (g_strv_length (words), ==, 4);
  g_assert_cmpstr (words[1], ==, "id-dag/id-run-1");
  holder = g_strdup_printf ("id-dag/id-run-1/%s.0", words[0]);
  g_assert_cmpstr (words[2], ==, holder);
  handle = g_strdup (words[3]);
  provisioned_by = describe (handle, "id-dag/id-run-1", "provisioned_by");
  {
    g_autofree char *expected = g_strdup_printf ("id-dag/id-run-1/%s", words[0]);
    g_assert_cmpstr (provisioned_by, ==, expected);
  }
  g_strfreev (words);

  /* No SANDSTEP_DAG: the name of make's top directory, as the make plugin has it. */
  words = host_task_identity (with_top, "--sandbox-provision");
  g_assert_cmpstr (words[1], ==, "nightly/id-run-2");
  g_strfreev (words);

  /* SANDSTEP_OWNER wins over the run, as for the helper and the make plugin (issue 34). */
  {
    g_auto(GStrv) with_owner = env_with ("SANDSTEP_OWNER", "own-dag/own-run", "SANDSTEP_RUN", "id-run-3",
                                         "SANDSTEP_DAG", "id-dag", NULL);
    g_autofree char *own_holder = NULL;
    g_autofree char *own_by = NULL;

    words = host_task_identity (with_owner, "--sandbox-provision --sandbox-keep=10m");
    g_assert_cmpuint (g_strv_length (words), ==, 4);
    g_assert_cmpstr (words[1], ==, "own-dag/own-run");
    own_holder = g_strdup_printf ("own-dag/own-run/%s.0", words[0]);
    g_assert_cmpstr (words[2], ==, own_holder);
    own_by = describe (words[3], "own-dag/own-run", "provisioned_by");
    g_assert_true (g_str_has_prefix (own_by, "own-dag/own-run/"));
    {
      g_autofree char *destroy_handle = g_strconcat ("--handle=", words[3], NULL);
      g_autoptr(Run) r = run (node.helper, "destroy", destroy_handle, "--owner=own-dag/own-run");
      assert_status (r, 0);
    }
    g_strfreev (words);
  }

  /* No run at all: the job's own. */
  words = host_task_identity (node.envp, "--sandbox-provision");
  {
    g_autofree char *expected = g_strdup_printf ("slurm/%s", words[0]);
    g_assert_cmpstr (words[1], ==, expected);
  }
  g_strfreev (words);
  words = NULL;

  /* Another run's step is refused as `sandstep run` refuses it here, word for word. */
  handle_arg = g_strconcat ("--sandbox=", handle, NULL);
  {
    g_autofree char *local_handle = g_strconcat ("--handle=", handle, NULL);
    g_autoptr(Run) local = run_env (other, node.helper, "run", local_handle, "--owner=id-dag/id-run-other", "--",
                                    "true");
    g_autoptr(Run) slurm = run_env (other, "srun", "--quiet", handle_arg, "true");

    g_assert_cmpint (local->status, ==, 67);
    g_assert_cmpint (slurm->status, ==, 67);
    g_assert_nonnull (strstr (local->err, "is not owned by 'id-dag/id-run-other'"));
    g_assert_nonnull (strstr (slurm->err, local->err));
  }
  /* Its own run gets in. */
  {
    g_autoptr(Run) r = run_env (envp, "srun", "--quiet", handle_arg, "sh", "-c", "hostname; pwd");
    assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "sandstep\n/workspace\n");
  }
  /* @FILE is read where srun runs: the task's directory (--chdir) need not hold it. */
  {
    g_autofree char *file = g_build_filename (node.dir, "identity.sbx", NULL);
    g_assert_true (g_file_set_contents (file, handle, -1, NULL));
    g_autoptr(Run) r = run_env (envp, "srun", "--quiet", "--chdir=/", "--sandbox=@identity.sbx", "pwd");
    assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "/workspace\n");
  }
  /* srun's stdin reaches the task inside. */
  {
    g_autofree char *line = g_strdup_printf ("printf 'one\\ntwo\\n' | srun --quiet %s sh -c 'cat; echo end'",
                                             handle_arg);
    g_autoptr(Run) r = run_env (envp, "sh", "-c", line);
    assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "one\ntwo\nend\n");
  }
  /* The same, with the sandbox from the environment's default. */
  {
    g_auto(GStrv) by_env = env_with ("SANDSTEP_RUN", "id-run-1", "SANDSTEP_DAG", "id-dag", "SANDSTEP_SANDBOX", handle,
                                     NULL);
    g_autoptr(Run) r = run_env (by_env, "srun", "--quiet", "hostname");
    assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "sandstep\n");
  }
  {
    g_autofree char *destroy_handle = g_strconcat ("--handle=", handle, NULL);
    g_autoptr(Run) r = run (node.helper, "destroy", destroy_handle, "--owner=id-dag/id-run-1");
    assert_status (r, 0);
  }
}

/* ---- --sandbox-provision: the tasks run inside unless told otherwise ---- */

static void
test_provision_inside (void)
{
  g_test_summary ("issue 34: srun --sandbox-provision runs its task in the job's sandbox; --sandbox=none (or "
                  "SANDSTEP_SANDBOX=none) runs it on the host");
  {
    g_autoptr(Run) r = run ("srun", "--quiet", "--sandbox-provision", "--", "grep", "NoNewPrivs", "/proc/self/status");
    assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "NoNewPrivs:\t1\n");
  }
  {
    g_auto(GStrv) envp = env_with ("SANDSTEP_SANDBOX_PROVISION", "network=none", NULL);
    g_autoptr(Run) r = run_env (envp, "srun", "--quiet", "hostname");
    assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "sandstep\n");
  }
  {
    g_autoptr(Run) r = run ("srun", "--quiet", "--sandbox-provision", "--sandbox=none", "--", "grep", "NoNewPrivs",
                            "/proc/self/status");
    assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "NoNewPrivs:\t0\n");
  }
  {
    g_auto(GStrv) envp = env_with ("SANDSTEP_SANDBOX", "none", NULL);
    g_autoptr(Run) r = run_env (envp, "srun", "--quiet", "--sandbox-provision", "grep", "NoNewPrivs",
                                "/proc/self/status");
    assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "NoNewPrivs:\t0\n");
  }
}

/* ---- --sandbox-provision ends with the job ---- */

static void
assert_job_sandbox_gone (const char *job_id, const char *handle)
{
  g_autofree char *records = record_dir (job_id);
  g_autofree char *supervisor = g_strconcat ("--supervisor ", handle, NULL);

  wait_job_gone (job_id);
  g_assert_false (sandbox_exists (handle));
  g_assert_false (g_file_test (records, G_FILE_TEST_EXISTS));
  g_assert_false (process_with (supervisor));
}

static void
test_provision_cleanup (void)
{
  g_auto(GStrv) words = NULL;
  g_autofree char *out_path = g_build_filename (node.dir, "batch.out", NULL);
  g_autofree char *out_arg = g_strconcat ("--output=", out_path, NULL);
  g_autofree char *batch_out = NULL;
  g_auto(GStrv) lines = NULL;

  /* srun made the job for this step: the sandbox ends with the step. */
  words = host_task_identity (node.envp, "--sandbox-provision=network=none,lifetime=10m");
  g_assert_true (g_str_has_prefix (words[3], "sandstep-"));
  assert_job_sandbox_gone (words[0], words[3]);

  /* A batch job: the script on the host, its steps inside, and an operator
   * the script runs all share the job's sandbox. */
  {
    g_autoptr(Run) r = run ("sbatch", "--wait", "--quiet", "--sandbox-provision", out_arg, "--wrap",
                            "echo \"$SLURM_JOB_ID $SANDSTEP_HANDLE\"; "
                            "srun --quiet --sandbox=job sh -c 'hostname; echo kept > kept.txt'; "
                            "srun --quiet --sandbox=job cat kept.txt; "
                            "\"$SANDSTEP\" get kept.txt");
    assert_status (r, 0);
  }
  g_assert_true (g_file_get_contents (out_path, &batch_out, NULL, NULL));
  lines = g_strsplit (batch_out, "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), >=, 4);
  g_strfreev (words);
  words = g_strsplit (lines[0], " ", -1);
  g_assert_cmpuint (g_strv_length (words), ==, 2);
  g_assert_cmpstr (lines[1], ==, "sandstep");
  g_assert_cmpstr (lines[2], ==, "kept");
  /* An operator in the batch script, with neither --handle nor --owner: the job's sandbox, as its owner. */
  g_assert_cmpstr (lines[3], ==, "kept");
  assert_job_sandbox_gone (words[0], words[1]);

  /* An allocation: its steps end before the job does, so the epilog sweeps
   * what the record (there while the step ran) names. */
  {
    g_autofree char *line = g_strdup_printf ("echo \"$SLURM_JOB_ID $SANDSTEP_HANDLE\"; ls %s/job-$SLURM_JOB_ID",
                                             node.rundir);
    g_autoptr(Run) r = run ("salloc", "--quiet", "--sandbox-provision", "srun", "--quiet", "--sandbox=none", "sh", "-c",
                            line);
    g_auto(GStrv) out_lines = NULL;

    assert_status (r, 0);
    out_lines = g_strsplit (r->out, "\n", -1);
    g_strfreev (words);
    words = g_strsplit (out_lines[0], " ", -1);
    g_assert_cmpuint (g_strv_length (words), ==, 2);
    g_assert_true (g_str_has_prefix (out_lines[1], "sandbox-"));
    assert_job_sandbox_gone (words[0], words[1]);
  }
}

/* ---- an image as the job's root ---- */

static void
test_image (void)
{
  g_autofree char *layout = g_build_filename (node.dir, "image", NULL);
  g_autofree char *image = g_strconcat (layout, ":t", NULL);
  g_autofree char *bundle = g_build_filename (node.dir, "image-bundle", NULL);
  g_autofree char *bin = g_build_filename (bundle, "rootfs", "bin", NULL);
  g_autofree char *sh = g_build_filename (bin, "sh", NULL);
  g_autofree char *marker = g_build_filename (bundle, "rootfs", "marker", NULL);
  g_autofree char *provision = g_strdup_printf ("--sandbox-provision=image=oci:%s", image);

  g_test_summary ("issue 27: srun --sandbox-provision=image=REF: the job's sandbox has the image as its root");
  {
    g_autoptr(Run) init = run ("umoci", "init", "--layout", layout);
    g_autoptr(Run) make = NULL, unpack = NULL, copy = NULL, repack = NULL, chmod_r = NULL;
    assert_status (init, 0);
    make = run ("umoci", "new", "--image", image);
    assert_status (make, 0);
    unpack = run ("umoci", "unpack", "--rootless", "--image", image, bundle);
    assert_status (unpack, 0);
    g_assert_cmpint (g_mkdir_with_parents (bin, 0755), ==, 0);
    copy = run ("cp", "/bin/busybox", bin);
    assert_status (copy, 0);
    g_assert_cmpint (symlink ("busybox", sh), ==, 0);
    g_assert_true (g_file_set_contents (marker, "from the image\n", -1, NULL));
    repack = run ("umoci", "repack", "--image", image, bundle);
    assert_status (repack, 0);
    /* The job's user pulls it. */
    chmod_r = run ("chmod", "-R", "a+rX", layout);
    assert_status (chmod_r, 0);
  }
  {
    g_autoptr(Run) r = run ("srun", "--quiet", provision, "--sandbox=job", "sh", "-c",
                            "cat /marker; [ -e /usr/bin/env ] || echo no-host-usr");
    assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "from the image\nno-host-usr\n");
  }
}

/* ---- a job of another user ---- */

static void
test_other_user (void)
{
  g_autofree char *reason = NULL;
  g_autoptr(SandstepTestUser) user = sandstep_test_user_new (&reason);
  g_autofree char *dir = NULL;
  g_autofree char *state = NULL;
  g_autofree char *out_path = NULL;
  g_autofree char *uid_arg = NULL;
  g_autofree char *gid_arg = NULL;
  g_autofree char *out_arg = NULL;
  g_autofree char *text = NULL;
  g_autofree char *uid_text = NULL;
  g_autofree char *uid_map = NULL;
  g_autofree char *records = NULL;
  g_auto(GStrv) lines = NULL;
  g_auto(GStrv) words = NULL;
  g_auto(GStrv) envp = NULL;
  struct stat st;

  if (user == NULL)
    g_error ("could not make a throwaway user: %s", reason);
  dir = g_build_filename (node.dir, user->name, NULL);
  state = g_build_filename (dir, "state", NULL);
  out_path = g_build_filename (dir, "out", NULL);
  g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
  g_assert_cmpint (chown (dir, user->uid, user->gid), ==, 0);
  uid_arg = g_strdup_printf ("--uid=%u", (unsigned) user->uid);
  gid_arg = g_strdup_printf ("--gid=%u", (unsigned) user->gid);
  out_arg = g_strconcat ("--output=", out_path, NULL);
  envp = env_with ("SANDSTEP_STATE_DIR", state, NULL);
  {
    g_autoptr(Run) r = run_in (dir, envp, (const char *const[]) {
        "sbatch", uid_arg, gid_arg, "--wait", "--quiet", "--sandbox-provision", out_arg, "--wrap",
        "id -u; echo \"$SLURM_JOB_ID $SANDSTEP_HANDLE\"; "
        "srun --quiet --sandbox=job sh -c 'id -u; cat /proc/self/uid_map'", NULL });
    assert_status (r, 0);
  }
  g_assert_true (g_file_get_contents (out_path, &text, NULL, NULL));
  lines = g_strsplit (text, "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), >=, 4);
  /* The batch script and the helper ran as the user: its state directory is
   * the user's; inside, uid 0 is the user's uid (never root's). */
  uid_text = g_strdup_printf ("%u", (unsigned) user->uid);
  g_assert_cmpstr (lines[0], ==, uid_text);
  words = g_strsplit (lines[1], " ", -1);
  g_assert_cmpuint (g_strv_length (words), ==, 2);
  g_assert_cmpstr (lines[2], ==, "0");
  {
    g_autoptr(GRegex) spaces = g_regex_new ("^ +| +$", 0, 0, NULL);
    g_autoptr(GRegex) inner = g_regex_new (" +", 0, 0, NULL);
    g_autofree char *trimmed = g_regex_replace_literal (spaces, lines[3], -1, 0, "", 0, NULL);
    g_autofree char *shown = g_regex_replace_literal (inner, trimmed, -1, 0, " ", 0, NULL);
    uid_map = g_strdup_printf ("0 %u 1", (unsigned) user->uid);
    g_assert_cmpstr (shown, ==, uid_map);
  }
  {
    g_autofree char *sandboxes = g_build_filename (state, "sandboxes", NULL);
    g_assert_cmpint (stat (sandboxes, &st), ==, 0);
    g_assert_cmpuint (st.st_uid, ==, user->uid);
  }
  /* Ended with the job, as the user; listed as the user, whose state directory root does not trust. */
  wait_job_gone (words[0]);
  {
    g_auto(GStrv) as_user = sandstep_test_user_wrap_argv (user, (const char *const[]) { node.helper, "list", "--json",
                                                                                        NULL });
    g_autoptr(Run) r = run_in (dir, envp, (const char *const *) as_user);
    assert_status (r, 0);
    g_assert_null (strstr (r->out, words[1]));
  }
  records = record_dir (words[0]);
  g_assert_false (g_file_test (records, G_FILE_TEST_EXISTS));
}

/* ---- scancel mid-step ---- */

static GPid
spawn_srun (char **envp, const char *const *argv)
{
  GPid pid;
  g_autoptr(GError) error = NULL;

  if (!g_spawn_async (node.dir, (char **) argv, envp, G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD |
                      G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &pid, &error))
    g_error ("could not start srun: %s", error->message);
  return pid;
}

static void
wait_pid (GPid pid)
{
  int status;

  for (int i = 0; i < slurm_polls (30); i++)
    {
      if (waitpid (pid, &status, WNOHANG) == pid)
        return;
      g_usleep (100 * 1000);
    }
  g_error ("srun %d still running %d polls 100 ms apart after scancel", pid, slurm_polls (30));
}

/* The one job in the queue that runs, once it runs. */
static char *
running_job (void)
{
  for (int i = 0; i < slurm_polls (30); i++)
    {
      g_autoptr(Run) r = run ("squeue", "-h", "-t", "R", "-o", "%i");
      if (g_strstrip (r->out)[0] != '\0')
        return g_strdup (r->out);
      g_usleep (100 * 1000);
    }
  g_error ("no job running after %d polls 100 ms apart", slurm_polls (30));
}

static char *
wait_held (const char *handle, const char *owner)
{
  for (int i = 0; i < slurm_polls (30); i++)
    {
      g_autofree char *held = describe (handle, owner, "held_by");
      if (held != NULL && strcmp (held, "null") != 0)
        return g_steal_pointer (&held);
      g_usleep (100 * 1000);
    }
  g_error ("sandbox %s not held %d polls 100 ms apart after the step started", handle, slurm_polls (30));
}

static void
test_scancel (void)
{
  g_auto(GStrv) envp = env_with ("SANDSTEP_RUN", "cancel-run", "SANDSTEP_DAG", "cancel-dag", NULL);
  g_autofree char *handle = NULL;
  g_autofree char *handle_arg = NULL;
  g_autofree char *sandbox_arg = NULL;
  g_autofree char *job_id = NULL;
  g_autofree char *held = NULL;
  g_autofree char *mounts = NULL;
  GPid srun;

  {
    g_autoptr(Run) r = run_env (envp, node.helper, "provision", "--owner=cancel-dag/cancel-run");
    assert_status (r, 0);
    handle = g_strdup (g_strstrip (r->out));
  }
  handle_arg = g_strconcat ("--handle=", handle, NULL);
  sandbox_arg = g_strconcat ("--sandbox=", handle, NULL);
  srun = spawn_srun (envp, (const char *const[]) { "srun", "--quiet", sandbox_arg, "sh", "-c",
                                                   "sleep 300.25 & sleep 300.25", NULL });
  job_id = running_job ();
  held = wait_held (handle, "cancel-dag/cancel-run");
  {
    g_autofree char *expected = g_strdup_printf ("cancel-dag/cancel-run/%s.0", job_id);
    g_assert_cmpstr (held, ==, expected);
  }
  g_assert_true (process_with ("sleep 300.25"));
  {
    g_autoptr(Run) r = run ("scancel", job_id);
    assert_status (r, 0);
  }
  wait_pid (srun);
  wait_job_gone (job_id);
  /* No process of the step, no claim (another holder gets in at once), no mount of it on the host. */
  g_assert_false (process_with ("sleep 300.25"));
  g_free (held);
  held = describe (handle, "cancel-dag/cancel-run", "held_by");
  g_assert_cmpstr (held, ==, "null");
  {
    g_autoptr(Run) r = run_env (envp, node.helper, "run", handle_arg, "--owner=cancel-dag/cancel-run", "--wait=0",
                                "--", "echo free");
    assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "free\n");
  }
  g_assert_true (g_file_get_contents ("/proc/self/mountinfo", &mounts, NULL, NULL));
  g_assert_null (strstr (mounts, handle));
  {
    g_autoptr(Run) r = run (node.helper, "destroy", handle_arg, "--owner=cancel-dag/cancel-run");
    assert_status (r, 0);
  }

  /* The job's own sandbox goes with a cancelled job too. */
  {
    g_auto(GStrv) envp2 = env_with ("SANDSTEP_RUN", "cancel-run-2", "SANDSTEP_DAG", "cancel-dag", NULL);
    g_autofree char *job2 = NULL;
    g_autofree char *handle2 = NULL;

    srun = spawn_srun (envp2, (const char *const[]) { "srun", "--quiet", "--sandbox-provision", "--sandbox=job",
                                                      "sleep", "300.5", NULL });
    job2 = running_job ();
    for (int i = 0; i < slurm_polls (30) && handle2 == NULL; i++)
      {
        g_autoptr(Run) r = run (node.helper, "list", "--owner=cancel-dag/cancel-run-2", "--json");
        g_autofree char *found = json_field (r->out, "handle");
        if (found != NULL && process_with ("sleep 300.5"))
          handle2 = g_steal_pointer (&found);
        else
          g_usleep (100 * 1000);
      }
    g_assert_nonnull (handle2);
    {
      g_autoptr(Run) r = run ("scancel", job2);
      assert_status (r, 0);
    }
    wait_pid (srun);
    assert_job_sandbox_gone (job2, handle2);
    g_assert_false (process_with ("sleep 300.5"));
  }
}

/* ---- a remote handle: the task runs through the sandbox's sandstepd ---- */

static void
test_remote (void)
{
  g_autofree char *dir = g_build_filename (node.dir, "sandstepd", NULL);
  g_autofree char *token_path = g_build_filename (dir, "token", NULL);
  g_autofree char *daemon_state = g_build_filename (dir, "state", NULL);
  g_autofree char *token_arg = g_strconcat ("--token-file=", token_path, NULL);
  g_autofree char *state_arg = g_strconcat ("--state-dir=", daemon_state, NULL);
  g_autofree char *token = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *handle_file = g_build_filename (node.dir, "remote.sbx", NULL);
  g_autofree char *sandbox_arg = g_strconcat ("--sandbox=@", handle_file, NULL);
  g_auto(GStrv) envp = NULL;
  g_auto(GStrv) words = NULL;
  g_autofree char *daemon_log = g_build_filename (dir, "sandstepd.log", NULL);
  const char *daemon_argv[] = { g_getenv ("SANDSTEPD"), "--listen=127.0.0.1:0", token_arg, state_arg, NULL };
  SandstepTestDaemon daemon = { 0 };
  const char *url;

  g_assert_nonnull (daemon_argv[0]);
  g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
  token = g_compute_checksum_for_string (G_CHECKSUM_SHA256, node.dir, -1);
  g_assert_true (g_file_set_contents_full (token_path, token, -1, G_FILE_SET_CONTENTS_NONE, 0600, NULL));
  sandstep_test_daemon_start (&daemon, daemon_argv, (const char *const *) node.envp, dir, daemon_log);
  url = daemon.url;
  envp = env_with ("SANDSTEP_BACKEND", url, "SANDSTEP_TOKEN_FILE", token_path, "SANDSTEP_ALLOW_HTTP", "1",
                   "SANDSTEP_RUN", "remote-run", "SANDSTEP_DAG", "remote-dag", NULL);

  {
    g_autoptr(Run) r = run_env (envp, node.helper, "provision", "--owner=remote-dag/remote-run");
    assert_status (r, 0);
    handle = g_strdup (g_strstrip (r->out));
    g_assert_true (g_str_has_prefix (handle, url));
    g_assert_true (g_file_set_contents (handle_file, handle, -1, NULL));
  }
  {
    g_autoptr(Run) r = run_env (envp, "srun", "--quiet", sandbox_arg, "sh", "-c",
                                "hostname; pwd; grep Seccomp: /proc/self/status; echo remote > r.txt");
    assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "sandstep\n/workspace\nSeccomp:\t2\n");
  }
  {
    g_autofree char *handle_arg = g_strconcat ("--handle=", handle, NULL);
    g_autoptr(Run) r = run_env (envp, node.helper, "get", handle_arg, "--owner=remote-dag/remote-run", "r.txt");
    assert_status (r, 0);
    g_assert_cmpstr (r->out, ==, "remote\n");
  }
  {
    g_autofree char *handle_arg = g_strconcat ("--handle=", handle, NULL);
    g_autoptr(Run) r = run_env (envp, node.helper, "destroy", handle_arg, "--owner=remote-dag/remote-run");
    assert_status (r, 0);
  }

  /* A job's own sandbox on the server ends with the job too. */
  words = host_task_identity (envp, "--sandbox-provision");
  g_assert_true (g_str_has_prefix (words[3], url));
  wait_job_gone (words[0]);
  {
    g_autoptr(Run) r = run_env (envp, node.helper, "list", "--json");
    assert_status (r, 0);
    g_assert_null (strstr (r->out, words[3]));
  }

  /* Every step of a batch job finds the same sandbox on the server. */
  {
    g_autofree char *out_path = g_build_filename (node.dir, "remote-batch.out", NULL);
    g_autofree char *out_arg = g_strconcat ("--output=", out_path, NULL);
    g_autofree char *text = NULL;
    g_auto(GStrv) lines = NULL;
    g_autoptr(Run) r = run_env (envp, "sbatch", "--wait", "--quiet", "--sandbox-provision", out_arg, "--wrap",
                                "echo \"$SLURM_JOB_ID $SANDSTEP_HANDLE\"; "
                                "srun --quiet --sandbox=none sh -c 'echo $SANDSTEP_HANDLE'");

    assert_status (r, 0);
    g_assert_true (g_file_get_contents (out_path, &text, NULL, NULL));
    lines = g_strsplit (text, "\n", -1);
    g_assert_cmpuint (g_strv_length (lines), >=, 2);
    g_strfreev (words);
    words = g_strsplit (lines[0], " ", -1);
    g_assert_cmpuint (g_strv_length (words), ==, 2);
    g_assert_true (g_str_has_prefix (words[1], url));
    g_assert_cmpstr (lines[1], ==, words[1]);
    wait_job_gone (words[0]);
    {
      g_autoptr(Run) listed = run_env (envp, node.helper, "list", "--json");
      assert_status (listed, 0);
      g_assert_null (strstr (listed->out, words[1]));
    }
  }

  sandstep_test_daemon_clear (&daemon);
}

/* ---- bad values ---- */

static char *
probe_job_id (void)
{
  g_autoptr(Run) r = run ("sbatch", "--parsable", "--output=/dev/null", "--wrap", "true");
  assert_status (r, 0);
  return g_strdup (g_strstrip (r->out));
}

typedef struct {
  const char *command;  /* srun, sbatch or salloc */
  const char *args[3];
  const char *env_name;
  const char *env_value;
  const char *starts;   /* what the one line starts with */
} BadValue;

static void
test_bad_values (void)
{
  g_autofree char *missing = g_build_filename (node.dir, "missing.sbx", NULL);
  g_autofree char *missing_arg = g_strconcat ("--sandbox=@", missing, NULL);
  const BadValue cases[] = {
    { "srun", { "--sandbox-provision", "--sandbox-keep=abc" }, NULL, NULL, "srun: error: sandstep: --sandbox-keep='abc': " },
    { "srun", { "--sandbox-provision=network=wide" }, NULL, NULL, "srun: error: sandstep: --sandbox-provision='network=wide': " },
    { "srun", { "--sandbox-provision=bogus=1" }, NULL, NULL, "srun: error: sandstep: --sandbox-provision='bogus=1': unknown option 'bogus'" },
    { "srun", { "--sandbox=nothere" }, NULL, NULL, "srun: error: sandstep: --sandbox='nothere': " },
    { "srun", { missing_arg }, NULL, NULL, "srun: error: sandstep: --sandbox='@" },
    { "srun", { "--sandbox=job" }, NULL, NULL, "srun: error: sandstep: --sandbox=job " },
    { "srun", { "--sandbox-keep=5m" }, NULL, NULL, "srun: error: sandstep: --sandbox-keep='5m' " },
    { "srun", { "--sandbox-provision" }, "SANDSTEP_SANDBOX_KEEP", "-1", "srun: error: sandstep: SANDSTEP_SANDBOX_KEEP='-1' (the default of --sandbox-keep): " },
    { "srun", { "--sandbox-provision" }, "SANDSTEP_RUN", "../x", "srun: error: sandstep: " },
    { "sbatch", { "--sandbox-provision=lifetime=0", "--wrap=true" }, NULL, NULL, "sbatch: error: sandstep: --sandbox-provision='lifetime=0': " },
    { "salloc", { "--sandbox-provision", "--sandbox-keep=never" }, NULL, NULL, "salloc: error: sandstep: --sandbox-keep='never': " },
  };
  g_autofree char *before = probe_job_id ();
  g_autofree char *after = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const BadValue *c = &cases[i];
      g_auto(GStrv) envp = env_with (c->env_name != NULL ? c->env_name : "SANDSTEP_UNUSED", c->env_value, NULL);
      g_autoptr(GPtrArray) argv = g_ptr_array_new ();
      g_autoptr(Run) r = NULL;

      g_ptr_array_add (argv, (gpointer) c->command);
      for (int a = 0; a < 3 && c->args[a] != NULL; a++)
        g_ptr_array_add (argv, (gpointer) c->args[a]);
      if (strcmp (c->command, "sbatch") != 0)
        g_ptr_array_add (argv, "true");
      g_ptr_array_add (argv, NULL);
      r = run_in (NULL, envp, (const char *const *) argv->pdata);
      g_assert_cmpint (r->status, ==, 255);
      if (!g_str_has_prefix (r->err, c->starts))
        g_error ("case %" G_GSIZE_FORMAT ": stderr '%s' does not start with '%s'", i, r->err, c->starts);
      /* One line, and it names no node. */
      g_assert_true (g_str_has_suffix (r->err, "\n"));
      g_assert_null (strchr (r->err, '\n') + 1 == r->err + strlen (r->err) ? NULL : "more than one line");
      g_assert_null (strstr (r->err, "node1"));
      g_assert_cmpstr (r->out, ==, "");
    }
  /* Nothing was queued in between: the next job id follows the probe's. */
  after = probe_job_id ();
  g_assert_cmpint (g_ascii_strtoll (after, NULL, 10), ==, g_ascii_strtoll (before, NULL, 10) + 1);
  wait_job_gone (after);
  {
    g_autofree char *state = wait_node_idle ();
    g_assert_cmpstr (state, ==, "idle");
  }

  /* A failure on the node (its state directory unusable) fails the step's
   * task with the helper's line, and leaves the node as it was. */
  {
    g_auto(GStrv) envp = env_with ("SANDSTEP_STATE_DIR", "/proc/sandstep-nowhere", NULL);
    g_autoptr(Run) r = run_env (envp, "srun", "--quiet", "--sandbox-provision", "true");
    g_autofree char *state = NULL;

    g_assert_cmpint (r->status, ==, 125);
    g_assert_nonnull (strstr (r->err, "sandstep: --sandbox-provision: 'sandstep provision' exited with status 125: "
                                      "sandstep provision: Could not create the state directory"));
    state = wait_node_idle ();
    g_assert_cmpstr (state, ==, "idle");
  }
}

/* ---- a broken install fails closed ---- */

static void
test_fail_closed (void)
{
  g_autofree char *conf = g_build_filename (node.node_dir, "etc", "plugstack.conf", NULL);
  g_autofree char *saved = NULL;
  g_autofree char *broken = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *sandbox_arg = NULL;
  g_auto(GStrv) envp = env_with ("SANDSTEP_RUN", "closed-run", "SANDSTEP_DAG", "closed-dag", NULL);

  {
    g_autoptr(Run) r = run_env (envp, node.helper, "provision", "--owner=closed-dag/closed-run");
    assert_status (r, 0);
    handle = g_strdup (g_strstrip (r->out));
  }
  sandbox_arg = g_strconcat ("--sandbox=", handle, NULL);
  /* slurmstepd reads plugstack.conf for every step: a helper that is not
   * there.  The task must fail, never run on the host without its sandbox. */
  g_assert_true (g_file_get_contents (conf, &saved, NULL, NULL));
  {
    g_autoptr(GRegex) helper = g_regex_new ("sandstep=[^ ]*", 0, 0, NULL);
    broken = g_regex_replace_literal (helper, saved, -1, 0, "sandstep=/nonexistent/sandstep", 0, NULL);
  }
  g_assert_true (g_file_set_contents (conf, broken, -1, NULL));
  {
    g_autoptr(Run) r = run_env (envp, "srun", "--quiet", sandbox_arg, "sh", "-c", "echo ran on the host");
    g_assert_true (g_file_set_contents (conf, saved, -1, NULL));
    g_assert_cmpint (r->status, ==, 125);
    g_assert_cmpstr (r->out, ==, "");
    g_assert_nonnull (strstr (r->err, "sandstep: could not run the helper '/nonexistent/sandstep': No such file or "
                                      "directory; check sandstep= in plugstack.conf"));
  }
  {
    g_autofree char *destroy_handle = g_strconcat ("--handle=", handle, NULL);
    g_autoptr(Run) r = run (node.helper, "destroy", destroy_handle, "--owner=closed-dag/closed-run");
    assert_status (r, 0);
  }
}

static const struct {
  const char *path;
  GTestFunc func;
} cases[] = {
  { "/slurm/example", test_example },
  { "/slurm/identity", test_identity },
  { "/slurm/provision-inside", test_provision_inside },
  { "/slurm/provision-cleanup", test_provision_cleanup },
  { "/slurm/image", test_image },
  { "/slurm/other-user", test_other_user },
  { "/slurm/scancel", test_scancel },
  { "/slurm/remote", test_remote },
  { "/slurm/bad-values", test_bad_values },
  { "/slurm/fail-closed", test_fail_closed },
};

int
main (int argc, char **argv)
{
  g_autofree char *reason = NULL;
  int status;

  g_test_init (&argc, &argv, NULL);
  node.helper = g_strdup (g_getenv ("SANDSTEP"));
  node.spank = g_strdup (g_getenv ("SANDSTEP_SPANK_PLUGIN"));
  node.make_plugin = g_strdup (g_getenv ("SANDSTEP_PLUGIN"));
  node.node_script = g_test_build_filename (G_TEST_DIST, "slurm-node.sh", NULL);
  g_assert_nonnull (node.helper);

  if (geteuid () != 0)
    {
      /* Not a missing package but what this user cannot have, with or without Slurm installed: every case
       * is counted as skipped. */
      for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
        g_test_add_data_func (cases[i].path, "a Slurm node needs root (slurmd starts jobs as their users, and "
                              "munged and slurmctld run as root); run this suite as root", skip_with_reason);
      return g_test_run ();
    }
  reason = missing_prerequisite ();
  if (reason == NULL)
    {
      node.dir = g_dir_make_tmp ("sandstep-slurm-XXXXXX", NULL);
      g_assert_nonnull (node.dir);
      g_chmod (node.dir, 0755);
      /* Jobs of other users run the helper the plugin names: where they cannot reach the build tree (a
       * checkout under /root, 0700 on Debian), the node runs copies of its programs. */
      if (!sandstep_test_path_reachable_by_all (node.helper))
        {
          g_autofree char *bin = g_build_filename (node.dir, "bin", NULL);

          g_test_message ("other users cannot reach '%s'; the node runs copies in '%s'", node.helper, bin);
          g_free (node.helper);
          node.helper = sandstep_test_copy_programs (g_getenv ("SANDSTEP"), bin, 0, 0);
        }
      /* srun loads the SPANK plugin as the job's user too. */
      if (node.spank != NULL && node.spank[0] != '\0' && !sandstep_test_path_reachable_by_all (node.spank))
        {
          g_autofree char *copy = g_build_filename (node.dir, "sandstep-spank.so", NULL);
          g_autofree char *contents = NULL;
          gsize len = 0;
          g_autoptr(GError) error = NULL;

          g_file_get_contents (node.spank, &contents, &len, &error);
          g_assert_no_error (error);
          g_file_set_contents_full (copy, contents, len, G_FILE_SET_CONTENTS_NONE, 0755, &error);
          g_assert_no_error (error);
          g_test_message ("other users cannot reach '%s'; the node loads a copy, '%s'", node.spank, copy);
          g_free (node.spank);
          node.spank = g_steal_pointer (&copy);
        }
      node.node_dir = g_build_filename (node.dir, "node", NULL);
      node.state_dir = g_build_filename (node.dir, "state", NULL);
      node.rundir = g_build_filename (node.node_dir, "spank", NULL);
      node.envp = g_get_environ ();
      for (const char *const *v = (const char *const[]) { "SANDSTEP_RUN", "SANDSTEP_DAG", "SANDSTEP_TOP",
             "SANDSTEP_OWNER", "SANDSTEP_HOLDER", "SANDSTEP_HANDLE", "SANDSTEP_SANDBOX", "SANDSTEP_SANDBOX_PROVISION",
             "SANDSTEP_SANDBOX_KEEP", "SANDSTEP_BACKEND", "SLURM_JOB_ID", "SLURM_JOBID", "MAKEFLAGS", "MFLAGS",
             "MAKELEVEL", NULL }; *v != NULL; v++)
        node.envp = g_environ_unsetenv (node.envp, *v);
      node.envp = g_environ_setenv (node.envp, "SANDSTEP_STATE_DIR", node.state_dir, TRUE);
      if (!start_node (&reason))
        stop_node ();
    }
  if (reason != NULL)
    {
      g_test_add_data_func ("/slurm/node", reason, fail_with_reason);
      return g_test_run ();
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
