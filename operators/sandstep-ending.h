/* sandstep-ending.h: why a command ended, in the words `sandstep run` and a model read.
 *
 * One judgement (sandstep-run-report.c) says whether a limit, a signal or
 * the budget ended a command; `sandstep run` prints it as lines on stderr,
 * run_command appends it as one line after the exit code.  The egress
 * proxy's refusals reach run_command as notices while the command runs, and
 * become a line each; a small table of hints (sandstep-hints.c) adds one
 * for mistakes models repeat.
 */
#pragma once

#include <glib.h>

#include "sandstep-backend.h"
#include "sandstep-run-report.h"

G_BEGIN_DECLS

/* @result of a command in a sandbox of @spec, with the limits that applied. */
void sandstep_run_outcome_fill (const SandstepSpec *spec, const SandstepRunResult *result,
                                SandstepRunOutcome *outcome);

/* Egress refusals seen while one command ran.  add() may be called from any
 * thread (SandstepRunRequest.on_notice is). */
typedef struct _SandstepNotices SandstepNotices;

SandstepNotices *sandstep_notices_new (void);
void sandstep_notices_free (SandstepNotices *notices);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepNotices, sandstep_notices_free)
void sandstep_notices_add (SandstepNotices *notices, const char *notice);

/* The most refusal lines one result carries; the rest are counted. */
#define SANDSTEP_NOTICES_SHOWN 5

/* The lines that follow a run_command result's exit code, each starting
 * with "\n": why it ended (sandstep_run_report_model_line()), each distinct
 * refusal ("[network: refused HOST:PORT: not in the allowlist]", at most
 * SANDSTEP_NOTICES_SHOWN, then "[network: N more refused]"), and a hint
 * when the output shows a mistake of sandstep_recovery_hint()'s table.
 * "" when there is nothing to say. */
char *sandstep_command_ending (const SandstepSpec *spec, const SandstepRunResult *result, SandstepNotices *notices,
                               const char *out, const char *err);

/* "[hint: ...]" for a mistake models repeat, seen in a command's output
 * (@out, @err: as the model reads them, may be NULL) in a sandbox whose
 * network is @network; NULL when no row of the table matches. */
char *sandstep_recovery_hint (const char *out, const char *err, int exit_status, SandstepNetwork network);

G_END_DECLS
