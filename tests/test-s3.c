/* test-s3.c: `sandstep export` to s3:// and https://, against a real S3 server on loopback.
 *
 * Two servers, each started here on a free loopback port and stopped by its
 * pid at the end, and each case runs against both (/s3/... against moto,
 * /s3/s3rver/... against s3rver); where one is not installed its cases skip,
 * saying so, and are counted as skipped:
 * - moto_server (moto 5, a pip package), with INITIAL_NO_AUTH_ACTION_COUNT=4,
 *   so the first four requests create an IAM user, its policy and its access
 *   key, and every later one has its signature checked (a wrong secret gets
 *   403: checked at start);
 * - s3rver 3.7.1 (npm, in tests/s3/node_modules: scripts/deps.sh installs it
 *   from tests/s3/package-lock.json), which installs on a fresh Debian 12 with
 *   its node.  It checks access key ids but not SigV4 signatures, and has no
 *   AbortMultipartUpload (405) nor ListMultipartUploads (501): the cases that
 *   need those skip against it, saying so; the open multipart uploads of a
 *   bucket are read from its data directory instead.
 *
 * Between the helper and moto a proxy of our own can stall a connection
 * mid-upload (a server that stops answering) or act when a request passes
 * (another writer creating a key just before our commit).  tests/meson.build
 * also runs this suite through a sandstepd (test-s3-remote): the upload then
 * runs in the helper on this side, reading the file from the daemon.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <gio/gio.h>
#include <libsoup/soup.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandstep-s3.h"
#include "sandstep-sigv4.h"
#include "sandstep-test-utils.h"

typedef SandstepTestFixture Fixture;

enum {
  EXIT_USAGE = 64,
  EXIT_PATH = 69,
  EXIT_EXPORT = 73,
};

/* ---- moto_server ---- */

typedef struct {
  GSubprocess *proc;          /* GLib reaps it: its identifier goes NULL when it has exited */
  char *dir;                  /* its log */
  guint port;
  char *endpoint;             /* http://127.0.0.1:PORT */
  char *access_key_id;        /* of the IAM user made at start; NULL without auth */
  char *secret_access_key;
  const char *name;
  char *data;                 /* s3rver's data directory; NULL for moto */
  /* What moto does and s3rver does not. */
  gboolean checks_signatures;
  gboolean aborts_uploads;    /* AbortMultipartUpload */
  gboolean conditional_writes; /* If-None-Match: * on PutObject and CompleteMultipartUpload */
} S3Server;

typedef enum {
  PEER_MOTO,
  PEER_S3RVER,
  N_PEERS,
} Peer;

static S3Server *servers[N_PEERS];
static char *servers_missing[N_PEERS];   /* why there is none */
static guint bucket_counter;

static gboolean
server_running (S3Server *m)
{
  return m->proc != NULL && g_subprocess_get_identifier (m->proc) != NULL;
}

static void
server_stop (S3Server *m)
{
  if (m == NULL)
    return;
  if (server_running (m))
    {
      /* Only the process started here: its own pid. */
      g_subprocess_send_signal (m->proc, SIGTERM);
      for (int i = 0; i < 50 && server_running (m); i++)
        g_usleep (100 * 1000);
      if (server_running (m))
        g_subprocess_force_exit (m->proc);
      g_subprocess_wait (m->proc, NULL, NULL);
    }
  g_clear_object (&m->proc);
  if (m->dir != NULL)
    {
      g_autofree char *log = g_build_filename (m->dir, "server.log", NULL);
      const char *rm[] = { "rm", "-rf", m->data, NULL };

      if (m->data != NULL)
        g_spawn_sync (NULL, (char **) rm, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, NULL, NULL);
      g_unlink (log);
      g_rmdir (m->dir);
    }
  g_free (m->dir);
  g_free (m->data);
  g_free (m->endpoint);
  g_free (m->access_key_id);
  g_free (m->secret_access_key);
  g_free (m);
}

/* Starts moto_server on 127.0.0.1 at a port it picks (-p 0; it prints the one it got). */
/* A failed assertion aborts the test program before server_stop(): the
 * server must not outlive it. */
static void
die_with_test (gpointer data)
{
  prctl (PR_SET_PDEATHSIG, SIGTERM);
}

/* Starts @argv with @envp (its output in the server's log) and waits for the line that says where it
 * listens: @listening, then the port. */
static gboolean
server_spawn (S3Server *m, const char *const *argv, char **envp, const char *listening, char **out_why)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *log = g_build_filename (m->dir, "server.log", NULL);
  int log_fd = open (log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

  g_assert_cmpint (log_fd, >=, 0);
  {
    g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDIN_INHERIT);

    g_subprocess_launcher_set_environ (launcher, envp);
    g_subprocess_launcher_set_child_setup (launcher, die_with_test, NULL, NULL);
    g_subprocess_launcher_take_stdout_fd (launcher, dup (log_fd));
    g_subprocess_launcher_take_stderr_fd (launcher, dup (log_fd));
    m->proc = g_subprocess_launcher_spawnv (launcher, argv, &error);
    g_assert_no_error (error);
  }
  close (log_fd);

  for (int i = 0; i < 300 && m->port == 0; i++)
    {
      g_autofree char *text = NULL;
      const char *at;

      g_usleep (100 * 1000);
      if (!g_file_get_contents (log, &text, NULL, NULL))
        continue;
      at = strstr (text, listening);
      if (at != NULL)
        m->port = g_ascii_strtoull (at + strlen (listening), NULL, 10);
      if (!server_running (m))
        {
          *out_why = g_strdup_printf ("%s exited at start: %s", m->name, text);
          return FALSE;
        }
    }
  if (m->port == 0)
    {
      *out_why = g_strdup_printf ("%s did not say where it listens within 30 s", m->name);
      return FALSE;
    }
  m->endpoint = g_strdup_printf ("http://127.0.0.1:%u", m->port);
  return TRUE;
}

static S3Server *
moto_start (gboolean with_auth, char **out_why)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *program = g_find_program_in_path ("moto_server");
  g_auto(GStrv) envp = g_get_environ ();
  const char *argv[] = { NULL, "-H", "127.0.0.1", "-p", "0", NULL };
  S3Server *m;

  if (program == NULL)
    {
      *out_why = g_strdup ("moto_server is not installed (pip install 'moto[server]'; moto 5.2.1 was used): the "
                           "S3 export tests need a real S3-compatible server on loopback");
      return NULL;
    }
  m = g_new0 (S3Server, 1);
  m->name = "moto_server";
  m->checks_signatures = m->aborts_uploads = m->conditional_writes = TRUE;
  m->dir = g_dir_make_tmp ("sandstep-moto-XXXXXX", &error);
  g_assert_no_error (error);
  argv[0] = program;
  envp = g_environ_unsetenv (envp, "INITIAL_NO_AUTH_ACTION_COUNT");
  if (with_auth)
    envp = g_environ_setenv (envp, "INITIAL_NO_AUTH_ACTION_COUNT", "4", TRUE);
  if (!server_spawn (m, argv, envp, "Running on http://127.0.0.1:", out_why))
    {
      server_stop (m);
      return NULL;
    }
  return m;
}

/* s3rver from tests/s3/node_modules, with its one account (S3RVER, S3RVER), answering
 * BUCKET.s3.sandstep.test too (test_virtual_hosted). */
static S3Server *
s3rver_start (char **out_why)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *node = g_find_program_in_path ("node");
  g_autofree char *script = g_test_build_filename (G_TEST_DIST, "s3", "node_modules", "s3rver", "bin", "s3rver.js",
                                                   NULL);
  g_auto(GStrv) envp = g_get_environ ();
  S3Server *m;

  if (node == NULL)
    {
      *out_why = g_strdup ("node is not installed (scripts/test installs Debian's nodejs and npm), and s3rver, the "
                           "S3 server of these cases, runs on it");
      return NULL;
    }
  if (!g_file_test (script, G_FILE_TEST_EXISTS))
    {
      *out_why = g_strdup ("s3rver is not installed in tests/s3/node_modules (scripts/test runs npm ci there; or "
                           "run: . scripts/deps.sh; sandstep_ensure_s3rver)");
      return NULL;
    }
  m = g_new0 (S3Server, 1);
  m->name = "s3rver";
  m->dir = g_dir_make_tmp ("sandstep-s3rver-XXXXXX", &error);
  g_assert_no_error (error);
  m->data = g_build_filename (m->dir, "data", NULL);
  g_assert_cmpint (g_mkdir (m->data, 0700), ==, 0);
  m->access_key_id = g_strdup ("S3RVER");
  m->secret_access_key = g_strdup ("S3RVER");
  {
    const char *argv[] = { node, script, "-d", m->data, "-a", "127.0.0.1", "-p", "0", "--service-endpoint",
                           "sandstep.test", NULL };

    if (!server_spawn (m, argv, envp, "S3rver listening on 127.0.0.1:", out_why))
      {
        server_stop (m);
        return NULL;
      }
  }
  return m;
}

