/* sandstep-seccomp.h: the default seccomp policy, compiled once per process. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* One row of the policy: what is refused and why.  The table in
 * sandstep-seccomp.c is the whole policy; tests walk it. */
typedef struct {
  const char *syscall;
  int errno_value;        /* returned instead of running the call */
  const char *why;
} SandstepSeccompRule;

/* The rows of the plain (argument-free) part of the policy. */
const SandstepSeccompRule *sandstep_seccomp_rules (gsize *n_rules);

/* The policy as a classic BPF program (struct sock_filter[]), compiled on the
 * first call and cached; the jail child installs it with one prctl. */
GBytes *sandstep_seccomp_program (GError **error);

G_END_DECLS
