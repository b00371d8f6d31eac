/* test-soak.c: a thousand mixed operations from eight clients at once, with
 * SIGKILLs at random moments, then a count of what was lost or left.
 *
 * Eight client threads each run 125 operations (provision, put, run,
 * export, release, destroy, gc) on eight shared sandboxes, one holder per
 * sandbox, so that clients contend for claims; only four of them are ever
 * released or destroyed, so that most of what ran can be checked.  One operation in five is
 * killed (SIGKILL) at a random moment, and now and then a sandbox's
 * supervisor is killed under whatever it runs.  Run through
 * with-sandstepd.sh the same operations go through a sandstepd.
 *
 * At the end, for every sandbox still there: every `run` that exited 0 left
 * its line in the sandbox exactly once, no `run` (killed or not) left its
 * line twice, and every file a `put` or `export` reported written is there
 * with its content.  Then everything is destroyed and the fixture's
 * teardown fails the case if any process, cgroup, mount, holder entry, half
 * sandbox or trash is left.  The counts are printed.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandstep-test-utils.h"

#define CLIENTS 8
#define BOXES 8
#define OPS_PER_CLIENT 125
#define KILL_ONE_IN 5

typedef enum {
  OP_PROVISION,
  OP_PUT,
  OP_RUN,
  OP_EXPORT,
  OP_RELEASE,
  OP_DESTROY,
  OP_GC,
  OP_KILL_SUPERVISOR,
  N_OPS
} Op;

static const char *const op_names[N_OPS] = {
  "provision", "put", "run", "export", "release", "destroy", "gc", "kill-supervisor",
};

/* How often each is drawn, out of 100: mostly work, rarely an ending. */
static const int op_weights[N_OPS] = { 8, 25, 42, 15, 2, 2, 3, 3 };

/* What an operation that exited 0 said it did, checked at the end. */
typedef struct {
  char *handle;
  char *path;      /* put: in the sandbox; export: on the host */
  char *content;   /* put and export: what must be there */
  char *line;      /* run: the line it appended */
} Claim;

static void
claim_free (Claim *c)
{
  g_free (c->handle);
  g_free (c->path);
  g_free (c->content);
  g_free (c->line);
  g_free (c);
}

typedef struct {
  SandstepTestFixture *f;
  GMutex lock;
  char *handles[BOXES];          /* the last handle each box's provision printed */
  GPtrArray *all_handles;        /* every handle seen */
  GPtrArray *claims;             /* of Claim: what succeeded */
  GPtrArray *run_lines;          /* every line a run was asked to append, killed or not */
  guint counts[N_OPS][4];        /* per op: exited 0, exited otherwise, killed, timed out */
  guint statuses[256];
  gint next_id;
} Soak;

enum { DONE_OK, DONE_FAILED, DONE_KILLED, DONE_HUNG };

/* Runs `sandstep ARGS`; with @kill_after_us > 0 kills it (SIGKILL) then.
 * Returns the exit status (128+N for signal N, -1 when it did not end
 * within a minute, far beyond any of these) and its stdout in @out_stdout. */
static int
helper (Soak *soak, const char *const *args, gint64 kill_after_us, char **out_stdout)
{
  SandstepTestProc *proc = sandstep_test_spawn_full (soak->f, args, NULL, NULL, 0);
  g_autoptr(SandstepTestResult) r = NULL;

  if (kill_after_us > 0)
    {
      g_usleep (kill_after_us);
      sandstep_test_proc_kill (proc, SIGKILL);
    }
  r = sandstep_test_proc_wait (proc, 60);
  if (out_stdout != NULL)
    *out_stdout = g_steal_pointer (&r->out);
  return r->timed_out ? -1 : r->status;
}

static Op
draw_op (void)
{
  int r = g_random_int_range (0, 100);

  for (int op = 0; op < N_OPS; op++)
    if ((r -= op_weights[op]) < 0)
      return op;
  return OP_RUN;
}

static char *
box_holder (Soak *soak, int box)
{
  return g_strdup_printf ("--holder=%s/box-%d", soak->f->owner, box);
}

