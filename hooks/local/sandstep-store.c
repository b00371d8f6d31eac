/* sandstep-store.c: the local backend's state directory. */
#include "sandstep-store-private.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-backend.h"
#include "sandstep-error.h"
#include "sandstep-host-files.h"
#include "sandstep-json.h"
#include "sandstep-members.h"
#include "sandstep-step.h"
#include "sandstep-trust-libc.h"
#include "sandstep-units.h"

#define RECORD_VERSION 1

/* Where provisions and forks build a sandbox and write a holder entry before renaming it into place; holds
 * nothing between them but what a killed one left. */
#define STAGING_DIR "staging"
/* A record is a few hundred bytes; its env and secrets may make it larger. */
#define RECORD_MAX (1024 * 1024)


void
sandstep_record_free (SandstepRecord *record)
{
  if (record == NULL)
    return;
  g_free (record->handle);
  g_free (record->owner);
  g_free (record->holder);
  sandstep_spec_free (record->spec);
  g_free (record->parent);
  g_strfreev (record->layers);
  g_clear_pointer (&record->checkpoints, g_hash_table_unref);
  g_free (record);
}

SandstepStore *
sandstep_store_open (const char *dir, GError **error)
{
  g_autoptr(SandstepStore) store = g_new0 (SandstepStore, 1);
  static const char *const subdirs[] = { "sandboxes", "holders", "staging", "trash" };

  store->dir_fd = -1;
  store->provision_fd = -1;
  g_rec_mutex_init (&store->provision_mutex);
  store->dir = g_strdup (dir);
  if (g_mkdir_with_parents (dir, 0700) < 0)
    {
      sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                            "Could not create the state directory '%s'; set SANDSTEP_STATE_DIR to a writable directory",
                            dir);
      return NULL;
    }
  {
    char why[1024];

    if (!sandstep_state_dir_trusted (dir, why, sizeof why))
      {
        sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, "%s", why);
        return NULL;
      }
  }
  store->dir_fd = open (dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (store->dir_fd < 0)
    {
      sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                            "Could not open the state directory '%s'", dir);
      return NULL;
    }
  for (gsize i = 0; i < G_N_ELEMENTS (subdirs); i++)
    if (mkdirat (store->dir_fd, subdirs[i], 0700) < 0 && errno != EEXIST)
      {
        sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                              "Could not create '%s/%s'; set SANDSTEP_STATE_DIR to a writable directory", dir,
                              subdirs[i]);
        return NULL;
      }
  return g_steal_pointer (&store);
}

SandstepStore *
sandstep_store_adopt (int dir_fd, const char *dir)
{
  SandstepStore *store = g_new0 (SandstepStore, 1);

  store->dir_fd = dir_fd;
  store->provision_fd = -1;
  g_rec_mutex_init (&store->provision_mutex);
  store->dir = g_strdup (dir);
  return store;
}

void
sandstep_store_free (SandstepStore *store)
{
  if (store == NULL)
    return;
  if (store->dir_fd >= 0)
    close (store->dir_fd);
  if (store->provision_fd >= 0)
    close (store->provision_fd);
  g_rec_mutex_clear (&store->provision_mutex);
  g_free (store->dir);
  g_free (store);
}

char *
sandstep_store_sandbox_path (SandstepStore *store, const char *handle, const char *member)
{
  return g_build_filename (store->dir, "sandboxes", handle, member, NULL);
}

gboolean
sandstep_store_not_found (SandstepStore *store, GError **error, const char *handle)
{
  return sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_NOT_FOUND,
                         "No sandbox '%s' here: it was destroyed, or never provisioned on this machine "
                         "(state directory: '%s'); provision a new one", handle, store->dir);
}

static int compare_strings (gconstpointer a, gconstpointer b);

GPtrArray *
sandstep_record_checkpoint_names (const SandstepRecord *record)
{
  GPtrArray *names = g_ptr_array_new_with_free_func (g_free);

  if (record->checkpoints != NULL)
    {
      GHashTableIter iter;
      gpointer key;

      g_hash_table_iter_init (&iter, record->checkpoints);
      while (g_hash_table_iter_next (&iter, &key, NULL))
        g_ptr_array_add (names, g_strdup (key));
    }
  g_ptr_array_sort (names, compare_strings);
  return names;
}

