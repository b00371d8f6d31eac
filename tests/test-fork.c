/* test-fork.c: forks and checkpoints (hooks/local/sandstep-layers.h), through the helper as a user runs them,
 * as the caller and as an unprivileged user. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-backend.h"
#include "sandstep-test-utils.h"

typedef struct {
  SandstepTestFixture base;  /* first: the shared teardown takes it */
  char *skip_reason;
} ForkFixture;

typedef enum {
  AS_CALLER,
  AS_USER,
} RunAs;

static void
fork_setup (ForkFixture *ff, gconstpointer data)
{
  char *reason = NULL;
  SandstepTestUser *user;

  sandstep_test_setup (&ff->base, NULL);
  ff->skip_reason = NULL;
  if (GPOINTER_TO_INT (data) != AS_USER)
    return;
  user = sandstep_test_user_new (&reason);
  if (user == NULL || !sandstep_test_user_can_unshare (user, &reason))
    {
      sandstep_test_user_free (user);
      ff->skip_reason = reason;
      return;
    }
  sandstep_test_fixture_set_user (&ff->base, user);
}

static void
fork_teardown (ForkFixture *ff, gconstpointer data)
{
  g_free (ff->skip_reason);
  sandstep_test_teardown (&ff->base, NULL);
}

static SandstepTestFixture *
fork_begin (ForkFixture *ff)
{
  if (ff->skip_reason != NULL)
    {
      g_test_skip (ff->skip_reason);
      return NULL;
    }
  return &ff->base;
}

static char *
handle_arg (const char *handle)
{
  return g_strconcat ("--handle=", handle, NULL);
}

/* `sandstep fork --handle=H ARGS...`: the handles it printed, asserting exit 0. */
static char **
fork_ok (SandstepTestFixture *f, const char *handle, const char *first_arg, ...)
{
  g_autofree char *h = handle_arg (handle);
  g_autoptr(GPtrArray) args = g_ptr_array_new ();
  g_autoptr(SandstepTestResult) r = NULL;
  char **handles;
  va_list ap;

  g_ptr_array_add (args, (gpointer) "fork");
  g_ptr_array_add (args, h);
  va_start (ap, first_arg);
  for (const char *arg = first_arg; arg != NULL; arg = va_arg (ap, const char *))
    g_ptr_array_add (args, (gpointer) arg);
  va_end (ap);
  g_ptr_array_add (args, NULL);
  r = sandstep_test_helper_argv (f, (const char *const *) args->pdata, 60);
  sandstep_test_assert_status (r, 0);
  handles = g_strsplit (g_strchomp (r->out), "\n", -1);
  for (gsize i = 0; handles[i] != NULL; i++)
    {
      g_assert_true (g_str_has_prefix (handles[i], "sandstep-"));
      g_ptr_array_add (f->handles, g_strdup (handles[i]));
    }
  return handles;
}

static void
assert_output (SandstepTestFixture *f, const char *handle, const char *command, const char *expected)
{
  g_autofree char *out = sandstep_test_run_ok (f, handle, command);

  g_assert_cmpstr (out, ==, expected);
}

/* ---- the cases ---- */

/* A fork starts with the parent's files, /workspace and /tmp, and afterwards each side changes alone: writes,
 * removals and new files on one never show on the other, both ways. */
static void
test_independent (ForkFixture *ff, gconstpointer data)
{
  SandstepTestFixture *f = fork_begin (ff);
  g_autofree char *parent = NULL;
  g_auto(GStrv) forks = NULL;

  if (f == NULL)
    return;
  parent = sandstep_test_provision (f, NULL);
  g_free (sandstep_test_run_ok (f, parent, "echo base > a && mkdir -p d/e && echo deep > d/e/f && "
                                          "echo t > /tmp/t && ln -s a link"));
  forks = fork_ok (f, parent, NULL);
  g_assert_cmpuint (g_strv_length (forks), ==, 1);
  assert_output (f, forks[0], "cat a d/e/f /tmp/t link; pwd", "base\ndeep\nt\nbase\n/workspace\n");
  g_free (sandstep_test_run_ok (f, forks[0], "echo fork > a && rm -r d && echo new > n && rm /tmp/t"));
  g_free (sandstep_test_run_ok (f, parent, "echo parent > a && echo p > d/e/g && rm link"));
  assert_output (f, parent, "cat a d/e/f d/e/g /tmp/t; ls", "parent\ndeep\np\nt\na\nd\n");
  assert_output (f, forks[0], "cat a n; ls; ls /tmp", "fork\nnew\na\nlink\nn\n");
}

