/* test-jail.c: the baseline every command's jail gives, seen from inside and out.
 *
 * Each case runs commands through the real helper ($SANDSTEP) and checks one
 * property of the jail: its namespaces, read-only /usr, persistent /workspace
 * and /tmp, own /proc, minimal /dev, dropped privileges, network modes, closed
 * fds, allowlisted environment, read-only data mounts, own session, and that
 * nothing of a command outlives it.
 *
 * Every case runs twice: as the test's own user (/jail/as-caller/...) and as a
 * throwaway unprivileged user (/jail/as-user/...), created when the tests run
 * as root and skipped only when that user cannot create a user namespace.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-cgroup.h"
#include "sandstep-host-files.h"
#include "sandstep-test-utils.h"

typedef struct {
  SandstepTestFixture base;  /* first: the shared teardown takes it */
  char *skip_reason;
} JailFixture;

typedef enum {
  AS_CALLER,
  AS_USER,
} RunAs;

static void
jail_setup (JailFixture *jf, gconstpointer data)
{
  char *reason = NULL;
  SandstepTestUser *user;

  sandstep_test_setup (&jf->base, NULL);
  jf->skip_reason = NULL;
  if (GPOINTER_TO_INT (data) != AS_USER)
    return;
  user = sandstep_test_user_new (&reason);
  if (user == NULL)
    {
      jf->skip_reason = reason;
      return;
    }
  if (!sandstep_test_user_can_unshare (user, &reason))
    {
      sandstep_test_user_free (user);
      jf->skip_reason = reason;
      return;
    }
  sandstep_test_fixture_set_user (&jf->base, user);
}

static void
jail_teardown (JailFixture *jf, gconstpointer data)
{
  g_free (jf->skip_reason);
  sandstep_test_teardown (&jf->base, NULL);
}

/* The fixture to use, or NULL when this variant is skipped. */
static SandstepTestFixture *
jail_begin (JailFixture *jf)
{
  if (jf->skip_reason != NULL)
    {
      g_test_skip (jf->skip_reason);
      return NULL;
    }
  return &jf->base;
}

static char *
handle_arg (const char *handle)
{
  return g_strconcat ("--handle=", handle, NULL);
}

static int
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* Interface names in a /proc/net/dev text, sorted, one a line. */
static char *
interfaces_of (const char *net_dev)
{
  g_auto(GStrv) lines = g_strsplit (net_dev, "\n", -1);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GString) out = g_string_new (NULL);

  for (gsize i = 2; lines[i] != NULL; i++)
    {
      const char *colon = strchr (lines[i], ':');
      if (colon != NULL)
        g_ptr_array_add (names, g_strstrip (g_strndup (lines[i], colon - lines[i])));
    }
  g_ptr_array_sort (names, compare_names);
  for (guint i = 0; i < names->len; i++)
    g_string_append_printf (out, "%s\n", (char *) names->pdata[i]);
  return g_string_free (g_steal_pointer (&out), FALSE);
}

static char *
host_interfaces (void)
{
  g_autofree char *net_dev = NULL;

  g_assert_true (g_file_get_contents ("/proc/net/dev", &net_dev, NULL, NULL));
  return interfaces_of (net_dev);
}

static const char *const namespaces[] = { "user", "mnt", "pid", "net", "ipc", "uts", "cgroup" };

/* The namespace links of one process of the jail, one a line in namespaces[] order. */
static char **
jail_namespaces (SandstepTestFixture *f, const char *handle)
{
  g_autofree char *out = sandstep_test_run_ok (f, handle,
                                               "for n in user mnt pid net ipc uts cgroup; do "
                                               "readlink /proc/self/ns/$n; done");
  char **lines = g_strsplit (g_strchomp (out), "\n", -1);

  g_assert_cmpuint (g_strv_length (lines), ==, G_N_ELEMENTS (namespaces));
  return lines;
}

static char *
host_namespace (const char *name)
{
  g_autofree char *path = g_strconcat ("/proc/self/ns/", name, NULL);
  g_autoptr(GError) error = NULL;
  char *link = g_file_read_link (path, &error);

  g_assert_no_error (error);
  return link;
}

/* A TCP listener on every address of the host (port chosen by the kernel). */
static int
listen_anywhere (guint16 *out_port)
{
  struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_ANY) };
  socklen_t len = sizeof addr;
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (bind (fd, (struct sockaddr *) &addr, sizeof addr), ==, 0);
  g_assert_cmpint (listen (fd, 16), ==, 0);
  g_assert_cmpint (getsockname (fd, (struct sockaddr *) &addr, &len), ==, 0);
  *out_port = ntohs (addr.sin_port);
  return fd;
}

/* The first IPv4 address of an interface that is up and not loopback, or NULL. */
static char *
host_external_ipv4 (void)
{
  struct ifaddrs *list = NULL;
  char *found = NULL;

  if (getifaddrs (&list) < 0)
    return NULL;
  for (struct ifaddrs *i = list; i != NULL && found == NULL; i = i->ifa_next)
    if (i->ifa_addr != NULL && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
        !(i->ifa_flags & IFF_LOOPBACK))
      {
        char buf[INET_ADDRSTRLEN];
        if (inet_ntop (AF_INET, &((struct sockaddr_in *) i->ifa_addr)->sin_addr, buf, sizeof buf) != NULL)
          found = g_strdup (buf);
      }
  freeifaddrs (list);
  return found;
}

/* Shell words that print "connected" or "refused" for a TCP connect from inside. */
static char *
connect_probe (const char *address, guint16 port)
{
  return g_strdup_printf ("if bash -c 'exec 3<>/dev/tcp/%s/%u' 2>/dev/null; then echo connected; "
                          "else echo refused; fi",
                          address, port);
}