/* One IAM query-API call, signed (moto reads the service from the signature's scope). */
static char *
iam_call (S3Server *m, const char *form)
{
  g_autoptr(SoupSession) session = soup_session_new ();
  g_autoptr(SoupMessage) msg = soup_message_new ("POST", m->endpoint);
  g_autoptr(GDateTime) now = g_date_time_new_now_utc ();
  g_autoptr(GBytes) body = g_bytes_new (form, strlen (form));
  g_autoptr(GBytes) answer = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *date = sandstep_sigv4_amz_date (now);
  g_autofree char *host = g_strdup_printf ("127.0.0.1:%u", m->port);
  g_autofree char *hash = sandstep_sigv4_sha256_hex (form, strlen (form));
  const char *headers[] = { "content-type", "application/x-www-form-urlencoded", "host", host, "x-amz-date", date,
                            NULL };
  SandstepSigV4Key key = { "AKIDSETUPEXAMPLE", "setup-secret", "us-east-1", "iam" };
  g_autofree char *authorization = sandstep_sigv4_authorization (&key, date, "POST", "/", "", headers, hash, NULL,
                                                                 NULL);
  SoupMessageHeaders *h = soup_message_get_request_headers (msg);

  soup_message_headers_replace (h, "x-amz-date", date);
  soup_message_headers_replace (h, "Authorization", authorization);
  soup_message_set_request_body_from_bytes (msg, "application/x-www-form-urlencoded", body);
  answer = soup_session_send_and_read (session, msg, NULL, &error);
  g_assert_no_error (error);
  if (soup_message_get_status (msg) != 200)
    g_test_message ("IAM answered %u: %.*s", soup_message_get_status (msg), (int) g_bytes_get_size (answer),
                    (const char *) g_bytes_get_data (answer, NULL));
  g_assert_cmpuint (soup_message_get_status (msg), ==, 200);
  return g_strndup (g_bytes_get_data (answer, NULL), g_bytes_get_size (answer));
}

static char *
xml_text (const char *xml, const char *element)
{
  g_autofree char *open = g_strdup_printf ("<%s>", element);
  const char *start = strstr (xml, open);
  const char *end;

  g_assert_nonnull (start);
  start += strlen (open);
  end = strchr (start, '<');
  g_assert_nonnull (end);
  return g_strndup (start, end - start);
}

static SandstepS3Client *
client_for (S3Server *m, const char *id, const char *secret)
{
  g_autoptr(GError) error = NULL;
  SandstepAwsConfig *config = g_new0 (SandstepAwsConfig, 1);
  SandstepS3Client *client;

  config->access_key_id = g_strdup (id);
  config->secret_access_key = g_strdup (secret);
  config->region = g_strdup ("us-east-1");
  config->endpoint = g_strdup (m->endpoint);
  config->credentials_from = g_strdup ("the test");
  client = sandstep_s3_client_new (config, 30, &error);
  g_assert_no_error (error);
  return client;
}

static SandstepS3Client *
moto_client (S3Server *m)
{
  return client_for (m, m->access_key_id != NULL ? m->access_key_id : "AKIDNOAUTH",
                     m->secret_access_key != NULL ? m->secret_access_key : "no-auth-secret");
}

/* The user, its policy (s3:* on everything) and its key: the four unchecked requests. */
static void
moto_make_user (S3Server *m)
{
  g_autofree char *policy = g_uri_escape_string ("{\"Version\":\"2012-10-17\",\"Statement\":[{\"Effect\":\"Allow\","
                                                 "\"Action\":\"s3:*\",\"Resource\":\"*\"}]}", NULL, FALSE);
  g_autofree char *create_policy = g_strdup_printf ("Action=CreatePolicy&PolicyName=s3-all&PolicyDocument=%s"
                                                    "&Version=2010-05-08", policy);
  g_autofree char *user = iam_call (m, "Action=CreateUser&UserName=sandstep-test&Version=2010-05-08");
  g_autofree char *made = iam_call (m, create_policy);
  g_autofree char *arn = xml_text (made, "Arn");
  g_autofree char *escaped_arn = g_uri_escape_string (arn, NULL, FALSE);
  g_autofree char *attach = g_strdup_printf ("Action=AttachUserPolicy&UserName=sandstep-test&PolicyArn=%s"
                                             "&Version=2010-05-08", escaped_arn);
  g_autofree char *attached = iam_call (m, attach);
  g_autofree char *key = iam_call (m, "Action=CreateAccessKey&UserName=sandstep-test&Version=2010-05-08");

  m->access_key_id = xml_text (key, "AccessKeyId");
  m->secret_access_key = xml_text (key, "SecretAccessKey");
}

typedef enum {
  NEEDS_SIGNATURES = 1 << 0,
  NEEDS_ABORT = 1 << 1,
  NEEDS_CONDITIONAL_WRITES = 1 << 2,
} Needs;

/* The server of a case (its data: a Peer); NULL, with the case skipped saying why, where that server is
 * not installed or lacks what the case checks. */
static S3Server *
need_server (gconstpointer data, Needs needs)
{
  Peer peer = GPOINTER_TO_INT (data);
  S3Server *m = servers[peer];

  if (m == NULL)
    g_test_skip (servers_missing[peer]);
  else if ((needs & NEEDS_SIGNATURES) && !m->checks_signatures)
    g_test_skip ("s3rver 3.7.1 does not check SigV4 signatures (its code says 'unimplemented'): a wrong secret "
                 "is accepted; moto_server checks them");
  else if ((needs & NEEDS_CONDITIONAL_WRITES) && !m->conditional_writes)
    g_test_skip ("s3rver 3.7.1 ignores If-None-Match on writes, so it cannot refuse a key created meanwhile; "
                 "moto_server does");
  else if ((needs & NEEDS_ABORT) && !m->aborts_uploads)
    g_test_skip ("s3rver 3.7.1 has no AbortMultipartUpload (it answers 405), and this case checks that an "
                 "export that fails leaves no multipart upload; moto_server aborts");
  else
    return m;
  return NULL;
}

/* A fresh bucket for one case. */
static char *
new_bucket (S3Server *m)
{
  g_autoptr(SandstepS3Client) client = moto_client (m);
  g_autoptr(GError) error = NULL;
  char *bucket = g_strdup_printf ("sandstep-test-%d-%u", (int) getpid (), ++bucket_counter);

  g_assert_true (sandstep_s3_create_bucket (client, bucket, &error));
  g_assert_no_error (error);
  return bucket;
}

static GPtrArray *
list_objects (S3Server *m, const char *bucket)
{
  g_autoptr(SandstepS3Client) client = moto_client (m);
  g_autoptr(GError) error = NULL;
  GPtrArray *keys = sandstep_s3_list_objects (client, bucket, &error);

  g_assert_no_error (error);
  return keys;
}

/* The open multipart uploads of @bucket: ListMultipartUploads, or for s3rver, which does not have it
 * (501), the upload directories it keeps in its data directory until the upload completes. */
static GPtrArray *
list_uploads (S3Server *m, const char *bucket)
{
  g_autoptr(SandstepS3Client) client = NULL;
  g_autoptr(GError) error = NULL;
  GPtrArray *uploads;

  if (m->data != NULL)
    {
      g_autofree char *dir_path = g_build_filename (m->data, bucket, "._S3rver_uploads", NULL);
      g_autoptr(GDir) dir = g_dir_open (dir_path, 0, NULL);
      const char *name;

      uploads = g_ptr_array_new_with_free_func (g_free);
      while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
        g_ptr_array_add (uploads, g_strdup (name));
      return uploads;
    }
  client = moto_client (m);
  uploads = sandstep_s3_list_multipart_uploads (client, bucket, &error);
  g_assert_no_error (error);
  return uploads;
}

static GBytes *
get_object (S3Server *m, const char *bucket, const char *key, char **out_etag)
{
  g_autoptr(SandstepS3Client) client = moto_client (m);
  g_autoptr(GError) error = NULL;
  GBytes *body = sandstep_s3_get_object (client, bucket, key, out_etag, &error);

  g_assert_no_error (error);
  return body;
}

static void
put_object (S3Server *m, const char *bucket, const char *key, const char *text)
{
  g_autoptr(SandstepS3Client) client = moto_client (m);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) body = g_bytes_new (text, strlen (text));

  g_assert_true (sandstep_s3_put_object (client, bucket, key, body, NULL, FALSE, &error));
  g_assert_no_error (error);
}

