/* sandstep-test-utils.h: driving the real `sandstep` helper from GTest suites.
 *
 * A SandstepTestFixture gives each test case its own state directory (its own
 * sandboxes), a scratch directory for host files, a unique owner and holder,
 * and the environment every helper run gets.  Helper runs are either
 * synchronous (sandstep_test_helper*: exit status, stdout and stderr, under a
 * timeout) or asynchronous (sandstep_test_spawn*: read lines as they come,
 * signal, then wait).  Teardown kills whatever a case left running, destroys
 * its sandboxes, fails the case if anything of them is left (a process, a
 * cgroup, a mount, a half-made sandbox, a holder entry, trash), and removes
 * its directories.
 *
 * With a SandstepTestUser the helper runs as a throwaway unprivileged user
 * (created with useradd when the tests run as root), through setpriv.
 *
 * Every function asserts on setup failures (g_assert_*): a broken harness is a
 * failed test, never a silent pass.  Helper runs of one fixture may be
 * spawned and waited for from several threads at once.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <sys/types.h>

G_BEGIN_DECLS

/* How long one helper run may take before the harness kills it and fails. */
#define SANDSTEP_TEST_DEFAULT_TIMEOUT_S 30.0

/* ---- unprivileged users ---- */

typedef struct {
  char *name;
  uid_t uid;
  gid_t gid;
  gboolean created;  /* made by useradd here: userdel on free */
} SandstepTestUser;

/* A throwaway user "sandstep-test-<pid>" when running as root (useradd, after
 * removing such users left by test processes that no longer exist).  Returns
 * NULL with @out_reason set when that is impossible (not root, no useradd);
 * callers g_test_skip() with the reason. */
SandstepTestUser *sandstep_test_user_new (char **out_reason);
/* Deletes the user if it was created here. */
void sandstep_test_user_free (SandstepTestUser *user);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepTestUser, sandstep_test_user_free)

/* TRUE if `unshare -U true` works as @user; else FALSE with @out_reason set. */
gboolean sandstep_test_user_can_unshare (SandstepTestUser *user, char **out_reason);

/* A new argv that runs @argv as @user (setpriv --reuid --regid --clear-groups). */
char **sandstep_test_user_wrap_argv (SandstepTestUser *user, const char *const *argv);

/* ---- the fixture ---- */

typedef struct {
  char *base_dir;    /* mkdtemp'd; removed at teardown */
  char *state_dir;   /* SANDSTEP_STATE_DIR of every helper run */
  char *host_dir;    /* scratch for host files (puts, exports, handle files) */
  char *helper;      /* the helper binary: $SANDSTEP (or a copy @user can execute) */
  char *run;         /* unique run id */
  char *dag;         /* "sandstep-test" */
  char *owner;       /* "<dag>/<run>": SANDSTEP_OWNER of every helper run */
  char *holder;      /* "<owner>/main": SANDSTEP_HOLDER of every helper run */
  char **envp;       /* the environment of every helper run; edit with sandstep_test_fixture_setenv */
  SandstepTestUser *user; /* NULL: the helper runs as this process's user */
  GPtrArray *procs;  /* helpers still running, killed at teardown */
  GPtrArray *handles;/* every handle a `provision` printed, checked for leftovers at teardown */
} SandstepTestFixture;

/* g_test_add() setup and teardown.  @data is ignored. */
void sandstep_test_setup (SandstepTestFixture *f, gconstpointer data);
void sandstep_test_teardown (SandstepTestFixture *f, gconstpointer data);

/* Makes every later helper run of @f run as @user (state directories are
 * handed to it).  Takes ownership of @user. */
void sandstep_test_fixture_set_user (SandstepTestFixture *f, SandstepTestUser *user);
/* A new argv that runs @argv as @f's helper runs run: as its user where it has one, else as it is. */
char **sandstep_test_fixture_argv (SandstepTestFixture *f, const char *const *argv);
/* Copies @helper and every program beside it, and the build's remote backend module
 * (hooks/remote/sandstep-remote.so), into @dest_dir, made 0755 and owned by @uid:@gid with all it
 * holds; returns the copy of @helper.  For users who cannot reach the build tree. */
char *sandstep_test_copy_programs (const char *helper, const char *dest_dir, uid_t uid, gid_t gid);
/* TRUE when every user may search each directory down to @path and execute it (o+x all the way). */
gboolean sandstep_test_path_reachable_by_all (const char *path);

/* Sets (@value non-NULL) or unsets a variable of the helper's environment. */
void sandstep_test_fixture_setenv (SandstepTestFixture *f, const char *name, const char *value);

/* Hands @path (recursively) to the fixture's user, so the helper owns the host
 * files a case made for it; nothing without a user. */
void sandstep_test_fixture_chown (SandstepTestFixture *f, const char *path);

/* A path under host_dir (not created). */
char *sandstep_test_host_path (SandstepTestFixture *f, const char *name);

/* ---- results ---- */

