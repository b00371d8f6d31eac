/* sandstep-step.c: a make recipe's hold on its sandbox; see sandstep-step.h. */
#include "sandstep-step.h"
#include "sandstep-read-libc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A whole small file, NUL-terminated; -1 when it cannot be read. */
static ssize_t
read_small (int dir_fd, const char *name, char *buf, size_t size)
{
  int fd = openat (dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  size_t len = 0;
  ssize_t n;

  if (fd < 0)
    return -1;
  while (len < size - 1 && ((n = read (fd, buf + len, size - 1 - len)) > 0 || (n < 0 && errno == EINTR)))
    if (n > 0)
      len += n;
  close (fd);
  buf[len] = '\0';
  return len;
}


static pid_t
parent_of (pid_t pid)
{
  char path[64], buf[1024];
  const char *p;
  int fd;
  ssize_t n;

  snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
  if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
    return 0;
  n = read (fd, buf, sizeof buf - 1);
  close (fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  /* "pid (comm) S PPID ..." */
  if ((p = strrchr (buf, ')')) == NULL || (p = strchr (p + 2, ' ')) == NULL)
    return 0;
  return (pid_t) strtol (p + 1, NULL, 10);
}

static int
is_ancestor (pid_t pid)
{
  pid_t p = getppid ();

  for (int depth = 0; p > 1 && depth < 64; depth++, p = parent_of (p))
    if (p == pid)
      return 1;
  return 0;
}

/* Is @token a word of the space-separated @list? */
static int
has_word (const char *list, const char *token)
{
  size_t n = strlen (token);

  for (const char *p = list; (p = strstr (p, token)) != NULL; p += n)
    if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
      return 1;
  return 0;
}

/* The LINE of the first "PID:LINE" word of @list with @pid; 0: none. */
static unsigned int
first_line_of (const char *list, pid_t pid)
{
  char prefix[32];
  size_t n = (size_t) snprintf (prefix, sizeof prefix, "%d:", (int) pid);

  for (const char *p = list; *p != '\0'; p += strcspn (p, " "), p += strspn (p, " "))
    if (strncmp (p, prefix, n) == 0)
      {
        char *end = NULL;
        unsigned long line = strtoul (p + n, &end, 10);
        if (end != p + n && (*end == ' ' || *end == '\0') && line > 0 && line <= 0xffffffffUL)
          return (unsigned int) line;
      }
  return 0;
}

/* Does @child's environment hold @needle ("SANDSTEP_STEP_ENDS=") with the word @token in
 * its value?  -1 when it cannot be read. */
static int
environ_has (pid_t child, const char *needle, const char *token)
{
  char path[64];
  size_t size = 64 * 1024, len = 0;
  char *buf;
  ssize_t n;
  int fd, found = 0;

  snprintf (path, sizeof path, "/proc/%d/environ", (int) child);
  if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
    return errno == ENOENT || errno == ESRCH ? 0 : -1;
  if ((buf = malloc (size)) == NULL)
    {
      close (fd);
      return -1;
    }
  /* An environment is at most a few MiB (ARG_MAX): grow up to 8 MiB. */
  for (;;)
    {
      if (len == size - 1)
        {
          char *bigger = size < 8 * 1024 * 1024 ? realloc (buf, size * 2) : NULL;
          if (bigger == NULL)
            break;
          buf = bigger;
          size *= 2;
        }
      n = read (fd, buf + len, size - 1 - len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          free (buf);
          close (fd);
          return errno == ESRCH ? 0 : -1;
        }
      if (n == 0)
        break;
      len += n;
    }
  close (fd);
  buf[len] = '\0';
  for (size_t at = 0; at < len && !found; at += strlen (buf + at) + 1)
    if (strncmp (buf + at, needle, strlen (needle)) == 0)
      found = has_word (buf + at + strlen (needle), token);
  free (buf);
  return found;
}

/* 1: a child of @pid carries @token in its SANDSTEP_STEP_ENDS (or cannot be read); 0: none does. */
static int
scan_children (pid_t pid, const char *token)
{
  DIR *proc = opendir ("/proc");
  struct dirent *entry;
  int running = 0;

  if (proc == NULL)
    return 1;
  while (!running && (entry = readdir (proc)) != NULL)
    {
      char *end = NULL;
      long child = strtol (entry->d_name, &end, 10);

      if (end == entry->d_name || *end != '\0' || child <= 1 || parent_of ((pid_t) child) != pid)
        continue;
      running = environ_has ((pid_t) child, SANDSTEP_STEP_ENDS_ENV "=", token) != 0;
    }
  closedir (proc);
  return running;
}

int
sandstep_step_recipe_running (pid_t pid, unsigned int recipe)
{
  /* ms to wait before each look: a recipe between two lines has no child for a moment. */
  static const int pauses_ms[] = { 0, 20, 50, 100, 150 };
  char token[48];

  snprintf (token, sizeof token, "%d:%u", (int) pid, recipe);
  for (size_t i = 0; i < sizeof pauses_ms / sizeof pauses_ms[0]; i++)
    {
      struct timespec pause = { 0, pauses_ms[i] * 1000000L };
      if (pauses_ms[i] > 0)
        while (nanosleep (&pause, &pause) < 0 && errno == EINTR)
          ;
      if (scan_children (pid, token))
        return 1;
    }
  return 0;
}

int
sandstep_step_parse (const char *text, SandstepStep *out)
{
  const char *colon = strchr (text, ':');
  const char *ends = getenv (SANDSTEP_STEP_ENDS_ENV);
  char *end = NULL;
  long pid, line;

  memset (out, 0, sizeof *out);
  if (colon == NULL || colon == text)
    return 0;
  errno = 0;
  pid = strtol (text, &end, 10);
  if (errno != 0 || end != colon || pid <= 1 || pid > 0x7fffffff)
    return 0;
  line = strtol (colon + 1, &end, 10);
  if (errno != 0 || end == colon + 1 || *end != '\0' || line < 1)
    return 0;
  /* Copied from `make -n` into a shell, or from a make that is gone: no hold. */
  if (!is_ancestor ((pid_t) pid))
    return 1;
  out->pid = (pid_t) pid;
  out->start = sandstep_process_start_time (out->pid);
  out->ends = ends == NULL || has_word (ends, text);
  out->recipe = ends != NULL ? first_line_of (ends, out->pid) : 0;
  if (out->start == 0)
    out->pid = 0;
  return 1;
}

void
sandstep_step_format (const SandstepStep *step, char *out, size_t size)
{
  if (step->pid <= 0)
    snprintf (out, size, "%s", "");
  else
    snprintf (out, size, "%d %" PRIu64 " %d %u", (int) step->pid, step->start, step->ends ? 1 : 0, step->recipe);
}

int
sandstep_step_scan (const char *text, SandstepStep *out)
{
  int pid, ends;
  uint64_t start;
  unsigned int recipe = 0;

  memset (out, 0, sizeof *out);
  if (text[0] == '\0')
    return 1;
  if (sscanf (text, "%d %" SCNu64 " %d %u", &pid, &start, &ends, &recipe) < 3 || pid <= 1 || start == 0)
    return 0;
  out->pid = pid;
  out->start = start;
  out->ends = ends != 0;
  out->recipe = recipe;
  return 1;
}

int
sandstep_step_held (int dir_fd, char *holder, size_t size, pid_t *out_pid)
{
  char buf[64 + SANDSTEP_STEP_HOLDER_MAX];
  const char *newline;
  uint64_t start;
  unsigned int recipe = 0;
  int pid;

  /* RECIPE 0 (a hold left before it was recorded): the hold lasts while its make lives. */
  if (read_small (dir_fd, SANDSTEP_STEP_FILE, buf, sizeof buf) <= 0 ||
      (newline = strchr (buf, '\n')) == NULL || sscanf (buf, "%d %" SCNu64 " %u", &pid, &start, &recipe) < 2 ||
      pid <= 1 || start == 0 || sandstep_process_start_time (pid) != start ||
      (recipe != 0 && !sandstep_step_recipe_running (pid, recipe)))
    return 0;
  snprintf (holder, size, "%s", newline + 1);
  if (out_pid != NULL)
    *out_pid = pid;
  return 1;
}

int
sandstep_step_bars (int dir_fd, const char *holder, const SandstepStep *step, char *out_holder, size_t size,
                    pid_t *out_pid)
{
  pid_t make_pid = 0;

  if (!sandstep_step_held (dir_fd, out_holder, size, &make_pid))
    return 0;
  if (out_pid != NULL)
    *out_pid = make_pid;
  /* The same target in another make of the same run is another recipe (issue 30, 26). */
  return strcmp (out_holder, holder) != 0 || step == NULL || step->pid != make_pid;
}

int
sandstep_step_update (int dir_fd, const char *holder, const SandstepStep *step)
{
  char current[SANDSTEP_STEP_HOLDER_MAX];
  char tmp[64];
  char head[64];
  int fd, ok;

  if (step->pid <= 0)
    return 1;
  if (step->ends)
    {
      /* Only our own: another recipe's hold is not ours to end. */
      if (sandstep_step_bars (dir_fd, holder, step, current, sizeof current, NULL))
        return 1;
      return unlinkat (dir_fd, SANDSTEP_STEP_FILE, 0) == 0 || errno == ENOENT;
    }
  if (strlen (holder) >= SANDSTEP_STEP_HOLDER_MAX)
    return 1;
  snprintf (tmp, sizeof tmp, ".%s.%d", SANDSTEP_STEP_FILE, (int) getpid ());
  snprintf (head, sizeof head, "%d %" PRIu64 " %u\n", (int) step->pid, step->start, step->recipe);
  fd = openat (dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return 0;
  ok = write (fd, head, strlen (head)) == (ssize_t) strlen (head) &&
       write (fd, holder, strlen (holder)) == (ssize_t) strlen (holder);
  ok = close (fd) == 0 && ok;
  if (ok && renameat (dir_fd, tmp, dir_fd, SANDSTEP_STEP_FILE) == 0)
    return 1;
  {
    int errsv = errno;
    unlinkat (dir_fd, tmp, 0);
    errno = errsv;
  }
  return 0;
}