/* A fork is a sandbox of the parent's owner and spec, with the lifetime the parent has left, and says whose
 * fork it is. */
static void
test_spec_kept (ForkFixture *ff, gconstpointer data)
{
  SandstepTestFixture *f = fork_begin (ff);
  g_autofree char *parent = NULL;
  g_auto(GStrv) forks = NULL;
  g_autoptr(JsonObject) p = NULL, c = NULL;
  g_autoptr(JsonNode) p_spec = NULL, c_spec = NULL;

  if (f == NULL)
    return;
  parent = sandstep_test_provision (f, "--env=COLOR=blue", "--memory=256M", "--pids=64", "--lifetime=20m", NULL);
  forks = fork_ok (f, parent, NULL);
  p = sandstep_test_describe (f, parent);
  c = sandstep_test_describe (f, forks[0]);
  p_spec = json_node_copy (json_object_get_member (p, "spec"));
  c_spec = json_node_copy (json_object_get_member (c, "spec"));
  g_assert_true (json_node_equal (p_spec, c_spec));
  g_assert_cmpstr (json_object_get_string_member (c, "owner"), ==, json_object_get_string_member (p, "owner"));
  g_assert_cmpstr (json_object_get_string_member (c, "parent"), ==, parent);
  g_assert_true (json_object_get_null_member (p, "parent"));
  g_assert_cmpstr (json_object_get_string_member (c, "expires"), ==, json_object_get_string_member (p, "expires"));
  assert_output (f, forks[0], "echo $COLOR", "blue\n");
}

/* A fork outlives its parent; the layers they shared go with the last of them. */
static void
test_outlives_parent (ForkFixture *ff, gconstpointer data)
{
  SandstepTestFixture *f = fork_begin (ff);
  g_autofree char *parent = NULL, *h = NULL, *layers = NULL;
  g_auto(GStrv) forks = NULL;
  g_autoptr(SandstepTestResult) destroy = NULL, destroy_fork = NULL;

  if (f == NULL)
    return;
  parent = sandstep_test_provision (f, NULL);
  g_free (sandstep_test_run_ok (f, parent, "echo kept > a"));
  forks = fork_ok (f, parent, NULL);
  h = handle_arg (parent);
  destroy = sandstep_test_helper (f, "destroy", h, NULL);
  sandstep_test_assert_status (destroy, 0);
  assert_output (f, forks[0], "cat a; echo more >> a; cat a", "kept\nkept\nmore\n");
  layers = g_build_filename (f->state_dir, "layers", NULL);
  g_assert_cmpstr (sandstep_test_dir_names (layers), !=, "");
  g_clear_pointer (&h, g_free);
  h = handle_arg (forks[0]);
  destroy_fork = sandstep_test_helper (f, "destroy", h, NULL);
  sandstep_test_assert_status (destroy_fork, 0);
  g_assert_cmpstr (sandstep_test_dir_names (layers), ==, "");
}

/* Get-or-create by holder: a retried fork target finds the fork it made, and several are found again too. */
static void
test_get_or_create (ForkFixture *ff, gconstpointer data)
{
  SandstepTestFixture *f = fork_begin (ff);
  g_autofree char *parent = NULL, *holder = NULL, *holder_many = NULL;
  g_auto(GStrv) first = NULL, again = NULL, many = NULL, many_again = NULL;

  if (f == NULL)
    return;
  parent = sandstep_test_provision (f, NULL);
  holder = g_strdup_printf ("--holder=%s/variant", f->owner);
  holder_many = g_strdup_printf ("--holder=%s/variants", f->owner);
  first = fork_ok (f, parent, holder, NULL);
  g_free (sandstep_test_run_ok (f, first[0], "echo mine > v"));
  again = fork_ok (f, parent, holder, NULL);
  g_assert_cmpstrv (again, first);
  assert_output (f, again[0], "cat v", "mine\n");
  many = fork_ok (f, parent, holder_many, "--count=3", NULL);
  g_assert_cmpuint (g_strv_length (many), ==, 3);
  g_assert_cmpstr (many[0], !=, many[1]);
  g_assert_cmpstr (many[1], !=, many[2]);
  many_again = fork_ok (f, parent, holder_many, "--count=3", NULL);
  g_assert_cmpstrv (many_again, many);
}

/* A rollback brings back what was removed and removes what was added since the checkpoint, in /workspace and
 * /tmp; an unknown name is refused, naming it. */
