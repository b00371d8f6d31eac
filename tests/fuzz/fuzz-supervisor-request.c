/* fuzz-supervisor-request.c: a request on a supervisor's socket (hooks/supervisor/sandstep-supervisor-command.c).
 *
 * Any process of the sandbox's user may write to supervisor.sock: the
 * supervisor reads the bytes as fields, an environment and values
 * (sandstep_supervisor_parse_request()), then the step a recipe holds
 * (sandstep_step_scan()).  Whatever it accepts must point inside the bytes
 * and hold values `sandstep run` would take.
 */
#include "fuzz.h"

#include <math.h>
#include <string.h>

#include "sandstep-step.h"
#include "sandstep-supervisor.h"
#include "sandstep-units.h"

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fuzz_init_glib ();
  return 0;
}

static gboolean
inside (const char *p, const char *buf, size_t size)
{
  return p >= buf && p + strlen (p) <= buf + size;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  /* As the supervisor holds it: the bytes read, and room for the NUL it adds. */
  g_autofree char *buf = g_malloc (size + 1);
  SandstepSupervisorRequest request;
  SandstepStep step;
  gboolean ok;

  if (size > SANDSTEP_RUN_MAX)
    return 0;
  memcpy (buf, data, size);
  ok = sandstep_supervisor_parse_request (buf, size, &request);
  g_assert_nonnull (request.env);
  g_assert_null (request.env->pdata[request.env->len - 1]);
  if (ok)
    {
      for (int i = 0; i < SANDSTEP_RUN_FIELDS; i++)
        g_assert_true (inside (request.field[i], buf, size));
      for (guint i = 0; i + 1 < request.env->len; i++)
        g_assert_true (inside (request.env->pdata[i], buf, size));
      g_assert_cmpstr (request.field[SANDSTEP_RUN_FIELD_MAGIC], ==, SANDSTEP_RUN_MAGIC);
      if (request.field[SANDSTEP_RUN_FIELD_WAIT][0] != '\0')
        g_assert_true (isfinite (request.wait_s) && request.wait_s >= 0 && request.wait_s <= SANDSTEP_MAX_DURATION_S);
      if (request.have_timeout)
        g_assert_true (isfinite (request.timeout_s) && request.timeout_s > 0 &&
                       request.timeout_s <= SANDSTEP_MAX_DURATION_S);
      g_utf8_validate (request.field[SANDSTEP_RUN_FIELD_HOLDER], -1, NULL);
      if (sandstep_step_scan (request.field[SANDSTEP_RUN_FIELD_STEP], &step))
        g_assert_true (step.pid == 0 || (step.pid > 1 && step.start > 0));
    }
  g_ptr_array_unref (request.env);
  return 0;
}
