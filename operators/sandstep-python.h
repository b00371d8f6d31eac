/* sandstep-python.h: run_python's session: one Python interpreter kept alive in the sandbox.
 *
 * The interpreter is one long-running command in the sandbox (run through
 * the backend as any command is, on a thread of its own), whose stdin and
 * stdout carry a small framed protocol to a driver script we ship
 * (sandstep-python-driver.py): each call sends code, and gets its output,
 * the value of its final expression and its error back.  Variables, imports
 * and open files persist between calls.  It is the one thing of a command
 * that outlives a tool call: it lives until the session is freed (the agent
 * run or MCP session ends), the sandbox goes, it dies, or a call overruns its
 * timeout; then its whole process tree is killed.  It runs under the claim of
 * the attachment it was made for, so it belongs to that run's holder.
 *
 * The sandbox runs one command at a time (its init starts one and ends
 * everything else when it ends), and the interpreter is that command; so
 * while it lives, run_command runs through it too: the driver starts
 * /bin/sh -c in a session of its own and, as the subreaper of what it starts,
 * kills all of it after the command ends or overruns its timeout.
 *
 * After the interpreter died, the next call starts a new one and says so.
 * Time is bounded per call and for the session (the sum of the calls' times,
 * as haiku.rag's session budget).
 */
#pragma once

#include <glib.h>

#include "sandstep-backend.h"
#include "sandstep-output.h"

G_BEGIN_DECLS

typedef struct {
  double default_timeout_s;   /* a call without timeout_seconds; default 60 */
  double max_timeout_s;       /* default 300 */
  double budget_s;            /* all calls of the session together; default 900 */
} SandstepPythonLimits;

void sandstep_python_limits_init (SandstepPythonLimits *limits);

typedef struct _SandstepPythonSession SandstepPythonSession;

/* @attachment stays owned by the caller and must outlive the session.
 * Nothing starts before the first call. */
SandstepPythonSession *sandstep_python_session_new (SandstepAttachment *attachment, const SandstepPythonLimits *limits);
/* Kills the interpreter, with everything it started, and waits for it. */
void sandstep_python_session_free (SandstepPythonSession *session);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SandstepPythonSession, sandstep_python_session_free)

const SandstepPythonLimits *sandstep_python_session_limits (SandstepPythonSession *session);
/* Seconds of the session's budget left. */
double sandstep_python_session_budget_left (SandstepPythonSession *session);

/* What one call did.  The caller makes the captures (bounded and masked as
 * it likes); the session appends the code's stdout and stderr to them. */
typedef struct {
  SandstepCapture *out;
  SandstepCapture *err;
  /* sandstep_python_session_run_command(): when set, the command's output goes here as it comes, unbounded
   * and unmasked (the data recipes read files with it), instead of into out and err. */
  SandstepOutputFunc on_output;
  gpointer output_data;
  char *value;               /* repr() of the final expression, or NULL */
  char *error;               /* the exception with its traceback, or NULL */
  gboolean restarted;        /* an earlier interpreter died: this call ran in a new one */
  gboolean timed_out;        /* stopped after @timeout_s; the interpreter is gone */
  gboolean died;             /* the interpreter ended during the call */
  int exit_status;           /* when it died: its exit code (128+N for signal N) */
  gboolean memory_limit_hit; /* when it died */
  gboolean pids_limit_hit;
  int command_exit;          /* sandstep_python_session_run_command(): the command's exit code (128+N: signal N) */
  gboolean command_timed_out;/* ... it ran past its timeout and was killed with what it started */
  char *failure;             /* sandstep's side failed: what kind of failure, for the model */
  char *failure_detail;      /* ... and the details, for the step's stderr only */
} SandstepPythonCall;

void sandstep_python_call_clear (SandstepPythonCall *call);

/* The driver's frames on the interpreter's stdout ("KIND [STREAM] LENGTH\n" and LENGTH bytes: O output, H hello,
 * R a result's JSON, D the interpreter's death), bytes the sandbox wrote.  Takes the complete frames out of
 * @buffer into @call: TRUE when @id's result (for id 0, the hello) came; FALSE with *@broken set when a frame
 * is bad, else when more bytes are needed. */
gboolean sandstep_python_parse_frames (GByteArray *buffer, guint64 id, SandstepPythonCall *call, char **broken);

/* Runs @code for at most @timeout_s (already checked and clamped by the
 * caller to the limits, the budget left and the sandbox's lifetime), with
 * @env (NULL, or an object of strings: names checked by
 * sandstep_python_check_env()) set in os.environ for this code only. */
void sandstep_python_session_run (SandstepPythonSession *session, const char *code, JsonObject *env,
                                  double timeout_s, SandstepPythonCall *call);

/* TRUE when @env is an object of variables the code may be given: each name a nonempty run of letters, digits
 * and underscores not starting with a digit, each value a string without NUL; else FALSE and @error says which. */
gboolean sandstep_python_check_env (JsonObject *env, GError **error);

/* TRUE while an interpreter runs.  The sandbox runs one command at a time,
 * and the interpreter is that command: while it lives, run_command must go
 * through it (sandstep_python_session_run_command()). */
gboolean sandstep_python_session_alive (SandstepPythonSession *session);

/* run_command through the live interpreter: /bin/sh -c @command in
 * /workspace, its output appended to call->out and call->err, killed with
 * everything it started after @timeout_s (call->command_timed_out); its
 * exit code in call->command_exit; the sandbox's notices about it (egress
 * refusals) go to @notice, from another thread.  When the interpreter dies meanwhile,
 * call->died (or call->timed_out, when it stopped answering) is set. */
typedef void (*SandstepPythonNotice) (const char *message, gpointer user_data);
void sandstep_python_session_run_command (SandstepPythonSession *session, const char *command, double timeout_s,
                                          SandstepPythonCall *call, SandstepPythonNotice notice,
                                          gpointer notice_data);

/* Whether the sandbox can run python3 (a quick command in it); FALSE with
 * @error only when the sandbox cannot be used at all. */
gboolean sandstep_python_available (SandstepAttachment *attachment, gboolean *out_available, GError **error);

G_END_DECLS
