/* test-image.c: images, up to a verified, unpacked layer store.
 *
 * A real registry (Debian's docker-registry, the CNCF distribution server)
 * started here on loopback by pid and stopped by pid; a busybox image built
 * here with umoci from busybox-static and pushed with skopeo; layouts and
 * hostile layers crafted here with a small tar writer.  Every pull runs the
 * real helper (`sandstep pull`), which hands docker:// to sandstep-net.
 */
#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <termios.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <libsoup/soup.h>

#include "sandstep-error.h"
#include "sandstep-image-pull.h"
#include "sandstep-image-ref.h"
#include "sandstep-test-utils.h"
#include "sandstep-units.h"

#define OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define LAYER_GZIP "application/vnd.oci.image.layer.v1.tar+gzip"

/* ---- the registry and the busybox image, made once ---- */

static struct {
  char *dir;            /* scratch: config, storage, log, layouts */
  char *problem;        /* why the registry could not start, or NULL */
  GPid pid;
  guint16 port;
  char *log;            /* the registry's log file */
  char *busybox_layout; /* oci layout with tag t1 */
  char *busybox_digest; /* its manifest digest */
} reg;

static gboolean
run_tool (const char *const *argv, char **out_stdout)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *out = NULL, *err = NULL;
  int status = 0;

  if (!g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &err, &status, &error) ||
      !g_spawn_check_wait_status (status, NULL))
    {
      g_autofree char *joined = g_strjoinv (" ", (char **) argv);
      g_test_message ("'%s' failed: %s%s", joined, error != NULL ? error->message : "", err != NULL ? err : "");
      return FALSE;
    }
  if (out_stdout != NULL)
    *out_stdout = g_steal_pointer (&out);
  return TRUE;
}

static guint16
free_port (void)
{
  g_autoptr(GSocket) socket = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL);
  g_autoptr(GInetAddress) lo = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) any = g_inet_socket_address_new (lo, 0);
  g_autoptr(GSocketAddress) bound = NULL;

  g_assert_true (g_socket_bind (socket, any, FALSE, NULL));
  bound = g_socket_get_local_address (socket, NULL);
  return g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
}

static gboolean
registry_answers (void)
{
  /* A TCP connect: the TLS registry answers it too. */
  g_autoptr(GSocketClient) client = g_socket_client_new ();
  g_autoptr(GSocketConnection) conn = NULL;

  conn = g_socket_client_connect_to_host (client, "127.0.0.1", reg.port, NULL, NULL);
  return conn != NULL;
}

static char *
registry_ref (const char *repo_tag)
{
  return g_strdup_printf ("docker://127.0.0.1:%u/%s", reg.port, repo_tag);
}

/* skopeo copy of the layout @layout:@tag to test/@repo_tag in the registry; @all: every platform of an index. */
static gboolean
push (const char *layout, const char *tag, const char *repo_tag, gboolean all)
{
  g_autofree char *src = g_strdup_printf ("oci:%s:%s", layout, tag);
  g_autofree char *dst = g_strdup_printf ("docker://127.0.0.1:%u/%s", reg.port, repo_tag);
  const char *argv[] = { "skopeo", "copy", "--quiet", "--dest-tls-verify=false", all ? "--all" : "--quiet", src, dst,
                         NULL };

  return run_tool (argv, NULL);
}

static char *
layout_digest (const char *layout)
{
  g_autofree char *path = g_build_filename (layout, "index.json", NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonArray *manifests;

  g_assert_true (json_parser_load_from_file (parser, path, NULL));
  manifests = json_object_get_array_member (json_node_get_object (json_parser_get_root (parser)), "manifests");
  return g_strdup (json_object_get_string_member (json_array_get_object_element (manifests, 0), "digest"));
}

static void
die_with_test (gpointer data)
{
  /* A test that aborts takes its registry with it. */
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

/* Starts docker-registry serve with @config_text (written to DIR/@name.yml), its output to DIR/@name.log;
 * waits until @port answers.  Returns its pid, or 0 with *@problem set. */
static GPid
start_registry (const char *dir, const char *name, const char *config_text, guint16 port, char **problem)
{
  g_autofree char *file = g_strdup_printf ("%s.yml", name);
  g_autofree char *config = g_build_filename (dir, file, NULL);
  g_autofree char *log_name = g_strdup_printf ("%s.log", name);
  g_autofree char *log = g_build_filename (dir, log_name, NULL);
  const char *argv[] = { "docker-registry", "serve", config, NULL };
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDIN_INHERIT);
  g_autoptr(GSubprocess) proc = NULL;
  g_autoptr(GError) error = NULL;
  guint16 saved = reg.port;
  gboolean up = FALSE;
  int log_fd;
  GPid pid;

  g_assert_true (g_file_set_contents (config, config_text, -1, NULL));
  log_fd = open (log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  g_assert_cmpint (log_fd, >=, 0);
  g_subprocess_launcher_take_stdout_fd (launcher, dup (log_fd));
  g_subprocess_launcher_take_stderr_fd (launcher, log_fd);
  g_subprocess_launcher_set_child_setup (launcher, die_with_test, NULL, NULL);
  proc = g_subprocess_launcher_spawnv (launcher, argv, &error);
  g_assert_no_error (error);
  pid = atoi (g_subprocess_get_identifier (proc));
  reg.port = port;
  for (int i = 0; i < 200 && !(up = registry_answers ()); i++)
    g_usleep (50000);
  reg.port = saved;
  if (!up)
    {
      *problem = g_strdup_printf ("docker-registry did not answer on 127.0.0.1:%u; see %s", port, log);
      kill (pid, SIGKILL);
      return 0;
    }
  return pid;
}

static void
registry_start (void)
{
  g_autofree char *config_text = NULL, *rootfs = NULL, *bundle = NULL, *image = NULL;
  g_autoptr(GError) error = NULL;
  const char *tools[] = { "docker-registry", "umoci", "skopeo", "openssl" };

  for (gsize i = 0; i < G_N_ELEMENTS (tools); i++)
    {
      g_autofree char *found = g_find_program_in_path (tools[i]);
      if (found == NULL)
        {
          reg.problem = g_strdup_printf ("'%s' is not installed; scripts/deps.sh installs it (apt-get install "
                                         "docker-registry skopeo umoci busybox-static)", tools[i]);
          return;
        }
    }
  if (!g_file_test ("/bin/busybox", G_FILE_TEST_IS_EXECUTABLE))
    {
      reg.problem = g_strdup ("/bin/busybox is missing; apt-get install busybox-static");
      return;
    }
  reg.dir = g_dir_make_tmp ("sandstep-test-image-XXXXXX", &error);
  g_assert_no_error (error);
  reg.port = free_port ();
  config_text = g_strdup_printf ("version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: %s/storage\n"
                                 "http:\n  addr: 127.0.0.1:%u\n", reg.dir, reg.port);
  reg.log = g_build_filename (reg.dir, "registry.log", NULL);
  reg.pid = start_registry (reg.dir, "registry", config_text, reg.port, &reg.problem);
  if (reg.pid == 0)
    return;

  /* busybox-static as a one-layer image, the way the reference notes do it. */
  reg.busybox_layout = g_build_filename (reg.dir, "busybox", NULL);
  rootfs = g_build_filename (reg.dir, "rootfs", NULL);
  bundle = g_build_filename (reg.dir, "bundle", NULL);
  image = g_strdup_printf ("%s:t1", reg.busybox_layout);
  {
    g_autofree char *bin = g_build_filename (rootfs, "bin", NULL);
    g_autofree char *copy = g_build_filename (bin, "busybox", NULL);
    g_autofree char *copy_to = g_build_filename (bundle, "rootfs", NULL);
    const char *init[] = { "umoci", "init", "--layout", reg.busybox_layout, NULL };
    const char *new_[] = { "umoci", "new", "--image", image, NULL };
    const char *unpack[] = { "umoci", "unpack", "--rootless", "--image", image, bundle, NULL };
    const char *cp[] = { "cp", "-a", "/bin/busybox", bin, NULL };
    const char *cp_in[] = { "cp", "-a", bin, copy_to, NULL };
    const char *repack[] = { "umoci", "repack", "--image", image, bundle, NULL };

    g_assert_cmpint (g_mkdir_with_parents (bin, 0755), ==, 0);
    if (!run_tool (init, NULL) || !run_tool (new_, NULL) || !run_tool (unpack, NULL) || !run_tool (cp, NULL) ||
        !run_tool (cp_in, NULL) || !run_tool (repack, NULL) || !push (reg.busybox_layout, "t1", "test/busybox:1", FALSE))
      {
        reg.problem = g_strdup ("building or pushing the busybox image failed (see the messages above)");
        return;
      }
  }
  reg.busybox_digest = layout_digest (reg.busybox_layout);
}

static void
registry_stop (void)
{
  if (reg.pid > 0)
    {
      kill (reg.pid, SIGTERM);
      waitpid (reg.pid, NULL, 0);
    }
  if (reg.dir != NULL)
    {
      const char *argv[] = { "rm", "-rf", reg.dir, NULL };
      run_tool (argv, NULL);
    }
}

static gboolean
need_registry (void)
{
  if (reg.problem == NULL)
    return TRUE;
  g_test_fail_printf ("%s", reg.problem);
  return FALSE;
}

/* GETs of @repo's blob @digest the registry logged since @offset. */
static guint
blob_gets (const char *repo, const char *digest, gsize offset)
{
  g_autofree char *text = NULL;
  g_autofree char *needle = g_strdup_printf ("\"GET /v2/%s/blobs/%s ", repo, digest);
  gsize len = 0;
  guint n = 0;

  g_assert_true (g_file_get_contents (reg.log, &text, &len, NULL));
  for (const char *p = text + MIN (offset, len); (p = strstr (p, needle)) != NULL; p++)
    n++;
  return n;
}

static gsize
log_size (void)
{
  struct stat st;

  return stat (reg.log, &st) == 0 ? (gsize) st.st_size : 0;
}

/* ---- crafted layers and layouts ---- */

typedef struct {
  char type;            /* tar type: '0' file, '1' hard link, '2' symlink, '3' char, '4' block, '5' dir */
  const char *name;
  const char *link;
  const char *data;
  guint mode;
  gsize size;           /* when data is NULL: this many 'x' bytes */
  GBytes *content;      /* if not NULL: the data, binary (data and size unused) */
} Entry;

/* @value in octal, zero-padded to @width - 1 digits and a NUL, as ustar numbers are. */
static void
octal (guchar *field, gsize width, guint64 value)
{
  for (gsize i = width - 1; i-- > 0; value >>= 3)
    field[i] = '0' + (value & 7);
  field[width - 1] = '\0';
}

static void
tar_entry (GByteArray *out, const Entry *e)
{
  guchar h[512] = { 0 };
  gsize size = e->content != NULL ? g_bytes_get_size (e->content) : e->data != NULL ? strlen (e->data) : e->size;
  guint sum = 0;
  static const guchar zeros[512] = { 0 };

  g_assert_cmpuint (strlen (e->name), <, 100);
  memcpy (h, e->name, strlen (e->name));
  octal (h + 100, 8, e->mode != 0 ? e->mode : (e->type == '5' ? 0755 : 0644));
  octal (h + 108, 8, 0);
  octal (h + 116, 8, 0);
  octal (h + 124, 12, size);
  octal (h + 136, 12, 0);
  memset (h + 148, ' ', 8);
  h[156] = e->type;
  if (e->link != NULL)
    memcpy (h + 157, e->link, strlen (e->link));
  memcpy (h + 257, "ustar", 6);
  memcpy (h + 263, "00", 2);
  if (e->type == '3')
    {
      octal (h + 329, 8, 1);
      octal (h + 337, 8, 3);
    }
  for (gsize i = 0; i < 512; i++)
    sum += h[i];
  octal (h + 148, 7, sum);
  h[155] = ' ';
  g_byte_array_append (out, h, 512);
  if (e->content != NULL)
    g_byte_array_append (out, g_bytes_get_data (e->content, NULL), size);
  else if (e->data != NULL)
    g_byte_array_append (out, (const guchar *) e->data, size);
  else
    for (gsize i = 0; i < size; i++)
      g_byte_array_append (out, (const guchar *) "x", 1);
  g_byte_array_append (out, zeros, (512 - size % 512) % 512);
}

static GBytes *
tar_build (const Entry *entries, gsize n)
{
  GByteArray *out = g_byte_array_new ();
  static const guchar zeros[1024] = { 0 };

  for (gsize i = 0; i < n; i++)
    tar_entry (out, &entries[i]);
  g_byte_array_append (out, zeros, sizeof zeros);
  return g_byte_array_free_to_bytes (out);
}

/* One pax extended header record: "LEN key=value\n", LEN counting itself. */
static char *
pax_record (const char *key, const char *value)
{
  gsize body = strlen (key) + strlen (value) + 3;   /* ' ', '=', '\n' */
  gsize digits = 1;

  /* The length's own digits count: grow them until the total has that many. */
  for (gsize limit = 10; body + digits >= limit; limit *= 10)
    digits++;
  return g_strdup_printf ("%" G_GSIZE_FORMAT " %s=%s\n", body + digits, key, value);
}

static GBytes *
gzip_bytes (GBytes *in)
{
  g_autoptr(GZlibCompressor) gz = g_zlib_compressor_new (G_ZLIB_COMPRESSOR_FORMAT_GZIP, -1);
  g_autoptr(GOutputStream) mem = g_memory_output_stream_new_resizable ();
  g_autoptr(GOutputStream) conv = g_converter_output_stream_new (mem, G_CONVERTER (gz));
  g_autoptr(GError) error = NULL;

  g_output_stream_write_all (conv, g_bytes_get_data (in, NULL), g_bytes_get_size (in), NULL, NULL, &error);
  g_assert_no_error (error);
  g_output_stream_close (conv, NULL, &error);
  g_assert_no_error (error);
  return g_memory_output_stream_steal_as_bytes (G_MEMORY_OUTPUT_STREAM (mem));
}

static char *
put_blob (const char *layout, GBytes *bytes)
{
  g_autofree char *hex = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, bytes);
  g_autofree char *dir = g_build_filename (layout, "blobs", "sha256", NULL);
  g_autofree char *path = g_build_filename (dir, hex, NULL);

  g_assert_cmpint (g_mkdir_with_parents (dir, 0755), ==, 0);
  g_assert_true (g_file_set_contents (path, g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes), NULL));
  return g_strconcat ("sha256:", hex, NULL);
}

static char *
put_json (const char *layout, const char *json, gsize *out_size)
{
  g_autoptr(GBytes) bytes = g_bytes_new (json, strlen (json));

  *out_size = strlen (json);
  return put_blob (layout, bytes);
}

/* An OCI layout at @layout whose image @tag has the layers @layers (tars,
 * gzipped here); @arch non-NULL: tag an index whose only manifest is for
 * linux/@arch instead.  Returns the image manifest's digest; the layer
 * digests go to @out_layers (may be NULL). */
static char *make_layout_compressed (const char *layout, const char *tag, GBytes *const *layers, guint n,
                                     const char *arch, GPtrArray *out_layers, GBytes *(*compress) (GBytes *),
                                     const char *media_type);

static char *
make_layout (const char *layout, const char *tag, GBytes *const *layers, guint n, const char *arch,
             GPtrArray *out_layers)
{
  return make_layout_compressed (layout, tag, layers, n, arch, out_layers, gzip_bytes, LAYER_GZIP);
}