/* What the box's provision printed: its handle now. */
static void
remember_box (Soak *soak, int box, const char *handle)
{
  g_mutex_lock (&soak->lock);
  g_free (soak->handles[box]);
  soak->handles[box] = g_strdup (handle);
  if (!g_ptr_array_find_with_equal_func (soak->all_handles, handle, g_str_equal, NULL))
    g_ptr_array_add (soak->all_handles, g_strdup (handle));
  g_mutex_unlock (&soak->lock);
}

/* The box's handle, provisioning it (get-or-create by its holder) when none is known. */
static char *
box_handle (Soak *soak, int box)
{
  g_autofree char *holder = box_holder (soak, box);
  const char *args[] = { "provision", holder, "--lifetime=1h", NULL };
  g_autofree char *out = NULL;
  char *handle;

  g_mutex_lock (&soak->lock);
  handle = g_strdup (soak->handles[box]);
  g_mutex_unlock (&soak->lock);
  if (handle != NULL)
    return handle;
  if (helper (soak, args, 0, &out) != 0)
    return NULL;
  remember_box (soak, box, g_strchomp (out));
  return g_steal_pointer (&out);
}

static void
forget_box (Soak *soak, int box, const char *handle)
{
  g_mutex_lock (&soak->lock);
  if (g_strcmp0 (soak->handles[box], handle) == 0)
    g_clear_pointer (&soak->handles[box], g_free);
  g_mutex_unlock (&soak->lock);
}

static void
add_claim (Soak *soak, const char *handle, const char *path, const char *content, const char *line)
{
  Claim *c = g_new0 (Claim, 1);

  c->handle = g_strdup (handle);
  c->path = g_strdup (path);
  c->content = g_strdup (content);
  c->line = g_strdup (line);
  g_mutex_lock (&soak->lock);
  g_ptr_array_add (soak->claims, c);
  g_mutex_unlock (&soak->lock);
}

/* Kills the supervisor of @handle, if one runs: a crash under whatever it runs. */
static void
kill_supervisor (const char *handle)
{
  g_autofree char *want = g_strdup_printf ("--supervisor %s", handle);
  g_autoptr(GArray) pids = sandstep_test_processes_naming (want);

  for (guint i = 0; i < pids->len; i++)
    kill (g_array_index (pids, GPid, i), SIGKILL);
}

