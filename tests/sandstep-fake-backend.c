/* sandstep-fake-backend.c: the backend interface in this process, over plain directories (see the header). */
#include "sandstep-fake-backend.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-host-files.h"
#include "sandstep-units.h"

typedef struct {
  char *handle;
  char *owner;
  char *provisioned_by;
  char *held_by;            /* NULL: free */
  gint64 expires;           /* unix seconds */
  SandstepSpec *spec;
  char *root;               /* holds workspace/ and tmp/ */
} FakeSandbox;

typedef struct {
  SandstepBackend parent;
  char *dir;
  GHashTable *sandboxes;    /* handle -> FakeSandbox */
  guint next;
} FakeBackend;

typedef struct {
  SandstepAttachment parent;
  FakeBackend *fake;
} FakeAttachment;

static gint64
now_unix (void)
{
  return g_get_real_time () / G_USEC_PER_SEC;
}

static void
fake_sandbox_free (FakeSandbox *box)
{
  g_free (box->handle);
  g_free (box->owner);
  g_free (box->provisioned_by);
  g_free (box->held_by);
  sandstep_spec_free (box->spec);
  g_free (box->root);
  g_free (box);
}

static SandstepSpec *
copy_spec (const SandstepSpec *spec)
{
  g_autoptr(JsonNode) node = sandstep_spec_to_json (spec, TRUE);

  return sandstep_spec_from_json (node, NULL);
}

/* The sandbox @handle names, or NULL with the error a real backend gives. */
static FakeSandbox *
find (FakeBackend *fake, const char *handle, const SandstepIdentity *who, GError **error)
{
  FakeSandbox *box = g_hash_table_lookup (fake->sandboxes, handle);

  if (box == NULL)
    {
      sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_FOUND,
                      "No sandbox '%s' here: it was destroyed, or never provisioned", handle);
      return NULL;
    }
  if (who != NULL && g_strcmp0 (box->owner, who->owner) != 0)
    {
      sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_OWNER,
                      "Sandbox '%s' is not owned by '%s': it carries owner '%s'", handle, who->owner, box->owner);
      return NULL;
    }
  return box;
}

static FakeSandbox *
attached_box (SandstepAttachment *parent, GError **error)
{
  FakeAttachment *a = (FakeAttachment *) parent;

  return find (a->fake, parent->handle, NULL, error);
}

/* The host path of a sandbox path: /workspace/... or /tmp/... or relative to /workspace. */
static char *
host_path (FakeSandbox *box, const char *path, GError **error)
{
  g_autofree char *absolute = g_path_is_absolute (path) ? g_strdup (path) : g_build_filename ("/workspace", path, NULL);
  g_auto(GStrv) parts = g_strsplit (absolute, "/", -1);

  for (guint i = 0; parts[i] != NULL; i++)
    if (strcmp (parts[i], "..") == 0)
      {
        sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_ESCAPES,
                        "'%s' goes above '/' with '..'; give a path under /workspace or /tmp", path);
        return NULL;
      }
  if (!g_str_has_prefix (absolute, "/workspace") && !g_str_has_prefix (absolute, "/tmp"))
    {
      sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_ESCAPES,
                      "'%s' is outside the sandbox's files: only /workspace and /tmp can be read or written", path);
      return NULL;
    }
  return g_build_filename (box->root, absolute, NULL);
}

static gboolean
throw_path (GError **error, int errsv, const char *path)
{
  if (errsv == ENOENT || errsv == ENOTDIR)
    return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND, "'%s' does not exist", path);
  if (errsv == EISDIR)
    return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IS_DIRECTORY, "'%s' is a directory",
                           path);
  return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errsv, "Cannot use '%s'", path);
}

/* ---- records ---- */

static char *
fake_provision (SandstepBackend *backend, const SandstepSpec *spec, const SandstepIdentity *who,
                gboolean *out_existing, GError **error)
{
  FakeBackend *fake = (FakeBackend *) backend;
  GHashTableIter iter;
  FakeSandbox *box;

  *out_existing = FALSE;
  g_hash_table_iter_init (&iter, fake->sandboxes);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &box))
    if (g_strcmp0 (box->owner, who->owner) == 0 && g_strcmp0 (box->provisioned_by, who->holder) == 0 &&
        now_unix () < box->expires)
      {
        *out_existing = TRUE;
        return g_strdup (box->handle);
      }
  box = g_new0 (FakeSandbox, 1);
  box->handle = g_strdup_printf (SANDSTEP_HANDLE_PREFIX "%016x", ++fake->next);
  box->owner = g_strdup (who->owner);
  box->provisioned_by = g_strdup (who->holder);
  box->expires = now_unix () + spec->lifetime_s;
  box->spec = copy_spec (spec);
  box->root = g_build_filename (fake->dir, box->handle, NULL);
  for (guint i = 0; i < 2; i++)
    {
      g_autofree char *sub = g_build_filename (box->root, i == 0 ? "workspace" : "tmp", NULL);
      if (g_mkdir_with_parents (sub, 0700) < 0)
        {
          sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                                "Cannot make '%s'", sub);
          fake_sandbox_free (box);
          return NULL;
        }
    }
  g_hash_table_insert (fake->sandboxes, box->handle, box);
  return g_strdup (box->handle);
}

