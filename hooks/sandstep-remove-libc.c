/* sandstep-remove-libc.c: rm -rf without recursion; see the header. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sandstep-remove-libc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

static int
is_dot (const char *name)
{
  return strcmp (name, ".") == 0 || strcmp (name, "..") == 0;
}

/* Removes @name in @dir_fd if it is a file, a link or an empty directory: 1 when gone, else 0. */
static int
remove_leaf (int dir_fd, const char *name)
{
  struct stat st;

  if (unlinkat (dir_fd, name, 0) == 0 || errno == ENOENT)
    return 1;
  if (fstatat (dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT;
  if (!S_ISDIR (st.st_mode))
    return 0;
  /* Only a directory is made writable, and never through a link (one swapped in since the fstatat must not hand
   * its target a new mode: AT_SYMLINK_NOFOLLOW refuses a link).  Writable also for a move (which rewrites its
   * ".."); searchable and readable to be emptied.  Only when it is not already: a change of mode is an inode
   * written per directory. */
  if ((st.st_mode & 0700) != 0700)
    fchmodat (dir_fd, name, 0700, AT_SYMLINK_NOFOLLOW);
  return unlinkat (dir_fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT;
}

/* Moves @name from @from_fd into @to_fd under a fresh name; 1 when moved. */
static int
move_up (int from_fd, const char *name, int to_fd, unsigned long *serial)
{
  char fresh[64];

  for (int tries = 0; tries < 1000; tries++)
    {
      snprintf (fresh, sizeof fresh, ".sandstep-rm-%lu", (*serial)++);
      if (syscall (SYS_renameat2, from_fd, name, to_fd, fresh, RENAME_NOREPLACE) == 0)
        return 1;
      if (errno == EINVAL)
        {
          /* A file system without RENAME_NOREPLACE: a name seen free just now (nothing else writes there). */
          struct stat st;
          if (fstatat (to_fd, fresh, &st, AT_SYMLINK_NOFOLLOW) == 0)
            continue;
          return renameat (from_fd, name, to_fd, fresh) == 0;
        }
      if (errno != EEXIST)
        return 0;
    }
  return 0;
}

/* Levels below an entry of the directory being emptied that are removed in place, one stream each. */
#define WINDOW 16

/* Empties the subdirectory @name of @top_fd and removes it: what lies within WINDOW levels of it is removed in
 * place, with an open stream per level (no walk back up through ".."); a directory below that is moved up into
 * @top_fd, for a later pass.  Returns how many entries it removed or moved. */
static unsigned long
remove_window (int top_fd, const char *name, unsigned long *serial)
{
  DIR *dirs[WINDOW];
  char names[WINDOW][NAME_MAX + 1];  /* names[k]: what dirs[k] is called in dirs[k - 1] */
  unsigned long done = 0;
  int depth = 0;
  int fd = openat (top_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

  if (fd < 0)
    return 0;
  dirs[0] = fdopendir (fd);
  if (dirs[0] == NULL)
    {
      close (fd);
      return 0;
    }
  for (;;)
    {
      struct dirent *entry = readdir (dirs[depth]);
      DIR *down;

      if (entry == NULL)
        {
          closedir (dirs[depth]);
          if (depth == 0)
            break;
          depth--;
          if (unlinkat (dirfd (dirs[depth]), names[depth + 1], AT_REMOVEDIR) == 0)
            done++;
          continue;
        }
      if (is_dot (entry->d_name))
        continue;
      errno = 0;
      if (remove_leaf (dirfd (dirs[depth]), entry->d_name))
        {
          done++;
          continue;
        }
      if (errno != ENOTEMPTY && errno != EEXIST)
        continue;
      if (depth + 1 == WINDOW)
        {
          if (move_up (dirfd (dirs[depth]), entry->d_name, top_fd, serial))
            done++;
          continue;
        }
      fd = openat (dirfd (dirs[depth]), entry->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      down = fd >= 0 ? fdopendir (fd) : NULL;
      if (down == NULL)
        {
          if (fd >= 0)
            close (fd);
          continue;
        }
      snprintf (names[depth + 1], sizeof names[depth + 1], "%s", entry->d_name);
      dirs[++depth] = down;
    }
  if (unlinkat (top_fd, name, AT_REMOVEDIR) == 0)
    done++;
  return done;
}

int
sandstep_empty_directory (int dir_fd)
{
  unsigned long serial = 0;

  for (;;)
    {
      unsigned long seen = 0, done = 0;
      struct dirent *entry;
      int fd = openat (dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      DIR *dir = fd >= 0 ? fdopendir (fd) : NULL;
      int errsv = 0;

      if (dir == NULL)
        {
          errsv = errno;
          if (fd >= 0)
            close (fd);
          errno = errsv;
          return -1;
        }
      /* Entries moved up while this pass reads may or may not be seen by it: passes go on until one finds the
       * directory empty, or can change nothing (something that cannot be removed). */
      while ((entry = readdir (dir)) != NULL)
        {
          if (is_dot (entry->d_name))
            continue;
          seen++;
          errno = 0;
          if (remove_leaf (dir_fd, entry->d_name))
            done++;
          else if (errno == ENOTEMPTY || errno == EEXIST)
            done += remove_window (dir_fd, entry->d_name, &serial);
          errsv = errno;
        }
      closedir (dir);
      if (seen == 0)
        return 0;
      if (done == 0)
        {
          errno = errsv != 0 ? errsv : ENOTEMPTY;
          return -1;
        }
    }
}

int
sandstep_remove_at (int dir_fd, const char *name)
{
  int fd;
  int ok;

  if (remove_leaf (dir_fd, name))
    return 0;
  if (errno != ENOTEMPTY && errno != EEXIST)
    return -1;
  fd = openat (dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? 0 : -1;
  ok = sandstep_empty_directory (fd) == 0;
  close (fd);
  if (!ok)
    return -1;
  return remove_leaf (dir_fd, name) ? 0 : -1;
}
