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