static JsonNode *
fake_describe (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, GError **error)
{
  FakeSandbox *box = find ((FakeBackend *) backend, handle, who, error);
  g_autoptr(JsonObject) object = NULL;
  JsonNode *node;

  if (box == NULL)
    return NULL;
  object = json_object_new ();
  json_object_set_string_member (object, "handle", box->handle);
  json_object_set_string_member (object, "backend", "fake");
  json_object_set_string_member (object, "owner", box->owner);
  json_object_set_string_member (object, "provisioned_by", box->provisioned_by);
  if (box->held_by != NULL)
    json_object_set_string_member (object, "held_by", box->held_by);
  else
    json_object_set_null_member (object, "held_by");
  json_object_set_int_member (object, "remaining_seconds", MAX (box->expires - now_unix (), 0));
  json_object_set_member (object, "spec", sandstep_spec_to_json (box->spec, FALSE));
  node = json_node_new (JSON_NODE_OBJECT);
  json_node_set_object (node, object);
  return node;
}

static gboolean
fake_destroy (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, GError **error)
{
  FakeBackend *fake = (FakeBackend *) backend;
  g_autoptr(GError) local_error = NULL;
  FakeSandbox *box = find (fake, handle, who, &local_error);

  if (box == NULL)
    {
      if (g_error_matches (local_error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_FOUND))
        return TRUE;
      g_propagate_error (error, g_steal_pointer (&local_error));
      return FALSE;
    }
  sandstep_remove_tree_at (AT_FDCWD, box->root);
  g_hash_table_remove (fake->sandboxes, handle);
  return TRUE;
}

static gboolean
fake_release (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, gint64 keep_s,
              gboolean *out_destroyed, GError **error)
{
  FakeSandbox *box = find ((FakeBackend *) backend, handle, who, error);

  *out_destroyed = FALSE;
  if (box == NULL)
    return FALSE;
  box->expires = now_unix () + keep_s;
  if (keep_s > 0 || box->held_by != NULL)
    return TRUE;
  *out_destroyed = fake_destroy (backend, handle, who, error);
  return *out_destroyed;
}

static gboolean
fake_gc (SandstepBackend *backend, const char *run, const char *owner_prefix, gboolean expired_only,
         gboolean broken, GPtrArray *destroyed, GError **error)
{
  FakeBackend *fake = (FakeBackend *) backend;
  g_autoptr(GList) handles = g_hash_table_get_keys (fake->sandboxes);

  for (GList *l = handles; l != NULL; l = l->next)
    {
      FakeSandbox *box = g_hash_table_lookup (fake->sandboxes, l->data);
      const char *slash = strrchr (box->owner, '/');

      if (run != NULL && g_strcmp0 (slash != NULL ? slash + 1 : box->owner, run) != 0)
        continue;
      if (owner_prefix != NULL && !g_str_has_prefix (box->owner, owner_prefix))
        continue;
      if (expired_only && now_unix () < box->expires)
        continue;
      g_ptr_array_add (destroyed, g_strdup (box->handle));
      sandstep_remove_tree_at (AT_FDCWD, box->root);
      g_hash_table_remove (fake->sandboxes, box->handle);
    }
  return TRUE;
}

/* ---- claims ---- */

static SandstepAttachment *
fake_try_attach (SandstepBackend *backend, const char *handle, const SandstepIdentity *who, GError **error)
{
  FakeBackend *fake = (FakeBackend *) backend;
  FakeSandbox *box = find (fake, handle, who, error);
  FakeAttachment *a;

  if (box == NULL)
    return NULL;
  if (now_unix () >= box->expires)
    {
      sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_EXPIRED, "Sandbox '%s' expired", handle);
      return NULL;
    }
  if (box->held_by != NULL)
    {
      sandstep_throw_busy (error, box->held_by, "Sandbox '%s' is held by '%s', and one step uses a sandbox at a time",
                           handle, box->held_by);
      return NULL;
    }
  box->held_by = g_strdup (who->holder);
  a = g_new0 (FakeAttachment, 1);
  a->parent.backend = backend;
  a->parent.handle = g_strdup (handle);
  a->fake = fake;
  return &a->parent;
}

