/* sandstep-run-report.c: what `sandstep run` says after a command. */
#include "sandstep-run-report.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>

#define EXIT_TIMEOUT 124

/* The standard signals' names: a shell reports a command a signal N ended
 * as 128+N, and the name says more to a person or a model than the number. */
static const char *const signal_names[] = {
  [SIGHUP] = "SIGHUP",   [SIGINT] = "SIGINT",       [SIGQUIT] = "SIGQUIT", [SIGILL] = "SIGILL",
  [SIGTRAP] = "SIGTRAP", [SIGABRT] = "SIGABRT",     [SIGBUS] = "SIGBUS",   [SIGFPE] = "SIGFPE",
  [SIGKILL] = "SIGKILL", [SIGUSR1] = "SIGUSR1",     [SIGSEGV] = "SIGSEGV", [SIGUSR2] = "SIGUSR2",
  [SIGPIPE] = "SIGPIPE", [SIGALRM] = "SIGALRM",     [SIGTERM] = "SIGTERM", [SIGSTKFLT] = "SIGSTKFLT",
  [SIGCHLD] = "SIGCHLD", [SIGCONT] = "SIGCONT",     [SIGSTOP] = "SIGSTOP", [SIGTSTP] = "SIGTSTP",
  [SIGTTIN] = "SIGTTIN", [SIGTTOU] = "SIGTTOU",     [SIGURG] = "SIGURG",   [SIGXCPU] = "SIGXCPU",
  [SIGXFSZ] = "SIGXFSZ", [SIGVTALRM] = "SIGVTALRM", [SIGPROF] = "SIGPROF", [SIGWINCH] = "SIGWINCH",
  [SIGIO] = "SIGIO",     [SIGPWR] = "SIGPWR",       [SIGSYS] = "SIGSYS",
};

const char *
sandstep_run_report_signal (int exit_status)
{
  int signum = exit_status - 128;

  if (signum <= 0 || (size_t) signum >= sizeof signal_names / sizeof signal_names[0])
    return NULL;
  return signal_names[signum];
}

/* What ended the command, when something other than the command itself did. */
typedef enum {
  ENDED_BY_ITSELF,
  ENDED_BY_MEMORY,
  ENDED_BY_CPU_TIME,
  ENDED_BY_FILE_SIZE,
  ENDED_BY_SIGNAL,
} EndedBy;

static EndedBy
ended_by (const SandstepRunOutcome *outcome)
{
  if (outcome->timed_out)
    return ENDED_BY_ITSELF;
  if (outcome->memory_hit)
    return ENDED_BY_MEMORY;
  if (outcome->exit_status == 128 + SIGXCPU)
    return ENDED_BY_CPU_TIME;
  if (outcome->exit_status == 128 + SIGXFSZ)
    return ENDED_BY_FILE_SIZE;
  if (sandstep_run_report_signal (outcome->exit_status) != NULL)
    return ENDED_BY_SIGNAL;
  return ENDED_BY_ITSELF;
}

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
  if (ended_by (outcome) == ENDED_BY_CPU_TIME)
    SAY ("sandstep run: a process of the command used up its CPU time (cpu-time=%llds) and was killed\n",
         (long long) outcome->cpu_time_s);
  if (ended_by (outcome) == ENDED_BY_FILE_SIZE)
    SAY ("sandstep run: the command tried to write a file larger than the sandbox's disk limit (disk=%s) and was "
         "killed\n", disk);
  if (ended_by (outcome) == ENDED_BY_SIGNAL)
    SAY ("sandstep run: the command was killed by %s (exit status %d)\n",
         sandstep_run_report_signal (outcome->exit_status), outcome->exit_status);
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

void
sandstep_run_report_model_line (const SandstepRunOutcome *outcome, char *buf, size_t size)
{
  char value[32];

  if (size == 0)
    return;
  buf[0] = '\0';
  switch (ended_by (outcome))
    {
    case ENDED_BY_MEMORY:
      format_bytes (outcome->memory, value, sizeof value);
      snprintf (buf, size, "[killed: the sandbox's memory limit (%s) was reached; use less memory]", value);
      return;
    case ENDED_BY_CPU_TIME:
      snprintf (buf, size, "[killed: the sandbox's CPU time limit (%llds per process) was reached; do less work "
                "in one process]", (long long) outcome->cpu_time_s);
      return;
    case ENDED_BY_FILE_SIZE:
      format_bytes (outcome->disk, value, sizeof value);
      snprintf (buf, size, "[killed: the sandbox's file size limit (%s) was reached; write smaller files]", value);
      return;
    case ENDED_BY_SIGNAL:
      snprintf (buf, size, "[killed by %s]", sandstep_run_report_signal (outcome->exit_status));
      return;
    case ENDED_BY_ITSELF:
      break;
    }
  /* Forks failing is no kill: the command went on and ended as it could. */
  if (outcome->pids_hit)
    snprintf (buf, size, "[limit: the sandbox's process limit (%lld) was reached, so forks failed; run fewer "
              "processes at once]", (long long) outcome->pids);
}