static int
compare_strings (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

static char *
joined (GPtrArray *strings)
{
  g_autoptr(GString) out = g_string_new (NULL);

  for (guint i = 0; i < strings->len; i++)
    g_string_append_printf (out, "%s%s", i ? "|" : "", (const char *) strings->pdata[i]);
  return g_string_free (g_steal_pointer (&out), FALSE);
}

/* ---- the fixture: a sandbox, and the helper pointed at @m ---- */

static void
point_at (Fixture *f, const char *endpoint, const char *id, const char *secret)
{
  /* Nothing of this machine's AWS setup may leak in. */
  const char *unset[] = { "AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION",
                          "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS" };
  g_autofree char *none = sandstep_test_host_path (f, "no-aws-file");

  for (gsize i = 0; i < G_N_ELEMENTS (unset); i++)
    sandstep_test_fixture_setenv (f, unset[i], NULL);
  sandstep_test_fixture_setenv (f, "AWS_SHARED_CREDENTIALS_FILE", none);
  sandstep_test_fixture_setenv (f, "AWS_CONFIG_FILE", none);
  sandstep_test_fixture_setenv (f, "AWS_ENDPOINT_URL_S3", endpoint);
  sandstep_test_fixture_setenv (f, "AWS_REGION", "us-east-1");
  sandstep_test_fixture_setenv (f, "AWS_ACCESS_KEY_ID", id);
  sandstep_test_fixture_setenv (f, "AWS_SECRET_ACCESS_KEY", secret);
}

static char *
handle_arg (const char *handle)
{
  return g_strconcat ("--handle=", handle, NULL);
}

/* `seq 1 N` as the sandbox's coreutils print it. */
static char *
seq_text (guint n, gsize *out_len)
{
  GString *out = g_string_new (NULL);

  for (guint i = 1; i <= n; i++)
    g_string_append_printf (out, "%u\n", i);
  *out_len = out->len;
  return g_string_free (out, FALSE);
}

static void
assert_bytes (GBytes *got, const char *want, gsize want_len)
{
  g_autofree char *got_hash = sandstep_sigv4_sha256_hex (g_bytes_get_data (got, NULL), g_bytes_get_size (got));
  g_autofree char *want_hash = sandstep_sigv4_sha256_hex (want, want_len);

  g_assert_cmpuint (g_bytes_get_size (got), ==, want_len);
  g_assert_cmpstr (got_hash, ==, want_hash);
}

/* ---- cases ---- */

static void
test_signatures_checked (Fixture *f, gconstpointer data)
{
  g_autoptr(SandstepS3Client) wrong = NULL;
  g_autoptr(GError) error = NULL;

  g_test_summary ("the server checks signatures: a request signed with a wrong secret is refused 403");
  S3Server *moto = need_server (data, NEEDS_SIGNATURES);
  if (moto == NULL)
    return;
  wrong = client_for (moto, moto->access_key_id, "not-the-secret");
  g_assert_false (sandstep_s3_create_bucket (wrong, "sandstep-never-made", &error));
  g_assert_error (error, SANDSTEP_S3_ERROR, SANDSTEP_S3_ERROR_REFUSED);
  sandstep_test_assert_contains (error->message, "403 SignatureDoesNotMatch");
  sandstep_test_assert_not_contains (error->message, "not-the-secret");
}

static void
test_one_missing (Fixture *f, gconstpointer data)
{
  g_autofree char *bucket = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *pair_big = NULL, *pair_small = NULL, *pair_missing = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  g_autoptr(GPtrArray) keys = NULL, uploads = NULL;

  g_test_summary ("a set whose last file is missing fails (69) after the others were uploaded, and nothing "
                  "appears: no object, and the multipart upload of the large one aborted");
  S3Server *moto = need_server (data, NEEDS_ABORT);
  if (moto == NULL)
    return;
  bucket = new_bucket (moto);
  handle = sandstep_test_provision (f, NULL);
  h = handle_arg (handle);
  g_free (sandstep_test_run_ok (f, handle, "seq 1 2000000 > big.txt; echo small > small.txt"));
  point_at (f, moto->endpoint, moto->access_key_id, moto->secret_access_key);
  pair_big = g_strdup_printf ("big.txt=s3://%s/big.txt", bucket);
  pair_small = g_strdup_printf ("small.txt=s3://%s/small.txt", bucket);
  pair_missing = g_strdup_printf ("missing.txt=s3://%s/missing.txt", bucket);
  r = sandstep_test_helper (f, "export", h, pair_big, pair_small, pair_missing, NULL);
  sandstep_test_assert_status (r, EXIT_PATH);
  sandstep_test_assert_contains (r->err, "staged big.txt");
  sandstep_test_assert_contains (r->err, "missing.txt");
  sandstep_test_assert_contains (r->err, "No destination was changed");
  keys = list_objects (moto, bucket);
  g_assert_cmpuint (keys->len, ==, 0);
  uploads = list_uploads (moto, bucket);
  g_assert_cmpuint (uploads->len, ==, 0);
}

/* ---- a proxy that can stop answering ---- */

typedef struct _Proxy Proxy;

/* Called as each request's head passes (method, target), before it is forwarded. */
typedef void (*ProxyHook) (Proxy *proxy, const char *method, const char *target, gpointer data);

struct _Proxy {
  GSocket *listener;
  guint port;
  guint upstream_port;
  GThread *acceptor;
  GMutex lock;
  GPtrArray *seen;            /* "METHOD TARGET" of every request */
  GPtrArray *heads;           /* every request's head, as sent */
  GPtrArray *sockets;         /* to shut down at the end */
  GPtrArray *threads;
  gint64 stall_after;         /* client bytes to forward before one connection goes silent; -1: never */
  gint64 forwarded;
  gboolean stalled;
  char *stalled_request;      /* "METHOD TARGET" of the request that went silent */
  ProxyHook hook;
  gpointer hook_data;
  gboolean stopping;
};

typedef struct {
  Proxy *proxy;
  GSocket *client;
  GSocket *upstream;
} ProxyLink;

static gboolean
send_all (GSocket *socket, const char *data, gsize len)
{
  while (len > 0)
    {
      gssize n = g_socket_send (socket, data, len, NULL, NULL);
      if (n <= 0)
        return FALSE;
      data += n;
      len -= n;
    }
  return TRUE;
}

/* Server to client: bytes as they come. */
static gpointer
proxy_down (gpointer data)
{
  ProxyLink *link = data;
  char buffer[65536];
  gssize n;

  while ((n = g_socket_receive (link->upstream, buffer, sizeof buffer, NULL, NULL)) > 0)
    if (!send_all (link->client, buffer, n))
      break;
  g_socket_shutdown (link->client, FALSE, TRUE, NULL);
  return NULL;
}

/* Client to server, a request at a time: the hook sees each head first, and
 * once stall_after bytes have passed this connection goes silent for good
 * (what comes is read and dropped, nothing is answered). */
static gpointer
proxy_up (gpointer data)
{
  ProxyLink *link = data;
  Proxy *p = link->proxy;
  g_autoptr(GString) pending = g_string_new (NULL);
  char buffer[65536];
  gboolean silent = FALSE;
  gint64 body_left = 0;
  g_autofree char *request = NULL;
  gssize n;

  while ((n = g_socket_receive (link->client, buffer, sizeof buffer, NULL, NULL)) > 0)
    {
      if (silent)
        continue;
      g_string_append_len (pending, buffer, n);
      while (pending->len > 0 && !silent)
        {
          gsize take;

          if (body_left == 0)
            {
              char *end = strstr (pending->str, "\r\n\r\n");
              g_auto(GStrv) words = NULL;
              const char *length;

              if (end == NULL)
                break;
              *end = '\0';
              words = g_strsplit (pending->str, " ", 3);
              length = strcasestr (pending->str, "\r\ncontent-length:");
              body_left = length != NULL ? g_ascii_strtoll (length + strlen ("\r\ncontent-length:"), NULL, 10) : 0;
              *end = '\r';
              g_free (request);
              request = g_strdup_printf ("%s %s", words[0], words[1]);
              g_mutex_lock (&p->lock);
              g_ptr_array_add (p->seen, g_strdup (request));
              g_ptr_array_add (p->heads, g_strndup (pending->str, end - pending->str));
              g_mutex_unlock (&p->lock);
              if (p->hook != NULL)
                p->hook (p, words[0], words[1], p->hook_data);
              take = end + 4 - pending->str;
            }
          else
            take = MIN ((gsize) body_left, pending->len), body_left -= take;
          g_mutex_lock (&p->lock);
          if (!p->stalled && p->stall_after >= 0 && p->forwarded + (gint64) take > p->stall_after)
            {
              p->stalled = TRUE;
              p->stalled_request = g_strdup (request);
              silent = TRUE;
            }
          else
            p->forwarded += take;
          g_mutex_unlock (&p->lock);
          if (silent)
            break;
          if (!send_all (link->upstream, pending->str, take))
            return NULL;
          g_string_erase (pending, 0, take);
        }
    }
  g_socket_shutdown (link->upstream, FALSE, TRUE, NULL);
  return NULL;
}

static gpointer
proxy_accept (gpointer data)
{
  Proxy *p = data;

  for (;;)
    {
      GSocket *client = g_socket_accept (p->listener, NULL, NULL);
      g_autoptr(GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
      g_autoptr(GSocketAddress) address = g_inet_socket_address_new (loopback, p->upstream_port);
      ProxyLink *link;

      if (client == NULL || p->stopping)
        {
          g_clear_object (&client);
          return NULL;
        }
      link = g_new0 (ProxyLink, 1);
      link->proxy = p;
      link->client = client;
      link->upstream = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL);
      g_assert_true (g_socket_connect (link->upstream, address, NULL, NULL));
      g_mutex_lock (&p->lock);
      g_ptr_array_add (p->sockets, g_object_ref (link->client));
      g_ptr_array_add (p->sockets, g_object_ref (link->upstream));
      g_ptr_array_add (p->threads, g_thread_new ("proxy-up", proxy_up, link));
      g_ptr_array_add (p->threads, g_thread_new ("proxy-down", proxy_down, link));
      g_ptr_array_add (p->threads, link);   /* freed at the end; marks the pair */
      g_mutex_unlock (&p->lock);
    }
}

static Proxy *
proxy_new (guint upstream_port)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) any = g_inet_socket_address_new (loopback, 0);
  g_autoptr(GSocketAddress) bound = NULL;
  Proxy *p = g_new0 (Proxy, 1);

  g_mutex_init (&p->lock);
  p->upstream_port = upstream_port;
  p->stall_after = -1;
  p->seen = g_ptr_array_new_with_free_func (g_free);
  p->heads = g_ptr_array_new_with_free_func (g_free);
  p->sockets = g_ptr_array_new_with_free_func (g_object_unref);
  p->threads = g_ptr_array_new ();
  p->listener = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, &error);
  g_assert_no_error (error);
  g_assert_true (g_socket_bind (p->listener, any, TRUE, &error));
  g_assert_true (g_socket_listen (p->listener, &error));
  bound = g_socket_get_local_address (p->listener, &error);
  p->port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
  p->acceptor = g_thread_new ("proxy-accept", proxy_accept, p);
  return p;
}