/* make_layout() with the layers compressed by @compress, of @media_type. */
static char *
make_layout_compressed (const char *layout, const char *tag, GBytes *const *layers, guint n, const char *arch,
                        GPtrArray *out_layers, GBytes *(*compress) (GBytes *), const char *media_type)
{
  g_autoptr(GString) layer_json = g_string_new (NULL), diff_ids = g_string_new (NULL);
  g_autofree char *config = NULL, *config_digest = NULL, *manifest = NULL, *manifest_digest = NULL;
  g_autofree char *index = NULL, *index_path = NULL, *top = NULL, *marker = NULL;
  gsize config_size = 0, manifest_size = 0;

  g_assert_cmpint (g_mkdir_with_parents (layout, 0755), ==, 0);
  for (guint i = 0; i < n; i++)
    {
      g_autoptr(GBytes) gz = compress (layers[i]);
      g_autofree char *digest = put_blob (layout, gz);
      g_autofree char *diff = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, layers[i]);

      g_string_append_printf (layer_json, "%s{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":%" G_GSIZE_FORMAT "}",
                              i > 0 ? "," : "", media_type, digest, g_bytes_get_size (gz));
      g_string_append_printf (diff_ids, "%s\"sha256:%s\"", i > 0 ? "," : "", diff);
      if (out_layers != NULL)
        g_ptr_array_add (out_layers, g_steal_pointer (&digest));
    }
  config = g_strdup_printf ("{\"architecture\":\"%s\",\"os\":\"linux\",\"config\":{\"Env\":[\"PATH=/bin\"]},"
                            "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[%s]}}", arch != NULL ? arch : "amd64",
                            diff_ids->str);
  config_digest = put_json (layout, config, &config_size);
  manifest = g_strdup_printf ("{\"schemaVersion\":2,\"mediaType\":\"" OCI_MANIFEST "\",\"config\":{\"mediaType\":"
                              "\"application/vnd.oci.image.config.v1+json\",\"digest\":\"%s\",\"size\":%" G_GSIZE_FORMAT
                              "},\"layers\":[%s]}", config_digest, config_size, layer_json->str);
  manifest_digest = put_json (layout, manifest, &manifest_size);
  if (arch != NULL)
    {
      g_autofree char *nested = g_strdup_printf ("{\"schemaVersion\":2,\"mediaType\":\"" OCI_INDEX "\",\"manifests\":"
                                                 "[{\"mediaType\":\"" OCI_MANIFEST "\",\"digest\":\"%s\",\"size\":%"
                                                 G_GSIZE_FORMAT ",\"platform\":{\"architecture\":\"%s\",\"os\":"
                                                 "\"linux\"}}]}", manifest_digest, manifest_size, arch);
      gsize nested_size = 0;
      g_autofree char *nested_digest = put_json (layout, nested, &nested_size);
      top = g_strdup_printf ("{\"mediaType\":\"" OCI_INDEX "\",\"digest\":\"%s\",\"size\":%" G_GSIZE_FORMAT,
                             nested_digest, nested_size);
    }
  else
    top = g_strdup_printf ("{\"mediaType\":\"" OCI_MANIFEST "\",\"digest\":\"%s\",\"size\":%" G_GSIZE_FORMAT,
                           manifest_digest, manifest_size);
  index = g_strdup_printf ("{\"schemaVersion\":2,\"manifests\":[%s,\"annotations\":{\"org.opencontainers.image.ref."
                           "name\":\"%s\"}}]}", top, tag);
  index_path = g_build_filename (layout, "index.json", NULL);
  g_assert_true (g_file_set_contents (index_path, index, -1, NULL));
  marker = g_build_filename (layout, "oci-layout", NULL);
  g_assert_true (g_file_set_contents (marker, "{\"imageLayoutVersion\":\"1.0.0\"}", -1, NULL));
  return g_steal_pointer (&manifest_digest);
}

/* A one-layer layout of @entries under the fixture's host dir, tagged "t"; returns "oci:DIR:t" and, in
 * @out_dir (may be NULL), DIR. */
static char *
one_layer_layout (SandstepTestFixture *f, const char *name, const Entry *entries, gsize n, GPtrArray *out_layers,
                  char **out_dir)
{
  g_autofree char *layout = sandstep_test_host_path (f, name);
  g_autoptr(GBytes) tar = tar_build (entries, n);
  g_autofree char *digest = make_layout (layout, "t", &tar, 1, NULL, out_layers);
  char *ref = g_strdup_printf ("oci:%s:t", layout);

  if (out_dir != NULL)
    *out_dir = g_steal_pointer (&layout);
  return ref;
}

/* ---- what the store holds ---- */

static gint
by_name (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* The names in @dir, sorted and joined by spaces ("" when none).  (sandstep_test_dir_names() sorts
 * with g_strcmp0 on the array's slots, not on the names, so its order is not the names'.) */
static char *
dir_names (const char *dir)
{
  g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
  g_autoptr(GPtrArray) names = g_ptr_array_new ();
  const char *name;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    g_ptr_array_add (names, (gpointer) name);
  g_ptr_array_sort (names, by_name);
  g_ptr_array_add (names, NULL);
  return g_strjoinv (" ", (char **) names->pdata);
}

static char *
store_path (SandstepTestFixture *f, const char *rel)
{
  return g_build_filename (f->state_dir, "images", rel, NULL);
}

static char *
layer_dir (SandstepTestFixture *f, const char *digest)
{
  g_autofree char *rel = g_strdup_printf ("layers/sha256/%s", digest + strlen ("sha256:"));
  return store_path (f, rel);
}

/* Asserts that the store holds no image, no named blob or layer, and no unpack leftovers. */
static void
assert_store_empty (SandstepTestFixture *f)
{
  static const char *const subdirs[] = { "images", "blobs/sha256", "layers/sha256", "layers" };

  for (gsize i = 0; i < G_N_ELEMENTS (subdirs); i++)
    {
      g_autofree char *dir = store_path (f, subdirs[i]);
      g_autofree char *names = dir_names (dir);
      /* layers/ itself holds sha256/ and nothing else */
      g_assert_cmpstr (names, ==, strcmp (subdirs[i], "layers") == 0 ? "sha256" : "");
    }
}

/* Asserts that a failed pull left no image, no layer, no unpack leftovers, and not the blob @refused
 * (NULL: no blob but verified configs, which only gc removes). */
static void
assert_no_image (SandstepTestFixture *f, const char *refused)
{
  g_autofree char *images = store_path (f, "images");
  g_autofree char *layers = store_path (f, "layers");
  g_autofree char *named = store_path (f, "layers/sha256");
  g_autofree char *a = dir_names (images);
  g_autofree char *b = dir_names (layers);
  g_autofree char *c = dir_names (named);

  g_assert_cmpstr (a, ==, "");
  g_assert_cmpstr (b, ==, "sha256");
  g_assert_cmpstr (c, ==, "");
  if (refused != NULL)
    {
      g_autofree char *rel = g_strdup_printf ("blobs/sha256/%s", refused + strlen ("sha256:"));
      g_autofree char *path = store_path (f, rel);
      g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
    }
}

static void
setup (SandstepTestFixture *f, gconstpointer data)
{
  sandstep_test_setup (f, data);
  sandstep_test_fixture_setenv (f, "SANDSTEP_IMAGE_DIR", NULL);
  sandstep_test_fixture_setenv (f, "SANDSTEP_INSECURE_REGISTRIES", NULL);
}

/* ---- the reference grammar ---- */

static void
test_reference (void)
{
  static const struct {
    const char *text;
    SandstepImageTransport transport;
    const char *registry, *repository, *tag, *digest, *path, *shown;
  } good[] = {
    { "docker://busybox", SANDSTEP_IMAGE_TRANSPORT_REGISTRY, "docker.io", "library/busybox", "latest", NULL, NULL,
      "docker://docker.io/library/busybox:latest" },
    { "docker://user/repo:v1.2", SANDSTEP_IMAGE_TRANSPORT_REGISTRY, "docker.io", "user/repo", "v1.2", NULL, NULL,
      "docker://docker.io/user/repo:v1.2" },
    { "docker://127.0.0.1:5000/a/b:1", SANDSTEP_IMAGE_TRANSPORT_REGISTRY, "127.0.0.1:5000", "a/b", "1", NULL, NULL,
      "docker://127.0.0.1:5000/a/b:1" },
    { "docker://localhost/x@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
      SANDSTEP_IMAGE_TRANSPORT_REGISTRY, "localhost", "x", NULL,
      "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", NULL,
      "docker://localhost/x@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" },
    { "docker://ghcr.io/o/r_x.y__z:t@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
      SANDSTEP_IMAGE_TRANSPORT_REGISTRY, "ghcr.io", "o/r_x.y__z", "t",
      "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", NULL, NULL },
    { "oci:/tmp/l:t1", SANDSTEP_IMAGE_TRANSPORT_OCI, NULL, NULL, "t1", NULL, "/tmp/l", "oci:/tmp/l:t1" },
    { "oci:/tmp/l", SANDSTEP_IMAGE_TRANSPORT_OCI, NULL, NULL, NULL, NULL, "/tmp/l", "oci:/tmp/l" },
    { "oci-archive:/x/a.tar:v", SANDSTEP_IMAGE_TRANSPORT_OCI_ARCHIVE, NULL, NULL, "v", NULL, "/x/a.tar", NULL },
    { "docker-archive:/x/a:b.tar", SANDSTEP_IMAGE_TRANSPORT_DOCKER_ARCHIVE, NULL, NULL, NULL, NULL, "/x/a:b.tar", NULL },
  };
  static const char *const bad[] = {
    "busybox", "", "docker://", "docker://Busybox", "docker://a/b:bad tag", "docker://a@sha256:xyz",
    "docker://a:-x", "docker://a//b", "docker://a/-b", "docker://host:99999/a", "oci:", "docker://a@md5:00",
    "docker://a/b\n:1",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (good); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(SandstepImageRef) ref = sandstep_image_ref_parse (good[i].text, &error);

      g_test_message ("%s", good[i].text);
      g_assert_no_error (error);
      g_assert_cmpint (ref->transport, ==, good[i].transport);
      g_assert_cmpstr (ref->registry, ==, good[i].registry);
      g_assert_cmpstr (ref->repository, ==, good[i].repository);
      g_assert_cmpstr (ref->tag, ==, good[i].tag);
      g_assert_cmpstr (ref->digest, ==, good[i].digest);
      g_assert_cmpstr (ref->path, ==, good[i].path);
      if (good[i].shown != NULL)
        g_assert_cmpstr (ref->text, ==, good[i].shown);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(SandstepImageRef) ref = sandstep_image_ref_parse (bad[i], &error);

      g_test_message ("refused: %s", bad[i]);
      g_assert_null (ref);
      g_assert_error (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_BAD_REFERENCE);
    }
}

/* ---- pulls ---- */

/* Asserts that the store holds the image @digest (NULL: its most recently used one) and that its first
 * layer holds /bin/busybox whole. */
static void
assert_busybox_image (SandstepTestFixture *f, const char *digest)
{
  g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "images", "--json", NULL);
  g_autoptr(JsonNode) root = NULL;
  JsonObject *first;
  JsonArray *all;
  struct stat host, got;
  g_autofree char *path = NULL;

  sandstep_test_assert_status (r, 0);
  root = sandstep_test_parse_json (r->out);
  all = json_node_get_array (root);
  g_assert_cmpuint (json_array_get_length (all), >, 0);
  first = json_array_get_object_element (all, json_array_get_length (all) - 1);
  for (guint i = 0; digest != NULL && i < json_array_get_length (all); i++)
    if (g_strcmp0 (json_object_get_string_member (json_array_get_object_element (all, i), "digest"), digest) == 0)
      first = json_array_get_object_element (all, i);
  if (digest != NULL)
    g_assert_cmpstr (json_object_get_string_member (first, "digest"), ==, digest);
  path = g_build_filename (layer_dir (f, json_array_get_string_element (json_object_get_array_member (first, "layers"),
                                                                        0)), "bin", "busybox", NULL);
  g_assert_cmpint (stat ("/bin/busybox", &host), ==, 0);
  g_assert_cmpint (lstat (path, &got), ==, 0);
  g_assert_true (S_ISREG (got.st_mode));
  g_assert_cmpint (got.st_size, ==, host.st_size);
  g_assert_cmpint (got.st_mode & 0111, !=, 0);
}

static void
assert_busybox_unpacked (SandstepTestFixture *f)
{
  assert_busybox_image (f, reg.busybox_digest);
}

static void
test_pull_tag_and_digest (SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *ref = NULL, *by_digest = NULL, *expected = NULL, *short_digest = NULL;
  g_autoptr(SandstepTestResult) r = NULL, again = NULL, list = NULL;

  if (!need_registry ())
    return;
  ref = registry_ref ("test/busybox:1");
  r = sandstep_test_helper (f, "pull", ref, NULL);
  sandstep_test_assert_status (r, 0);
  expected = g_strdup_printf ("%s\n", reg.busybox_digest);
  g_assert_cmpstr (r->out, ==, expected);
  /* Not a terminal: one line per layer. */
  sandstep_test_assert_contains (r->err, "layer 1/1");
  sandstep_test_assert_contains (r->err, "fetched and unpacked");
  assert_busybox_unpacked (f);

  by_digest = g_strdup_printf ("docker://127.0.0.1:%u/test/busybox@%s", reg.port, reg.busybox_digest);
  again = sandstep_test_helper (f, "pull", by_digest, NULL);
  sandstep_test_assert_status (again, 0);
  g_assert_cmpstr (again->out, ==, expected);
  sandstep_test_assert_contains (again->err, "already here");

  list = sandstep_test_helper (f, "images", NULL);
  sandstep_test_assert_status (list, 0);
  short_digest = g_strndup (reg.busybox_digest, 19);
  sandstep_test_assert_contains (list->out, ref);
  sandstep_test_assert_contains (list->out, by_digest);
  sandstep_test_assert_contains (list->out, short_digest);
}

static void
test_pull_layout (SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *ref = NULL, *expected = NULL, *archive = NULL, *archive_ref = NULL, *docker = NULL;
  g_autofree char *docker_ref = NULL;
  g_autoptr(SandstepTestResult) r = NULL, ar = NULL, dr = NULL;

  if (!need_registry ())
    return;
  ref = g_strdup_printf ("oci:%s:t1", reg.busybox_layout);
  r = sandstep_test_helper (f, "pull", ref, NULL);
  sandstep_test_assert_status (r, 0);
  expected = g_strdup_printf ("%s\n", reg.busybox_digest);
  g_assert_cmpstr (r->out, ==, expected);
  assert_busybox_unpacked (f);

  /* oci-archive: the same layout as a tar. */
  archive = sandstep_test_host_path (f, "busybox.tar");
  {
    const char *argv[] = { "tar", "-C", reg.busybox_layout, "-cf", archive, ".", NULL };
    g_assert_true (run_tool (argv, NULL));
  }
  archive_ref = g_strdup_printf ("oci-archive:%s:t1", archive);
  ar = sandstep_test_helper (f, "pull", archive_ref, NULL);
  sandstep_test_assert_status (ar, 0);
  g_assert_cmpstr (ar->out, ==, expected);

  /* docker-archive: what `docker save` writes (here skopeo): uncompressed layers, a manifest made from it. */
  docker = sandstep_test_host_path (f, "busybox-docker.tar");
  {
    g_autofree char *src = g_strdup_printf ("oci:%s:t1", reg.busybox_layout);
    g_autofree char *dst = g_strdup_printf ("docker-archive:%s:test/busybox:1", docker);
    const char *argv[] = { "skopeo", "copy", "--quiet", src, dst, NULL };
    g_assert_true (run_tool (argv, NULL));
  }
  docker_ref = g_strdup_printf ("docker-archive:%s", docker);
  dr = sandstep_test_helper (f, "pull", docker_ref, NULL);
  sandstep_test_assert_status (dr, 0);
  g_assert_cmpuint (strlen (dr->out), ==, strlen ("sha256:") + 64 + 1);
  g_assert_true (g_str_has_prefix (dr->out, "sha256:"));
  {
    g_autofree char *digest = g_strndup (dr->out, strlen (dr->out) - 1);
    g_autoptr(SandstepTestResult) again = sandstep_test_helper (f, "pull", docker_ref, NULL);
    assert_busybox_image (f, digest);
    /* The same archive is the same image. */
    sandstep_test_assert_status (again, 0);
    g_assert_cmpstr (again->out, ==, dr->out);
  }
}

