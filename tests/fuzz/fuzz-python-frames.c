/* fuzz-python-frames.c: run_python's frames (operators/sandstep-python.c), bytes the sandbox writes.
 *
 * The interpreter's stdout carries the driver's frames; code in the sandbox
 * can write anything there.  The host reads them with
 * sandstep_python_parse_frames(): the hello, then a call's output (into
 * masked captures) and its result.  Whatever arrives ends in a result, a
 * broken frame or a wait for more.
 */
#include "fuzz.h"

#include "sandstep-output.h"
#include "sandstep-python.h"

static SandstepMasker *masker;

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  static const char *const secrets[] = { "s3cr3t-value", NULL };

  fuzz_init_glib ();
  masker = sandstep_masker_new (secrets);
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr(GByteArray) buffer = g_byte_array_new ();
  g_autoptr(SandstepCapture) out = sandstep_capture_new (masker, 200, 16 * 1024);
  g_autoptr(SandstepCapture) err = sandstep_capture_new (masker, 200, 16 * 1024);
  SandstepPythonCall call = { .out = out, .err = err };
  g_autofree char *broken = NULL;

  g_byte_array_append (buffer, data, size);
  /* The hello, then calls 1, 2, ... as a session makes them, until the bytes run out or break. */
  for (guint64 id = 0; broken == NULL && id < 64; id++)
    {
      guint before = buffer->len;
      gboolean done = sandstep_python_parse_frames (buffer, id, &call, &broken);

      g_assert_cmpuint (buffer->len, <=, before);
      if (!done || call.died)
        break;
      /* Each call has a SandstepPythonCall of its own, as in a session. */
      sandstep_python_call_clear (&call);
    }
  g_free (sandstep_capture_render (out));
  g_free (sandstep_capture_render (err));
  sandstep_python_call_clear (&call);
  return 0;
}