static void
test_checkpoint_rollback (ForkFixture *ff, gconstpointer data)
{
  SandstepTestFixture *f = fork_begin (ff);
  g_autofree char *handle = NULL, *h = NULL, *before = NULL, *after = NULL;
  g_autoptr(SandstepTestResult) cp = NULL, rb = NULL, list = NULL, unknown = NULL, bad = NULL;

  if (f == NULL)
    return;
  handle = sandstep_test_provision (f, NULL);
  h = handle_arg (handle);
  g_free (sandstep_test_run_ok (f, handle, "echo one > a && mkdir d && echo two > d/b && echo t > /tmp/t"));
  before = sandstep_test_snapshot (f, handle);
  cp = sandstep_test_helper (f, "checkpoint", h, "ready", NULL);
  sandstep_test_assert_status (cp, 0);
  g_free (sandstep_test_run_ok (f, handle, "rm -r d /tmp/t && echo changed > a && echo added > c"));
  after = sandstep_test_snapshot (f, handle);
  g_assert_cmpstr (after, !=, before);
  rb = sandstep_test_helper (f, "rollback", h, "ready", NULL);
  sandstep_test_assert_status (rb, 0);
  g_free (after);
  after = sandstep_test_snapshot (f, handle);
  g_assert_cmpstr (after, ==, before);
  list = sandstep_test_helper (f, "checkpoint", h, "--list", NULL);
  sandstep_test_assert_status (list, 0);
  g_assert_cmpstr (list->out, ==, "ready\n");
  unknown = sandstep_test_helper (f, "rollback", h, "nosuch", NULL);
  g_assert_cmpint (unknown->status, !=, 0);
  sandstep_test_assert_contains (unknown->err, "no checkpoint 'nosuch'");
  bad = sandstep_test_helper (f, "checkpoint", h, "../x", NULL);
  g_assert_cmpint (bad->status, !=, 0);
  sandstep_test_assert_contains (bad->err, "'../x'");
}

/* The host-side tools of a layered sandbox and its commands see one set of files: a put shows in the next
 * command, a command's write in the next get, a list and an export see the merged layers. */
static void
test_host_tools (ForkFixture *ff, gconstpointer data)
{
  SandstepTestFixture *f = fork_begin (ff);
  g_autofree char *parent = NULL, *h = NULL, *src = NULL, *dest = NULL, *dest_url = NULL, *exported = NULL;
  g_auto(GStrv) forks = NULL;
  g_autoptr(SandstepTestResult) put = NULL, get = NULL, ls = NULL, export = NULL;

  if (f == NULL)
    return;
  parent = sandstep_test_provision (f, NULL);
  g_free (sandstep_test_run_ok (f, parent, "echo lower > low && mkdir dir && echo x > dir/x"));
  forks = fork_ok (f, parent, NULL);
  h = handle_arg (forks[0]);
  /* A command first: its jail is live (and has looked the name up) when the put comes. */
  assert_output (f, forks[0], "cat put 2>/dev/null || echo none", "none\n");
  src = sandstep_test_host_path (f, "put-me");
  g_assert_true (g_file_set_contents (src, "from the host\n", -1, NULL));
  sandstep_test_fixture_chown (f, src);
  put = sandstep_test_helper (f, "put", h, src, "/workspace/put", NULL);
  sandstep_test_assert_status (put, 0);
  assert_output (f, forks[0], "cat put; echo upper > up; rm dir/x", "from the host\n");
  get = sandstep_test_helper (f, "get", h, "/workspace/up", NULL);
  sandstep_test_assert_status (get, 0);
  g_assert_cmpstr (get->out, ==, "upper\n");
  ls = sandstep_test_helper (f, "ls", h, "/workspace", NULL);
  sandstep_test_assert_status (ls, 0);
  g_assert_cmpstr (ls->out, ==, "dir/\nlow\nput\nup\n");
  dest = sandstep_test_host_path (f, "low.out");
  dest_url = g_strdup_printf ("/workspace/low=file://%s", dest);
  export = sandstep_test_helper (f, "export", h, dest_url, NULL);
  sandstep_test_assert_status (export, 0);
  g_assert_true (g_file_get_contents (dest, &exported, NULL, NULL));
  g_assert_cmpstr (exported, ==, "lower\n");
}

/* A fork copies nothing: what the parent holds is on disk once, in the layer both read, and each side's own
 * directory holds only what it changed after. */