static void
add_layer_list (JsonBuilder *builder, char **layers)
{
  json_builder_begin_array (builder);
  for (gsize i = 0; layers[i] != NULL; i++)
    json_builder_add_string_value (builder, layers[i]);
  json_builder_end_array (builder);
}

static JsonNode *
record_to_json (const SandstepRecord *record)
{
  g_autoptr(JsonBuilder) builder = json_builder_new ();

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "version");
  json_builder_add_int_value (builder, RECORD_VERSION);
  json_builder_set_member_name (builder, "handle");
  json_builder_add_string_value (builder, record->handle);
  json_builder_set_member_name (builder, "owner");
  json_builder_add_string_value (builder, record->owner);
  json_builder_set_member_name (builder, "holder");
  json_builder_add_string_value (builder, record->holder);
  json_builder_set_member_name (builder, "created");
  json_builder_add_int_value (builder, record->created);
  json_builder_set_member_name (builder, "expires");
  json_builder_add_int_value (builder, record->expires);
  json_builder_set_member_name (builder, "released");
  json_builder_add_boolean_value (builder, record->released);
  if (record->ends_when_idle)
    {
      json_builder_set_member_name (builder, "ends_when_idle");
      json_builder_add_boolean_value (builder, TRUE);
    }
  json_builder_set_member_name (builder, "uid");
  json_builder_add_int_value (builder, record->uid);
  json_builder_set_member_name (builder, "gid");
  json_builder_add_int_value (builder, record->gid);
  json_builder_set_member_name (builder, "spec");
  json_builder_add_value (builder, sandstep_spec_to_json (record->spec, TRUE));
  if (record->parent != NULL)
    {
      json_builder_set_member_name (builder, "parent");
      json_builder_add_string_value (builder, record->parent);
    }
  if (record->layers != NULL)
    {
      json_builder_set_member_name (builder, "layers");
      add_layer_list (builder, record->layers);
    }
  if (record->checkpoints != NULL && g_hash_table_size (record->checkpoints) > 0)
    {
      g_autoptr(GPtrArray) names = sandstep_record_checkpoint_names (record);

      json_builder_set_member_name (builder, "checkpoints");
      json_builder_begin_object (builder);
      for (guint i = 0; i < names->len; i++)
        {
          json_builder_set_member_name (builder, names->pdata[i]);
          add_layer_list (builder, g_hash_table_lookup (record->checkpoints, names->pdata[i]));
        }
      json_builder_end_object (builder);
    }
  json_builder_end_object (builder);
  return json_builder_get_root (builder);
}

static int
open_sandbox_dir (SandstepStore *store, const char *handle, GError **error)
{
  g_autofree char *rel = g_build_filename ("sandboxes", handle, NULL);
  int fd = openat (store->dir_fd, rel, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

  if (fd < 0 && errno == ENOENT)
    sandstep_store_not_found (store, error, handle);
  else if (fd < 0 && (errno == ENOTDIR || errno == ELOOP))
    sandstep_store_broken (error, handle, "'%s/sandboxes/%s' is not a directory", store->dir, handle);
  else if (fd < 0)
    sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                          "Could not open the directory of sandbox '%s'", handle);
  return fd;
}

gboolean
sandstep_store_broken (GError **error, const char *handle, const char *format, ...)
{
  va_list args;
  g_autofree char *what = NULL;

  va_start (args, format);
  what = g_strdup_vprintf (format, args);
  va_end (args);
  return sandstep_throw_broken (error, handle, "%s", what);
}

typedef enum {
  SMALL_FILE_OK,
  SMALL_FILE_MISSING,
  SMALL_FILE_NOT_REGULAR,  /* a FIFO, device, socket, directory or link in its place */
  SMALL_FILE_TOO_LARGE,
  SMALL_FILE_FAILED,       /* errno says why */
} SmallFile;

/* Reads @name in @dir_fd whole if it is a regular file of at most @cap bytes,
 * never blocking (a FIFO in its place is opened O_NONBLOCK and refused) and
 * never following a link. */