static gpointer
client (gpointer data)
{
  Soak *soak = data;

  for (int n = 0; n < OPS_PER_CLIENT; n++)
    {
      Op op = draw_op ();
      int box = g_random_int_range (0, BOXES);
      /* Half the boxes are never ended on purpose, so that what ran in them is still there to check. */
      if ((op == OP_RELEASE || op == OP_DESTROY) && box >= BOXES / 2)
        box -= BOXES / 2;
      int id = g_atomic_int_add (&soak->next_id, 1);
      gboolean kill_it = g_random_int_range (0, KILL_ONE_IN) == 0 && op != OP_KILL_SUPERVISOR;
      /* Most operations take 5 to 50 ms here: a kill within that lands while they run. */
      gint64 kill_after = kill_it ? g_random_int_range (500, 40 * 1000) : 0;
      g_autofree char *handle = op == OP_GC ? NULL : box_handle (soak, box);
      g_autofree char *h = handle != NULL ? g_strconcat ("--handle=", handle, NULL) : NULL;
      g_autofree char *path = NULL;
      g_autofree char *content = g_strdup_printf ("soak %d %08x\n", id, g_random_int ());
      g_autofree char *line = NULL;
      int status = 0;

      if (op != OP_GC && handle == NULL)
        {
          /* The provision itself failed (killed meanwhile by a gc): count it and go on. */
          op = OP_PROVISION;
          status = 1;
        }
      else
        switch (op)
          {
          case OP_PROVISION:
            {
              g_autofree char *holder = box_holder (soak, box);
              const char *args[] = { "provision", holder, "--lifetime=1h", NULL };
              g_autofree char *out = NULL;
              status = helper (soak, args, kill_after, &out);
              /* Get-or-create by holder: the same handle while the sandbox lives; a new one after an ending. */
              if (status == 0)
                remember_box (soak, box, g_strchomp (out));
              break;
            }
          case OP_PUT:
            {
              g_autofree char *src = g_strdup_printf ("%s/put-%d.txt", soak->f->host_dir, id);
              const char *args[] = { "put", h, "--wait=30", src, NULL, NULL };
              path = g_strdup_printf ("/workspace/put-%d.txt", id);
              args[4] = path;
              g_assert_true (g_file_set_contents (src, content, -1, NULL));
              status = helper (soak, args, kill_after, NULL);
              if (status == 0)
                add_claim (soak, handle, path, content, NULL);
              unlink (src);
              break;
            }
          case OP_RUN:
            {
              g_autofree char *command = NULL;
              const char *args[] = { "run", h, "--wait=30", "--", NULL, NULL };
              line = g_strdup_printf ("ran %d", id);
              /* Long enough, now and then, for a kill to land while it runs. */
              command = g_strdup_printf ("echo '%s' >> /workspace/ran.log; sleep 0.0%d", line,
                                         g_random_int_range (0, 10));
              args[4] = command;
              g_mutex_lock (&soak->lock);
              g_ptr_array_add (soak->run_lines, g_strdup (line));
              g_mutex_unlock (&soak->lock);
              status = helper (soak, args, kill_after, NULL);
              if (status == 0)
                add_claim (soak, handle, NULL, NULL, line);
              break;
            }
          case OP_EXPORT:
            {
              g_autofree char *made = g_strdup_printf ("made-%d.txt", id);
              g_autofree char *command = g_strdup_printf ("printf '%%s' '%s' > %s", g_strchomp (g_strdup (content)),
                                                          made);
              const char *run_args[] = { "run", h, "--wait=30", "--", command, NULL };
              g_autofree char *dest = g_strdup_printf ("%s/export-%d.txt", soak->f->host_dir, id);
              g_autofree char *pair = g_strdup_printf ("%s=file://%s", made, dest);
              const char *args[] = { "export", h, "--wait=30", pair, NULL };
              if (helper (soak, run_args, 0, NULL) != 0)
                {
                  status = 1;
                  break;
                }
              status = helper (soak, args, kill_after, NULL);
              if (status == 0)
                {
                  g_autofree char *want = g_strdup (content);
                  add_claim (soak, NULL, dest, g_strchomp (want), NULL);
                }
              break;
            }
          case OP_RELEASE:
          case OP_DESTROY:
            {
              const char *args[] = { op == OP_RELEASE ? "release" : "destroy", h, NULL };
              status = helper (soak, args, kill_after, NULL);
              /* Killed or not, this sandbox may be gone: the box provisions afresh. */
              forget_box (soak, box, handle);
              break;
            }
          case OP_GC:
            {
              const char *args[] = { "gc", NULL };
              status = helper (soak, args, kill_after, NULL);
              break;
            }
          case OP_KILL_SUPERVISOR:
            kill_supervisor (handle);
            status = 0;
            break;
          case N_OPS:
            g_assert_not_reached ();
          }

      g_mutex_lock (&soak->lock);
      if (status == -1)
        soak->counts[op][DONE_HUNG]++;
      else if (kill_it && status == 128 + SIGKILL)
        soak->counts[op][DONE_KILLED]++;
      else if (status == 0)
        soak->counts[op][DONE_OK]++;
      else
        soak->counts[op][DONE_FAILED]++;
      if (status >= 0 && status < 256)
        soak->statuses[status]++;
      g_mutex_unlock (&soak->lock);
    }
  return NULL;
}

/* Every line of /workspace/ran.log in @handle, counted; NULL when the sandbox is gone. */
static GHashTable *
ran_lines (Soak *soak, const char *handle)
{
  g_autofree char *h = g_strconcat ("--handle=", handle, NULL);
  const char *args[] = { "run", h, "--", "cat /workspace/ran.log 2>/dev/null; true", NULL };
  g_autofree char *out = NULL;
  g_auto(GStrv) lines = NULL;
  GHashTable *counts;

  if (helper (soak, args, 0, &out) != 0)
    return NULL;
  counts = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  lines = g_strsplit (out, "\n", -1);
  for (char **l = lines; *l != NULL; l++)
    if (**l != '\0')
      g_hash_table_insert (counts, g_strdup (*l),
                           GUINT_TO_POINTER (GPOINTER_TO_UINT (g_hash_table_lookup (counts, *l)) + 1));
  return counts;
}

