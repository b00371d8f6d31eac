/* sandstep-image-unpack.c: a hostile layer unpacked safely (sandstep-image-unpack.h). */
#include "sandstep-image-unpack.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gunixinputstream.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-host-files.h"
#include "sandstep-error.h"
#include "sandstep-image-zstd.h"
#include "sandstep-test-hooks.h"

/* Linked into sandstep-net only, which every pull runs in (operators/op-pull.c), so the lean helper does not
 * load libzstd. */
#pragma weak sandstep_image_zstd_decompressor_new

#define BLOCK 512
#define MAX_META (1024 * 1024)   /* a pax header or GNU long name */
#define WHITEOUT ".wh."
#define OPAQUE ".wh..wh..opq"

typedef struct {
  GInputStream *input;
  int root_fd;
  gboolean as_root;     /* keep the image's owners */
  guint64 *budget;
  guint64 size;         /* bytes of file data written */
  guint64 entries;
  guint64 kill_after;   /* test hook: SIGKILL ourselves after this many entries */
  /* The directory of the last entry, kept open: most entries share it, and
   * walking every name afresh costs an openat per component.  Dropped
   * whenever anything is removed, which could take it away. */
  char *cached_path;
  int cached_fd;
  gboolean cache_stale;
} Unpack;

static void
forget_parent (Unpack *u)
{
  if (u->cached_fd >= 0)
    close (u->cached_fd);
  u->cached_fd = -1;
  g_clear_pointer (&u->cached_path, g_free);
}

/* Removes @leaf under @parent; the cached directory is dropped before the next entry (it may be inside
 * what went), while @parent itself stays open for this one. */
static void
remove_at (Unpack *u, int parent, const char *leaf)
{
  u->cache_stale = TRUE;
  sandstep_remove_tree_at (parent, leaf);
}

static gboolean
hostile (GError **error, const char *name, const char *why)
{
  g_autofree char *shown = sandstep_escape (name, -1, 300, SANDSTEP_ESCAPE_VALUE);

  return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_HOSTILE,
                         "layer entry '%s': %s; the image is refused (nothing of it was kept)", shown, why);
}

static gboolean
read_exact (Unpack *u, void *buf, gsize len, GError **error)
{
  gsize got = 0;

  if (!g_input_stream_read_all (u->input, buf, len, &got, NULL, error))
    return FALSE;
  if (got != len)
    return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_HOSTILE,
                           "the layer's tar ends in the middle of an entry (truncated); the image is refused");
  return TRUE;
}

static gboolean
skip_bytes (Unpack *u, guint64 len, GError **error)
{
  char buf[16384];

  while (len > 0)
    {
      gsize n = MIN (len, sizeof buf);
      if (!read_exact (u, buf, n, error))
        return FALSE;
      len -= n;
    }
  return TRUE;
}

static guint64
padding (guint64 size)
{
  return (BLOCK - size % BLOCK) % BLOCK;
}

/* A numeric field: octal text, or base-256 when its first byte has the high bit (GNU, star). */
static gboolean
parse_number (const char *p, gsize n, guint64 *out)
{
  guint64 v = 0;
  gsize i = 0;

  if ((guchar) p[0] & 0x80)
    {
      if ((guchar) p[0] == 0xff)
        return FALSE;           /* negative */
      v = (guchar) p[0] & 0x7f;
      for (i = 1; i < n; i++)
        {
          if (v >> 56)
            return FALSE;
          v = (v << 8) | (guchar) p[i];
        }
      *out = v;
      return TRUE;
    }
  while (i < n && p[i] == ' ')
    i++;
  for (; i < n && p[i] >= '0' && p[i] <= '7'; i++)
    {
      if (v >> 60)
        return FALSE;
      v = v * 8 + (p[i] - '0');
    }
  for (; i < n; i++)
    if (p[i] != ' ' && p[i] != '\0')
      return FALSE;
  *out = v;
  return TRUE;
}

static gboolean
checksum_ok (const guchar *h)
{
  guint64 want = 0, sum = 0;

  if (!parse_number ((const char *) h + 148, 8, &want))
    return FALSE;
  for (gsize i = 0; i < BLOCK; i++)
    sum += (i >= 148 && i < 156) ? ' ' : h[i];
  return sum == want;
}

void
sandstep_image_tar_header_clear (SandstepImageTarHeader *header)
{
  g_clear_pointer (&header->name, g_free);
  g_clear_pointer (&header->link, g_free);
}