/* Fields of /proc/PID/stat after "pid (comm)": index 0 is field 3 (state). */
static char **
proc_stat_fields (const char *stat_text)
{
  const char *close = strrchr (stat_text, ')');

  g_assert_nonnull (close);
  return g_strsplit (close + 2, " ", -1);
}

/* Whether @uid may not open @path read-write (by its mode and owner). */
static gboolean
access_as_user_fails (uid_t uid, const char *path)
{
  struct stat st;

  if (stat (path, &st) < 0)
    return TRUE;
  return !((st.st_mode & 0006) == 0006 || (st.st_uid == uid && (st.st_mode & 0600) == 0600));
}

/* ---- the cases ---- */

static void
test_namespaces (JailFixture *jf, gconstpointer data)
{
  SandstepTestFixture *f = jail_begin (jf);
  g_autofree char *handle = NULL;
  g_auto(GStrv) inside = NULL;
  g_autofree char *uid_map = NULL;
  g_auto(GStrv) fields = NULL;

  g_test_summary ("a command runs in its own user, mount, pid, net, ipc, uts and cgroup namespaces");
  if (f == NULL)
    return;
  handle = sandstep_test_provision (f, NULL);
  inside = jail_namespaces (f, handle);
  for (gsize i = 0; i < G_N_ELEMENTS (namespaces); i++)
    {
      g_autofree char *outside = host_namespace (namespaces[i]);
      g_assert_true (g_str_has_prefix (inside[i], namespaces[i]));
      g_assert_cmpstr (inside[i], !=, outside);
    }

  /* The user namespace maps one host uid: as root, the sandbox's own, never root and never another
   * sandbox's; as any other user (the throwaway user of the as-user variant), that user's. */
  uid_map = sandstep_test_run_ok (f, handle, "cat /proc/self/uid_map");
  fields = g_regex_split_simple ("\\s+", g_strstrip (uid_map), 0, 0);
  g_assert_cmpuint (g_strv_length (fields), ==, 3);
  g_assert_cmpstr (fields[0], ==, "0");
  g_assert_cmpstr (fields[2], ==, "1");
  if (f->user == NULL && getuid () == 0)
    {
      g_autofree char *other = sandstep_test_provision (f, "--holder=other", NULL);
      g_autofree char *other_map = sandstep_test_run_ok (f, other, "cat /proc/self/uid_map");
      g_auto(GStrv) other_fields = g_regex_split_simple ("\\s+", g_strstrip (other_map), 0, 0);
      g_autofree char *record_path = g_build_filename (f->state_dir, "sandboxes", handle, "record.json", NULL);
      g_autofree char *record = NULL;
      g_autofree char *uid_member = g_strdup_printf ("\"uid\" : %s,", fields[1]);

      g_assert_cmpint (g_ascii_strtoll (fields[1], NULL, 10), !=, 0);
      g_assert_cmpstr (other_fields[1], !=, fields[1]);
      g_assert_true (g_file_get_contents (record_path, &record, NULL, NULL));
      sandstep_test_assert_contains (record, uid_member);
    }
  else
    g_assert_cmpint (g_ascii_strtoll (fields[1], NULL, 10), ==, f->user != NULL ? f->user->uid : getuid ());
}

static void
test_usr_read_only (JailFixture *jf, gconstpointer data)
{
  SandstepTestFixture *f = jail_begin (jf);
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *name = g_strdup_printf ("/usr/sandstep-test-%08x", g_random_int ());
  g_autofree char *command = NULL;
  g_autoptr(SandstepTestResult) r = NULL;

  g_test_summary ("/usr is read-only inside: writes fail with 'Read-only file system'");
  if (f == NULL)
    return;
  handle = sandstep_test_provision (f, NULL);
  h = handle_arg (handle);
  command = g_strdup_printf ("touch %s; echo touch=$?; mkdir %s.d; echo mkdir=$?; "
                             "test -w /usr/bin && echo writable || echo not-writable", name, name);
  r = sandstep_test_helper (f, "run", h, "--", command, NULL);
  sandstep_test_assert_status (r, 0);
  g_assert_cmpstr (r->out, ==, "touch=1\nmkdir=1\nnot-writable\n");
  sandstep_test_assert_contains (r->err, "Read-only file system");
  g_assert_false (g_file_test (name, G_FILE_TEST_EXISTS));
}

static void
test_workspace_and_tmp_persist (JailFixture *jf, gconstpointer data)
{
  SandstepTestFixture *f = jail_begin (jf);
  g_autofree char *handle = NULL;
  g_autofree char *first = NULL;
  g_autofree char *second = NULL;

  g_test_summary ("/workspace (cwd and HOME) and /tmp are writable and keep their files across runs");
  if (f == NULL)
    return;
  handle = sandstep_test_provision (f, NULL);
  first = sandstep_test_run_ok (f, handle,
                                "pwd; echo $HOME; echo w > /workspace/w.txt; echo t > /tmp/t.txt; "
                                "mkdir -p /workspace/d/e /tmp/x/y; echo deep > /workspace/d/e/f");
  g_assert_cmpstr (first, ==, "/workspace\n/workspace\n");
  second = sandstep_test_run_ok (f, handle,
                                 "cat /workspace/w.txt /tmp/t.txt /workspace/d/e/f; test -d /tmp/x/y && echo dir; "
                                 "echo more >> w.txt && cat w.txt");
  g_assert_cmpstr (second, ==, "w\nt\ndeep\ndir\nw\nmore\n");
}