static void
test_unknown (SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *tag = NULL, *repo = NULL, *layout = NULL;
  g_autoptr(SandstepTestResult) r = NULL, r2 = NULL, r3 = NULL;

  if (!need_registry ())
    return;
  tag = registry_ref ("test/busybox:nope");
  r = sandstep_test_helper (f, "pull", tag, NULL);
  g_assert_cmpint (r->status, !=, 0);
  sandstep_test_assert_contains (r->err, "has no manifest 'nope'");
  g_assert_cmpstr (r->out, ==, "");
  repo = registry_ref ("test/nothing:1");
  r2 = sandstep_test_helper (f, "pull", repo, NULL);
  g_assert_cmpint (r2->status, !=, 0);
  sandstep_test_assert_contains (r2->err, "test/nothing:1");
  layout = g_strdup_printf ("oci:%s:nope", reg.busybox_layout);
  r3 = sandstep_test_helper (f, "pull", layout, NULL);
  g_assert_cmpint (r3->status, !=, 0);
  sandstep_test_assert_contains (r3->err, "no image tagged 'nope'");
  assert_store_empty (f);
  /* A reference that does not parse is a usage error (exit 64), before anything is fetched. */
  {
    g_autoptr(SandstepTestResult) bad = sandstep_test_helper (f, "pull", "busybox", NULL);
    g_assert_cmpint (bad->status, ==, 64);
    sandstep_test_assert_contains (bad->err, "names no transport");
  }
}

/* The registry's stored copy of @digest (it serves what it has, unchecked). */
static char *
registry_blob_file (const char *digest)
{
  const char *hex = digest + strlen ("sha256:");
  g_autofree char *two = g_strndup (hex, 2);

  return g_build_filename (reg.dir, "storage", "docker", "registry", "v2", "blobs", "sha256", two, hex, "data", NULL);
}

static void
test_tampered (SandstepTestFixture *f, gconstpointer data)
{
  const Entry tampered[] = { { '0', "tamper", NULL, "a layer that will be tampered with, unique to this test" } };
  const Entry truncated[] = { { '0', "truncate", NULL, NULL, 0644, 200000 }, { '0', "t2", NULL, "unique too" } };
  const Entry oversized[] = { { '0', "oversize", NULL, "a blob the registry will serve too long" } };
  g_autoptr(GPtrArray) layers3 = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *layout3 = NULL, *ref3 = NULL, *file3 = NULL;
  g_autoptr(SandstepTestResult) r3 = NULL;
  g_autoptr(GPtrArray) layers = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) layers2 = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *layout = NULL, *ref = NULL, *file = NULL, *layout2 = NULL, *ref2 = NULL, *file2 = NULL;
  g_autofree char *contents = NULL;
  gsize len = 0;
  g_autoptr(SandstepTestResult) r = NULL, r2 = NULL;

  if (!need_registry ())
    return;
  g_free (one_layer_layout (f, "tamper", tampered, G_N_ELEMENTS (tampered), layers, &layout));
  g_assert_true (push (layout, "t", "test/tamper:1", FALSE));
  /* The same bytes, one changed: the registry serves them as the blob. */
  file = registry_blob_file (layers->pdata[0]);
  g_assert_true (g_file_get_contents (file, &contents, &len, NULL));
  contents[len / 2] ^= 0x55;
  g_assert_true (g_file_set_contents (file, contents, len, NULL));
  ref = registry_ref ("test/tamper:1");
  r = sandstep_test_helper (f, "pull", ref, NULL);
  g_assert_cmpint (r->status, !=, 0);
  sandstep_test_assert_contains (r->err, layers->pdata[0]);
  sandstep_test_assert_contains (r->err, "does not match its digest");
  assert_no_image (f, layers->pdata[0]);

  /* A blob shorter than its manifest says. */
  g_free (one_layer_layout (f, "truncate", truncated, G_N_ELEMENTS (truncated), layers2, &layout2));
  g_assert_true (push (layout2, "t", "test/truncate:1", FALSE));
  file2 = registry_blob_file (layers2->pdata[0]);
  g_clear_pointer (&contents, g_free);
  g_assert_true (g_file_get_contents (file2, &contents, &len, NULL));
  g_assert_true (g_file_set_contents (file2, contents, len - 10, NULL));
  ref2 = registry_ref ("test/truncate:1");
  r2 = sandstep_test_helper (f, "pull", ref2, NULL);
  g_assert_cmpint (r2->status, !=, 0);
  sandstep_test_assert_contains (r2->err, layers2->pdata[0]);
  sandstep_test_assert_contains (r2->err, "truncated");
  assert_no_image (f, layers2->pdata[0]);

  /* A blob longer than its manifest says: refused as the bytes come. */
  g_free (one_layer_layout (f, "oversize", oversized, G_N_ELEMENTS (oversized), layers3, &layout3));
  g_assert_true (push (layout3, "t", "test/oversize:1", FALSE));
  file3 = registry_blob_file (layers3->pdata[0]);
  g_clear_pointer (&contents, g_free);
  g_assert_true (g_file_get_contents (file3, &contents, &len, NULL));
  {
    g_autofree char *longer = g_malloc0 (len + 4096);
    memcpy (longer, contents, len);
    g_assert_true (g_file_set_contents (file3, longer, len + 4096, NULL));
  }
  ref3 = registry_ref ("test/oversize:1");
  r3 = sandstep_test_helper (f, "pull", ref3, NULL);
  g_assert_cmpint (r3->status, !=, 0);
  sandstep_test_assert_contains (r3->err, layers3->pdata[0]);
  sandstep_test_assert_contains (r3->err, "longer than");
  assert_no_image (f, layers3->pdata[0]);
}

static void
test_platform (SandstepTestFixture *f, gconstpointer data)
{
  const Entry entries[] = { { '0', "hello", NULL, "s390x only" } };
  g_autoptr(GBytes) tar = tar_build (entries, G_N_ELEMENTS (entries));
  g_autofree char *layout = sandstep_test_host_path (f, "s390x");
  g_autofree char *digest = make_layout (layout, "t", &tar, 1, "s390x", NULL);
  g_autofree char *ref = g_strdup_printf ("oci:%s:t", layout);
  g_autofree char *remote = NULL;
  g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "pull", ref, NULL);
  g_autoptr(SandstepTestResult) r2 = NULL;

  g_assert_cmpint (r->status, !=, 0);
  sandstep_test_assert_contains (r->err, "linux/s390x");
  sandstep_test_assert_contains (r->err, sandstep_image_host_platform ());
  assert_store_empty (f);
  if (!need_registry ())
    return;
  g_assert_true (push (layout, "t", "test/s390x:1", TRUE));
  remote = registry_ref ("test/s390x:1");
  r2 = sandstep_test_helper (f, "pull", remote, NULL);
  g_assert_cmpint (r2->status, !=, 0);
  sandstep_test_assert_contains (r2->err, "linux/s390x");
  assert_store_empty (f);
}

/* ---- hostile layers ---- */

typedef struct {
  const char *what;
  Entry entries[4];
  gsize n;
  const char *message;  /* in stderr */
} HostileCase;

static void
test_hostile (SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *outside = sandstep_test_host_path (f, "outside");
  g_autofree char *abs_target = g_build_filename (outside, "absolute", NULL);
  g_autofree char *escape = store_path (f, "layers/escape");
  struct stat passwd_before, passwd_after;
  g_autofree char *pax_dotdot = pax_record ("path", "../pax-escape");
  g_autofree char *pax_link = pax_record ("linkpath", "/etc/passwd");
  const HostileCase cases[] = {
    /* The same rules for names that come in a pax header or a GNU long name. */
    { "pax-dot-dot", { { 'x', "PaxHeaders/x", NULL, pax_dotdot }, { '0', "innocent", NULL, "out" } }, 2, "'..'" },
    { "gnu-long-dot-dot", { { 'L', "././@LongLink", NULL, "../gnu-escape" }, { '0', "innocent", NULL, "out" } }, 2,
      "'..'" },
    { "pax-linkpath-absolute", { { 'x', "PaxHeaders/y", NULL, pax_link }, { '1', "hl", "innocent" } }, 2,
      "hard link" },
    { "dot-dot", { { '0', "../escape", NULL, "out" } }, 1, "'..'" },
    { "dot-dot-deep", { { '5', "a/" }, { '0', "a/../../escape", NULL, "out" } }, 2, "'..'" },
    { "absolute", { { '0', abs_target + 0, NULL, "out" } }, 1, "absolute" },
    { "symlink-then-write", { { '2', "lnk", outside }, { '0', "lnk/through", NULL, "out" } }, 2, "symlink" },
    { "symlink-dir-then-write", { { '2', "etc", "/etc" }, { '0', "etc/sandstep-image-test", NULL, "x" } }, 2,
      "symlink" },
    { "hardlink-dot-dot", { { '1', "hl", "../../../../../../etc/passwd" } }, 1, "hard link" },
    { "hardlink-absolute", { { '1', "hl", "/etc/passwd" } }, 1, "hard link" },
    { "hardlink-through-symlink", { { '2', "l2", "/etc" }, { '1', "hl", "l2/passwd" } }, 2, "symlink" },
    { "hardlink-missing", { { '1', "hl", "nothing-here" } }, 1, "hard link" },
  };

  g_assert_cmpint (mkdir (outside, 0700), ==, 0);
  g_assert_cmpint (stat ("/etc/passwd", &passwd_before), ==, 0);
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *name = g_strdup_printf ("hostile-%s", cases[i].what);
      g_autoptr(GPtrArray) layers = g_ptr_array_new_with_free_func (g_free);
      g_autofree char *ref = one_layer_layout (f, name, cases[i].entries, cases[i].n, layers, NULL);
      g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "pull", ref, NULL);
      g_autofree char *names = dir_names (outside);

      g_test_message ("case %s", cases[i].what);
      g_assert_cmpint (r->status, !=, 0);
      sandstep_test_assert_contains (r->err, cases[i].message);
      sandstep_test_assert_contains (r->err, "refused");
      g_assert_cmpstr (names, ==, "");
      g_assert_false (g_file_test (escape, G_FILE_TEST_EXISTS));
      g_assert_false (g_file_test ("/etc/sandstep-image-test", G_FILE_TEST_EXISTS));
      assert_no_image (f, layers->pdata[0]);
    }
  g_assert_cmpint (stat ("/etc/passwd", &passwd_after), ==, 0);
  g_assert_cmpint (passwd_after.st_nlink, ==, passwd_before.st_nlink);
}

/* What is not refused is made harmless: no device nodes, no setuid bits; whiteouts as overlayfs reads them. */
static void
test_harmless (SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *long_name = g_strnfill (150, 'p');
  g_autofree char *long_gnu = g_strnfill (150, 'g');
  g_autofree char *long_pax_path = g_strconcat ("long/", long_name, NULL);
  g_autofree char *pax_path = pax_record ("path", long_pax_path);
  g_autofree char *gnu_path = g_strconcat ("long/", long_gnu, NULL);
  const Entry lower[] = {
    { '5', "etc/" }, { '0', "etc/gone", NULL, "deleted above" }, { '5', "opaque/" }, { '0', "opaque/old", NULL, "o" },
    /* Names longer than ustar's 100 bytes: a pax header's path, a GNU long name. */
    { 'x', "PaxHeaders/long", NULL, pax_path },
    { '0', "pax-short-name", NULL, "from pax" },
    { 'L', "././@LongLink", NULL, gnu_path },
    { '0', "gnu-short-name", NULL, "from gnu" },
    { '3', "null", NULL, NULL, 0666 }, { '4', "sda", NULL, NULL, 0660 },
    { '0', "su", NULL, "setuid", 04755 }, { '0', "sg", NULL, "setgid", 02755 },
  };
  const Entry upper[] = {
    { '0', "etc/.wh.gone", NULL, "" }, { '0', "opaque/.wh..wh..opq", NULL, "" }, { '0', "opaque/new", NULL, "n" },
  };
  GBytes *tars[2] = { tar_build (lower, G_N_ELEMENTS (lower)), tar_build (upper, G_N_ELEMENTS (upper)) };
  g_autoptr(GPtrArray) layers = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *layout = sandstep_test_host_path (f, "harmless");
  g_autofree char *digest = make_layout (layout, "t", tars, 2, NULL, layers);
  g_autofree char *ref = g_strdup_printf ("oci:%s:t", layout);
  g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "pull", ref, NULL);
  g_autofree char *low = NULL, *up = NULL, *path = NULL, *names = NULL;
  struct stat st;
  char value[8] = { 0 };

  g_bytes_unref (tars[0]);
  g_bytes_unref (tars[1]);
  sandstep_test_assert_status (r, 0);
  low = layer_dir (f, layers->pdata[0]);
  up = layer_dir (f, layers->pdata[1]);
  /* No device nodes. */
  names = dir_names (low);
  g_assert_cmpstr (names, ==, "etc long opaque sg su");
  {
    g_autofree char *a = g_build_filename (low, "long", long_name, NULL);
    g_autofree char *b = g_build_filename (low, "long", long_gnu, NULL);
    g_autofree char *ta = NULL, *tb = NULL;
    g_assert_true (g_file_get_contents (a, &ta, NULL, NULL));
    g_assert_cmpstr (ta, ==, "from pax");
    g_assert_true (g_file_get_contents (b, &tb, NULL, NULL));
    g_assert_cmpstr (tb, ==, "from gnu");
  }
  /* No setuid or setgid bit. */
  path = g_build_filename (low, "su", NULL);
  g_assert_cmpint (lstat (path, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 07777, ==, 0755);
  g_free (path);
  path = g_build_filename (low, "sg", NULL);
  g_assert_cmpint (lstat (path, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 07777, ==, 0755);
  g_free (path);
  /* .wh.gone: a 0/0 character device named gone. */
  path = g_build_filename (up, "etc", "gone", NULL);
  g_assert_cmpint (lstat (path, &st), ==, 0);
  g_assert_true (S_ISCHR (st.st_mode));
  g_assert_cmpint (major (st.st_rdev), ==, 0);
  g_assert_cmpint (minor (st.st_rdev), ==, 0);
  g_free (path);
  g_free (names);
  path = g_build_filename (up, "etc", NULL);
  names = dir_names (path);
  g_assert_cmpstr (names, ==, "gone");
  g_free (path);
  /* .wh..wh..opq: the directory is opaque for overlayfs in a user namespace. */
  path = g_build_filename (up, "opaque", NULL);
  g_assert_cmpint (lgetxattr (path, "user.overlay.opaque", value, sizeof value - 1), ==, 1);
  g_assert_cmpstr (value, ==, "y");
  g_free (names);
  names = dir_names (path);
  g_assert_cmpstr (names, ==, "new");
}

static void
test_too_large (SandstepTestFixture *f, gconstpointer data)
{
  const Entry big[] = { { '0', "big", NULL, NULL, 0644, 100 * 1024 } };
  Entry many[40];
  char names[40][16];
  g_autofree char *big_ref = one_layer_layout (f, "big", big, G_N_ELEMENTS (big), NULL, NULL);
  g_autofree char *many_ref = NULL;
  g_autoptr(SandstepTestResult) r = NULL, r2 = NULL, r3 = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS (many); i++)
    {
      snprintf (names[i], sizeof names[i], "f%02u", (unsigned) i);
      many[i] = (Entry) { '0', names[i], NULL, "" };
    }
  many_ref = one_layer_layout (f, "many", many, G_N_ELEMENTS (many), NULL, NULL);
  r = sandstep_test_helper (f, "pull", "--max-image-size=64K", big_ref, NULL);
  g_assert_cmpint (r->status, !=, 0);
  sandstep_test_assert_contains (r->err, "max-image-size");
  assert_no_image (f, NULL);
  /* 40 empty files: each counts 4K, 160K in all. */
  r2 = sandstep_test_helper (f, "pull", "--max-image-size=64K", many_ref, NULL);
  g_assert_cmpint (r2->status, !=, 0);
  sandstep_test_assert_contains (r2->err, "max-image-size");
  assert_no_image (f, NULL);
  /* The same within the bound. */
  r3 = sandstep_test_helper (f, "pull", "--max-image-size=1M", many_ref, NULL);
  sandstep_test_assert_status (r3, 0);
  {
    /* One file whose name implies 45 directories (180K at 4K each, as entries count): refused. */
    g_autoptr(GString) deep = g_string_new (NULL);
    g_autofree char *deep_ref = NULL;
    g_autoptr(SandstepTestResult) r4 = NULL;
    for (int i = 0; i < 45; i++)
      g_string_append (deep, "d/");
    g_string_append (deep, "f");
    {
      const Entry entries[] = { { '0', deep->str, NULL, "" } };
      deep_ref = one_layer_layout (f, "deep", entries, G_N_ELEMENTS (entries), NULL, NULL);
    }
    r4 = sandstep_test_helper (f, "pull", "--max-image-size=64K", deep_ref, NULL);
    g_assert_cmpint (r4->status, !=, 0);
    sandstep_test_assert_contains (r4->err, "max-image-size");
  }
}

