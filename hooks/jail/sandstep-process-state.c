/* sandstep-process-state.c: a service's own process state; see the header. */
#include "sandstep-process-state.h"

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/personality.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandstep-read-libc.h"

/* ioprio_set(2): its class and data 0, "none", is the default, which follows the nice value. */
#define IOPRIO_WHO_PROCESS 1

static void
reset_limit (int resource, const char *label, const char *limits)
{
  const char *line = strstr (limits, label);
  struct rlimit now, want;
  char soft[32] = "", hard[32] = "";

  if (line == NULL || sscanf (line + strlen (label), "%31s %31s", soft, hard) != 2 || getrlimit (resource, &now) < 0)
    return;
  want.rlim_cur = strcmp (soft, "unlimited") == 0 ? RLIM_INFINITY : strtoull (soft, NULL, 10);
  want.rlim_max = strcmp (hard, "unlimited") == 0 ? RLIM_INFINITY : strtoull (hard, NULL, 10);
  if (want.rlim_cur > want.rlim_max)
    want.rlim_cur = want.rlim_max;
  /* Raising a hard limit takes CAP_SYS_RESOURCE; without it, as close as allowed. */
  if (setrlimit (resource, &want) == 0 || want.rlim_max <= now.rlim_max)
    return;
  want.rlim_max = now.rlim_max;
  if (want.rlim_cur > want.rlim_max)
    want.rlim_cur = want.rlim_max;
  setrlimit (resource, &want);
}

void
sandstep_process_state_reset (void)
{
  static const struct { int resource; const char *label; } limits[] = {
    { RLIMIT_CPU, "Max cpu time" }, { RLIMIT_FSIZE, "Max file size" }, { RLIMIT_DATA, "Max data size" },
    { RLIMIT_STACK, "Max stack size" }, { RLIMIT_CORE, "Max core file size" }, { RLIMIT_RSS, "Max resident set" },
    { RLIMIT_NPROC, "Max processes" }, { RLIMIT_NOFILE, "Max open files" }, { RLIMIT_MEMLOCK, "Max locked memory" },
    { RLIMIT_AS, "Max address space" }, { RLIMIT_LOCKS, "Max file locks" }, { RLIMIT_SIGPENDING, "Max pending signals" },
    { RLIMIT_MSGQUEUE, "Max msgqueue size" }, { RLIMIT_NICE, "Max nice priority" },
    { RLIMIT_RTPRIO, "Max realtime priority" }, { RLIMIT_RTTIME, "Max realtime timeout" },
  };
  char text[4096];
  umask (022);
  /* A caller's supplementary groups would count in every command's permission checks (a data mount's group
   * files, say): root drops them; anybody else cannot, and has them there as here. */
  if (geteuid () == 0)
    setgroups (0, NULL);
  personality (PER_LINUX);
  /* The system call: musl's sched_setscheduler() only says ENOSYS. */
  syscall (SYS_sched_setscheduler, 0, SCHED_OTHER, &(struct sched_param) { 0 });
  syscall (SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, 0);
  setpriority (PRIO_PROCESS, 0, 0);
  if (sandstep_read_small ("/proc/1/limits", text, sizeof text) <= 0)
    return;
  for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++)
    reset_limit (limits[i].resource, limits[i].label, text);
}

void
sandstep_process_start_elsewhere (pid_t pid, const cpu_set_t *cpus)
{
  int here = sched_getcpu ();
  cpu_set_t one;

  if (here < 0 || CPU_COUNT (cpus) < 2)
    return;
  for (int step = 1; step < CPU_SETSIZE; step++)
    {
      int cpu = (here + step) % CPU_SETSIZE;
      if (CPU_ISSET (cpu, cpus))
        {
          CPU_ZERO (&one);
          CPU_SET (cpu, &one);
          sched_setaffinity (pid, sizeof one, &one);
          return;
        }
    }
}

void
sandstep_cpus_format (const cpu_set_t *cpus, char *out)
{
  int top = CPU_SETSIZE - 1, n = 0;

  while (top > 3 && !CPU_ISSET (top, cpus))
    top--;
  for (int nibble = top / 4; nibble >= 0; nibble--)
    {
      int value = 0;
      for (int bit = 0; bit < 4; bit++)
        if (CPU_ISSET (nibble * 4 + bit, cpus))
          value |= 1 << bit;
      out[n++] = "0123456789abcdef"[value];
    }
  out[n] = '\0';
}

int
sandstep_cpus_parse (const char *text, cpu_set_t *out)
{
  size_t len = strlen (text);

  CPU_ZERO (out);
  if (len == 0 || len > CPU_SETSIZE / 4)
    return 0;
  for (size_t i = 0; i < len; i++)
    {
      char c = text[len - 1 - i];
      int value = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (value < 0)
        return 0;
      for (int bit = 0; bit < 4; bit++)
        if (value & (1 << bit))
          CPU_SET ((int) i * 4 + bit, out);
    }
  return CPU_COUNT (out) > 0;
}