static void
test_no_copy (ForkFixture *ff, gconstpointer data)
{
  SandstepTestFixture *f = fork_begin (ff);
  g_autofree char *parent = NULL, *layers = NULL, *rw = NULL, *du = NULL;
  g_auto(GStrv) forks = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  guint64 layers_kib, rw_kib;

  if (f == NULL)
    return;
  parent = sandstep_test_provision (f, NULL);
  g_free (sandstep_test_run_ok (f, parent, "head -c 8388608 /dev/urandom > big"));
  forks = fork_ok (f, parent, NULL);
  g_free (sandstep_test_run_ok (f, forks[0], "echo small > small"));
  layers = g_build_filename (f->state_dir, "layers", NULL);
  rw = g_build_filename (f->state_dir, "sandboxes", forks[0], "rw", NULL);
  {
    const char *argv[] = { "du", "-sk", layers, rw, NULL };
    g_autoptr(GError) error = NULL;
    g_auto(GStrv) lines = NULL;

    g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &du, NULL, NULL,
                                 &error));
    g_assert_no_error (error);
    lines = g_strsplit (du, "\n", -1);
    layers_kib = g_ascii_strtoull (lines[0], NULL, 10);
    rw_kib = g_ascii_strtoull (lines[1], NULL, 10);
  }
  g_test_message ("layers %" G_GUINT64_FORMAT " KiB, the fork's own %" G_GUINT64_FORMAT " KiB", layers_kib, rw_kib);
  /* 8 MiB once, in the layer; the fork's own a few blocks. */
  g_assert_cmpuint (layers_kib, >=, 8192);
  g_assert_cmpuint (layers_kib, <, 2 * 8192);
  g_assert_cmpuint (rw_kib, <, 512);
  assert_output (f, forks[0], "wc -c < big", "8388608\n");
}

/* A fork or checkpoint killed after it moved the files and before it saved the record leaves them where the
 * sandbox finds them: its next use puts them back. */
