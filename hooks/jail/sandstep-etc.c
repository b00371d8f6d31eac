/* sandstep-etc.c: what a sandbox's /etc holds. */
#include "sandstep-etc.h"

#include <string.h>
#include <sys/stat.h>

/* Larger files are bound live instead of copied. */
#define ETC_COPY_MAX (1024 * 1024)

/* Host /etc entries a command commonly needs; everything else of the host's
 * /etc (shadow, keys, ssl/private, credentials) stays out. */
static const char *const allowlist[] = {
  "alternatives", "ca-certificates", "ca-certificates.conf", "debian_version", "gai.conf", "host.conf",
  "inputrc", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "mime.types", "nsswitch.conf",
  "os-release", "protocols", "services", "ssl/certs", "ssl/openssl.cnf", "timezone",
};

static void
own_file (const SandstepEtcSink *sink, const char *name, const char *text, gpointer user_data)
{
  g_autoptr(GBytes) content = g_bytes_new_static (text, strlen (text));

  sink->file (name, content, 0644, user_data);
}

/* One allowlisted entry, its parent directory made first; what the host lacks is left out. */
static void
copy_entry (const SandstepEtcSink *sink, const char *name, GHashTable *made, gpointer user_data)
{
  g_autofree char *host = g_strconcat ("/etc/", name, NULL);
  g_autofree char *parent = g_path_get_dirname (name);
  struct stat st;
  gboolean live;

  if (lstat (host, &st) < 0)
    {
      sink->input (host, NULL, FALSE, user_data);
      return;
    }
  live = S_ISDIR (st.st_mode) || (S_ISREG (st.st_mode) && st.st_size > ETC_COPY_MAX);
  sink->input (host, &st, !live, user_data);
  if (strcmp (parent, ".") != 0 && !g_hash_table_contains (made, parent))
    {
      sink->directory (parent, user_data);
      g_hash_table_add (made, g_steal_pointer (&parent));
    }
  if (S_ISLNK (st.st_mode))
    {
      g_autofree char *target = g_file_read_link (host, NULL);
      if (target != NULL)
        sink->symlink (name, target, user_data);
    }
  else if (live)
    sink->live (host, S_ISDIR (st.st_mode), user_data);
  else if (S_ISREG (st.st_mode))
    {
      g_autofree char *contents = NULL;
      gsize len = 0;
      /* Unreadable to this user: the sandbox could not read it through a bind either. */
      if (g_file_get_contents (host, &contents, &len, NULL))
        {
          g_autoptr(GBytes) content = g_bytes_new_take (g_steal_pointer (&contents), len);
          sink->file (name, content, 0644, user_data);
        }
    }
}

void
sandstep_etc_build (gboolean open_network, const SandstepEtcSink *sink, gpointer user_data)
{
  static const char passwd[] =
    "root:x:0:0:sandstep:/workspace:/bin/sh\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
  static const char group[] = "root:x:0:\nnogroup:x:65534:\n";
  static const char hosts[] = SANDSTEP_ETC_HOSTS;
  g_autoptr(GHashTable) made = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  own_file (sink, "passwd", passwd, user_data);
  own_file (sink, "group", group, user_data);
  own_file (sink, "hostname", SANDSTEP_JAIL_HOSTNAME "\n", user_data);
  own_file (sink, "hosts", hosts, user_data);
  for (gsize i = 0; i < G_N_ELEMENTS (allowlist); i++)
    copy_entry (sink, allowlist[i], made, user_data);
  if (open_network)
    copy_entry (sink, "resolv.conf", made, user_data);
}
