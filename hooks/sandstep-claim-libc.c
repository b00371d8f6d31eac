/* sandstep-claim-libc.c: who holds a sandbox's claim; see the header. */
#include "sandstep-claim-libc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "sandstep-json-libc.h"

/* The number at @p when it is a whole one in [@min, @max]. */
static int
whole_number (const char *p, double min, double max, double *out)
{
  double value;

  if (p == NULL || !(*p == '-' || (*p >= '0' && *p <= '9')))
    return 0;
  value = sandstep_json_libc_number (p, -1);
  if (value < min || value > max || value != (double) (int64_t) value)
    return 0;
  *out = value;
  return 1;
}

int
sandstep_claim_parse (const char *text, size_t len, SandstepClaimText *out)
{
  double pid, start;

  memset (out, 0, sizeof *out);
  if (len == 0 || strlen (text) != len ||
      !sandstep_json_libc_string (sandstep_json_libc_member (text, "holder"), out->holder, sizeof out->holder) ||
      !whole_number (sandstep_json_libc_member (text, "pid"), 1, INT32_MAX, &pid) ||
      !whole_number (sandstep_json_libc_member (text, "start"), 0, 9007199254740992.0, &start))
    {
      memset (out, 0, sizeof *out);
      return 0;
    }
  out->pid = (pid_t) pid;
  out->start = (uint64_t) start;
  return 1;
}

pid_t
sandstep_claim_lock_holder (int fd)
{
  struct stat st;
  char key[64];
  char *line = NULL;
  size_t size = 0;
  pid_t holder = 0;
  FILE *locks;

  if (fstat (fd, &st) < 0 || (locks = fopen ("/proc/locks", "re")) == NULL)
    return 0;
  snprintf (key, sizeof key, " %02x:%02x:%lu ", major (st.st_dev), minor (st.st_dev), (unsigned long) st.st_ino);
  /* "N: FLOCK  ADVISORY  WRITE PID MAJ:MIN:INODE 0 EOF"; a waiter's line has "->" and holds nothing. */
  while (holder == 0 && getline (&line, &size, locks) > 0)
    if (strstr (line, "FLOCK") != NULL && strstr (line, key) != NULL && strstr (line, "->") == NULL)
      {
        int seen = 0;
        char *rest = NULL;
        /* strtok_r: the helper reads claims on sandstepd's worker threads too. */
        for (char *field = strtok_r (line, " \t\n", &rest); field != NULL; field = strtok_r (NULL, " \t\n", &rest))
          if (++seen == 5)
            {
              holder = (pid_t) strtol (field, NULL, 10);
              break;
            }
      }
  free (line);
  fclose (locks);
  return holder;
}

void
sandstep_claim_unnamed (pid_t pid, char *out, size_t size)
{
  if (pid > 0)
    snprintf (out, size, "(the process %d, which has not written its name)", (int) pid);
  else
    snprintf (out, size, "(a holder that has not written its name)");
}

int
sandstep_claim_read_once (int fd, SandstepClaimText *out)
{
  /* Room for a holder of SANDSTEP_IDENTITY_MAX bytes with every one escaped (\u001b is six). */
  char buf[8 * SANDSTEP_IDENTITY_MAX];
  ssize_t n = pread (fd, buf, sizeof buf - 1, 0);
  int named = 0;
  pid_t locker;

  if (n > 0)
    {
      buf[n] = '\0';
      named = sandstep_claim_parse (buf, (size_t) n, out);
    }
  locker = sandstep_claim_lock_holder (fd);
  if (named && (locker == 0 || locker == out->pid))
    return 1;
  memset (out, 0, sizeof *out);
  out->pid = locker;
  return 0;
}
