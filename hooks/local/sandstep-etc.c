/* sandstep-etc.c: the jail's /etc, made once per sandbox. */
#include "sandstep-etc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-host-files.h"
#include "sandstep-store.h"

/* Larger files are bound live instead of copied. */
#define ETC_COPY_MAX (1024 * 1024)

/* Host /etc entries a command commonly needs; everything else of the host's
 * /etc (shadow, keys, ssl/private, credentials) stays out. */
static const char *const allowlist[] = {
  "alternatives", "ca-certificates", "ca-certificates.conf", "debian_version", "gai.conf", "host.conf",
  "inputrc", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "mime.types", "nsswitch.conf",
  "os-release", "protocols", "services", "ssl/certs", "ssl/openssl.cnf", "timezone",
};

static gboolean
is_live (const struct stat *st)
{
  return S_ISDIR (st->st_mode) || (S_ISREG (st->st_mode) && st->st_size > ETC_COPY_MAX);
}

void
sandstep_etc_foreach_live (SandstepEtcBindFunc bind, gpointer user_data)
{
  for (gsize i = 0; i < G_N_ELEMENTS (allowlist); i++)
    {
      g_autofree char *host = g_strconcat ("/etc/", allowlist[i], NULL);
      struct stat st;

      if (lstat (host, &st) == 0 && is_live (&st))
        bind (host, S_ISDIR (st.st_mode), user_data);
    }
}

static gboolean
write_at (int dir_fd, const char *name, const char *data, gsize len)
{
  int fd = openat (dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  gboolean ok;

  if (fd < 0)
    return FALSE;
  ok = write (fd, data, len) == (ssize_t) len;
  return close (fd) == 0 && ok;
}

/* Copies one allowlisted entry; what the host lacks is left out. */
static gboolean
copy_entry (int dir_fd, const char *name)
{
  g_autofree char *host = g_strconcat ("/etc/", name, NULL);
  g_autofree char *parent = g_path_get_dirname (name);
  struct stat st;

  if (lstat (host, &st) < 0)
    return TRUE;
  if (strcmp (parent, ".") != 0 && mkdirat (dir_fd, parent, 0755) < 0 && errno != EEXIST)
    return FALSE;
  if (S_ISLNK (st.st_mode))
    {
      g_autofree char *target = g_file_read_link (host, NULL);
      return target == NULL || symlinkat (target, dir_fd, name) == 0;
    }
  if (S_ISDIR (st.st_mode))
    return mkdirat (dir_fd, name, 0755) == 0;
  if (!S_ISREG (st.st_mode))
    return TRUE;
  if (is_live (&st))
    return write_at (dir_fd, name, "", 0);
  {
    g_autofree char *contents = NULL;
    gsize len = 0;
    /* Unreadable to this user: the jail could not read it through a bind either. */
    if (!g_file_get_contents (host, &contents, &len, NULL))
      return TRUE;
    return write_at (dir_fd, name, contents, len);
  }
}

static gboolean
fill (int dir_fd, gboolean open_network)
{
  static const char passwd[] =
    "root:x:0:0:sandstep:/workspace:/bin/sh\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
  static const char group[] = "root:x:0:\nnogroup:x:65534:\n";
  static const char hosts[] =
    "127.0.0.1\tlocalhost " SANDSTEP_JAIL_HOSTNAME "\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n";

  if (!write_at (dir_fd, "passwd", passwd, strlen (passwd)) || !write_at (dir_fd, "group", group, strlen (group)) ||
      !write_at (dir_fd, "hostname", SANDSTEP_JAIL_HOSTNAME "\n", strlen (SANDSTEP_JAIL_HOSTNAME) + 1) ||
      !write_at (dir_fd, "hosts", hosts, strlen (hosts)))
    return FALSE;
  for (gsize i = 0; i < G_N_ELEMENTS (allowlist); i++)
    if (!copy_entry (dir_fd, allowlist[i]))
      return FALSE;
  return !open_network || copy_entry (dir_fd, "resolv.conf");
}

gboolean
sandstep_etc_prepare (const char *dir, gboolean open_network, GError **error)
{
  g_autofree char *staging = g_strdup_printf ("%s.new-%d", dir, (int) getpid ());
  int fd;
  gboolean ok;

  if (g_file_test (dir, G_FILE_TEST_IS_DIR))
    return TRUE;
  /* A helper killed while building left its staging copy: start over. */
  sandstep_remove_tree_at (AT_FDCWD, staging);
  if (mkdir (staging, 0755) < 0 ||
      (fd = open (staging, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
    return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errno,
                                 "Could not create the sandbox's /etc at '%s'; check that the state directory is "
                                 "writable", staging);
  ok = fill (fd, open_network);
  close (fd);
  if (ok && rename (staging, dir) == 0)
    return TRUE;
  {
    int errsv = errno;
    sandstep_remove_tree_at (AT_FDCWD, staging);
    /* Another helper finished first: its copy serves as well. */
    if (g_file_test (dir, G_FILE_TEST_IS_DIR))
      return TRUE;
    return sandstep_throw_errno (error, SANDSTEP_JAIL_ERROR, SANDSTEP_JAIL_ERROR_SETUP, errsv,
                                 "Could not fill the sandbox's /etc at '%s'; check the space left in the state "
                                 "directory", staging);
  }
}