/* ---- zstd layers ---- */

#if __has_include(<zstd.h>)
#include <zstd.h>

static GBytes *
zstd_bytes (GBytes *in)
{
  gsize bound = ZSTD_compressBound (g_bytes_get_size (in));
  char *out = g_malloc (bound);
  size_t n = ZSTD_compress (out, bound, g_bytes_get_data (in, NULL), g_bytes_get_size (in), 3);

  g_assert_false (ZSTD_isError (n));
  return g_bytes_new_take (out, n);
}

/* The same, the last 16 bytes cut off. */
static GBytes *
zstd_truncated (GBytes *in)
{
  g_autoptr(GBytes) whole = zstd_bytes (in);

  return g_bytes_new_from_bytes (whole, 0, g_bytes_get_size (whole) - 16);
}

static void
test_zstd (SandstepTestFixture *f, gconstpointer data)
{
  const Entry entries[] = { { '5', "etc/" }, { '0', "etc/zstd", NULL, "read through zstd" },
                            { '0', "padding", NULL, NULL, 0644, 300000 } };
  g_autoptr(GBytes) tar = tar_build (entries, G_N_ELEMENTS (entries));
  g_autoptr(GPtrArray) layers = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) cut = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *layout = sandstep_test_host_path (f, "zstd");
  g_autofree char *cut_layout = sandstep_test_host_path (f, "zstd-cut");
  g_autofree char *d1 = make_layout_compressed (layout, "t", &tar, 1, NULL, layers, zstd_bytes,
                                                "application/vnd.oci.image.layer.v1.tar+zstd");
  g_autofree char *d2 = make_layout_compressed (cut_layout, "t", &tar, 1, NULL, cut, zstd_truncated,
                                                "application/vnd.oci.image.layer.v1.tar+zstd");
  g_autofree char *ref = g_strdup_printf ("oci:%s:t", layout);
  g_autofree char *cut_ref = g_strdup_printf ("oci:%s:t", cut_layout);
  g_autofree char *file = NULL, *text = NULL;
  g_autoptr(SandstepTestResult) bad = sandstep_test_helper (f, "pull", cut_ref, NULL);
  g_autoptr(SandstepTestResult) r = NULL;

  /* A zstd stream that stops in a frame: refused, nothing kept. */
  g_test_message ("%s", bad->err);
  g_assert_cmpint (bad->status, !=, 0);
  sandstep_test_assert_contains (bad->err, "the zstd data ends in a frame");
  assert_no_image (f, cut->pdata[0]);

  r = sandstep_test_helper (f, "pull", ref, NULL);
  sandstep_test_assert_status (r, 0);
  file = g_build_filename (layer_dir (f, layers->pdata[0]), "etc", "zstd", NULL);
  g_assert_true (g_file_get_contents (file, &text, NULL, NULL));
  g_assert_cmpstr (text, ==, "read through zstd");
}
#endif

/* ---- what a user sees of a pull ---- */

/* The busybox image's only layer: its digest and its blob's size. */
static char *
busybox_layer (guint64 *out_size)
{
  g_autofree char *path = g_build_filename (reg.busybox_layout, "blobs", "sha256", reg.busybox_digest + 7, NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonObject *layer;

  g_assert_true (json_parser_load_from_file (parser, path, NULL));
  layer = json_array_get_object_element (
    json_object_get_array_member (json_node_get_object (json_parser_get_root (parser)), "layers"), 0);
  *out_size = json_object_get_int_member (layer, "size");
  return g_strdup (json_object_get_string_member (layer, "digest"));
}

/* The line a pull writes when layer @index of @n, @digest of @size bytes, is done: "sandstep pull: layer
 * I/N sha256:HEX12: SIZE @what". */
static char *
layer_line (guint index, guint n, const char *digest, guint64 size, const char *what)
{
  g_autofree char *shown = sandstep_format_size (size);

  return g_strdup_printf ("sandstep pull: layer %u/%u %.19s: %s %s", index, n, digest, shown, what);
}

/* What a terminal shows of @raw: '\r' goes back to the line's start, ESC [ K erases to its end (all a pull
 * writes), '\n' ends a line.  The lines, joined by '\n'. */
static char *
terminal_screen (const char *raw)
{
  g_autoptr(GString) screen = g_string_new (NULL);
  g_autoptr(GString) line = g_string_new (NULL);
  gsize col = 0;

  for (const char *p = raw; *p != '\0'; p++)
    {
      if (*p == '\r')
        col = 0;
      else if (*p == '\n')
        {
          g_string_append_len (screen, line->str, line->len);
          g_string_append_c (screen, '\n');
          g_string_truncate (line, 0);
          col = 0;
        }
      else if (g_str_has_prefix (p, "\033[K"))
        {
          g_string_truncate (line, col);
          p += 2;
        }
      else
        {
          g_assert_true (g_ascii_isprint (*p));
          if (col < line->len)
            line->str[col] = *p;
          else
            g_string_append_c (line, *p);
          col++;
        }
    }
  g_string_append_len (screen, line->str, line->len);
  return g_strdup (screen->str);
}

/* `sandstep pull @ref` with its stderr on a terminal (a pty in raw mode, so the bytes are the helper's own),
 * into the image store @image_dir; returns what the terminal got, and stdout in @out_stdout. */
static char *
pull_on_terminal (SandstepTestFixture *f, const char *ref, const char *image_dir, char **out_stdout)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE);
  g_autoptr(GSubprocess) proc = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GString) got = g_string_new (NULL);
  g_autofree char *out = NULL;
  const char *argv[] = { f->helper, "pull", ref, NULL };
  char name[64];
  struct termios raw;
  gint64 deadline = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
  int master, slave;

  g_assert_null (f->user);
  master = posix_openpt (O_RDWR | O_NOCTTY | O_CLOEXEC);
  g_assert_cmpint (master, >=, 0);
  g_assert_cmpint (grantpt (master), ==, 0);
  g_assert_cmpint (unlockpt (master), ==, 0);
  g_assert_cmpint (ptsname_r (master, name, sizeof name), ==, 0);
  slave = open (name, O_RDWR | O_NOCTTY | O_CLOEXEC);
  g_assert_cmpint (slave, >=, 0);
  g_assert_cmpint (tcgetattr (slave, &raw), ==, 0);
  cfmakeraw (&raw);
  g_assert_cmpint (tcsetattr (slave, TCSANOW, &raw), ==, 0);
  g_subprocess_launcher_set_environ (launcher, f->envp);
  g_subprocess_launcher_setenv (launcher, "SANDSTEP_IMAGE_DIR", image_dir, TRUE);
  g_subprocess_launcher_set_cwd (launcher, f->host_dir);
  g_subprocess_launcher_take_stderr_fd (launcher, slave);
  proc = g_subprocess_launcher_spawnv (launcher, argv, &error);
  g_assert_no_error (error);
  /* Our copy of the terminal's other end goes, so that the master reads EIO once the pull is done with it. */
  g_clear_object (&launcher);
  for (;;)
    {
      struct pollfd pfd = { .fd = master, .events = POLLIN };
      char buf[4096];
      ssize_t n;

      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      if (poll (&pfd, 1, 1000) <= 0)
        continue;
      n = read (master, buf, sizeof buf);
      if (n <= 0)
        break;
      g_string_append_len (got, buf, n);
    }
  close (master);
  g_assert_true (g_subprocess_communicate_utf8 (proc, NULL, NULL, &out, NULL, &error));
  g_assert_no_error (error);
  g_assert_true (g_subprocess_get_if_exited (proc));
  g_assert_cmpint (g_subprocess_get_exit_status (proc), ==, 0);
  *out_stdout = g_steal_pointer (&out);
  return g_strdup (got->str);
}

static void
test_pull_progress (SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *ref = NULL, *layer = NULL, *fetched = NULL, *present = NULL, *expected = NULL;
  g_autofree char *raw = NULL, *screen = NULL, *out = NULL, *tty_store = NULL, *progress = NULL, *total = NULL;
  g_autoptr(SandstepTestResult) r = NULL, again = NULL;
  guint64 size = 0;

  g_test_summary ("issue 27: what a user sees of a pull: off a terminal one line per layer, and nothing else; on "
                  "a terminal a line redrawn with the bytes and rate, replaced by the layer's final line");
  if (!need_registry ())
    return;
  g_assert_true (push (reg.busybox_layout, "t1", "test/progress:1", FALSE));
  ref = registry_ref ("test/progress:1");
  layer = busybox_layer (&size);
  fetched = layer_line (1, 1, layer, size, "fetched and unpacked\n");
  present = layer_line (1, 1, layer, size, "already here\n");
  expected = g_strdup_printf ("%s\n", reg.busybox_digest);

  /* Not a terminal: a log gets the layer's one line, no redraws. */
  r = sandstep_test_helper (f, "pull", ref, NULL);
  sandstep_test_assert_status (r, 0);
  g_assert_cmpstr (r->out, ==, expected);
  g_assert_cmpstr (r->err, ==, fetched);
  again = sandstep_test_helper (f, "pull", ref, NULL);
  sandstep_test_assert_status (again, 0);
  g_assert_cmpstr (again->err, ==, present);

  /* A terminal: the layer's line redrawn as bytes arrive, then its final line over it, whole. */
  tty_store = sandstep_test_host_path (f, "tty-store");
  raw = pull_on_terminal (f, ref, tty_store, &out);
  {
    g_autofree char *escaped = g_strescape (raw, NULL);
    g_test_message ("the terminal got: %s", escaped);
  }
  g_assert_cmpstr (out, ==, expected);
  total = sandstep_format_size (size);
  progress = g_strdup_printf ("\r\033[Ksandstep pull: layer 1/1 %.19s: ", layer);
  g_assert_true (g_str_has_prefix (raw, progress));
  {
    g_autofree char *of = g_strdup_printf (" of %s, ", total);
    g_autofree char *last = g_strconcat ("\r\033[K", fetched, NULL);
    sandstep_test_assert_contains (raw, of);
    sandstep_test_assert_contains (raw, "/s\r\033[K");
    g_assert_true (g_str_has_suffix (raw, last));
  }
  screen = terminal_screen (raw);
  g_assert_cmpstr (screen, ==, fetched);

  /* A provision that pulls reports only the layers it fetched: of an image whose lower layer is here, the
   * upper one. */
  {
    g_autofree char *base = NULL, *base_digest = NULL, *layout = sandstep_test_host_path (f, "shares-lower");
    g_autofree char *image_arg = NULL, *second = NULL, *lower_line = NULL, *blob = NULL;
    g_autoptr(GPtrArray) base_layers = g_ptr_array_new_with_free_func (g_free);
    g_autoptr(GPtrArray) layers = g_ptr_array_new_with_free_func (g_free);
    g_autoptr(SandstepTestResult) pulled = NULL, provisioned = NULL;
    g_autoptr(GBytes) lower = NULL, upper = NULL, other = NULL;
    struct stat st;
    const Entry lower_entries[] = { { '5', "etc" }, { '0', "etc/os-release", NULL, "ID=lower\n" } };
    const Entry upper_entries[] = { { '0', "etc/upper", NULL, "one upper\n" } };
    const Entry other_entries[] = { { '0', "etc/upper", NULL, "another upper\n" } };

    lower = tar_build (lower_entries, G_N_ELEMENTS (lower_entries));
    upper = tar_build (upper_entries, G_N_ELEMENTS (upper_entries));
    other = tar_build (other_entries, G_N_ELEMENTS (other_entries));
    base = sandstep_test_host_path (f, "base");
    {
      GBytes *both[] = { lower, upper };
      base_digest = make_layout (base, "t", both, 2, NULL, base_layers);
    }
    {
      GBytes *both[] = { lower, other };
      g_free (make_layout (layout, "t", both, 2, NULL, layers));
    }
    g_assert_cmpstr (base_layers->pdata[0], ==, layers->pdata[0]);
    second = g_strdup_printf ("oci:%s:t", base);
    pulled = sandstep_test_helper (f, "pull", second, NULL);
    sandstep_test_assert_status (pulled, 0);
    image_arg = g_strdup_printf ("--image=oci:%s:t", layout);
    provisioned = sandstep_test_helper (f, "provision", image_arg, NULL);
    sandstep_test_assert_status (provisioned, 0);
    blob = g_build_filename (layout, "blobs", "sha256", (char *) layers->pdata[1] + 7, NULL);
    g_assert_cmpint (stat (blob, &st), ==, 0);
    g_free (fetched);
    fetched = layer_line (2, 2, layers->pdata[1], st.st_size, "fetched and unpacked\n");
    g_assert_cmpstr (provisioned->err, ==, fetched);
  }
}

/* ---- concurrency and kills ---- */

static void
test_parallel (SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *ref = NULL, *config = NULL;
  g_autoptr(GPtrArray) procs = g_ptr_array_new ();
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree char *manifest_path = NULL;
  JsonObject *manifest;
  gsize offset;

  if (!need_registry ())
    return;
  g_assert_true (push (reg.busybox_layout, "t1", "test/parallel:1", FALSE));
  manifest_path = g_build_filename (reg.busybox_layout, "blobs", "sha256", reg.busybox_digest + 7, NULL);
  g_assert_true (json_parser_load_from_file (parser, manifest_path, NULL));
  manifest = json_node_get_object (json_parser_get_root (parser));
  ref = registry_ref ("test/parallel:1");
  offset = log_size ();
  /* Each pull waits a while after taking a layer's lock: without the lock both would fetch it. */
  sandstep_test_fixture_setenv (f, "SANDSTEP_TEST_IMAGE_BLOB_DELAY_MS", "1000");
  for (int i = 0; i < 2; i++)
    g_ptr_array_add (procs, sandstep_test_spawn (f, "pull", ref, NULL));
  for (guint i = 0; i < procs->len; i++)
    {
      g_autoptr(SandstepTestResult) r = sandstep_test_proc_wait (procs->pdata[i], 60);
      g_autofree char *expected = g_strdup_printf ("%s\n", reg.busybox_digest);
      sandstep_test_assert_status (r, 0);
      g_assert_cmpstr (r->out, ==, expected);
    }
  {
    JsonArray *layers = json_object_get_array_member (manifest, "layers");
    const char *layer = json_object_get_string_member (json_array_get_object_element (layers, 0), "digest");
    config = g_strdup (json_object_get_string_member (json_object_get_object_member (manifest, "config"), "digest"));
    g_assert_cmpuint (blob_gets ("test/parallel", layer, offset), ==, 1);
    g_assert_cmpuint (blob_gets ("test/parallel", config, offset), ==, 1);
  }
  assert_busybox_unpacked (f);
}

/* How many of the lock files in @locks some process holds now: each is tried without waiting, and let go at
 * once when it was free. */
static guint
locks_held (const char *locks)
{
  g_autoptr(GDir) dir = g_dir_open (locks, 0, NULL);
  const char *name;
  guint held = 0;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *path = g_build_filename (locks, name, NULL);
      int fd = open (path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);

      if (fd < 0)
        continue;
      if (flock (fd, LOCK_EX | LOCK_NB) < 0)
        {
          g_assert_cmpint (errno, ==, EWOULDBLOCK);
          held++;
        }
      close (fd);
    }
  return held;
}

