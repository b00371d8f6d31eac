/* sandstep-step.c: a make recipe's hold on its sandbox; see sandstep-step.h. */
#include "sandstep-step.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

uint64_t
sandstep_step_process_start (pid_t pid)
{
  char path[64], buf[1024];
  const char *p;
  int fd;
  ssize_t n;

  if (pid <= 0)
    return 0;
  snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
  if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
    return 0;
  n = read (fd, buf, sizeof buf - 1);
  close (fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  /* After "pid (comm)": the state is field 3, the start time field 22. */
  if ((p = strrchr (buf, ')')) == NULL)
    return 0;
  for (int field = 2; field < 22 && p != NULL; field++)
    p = strchr (p + 1, ' ');
  return p != NULL ? strtoull (p + 1, NULL, 10) : 0;
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
  out->start = sandstep_step_process_start (out->pid);
  out->ends = ends == NULL || has_word (ends, text);
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
    snprintf (out, size, "%d %" PRIu64 " %d", (int) step->pid, step->start, step->ends ? 1 : 0);
}

int
sandstep_step_scan (const char *text, SandstepStep *out)
{
  int pid, ends;
  uint64_t start;

  memset (out, 0, sizeof *out);
  if (text[0] == '\0')
    return 1;
  if (sscanf (text, "%d %" SCNu64 " %d", &pid, &start, &ends) != 3 || pid <= 1 || start == 0)
    return 0;
  out->pid = pid;
  out->start = start;
  out->ends = ends != 0;
  return 1;
}

int
sandstep_step_held (int dir_fd, char *holder, size_t size, pid_t *out_pid)
{
  char buf[64 + SANDSTEP_STEP_HOLDER_MAX];
  const char *newline;
  uint64_t start;
  int pid;

  if (read_small (dir_fd, SANDSTEP_STEP_FILE, buf, sizeof buf) <= 0 ||
      (newline = strchr (buf, '\n')) == NULL || sscanf (buf, "%d %" SCNu64, &pid, &start) != 2 || pid <= 1 ||
      start == 0 || sandstep_step_process_start (pid) != start)
    return 0;
  snprintf (holder, size, "%s", newline + 1);
  if (out_pid != NULL)
    *out_pid = pid;
  return 1;
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
      /* Only our own: another holder's hold is not ours to end. */
      if (sandstep_step_held (dir_fd, current, sizeof current, NULL) && strcmp (current, holder) != 0)
        return 1;
      return unlinkat (dir_fd, SANDSTEP_STEP_FILE, 0) == 0 || errno == ENOENT;
    }
  if (strlen (holder) >= SANDSTEP_STEP_HOLDER_MAX)
    return 1;
  snprintf (tmp, sizeof tmp, ".%s.%d", SANDSTEP_STEP_FILE, (int) getpid ());
  snprintf (head, sizeof head, "%d %" PRIu64 "\n", (int) step->pid, step->start);
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