static void
test_own_proc (JailFixture *jf, gconstpointer data)
{
  SandstepTestFixture *f = jail_begin (jf);
  g_autofree char *handle = NULL;
  g_autofree char *out = NULL;
  g_auto(GStrv) lines = NULL;
  g_auto(GStrv) pids = NULL;
  g_autoptr(GDir) host_proc = g_dir_open ("/proc", 0, NULL);
  guint host_count = 0;
  gint64 max_inside = 0;
  const char *name;

  g_test_summary ("/proc is the jail's own: pid 1 is the jail's init, host processes are invisible");
  if (f == NULL)
    return;
  handle = sandstep_test_provision (f, NULL);
  out = sandstep_test_run_ok (f, handle,
                              "ls /proc | grep -E '^[0-9]+$' | sort -n | tr '\\n' ' '; echo; "
                              "sed -n 's/^PPid:[[:space:]]*//p' /proc/1/status");
  lines = g_strsplit (out, "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), ==, 3);
  pids = g_strsplit (g_strstrip (lines[0]), " ", -1);

  /* Only the jail's few processes: init, the shell, the pipeline. */
  g_assert_cmpuint (g_strv_length (pids), >=, 2);
  g_assert_cmpuint (g_strv_length (pids), <=, 8);
  g_assert_cmpstr (pids[0], ==, "1");
  g_assert_cmpstr (lines[1], ==, "0");
  for (gsize i = 0; pids[i] != NULL; i++)
    max_inside = MAX (max_inside, g_ascii_strtoll (pids[i], NULL, 10));
  g_assert_nonnull (host_proc);
  while ((name = g_dir_read_name (host_proc)) != NULL)
    if (g_ascii_isdigit (name[0]))
      host_count++;
  g_assert_cmpuint (host_count, >, g_strv_length (pids));
  /* This test's own pid is not among them (unless pid numbers happen to overlap). */
  if (getpid () > max_inside)
    {
      g_autofree char *mine = g_strdup_printf ("%d", (int) getpid ());
      g_assert_false (g_strv_contains ((const char *const *) pids, mine));
    }
}

static void
test_minimal_dev (JailFixture *jf, gconstpointer data)
{
  static const char *const allowed[] = { "null", "zero", "full", "random", "urandom", "tty", "fd", "stdin",
                                         "stdout", "stderr", "shm", "pts", "ptmx", "console", "core", "mqueue",
                                         NULL };
  SandstepTestFixture *f = jail_begin (jf);
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  g_auto(GStrv) sections = NULL;
  g_auto(GStrv) names = NULL;

  g_test_summary ("/dev is minimal: null, zero, full, random, urandom and tty as character devices, "
                  "no block devices, nothing of the host's");
  if (f == NULL)
    return;
  handle = sandstep_test_provision (f, NULL);
  h = handle_arg (handle);
  r = sandstep_test_helper (f, "run", h, "--",
                            "for d in null zero full random urandom tty; do test -c /dev/$d && echo $d; done; "
                            "echo --; find /dev -type b | wc -l; echo --; ls -A /dev; echo --; "
                            "echo gone > /dev/null && head -c 8 /dev/urandom | wc -c; "
                            "head -c 4 /dev/zero | od -An -tx1 | tr -d ' '; "
                            "if head -c 1 /dev/zero > /dev/full; then echo full-accepted; else echo full-refused; fi",
                            NULL);
  sandstep_test_assert_status (r, 0);
  sections = g_strsplit (r->out, "--\n", -1);
  g_assert_cmpuint (g_strv_length (sections), ==, 4);
  g_assert_cmpstr (sections[0], ==, "null\nzero\nfull\nrandom\nurandom\ntty\n");
  g_assert_cmpstr (sections[1], ==, "0\n");
  names = g_strsplit (g_strchomp (sections[2]), "\n", -1);
  for (gsize i = 0; names[i] != NULL; i++)
    {
      if (!g_strv_contains (allowed, names[i]))
        g_test_message ("unexpected /dev entry '%s'", names[i]);
      g_assert_true (g_strv_contains (allowed, names[i]));
    }
  g_assert_cmpstr (sections[3], ==, "8\n00000000\nfull-refused\n");
  sandstep_test_assert_contains (r->err, "No space left on device");
}

static void
test_no_privileges (JailFixture *jf, gconstpointer data)
{
  static const char *const expected[] = {
    "NoNewPrivs:\t1", "Seccomp:\t2", "CapInh:\t0000000000000000", "CapPrm:\t0000000000000000",
    "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000",
  };
  SandstepTestFixture *f = jail_begin (jf);
  g_autofree char *handle = NULL;
  g_autofree char *status = NULL;
  g_autofree char *shell_status = NULL;
  g_auto(GStrv) lines = NULL;
  g_auto(GStrv) shell_lines = NULL;

  g_test_summary ("a command has no_new_privs, a seccomp filter, and no capabilities in any set");
  if (f == NULL)
    return;
  handle = sandstep_test_provision (f, NULL);
  status = sandstep_test_run_ok (f, handle, "cat /proc/self/status");
  shell_status = sandstep_test_run_ok (f, handle, "cat /proc/$$/status");
  lines = g_strsplit (status, "\n", -1);
  shell_lines = g_strsplit (shell_status, "\n", -1);
  for (gsize i = 0; i < G_N_ELEMENTS (expected); i++)
    {
      if (!g_strv_contains ((const char *const *) lines, expected[i]))
        g_test_message ("missing '%s' in:\n%s", expected[i], status);
      g_assert_true (g_strv_contains ((const char *const *) lines, expected[i]));
      g_assert_true (g_strv_contains ((const char *const *) shell_lines, expected[i]));
    }
}

static void
test_network_none (JailFixture *jf, gconstpointer data)
{
  SandstepTestFixture *f = jail_begin (jf);
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *net_dev = NULL;
  g_autofree char *probe_lo = NULL;
  g_autofree char *external = host_external_ipv4 ();
  g_autoptr(SandstepTestResult) dns = NULL;
  g_autoptr(SandstepTestResult) reach = NULL;
  guint16 port;
  int listener;

  g_test_summary ("--network=none leaves only the loopback interface: DNS fails and no host listener is "
                  "reachable");
  if (f == NULL)
    return;
  handle = sandstep_test_provision (f, "--network=none", NULL);
  h = handle_arg (handle);
  net_dev = sandstep_test_run_ok (f, handle, "cat /proc/net/dev");
  {
    g_autofree char *names = interfaces_of (net_dev);
    g_assert_cmpstr (names, ==, "lo\n");
  }
  dns = sandstep_test_helper (f, "run", h, "--", "getent hosts example.com; echo getent=$?", NULL);
  sandstep_test_assert_status (dns, 0);
  sandstep_test_assert_not_contains (dns->out, "getent=0");

  listener = listen_anywhere (&port);
  probe_lo = connect_probe ("127.0.0.1", port);
  {
    /* Without an external address the second probe is loopback again. */
    g_autofree char *probe_ext = connect_probe (external != NULL ? external : "127.0.0.1", port);
    g_autofree char *command = g_strdup_printf ("%s; %s", probe_lo, probe_ext);
    reach = sandstep_test_helper (f, "run", h, "--", command, NULL);
  }
  close (listener);
  sandstep_test_assert_status (reach, 0);
  g_assert_cmpstr (reach->out, ==, "refused\nrefused\n");
}

static void
test_network_open (JailFixture *jf, gconstpointer data)
{
  SandstepTestFixture *f = jail_begin (jf);
  g_autofree char *handle = NULL;
  g_autofree char *net_dev = NULL;
  g_autofree char *names = NULL;
  g_autofree char *host_names = host_interfaces ();
  g_autofree char *reach = NULL;
  g_autofree char *probe = NULL;
  g_auto(GStrv) inside = NULL;
  guint16 port;
  int listener;
  uid_t runner;

  g_test_summary ("--network=open gets a network namespace of its own, joined to the outside by a user-mode "
                  "stack: none of the host's interfaces, and the host's loopback listeners are out of reach "
                  "(ECONNREFUSED); every namespace is the sandbox's own");
  if (f == NULL)
    return;
  /* The helper runs as the throwaway user (as-user) or as this test's own user (as-caller). */
  runner = f->user != NULL ? f->user->uid : getuid ();
  if (runner != 0 && access_as_user_fails (runner, "/dev/net/tun"))
    {
      /* A host that keeps /dev/net/tun to root: provision refuses in one clear line, not every command after. */
      g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "provision", "--network=open", NULL);
      sandstep_test_assert_status (r, 125);
      sandstep_test_assert_contains (r->err, "network=open needs /dev/net/tun for its user-mode network stack");
      g_assert_cmpuint (r->out_len, ==, 0);
      /* The refusal is checked; the network itself never came up, so the case is not a pass. */
      g_test_skip_printf ("uid %u may not open /dev/net/tun (this host keeps it to root; udev's default is 0666), "
                          "so network=open was checked to refuse at provision in one line, and its network cannot "
                          "be tested as this user", (unsigned) runner);
      return;
    }
  handle = sandstep_test_provision (f, "--network=open", NULL);
  net_dev = sandstep_test_run_ok (f, handle, "cat /proc/net/dev");
  names = interfaces_of (net_dev);
  /* Loopback and the one interface of the stack, named as a container's: never the host's list, nor a name of
   * the host's (pasta names its interface after the host's own unless told; a host with one NIC then looked the
   * same).  That these are not the host's interfaces the namespaces below prove. */
  g_test_message ("host: %s", host_names);
  g_assert_cmpstr (names, ==, "eth0\nlo\n");

  inside = jail_namespaces (f, handle);
  for (gsize i = 0; i < G_N_ELEMENTS (namespaces); i++)
    {
      g_autofree char *outside = host_namespace (namespaces[i]);
      g_assert_cmpstr (inside[i], !=, outside);
    }

  listener = listen_anywhere (&port);
  probe = connect_probe ("127.0.0.1", port);
  reach = sandstep_test_run_ok (f, handle, probe);
  close (listener);
  g_assert_cmpstr (reach, ==, "refused\n");
}

