/* sandstep-run-report.c: what `sandstep run` says after a command. */
#include "sandstep-run-report.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>

#define EXIT_TIMEOUT 124

static void
format_bytes (uint64_t n, char *out, size_t size)
{
  if (n % (1ULL << 30) == 0)
    snprintf (out, size, "%lluG", (unsigned long long) (n >> 30));
  else if (n % (1ULL << 20) == 0)
    snprintf (out, size, "%lluM", (unsigned long long) (n >> 20));
  else
    snprintf (out, size, "%llu", (unsigned long long) n);
}

int
sandstep_run_report_format (const SandstepRunOutcome *outcome, const char *timeout_text, char *buf, size_t size)
{
  char memory[32], disk[32], budget[64];
  size_t len = 0;

#define SAY(...)                                                                  \
  do                                                                              \
    {                                                                             \
      int n_ = snprintf (buf + len, len < size ? size - len : 0, __VA_ARGS__);    \
      if (n_ > 0)                                                                 \
        len += (size_t) n_;                                                       \
    }                                                                             \
  while (0)

  if (size > 0)
    buf[0] = '\0';
  format_bytes (outcome->memory, memory, sizeof memory);
  format_bytes (outcome->disk, disk, sizeof disk);
  /* One line per limit the command ran into, so a killed command says why. */
  if (outcome->memory_hit)
    SAY ("sandstep run: the command hit the sandbox's memory limit (memory=%s) and the kernel killed the process "
         "using the most; provision with a larger memory= if it needs more\n", memory);
  if (outcome->pids_hit)
    SAY ("sandstep run: the command hit the sandbox's process limit (pids=%lld): further forks failed; provision "
         "with a larger pids= if it needs more\n", (long long) outcome->pids);
  if (!outcome->timed_out && outcome->exit_status == 128 + SIGXCPU)
    SAY ("sandstep run: a process of the command used up its CPU time (cpu-time=%llds) and was killed\n",
         (long long) outcome->cpu_time_s);
  if (!outcome->timed_out && outcome->exit_status == 128 + SIGXFSZ)
    SAY ("sandstep run: the command tried to write a file larger than the sandbox's disk limit (disk=%s) and was "
         "killed\n", disk);
  if (!outcome->timed_out)
    return outcome->exit_status;

  snprintf (budget, sizeof budget, "%g", round (outcome->applied_timeout_s * 10) / 10);
  if (!outcome->clamped)
    SAY ("sandstep run: the command ran out of its %ss budget (--timeout=%s) and was killed, with everything it "
         "started\n", budget, timeout_text != NULL ? timeout_text : "");
  else if (timeout_text != NULL)
    SAY ("sandstep run: the command ran out of its %ss budget (the sandbox's remaining lifetime, shorter than "
         "--timeout=%s) and was killed, with everything it started\n", budget, timeout_text);
  else
    SAY ("sandstep run: the command ran out of its %ss budget (the sandbox's remaining lifetime) and was killed, "
         "with everything it started\n", budget);
#undef SAY
  return EXIT_TIMEOUT;
}
