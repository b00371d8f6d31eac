/* test-tree.c: the host-side file tools never reach outside a sandbox's tree.
 *
 * Each case builds BASE/tree/{workspace,tmp} (the sandbox's files) beside
 * BASE/outside (host files a hostile tree would like to reach), then checks
 * results and error codes, and that BASE/outside never changes.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-backend.h"
#include "sandstep-error.h"
#include "sandstep-host-files.h"
#include "sandstep-tree.h"

#define SECRET "TOP-SECRET-HOST-CONTENT"

typedef struct {
  char *base;
  char *tree;
  char *outside;
  int fd;
} Tree;

static int
remove_entry (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  return remove (path);
}

static void
tree_free (Tree *t)
{
  if (t->fd >= 0)
    close (t->fd);
  g_assert_cmpint (nftw (t->base, remove_entry, 16, FTW_DEPTH | FTW_PHYS), ==, 0);
  g_free (t->base);
  g_free (t->tree);
  g_free (t->outside);
  g_free (t);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Tree, tree_free)

static char *
tree_host_path (Tree *t, const char *rel)
{
  return g_build_filename (t->tree, rel, NULL);
}

static void
host_write (const char *path, const char *data, gssize len)
{
  g_autoptr(GError) error = NULL;

  g_file_set_contents (path, data, len, &error);
  g_assert_no_error (error);
}

static void
host_mkdir (const char *path)
{
  g_assert_cmpint (mkdir (path, 0755), ==, 0);
}

static void
host_symlink (const char *target, const char *path)
{
  g_assert_cmpint (symlink (target, path), ==, 0);
}

static Tree *
tree_new (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *workspace = NULL;
  g_autofree char *tmp = NULL;
  g_autofree char *secret = NULL;
  Tree *t = g_new0 (Tree, 1);

  t->fd = -1;
  t->base = g_dir_make_tmp ("sandstep-test-tree-XXXXXX", &error);
  g_assert_no_error (error);
  t->tree = g_build_filename (t->base, "tree", NULL);
  t->outside = g_build_filename (t->base, "outside", NULL);
  workspace = g_build_filename (t->tree, "workspace", NULL);
  tmp = g_build_filename (t->tree, "tmp", NULL);
  secret = g_build_filename (t->outside, "secret", NULL);
  host_mkdir (t->tree);
  host_mkdir (workspace);
  host_mkdir (tmp);
  host_mkdir (t->outside);
  host_write (secret, SECRET, -1);

  t->fd = sandstep_tree_open (t->tree, &error);
  g_assert_no_error (error);
  g_assert_cmpint (t->fd, >=, 0);
  return t;
}

static int
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* Names and contents under BASE/outside, to show that nothing there changed. */
static char *
outside_snapshot (Tree *t)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GDir) dir = g_dir_open (t->outside, 0, &error);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GString) snapshot = g_string_new (NULL);
  const char *name;

  g_assert_no_error (error);
  while ((name = g_dir_read_name (dir)) != NULL)
    g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, compare_names);
  for (guint i = 0; i < names->len; i++)
    {
      g_autofree char *path = g_build_filename (t->outside, names->pdata[i], NULL);
      g_autofree char *contents = NULL;

      g_string_append_printf (snapshot, "%s=", (char *) names->pdata[i]);
      if (g_file_get_contents (path, &contents, NULL, NULL))
        g_string_append (snapshot, contents);
      g_string_append_c (snapshot, '\n');
    }
  return g_string_free (g_steal_pointer (&snapshot), FALSE);
}

static void
assert_read_error (Tree *t, const char *path, int code)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) bytes = sandstep_tree_read_file (t->fd, path, SANDSTEP_DEFAULT_READ_MAX, &error);

  g_assert_null (bytes);
  g_assert_error (error, SANDSTEP_PATH_ERROR, code);
  g_assert_null (strstr (error->message, SECRET));
  g_assert_null (strstr (error->message, "root:x:0:0"));
}

static void
assert_read_equals (Tree *t, const char *path, const char *expected)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) bytes = sandstep_tree_read_file (t->fd, path, SANDSTEP_DEFAULT_READ_MAX, &error);
  gsize len;
  const char *data;

  g_assert_no_error (error);
  g_assert_nonnull (bytes);
  data = g_bytes_get_data (bytes, &len);
  g_assert_cmpmem (data, len, expected, strlen (expected));
}

static void
assert_write_error (Tree *t, const char *path, GQuark domain, int code)
{
  g_autoptr(GError) error = NULL;

  g_assert_false (sandstep_tree_write_file (t->fd, path, "x", 1, &error));
  g_assert_error (error, domain, code);
}

static void
assert_host_file (const char *path, const char *expected)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *contents = NULL;
  gsize len;

  g_file_get_contents (path, &contents, &len, &error);
  g_assert_no_error (error);
  g_assert_cmpmem (contents, len, expected, strlen (expected));
}

static int
open_dest (Tree *t, const char *name, int extra_flags)
{
  g_autofree char *path = g_build_filename (t->base, name, NULL);
  int fd = open (path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | extra_flags, 0644);

  g_assert_cmpint (fd, >=, 0);
  return fd;
}

static void
assert_fd_size (int fd, gint64 size)
{
  struct stat st;

  g_assert_cmpint (fstat (fd, &st), ==, 0);
  g_assert_cmpint (st.st_size, ==, size);
}

static GBytes *
pattern_bytes (gsize len)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed (42);
  guint8 *data = g_malloc (len);

  for (gsize i = 0; i < len; i++)
    data[i] = g_rand_int (rand) & 0xff;
  return g_bytes_new_take (data, len);
}

static void
test_path_relative (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *tmp_x = tree_host_path (t, "tmp/x");
  const struct { const char *in, *out; } cases[] = {
    { "a", "workspace/a" },
    { "./a", "workspace/a" },
    { "a/../b/", "workspace/b" },
    { "", "workspace" },
    { "/workspace", "workspace" },
    { "/workspace//a/./b", "workspace/a/b" },
    { "/tmp/x", "tmp/x" },
    { "/tmp/../workspace/a", "workspace/a" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *rel = sandstep_tree_relative_path (cases[i].in, &error);

      g_assert_no_error (error);
      g_assert_cmpstr (rel, ==, cases[i].out);
    }

  g_assert_true (sandstep_tree_write_file (t->fd, "a", "relative", 8, &error));
  g_assert_no_error (error);
  assert_read_equals (t, "/workspace/a", "relative");

  g_assert_true (sandstep_tree_write_file (t->fd, "/tmp/x", "in tmp", 6, &error));
  g_assert_no_error (error);
  assert_read_equals (t, "/tmp/x", "in tmp");
  assert_host_file (tmp_x, "in tmp");
}

static void
test_path_outside (void)
{
  g_autoptr(Tree) t = tree_new ();
  const char *paths[] = { "/etc/passwd", "/usr/bin/sh", "/data/x", "/", "/workspacex/a", "/tmpx",
                          "/proc/self/root" };

  for (gsize i = 0; i < G_N_ELEMENTS (paths); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autofree char *rel = sandstep_tree_relative_path (paths[i], &error);
      g_autoptr(GPtrArray) list = NULL;

      g_assert_null (rel);
      g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_ESCAPES);
      g_assert_nonnull (strstr (error->message, paths[i]));
      g_assert_nonnull (strstr (error->message, "only /workspace and /tmp"));
      g_clear_error (&error);

      assert_read_error (t, paths[i], SANDSTEP_PATH_ERROR_ESCAPES);
      assert_write_error (t, paths[i], SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_ESCAPES);
      list = sandstep_tree_list (t->fd, paths[i], &error);
      g_assert_null (list);
      g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_ESCAPES);
    }
}