static void
test_parallel_layers (SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *layout = sandstep_test_host_path (f, "six");
  g_autofree char *ref = NULL, *digest = NULL, *locks = NULL, *shares = NULL, *shares_ref = NULL;
  g_autoptr(GPtrArray) tars = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_autoptr(GPtrArray) layers = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(SandstepTestResult) r = NULL, over = NULL;
  SandstepTestProc *proc;
  guint most = 0;
  gsize offset;

  g_test_summary ("issue 27: the layers of one image are fetched and unpacked four at a time (never more), each "
                  "once and under its own lock; layers unpacked at once share one --max-image-size");
  if (!need_registry ())
    return;
  for (guint i = 0; i < 6; i++)
    {
      g_autofree char *name = g_strdup_printf ("layer%u", i);
      const Entry entries[] = { { '0', name, NULL, NULL, 0644, 20000 + i } };
      g_ptr_array_add (tars, tar_build (entries, 1));
    }
  digest = make_layout (layout, "t", (GBytes *const *) tars->pdata, tars->len, NULL, layers);
  g_assert_true (push (layout, "t", "test/six:1", FALSE));
  ref = registry_ref ("test/six:1");
  locks = store_path (f, "locks");
  offset = log_size ();

  /* Each layer waits under its lock: the locks held at once are the layers being pulled at once. */
  sandstep_test_fixture_setenv (f, "SANDSTEP_TEST_IMAGE_BLOB_DELAY_MS", "1500");
  proc = sandstep_test_spawn (f, "pull", ref, NULL);
  while (sandstep_test_proc_running (proc))
    {
      most = MAX (most, locks_held (locks));
      g_usleep (20000);
    }
  r = sandstep_test_proc_wait (proc, 60);
  sandstep_test_assert_status (r, 0);
  g_test_message ("at most %u layers at once", most);
  g_assert_cmpuint (most, ==, 4);
  {
    g_autofree char *expected = g_strdup_printf ("%s\n", digest);
    g_assert_cmpstr (r->out, ==, expected);
  }
  for (guint i = 0; i < layers->len; i++)
    {
      g_autofree char *line = g_strdup_printf ("layer %u/6 %.19s: ", i + 1, (char *) layers->pdata[i]);
      g_autofree char *dir = layer_dir (f, layers->pdata[i]);
      g_autofree char *name = g_strdup_printf ("layer%u", i);
      g_autofree char *file = g_build_filename (dir, name, NULL);
      struct stat st;

      sandstep_test_assert_contains (r->err, line);
      g_assert_cmpint (stat (file, &st), ==, 0);
      g_assert_cmpint (st.st_size, ==, 20000 + i);
      g_assert_cmpuint (blob_gets ("test/six", layers->pdata[i], offset), ==, 1);
    }
  sandstep_test_fixture_setenv (f, "SANDSTEP_TEST_IMAGE_BLOB_DELAY_MS", NULL);

  /* Four layers of 40K each (ten empty files, 4K apiece), unpacked at once: each fits in 64K, together they do
   * not, and the image is refused. */
  shares = sandstep_test_host_path (f, "shares");
  {
    g_autoptr(GPtrArray) parts = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
    for (guint l = 0; l < 4; l++)
      {
        Entry entries[10];
        char names[10][16];
        for (guint i = 0; i < G_N_ELEMENTS (entries); i++)
          {
            snprintf (names[i], sizeof names[i], "l%u-f%u", l, i);
            entries[i] = (Entry) { '0', names[i], NULL, "" };
          }
        g_ptr_array_add (parts, tar_build (entries, G_N_ELEMENTS (entries)));
      }
    g_free (make_layout (shares, "t", (GBytes *const *) parts->pdata, parts->len, NULL, NULL));
  }
  shares_ref = g_strdup_printf ("oci:%s:t", shares);
  over = sandstep_test_helper (f, "pull", "--max-image-size=64K", shares_ref, NULL);
  g_assert_cmpint (over->status, !=, 0);
  sandstep_test_assert_contains (over->err, "max-image-size");
  {
    g_autofree char *images = store_path (f, "images");
    g_autofree char *names = dir_names (images);
    g_autofree char *six = g_strdup_printf ("%s.json", digest + strlen ("sha256:"));
    g_assert_cmpstr (names, ==, six);
  }
}

static void
test_killed (SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *ref = NULL, *blobs = NULL, *layers = NULL, *names = NULL, *images = NULL;
  g_autoptr(SandstepTestResult) r = NULL, r2 = NULL, r3 = NULL;

  if (!need_registry ())
    return;
  g_assert_true (push (reg.busybox_layout, "t1", "test/killed:1", FALSE));
  ref = registry_ref ("test/killed:1");
  blobs = store_path (f, "blobs/sha256");
  layers = store_path (f, "layers");
  images = store_path (f, "images");

  /* Killed in the middle of the layer's download: no named blob but the (small, whole) config. */
  sandstep_test_fixture_setenv (f, "SANDSTEP_TEST_IMAGE_KILL_AFTER", "100000");
  r = sandstep_test_helper (f, "pull", ref, NULL);
  g_assert_cmpint (r->status, ==, 128 + SIGKILL);
  names = dir_names (blobs);
  g_assert_cmpuint (strlen (names), ==, 64);    /* the config alone */
  g_free (names);
  names = dir_names (layers);
  g_assert_cmpstr (names, ==, "sha256");
  g_free (names);
  names = dir_names (images);
  g_assert_cmpstr (names, ==, "");
  g_free (names);

  /* Killed in the middle of unpacking: a leftover directory, never named as the layer. */
  sandstep_test_fixture_setenv (f, "SANDSTEP_TEST_IMAGE_KILL_AFTER", NULL);
  sandstep_test_fixture_setenv (f, "SANDSTEP_TEST_IMAGE_KILL_UNPACK", "1");
  r2 = sandstep_test_helper (f, "pull", ref, NULL);
  g_assert_cmpint (r2->status, ==, 128 + SIGKILL);
  names = dir_names (layers);
  g_assert_true (g_str_has_prefix (names, ".tmp-"));
  g_assert_true (g_str_has_suffix (names, " sha256"));
  g_free (names);
  {
    g_autofree char *sha = store_path (f, "layers/sha256");
    names = dir_names (sha);
    g_assert_cmpstr (names, ==, "");
    g_free (names);
  }
  names = dir_names (images);
  g_assert_cmpstr (names, ==, "");
  g_free (names);

  /* The next pull finishes the job and clears what the killed ones left. */
  sandstep_test_fixture_setenv (f, "SANDSTEP_TEST_IMAGE_KILL_UNPACK", NULL);
  r3 = sandstep_test_helper (f, "pull", ref, NULL);
  sandstep_test_assert_status (r3, 0);
  names = dir_names (layers);
  g_assert_cmpstr (names, ==, "sha256");
  assert_busybox_unpacked (f);
}

static void
test_gc (SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *ref = NULL;
  g_autoptr(SandstepTestResult) r = NULL, gc = NULL, list = NULL, plain = NULL;

  if (!need_registry ())
    return;
  ref = g_strdup_printf ("oci:%s:t1", reg.busybox_layout);
  r = sandstep_test_helper (f, "pull", ref, NULL);
  sandstep_test_assert_status (r, 0);
  /* gc without --images leaves images alone. */
  plain = sandstep_test_helper (f, "gc", NULL);
  sandstep_test_assert_status (plain, 0);
  assert_busybox_unpacked (f);
  gc = sandstep_test_helper (f, "gc", "--images", NULL);
  sandstep_test_assert_status (gc, 0);
  sandstep_test_assert_contains (gc->err, "removed 1 image");
  assert_store_empty (f);
  list = sandstep_test_helper (f, "images", "--json", NULL);
  sandstep_test_assert_status (list, 0);
  g_assert_cmpstr (g_strstrip (list->out), ==, "[]");
}

/* ---- credentials: Basic over TLS ---- */

static void
write_auth_file (const char *path, const char *registry, const char *user_password)
{
  g_autofree char *b64 = g_base64_encode ((const guchar *) user_password, strlen (user_password));
  g_autofree char *json = g_strdup_printf ("{\"auths\": {\"%s\": {\"auth\": \"%s\"}}}", registry, b64);

  g_assert_true (g_file_set_contents (path, json, -1, NULL));
}

/* A test CA and a server certificate it signs for @san ("IP:127.0.0.1", "DNS:NAME"), made in the new
 * directory @dir: ca.crt, server.crt and server.key. */
static void
make_tls_files (const char *dir, const char *san, char **out_ca, char **out_cert, char **out_key)
{
  g_autofree char *ca_key = g_build_filename (dir, "ca.key", NULL);
  g_autofree char *ca = g_build_filename (dir, "ca.crt", NULL);
  g_autofree char *key = g_build_filename (dir, "server.key", NULL);
  g_autofree char *csr = g_build_filename (dir, "server.csr", NULL);
  g_autofree char *cert = g_build_filename (dir, "server.crt", NULL);
  g_autofree char *ext = g_build_filename (dir, "ext.cnf", NULL);
  g_autofree char *ext_text = g_strdup_printf ("subjectAltName=%s\n", san);
  const char *mk_ca[] = { "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca,
                          "-days", "2", "-subj", "/CN=sandstep test CA", NULL };
  const char *mk_csr[] = { "openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj",
                           "/CN=sandstep test registry", NULL };
  const char *sign[] = { "openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
                         "-out", cert, "-days", "2", "-extfile", ext, NULL };

  g_assert_cmpint (mkdir (dir, 0700), ==, 0);
  g_assert_true (g_file_set_contents (ext, ext_text, -1, NULL));
  g_assert_true (run_tool (mk_ca, NULL) && run_tool (mk_csr, NULL) && run_tool (sign, NULL));
  *out_ca = g_steal_pointer (&ca);
  *out_cert = g_steal_pointer (&cert);
  *out_key = g_steal_pointer (&key);
}

static void
test_basic_tls (SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *dir = NULL, *ca = NULL, *key = NULL, *cert = NULL;
  g_autofree char *htpasswd = NULL, *line = NULL, *config = NULL, *problem = NULL, *registry = NULL, *ref = NULL;
  g_autofree char *home = NULL, *certs = NULL, *ca_copy = NULL, *auth = NULL, *bad = NULL, *expected = NULL;
  g_autofree char *cert_dir = NULL, *cert_dir_ca = NULL, *src = NULL, *dst = NULL;
  g_autoptr(SandstepTestResult) anonymous = NULL, untrusted = NULL, wrong = NULL, good = NULL;
  struct crypt_data cd = { 0 };
  const char *hash;
  guint16 port;
  GPid pid;

  if (!need_registry ())
    return;
  dir = sandstep_test_host_path (f, "tls");
  make_tls_files (dir, "IP:127.0.0.1", &ca, &cert, &key);
  /* docker-registry reads bcrypt only. */
  hash = crypt_r ("secret", "$2b$05$abcdefghijklmnopqrstuv", &cd);
  g_assert_nonnull (hash);
  g_assert_true (g_str_has_prefix (hash, "$2b$"));
  htpasswd = g_build_filename (dir, "htpasswd", NULL);
  line = g_strdup_printf ("user:%s\n", hash);
  g_assert_true (g_file_set_contents (htpasswd, line, -1, NULL));
  port = free_port ();
  config = g_strdup_printf ("version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s/storage\nhttp:\n  addr: "
                            "127.0.0.1:%u\n  tls:\n    certificate: %s\n    key: %s\nauth:\n  htpasswd:\n    realm: "
                            "sandstep-test\n    path: %s\n", dir, port, cert, key, htpasswd);
  pid = start_registry (dir, "registry", config, port, &problem);
  if (pid == 0)
    {
      g_test_fail_printf ("%s", problem);
      return;
    }
  registry = g_strdup_printf ("127.0.0.1:%u", port);
  cert_dir = g_build_filename (dir, "skopeo-certs", NULL);
  g_assert_cmpint (mkdir (cert_dir, 0700), ==, 0);
  cert_dir_ca = g_build_filename (cert_dir, "ca.crt", NULL);
  {
    g_autofree char *pem = NULL;
    g_assert_true (g_file_get_contents (ca, &pem, NULL, NULL));
    g_assert_true (g_file_set_contents (cert_dir_ca, pem, -1, NULL));
  }
  src = g_strdup_printf ("oci:%s:t1", reg.busybox_layout);
  dst = g_strdup_printf ("docker://%s/test/secret:1", registry);
  {
    const char *argv[] = { "skopeo", "copy", "--quiet", "--dest-creds", "user:secret", "--dest-cert-dir", cert_dir,
                           src, dst, NULL };
    g_assert_true (run_tool (argv, NULL));
  }
  ref = g_strdup_printf ("docker://%s/test/secret:1", registry);
  home = sandstep_test_host_path (f, "home");
  g_assert_cmpint (mkdir (home, 0700), ==, 0);
  sandstep_test_fixture_setenv (f, "HOME", home);
  sandstep_test_fixture_setenv (f, "XDG_RUNTIME_DIR", NULL);
  sandstep_test_fixture_setenv (f, "REGISTRY_AUTH_FILE", NULL);

  /* Its CA is not the host's: refused, and the message says where a registry's CA goes. */
  untrusted = sandstep_test_helper (f, "pull", ref, NULL);
  g_assert_cmpint (untrusted->status, !=, 0);
  sandstep_test_assert_contains (untrusted->err, "not trusted");
  sandstep_test_assert_contains (untrusted->err, "certs.d");

  certs = g_build_filename (home, ".config", "containers", "certs.d", registry, NULL);
  g_assert_cmpint (g_mkdir_with_parents (certs, 0700), ==, 0);
  ca_copy = g_build_filename (certs, "ca.crt", NULL);
  {
    g_autofree char *pem = NULL;
    g_assert_true (g_file_get_contents (ca, &pem, NULL, NULL));
    g_assert_true (g_file_set_contents (ca_copy, pem, -1, NULL));
  }
  /* Trusted, but no credentials. */
  anonymous = sandstep_test_helper (f, "pull", ref, NULL);
  g_assert_cmpint (anonymous->status, !=, 0);
  sandstep_test_assert_contains (anonymous->err, "needs credentials");

  bad = sandstep_test_host_path (f, "bad-auth.json");
  write_auth_file (bad, registry, "user:wrong");
  sandstep_test_fixture_setenv (f, "REGISTRY_AUTH_FILE", bad);
  wrong = sandstep_test_helper (f, "pull", ref, NULL);
  g_assert_cmpint (wrong->status, !=, 0);
  sandstep_test_assert_contains (wrong->err, "refused access");
  assert_store_empty (f);

  auth = sandstep_test_host_path (f, "auth.json");
  write_auth_file (auth, registry, "user:secret");
  sandstep_test_fixture_setenv (f, "REGISTRY_AUTH_FILE", auth);
  good = sandstep_test_helper (f, "pull", ref, NULL);
  sandstep_test_assert_status (good, 0);
  expected = g_strdup_printf ("%s\n", reg.busybox_digest);
  g_assert_cmpstr (good->out, ==, expected);
  assert_busybox_unpacked (f);

  kill (pid, SIGTERM);
  waitpid (pid, NULL, 0);
}

/* ---- https_proxy: a CONNECT proxy on loopback ---- */

/* An HTTP CONNECT proxy in threads of its own: it tunnels CONNECT @name:@port to 127.0.0.1:@port (so a name
 * that resolves nowhere else reaches the registry only through it), refuses any other request, and keeps the
 * request lines it got. */
typedef struct {
  GSocket *listener;
  guint16 listen_port;
  char *name;
  guint16 port;
  GMutex lock;
  GString *requests;      /* request lines, one a line */
  gboolean stop;
  GThread *thread;
} ConnectProxy;

/* GIO makes every socket non-blocking; the proxy's threads read and write plainly. */
static void
set_blocking (int fd)
{
  int flags = fcntl (fd, F_GETFL);

  g_assert_cmpint (flags, >=, 0);
  g_assert_cmpint (fcntl (fd, F_SETFL, flags & ~O_NONBLOCK), ==, 0);
}