static void
fake_detach (SandstepAttachment *parent)
{
  FakeSandbox *box = attached_box (parent, NULL);

  if (box != NULL)
    g_clear_pointer (&box->held_by, g_free);
  g_free (parent->handle);
  g_free (parent);
}

static double
fake_remaining_lifetime (SandstepAttachment *parent)
{
  FakeSandbox *box = attached_box (parent, NULL);

  return box != NULL ? MAX ((double) box->expires - g_get_real_time () / (double) G_USEC_PER_SEC, 0) : 0;
}

static const SandstepSpec *
fake_spec (SandstepAttachment *parent)
{
  FakeSandbox *box = attached_box (parent, NULL);

  return box != NULL ? box->spec : NULL;
}

/* ---- commands: /bin/sh -c on the host, in the workspace ---- */

static gboolean
fake_run_command (SandstepAttachment *parent, const SandstepRunRequest *request, SandstepRunResult *result,
                  GError **error)
{
  FakeSandbox *box = attached_box (parent, error);
  g_autofree char *workspace = NULL;
  gint64 deadline;
  int out[2], err[2], status = 0;
  pid_t pid;

  if (box == NULL)
    return FALSE;
  workspace = g_build_filename (box->root, "workspace", NULL);
  if (pipe2 (out, O_CLOEXEC) < 0 || pipe2 (err, O_CLOEXEC) < 0)
    return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errno, "Cannot make pipes");
  deadline = g_get_monotonic_time () + (gint64) (request->timeout_s * G_USEC_PER_SEC);
  pid = fork ();
  if (pid == 0)
    {
      int null = open ("/dev/null", O_RDONLY);
      setpgid (0, 0);
      if (null < 0 || dup2 (null, 0) < 0 || dup2 (out[1], 1) < 0 || dup2 (err[1], 2) < 0 || chdir (workspace) < 0)
        _exit (126);
      execl ("/bin/sh", "sh", "-c", request->command, (char *) NULL);
      _exit (127);
    }
  close (out[1]);
  close (err[1]);
  if (pid < 0)
    {
      close (out[0]);
      close (err[0]);
      return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errno, "Cannot fork");
    }
  for (int open_fds = 2; open_fds > 0;)
    {
      struct pollfd fds[2] = { { .fd = out[0], .events = POLLIN }, { .fd = err[0], .events = POLLIN } };
      gint64 left_ms = (deadline - g_get_monotonic_time ()) / 1000;

      if (left_ms <= 0 && !result->timed_out)
        {
          /* The budget is over: the command and everything it started go. */
          result->timed_out = TRUE;
          kill (-pid, SIGKILL);
        }
      if (poll (fds, 2, result->timed_out ? -1 : (int) MIN (left_ms, G_MAXINT)) < 0 && errno != EINTR)
        break;
      for (int i = 0; i < 2; i++)
        {
          char buf[65536];
          ssize_t n;
          int *fd = i == 0 ? &out[0] : &err[0];

          if (*fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
          n = read (*fd, buf, sizeof buf);
          if (n <= 0)
            {
              close (*fd);
              *fd = -1;
              open_fds--;
              continue;
            }
          if (request->on_output != NULL)
            request->on_output (i + 1, buf, n, request->user_data);
          else if (write (i == 0 ? request->stdout_fd : request->stderr_fd, buf, n) < 0)
            g_debug ("fake backend: output dropped: %s", g_strerror (errno));
        }
    }
  for (int i = 0; i < 2; i++)
    if ((i == 0 ? out[0] : err[0]) >= 0)
      close (i == 0 ? out[0] : err[0]);
  kill (-pid, SIGKILL);
  while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
    ;
  result->exit_status = WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
  return TRUE;
}

/* ---- files ---- */

static GBytes *
fake_read_file (SandstepAttachment *parent, const char *path, gsize max_bytes, GError **error)
{
  FakeSandbox *box = attached_box (parent, error);
  g_autofree char *host = box != NULL ? host_path (box, path, error) : NULL;
  struct stat st;
  char *data = NULL;
  gsize len = 0;

  if (host == NULL)
    return NULL;
  if (stat (host, &st) < 0)
    return throw_path (error, errno, path), NULL;
  if (S_ISDIR (st.st_mode))
    return throw_path (error, EISDIR, path), NULL;
  if ((guint64) st.st_size > max_bytes)
    {
      g_autofree char *size = sandstep_format_size (st.st_size);
      g_autofree char *max = sandstep_format_size (max_bytes);

      sandstep_throw_too_large (error, st.st_size, max_bytes, "'%s' is %s, over the %s read limit", path, size, max);
      return NULL;
    }
  if (!g_file_get_contents (host, &data, &len, NULL))
    return throw_path (error, EIO, path), NULL;
  return g_bytes_new_take (data, len);
}