static void
test_path_dotdot (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autofree char *before = outside_snapshot (t);
  g_autofree char *after = NULL;
  g_autofree char *host_src = g_build_filename (t->outside, "secret", NULL);
  const char *paths[] = { "../../etc/passwd", "/workspace/../../x", "/tmp/../..", "a/../../../b", "..",
                          "/workspace/../etc/passwd", "../outside/secret" };

  for (gsize i = 0; i < G_N_ELEMENTS (paths); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autofree char *rel = sandstep_tree_relative_path (paths[i], &error);
      int dest_fd = open_dest (t, "export", 0);

      g_assert_null (rel);
      g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_ESCAPES);
      g_clear_error (&error);

      assert_read_error (t, paths[i], SANDSTEP_PATH_ERROR_ESCAPES);
      assert_write_error (t, paths[i], SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_ESCAPES);

      g_assert_false (sandstep_tree_put (t->fd, host_src, paths[i], &error));
      g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_ESCAPES);
      g_clear_error (&error);

      g_assert_cmpint (sandstep_tree_export (t->fd, paths[i], dest_fd, G_MAXUINT64, &error), ==, -1);
      g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_ESCAPES);
      assert_fd_size (dest_fd, 0);
      close (dest_fd);
    }

  after = outside_snapshot (t);
  g_assert_cmpstr (after, ==, before);
}

static void
test_read_write_roundtrip (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) list = NULL;
  g_autoptr(GBytes) bytes = NULL;
  g_autofree char *hello = tree_host_path (t, "workspace/hello.txt");
  g_autofree char *n2 = tree_host_path (t, "workspace/n1/n2");
  static const char binary[] = { 'a', '\0', 'b', '\n', '\xff' };
  struct stat st;

  g_assert_true (sandstep_tree_write_file (t->fd, "hello.txt", "hello, world\n", 13, &error));
  g_assert_no_error (error);
  assert_read_equals (t, "hello.txt", "hello, world\n");
  assert_host_file (hello, "hello, world\n");
  g_assert_cmpint (stat (hello, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 07777, ==, 0644);

  /* Replaced, not appended to. */
  g_assert_true (sandstep_tree_write_file (t->fd, "/workspace/hello.txt", "bye", 3, &error));
  g_assert_no_error (error);
  assert_read_equals (t, "hello.txt", "bye");

  g_assert_true (sandstep_tree_write_file (t->fd, "n1/n2/n3/deep.txt", "deep", 4, &error));
  g_assert_no_error (error);
  assert_read_equals (t, "/workspace/n1/n2/n3/deep.txt", "deep");
  g_assert_true (g_file_test (n2, G_FILE_TEST_IS_DIR));

  g_assert_true (sandstep_tree_write_file (t->fd, "empty", NULL, 0, &error));
  g_assert_no_error (error);
  assert_read_equals (t, "empty", "");

  g_assert_true (sandstep_tree_write_file (t->fd, "binary", binary, sizeof binary, &error));
  g_assert_no_error (error);
  bytes = sandstep_tree_read_file (t->fd, "binary", SANDSTEP_DEFAULT_READ_MAX, &error);
  g_assert_no_error (error);
  g_assert_cmpmem (g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes), binary, sizeof binary);

  /* No hidden temporary file is left behind. */
  list = sandstep_tree_list (t->fd, "/workspace", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (list->len, ==, 4);
  g_assert_cmpstr (((SandstepDirEntry *) list->pdata[0])->name, ==, "binary");
  g_assert_cmpstr (((SandstepDirEntry *) list->pdata[1])->name, ==, "empty");
  g_assert_cmpstr (((SandstepDirEntry *) list->pdata[2])->name, ==, "hello.txt");
  g_assert_cmpstr (((SandstepDirEntry *) list->pdata[3])->name, ==, "n1");
}

static void
test_write_wrong_type (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *dir = tree_host_path (t, "workspace/dir");
  g_autofree char *file = tree_host_path (t, "workspace/file");

  host_mkdir (dir);
  host_write (file, "file", -1);

  assert_write_error (t, "dir", SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IS_DIRECTORY);
  assert_write_error (t, "/workspace", SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IS_DIRECTORY);
  assert_write_error (t, "/tmp/", SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IS_DIRECTORY);
  /* A file where a directory is needed: no such directory. */
  assert_write_error (t, "file/x", SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND);
  g_assert_true (g_file_test (dir, G_FILE_TEST_IS_DIR));
  assert_host_file (file, "file");
}

static void
test_list_sorted (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) list = NULL;
  g_autoptr(GPtrArray) through_link = NULL;
  g_autoptr(GPtrArray) empty = NULL;
  g_autofree char *b = tree_host_path (t, "workspace/b");
  g_autofree char *a = tree_host_path (t, "workspace/a");
  g_autofree char *c = tree_host_path (t, "workspace/c");
  g_autofree char *c_in = tree_host_path (t, "workspace/c/in");
  g_autofree char *d = tree_host_path (t, "workspace/d");
  g_autofree char *e = tree_host_path (t, "workspace/e");
  g_autofree char *f = tree_host_path (t, "workspace/f");
  const struct { const char *name; gboolean is_dir; } expected[] = {
    { "a", FALSE }, { "b", FALSE }, { "c", TRUE }, { "d", FALSE }, { "e", FALSE }, { "f", TRUE },
  };

  host_write (b, "b", -1);
  host_write (a, "a", -1);
  host_mkdir (c);
  host_write (c_in, "in", -1);
  host_symlink ("c", d);                 /* a link to a directory is not a directory */
  host_symlink ("/workspace/c", e);
  host_mkdir (f);

  list = sandstep_tree_list (t->fd, "/workspace", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (list->len, ==, G_N_ELEMENTS (expected));
  for (guint i = 0; i < list->len; i++)
    {
      SandstepDirEntry *entry = list->pdata[i];

      g_assert_cmpstr (entry->name, ==, expected[i].name);
      g_assert_cmpint (entry->is_dir, ==, expected[i].is_dir);
    }

  /* Listing through a link inside the tree works, resolved as the jail would. */
  through_link = sandstep_tree_list (t->fd, "e", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (through_link->len, ==, 1);
  g_assert_cmpstr (((SandstepDirEntry *) through_link->pdata[0])->name, ==, "in");
  g_assert_false (((SandstepDirEntry *) through_link->pdata[0])->is_dir);

  empty = sandstep_tree_list (t->fd, "f", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (empty->len, ==, 0);

  g_assert_null (sandstep_tree_list (t->fd, "b", &error));
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_null (sandstep_tree_list (t->fd, "missing", &error));
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND);
}

static void
test_read_directory (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autofree char *dir = tree_host_path (t, "workspace/dir");
  g_autofree char *link = tree_host_path (t, "workspace/dir-link");
  g_autoptr(GError) error = NULL;

  host_mkdir (dir);
  host_symlink ("dir", link);
  assert_read_error (t, "dir", SANDSTEP_PATH_ERROR_IS_DIRECTORY);
  assert_read_error (t, "dir-link", SANDSTEP_PATH_ERROR_IS_DIRECTORY);
  assert_read_error (t, "/tmp", SANDSTEP_PATH_ERROR_IS_DIRECTORY);

  g_assert_null (sandstep_tree_read_file (t->fd, "/workspace/dir", 100, &error));
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IS_DIRECTORY);
  g_assert_nonnull (strstr (error->message, "'/workspace/dir' is a directory"));
}