static char *
proxy_endpoint (Proxy *p)
{
  return g_strdup_printf ("http://127.0.0.1:%u", p->port);
}

static gboolean
proxy_saw (Proxy *p, const char *prefix)
{
  gboolean found = FALSE;

  g_mutex_lock (&p->lock);
  for (guint i = 0; i < p->seen->len && !found; i++)
    found = g_str_has_prefix (p->seen->pdata[i], prefix);
  g_mutex_unlock (&p->lock);
  return found;
}

static void
proxy_free (Proxy *p)
{
  p->stopping = TRUE;
  g_socket_shutdown (p->listener, TRUE, TRUE, NULL);
  g_thread_join (p->acceptor);
  g_mutex_lock (&p->lock);
  for (guint i = 0; i < p->sockets->len; i++)
    g_socket_shutdown (p->sockets->pdata[i], TRUE, TRUE, NULL);
  g_mutex_unlock (&p->lock);
  for (guint i = 0; i + 2 < p->threads->len; i += 3)
    {
      ProxyLink *link = p->threads->pdata[i + 2];
      g_thread_join (p->threads->pdata[i]);
      g_thread_join (p->threads->pdata[i + 1]);
      g_object_unref (link->client);
      g_object_unref (link->upstream);
      g_free (link);
    }
  g_ptr_array_unref (p->threads);
  g_ptr_array_unref (p->sockets);
  g_ptr_array_unref (p->seen);
  g_ptr_array_unref (p->heads);
  g_free (p->stalled_request);
  g_object_unref (p->listener);
  g_mutex_clear (&p->lock);
  g_free (p);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Proxy, proxy_free)

static void
test_server_stops_answering (Fixture *f, gconstpointer data)
{
  g_autofree char *bucket = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *endpoint = NULL;
  g_autofree char *pair_small = NULL, *pair_big = NULL, *pair_other = NULL;
  g_autoptr(Proxy) proxy = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  g_autoptr(GPtrArray) keys = NULL, uploads = NULL;
  const char *args[8];

  g_test_summary ("an object store that stops answering in the middle of a part: the export gives up after "
                  "--read-timeout (73), naming that part, and nothing appears; both multipart uploads are "
                  "aborted (ListMultipartUploads is empty)");
  S3Server *moto = need_server (data, NEEDS_ABORT);
  if (moto == NULL)
    return;
  bucket = new_bucket (moto);
  handle = sandstep_test_provision (f, NULL);
  h = handle_arg (handle);
  g_free (sandstep_test_run_ok (f, handle, "echo small > small.txt; seq 1 2000000 > big.txt; "
                                           "seq 1 2000000 > other.txt"));
  proxy = proxy_new (moto->port);
  /* big.txt (14,888,896 bytes, two parts) passes; 10 MiB into other.txt,
   * whose two parts go up at once, the connection carrying the bytes of the
   * moment goes silent. */
  proxy->stall_after = 14888896 + 8 * 1024 * 1024 + 2 * 1024 * 1024;
  endpoint = proxy_endpoint (proxy);
  point_at (f, endpoint, moto->access_key_id, moto->secret_access_key);
  pair_small = g_strdup_printf ("small.txt=s3://%s/small.txt", bucket);
  pair_big = g_strdup_printf ("big.txt=s3://%s/big.txt", bucket);
  pair_other = g_strdup_printf ("other.txt=s3://%s/other.txt", bucket);
  args[0] = "export";
  args[1] = h;
  args[2] = "--read-timeout=2";
  args[3] = pair_small;
  args[4] = pair_big;
  args[5] = pair_other;
  args[6] = NULL;
  r = sandstep_test_helper_argv (f, args, 60);
  sandstep_test_assert_status (r, EXIT_EXPORT);
  g_assert_true (proxy->stalled);
  {
    /* The error names the part whose request went unanswered. */
    const char *number = strstr (proxy->stalled_request, "partNumber=");
    g_autofree char *named = NULL;

    g_assert_true (g_str_has_prefix (proxy->stalled_request, "PUT /"));
    g_assert_nonnull (number);
    named = g_strdup_printf ("did not answer UploadPart (part %d) of 's3://%s/other.txt'",
                             atoi (number + strlen ("partNumber=")), bucket);
    sandstep_test_assert_contains (r->err, named);
  }
  sandstep_test_assert_contains (r->err, "--read-timeout");
  sandstep_test_assert_contains (r->err, "No destination was changed");
  g_assert_cmpfloat (r->elapsed_s, <, 30);
  /* Straight to moto, not through the proxy. */
  keys = list_objects (moto, bucket);
  g_assert_cmpuint (keys->len, ==, 0);
  uploads = list_uploads (moto, bucket);
  if (uploads->len > 0)
    g_test_message ("uploads left: %s", joined (uploads));
  g_assert_cmpuint (uploads->len, ==, 0);
  g_assert_true (proxy_saw (proxy, "DELETE /"));     /* the aborts */
}

/* The value of header @name (lower case) in @head, or NULL. */
static char *
head_value (const char *head, const char *name)
{
  g_auto(GStrv) lines = g_strsplit (head, "\r\n", -1);

  for (guint i = 1; lines[i] != NULL; i++)
    {
      const char *colon = strchr (lines[i], ':');
      g_autofree char *lower = colon != NULL ? g_ascii_strdown (lines[i], colon - lines[i]) : NULL;

      if (lower != NULL && strcmp (lower, name) == 0)
        return g_strstrip (g_strdup (colon + 1));
    }
  return NULL;
}

static void
test_small_and_multipart (Fixture *f, gconstpointer data)
{
  g_autofree char *bucket = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *pair_small = NULL, *pair_big = NULL, *pair_rand = NULL, *pair_file = NULL;
  g_autofree char *want = NULL;
  g_autofree char *file_dest = sandstep_test_host_path (f, "random.bin");
  g_autofree char *small_etag = NULL, *big_etag = NULL;
  g_autofree char *file_bytes = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  g_autoptr(GBytes) small = NULL, big = NULL, rand = NULL;
  g_autoptr(GPtrArray) uploads = NULL;
  g_autoptr(Proxy) proxy = NULL;
  g_autofree char *endpoint = NULL;
  gsize want_len, file_len;

  g_test_summary ("a small file goes up with one PutObject and a 21.8 MiB one as a 3-part multipart upload, "
                  "both byte for byte; in the same set a file:// copy of a random file equals its s3:// copy; "
                  "no upload is left");
  S3Server *moto = need_server (data, 0);
  if (moto == NULL)
    return;
  bucket = new_bucket (moto);
  handle = sandstep_test_provision (f, NULL);
  h = handle_arg (handle);
  g_free (sandstep_test_run_ok (f, handle, "printf 'hello, object storage\\n' > small.txt; seq 1 3000000 > big.txt; "
                                           "head -c 9000000 /dev/urandom > /tmp/random.bin"));
  /* Through the proxy, which counts the parts: s3rver's ETag does not. */
  proxy = proxy_new (moto->port);
  endpoint = proxy_endpoint (proxy);
  point_at (f, endpoint, moto->access_key_id, moto->secret_access_key);
  pair_small = g_strdup_printf ("small.txt=s3://%s/reports/small.txt", bucket);
  pair_big = g_strdup_printf ("big.txt=s3://%s/reports/", bucket);   /* a trailing '/' takes the file's name */
  pair_rand = g_strdup_printf ("/tmp/random.bin=s3://%s/random.bin", bucket);
  pair_file = g_strdup_printf ("/tmp/random.bin=file://%s", file_dest);
  r = sandstep_test_helper (f, "export", h, pair_small, pair_big, pair_rand, pair_file, NULL);
  sandstep_test_assert_status (r, 0);
  sandstep_test_assert_contains (r->err, "published 4 files");

  small = get_object (moto, bucket, "reports/small.txt", &small_etag);
  assert_bytes (small, "hello, object storage\n", strlen ("hello, object storage\n"));
  g_assert_null (strchr (small_etag, '-'));                        /* one PutObject */
  want = seq_text (3000000, &want_len);
  big = get_object (moto, bucket, "reports/big.txt", &big_etag);
  assert_bytes (big, want, want_len);
  /* Three parts of 8 MiB at most: three UploadPart requests, and in moto's ETag. */
  {
    g_autofree char *part_of = g_strdup_printf ("PUT /%s/reports/big.txt?partNumber=", bucket);
    guint parts = 0;

    g_mutex_lock (&proxy->lock);
    for (guint i = 0; i < proxy->heads->len; i++)
      if (g_str_has_prefix (proxy->heads->pdata[i], part_of))
        parts++;
    g_mutex_unlock (&proxy->lock);
    g_assert_cmpuint (parts, ==, 3);
  }
  if (moto->checks_signatures)   /* moto; s3rver's ETag of a multipart object is its whole MD5 */
    g_assert_true (g_str_has_suffix (big_etag, "-3\""));
  g_assert_true (g_file_get_contents (file_dest, &file_bytes, &file_len, NULL));
  rand = get_object (moto, bucket, "random.bin", NULL);
  assert_bytes (rand, file_bytes, file_len);
  uploads = list_uploads (moto, bucket);
  g_assert_cmpuint (uploads->len, ==, 0);
}