typedef struct {
  int status;        /* exit status; 128+N when signal N ended it; -1 when timed out */
  gboolean timed_out;/* the harness killed it after its timeout */
  char *out;         /* stdout, NUL-terminated (out_len is exact: binary output survives) */
  gsize out_len;
  char *err;         /* stderr, NUL-terminated */
  double elapsed_s;
  char *command;     /* for messages: the argv, joined */
} SandstepTestResult;

void sandstep_test_result_free (SandstepTestResult *result);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepTestResult, sandstep_test_result_free)

/* Asserts the exit status, printing the command and both streams when it differs. */
#define sandstep_test_assert_status(result, expected) \
  sandstep_test_assert_status_impl (__FILE__, __LINE__, G_STRFUNC, (result), (expected))
void sandstep_test_assert_status_impl (const char *file, int line, const char *func,
                                       const SandstepTestResult *result, int expected);

/* Asserts that @haystack contains @needle, printing both when not. */
#define sandstep_test_assert_contains(haystack, needle) \
  sandstep_test_assert_contains_impl (__FILE__, __LINE__, G_STRFUNC, (haystack), (needle), TRUE)
#define sandstep_test_assert_not_contains(haystack, needle) \
  sandstep_test_assert_contains_impl (__FILE__, __LINE__, G_STRFUNC, (haystack), (needle), FALSE)
/* g_test_message ("LABEL: TEXT") of a program's output, its carriage returns as newlines (TAP lines stay short). */
void sandstep_test_message_output (const char *label, const char *text);

void sandstep_test_assert_contains_impl (const char *file, int line, const char *func, const char *haystack,
                                         const char *needle, gboolean expected);

/* ---- synchronous helper runs ---- */

/* `sandstep ARGS...` (NULL-terminated), under SANDSTEP_TEST_DEFAULT_TIMEOUT_S. */
SandstepTestResult *sandstep_test_helper (SandstepTestFixture *f, const char *first_arg, ...) G_GNUC_NULL_TERMINATED;
/* `sandstep ARGS...` under @timeout_s. */
SandstepTestResult *sandstep_test_helper_argv (SandstepTestFixture *f, const char *const *args, double timeout_s);

/* `sandstep provision ARGS...`, asserting exit 0 and one line of output; returns the handle. */
char *sandstep_test_provision (SandstepTestFixture *f, ...) G_GNUC_NULL_TERMINATED;

/* `sandstep run --handle=HANDLE -- COMMAND`, asserting exit 0; returns stdout. */
char *sandstep_test_run_ok (SandstepTestFixture *f, const char *handle, const char *command);

/* Sends @sig to the sandbox's supervisor (its pid is in STATE/sandboxes/HANDLE/supervisor) and waits until it is
 * gone: SIGTERM ends it as an idle one ends, SIGKILL as a crash does. */
void sandstep_test_end_supervisor (SandstepTestFixture *f, const char *handle, int sig);

/* @text as JSON, asserting that it is; the test's log shows the text otherwise. */
JsonNode *sandstep_test_parse_json (const char *text);

/* Call @i of the report tests/mcp's clients print, asserting its tool is @name. */
JsonObject *sandstep_test_mcp_call (JsonObject *report, guint i, const char *name);

/* `sandstep describe --handle=HANDLE` as parsed JSON, asserting exit 0. */
JsonObject *sandstep_test_describe (SandstepTestFixture *f, const char *handle);

/* Polls describe until the sandbox's lifetime is over (remaining_seconds 0); fails after @timeout_s. */
void sandstep_test_wait_until_expired (SandstepTestFixture *f, const char *handle, double timeout_s);

/* Every path under /workspace and /tmp of the sandbox with its type, mode,
 * size and (for files) checksum, sorted: equal snapshots mean unchanged files. */
char *sandstep_test_snapshot (SandstepTestFixture *f, const char *handle);

/* ---- asynchronous helper runs ---- */

typedef struct _SandstepTestProc SandstepTestProc;

/* Starts `sandstep ARGS...` (its stdin is /dev/null).  @source_fds[i] of
 * this process becomes @target_fds[i] in the helper (n_fds may be 0). */
SandstepTestProc *sandstep_test_spawn_full (SandstepTestFixture *f, const char *const *args, const int *source_fds,
                                            const int *target_fds, gsize n_fds);
SandstepTestProc *sandstep_test_spawn (SandstepTestFixture *f, const char *first_arg, ...) G_GNUC_NULL_TERMINATED;
/* Starts any other program: @argv (its first word looked up in PATH) with @envp (NULL: this process's) in @cwd
 * (NULL: this process's), stdin /dev/null, killed when this process dies.  Waited for like a helper run. */
SandstepTestProc *sandstep_test_proc_start (const char *const *argv, const char *const *envp, const char *cwd);

/* The helper's pid (setpriv execs it, so also under a user). */
GPid sandstep_test_proc_pid (SandstepTestProc *proc);
/* TRUE while the helper has not exited. */
gboolean sandstep_test_proc_running (SandstepTestProc *proc);
/* The next line of stdout (without its newline), or NULL at end of file or
 * after @timeout_s.  What is read stays part of the final result's out. */
char *sandstep_test_proc_read_line (SandstepTestProc *proc, double timeout_s);
/* The same for stderr. */
char *sandstep_test_proc_read_err_line (SandstepTestProc *proc, double timeout_s);
/* Takes what output has come within @timeout_s (0: only what is there); FALSE once the program has exited and
 * both its streams are at their end. */
