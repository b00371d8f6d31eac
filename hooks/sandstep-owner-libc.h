/* sandstep-owner-libc.h: the owner a step outside make derives from its run.
 *
 * make's plugin names the owner DAG/RUN and exports SANDSTEP_RUN (and
 * SANDSTEP_TOP, whose name is the DAG's unless SANDSTEP_DAG says).  A step
 * started some other way, on another machine (srun, ssh, a script), carries
 * the same variables, and must present the same owner: never one made from
 * the host's name.  So without --owner and SANDSTEP_OWNER, an operator whose
 * environment has SANDSTEP_RUN owns DAG/RUN by make's rules
 * (plugin/sandstep-identity.c): DAG is SANDSTEP_DAG, else the last
 * component of SANDSTEP_TOP ("root" for "/").
 *
 * Plain C: the static front derives it the same way.
 */
#pragma once

#include <stddef.h>

/* Bytes, for an owner and for a holder (sandstep-who.h has the rule).  A holder is OWNER/TARGET: room for a
 * long make target path, and still within the claim's and the step file's buffers with every byte escaped. */
#define SANDSTEP_IDENTITY_MAX 1024

typedef enum {
  SANDSTEP_RUN_OWNER_NONE,      /* no SANDSTEP_RUN: the caller's own default applies */
  SANDSTEP_RUN_OWNER_OK,        /* DAG/RUN in the buffer */
  SANDSTEP_RUN_OWNER_NO_DAG,    /* SANDSTEP_RUN without SANDSTEP_DAG or SANDSTEP_TOP */
  SANDSTEP_RUN_OWNER_BAD_RUN,   /* SANDSTEP_RUN is not a run id (plugin: 1-128 of [A-Za-z0-9._:@+-]) */
  SANDSTEP_RUN_OWNER_BAD_DAG,   /* the DAG's name holds '/' or a control character */
  SANDSTEP_RUN_OWNER_TOO_LONG,  /* SANDSTEP_OWNER does not fit in the buffer */
} SandstepRunOwner;

/* The owner of @run (SANDSTEP_RUN), @dag (SANDSTEP_DAG) and @top
 * (SANDSTEP_TOP), any NULL, into @out (@size bytes). */
SandstepRunOwner sandstep_run_owner (const char *run, const char *dag, const char *top, char *out, size_t size);

/* The one identity rule of every front-end (the helper, the make plugin,
 * SPANK, the static front): @owner (SANDSTEP_OWNER) when non-empty, copied
 * into @out; else sandstep_run_owner().  The caller's own default applies
 * on SANDSTEP_RUN_OWNER_NONE (the helper's USER@HOST, SPANK's slurm/JOBID). */
SandstepRunOwner sandstep_step_owner (const char *owner, const char *run, const char *dag, const char *top, char *out,
                                      size_t size);