static SmallFile
read_small_file_at (int dir_fd, const char *name, gsize cap, char **out_text, gsize *out_len)
{
  g_autofree char *text = NULL;
  struct stat st;
  gsize len = 0;
  int fd = openat (dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

  if (fd < 0)
    return errno == ENOENT ? SMALL_FILE_MISSING
           : errno == ELOOP || errno == ENXIO || errno == EISDIR ? SMALL_FILE_NOT_REGULAR : SMALL_FILE_FAILED;
  if (fstat (fd, &st) < 0)
    return close (fd), SMALL_FILE_FAILED;
  if (!S_ISREG (st.st_mode))
    return close (fd), SMALL_FILE_NOT_REGULAR;
  if ((gsize) st.st_size > cap)
    return close (fd), SMALL_FILE_TOO_LARGE;
  text = g_malloc (cap + 1);
  for (;;)
    {
      ssize_t n = read (fd, text + len, cap + 1 - len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          int errsv = errno;
          close (fd);
          errno = errsv;
          return SMALL_FILE_FAILED;
        }
      if (n == 0)
        break;
      len += n;
      if (len > cap)
        return close (fd), SMALL_FILE_TOO_LARGE;
    }
  close (fd);
  text[len] = '\0';
  *out_text = g_steal_pointer (&text);
  *out_len = len;
  return SMALL_FILE_OK;
}

gboolean
sandstep_layer_id_is_valid (const char *id)
{
  gsize n = 0;

  for (; id[n] != '\0'; n++)
    if (!g_ascii_isdigit (id[n]) && !(id[n] >= 'a' && id[n] <= 'f'))
      return FALSE;
  return n == 32;
}

gboolean
sandstep_checkpoint_name_is_valid (const char *name)
{
  gsize n = 0;

  for (; name[n] != '\0'; n++)
    if (!g_ascii_isalnum (name[n]) && strchr ("._-:", name[n]) == NULL)
      return FALSE;
  return n > 0 && n <= 64 && name[0] != '.' && name[0] != '-';
}

gboolean
sandstep_store_make_rw (int dir_fd, const char *name)
{
  static const char *const dirs[] = { "tree", "tree/workspace", "tree/tmp", "tree-work", "root", "root-work" };
  g_autofree char *path = NULL;

  if (mkdirat (dir_fd, name, 0700) < 0)
    return FALSE;
  for (gsize i = 0; i < G_N_ELEMENTS (dirs); i++)
    {
      g_free (path);
      path = g_build_filename (name, dirs[i], NULL);
      /* As a provision makes them: the tree's top 0700, what the sandbox sees 0755; overlayfs's work 0700. */
      if (mkdirat (dir_fd, path, i == 0 || g_str_has_suffix (dirs[i], "-work") ? 0700 : 0755) < 0)
        return FALSE;
    }
  return TRUE;
}

/* A list of layer ids, top first, each well formed (a path component); NULL if it is not one. */
static char **
layer_list (JsonObject *object, const char *name)
{
  JsonArray *array;
  g_autoptr(GPtrArray) ids = g_ptr_array_new_with_free_func (g_free);

  if (!sandstep_member_array (object, name, &array) || json_array_get_length (array) == 0 ||
      !sandstep_member_strings (array, ids))
    return NULL;
  for (guint i = 0; i < ids->len; i++)
    if (!sandstep_layer_id_is_valid (ids->pdata[i]))
      return NULL;
  g_ptr_array_add (ids, NULL);
  return (char **) g_ptr_array_free (g_steal_pointer (&ids), FALSE);
}

/* The typed members of a record; FALSE names the first that is wrong. */
static gboolean
record_from_json (JsonObject *object, SandstepRecord *record, const char **out_bad)
{
  const char *handle, *owner, *holder, *parent = NULL;
  gint64 version, uid, gid;

#define MEMBER(ok, name) if (!(ok)) { *out_bad = (name); return FALSE; }
  MEMBER (sandstep_member_int (object, "version", &version) && version == RECORD_VERSION, "version");
  MEMBER (sandstep_member_string (object, "handle", &handle) && strcmp (handle, record->handle) == 0, "handle");
  MEMBER (sandstep_member_string (object, "owner", &owner) && owner[0] != '\0', "owner");
  MEMBER (sandstep_member_string (object, "holder", &holder) && holder[0] != '\0', "holder");
  MEMBER (sandstep_member_int (object, "created", &record->created) && record->created >= 0, "created");
  MEMBER (sandstep_member_int (object, "expires", &record->expires) && record->expires >= 0, "expires");
  MEMBER (sandstep_member_bool (object, "released", &record->released), "released");
  if (json_object_get_member (object, "ends_when_idle") != NULL)
    MEMBER (sandstep_member_bool (object, "ends_when_idle", &record->ends_when_idle), "ends_when_idle");
  MEMBER (sandstep_member_int (object, "uid", &uid) && uid >= 0 && uid <= G_MAXUINT32, "uid");
  MEMBER (sandstep_member_int (object, "gid", &gid) && gid >= 0 && gid <= G_MAXUINT32, "gid");
  if (json_object_get_member (object, "parent") != NULL)
    MEMBER (sandstep_member_string (object, "parent", &parent) && sandstep_handle_is_valid (parent), "parent");
  if (json_object_get_member (object, "layers") != NULL)
    MEMBER ((record->layers = layer_list (object, "layers")) != NULL, "layers");
  if (json_object_get_member (object, "checkpoints") != NULL)
    {
      JsonObject *checkpoints;
      g_autoptr(GList) names = NULL;

      MEMBER (sandstep_member_object (object, "checkpoints", &checkpoints), "checkpoints");
      record->checkpoints = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) g_strfreev);
      names = json_object_get_members (checkpoints);
      for (GList *l = names; l != NULL; l = l->next)
        {
          char **layers = layer_list (checkpoints, l->data);
          MEMBER (layers != NULL && sandstep_checkpoint_name_is_valid (l->data), "checkpoints");
          g_hash_table_insert (record->checkpoints, g_strdup (l->data), layers);
        }
    }