static void
test_read_fifo (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autofree char *fifo = tree_host_path (t, "workspace/fifo");
  g_autofree char *link = tree_host_path (t, "tmp/fifo-link");
  g_autoptr(GError) error = NULL;
  int dest_fd = open_dest (t, "export", 0);

  g_assert_cmpint (mkfifo (fifo, 0644), ==, 0);
  host_symlink ("/workspace/fifo", link);

  /* Opening a FIFO for reading waits for a writer unless O_NONBLOCK: a hang
   * here is the bug, so let the alarm turn it into a failure. */
  alarm (30);
  assert_read_error (t, "fifo", SANDSTEP_PATH_ERROR_NOT_REGULAR);
  assert_read_error (t, "/tmp/fifo-link", SANDSTEP_PATH_ERROR_NOT_REGULAR);
  g_assert_cmpint (sandstep_tree_export (t->fd, "fifo", dest_fd, G_MAXUINT64, &error), ==, -1);
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_REGULAR);
  alarm (0);

  assert_fd_size (dest_fd, 0);
  close (dest_fd);
}

static void
test_read_missing (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autofree char *dangling = tree_host_path (t, "workspace/dangling");

  host_symlink ("nowhere", dangling);
  assert_read_error (t, "missing", SANDSTEP_PATH_ERROR_NOT_FOUND);
  assert_read_error (t, "/tmp/missing", SANDSTEP_PATH_ERROR_NOT_FOUND);
  assert_read_error (t, "no/such/dir/file", SANDSTEP_PATH_ERROR_NOT_FOUND);
  assert_read_error (t, "dangling", SANDSTEP_PATH_ERROR_NOT_FOUND);
}

static void
test_read_too_large (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) bytes = NULL;
  g_autofree char *big = tree_host_path (t, "workspace/big");
  g_autofree char *small = tree_host_path (t, "workspace/small");
  g_autofree char *data = g_malloc (6 * 1024 * 1024);

  memset (data, 'x', 6 * 1024 * 1024);
  host_write (big, data, 6 * 1024 * 1024);
  host_write (small, data, 2048);

  g_assert_null (sandstep_tree_read_file (t->fd, "big", SANDSTEP_DEFAULT_READ_MAX, &error));
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_TOO_LARGE);
  g_assert_nonnull (strstr (error->message, "6.0MB"));
  g_assert_nonnull (strstr (error->message, "5.0MB"));
  g_assert_nonnull (strstr (error->message, "head"));
  g_assert_nonnull (strstr (error->message, "tail"));
  g_assert_nonnull (strstr (error->message, "sed"));
  g_clear_error (&error);

  g_assert_null (sandstep_tree_read_file (t->fd, "small", 1024, &error));
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_TOO_LARGE);
  g_assert_nonnull (strstr (error->message, "2.0KB"));
  g_assert_nonnull (strstr (error->message, "1.0KB"));
  g_clear_error (&error);

  g_assert_null (sandstep_tree_read_file (t->fd, "small", 100, &error));
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_TOO_LARGE);
  g_assert_nonnull (strstr (error->message, "100B"));
  g_clear_error (&error);

  /* Exactly the limit is allowed. */
  bytes = sandstep_tree_read_file (t->fd, "small", 2048, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_bytes_get_size (bytes), ==, 2048);
}

static void
test_export_roundtrip (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) pattern = pattern_bytes (3 * 1024 * 1024);
  g_autofree char *src = tree_host_path (t, "workspace/out.bin");
  g_autofree char *dest_path = g_build_filename (t->base, "export", NULL);
  g_autofree char *append_path = g_build_filename (t->base, "export-append", NULL);
  g_autofree char *got = NULL;
  gsize got_len;
  int dest_fd = open_dest (t, "export", 0);
  int append_fd = open_dest (t, "export-append", O_APPEND);

  host_write (src, g_bytes_get_data (pattern, NULL), g_bytes_get_size (pattern));

  g_assert_cmpint (sandstep_tree_export (t->fd, "out.bin", dest_fd, G_MAXUINT64, &error), ==,
                   3 * 1024 * 1024);
  g_assert_no_error (error);
  close (dest_fd);
  g_file_get_contents (dest_path, &got, &got_len, &error);
  g_assert_no_error (error);
  g_assert_cmpmem (got, got_len, g_bytes_get_data (pattern, NULL), g_bytes_get_size (pattern));
  g_clear_pointer (&got, g_free);

  /* O_APPEND refuses copy_file_range(): the read/write path takes over. */
  g_assert_cmpint (sandstep_tree_export (t->fd, "/workspace/out.bin", append_fd, 3 * 1024 * 1024, &error), ==,
                   3 * 1024 * 1024);
  g_assert_no_error (error);
  close (append_fd);
  g_file_get_contents (append_path, &got, &got_len, &error);
  g_assert_no_error (error);
  g_assert_cmpmem (got, got_len, g_bytes_get_data (pattern, NULL), g_bytes_get_size (pattern));
}

static gpointer
drain_pipe (gpointer data)
{
  int fd = GPOINTER_TO_INT (data);
  GByteArray *got = g_byte_array_new ();
  guint8 buffer[65536];
  ssize_t n;

  while ((n = read (fd, buffer, sizeof buffer)) != 0)
    {
      if (n < 0 && errno == EINTR)
        continue;
      g_assert_cmpint (n, >, 0);
      g_byte_array_append (got, buffer, n);
    }
  return got;
}

