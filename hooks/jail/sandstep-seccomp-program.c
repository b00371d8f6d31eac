/* sandstep-seccomp-program.c: the seccomp program compiled at build time. */
#include "sandstep-seccomp.h"

#include "sandstep-seccomp-bpf.h"

GBytes *
sandstep_seccomp_program (GError **error)
{
  return g_bytes_new_static (sandstep_seccomp_bpf, sizeof sandstep_seccomp_bpf);
}