static void
relay (int a, int b)
{
  struct pollfd pfd[2] = { { .fd = a, .events = POLLIN }, { .fd = b, .events = POLLIN } };
  char buf[65536];

  for (;;)
    {
      if (poll (pfd, 2, 30000) <= 0)
        return;
      for (int i = 0; i < 2; i++)
        if (pfd[i].revents != 0)
          {
            ssize_t n = read (pfd[i].fd, buf, sizeof buf);
            if (n <= 0)
              return;
            for (ssize_t done = 0; done < n;)
              {
                ssize_t w = write (pfd[1 - i].fd, buf + done, n - done);
                if (w <= 0)
                  return;
                done += w;
              }
          }
    }
}

static gpointer
proxy_connection (gpointer data)
{
  gpointer *args = data;
  ConnectProxy *proxy = args[0];
  g_autoptr(GSocket) client = args[1];
  g_autoptr(GString) head = g_string_new (NULL);
  g_autofree char *line = NULL, *expected = NULL;
  int fd = g_socket_get_fd (client);
  char c;

  g_free (args);
  set_blocking (fd);
  while (head->len < 8192 && !g_str_has_suffix (head->str, "\r\n\r\n") && read (fd, &c, 1) == 1)
    g_string_append_c (head, c);
  line = g_strndup (head->str, strcspn (head->str, "\r\n"));
  g_mutex_lock (&proxy->lock);
  g_string_append_printf (proxy->requests, "%s\n", line);
  g_mutex_unlock (&proxy->lock);
  expected = g_strdup_printf ("CONNECT %s:%u HTTP/1.", proxy->name, proxy->port);
  if (g_str_has_prefix (line, expected))
    {
      g_autoptr(GSocketClient) connector = g_socket_client_new ();
      g_autoptr(GSocketConnection) upstream = g_socket_client_connect_to_host (connector, "127.0.0.1", proxy->port,
                                                                             NULL, NULL);
      static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

      if (upstream != NULL && write (fd, ok, strlen (ok)) == (ssize_t) strlen (ok))
        {
          int up = g_socket_get_fd (g_socket_connection_get_socket (upstream));
          set_blocking (up);
          relay (fd, up);
        }
    }
  else
    {
      static const char refused[] = "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n";
      G_GNUC_UNUSED ssize_t n = write (fd, refused, strlen (refused));
    }
  return NULL;
}

static gpointer
proxy_main (gpointer data)
{
  ConnectProxy *proxy = data;

  for (;;)
    {
      GSocket *client = g_socket_accept (proxy->listener, NULL, NULL);
      gpointer *args;

      if (g_atomic_int_get (&proxy->stop))
        {
          g_clear_object (&client);
          return NULL;
        }
      if (client == NULL)
        continue;
      args = g_new (gpointer, 2);
      args[0] = proxy;
      args[1] = client;
      g_thread_unref (g_thread_new ("connect-proxy-conn", proxy_connection, args));
    }
}

static ConnectProxy *
connect_proxy_start (const char *name, guint16 port)
{
  ConnectProxy *proxy = g_new0 (ConnectProxy, 1);
  g_autoptr(GInetAddress) lo = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) any = g_inet_socket_address_new (lo, 0);
  g_autoptr(GSocketAddress) bound = NULL;

  proxy->name = g_strdup (name);
  proxy->port = port;
  proxy->requests = g_string_new (NULL);
  g_mutex_init (&proxy->lock);
  proxy->listener = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL);
  g_assert_nonnull (proxy->listener);
  g_assert_true (g_socket_bind (proxy->listener, any, TRUE, NULL));
  g_assert_true (g_socket_listen (proxy->listener, NULL));
  bound = g_socket_get_local_address (proxy->listener, NULL);
  proxy->listen_port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
  proxy->thread = g_thread_new ("connect-proxy", proxy_main, proxy);
  return proxy;
}

/* The request lines the proxy got so far. */
static char *
connect_proxy_requests (ConnectProxy *proxy)
{
  char *text;

  g_mutex_lock (&proxy->lock);
  text = g_strdup (proxy->requests->str);
  g_mutex_unlock (&proxy->lock);
  return text;
}

static void
connect_proxy_stop (ConnectProxy *proxy)
{
  g_autoptr(GSocketClient) client = g_socket_client_new ();
  g_autoptr(GSocketConnection) wake = NULL;

  g_atomic_int_set (&proxy->stop, TRUE);
  /* accept() returns for this connection and sees the flag; tunnels still open end with the test. */
  wake = g_socket_client_connect_to_host (client, "127.0.0.1", proxy->listen_port, NULL, NULL);
  g_thread_join (proxy->thread);
  g_object_unref (proxy->listener);
  g_string_free (proxy->requests, TRUE);
  g_free (proxy->name);
  g_mutex_clear (&proxy->lock);
  g_free (proxy);
}

static void
test_https_proxy (SandstepTestFixture *f, gconstpointer data)
{
  static const char name[] = "registry.sandstep.test";
  g_autofree char *dir = NULL, *ca = NULL, *cert = NULL, *key = NULL, *config = NULL, *problem = NULL;
  g_autofree char *src = NULL, *dst = NULL, *ref = NULL, *home = NULL, *certs = NULL, *ca_copy = NULL;
  g_autofree char *proxy_url = NULL, *requests = NULL, *connect = NULL, *expected = NULL, *closed_url = NULL;
  g_autoptr(SandstepTestResult) direct = NULL, refused = NULL, proxied = NULL;
  ConnectProxy *proxy;
  guint16 port;
  GPid pid;

  g_test_summary ("issue 27: https_proxy: a pull reaches a TLS registry through an HTTP CONNECT proxy (the "
                  "registry's name resolves nowhere but at the proxy), and fails without it");
  if (!need_registry ())
    return;
  dir = sandstep_test_host_path (f, "proxied-tls");
  make_tls_files (dir, "DNS:registry.sandstep.test,IP:127.0.0.1", &ca, &cert, &key);
  port = free_port ();
  config = g_strdup_printf ("version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s/storage\nhttp:\n  addr: "
                            "127.0.0.1:%u\n  tls:\n    certificate: %s\n    key: %s\n", dir, port, cert, key);
  pid = start_registry (dir, "registry", config, port, &problem);
  if (pid == 0)
    {
      g_test_fail_printf ("%s", problem);
      return;
    }
  src = g_strdup_printf ("oci:%s:t1", reg.busybox_layout);
  dst = g_strdup_printf ("docker://127.0.0.1:%u/test/proxied:1", port);
  {
    const char *argv[] = { "skopeo", "copy", "--quiet", "--dest-tls-verify=false", src, dst, NULL };
    g_assert_true (run_tool (argv, NULL));
  }
  ref = g_strdup_printf ("docker://%s:%u/test/proxied:1", name, port);
  home = sandstep_test_host_path (f, "home");
  certs = g_strdup_printf ("%s/.config/containers/certs.d/%s:%u", home, name, port);
  g_assert_cmpint (g_mkdir_with_parents (certs, 0700), ==, 0);
  ca_copy = g_build_filename (certs, "ca.crt", NULL);
  {
    g_autofree char *pem = NULL;
    g_assert_true (g_file_get_contents (ca, &pem, NULL, NULL));
    g_assert_true (g_file_set_contents (ca_copy, pem, -1, NULL));
  }
  sandstep_test_fixture_setenv (f, "HOME", home);
  {
    const char *unset[] = { "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
                            "no_proxy", "NO_PROXY" };
    for (gsize i = 0; i < G_N_ELEMENTS (unset); i++)
      sandstep_test_fixture_setenv (f, unset[i], NULL);
  }

  /* Without the proxy, the name resolves nowhere. */
  direct = sandstep_test_helper (f, "pull", ref, NULL);
  g_assert_cmpint (direct->status, !=, 0);
  sandstep_test_assert_contains (direct->err, "cannot reach");
  assert_store_empty (f);

  proxy = connect_proxy_start (name, port);
  /* A proxy that does not answer: the pull fails, saying it cannot reach the registry. */
  {
    guint16 closed = free_port ();
    closed_url = g_strdup_printf ("http://127.0.0.1:%u", closed);
  }
  sandstep_test_fixture_setenv (f, "https_proxy", closed_url);
  refused = sandstep_test_helper (f, "pull", ref, NULL);
  g_assert_cmpint (refused->status, !=, 0);
  sandstep_test_assert_contains (refused->err, "cannot reach");

  proxy_url = g_strdup_printf ("http://127.0.0.1:%u", proxy->listen_port);
  sandstep_test_fixture_setenv (f, "https_proxy", proxy_url);
  proxied = sandstep_test_helper (f, "pull", ref, NULL);
  requests = connect_proxy_requests (proxy);
  g_test_message ("the proxy got:\n%s", requests);
  sandstep_test_assert_status (proxied, 0);
  expected = g_strdup_printf ("%s\n", reg.busybox_digest);
  g_assert_cmpstr (proxied->out, ==, expected);
  assert_busybox_unpacked (f);
  /* Every request went as CONNECT to the registry's name, none other. */
  connect = g_strdup_printf ("CONNECT %s:%u HTTP/1.", name, port);
  sandstep_test_assert_contains (requests, connect);
  {
    g_auto(GStrv) lines = g_strsplit (requests, "\n", -1);
    for (guint i = 0; lines[i] != NULL && lines[i][0] != '\0'; i++)
      g_assert_true (g_str_has_prefix (lines[i], connect));
  }
  connect_proxy_stop (proxy);
  kill (pid, SIGTERM);
  waitpid (pid, NULL, 0);
}

/* ---- credentials: the Bearer token flow ---- */

/* A token server on loopback, in a thread of its own: it hands @token to a
 * request with the Basic credentials user:secret, and 401 to any other.  It
 * also stands in for the object storage a registry redirects blob requests
 * to: /docker/... is served from @storage, counting the requests that came
 * with an Authorization header (none should). */
typedef struct {
  char *token;
  char *storage;
  gint mirror_requests;
  gint mirror_with_auth;
  guint16 port;
  gint with_credentials;      /* requests that carried the right credentials */
  gint without;               /* requests that did not */
  char *answer;               /* not NULL: what the token server answers instead of a token (hostile answers) */
  GMainContext *context;
  GMainLoop *loop;
  GThread *thread;
  GMutex lock;
  GCond ready;
  gboolean listening;
} TokenServer;

static void
on_token (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer data)
{
  TokenServer *ts = data;
  const char *auth = soup_message_headers_get_one (soup_server_message_get_request_headers (msg), "Authorization");
  g_autofree char *b64 = g_base64_encode ((const guchar *) "user:secret", strlen ("user:secret"));
  g_autofree char *want = g_strconcat ("Basic ", b64, NULL);

  if (g_strcmp0 (auth, want) != 0)
    {
      g_atomic_int_inc (&ts->without);
      soup_server_message_set_status (msg, SOUP_STATUS_UNAUTHORIZED, NULL);
      return;
    }
  g_atomic_int_inc (&ts->with_credentials);
  if (g_atomic_pointer_get (&ts->answer) != NULL)
    {
      const char *answer = g_atomic_pointer_get (&ts->answer);
      soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
      soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_COPY, answer, strlen (answer));
      return;
    }
  {
    g_autofree char *body = g_strdup_printf ("{\"token\": \"%s\", \"expires_in\": 3600}", ts->token);
    soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
    soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_COPY, body, strlen (body));
  }
}

static void
on_mirror (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer data)
{
  TokenServer *ts = data;
  g_autofree char *file = g_build_filename (ts->storage, path, NULL);
  char *contents = NULL;
  gsize len = 0;

  g_atomic_int_inc (&ts->mirror_requests);
  if (soup_message_headers_get_one (soup_server_message_get_request_headers (msg), "Authorization") != NULL)
    g_atomic_int_inc (&ts->mirror_with_auth);
  if (strstr (path, "..") != NULL || !g_file_get_contents (file, &contents, &len, NULL))
    {
      soup_server_message_set_status (msg, SOUP_STATUS_NOT_FOUND, NULL);
      return;
    }
  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  soup_server_message_set_response (msg, "application/octet-stream", SOUP_MEMORY_TAKE, contents, len);
}

static gpointer
token_server_main (gpointer data)
{
  TokenServer *ts = data;
  g_autoptr(SoupServer) server = NULL;
  g_autoptr(GError) error = NULL;
  GSList *uris;

  g_main_context_push_thread_default (ts->context);
  server = soup_server_new (NULL, NULL);
  soup_server_add_handler (server, "/token", on_token, ts, NULL);
  soup_server_add_handler (server, "/docker", on_mirror, ts, NULL);
  soup_server_listen_local (server, 0, SOUP_SERVER_LISTEN_IPV4_ONLY, &error);
  g_assert_no_error (error);
  uris = soup_server_get_uris (server);
  ts->port = g_uri_get_port (uris->data);
  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);
  g_mutex_lock (&ts->lock);
  ts->listening = TRUE;
  g_cond_signal (&ts->ready);
  g_mutex_unlock (&ts->lock);
  g_main_loop_run (ts->loop);
  g_main_context_pop_thread_default (ts->context);
  return NULL;
}

static gboolean
quit_loop (gpointer data)
{
  g_main_loop_quit (data);
  return G_SOURCE_REMOVE;
}

static char *
base64url (const guchar *data, gsize len)
{
  char *s = g_base64_encode (data, len);

  g_strdelimit (s, "+", '-');
  g_strdelimit (s, "/", '_');
  *strchrnul (s, '=') = '\0';
  return s;
}

/* A JWT that docker-registry's token auth accepts: RS256 by the key of @cert (in "x5c", trusted through the
 * registry's rootcertbundle), for @service, allowing pull and push on @repository. */
static char *
make_token (const char *dir, const char *key, const char *cert, const char *issuer, const char *service,
            const char *repository)
{
  g_autofree char *der_path = g_build_filename (dir, "token.der", NULL);
  g_autofree char *input_path = g_build_filename (dir, "token.input", NULL);
  g_autofree char *sig_path = g_build_filename (dir, "token.sig", NULL);
  g_autofree char *der = NULL, *sig = NULL, *x5c = NULL, *header = NULL, *claims = NULL, *h64 = NULL, *c64 = NULL;
  g_autofree char *input = NULL, *s64 = NULL;
  gsize der_len = 0, sig_len = 0;
  gint64 now = g_get_real_time () / G_USEC_PER_SEC;

  {
    const char *argv[] = { "openssl", "x509", "-in", cert, "-outform", "DER", "-out", der_path, NULL };
    g_assert_true (run_tool (argv, NULL));
  }
  g_assert_true (g_file_get_contents (der_path, &der, &der_len, NULL));
  x5c = g_base64_encode ((const guchar *) der, der_len);
  header = g_strdup_printf ("{\"typ\":\"JWT\",\"alg\":\"RS256\",\"x5c\":[\"%s\"]}", x5c);
  claims = g_strdup_printf ("{\"iss\":\"%s\",\"sub\":\"user\",\"aud\":\"%s\",\"exp\":%" G_GINT64_FORMAT ","
                            "\"nbf\":%" G_GINT64_FORMAT ",\"iat\":%" G_GINT64_FORMAT ",\"jti\":\"%08x\","
                            "\"access\":[{\"type\":\"repository\",\"name\":\"%s\",\"actions\":[\"pull\",\"push\"]}]}",
                            issuer, service, now + 3600, now - 60, now, g_random_int (), repository);
  h64 = base64url ((const guchar *) header, strlen (header));
  c64 = base64url ((const guchar *) claims, strlen (claims));
  input = g_strdup_printf ("%s.%s", h64, c64);
  g_assert_true (g_file_set_contents (input_path, input, -1, NULL));
  {
    const char *argv[] = { "openssl", "dgst", "-sha256", "-sign", key, "-out", sig_path, input_path, NULL };
    g_assert_true (run_tool (argv, NULL));
  }
  g_assert_true (g_file_get_contents (sig_path, &sig, &sig_len, NULL));
  s64 = base64url ((const guchar *) sig, sig_len);
  return g_strdup_printf ("%s.%s", input, s64);
}

