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

/* A caller whose command has not begun: its request read, kept while it waits for the sandbox. */
typedef struct _SupervisorCaller SupervisorCaller;

/* Reads the request on @conn (taken).  NULL when it is no request this supervisor serves: the caller was
 * answered (FALLBACK: the ordinary path judges it). */
SupervisorCaller *sandstep_supervisor_caller_receive (const SupervisorRules *rules, int conn);
/* Answers @caller (freed) without running anything. */
void sandstep_supervisor_caller_answer (SupervisorCaller *caller, SandstepRunKind kind);
/* @caller (freed) went away while it waited: it hears nothing. */
void sandstep_supervisor_caller_gone (SupervisorCaller *caller);
/* Its socket, readable (or hung up) only when it goes: it sends nothing after its request. */
int sandstep_supervisor_caller_fd (SupervisorCaller *caller);
/* When its --wait is over (monotonic µs). */
gint64 sandstep_supervisor_caller_deadline (SupervisorCaller *caller);
/* Its holder, when it asked to run beside that holder's commands (SANDSTEP_RUN_FIELD_BESIDE); else NULL. */
const char *sandstep_supervisor_caller_beside_holder (SupervisorCaller *caller);
/* @holder (NULL: the last one named) keeps the sandbox from @caller at @now.  TRUE: it waits on, told so the
 * first time.  FALSE, and @caller answered and freed: it may not wait (it holds the claim, or asked for no
 * wait: FALLBACK, the ordinary path says who holds the sandbox), or its wait is over (BUSY). */
gboolean sandstep_supervisor_caller_wait (SupervisorCaller *caller, const SupervisorRules *rules, const char *holder,
                                          gint64 now);

/* Where @caller's command may run here, claims the sandbox for it (@beside: it runs beside the commands of its
 * holder that run, under their claim, and takes none), makes the sandbox ready and hands the
 * command to init, with a budget that ends by @expires (seconds since the epoch; the sandbox's lifetime, which
 * the caller found not over), and returns it, @caller taken.  *@out_running is FALSE when the command could not
 * be handed to init: then it is to be finished at once, interrupted.  NULL when nothing runs: either another
 * make recipe or another process (the helper) holds the sandbox, named in *@out_held_by (to free; "" while that
 * holder has not written its name), and @caller is still the caller's, or @caller was answered and freed. */
SupervisorCommand *sandstep_supervisor_command_begin (const SupervisorRules *rules, SupervisorSandbox *sandbox,
                                                      gint64 expires, SupervisorCaller *caller, gboolean beside,
                                                      gboolean *out_running, char **out_held_by);

/* The caller's socket, to be watched for its going; -1 once it went. */
int sandstep_supervisor_command_caller_fd (SupervisorCommand *command);
/* The sandbox's end moved to @expires (seconds since the epoch; a release, or E2B's setTimeout): a budget it set
 * moves with it, within the command's own --timeout. */
void sandstep_supervisor_command_lifetime (SupervisorCommand *command, gint64 expires);
/* When the command's time is up, or after a kill, when init is given up on (monotonic µs). */
gint64 sandstep_supervisor_command_deadline (SupervisorCommand *command);
/* The supervisor holds the claim for the caller. */
gboolean sandstep_supervisor_command_own_claim (SupervisorCommand *command);
/* Its caller's name, as a waiting caller hears it. */
const char *sandstep_supervisor_command_holder (SupervisorCommand *command);
/* init's name for it. */
gint32 sandstep_supervisor_command_id (SupervisorCommand *command);
/* It asked to run beside the commands of @holder, and is @holder's: another such may run beside it. */
gboolean sandstep_supervisor_command_beside (SupervisorCommand *command, const char *holder);
/* @from, ending, gives the claim it holds (the supervisor's, or its caller's fd) to @to, its holder's, which runs on
 * beside it: the claim lasts while any of them runs.  Nothing when either did not ask to run beside or @to holds
 * one already. */
void sandstep_supervisor_command_hand_claim (SupervisorCommand *from, SupervisorCommand *to);

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
                                         gboolean interrupted, gboolean others_run);
/* It holds a claim that another command of its holder handed on (whose caller may be gone): a release that came
 * meanwhile is the supervisor's to finish. */
gboolean sandstep_supervisor_command_handed_claim (SupervisorCommand *command);