static void
test_inherited_fds_closed (JailFixture *jf, gconstpointer data)
{
  SandstepTestFixture *f = jail_begin (jf);
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *secret_path = NULL;
  g_autofree char *secret = g_strdup_printf ("inherited-secret-%08x", g_random_int ());
  g_autofree char *seconds = sandstep_test_unique_seconds (1);
  g_autofree char *command = NULL;
  g_autofree char *helper_fd = NULL;
  g_autofree char *fd7 = NULL;
  const char *marker_argv[] = { "sleep", seconds, NULL };
  g_autoptr(SandstepTestResult) r = NULL;
  g_auto(GStrv) sections = NULL;
  SandstepTestProc *proc;
  int fd;

  g_test_summary ("fds the helper inherits beyond 0, 1 and 2 are closed before the command starts");
  if (f == NULL)
    return;
  handle = sandstep_test_provision (f, NULL);
  h = handle_arg (handle);
  secret_path = sandstep_test_host_path (f, "secret.txt");
  sandstep_test_write_file (secret_path, secret, -1);
  fd = open (secret_path, O_RDONLY | O_CLOEXEC);
  g_assert_cmpint (fd, >=, 0);

  /* No redirections or pipes before the listings: the shell would hold fds of its own for them. */
  command = g_strdup_printf ("sleep %s; ls /proc/$$/fd; echo --; ls /proc/self/fd; echo --; cat <&7; echo --",
                             seconds);
  proc = sandstep_test_spawn_full (f, (const char *[]) { "run", h, "--", command, NULL }, (const int[]) { fd },
                                   (const int[]) { 7 }, 1);
  close (fd);
  /* The helper did get fd 7 (so the check inside can fail). */
  g_assert_true (sandstep_test_wait_for_process (marker_argv, TRUE, 5));
  fd7 = g_strdup_printf ("/proc/%d/fd/7", (int) sandstep_test_proc_pid (proc));
  helper_fd = g_file_read_link (fd7, NULL);
  g_assert_cmpstr (helper_fd, ==, secret_path);

  r = sandstep_test_proc_wait (proc, 20);
  sandstep_test_assert_status (r, 0);
  sandstep_test_assert_not_contains (r->out, secret);
  sections = g_strsplit (r->out, "--\n", -1);
  g_assert_cmpuint (g_strv_length (sections), ==, 4);
  g_assert_cmpstr (sections[0], ==, "0\n1\n2\n");
  /* ls also sees the directory it reads. */
  g_assert_true (strcmp (sections[1], "0\n1\n2\n") == 0 || strcmp (sections[1], "0\n1\n2\n3\n") == 0);
  g_assert_cmpstr (sections[2], ==, "");
  sandstep_test_assert_contains (r->err, "7");
}