#undef MEMBER
  record->parent = g_strdup (parent);
  record->owner = g_strdup (owner);
  record->holder = g_strdup (holder);
  record->uid = (guint32) uid;
  record->gid = (guint32) gid;
  return TRUE;
}

SandstepRecord *
sandstep_store_load (SandstepStore *store, const char *handle, GError **error)
{
  g_autoptr(JsonNode) root = NULL;
  g_autoptr(SandstepRecord) record = g_new0 (SandstepRecord, 1);
  g_autoptr(GError) local_error = NULL;
  g_autofree char *text = NULL;
  const char *bad = NULL;
  gsize len = 0;
  int dir_fd;

  dir_fd = open_sandbox_dir (store, handle, error);
  if (dir_fd < 0)
    return NULL;
  switch (read_small_file_at (dir_fd, "record.json", RECORD_MAX, &text, &len))
    {
    case SMALL_FILE_OK:
      break;
    case SMALL_FILE_MISSING:
      close (dir_fd);
      sandstep_store_broken (error, handle, "it has no record (record.json)");
      return NULL;
    case SMALL_FILE_NOT_REGULAR:
      close (dir_fd);
      sandstep_store_broken (error, handle, "its record (record.json) is not a regular file");
      return NULL;
    case SMALL_FILE_TOO_LARGE:
      close (dir_fd);
      sandstep_store_broken (error, handle, "its record (record.json) is larger than %d bytes", RECORD_MAX);
      return NULL;
    case SMALL_FILE_FAILED:
      {
        int errsv = errno;
        close (dir_fd);
        sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errsv,
                              "Could not read the record of sandbox '%s' in '%s/sandboxes'", handle, store->dir);
        return NULL;
      }
    }
  {
    /* The claim beside it must be usable too, or every operator would fail later, one by one. */
    struct stat st;
    int claim_errno = fstatat (dir_fd, "claim", &st, AT_SYMLINK_NOFOLLOW) < 0 ? errno : 0;
    close (dir_fd);
    if (claim_errno == ENOENT)
      return sandstep_store_broken (error, handle, "it has no claim file"), NULL;
    if (claim_errno == 0 && !S_ISREG (st.st_mode))
      return sandstep_store_broken (error, handle, "its claim file is not a regular file"), NULL;
  }
  /* Depth checked first (json-glib would recurse through a deep one until it crashed), and an empty one is
   * refused rather than handed on as no node at all (a Json-CRITICAL in every operator). */
  root = sandstep_json_parse (text, len, RECORD_MAX, &local_error);
  if (root == NULL)
    {
      sandstep_store_broken (error, handle, "its record (record.json) is not valid JSON (%s)", local_error->message);
      return NULL;
    }
  if (!JSON_NODE_HOLDS_OBJECT (root))
    {
      sandstep_store_broken (error, handle, "its record (record.json) is not a JSON object");
      return NULL;
    }
  record->handle = g_strdup (handle);
  if (!record_from_json (json_node_get_object (root), record, &bad))
    {
      sandstep_store_broken (error, handle, "its record's member '%s' is missing or wrong", bad);
      return NULL;
    }
  record->spec = sandstep_spec_from_json (json_object_get_member (json_node_get_object (root), "spec"), &local_error);
  if (record->spec == NULL)
    {
      sandstep_store_broken (error, handle, "its record's spec is wrong (%s)", local_error->message);
      return NULL;
    }
  return g_steal_pointer (&record);
}