gboolean
sandstep_image_tar_header_parse (const guchar *h, guint64 entry, SandstepImageTarHeader *out, GError **error)
{
  if (!checksum_ok (h))
    return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_HOSTILE,
                           "a header of the layer's tar has a wrong checksum (entry %" G_GUINT64_FORMAT "): not "
                           "a tar, or corrupt; the image is refused", entry);
  out->type = h[156];
  if (!parse_number ((char *) h + 124, 12, &out->size) || !parse_number ((char *) h + 100, 8, &out->mode) ||
      !parse_number ((char *) h + 108, 8, &out->uid) || !parse_number ((char *) h + 116, 8, &out->gid) ||
      !parse_number ((char *) h + 136, 12, &out->mtime) || out->size > G_MAXUINT64 / 2)
    return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_HOSTILE,
                           "a header of the layer's tar has a malformed number (entry %" G_GUINT64_FORMAT "); "
                           "the image is refused", entry);
  if (memcmp (h + 257, "ustar", 5) == 0 && h[345] != '\0')
    out->name = g_strdup_printf ("%.155s/%.100s", (char *) h + 345, (char *) h);
  else
    out->name = g_strndup ((char *) h, 100);
  out->link = g_strndup ((char *) h + 157, 100);
  return TRUE;
}

/* The components of @name, "." and empty ones dropped; NULL (with @error) for ".." or a leading "/". */
static GPtrArray *
split_name (const char *name, GError **error)
{
  g_autoptr(GPtrArray) parts = g_ptr_array_new_with_free_func (g_free);
  g_auto(GStrv) raw = NULL;

  if (name[0] == '/')
    {
      hostile (error, name, "an absolute name would write outside the layer");
      return NULL;
    }
  raw = g_strsplit (name, "/", -1);
  for (guint i = 0; raw[i] != NULL; i++)
    {
      if (raw[i][0] == '\0' || strcmp (raw[i], ".") == 0)
        continue;
      if (strcmp (raw[i], "..") == 0)
        {
          hostile (error, name, "a '..' in the name would write outside the layer");
          return NULL;
        }
      g_ptr_array_add (parts, g_strdup (raw[i]));
    }
  return g_steal_pointer (&parts);
}

static gboolean charge (Unpack *u, const char *name, guint64 size, GError **error);

/* Opens the directory @parts[0..n) under the layer's root, one component at a
 * time, never following a link; @create makes missing ones (0755), each
 * charged as an entry: one name of many components makes as many directories. */