static void
test_what_is_signed (Fixture *f, gconstpointer data)
{
  g_autofree char *bucket = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *endpoint = NULL;
  g_autofree char *pair_small = NULL, *pair_big = NULL;
  g_autofree char *text = NULL;
  g_autoptr(Proxy) proxy = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  gsize text_len, part_size = 8 * 1024 * 1024;
  guint parts_seen = 0, puts_seen = 0;

  g_test_summary ("every request an export sends signs its body's real SHA-256 (x-amz-content-sha256; S3 "
                  "refuses a wrong one, moto does not check it), each part's that part's bytes, and none is "
                  "aws-chunked, chunked or carries an x-amz-checksum-* header, which S3-compatible servers "
                  "refuse");
  S3Server *moto = need_server (data, 0);
  if (moto == NULL)
    return;
  bucket = new_bucket (moto);
  handle = sandstep_test_provision (f, NULL);
  h = handle_arg (handle);
  g_free (sandstep_test_run_ok (f, handle, "echo small > small.txt; seq 1 3000000 > big.txt"));
  text = seq_text (3000000, &text_len);
  proxy = proxy_new (moto->port);
  endpoint = proxy_endpoint (proxy);
  point_at (f, endpoint, moto->access_key_id, moto->secret_access_key);
  pair_small = g_strdup_printf ("small.txt=s3://%s/small.txt", bucket);
  pair_big = g_strdup_printf ("big.txt=s3://%s/big.txt", bucket);
  r = sandstep_test_helper (f, "export", h, pair_small, pair_big, NULL);
  sandstep_test_assert_status (r, 0);

  g_mutex_lock (&proxy->lock);
  for (guint i = 0; i < proxy->heads->len; i++)
    {
      const char *head = proxy->heads->pdata[i];
      g_autofree char *lower = g_ascii_strdown (head, -1);
      g_autofree char *hash = head_value (head, "x-amz-content-sha256");
      g_autofree char *want = NULL;
      const char *number = strstr (head, "partNumber=");

      g_assert_null (strstr (lower, "x-amz-checksum"));
      g_assert_null (strstr (lower, "aws-chunked"));
      g_assert_null (strstr (lower, "transfer-encoding"));
      g_assert_null (strstr (lower, "x-amz-decoded-content-length"));
      g_assert_nonnull (hash);
      g_assert_cmpuint (strlen (hash), ==, 64);             /* a hash, not UNSIGNED-PAYLOAD */
      if (g_str_has_prefix (head, "PUT ") && number != NULL)
        {
          gsize n = g_ascii_strtoull (number + strlen ("partNumber="), NULL, 10);
          gsize from = (n - 1) * part_size;

          g_assert_cmpuint (n, >=, 1);
          g_assert_cmpuint (from, <, text_len);
          want = g_compute_checksum_for_data (G_CHECKSUM_SHA256, (const guchar *) text + from,
                                              MIN (part_size, text_len - from));
          parts_seen++;
        }
      else if (g_str_has_prefix (head, "PUT ") && strstr (head, "/small.txt ") != NULL)
        {
          want = g_compute_checksum_for_string (G_CHECKSUM_SHA256, "small\n", -1);
          puts_seen++;
        }
      if (want != NULL)
        g_assert_cmpstr (hash, ==, want);
    }
  g_mutex_unlock (&proxy->lock);
  g_assert_cmpuint (parts_seen, ==, (text_len + part_size - 1) / part_size);
  g_assert_cmpuint (puts_seen, ==, 1);
}

static void
test_no_spool (Fixture *f, gconstpointer data)
{
  g_autofree char *bucket = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *pair_small = NULL, *pair_big = NULL;
  g_autofree char *nowhere = NULL;
  g_autoptr(GPtrArray) keys = NULL, uploads = NULL;

  g_test_summary ("every s3:// part and small file spools in TMPDIR: a TMPDIR that cannot take one fails the "
                  "export (73) naming it and what to do, before any upload starts; nothing appears");
  S3Server *moto = need_server (data, 0);
  if (moto == NULL)
    return;
  bucket = new_bucket (moto);
  handle = sandstep_test_provision (f, NULL);
  h = handle_arg (handle);
  g_free (sandstep_test_run_ok (f, handle, "echo small > small.txt; seq 1 2000000 > big.txt"));
  point_at (f, moto->endpoint, moto->access_key_id, moto->secret_access_key);
  nowhere = sandstep_test_host_path (f, "no-such-tmpdir");
  sandstep_test_fixture_setenv (f, "TMPDIR", nowhere);
  pair_small = g_strdup_printf ("small.txt=s3://%s/small.txt", bucket);
  pair_big = g_strdup_printf ("big.txt=s3://%s/big.txt", bucket);
  for (guint i = 0; i < 2; i++)
    {
      g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "export", h, i == 0 ? pair_big : pair_small, NULL);
      g_autofree char *named = g_strdup_printf ("Cannot make a spool file in '%s' (TMPDIR); point TMPDIR at a "
                                                "writable directory", nowhere);

      sandstep_test_assert_status (r, EXIT_EXPORT);
      sandstep_test_assert_contains (r->err, named);
      sandstep_test_assert_contains (r->err, "No destination was changed");
    }
  keys = list_objects (moto, bucket);
  g_assert_cmpuint (keys->len, ==, 0);
  uploads = list_uploads (moto, bucket);
  g_assert_cmpuint (uploads->len, ==, 0);
}

static void
test_wrong_credentials (Fixture *f, gconstpointer data)
{
  g_autofree char *bucket = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *pair = NULL;
  g_autoptr(GPtrArray) keys = NULL;
  const char *wrong_secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYWRONGSECRET";

  g_test_summary ("a wrong secret or an unknown key id fails (73) quoting the server's code and message and "
                  "naming where the credentials came from, never the credentials; nothing appears");
  S3Server *moto = need_server (data, NEEDS_SIGNATURES);
  if (moto == NULL)
    return;
  bucket = new_bucket (moto);
  handle = sandstep_test_provision (f, NULL);
  h = handle_arg (handle);
  g_free (sandstep_test_run_ok (f, handle, "seq 1 2000000 > big.txt"));
  pair = g_strdup_printf ("big.txt=s3://%s/big.txt", bucket);

  point_at (f, moto->endpoint, moto->access_key_id, wrong_secret);
  {
    g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "export", h, pair, NULL);

    sandstep_test_assert_status (r, EXIT_EXPORT);
    sandstep_test_assert_contains (r->err, "403 SignatureDoesNotMatch: \"The request signature we calculated");
    sandstep_test_assert_contains (r->err, "check the secret access key (from AWS_ACCESS_KEY_ID and "
                                           "AWS_SECRET_ACCESS_KEY)");
    sandstep_test_assert_not_contains (r->err, wrong_secret);
    sandstep_test_assert_not_contains (r->err, moto->secret_access_key);
    sandstep_test_assert_not_contains (r->err, moto->access_key_id);
    sandstep_test_assert_not_contains (r->out, wrong_secret);
  }
  point_at (f, moto->endpoint, "AKIANOSUCHKEY0000000", moto->secret_access_key);
  {
    g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "export", h, pair, NULL);

    sandstep_test_assert_status (r, EXIT_EXPORT);
    sandstep_test_assert_contains (r->err, "403 InvalidAccessKeyId");
    sandstep_test_assert_contains (r->err, "check the access key id");
    sandstep_test_assert_not_contains (r->err, moto->secret_access_key);
    sandstep_test_assert_not_contains (r->err, "AKIANOSUCHKEY0000000");
  }
  keys = list_objects (moto, bucket);
  g_assert_cmpuint (keys->len, ==, 0);
}