/* Writes @contents to @name in @dir_fd through a temporary file in @tmp_dir_fd (the same file system) and a
 * rename. */
static gboolean
replace_file_from (int tmp_dir_fd, int dir_fd, const char *dir_path, const char *name, const void *contents,
                   gsize len, mode_t mode, GError **error)
{
  g_autofree char *tmp = g_strdup_printf (".%s.%08x", name, g_random_int ());
  int fd = openat (tmp_dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  gboolean ok;

  if (fd < 0)
    return sandstep_throw_write_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                                       "Could not write '%s/%s'", dir_path, name);
  errno = ENOSPC;  /* what a short write means */
  ok = write (fd, contents, len) == (ssize_t) len;
  ok = close (fd) == 0 && ok;
  if (!ok || renameat (tmp_dir_fd, tmp, dir_fd, name) < 0)
    {
      int errsv = errno;
      unlinkat (tmp_dir_fd, tmp, 0);
      return sandstep_throw_write_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errsv,
                                         "Could not write '%s/%s'", dir_path, name);
    }
  return TRUE;
}

/* Writes @contents to @name in @dir_fd through a temporary sibling and a rename. */
static gboolean
replace_file_at (int dir_fd, const char *dir_path, const char *name, const void *contents, gsize len, mode_t mode,
                 GError **error)
{
  return replace_file_from (dir_fd, dir_fd, dir_path, name, contents, len, mode, error);
}

/* The record's lifetime, in a form the static supervisor reads: "EXPIRES RELEASED", RELEASED 0 (not released),
 * 1 (released, kept until EXPIRES) or 2 (released with nothing kept, ends_when_idle). */
static gboolean
write_lifetime (int dir_fd, const char *dir_path, const SandstepRecord *record, GError **error)
{
  int released = !record->released ? 0 : record->ends_when_idle ? 2 : 1;
  g_autofree char *text = g_strdup_printf ("%" G_GINT64_FORMAT " %d\n", record->expires, released);

  return replace_file_at (dir_fd, dir_path, "lifetime", text, strlen (text), 0600, error);
}

gboolean
sandstep_store_save (SandstepStore *store, const SandstepRecord *record, GError **error)
{
  g_autoptr(JsonNode) node = record_to_json (record);
  g_autofree char *text = json_to_string (node, TRUE);
  g_autofree char *dir = sandstep_store_sandbox_path (store, record->handle, NULL);
  int fd = open_sandbox_dir (store, record->handle, error);
  gboolean ok;

  if (fd < 0)
    return FALSE;
  ok = replace_file_at (fd, dir, "record.json", text, strlen (text), 0600, error) &&
       write_lifetime (fd, dir, record, error);
  close (fd);
  return ok;
}

gboolean
sandstep_store_write_member (SandstepStore *store, const char *handle, const char *name, const void *data,
                             gsize len, GError **error)
{
  g_autofree char *dir = sandstep_store_sandbox_path (store, handle, NULL);
  int fd = open_sandbox_dir (store, handle, error);
  gboolean ok;

  if (fd < 0)
    return FALSE;
  ok = replace_file_at (fd, dir, name, data, len, 0600, error);
  close (fd);
  return ok;
}