static void
test_environment_allowlist (JailFixture *jf, gconstpointer data)
{
  static const char *const allowed[] = { "PATH", "HOME", "PWD", "OLDPWD", "TMPDIR", "USER", "LOGNAME", "SHELL",
                                         "HOSTNAME", "SANDSTEP", "TERM", "LANG", "LANGUAGE", "TZ", "SHLVL", "_",
                                         "A", "B", NULL };
  SandstepTestFixture *f = jail_begin (jf);
  g_autofree char *handle = NULL;
  g_autofree char *secret = g_strdup_printf ("xyz-%08x", g_random_int ());
  g_autofree char *b_value = g_strdup_printf ("bee-%08x", g_random_int ());
  g_autofree char *expected_b = g_strconcat ("B=", b_value, NULL);
  g_autofree char *out = NULL;
  g_auto(GStrv) lines = NULL;

  g_test_summary ("the environment inside is an allowlist plus --env: host variables stay out, --env=A=1 and "
                  "--env=B (this environment's B) come in");
  if (f == NULL)
    return;
  sandstep_test_fixture_setenv (f, "SANDSTEP_TEST_SECRET", secret);
  sandstep_test_fixture_setenv (f, "AWS_SECRET_ACCESS_KEY", secret);
  sandstep_test_fixture_setenv (f, "SSH_AUTH_SOCK", "/tmp/agent.sock");
  sandstep_test_fixture_setenv (f, "B", b_value);
  handle = sandstep_test_provision (f, "--env=A=1", "--env=B", NULL);
  out = sandstep_test_run_ok (f, handle, "env");
  sandstep_test_assert_not_contains (out, secret);
  sandstep_test_assert_not_contains (out, "SANDSTEP_TEST_SECRET");
  lines = g_strsplit (g_strchomp (out), "\n", -1);
  g_assert_true (g_strv_contains ((const char *const *) lines, "A=1"));
  g_assert_true (g_strv_contains ((const char *const *) lines, expected_b));
  for (gsize i = 0; lines[i] != NULL; i++)
    {
      g_autofree char *name = g_strndup (lines[i], strcspn (lines[i], "="));
      gboolean ok = g_strv_contains (allowed, name) || g_str_has_prefix (name, "LC_");
      if (!ok)
        g_test_message ("variable '%s' is not in the allowlist", lines[i]);
      g_assert_true (ok);
    }
}

static void
test_data_mount_read_only (JailFixture *jf, gconstpointer data)
{
  SandstepTestFixture *f = jail_begin (jf);
  g_autofree char *docs = NULL;
  g_autofree char *doc = NULL;
  g_autofree char *mount = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *after = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  g_autoptr(GDir) dir = NULL;
  const char *name;
  guint entries = 0;

  g_test_summary ("--mount=HOSTPATH:/data/NAME is readable inside and every write fails with EROFS");
  if (f == NULL)
    return;
  docs = sandstep_test_host_path (f, "docs");
  g_assert_cmpint (mkdir (docs, 0755), ==, 0);
  doc = g_build_filename (docs, "doc.txt", NULL);
  sandstep_test_write_file (doc, "document\n", -1);
  /* Writable by anyone (the sandbox's uid 0 is a host uid of its own), so only the read-only mount can refuse
   * a write. */
  sandstep_test_fixture_chown (f, docs);
  g_assert_cmpint (chmod (docs, 0777), ==, 0);
  g_assert_cmpint (chmod (doc, 0666), ==, 0);
  mount = g_strdup_printf ("--mount=%s:/data/docs", docs);
  handle = sandstep_test_provision (f, mount, NULL);
  h = handle_arg (handle);
  r = sandstep_test_helper (f, "run", h, "--",
                            "cat /data/docs/doc.txt; echo x > /data/docs/new; echo create=$?; "
                            "echo y >> /data/docs/doc.txt; echo append=$?; rm -f /data/docs/doc.txt; echo rm=$?; "
                            "mkdir /data/docs/sub; echo mkdir=$?",
                            NULL);
  sandstep_test_assert_status (r, 0);
  g_assert_cmpstr (r->out, ==, "document\ncreate=2\nappend=2\nrm=1\nmkdir=1\n");
  sandstep_test_assert_contains (r->err, "Read-only file system");
  sandstep_test_assert_not_contains (r->err, "Permission denied");

  g_assert_true (g_file_get_contents (doc, &after, NULL, NULL));
  g_assert_cmpstr (after, ==, "document\n");
  dir = g_dir_open (docs, 0, NULL);
  while ((name = g_dir_read_name (dir)) != NULL)
    entries++;
  g_assert_cmpuint (entries, ==, 1);
}