gboolean sandstep_test_proc_pump (SandstepTestProc *proc, double timeout_s);
/* Everything it has written to stdout (stderr) so far. */
const char *sandstep_test_proc_out (SandstepTestProc *proc);
const char *sandstep_test_proc_err (SandstepTestProc *proc);
void sandstep_test_proc_kill (SandstepTestProc *proc, int sig);
/* Collects the rest of the output and the exit status, killing the helper
 * (SIGKILL) if it has not ended within @timeout_s; frees @proc. */
SandstepTestResult *sandstep_test_proc_wait (SandstepTestProc *proc, double timeout_s);

/* ---- a sandstepd of the test's own ---- */

typedef struct {
  GPid pid;          /* 0 when not running */
  int out_fd;        /* its stdout, open until it is stopped: it never writes into a closed pipe */
  char *url;         /* from its first line, "sandstepd: listening on URL" */
} SandstepTestDaemon;

/* Starts @argv, a sandstepd command line (behind a prefix such as `ip netns exec NS` where it has one), with @envp
 * (NULL: this process's) in @cwd, its stderr appended to @log; it ends (SIGTERM) when this process does.  Returns
 * once it has named its URL; fails the test with @log when it has not within 15 s (stretched by the time scale). */
void sandstep_test_daemon_start (SandstepTestDaemon *d, const char *const *argv, const char *const *envp,
                                 const char *cwd, const char *log);
/* Sends @sig, waits up to 5 s for the end, then SIGKILL, and reaps it; nothing when it is not running.  url stays,
 * for a restart on the same port. */
void sandstep_test_daemon_stop (SandstepTestDaemon *d, int sig);
/* Stops it (SIGTERM) and frees url. */
void sandstep_test_daemon_clear (SandstepTestDaemon *d);

/* ---- host files ---- */

/* The contents of @path, asserting that it reads. */
char *sandstep_test_read_file (const char *path);
/* Replaces @path with @len bytes of @data (-1: a string), asserting that it writes. */
void sandstep_test_write_file (const char *path, const char *data, gssize len);

/* ---- host processes ---- */

/* $SANDSTEP_TEST_TIME_SCALE (1 to 100; else 1): how much slower than a plain host's this one runs (an emulated
 * CPU), by which every guard of the harness against a hung helper is stretched.  scripts/test stretches meson's
 * own limits by it too.  No guard measures speed: a test never passes or fails by how fast a step went. */
double sandstep_test_time_scale (void);

/* The CPU time process @pid has used so far (user and system), in seconds, from /proc/PID/stat. */
double sandstep_test_cpu_seconds (GPid pid);

/* A fresh decimal number of seconds (e.g. "1000.482913"), for a command like
 * `sleep SECONDS` whose argv no other process on the host shares. */
char *sandstep_test_unique_seconds (guint whole_seconds);

/* Host pids (other than this process) whose command line, its words joined by spaces, contains @text. */
GArray *sandstep_test_processes_naming (const char *text);

/* The names in @dir, sorted and joined by spaces ("" when none, or no such directory). */
char *sandstep_test_dir_names (const char *dir);

/* Host pids (as seen from this process) whose argv begins with @argv, each argument whole (a supervisor's
 * --cpus= follows its handle). */
GArray *sandstep_test_find_processes (const char *const *argv);
/* Waits up to @timeout_s until some (@present) / no (!@present) host process
 * has argv @argv; returns whether that happened. */
gboolean sandstep_test_wait_for_process (const char *const *argv, gboolean present, double timeout_s);

/* Skips the case (returning TRUE) where this user's sandboxes get no cgroup here, saying why
 * (sandstep_cgroup_unavailable(): not root and no cgroup v2 subtree delegated, or no memory and pids controllers):
 * @what ("the memory limit") needs one; without it a limit is an rlimit, or nothing.  Where a cgroup holds them
 * (root, or a user in the subtree systemd delegates), the case runs. */
gboolean sandstep_test_skip_without_cgroup (const char *what);

/* A case that needs node or an npm package which is not here (@reason says which): skipped, or failed where
 * scripts/test asks for them (SANDSTEP_TESTS_REQUIRE_NODE=1).  Returns FALSE, for `return sandstep_test_...`. */
gboolean sandstep_test_node_missing (const char *reason);

/* ---- images ---- */

/* A busybox image built with umoci in the OCI layout @dir/image (tag t): busybox-static as /bin/busybox and
 * /bin/sh, /marker ("from the image\n"), and with @bash a /bin/bash script that hands its arguments to sh (E2B's
 * SDK runs commands with bash -l -c); pushed with skopeo as @repo_tag to a docker-registry started here on a free
 * loopback port, its storage under @dir.  Returns the registry's pid (the test kills it; it dies with the test)
 * and *@out_ref, the image's docker:// reference.  A missing tool ends the test naming its package. */
GPid sandstep_test_busybox_in_registry (const char *dir, const char *repo_tag, gboolean bash, char **out_ref);

G_END_DECLS