static void
test_profile (Fixture *f, gconstpointer data)
{
  g_autofree char *bucket = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *pair = NULL;
  g_autofree char *credentials = sandstep_test_host_path (f, "credentials");
  g_autofree char *config = sandstep_test_host_path (f, "config");
  g_autofree char *text = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  g_autoptr(GBytes) got = NULL;
  g_autoptr(GError) error = NULL;

  g_test_summary ("credentials from a profile of AWS_SHARED_CREDENTIALS_FILE picked by AWS_PROFILE, the region "
                  "and endpoint from AWS_CONFIG_FILE, with no key in the environment");
  S3Server *moto = need_server (data, 0);
  if (moto == NULL)
    return;
  bucket = new_bucket (moto);
  handle = sandstep_test_provision (f, NULL);
  h = handle_arg (handle);
  g_free (sandstep_test_run_ok (f, handle, "echo from a profile > p.txt"));
  text = g_strdup_printf ("[default]\naws_access_key_id = AKIADEFAULTNOTUSED00\naws_secret_access_key = no\n\n"
                          "# the one AWS_PROFILE picks\n[sandstep-test]\naws_access_key_id = %s\n"
                          "aws_secret_access_key = %s\n", moto->access_key_id, moto->secret_access_key);
  g_file_set_contents_full (credentials, text, -1, G_FILE_SET_CONTENTS_NONE, 0600, &error);
  g_assert_no_error (error);
  g_free (text);
  text = g_strdup_printf ("[profile sandstep-test]\nregion = us-east-1\nendpoint_url = %s\ns3 =\n"
                          "    addressing_style = path\n", moto->endpoint);
  g_file_set_contents (config, text, -1, &error);
  g_assert_no_error (error);

  point_at (f, moto->endpoint, NULL, NULL);
  sandstep_test_fixture_setenv (f, "AWS_ENDPOINT_URL_S3", NULL);
  sandstep_test_fixture_setenv (f, "AWS_REGION", NULL);
  sandstep_test_fixture_setenv (f, "AWS_SHARED_CREDENTIALS_FILE", credentials);
  sandstep_test_fixture_setenv (f, "AWS_CONFIG_FILE", config);
  sandstep_test_fixture_setenv (f, "AWS_PROFILE", "sandstep-test");
  pair = g_strdup_printf ("p.txt=s3://%s/p.txt", bucket);
  r = sandstep_test_helper (f, "export", h, pair, NULL);
  sandstep_test_assert_status (r, 0);
  got = get_object (moto, bucket, "p.txt", NULL);
  assert_bytes (got, "from a profile\n", strlen ("from a profile\n"));

  /* A profile that exists nowhere is refused before the sandbox is touched. */
  sandstep_test_fixture_setenv (f, "AWS_PROFILE", "no-such-profile");
  {
    g_autoptr(SandstepTestResult) refused = sandstep_test_helper (f, "export", h, pair, NULL);
    sandstep_test_assert_status (refused, EXIT_EXPORT);
    sandstep_test_assert_contains (refused->err, "'no-such-profile' (AWS_PROFILE)");
  }
}

static void
test_no_clobber (Fixture *f, gconstpointer data)
{
  g_autofree char *bucket = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *pair_new = NULL, *pair_old = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  g_autoptr(GBytes) old = NULL;
  g_autoptr(GPtrArray) keys = NULL, uploads = NULL;

  g_test_summary ("--no-clobber against an existing key: the export is refused (73) naming it, before anything "
                  "is uploaded, and the object keeps its content; no other object appears");
  S3Server *moto = need_server (data, NEEDS_ABORT);
  if (moto == NULL)
    return;
  bucket = new_bucket (moto);
  put_object (moto, bucket, "exists.txt", "old content\n");
  handle = sandstep_test_provision (f, NULL);
  h = handle_arg (handle);
  g_free (sandstep_test_run_ok (f, handle, "seq 1 2000000 > new.txt; echo new > exists.txt"));
  point_at (f, moto->endpoint, moto->access_key_id, moto->secret_access_key);
  pair_new = g_strdup_printf ("new.txt=s3://%s/new.txt", bucket);
  pair_old = g_strdup_printf ("exists.txt=s3://%s/exists.txt", bucket);
  r = sandstep_test_helper (f, "export", h, "--no-clobber", pair_new, pair_old, NULL);
  sandstep_test_assert_status (r, EXIT_EXPORT);
  {
    g_autofree char *named = g_strdup_printf ("'s3://%s/exists.txt' exists", bucket);
    sandstep_test_assert_contains (r->err, named);
  }
  sandstep_test_assert_contains (r->err, "--no-clobber keeps it");
  old = get_object (moto, bucket, "exists.txt", NULL);
  assert_bytes (old, "old content\n", strlen ("old content\n"));
  keys = list_objects (moto, bucket);
  g_assert_cmpuint (keys->len, ==, 1);
  uploads = list_uploads (moto, bucket);
  g_assert_cmpuint (uploads->len, ==, 0);
}

typedef struct {
  S3Server *moto;
  char *bucket;
  char *trigger;              /* the request target that sets it off */
  char *create_key;           /* the key another writer makes just then */
  gboolean fired;
} RaceHook;

static void
on_race (Proxy *proxy, const char *method, const char *target, gpointer data)
{
  RaceHook *race = data;

  if (race->fired || strcmp (method, "PUT") != 0 || strcmp (target, race->trigger) != 0)
    return;
  race->fired = TRUE;
  put_object (race->moto, race->bucket, race->create_key, "written by someone else\n");
}

static void
test_no_clobber_race (Fixture *f, gconstpointer data)
{
  g_autofree char *bucket = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *endpoint = NULL;
  g_autofree char *pair_a = NULL, *pair_b = NULL, *pair_c = NULL;
  g_autoptr(Proxy) proxy = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  g_autoptr(GBytes) a = NULL, b = NULL;
  g_autoptr(GPtrArray) keys = NULL, uploads = NULL;
  RaceHook race = { 0 };

  g_test_summary ("--no-clobber where another writer creates a key between our check and our commit: the "
                  "server refuses that write (412), the error names it and what is already in place, and the "
                  "rest is aborted (the multipart upload of the third file too)");
  S3Server *moto = need_server (data, NEEDS_CONDITIONAL_WRITES | NEEDS_ABORT);
  if (moto == NULL)
    return;
  bucket = new_bucket (moto);
  handle = sandstep_test_provision (f, NULL);
  h = handle_arg (handle);
  g_free (sandstep_test_run_ok (f, handle, "echo first > a.txt; echo second > b.txt; seq 1 2000000 > c.txt"));
  race.moto = moto;
  race.bucket = bucket;
  race.trigger = g_strdup_printf ("/%s/a.txt", bucket);
  race.create_key = g_strdup ("b.txt");
  proxy = proxy_new (moto->port);
  proxy->hook = on_race;
  proxy->hook_data = &race;
  endpoint = proxy_endpoint (proxy);
  point_at (f, endpoint, moto->access_key_id, moto->secret_access_key);
  pair_a = g_strdup_printf ("a.txt=s3://%s/a.txt", bucket);
  pair_b = g_strdup_printf ("b.txt=s3://%s/b.txt", bucket);
  pair_c = g_strdup_printf ("c.txt=s3://%s/c.txt", bucket);
  r = sandstep_test_helper (f, "export", h, "--no-clobber", pair_a, pair_b, pair_c, NULL);
  sandstep_test_assert_status (r, EXIT_EXPORT);
  g_assert_true (race.fired);
  {
    g_autofree char *refused = g_strdup_printf ("refused PutObject of 's3://%s/b.txt': 412 PreconditionFailed", bucket);
    g_autofree char *in_place = g_strdup_printf ("Already in place: s3://%s/a.txt; nothing else was changed",
                                                 bucket);
    sandstep_test_assert_contains (r->err, refused);
    sandstep_test_assert_contains (r->err, "--no-clobber keeps it");
    sandstep_test_assert_contains (r->err, in_place);
  }
  a = get_object (moto, bucket, "a.txt", NULL);
  assert_bytes (a, "first\n", 6);
  b = get_object (moto, bucket, "b.txt", NULL);
  assert_bytes (b, "written by someone else\n", strlen ("written by someone else\n"));
  keys = list_objects (moto, bucket);
  {
    g_autofree char *names = joined (keys);
    g_assert_cmpstr (names, ==, "a.txt|b.txt");
  }
  uploads = list_uploads (moto, bucket);
  g_assert_cmpuint (uploads->len, ==, 0);
  g_free (race.trigger);
  g_free (race.create_key);
}

