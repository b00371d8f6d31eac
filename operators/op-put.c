/* op-put.c: copy a host file or directory tree into the sandbox. */
#include "sandstep-operator.h"

#include <ftw.h>

#include "sandstep-error.h"
#include "sandstep-meter.h"

static guint64 host_bytes;

static int
add_size (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  if (flag == FTW_F && S_ISREG (st->st_mode))
    host_bytes += st->st_size;
  return 0;
}

/* The bytes of the regular files a put of @src copies (links are not followed), for its progress line. */
static guint64
put_size (const char *src)
{
  host_bytes = 0;
  nftw (src, add_size, 16, FTW_PHYS);
  return host_bytes;
}

gboolean
sandstep_op_put (SandstepInvocation *invocation, int *out_exit, GError **error)
{
  g_autoptr(SandstepAttachment) attachment = NULL;
  SandstepMeter *meter;
  gboolean ok;

  if (invocation->operands->len != 2)
    return sandstep_throw (error, SANDSTEP_USAGE_ERROR, SANDSTEP_USAGE_ERROR_MISSING,
                           "put takes SRC and DEST, got %u argument%s; write: sandstep put --handle=H src/ /workspace/src/",
                           invocation->operands->len, invocation->operands->len == 1 ? "" : "s");
  attachment = sandstep_invocation_attach (invocation, error);
  if (attachment == NULL)
    return FALSE;
  meter = sandstep_meter_start ("put", put_size (invocation->operands->pdata[0]), TRUE);
  ok = sandstep_attachment_put (attachment, invocation->operands->pdata[0], invocation->operands->pdata[1], error);
  sandstep_meter_finish (meter, ok);
  if (!ok)
    return FALSE;
  *out_exit = 0;
  return TRUE;
}