static void
test_killed_freeze_recovers (ForkFixture *ff, gconstpointer data)
{
  SandstepTestFixture *f = fork_begin (ff);
  g_autofree char *handle = NULL, *dir = NULL, *layers = NULL, *layer = NULL, *intent = NULL, *tree = NULL;
  const char *id = "0123456789abcdef0123456789abcdef";

  if (f == NULL)
    return;
  handle = sandstep_test_provision (f, NULL);
  g_free (sandstep_test_run_ok (f, handle, "echo precious > keep"));
  /* What sandstep_layers_freeze() has done when it is killed before the record names the layer: the intent
   * written, the tree moved into the layer. */
  dir = g_build_filename (f->state_dir, "sandboxes", handle, NULL);
  layers = g_build_filename (f->state_dir, "layers", NULL);
  layer = g_build_filename (layers, id, NULL);
  intent = g_build_filename (dir, "freezing", NULL);
  tree = g_build_filename (dir, "tree", NULL);
  g_assert_cmpint (g_mkdir_with_parents (layer, 0700), ==, 0);
  {
    g_autofree char *moved = g_build_filename (layer, "tree", NULL);
    g_assert_cmpint (rename (tree, moved), ==, 0);
  }
  g_assert_true (g_file_set_contents (intent, id, -1, NULL));
  sandstep_test_fixture_chown (f, layers);
  sandstep_test_fixture_chown (f, layer);
  sandstep_test_fixture_chown (f, intent);
  /* Through the helper, which finishes or undoes a freeze before it uses the files. */
  {
    g_autofree char *h = handle_arg (handle);
    g_autoptr(SandstepTestResult) get = sandstep_test_helper (f, "get", h, "/workspace/keep", NULL);
    sandstep_test_assert_status (get, 0);
    g_assert_cmpstr (get->out, ==, "precious\n");
  }
  assert_output (f, handle, "cat keep", "precious\n");
  g_assert_false (g_file_test (intent, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (layer, G_FILE_TEST_EXISTS));
}

/* Forks of a sandbox that did not change since the last share its top layer: forking a prepared sandbox N times
 * one by one stacks one layer, not N (a sandbox stacks a bounded number). */
static void
test_unchanged_shares_layer (ForkFixture *ff, gconstpointer data)
{
  SandstepTestFixture *f = fork_begin (ff);
  g_autofree char *parent = NULL;
  g_autoptr(JsonObject) after_three = NULL, after_change = NULL;

  if (f == NULL)
    return;
  parent = sandstep_test_provision (f, NULL);
  g_free (sandstep_test_run_ok (f, parent, "echo prepared > p"));
  for (int i = 0; i < 3; i++)
    {
      g_autofree char *holder = g_strdup_printf ("--holder=%s/variant-%d", f->owner, i);
      g_auto(GStrv) forks = fork_ok (f, parent, holder, NULL);
      assert_output (f, forks[0], "cat p", "prepared\n");
    }
  after_three = sandstep_test_describe (f, parent);
  g_assert_cmpint (json_object_get_int_member (after_three, "layers"), ==, 1);
  g_free (sandstep_test_run_ok (f, parent, "echo changed >> p"));
  {
    g_autofree char *holder = g_strdup_printf ("--holder=%s/after-change", f->owner);
    g_auto(GStrv) forks = fork_ok (f, parent, holder, NULL);
    assert_output (f, forks[0], "cat p", "prepared\nchanged\n");
  }
  after_change = sandstep_test_describe (f, parent);
  g_assert_cmpint (json_object_get_int_member (after_change, "layers"), ==, 2);
}

/* destroy --with-forks takes the sandbox's forks and theirs, and nothing else; a release of a parent leaves its
 * forks working. */
static void
test_destroy_with_forks (ForkFixture *ff, gconstpointer data)
{
  SandstepTestFixture *f = fork_begin (ff);
  g_autofree char *parent = NULL, *other = NULL, *h = NULL, *hc = NULL, *ho = NULL;
  g_autofree char *released = NULL, *hr = NULL;
  g_auto(GStrv) children = NULL, grandchildren = NULL, kept = NULL;
  g_autoptr(SandstepTestResult) destroy = NULL, release = NULL;

  if (f == NULL)
    return;
  parent = sandstep_test_provision (f, NULL);
  other = sandstep_test_provision (f, "--holder=other", NULL);
  children = fork_ok (f, parent, NULL);
  grandchildren = fork_ok (f, children[0], NULL);
  h = handle_arg (parent);
  destroy = sandstep_test_helper (f, "destroy", h, "--with-forks", NULL);
  sandstep_test_assert_status (destroy, 0);
  sandstep_test_assert_contains (destroy->err, children[0]);
  sandstep_test_assert_contains (destroy->err, grandchildren[0]);
  hc = handle_arg (grandchildren[0]);
  {
    g_autoptr(SandstepTestResult) gone = sandstep_test_helper (f, "describe", hc, NULL);
    g_assert_cmpint (gone->status, ==, 66);
  }
  ho = handle_arg (other);
  {
    g_autoptr(SandstepTestResult) still = sandstep_test_helper (f, "describe", ho, NULL);
    sandstep_test_assert_status (still, 0);
  }
  /* A released parent goes when idle; its fork stays. */
  released = sandstep_test_provision (f, "--holder=released", NULL);
  g_free (sandstep_test_run_ok (f, released, "echo before > f"));
  kept = fork_ok (f, released, NULL);
  hr = handle_arg (released);
  release = sandstep_test_helper (f, "release", hr, NULL);
  sandstep_test_assert_status (release, 0);
  assert_output (f, kept[0], "cat f", "before\n");
}

/* The end of a fork's jail syncs nothing of the host's: its overlay is volatile (without that, overlayfs syncs
 * the whole file system under the sandbox's files, every program's unwritten data, at each unmount).  overlayfs
 * marks such a work directory against a second mount; the fork's next supervisor still starts, files intact. */
static void
test_volatile (ForkFixture *ff, gconstpointer data)
{
  SandstepTestFixture *f = fork_begin (ff);
  g_autofree char *parent = NULL, *options = NULL, *mark = NULL;
  g_auto(GStrv) forks = NULL;

  if (f == NULL)
    return;
  parent = sandstep_test_provision (f, NULL);
  g_free (sandstep_test_run_ok (f, parent, "echo base > a"));
  forks = fork_ok (f, parent, NULL);
  g_free (sandstep_test_run_ok (f, forks[0], "echo fork >> a"));
  /* The super options of the mount on /workspace: mountinfo's last field. */
  options = sandstep_test_run_ok (f, forks[0], "awk '$5 == \"/workspace\" { print $NF }' /proc/self/mountinfo");
  g_test_message ("/workspace: %s", options);
  sandstep_test_assert_contains (options, "volatile");
  /* overlayfs's mark, in a work directory of mode 0 that only root reads without changing it. */
  mark = g_build_filename (f->state_dir, "sandboxes", forks[0], "rw", "tree-work", "work", "incompat", "volatile",
                           NULL);
  if (geteuid () == 0)
    g_assert_true (g_file_test (mark, G_FILE_TEST_IS_DIR));
  sandstep_test_end_supervisor (f, forks[0], SIGTERM);
  assert_output (f, forks[0], "cat a", "base\nfork\n");
}

/* A file call beside its holder's claim (E2B's, through sandstepd) finds a fork's files through its live jail.  The
 * supervisor it finds may end idle before the call reaches the jail: the call keeps the jail from before it looks
 * (sandstep-supervisor-keep.h), so it reads the files, never "could not reach" them.  The race is forced: the
 * supervisor idles 1 s, and the call pauses 3 s between finding it and its jail.  In this process, through the
 * local backend, as E2B's calls run in sandstepd's. */
static void
test_beside_call_keeps_jail (ForkFixture *ff, gconstpointer data)
{
  SandstepTestFixture *f = fork_begin (ff);
  g_autofree char *parent = NULL, *pause_ms = NULL;
  g_auto(GStrv) forks = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(SandstepBackend) backend = NULL;
  g_autoptr(SandstepAttachment) holding = NULL;
  g_autoptr(SandstepAttachment) beside = NULL;
  g_autoptr(GBytes) read = NULL;
  SandstepIdentity holder = { f->owner, "e2b/holder" };
  SandstepIdentity beside_holder = { f->owner, "e2b/holder", NULL, TRUE };
  gint64 started;

  if (f == NULL)
    return;
  parent = sandstep_test_provision (f, NULL);
  g_free (sandstep_test_run_ok (f, parent, "echo kept > note.txt"));
  forks = fork_ok (f, parent, NULL);

  g_setenv ("SANDSTEP_TEST_SUPERVISOR_IDLE_S", "1", TRUE);
  pause_ms = g_strdup_printf ("%.0f", 3000 * sandstep_test_time_scale ());
  backend = sandstep_local_backend_new (f->state_dir, &error);
  g_assert_no_error (error);
  holding = sandstep_backend_attach (backend, forks[0], &holder, 0, NULL, NULL, &error);
  g_assert_no_error (error);
  beside = sandstep_backend_attach (backend, forks[0], &beside_holder, 0, NULL, NULL, &error);
  g_assert_no_error (error);

  g_setenv ("SANDSTEP_TEST_JAIL_LOOKUP_PAUSE_MS", pause_ms, TRUE);
  started = g_get_monotonic_time ();
  read = sandstep_attachment_read_file (beside, "/workspace/note.txt", 4096, &error);
  g_unsetenv ("SANDSTEP_TEST_JAIL_LOOKUP_PAUSE_MS");
  g_unsetenv ("SANDSTEP_TEST_SUPERVISOR_IDLE_S");
  /* The pause ran: the supervisor had its idle second and more within the call. */
  g_assert_cmpint (g_get_monotonic_time () - started, >=, 3 * G_USEC_PER_SEC);
  g_assert_no_error (error);
  g_assert_cmpmem (g_bytes_get_data (read, NULL), g_bytes_get_size (read), "kept\n", 5);
}

static const struct { const char *name; void (*func) (ForkFixture *, gconstpointer); } cases[] = {
  { "independent", test_independent },
  { "spec-kept", test_spec_kept },
  { "outlives-parent", test_outlives_parent },
  { "get-or-create", test_get_or_create },
  { "checkpoint-rollback", test_checkpoint_rollback },
  { "host-tools", test_host_tools },
  { "no-copy", test_no_copy },
  { "unchanged-shares-layer", test_unchanged_shares_layer },
  { "destroy-with-forks", test_destroy_with_forks },
  { "killed-freeze-recovers", test_killed_freeze_recovers },
  { "volatile", test_volatile },
};

int
main (int argc, char **argv)
{
  static const struct { const char *prefix; RunAs as; } variants[] = {
    { "/fork/as-caller/", AS_CALLER },
    { "/fork/as-user/", AS_USER },
  };

  g_test_init (&argc, &argv, NULL);
  for (gsize v = 0; v < G_N_ELEMENTS (variants); v++)
    for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
      {
        g_autofree char *path = g_strconcat (variants[v].prefix, cases[i].name, NULL);
        g_test_add (path, ForkFixture, GINT_TO_POINTER (variants[v].as), fork_setup, cases[i].func, fork_teardown);
      }
  /* In this process, so as its user only. */
  g_test_add ("/fork/as-caller/beside-call-keeps-jail", ForkFixture, GINT_TO_POINTER (AS_CALLER), fork_setup,
              test_beside_call_keeps_jail, fork_teardown);
  return g_test_run ();
}
