/* sandstep-jail-init.h: what the jail's init and the helper share.
 *
 * The jail's child execs `sandstep-init REPORT-FD PROGRAM ARGS...` as the
 * last step of its setup.  init forks PROGRAM, reaps every process of the
 * jail and exits with PROGRAM's status; when it exits, the kernel kills
 * whatever is left in the pid namespace.  A failure to exec PROGRAM is
 * written to REPORT-FD as one SandstepJailFailure.
 */
#pragma once

typedef struct {
  int step;    /* the setup step that failed; SANDSTEP_JAIL_STEP_EXEC for the command's exec */
  int errsv;
} SandstepJailFailure;

#define SANDSTEP_JAIL_STEP_EXEC (-1)
#define SANDSTEP_JAIL_STEP_INIT (-2)