/* The token flow, and blobs redirected to storage that never sees the registry's credentials. */
static void
test_bearer (SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *dir = NULL, *key = NULL, *cert = NULL, *config = NULL, *problem = NULL, *ref = NULL;
  g_autofree char *src = NULL, *dst = NULL, *auth = NULL, *expected = NULL, *home = NULL;
  g_autoptr(SandstepTestResult) anonymous = NULL, good = NULL;
  TokenServer ts = { 0 };
  guint16 port;
  GPid pid;

  if (!need_registry ())
    return;
  dir = sandstep_test_host_path (f, "bearer");
  g_assert_cmpint (mkdir (dir, 0700), ==, 0);
  key = g_build_filename (dir, "token.key", NULL);
  cert = g_build_filename (dir, "token.crt", NULL);
  {
    const char *argv[] = { "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                           "-days", "2", "-subj", "/CN=sandstep test token issuer", NULL };
    g_assert_true (run_tool (argv, NULL));
  }
  ts.token = make_token (dir, key, cert, "sandstep-test-issuer", "sandstep-test", "test/bearer");
  ts.storage = g_build_filename (dir, "storage", NULL);
  ts.context = g_main_context_new ();
  ts.loop = g_main_loop_new (ts.context, FALSE);
  g_mutex_init (&ts.lock);
  g_cond_init (&ts.ready);
  ts.thread = g_thread_new ("token-server", token_server_main, &ts);
  g_mutex_lock (&ts.lock);
  while (!ts.listening)
    g_cond_wait (&ts.ready, &ts.lock);
  g_mutex_unlock (&ts.lock);

  port = free_port ();
  /* Blobs are answered with a redirect to the token server's /docker/..., as object storage would serve them. */
  config = g_strdup_printf ("version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s/storage\nhttp:\n  addr: "
                            "127.0.0.1:%u\nauth:\n  token:\n    realm: http://127.0.0.1:%u/token\n    service: "
                            "sandstep-test\n    issuer: sandstep-test-issuer\n    rootcertbundle: %s\n"
                            "middleware:\n  storage:\n    - name: redirect\n      options:\n        baseurl: "
                            "http://127.0.0.1:%u\n", dir, port, ts.port, cert, ts.port);
  pid = start_registry (dir, "registry", config, port, &problem);
  g_assert_cmpint (pid, !=, 0);
  src = g_strdup_printf ("oci:%s:t1", reg.busybox_layout);
  dst = g_strdup_printf ("docker://127.0.0.1:%u/test/bearer:1", port);
  {
    const char *argv[] = { "skopeo", "copy", "--quiet", "--dest-tls-verify=false", "--dest-creds", "user:secret",
                           src, dst, NULL };
    g_assert_true (run_tool (argv, NULL));
  }
  ref = g_strdup_printf ("docker://127.0.0.1:%u/test/bearer:1", port);
  home = sandstep_test_host_path (f, "home");
  g_assert_cmpint (mkdir (home, 0700), ==, 0);
  sandstep_test_fixture_setenv (f, "HOME", home);
  sandstep_test_fixture_setenv (f, "XDG_RUNTIME_DIR", NULL);
  sandstep_test_fixture_setenv (f, "REGISTRY_AUTH_FILE", NULL);

  /* No credentials: the token server refuses, and so does the pull. */
  g_atomic_int_set (&ts.without, 0);
  g_atomic_int_set (&ts.with_credentials, 0);
  anonymous = sandstep_test_helper (f, "pull", ref, NULL);
  g_assert_cmpint (anonymous->status, !=, 0);
  sandstep_test_assert_contains (anonymous->err, "token server");
  g_assert_cmpint (g_atomic_int_get (&ts.without), ==, 1);
  assert_store_empty (f);

  /* The credentials go to the token server, the token to the registry. */
  auth = sandstep_test_host_path (f, "auth.json");
  {
    g_autofree char *registry = g_strdup_printf ("127.0.0.1:%u", port);
    write_auth_file (auth, registry, "user:secret");
  }
  sandstep_test_fixture_setenv (f, "REGISTRY_AUTH_FILE", auth);
  {
    /* A hostile token server: nested too deep for any parser's stack, or a token that is no string.  The pull
     * fails saying so, and nothing is kept. */
    g_autofree char *deep = g_strnfill (200000, '[');
    const char *answers[] = { deep, "{\"token\": 7, \"access_token\": {\"x\": 1}}", "[\"token\"]" };
    for (gsize i = 0; i < G_N_ELEMENTS (answers); i++)
      {
        g_autoptr(SandstepTestResult) hostile = NULL;
        g_atomic_pointer_set (&ts.answer, (gpointer) answers[i]);
        hostile = sandstep_test_helper (f, "pull", ref, NULL);
        g_assert_cmpint (hostile->status, ==, 76);
        sandstep_test_assert_contains (hostile->err, "answered without a token");
        assert_store_empty (f);
      }
    g_atomic_pointer_set (&ts.answer, NULL);
    g_atomic_int_set (&ts.with_credentials, 0);
  }
  good = sandstep_test_helper (f, "pull", ref, NULL);
  sandstep_test_assert_status (good, 0);
  expected = g_strdup_printf ("%s\n", reg.busybox_digest);
  g_assert_cmpstr (good->out, ==, expected);
  g_assert_cmpint (g_atomic_int_get (&ts.with_credentials), ==, 1);
  assert_busybox_unpacked (f);
  /* The config and the layer came through the redirect, which got no credentials. */
  g_assert_cmpint (g_atomic_int_get (&ts.mirror_requests), >=, 2);
  g_assert_cmpint (g_atomic_int_get (&ts.mirror_with_auth), ==, 0);

  kill (pid, SIGTERM);
  waitpid (pid, NULL, 0);
  g_main_context_invoke (ts.context, quit_loop, ts.loop);
  g_thread_join (ts.thread);
  g_main_loop_unref (ts.loop);
  g_main_context_unref (ts.context);
  g_mutex_clear (&ts.lock);
  g_cond_clear (&ts.ready);
  g_free (ts.token);
  g_free (ts.storage);
}

/* ---- an image as a sandbox's root ---- */

/* More layers than a sandbox's 64 slots hold with its two trees. */
#define SANDSTEP_TEST_TALL_LAYERS 62

typedef enum {
  ROOT_AS_CALLER,
  ROOT_AS_USER,
} RootRunAs;

/* As root, a second variant runs every helper as a throwaway user: the sandbox's uid 0 is then that user, and
 * the layers are its own. */
static gboolean
root_begin (SandstepTestFixture *f, gconstpointer data)
{
  char *reason = NULL;
  SandstepTestUser *user;

  if (GPOINTER_TO_INT (data) != ROOT_AS_USER)
    return TRUE;
  if ((user = sandstep_test_user_new (&reason)) == NULL)
    {
      g_test_skip (reason);
      g_free (reason);
      return FALSE;
    }
  if (!sandstep_test_user_can_unshare (user, &reason))
    {
      sandstep_test_user_free (user);
      g_test_skip (reason);
      g_free (reason);
      return FALSE;
    }
  sandstep_test_fixture_set_user (f, user);
  return TRUE;
}

/* A two-layer image of the host's busybox-static: the lower layer has busybox, /etc/os-release, a file the
 * upper layer whites out and a directory it makes opaque; returns "oci:DIR:t" and its digest. */
static char *
busybox_root_layout (SandstepTestFixture *f, char **out_digest)
{
  g_autofree char *busybox = NULL, *layout = sandstep_test_host_path (f, "root-image");
  gsize busybox_len = 0;
  g_autoptr(GBytes) content = NULL;
  g_autoptr(GBytes) lower = NULL, upper = NULL;

  g_assert_true (g_file_get_contents ("/bin/busybox", &busybox, &busybox_len, NULL));
  content = g_bytes_new_take (g_steal_pointer (&busybox), busybox_len);
  {
    const Entry entries[] = {
      { '5', "bin" }, { '0', "bin/busybox", NULL, NULL, 0755, 0, content },
      { '2', "bin/sh", "busybox" }, { '5', "etc" }, { '0', "etc/os-release", NULL, "ID=sandstep-test-image\n" },
      { '0', "etc/hosts", NULL, "10.9.8.7 image-hosts\n" }, { '0', "etc/hostname", NULL, "image-name\n" },
      { '0', "etc/resolv.conf", NULL, "nameserver 192.0.2.53 # image-resolv\n" },
      { '5', "usr" }, { '5', "usr/lib" }, { '0', "usr/lib/gone", NULL, "whited out above\n" },
      { '5', "usr/share" }, { '5', "usr/share/keep" }, { '0', "usr/share/keep/old", NULL, "hidden by opaque\n" },
    };
    lower = tar_build (entries, G_N_ELEMENTS (entries));
  }
  {
    const Entry entries[] = {
      { '5', "usr" }, { '5', "usr/lib" }, { '0', "usr/lib/.wh.gone", NULL, "" },
      { '5', "usr/share" }, { '5', "usr/share/keep" }, { '0', "usr/share/keep/.wh..wh..opq", NULL, "" },
      { '0', "usr/share/keep/new", NULL, "from the upper layer\n" },
    };
    upper = tar_build (entries, G_N_ELEMENTS (entries));
  }
  {
    GBytes *layers[] = { lower, upper };
    *out_digest = make_layout (layout, "t", layers, 2, NULL, NULL);
  }
  sandstep_test_fixture_chown (f, layout);
  return g_strdup_printf ("oci:%s:t", layout);
}

static gboolean
path_exists (const char *path)
{
  struct stat st;
  return lstat (path, &st) == 0;
}

static void
test_root_image (SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *ref = NULL, *digest = NULL, *image_arg = NULL, *handle = NULL, *other = NULL, *out = NULL;
  g_autofree char *users = NULL, *user_entry = NULL, *rw = NULL, *handle_arg = NULL, *expected = NULL;
  g_autoptr(SandstepTestResult) destroyed = NULL, gc = NULL, list = NULL, listed = NULL;
  g_autoptr(JsonObject) described = NULL;
  JsonObject *image;

  g_test_summary ("issue 27: a sandbox whose root is an image runs the image's busybox, sees the image's /etc and "
                  "none of the host's /usr or /etc, honours whiteouts and opaque directories, keeps what a command "
                  "writes to its root for the next command and from no other sandbox; destroy lets gc remove it");
  if (!root_begin (f, data))
    return;
  ref = busybox_root_layout (f, &digest);
  image_arg = g_strconcat ("--image=", ref, NULL);
  handle = sandstep_test_provision (f, image_arg, NULL);
  handle_arg = g_strconcat ("--handle=", handle, NULL);

  /* The image's files, its Env (PATH=/bin, not the host's), and nothing of the host's root. */
  out = sandstep_test_run_ok (f, handle,
                              "cat /etc/os-release; echo PATH=$PATH HOME=$HOME; pwd; "
                              "ls /usr/lib /usr/share/keep; ls /usr; "
                              "for p in /usr/bin/env /etc/debian_version /usr/lib/gone /usr/share/keep/old; do "
                              "[ -e $p ] && echo host-or-hidden-visible:$p; done; "
                              "/bin/busybox | head -1 | cut -d' ' -f1; cat /etc/hostname /etc/hosts; echo end");
  g_test_message ("%s", out);
  sandstep_test_assert_contains (out, "ID=sandstep-test-image\n");
  sandstep_test_assert_contains (out, "PATH=/bin HOME=/workspace\n/workspace\n");
  sandstep_test_assert_contains (out, "new\nlib\nshare\n");
  /* sandstep's /etc/hostname and /etc/hosts over the image's own. */
  sandstep_test_assert_contains (out, "BusyBox\nsandstep\n127.0.0.1\tlocalhost sandstep\n");
  sandstep_test_assert_contains (out, "ip6-loopback\nend\n");
  g_assert_null (strstr (out, "image-"));
  g_assert_null (strstr (out, "host-or-hidden-visible"));
  g_assert_null (strstr (out, "old"));
  g_clear_pointer (&out, g_free);

  /* Writes to the root stay in this sandbox's own layer, for its next command. */
  out = sandstep_test_run_ok (f, handle, "mkdir -p /usr/local && echo kept > /usr/local/x && echo written");
  sandstep_test_assert_contains (out, "written");
  g_clear_pointer (&out, g_free);
  out = sandstep_test_run_ok (f, handle, "cat /usr/local/x");
  sandstep_test_assert_contains (out, "kept\n");
  g_clear_pointer (&out, g_free);
  /* ...and for its next supervisor: the root's overlay is volatile (its unmount syncs nothing of the host's),
   * and the mark overlayfs leaves against a second mount is cleared before it. */
  out = sandstep_test_run_ok (f, handle, "awk '$5 == \"/\" { print $NF }' /proc/self/mountinfo");
  sandstep_test_assert_contains (out, "volatile");
  g_clear_pointer (&out, g_free);
  sandstep_test_end_supervisor (f, handle, SIGTERM);
  out = sandstep_test_run_ok (f, handle, "cat /usr/local/x");
  sandstep_test_assert_contains (out, "kept\n");
  g_clear_pointer (&out, g_free);
  rw = g_build_filename (f->state_dir, "sandboxes", handle, "root", "upper", "usr", "local", "x", NULL);
  g_assert_true (path_exists (rw));
  /* ...never in another sandbox of the same image, nor in the image's layers. */
  sandstep_test_fixture_setenv (f, "SANDSTEP_HOLDER", "other-holder");
  other = sandstep_test_provision (f, image_arg, NULL);
  out = sandstep_test_run_ok (f, other, "[ -e /usr/local/x ] && echo leaked; echo end");
  g_assert_null (strstr (out, "leaked"));
  sandstep_test_assert_contains (out, "end\n");
  g_clear_pointer (&out, g_free);

  /* describe and list name the image and its digest. */
  described = sandstep_test_describe (f, handle);
  image = json_object_get_object_member (json_object_get_object_member (described, "spec"), "image");
  g_assert_nonnull (image);
  g_assert_cmpstr (json_object_get_string_member (image, "digest"), ==, digest);
  g_assert_true (g_str_has_prefix (json_object_get_string_member (image, "reference"), "oci:"));
  listed = sandstep_test_helper (f, "list", NULL);
  sandstep_test_assert_status (listed, 0);
  expected = g_strndup (digest, 19);
  sandstep_test_assert_contains (listed->out, expected);

  /* Each sandbox is one of the image's users: gc --images keeps it until both are gone. */
  users = g_strdup_printf ("%s/images/images/%s.users", f->state_dir, digest + strlen ("sha256:"));
  user_entry = g_build_filename (users, handle, NULL);
  g_assert_true (path_exists (user_entry));
  gc = sandstep_test_helper (f, "gc", "--images", NULL);
  sandstep_test_assert_status (gc, 0);
  g_clear_pointer (&gc, sandstep_test_result_free);
  list = sandstep_test_helper (f, "images", "--json", NULL);
  sandstep_test_assert_status (list, 0);
  {
    g_autoptr(JsonNode) root = sandstep_test_parse_json (list->out);
    JsonObject *entry = json_array_get_object_element (json_node_get_array (root), 0);
    JsonArray *sandboxes = json_object_get_array_member (entry, "sandboxes");
    g_assert_cmpstr (json_object_get_string_member (entry, "digest"), ==, digest);
    g_assert_cmpuint (json_array_get_length (sandboxes), ==, 2);
    g_assert_true (g_strcmp0 (json_array_get_string_element (sandboxes, 0), handle) == 0 ||
                   g_strcmp0 (json_array_get_string_element (sandboxes, 1), handle) == 0);
    /* Used at each provision from it, after the pull. */
    g_assert_cmpint (json_object_get_int_member (entry, "last_used"), >, 0);
  }
  g_clear_pointer (&list, sandstep_test_result_free);

  destroyed = sandstep_test_helper (f, "destroy", handle_arg, NULL);
  sandstep_test_assert_status (destroyed, 0);
  g_clear_pointer (&destroyed, sandstep_test_result_free);
  g_assert_false (path_exists (user_entry));
  g_assert_false (path_exists (rw));
  g_clear_pointer (&handle_arg, g_free);
  handle_arg = g_strconcat ("--handle=", other, NULL);
  /* A sandbox whose record cannot be read says not which image it used: destroyed, every image forgets it. */
  {
    g_autofree char *record = g_build_filename (f->state_dir, "sandboxes", other, "record.json", NULL);
    g_autofree char *other_entry = g_build_filename (users, other, NULL);
    g_assert_true (path_exists (other_entry));
    g_assert_true (g_file_set_contents (record, "{ damaged", -1, NULL));
    sandstep_test_fixture_chown (f, record);
    destroyed = sandstep_test_helper (f, "destroy", handle_arg, NULL);
    sandstep_test_assert_status (destroyed, 0);
    g_assert_false (path_exists (other_entry));
    /* Its holder's entry, which the record named, is gc's to sweep. */
    g_clear_pointer (&destroyed, sandstep_test_result_free);
    destroyed = sandstep_test_helper (f, "gc", NULL);
    sandstep_test_assert_status (destroyed, 0);
  }
  gc = sandstep_test_helper (f, "gc", "--images", NULL);
  sandstep_test_assert_status (gc, 0);
  sandstep_test_assert_contains (gc->err, "removed 1 image");
  list = sandstep_test_helper (f, "images", "--json", NULL);
  sandstep_test_assert_status (list, 0);
  g_assert_cmpstr (g_strstrip (list->out), ==, "[]");
}

static void
test_root_readonly (SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *ref = NULL, *digest = NULL, *image_arg = NULL, *handle = NULL, *out = NULL;
  g_autofree char *rw = NULL, *data_dir = NULL, *data_file = NULL, *mount_arg = NULL;
  g_autoptr(SandstepTestResult) again = NULL;

  g_test_summary ("issue 27: --root=readonly: the image's root refuses every write with EROFS, and the sandbox has "
                  "no writable layer; /workspace and /tmp stay writable, data mounts are there, and the same holder asking for a "
                  "writable root is refused as another spec");
  if (!root_begin (f, data))
    return;
  ref = busybox_root_layout (f, &digest);
  image_arg = g_strconcat ("--image=", ref, NULL);
  data_dir = sandstep_test_host_path (f, "data");
  g_assert_cmpint (g_mkdir_with_parents (data_dir, 0755), ==, 0);
  data_file = g_build_filename (data_dir, "f", NULL);
  g_assert_true (g_file_set_contents (data_file, "data mount\n", -1, NULL));
  sandstep_test_fixture_chown (f, data_dir);
  mount_arg = g_strdup_printf ("--mount=%s:/data/d", data_dir);
  handle = sandstep_test_provision (f, image_arg, "--root=readonly", mount_arg, NULL);
  /* The same holder asking for a writable root asks for another sandbox. */
  again = sandstep_test_helper (f, "provision", image_arg, mount_arg, NULL);
  g_assert_cmpint (again->status, !=, 0);
  sandstep_test_assert_contains (again->err, "root is 'readonly' there, 'writable' asked");
  out = sandstep_test_run_ok (f, handle,
                              "cat /data/d/f; for p in /usr/lib/x /etc/x /x; do ( echo x > $p ) 2>&1; done; "
                              "mkdir /usr/y 2>&1; echo ok > /workspace/w && cat /workspace/w; echo ok > /tmp/t && "
                              "cat /tmp/t; cat /etc/os-release");
  g_test_message ("%s", out);
  {
    /* Each of the four writes refused, for the root's being read-only. */
    guint refusals = 0;
    for (const char *p = out; (p = strstr (p, "Read-only file system")) != NULL; p++)
      refusals++;
    g_assert_cmpuint (refusals, ==, 4);
  }
  sandstep_test_assert_contains (out, "ok\nok\nID=sandstep-test-image\n");
  sandstep_test_assert_contains (out, "data mount\n");
  rw = g_build_filename (f->state_dir, "sandboxes", handle, "root", NULL);
  g_assert_false (path_exists (rw));
}

static void
test_root_fork (SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *ref = NULL, *digest = NULL, *image_arg = NULL, *handle = NULL, *h = NULL, *out = NULL;
  g_autoptr(SandstepTestResult) fork = NULL, cp = NULL, rb = NULL;
  g_auto(GStrv) forks = NULL;

  g_test_summary ("issue 28: a fork of an image sandbox has the parent's root changes (a file added, a file of the "
                  "image removed) and its files; afterwards the two roots change alone; a rollback brings an image "
                  "root's changes back");
  if (!root_begin (f, data))
    return;
  ref = busybox_root_layout (f, &digest);
  image_arg = g_strconcat ("--image=", ref, NULL);
  handle = sandstep_test_provision (f, image_arg, NULL);
  h = g_strconcat ("--handle=", handle, NULL);
  g_free (sandstep_test_run_ok (f, handle, "echo parent-root > /usr/added && rm /etc/os-release && echo w > w"));
  fork = sandstep_test_helper (f, "fork", h, NULL);
  sandstep_test_assert_status (fork, 0);
  forks = g_strsplit (g_strchomp (fork->out), "\n", -1);
  g_assert_cmpuint (g_strv_length (forks), ==, 1);
  g_ptr_array_add (f->handles, g_strdup (forks[0]));
  out = sandstep_test_run_ok (f, forks[0], "cat /usr/added w; [ -e /etc/os-release ] || echo removed; "
                                           "echo fork-root > /usr/added; echo mine > /usr/fork-only");
  g_assert_cmpstr (out, ==, "parent-root\nw\nremoved\n");
  g_free (out);
  out = sandstep_test_run_ok (f, handle, "cat /usr/added; [ -e /usr/fork-only ] || echo not-here");
  g_assert_cmpstr (out, ==, "parent-root\nnot-here\n");
  g_free (out);
  out = sandstep_test_run_ok (f, forks[0], "cat /usr/added /usr/fork-only");
  g_assert_cmpstr (out, ==, "fork-root\nmine\n");
  /* A checkpoint of the root, undone. */
  cp = sandstep_test_helper (f, "checkpoint", h, "clean", NULL);
  sandstep_test_assert_status (cp, 0);
  g_free (sandstep_test_run_ok (f, handle, "rm /usr/added && echo later > /usr/later"));
  rb = sandstep_test_helper (f, "rollback", h, "clean", NULL);
  sandstep_test_assert_status (rb, 0);
  g_free (out);
  out = sandstep_test_run_ok (f, handle, "cat /usr/added; [ -e /usr/later ] || echo gone; cat /bin/sh >/dev/null && "
                                         "echo image-intact");
  g_assert_cmpstr (out, ==, "parent-root\ngone\nimage-intact\n");
}

static void
test_root_many_layers (SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *layout = sandstep_test_host_path (f, "tall-image");
  g_autofree char *image_arg = NULL, *handle = NULL, *handle_arg = NULL;
  g_autoptr(GPtrArray) layers = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_autoptr(SandstepTestResult) r = NULL;

  g_test_summary ("issue 27: an image of more layers than a sandbox can stack is refused at its first command, "
                  "naming the count and what to do (squash it)");
  for (guint i = 0; i < SANDSTEP_TEST_TALL_LAYERS; i++)
    {
      g_autofree char *name = g_strdup_printf ("f%u", i);
      const Entry entries[] = { { '0', name, NULL, "x" } };
      g_ptr_array_add (layers, tar_build (entries, 1));
    }
  g_free (make_layout (layout, "t", (GBytes *const *) layers->pdata, layers->len, NULL, NULL));
  sandstep_test_fixture_chown (f, layout);
  image_arg = g_strdup_printf ("--image=oci:%s:t", layout);
  handle = sandstep_test_provision (f, image_arg, NULL);
  handle_arg = g_strconcat ("--handle=", handle, NULL);
  r = sandstep_test_helper (f, "run", handle_arg, "--", "true", NULL);
  g_assert_cmpint (r->status, !=, 0);
  sandstep_test_assert_contains (r->err, "has 62 layers, more than a sandbox stacks");
  sandstep_test_assert_contains (r->err, "squash");
}

static void
test_root_resolv_conf (SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *ref = NULL, *digest = NULL, *image_arg = NULL, *closed = NULL, *open_ = NULL, *out = NULL;
  g_autofree char *host = NULL, *expected = NULL;

  g_test_summary ("issue 27: an image sandbox's /etc/resolv.conf is the host's with --network=open and empty with "
                  "network none, never the image's own");
  ref = busybox_root_layout (f, &digest);
  image_arg = g_strconcat ("--image=", ref, NULL);
  closed = sandstep_test_provision (f, image_arg, NULL);
  out = sandstep_test_run_ok (f, closed, "wc -c < /etc/resolv.conf; cat /etc/resolv.conf; echo end");
  g_assert_cmpstr (out, ==, "0\nend\n");
  g_clear_pointer (&out, g_free);

  if (access ("/dev/net/tun", R_OK | W_OK) < 0)
    {
      /* network=open's user-mode stack needs the tun device (test-jail checks the refusal). */
      g_test_skip_printf ("/dev/net/tun cannot be opened by uid %u (%s), so network=open cannot start here; the "
                          "network none half passed", (unsigned) getuid (), g_strerror (errno));
      return;
    }
  g_assert_true (g_file_get_contents ("/etc/resolv.conf", &host, NULL, NULL));
  sandstep_test_fixture_setenv (f, "SANDSTEP_HOLDER", "open-holder");
  open_ = sandstep_test_provision (f, image_arg, "--network=open", NULL);
  out = sandstep_test_run_ok (f, open_, "cat /etc/resolv.conf; echo end");
  expected = g_strconcat (host, "end\n", NULL);
  g_assert_cmpstr (out, ==, expected);
  g_assert_null (strstr (out, "image-resolv"));
}

static void
test_root_gc_race (SandstepTestFixture *f, gconstpointer data)
{
  g_autofree char *ref = NULL, *digest = NULL, *image_arg = NULL, *locks = NULL, *handle = NULL, *out = NULL;
  g_autoptr(SandstepTestResult) provisioned = NULL, list = NULL;
  SandstepTestProc *proc;
  guint gcs = 0;

  g_test_summary ("issue 27: `gc --images` run again and again while a provision pulls its image removes nothing "
                  "the provision uses: the store stays held from the pull until the sandbox is among the image's "
                  "users, and the sandbox starts on the image");
  ref = busybox_root_layout (f, &digest);
  image_arg = g_strconcat ("--image=", ref, NULL);
  locks = store_path (f, "locks");
  /* Each layer waits under its lock: gc is asked while the pull is under way, not before it holds the store. */
  sandstep_test_fixture_setenv (f, "SANDSTEP_TEST_IMAGE_BLOB_DELAY_MS", "700");
  proc = sandstep_test_spawn (f, "provision", image_arg, NULL);
  for (int i = 0; i < 200; i++)
    {
      g_autofree char *names = dir_names (locks);
      /* The config's lock and the first layer's: the pull is in its first layer's wait. */
      if (strchr (names, ' ') != NULL)
        break;
      g_usleep (20000);
    }
  sandstep_test_fixture_setenv (f, "SANDSTEP_TEST_IMAGE_BLOB_DELAY_MS", NULL);
  /* One gc after another until the provision ends: each waits for the store, and one is always waiting when
   * the pull lets go of it. */
  while (sandstep_test_proc_running (proc))
    {
      g_autoptr(SandstepTestResult) gc = sandstep_test_helper (f, "gc", "--images", NULL);
      sandstep_test_assert_status (gc, 0);
      gcs++;
    }
  g_test_message ("%u gc --images ran during the provision", gcs);
  g_assert_cmpuint (gcs, >, 0);
  provisioned = sandstep_test_proc_wait (proc, 60);
  sandstep_test_assert_status (provisioned, 0);
  handle = g_strdup (g_strstrip (provisioned->out));
  out = sandstep_test_run_ok (f, handle, "cat /etc/os-release");
  sandstep_test_assert_contains (out, "ID=sandstep-test-image\n");
  {
    g_autoptr(SandstepTestResult) gc = sandstep_test_helper (f, "gc", "--images", NULL);
    sandstep_test_assert_status (gc, 0);
    sandstep_test_assert_contains (gc->err, "removed 0 images");
  }
  list = sandstep_test_helper (f, "images", "--json", NULL);
  sandstep_test_assert_status (list, 0);
  {
    g_autoptr(JsonNode) root = sandstep_test_parse_json (list->out);
    JsonObject *entry = json_array_get_object_element (json_node_get_array (root), 0);
    JsonArray *sandboxes = json_object_get_array_member (entry, "sandboxes");
    g_assert_cmpstr (json_object_get_string_member (entry, "digest"), ==, digest);
    g_assert_cmpuint (json_array_get_length (sandboxes), ==, 1);
    g_assert_cmpstr (json_array_get_string_element (sandboxes, 0), ==, handle);
  }
}

static void
test_root_usage (SandstepTestFixture *f, gconstpointer data)
{
  g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "provision", "--root=readonly", NULL);

  g_test_summary ("issue 27: --root without --image is refused as usage (the host's /usr is read-only anyway)");
  sandstep_test_assert_status (r, 64);
  sandstep_test_assert_contains (r->err, "--image");
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  g_test_summary ("Images up to a verified, unpacked layer store: references, a real loopback registry, layouts, "
                  "tampered and truncated blobs, platforms, hostile layers, bounds, parallel and killed pulls, gc.");
  g_test_add_func ("/image/reference", test_reference);
#define ADD(path, fn) g_test_add (path, SandstepTestFixture, NULL, setup, fn, sandstep_test_teardown)
  ADD ("/image/pull/tag-and-digest", test_pull_tag_and_digest);
  ADD ("/image/pull/layout", test_pull_layout);
  ADD ("/image/pull/unknown", test_unknown);
  ADD ("/image/pull/tampered", test_tampered);
  ADD ("/image/pull/platform", test_platform);
  ADD ("/image/layer/hostile", test_hostile);
  ADD ("/image/layer/harmless", test_harmless);
  ADD ("/image/layer/too-large", test_too_large);
#if __has_include(<zstd.h>)
  ADD ("/image/layer/zstd", test_zstd);
#endif
  ADD ("/image/pull/progress", test_pull_progress);
  ADD ("/image/pull/parallel", test_parallel);
  ADD ("/image/pull/parallel-layers", test_parallel_layers);
  ADD ("/image/pull/killed", test_killed);
  ADD ("/image/gc", test_gc);
  ADD ("/image/auth/basic-tls", test_basic_tls);
  ADD ("/image/auth/bearer", test_bearer);
  ADD ("/image/pull/https-proxy", test_https_proxy);
  g_test_add ("/image/root/image", SandstepTestFixture, GINT_TO_POINTER (ROOT_AS_CALLER), setup, test_root_image,
              sandstep_test_teardown);
  g_test_add ("/image/root/image-as-user", SandstepTestFixture, GINT_TO_POINTER (ROOT_AS_USER), setup,
              test_root_image, sandstep_test_teardown);
  g_test_add ("/image/root/readonly", SandstepTestFixture, GINT_TO_POINTER (ROOT_AS_CALLER), setup,
              test_root_readonly, sandstep_test_teardown);
  g_test_add ("/image/root/readonly-as-user", SandstepTestFixture, GINT_TO_POINTER (ROOT_AS_USER), setup,
              test_root_readonly, sandstep_test_teardown);
  ADD ("/image/root/usage", test_root_usage);
  g_test_add ("/image/root/fork", SandstepTestFixture, GINT_TO_POINTER (ROOT_AS_CALLER), setup, test_root_fork,
              sandstep_test_teardown);
  g_test_add ("/image/root/fork-as-user", SandstepTestFixture, GINT_TO_POINTER (ROOT_AS_USER), setup,
              test_root_fork, sandstep_test_teardown);
  ADD ("/image/root/gc-race", test_root_gc_race);
  ADD ("/image/root/resolv-conf", test_root_resolv_conf);
  ADD ("/image/root/many-layers", test_root_many_layers);
#undef ADD
  registry_start ();
  status = g_test_run ();
  registry_stop ();
  return status;
}