gboolean
sandstep_store_create (SandstepStore *store, SandstepRecord *record, GError **error)
{
  g_autofree char *staging = g_strdup_printf (STAGING_DIR "/%s", record->handle);
  g_autofree char *final = g_strdup_printf ("sandboxes/%s", record->handle);
  static const char *const dirs[] = { "tree", "tree/workspace", "tree/tmp" };
  gboolean layered = record->layers != NULL;
  g_autoptr(JsonNode) node = record_to_json (record);
  g_autofree char *text = json_to_string (node, TRUE);
  int fd;

  /* Built in staging/, renamed into place whole: a reader never sees half a sandbox.  Not under a hidden name in
   * sandboxes/ (as before): provision's sweep then lists a directory that holds only what killed provisions left,
   * never every sandbox (issue 33). */
  if (mkdirat (store->dir_fd, staging, 0700) < 0)
    return sandstep_throw_write_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                                       "Could not create a sandbox under '%s/" STAGING_DIR "'", store->dir);
  fd = openat (store->dir_fd, staging, O_PATH | O_DIRECTORY | O_CLOEXEC);
  for (gsize i = 0; fd >= 0 && !layered && i < G_N_ELEMENTS (dirs); i++)
    if (mkdirat (fd, dirs[i], i == 0 ? 0700 : 0755) < 0)
      goto fail;
  if (fd < 0 || (layered && !sandstep_store_make_rw (fd, "rw")))
    goto fail;
  /* An image's root: the sandbox's own writable layer and overlayfs's work directory beside it. */
  if (!layered && record->spec->image_digest != NULL && !record->spec->root_readonly &&
      (mkdirat (fd, "root", 0700) < 0 || mkdirat (fd, "root/upper", 0755) < 0 || mkdirat (fd, "root/work", 0700) < 0))
    goto fail;
  {
    int claim = openat (fd, "claim", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (claim < 0)
      goto fail;
    close (claim);
  }
  if (record->spec->retry_clean)
    {
      int mark = openat (fd, SANDSTEP_STEP_RETRY_CLEAN_FILE, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (mark < 0)
        goto fail;
      close (mark);
    }
  if (!replace_file_at (fd, staging, "record.json", text, strlen (text), 0600, error) ||
      !write_lifetime (fd, staging, record, error))
    {
      close (fd);
      /* Under its hidden name nobody can have claimed it. */
      sandstep_remove_tree_at (store->dir_fd, staging);
      return FALSE;
    }
  close (fd);
  if (renameat (store->dir_fd, staging, store->dir_fd, final) < 0)
    {
      fd = -1;
      goto fail;
    }
  return TRUE;

fail:
  {
    int errsv = errno;
    if (fd >= 0)
      close (fd);
    sandstep_remove_tree_at (store->dir_fd, staging);
    sandstep_throw_write_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errsv,
                                "Could not create sandbox '%s' under '%s/sandboxes'", record->handle, store->dir);
    return FALSE;
  }
}

gboolean
sandstep_store_lock_provision (SandstepStore *store, GError **error)
{
  struct stat st;
  int fd;

  /* The mutex keeps out the other threads of this process (sandstepd's), which
   * share the store; the flock, other processes.  Nested in one thread:
   * destroying a sandbox forgets its holder under this lock, also from within
   * a provision. */
  g_rec_mutex_lock (&store->provision_mutex);
  if (store->provision_depth++ > 0)
    return TRUE;
  fd = openat (store->dir_fd, "provision.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
  if (fd >= 0 && (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode)))
    {
      close (fd);
      store->provision_depth--;
      g_rec_mutex_unlock (&store->provision_mutex);
      return sandstep_throw (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                             "'%s/provision.lock' is not a regular file; remove it", store->dir);
    }
  if (fd < 0 || flock (fd, LOCK_EX) < 0)
    {
      sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errno,
                            "Could not lock '%s/provision.lock'", store->dir);
      if (fd >= 0)
        close (fd);
      store->provision_depth--;
      g_rec_mutex_unlock (&store->provision_mutex);
      return FALSE;
    }
  store->provision_fd = fd;
  return TRUE;
}