static void
test_export_pipe (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) pattern = pattern_bytes (3 * 1024 * 1024 + 17);
  g_autoptr(GByteArray) got = NULL;
  g_autofree char *src = tree_host_path (t, "tmp/piped");
  GThread *reader;
  int fds[2];

  host_write (src, g_bytes_get_data (pattern, NULL), g_bytes_get_size (pattern));
  g_assert_cmpint (pipe2 (fds, O_CLOEXEC), ==, 0);
  reader = g_thread_new ("drain", drain_pipe, GINT_TO_POINTER (fds[0]));

  g_assert_cmpint (sandstep_tree_export (t->fd, "/tmp/piped", fds[1], G_MAXUINT64, &error), ==,
                   (gint64) g_bytes_get_size (pattern));
  g_assert_no_error (error);
  close (fds[1]);
  got = g_thread_join (reader);
  close (fds[0]);
  g_assert_cmpmem (got->data, got->len, g_bytes_get_data (pattern, NULL), g_bytes_get_size (pattern));
}

/* A sparse file: 64 MiB long, with data only at 0, 32 MiB and the last bytes. */
static char *
make_sparse (Tree *t, const char *rel, off_t *out_size)
{
  char *path = tree_host_path (t, rel);
  const off_t size = 64 * 1024 * 1024;
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (ftruncate (fd, size), ==, 0);
  g_assert_cmpint (pwrite (fd, "head", 4, 0), ==, 4);
  g_assert_cmpint (pwrite (fd, "middle", 6, size / 2), ==, 6);
  g_assert_cmpint (pwrite (fd, "tail", 4, size - 4), ==, 4);
  g_assert_cmpint (close (fd), ==, 0);
  *out_size = size;
  return path;
}

static void
test_export_sparse (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *dest_path = g_build_filename (t->base, "export", NULL);
  g_autofree char *src = NULL;
  g_autofree char *want = NULL, *got = NULL;
  gsize want_len, got_len;
  struct stat src_st, st;
  off_t size;
  int dest_fd = open_dest (t, "export", 0);

  g_test_summary ("export copies a sparse file's holes as holes when the destination is a regular file, "
                  "with the same content");
  src = make_sparse (t, "workspace/sparse", &size);
  g_assert_cmpint (stat (src, &src_st), ==, 0);
  if ((gint64) src_st.st_blocks * 512 >= size)
    {
      g_test_skip ("this file system stores no holes");
      close (dest_fd);
      return;
    }

  g_assert_cmpint (sandstep_tree_export (t->fd, "sparse", dest_fd, G_MAXUINT64, &error), ==, size);
  g_assert_no_error (error);
  g_assert_cmpint (fstat (dest_fd, &st), ==, 0);
  g_assert_cmpint (close (dest_fd), ==, 0);
  g_assert_cmpint (st.st_size, ==, size);
  /* As sparse as the source, give or take a block per data run. */
  g_assert_cmpint ((gint64) st.st_blocks * 512, <=, (gint64) src_st.st_blocks * 512 + 3 * 4096);
  g_file_get_contents (src, &want, &want_len, &error);
  g_assert_no_error (error);
  g_file_get_contents (dest_path, &got, &got_len, &error);
  g_assert_no_error (error);
  g_assert_cmpmem (got, got_len, want, want_len);
}

/* Holes end the file too: the copy's size is the file's, not its last data run's. */
static void
test_export_sparse_tail (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *src = tree_host_path (t, "workspace/hole-at-end");
  struct stat st;
  int fd = open (src, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int dest_fd = open_dest (t, "export", 0);

  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (pwrite (fd, "data", 4, 0), ==, 4);
  g_assert_cmpint (ftruncate (fd, 8 * 1024 * 1024), ==, 0);
  g_assert_cmpint (close (fd), ==, 0);

  g_assert_cmpint (sandstep_tree_export (t->fd, "hole-at-end", dest_fd, G_MAXUINT64, &error), ==, 8 * 1024 * 1024);
  g_assert_no_error (error);
  g_assert_cmpint (fstat (dest_fd, &st), ==, 0);
  g_assert_cmpint (st.st_size, ==, 8 * 1024 * 1024);
  g_assert_cmpint (lseek (dest_fd, 0, SEEK_CUR), ==, 8 * 1024 * 1024);
  close (dest_fd);
}

static void
test_export_too_large (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) pattern = pattern_bytes (3 * 1024 * 1024);
  g_autofree char *src = tree_host_path (t, "workspace/big");
  int dest_fd = open_dest (t, "export", 0);

  host_write (src, g_bytes_get_data (pattern, NULL), g_bytes_get_size (pattern));

  g_assert_cmpint (sandstep_tree_export (t->fd, "big", dest_fd, 1024 * 1024, &error), ==, -1);
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_TOO_LARGE);
  g_assert_nonnull (strstr (error->message, "3.0MB"));
  g_assert_nonnull (strstr (error->message, "1.0MB"));
  assert_fd_size (dest_fd, 0);
  g_clear_error (&error);

  g_assert_cmpint (sandstep_tree_export (t->fd, "big", dest_fd, 3 * 1024 * 1024 - 1, &error), ==, -1);
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_TOO_LARGE);
  assert_fd_size (dest_fd, 0);
  close (dest_fd);
}

static void
test_export_not_regular (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autofree char *fifo = tree_host_path (t, "workspace/fifo");
  g_autofree char *dir = tree_host_path (t, "workspace/dir");
  const struct { const char *path; int code; } cases[] = {
    { "fifo", SANDSTEP_PATH_ERROR_NOT_REGULAR },
    { "dir", SANDSTEP_PATH_ERROR_IS_DIRECTORY },
    { "/workspace", SANDSTEP_PATH_ERROR_IS_DIRECTORY },
    { "missing", SANDSTEP_PATH_ERROR_NOT_FOUND },
    { "/etc/passwd", SANDSTEP_PATH_ERROR_ESCAPES },
  };
  int dest_fd = open_dest (t, "export", 0);

  g_assert_cmpint (mkfifo (fifo, 0644), ==, 0);
  host_mkdir (dir);

  alarm (30);
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GError) error = NULL;

      g_assert_cmpint (sandstep_tree_export (t->fd, cases[i].path, dest_fd, G_MAXUINT64, &error), ==, -1);
      g_assert_error (error, SANDSTEP_PATH_ERROR, cases[i].code);
      assert_fd_size (dest_fd, 0);
    }
  alarm (0);
  close (dest_fd);
}

