/* sandstepd-e2b-code-worker.c: the worker's end of E2B's runCode (see sandstepd-e2b-code-worker.h).
 *
 * The session is run_python's (operators/sandstep-python.c): its driver, frames, restarts and timeouts have
 * one home there.  A worker holds one claim at a time, so it holds at most one session, that claim's; it lives
 * while the claim does, which is how Python's state outlives a call.
 */
#include "sandstepd-e2b-code-worker.h"

#include <errno.h>
#include <unistd.h>

#include "sandstep-error.h"
#include "sandstep-output.h"
#include "sandstep-python.h"
#include "sandstep-wire.h"

/* The longest one call may run when its sandbox lives longer: the SDK stops waiting after its own timeoutMs
 * (60 s by default), and sandstepd then ends the claim with the interpreter. */
#define CODE_MAX_S (24 * 3600.0)
/* What the interpreter's command printed itself (python3 missing, the driver refused): enough to say why. */
#define STARTUP_LINES 50
#define STARTUP_BYTES (16 * 1024)

static SandstepPythonSession *session;
static SandstepAttachment *session_attachment;

static void
write_all (int fd, const char *data, gsize len)
{
  while (len > 0)
    {
      ssize_t n = write (fd, data, len);

      if (n < 0 && errno == EINTR)
        continue;
      /* The daemon closed its end (its caller went away): the output has no reader, the code runs on until
       * the claim ends. */
      if (n <= 0)
        return;
      data += n;
      len -= n;
    }
}

static void
on_output (int stream, const char *data, gsize len, gpointer user_data)
{
  const int *fds = user_data;

  write_all (fds[stream == 2 ? 1 : 0], data, len);
}

void
sandstepd_e2b_code_worker_end (void)
{
  g_clear_pointer (&session, sandstep_python_session_free);
  session_attachment = NULL;
}

JsonObject *
sandstepd_e2b_code_worker_run (SandstepAttachment *attachment, JsonObject *m, const int *fds, guint n_fds)
{
  const char *code = json_object_get_string_member_with_default (m, "code", NULL);
  JsonNode *env = json_object_get_member (m, "env");
  g_autoptr(SandstepCapture) err = sandstep_capture_new (NULL, STARTUP_LINES, STARTUP_BYTES);
  g_autoptr(GError) error = NULL;
  SandstepPythonCall call = { 0 };
  g_autofree char *startup = NULL;
  JsonObject *reply;
  double timeout_s;

  if (n_fds != 2 || code == NULL || (env != NULL && !JSON_NODE_HOLDS_OBJECT (env)))
    {
      g_set_error_literal (&error, SANDSTEP_SANDBOX_ERROR, SANDSTEP_SANDBOX_ERROR_STATE,
                           "sandstepd worker: python needs its code and two output pipes");
      return sandstep_wire_error_line (error);
    }
  if (session != NULL && session_attachment != attachment)
    sandstepd_e2b_code_worker_end ();
  if (session == NULL)
    {
      SandstepPythonLimits limits;

      sandstep_python_limits_init (&limits);
      session = sandstep_python_session_new (attachment, &limits);
      session_attachment = attachment;
    }
  timeout_s = CLAMP (sandstep_attachment_remaining_lifetime (attachment), 1.0, CODE_MAX_S);
  call.on_output = on_output;
  call.output_data = (gpointer) fds;
  call.err = err;
  sandstep_python_session_run (session, code, env != NULL ? json_node_get_object (env) : NULL, timeout_s, &call);

  reply = json_object_new ();
  json_object_set_string_member (reply, "value", call.value);
  json_object_set_string_member (reply, "traceback", call.error);
  json_object_set_boolean_member (reply, "restarted", call.restarted);
  json_object_set_boolean_member (reply, "timedOut", call.timed_out);
  json_object_set_boolean_member (reply, "died", call.died);
  json_object_set_int_member (reply, "exitStatus", call.exit_status);
  json_object_set_boolean_member (reply, "memoryLimitHit", call.memory_limit_hit);
  json_object_set_boolean_member (reply, "pidsLimitHit", call.pids_limit_hit);
  if (call.failure != NULL)
    {
      g_autofree char *failure = g_strdup_printf ("%s: %s", call.failure,
                                                  call.failure_detail != NULL ? call.failure_detail : "");
      json_object_set_string_member (reply, "failure", failure);
    }
  startup = sandstep_capture_render (err);
  json_object_set_string_member (reply, "stderr", startup);
  sandstep_python_call_clear (&call);
  return reply;
}