static void
test_own_session (JailFixture *jf, gconstpointer data)
{
  SandstepTestFixture *f = jail_begin (jf);
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *seconds = sandstep_test_unique_seconds (1);
  g_autofree char *command = NULL;
  g_autofree char *stat_path = NULL;
  g_autofree char *stat_text = NULL;
  g_autoptr(GArray) pids = NULL;
  g_autoptr(SandstepTestResult) r = NULL;
  g_auto(GStrv) fields = NULL;
  const char *marker_argv[] = { "sleep", seconds, NULL };
  SandstepTestProc *proc;
  pid_t host_sid;

  g_test_summary ("a command runs in a session of its own (setsid), with no controlling terminal");
  if (f == NULL)
    return;
  handle = sandstep_test_provision (f, NULL);
  h = handle_arg (handle);
  command = g_strdup_printf ("set -- $(cut -d' ' -f6,7 /proc/self/stat); echo \"tty=$2\"; "
                             "test -d /proc/$1 && echo leader-inside; sleep %s", seconds);
  proc = sandstep_test_spawn (f, "run", h, "--", command, NULL);
  g_assert_true (sandstep_test_wait_for_process (marker_argv, TRUE, 5));

  /* Seen from the host: the command's session is neither ours nor the helper's. */
  pids = sandstep_test_find_processes (marker_argv);
  g_assert_cmpuint (pids->len, ==, 1);
  stat_path = g_strdup_printf ("/proc/%d/stat", (int) g_array_index (pids, GPid, 0));
  g_assert_true (g_file_get_contents (stat_path, &stat_text, NULL, NULL));
  fields = proc_stat_fields (stat_text);
  host_sid = (pid_t) g_ascii_strtoll (fields[3], NULL, 10);
  g_assert_cmpint (host_sid, >, 0);
  g_assert_cmpint (host_sid, !=, getsid (0));
  g_assert_cmpint (host_sid, !=, getsid (sandstep_test_proc_pid (proc)));
  g_assert_cmpstr (fields[4], ==, "0");

  r = sandstep_test_proc_wait (proc, 20);
  sandstep_test_assert_status (r, 0);
  g_assert_cmpstr (r->out, ==, "tty=0\nleader-inside\n");
}

static void
test_no_survivors (JailFixture *jf, gconstpointer data)
{
  SandstepTestFixture *f = jail_begin (jf);
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *seconds = sandstep_test_unique_seconds (300);
  g_autofree char *daemon_seconds = sandstep_test_unique_seconds (301);
  g_autofree char *command = NULL;
  const char *marker_argv[] = { "sleep", seconds, NULL };
  const char *daemon_argv[] = { "sleep", daemon_seconds, NULL };
  g_autoptr(SandstepTestResult) r = NULL;
  SandstepTestProc *proc;

  g_test_summary ("no process a command started survives it: background and daemonized processes are gone "
                  "from the host when it exits");
  if (f == NULL)
    return;
  handle = sandstep_test_provision (f, NULL);
  h = handle_arg (handle);
  command = g_strdup_printf ("sleep %s & (setsid sleep %s > /dev/null 2>&1 &); sleep 1", seconds, daemon_seconds);
  proc = sandstep_test_spawn (f, "run", h, "--", command, NULL);
  g_assert_true (sandstep_test_wait_for_process (marker_argv, TRUE, 5));
  g_assert_true (sandstep_test_wait_for_process (daemon_argv, TRUE, 5));
  r = sandstep_test_proc_wait (proc, 20);
  sandstep_test_assert_status (r, 0);
  g_assert_true (sandstep_test_wait_for_process (marker_argv, FALSE, 2));
  g_assert_true (sandstep_test_wait_for_process (daemon_argv, FALSE, 2));
}

static gint64
sandbox_uid (SandstepTestFixture *f, const char *handle)
{
  g_autoptr(JsonObject) described = sandstep_test_describe (f, handle);

  return json_object_get_int_member (described, "uid");
}

static void
destroy_ok (SandstepTestFixture *f, const char *handle)
{
  g_autofree char *h = handle_arg (handle);
  g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "destroy", h, NULL);

  sandstep_test_assert_status (r, 0);
}

static void
test_uids_host_wide (JailFixture *jf, gconstpointer data)
{
  SandstepTestFixture *f = jail_begin (jf);
  g_autofree char *leases = NULL;
  g_autofree char *other_state = NULL;
  g_autofree char *here = NULL;
  g_autofree char *there = NULL;
  g_autofree char *again = NULL;
  gint64 uid_here, uid_there, uid_again;

  g_test_summary ("two sandboxes of two state directories whose uid probes start at the same slot get two "
                  "uids (each state directory knew only its own sandboxes' uids, so both got one uid); the slot "
                  "of a destroyed sandbox is taken again");
  if (f == NULL)
    return;
  if (f->user != NULL || getuid () != 0)
    {
      g_test_skip ("a sandbox's uid is a host uid of its own only when sandstep runs as root");
      return;
    }
  leases = g_build_filename (f->base_dir, "uid-leases", NULL);
  other_state = g_build_filename (f->base_dir, "other-state", NULL);
  g_assert_cmpint (g_mkdir_with_parents (other_state, 0700), ==, 0);
  sandstep_test_fixture_setenv (f, "SANDSTEP_TEST_UIDS_DIR", leases);
  sandstep_test_fixture_setenv (f, "SANDSTEP_TEST_UID_SLOT", "4242");

  here = sandstep_test_provision (f, "--holder=here", NULL);
  uid_here = sandbox_uid (f, here);
  sandstep_test_fixture_setenv (f, "SANDSTEP_STATE_DIR", other_state);
  there = sandstep_test_provision (f, "--holder=there", NULL);
  uid_there = sandbox_uid (f, there);
  g_assert_cmpint (uid_here, !=, 0);
  g_assert_cmpint (uid_there, !=, 0);
  g_assert_cmpint (uid_there, !=, uid_here);
  g_assert_cmpint (uid_there, ==, uid_here + 1);

  sandstep_test_fixture_setenv (f, "SANDSTEP_STATE_DIR", f->state_dir);
  destroy_ok (f, here);
  sandstep_test_fixture_setenv (f, "SANDSTEP_STATE_DIR", other_state);
  again = sandstep_test_provision (f, "--holder=again", NULL);
  uid_again = sandbox_uid (f, again);
  g_assert_cmpint (uid_again, ==, uid_here);
  destroy_ok (f, there);
  destroy_ok (f, again);
  sandstep_test_result_free (sandstep_test_helper (f, "gc", NULL));
  sandstep_test_fixture_setenv (f, "SANDSTEP_STATE_DIR", f->state_dir);
  sandstep_remove_tree_at (AT_FDCWD, other_state);
  sandstep_remove_tree_at (AT_FDCWD, leases);
}