/* Keys that break naive clients: encoded twice, decoded once, '+' read as a space. */
static const char *const hostile_keys_checked[] = {
  "with space/and  two  spaces.txt", "question?mark#hash.txt", "tilde~dash-under_score.txt",
};
/* moto 5.2.1 checks a signature over werkzeug's decoded path, so it refuses
 * every correct signer (boto3 included, measured) for keys with these; our
 * signature for them is checked against curl's in test-sigv4. */
static const char *const hostile_keys_unchecked[] = {
  "ünï cödé/ü.txt", "plus+sign.txt", "per%cent%41%2F.txt", "colon:at@bang!star*.txt", "semi;comma,eq=amp&.txt",
  "paren(x)'q'$.txt", "emoji-\xf0\x9f\x93\xa6.txt",
};

static void
export_hostile (Fixture *f, S3Server *m, const char *const *names, gsize n)
{
  g_autofree char *bucket = new_bucket (m);
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *h = handle_arg (handle);
  g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) want = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) keys = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  g_autofree char *want_text = NULL, *got_text = NULL;

  g_free (sandstep_test_run_ok (f, handle, "for i in 0 1 2 3 4 5 6 7; do echo \"file $i\" > f$i; done"));
  point_at (f, m->endpoint, m->access_key_id != NULL ? m->access_key_id : "AKIDNOAUTH",
            m->secret_access_key != NULL ? m->secret_access_key : "no-auth-secret");
  g_ptr_array_add (args, g_strdup ("export"));
  g_ptr_array_add (args, g_strdup (h));
  for (gsize i = 0; i < n; i++)
    {
      g_ptr_array_add (args, g_strdup_printf ("f%zu=s3://%s/%s", i, bucket, names[i]));
      g_ptr_array_add (want, g_strdup (names[i]));
    }
  g_ptr_array_add (args, NULL);
  r = sandstep_test_helper_argv (f, (const char *const *) args->pdata, 30);
  sandstep_test_assert_status (r, 0);
  /* Listed back exactly as named: nothing decoded, encoded twice or turned into a space. */
  keys = list_objects (m, bucket);
  g_ptr_array_sort (want, compare_strings);
  g_ptr_array_sort (keys, compare_strings);
  want_text = joined (want);
  got_text = joined (keys);
  g_assert_cmpstr (got_text, ==, want_text);
  for (gsize i = 0; i < n; i++)
    {
      g_autofree char *content = g_strdup_printf ("file %zu\n", i);
      g_autoptr(GBytes) got = get_object (m, bucket, names[i], NULL);
      assert_bytes (got, content, strlen (content));
    }
}

static void
test_hostile_keys (Fixture *f, gconstpointer data)
{
  g_autofree char *why = NULL;
  S3Server *unchecked;

  g_test_summary ("hostile keys (spaces, '?', '#', unicode, '+', '%', sub-delimiters) are stored under exactly "
                  "the name given, and read back byte for byte; those moto can verify are signed-checked");
  S3Server *moto = need_server (data, 0);
  if (moto == NULL)
    return;
  export_hostile (f, moto, hostile_keys_checked, G_N_ELEMENTS (hostile_keys_checked));
  if (!moto->checks_signatures)
    {
      /* s3rver stores them all; it checks no signature either way. */
      export_hostile (f, moto, hostile_keys_unchecked, G_N_ELEMENTS (hostile_keys_unchecked));
      return;
    }
  unchecked = moto_start (FALSE, &why);
  g_assert_nonnull (unchecked);
  export_hostile (f, unchecked, hostile_keys_unchecked, G_N_ELEMENTS (hostile_keys_unchecked));
  server_stop (unchecked);
}

static void
test_bad_urls (Fixture *f, gconstpointer data)
{
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  static const struct { const char *url; const char *says; } cases[] = {
    { "s3:///key", "names no bucket" },
    { "s3://a/key", "is not a bucket name" },
    { "s3://bucket/a/../b", "'..' segment" },
    { "http://example.com/upload", "plain http:// to another machine" },
    { "https://user:pass@example.com/upload", "user name or password" },
    { "ftp://example.com/x", "scheme sandstep cannot write" },
  };

  g_test_summary ("bad s3:// and http(s):// destinations are refused (64) before the sandbox is claimed, and a "
                  "password in a URL never shows in the message");
  handle = sandstep_test_provision (f, NULL);
  h = handle_arg (handle);
  g_free (sandstep_test_run_ok (f, handle, "echo x > x.txt"));
  point_at (f, "http://127.0.0.1:9", "AKIDNEVERUSED", "never-used");
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *pair = g_strdup_printf ("x.txt=%s", cases[i].url);
      g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "export", h, pair, NULL);

      sandstep_test_assert_status (r, EXIT_USAGE);
      sandstep_test_assert_contains (r->err, cases[i].says);
      sandstep_test_assert_not_contains (r->err, "pass@");
    }
}

/* ---- https:// and http:// to loopback: a plain PUT ---- */

typedef struct {
  GMainContext *context;
  GMainLoop *loop;
  GThread *thread;
  SoupServer *server;
  guint port;
  GMutex lock;
  GHashTable *stored;         /* path -> GBytes */
  GPtrArray *if_none_match;   /* the header of each PUT, "" when absent */
} PutServer;

static void
on_put (SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query, gpointer data)
{
  PutServer *s = data;
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (msg);
  const char *inm = soup_message_headers_get_one (headers, "If-None-Match");
  g_autoptr(GBytes) body = NULL;

  if (strcmp (soup_server_message_get_method (msg), "PUT") != 0)
    {
      soup_server_message_set_status (msg, 405, NULL);
      return;
    }
  if (strstr (path, "denied") != NULL)
    {
      const char *xml = "<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>";
      soup_server_message_set_status (msg, 403, NULL);
      soup_server_message_set_response (msg, "application/xml", SOUP_MEMORY_STATIC, xml, strlen (xml));
      return;
    }
  body = soup_message_body_flatten (soup_server_message_get_request_body (msg));
  g_mutex_lock (&s->lock);
  g_ptr_array_add (s->if_none_match, g_strdup (inm != NULL ? inm : ""));
  if (inm != NULL && strcmp (inm, "*") == 0 && g_hash_table_contains (s->stored, path))
    soup_server_message_set_status (msg, 412, NULL);
  else
    {
      g_hash_table_replace (s->stored, g_strdup (path), g_bytes_ref (body));
      soup_server_message_set_status (msg, 200, NULL);
    }
  g_mutex_unlock (&s->lock);
}

static gpointer
put_server_thread (gpointer data)
{
  PutServer *s = data;

  g_main_context_push_thread_default (s->context);
  g_main_loop_run (s->loop);
  g_main_context_pop_thread_default (s->context);
  return NULL;
}

static PutServer *
put_server_new (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GSList) uris = NULL;
  PutServer *s = g_new0 (PutServer, 1);

  g_mutex_init (&s->lock);
  s->stored = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) g_bytes_unref);
  s->if_none_match = g_ptr_array_new_with_free_func (g_free);
  s->context = g_main_context_new ();
  s->loop = g_main_loop_new (s->context, FALSE);
  g_main_context_push_thread_default (s->context);
  s->server = soup_server_new (NULL, NULL);
  soup_server_add_handler (s->server, NULL, on_put, s, NULL);
  soup_server_listen_local (s->server, 0, SOUP_SERVER_LISTEN_IPV4_ONLY, &error);
  g_assert_no_error (error);
  g_main_context_pop_thread_default (s->context);
  uris = soup_server_get_uris (s->server);
  s->port = g_uri_get_port (uris->data);
  g_slist_free_full (g_steal_pointer (&uris), (GDestroyNotify) g_uri_unref);
  s->thread = g_thread_new ("put-server", put_server_thread, s);
  return s;
}