static void
test_put_file (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *host_dir = g_build_filename (t->base, "host", NULL);
  g_autofree char *host_file = g_build_filename (host_dir, "file.txt", NULL);
  g_autofree char *missing = g_build_filename (host_dir, "missing", NULL);
  g_autofree char *existing = tree_host_path (t, "workspace/existing");

  host_mkdir (host_dir);
  host_write (host_file, "put me", -1);
  host_mkdir (existing);

  g_assert_true (sandstep_tree_put (t->fd, host_file, "/workspace/", &error));
  g_assert_no_error (error);
  assert_read_equals (t, "file.txt", "put me");

  g_assert_true (sandstep_tree_put (t->fd, host_file, "renamed.txt", &error));
  g_assert_no_error (error);
  assert_read_equals (t, "renamed.txt", "put me");

  g_assert_true (sandstep_tree_put (t->fd, host_file, "existing", &error));
  g_assert_no_error (error);
  assert_read_equals (t, "existing/file.txt", "put me");

  g_assert_true (sandstep_tree_put (t->fd, host_file, "/tmp/new/", &error));
  g_assert_no_error (error);
  assert_read_equals (t, "/tmp/new/file.txt", "put me");

  /* Putting again replaces. */
  host_write (host_file, "second", -1);
  g_assert_true (sandstep_tree_put (t->fd, host_file, "renamed.txt", &error));
  g_assert_no_error (error);
  assert_read_equals (t, "renamed.txt", "second");

  g_assert_false (sandstep_tree_put (t->fd, missing, "/workspace/", &error));
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND);
  g_clear_error (&error);

  g_assert_false (sandstep_tree_put (t->fd, host_file, "/etc/", &error));
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_ESCAPES);
}

static void
test_put_directory (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) list = NULL;
  g_autofree char *src = g_build_filename (t->base, "src", NULL);
  g_autofree char *top = g_build_filename (src, "top.txt", NULL);
  g_autofree char *sub = g_build_filename (src, "sub", NULL);
  g_autofree char *inner = g_build_filename (sub, "inner.txt", NULL);
  g_autofree char *deeper = g_build_filename (sub, "deeper", NULL);
  g_autofree char *x = g_build_filename (deeper, "x", NULL);
  g_autofree char *link = g_build_filename (src, "link", NULL);
  g_autofree char *abs_link = g_build_filename (src, "abs-link", NULL);
  g_autofree char *tree_link = tree_host_path (t, "workspace/dest/src/link");
  g_autofree char *tree_abs_link = tree_host_path (t, "workspace/dest/src/abs-link");
  g_autofree char *existing = tree_host_path (t, "workspace/existing");
  g_autofree char *target = NULL;
  struct stat st;

  host_mkdir (src);
  host_write (top, "top", -1);
  host_mkdir (sub);
  host_write (inner, "inner", -1);
  host_mkdir (deeper);
  host_write (x, "x", -1);
  host_symlink ("sub/inner.txt", link);
  host_symlink ("/etc/passwd", abs_link);
  host_mkdir (existing);

  /* "dest/": the source goes under its own name, the directory is made. */
  g_assert_true (sandstep_tree_put (t->fd, src, "dest/", &error));
  g_assert_no_error (error);
  assert_read_equals (t, "dest/src/top.txt", "top");
  assert_read_equals (t, "dest/src/sub/inner.txt", "inner");
  assert_read_equals (t, "dest/src/sub/deeper/x", "x");
  /* Links are copied as links, and resolve inside the tree. */
  g_assert_cmpint (lstat (tree_link, &st), ==, 0);
  g_assert_true (S_ISLNK (st.st_mode));
  target = g_file_read_link (tree_link, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (target, ==, "sub/inner.txt");
  assert_read_equals (t, "dest/src/link", "inner");
  g_assert_cmpint (lstat (tree_abs_link, &st), ==, 0);
  g_assert_true (S_ISLNK (st.st_mode));
  assert_read_error (t, "dest/src/abs-link", SANDSTEP_PATH_ERROR_NOT_FOUND);

  list = sandstep_tree_list (t->fd, "dest/src", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (list->len, ==, 4);
  g_assert_cmpstr (((SandstepDirEntry *) list->pdata[0])->name, ==, "abs-link");
  g_assert_cmpstr (((SandstepDirEntry *) list->pdata[1])->name, ==, "link");
  g_assert_cmpstr (((SandstepDirEntry *) list->pdata[2])->name, ==, "sub");
  g_assert_true (((SandstepDirEntry *) list->pdata[2])->is_dir);
  g_assert_cmpstr (((SandstepDirEntry *) list->pdata[3])->name, ==, "top.txt");

  /* A new name without "/": the copy takes that name, as cp -r does. */
  g_assert_true (sandstep_tree_put (t->fd, src, "copy", &error));
  g_assert_no_error (error);
  assert_read_equals (t, "copy/top.txt", "top");
  assert_read_equals (t, "copy/sub/deeper/x", "x");

  /* Now "copy" exists: the source goes under it. */
  g_assert_true (sandstep_tree_put (t->fd, src, "copy", &error));
  g_assert_no_error (error);
  assert_read_equals (t, "copy/src/sub/inner.txt", "inner");

  g_assert_true (sandstep_tree_put (t->fd, src, "/workspace/existing", &error));
  g_assert_no_error (error);
  assert_read_equals (t, "existing/src/top.txt", "top");

  g_assert_true (sandstep_tree_put (t->fd, src, "/tmp/", &error));
  g_assert_no_error (error);
  assert_read_equals (t, "/tmp/src/sub/deeper/x", "x");
}

static void
test_put_special (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *src = g_build_filename (t->base, "src", NULL);
  g_autofree char *fifo = g_build_filename (src, "fifo", NULL);

  host_mkdir (src);
  g_assert_cmpint (mkfifo (fifo, 0644), ==, 0);

  alarm (30);
  g_assert_false (sandstep_tree_put (t->fd, fifo, "/workspace/", &error));
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_REGULAR);
  g_clear_error (&error);
  g_assert_false (sandstep_tree_put (t->fd, src, "/workspace/", &error));
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_REGULAR);
  alarm (0);
}