/* The text of a cgroup file, stripped; NULL where it is absent. */
static char *
cgroup_text (const char *first, ...)
{
  va_list ap;
  g_autofree char *path = NULL;
  char *text = NULL;

  va_start (ap, first);
  path = g_build_filename_valist (first, &ap);
  va_end (ap);
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return NULL;
  return g_strstrip (text);
}

/* The number after @key in a cgroup's "key value" file. */
static gint64
stat_field (const char *text, const char *key)
{
  g_auto(GStrv) lines = g_strsplit (text != NULL ? text : "", "\n", -1);
  gsize key_len = strlen (key);

  for (gsize i = 0; lines[i] != NULL; i++)
    if (strncmp (lines[i], key, key_len) == 0 && lines[i][key_len] == ' ')
      return g_ascii_strtoll (lines[i] + key_len + 1, NULL, 10);
  return -1;
}

static void
assert_one_line (const char *text, const char *needle)
{
  sandstep_test_assert_contains (text, needle);
  g_test_message ("said: %s", text);
  g_assert_cmpuint (strlen (text), >, 0);
  g_assert_true (strchr (text, '\n') == text + strlen (text) - 1);
}

static void
test_cpu_cap (JailFixture *jf, gconstpointer data)
{
  SandstepTestFixture *f = jail_begin (jf);
  g_autoptr(SandstepTestResult) provisioned = NULL;
  g_autoptr(SandstepTestResult) weighed = NULL;
  g_autoptr(SandstepTestResult) busy = NULL;
  g_autoptr(JsonObject) described = NULL;
  g_autofree char *handle = NULL;
  g_autofree char *h = NULL;
  g_autofree char *quota = NULL;
  g_autofree char *group = NULL;
  g_autofree char *cpu_stat = NULL;
  g_autofree char *io_weight = NULL;
  g_autofree char *v2_dir = NULL;
  g_auto(GStrv) words = NULL;
  gboolean v1;
  JsonObject *limits;
  double cpu_s, wall_s;

  if (f == NULL)
    return;
  g_test_summary ("--cpus=0.5 caps the sandbox at half a CPU (cpu.cfs_quota_us 50000 of 100000, or cpu.max): a "
                  "busy loop for 2 s of wall time gets at most 0.6 of it in CPU time and is throttled; every "
                  "sandbox weighs half the host's default (cpu.shares 512, cpu.weight 50); --io-weight is written "
                  "or said in one line not to apply; describe shows both. Where no cgroup can be made (a user "
                  "here), --cpus is refused in one line saying why, and --io-weight told in one");
  g_test_bug ("30");
  provisioned = sandstep_test_helper (f, "provision", "--cpus=0.5", "--io-weight=300", NULL);
  if (provisioned->status != 0)
    {
      /* Refused: only where this caller can make no cgroup, in one line that says which limit and why. */
      sandstep_test_assert_status (provisioned, 125);
      assert_one_line (provisioned->err, "sandstep provision: --cpus=0.5 cannot apply: ");
      weighed = sandstep_test_helper (f, "provision", "--io-weight=300", NULL);
      sandstep_test_assert_status (weighed, 0);
      assert_one_line (weighed->err, "sandstep provision: --io-weight=300 cannot apply: ");
      /* A user has no cgroup here: the line says so. */
      if (f->user != NULL || getuid () != 0)
        sandstep_test_assert_contains (provisioned->err, "no cgroup can be made here");
      return;
    }
  handle = g_strstrip (g_strdup (provisioned->out));
  h = handle_arg (handle);
  v1 = g_file_test ("/sys/fs/cgroup/cpu/sandstep", G_FILE_TEST_IS_DIR);
  /* Root's at /sandstep; a user's under the subtree systemd delegates to it (user@UID.service). */
  v2_dir = v1 ? NULL : sandstep_cgroup_v2_parent ();
  g_assert_true (v1 || v2_dir != NULL);
  quota = v1 ? cgroup_text ("/sys/fs/cgroup/cpu/sandstep", handle, "cpu.cfs_quota_us", NULL)
             : cgroup_text (v2_dir, handle, "cpu.max", NULL);
  group = v1 ? cgroup_text ("/sys/fs/cgroup/cpu/sandstep/cpu.shares", NULL)
             : cgroup_text (v2_dir, "cpu.weight", NULL);
  g_assert_cmpstr (quota, ==, v1 ? "50000" : "50000 100000");
  g_assert_cmpstr (group, ==, v1 ? "512" : "50");
  if (v1)
    {
      g_autofree char *period = cgroup_text ("/sys/fs/cgroup/cpu/sandstep", handle, "cpu.cfs_period_us", NULL);
      g_assert_cmpstr (period, ==, "100000");
    }
  /* The I/O weight: where the host's block I/O controller weighs, read back; else the one line. */
  io_weight = v1 ? cgroup_text ("/sys/fs/cgroup/blkio/sandstep", handle, "blkio.bfq.weight", NULL)
                 : cgroup_text (v2_dir, handle, "io.weight", NULL);
  if (v1 && io_weight == NULL)
    io_weight = cgroup_text ("/sys/fs/cgroup/blkio/sandstep", handle, "blkio.weight", NULL);
  if (io_weight != NULL && strstr (provisioned->err, "cannot apply") == NULL)
    g_assert_true (g_str_equal (io_weight, "300") || g_str_equal (io_weight, "1000") ||
                   g_str_has_prefix (io_weight, "default 300"));
  else
    assert_one_line (provisioned->err, "sandstep provision: --io-weight=300 cannot apply: ");

  described = sandstep_test_describe (f, handle);
  limits = json_object_get_object_member (json_object_get_object_member (described, "spec"), "limits");
  g_assert_cmpfloat (json_object_get_double_member (limits, "cpus"), ==, 0.5);
  g_assert_cmpint (json_object_get_int_member (limits, "io_weight"), ==, 300);

  /* A CPU-time ratio, from the loop's own /proc stat: whatever else loads the host, the cap only lowers it. */
  busy = sandstep_test_helper (f, "run", h, "--",
                               "t0=$(date +%s%N); ( while :; do :; done ) & p=$!; sleep 2; "
                               "read -r s < /proc/$p/stat; t1=$(date +%s%N); kill $p; "
                               "echo \"$t0 $t1 ${s##*) }\"", NULL);
  sandstep_test_assert_status (busy, 0);
  words = g_strsplit (g_strstrip (busy->out), " ", -1);
  /* t0 t1, then the stat from its third field: utime and stime are the 14th and 15th. */
  g_assert_cmpuint (g_strv_length (words), >=, 2 + 13);
  wall_s = (g_ascii_strtod (words[1], NULL) - g_ascii_strtod (words[0], NULL)) / 1e9;
  cpu_s = (g_ascii_strtod (words[2 + 11], NULL) + g_ascii_strtod (words[2 + 12], NULL)) / sysconf (_SC_CLK_TCK);
  g_test_message ("busy loop: %.2f s of CPU in %.2f s", cpu_s, wall_s);
  g_assert_cmpfloat (wall_s, >=, 1.9);
  g_assert_cmpfloat (cpu_s, <=, 0.6 * wall_s);
  /* And the kernel held it back: throttled in some periods (a loop alone on a host would not be). */
  cpu_stat = v1 ? cgroup_text ("/sys/fs/cgroup/cpu/sandstep", handle, "cpu.stat", NULL)
                : cgroup_text (v2_dir, handle, "cpu.stat", NULL);
  g_assert_cmpint (stat_field (cpu_stat, "nr_throttled"), >, 0);
  destroy_ok (f, handle);
  {
    g_autofree char *own = g_build_filename (v1 ? "/sys/fs/cgroup/cpu/sandstep" : v2_dir, handle,
                                             NULL);
    g_assert_false (g_file_test (own, G_FILE_TEST_EXISTS));
  }
}