static void
put_server_free (PutServer *s)
{
  g_main_loop_quit (s->loop);
  g_thread_join (s->thread);
  g_main_context_push_thread_default (s->context);
  g_object_unref (s->server);
  g_main_context_pop_thread_default (s->context);
  g_main_loop_unref (s->loop);
  g_main_context_unref (s->context);
  g_hash_table_unref (s->stored);
  g_ptr_array_unref (s->if_none_match);
  g_mutex_clear (&s->lock);
  g_free (s);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (PutServer, put_server_free)

static void
test_https_put (Fixture *f, gconstpointer data)
{
  g_autoptr(PutServer) server = put_server_new ();
  g_autofree char *handle = sandstep_test_provision (f, NULL);
  g_autofree char *h = handle_arg (handle);
  g_autofree char *pair_small = NULL, *pair_big = NULL, *pair_denied = NULL;
  g_autofree char *want = NULL;
  gsize want_len;

  g_test_summary ("http:// to loopback (as https:// elsewhere): one plain PUT per file, byte for byte, only once "
                  "every file is staged; --no-clobber sends If-None-Match: * and a 412 is named; a refusal "
                  "quotes the server and never the URL's signed query");
  g_free (sandstep_test_run_ok (f, handle, "echo presigned > small.txt; seq 1 2000000 > big.txt"));
  pair_small = g_strdup_printf ("small.txt=http://127.0.0.1:%u/up/small.txt?X-Amz-Signature=SIGNEDQUERY", server->port);
  pair_big = g_strdup_printf ("big.txt=http://localhost:%u/up/big.txt", server->port);
  {
    g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "export", h, pair_small, pair_big, NULL);
    GBytes *small, *big;

    sandstep_test_assert_status (r, 0);
    sandstep_test_assert_not_contains (r->err, "SIGNEDQUERY");
    sandstep_test_assert_contains (r->err, "/up/small.txt?…");
    g_mutex_lock (&server->lock);
    small = g_hash_table_lookup (server->stored, "/up/small.txt");
    big = g_hash_table_lookup (server->stored, "/up/big.txt");
    g_assert_nonnull (small);
    g_assert_nonnull (big);
    assert_bytes (small, "presigned\n", strlen ("presigned\n"));
    want = seq_text (2000000, &want_len);
    assert_bytes (big, want, want_len);
    g_assert_cmpstr (server->if_none_match->pdata[0], ==, "");
    g_mutex_unlock (&server->lock);
  }
  {
    g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "export", h, "--no-clobber", pair_small, NULL);

    sandstep_test_assert_status (r, EXIT_EXPORT);
    sandstep_test_assert_contains (r->err, "412");
    sandstep_test_assert_contains (r->err, "--no-clobber keeps it");
    sandstep_test_assert_not_contains (r->err, "SIGNEDQUERY");
    g_mutex_lock (&server->lock);
    g_assert_cmpstr (server->if_none_match->pdata[server->if_none_match->len - 1], ==, "*");
    g_mutex_unlock (&server->lock);
  }
  pair_denied = g_strdup_printf ("small.txt=http://127.0.0.1:%u/denied?X-Amz-Signature=SIGNEDQUERY", server->port);
  {
    g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "export", h, pair_denied, NULL);

    sandstep_test_assert_status (r, EXIT_EXPORT);
    sandstep_test_assert_contains (r->err, "403 AccessDenied: \"Request has expired\"");
    sandstep_test_assert_not_contains (r->err, "SIGNEDQUERY");
  }
}

/* ---- virtual-hosted addressing, in this process ---- */

/* Resolves every name under sandstep.test to 127.0.0.1, so BUCKET.s3.sandstep.test reaches moto. */
typedef struct {
  GResolver parent;
} TestResolver;
typedef GResolverClass TestResolverClass;
static GType test_resolver_get_type (void);
G_DEFINE_TYPE (TestResolver, test_resolver, G_TYPE_RESOLVER)

static GList *
test_resolver_lookup (GResolver *resolver, const char *hostname, GCancellable *cancellable, GError **error)
{
  if (!g_str_has_suffix (hostname, ".sandstep.test"))
    return g_set_error (error, G_RESOLVER_ERROR, G_RESOLVER_ERROR_NOT_FOUND, "not a test name: %s", hostname),
           NULL;
  return g_list_prepend (NULL, g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4));
}

static GList *
test_resolver_lookup_flags (GResolver *resolver, const char *hostname, GResolverNameLookupFlags flags,
                            GCancellable *cancellable, GError **error)
{
  return test_resolver_lookup (resolver, hostname, cancellable, error);
}

static void
test_resolver_lookup_async (GResolver *resolver, const char *hostname, GCancellable *cancellable,
                            GAsyncReadyCallback callback, gpointer data)
{
  g_autoptr(GTask) task = g_task_new (resolver, cancellable, callback, data);
  GError *error = NULL;
  GList *addresses = test_resolver_lookup (resolver, hostname, cancellable, &error);

  if (addresses == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, addresses, (GDestroyNotify) g_resolver_free_addresses);
}

static void
test_resolver_lookup_flags_async (GResolver *resolver, const char *hostname, GResolverNameLookupFlags flags,
                                  GCancellable *cancellable, GAsyncReadyCallback callback, gpointer data)
{
  test_resolver_lookup_async (resolver, hostname, cancellable, callback, data);
}

static GList *
test_resolver_lookup_finish (GResolver *resolver, GAsyncResult *result, GError **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}

static void
test_resolver_class_init (TestResolverClass *klass)
{
  klass->lookup_by_name = test_resolver_lookup;
  klass->lookup_by_name_async = test_resolver_lookup_async;
  klass->lookup_by_name_finish = test_resolver_lookup_finish;
  klass->lookup_by_name_with_flags = test_resolver_lookup_flags;
  klass->lookup_by_name_with_flags_async = test_resolver_lookup_flags_async;
  klass->lookup_by_name_with_flags_finish = test_resolver_lookup_finish;
}

static void
test_resolver_init (TestResolver *resolver)
{
}

static void
test_virtual_hosted (Fixture *f, gconstpointer data)
{
  g_autoptr(GResolver) previous = g_resolver_get_default ();
  g_autoptr(GResolver) resolver = g_object_new (test_resolver_get_type (), NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(SandstepS3Client) client = NULL;
  g_autoptr(GBytes) body = g_bytes_new_static ("virtually hosted\n", 17);
  g_autoptr(GBytes) got = NULL;
  g_autofree char *bucket = NULL;
  SandstepAwsConfig *config;

  g_test_summary ("virtual-hosted addressing (BUCKET.endpoint/KEY) signs and stores as path-style does: a "
                  "PutObject through BUCKET.s3.sandstep.test (resolved to loopback here) is read back path-style");
  S3Server *moto = need_server (data, 0);
  if (moto == NULL)
    return;
  bucket = new_bucket (moto);
  config = g_new0 (SandstepAwsConfig, 1);
  config->access_key_id = g_strdup (moto->access_key_id);
  config->secret_access_key = g_strdup (moto->secret_access_key);
  config->region = g_strdup ("us-east-1");
  config->endpoint = g_strdup_printf ("http://s3.sandstep.test:%u", moto->port);
  config->addressing = SANDSTEP_S3_ADDRESSING_VIRTUAL;
  config->credentials_from = g_strdup ("the test");
  g_resolver_set_default (resolver);
  client = sandstep_s3_client_new (config, 30, &error);
  g_assert_no_error (error);
  g_assert_true (sandstep_s3_put_object (client, bucket, "virtual/key with space.txt", body, NULL, FALSE, &error));
  g_resolver_set_default (previous);
  g_assert_no_error (error);
  got = get_object (moto, bucket, "virtual/key with space.txt", NULL);
  assert_bytes (got, "virtually hosted\n", 17);
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  if (!g_test_subprocess ())
    {
      servers[PEER_MOTO] = moto_start (TRUE, &servers_missing[PEER_MOTO]);
      if (servers[PEER_MOTO] != NULL)
        moto_make_user (servers[PEER_MOTO]);
      servers[PEER_S3RVER] = s3rver_start (&servers_missing[PEER_S3RVER]);
    }

  /* The cases that need a server, against each: moto under /s3/, s3rver under /s3/s3rver/. */
  for (Peer peer = 0; peer < N_PEERS; peer++)
    {
      static const struct {
        const char *path;
        void (*func) (Fixture *, gconstpointer);
      } cases[] = {
        { "/s3/moto/signatures-checked", test_signatures_checked },
        { "/s3/export/small-and-multipart", test_small_and_multipart },
        { "/s3/export/one-missing", test_one_missing },
        { "/s3/export/server-stops-answering", test_server_stops_answering },
        { "/s3/export/what-is-signed", test_what_is_signed },
        { "/s3/export/no-spool", test_no_spool },
        { "/s3/export/wrong-credentials", test_wrong_credentials },
        { "/s3/export/profile", test_profile },
        { "/s3/export/no-clobber", test_no_clobber },
        { "/s3/export/no-clobber-race", test_no_clobber_race },
        { "/s3/export/hostile-keys", test_hostile_keys },
        { "/s3/client/virtual-hosted", test_virtual_hosted },
      };

      for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
        {
          g_autofree char *path = NULL;

          if (peer == PEER_MOTO)
            path = g_strdup (cases[i].path);
          else if (g_str_has_prefix (cases[i].path, "/s3/moto/"))
            path = g_strconcat ("/s3/s3rver/", cases[i].path + strlen ("/s3/moto/"), NULL);
          else
            path = g_strconcat ("/s3/s3rver/", cases[i].path + strlen ("/s3/"), NULL);
          g_test_add (path, Fixture, GINT_TO_POINTER (peer), sandstep_test_setup, cases[i].func,
                      sandstep_test_teardown);
        }
    }
  /* No server: once. */
  g_test_add ("/s3/export/bad-urls", Fixture, NULL, sandstep_test_setup, test_bad_urls, sandstep_test_teardown);
  g_test_add ("/s3/export/https-put", Fixture, NULL, sandstep_test_setup, test_https_put, sandstep_test_teardown);

  status = g_test_run ();
  for (Peer peer = 0; peer < N_PEERS; peer++)
    {
      server_stop (g_steal_pointer (&servers[peer]));
      g_free (servers_missing[peer]);
    }
  return status;
}