void
sandstep_store_unlock_provision (SandstepStore *store)
{
  g_return_if_fail (store->provision_depth > 0);
  if (--store->provision_depth == 0)
    close (g_steal_fd (&store->provision_fd));
  g_rec_mutex_unlock (&store->provision_mutex);
}

static char *
holder_key (const char *owner, const char *holder)
{
  g_autoptr(GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);

  g_checksum_update (sum, (const guchar *) owner, strlen (owner) + 1);
  g_checksum_update (sum, (const guchar *) holder, strlen (holder));
  return g_strconcat ("holders/", g_checksum_get_string (sum), NULL);
}

char *
sandstep_store_find_holder (SandstepStore *store, const char *owner, const char *holder)
{
  g_autofree char *key = holder_key (owner, holder);
  g_autofree char *text = NULL;
  gsize len;

  if (read_small_file_at (store->dir_fd, key, 128, &text, &len) != SMALL_FILE_OK)
    return NULL;
  g_strchomp (text);
  return sandstep_handle_is_valid (text) ? g_steal_pointer (&text) : NULL;
}

gboolean
sandstep_store_set_holder (SandstepStore *store, const char *owner, const char *holder, const char *handle,
                           GError **error)
{
  g_autofree char *key = holder_key (owner, holder);
  g_autofree char *text = g_strconcat (handle, "\n", NULL);
  g_autofree char *holders_path = g_build_filename (store->dir, "holders", NULL);
  int fd = openat (store->dir_fd, "holders", O_PATH | O_DIRECTORY | O_CLOEXEC);
  int staging_fd = openat (store->dir_fd, STAGING_DIR, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  gboolean ok;

  if (fd < 0 || staging_fd < 0)
    {
      int errsv = errno;
      if (fd >= 0)
        close (fd);
      if (staging_fd >= 0)
        close (staging_fd);
      return sandstep_throw_errno (error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE, errsv,
                                   "Could not open '%s/%s'", store->dir, fd < 0 ? "holders" : STAGING_DIR);
    }
  {
    /* Damage in the entry's place that a rename cannot replace (a directory) would block the holder for good:
     * the name is ours, and we hold the provision lock. */
    struct stat st;
    if (fstatat (fd, key + strlen ("holders/"), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR (st.st_mode))
      sandstep_remove_tree_at (fd, key + strlen ("holders/"));
  }
  /* The temporary file in staging/, which provision's sweep empties, so that it never lists holders/. */
  ok = replace_file_from (staging_fd, fd, holders_path, key + strlen ("holders/"), text, strlen (text), 0600, error);
  close (staging_fd);
  close (fd);
  return ok;
}

void
sandstep_store_forget_holder (SandstepStore *store, const char *owner, const char *holder, const char *handle)
{
  g_autofree char *key = holder_key (owner, holder);
  g_autofree char *current = NULL;

  /* Under the lock, so that a provision cannot point the holder at a new sandbox in between. */
  if (!sandstep_store_lock_provision (store, NULL))
    return;
  current = sandstep_store_find_holder (store, owner, holder);
  if (g_strcmp0 (current, handle) == 0)
    unlinkat (store->dir_fd, key, 0);
  sandstep_store_unlock_provision (store);
}

/* Calls @func on each entry of @rel (a directory of the store) but "." and "..". */
static void
for_each_entry (SandstepStore *store, const char *rel, void (*func) (SandstepStore *store, int dir_fd,
                                                                        const char *name))
{
  g_autoptr(GPtrArray) names = sandstep_list_entries_at (store->dir_fd, rel);
  int fd;

  if (names == NULL || (fd = openat (store->dir_fd, rel, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
    return;
  for (guint i = 0; i < names->len; i++)
    func (store, fd, names->pdata[i]);
  close (fd);
}

/* A sandbox half made in sandboxes/ under a hidden name by a provision of a build before staging/. */
static void
sweep_half_made (SandstepStore *store, int dir_fd, const char *name)
{
  if (g_str_has_prefix (name, ".new-"))
    sandstep_remove_tree_at (dir_fd, name);
}

/* What a killed provision or fork left in staging/: a half-made sandbox or a holder entry's temporary file (they
 * hold the lock, so nothing there is being built). */
static void
sweep_staging (SandstepStore *store, int dir_fd, const char *name)
{
  sandstep_remove_tree_at (dir_fd, name);
}

/* A temporary name of replace_file_at(), left by a kill before its rename (holder entries of a build before
 * staging/ had them in holders/). */
static gboolean
sweep_holder_temporary (SandstepStore *store, int dir_fd, const char *name)
{
  if (name[0] != '.')
    return FALSE;
  unlinkat (dir_fd, name, 0);
  return TRUE;
}

static void
sweep_holder (SandstepStore *store, int dir_fd, const char *name)
{
  g_autofree char *text = NULL;
  g_autofree char *rel = NULL;
  struct stat st;
  gsize len;

  if (sweep_holder_temporary (store, dir_fd, name))
    return;
  if (read_small_file_at (dir_fd, name, 128, &text, &len) == SMALL_FILE_OK)
    {
      g_strchomp (text);
      rel = sandstep_handle_is_valid (text) ? g_build_filename ("sandboxes", text, NULL) : NULL;
    }
  /* Pointing at nothing (its sandbox is gone) or at nothing readable. */
  if (rel == NULL || (fstatat (store->dir_fd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT))
    unlinkat (dir_fd, name, 0);
}

void
sandstep_store_sweep (SandstepStore *store, gboolean holders)
{
  if (!sandstep_store_lock_provision (store, NULL))
    return;
  /* Every provision: staging/ and the trash only, which hold what killed operators left, so that a provision's
   * cost does not grow with the sandboxes there are.  With @holders (gc and list, which read every sandbox
   * anyway) also sandboxes/ and holders/. */
  for_each_entry (store, STAGING_DIR, sweep_staging);
  if (holders)
    {
      for_each_entry (store, "sandboxes", sweep_half_made);
      for_each_entry (store, "holders", sweep_holder);
    }
  sandstep_store_unlock_provision (store);
  /* Trees whose removal was cut short; nothing else ever enters the trash. */
  {
    int trash_fd = openat (store->dir_fd, "trash", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (trash_fd >= 0)
      {
        sandstep_remove_entries_at (trash_fd);
        close (trash_fd);
      }
  }
}

gboolean
sandstep_store_is_over (SandstepStore *store, const char *handle, const SandstepRecord *record)
{
  gint64 now = g_get_real_time () / G_USEC_PER_SEC;
  g_autofree char *dir = g_build_filename ("sandboxes", handle, NULL);
  g_autofree char *text = NULL;
  gint64 expires = 0;
  struct stat st;
  gsize len;
  int dir_fd;

  if (record != NULL)
    return now >= record->expires;
  /* Damaged: the lifetime file beside the record may still say; else only age proves it over. */
  dir_fd = openat (store->dir_fd, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd >= 0)
    {
      if (read_small_file_at (dir_fd, "lifetime", 64, &text, &len) == SMALL_FILE_OK &&
          sscanf (text, "%" G_GINT64_FORMAT, &expires) == 1 && expires > 0)
        {
          close (dir_fd);
          return now >= expires;
        }
      close (dir_fd);
    }
  if (fstatat (store->dir_fd, dir, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT;
  return now - MAX (st.st_mtime, st.st_ctime) > SANDSTEP_MAX_DURATION_S;
}

static int
compare_strings (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

GPtrArray *
sandstep_store_list (SandstepStore *store)
{
  GPtrArray *handles = g_ptr_array_new_with_free_func (g_free);
  int fd = openat (store->dir_fd, "sandboxes", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *dir = fd >= 0 ? fdopendir (fd) : NULL;
  struct dirent *entry;

  if (dir == NULL)
    {
      if (fd >= 0)
        close (fd);
      return handles;
    }
  while ((entry = readdir (dir)) != NULL)
    if (sandstep_handle_is_valid (entry->d_name))
      g_ptr_array_add (handles, g_strdup (entry->d_name));
  closedir (dir);
  g_ptr_array_sort (handles, compare_strings);
  return handles;
}
