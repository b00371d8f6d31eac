/* sandstep-step.h: a make recipe that holds its sandbox from its first
 * sandbox line to its last.
 *
 * make expands a target's whole recipe before running its first line, so
 * the plugin numbers each sandbox line (--step=PID:LINE, PID being the make
 * that runs the recipe) and tells the recipe which lines are the last for
 * their sandbox (SANDSTEP_STEP_ENDS, "PID:LINE ..."), see plugin/README.md.
 * A line that is not the last leaves a hold behind it, in
 *
 *   STATE/sandboxes/<handle>/step     "PID START-TIME RECIPE\nHOLDER"
 *
 * which bars every other line (another holder's, or the same holder's in
 * another make) until the recipe's last sandbox line ends it, or the recipe
 * stops: a hold lives while a child of that make carries the recipe's
 * SANDSTEP_STEP_ENDS (RECIPE names it), so a recipe that failed half-way
 * gives its sandbox up at once (make -k never waits on it), and its retry
 * (the same holder) goes straight in.  The hold is read and written only
 * under the sandbox's claim, so the judgement is as atomic as the claim.
 *
 * Plain C: the static front, the static supervisor and the helper share it.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SANDSTEP_STEP_FILE "step"
/* An empty member of a sandbox provisioned with --retry=clean: its recipe lines go to the helper, which keeps
 * each target's checkpoint, and the front sends them there first rather than by way of the supervisor. */
#define SANDSTEP_STEP_RETRY_CLEAN_FILE "retry-clean"
#define SANDSTEP_STEP_ENDS_ENV "SANDSTEP_STEP_ENDS"
/* Where a holder's name ends: longer ones are not held across lines. */
#define SANDSTEP_STEP_HOLDER_MAX 4096

typedef struct {
  pid_t pid;            /* the make that runs the recipe; 0: none (the claim lasts one command) */
  uint64_t start;       /* its start time, so that a recycled pid is never taken for it */
  int ends;             /* this line is the recipe's last for its sandbox */
  unsigned int recipe;  /* the recipe: the LINE of the first PID:LINE of its SANDSTEP_STEP_ENDS; 0: unknown */
} SandstepStep;


/* Reads --step's value ("PID:LINE") for this process: the step counts only
 * when PID is an ancestor of the caller (the make whose recipe runs it); a
 * line ends the hold when SANDSTEP_STEP_ENDS names it, or is unset (a line
 * run by hand never leaves a hold).  Returns 0 when @text is malformed; a
 * valid step of no ancestor leaves @out->pid 0. */
int sandstep_step_parse (const char *text, SandstepStep *out);

/* "PID START ENDS RECIPE", the form the supervisor's wire carries; and back. */
void sandstep_step_format (const SandstepStep *step, char *out, size_t size);
int sandstep_step_scan (const char *text, SandstepStep *out);

/* The holder of a live hold on the sandbox whose directory is @dir_fd, in
 * @holder (NUL-terminated, at most @size - 1 bytes) and its make's pid;
 * 0 when none is held, its make is gone, or its recipe has stopped. */
int sandstep_step_held (int dir_fd, char *holder, size_t size, pid_t *out_pid);

/* Does a live hold bar a line of @holder whose step is @step (pid 0: not a
 * recipe's line)?  Only the lines of the recipe that left it go in: the same
 * holder in the same make.  The hold's holder and make pid go to @out_holder
 * and @out_pid when it bars. */
int sandstep_step_bars (int dir_fd, const char *holder, const SandstepStep *step, char *out_holder, size_t size,
                        pid_t *out_pid);

/* Is the recipe @recipe of the make @pid still running: does a child of
 * that make carry "PID:RECIPE" in its SANDSTEP_STEP_ENDS?  make runs a
 * recipe's lines one child at a time, so a miss is looked again a few times
 * within a fraction of a second (between two lines, or before the shell's
 * exec); a child whose environment cannot be read counts as running. */
int sandstep_step_recipe_running (pid_t pid, unsigned int recipe);

/* Leaves a hold for @holder (when @step is a recipe's line that does not end
 * it), or ends one @holder left (when it ends it).  Returns 0 on a failed
 * write, with errno set. */
int sandstep_step_update (int dir_fd, const char *holder, const SandstepStep *step);