static void
test_put_setid (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *src = g_build_filename (t->base, "src", NULL);
  g_autofree char *suid = g_build_filename (src, "suid", NULL);
  g_autofree char *all = g_build_filename (src, "all", NULL);
  g_autofree char *tree_src = tree_host_path (t, "workspace/src");
  g_autofree char *tree_suid = tree_host_path (t, "workspace/src/suid");
  g_autofree char *tree_all = tree_host_path (t, "workspace/src/all");
  g_autofree char *tree_single = tree_host_path (t, "workspace/single");
  struct stat st;

  host_mkdir (src);
  host_write (suid, "#!/bin/sh\n", -1);
  host_write (all, "all", -1);
  g_assert_cmpint (chmod (suid, 04755), ==, 0);
  g_assert_cmpint (chmod (all, 07777), ==, 0);
  g_assert_cmpint (chmod (src, 02755), ==, 0);
  g_assert_cmpint (stat (suid, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 07777, ==, 04755);

  g_assert_true (sandstep_tree_put (t->fd, suid, "single", &error));
  g_assert_no_error (error);
  g_assert_cmpint (stat (tree_single, &st), ==, 0);
  g_assert_cmpint (st.st_mode & S_ISUID, ==, 0);
  g_assert_cmpint (st.st_mode & 07777, ==, 0755);

  g_assert_true (sandstep_tree_put (t->fd, src, "/workspace/", &error));
  g_assert_no_error (error);
  g_assert_cmpint (stat (tree_suid, &st), ==, 0);
  g_assert_cmpint (st.st_mode & (S_ISUID | S_ISGID | S_ISVTX), ==, 0);
  g_assert_cmpint (st.st_mode & 07777, ==, 0755);
  g_assert_cmpint (stat (tree_all, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 07777, ==, 0777);
  g_assert_cmpint (stat (tree_src, &st), ==, 0);
  g_assert_cmpint (st.st_mode & (S_ISUID | S_ISGID | S_ISVTX), ==, 0);
}

static void
test_symlink_absolute (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autofree char *before = outside_snapshot (t);
  g_autofree char *after = NULL;
  g_autofree char *secret = g_build_filename (t->outside, "secret", NULL);
  g_autofree char *secret_link = tree_host_path (t, "workspace/secret-link");
  g_autofree char *passwd_link = tree_host_path (t, "workspace/passwd-link");
  g_autofree char *tmp_link = tree_host_path (t, "tmp/outside-link");
  g_autofree char *dir_link = tree_host_path (t, "workspace/outside-dir");
  g_autofree char *etc_link = tree_host_path (t, "workspace/etc");
  const char *paths[] = { "secret-link", "passwd-link", "/tmp/outside-link/secret", "outside-dir/secret",
                          "etc/passwd" };

  host_symlink (secret, secret_link);
  host_symlink ("/etc/passwd", passwd_link);
  host_symlink (t->outside, tmp_link);
  host_symlink (t->outside, dir_link);
  host_symlink ("/etc", etc_link);

  /* Resolved inside the tree, these name files that do not exist there. */
  for (gsize i = 0; i < G_N_ELEMENTS (paths); i++)
    {
      g_autoptr(GError) error = NULL;
      int dest_fd = open_dest (t, "export", 0);

      assert_read_error (t, paths[i], SANDSTEP_PATH_ERROR_NOT_FOUND);
      g_assert_cmpint (sandstep_tree_export (t->fd, paths[i], dest_fd, G_MAXUINT64, &error), ==, -1);
      g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND);
      assert_fd_size (dest_fd, 0);
      close (dest_fd);
    }

  for (gsize i = 0; i < 3; i++)
    {
      const char *dirs[] = { "outside-dir", "/tmp/outside-link", "etc" };
      g_autoptr(GError) error = NULL;

      g_assert_null (sandstep_tree_list (t->fd, dirs[i], &error));
      g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND);
    }

  after = outside_snapshot (t);
  g_assert_cmpstr (after, ==, before);
}

static void
test_symlink_relative (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) root = NULL;
  g_autofree char *rel_secret = tree_host_path (t, "workspace/rel-secret");
  g_autofree char *up = tree_host_path (t, "workspace/up");
  g_autofree char *far = tree_host_path (t, "tmp/far");
  g_autofree char *outside_dir = tree_host_path (t, "workspace/outside-dir");

  /* On the host, tree/workspace/../../outside/secret is the secret. */
  host_symlink ("../../outside/secret", rel_secret);
  host_symlink ("../../..", up);
  host_symlink ("../../../../../../../../../../etc/passwd", far);
  host_symlink ("../../outside", outside_dir);

  assert_read_error (t, "rel-secret", SANDSTEP_PATH_ERROR_NOT_FOUND);
  assert_read_error (t, "up/outside/secret", SANDSTEP_PATH_ERROR_NOT_FOUND);
  assert_read_error (t, "up/etc/passwd", SANDSTEP_PATH_ERROR_NOT_FOUND);
  assert_read_error (t, "/tmp/far", SANDSTEP_PATH_ERROR_NOT_FOUND);
  assert_read_error (t, "outside-dir/secret", SANDSTEP_PATH_ERROR_NOT_FOUND);

  /* "../../.." stops at the tree's root, as ".." stops at "/" in the jail. */
  root = sandstep_tree_list (t->fd, "up", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (root->len, ==, 2);
  g_assert_cmpstr (((SandstepDirEntry *) root->pdata[0])->name, ==, "tmp");
  g_assert_cmpstr (((SandstepDirEntry *) root->pdata[1])->name, ==, "workspace");
}

/* A directory opened to watch (E2B's watchDir): under /workspace or /tmp, through a link that stays there too; a
 * link to the tree's root (the jail's root in a layered sandbox) or out of it is refused, as is a file. */
static void
test_open_directory (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *sub = tree_host_path (t, "workspace/sub");
  g_autofree char *tmp_dir = tree_host_path (t, "tmp/t");
  g_autofree char *to_tmp = tree_host_path (t, "workspace/to-tmp");
  g_autofree char *up = tree_host_path (t, "workspace/up");
  g_autofree char *abs_root = tree_host_path (t, "workspace/abs-root");
  g_autofree char *file = tree_host_path (t, "workspace/file");
  struct stat want, got;
  int fd;

  host_mkdir (sub);
  host_mkdir (tmp_dir);
  host_symlink ("/tmp/t", to_tmp);
  host_symlink ("../..", up);
  host_symlink ("/", abs_root);
  host_write (file, "f", -1);

  fd = sandstep_tree_open_directory (t->fd, "/workspace/sub", &error);
  g_assert_no_error (error);
  g_assert_cmpint (fstat (fd, &got), ==, 0);
  g_assert_cmpint (stat (sub, &want), ==, 0);
  g_assert_true (got.st_ino == want.st_ino && got.st_dev == want.st_dev);
  g_assert_cmpint (fcntl (fd, F_GETFD), ==, FD_CLOEXEC);
  close (fd);
  fd = sandstep_tree_open_directory (t->fd, "/workspace", &error);
  g_assert_no_error (error);
  close (fd);
  fd = sandstep_tree_open_directory (t->fd, "to-tmp", &error);
  g_assert_no_error (error);
  g_assert_cmpint (fstat (fd, &got), ==, 0);
  g_assert_cmpint (stat (tmp_dir, &want), ==, 0);
  g_assert_true (got.st_ino == want.st_ino && got.st_dev == want.st_dev);
  close (fd);

  g_assert_cmpint (sandstep_tree_open_directory (t->fd, "up", &error), ==, -1);
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_ESCAPES);
  g_assert_nonnull (strstr (error->message, "leads outside the sandbox's files"));
  g_clear_error (&error);
  g_assert_cmpint (sandstep_tree_open_directory (t->fd, "/workspace/abs-root", &error), ==, -1);
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_ESCAPES);
  g_clear_error (&error);
  g_assert_cmpint (sandstep_tree_open_directory (t->fd, "/etc", &error), ==, -1);
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_ESCAPES);
  g_clear_error (&error);
  g_assert_cmpint (sandstep_tree_open_directory (t->fd, "file", &error), ==, -1);
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_cmpint (sandstep_tree_open_directory (t->fd, "missing", &error), ==, -1);
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND);
}