static void
test_cpu_io_bad_values (JailFixture *jf, gconstpointer data)
{
  SandstepTestFixture *f = jail_begin (jf);
  static const struct { const char *arg; const char *named; } bad[] = {
    { "--cpus=0", "--cpus '0'" }, { "--cpus=-1", "--cpus '-1'" }, { "--cpus=abc", "--cpus 'abc'" },
    { "--cpus=0.001", "--cpus '0.001'" }, { "--cpus=0.0005", "--cpus '0.0005'" }, { "--cpus=1e3", "--cpus '1e3'" },
    { "--cpus=0x10", "--cpus '0x10'" }, { "--cpus=.", "--cpus '.'" }, { "--cpus=1,5", "--cpus '1,5'" },
    { "--cpus=5000", "--cpus '5000'" }, { "--cpus=99999999999999999999", "--cpus '99999999999999999999'" },
    { "--io-weight=0", "'io-weight'" }, { "--io-weight=10001", "--io-weight '10001'" },
    { "--io-weight=1.5", "'io-weight'" }, { "--io-weight=-3", "'io-weight'" },
  };

  if (f == NULL)
    return;
  g_test_summary ("bad --cpus and --io-weight values are refused at provision with exit 64 and a line naming the "
                  "option and the value, before any sandbox is made");
  g_test_bug ("30");
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr(SandstepTestResult) r = sandstep_test_helper (f, "provision", bad[i].arg, NULL);
      sandstep_test_assert_status (r, 64);
      sandstep_test_assert_contains (r->err, bad[i].named);
      g_assert_cmpstr (r->out, ==, "");
    }
}


typedef struct {
  const char *name;
  void (*func) (JailFixture *, gconstpointer);
} JailCase;

static const JailCase cases[] = {
  { "namespaces", test_namespaces },
  { "usr-read-only", test_usr_read_only },
  { "workspace-and-tmp-persist", test_workspace_and_tmp_persist },
  { "own-proc", test_own_proc },
  { "minimal-dev", test_minimal_dev },
  { "no-privileges", test_no_privileges },
  { "network-none", test_network_none },
  { "network-open", test_network_open },
  { "inherited-fds-closed", test_inherited_fds_closed },
  { "environment-allowlist", test_environment_allowlist },
  { "data-mount-read-only", test_data_mount_read_only },
  { "own-session", test_own_session },
  { "no-survivors", test_no_survivors },
  { "uids-host-wide", test_uids_host_wide },
  { "cpu-cap", test_cpu_cap },
  { "cpu-io-bad-values", test_cpu_io_bad_values },
};

int
main (int argc, char **argv)
{
  static const struct { const char *prefix; RunAs as; } variants[] = {
    { "/jail/as-caller/", AS_CALLER },
    { "/jail/as-user/", AS_USER },
  };

  g_test_init (&argc, &argv, NULL);
  for (gsize v = 0; v < G_N_ELEMENTS (variants); v++)
    for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
      {
        g_autofree char *path = g_strconcat (variants[v].prefix, cases[i].name, NULL);
        g_test_add (path, JailFixture, GINT_TO_POINTER (variants[v].as), jail_setup, cases[i].func, jail_teardown);
      }
  return g_test_run ();
}
