/* sandstep-image-store.c: the content-addressed blob and layer store (sandstep-image-store.h). */
#include "sandstep-image-store.h"

#include <errno.h>
#include <fcntl.h>
#include <json-glib/json-glib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-host-files.h"
#include "sandstep-error.h"
#include "sandstep-image-ref.h"
#include "sandstep-state-dir.h"
#include "sandstep-test-hooks.h"

#define HINT_STORE "check the image store's directory (SANDSTEP_IMAGE_DIR)"

char *
sandstep_image_store_default_dir (void)
{
  const char *env = g_getenv ("SANDSTEP_IMAGE_DIR");
  g_autofree char *state = NULL;

  if (env != NULL && *env != '\0')
    return g_strdup (env);
  state = sandstep_state_dir ();
  return g_build_filename (state, "images", NULL);
}

static gboolean
store_throw_errno (GError **error, int errsv, const char *what, const char *dir)
{
  return sandstep_throw_write_errno (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_STORE, errsv,
                                     "image store '%s': %s", dir, what);
}

SandstepImageStore *
sandstep_image_store_open (const char *dir, gboolean exclusive, GError **error)
{
  static const char *const subdirs[] = { "locks", "blobs", "blobs/sha256", "layers", "layers/sha256", "images" };
  g_autoptr(SandstepImageStore) store = g_new0 (SandstepImageStore, 1);

  store->dir = g_strdup (dir);
  store->dir_fd = -1;
  store->lock_fd = -1;
  if (g_mkdir_with_parents (dir, 0700) < 0)
    {
      store_throw_errno (error, errno, "cannot create it", dir);
      return NULL;
    }
  store->dir_fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (store->dir_fd < 0)
    {
      store_throw_errno (error, errno, "cannot open it", dir);
      return NULL;
    }
  for (gsize i = 0; i < G_N_ELEMENTS (subdirs); i++)
    if (mkdirat (store->dir_fd, subdirs[i], 0700) < 0 && errno != EEXIST)
      {
        g_autofree char *what = g_strdup_printf ("cannot create '%s' in it; " HINT_STORE, subdirs[i]);
        store_throw_errno (error, errno, what, dir);
        return NULL;
      }
  store->lock_fd = openat (store->dir_fd, "store.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (store->lock_fd < 0 || flock (store->lock_fd, exclusive ? LOCK_EX : LOCK_SH) < 0)
    {
      store_throw_errno (error, errno, "cannot lock store.lock", dir);
      return NULL;
    }
  return g_steal_pointer (&store);
}

void
sandstep_image_store_free (SandstepImageStore *store)
{
  if (store == NULL)
    return;
  if (store->lock_fd >= 0)
    close (store->lock_fd);
  if (store->dir_fd >= 0)
    close (store->dir_fd);
  g_free (store->dir);
  g_free (store);
}

static const char *
hex_of (const char *digest)
{
  g_return_val_if_fail (sandstep_image_digest_is_valid (digest), NULL);
  return digest + strlen ("sha256:");
}

int
sandstep_image_store_lock_digest (SandstepImageStore *store, const char *digest, GError **error)
{
  g_autofree char *name = g_strdup_printf ("locks/%s.lock", hex_of (digest));
  int fd = openat (store->dir_fd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

  if (fd < 0 || flock (fd, LOCK_EX) < 0)
    {
      int errsv = errno;
      if (fd >= 0)
        close (fd);
      store_throw_errno (error, errsv, "cannot lock a blob's lock file", store->dir);
      return -1;
    }
  return fd;
}

static char *
blob_name (const char *digest)
{
  return g_strdup_printf ("blobs/sha256/%s", hex_of (digest));
}

gboolean
sandstep_image_store_has_blob (SandstepImageStore *store, const char *digest)
{
  g_autofree char *name = blob_name (digest);
  struct stat st;

  return fstatat (store->dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG (st.st_mode);
}

void
sandstep_image_store_remove_blob (SandstepImageStore *store, const char *digest)
{
  g_autofree char *name = blob_name (digest);

  unlinkat (store->dir_fd, name, 0);
}

int
sandstep_image_store_open_blob (SandstepImageStore *store, const char *digest, GError **error)
{
  g_autofree char *name = blob_name (digest);
  int fd = openat (store->dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

  if (fd < 0)
    sandstep_throw_errno (error, SANDSTEP_IMAGE_ERROR, errno == ENOENT ? SANDSTEP_IMAGE_ERROR_NOT_FOUND
                                                                        : SANDSTEP_IMAGE_ERROR_STORE, errno,
                          "image store '%s': blob '%s'", store->dir, digest);
  return fd;
}

GBytes *
sandstep_image_store_read_blob (SandstepImageStore *store, const char *digest, gsize max, GError **error)
{
  int fd = sandstep_image_store_open_blob (store, digest, error);
  struct stat st;
  g_autofree char *data = NULL;
  gsize done = 0;

  if (fd < 0)
    return NULL;
  if (fstat (fd, &st) < 0 || (guint64) st.st_size > max)
    {
      close (fd);
      sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_TOO_LARGE,
                      "blob '%s' is larger than %" G_GSIZE_FORMAT " bytes, the most a manifest or config may be",
                      digest, max);
      return NULL;
    }
  data = g_malloc (st.st_size + 1);
  while (done < (gsize) st.st_size)
    {
      ssize_t n = read (fd, data + done, st.st_size - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        {
          int errsv = n < 0 ? errno : EIO;
          close (fd);
          store_throw_errno (error, errsv, "cannot read a blob", store->dir);
          return NULL;
        }
      done += n;
    }
  close (fd);
  return g_bytes_new_take (g_steal_pointer (&data), done);
}

/* ---- writing a blob ---- */

struct _SandstepImageBlobWriter {
  SandstepImageStore *store;
  char *digest;
  guint64 size;
  guint64 written;
  guint64 kill_after;   /* a test hook: SIGKILL ourselves once this many bytes are written (0: never) */
  GChecksum *checksum;
  int fd;
};

SandstepImageBlobWriter *
sandstep_image_blob_writer_new (SandstepImageStore *store, const char *digest, guint64 size, GError **error)
{
  g_autoptr(SandstepImageBlobWriter) writer = g_new0 (SandstepImageBlobWriter, 1);
  const char *kill_after = sandstep_test_hook ("SANDSTEP_TEST_IMAGE_KILL_AFTER");

  writer->store = store;
  writer->digest = g_strdup (digest);
  writer->size = size;
  writer->checksum = g_checksum_new (G_CHECKSUM_SHA256);
  if (kill_after != NULL)
    writer->kill_after = g_ascii_strtoull (kill_after, NULL, 10);
  /* Unnamed until verified: a pull killed now leaves no file at all. */
  writer->fd = openat (store->dir_fd, "blobs/sha256", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  if (writer->fd < 0)
    {
      store_throw_errno (error, errno, "cannot make an unnamed file in blobs/sha256 (O_TMPFILE); " HINT_STORE,
                         store->dir);
      return NULL;
    }
  return g_steal_pointer (&writer);
}

void
sandstep_image_blob_writer_free (SandstepImageBlobWriter *writer)
{
  if (writer == NULL)
    return;
  if (writer->fd >= 0)
    close (writer->fd);
  g_checksum_free (writer->checksum);
  g_free (writer->digest);
  g_free (writer);
}

guint64
sandstep_image_blob_writer_get_written (SandstepImageBlobWriter *writer)
{
  return writer->written;
}

gboolean
sandstep_image_blob_writer_write_fd (SandstepImageBlobWriter *writer, int fd, SandstepImageBytesFunc on_bytes,
                                     gpointer data, const char *text, const char *what, GError **error)
{
  char buf[65536];

  for (;;)
    {
      ssize_t n = read (fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          int errsv = errno;
          close (fd);
          return sandstep_throw_errno (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_FAILED, errsv,
                                       "image '%s': cannot read %s", text, what);
        }
      if (n == 0)
        break;
      if (!sandstep_image_blob_writer_write (writer, buf, n, error))
        {
          close (fd);
          return FALSE;
        }
      if (on_bytes != NULL)
        on_bytes (sandstep_image_blob_writer_get_written (writer), data);
    }
  close (fd);
  return TRUE;
}

gboolean
sandstep_image_blob_writer_write (SandstepImageBlobWriter *writer, const void *data, gsize len, GError **error)
{
  const char *p = data;

  if (writer->written + len > writer->size)
    return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_TOO_LARGE,
                           "blob '%s' is longer than the %" G_GUINT64_FORMAT " bytes its manifest declares; "
                           "the image is refused", writer->digest, writer->size);
  g_checksum_update (writer->checksum, data, len);
  while (len > 0)
    {
      ssize_t n = write (writer->fd, p, len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return store_throw_errno (error, errno, "cannot write a blob", writer->store->dir);
      p += n;
      len -= n;
      writer->written += n;
    }
  if (writer->kill_after > 0 && writer->written >= writer->kill_after)
    raise (SIGKILL);
  return TRUE;
}

gboolean
sandstep_image_blob_writer_commit (SandstepImageBlobWriter *writer, GError **error)
{
  g_autofree char *got = g_strconcat ("sha256:", g_checksum_get_string (writer->checksum), NULL);
  g_autofree char *proc = g_strdup_printf ("/proc/self/fd/%d", writer->fd);
  g_autofree char *name = blob_name (writer->digest);

  if (writer->written != writer->size)
    return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_DIGEST,
                           "blob '%s' ended after %" G_GUINT64_FORMAT " of the %" G_GUINT64_FORMAT " bytes its "
                           "manifest declares (truncated); nothing was kept, pull again",
                           writer->digest, writer->written, writer->size);
  if (strcmp (got, writer->digest) != 0)
    return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_DIGEST,
                           "blob '%s' does not match its digest (its bytes hash to '%s'): the source is corrupt or "
                           "tampered with; nothing was kept", writer->digest, got);
  if (fchmod (writer->fd, 0444) < 0 || fdatasync (writer->fd) < 0)
    return store_throw_errno (error, errno, "cannot finish a blob", writer->store->dir);
  /* linkat() of /proc/self/fd/N names an O_TMPFILE without CAP_DAC_READ_SEARCH. */
  if (linkat (AT_FDCWD, proc, writer->store->dir_fd, name, AT_SYMLINK_FOLLOW) < 0 && errno != EEXIST)
    return store_throw_errno (error, errno, "cannot name a verified blob", writer->store->dir);
  return TRUE;
}

/* ---- layers ---- */

char *
sandstep_image_store_layer_path (SandstepImageStore *store, const char *digest)
{
  return g_build_filename (store->dir, "layers", "sha256", hex_of (digest), NULL);
}

gboolean
sandstep_image_store_has_layer (SandstepImageStore *store, const char *digest)
{
  g_autofree char *name = g_strdup_printf ("layers/sha256/%s", hex_of (digest));
  struct stat st;

  return fstatat (store->dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR (st.st_mode);
}

guint64
sandstep_image_store_layer_size (SandstepImageStore *store, const char *digest)
{
  g_autofree char *path = g_strdup_printf ("%s/layers/sha256/%s.size", store->dir, hex_of (digest));
  g_autofree char *text = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return 0;
  return g_ascii_strtoull (text, NULL, 10);
}

/* Removes the leftovers of earlier unpacks of @hex (all of them with @hex NULL). */
static void
remove_layer_leftovers (SandstepImageStore *store, const char *hex)
{
  int fd = openat (store->dir_fd, "layers", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  g_autoptr(GPtrArray) names = NULL;
  g_autofree char *prefix = g_strdup_printf (".tmp-%s-", hex != NULL ? hex : "");

  if (fd < 0)
    return;
  names = sandstep_list_entries_at (fd, ".");
  for (guint i = 0; names != NULL && i < names->len; i++)
    if (g_str_has_prefix (names->pdata[i], prefix))
      sandstep_remove_tree_at (fd, names->pdata[i]);
  close (fd);
}

int
sandstep_image_store_begin_layer (SandstepImageStore *store, const char *digest, char **out_tmp_name,
                                  GError **error)
{
  const char *hex = hex_of (digest);
  g_autofree char *tmp = NULL;
  int fd;

  remove_layer_leftovers (store, hex);
  tmp = g_strdup_printf ("layers/.tmp-%s-%d", hex, (int) getpid ());
  if (mkdirat (store->dir_fd, tmp, 0755) < 0)
    {
      store_throw_errno (error, errno, "cannot make a directory to unpack a layer in", store->dir);
      return -1;
    }
  fd = openat (store->dir_fd, tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    {
      store_throw_errno (error, errno, "cannot open a directory to unpack a layer in", store->dir);
      return -1;
    }
  *out_tmp_name = g_steal_pointer (&tmp);
  return fd;
}

gboolean
sandstep_image_store_commit_layer (SandstepImageStore *store, const char *digest, const char *tmp_name, guint64 size,
                                   GError **error)
{
  const char *hex = hex_of (digest);
  g_autofree char *size_path = g_strdup_printf ("%s/layers/sha256/%s.size", store->dir, hex);
  g_autofree char *size_text = g_strdup_printf ("%" G_GUINT64_FORMAT "\n", size);
  g_autofree char *name = g_strdup_printf ("layers/sha256/%s", hex);
  g_autoptr(GError) local = NULL;

  if (!g_file_set_contents (size_path, size_text, -1, &local))
    return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_STORE, "image store '%s': %s",
                           store->dir, local->message);
  syncfs (store->dir_fd);
  /* The layer appears whole or not at all. */
  if (renameat (store->dir_fd, tmp_name, store->dir_fd, name) < 0)
    return store_throw_errno (error, errno, "cannot name an unpacked layer", store->dir);
  return TRUE;
}

void
sandstep_image_store_abort_layer (SandstepImageStore *store, const char *tmp_name)
{
  sandstep_remove_tree_at (store->dir_fd, tmp_name);
}

/* ---- image records ---- */

SandstepImageRecord *
sandstep_image_record_new (void)
{
  SandstepImageRecord *record = g_new0 (SandstepImageRecord, 1);

  record->references = g_ptr_array_new_with_free_func (g_free);
  record->layers = g_ptr_array_new_with_free_func (g_free);
  return record;
}

void
sandstep_image_record_free (SandstepImageRecord *record)
{
  if (record == NULL)
    return;
  g_free (record->digest);
  g_free (record->config);
  g_ptr_array_unref (record->references);
  g_ptr_array_unref (record->layers);
  g_free (record);
}

static gboolean
has_string (GPtrArray *array, const char *s)
{
  for (guint i = 0; i < array->len; i++)
    if (strcmp (array->pdata[i], s) == 0)
      return TRUE;
  return FALSE;
}

static SandstepImageRecord *
record_from_file (SandstepImageStore *store, const char *name)
{
  g_autofree char *path = g_build_filename (store->dir, "images", name, NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(SandstepImageRecord) record = sandstep_image_record_new ();
  JsonObject *o;
  JsonArray *a;

  if (!json_parser_load_from_file (parser, path, NULL) || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return NULL;
  o = json_node_get_object (json_parser_get_root (parser));
  record->digest = g_strdup (json_object_get_string_member_with_default (o, "digest", ""));
  record->config = g_strdup (json_object_get_string_member_with_default (o, "config", ""));
  if (!sandstep_image_digest_is_valid (record->digest))
    return NULL;
  a = json_object_get_array_member (o, "references");
  for (guint i = 0; a != NULL && i < json_array_get_length (a); i++)
    g_ptr_array_add (record->references, g_strdup (json_array_get_string_element (a, i)));
  a = json_object_get_array_member (o, "layers");
  for (guint i = 0; a != NULL && i < json_array_get_length (a); i++)
    {
      const char *d = json_array_get_string_element (a, i);
      if (!sandstep_image_digest_is_valid (d))
        return NULL;
      g_ptr_array_add (record->layers, g_strdup (d));
    }
  record->size = json_object_get_int_member_with_default (o, "size", 0);
  record->pulled = json_object_get_int_member_with_default (o, "pulled", 0);
  record->last_used = json_object_get_int_member_with_default (o, "last_used", 0);
  return g_steal_pointer (&record);
}

gboolean
sandstep_image_store_save_record (SandstepImageStore *store, const SandstepImageRecord *record, GError **error)
{
  g_autofree char *name = g_strdup_printf ("%s.json", hex_of (record->digest));
  g_autofree char *path = g_build_filename (store->dir, "images", name, NULL);
  g_autoptr(SandstepImageRecord) old = record_from_file (store, name);
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autofree char *text = NULL;
  g_autoptr(GError) local = NULL;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "digest");
  json_builder_add_string_value (b, record->digest);
  json_builder_set_member_name (b, "references");
  json_builder_begin_array (b);
  for (guint i = 0; old != NULL && i < old->references->len; i++)
    if (!has_string (record->references, old->references->pdata[i]))
      json_builder_add_string_value (b, old->references->pdata[i]);
  for (guint i = 0; i < record->references->len; i++)
    json_builder_add_string_value (b, record->references->pdata[i]);
  json_builder_end_array (b);
  json_builder_set_member_name (b, "config");
  json_builder_add_string_value (b, record->config);
  json_builder_set_member_name (b, "layers");
  json_builder_begin_array (b);
  for (guint i = 0; i < record->layers->len; i++)
    json_builder_add_string_value (b, record->layers->pdata[i]);
  json_builder_end_array (b);
  json_builder_set_member_name (b, "size");
  json_builder_add_int_value (b, record->size);
  json_builder_set_member_name (b, "pulled");
  json_builder_add_int_value (b, old != NULL && old->pulled > 0 ? old->pulled : record->pulled);
  json_builder_set_member_name (b, "last_used");
  json_builder_add_int_value (b, record->last_used);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  text = json_to_string (root, TRUE);
  if (!g_file_set_contents (path, text, -1, &local))
    return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_STORE, "image store '%s': %s",
                           store->dir, local->message);
  return TRUE;
}

static gint
by_last_use (gconstpointer a, gconstpointer b)
{
  const SandstepImageRecord *ra = *(SandstepImageRecord *const *) a, *rb = *(SandstepImageRecord *const *) b;

  return (ra->last_used > rb->last_used) - (ra->last_used < rb->last_used);
}

GPtrArray *
sandstep_image_store_list (SandstepImageStore *store, GError **error)
{
  g_autoptr(GPtrArray) records = g_ptr_array_new_with_free_func ((GDestroyNotify) sandstep_image_record_free);
  g_autoptr(GPtrArray) names = sandstep_list_entries_at (store->dir_fd, "images");

  if (names == NULL)
    {
      store_throw_errno (error, errno, "cannot read images/", store->dir);
      return NULL;
    }
  for (guint i = 0; i < names->len; i++)
    {
      SandstepImageRecord *record;
      if (!g_str_has_suffix (names->pdata[i], ".json"))
        continue;
      record = record_from_file (store, names->pdata[i]);
      if (record != NULL)
        g_ptr_array_add (records, record);
      else
        g_debug ("image store '%s': images/%s cannot be read; skipped", store->dir, (char *) names->pdata[i]);
    }
  g_ptr_array_sort (records, by_last_use);
  return g_steal_pointer (&records);
}

char *
sandstep_image_store_find_reference (SandstepImageStore *store, const char *reference)
{
  g_autoptr(GPtrArray) records = sandstep_image_store_list (store, NULL);
  const SandstepImageRecord *found = NULL;

  for (guint i = 0; records != NULL && i < records->len; i++)
    {
      const SandstepImageRecord *record = records->pdata[i];
      if (has_string (record->references, reference) && (found == NULL || record->pulled >= found->pulled))
        found = record;
    }
  return found != NULL ? g_strdup (found->digest) : NULL;
}

static gint
by_string (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

GPtrArray *
sandstep_image_store_users (SandstepImageStore *store, const char *digest)
{
  g_autofree char *users = g_strdup_printf ("images/%s.users", hex_of (digest));
  GPtrArray *names = sandstep_list_entries_at (store->dir_fd, users);

  if (names == NULL)
    return g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_sort (names, by_string);
  return names;
}

/* TRUE when a sandbox has put its name in images/HEX.users/. */
static gboolean
record_in_use (SandstepImageStore *store, const SandstepImageRecord *record)
{
  g_autoptr(GPtrArray) names = sandstep_image_store_users (store, record->digest);

  return names->len > 0;
}

/* Bytes of @name under @dir_fd and everything in it, links not followed. */
static guint64
tree_size_at (int dir_fd, const char *name)
{
  struct stat st;
  guint64 total;
  g_autoptr(GPtrArray) names = NULL;
  int fd;

  if (fstatat (dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return 0;
  total = (guint64) st.st_blocks * 512;
  if (!S_ISDIR (st.st_mode))
    return total;
  fd = openat (dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return total;
  names = sandstep_list_entries_at (fd, ".");
  for (guint i = 0; names != NULL && i < names->len; i++)
    total += tree_size_at (fd, names->pdata[i]);
  close (fd);
  return total;
}

/* Removes the entries of @sub (a directory of the store) whose digest @keep lacks, with the HEX.size
 * beside a layer; adds the bytes they took to *@bytes. */
static void
sweep (SandstepImageStore *store, const char *sub, GHashTable *keep, guint64 *bytes)
{
  int fd = openat (store->dir_fd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  g_autoptr(GPtrArray) names = NULL;

  if (fd < 0)
    return;
  names = sandstep_list_entries_at (fd, ".");
  for (guint i = 0; names != NULL && i < names->len; i++)
    {
      const char *n = names->pdata[i];
      g_autofree char *hex = g_strndup (n, strcspn (n, "."));
      g_autofree char *digest = g_strconcat ("sha256:", hex, NULL);

      if (g_hash_table_contains (keep, digest) && (strchr (n, '.') == NULL || g_str_has_suffix (n, ".size")))
        continue;
      *bytes += tree_size_at (fd, n);
      sandstep_remove_tree_at (fd, n);
    }
  close (fd);
}

gboolean
sandstep_image_store_gc (SandstepImageStore *store, guint *out_images, guint64 *out_bytes, GError **error)
{
  g_autoptr(GPtrArray) records = sandstep_image_store_list (store, error);
  g_autoptr(GHashTable) keep = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  guint removed = 0;
  guint64 bytes = 0;

  if (records == NULL)
    return FALSE;
  for (guint i = 0; i < records->len; i++)
    {
      SandstepImageRecord *record = records->pdata[i];
      g_autofree char *name = g_strdup_printf ("images/%s.json", hex_of (record->digest));

      if (record_in_use (store, record))
        {
          g_hash_table_add (keep, g_strdup (record->digest));
          g_hash_table_add (keep, g_strdup (record->config));
          for (guint l = 0; l < record->layers->len; l++)
            g_hash_table_add (keep, g_strdup (record->layers->pdata[l]));
          continue;
        }
      if (unlinkat (store->dir_fd, name, 0) < 0 && errno != ENOENT)
        return store_throw_errno (error, errno, "cannot remove an image record", store->dir);
      removed++;
    }
  sweep (store, "blobs/sha256", keep, &bytes);
  sweep (store, "layers/sha256", keep, &bytes);
  remove_layer_leftovers (store, NULL);
  /* No pull holds one now (the store is ours alone); a later pull makes its own again. */
  {
    int fd = openat (store->dir_fd, "locks", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0)
      {
        sandstep_remove_entries_at (fd);
        close (fd);
      }
  }
  *out_images = removed;
  *out_bytes = bytes;
  return TRUE;
}