static void
test_symlink_write (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *before = outside_snapshot (t);
  g_autofree char *after = NULL;
  g_autofree char *secret = g_build_filename (t->outside, "secret", NULL);
  g_autofree char *secret_link = tree_host_path (t, "workspace/secret-link");
  g_autofree char *rel_secret = tree_host_path (t, "workspace/rel-secret");
  g_autofree char *abs_dir = tree_host_path (t, "workspace/abs-dir");
  g_autofree char *rel_dir = tree_host_path (t, "workspace/rel-dir");
  g_autofree char *etc_link = tree_host_path (t, "tmp/etc-link");
  g_autofree char *host_file = g_build_filename (t->base, "host-file", NULL);
  const char *probe = "/etc/sandstep-test-tree-must-not-exist";
  struct stat st;

  g_assert_false (g_file_test (probe, G_FILE_TEST_EXISTS));
  host_symlink (secret, secret_link);
  host_symlink ("../../outside/secret", rel_secret);
  host_symlink (t->outside, abs_dir);
  host_symlink ("../../outside", rel_dir);
  host_symlink ("/etc", etc_link);
  host_write (host_file, "host file", -1);

  /* A link at the last component is replaced, never written through. */
  g_assert_true (sandstep_tree_write_file (t->fd, "secret-link", "overwritten", 11, &error));
  g_assert_no_error (error);
  g_assert_cmpint (lstat (secret_link, &st), ==, 0);
  g_assert_true (S_ISREG (st.st_mode));
  assert_read_equals (t, "secret-link", "overwritten");
  g_assert_true (sandstep_tree_write_file (t->fd, "rel-secret", "overwritten", 11, &error));
  g_assert_no_error (error);
  g_assert_cmpint (lstat (rel_secret, &st), ==, 0);
  g_assert_true (S_ISREG (st.st_mode));
  assert_host_file (secret, SECRET);

  /* A link in the middle resolves inside the tree, where its target is missing. */
  assert_write_error (t, "abs-dir/new", SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND);
  assert_write_error (t, "abs-dir/secret", SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND);
  assert_write_error (t, "abs-dir/a/b/c", SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND);
  assert_write_error (t, "rel-dir/new", SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND);
  assert_write_error (t, "rel-dir/secret", SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND);
  assert_write_error (t, "/tmp/etc-link/sandstep-test-tree-must-not-exist", SANDSTEP_PATH_ERROR,
                      SANDSTEP_PATH_ERROR_NOT_FOUND);

  g_assert_false (sandstep_tree_put (t->fd, host_file, "abs-dir/", &error));
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_false (sandstep_tree_put (t->fd, host_file, "rel-dir/secret", &error));
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_false (sandstep_tree_put (t->fd, host_file, "/tmp/etc-link/sandstep-test-tree-must-not-exist",
                                     &error));
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND);

  g_assert_false (g_file_test (probe, G_FILE_TEST_EXISTS));
  assert_host_file (secret, SECRET);
  after = outside_snapshot (t);
  g_assert_cmpstr (after, ==, before);
}

static void
test_swapped_directory (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *before = NULL;
  g_autofree char *after = NULL;
  g_autofree char *d = tree_host_path (t, "workspace/d");
  g_autofree char *d_first = tree_host_path (t, "workspace/d/first");
  g_autofree char *e = tree_host_path (t, "workspace/e");
  g_autofree char *e_first = tree_host_path (t, "workspace/e/first");
  g_autofree char *host_file = g_build_filename (t->base, "host-file", NULL);

  host_write (host_file, "host file", -1);
  g_assert_true (sandstep_tree_write_file (t->fd, "d/first", "first", 5, &error));
  g_assert_no_error (error);
  g_assert_true (sandstep_tree_write_file (t->fd, "e/first", "first", 5, &error));
  g_assert_no_error (error);
  before = outside_snapshot (t);

  /* What a command in the jail can do between two host calls. */
  g_assert_cmpint (unlink (d_first), ==, 0);
  g_assert_cmpint (rmdir (d), ==, 0);
  host_symlink (t->outside, d);
  g_assert_cmpint (unlink (e_first), ==, 0);
  g_assert_cmpint (rmdir (e), ==, 0);
  host_symlink ("../../outside", e);

  assert_write_error (t, "d/f", SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND);
  assert_write_error (t, "e/f", SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND);
  assert_write_error (t, "d/sub/f", SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND);
  assert_read_error (t, "d/secret", SANDSTEP_PATH_ERROR_NOT_FOUND);
  assert_read_error (t, "e/secret", SANDSTEP_PATH_ERROR_NOT_FOUND);
  g_assert_false (sandstep_tree_put (t->fd, host_file, "d/", &error));
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_false (sandstep_tree_put (t->fd, host_file, "e/f", &error));
  g_assert_error (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_NOT_FOUND);

  after = outside_snapshot (t);
  g_assert_cmpstr (after, ==, before);
}

/* ---- removal at any depth ---- */

/* Far more levels than a 128 KiB stack holds frames of a recursion (the sandbox case, 50,000, is in
 * test-recovery). */
#define DEEP_LEVELS 10000

/* A chain of @levels directories "d" under @dir_fd, made as a command in a sandbox can (mkdirat and openat on
 * directory fds, so no path grows long), one directory half way made read-only, a link out to @outside in every
 * thousandth, and a file at the bottom. */
