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

/* Compiles the policy with libseccomp into a classic BPF program
 * (struct sock_filter[]).  The build runs this once (seccomp-gen) and embeds
 * the result, so no helper run pays for it; tests compare the two. */
GBytes *sandstep_seccomp_compile (GError **error);

/* The embedded program; the jail child installs it with one prctl. */
GBytes *sandstep_seccomp_program (GError **error);

G_END_DECLS
