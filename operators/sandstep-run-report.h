/* sandstep-run-report.h: what `sandstep run` says after a command.
 *
 * Plain C: the static front prints it for the commands it hands to a
 * supervisor, the helper for the others, word for word the same.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef struct {
  int exit_status;            /* 128+N for signal N */
  int timed_out;
  int clamped;                /* the budget was the sandbox's remaining lifetime */
  int memory_hit;
  int pids_hit;
  double applied_timeout_s;
  /* The sandbox's limits, for the lines that name them. */
  uint64_t memory;
  int64_t pids;
  int64_t cpu_time_s;
  uint64_t disk;
} SandstepRunOutcome;

/* The lines for a command that ended as @outcome says (a limit hit, the
 * budget that ran out) into @buf; returns the exit status for the caller.
 * @timeout_text: the --timeout given, or NULL. */
int sandstep_run_report_format (const SandstepRunOutcome *outcome, const char *timeout_text, char *buf, size_t size);

/* The name of the signal that ended a command with @exit_status (128+N, as a
 * shell reports it: "SIGSEGV" for 139), or NULL when it names none. */
const char *sandstep_run_report_signal (int exit_status);

/* The one line a model reads after a command's exit code when something
 * other than the command ended it, into @buf ("" when nothing did; a
 * timeout is said by the result itself): "[killed by SIGSEGV]",
 * "[killed: the sandbox's memory limit (100M) was reached; use less memory]",
 * the CPU-time and file-size limits alike, and "[limit: the sandbox's process
 * limit (N) was reached, ...]" when forks failed.  The same judgement as
 * sandstep_run_report_format()'s lines. */
void sandstep_run_report_model_line (const SandstepRunOutcome *outcome, char *buf, size_t size);