static void
make_deep_chain (int dir_fd, guint levels, const char *outside)
{
  int fd = fcntl (dir_fd, F_DUPFD_CLOEXEC, 3);
  int file;

  for (guint i = 0; i < levels; i++)
    {
      int next;

      g_assert_cmpint (mkdirat (fd, "d", 0755), ==, 0);
      if (i % 1000 == 0)
        g_assert_cmpint (symlinkat (outside, fd, "out"), ==, 0);
      next = openat (fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      g_assert_cmpint (next, >=, 0);
      if (i == levels / 2)
        g_assert_cmpint (fchmod (fd, 0500), ==, 0);
      close (fd);
      fd = next;
    }
  file = openat (fd, "bottom", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  g_assert_cmpint (file, >=, 0);
  g_assert_cmpint (write (file, "bottom\n", 7), ==, 7);
  close (file);
  close (fd);
}

typedef struct {
  int dir_fd;
  const char *name;  /* NULL: empty @dir_fd */
} RemoveJob;

static void *
remove_job (void *data)
{
  RemoveJob *job = data;

  if (job->name != NULL)
    sandstep_remove_tree_at (job->dir_fd, job->name);
  else
    sandstep_remove_entries_at (job->dir_fd);
  return NULL;
}

/* Runs @func on a thread with a 128 KiB stack: far less than a recursion per level of a deep chain needs. */
static void
run_on_small_stack (void *(*func) (void *), void *data)
{
  pthread_attr_t attr;
  pthread_t thread;

  g_assert_cmpint (pthread_attr_init (&attr), ==, 0);
  g_assert_cmpint (pthread_attr_setstacksize (&attr, 128 * 1024), ==, 0);
  g_assert_cmpint (pthread_create (&thread, &attr, func, data), ==, 0);
  g_assert_cmpint (pthread_join (thread, NULL), ==, 0);
  pthread_attr_destroy (&attr);
}

static void
remove_on_small_stack (RemoveJob *job)
{
  run_on_small_stack (remove_job, job);
}

static void
test_remove_deep_chain (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autofree char *victim = tree_host_path (t, "workspace/victim");
  g_autofree char *workspace = tree_host_path (t, "workspace");
  g_autoptr(GPtrArray) names = NULL;
  g_autofree char *before = outside_snapshot (t);
  g_autofree char *after = NULL;
  int workspace_fd;

  g_test_summary ("rm -rf of a chain of 10,000 nested directories (made through directory fds, one of them "
                  "read-only, links out of the tree all along) on a 128 KiB stack removes all of it and "
                  "nothing its links point to; emptying a directory that holds one leaves it empty: the "
                  "removal recursed once per level and crashed destroy, gc and provision's sweep");
  workspace_fd = open (workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  g_assert_cmpint (workspace_fd, >=, 0);
  host_mkdir (victim);
  {
    int fd = openat (workspace_fd, "victim", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    g_assert_cmpint (fd, >=, 0);
    make_deep_chain (fd, DEEP_LEVELS, t->outside);
    close (fd);
  }
  remove_on_small_stack (&(RemoveJob) { .dir_fd = workspace_fd, .name = "victim" });
  g_assert_false (g_file_test (victim, G_FILE_TEST_EXISTS));

  make_deep_chain (workspace_fd, DEEP_LEVELS, t->outside);
  remove_on_small_stack (&(RemoveJob) { .dir_fd = workspace_fd, .name = NULL });
  names = sandstep_list_entries_at (workspace_fd, ".");
  g_assert_nonnull (names);
  g_assert_cmpuint (names->len, ==, 0);
  g_assert_true (g_file_test (workspace, G_FILE_TEST_IS_DIR));
  close (workspace_fd);

  after = outside_snapshot (t);
  g_assert_cmpstr (after, ==, before);
}

typedef struct {
  int tree_fd;
  const char *src;
  gboolean ok;
  GError *error;
} PutJob;

static void *
put_job (void *data)
{
  PutJob *job = data;

  job->ok = sandstep_tree_put (job->tree_fd, job->src, "deep-copy", &job->error);
  return NULL;
}

/* Levels of a put's source: deep enough for a recursion per level to overflow 128 KiB; each level costs the
 * tree sink a lookup of the whole path so far, so not much deeper. */
#define PUT_LEVELS 600

static void
test_put_deep_source (void)
{
  g_autoptr(Tree) t = tree_new ();
  g_autofree char *src = g_build_filename (t->base, "deep-src", NULL);
  g_autoptr(GString) bottom = g_string_new ("/workspace/deep-copy/");
  g_autoptr(GBytes) read_back = NULL;
  g_autoptr(GError) error = NULL;
  PutJob job = { .tree_fd = t->fd, .src = src };

  g_test_summary ("put of a host tree 600 directories deep on a 128 KiB stack copies it to the bottom file: "
                  "the walk of a put's source recursed per level");
  host_mkdir (src);
  {
    int fd = open (src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    g_assert_cmpint (fd, >=, 0);
    make_deep_chain (fd, PUT_LEVELS, t->outside);
    close (fd);
  }
  run_on_small_stack (put_job, &job);
  g_assert_no_error (job.error);
  g_assert_true (job.ok);
  for (guint i = 0; i < PUT_LEVELS; i++)
    g_string_append (bottom, "d/");
  g_string_append (bottom, "bottom");
  read_back = sandstep_tree_read_file (t->fd, bottom->str, 1024, &error);
  g_assert_no_error (error);
  g_assert_cmpmem (g_bytes_get_data (read_back, NULL), g_bytes_get_size (read_back), "bottom\n", 7);
  /* Both have a read-only directory half way, which the teardown's nftw cannot empty as another user than root. */
  {
    g_autofree char *copy = tree_host_path (t, "workspace/deep-copy");
    sandstep_remove_tree_at (AT_FDCWD, src);
    sandstep_remove_tree_at (AT_FDCWD, copy);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  umask (022);

  g_test_add_func ("/tree/path/relative", test_path_relative);
  g_test_add_func ("/tree/path/outside", test_path_outside);
  g_test_add_func ("/tree/path/dotdot", test_path_dotdot);
  g_test_add_func ("/tree/read-write/roundtrip", test_read_write_roundtrip);
  g_test_add_func ("/tree/write/wrong-type", test_write_wrong_type);
  g_test_add_func ("/tree/list/sorted", test_list_sorted);
  g_test_add_func ("/tree/open-directory/beneath", test_open_directory);
  g_test_add_func ("/tree/read/directory", test_read_directory);
  g_test_add_func ("/tree/read/fifo", test_read_fifo);
  g_test_add_func ("/tree/read/missing", test_read_missing);
  g_test_add_func ("/tree/read/too-large", test_read_too_large);
  g_test_add_func ("/tree/export/roundtrip", test_export_roundtrip);
  g_test_add_func ("/tree/export/pipe", test_export_pipe);
  g_test_add_func ("/tree/export/too-large", test_export_too_large);
  g_test_add_func ("/tree/export/sparse", test_export_sparse);
  g_test_add_func ("/tree/export/sparse-tail", test_export_sparse_tail);
  g_test_add_func ("/tree/export/not-regular", test_export_not_regular);
  g_test_add_func ("/tree/put/file", test_put_file);
  g_test_add_func ("/tree/put/directory", test_put_directory);
  g_test_add_func ("/tree/put/special", test_put_special);
  g_test_add_func ("/tree/put/setid", test_put_setid);
  g_test_add_func ("/tree/symlink/absolute", test_symlink_absolute);
  g_test_add_func ("/tree/symlink/relative", test_symlink_relative);
  g_test_add_func ("/tree/symlink/write", test_symlink_write);
  g_test_add_func ("/tree/symlink/swapped-directory", test_swapped_directory);
  g_test_add_func ("/tree/remove/deep-chain", test_remove_deep_chain);
  g_test_add_func ("/tree/put/deep-source", test_put_deep_source);

  return g_test_run ();
}