static void
test_soak (SandstepTestFixture *f, gconstpointer data)
{
  Soak soak = { .f = f };
  GThread *threads[CLIENTS];
  guint lost_runs = 0, twice = 0, missing_files = 0, checked_runs = 0, checked_files = 0, hung = 0, killed = 0;
  guint total = 0, two_per_holder = 0;
  g_autoptr(GHashTable) alive = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                       (GDestroyNotify) g_hash_table_unref);

  g_test_summary ("1,000 mixed operations over 8 sandboxes from 8 clients at once, one in five killed (SIGKILL) "
                  "at a random moment and supervisors killed now and then: no command ran twice, every run "
                  "that exited 0 ran once, every file put or exported is there, nothing hung, and nothing is "
                  "left behind once the sandboxes are destroyed");
  g_mutex_init (&soak.lock);
  soak.all_handles = g_ptr_array_new_with_free_func (g_free);
  soak.claims = g_ptr_array_new_with_free_func ((GDestroyNotify) claim_free);
  soak.run_lines = g_ptr_array_new_with_free_func (g_free);

  for (int i = 0; i < CLIENTS; i++)
    threads[i] = g_thread_new ("soak-client", client, &soak);
  for (int i = 0; i < CLIENTS; i++)
    g_thread_join (threads[i]);

  /* The sandboxes still there, and what ran in each. */
  for (guint i = 0; i < soak.all_handles->len; i++)
    {
      GHashTable *lines = ran_lines (&soak, soak.all_handles->pdata[i]);
      if (lines != NULL)
        g_hash_table_insert (alive, g_strdup (soak.all_handles->pdata[i]), lines);
    }
  /* One sandbox per holder, kills or not: get-or-create by holder. */
  {
    g_autoptr(GHashTable) holders = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
    GHashTableIter iter;
    gpointer handle;
    g_hash_table_iter_init (&iter, alive);
    while (g_hash_table_iter_next (&iter, &handle, NULL))
      {
        g_autofree char *h = g_strconcat ("--handle=", (char *) handle, NULL);
        const char *args[] = { "describe", h, NULL };
        g_autofree char *out = NULL;
        g_autoptr(JsonParser) parser = json_parser_new ();
        const char *holder;
        g_assert_cmpint (helper (&soak, args, 0, &out), ==, 0);
        g_assert_true (json_parser_load_from_data (parser, out, -1, NULL));
        holder = json_object_get_string_member (json_node_get_object (json_parser_get_root (parser)), "provisioned_by");
        if (g_hash_table_contains (holders, holder))
          {
            g_test_message ("holder '%s' has two sandboxes: %s and %s", holder,
                            (char *) g_hash_table_lookup (holders, holder), (char *) handle);
            two_per_holder++;
          }
        else
          g_hash_table_insert (holders, g_strdup (holder), g_strdup (handle));
      }
  }
  /* No line twice, whatever happened to its run. */
  {
    GHashTableIter iter;
    gpointer handle, lines;
    g_hash_table_iter_init (&iter, alive);
    while (g_hash_table_iter_next (&iter, &handle, &lines))
      {
        GHashTableIter l;
        gpointer line, count;
        g_hash_table_iter_init (&l, lines);
        while (g_hash_table_iter_next (&l, &line, &count))
          if (GPOINTER_TO_UINT (count) > 1)
            {
              g_test_message ("'%s' ran %u times in %s", (char *) line, GPOINTER_TO_UINT (count), (char *) handle);
              twice++;
            }
      }
  }
  for (guint i = 0; i < soak.claims->len; i++)
    {
      const Claim *c = soak.claims->pdata[i];
      GHashTable *lines = c->handle != NULL ? g_hash_table_lookup (alive, c->handle) : NULL;

      if (c->line != NULL && lines != NULL)
        {
          checked_runs++;
          if (!g_hash_table_contains (lines, c->line))
            {
              g_test_message ("'%s' exited 0 but left no line in %s", c->line, c->handle);
              lost_runs++;
            }
        }
      else if (c->path != NULL && c->handle == NULL)
        {
          /* An export: on the host, whatever became of the sandbox. */
          g_autofree char *got = NULL;
          checked_files++;
          if (!g_file_get_contents (c->path, &got, NULL, NULL) || strcmp (got, c->content) != 0)
            {
              g_test_message ("export '%s' exited 0 but the file is %s", c->path, got == NULL ? "missing" : "wrong");
              missing_files++;
            }
        }
      else if (c->path != NULL && lines != NULL)
        {
          g_autofree char *h = g_strconcat ("--handle=", c->handle, NULL);
          const char *args[] = { "get", h, c->path, NULL };
          g_autofree char *got = NULL;
          checked_files++;
          if (helper (&soak, args, 0, &got) != 0 || strcmp (got, c->content) != 0)
            {
              g_test_message ("put '%s' in %s exited 0 but the file is %s", c->path, c->handle,
                              got == NULL || got[0] == '\0' ? "missing" : "wrong");
              missing_files++;
            }
        }
    }

  for (int op = 0; op < N_OPS; op++)
    {
      guint *n = soak.counts[op];
      g_test_message ("%-16s %4u: %4u exited 0, %4u exited otherwise, %4u killed, %u hung", op_names[op],
                      n[0] + n[1] + n[2] + n[3], n[DONE_OK], n[DONE_FAILED], n[DONE_KILLED], n[DONE_HUNG]);
      total += n[0] + n[1] + n[2] + n[3];
      hung += n[DONE_HUNG];
      killed += n[DONE_KILLED];
    }
  {
    GString *statuses = g_string_new (NULL);
    for (int s = 0; s < 256; s++)
      if (soak.statuses[s] > 0)
        g_string_append_printf (statuses, " %d:%u", s, soak.statuses[s]);
    g_test_message ("exit statuses (status:count):%s", statuses->str);
    g_string_free (statuses, TRUE);
  }
  g_test_message ("%u operations, %u killed; %u sandboxes made, %u still there; checked %u runs and %u files: "
                  "%u runs lost, %u lines twice, %u files missing or wrong",
                  total, killed, soak.all_handles->len, g_hash_table_size (alive), checked_runs, checked_files,
                  lost_runs, twice, missing_files);
  g_assert_cmpuint (total, ==, CLIENTS * OPS_PER_CLIENT);
  g_assert_cmpuint (hung, ==, 0);
  g_assert_cmpuint (twice, ==, 0);
  g_assert_cmpuint (two_per_holder, ==, 0);
  g_assert_cmpuint (lost_runs, ==, 0);
  g_assert_cmpuint (missing_files, ==, 0);
  g_assert_cmpuint (checked_runs, >, 100);
  g_assert_cmpuint (killed, >, 50);

  /* Everything made goes; the teardown then fails the case if anything of it is left. */
  for (guint i = 0; i < soak.all_handles->len; i++)
    {
      g_autofree char *h = g_strconcat ("--handle=", (char *) soak.all_handles->pdata[i], NULL);
      const char *args[] = { "destroy", h, NULL };
      g_assert_cmpint (helper (&soak, args, 0, NULL), ==, 0);
      g_ptr_array_add (f->handles, g_strdup (soak.all_handles->pdata[i]));
    }
  {
    const char *args[] = { "gc", NULL };
    g_assert_cmpint (helper (&soak, args, 0, NULL), ==, 0);
  }
  for (int b = 0; b < BOXES; b++)
    g_free (soak.handles[b]);
  g_ptr_array_unref (soak.all_handles);
  g_ptr_array_unref (soak.claims);
  g_ptr_array_unref (soak.run_lines);
  g_mutex_clear (&soak.lock);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/soak/mixed-operations-with-kills", SandstepTestFixture, NULL, sandstep_test_setup, test_soak,
              sandstep_test_teardown);
  return g_test_run ();
}