static int
walk (Unpack *u, GPtrArray *parts, guint n, gboolean create, const char *name, GError **error)
{
  int fd = openat (u->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  for (guint i = 0; fd >= 0 && i < n; i++)
    {
      const char *c = parts->pdata[i];
      int next = openat (fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

      if (next < 0 && errno == ENOENT && create)
        {
          if (!charge (u, name, 0, error))
            {
              close (fd);
              return -1;
            }
          if (mkdirat (fd, c, 0755) < 0 && errno != EEXIST)
            {
              int errsv = errno;
              close (fd);
              sandstep_throw_write_errno (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_STORE, errsv,
                                          "unpacking a layer: cannot make the directory '%s'", c);
              return -1;
            }
          next = openat (fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
      if (next < 0)
        {
          int errsv = errno;
          close (fd);
          if (errsv == ELOOP || errsv == ENOTDIR)
            {
              g_autofree char *why = g_strdup_printf ("its directory '%s' is a symlink or not a directory in this "
                                                      "layer, and is never followed", c);
              hostile (error, name, why);
            }
          else if (errsv == ENOENT)
            hostile (error, name, "it names a directory this layer does not hold");
          else
            sandstep_throw_errno (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_STORE, errsv,
                                  "unpacking a layer: cannot open the directory '%s'", c);
          return -1;
        }
      close (fd);
      fd = next;
    }
  if (fd < 0)
    sandstep_throw_errno (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_STORE, errno,
                          "unpacking a layer: cannot open its directory");
  return fd;
}

static gboolean
valid_leaf (const char *leaf)
{
  return leaf[0] != '\0' && strcmp (leaf, ".") != 0 && strcmp (leaf, "..") != 0 && strchr (leaf, '/') == NULL;
}

gboolean
sandstep_image_budget_take (guint64 *budget, guint64 cost)
{
  guint64 left = __atomic_load_n (budget, __ATOMIC_RELAXED);

  do
    if (cost > left)
      return FALSE;
  while (!__atomic_compare_exchange_n (budget, &left, left - cost, FALSE, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return TRUE;
}

static gboolean
charge (Unpack *u, const char *name, guint64 size, GError **error)
{
  guint64 cost = MAX ((guint64) SANDSTEP_IMAGE_ENTRY_MIN_CHARGE, BLOCK + size + padding (size));

  if (size > G_MAXUINT64 / 2 || !sandstep_image_budget_take (u->budget, cost))
    {
      g_autofree char *shown = sandstep_escape (name, -1, 300, SANDSTEP_ESCAPE_VALUE);
      return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_TOO_LARGE,
                             "layer entry '%s' (%" G_GUINT64_FORMAT " bytes, entry %" G_GUINT64_FORMAT ") takes the "
                             "image over --max-image-size (each entry counts at least %d bytes); raise "
                             "--max-image-size if the image is meant to be this large",
                             shown, size, u->entries + 1, SANDSTEP_IMAGE_ENTRY_MIN_CHARGE);
    }
  return TRUE;
}

static gboolean
write_file (Unpack *u, int parent, const char *leaf, const char *name, guint64 size, mode_t mode, guint64 uid,
            guint64 gid, guint64 mtime, GError **error)
{
  int fd = openat (parent, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  char buf[65536];
  guint64 left = size;
  struct timespec times[2] = { { mtime, 0 }, { mtime, 0 } };

  if (fd < 0)
    return sandstep_throw_write_errno (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_STORE, errno,
                                       "unpacking a layer: cannot create '%s'", name);
  while (left > 0)
    {
      gsize n = MIN (left, sizeof buf);
      gsize off = 0;
      if (!read_exact (u, buf, n, error))
        {
          close (fd);
          return FALSE;
        }
      while (off < n)
        {
          ssize_t w = write (fd, buf + off, n - off);
          if (w < 0 && errno == EINTR)
            continue;
          if (w < 0)
            {
              int errsv = errno;
              close (fd);
              return sandstep_throw_write_errno (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_STORE, errsv,
                                                 "unpacking a layer: cannot write '%s'", name);
            }
          off += w;
        }
      left -= n;
    }
  if (u->as_root && fchown (fd, uid, gid) < 0)
    g_debug ("unpacking a layer: cannot give '%s' its owner: %s", name, g_strerror (errno));
  /* After fchown, which clears them anyway: setuid and setgid never survive. */
  fchmod (fd, mode & 01777);
  futimens (fd, times);
  close (fd);
  u->size += size;
  return TRUE;
}

/* One entry whose header (and long names) have been read; its data is next on the stream. */
static gboolean
unpack_entry (Unpack *u, char type, const char *name, const char *link, guint64 size, mode_t mode, guint64 uid,
              guint64 gid, guint64 mtime, GError **error)
{
  g_autoptr(GPtrArray) parts = split_name (name, error);
  const char *leaf;
  int parent;
  struct stat st;
  gboolean ok = TRUE;
  gboolean data_read = FALSE;

  if (parts == NULL)
    return FALSE;
  if (!charge (u, name, size, error))
    return FALSE;
  if (parts->len == 0)
    return skip_bytes (u, size + padding (size), error);  /* "./": the layer's root itself */
  leaf = parts->pdata[parts->len - 1];
  {
    g_autoptr(GString) path = g_string_new (NULL);

    for (guint i = 0; i + 1 < parts->len; i++)
      g_string_append_printf (path, "%s/", (char *) parts->pdata[i]);
    if (u->cache_stale || u->cached_path == NULL || strcmp (u->cached_path, path->str) != 0)
      {
        forget_parent (u);
        u->cache_stale = FALSE;
        u->cached_fd = walk (u, parts, parts->len - 1, TRUE, name, error);
        if (u->cached_fd < 0)
          return FALSE;
        u->cached_path = g_string_free (g_steal_pointer (&path), FALSE);
      }
    /* Borrowed: the cache owns it. */
    parent = u->cached_fd;
  }

  if (g_str_has_prefix (leaf, WHITEOUT))
    {
      if (strcmp (leaf, OPAQUE) == 0)
        {
          if (fsetxattr (parent, "user.overlay.opaque", "y", 1, 0) < 0)
            ok = sandstep_throw_errno (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_STORE, errno,
                                       "unpacking a layer: cannot mark the directory of '%s' opaque (the xattr "
                                       "user.overlay.opaque); put the image store (SANDSTEP_IMAGE_DIR) on a file "
                                       "system with user xattrs (ext4, xfs, btrfs)", name);
        }
      else if (!valid_leaf (leaf + strlen (WHITEOUT)))
        ok = hostile (error, name, "a whiteout must name one file");
      else
        {
          remove_at (u, parent, leaf + strlen (WHITEOUT));
          if (mknodat (parent, leaf + strlen (WHITEOUT), S_IFCHR | 0, makedev (0, 0)) < 0)
            ok = sandstep_throw_errno (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_STORE, errno,
                                       "unpacking a layer: cannot make the whiteout for '%s' (a 0/0 character "
                                       "device, which kernels since 5.8 let anyone make)", name);
        }
      return ok && skip_bytes (u, size + padding (size), error);
    }

  if (fstatat (parent, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0)
    {
      /* A later entry of the same name wins, as tar does; a directory stays and takes the new mode. */
      if (type == '5' && S_ISDIR (st.st_mode))
        {
          fchmodat (parent, leaf, (mode & 01777) | S_IRWXU, 0);
          return skip_bytes (u, size + padding (size), error);
        }
      remove_at (u, parent, leaf);
    }

  switch (type)
    {
    case '0':
    case '\0':
    case '7':
      ok = write_file (u, parent, leaf, name, size, mode, uid, gid, mtime, error);
      data_read = TRUE;
      break;
    case '5':
      if (mkdirat (parent, leaf, 0700) < 0)
        ok = sandstep_throw_write_errno (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_STORE, errno,
                                         "unpacking a layer: cannot make the directory '%s'", name);
      else
        {
          if (u->as_root && fchownat (parent, leaf, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
            g_debug ("unpacking a layer: cannot give '%s' its owner: %s", name, g_strerror (errno));
          fchmodat (parent, leaf, (mode & 01777) | S_IRWXU, 0);
        }
      break;
    case '2':
      /* The target is text, never followed while unpacking: any value is harmless here. */
      if (link[0] == '\0')
        ok = hostile (error, name, "a symlink with an empty target");
      else if (symlinkat (link, parent, leaf) < 0)
        ok = sandstep_throw_write_errno (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_STORE, errno,
                                         "unpacking a layer: cannot make the symlink '%s'", name);
      else if (u->as_root && fchownat (parent, leaf, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
        g_debug ("unpacking a layer: cannot give '%s' its owner: %s", name, g_strerror (errno));
      break;
    case '1':
      {
        g_autoptr(GPtrArray) target = split_name (link, NULL);
        int target_parent;
        struct stat tst;

        if (target == NULL || target->len == 0)
          {
            ok = hostile (error, name, "a hard link must name a file of this layer (no '..', not absolute)");
            break;
          }
        target_parent = walk (u, target, target->len - 1, FALSE, name, error);
        if (target_parent < 0)
          {
            ok = FALSE;
            break;
          }
        if (fstatat (target_parent, target->pdata[target->len - 1], &tst, AT_SYMLINK_NOFOLLOW) < 0 ||
            S_ISDIR (tst.st_mode))
          ok = hostile (error, name, "a hard link must name a file this layer already holds");
        else if (linkat (target_parent, target->pdata[target->len - 1], parent, leaf, 0) < 0)
          ok = sandstep_throw_write_errno (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_STORE, errno,
                                           "unpacking a layer: cannot make the hard link '%s'", name);
        close (target_parent);
        break;
      }
    case '3':
    case '4':
      g_debug ("unpacking a layer: device node '%s' skipped: a layer makes none", name);
      break;
    case '6':
      if (mkfifoat (parent, leaf, mode & 0777) < 0)
        ok = sandstep_throw_write_errno (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_STORE, errno,
                                         "unpacking a layer: cannot make the FIFO '%s'", name);
      break;
    default:
      g_debug ("unpacking a layer: entry '%s' of tar type '%c' skipped", name, type);
      break;
    }
  if (!ok)
    return FALSE;
  return skip_bytes (u, (data_read ? 0 : size) + padding (size), error);
}

gboolean
sandstep_image_tar_parse_pax (const char *data, gsize len, char **path, char **linkpath, guint64 *size,
                              gboolean *has_size, guint64 *uid, guint64 *gid, GError **error)
{
  gsize off = 0;

  while (off < len)
    {
      guint64 rec = 0;
      const char *p = data + off, *space, *eq;
      g_autofree char *key = NULL, *value = NULL;

      char *end = NULL;

      space = memchr (p, ' ', len - off);
      if (space != NULL && g_ascii_isdigit (p[0]))
        rec = g_ascii_strtoull (p, &end, 10);
      if (space == NULL || end != space || rec <= (guint64) (space - p) + 2 || rec > len - off || p[rec - 1] != '\n')
        return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_HOSTILE,
                               "a pax header of the layer is malformed; the image is refused");
      eq = memchr (space, '=', p + rec - space);
      if (eq == NULL)
        return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_HOSTILE,
                               "a pax header of the layer is malformed; the image is refused");
      key = g_strndup (space + 1, eq - space - 1);
      value = g_strndup (eq + 1, p + rec - 1 - eq - 1);
      if (strcmp (key, "path") == 0)
        g_free (*path), *path = g_steal_pointer (&value);
      else if (strcmp (key, "linkpath") == 0)
        g_free (*linkpath), *linkpath = g_steal_pointer (&value);
      else if (strcmp (key, "size") == 0)
        *has_size = g_ascii_string_to_unsigned (value, 10, 0, G_MAXUINT64 / 2, size, NULL);
      else if (strcmp (key, "uid") == 0)
        g_ascii_string_to_unsigned (value, 10, 0, G_MAXUINT32, uid, NULL);
      else if (strcmp (key, "gid") == 0)
        g_ascii_string_to_unsigned (value, 10, 0, G_MAXUINT32, gid, NULL);
      off += rec;
    }
  return TRUE;
}

/* The data of a meta entry (pax header, GNU long name), bounded, NUL-terminated. */
static char *
read_meta (Unpack *u, guint64 size, GError **error)
{
  g_autofree char *data = NULL;

  if (size > MAX_META)
    {
      sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_HOSTILE,
                      "a long-name or pax header of the layer is over %d bytes; the image is refused", MAX_META);
      return NULL;
    }
  if (!charge (u, "(pax header)", size, error))
    return NULL;
  data = g_malloc0 (size + 1);
  if (!read_exact (u, data, size, error) || !skip_bytes (u, padding (size), error))
    return NULL;
  return g_steal_pointer (&data);
}

/* Every entry of the tar, as unpack_entry() makes it. */
static gboolean
unpack_entries (Unpack *u, GError **error)
{
  g_autofree char *long_name = NULL, *long_link = NULL, *pax_path = NULL, *pax_link = NULL;
  guint64 pax_size = 0, pax_uid = G_MAXUINT64, pax_gid = G_MAXUINT64;
  gboolean has_pax_size = FALSE;
  const char *kill_after = sandstep_test_hook ("SANDSTEP_TEST_IMAGE_KILL_UNPACK");

  if (kill_after != NULL)
    u->kill_after = g_ascii_strtoull (kill_after, NULL, 10);
  for (;;)
    {
      guchar h[BLOCK];
      gsize got = 0;
      guint64 size = 0, mode = 0, uid = 0, gid = 0, mtime = 0;
      char type;
      g_autofree char *name = NULL, *link = NULL;
      g_auto(SandstepImageTarHeader) header = { 0 };
      gboolean zero = TRUE;

      if (!g_input_stream_read_all (u->input, h, BLOCK, &got, NULL, error))
        return FALSE;
      if (got == 0)
        break;                  /* no end blocks: some writers stop here */
      if (got != BLOCK)
        return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_HOSTILE,
                               "the layer's tar ends in the middle of a header (truncated); the image is refused");
      for (gsize i = 0; i < BLOCK && zero; i++)
        zero = h[i] == 0;
      if (zero)
        break;
      if (!sandstep_image_tar_header_parse (h, u->entries + 1, &header, error))
        return FALSE;
      type = header.type;
      size = header.size;
      mode = header.mode;
      uid = header.uid;
      gid = header.gid;
      mtime = header.mtime;
      if (type == 'x' || type == 'g' || type == 'L' || type == 'K')
        {
          g_autofree char *meta = read_meta (u, size, error);
          if (meta == NULL)
            return FALSE;
          if (type == 'x' && !sandstep_image_tar_parse_pax (meta, size, &pax_path, &pax_link, &pax_size,
                                                            &has_pax_size, &pax_uid, &pax_gid, error))
            return FALSE;
          else if (type == 'L')
            g_free (long_name), long_name = g_steal_pointer (&meta);
          else if (type == 'K')
            g_free (long_link), long_link = g_steal_pointer (&meta);
          continue;             /* 'g': global pax headers set nothing we use */
        }

      if (pax_path != NULL)
        name = g_steal_pointer (&pax_path);
      else if (long_name != NULL)
        name = g_steal_pointer (&long_name);
      else
        name = g_steal_pointer (&header.name);
      if (pax_link != NULL)
        link = g_steal_pointer (&pax_link);
      else if (long_link != NULL)
        link = g_steal_pointer (&long_link);
      else
        link = g_steal_pointer (&header.link);
      if (has_pax_size)
        size = pax_size;
      if (pax_uid != G_MAXUINT64)
        uid = pax_uid;
      if (pax_gid != G_MAXUINT64)
        gid = pax_gid;
      has_pax_size = FALSE;
      pax_uid = pax_gid = G_MAXUINT64;
      g_clear_pointer (&long_name, g_free);
      g_clear_pointer (&long_link, g_free);

      if (!unpack_entry (u, type, name, link, size, mode, uid, gid, mtime, error))
        return FALSE;
      u->entries++;
      if (u->kill_after > 0 && u->entries >= u->kill_after)
        raise (SIGKILL);
    }
  return TRUE;
}

gboolean
sandstep_image_unpack_tar (GInputStream *input, int dir_fd, guint64 *budget, guint64 *out_size, GError **error)
{
  Unpack u = { input, dir_fd, geteuid () == 0, budget, 0, 0, 0, NULL, -1, FALSE };
  gboolean ok = unpack_entries (&u, error);

  forget_parent (&u);
  if (ok && out_size != NULL)
    *out_size = u.size;
  return ok;
}

gboolean
sandstep_image_layer_type_is_known (const char *media_type)
{
  static const char *const known[] = {
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.oci.image.layer.nondistributable.v1.tar",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.diff.tar",
  };
  static const char *const zstd[] = {
    "application/vnd.oci.image.layer.v1.tar+zstd",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
  };
  g_autoptr(GConverter) probe = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS (known); i++)
    if (g_strcmp0 (media_type, known[i]) == 0)
      return TRUE;
  for (gsize i = 0; i < G_N_ELEMENTS (zstd); i++)
    if (g_strcmp0 (media_type, zstd[i]) == 0)
      return sandstep_image_zstd_decompressor_new != NULL && (probe = sandstep_image_zstd_decompressor_new ()) != NULL;
  return FALSE;
}

gboolean
sandstep_image_unpack_layer (int blob_fd, const char *media_type, int dir_fd, guint64 *budget, guint64 *out_size,
                             GError **error)
{
  g_autoptr(GInputStream) raw = g_unix_input_stream_new (blob_fd, FALSE);
  g_autoptr(GInputStream) input = NULL;
  g_autoptr(GError) local = NULL;

  if (!sandstep_image_layer_type_is_known (media_type))
    return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_UNSUPPORTED,
                           "layer media type '%s' is not one sandstep reads (tar, tar+gzip, tar+zstd where built "
                           "with libzstd); rebuild the image with gzip layers", media_type);
  if (g_str_has_suffix (media_type, "gzip"))
    {
      g_autoptr(GZlibDecompressor) gz = g_zlib_decompressor_new (G_ZLIB_COMPRESSOR_FORMAT_GZIP);
      input = g_converter_input_stream_new (raw, G_CONVERTER (gz));
    }
  else if (g_str_has_suffix (media_type, "zstd"))
    {
      g_autoptr(GConverter) zstd = sandstep_image_zstd_decompressor_new ();
      input = g_converter_input_stream_new (raw, zstd);
    }
  else
    input = g_object_ref (raw);
  if (!sandstep_image_unpack_tar (input, dir_fd, budget, out_size, &local))
    {
      if (local->domain == G_IO_ERROR)
        return sandstep_throw (error, SANDSTEP_IMAGE_ERROR, SANDSTEP_IMAGE_ERROR_HOSTILE,
                               "the layer cannot be read as %s: %s; the image is refused", media_type, local->message);
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  return TRUE;
}
