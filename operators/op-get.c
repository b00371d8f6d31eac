/* op-get.c: print a file of the sandbox, or write it to a host file. */
#include "sandstep-operator.h"

#include <errno.h>
#include <stdio.h>

#include "sandstep-error.h"
#include "sandstep-host-files.h"
#include "sandstep-meter.h"

gboolean
sandstep_op_get (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  g_autoptr(SandstepAttachment) attachment = NULL;
  g_autoptr(GBytes) bytes = NULL;
  const char *to = sandstep_invocation_get (invocation, "to");
  const char *max_text = sandstep_invocation_get (invocation, "max-bytes");
  guint64 max_bytes = SANDSTEP_DEFAULT_READ_MAX;
  gsize len;
  const char *data;
  SandstepMeter *meter;

  if (invocation->operands->len != 1)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                           "get takes one PATH, got %u; write: sandstep get --handle=H /workspace/report.md",
                           invocation->operands->len);
  if (max_text != NULL && !sandstep_parse_size (max_text, &max_bytes, error))
    return FALSE;
  attachment = sandstep_invocation_attach (invocation, error);
  if (attachment == NULL)
    return FALSE;
  /* Into a file, a large read shows how it goes; to stdout, the data is the output. */
  meter = to != NULL ? sandstep_meter_start ("get", 0, TRUE) : NULL;
  bytes = sandstep_attachment_read_file (attachment, invocation->operands->pdata[0], max_bytes, error);
  if (bytes == NULL)
    {
      sandstep_meter_finish (meter, FALSE);
      return FALSE;
    }
  data = g_bytes_get_data (bytes, &len);
  if (to != NULL)
    {
      /* Replaced whole, keeping the mode of the file it replaces. */
      gboolean ok = sandstep_replace_host_file (to, data, len, error);
      sandstep_meter_finish (meter, ok);
      if (!ok)
        {
          g_prefix_error (error, "Could not write --to: ");
          return FALSE;
        }
    }
  else if (fwrite (data, 1, len, stdout) != len || fflush (stdout) != 0)
    return sandstep_throw_errno (error, SANDSTEP_PATH_ERROR, SANDSTEP_PATH_ERROR_IO, errno,
                                 "Could not write '%s' to standard output", (char *) invocation->operands->pdata[0]);
  *out_exit = 0;
  return TRUE;
}