static gboolean
fake_write_file (SandstepAttachment *parent, const char *path, const void *data, gsize len, GError **error)
{
  FakeSandbox *box = attached_box (parent, error);
  g_autofree char *host = box != NULL ? host_path (box, path, error) : NULL;
  g_autofree char *dir = NULL;

  if (host == NULL)
    return FALSE;
  dir = g_path_get_dirname (host);
  if (g_mkdir_with_parents (dir, 0700) < 0)
    return throw_path (error, errno, path);
  if (!g_file_set_contents (host, data, len, NULL))
    return throw_path (error, EIO, path);
  return TRUE;
}

static gboolean
fake_put (SandstepAttachment *parent, const char *host_src, const char *dest, GError **error)
{
  g_autofree char *data = NULL;
  gsize len = 0;

  /* Single files only: enough for the tests that use a fake. */
  if (!g_file_get_contents (host_src, &data, &len, NULL))
    return sandstep_throw (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND, "Cannot read '%s' on the host",
                           host_src);
  return fake_write_file (parent, dest, data, len, error);
}

static GPtrArray *
fake_list_directory (SandstepAttachment *parent, const char *path, GError **error)
{
  FakeSandbox *box = attached_box (parent, error);
  g_autofree char *host = box != NULL ? host_path (box, path, error) : NULL;
  g_autoptr(GDir) dir = NULL;
  GPtrArray *entries;
  const char *name;

  if (host == NULL)
    return NULL;
  dir = g_dir_open (host, 0, NULL);
  if (dir == NULL)
    return throw_path (error, g_file_test (host, G_FILE_TEST_EXISTS) ? ENOTDIR : ENOENT, path), NULL;
  entries = g_ptr_array_new_with_free_func ((GDestroyNotify) sandstep_dir_entry_free);
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *full = g_build_filename (host, name, NULL);
      SandstepDirEntry *entry = g_new0 (SandstepDirEntry, 1);

      entry->name = g_strdup (name);
      entry->is_dir = g_file_test (full, G_FILE_TEST_IS_DIR) && !g_file_test (full, G_FILE_TEST_IS_SYMLINK);
      g_ptr_array_add (entries, entry);
    }
  return entries;
}

static gint64
fake_export_file (SandstepAttachment *parent, const char *path, int dest_fd, guint64 max_bytes, GError **error)
{
  g_autoptr(GBytes) bytes = fake_read_file (parent, path, (gsize) MIN (max_bytes, G_MAXSIZE), error);
  gsize len = 0;
  const char *data;

  if (bytes == NULL)
    return -1;
  data = g_bytes_get_data (bytes, &len);
  for (gsize done = 0; done < len;)
    {
      ssize_t n = write (dest_fd, data + done, len - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return sandstep_throw_errno (error, SANDSTEP_EXPORT_ERROR, SANDSTEP_EXPORT_ERROR_WRITE, errno,
                                     "Cannot write '%s' to the export destination", path), -1;
      done += n;
    }
  return (gint64) len;
}

static void
fake_free (SandstepBackend *backend)
{
  FakeBackend *fake = (FakeBackend *) backend;

  g_hash_table_unref (fake->sandboxes);
  g_free (fake->dir);
  g_free (fake);
}

static const SandstepBackendClass fake_class = {
  .name = "fake",
  .provision = fake_provision,
  .try_attach = fake_try_attach,
  .detach = fake_detach,
  .run_command = fake_run_command,
  .read_file = fake_read_file,
  .write_file = fake_write_file,
  .put = fake_put,
  .list_directory = fake_list_directory,
  .export_file = fake_export_file,
  .remaining_lifetime = fake_remaining_lifetime,
  .spec = fake_spec,
  .describe = fake_describe,
  .release = fake_release,
  .destroy = fake_destroy,
  .gc = fake_gc,
  .free = fake_free,
};

SandstepBackend *
sandstep_fake_backend_new (const char *dir)
{
  FakeBackend *fake = g_new0 (FakeBackend, 1);

  g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
  fake->parent.klass = &fake_class;
  fake->dir = g_strdup (dir);
  fake->sandboxes = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) fake_sandbox_free);
  return &fake->parent;
}

char *
sandstep_fake_backend_workspace (SandstepBackend *backend, const char *handle)
{
  FakeSandbox *box = g_hash_table_lookup (((FakeBackend *) backend)->sandboxes, handle);

  return box != NULL ? g_build_filename (box->root, "workspace", NULL) : NULL;
}
