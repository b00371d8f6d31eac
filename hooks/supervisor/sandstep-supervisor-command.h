/* sandstep-supervisor-command.h: one command a supervisor serves in its live sandbox, from request to status.
 *
 * A command's fields are sandstep-supervisor-command.c's alone: the supervisor's loop waits on what it says and
 * tells it what happened (its caller left, its time is up, the supervisor stops, init reported).
 */
#pragma once

#include <glib.h>

#include "sandstep-run-wire.h"
#include "sandstep-supervisor-sandbox.h"

typedef struct _SupervisorCommand SupervisorCommand;

/* What a supervisor judges each caller by, fixed once it started; every member borrowed from the supervisor. */
typedef struct {
  const char *handle;
  const SupervisorTerms *terms;
  int dir_fd;               /* the sandbox's directory, where a make recipe's hold is kept */
  int claim_fd;
  guint64 start_time;       /* the supervisor's, for the claim: a pid is named with it */
  gboolean jail_is_peer;    /* the sandbox's uid is ours: its processes could reach us but for the namespace */
  const char *own_userns;   /* then: our user namespace, as /proc/self/ns/user names it */
} SupervisorRules;

/* Answers a caller on @conn (taken) without running anything; its request is read first, so that the answer
 * arrives. */
void sandstep_supervisor_refuse (int conn, SandstepRunKind kind);

/* Reads the request on @conn (taken) and, where it may run here, claims the sandbox for it, makes the sandbox
 * ready and hands the command to init, with a budget that ends by @expires (seconds since the epoch; the
 * sandbox's lifetime, which the caller found not over).  NULL
 * when nothing runs (the caller was answered).  *@out_running is FALSE when the command could not be handed to
 * init: then it is to be finished at once, interrupted. */
SupervisorCommand *sandstep_supervisor_command_begin (const SupervisorRules *rules, SupervisorSandbox *sandbox,
                                                      gint64 expires, int conn, gboolean *out_running);

/* The caller's socket, to be watched for its going; -1 once it went. */
int sandstep_supervisor_command_caller_fd (SupervisorCommand *command);
/* When the command's time is up, or after a kill, when init is given up on (monotonic µs). */
gint64 sandstep_supervisor_command_deadline (SupervisorCommand *command);
/* The supervisor holds the claim for the caller. */
gboolean sandstep_supervisor_command_own_claim (SupervisorCommand *command);

/* The caller went away (killed with make): so does its command. */
void sandstep_supervisor_command_caller_gone (SupervisorCommand *command, SupervisorSandbox *sandbox);
/* The supervisor was told to stop (destroy): the command goes with the sandbox. */
void sandstep_supervisor_command_stop (SupervisorCommand *command, SupervisorSandbox *sandbox);
/* At @now (monotonic µs): kills a command whose time is up, and says TRUE when init did not answer the kill in
 * time (then the sandbox is to go, and the command is finished interrupted). */
gboolean sandstep_supervisor_command_overdue (SupervisorCommand *command, SupervisorSandbox *sandbox, gint64 now);

/* A refusal of the egress proxy's, for the caller. */
void sandstep_supervisor_command_notice (SupervisorCommand *command, const char *line);

/* The command ended with @status (or could not exec: @exec_error), or went with the sandbox's init
 * (@interrupted): the claim goes, the caller hears, and @command is freed. */
void sandstep_supervisor_command_finish (SupervisorCommand *command, SupervisorSandbox *sandbox,
                                         const SupervisorRules *rules, int status, int exec_error,
                                         gboolean interrupted);
